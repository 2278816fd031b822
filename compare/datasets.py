"""Real data on the host: open an ImageNet-layout folder (a bad one is one line and exit 2), check
every JPEG once into a manifest (corrupt ones are counted, listed and left out), and, before a
sweep, have each framework's native format written beside it (compare/formats.py).

    DIR/train/<class>/*.JPEG            (or DIR/<class>/*.JPEG: a real ImageNet train folder as is)
    DIR/.compare/manifest.json          fingerprint, classes, images, corrupt files and why
    DIR/.compare/files.jsonl            [relative path, label, size, mtime_ns] a line (any name)
    DIR/.compare/<format>/done.json     a native format, written once per fingerprint

The prepared side goes to the cache folder when DIR is read-only. A manifest (and every format
written from it) is reused while the folder is unchanged: same files, sizes and modification times.
"""
import contextlib
import functools
import hashlib
import io
import json
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from backends.contract import write_json_atomic
from backends.contract.shared import dataset

from .errors import UserError
from .formats import Log, Writer, prepare_formats, progress_bar
from .frameworks import Framework
from .loading import one_line

LAYOUT = "give an ImageNet-layout folder (DIR/train/<class>/*.JPEG) or make one with: compare data make DIR"
VAL_LAYOUT = ("time to accuracy evaluates on DIR/val/<class>/*.JPEG, one folder per class of "
              "DIR/train (ImageNet's flat val/ sorted into class folders first), as `compare data "
              "make DIR --learnable small` writes it")
SUFFIXES = (".jpeg", ".jpg")
SAMPLE_CLASSES, SAMPLE_PER_CLASS = 16, 4  # the plan reads the first bytes of 64 files at most
JPEG_START = b"\xff\xd8\xff"  # start of image, then the first marker's FF
PARALLEL_CHECK = 2000  # folders with more unchecked files than this are checked by a process pool
Entry = Tuple[str, int, int, int]  # relative path, label, size, mtime_ns


class Folder:
    """An ImageNet-layout folder as opened: its class folders, and its JPEG files (`entries`:
    name, label, size and mtime of each) listed on first use. That is a walk of every file (an
    os.stat each: minutes on ImageNet), which prepare's fingerprint needs and the plan does not:
    its check reads a sample (sample()), each class folder only up to its first JPEG."""

    def __init__(self, root: str, class_root: str, classes: List[str],
                 entries: Optional[List[Entry]] = None):
        self.root = root  # absolute
        self.class_root = class_root  # root/train, or root itself
        self.classes = classes  # every class folder, by name: a file's label is its index
        self._entries = entries
        self._groups: Optional[Dict[int, list]] = None  # label -> its JPEGs, where they are known

    @property
    def entries(self) -> List[Entry]:
        if self._entries is None:
            self._entries = [_entry(self.root, e, label) for label, name in enumerate(self.classes)
                             for e in _jpegs(os.path.join(self.class_root, name))]
        return self._entries

    @property
    def fingerprint(self) -> str:
        h = hashlib.sha256("{} {}\n".format(len(self.entries), len(self.classes)).encode())
        for rel, label, size, mtime in self.entries:  # a name not UTF-8: its bytes as they are
            h.update("{}\t{}\t{}\t{}\n".format(rel, label, size, mtime).encode("utf-8", "surrogateescape"))
        return h.hexdigest()[:24]

    def with_jpegs(self) -> List[int]:
        """The labels of the class folders that hold a JPEG file: from the entries where they are
        listed, else each folder read up to its first JPEG (ImageNet's train/ is not listed)."""
        if self._groups is None:
            self._groups = {}
            if self._entries is not None:
                for e in self._entries:
                    self._groups.setdefault(e[1], []).append(e)
            else:
                self._groups = {label: [] for label, name in enumerate(self.classes)
                                if _holds_jpeg(os.path.join(self.class_root, name))}
        return list(self._groups)

    def files_of(self, label: int) -> list:
        """The JPEGs of one class folder with one (with_jpegs), sorted by name: its entries, or,
        where the folder is not listed, its directory entries (no os.stat: entry() reads one)."""
        self.with_jpegs()
        if not self._groups[label]:
            self._groups[label] = _jpegs(os.path.join(self.class_root, self.classes[label]))
        return self._groups[label]

    def entry(self, label: int, item) -> Entry:
        """An item of files_of(label) as an Entry (a directory entry: its os.stat read now)."""
        return item if isinstance(item, tuple) else _entry(self.root, item, label)


