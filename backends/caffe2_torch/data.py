"""PyTorch's input pipeline for --data DIR: a DataLoader over the JPEG folder itself.

decode=cpu  loader workers decode with Pillow (at a reduced DCT scale where the crop allows it),
            random-resized-crop to the image size and flip; a batch travels as uint8 NHWC.
decode=gpu  loader workers only read each file's bytes, its size from the JPEG header, and draw
            the crop and flip; the feeder decodes the whole batch at once with nvJPEG
            (torchvision.io.decode_jpeg on cuda: the A100/H100 hardware decoder for baseline
            JPEGs) and crops, resizes and flips all images with one gather (crop_resize).
Either way a feeder thread moves the batch to the device and normalises it on a side CUDA stream,
DEPTH batches ahead of the training step, in channels_last when the model uses it.
"""
import os
import queue
import random
import threading
from typing import Any, Dict, List, Tuple

import torch
from torch.utils import data as tud

from .. import dataset as ds
from .. import options
from ..protocol import RunSpec, Unsupported
from . import OPTIONS

DEPTH = 3  # batches the feeder keeps ready on the device
LOADER_PREFETCH = 4  # batches each loader worker keeps ready
PIPELINES = {"cpu": "torch DataLoader + Pillow decode in the workers",
             "gpu": "torch DataLoader (file bytes) + nvJPEG batch decode on the GPU "
                    "(torchvision.io.decode_jpeg)"}


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
    """decode=gpu: the file's bytes and [y, x, h, w, flip, height, width] of its crop."""
    with open(path, "rb") as f:
        data = f.read()
    found = ds.jpeg_size(data)
    if found is None:
        raise ValueError("{}: no JPEG frame header".format(path))
    x, y, w, h = ds.random_resized_crop(found[0], found[1], rng)
    meta = [y, x, h, w, float(rng.random() < 0.5), found[1], found[0]]
    return torch.frombuffer(bytearray(data), dtype=torch.uint8), meta


class FolderDataset(tud.Dataset):
    """(path, label) pairs read with `read` (_pixels or _encoded). A file that fails is counted
    and the next one taken in its place, so batches stay full."""

    def __init__(self, files: List[Tuple[str, int]], read, size: int, seed: int):
        self.files, self.read, self.size, self.seed = files, read, size, seed

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int):
        return ds.read_sample(self.files, i, self.read, self.size, self.seed)


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


class Feed:
    """Batches on the device: next() -> (images, labels). On cuda a feeder thread prepares them
    on a side stream, DEPTH ahead; on the CPU they are prepared when asked for.

    settings(tally) -> the data settings the result records."""

    def __init__(self, loader, prepare, device: torch.device, settings):
        self.iterator, self.prepare, self.device, self.settings = iter(loader), prepare, device, settings
        self.tally = ds.Tally()
        self.thread = None
        if device.type == "cuda":
            self.stream = torch.cuda.Stream(device)
            self.queue = queue.Queue(maxsize=DEPTH)  # type: queue.Queue
            self.stop = threading.Event()
            self.thread = threading.Thread(target=self._feed, name="compare-feeder", daemon=True)
            self.thread.start()

    def _one(self):
        batch = next(self.iterator)
        labels = batch[-2]  # still on the host: its range costs no device sync
        images, device_labels, errors = self.prepare(batch)
        return images, device_labels, (len(labels), (labels.min(), labels.max()), batch[-1] + errors)

    def _feed(self) -> None:
        torch.cuda.set_device(self.device)
        try:
            while not self.stop.is_set():
                with torch.cuda.stream(self.stream):
                    images, labels, counts = self._one()
                    ready = torch.cuda.Event()
                    ready.record(self.stream)
                self.queue.put((images, labels, counts, ready))
        except BaseException as exc:  # handed to the training thread, which raises it
            self.queue.put(exc)

    def next(self) -> Tuple[torch.Tensor, torch.Tensor]:
        if self.thread is None:
            images, labels, counts = self._one()
        else:
            item = self.queue.get()
            if isinstance(item, BaseException):
                raise RuntimeError("input pipeline: {}: {}".format(type(item).__name__, item))
            images, labels, counts, ready = item
            current = torch.cuda.current_stream(self.device)
            current.wait_event(ready)
            images.record_stream(current)  # made on the side stream, used on this one
            labels.record_stream(current)
        self.tally.add(*counts)
        return images, labels

    def describe(self) -> Dict[str, Any]:
        return self.settings(self.tally)

    def close(self) -> None:
        if self.thread is not None:
            self.stop.set()
            for _ in range(300):  # the feeder may wait on a full queue: drain it until it ends
                try:
                    self.queue.get(timeout=0.1)
                except queue.Empty:
                    pass
                if not self.thread.is_alive():
                    break
        self.iterator = None  # shuts the loader workers down


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


