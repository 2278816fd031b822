"""Real data (--data DIR), the parts every backend shares: where a folder's manifest and native
formats live, its file list, the random-resized-crop box, a JPEG's size read from its header,
the Pillow decode of one crop for loaders that read the folder itself (PyTorch, JAX), the
loader-worker default, and what a real-data run counts and records.

Standard library only, Python >= 3.8: imported by the host and inside every framework's
environment. The host (compare/datasets.py) checks the folder and writes the manifest and the file
list; each backend's data.py writes its native format (`python -m backends.<backend>.data write
PREPARED_DIR`) and reads it through the framework's own input pipeline.
"""
import hashlib
import json
import math
import os
import random
import struct
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from .caches import cache_root
from .protocol import RunSpec, write_json_atomic

PREPARED = ".compare"  # DIR/.compare/: manifest.json, files.jsonl, one folder per native format
MANIFEST = "manifest.json"
# one valid JPEG a line, as a JSON array [relative path, label, size, mtime_ns]: JSON holds any
# file name (a tab, a line break, bytes that are not UTF-8 as \udcXX escapes)
FILE_LIST = "files.jsonl"
OLD_FILE_LIST = "files.tsv"  # an earlier compare's: path <TAB> label <TAB> size <TAB> mtime_ns
DONE = "done.json"  # in a format's folder: written last, names the manifest fingerprint it holds
MEAN = (0.485, 0.456, 0.406)  # ImageNet channel statistics, RGB on a 0-1 scale
STD = (0.229, 0.224, 0.225)
AREA = (0.08, 1.0)  # random-resized crop: fraction of the image area kept
RATIO = (3.0 / 4.0, 4.0 / 3.0)  # and the range of its aspect ratio
AUGMENTATION = "random-resized crop (area 0.08-1, aspect 3/4-4/3), horizontal flip, mean/std"
class DataError(RuntimeError):
    """The prepared side of a folder is missing or stale: the run is recorded as failed."""


def candidates(root: str) -> List[str]:
    """Where a folder's prepared side may live: beside it, else (read-only folder) in the cache."""
    key = hashlib.sha1(os.path.abspath(root).encode()).hexdigest()[:12]
    return [os.path.join(root, PREPARED), os.path.join(cache_root(), "data", key)]


class Prepared:
    """A folder's prepared side: the manifest the host wrote, its file list, the native formats."""

    def __init__(self, path: str):
        self.path = path
        with open(os.path.join(path, MANIFEST)) as f:
            self.manifest = json.load(f)  # type: Dict[str, Any]

    @classmethod
    def find(cls, root: str) -> "Prepared":
        for path in candidates(root):
            if os.path.isfile(os.path.join(path, MANIFEST)):
                return cls(path)
        if not os.path.isdir(root):
            raise DataError("data folder {} does not exist where this run executes (a container "
                            "sees only what is mounted into it; a cluster's nodes, what their "
                            "filesystems hold)".format(root))
        raise DataError("{} has no manifest (looked in {}); run `compare data prepare {}`".format(
            root, " and ".join(candidates(root)), root))

    @property
    def fingerprint(self) -> str:
        return self.manifest["fingerprint"]

    @property
    def root(self) -> str:
        return self.manifest["root"]

    @property
    def classes(self) -> int:
        return int(self.manifest["classes"])

    def file_list_path(self) -> str:
        return file_list_path(self.path)

    def files(self) -> List[Tuple[str, int]]:
        """(path relative to the root, label) of every valid JPEG, in the manifest's order."""
        return [(rel, label) for rel, label, _, _ in read_file_list(self.file_list_path())]

    def format_dir(self, name: str) -> str:
        return os.path.join(self.path, name)

    def ready(self, name: str) -> bool:
        """Whether format `name` was written from this very manifest (the folder is unchanged)."""
        try:
            with open(os.path.join(self.format_dir(name), DONE)) as f:
                return json.load(f).get("fingerprint") == self.fingerprint
        except (OSError, ValueError):
            return False

    def require(self, name: str) -> str:
        """The folder of format `name`; DataError if it is missing or stale."""
        if not self.ready(name):
            raise DataError("{} has no up-to-date {} (in {}); run `compare data prepare {}`".format(
                self.root, name, self.format_dir(name), self.root))
        return self.format_dir(name)

    def mark_done(self, name: str, **info: Any) -> None:
        write_json_atomic(os.path.join(self.format_dir(name), DONE),
                          dict(info, fingerprint=self.fingerprint, format=name))

    def check_labels(self, num_classes: int) -> None:
        if self.classes > num_classes:
            raise DataError("{} has {} classes, the model only {} outputs".format(
                self.root, self.classes, num_classes))


