"""PyTorch's decode=hw: the crop windows of a batch decoded on the GPU's JPEG engines by
nvImageCodec (backends/nvdecode.py) into one flat uint8 tensor, then resized, flipped and
normalised with one gather, all on the feeder's side stream.

The DataLoader workers only read bytes and draw the crops (data._encoded, as decode=gpu); the
decoder writes each crop into its slice of the flat tensor through __cuda_array_interface__,
ordered on the side stream (its cuda_stream argument), so nothing is copied and nothing waits
on the host. Imported only by data.py, inside PyTorch's environment.
"""
from typing import List, Optional

import torch

from .. import nvdecode as nvd


def resize_flat(flat: torch.Tensor, table: torch.Tensor, size: int) -> torch.Tensor:
    """Bilinear resize of N crops of different sizes, stored one after another in `flat` (HWC
    uint8), to (N, size, size, 3) float32 on a 0-255 scale; table: (N, 4) int64 rows of
    [offset, height, width, flip] on flat's device. A few dozen kernels for the whole batch."""
    dev = flat.device
    off, h, w, flip = (c[:, None] for c in table.unbind(1))  # each (N, 1)
    t = (torch.arange(size, device=dev, dtype=torch.float32) + 0.5) / size
    ys = torch.minimum((t * h - 0.5).clamp(min=0), (h - 1).float())  # (N, size): source rows
    xs = torch.minimum((t * w - 0.5).clamp(min=0), (w - 1).float())
    xs = torch.where(flip > 0, xs.flip(1), xs)
    y0, x0 = ys.floor(), xs.floor()
    wy, wx = (ys - y0)[:, :, None, None], (xs - x0)[:, None, :, None]
    y0, x0 = y0.long(), x0.long()
    y1, x1 = torch.minimum(y0 + 1, h - 1), torch.minimum(x0 + 1, w - 1)
    rgb = torch.arange(3, device=dev)

    def at(rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        # (N, size, 1, 1) + (N, 1, size, 3): one full-size index tensor, one gather
        index = (off + rows * w * 3)[:, :, None, None] + (cols * 3)[:, None, :, None] + rgb
        return flat.take(index).float()
    top = torch.lerp(at(y0, x0), at(y0, x1), wx)
    return torch.lerp(top, torch.lerp(at(y1, x0), at(y1, x1), wx), wy)


def hw_to_device(device: torch.device, size: int, channels_last: bool,
                 decoder: nvd.BatchDecoder, scale_shift):
    """prepare(batch) for data.Feed: collate_encoded's (bytes, lengths, meta [y, x, h, w, flip,
    H, W], labels, skipped) -> normalised float32 NCHW (channels_last strides) on the device.
    scale_shift: (shift, scale) of shape (3,) on the device (data._scale)."""
    shift, scale = scale_shift

    def prepare(batch):
        flat_bytes, lengths, meta, labels = batch[:4]
        datas = [t.numpy() for t in flat_bytes.split(lengths.tolist())]  # views, not copies
        rows, boxes = meta.tolist(), boxes_of(meta)
        offsets, total = nvd.layout(boxes)
        pixels = torch.empty(total, dtype=torch.uint8, device=device)
        stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
        bad = decoder.decode_into(datas, boxes, pixels.data_ptr(), stream)
        table = [[o, b[3], b[2], int(r[4])] for o, b, r in zip(offsets, boxes, rows)]
        label_list = labels.tolist()
        if bad:
            nvd.replace_bad(table, label_list, bad)
            labels = torch.tensor(label_list)
        table_t = _to(torch.tensor(table, dtype=torch.int64), device)
        x = resize_flat(pixels, table_t, size).mul_(scale).add_(shift).permute(0, 3, 1, 2)
        return ((x if channels_last else x.contiguous()), _to(labels, device), len(bad))
    return prepare


def _to(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A small host tensor onto the device without blocking the host (pinned first)."""
    if device.type == "cuda":
        t = t.pin_memory()
    return t.to(device, non_blocking=True)


def make(device: torch.device, kind: str = "hw", api: str = "c") -> nvd.BatchDecoder:
    """This process's decoder for the device (created once: nvdecode.decoder)."""
    index: Optional[int] = device.index if device.type == "cuda" else None
    if device.type == "cuda" and index is None:
        index = torch.cuda.current_device()
    return nvd.BatchDecoder(index, kind, api)


def boxes_of(meta: torch.Tensor) -> List[List[int]]:
    """[x, y, w, h] of each row of collate_encoded's meta (tests compare crops with these)."""
    return [[int(r[1]), int(r[0]), int(r[3]), int(r[2])] for r in meta.tolist()]
