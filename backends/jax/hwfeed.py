"""JAX's decode=hw: crop windows decoded on the GPU's JPEG engines (backends/pipelines/nvdecode.py), a
share of each batch by CPU decoder processes beside them (backends/pipelines/splitdecode.py), resized,
flipped and normalised on the devices by one jitted gather.

Grain worker processes (grain_loader.py; loader=threads: ByteLoader below) read each file's
bytes and draw its crop and flip. In the training process, one decode thread per local device
takes that device's share of each batch and has the device's decoder write every crop into a
flat uint8 buffer on the device (region-of-interest decode), ordered on a CUDA stream of its own
(the CPU decoders' crops arrive at its head in one copy, on a stream of the split decoder's,
which the thread's stream waits for), and records an event behind it. The buffers are a ring of
RING per device, allocated once (the decode writes every byte the resize reads: no zero fill,
no allocation per batch). The feeder (next()) waits for that event only (its thread sleeps;
the GIL is free) and calls the jitted resize; meanwhile the decode thread already decodes the
next batch into the next buffer. A buffer is decoded into again only once the resize that read
it is done. The per-device results become
one global array sharded over the mesh.

No recompilation for images of other sizes: crops of any size go into the flat buffer one after
another, and the resize reads them through a table of [offset, height, width, flip] per image.
The jitted program sees only (capacity,) uint8 and (batch, 4) int32; the capacity is rounded up
to a power of two (nvdecode.capacity) and only grows, so a run compiles one program per device
and size class (one in practice: 256 crops of 500x375 JPEGs need 64-128 MiB), counted in settings.
"""
import collections
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import dataset as ds
from ..pipelines import nvdecode as nvd
from ..pipelines import splitdecode
from .loader import sample_numbers

RING = 4  # flat buffers per device: one decoded into, two decoded and waiting, one being resized
AHEAD = RING - 2  # decoded batches waiting for the resize, per device
MAX_LISTED = 20  # files that did not decode, listed in the result (all are counted)
PIPELINE = ("{} (file bytes, crop boxes) -> nvImageCodec region-of-interest decode on the JPEG "
            "engines into a ring of flat buffers per device, one decode thread per device -> "
            "jitted one-gather resize, flip, normalise, overlapping the next decode -> a global "
            "array sharded over the mesh, prefetched by a feeder thread")


def resize_normalize(flat, table, size: int):
    """(N, size, size, 3) float32, normalised: bilinear resizes of the N crops stored one after
    another in `flat` (HWC uint8); table: (N, 4) int32 [offset, height, width, flip]."""
    off, h, w, flip = (table[:, i:i + 1] for i in range(4))  # each (N, 1)
    t = (jnp.arange(size, dtype=jnp.float32) + 0.5) / size
    ys = jnp.minimum(jnp.maximum(t * h - 0.5, 0.0), (h - 1).astype(jnp.float32))
    xs = jnp.minimum(jnp.maximum(t * w - 0.5, 0.0), (w - 1).astype(jnp.float32))
    xs = jnp.where(flip > 0, xs[:, ::-1], xs)
    y0, x0 = jnp.floor(ys), jnp.floor(xs)
    wy, wx = (ys - y0)[:, :, None, None], (xs - x0)[:, None, :, None]
    y0, x0 = y0.astype(jnp.int32), x0.astype(jnp.int32)
    y1, x1 = jnp.minimum(y0 + 1, h - 1), jnp.minimum(x0 + 1, w - 1)
    rgb = jnp.arange(3, dtype=jnp.int32)

    def at(rows, cols):
        index = (off + rows * w * 3)[:, :, None, None] + (cols * 3)[:, None, :, None] + rgb
        return jnp.take(flat, index, mode="clip").astype(jnp.float32)
    top = at(y0, x0) + (at(y0, x1) - at(y0, x0)) * wx
    bottom = at(y1, x0) + (at(y1, x1) - at(y1, x0)) * wx
    pixels = top + (bottom - top) * wy
    shift = np.array(ds.MEAN, np.float32) * 255
    scale = 1 / (np.array(ds.STD, np.float32) * 255)
    return (pixels - shift) * scale


class ByteLoader:
    """loader=threads: next() -> (datas [bytes], meta [[x, y, w, h, flip, W, H, file index]],
    labels int32, files skipped) for `batch` images, read by a thread pool; `ahead` batches are
    read ahead."""

    def __init__(self, files: List[Tuple[str, int]], batch: int, size: int, seed: int,
                 workers: int, ahead: int):
        self.files, self.batch, self.size, self.seed = files, batch, size, seed
        self.numbers = sample_numbers(len(files), seed)
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="compare-bytes")
        self.pending = collections.deque()  # type: collections.deque
        for _ in range(ahead):
            self._submit()

    def _submit(self) -> None:
        numbers = [next(self.numbers) for _ in range(self.batch)]
        self.pending.append((numbers, [self.pool.submit(
            ds.read_sample, self.files, n, nvd.read_encoded, self.size, self.seed)
            for n in numbers]))

    def next(self):
        numbers, futures = self.pending.popleft()
        self._submit()
        done = [f.result() for f in futures]  # raises what a task raised
        n = len(self.files)  # read_sample read files[(number + skipped) % n]
        return ([d[0][0] for d in done], [d[0][1] + [(k + d[2]) % n] for k, d in zip(numbers, done)],
                np.array([d[1] for d in done], np.int32), sum(d[2] for d in done))

    def buffered(self) -> int:
        return len(self.pending)

    def close(self) -> None:
        for _, futures in self.pending:
            for f in futures:
                f.cancel()
        self.pool.shutdown(wait=True)
        self.pending.clear()