def _jpegs(folder: str) -> List[os.DirEntry]:
    """The JPEG files of one class folder, links followed, sorted by name; no os.stat of each."""
    return sorted((e for e in os.scandir(folder) if e.name.lower().endswith(SUFFIXES) and
                   _is(e, folder=False)), key=lambda e: e.name)


def _holds_jpeg(folder: str) -> bool:
    """Whether one class folder holds a JPEG file, read up to the first."""
    with os.scandir(folder) as listing:
        return any(e.name.lower().endswith(SUFFIXES) and _is(e, folder=False) for e in listing)


def _entry(root: str, e: os.DirEntry, label: int) -> Entry:
    st = e.stat()
    return os.path.relpath(e.path, root), label, st.st_size, st.st_mtime_ns


def open_folder(path: str, what: str = "--data") -> Folder:
    """Open `path`; a UserError line if it is missing, empty or has no class subfolders of JPEGs
    (each class folder read up to its first JPEG: the files are listed on first use)."""
    p = Path(path)
    if not p.exists():
        raise UserError("{} {}: no such folder; {}".format(what, path, LAYOUT))
    if not p.is_dir():
        raise UserError("{} {}: is a file, not a folder; {}".format(what, path, LAYOUT))
    root = p.resolve()
    if not any(not e.name.startswith(".") for e in os.scandir(str(root))):
        raise UserError("{} {}: the folder is empty; {}".format(what, path, LAYOUT))
    class_root = root / "train" if (root / "train").is_dir() else root
    classes = sorted(e.name for e in os.scandir(str(class_root))
                     if _is(e, folder=True) and not e.name.startswith("."))
    folder = Folder(str(root), str(class_root), classes)
    if not folder.with_jpegs():
        raise UserError("{} {}: no class subfolders with JPEG files in {}; {}".format(
            what, path, os.path.join(path, os.path.relpath(str(class_root), str(root))).rstrip("/."),
            LAYOUT))
    return folder


