"""decode=hw's split: each batch shared between the GPU's JPEG engines (nvdecode.py, in the
training process) and CPU decoders (cpudecode.py, Pillow in worker processes), in proportion to
their measured rates, so that neither waits for the other. Shared by PyTorch and JAX.

Per batch (decode_into): the first k images go to the CPU decoders (their bytes in one copy to
shared memory), the other n - k to the engines, which decode straight into their slices of the
batch's flat device buffer; meanwhile the CPU decoders write their crops into shared memory, from
which one host-to-device copy on a stream of our own puts them at the head of the same buffer.
The framework's stream (where its resize runs) then waits on the device for that copy's event;
nothing waits on the host but the feeder, for the slower of the two halves.

k comes from the rates (Split), each side's wall seconds per image as the feeder sees them: the
engines' decode call (which includes waiting for the previous batch's decode on the device), and
the CPU side's span from the submit to its last worker's end (the bytes' copy, the wake-ups, the
waits for a core beside the framework's threads and loader processes, the decodes). The workers'
own decode time alone undercounts that span (in JAX's process on an H200 by half: the split then
gave the CPU side 0.6 of each batch and the feeder waited ~22 ms a batch for it, issue 36).
Measured from the first batch (split in half), then an exponential average over the batches, so
the split follows what the step beside it leaves to each side. `--option cpu_share=X` fixes it
instead. Both halves' pixels are the same decode (libjpeg-turbo's and the engines' agree to a
level: bench/pipes_probe.py), unless `cpu_draft` lets Pillow decode at a reduced DCT scale.

Standard library only at import time, Python >= 3.8.
"""
import ctypes
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import cpudecode
from . import nvdecode as nvd

SMOOTHING = 0.3  # weight of the newest batch in the rates' exponential average


class Split:
    """How many images of a batch of n go to the CPU decoders: `share` of them if fixed, else in
    proportion to the measured rates. record() feeds each batch's timings in."""

    def __init__(self, workers: int, share: Optional[float] = None):
        self.workers, self.fixed = workers, share
        self.cpu_image = None  # type: Optional[float]  # seconds per image, the CPU side
        self.hw_image = None  # type: Optional[float]  # seconds per image, the engines
        self.first = None  # type: Optional[float]
        self.shares = []  # type: List[float]
        self.images = {"cpu": 0, "hw": 0}

    def count(self, n: int) -> int:
        if self.workers <= 0 or n == 0:
            return 0
        if self.fixed is not None:
            return int(round(self.fixed * n))
        if self.cpu_image is None or self.hw_image is None:
            return n // 2  # the first batch measures both sides
        k = int(round(n * self.hw_image / (self.hw_image + self.cpu_image)))
        return min(n - 1, max(1, k))  # both sides keep being measured

    def record(self, n: int, k: int, hw_seconds: float, cpu_seconds: float) -> None:
        """A batch of n, k of them decoded on the CPU: the engines' wall seconds for the other
        n - k, and the CPU side's span for its k (cpudecode.Result.span)."""
        self.shares.append(k / float(n) if n else 0.0)
        if self.first is None:
            self.first = self.shares[-1]
        self.images["cpu"] += k
        self.images["hw"] += n - k
        if k:
            self.cpu_image = _average(self.cpu_image, cpu_seconds / k)
        if n - k:
            self.hw_image = _average(self.hw_image, hw_seconds / (n - k))

    def describe(self) -> Dict[str, Any]:
        def rate(seconds):
            return round(1 / seconds, 1) if seconds else None
        return {"cpu_share": round(sum(self.shares) / len(self.shares), 4) if self.shares else None,
                "cpu_share_first": self.first,
                "cpu_share_last": round(self.shares[-1], 4) if self.shares else None,
                "rule": "no CPU decoders: the engines alone" if not self.workers else
                ("--option cpu_share={:g}".format(self.fixed) if self.fixed is not None
                 else "auto: in proportion to each side's wall time per image"),
                "cpu_images": self.images["cpu"], "hw_images": self.images["hw"],
                "cpu_img_s": rate(self.cpu_image), "hw_img_s": rate(self.hw_image)}