def make_feed(spec: RunSpec, device: torch.device, rank: int, world: int,
              channels_last: bool) -> Feed:
    """This rank's pipeline over its shard of spec.data's files (every world-th file)."""
    def opt(key):
        return options.value(OPTIONS, spec.options, key)
    decode = opt("decode")
    if opt("cuda_graphs"):
        raise Unsupported("cuda_graphs replays one static batch; real data (--data) runs eager steps")
    if decode == "gpu" and device.type != "cuda":
        raise Unsupported("decode=gpu decodes with nvJPEG on a CUDA device; this run is on the cpu")
    prepare = (_pixels_to_device(device, channels_last) if decode == "cpu" else
               decoded_to_device(device, spec.image_size, channels_last, nvjpeg(device)))
    prepared = ds.Prepared.find(spec.data)
    prepared.check_labels(spec.num_classes)
    files = [(os.path.join(prepared.root, rel), label)
             for rel, label in ds.shard(prepared.files(), rank, world)]
    workers = ds.loader_workers(spec, opt("loader_workers"))
    read, collate = (_pixels, collate_pixels) if decode == "cpu" else (_encoded, collate_encoded)
    loader = tud.DataLoader(
        FolderDataset(files, read, spec.image_size, spec.seed + rank), batch_size=spec.batch_size,
        sampler=_Shuffled(len(files), spec.seed + rank), num_workers=workers[0],
        collate_fn=collate, pin_memory=device.type == "cuda" and decode == "cpu", drop_last=True,
        persistent_workers=True, prefetch_factor=LOADER_PREFETCH)

    def settings(tally: ds.Tally) -> Dict[str, Any]:
        return ds.settings(spec, prepared, tally, pipeline=PIPELINES[decode],
                           data_format="folder (the JPEG files)", workers=workers, ranks=world,
                           decode=decode, device_prefetch=DEPTH, loader_prefetch=LOADER_PREFETCH,
                           shard_images=len(files))
    return Feed(loader, prepare, device, settings)


def data_only(spec: RunSpec) -> ds.DataOnly:
    """--data-only: the pipeline alone, on the device and ranks a training run would use."""
    import torch.distributed as dist

    from .. import policy
    from ..harness import cpu_name
    from .train import _init_distributed
    rank, local_rank, world = _init_distributed(spec)
    cuda = spec.device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise Unsupported("device cuda asked for, but torch {} sees no GPU".format(torch.__version__))
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(policy.cpu_threads(world))
    channels_last = options.value(OPTIONS, spec.options, "channels_last")
    feed = make_feed(spec, device, rank, world, cuda if channels_last is None else channels_last)
    return ds.DataOnly(
        feed, describe=lambda: {"framework_version": "torch " + torch.__version__,
                                "device_name": torch.cuda.get_device_name(device) if cuda else cpu_name()},
        sync=(lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None),
        barrier=dist.barrier if world > 1 else (lambda: None), rank=rank,
        distribution="ddp" if world > 1 else "single",
        close=dist.destroy_process_group if world > 1 else (lambda: None))
