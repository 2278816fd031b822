"""PyTorch's decode=hw: the crop windows of a batch decoded on the GPU's JPEG engines by
nvImageCodec (backends/pipelines/nvdecode.py), with a share of them on CPU decoder processes beside them
(backends/pipelines/splitdecode.py), into one flat uint8 tensor, then resized, flipped and normalised with
one gather, all on the feeder's side stream.

The DataLoader workers only read bytes and draw the crops (data._encoded, as decode=gpu); the
engines write each crop into its slice of the flat tensor by its address, ordered on the side
stream (their cuda_stream argument); the CPU decoders' crops arrive in one copy ordered before
the resize. Nothing waits on the host but the feeder thread. Imported only by data.py, inside
PyTorch's environment.
"""
from typing import List, Optional

import torch

from .. import dataset as ds
from ..pipelines import cpudecode, splitdecode
from ..pipelines import nvdecode as nvd

MAX_LISTED = 20  # files that did not decode, listed by path in the result (all are counted)


def resize_flat(flat: torch.Tensor, table: torch.Tensor, size: int) -> torch.Tensor:
    """Bilinear resize of N crops of different sizes, stored one after another in `flat` (HWC
    uint8), to (N, size, size, 3) float32 on a 0-255 scale; table: (N, 4) int64 rows of
    [offset, height, width, flip] on flat's device. A few dozen kernels for the whole batch.

    Every crop's offset and length are multiples of 3 (whole RGB pixels), so the gathers take
    whole pixels from flat viewed as (pixels, 3): an index per pixel, not per byte, a third of
    the index tensors' memory traffic of a gather per byte."""
    dev = flat.device
    pixels = flat[:flat.numel() // 3 * 3].view(-1, 3)
    off, h, w, flip = (c[:, None] for c in table.unbind(1))  # each (N, 1)
    t = (torch.arange(size, device=dev, dtype=torch.float32) + 0.5) / size
    ys = torch.minimum((t * h - 0.5).clamp(min=0), (h - 1).float())  # (N, size): source rows
    xs = torch.minimum((t * w - 0.5).clamp(min=0), (w - 1).float())
    xs = torch.where(flip > 0, xs.flip(1), xs)
    y0, x0 = ys.floor(), xs.floor()
    wy, wx = (ys - y0)[:, :, None, None], (xs - x0)[:, None, :, None]
    y0, x0 = y0.long(), x0.long()
    y1, x1 = torch.minimum(y0 + 1, h - 1), torch.minimum(x0 + 1, w - 1)
    first = off // 3  # the crop's first pixel

    def at(rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        # (N, size, 1) + (N, 1, size): one index per output pixel, one gather of its 3 bytes
        index = (first + rows * w)[:, :, None] + cols[:, None, :]
        return pixels.index_select(0, index.reshape(-1)).view(
            index.shape[0], size, size, 3).float()
    top = torch.lerp(at(y0, x0), at(y0, x1), wx)
    return torch.lerp(top, torch.lerp(at(y1, x0), at(y1, x1), wx), wy)


def hw_to_device(device: torch.device, size: int, channels_last: bool,
                 decoder: splitdecode.SplitDecoder, scale_shift):
    """prepare(batch) for data.Feed: collate_encoded's (bytes, lengths, meta [y, x, h, w, flip,
    H, W, file index], labels, skipped) -> normalised float32 NCHW (channels_last strides) on the
    device. scale_shift: (shift, scale) of shape (3,) on the device (data._scale). The files that
    did not decode are counted in the result and the first MAX_LISTED kept in prepare.failed
    (their indices in the shard)."""
    shift, scale = scale_shift

    def prepare(batch):
        flat_bytes, lengths, meta, labels = batch[:4]
        datas = nvd.Flat(flat_bytes, flat_bytes.data_ptr(), lengths.tolist())  # by address
        rows = meta.tolist()
        boxes = [[int(r[1]), int(r[0]), int(r[3]), int(r[2]), int(r[4]), int(r[6]), int(r[5])]
                 for r in rows]  # read_encoded's [x, y, w, h, flip, width, height]
        offsets, total = nvd.layout(boxes)
        pixels = torch.empty(total, dtype=torch.uint8, device=device)
        stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
        done = decoder.decode_into(datas, boxes, pixels.data_ptr(), stream)
        table = [[o, s[0], s[1], b[4]] for o, s, b in zip(offsets, done.sizes, boxes)]
        label_list = labels.tolist()
        if done.bad:
            failed = prepare.failed  # type: ignore[attr-defined]
            failed.extend(int(rows[i][7]) for i in done.bad[:MAX_LISTED - len(failed)]
                          if len(rows[i]) > 7)
            nvd.replace_bad(table, label_list, done.bad)
            labels = torch.tensor(label_list)
        table_t = _to(torch.tensor(table, dtype=torch.int64), device)
        x = resize_flat(pixels, table_t, size).mul_(scale).add_(shift).permute(0, 3, 1, 2)
        return ((x if channels_last else x.contiguous()), _to(labels, device), len(done.bad))
    prepare.failed = []  # type: ignore[attr-defined]
    return prepare


def _to(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A small host tensor onto the device without blocking the host (pinned first)."""
    if device.type == "cuda":
        t = t.pin_memory()
    return t.to(device, non_blocking=True)


def make(device: torch.device, kind: str = "hw", api: str = "c", processes: int = 0,
         batch: int = 0, share=None, draft: int = 0, high: bool = False):
    """This process's decoder for the device (the engines' one is created once:
    nvdecode.decoder), with `processes` CPU decoders for batches of `batch` beside it:
    (splitdecode.SplitDecoder, why the CPU decoders did not start or None)."""
    index: Optional[int] = device.index if device.type == "cuda" else None
    if device.type == "cuda" and index is None:
        index = torch.cuda.current_device()
    engines = nvd.BatchDecoder(index, kind, api)
    return splitdecode.make(engines, processes, batch, share, index if kind == "hw" else None,
                            high, draft)


def split_decoder(spec, opt, device: torch.device, api: str, kind: str = "hw"):
    """decode=hw's decoder for a run: the engines and `cpu_decoders` CPU decoder processes
    (default: this rank's share of the cores less two) sharing each batch; (decoder, why the CPU
    decoders did not start or None). opt(key): the run's option values."""
    processes = opt("cpu_decoders")
    if processes is None:
        processes = cpudecode.default_processes(ds.loader_workers(spec, None)[0])
    return make(device, kind, api, processes, spec.batch_size, opt("cpu_share"),
                spec.image_size if opt("cpu_draft") else 0, opt("feeder_priority") == "high")


def boxes_of(meta: torch.Tensor) -> List[List[int]]:
    """[x, y, w, h] of each row of collate_encoded's meta (tests compare crops with these)."""
    return [[int(r[1]), int(r[0]), int(r[3]), int(r[2])] for r in meta.tolist()]
