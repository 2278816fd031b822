"""decode=hw's split (backends/pipelines/splitdecode.py, backends/pipelines/cpudecode.py): each batch shared between
the JPEG engines and CPU decoder processes. The split's rule, the CPU decoders and the split
decoder's bookkeeping run here in the test environment (Pillow stands in for the engines); the
frameworks' feeds run in their environments on nvImageCodec's CPU backend
(tests/backends/test_data_pipelines.py, marked backend)."""
import ctypes
import io
import random
import time

import numpy as np
import pytest
from PIL import Image

from backends import dataset as ds
from backends.pipelines import cpudecode, splitdecode
from backends.pipelines import nvdecode as nvd
from compare.imagegen import MakeSpec, render

SPEC = MakeSpec(width=64, height=48)


def _batch(n, bad=()):
    """n JPEGs of 64x48 with their crop boxes ([x, y, w, h, flip, width, height]); the indices in
    `bad` truncated after their headers (they pass the header parse, not the decode)."""
    datas, boxes = [], []
    for i in range(n):
        data = render(SPEC, i)
        rng = random.Random(i)
        x, y, w, h = ds.random_resized_crop(64, 48, rng)
        boxes.append([x, y, w, h, i % 2, 64, 48])
        datas.append(data[:400] if i in bad else data)
    return datas, boxes


def _flat(datas):
    """The JPEGs as numpy views of one flat array, as the loaders hand them over."""
    flat = np.frombuffer(b"".join(datas), np.uint8)
    ends = np.cumsum([len(d) for d in datas])
    return flat, [flat[e - len(d):e] for e, d in zip(ends, datas)]


def _crop(data, box):
    with Image.open(io.BytesIO(bytes(data))) as im:
        x, y, w, h = box[:4]
        return np.asarray(im.convert("RGB"))[y:y + h, x:x + w]


class PillowEngines:
    """The engines' stand-in: BatchDecoder.decode_into's contract (crops at nvdecode.layout's
    offsets from ptr, the indices that did not decode), done with Pillow in this process."""

    def __init__(self):
        self.calls = []

    def decode_into(self, datas, boxes, ptr, stream=0):
        self.calls.append(len(datas))
        offsets, _ = nvd.layout(boxes)
        bad = []
        for i, (data, box) in enumerate(zip(datas, boxes)):
            try:
                crop = np.ascontiguousarray(_crop(data, box))
            except OSError:
                bad.append(i)
                continue
            ctypes.memmove(ptr + offsets[i], crop.ctypes.data, crop.nbytes)
        return bad


def test_the_split_follows_the_measured_rates_and_keeps_both_sides_measured():
    split = splitdecode.Split(workers=4)
    assert split.count(256) == 128  # the first batch measures both sides
    # engines 0.1 ms an image (10,000 img/s); the CPU side's span 1 ms an image (1,000 img/s)
    split.record(256, 128, hw_seconds=128 * 1e-4, cpu_seconds=128 * 1e-3)
    assert split.count(256) == round(256 * 0.1 / (0.1 + 1.0))  # 23: both sides take as long
    d = split.describe()
    assert (d["cpu_img_s"], d["hw_img_s"], d["cpu_images"], d["hw_images"]) == (1000.0, 10000.0, 128, 128)
    assert d["rule"] == "auto: in proportion to each side's wall time per image" and d["cpu_share_first"] == 0.5
    split.record(256, 23, hw_seconds=233 * 1e-2, cpu_seconds=23 * 1e-3)  # engines now slow
    assert split.count(256) > 23  # the average moved towards the CPU decoders
    assert splitdecode.Split(workers=4, share=0.25).count(256) == 64
    assert splitdecode.Split(workers=0).count(256) == 0
    slow = splitdecode.Split(workers=1)
    slow.record(256, 128, hw_seconds=128 * 1e-6, cpu_seconds=128.0)
    assert slow.count(256) == 1  # never none: the CPU side's rate stays measured