def _average(old: Optional[float], new: float) -> float:
    return new if old is None else (1 - SMOOTHING) * old + SMOOTHING * new


class Decoded:
    """decode_into's answer: the indices that did not decode, (height, width) of each crop as
    written (a crop decoded at a reduced DCT scale is smaller than its box)."""

    def __init__(self, bad: List[int], sizes: List[Tuple[int, int]]):
        self.bad, self.sizes = bad, sizes


class SplitDecoder:
    """The engines' decoder (an nvdecode.BatchDecoder: kind hw, or kind cpu, nvImageCodec's CPU
    backend into host memory, the tests' stand-in) and, where `pool` is given, the CPU decoders,
    sharing each batch as `split` says. device: the CUDA ordinal of the buffers (None: host)."""

    def __init__(self, engines: nvd.BatchDecoder, pool: Optional[cpudecode.Pool], split: Split,
                 device: Optional[int] = None, high: bool = False):
        self.engines, self.pool, self.split, self.device = engines, pool, split, device
        self.what = cpudecode.describe(pool)  # kept for describe() after close()
        self.processes = pool.processes if pool is not None else 0
        self.copier = self.copied = None  # type: Any
        self.pinned = False
        self.seconds = {"hw": 0.0, "cpu_wait": 0.0, "copy": 0.0}
        self.cpu_seconds = self.drafted = 0.0
        self.batches = 0
        if pool is not None and device is not None:
            self.copier = nvd.Stream(device, high)  # the CPU crops' copies, on no one's queue
            self.copied, self.before = self.copier.event(), self.copier.event()
            self.copier.record(self.copied)
            self.pinned = self.copier.register(pool.address(pool.out), pool.out.size)

    def decode_into(self, datas: Sequence[Any], boxes: Sequence[Sequence[int]], ptr: int,
                    stream: int = 0) -> Decoded:
        """Crop i of boxes[i] ([x, y, w, h, flip, width, height]) of JPEG datas[i] at
        ptr + layout offset i, HWC RGB uint8; `stream`: the framework's stream (raw handle) that
        reads the buffer next. Bytes objects or numpy views (one flat array: copied at once)."""
        n = len(datas)
        offsets, total = nvd.layout(boxes)
        lengths = datas.lengths if isinstance(datas, nvd.Flat) else \
            [len(d) if isinstance(d, bytes) else int(d.nbytes) for d in datas]
        k = self.split.count(n) if self.pool is not None else 0
        pending = None
        if k:
            crops = [offsets[i + 1] - offsets[i] for i in range(n - 1)] + [total - offsets[-1]]
            k = self.pool.capacity(lengths[:k], crops[:k])
        if k:
            pending = self._submit(datas[:k], lengths[:k], boxes[:k], offsets[:k],
                                   offsets[k] if k < n else total)
            if self.copier is not None:
                # the copy comes after what the framework has queued on its stream so far: that
                # may still read this memory (a caching allocator hands a buffer out again once
                # its last use is queued, not done)
                self.copier.record(self.before, stream)
        started = time.perf_counter()
        bad = []  # type: List[int]
        try:
            if k < n:
                bad = [k + i for i in self.engines.decode_into(
                    datas[k:], boxes[k:], ptr + offsets[k] if k else ptr, stream)]
        except BaseException:
            if pending is not None:  # the workers' share ends before the error is raised
                self.pool.wait(pending)
            raise
        hw = time.perf_counter() - started
        sizes = [(int(b[3]), int(b[2])) for b in boxes]
        span = 0.0
        if pending is not None:
            result = self._finish(pending, ptr, stream)
            bad = sorted(result.bad + bad)
            sizes[:k] = [s if s[0] >= 0 else (int(b[3]), int(b[2]))
                         for s, b in zip(result.sizes, boxes)]
            span = result.span
        self.split.record(n, k, hw, span)
        self.seconds["hw"] += hw
        self.batches += 1
        return Decoded(bad, sizes)

    def _submit(self, datas, lengths, boxes, out_offsets, out_bytes) -> cpudecode.Pending:
        """The CPU share's bytes into shared memory, its jobs to the workers. The crops' buffer
        is written only once the previous batch's copy out of it is done."""
        if self.copier is not None:
            self.copier.enter()
            self.copier.wait(self.copied)
        source, offsets = _contiguous(datas, lengths)
        if source is None:  # bytes objects: one after another into a buffer of our own
            joined = b"".join(bytes(d) for d in datas)
            keep = ctypes.create_string_buffer(joined, len(joined))
            source = ctypes.addressof(keep)
        return self.pool.submit(source, offsets, lengths, boxes, out_offsets, out_bytes)

    def _finish(self, pending: cpudecode.Pending, ptr: int, stream: int) -> cpudecode.Result:
        """Wait for the CPU decoders, then put their crops at the head of the flat buffer."""
        started = time.perf_counter()
        result = self.pool.wait(pending)
        copy_started = time.perf_counter()
        source = self.pool.address(self.pool.out)
        if self.copier is None:  # host buffers (the CPU stand-in)
            ctypes.memmove(ptr, source, pending.out_bytes)
        else:
            self.copier.enter()
            self.copier.make_wait(self.copier.value, self.before)
            self.copier.copy_in(ptr, source, pending.out_bytes, self.pinned)
            self.copier.record(self.copied)
            self.copier.make_wait(stream, self.copied)  # the framework's resize waits for it
        self.seconds["cpu_wait"] += copy_started - started
        self.seconds["copy"] += time.perf_counter() - copy_started
        self.cpu_seconds += result.cpu
        self.drafted += result.drafted
        return result

    def describe(self) -> Dict[str, Any]:
        """The split's settings: rule, shares, rates, CPU time, the feeder's time per part."""
        out = self.split.describe()
        out.update(cpu_decoders=self.processes, cpu_decoders_what=self.what,
                   cpu_decode_cpu_seconds=round(self.cpu_seconds, 3),
                   cpu_drafted=int(self.drafted),
                   cpu_crops_buffer="pinned" if self.pinned else
                   ("pageable" if self.copier is not None else "host"),
                   feeder_ms_per_batch={key: round(1000 * s / max(1, self.batches), 3)
                                        for key, s in self.seconds.items()})
        return out

    def close(self) -> None:
        if self.pool is not None:
            if self.copier is not None:
                self.copier.enter()
                self.copier.wait(self.copied)
                if self.pinned:
                    self.copier.unregister(self.pool.address(self.pool.out))
            self.pool.close()
            self.pool = None


