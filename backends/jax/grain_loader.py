"""Grain worker processes for JAX's real data (--data DIR, loader=grain, the default). numpy,
Pillow and grain only, no jax: the workers are spawned and import this module, not the framework.

decode=cpu  each worker decodes the JPEG folder with Pillow into whole uint8 NHWC batches.
decode=hw   each worker reads its batches' file bytes, their sizes from the JPEG headers, and
            draws their crops and flips (nvdecode.read_encoded); a batch travels as one flat
            uint8 array of bytes plus a table, and the training process only decodes it on the
            JPEG engines (hwfeed.py).

Grain (JAX's data loader) slices the dataset among `workers` processes, each of which builds
whole batches (the slicing happens after the batch transformation), and hands them back through
shared memory; the main process interleaves them in order. Processes, not threads: a thread pool
in the training process is bound by the GIL (~79 img/s a thread measured on the H200 machine).

The samples are those of loader.HostLoader: sample i of the endless stream is image
`perm(seed + epoch)[i % n]` of the shard, its crop and flip drawn from (seed, that number), so
both loaders read the same images in the same order.
"""
import random
from typing import Any, List, Sequence, Tuple

import numpy as np

from .. import dataset as ds
from ..pipelines import nvdecode as nvd

EPOCHS = 100000  # the stream's length in passes over the shard: endless for any benchmark


def pixels(path: str, size: int, rng: random.Random) -> np.ndarray:
    """decode=cpu: the random-resized crop of one JPEG, (size, size, 3) uint8, maybe flipped."""
    return np.asarray(ds.crop_image(path, size, rng), dtype=np.uint8)


def encoded(path: str, size: int, rng: random.Random) -> Tuple[np.ndarray, np.ndarray]:
    """decode=hw: the file's bytes and its [x, y, w, h, flip, width, height] (int32)."""
    data, meta = nvd.read_encoded(path, size, rng)
    return np.frombuffer(data, np.uint8), np.array(meta, np.int32)


def collate_encoded(samples: Sequence[Tuple[Any, Any, Any]]):
    """A batch of encoded samples as arrays Grain can share: (all bytes one after another,
    each file's length, the (batch, 8) table [x, y, w, h, flip, width, height, file index],
    labels, files skipped)."""
    datas = [s[0][0] for s in samples]
    return (np.concatenate(datas), np.array([len(d) for d in datas], np.int64),
            np.stack([s[0][1] for s in samples]), np.array([s[1] for s in samples], np.int32),
            np.int32(sum(int(s[2]) for s in samples)))


class Samples:
    """Grain's random-access source: i -> (read(path, size, rng), label, files skipped)."""

    def __init__(self, files: List[Tuple[str, int]], size: int, seed: int, read=pixels):
        self.files, self.size, self.seed, self.read = files, size, seed, read
        self._epoch, self._order = -1, []  # type: Tuple[int, List[int]]

    def __len__(self) -> int:
        return len(self.files) * EPOCHS

    def number(self, i: int) -> int:
        """epoch * n + index, as loader.sample_numbers gives it for position i."""
        n = len(self.files)
        epoch = i // n
        if epoch != self._epoch:  # one shuffle per pass, kept per worker
            self._order = list(range(n))
            random.Random(self.seed + epoch).shuffle(self._order)
            self._epoch = epoch
        return epoch * n + self._order[i % n]

    def __getitem__(self, i: int) -> Tuple[Any, Any, Any]:
        number = self.number(int(i))
        value, label, skipped = ds.read_sample(self.files, number, self.read, self.size, self.seed)
        if self.read is encoded:  # and the file's index (read_sample read files[(number + skipped) % n])
            index = (number + skipped) % len(self.files)
            value = (value[0], np.append(value[1], np.int32(index)).astype(np.int32))
        return value, np.int32(label), np.int32(skipped)


class GrainLoader:
    """next() for decode=cpu (read=pixels): (images uint8 (batch, size, size, 3), labels int32,
    files skipped), as loader.HostLoader; for decode=hw (read=encoded): (the files' bytes as an
    nvdecode.Flat over the batch's one array, [[x, y, w, h, flip, width, height, file index]],
    labels int32, files skipped), as hwfeed.ByteLoader. `ahead` batches buffered per worker
    process."""

    def __init__(self, files: List[Tuple[str, int]], batch: int, size: int, seed: int,
                 workers: int, ahead: int, read=pixels):
        import grain
        from absl import flags
        if not flags.FLAGS.is_parsed():  # grain reads absl flags; a library caller has no argv
            flags.FLAGS.mark_as_parsed()
        self.bytes = read is encoded
        dataset = grain.MapDataset.source(Samples(files, size, seed, read)).batch(
            batch, drop_remainder=True, batch_fn=collate_encoded if self.bytes else None)
        # each worker reads its batches' files one after another: no reader threads of its own
        stream = dataset.to_iter_dataset(grain.ReadOptions(num_threads=0, prefetch_buffer_size=0))
        self.iterator = iter(stream.mp_prefetch(grain.MultiprocessingOptions(
            num_workers=workers, per_worker_buffer_size=ahead)))
        self.version, self.workers, self.ahead = grain.__version__, workers, ahead

    def next(self):
        if self.bytes:
            flat, lengths, meta, labels, skipped = next(self.iterator)
            flat = np.ascontiguousarray(flat)
            datas = nvd.Flat(flat, flat.ctypes.data, lengths.tolist())  # the JPEGs by address
            return datas, meta.tolist(), np.asarray(labels, np.int32), int(skipped)
        images, labels, skipped = next(self.iterator)
        return np.asarray(images), np.asarray(labels, np.int32), int(np.sum(skipped))

    def buffered(self) -> int:
        """Batches that can be ready before the first is asked for. Per worker (grain 0.2's
        mp_prefetch): its queue (`ahead`) and the batch it holds, and in this process the
        reader thread that interleaves the workers: its buffer (`ahead`) and the one it holds."""
        return self.workers * (2 * self.ahead + 2)

    def close(self) -> None:
        close = getattr(self.iterator, "close", None)
        if close is not None:
            close()  # ends the worker processes and frees their shared memory
