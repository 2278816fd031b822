"""Does decode=hw decode, crop and resize the right pixels? One batch of a JPEG folder through the
framework's own hardware-decode code (PyTorch: hwdecode.hw_to_device; JAX: hwfeed.HwSource, its
decode threads and its ring of buffers: the same batch through every buffer of the ring),
compared with Pillow: each file decoded whole by Pillow, cut to the same crop box, resized by the
same bilinear formula in numpy, flipped, normalised.

    python bench/pipes_probe.py torch|jax DIR [hw|cpu] [--batch N] [--size S]
        [--cpu-decoders N [--cpu-share X]]

hw: the GPU's JPEG engines (a CUDA device); cpu: nvImageCodec's CPU backend (no GPU needed: the
CI test of everything but the engines). Prints one JSON line: mean and max absolute difference in
0-255 pixel levels (decoders round their IDCT and chroma upsampling differently: a mean of a
level or two; a wrong crop box or a shifted row gives tens), the same against Pillow's own
resize(box=...), which filters when it shrinks (larger, for information), and `ok` (mean < 3).
--cpu-decoders N: the batch is split between the engines and N CPU decoder processes
(splitdecode.py; --cpu-share X of it, else half of the first batch, then the measured rates), and
the split's pixels are also compared with the engines' alone (`split_vs_single_mean_abs`, which
`ok` then needs below the tolerance too).
"""
import argparse
import glob
import json
import os
import random
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from backends import dataset as ds  # noqa: E402
from backends.pipelines import nvdecode as nvd  # noqa: E402

TOLERANCE = 3.0  # mean |difference| in pixel levels


def reference(path: str, meta, size: int, pillow_resize: bool) -> np.ndarray:
    """(size, size, 3) float32 0-255: Pillow's decode, the crop, a bilinear resize, the flip."""
    from PIL import Image
    x, y, w, h, flip = meta[:5]
    with Image.open(path) as im:
        rgb = im.convert("RGB")
        if pillow_resize:
            out = np.asarray(rgb.resize((size, size), Image.BILINEAR, box=(x, y, x + w, y + h)),
                             np.float32)
            return out[:, ::-1] if flip else out
        crop = np.asarray(rgb, np.float32)[y:y + h, x:x + w]
    t = (np.arange(size, dtype=np.float32) + 0.5) / size
    ys = np.minimum(np.maximum(t * h - 0.5, 0), h - 1)
    xs = np.minimum(np.maximum(t * w - 0.5, 0), w - 1)
    xs = xs[::-1] if flip else xs
    y0, x0 = np.floor(ys).astype(int), np.floor(xs).astype(int)
    y1, x1 = np.minimum(y0 + 1, h - 1), np.minimum(x0 + 1, w - 1)
    wy, wx = (ys - y0)[:, None, None], (xs - x0)[None, :, None]
    top = crop[y0][:, x0] * (1 - wx) + crop[y0][:, x1] * wx
    bottom = crop[y1][:, x0] * (1 - wx) + crop[y1][:, x1] * wx
    return top * (1 - wy) + bottom * wy


def samples(folder: str, batch: int, size: int):
    files = sorted(glob.glob(os.path.join(folder, "**", "*.JPEG"), recursive=True))[:batch]
    picked = [nvd.read_encoded(p, size, random.Random(i)) for i, p in enumerate(files)]
    return files, [d for d, _ in picked], [m for _, m in picked]


def torch_pixels(datas, meta, size: int, kind: str, api: str = "c", processes: int = 0,
                 share=None):
    """(pixels NHWC float, the split's settings) through PyTorch's decode=hw prepare."""
    import torch

    from backends.caffe2_torch import data, hwdecode
    device = torch.device("cuda", 0) if kind == "hw" else torch.device("cpu")
    flat = torch.frombuffer(bytearray(b"".join(datas)), dtype=torch.uint8)
    rows = [[m[1], m[0], m[3], m[2], m[4], m[6], m[5]] for m in meta]  # collate_encoded's order
    batch = (flat, torch.tensor([len(d) for d in datas]), torch.tensor(rows, dtype=torch.float64),
             torch.zeros(len(datas), dtype=torch.int64), 0)
    decoder, note = hwdecode.make(device, kind, api, processes, len(datas), share)
    assert note is None, note
    try:
        prepare = hwdecode.hw_to_device(device, size, True, decoder, data._scale(device))
        x, _, errors = prepare(batch)
        assert errors == 0, "{} images did not decode".format(errors)
        return x.permute(0, 2, 3, 1).float().cpu().numpy(), decoder.describe()
    finally:
        decoder.close()