def file_list_path(folder: str) -> str:
    """A prepared folder's file list: FILE_LIST, or an earlier compare's OLD_FILE_LIST where only
    that one is."""
    path, old = os.path.join(folder, FILE_LIST), os.path.join(folder, OLD_FILE_LIST)
    return old if not os.path.exists(path) and os.path.exists(old) else path


def read_file_list(path: str) -> List[Tuple[str, int, int, int]]:
    """(relative path, label, size, mtime_ns) a line of a file list: FILE_LIST's JSON arrays, or
    OLD_FILE_LIST's tab-separated fields (whose names hold no tab or line break)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if path.endswith(OLD_FILE_LIST):
                rel, label, size, mtime = line.rstrip("\n").split("\t")
            else:
                rel, label, size, mtime = json.loads(line)
            out.append((rel, int(label), int(size), int(mtime)))
    return out


def write_file_list(folder: str, entries: List[Tuple[str, int, int, int]]) -> None:
    """FILE_LIST in `folder` (to a temp name, renamed), and an earlier compare's list removed."""
    tmp = os.path.join(folder, FILE_LIST + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:  # ensure_ascii: any name, as \uXXXX escapes
        f.writelines(json.dumps(list(e)) + "\n" for e in entries)
    os.replace(tmp, os.path.join(folder, FILE_LIST))
    if os.path.exists(os.path.join(folder, OLD_FILE_LIST)):
        os.remove(os.path.join(folder, OLD_FILE_LIST))


def random_resized_crop(width: int, height: int, rng) -> Tuple[int, int, int, int]:
    """(x, y, w, h) of a random crop: AREA of the image, aspect in RATIO (torchvision's rule:
    10 tries, then the central crop of the nearest allowed aspect). rng: a random.Random."""
    area = width * height
    for _ in range(10):
        target = area * rng.uniform(*AREA)
        ratio = math.exp(rng.uniform(math.log(RATIO[0]), math.log(RATIO[1])))
        w, h = int(round(math.sqrt(target * ratio))), int(round(math.sqrt(target / ratio)))
        if 0 < w <= width and 0 < h <= height:
            return rng.randint(0, width - w), rng.randint(0, height - h), w, h
    w, h = width, height
    if width / height < RATIO[0]:
        h = int(round(width / RATIO[0]))
    elif width / height > RATIO[1]:
        w = int(round(height * RATIO[1]))
    return (width - w) // 2, (height - h) // 2, w, h


def crop_image(path: str, size: int, rng):
    """The random-resized crop of one JPEG as a size x size RGB Pillow image, flipped with
    probability 1/2 (Pillow is imported here, in the loaders that decode with it)."""
    from PIL import Image
    with Image.open(path) as im:
        width, height = im.size
        x, y, w, h = random_resized_crop(width, height, rng)
        # libjpeg decodes at 1/2, 1/4, 1/8 scale for far less work: ask for the smallest scale
        # at which the crop still has `size` pixels a side
        im.draft("RGB", (max(1, width * size // w), max(1, height * size // h)))
        sx, sy = im.size[0] / width, im.size[1] / height
        out = im.convert("RGB").resize((size, size), Image.BILINEAR,
                                       box=(x * sx, y * sy, (x + w) * sx, (y + h) * sy))
    if rng.random() < 0.5:
        out = out.transpose(Image.FLIP_LEFT_RIGHT)
    return out


def read_sample(files: List[Tuple[str, int]], number: int, read: Callable, size: int,
                seed: int) -> Tuple[Any, int, int]:
    """Sample `number` (epoch * len(files) + index) as (read(path, size, rng), label, files
    skipped). Its crop and flip depend only on (seed, number), whichever worker reads it. A
    file that fails is counted and the next one taken in its place, so batches stay full."""
    rng = random.Random(seed * 1000003 + number)
    for bad in range(len(files)):
        path, label = files[(number + bad) % len(files)]
        try:
            return read(path, size, rng), label, bad
        except (OSError, ValueError, SyntaxError):  # what Pillow and the header parser raise
            continue
    raise DataError("no file of the shard decodes")


_SOF = set(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # frame headers (not DHT, JPG, DAC)


def jpeg_size(data: bytes) -> Optional[Tuple[int, int]]:
    """(width, height) from a JPEG's frame header, without decoding; None if it is not a JPEG."""
    if data[:2] != b"\xff\xd8":
        return None
    i, n = 2, len(data)
    while i + 4 <= n:
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker == 0x01 or 0xD0 <= marker <= 0xD8:  # markers without a length
            i += 2
            continue
        if marker in _SOF and i + 9 <= n:
            height, width = struct.unpack(">HH", data[i + 5:i + 9])
            return (width, height) if width and height else None
        i += 2 + struct.unpack(">H", data[i + 2:i + 4])[0]
    return None


def available_cores() -> int:
    """The cores this process may run on (its affinity mask, which containers and Slurm set)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def loader_workers(spec: RunSpec, given: Optional[int],
                   sharing: Optional[int] = None) -> Tuple[int, str]:
    """Input-pipeline workers of one local worker, and where that number came from.
    sharing: the local workers among which this process's cores are shared (default: all of
    the node's, spec.gpus; fewer where the process was pinned to its own share of the cores)."""
    if given:
        return int(given), "--option loader_workers"
    cores, sharing = available_cores(), sharing or spec.gpus
    return max(1, cores // max(1, sharing)), "{} cores / {} local worker{}".format(
        cores, sharing, "s" if sharing > 1 else "")


def shard(items: List[Any], rank: int, world: int) -> List[Any]:
    """Rank `rank`'s share of the items: every world-th one, so shares differ by at most one."""
    part = items[rank::world]
    if not part:
        raise DataError("{} images cannot be shared among {} workers".format(len(items), world))
    return part


class Tally:
    """What a pipeline handed to the steps: images, batches, the label range, decode errors."""

    def __init__(self) -> None:
        self.images = self.batches = self.labels_checked = self.decode_errors = 0
        self.label_min = self.label_max = None  # type: Optional[int]

    def add(self, images: int, label_range: Optional[Tuple[int, int]] = None,
            decode_errors: int = 0) -> None:
        """label_range: (min, max) of the batch's labels where reading them costs no device sync."""
        self.images += int(images)
        self.batches += 1
        self.decode_errors += int(decode_errors)
        if label_range is not None:
            lo, hi = int(label_range[0]), int(label_range[1])
            self.labels_checked += 1
            self.label_min = lo if self.label_min is None else min(lo, self.label_min)
            self.label_max = hi if self.label_max is None else max(hi, self.label_max)


def settings(spec: RunSpec, prepared: Prepared, tally: Tally, *, pipeline: str, data_format: str,
             workers: Tuple[int, str], ranks: int, **extra: Any) -> Dict[str, Any]:
    """The data keys of a real-data result's settings, the same names in every backend.

    ranks: processes that each read their own shard in lockstep (DDP, Horovod); images_read is
    rank 0's count times that (each process steps as often as rank 0 does).
    """
    out = {"data_mode": spec.data_mode, "data_dir": spec.data, "data_pipeline": pipeline,
           "data_format": data_format, "loader_workers": workers[0],
           "loader_workers_from": workers[1], "cpu_cores": available_cores(),
           "images_read": tally.images * ranks, "images_read_rank0": tally.images,
           "batches_read": tally.batches, "label_min": tally.label_min,
           "label_max": tally.label_max, "labels_checked_batches": tally.labels_checked,
           "decode_errors": tally.decode_errors, "dataset_images": prepared.manifest["images"],
           "dataset_classes": prepared.classes,
           "corrupt_skipped": len(prepared.manifest.get("corrupt", [])),
           "augmentation": AUGMENTATION}
    out.update(extra)
    return out


class Progress:
    """A writer's progress on stdout, one `progress DONE TOTAL` line per percent (the host draws
    the bar from these lines)."""

    def __init__(self, total: int):
        self.total, self.done, self.shown, self.started = total, 0, -1, time.time()
        self.lock = threading.Lock()  # writers may advance from several threads

    def advance(self, n: int = 1) -> None:
        with self.lock:
            self.done += n
            percent = 100 * self.done // max(1, self.total)
            if percent != self.shown:
                self.shown = percent
                sys.stdout.write("progress {} {}\n".format(self.done, self.total))
                sys.stdout.flush()

    def seconds(self) -> float:
        return round(time.time() - self.started, 1)


def writer_main(write: Callable[..., Dict[str, Any]], name: str,
                argv: Optional[List[str]] = None) -> int:
    """`python -m backends.<backend>.data write PREPARED_DIR`: write format `name` into a temp
    folder, rename it into place, mark it done.
    write(prepared, files [(path, label)], folder, progress) -> info for done.json."""
    import shutil
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] != "write":
        sys.stderr.write("usage: python -m backends.<backend>.data write PREPARED_DIR\n")
        return 2
    prepared = Prepared(argv[1])
    files = prepared.files()
    final, tmp = prepared.format_dir(name), prepared.format_dir(name) + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    progress = Progress(len(files))
    info = write(prepared, [(os.path.join(prepared.root, rel), label) for rel, label in files],
                 tmp, progress)
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)
    prepared.mark_done(name, images=len(files), seconds=progress.seconds(), **info)
    return 0
