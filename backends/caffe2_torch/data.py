"""PyTorch's input pipeline for --data DIR: a DataLoader over the JPEG folder itself, its
decode one of the rows of PIPELINES (__init__.py; pipeline=dali is dali.py), made by the
function of the same name here:

decode=cpu  loader workers decode with Pillow (at a reduced DCT scale where the crop allows it),
            random-resized-crop to the image size and flip; a batch travels as uint8 NHWC.
decode=gpu  loader workers only read each file's bytes, its size from the JPEG header, and draw
            the crop and flip; the feeder decodes the whole batch at once with nvJPEG
            (torchvision.io.decode_jpeg on cuda: the A100/H100 hardware decoder for baseline
            JPEGs) and crops, resizes and flips all images with one gather (crop_resize).
decode=hw   as decode=gpu, the crop windows decoded on the JPEG engines by nvImageCodec and a
            share of each batch by CPU decoder processes beside them (hwdecode.py,
            ../pipelines/splitdecode.py).
Either way a feeder thread moves the batch to the device and normalises it on a side CUDA stream,
DEPTH batches ahead of the training step, in channels_last when the model uses it; the training
thread keeps at most INFLIGHT steps queued on the GPU, so that it sleeps on an event rather than
in a CUDA launch beside the feeder's work.
"""
import collections
import os
import random
import time
from typing import Any, Dict, List, Tuple

import torch
from torch.utils import data as tud

from .. import dataset as ds
from .. import options, pipelines, policy
from ..pipelines import feed
from ..pipelines import nvdecode as nvd
from ..protocol import RunSpec, Unsupported
from . import OPTIONS, PIPELINES
from .runtime import TorchRuntime

DEPTH = 4  # batches the feeder keeps ready on the device (~0.6 GB at batch 256, 224 px)
LOADER_PREFETCH = 4  # batches each loader worker keeps ready
INFLIGHT = 2  # real data on cuda: training steps queued on the GPU beyond the one being issued
BYTE_READERS = 4  # decode=hw's loader workers by default: they only read bytes (~130 us an image)
# what each decode's pipeline is, as results record it (data_pipeline)
TEXTS = {"cpu": "torch DataLoader + Pillow decode in the workers",
         "gpu": "torch DataLoader (file bytes) + nvJPEG batch decode on the GPU "
                "(torchvision.io.decode_jpeg)",
         "hw": "torch DataLoader (file bytes, crop boxes) + nvImageCodec region-of-interest "
               "decode on the JPEG engines, one-gather resize on the GPU"}


class _Shuffled(tud.Sampler):
    """Endless reshuffled passes over n items; yields epoch * n + index, so that each sample's
    crop and flip depend only on (seed, that number), whichever worker decodes it."""

    def __init__(self, n: int, seed: int):
        self.n, self.seed = n, seed

    def __iter__(self):
        epoch = 0
        while True:
            g = torch.Generator().manual_seed(self.seed + epoch)
            for i in torch.randperm(self.n, generator=g).tolist():
                yield epoch * self.n + i
            epoch += 1


def _pixels(path: str, size: int, rng: random.Random) -> torch.Tensor:
    """decode=cpu: the random-resized crop of one JPEG as uint8 (size, size, 3), maybe flipped."""
    out = ds.crop_image(path, size, rng)
    return torch.frombuffer(bytearray(out.tobytes()), dtype=torch.uint8).view(size, size, 3)


def _encoded(path: str, size: int, rng: random.Random) -> Tuple[torch.Tensor, List[float]]:
    """decode=gpu and hw: the file's bytes and [y, x, h, w, flip, height, width] of its crop."""
    data, m = nvd.read_encoded(path, size, rng)  # m: [x, y, w, h, flip, width, height]
    return torch.frombuffer(bytearray(data), dtype=torch.uint8), [m[1], m[0], m[3], m[2],
                                                                  float(m[4]), m[6], m[5]]