def jax_pixels(datas, meta, size: int, kind: str, api: str = "c", processes: int = 0,
               share=None):
    """(pixels NHWC float, the split's settings) through JAX's HwSource and its ring."""
    import jax
    from jax.sharding import Mesh

    from backends.jax import hwfeed

    class Once:  # the loader: this one batch, again and again (its decode threads run ahead)
        def next(self):
            return datas, meta, np.zeros(len(datas), np.int32), 0

        def buffered(self):
            return 0

        def close(self):
            pass
    mesh = Mesh(np.array(jax.devices()[:1]), ("data",))
    source = hwfeed.HwSource(Once(), mesh, len(datas), size, kind, api=api,
                             cpu_decoders=processes, share=share)
    try:
        outs = [source.next() for _ in range(hwfeed.RING + 1)]  # every buffer, one of them twice
        split = source.describe()["decode_split"]
    finally:
        source.close()
    for x, _, counts in outs:
        assert counts[2] == 0, "{} images did not decode".format(counts[2])
    first = np.asarray(outs[0][0])
    assert all(np.array_equal(first, np.asarray(x)) for x, _, _ in outs[1:]) or processes, \
        "a buffer of the ring gave other pixels"
    return first, split


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("framework", choices=("torch", "jax"))
    parser.add_argument("folder")
    parser.add_argument("kind", nargs="?", default="hw", choices=("hw", "cpu"))
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--api", default="c", choices=("c", "python"),
                        help="nvImageCodec's C API (nvcapi.py) or its Python binding")
    parser.add_argument("--cpu-decoders", type=int, default=0,
                        help="CPU decoder processes beside the engines (splitdecode.py)")
    parser.add_argument("--cpu-share", type=float, default=None,
                        help="their share of the batch (default: as the measured rates say)")
    a = parser.parse_args()
    files, datas, meta = samples(a.folder, a.batch, a.size)
    pixels = torch_pixels if a.framework == "torch" else jax_pixels
    got, split = pixels(datas, meta, a.size, a.kind, a.api, a.cpu_decoders, a.cpu_share)
    mean, std = np.array(ds.MEAN, np.float32) * 255, np.array(ds.STD, np.float32) * 255
    got = got * std + mean  # back to 0-255 pixel levels
    same = np.stack([reference(p, m, a.size, False) for p, m in zip(files, meta)])
    pillow = np.stack([reference(p, m, a.size, True) for p, m in zip(files, meta)])
    diff, loose = np.abs(got - same), np.abs(got - pillow)
    out = {"framework": a.framework, "kind": a.kind, "api": a.api, "images": len(files),
           "shape": list(got.shape), "decoder": nvd.version(),
           "mean_abs": round(float(diff.mean()), 3), "max_abs": round(float(diff.max()), 1),
           "pillow_resize_mean_abs": round(float(loose.mean()), 3)}
    ok = diff.mean() < TOLERANCE
    if a.cpu_decoders:
        single, _ = pixels(datas, meta, a.size, a.kind, a.api)
        apart = np.abs(got - (single * std + mean))
        out.update(cpu_decoders=a.cpu_decoders, cpu_images=split["cpu_images"],
                   hw_images=split["hw_images"], split=split,
                   split_vs_single_mean_abs=round(float(apart.mean()), 3),
                   split_vs_single_max_abs=round(float(apart.max()), 1))
        ok = ok and apart.mean() < TOLERANCE
    out["ok"] = bool(ok)
    print(json.dumps(out))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