def test_the_cpu_decoders_write_pillows_crops_and_report_the_files_that_do_not_decode():
    datas, boxes = _batch(7, bad=(2,))
    datas[5] = b"GIF89a" + bytes(300)  # not a JPEG at all
    flat, views = _flat(datas)
    offsets, total = nvd.layout(boxes)
    pool = cpudecode.Pool(2, 8)
    try:
        lengths = [v.nbytes for v in views]
        assert pool.capacity(lengths, [b[2] * b[3] * 3 for b in boxes]) == 7
        pending = pool.submit(views[0].ctypes.data, [int(v.ctypes.data - views[0].ctypes.data)
                                                     for v in views], lengths, boxes, offsets, total)
        result = pool.wait(pending)
        seen = time.monotonic() - pending.started / 1e9  # submit to the feeder's wake-up
        out = np.frombuffer(pool.out.map, np.uint8, count=total).copy()
    finally:
        pool.close()
    assert result.bad == [2, 5]
    # the span the split balances on: from submit to the last worker's end, on the clock every
    # process shares: at least the slowest worker's own time, at most what the feeder saw
    assert result.wall <= result.span <= seen
    for i in (0, 1, 3, 4, 6):
        x, y, w, h = boxes[i][:4]
        assert result.sizes[i] == (h, w)
        assert np.array_equal(out[offsets[i]:offsets[i] + w * h * 3].reshape(h, w, 3),
                              _crop(datas[i], boxes[i])), i
    assert result.cpu > 0 and result.wall > 0 and result.drafted == 0


def test_a_cpu_decoder_that_dies_is_an_error_that_names_it_not_a_hang():
    datas, boxes = _batch(2)
    flat, views = _flat(datas)
    offsets, total = nvd.layout(boxes)
    pool = cpudecode.Pool(1, 4)
    try:
        pool.workers[0].kill()
        pool.workers[0].wait()
        with pytest.raises(cpudecode.PoolError, match=r"^CPU decoder 0 ended \(exit code -9\) "
                                                      r"before its batch$"):
            pool.submit(views[0].ctypes.data, [0, views[0].nbytes], [v.nbytes for v in views],
                        boxes, offsets, total)
    finally:
        pool.close()


@pytest.mark.parametrize("share", [0.5, None])
def test_the_split_decoders_crops_equal_the_engines_alone_and_both_halves_report_bad_files(share):
    """Truncated JPEGs at 1 (the CPU decoders' half at share 0.5) and 6 (the engines'): both
    reported in batch order, every other crop where the engines alone put it, byte for byte."""
    datas, boxes = _batch(8, bad=(1, 6))
    flat, views = _flat(datas)
    _, total = nvd.layout(boxes)
    alone = np.zeros(total, np.uint8)
    bad_alone = PillowEngines().decode_into(views, boxes, alone.ctypes.data)
    engines = PillowEngines()
    decoder, note = splitdecode.make(engines, 2, 8, share, None)
    try:
        outs = []
        for _ in range(3):  # the first batch halves; then the rates decide (auto)
            out = np.zeros(total, np.uint8)
            done = decoder.decode_into(views, boxes, out.ctypes.data)
            outs.append((out, done))
        d = decoder.describe()
    finally:
        decoder.close()
    assert note is None and bad_alone == [1, 6]
    for out, done in outs:
        assert done.bad == [1, 6]
        assert done.sizes == [(b[3], b[2]) for b in boxes]
        assert np.array_equal(out, alone)
    assert d["cpu_images"] + d["hw_images"] == 24 and d["cpu_images"] > 0 and d["hw_images"] > 0
    assert engines.calls[0] == 4  # the first batch: half to each side
    assert d["cpu_decoders"] == 2 and d["cpu_crops_buffer"] == "host"
    assert set(d["feeder_ms_per_batch"]) == {"hw", "cpu_wait", "copy"}


def test_bytes_objects_are_joined_for_the_cpu_decoders_and_a_zero_share_starts_none():
    datas, boxes = _batch(4)
    _, total = nvd.layout(boxes)
    decoder, _ = splitdecode.make(PillowEngines(), 2, 4, 0.5, None)
    try:
        out = np.zeros(total, np.uint8)
        assert decoder.decode_into(datas, boxes, out.ctypes.data).bad == []
    finally:
        decoder.close()
    alone = np.zeros(total, np.uint8)
    PillowEngines().decode_into(datas, boxes, alone.ctypes.data)
    assert np.array_equal(out, alone)
    engines_only, _ = splitdecode.make(PillowEngines(), 2, 4, 0.0, None)
    assert engines_only.pool is None and engines_only.describe()["cpu_decoders"] == 0


