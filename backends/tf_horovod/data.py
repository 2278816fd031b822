"""TensorFlow's input pipeline for --data DIR: TFRecord shards read by tf.data.

Writer, run once by the host in this environment (`python -m backends.tf_horovod.data write
PREPARED_DIR`): each JPEG's bytes as they are, with its label, in tf.train.Example records,
SHARD_IMAGES to a file, the files in a seeded shuffled order so every shard mixes the classes.
Reader: the shard files (each Horovod rank its own), parallel interleave, a shuffle buffer, a
parallel map (sample_distorted_bounding_box, decode_and_crop_jpeg: only the crop is decoded;
bilinear resize, flip, normalise), batch, prefetch (onto the GPU where there is one).
"""
import glob
import os
import random
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Tuple

import tensorflow as tf

from .. import dataset as ds
from .. import options, policy
from ..pipelines import feed
from ..protocol import RunSpec
from . import DATA_FORMAT, OPTIONS
from .runtime import TFRuntime

SHARD_IMAGES = 1024  # images per TFRecord file: ImageNet's 1.28 M make ~1,250 files
MIN_SHARDS = 8  # so that a few Horovod ranks still get files of their own
SHUFFLE_BUFFER = 2048  # records
TO_DEVICE = 2  # batches prefetch_to_device keeps on the GPU
PIPELINE = "tf.data: TFRecord interleave, parallel map (decode_and_crop_jpeg), batch, prefetch"
ENCODED, LABEL = "image/encoded", "image/class/label"


def _example(data: bytes, label: int) -> bytes:
    return tf.train.Example(features=tf.train.Features(feature={
        ENCODED: tf.train.Feature(bytes_list=tf.train.BytesList(value=[data])),
        LABEL: tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))})).SerializeToString()


