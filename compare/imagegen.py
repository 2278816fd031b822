"""`compare data make`: an ImageNet-layout folder of synthetic JPEGs that decode like photos
(or, with --learnable, DIR/train and DIR/val of images whose classes can be learned:
learnable.py; `spec` below is a MakeSpec or a learnable.LearnableSpec).

    DIR/train/n00000000/00000000.JPEG ...   (images spread round-robin over the classes)
    DIR/make.json                           (the settings; the same command again is a no-op)

Each image is coloured noise with a 1/f amplitude spectrum (the spectrum of natural photographs),
a colour gradient and a per-class tint, saved as a baseline 4:2:0 JPEG (what cameras write and
nvJPEG's hardware decoder takes). At 500x375, quality 90, that is ~110 KB, ImageNet's average, so
decode cost per image is ImageNet's too. Image i depends only on (seed, i): deterministic.
"""
import contextlib
import io
import json
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, List, Tuple

from . import files
from .errors import UserError

SPECTRUM_SLOPE = 1.03  # amplitude ~ 1/f^slope; tuned with QUALITY for ~110 KB at 500x375
QUALITY = 90
MAKE_FILE = "make.json"
MAX_SIDE = 4096  # pixels: rendering one image takes ~40 bytes a pixel (0.7 GB at 4096x4096)


@dataclass(frozen=True)
class MakeSpec:
    images: int = 10000
    classes: int = 1000
    width: int = 500
    height: int = 375
    seed: int = 1234
    quality: int = QUALITY

    def folders(self) -> List[str]:
        return [os.path.join("train", class_name(k)) for k in range(min(self.classes, self.images))]

    def path(self, i: int) -> str:
        return os.path.join("train", class_name(i % self.classes), "{:08d}.JPEG".format(i))

    def render(self, i: int) -> bytes:
        return render(self, i)


def parse_size(text: str) -> Tuple[int, int]:
    """'500x375' -> (500, 375); one UserError line for anything else."""
    w, sep, h = text.lower().partition("x")
    try:
        size = (int(w), int(h))
    except ValueError:
        size = (0, 0)
    if not sep or min(size) < 16 or max(size) > MAX_SIDE:
        raise UserError("--image-size {!r}: give WIDTHxHEIGHT, each from 16 to {} (ImageNet's "
                        "largest), e.g. 500x375".format(text, MAX_SIDE))
    return size


def class_name(k: int) -> str:
    """ImageNet-like class folder names (ImageNet's are WordNet ids such as n01440764)."""
    return "n{:08d}".format(k)


def render(spec: MakeSpec, i: int) -> bytes:
    """The JPEG bytes of image i."""
    import numpy as np
    from PIL import Image
    h, w = spec.height, spec.width
    rng = np.random.default_rng([spec.seed, i])
    tint = np.random.default_rng([spec.seed, i % spec.classes, 7]).uniform(50, 205, size=3)
    fy, fx = np.fft.fftfreq(h)[:, None], np.fft.fftfreq(w)[None, :]
    f = np.hypot(fx, fy)
    f[0, 0] = 1.0
    amplitude = f ** -SPECTRUM_SLOPE
    amplitude[0, 0] = 0.0
    fields = []
    for _ in range(2):  # complex white noise: real and imaginary parts are two independent fields
        z = rng.standard_normal((h, w)) + 1j * rng.standard_normal((h, w))
        field = np.fft.ifft2(amplitude * z)
        fields += [field.real / (field.real.std() + 1e-9), field.imag / (field.imag.std() + 1e-9)]
    mix = np.eye(3, 4) + rng.normal(0.0, 0.4, size=(3, 4))  # correlated colour channels
    texture = np.tensordot(mix, np.stack(fields), axes=1)
    gy, gx = np.mgrid[0:h, 0:w] / max(h, w)
    angle = rng.uniform(0, 2 * np.pi)
    gradient = np.cos(angle) * gx + np.sin(angle) * gy
    pixels = (tint[:, None, None] + 45.0 * texture
              + rng.uniform(-80, 80, size=3)[:, None, None] * gradient[None])
    pixels = np.clip(pixels, 0, 255).astype(np.uint8).transpose(1, 2, 0)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=spec.quality)  # baseline, 4:2:0
    return out.getvalue()


def _write_range(args: Tuple[MakeSpec, str, int, int]) -> int:
    """Write images [start, stop) under root; return their bytes (a worker process's chunk)."""
    spec, root, start, stop = args
    total = 0
    for i in range(start, stop):
        data = spec.render(i)
        with open(os.path.join(root, spec.path(i)), "wb") as f:
            f.write(data)
        total += len(data)
    return total


def check_destination(dest: Path, spec) -> bool:
    """True if dest already holds exactly this folder; UserError if it holds anything else, or
    lies inside another data set."""
    if dest.exists() and not dest.is_dir():
        raise UserError("{}: is a file, not a folder; give a new or empty folder".format(dest))
    _outside_data_sets(dest)
    made = dest / MAKE_FILE
    if made.is_file():
        with contextlib.suppress(ValueError):
            if json.loads(made.read_text()) == asdict(spec):
                return True
        raise UserError("{}: already holds images made with other settings ({}); give a new "
                        "folder".format(dest, made))
    if dest.exists() and any(dest.iterdir()):
        raise UserError("{}: folder is not empty; give a new or empty folder".format(dest))
    return False


def _outside_data_sets(dest: Path) -> None:
    """A UserError where dest lies inside another data set: in its train/ or val/ it would be
    one more class folder (a data set made by hand too: class folders of JPEGs), elsewhere in
    one compare made, a folder of that one."""
    inner = dest.absolute()
    for above in inner.parents:
        part = inner.relative_to(above).parts[0]
        if part in ("train", "val") and _holds_classes(above / part):
            raise UserError("{}: inside the {}/ of the data set {}, where it would be one more class "
                            "folder; give a folder outside {}".format(dest, part, above, above))
        if (above / MAKE_FILE).is_file():
            raise UserError("{}: inside the data set {}; give a folder outside it".format(dest, above))


def _holds_classes(folder: Path, look: int = 8) -> bool:
    """Whether one of the first `look` subfolders of `folder` holds a JPEG (a data set's part)."""
    from .datasets import SUFFIXES
    try:
        subs = [e for e in os.scandir(str(folder)) if e.is_dir()][:look]
        return any(f.name.lower().endswith(SUFFIXES) for s in subs for f in os.scandir(s.path))
    except OSError:  # not there (yet), or unreadable: not a data set compare can tell
        return False


def make(dest: Path, spec, workers: int, advance: Callable[[int, int], None]) -> int:
    """Write the folder with `workers` processes; advance(images, bytes) after each chunk.
    Returns the bytes written. make.json is written last, to a temp name and renamed
    (files.write_text): a half-made folder is not 'made', nor is a manifest ever half written."""
    root = str(dest.absolute())
    for folder in spec.folders():
        os.makedirs(os.path.join(root, folder), exist_ok=True)
    chunk = max(1, min(64, spec.images // (workers * 8) or 1))
    total = 0
    jobs = [(spec, root, start, min(spec.images, start + chunk)) for start in range(0, spec.images, chunk)]
    # spawn, not fork: the progress bar's refresh thread runs in this process
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) \
        if workers != 1 else None
    with pool or contextlib.nullcontext():
        done = pool.map(_write_range, jobs) if pool else map(_write_range, jobs)
        for job, nbytes in zip(jobs, done):
            total += nbytes
            advance(job[3] - job[2], nbytes)
    files.write_text(dest / MAKE_FILE, json.dumps(asdict(spec), indent=2) + "\n")
    return total
