"""MXNet's input pipeline for --data DIR: one RecordIO file read by mx.io.ImageRecordIter.

Writer, run once by the host in this environment (`python -m backends.mxnet.data write
PREPARED_DIR`): train.rec and train.idx as `im2rec --pass-through` writes them (each JPEG's
bytes as they are, the label in the record header), in a seeded shuffled order.
Reader: ImageRecordIter, MXNet's C++ pipeline: `preprocess_threads` threads decode (OpenCV),
random-resized-crop, mirror and normalise; a prefetch buffer of batches; each batch split over
the contexts this one process drives (one iterator feeds them all).
"""
import os
import random
import sys
from typing import Any, Dict, List, Tuple

import mxnet as mx
from mxnet import gluon

from .. import dataset as ds
from .. import options
from ..pipelines import feed
from ..protocol import RunSpec
from . import DATA_FORMAT, OPTIONS
from .runtime import MXNetRuntime

PREFETCH = 4  # batches ImageRecordIter keeps decoded ahead
PIPELINE = "mxnet ImageRecordIter (C++ threads: OpenCV decode, crop, mirror, normalise, prefetch)"


def write(prepared: ds.Prepared, files: List[Tuple[str, int]], folder: str,
          progress: ds.Progress) -> Dict[str, Any]:
    order = list(files)
    random.Random(0).shuffle(order)
    record = mx.recordio.MXIndexedRecordIO(os.path.join(folder, "train.idx"),
                                           os.path.join(folder, "train.rec"), "w")
    for i, (file, label) in enumerate(order):
        with open(file, "rb") as f:
            record.write_idx(i, mx.recordio.pack(mx.recordio.IRHeader(0, float(label), i, 0), f.read()))
        progress.advance()
    record.close()
    return {"records": len(order)}


class Feed(feed.Feed):
    """Batches on the contexts: next() -> (images per context, labels per context), counted."""

    def __init__(self, iterator, contexts: List[mx.Context], dtype: str, settings):
        super().__init__(settings)
        self.iterator, self.contexts, self.dtype = iterator, contexts, dtype

    def next(self):
        try:
            batch = self.iterator.next()
        except StopIteration:  # an epoch ended: the iterator reshuffles and starts again
            self.iterator.reset()
            batch = self.iterator.next()
        data, labels = batch.data[0], batch.label[0]
        host = labels.asnumpy()  # labels stay on the CPU: no device sync
        self.tally.add(data.shape[0], (host.min(), host.max()))
        images = gluon.utils.split_and_load(data, self.contexts, even_split=True)
        if self.dtype != "float32":
            images = [x.astype(self.dtype) for x in images]
        return images, gluon.utils.split_and_load(labels, self.contexts, even_split=True)

    def buffered(self) -> int:
        """Batches ready before the first is asked for (--data-only drains them): the
        iterator's prefetch buffer and the batch its threads are building."""
        return PREFETCH + 1

    def close(self) -> None:
        self.iterator = None


def make_feed(spec: RunSpec, runtime: MXNetRuntime) -> Feed:
    """One iterator for all the contexts of this process, in the dtype the model computes in."""
    contexts = runtime.contexts
    dtype = "float16" if spec.precision == "fp16" else "float32"  # as train.resolve_precision
    prepared = ds.Prepared.find(spec.data)
    prepared.check_labels(spec.num_classes)
    folder = prepared.require(DATA_FORMAT)
    per_worker, source = ds.loader_workers(spec, options.value(OPTIONS, spec.options,
                                                               "loader_workers"))
    threads = per_worker * len(contexts)  # one process, one iterator for all its contexts
    images, batch = int(prepared.manifest.get("images") or 0), spec.batch_size * len(contexts)
    if images < batch:  # ImageRecordIter: an MXNetError below 2, StopIteration at half a batch
        raise ValueError("the folder's {} training images are fewer than this process's batch of "
                         "{}, and MXNet's ImageRecordIter needs more images than the batch size; "
                         "give a --batch-size of at most {} per worker, or more images".format(
                             images, batch, max(images // len(contexts), 1)))
    mean = {"mean_" + c: 255.0 * m for c, m in zip("rgb", ds.MEAN)}
    std = {"std_" + c: 255.0 * s for c, s in zip("rgb", ds.STD)}
    iterator = mx.io.ImageRecordIter(
        path_imgrec=os.path.join(folder, "train.rec"), path_imgidx=os.path.join(folder, "train.idx"),
        data_shape=(3, spec.image_size, spec.image_size), batch_size=spec.batch_size * len(contexts),
        shuffle=True, seed=spec.seed, random_resized_crop=True, min_random_area=ds.AREA[0],
        max_random_area=ds.AREA[1], min_aspect_ratio=ds.RATIO[0], max_aspect_ratio=ds.RATIO[1],
        rand_mirror=True, inter_method=1, preprocess_threads=threads, prefetch_buffer=PREFETCH,
        **mean, **std)

    def settings(tally: ds.Tally) -> Dict[str, Any]:
        return ds.settings(spec, prepared, tally, pipeline=PIPELINE, data_format=DATA_FORMAT,
                           workers=(threads, "{} x {} context{} (one iterator)".format(
                               source, len(contexts), "s" if len(contexts) > 1 else "")),
                           ranks=1, prefetch_buffer=PREFETCH)
    return Feed(iterator, contexts, dtype, settings)


if __name__ == "__main__":
    sys.exit(ds.writer_main(write, DATA_FORMAT))
