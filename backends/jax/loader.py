"""The host half of JAX's input pipeline (--data DIR): a thread pool decodes the JPEG folder
into uint8 NHWC batches. numpy and Pillow only, no jax: data.py moves the batches to the devices.

Threads, not processes: Pillow releases the GIL while it decodes and resizes, so threads
decode in parallel without pickling each batch between processes, and nothing is forked from a
process that already runs XLA's threads. Each image is one task that writes its pixels into its
slot of a preallocated batch; `ahead` batches are in flight at once, so the pool keeps decoding
while the devices train.
"""
import collections
import random
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator, List, Tuple

import numpy as np

from .. import dataset as ds


def sample_numbers(n: int, seed: int) -> Iterator[int]:
    """Endless reshuffled passes over n files: epoch * n + index, so that each sample's crop and
    flip depend only on (seed, that number), whichever thread decodes it."""
    epoch = 0
    while True:
        order = list(range(n))
        random.Random(seed + epoch).shuffle(order)
        for i in order:
            yield epoch * n + i
        epoch += 1


class HostLoader:
    """next() -> (images uint8 (batch, size, size, 3), labels int32 (batch,), files skipped).

    files: this process's shard [(path, label)]; read(path, size, rng) -> an RGB image of
    size x size (ds.crop_image; tests give a stand-in).
    """

    def __init__(self, files: List[Tuple[str, int]], batch: int, size: int, seed: int,
                 workers: int, ahead: int, read: Callable = ds.crop_image):
        self.files, self.batch, self.size, self.seed, self.read = files, batch, size, seed, read
        self.numbers = sample_numbers(len(files), seed)
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="compare-loader")
        self.pending = collections.deque()  # type: collections.deque
        for _ in range(ahead):
            self._submit()

    def _submit(self) -> None:
        images = np.empty((self.batch, self.size, self.size, 3), np.uint8)  # a new one each time:
        # on a CPU, jax may keep using this very memory as the device array
        numbers = [next(self.numbers) for _ in range(self.batch)]
        self.pending.append((images, [self.pool.submit(self._one, images, slot, number)
                                      for slot, number in enumerate(numbers)]))

    def _one(self, images: np.ndarray, slot: int, number: int) -> Tuple[int, int]:
        image, label, skipped = ds.read_sample(self.files, number, self.read, self.size, self.seed)
        images[slot] = np.asarray(image, dtype=np.uint8)
        return label, skipped

    def next(self) -> Tuple[np.ndarray, np.ndarray, int]:
        images, futures = self.pending.popleft()
        self._submit()  # keeps `ahead` batches decoding
        done = [f.result() for f in futures]  # raises what a task raised
        return images, np.array([d[0] for d in done], np.int32), sum(d[1] for d in done)

    def buffered(self) -> int:
        """Batches that can be ready before the first is asked for: those in flight."""
        return len(self.pending)

    def close(self) -> None:
        for _, futures in self.pending:
            for f in futures:
                f.cancel()
        self.pool.shutdown(wait=True)
        self.pending.clear()
