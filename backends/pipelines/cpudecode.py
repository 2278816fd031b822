"""CPU JPEG decoders beside the JPEG engines (decode=hw's split, splitdecode.py): worker
processes that decode the crop windows of part of each batch with Pillow (libjpeg-turbo) into
shared memory, from which the feeder copies them to the device in one transfer.

Processes, not threads: the decode of one image holds Pillow's Python wrapper for a while, and the
training process's interpreter is the step's (a thread pool there is GIL-bound: ~79 img/s a thread
on the H200 machine, docs/data.md). Each is a fresh interpreter (`python -m backends.pipelines.cpudecode`,
importing this module and Pillow, nothing of the framework: the training process holds a CUDA
context that must not be forked, and multiprocessing's spawn would import the caller's main
module again), at a lower CPU priority (nice) than the training process, whose own threads then
never wait for a core.

Shared memory: three files under /dev/shm (else the temporary folder), mapped by every process
and removed once all have mapped them (the memory lives as long as the mappings):
the JPEG bytes of the CPU share of a batch (`inp`, written by the feeder with one memmove), the
decoded crops (`out`, HWC uint8, at the offsets of the batch's flat buffer: nvdecode.layout), and
a control block per worker (its jobs in, its results and times out). Per batch the feeder writes
each worker's jobs and one byte into its `go` pipe; each worker decodes, writes, and one byte
into the common `done` pipe: no pickling, a few system calls a batch. A worker whose `go` pipe
closes (the training process ended, however) ends too.

Standard library only at import time (Pillow is imported in the workers), Python >= 3.8.
"""
import atexit
import ctypes
import io
import mmap
import os
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from typing import List, Optional, Sequence, Tuple

NICE = 10  # the workers' niceness increment: the training process's threads come first
IN_PER_IMAGE = 192 * 1024  # bytes of JPEG reserved per image of a batch (ImageNet: ~110 KB)
# bytes of crop reserved per image: a whole 500x375 image takes 549 KiB, the average crop (54 % of
# the area) 300; the CPU decoders take at most what fits (Pool.capacity), the engines the rest
OUT_PER_IMAGE = 512 * 1024
HEAD = struct.Struct("<2q")  # a worker's job count, and the draft size (0: full scale)
JOB = 9  # int64s per job: inp offset, length, x, y, w, h, image width, height, out offset
STATS = struct.Struct("<4q")  # wall ns, CPU ns, crops decoded at a reduced DCT scale, and the
# job's end on CLOCK_MONOTONIC (ns: one clock for every process of the machine)
START_TIMEOUT = 120.0  # seconds for every worker to start, import Pillow and map the memory


class PoolError(RuntimeError):
    """The CPU decoders could not start or one of them stopped; the message says which and why."""