def ordinal(device) -> Optional[int]:
    """The CUDA ordinal of a jax GPU device (None for a CPU device)."""
    if device.platform != "gpu" and device.platform != "cuda":
        return None
    return int(getattr(device, "local_hardware_id", device.id))


class Slot:
    """One flat buffer of a device's ring: the array (kind hw: on the device, written through its
    address; kind cpu: a host array, new for each batch, as jax on a CPU may keep using it), the
    event its decode records, and the last resize that read it."""

    def __init__(self) -> None:
        self.array, self.capacity, self.event, self.reader = None, 0, None, None  # type: Any


class Part:
    """Device i's share of every batch: its decoder (its owner's splitdecode.SplitDecoder),
    stream, ring and queues."""

    def __init__(self, index: int, owner: int, device, decoder, stream, lock):
        self.index, self.owner, self.device = index, owner, device
        self.decoder, self.stream, self.lock = decoder, stream, lock
        self.capacity = 0  # the ring's buffers grow to this on their next use
        self.free = queue.Queue()  # type: queue.Queue
        for _ in range(RING):
            self.free.put(Slot())
        self.inbox = queue.Queue(maxsize=1)  # type: queue.Queue  # shares from decode thread 0
        self.out = queue.Queue(maxsize=AHEAD)  # type: queue.Queue  # decoded, waiting for next()


