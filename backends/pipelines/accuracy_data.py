"""The data side of a time-to-accuracy run that every framework shares: DIR/train and DIR/val
(each prepared by the host: backends/dataset.py), the val part's labels in train's class order,
each rank's share of val, and the evaluation batches (centre crops, padded to a fixed shape).

Standard library only at import time, Python >= 3.8 (numpy and Pillow are imported where a
batch is decoded). Training batches come from each backend's own input pipeline (its
make_feed over DIR/train); evaluation reads every image of val/ through `ValLoader`, the same
code in every framework, so that all of them are scored on the same pixels.
"""
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator, List, Tuple

from .. import dataset as ds
from .. import recipe

VAL = "val"
PAD_LABEL = -1  # a padding row of an evaluation batch: never counted, never correct


def parts(data: str) -> Tuple[ds.Prepared, ds.Prepared]:
    """(train, val) of a data folder, each as the host prepared it; DataError without val/."""
    val_dir = os.path.join(data, VAL)
    if not os.path.isdir(val_dir):
        raise ds.DataError("{} has no {}/ folder: time to accuracy evaluates on DIR/val (an "
                           "ImageNet-layout folder beside DIR/train; `compare data make DIR "
                           "--learnable` writes both)".format(data, VAL))
    return ds.Prepared.find(data), ds.Prepared.find(val_dir)


def val_files(train: ds.Prepared, val: ds.Prepared) -> List[Tuple[str, int]]:
    """Every usable image of val/ as (absolute path, label), labels in train/'s class order (the
    class folders' sorted names); DataError when val/ names a class train/ has not."""
    index = {name: k for k, name in enumerate(train.manifest["class_names"])}
    names = val.manifest["class_names"]
    unknown = [n for n in names if n not in index]
    if unknown:
        raise ds.DataError("{} has class folders that {} lacks: {}".format(
            val.root, train.manifest["class_root"], ", ".join(unknown[:5])))
    return [(os.path.join(val.root, rel), index[names[label]]) for rel, label in val.files()]


def eval_batches(images: int, processes: int, process_batch: int) -> int:
    """Evaluation batches every process runs: enough for the largest share of `images` among
    `processes` (shares differ by one at most), the same number everywhere, as a collective
    step needs."""
    largest = -(-images // processes)
    return max(1, -(-largest // process_batch))


def shard(files: List[Tuple[str, int]], rank: int, processes: int, batches: int,
          batch: int) -> List[Tuple[str, int]]:
    """This process's share of val (every processes-th image), padded to batches x batch rows
    with PAD_LABEL rows (they repeat an image of the shard and are never counted)."""
    mine = files[rank::processes]
    pad = (mine or files)[0][0]
    return mine + [(pad, PAD_LABEL)] * (batches * batch - len(mine))


def eval_pixels(path: str, size: int):
    """The evaluation view of one JPEG: shorter side resized to recipe.eval_resize(size), the
    centre size x size crop, as uint8 (size, size, 3). Deterministic."""
    import numpy as np
    from PIL import Image
    short = recipe.eval_resize(size)
    with Image.open(path) as im:
        width, height = im.size
        scale = short / min(width, height)
        w, h = max(size, int(round(width * scale))), max(size, int(round(height * scale)))
        im.draft("RGB", (w, h))  # libjpeg's reduced-scale decode where it is large enough
        im = im.convert("RGB").resize((w, h), Image.BILINEAR)
        left, top = (w - size) // 2, (h - size) // 2
        return np.asarray(im.crop((left, top, left + size, top + size)), dtype=np.uint8)


class ValLoader:
    """Evaluation batches of one process: iterate for (uint8 (batch, size, size, 3) NHWC,
    int32 labels with PAD_LABEL rows); `workers` threads decode (Pillow lets go of the
    interpreter while it decodes and resizes), one batch ahead of the caller."""

    def __init__(self, files: List[Tuple[str, int]], batch: int, size: int, workers: int):
        self.files, self.batch, self.size = files, batch, size
        self.pool = ThreadPoolExecutor(max(1, workers), thread_name_prefix="compare-val")

    def __len__(self) -> int:
        return len(self.files) // self.batch

    def _submit(self, i: int):
        rows = self.files[i * self.batch:(i + 1) * self.batch]
        return rows, [self.pool.submit(eval_pixels, path, self.size) for path, _ in rows]

    def __iter__(self) -> Iterator:
        import numpy as np
        ahead = self._submit(0) if len(self) else None
        for i in range(len(self)):
            rows, futures = ahead
            ahead = self._submit(i + 1) if i + 1 < len(self) else None
            images = np.stack([f.result() for f in futures])
            yield images, np.array([label for _, label in rows], dtype=np.int32)

    @property
    def images(self) -> int:
        """The images this process counts (its padding rows left out)."""
        return sum(1 for _, label in self.files if label != PAD_LABEL)

    def close(self) -> None:
        self.pool.shutdown(wait=False)