def write(prepared: ds.Prepared, files: List[Tuple[str, int]], folder: str,
          progress: ds.Progress) -> Dict[str, Any]:
    """The shards, written by as many threads as there are cores."""
    order = list(files)
    random.Random(0).shuffle(order)
    shards = min(len(order), max(MIN_SHARDS, -(-len(order) // SHARD_IMAGES)))

    def one(k: int) -> None:
        path = os.path.join(folder, "train-{:05d}-of-{:05d}.tfrecord".format(k, shards))
        with tf.io.TFRecordWriter(path) as writer:
            for file, label in order[k::shards]:
                with open(file, "rb") as f:
                    writer.write(_example(f.read(), label))
                progress.advance()
    with ThreadPoolExecutor(ds.available_cores()) as pool:
        list(pool.map(one, range(shards)))
    return {"shards": shards, "images_per_shard": SHARD_IMAGES}


def _augment(size: int, channels_first: bool, seed: int):
    """record -> (normalised float32 image, int32 label): TF's own random-resized crop."""
    mean = tf.constant(ds.MEAN) * 255.0
    std = tf.constant(ds.STD) * 255.0
    whole = tf.constant([[[0.0, 0.0, 1.0, 1.0]]])

    def parse(record):
        features = tf.io.parse_single_example(record, {
            ENCODED: tf.io.FixedLenFeature([], tf.string), LABEL: tf.io.FixedLenFeature([], tf.int64)})
        encoded = features[ENCODED]
        begin, crop, _ = tf.image.sample_distorted_bounding_box(
            tf.io.extract_jpeg_shape(encoded), bounding_boxes=whole, seed=seed,
            min_object_covered=ds.AREA[0], aspect_ratio_range=ds.RATIO, area_range=ds.AREA,
            max_attempts=10, use_image_if_no_bounding_boxes=True)
        window = tf.stack([begin[0], begin[1], crop[0], crop[1]])
        image = tf.io.decode_and_crop_jpeg(encoded, window, channels=3)
        image = tf.image.resize(image, [size, size], method="bilinear")
        image = (tf.image.random_flip_left_right(image, seed=seed) - mean) / std
        if channels_first:
            image = tf.transpose(image, [2, 0, 1])
        return image, tf.cast(features[LABEL], tf.int32)
    return parse


def dataset(spec: RunSpec, prepared: ds.Prepared, rank: int, world: int, batch: int,
            workers: int) -> tf.data.Dataset:
    """This rank's endless stream of `batch`-image batches (not yet on a device)."""
    paths = sorted(glob.glob(os.path.join(prepared.require(DATA_FORMAT), "*.tfrecord")))
    files = tf.data.Dataset.from_tensor_slices(paths)
    own_files = len(paths) >= world
    if own_files:
        files = files.shard(world, rank)
    files = files.shuffle(len(paths), seed=spec.seed + rank).repeat()
    records = files.interleave(tf.data.TFRecordDataset, cycle_length=min(workers, len(paths)),
                               num_parallel_calls=workers, deterministic=False)
    if not own_files:
        records = records.shard(world, rank)
    # the model's layout: the common channels_last option, with its device default
    channels_first = not policy.channels_last(options.value(OPTIONS, spec.options, "channels_last"),
                                              spec.device)
    out = (records.shuffle(SHUFFLE_BUFFER, seed=spec.seed + rank)
           .map(_augment(spec.image_size, channels_first, spec.seed + rank),
                num_parallel_calls=workers, deterministic=False)
           .batch(batch, drop_remainder=True)
           .prefetch(tf.data.AUTOTUNE))
    opts = tf.data.Options()
    opts.threading.private_threadpool_size = workers  # the pipeline's own threads, no more
    opts.deterministic = False
    return out.with_options(opts)


class Feed(feed.Feed):
    """Batches for the step: next() -> (images, labels), counted; labels checked on the host
    side where that costs no device sync (CPU), else on the warm-up batches."""

    def __init__(self, iterator, strategy, on_gpu: bool, check_batches: int, settings):
        super().__init__(settings)
        self.iterator, self.strategy, self.on_gpu = iterator, strategy, on_gpu
        self.check_batches = check_batches

    def next(self):
        images, labels = next(self.iterator)
        parts = self.strategy.experimental_local_results(labels) if self.strategy else [labels]
        label_range = None
        if not self.on_gpu or self.tally.batches < self.check_batches:
            label_range = (min(int(tf.reduce_min(p)) for p in parts),
                           max(int(tf.reduce_max(p)) for p in parts))
        self.tally.add(sum(int(p.shape[0]) for p in parts), label_range)
        return images, labels

    def buffered(self) -> int:
        """Batches ready before the first is asked for (--data-only drains them): the AUTOTUNE
        prefetch buffer (it starts small and grows only while the consumer waits: none yet), the
        batch being built, and prefetch_to_device's 2 on a GPU."""
        return TO_DEVICE + 2 if self.on_gpu else 2

    def close(self) -> None:
        self.iterator = None


def make_feed(spec: RunSpec, runtime: TFRuntime) -> Feed:
    """This process's feed, on the runtime's rank, world, strategy and GPUs."""
    prepared = ds.Prepared.find(spec.data)
    prepared.check_labels(spec.num_classes)
    workers = ds.loader_workers(spec, options.value(OPTIONS, spec.options, "loader_workers"))
    mirrored = runtime.distribution == "mirrored"
    if mirrored:  # one process, one pipeline for all its replicas
        workers = (workers[0] * runtime.world, "{} x {} replicas (one pipeline)".format(
            workers[1], runtime.world))
    ranks = runtime.world if runtime.distribution == "horovod" else 1
    data = dataset(spec, prepared, runtime.rank, ranks,
                   spec.batch_size * (runtime.world if mirrored else 1), workers[0])
    if mirrored:  # splits each global batch over the replicas and prefetches onto them
        iterator = iter(runtime.strategy.experimental_distribute_dataset(data))
    elif runtime.gpus:
        iterator = iter(data.apply(tf.data.experimental.prefetch_to_device("/gpu:0", TO_DEVICE)))
    else:
        iterator = iter(data)

    def settings(tally: ds.Tally) -> Dict[str, Any]:
        return ds.settings(spec, prepared, tally, pipeline=PIPELINE, data_format=DATA_FORMAT,
                           workers=workers, ranks=ranks, prefetch="to the GPU" if runtime.gpus else
                           "host (tf.data.AUTOTUNE)", shuffle_buffer=SHUFFLE_BUFFER)
    return Feed(iterator, runtime.strategy if mirrored else None, bool(runtime.gpus),
                spec.warmup_steps, settings)


if __name__ == "__main__":
    sys.exit(ds.writer_main(write, DATA_FORMAT))