def _contiguous(datas: Sequence[Any], lengths: Sequence[int]) -> Tuple[Optional[int], List[int]]:
    """(address of the first, offsets from it) where the JPEGs lie one after another in one
    buffer (an nvdecode.Flat, or numpy views of one array), else (None, offsets if joined)."""
    if isinstance(datas, nvd.Flat):
        if all(datas.offsets[i + 1] == datas.offsets[i] + datas.lengths[i]
               for i in range(len(datas) - 1)):
            first = datas.offsets[0] if len(datas) else 0
            return datas.address + first, [o - first for o in datas.offsets]
        datas = [datas[i] for i in range(len(datas))]
    offsets, at = [], 0
    for n in lengths:
        offsets.append(at)
        at += n
    if not datas or isinstance(datas[0], bytes) or not hasattr(datas[0], "ctypes"):
        return None, offsets
    start = datas[0].ctypes.data
    for d, off in zip(datas, offsets):
        if isinstance(d, bytes) or getattr(d, "ctypes", None) is None or d.ctypes.data != start + off:
            return None, offsets
    return start, offsets


def make(engines: nvd.BatchDecoder, processes: int, batch: int, share: Optional[float],
         device: Optional[int], high: bool = False, draft: int = 0) -> Tuple[SplitDecoder, Optional[str]]:
    """The split decoder for one device; where the CPU decoders cannot start, the engines alone
    and the reason (recorded: never a silent fallback)."""
    pool, note = None, None
    if processes > 0 and share != 0.0:
        try:
            pool = cpudecode.Pool(processes, batch, draft)
        except (cpudecode.PoolError, OSError) as exc:
            note = "CPU decoders did not start, the engines decode alone: {}".format(exc)
    split = Split(pool.processes if pool is not None else 0, share)
    return SplitDecoder(engines, pool, split, device, high), note