class HwSource:
    """The feeder's source for decode=hw: next() -> (images, labels, counts) as data.Feed takes.

    loader: GrainLoader(read=encoded) or ByteLoader (the process's batch: per_device x local
    devices). kind "hw": the JPEG engines; "cpu": nvImageCodec's CPU backend into host buffers
    (the tests' stand-in without a GPU: everything but the engines, the streams and events).
    cpu_decoders: CPU decoder processes of the process, shared out among its devices, taking
    `share` of each batch (None: as their measured rates say; splitdecode.py)."""

    def __init__(self, loader, mesh, per_device: int, size: int, kind: str = "hw",
                 high: bool = False, api: str = "c", cpu_decoders: int = 0,
                 share: Optional[float] = None, draft: int = 0):
        from jax.sharding import NamedSharding
        from jax.sharding import PartitionSpec as P

        from .step import AXIS
        self.loader, self.per_device, self.size, self.kind = loader, per_device, size, kind
        self.high = high  # the decode streams at the device's highest priority
        self.api = api  # nvImageCodec's C API or its Python binding (nvdecode.decoder)
        self.devices = [d for d in mesh.devices.flat if d.process_index == jax.process_index()]
        self.sharding = NamedSharding(mesh, P(AXIS))
        self.global_shape = (per_device * mesh.devices.size, size, size, 3)
        self.split = (cpu_decoders, share, draft)
        self.failed = []  # type: List[int]  # indices in the shard of files that did not decode
        self.parts, self.note = self._parts()
        self.resize = jax.jit(resize_normalize, static_argnums=2)
        self.programs = set()  # type: set
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True,
                                         name="compare-decode-{}".format(i))
                        for i in range(len(self.parts))]
        for t in self.threads:
            t.start()

    def _parts(self) -> Tuple[List[Part], Optional[str]]:
        """One decoder and stream per local device; where a second decoder cannot be made, the
        first device decodes for all and its results are moved (recorded in decoders_note)."""
        owned, parts, note, locks = {}, [], None, {}  # type: Any, List[Part], Optional[str], Any
        processes, share, draft = self.split
        for i, d in enumerate(self.devices):
            try:
                device = ordinal(d) if self.kind == "hw" else None
                engines = nvd.BatchDecoder(device, self.kind, self.api)
                stream = nvd.Stream(device, self.high) if self.kind == "hw" else None
                mine = processes // len(self.devices) + int(i < processes % len(self.devices))
                made, why = splitdecode.make(engines, mine, self.per_device, share, device,
                                             self.high, draft)
                note = note or why
                # one lock per engines' decoder: the host's (kind cpu) serves every part
                owned[i] = (made, stream, locks.setdefault(id(engines.decoder), threading.Lock()))
                owner = i
            except nvd.NotAvailable as exc:
                if i == 0:
                    raise
                note = note or "device {} decodes for the devices without a decoder: {}".format(
                    self.devices[0], exc)
                owner = 0
            parts.append(Part(i, owner, self.devices[owner], *owned[owner]))
        return parts, note

    def _put(self, box: queue.Queue, item) -> None:
        while not self.stop.is_set():
            try:
                return box.put(item, timeout=0.1)
            except queue.Full:
                continue

    def _get(self, box: queue.Queue):
        while not self.stop.is_set():
            try:
                return box.get(timeout=0.1)
            except queue.Empty:
                continue
        raise RuntimeError("the decode threads were stopped")

    def _run(self, i: int) -> None:
        """Decode thread i: device i's share of each batch into its ring. Thread 0 also reads
        the loader and hands the other threads their shares."""
        part, n = self.parts[i], self.per_device
        try:
            while not self.stop.is_set():
                if i == 0:
                    datas, meta, labels, skipped = self.loader.next()
                    for j in range(1, len(self.parts)):
                        cut = slice(j * n, (j + 1) * n)
                        self._put(self.parts[j].inbox, (datas[cut], meta[cut], labels[cut]))
                    share, whole = (datas[:n], meta[:n], labels[:n]), (labels, skipped)
                else:
                    share, whole = self._get(part.inbox), None
                self._put(part.out, self._decode(part, *share) + (whole,))
        except BaseException as exc:  # handed to next(), which raises it
            self._put(part.out, exc)

    def _decode(self, part: Part, datas, meta, labels: np.ndarray):
        """One share into the next free buffer of the part's ring; (slot, table, labels, errors,
        datas: kept until the decode is done)."""
        boxes = [m[:7] for m in meta]
        offsets, total = nvd.layout(boxes)
        part.capacity = max(part.capacity, nvd.capacity(total))
        slot = self._get(part.free)
        if slot.reader is not None:
            slot.reader.block_until_ready()  # the resize that last read this buffer is done
        with part.lock:  # the owner's decoder and stream, shared where one decodes for two
            if self.kind == "hw":
                part.stream.enter()  # this thread's driver calls (the event too) need the context
                self._fit(part, slot)
                done = part.decoder.decode_into(datas, boxes, slot.array.unsafe_buffer_pointer(),
                                                part.stream.value)
                part.stream.record(slot.event)  # behind the engines' work and the CPU crops' copy
            else:
                slot.array = np.empty((part.capacity,), np.uint8)
                done = part.decoder.decode_into(datas, boxes, slot.array.ctypes.data)
        table = [[o, s[0], s[1], m[4]] for o, s, m in zip(offsets, done.sizes, meta)]
        label_list = labels.tolist()
        if done.bad:
            self.failed.extend(int(meta[i][7]) for i in done.bad[:MAX_LISTED - len(self.failed)]
                               if len(meta[i]) > 7)
            nvd.replace_bad(table, label_list, done.bad)
        return slot, np.array(table, np.int32), label_list, len(done.bad), datas

    def _fit(self, part: Part, slot: Slot) -> None:
        """The slot's device buffer, (re)allocated once it is smaller than the ring's capacity."""
        if slot.event is None:
            slot.event = part.stream.event()
        if slot.capacity < part.capacity:
            slot.array = None  # freed before the larger one is made
            slot.array = jnp.zeros((part.capacity,), jnp.uint8, device=part.device)
            slot.array.block_until_ready()  # filled on jax's stream: done before the decode
            slot.capacity = part.capacity

    def next(self):
        outs, labels, errors, whole = [], [], 0, None
        for part in self.parts:
            item = self._get(part.out)
            if isinstance(item, BaseException):
                raise item
            slot, table, part_labels, bad, _, part_whole = item
            whole = whole or part_whole
            if self.kind == "hw":
                part.stream.enter()
                part.stream.wait(slot.event)  # the crops are in place; the next decode goes on
                flat = slot.array
            else:
                flat = jax.device_put(slot.array, part.device)
            self.programs.add((part.owner, flat.shape[0]))
            out = self.resize(flat, jax.device_put(table, part.device), self.size)
            slot.reader = out
            part.free.put(slot)
            outs.append(out if part.owner == part.index else
                        jax.device_put(out, self.devices[part.index]))
            labels += part_labels
            errors += bad
        host_labels, skipped = whole
        x = jax.make_array_from_single_device_arrays(self.global_shape, self.sharding, outs)
        y = jax.make_array_from_process_local_data(self.sharding, np.array(labels, np.int32))
        return x, y, (len(host_labels), (host_labels.min(), host_labels.max()), skipped + errors)

    def buffered(self) -> int:
        """Batches that can be ready before the first is asked for: the loader's, those decoded
        and waiting, and the one being decoded."""
        return self.loader.buffered() + AHEAD + 1

    def describe(self) -> Dict[str, Any]:
        owners = [p for p in self.parts if p.owner == p.index]
        out = nvd.describe(self.kind, len({id(p.decoder.engines.decoder) for p in owners}),
                           self.note, self.api)
        out["resize_programs"] = len(self.programs)  # compiled shapes: devices x size classes
        out["decode_ring"] = RING
        splits = [p.decoder.describe() for p in owners]
        out["decode_split"] = splits[0] if len(splits) == 1 else splits
        return out

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=30)  # each ends after the share it is decoding
        for p in self.parts:
            if p.owner == p.index:
                p.decoder.close()
        self.loader.close()