def decode_crop(image_module, data: bytes, box: Sequence[int], out, at: int,
                draft: int = 0) -> Tuple[int, int, bool]:
    """Crop box (x, y, w, h, width, height) of JPEG `data` as RGB HWC bytes at out[at:]; returns
    (height, width) of what was written and whether it was decoded at a reduced DCT scale.

    draft: the image size the crop is resized to, if libjpeg may decode at 1/2, 1/4 or 1/8 scale
    where the crop keeps at least that many pixels a side (0: always full scale, the engines'
    pixels). Raises what Pillow raises for a file that does not decode (a truncated one too)."""
    x, y, w, h, width, height = (int(v) for v in box[:6])
    with image_module.open(io.BytesIO(data)) as im:
        if im.size != (width, height):
            raise ValueError("the image is {}x{}, its header said {}x{}".format(
                im.size[0], im.size[1], width, height))
        if draft:
            im.draft("RGB", (-(-width * draft // w), -(-height * draft // h)))
        scaled = im.size != (width, height)
        im.load()
        rgb = im if im.mode == "RGB" else im.convert("RGB")
        if scaled:  # the box in the reduced image, rounded outwards
            sx, sy = rgb.size[0] / width, rgb.size[1] / height
            left, top = int(x * sx), int(y * sy)
            right = min(rgb.size[0], -int(-(x + w) * sx // 1))
            bottom = min(rgb.size[1], -int(-(y + h) * sy // 1))
        else:
            left, top, right, bottom = x, y, x + w, y + h
        pixels = rgb.crop((left, top, right, bottom)).tobytes()
    out[at:at + len(pixels)] = pixels
    return bottom - top, right - left, scaled


class Segment:
    """A file of shared memory mapped into this process: made `size` bytes long by its creator
    (sparse: tmpfs gives pages as they are written), mapped whole by the others (size None)."""

    def __init__(self, path: str, size: Optional[int] = None):
        with open(path, "r+b" if size is None else "w+b") as f:
            if size is not None:
                f.truncate(size)
            self.size = os.fstat(f.fileno()).st_size
            self.map = mmap.mmap(f.fileno(), self.size)  # type: Any

    def close(self) -> None:
        if self.map is not None:
            try:
                self.map.close()
            except BufferError:  # a view of it is still alive: unmapped when that goes
                pass
            self.map = None


def shm_dir(size: int = 0) -> str:
    """/dev/shm where this machine has a writable one with room for `size` bytes (twice over:
    the loaders' batches live there too), else the temporary folder (its page cache)."""
    try:
        stat = os.statvfs("/dev/shm")
        if os.access("/dev/shm", os.W_OK) and stat.f_bavail * stat.f_frsize >= 2 * size:
            return "/dev/shm"
    except OSError:
        pass
    return tempfile.gettempdir()


def _control(batch: int) -> Tuple[int, int, int]:
    """(bytes of one worker's control block, where its results begin, where its stats begin)."""
    results = HEAD.size + 8 * JOB * batch
    stats = results + 8 * 2 * batch
    return stats + STATS.size, results, stats


def worker(folder: str, index: int, batch: int, go: int, done: int, niceness: int) -> int:
    """A decoder process: map the memory, say it is ready, then one batch per byte on `go`."""
    try:
        os.nice(niceness)  # below the training process (set here: no preexec_fn, no fork hooks)
    except OSError:
        pass
    from PIL import Image
    Image.preinit()  # the JPEG plugin now, not in the first batch
    block, results_at, stats_at = _control(batch)
    base = index * block
    ctl, inp, out = (Segment(os.path.join(folder, name)) for name in ("control", "inp", "out"))
    os.write(done, b"r")
    while os.read(go, 1):  # empty: the pipe was closed, the pool is gone
        count, draft = HEAD.unpack_from(ctl.map, base)
        wall, cpu = time.perf_counter(), time.process_time()
        jobs = struct.unpack_from("<{}q".format(JOB * count), ctl.map, base + HEAD.size)
        sizes, drafted = [], 0
        for j in range(count):
            start, length, x, y, w, h, width, height, at = jobs[JOB * j:JOB * (j + 1)]
            try:
                hh, ww, scaled = decode_crop(Image, inp.map[start:start + length],
                                             (x, y, w, h, width, height), out.map, at, draft)
                drafted += int(scaled)
            except Exception:  # a file Pillow cannot decode: reported, replaced by the feeder
                hh = ww = -1
            sizes += [hh, ww]
        struct.pack_into("<{}q".format(2 * count), ctl.map, base + results_at, *sizes)
        STATS.pack_into(ctl.map, base + stats_at, int((time.perf_counter() - wall) * 1e9),
                        int((time.process_time() - cpu) * 1e9), drafted, time.monotonic_ns())
        os.write(done, b"d")
    return 0


class Pending:
    """One batch's jobs in flight: which workers have them, and their global indices; when
    submit() began (CLOCK_MONOTONIC ns)."""

    def __init__(self, active: List[Tuple[int, List[int]]], count: int, out_bytes: int,
                 started: int):
        self.active, self.count, self.out_bytes = active, count, out_bytes
        self.started = started


class Result:
    """What the CPU decoders made of a batch's share: bad indices, (height, width) per image,
    the slowest worker's wall seconds, all workers' CPU seconds, crops at reduced scale, and the
    share's span: seconds from submit() to the last worker's end (the copy of the bytes, the
    wake-ups, the waits for a core and the decodes: what the feeder sees of the CPU side)."""

    def __init__(self, bad: List[int], sizes: List[Tuple[int, int]], wall: float, cpu: float,
                 drafted: int, span: float):
        self.bad, self.sizes, self.wall, self.cpu = bad, sizes, wall, cpu
        self.drafted, self.span = drafted, span


class Pool:
    """`processes` CPU decoders for batches of at most `batch` images, started at once; their
    readiness is awaited (PoolError with the reason if they do not come up)."""

    def __init__(self, processes: int, batch: int, draft: int = 0, niceness: int = NICE):
        self.processes, self.batch, self.draft = processes, batch, draft
        self.folder = tempfile.mkdtemp(prefix="compare-cpudecode-",
                                       dir=shm_dir(batch * (IN_PER_IMAGE + OUT_PER_IMAGE)))
        atexit.register(shutil.rmtree, self.folder, True)
        self.block, self.results_at, self.stats_at = _control(batch)
        self.ctl = Segment(os.path.join(self.folder, "control"), self.block * processes)
        self.inp = Segment(os.path.join(self.folder, "inp"), batch * IN_PER_IMAGE)
        self.out = Segment(os.path.join(self.folder, "out"), batch * OUT_PER_IMAGE)
        self.done, done_w = os.pipe()
        self.go, self.workers = [], []  # type: List[int], List[subprocess.Popen]
        top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # holds backends/
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [top] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
        try:
            for i in range(processes):
                go_r, go_w = os.pipe()
                self.go.append(go_w)
                self.workers.append(subprocess.Popen(
                    [sys.executable, "-m", "backends.pipelines.cpudecode", self.folder, str(i), str(batch),
                     str(go_r), str(done_w), str(niceness)], pass_fds=(go_r, done_w), env=env,
                    stdin=subprocess.DEVNULL))
                os.close(go_r)
        finally:
            os.close(done_w)  # the workers hold it: the pipe ends with the last of them
        try:
            self._await(processes, START_TIMEOUT, "start")
        except PoolError:
            self.close()
            raise
        # every process has mapped the files: their names can go, the memory stays until the
        # last mapping does (nothing is left in /dev/shm, however the processes end)
        shutil.rmtree(self.folder, ignore_errors=True)

    def _await(self, count: int, timeout: float, what: str) -> None:
        """Take `count` bytes from the `done` pipe, checking that every worker is alive."""
        deadline = time.monotonic() + timeout
        while count > 0:
            ready, _, _ = select.select([self.done], [], [], 1.0)
            if ready:
                got = os.read(self.done, count)
                if not got:
                    raise PoolError("every CPU decoder ended during {}".format(what))
                count -= len(got)
                continue
            dead = [(i, w.poll()) for i, w in enumerate(self.workers) if w.poll() is not None]
            if dead:
                raise PoolError("CPU decoder {} ended (exit code {}) during {}".format(
                    dead[0][0], dead[0][1], what))
            if time.monotonic() > deadline:
                raise PoolError("CPU decoders did not {} within {:.0f} s".format(what, timeout))

    def address(self, segment: Segment) -> int:
        return ctypes.addressof(ctypes.c_char.from_buffer(segment.map))

    def capacity(self, lengths: Sequence[int], crop_bytes: Sequence[int]) -> int:
        """How many of the leading images fit the shared buffers (bytes in, crops out)."""
        total_in = total_out = 0
        for i, (n, c) in enumerate(zip(lengths, crop_bytes)):
            total_in, total_out = total_in + n, total_out + c
            if i >= self.batch or total_in > self.inp.size or total_out > self.out.size:
                return i
        return len(lengths)

    def submit(self, source: int, offsets: Sequence[int], lengths: Sequence[int],
               boxes: Sequence[Sequence[int]], out_offsets: Sequence[int],
               out_bytes: int) -> Pending:
        """Decode images whose JPEG bytes lie at source + offsets[i] (host memory, one contiguous
        span from source) into out at out_offsets[i]; boxes: [x, y, w, h, flip, width, height]
        (nvdecode.read_encoded's). The caller checked capacity(); one batch at a time."""
        started = time.monotonic_ns()
        count = len(lengths)
        span = offsets[-1] + lengths[-1] if count else 0
        ctypes.memmove(self.address(self.inp), source, span)  # one copy, without the GIL
        active = []
        for w, (lo, hi) in enumerate(_chunks(lengths, self.processes)):
            if lo == hi:
                continue
            rows = []  # type: List[int]
            for i in range(lo, hi):
                x, y, bw, bh, _, width, height = (int(v) for v in boxes[i][:7])
                rows += [int(offsets[i]), int(lengths[i]), x, y, bw, bh, width, height,
                         int(out_offsets[i])]
            base = w * self.block
            HEAD.pack_into(self.ctl.map, base, hi - lo, self.draft)
            struct.pack_into("<{}q".format(len(rows)), self.ctl.map, base + HEAD.size, *rows)
            active.append((w, list(range(lo, hi))))
        for w, _ in active:
            try:
                os.write(self.go[w], b"g")
            except OSError:  # its end of the pipe is closed: it ended
                raise PoolError("CPU decoder {} ended (exit code {}) before its batch".format(
                    w, self.workers[w].wait())) from None
        return Pending(active, count, out_bytes, started)

    def wait(self, pending: Pending) -> Result:
        """The results of a submitted batch, once every worker that had a share is done."""
        self._await(len(pending.active), 600.0, "decode a batch")
        bad, sizes = [], [(0, 0)] * pending.count  # type: List[int], List[Tuple[int, int]]
        wall = cpu = 0.0
        drafted = last = 0
        for w, indices in pending.active:
            base = w * self.block
            got = struct.unpack_from("<{}q".format(2 * len(indices)), self.ctl.map,
                                     base + self.results_at)
            for j, i in enumerate(indices):
                sizes[i] = (got[2 * j], got[2 * j + 1])
                if got[2 * j] < 0:
                    bad.append(i)
            w_ns, c_ns, d, end = STATS.unpack_from(self.ctl.map, base + self.stats_at)
            wall, cpu = max(wall, w_ns / 1e9), cpu + c_ns / 1e9
            drafted, last = drafted + d, max(last, end)
        return Result(sorted(bad), sizes, wall, cpu, drafted, max(0.0, (last - pending.started) / 1e9))

    def close(self) -> None:
        """Stop the workers (after the batch they decode) and free the shared memory."""
        for fd in self.go:
            os.close(fd)  # each worker's read ends: it exits
        self.go = []
        for w in self.workers:
            try:
                w.wait(timeout=5)
            except subprocess.TimeoutExpired:
                w.kill()
                w.wait()
        if self.done is not None:
            os.close(self.done)
            self.done = None
        for segment in (self.ctl, self.inp, self.out):
            segment.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def _chunks(lengths: Sequence[int], parts: int) -> List[Tuple[int, int]]:
    """Contiguous [lo, hi) ranges of the images, one per worker, of equal counts (to one)."""
    n = len(lengths)
    return [(p * n // parts, (p + 1) * n // parts) for p in range(parts)]


def default_processes(cores: int, reserve: int = 2) -> int:
    """CPU decoders for a process that may run on `cores` cores: all but `reserve` (the training
    thread and the feeder's), none on a machine of `reserve` cores or fewer."""
    return max(0, cores - reserve)


def describe(pool: Optional["Pool"]) -> str:
    return "none" if pool is None else "{} Pillow processes (nice +{})".format(pool.processes, NICE)


if __name__ == "__main__":  # a worker: FOLDER INDEX BATCH GO_FD DONE_FD NICE (Pool starts it)
    sys.exit(worker(sys.argv[1], *(int(a) for a in sys.argv[2:7])))