class FolderDataset(tud.Dataset):
    """(path, label) pairs read with `read` (_pixels or _encoded). A file that fails is counted
    and the next one taken in its place, so batches stay full. _encoded's crop row also gets the
    index of the file in the shard (what a decoder that fails on it lists)."""

    def __init__(self, files: List[Tuple[str, int]], read, size: int, seed: int):
        self.files, self.read, self.size, self.seed = files, read, size, seed

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int):
        value, label, bad = ds.read_sample(self.files, i, self.read, self.size, self.seed)
        if self.read is _encoded:  # read_sample read files[(i + bad) % n]
            value = (value[0], value[1] + [float((i + bad) % len(self.files))])
        return value, label, bad


def collate_pixels(samples):
    return (torch.stack([s[0] for s in samples]), torch.tensor([s[1] for s in samples]),
            sum(s[2] for s in samples))


def collate_encoded(samples):
    """One flat byte tensor for the whole batch (one shared-memory block, not one per image)."""
    data = [s[0][0] for s in samples]
    return (torch.cat(data), torch.tensor([len(d) for d in data]),
            torch.tensor([s[0][1] for s in samples], dtype=torch.float64),
            torch.tensor([s[1] for s in samples]), sum(s[2] for s in samples))


def crop_resize(images: List[torch.Tensor], meta: torch.Tensor, size: int) -> torch.Tensor:
    """Bilinear random-resized crops of images of different sizes, all in one gather.

    images: (3, H_i, W_i) uint8 tensors; meta: (N, 7) [y, x, h, w, flip, H, W] on their device.
    Returns (N, size, size, 3) float32 on a 0-255 scale (NHWC: channels_last once permuted).
    A few dozen kernels for the whole batch, not several per image.
    """
    dev = meta.device
    flat = torch.cat([im.reshape(-1) for im in images])
    heights, widths = meta[:, 5].long(), meta[:, 6].long()
    planes = heights * widths
    starts = torch.cumsum(3 * planes, 0) - 3 * planes  # where each image begins in flat
    t = (torch.arange(size, device=dev, dtype=torch.float64) + 0.5) / size
    ys = meta[:, 0:1] + t * meta[:, 2:3] - 0.5  # (N, size): source rows of the pixel centres
    xs = meta[:, 1:2] + t * meta[:, 3:4] - 0.5
    xs = torch.where(meta[:, 4:5] > 0.5, xs.flip(1), xs)
    ys = torch.minimum(ys.clamp(min=0), (heights - 1)[:, None].double())
    xs = torch.minimum(xs.clamp(min=0), (widths - 1)[:, None].double())
    y0, x0 = ys.floor(), xs.floor()
    wy, wx = (ys - y0).float()[:, :, None, None], (xs - x0).float()[:, None, :, None]
    y0, x0 = y0.long(), x0.long()
    y1 = torch.minimum(y0 + 1, (heights - 1)[:, None])
    x1 = torch.minimum(x0 + 1, (widths - 1)[:, None])
    base = (starts[:, None] + planes[:, None] * torch.arange(3, device=dev))[:, None, None, :]

    def at(rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        # (N, size, 1, 3) + (N, 1, size, 1): one full-size index tensor, one gather
        index = (base + (rows * widths[:, None])[:, :, None, None]) + cols[:, None, :, None]
        return flat.take(index).float()
    top = torch.lerp(at(y0, x0), at(y0, x1), wx)
    return torch.lerp(top, torch.lerp(at(y1, x0), at(y1, x1), wx), wy)


class Feed(feed.Feed):
    """Batches on the device: next() -> (images, labels). On cuda a feeder thread prepares them
    on a side stream, DEPTH ahead; on the CPU they are prepared when asked for. closing: what
    else to stop with it (the CPU decoders)."""

    def __init__(self, loader, prepare, device: torch.device, settings, high: bool = False,
                 closing=()):
        super().__init__(settings)
        self.iterator, self.prepare, self.device = iter(loader), prepare, device
        self.loader, self.closing = loader, list(closing)
        self.ahead = None
        self.inflight = collections.deque()  # type: collections.deque
        self.waited = self.prepared = 0.0  # the feeder's seconds waiting for the loader, preparing
        if device.type == "cuda":
            # high: the GPU schedules the feeder's kernels ahead of the step's waiting ones
            # (out-of-range priorities map to the device's highest)
            self.stream = torch.cuda.Stream(device, priority=-100 if high else 0)
            self.ahead = feed.Prefetcher(self._on_side_stream, DEPTH,
                                         start=lambda: torch.cuda.set_device(device))

    def _one(self):
        started = time.perf_counter()
        batch = next(self.iterator)
        got = time.perf_counter()
        labels = batch[-2]  # still on the host: its range costs no device sync
        images, device_labels, errors = self.prepare(batch)
        self.waited += got - started
        self.prepared += time.perf_counter() - got
        return images, device_labels, (len(labels), (labels.min(), labels.max()), batch[-1] + errors)

    def _on_side_stream(self):
        with torch.cuda.stream(self.stream):
            images, labels, counts = self._one()
            ready = torch.cuda.Event()
            ready.record(self.stream)
        return images, labels, counts, ready

    def next(self) -> Tuple[torch.Tensor, torch.Tensor]:
        if self.ahead is None:
            images, labels, counts = self._one()
        else:
            images, labels, counts, ready = self.ahead.get()
            current = torch.cuda.current_stream(self.device)
            self._throttle(current)
            current.wait_event(ready)
            images.record_stream(current)  # made on the side stream, used on this one
            labels.record_stream(current)
        self.tally.add(*counts)
        return images, labels

    def _throttle(self, current) -> None:
        """Wait (asleep, without the GIL) until at most INFLIGHT steps are queued on the GPU
        before the next one is issued: a training thread that runs further ahead only blocks
        inside a CUDA launch or graph replay when the queue is full, and beside such a loop the
        feeder thread made no progress at all (BENCHMARKS.md, issue 22)."""
        mark = torch.cuda.Event(blocking=True)
        mark.record(current)  # the end of the previous step's work
        self.inflight.append(mark)
        if len(self.inflight) > INFLIGHT:
            self.inflight.popleft().synchronize()

    def describe(self) -> Dict[str, Any]:
        out = self.settings(self.tally)
        batches = max(1, self.tally.batches)
        out["feeder_ms_per_batch_loader"] = round(1000 * self.waited / batches, 3)
        out["feeder_ms_per_batch_prepare"] = round(1000 * self.prepared / batches, 3)
        return out

    def buffered(self) -> int:
        """Batches that can be ready before the first is asked for (--data-only drains them):
        every loader worker's prefetch (DALI: its queue), those on the device, the feeder's."""
        own = getattr(self.loader, "buffered", None)
        held = own() if own else self.loader.num_workers * (self.loader.prefetch_factor or 0)
        return held + (DEPTH + 1 if self.ahead is not None else 0)

    def close(self) -> None:
        self.loader = None
        if self.ahead is not None:
            self.ahead.close(timeout=30.0)
        self.iterator = None  # shuts the loader workers down
        for close in self.closing:
            close()


def _scale(device: torch.device) -> Tuple[torch.Tensor, torch.Tensor]:
    """(shift, scale), shape (3,), on the device: x * scale + shift normalises 0-255 pixels with
    ImageNet's mean and std in one kernel (addcmul)."""
    mean, std = torch.tensor(ds.MEAN) * 255, torch.tensor(ds.STD) * 255
    return (-mean / std).to(device), (1 / std).to(device)


def _pixels_to_device(device: torch.device, channels_last: bool):
    """decode=cpu: uint8 NHWC batch -> normalised float32 NCHW (channels_last strides) on device."""
    shift, scale = (t.view(1, 3, 1, 1) for t in _scale(device))

    def prepare(batch):
        pixels, labels = batch[0], batch[1]
        x = torch.addcmul(shift, pixels.to(device, non_blocking=True).permute(0, 3, 1, 2), scale)
        return (x if channels_last else x.contiguous()), labels.to(device, non_blocking=True), 0
    return prepare


def nvjpeg(device: torch.device):
    """decode(bytes tensor or list of them) -> (3, H, W) uint8 on `device`, by nvJPEG."""
    try:
        from torchvision.io import ImageReadMode, decode_jpeg
    except Exception as exc:  # PyPI's torchvision does not import beside every torch build
        raise Unsupported("decode=gpu needs torchvision.io.decode_jpeg, which does not import "
                          "here: {}: {}".format(type(exc).__name__, exc))

    def decode(data):
        return decode_jpeg(data, mode=ImageReadMode.RGB, device=device)
    return decode


def decoded_to_device(device: torch.device, size: int, channels_last: bool, decode):
    """decode=gpu: file bytes -> decode(list) -> crop_resize -> normalised, all on the device."""
    shift, scale = _scale(device)

    def prepare(batch):
        flat, lengths, meta, labels = batch[:4]
        images, errors = _decode_batch(list(flat.split(lengths.tolist())), decode, meta, labels)
        shapes = [tuple(im.shape[1:]) for im in images]
        if shapes != [tuple(int(v) for v in row) for row in meta[:, 5:7].tolist()]:
            raise ValueError("the decoder gave other sizes than the JPEG headers")
        if device.type == "cuda":  # small host tensors: pinned, so the copies do not block
            meta, labels = meta.pin_memory(), labels.pin_memory()
        meta = meta.to(device, non_blocking=True)
        x = crop_resize(images, meta, size).mul_(scale).add_(shift).permute(0, 3, 1, 2)
        labels = labels.to(device, non_blocking=True)
        return (x if channels_last else x.contiguous()), labels, errors
    return prepare


def _decode_batch(encoded: List[torch.Tensor], decode, meta: torch.Tensor, labels: torch.Tensor):
    """decode(list) for the whole batch; if nvJPEG refuses it (e.g. a CMYK JPEG), image by image,
    each one that fails replaced by the first good one (crop, flip and label too) and counted.
    meta and labels are updated in place. Returns (images, errors)."""
    try:
        return decode(encoded), 0
    except RuntimeError:
        images = []
        for data in encoded:
            try:
                images.append(decode(data))
            except RuntimeError:
                images.append(None)
    good = next((i for i, im in enumerate(images) if im is not None), None)
    if good is None:
        raise RuntimeError("nvJPEG decodes none of the {} images of a batch".format(len(images)))
    bad = [i for i, im in enumerate(images) if im is None]
    for i in bad:
        images[i], meta[i], labels[i] = images[good], meta[good], labels[good]
    return images, len(bad)


class Made:
    """What a pipeline's maker returns (the makers named in PIPELINES): the batches, prepare(),
    the pipeline's description, its extra settings, the loader workers, the split decoder (hw),
    whether the feeder's stream runs at high priority (hw); make_feed adds the decode that runs
    and why."""

    def __init__(self, batches, prepare, pipeline: str, extra: Dict[str, Any],
                 workers: Tuple[int, str], decoder=None, high: bool = False):
        self.batches, self.prepare, self.pipeline, self.extra = batches, prepare, pipeline, extra
        self.workers, self.decoder, self.high = workers, decoder, high
        self.decode, self.why = "", None  # the row of PIPELINES that runs, why not the first


def make_feed(spec: RunSpec, runtime: TorchRuntime) -> Feed:
    """This rank's pipeline over its shard of spec.data's files (every world-th file), onto the
    runtime's device in the model's layout: the row of PIPELINES that pipelines.choose picks."""
    def opt(key):
        return options.value(OPTIONS, spec.options, key)
    device, rank, world = runtime.device, runtime.rank, runtime.world
    channels_last = policy.channels_last(opt("channels_last"), spec.device)
    prepared = ds.Prepared.find(spec.data)
    prepared.check_labels(spec.num_classes)
    files = [(os.path.join(prepared.root, rel), label)
             for rel, label in ds.shard(prepared.files(), rank, world)]
    workers = ds.loader_workers(spec, opt("loader_workers"))
    row, why = pipelines.choose(PIPELINES, opt, device.type == "cuda", device.index, files[0][0])
    made = pipelines.function(row.make)(spec, opt, device, files, workers, spec.seed + rank,
                                        channels_last)
    made.decode, made.why = row.name, why
    if device.type == "cuda":
        made.extra["steps_in_flight"] = INFLIGHT

    def settings(tally: ds.Tally) -> Dict[str, Any]:
        out = ds.settings(spec, prepared, tally, pipeline=made.pipeline,
                          data_format="folder (the JPEG files)", workers=made.workers,
                          ranks=world, decode=made.decode, decode_why=made.why,
                          device_prefetch=DEPTH, shard_images=len(files), **made.extra)
        if made.decoder is not None:
            out["decode_split"] = made.decoder.describe()
            out["decode_error_files"] = [files[i][0] for i in made.prepare.failed]
        return out
    return Feed(made.batches, made.prepare, device, settings, made.high,
                [made.decoder.close] if made.decoder is not None else [])


def _loader(spec: RunSpec, device: torch.device, files, workers: Tuple[int, str], seed: int,
            read, collate, pin: bool = False) -> tud.DataLoader:
    """The DataLoader over the folder: `read` each file in the workers, `collate` a batch."""
    return tud.DataLoader(
        FolderDataset(files, read, spec.image_size, seed), batch_size=spec.batch_size,
        sampler=_Shuffled(len(files), seed), num_workers=workers[0], collate_fn=collate,
        pin_memory=pin and device.type == "cuda", drop_last=True, persistent_workers=True,
        prefetch_factor=LOADER_PREFETCH)


def cpu(spec: RunSpec, opt, device: torch.device, files, workers: Tuple[int, str], seed: int,
        channels_last: bool) -> Made:
    """decode=cpu: the loader workers decode with Pillow; uint8 batches pinned, then normalised on
    the device."""
    loader = _loader(spec, device, files, workers, seed, _pixels, collate_pixels, pin=True)
    return Made(loader, _pixels_to_device(device, channels_last), TEXTS["cpu"],
                {"loader_prefetch": LOADER_PREFETCH}, workers)


def gpu(spec: RunSpec, opt, device: torch.device, files, workers: Tuple[int, str], seed: int,
        channels_last: bool) -> Made:
    """decode=gpu: the loader workers read bytes; nvJPEG decodes the batch on the device."""
    loader = _loader(spec, device, files, workers, seed, _encoded, collate_encoded)
    prepare = decoded_to_device(device, spec.image_size, channels_last, nvjpeg(device))
    return Made(loader, prepare, TEXTS["gpu"], {"loader_prefetch": LOADER_PREFETCH}, workers)


def hw(spec: RunSpec, opt, device: torch.device, files, workers: Tuple[int, str], seed: int,
       channels_last: bool) -> Made:
    """decode=hw: BYTE_READERS loader workers (unless loader_workers says otherwise) read bytes;
    the JPEG engines decode the crops, CPU decoders a share of each batch (hwdecode.py)."""
    from . import hwdecode
    api = opt("nvimgcodec_api")
    if opt("loader_workers") is None and workers[0] > BYTE_READERS:
        workers = (BYTE_READERS, "{} byte readers (decode=hw; {})".format(BYTE_READERS, workers[1]))
    decoder, note = hwdecode.split_decoder(spec, opt, device, api)
    prepare = hwdecode.hw_to_device(device, spec.image_size, channels_last, decoder, _scale(device))
    extra = dict({"loader_prefetch": LOADER_PREFETCH}, **nvd.describe("hw", 1, api=api))
    if note:
        extra["cpu_decoders_note"] = note
    loader = _loader(spec, device, files, workers, seed, _encoded, collate_encoded)
    feeder = feed.hw_feeder_settings(opt)
    extra.update(feeder)
    return Made(loader, prepare, TEXTS["hw"], extra, workers, decoder,
                feeder["feeder_priority"] == "high")