def test_a_reduced_scale_decode_writes_a_smaller_crop_and_says_its_size():
    data = render(MakeSpec(width=256, height=192), 3)
    out = bytearray(256 * 192 * 3)
    h, w, scaled = cpudecode.decode_crop(Image, data, (0, 0, 256, 192, 256, 192), out, 0, draft=64)
    assert (h, w, scaled) == (96, 128, True)  # 1/2 scale: 1/4 would leave 48 rows, below 64
    h, w, scaled = cpudecode.decode_crop(Image, data, (10, 20, 100, 80, 256, 192), out, 0, draft=64)
    assert (h, w, scaled) == (80, 100, False)  # a smaller crop keeps its full-scale pixels


class FakeStream:
    """nvdecode.Stream's driver calls, recorded in order (copies done at once, in host memory)."""
    log = []  # type: list
    pinned_copies = []  # type: list

    def __init__(self, device, high=False):
        self.value = 1000 + device
        FakeStream.log.append(("stream", device, high))

    def event(self):
        return object()

    def enter(self):
        pass

    def record(self, event, stream=None):
        FakeStream.log.append(("record", "copier" if stream is None else stream))

    def wait(self, event):
        FakeStream.log.append(("host waits",))

    def make_wait(self, stream, event):
        FakeStream.log.append(("wait", "copier" if stream == self.value else stream))

    def copy_in(self, device_ptr, host_ptr, size, pinned=False):
        ctypes.memmove(device_ptr, host_ptr, size)
        FakeStream.log.append(("copy", size))
        FakeStream.pinned_copies.append(pinned)

    def register(self, ptr, size):
        FakeStream.log.append(("register", size))
        return True

    def unregister(self, ptr):
        FakeStream.log.append(("unregister",))


class LoggingEngines(PillowEngines):
    def decode_into(self, datas, boxes, ptr, stream=0):
        FakeStream.log.append(("engines", len(datas), stream))
        return super().decode_into(datas, boxes, ptr, stream)


def test_on_a_device_the_crops_copy_waits_for_the_frameworks_queue_and_its_resize_for_the_copy(
        monkeypatch):
    """The device path's order of driver calls (nvdecode.Stream faked): the framework's stream
    marked before the engines queue work on it, the copy queued behind that mark, the framework's
    stream made to wait for the copy; the next batch writes the crops' buffer only once the host
    saw the last copy done."""
    monkeypatch.setattr(splitdecode.nvd, "Stream", FakeStream)
    FakeStream.log, FakeStream.pinned_copies = [], []
    datas, boxes = _batch(4)
    flat, views = _flat(datas)
    _, total = nvd.layout(boxes)
    decoder, _ = splitdecode.make(LoggingEngines(), 2, 4, 0.5, device=0, high=True)
    try:
        out = np.zeros(total, np.uint8)
        decoder.decode_into(views, boxes, out.ctypes.data, stream=77)
        crops = sum(b[2] * b[3] * 3 for b in boxes[:2])
        first = FakeStream.log[:]
        decoder.decode_into(views, boxes, out.ctypes.data, stream=77)
        d = decoder.describe()
    finally:
        decoder.close()
    assert first == [("stream", 0, True), ("record", "copier"), ("register", 4 * cpudecode.OUT_PER_IMAGE),
                     ("host waits",), ("record", 77), ("engines", 2, 77), ("wait", "copier"),
                     ("copy", crops), ("record", "copier"), ("wait", 77)]
    assert FakeStream.log[len(first)] == ("host waits",)  # the next batch: the last copy is done
    assert FakeStream.log[-2:] == [("host waits",), ("unregister",)]
    alone = np.zeros(total, np.uint8)
    PillowEngines().decode_into(views, boxes, alone.ctypes.data)
    assert np.array_equal(out, alone) and d["cpu_crops_buffer"] == "pinned"
    # from the registered buffer the copy only queues work: asked for with the GIL kept
    assert FakeStream.pinned_copies == [True, True]