def sample(folder: Folder) -> List[Entry]:
    """What the plan reads of a folder: up to SAMPLE_PER_CLASS files of each of up to
    SAMPLE_CLASSES classes, both spread evenly over the sorted names; the first of every class
    first, so that a usable folder is told by the first file read. Only the sampled classes are
    listed, and only the picked files' sizes read (Folder.files_of)."""
    labels = folder.with_jpegs()
    if len(labels) > SAMPLE_CLASSES:
        labels = [labels[i * len(labels) // SAMPLE_CLASSES] for i in range(SAMPLE_CLASSES)]
    classes = [folder.files_of(label) for label in labels]
    picks = [sorted({i * len(g) // SAMPLE_PER_CLASS for i in range(SAMPLE_PER_CLASS)}) if g else []
             for g in classes]  # (none where a class folder was emptied since)
    return [folder.entry(label, g[p[n]]) for n in range(SAMPLE_PER_CLASS)
            for label, g, p in zip(labels, classes, picks) if n < len(p)]


def check_sample(folder: Folder, what: str) -> None:
    """A UserError line where no file of sample(folder) starts as a JPEG does (SOI, then a
    marker: FF D8 FF): its first bytes and size only, read up to the first that does. The whole
    check (every file decoded: check()) is prepare's, which skips and lists the bad ones."""
    picked, bad = sample(folder), []
    for rel, _, size, _ in picked:
        try:
            with open(os.path.join(folder.root, rel), "rb") as f:
                head = f.read(len(JPEG_START))
        except OSError as exc:
            bad.append("{} is unreadable ({})".format(one_line(rel), exc.strerror or exc))
            continue
        if head == JPEG_START:
            return
        bad.append("{} is empty".format(one_line(rel)) if not head else "{} starts with {}".format(
            one_line(rel), head.hex(" ")))
    classes = len(folder.with_jpegs())
    raise UserError("{}: none of the {} checked (up to {} in each of {}{} class{}) is a JPEG, "
                    "which starts with {}: {}{}; {}".format(
                        what, counted(len(picked), "file"), SAMPLE_PER_CLASS,
                        min(classes, SAMPLE_CLASSES), " of its {}".format(classes)
                        if classes > SAMPLE_CLASSES else "", "es" if classes > 1 else "",
                        JPEG_START.hex(" "), "; ".join(bad[:3]), " …" if len(bad) > 3 else "", LAYOUT))


def _is(entry: os.DirEntry, folder: bool) -> bool:
    """Whether the entry is a folder (else: a file), links followed; a link that leads nowhere
    (a loop, a dangling link) is neither, like a file that is not there."""
    try:
        return entry.is_dir() if folder else entry.is_file()
    except OSError:  # ELOOP: a link to itself
        return False


def check_jpeg(path: str) -> Optional[str]:
    """Why the file is not a usable JPEG, or None: it has a JPEG frame header and decodes
    (Pillow, at 1/8 scale: every entropy-coded byte is still read, so truncation shows)."""
    from PIL import Image
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        return "unreadable: {}".format(exc.strerror or exc)
    if dataset.jpeg_size(data) is None:
        return "not a JPEG (no JPEG frame header)"
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.draft("RGB", (max(1, im.width // 8), max(1, im.height // 8)))
            im.load()
    except Exception as exc:  # Pillow raises OSError, SyntaxError, ValueError for bad data
        return "does not decode: {}".format(str(exc) or type(exc).__name__)
    return None


def _writable_dir(root: str) -> str:
    """Where the prepared side lives: an existing manifest's folder, else beside the images when
    the folder is writable, else the cache."""
    for path in dataset.candidates(root):
        if os.path.isfile(os.path.join(path, dataset.MANIFEST)):
            return path
    beside, cached = dataset.candidates(root)
    return beside if os.access(root, os.W_OK) else cached


def _previous(path: str) -> Dict[str, Tuple[int, int, Optional[str]]]:
    """relative path -> (size, mtime_ns, reason or None) from the last manifest, to re-check only
    what changed."""
    try:
        out = {rel: (size, mtime, None)
               for rel, _, size, mtime in dataset.read_file_list(dataset.file_list_path(path))}
        with open(os.path.join(path, dataset.MANIFEST)) as f:
            out.update({bad["path"]: (bad["size"], bad["mtime_ns"], bad["reason"])
                        for bad in json.load(f).get("corrupt", [])})
    except (OSError, ValueError, KeyError):
        return {}
    return out


def check(folder: Folder, advance: Callable[[int], None] = lambda n: None,
          total: Callable[[int], None] = lambda n: None) -> dataset.Prepared:
    """Write (or reuse) the folder's manifest and file list. total(n): n files to check;
    advance(k): k more checked."""
    where = _writable_dir(folder.root)
    with contextlib.suppress(OSError, ValueError, KeyError):
        prepared = dataset.Prepared(where)
        # a folder moved with its .compare inside keeps its files' fingerprint, not its root
        if prepared.fingerprint == folder.fingerprint and prepared.root == folder.root:
            return prepared
    previous = _previous(where)
    todo = [e for e in folder.entries if previous.get(e[0], (None, None))[:2] != (e[2], e[3])]
    total(len(todo))
    unchanged = {e[0] for e in folder.entries} - {e[0] for e in todo}
    reasons = {rel: previous[rel][2] for rel in unchanged}
    paths = [os.path.join(folder.root, e[0]) for e in todo]
    # spawn, not fork: the progress bar's refresh thread runs in this process
    pool = ProcessPoolExecutor(mp_context=multiprocessing.get_context("spawn")) \
        if len(todo) > PARALLEL_CHECK else None
    with pool or contextlib.nullcontext():
        found = pool.map(check_jpeg, paths, chunksize=256) if pool else map(check_jpeg, paths)
        for e, why in zip(todo, found):
            reasons[e[0]] = why
            advance(1)
    return _write_manifest(where, folder, reasons)


def _write_manifest(where: str, folder: Folder, reasons: Dict[str, Optional[str]]
                    ) -> dataset.Prepared:
    from PIL import __version__ as pillow
    os.makedirs(where, exist_ok=True)
    good = [e for e in folder.entries if reasons[e[0]] is None]
    dataset.write_file_list(where, good)
    corrupt = [{"path": e[0], "size": e[2], "mtime_ns": e[3], "reason": reasons[e[0]]}
               for e in folder.entries if reasons[e[0]] is not None]
    write_json_atomic(os.path.join(where, dataset.MANIFEST), {
        "kind": "compare-data", "root": folder.root, "class_root": folder.class_root,
        "fingerprint": folder.fingerprint, "classes": len(folder.classes),
        "class_names": folder.classes, "images": len(good),
        "bytes": sum(e[2] for e in good), "corrupt": corrupt,
        "checked_with": "Pillow {} (decode at 1/8 scale)".format(pillow)})
    return dataset.Prepared(where)


def counted(n: int, one: str, many: str = "") -> str:
    """3, 'JPEG' -> '3 JPEGs'; 1, 'class', 'classes' -> '1 class'."""
    return "{} {}".format(n, one if n == 1 else many or one + "s")


def summary(prepared: dataset.Prepared) -> str:
    m = prepared.manifest
    corrupt = m.get("corrupt", [])
    text = "{}: {} in {}, {:.1f} MB; {} corrupt (skipped)".format(
        m["root"], counted(m["images"], "JPEG"), counted(m["classes"], "class", "classes"),
        m["bytes"] / 1e6, len(corrupt))
    if corrupt:  # a line break in a file's name is shown, not made: this is one line
        text += ": " + "; ".join("{} ({})".format(one_line(c["path"]), one_line(c["reason"]))
                                 for c in corrupt[:5])
        text += " …" if len(corrupt) > 5 else ""
    return text


def for_run(dirs: Sequence[str], frameworks: Sequence[Framework], console,
            writer: Writer, global_batch: int = 0, workers: int = 1,
            accuracy: bool = False, named: Tuple[str, str] = ("--data", "--batch-size")
            ) -> List[dataset.Prepared]:
    """Before a sweep: check each real-data folder, and write the formats its frameworks lack.
    A folder with fewer usable images than the largest global batch (`workers` of them) is said
    to repeat them; for time to accuracy (`accuracy`) it is refused: its epochs would be no step.
    `named`: the data and batch size settings as the study names them (a campaign file's keys)."""
    def log(text: str) -> None:
        console.print(text, soft_wrap=True)  # paths and reasons stay on one line
    out = []
    for d in dirs:
        prepared = checked(open_folder(d), console)
        log("data: " + summary(prepared))
        images = prepared.manifest["images"]
        if images < global_batch and accuracy:  # corrupt files the plan's count included
            raise too_few_to_train("{} {}".format(named[0], d), prepared.manifest.get("class_root")
                                   or prepared.root, images, global_batch, workers, named[1])
        if accuracy and prepared.manifest["classes"] < 2:
            raise one_class("{} {}".format(named[0], d), prepared.manifest.get("class_root")
                            or prepared.root)
        if images < global_batch:
            log("warning: {} holds {} usable image{}, fewer than a global batch of {}: every step "
                "repeats images, so the input pipeline decodes fewer distinct files than real data "
                "would".format(d, images, "s" if images != 1 else "", global_batch))
        for name, why in prepare_formats(prepared, frameworks, log, console, writer).items():
            log("warning: {}: {}; its real-data cells will fail".format(name, why))
        out.append(prepared)
        # val/ is time to accuracy's alone: a throughput run reads train/ (ImageNet's flat val/
        # beside it is no fault of its)
        out += [checked_held_out(prepared, console, log)] if accuracy and held_out(d) else []
    return out


def jpegs_up_to(root: str, most: int) -> int:
    """The JPEG files in root's class folders (as open_folder finds them), counted up to `most`:
    enough to tell whether a folder holds a global batch without listing ImageNet."""
    found = 0
    for c in os.scandir(root):
        if found >= most:
            break
        if _is(c, folder=True) and not c.name.startswith("."):
            found += sum(1 for e in os.scandir(c.path)
                         if e.name.lower().endswith(SUFFIXES) and _is(e, folder=False))
    return found


@functools.lru_cache(maxsize=None)
def jpeg_count(root: str) -> int:
    """All the JPEG files in root's class folders (0 where root is no folder), counted once per
    process: the plan's time-to-accuracy line and its ETA both ask of DIR/train, which on
    ImageNet is a walk of 1.28 million files."""
    return jpegs_up_to(root, 1 << 62) if os.path.isdir(root) else 0


def too_few_to_train(what: str, train: str, images: int, global_batch: int,
                     workers: int, batch: str = "--batch-size") -> UserError:
    """Time to accuracy on fewer training images than a global batch: its epochs would be no step
    (the backend's DataError, said before a cell runs). `batch`: the batch size setting as the
    study names it (--batch-size, or a campaign file's batch_size)."""
    return UserError("{}: {} holds {} training image{}, fewer than the global batch of {} ({} x "
                     "{} worker{}): time to accuracy's epochs would be no step; give a {} "
                     "of at most {}, or a folder with more images".format(
                         what, train, images, "" if images == 1 else "s", global_batch,
                         global_batch // workers, workers, "" if workers == 1 else "s", batch,
                         max(1, images // workers)))


def one_class(what: str, train: str) -> UserError:
    """Time to accuracy on one class: every prediction is that class, so top-1 is 1.0 at the
    first evaluation whatever the network learns (a target "reached" in one epoch, and a log
    mlperf-logging's checker rejects: every eval_accuracy 1.0)."""
    return UserError("{}: {} holds 1 class: top-1 over one class is 1.0 at the first evaluation, "
                     "whatever the network learns; time to accuracy needs 2 classes or more "
                     "(`compare data make DIR --learnable small` makes 10)".format(what, train))


def held_out(root: str) -> Optional[str]:
    """DIR/val where DIR holds train/ and val/ (time to accuracy evaluates on it), else None."""
    train, val = os.path.join(root, "train"), os.path.join(root, "val")
    return val if os.path.isdir(train) and os.path.isdir(val) else None


def checked_held_out(train: dataset.Prepared, console, log: Log = lambda text: None,
                     what: str = "--data") -> dataset.Prepared:
    """Check DIR/val like DIR (its own manifest in DIR/val/.compare; every framework reads it as
    JPEGs, so no native format is written); a UserError when it names a class train/ lacks.
    what: the setting or command a message names the folder by (`compare data prepare`)."""
    try:
        val = checked(open_held_out(train.root, what), console)
    except UserError as exc:  # none of val/'s files usable: val/'s layout, as open_held_out says
        raise _val_layout(exc) from None
    check_val_classes(val.root, val.manifest["class_names"], train.manifest["class_names"],
                      train.manifest["class_root"])
    log("data (held out): " + summary(val))
    return val


def open_held_out(root: str, what: str = "--data") -> Folder:
    """open_folder(root/val) and check_sample, a UserError giving val/'s layout (the plan's check
    and prepare's, each naming the folder as its command does: `what`)."""
    try:
        val = open_folder(os.path.join(root, "val"), what)
        check_sample(val, what + " " + os.path.join(root, "val"))
        return val
    except UserError as exc:
        raise _val_layout(exc) from None


def _val_layout(exc: UserError) -> UserError:
    """A UserError of DIR/val with val/'s layout as its hint, where the folder checks give
    train/'s."""
    text = str(exc)
    return exc if text.endswith(VAL_LAYOUT) else UserError(text.split("; " + LAYOUT)[0] + "; " + VAL_LAYOUT)


def check_val_classes(val_root: str, val_classes, train_classes, class_root: str) -> None:
    """A UserError where val/ names a class train/ lacks (the plan's check and prepare's)."""
    unknown = sorted(set(val_classes) - set(train_classes))
    if unknown:
        raise UserError("{}: class folders {} are not in {}; val/ must name train/'s classes".format(
            val_root, ", ".join(unknown[:5]), class_root))


def checked(folder: Folder, console) -> dataset.Prepared:
    """check() with a progress bar while files are being checked; a UserError when not one of
    the folder's JPEG files can be used."""
    # disabled where not a terminal: it leaves a blank line there
    with progress_bar(console, "checking JPEGs", disable=not console.is_terminal) as p:
        task = p.add_task("", total=None)
        prepared = check(folder, advance=lambda n: p.advance(task, n),
                         total=lambda n: p.update(task, total=n))
    if not prepared.manifest["images"]:
        bad = prepared.manifest.get("corrupt", [])
        raise UserError("{}: none of its {} JPEG file{} can be used ({}{}); {}".format(
            folder.root, len(bad), "s" if len(bad) != 1 else "", "; ".join(
                "{}: {}".format(one_line(c["path"]), c["reason"]) for c in bad[:3]),
            " …" if len(bad) > 3 else "", LAYOUT))
    return prepared


def beside(prepared: dataset.Prepared) -> bool:
    """Whether the prepared side lies in the folder (DIR/.compare), not in the cache."""
    return prepared.path == os.path.join(prepared.root, dataset.PREPARED)


@dataclass
class Mount:
    """A bind mount of a container: a host folder seen at `container` inside."""
    host: str
    container: str
    read_only: bool = True

    def record(self) -> Dict[str, str]:
        return {"host": self.host, "container": self.container,
                "mode": "ro" if self.read_only else "rw"}


def mounts(prepared: dataset.Prepared, cache_in: Optional[str] = None,
           write: bool = False) -> Tuple[List[Mount], Dict[str, str]]:
    """(mounts, environment) that let a container read a data folder where it is here: the folder
    at its own path, read-only (the manifest and the runs name files by that path), and its
    prepared side. That lies inside the folder (nothing more to mount; a writer gets it writable),
    or in the cache (a read-only folder): then mounted under cache_in (None: at its own path),
    COMPARE_CACHE pointing there. Read-write only for a writer."""
    out = [Mount(prepared.root, prepared.root)]
    if beside(prepared):
        return out + ([Mount(prepared.path, prepared.path, read_only=False)] if write else []), {}
    cache = dataset.cache_root()
    inside = os.path.join(cache_in or cache, os.path.relpath(prepared.path, cache))
    return out + [Mount(prepared.path, inside, read_only=not write)], \
        {"COMPARE_CACHE": cache_in or cache}
