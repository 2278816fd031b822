"""Writing the files compare owns — a campaign's (lock, specs, results, logs, report, work, code)
and the report files it is told to write — never through a link, never in place.

Below the folder the user named (`base`: a campaign, an --out folder), every folder is opened
with O_NOFOLLOW and every file is created with O_EXCL in a folder held open: a symbolic link, a
FIFO or a folder where compare writes a file is one line (UserError, exit 2) and the thing it
points to is never touched. A file is written to a temp name beside it (`.tmp-*`, which readers
skip) and renamed over the old one, so a reader or a crash sees the old file or the new one,
never half of one. An OS error (no space, read-only, permission) is one line naming the path
and what to do; what was written before stays whole.

Locks: `lock_folder` takes an advisory flock on the campaign folder itself, so a dead holder
frees it (the kernel drops it) and no file can be deleted to let a second writer in.
"""
import contextlib
import errno
import fcntl
import json
import os
import re
import secrets
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Union

from .errors import UserError

TMP_PREFIX = ".tmp-"
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# what to do about an OS error, by errno; the message names the path and the error itself
ADVICE = {
    errno.ENOSPC: "free space, then run again (a campaign continues with --resume)",
    errno.EDQUOT: "free space within your quota, then run again (a campaign continues with --resume)",
    errno.EROFS: "the file system is read-only; give a folder on a writable one",
    errno.EACCES: "give a folder you can write, or change its permissions",
    errno.EPERM: "give a folder you can write, or change its permissions",
    errno.ENOTDIR: "a part of the path is a file, not a folder; give another path",
    errno.ENAMETOOLONG: "the name is too long for the file system; give a shorter path",
    errno.EMFILE: "too many open files; raise the limit (ulimit -n), then run again",
}


def short(path: Union[str, Path]) -> str:
    """A path as a one-line message shows it: a long one cut in the middle."""
    text = str(path)
    return text if len(text) <= 160 else text[:80] + "…" + text[-60:]


class PathError(UserError):
    """An OS error on a path compare writes, in words (os_error): user_path names the flag that
    gave the path before it."""


def os_error(exc: OSError, path: Union[str, Path], verb: str = "write") -> UserError:
    """The one-line UserError for an OS error on `path`: what happened, what to do. A failed
    copy (shutil.Error: a list of failures, as text) is said by its first failure."""
    code, strerror = exc.errno, exc.strerror or str(exc)
    # a name relative to a folder held open (a temp name) says less than the file it stands for
    where = exc.filename if exc.filename and os.sep in str(exc.filename) else path
    if isinstance(exc, shutil.Error):
        found = re.search(r"\[Errno (\d+)\]", str(exc.args[0][:1] if exc.args else ""))
        code = int(found.group(1)) if found else None
        strerror, where = os.strerror(code) if code else "the copy failed", path
    advice = ADVICE.get(code, "check the path, then run again")
    return PathError("cannot {} {} ({}); {}".format(verb, short(where), strerror, advice))


def check_writable_dir(path: Path, option: str) -> None:
    """A folder that is, or can be made, writable: else one UserError line naming `option`."""
    try:
        if path.is_symlink() and not path.exists():  # nothing can be made through it
            raise UserError("{} {}: a symbolic link to {}, which is not there; give a folder, or make "
                            "the one it names".format(option, path, os.readlink(str(path))))
        if path.exists() and not path.is_dir():
            raise UserError("{} {}: is a file, not a folder; give a folder path".format(option, path))
        parent = path if path.exists() else next((p for p in path.parents if p.exists()), Path("."))
        if not parent.is_dir():
            raise UserError("{} {}: {} is a file, not a folder; give a folder path".format(
                option, path, parent))
        if not os.access(str(parent), os.W_OK | os.X_OK):
            read_only = os.statvfs(str(parent)).f_flag & os.ST_RDONLY
            raise UserError("{} {}: {} is {}; give a folder {}".format(
                option, path, parent, "on a read-only file system" if read_only else "not writable",
                "on a writable one" if read_only else "you can write"))
        _probe(parent, path, option)
    except OSError as exc:  # e.g. a name longer than the file system allows
        raise UserError("{} {}: {}; give another folder".format(
            option, short(path), exc.strerror or exc)) from None


def _probe(parent: Path, path: Path, option: str) -> None:
    """Make and remove a folder in `parent`, where os.access cannot tell (root in /proc, a FUSE
    mount): the line a write would give, said before anything is made (a --plan makes nothing)."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=TMP_PREFIX, dir=str(parent)))
    except OSError as exc:
        raise UserError("{} {}: cannot {} ({}); give a folder you can write".format(
            option, short(path), "write in it" if parent == path else "create the folder",
            exc.strerror or exc)) from None


@contextlib.contextmanager
def user_path(path: Path, option: str) -> Iterator[None]:
    """An OS error while writing under a path the user gave (disk full, read-only, gone) is one
    UserError line naming the option, the path and what to do; what was written before stays."""
    try:
        yield
    except OSError as exc:
        raise UserError("{} {}: {}".format(option, short(path), os_error(exc, path))) from None
    except PathError as exc:  # said by files.py already, the option not named
        raise UserError("{} {}: {}".format(option, short(path), exc)) from None


def _refuse(path: Path, mode: int, want_dir: bool = False) -> UserError:
    if stat.S_ISLNK(mode):
        return UserError("{}: is a symbolic link; compare never writes through a link inside a "
                         "campaign: remove it, then run again".format(short(path)))
    kind = ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else
            "a socket" if stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode) or
            stat.S_ISBLK(mode) else "a file")
    return UserError("{}: is {}, not a {}; remove it, then run again".format(
        short(path), kind, "folder" if want_dir else "file"))


def _within(path: Path, base: Path) -> Path:
    """path relative to base ('' when they are the same folder); ValueError if not below it."""
    rel = os.path.relpath(os.path.abspath(str(path)), os.path.abspath(str(base)))
    if rel == os.curdir:
        return Path()
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        raise ValueError("{} is not inside {}".format(path, base))
    return Path(rel)


def _open_base(base: Path, create: bool) -> int:
    """The folder the user named, links followed (the user chose that path); FileNotFoundError
    when it is missing and not to be made."""
    try:
        if create:
            os.makedirs(str(base), exist_ok=True)
        return os.open(str(base), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        if create:
            raise os_error(OSError(errno.ENOENT, os.strerror(errno.ENOENT)), base) from None
        raise
    except NotADirectoryError:
        raise UserError("{}: is a file, not a folder; give a folder path".format(
            short(base))) from None
    except OSError as exc:
        raise os_error(exc, base) from None


def _step(parent: int, name: str, path: Path, create: bool) -> int:
    """The folder `name` in the open folder `parent`, not through a link (made if `create`)."""
    for _ in range(2):
        try:
            return os.open(name, _OPEN_DIR, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise
            try:
                os.mkdir(name, 0o777, dir_fd=parent)
            except FileExistsError:
                continue  # made meanwhile (another cell): open it
            except OSError as exc:
                raise os_error(exc, path) from None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise _refuse(path, os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode,
                              want_dir=True) from None
            raise os_error(exc, path) from None
    return os.open(name, _OPEN_DIR, dir_fd=parent)


@contextlib.contextmanager
def folder(path: Path, base: Optional[Path] = None, create: bool = True) -> Iterator[int]:
    """An fd of the folder `path` (made if missing and `create`, else FileNotFoundError), opened
    without following a link below `base` (default: path itself); closed after. UserError for
    a link or a file in the way."""
    path = Path(path)
    base = Path(base) if base is not None else path
    fd = _open_base(base, create)
    try:
        here = base
        for part in _within(path, base).parts:
            here = here / part
            inner = _step(fd, part, here, create)
            os.close(fd)
            fd = inner
        yield fd
    finally:
        os.close(fd)


def _expect(dirfd: int, path: Path, want_dir: bool = False) -> bool:
    """True when `path` (a name in dirfd) is a regular file (a folder, with `want_dir`), False
    when absent; else UserError (a link is refused, never followed)."""
    try:
        mode = os.stat(path.name, dir_fd=dirfd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return False
    if not (stat.S_ISDIR(mode) if want_dir else stat.S_ISREG(mode)):
        raise _refuse(path, mode, want_dir)
    return True


def check_files(where: Path, names, base: Path, folders: bool = False) -> None:
    """Each of `names` in the folder `where` is absent or a regular file (a folder, with
    `folders`), and no link or file is in the way below `base`: else UserError, before anything
    is written. A folder that is missing is not made."""
    try:
        with folder(where, base, create=False) as fd:
            for name in names:
                _expect(fd, Path(where) / name, want_dir=folders)
    except FileNotFoundError:
        return


def write_bytes(path: Path, data: bytes, base: Optional[Path] = None) -> None:
    """Replace the file at `path` by one holding `data`: written to a temp name beside it, then
    renamed. UserError (one line) for a link or non-regular file there, or an OS error."""
    path = Path(path)
    with folder(path.parent, base) as fd:
        _expect(fd, path)
        tmp = "{}{}-{}{}".format(TMP_PREFIX, os.getpid(), secrets.token_hex(4), path.suffix)
        try:
            out = os.open(tmp, _NEW_FILE, 0o666, dir_fd=fd)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(out, view):]
            finally:
                os.close(out)
            os.replace(tmp, path.name, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException as exc:  # the temp file goes, whatever stopped the write
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=fd)
            if isinstance(exc, OSError):
                raise os_error(exc, path) from None
            raise


def write_text(path: Path, text: str, base: Optional[Path] = None) -> None:
    write_bytes(path, text.encode("utf-8"), base)


def write_json(path: Path, data: Any, base: Optional[Path] = None) -> None:
    """As backends.protocol.write_json_atomic writes it (sorted keys, indent 2, a last newline)."""
    write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n", base)


def new_file(path: Path, base: Optional[Path] = None):
    """A new, empty regular file at `path` (an old one replaced), open for writing: a process's
    log. Created with O_EXCL in its folder, so no link is followed even if one appears."""
    path = Path(path)
    with folder(path.parent, base) as fd:
        try:
            if _expect(fd, path):
                os.unlink(path.name, dir_fd=fd)
            out = os.open(path.name, _NEW_FILE, 0o666, dir_fd=fd)
        except FileExistsError:  # something appeared between the unlink and the open
            raise _refuse(path, os.stat(path.name, dir_fd=fd, follow_symlinks=False).st_mode) \
                from None
        except OSError as exc:
            raise os_error(exc, path) from None
    return os.fdopen(out, "w")


def append_text(path: Path, text: str, base: Optional[Path] = None) -> None:
    """Add `text` at the end of the regular file `path` (made if missing), never through a link."""
    path = Path(path)
    with folder(path.parent, base) as fd:
        _expect(fd, path)
        try:
            out = os.open(path.name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW |
                          os.O_CLOEXEC, 0o666, dir_fd=fd)
            try:
                if not stat.S_ISREG(os.fstat(out).st_mode):
                    raise _refuse(path, os.fstat(out).st_mode)
                os.write(out, text.encode("utf-8"))
            finally:
                os.close(out)
        except OSError as exc:
            raise os_error(exc, path) from None


def move(source: Path, dest: Path, base: Path) -> None:
    """Rename the regular file `source` to `dest`, both below `base`, replacing a regular file."""
    source, dest = Path(source), Path(dest)
    with folder(source.parent, base, create=False) as src, folder(dest.parent, base) as dst:
        if not _expect(src, source):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(source))
        _expect(dst, dest)
        try:
            os.replace(source.name, dest.name, src_dir_fd=src, dst_dir_fd=dst)
        except OSError as exc:
            raise os_error(exc, dest) from None


def copy_folder(source: Path, dest: Path, base: Path) -> None:
    """The folder `source` copied to `dest` (below `base`) once: made aside in dest's folder and
    renamed into place, so a reader (a cell starting meanwhile) never sees half of it, and a
    failed copy (a full disk) leaves nothing behind."""
    dest = Path(dest)
    with folder(dest.parent, base) as fd:
        if _expect(fd, dest, want_dir=True):
            return
    aside = None
    try:
        aside = Path(tempfile.mkdtemp(prefix=TMP_PREFIX, dir=str(dest.parent)))
        shutil.copytree(str(source), str(aside / dest.name),
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        os.rename(str(aside / dest.name), str(dest))
    except OSError as exc:
        if not (dest.is_dir() and not dest.is_symlink()):  # not another cell's copy that came first
            raise os_error(exc, dest) from None
    finally:
        if aside is not None:
            shutil.rmtree(str(aside), ignore_errors=True)


def _remove_tree(parent: int, name: str) -> None:
    """Remove the folder `name` of `parent` and all it holds, following no link (a link inside
    is removed, not what it points to)."""
    fd = os.open(name, _OPEN_DIR, dir_fd=parent)
    try:
        with os.scandir(fd) as entries:
            for entry in list(entries):
                if entry.is_dir(follow_symlinks=False):
                    _remove_tree(fd, entry.name)
                else:
                    os.unlink(entry.name, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent)


def fresh_folder(path: Path, base: Path) -> Path:
    """The folder `path` made empty (what it held removed, no link followed), or made."""
    path = Path(path)
    with folder(path.parent, base) as fd:
        found = _expect(fd, path, want_dir=True)
        try:
            if found:
                _remove_tree(fd, path.name)
            os.mkdir(path.name, 0o777, dir_fd=fd)
        except OSError as exc:
            raise os_error(exc, path) from None
    return path


def remove_files(path: Path, base: Path, stale: Callable[[str], bool]) -> None:
    """Remove the regular files of the folder `path` whose names are `stale` (an earlier report's
    tables that this one does not have); nothing else, no link followed. A folder that is not
    there, or a link or a file in its place, has none to remove (it is not one of ours)."""
    with contextlib.ExitStack() as stack:
        try:
            fd = stack.enter_context(folder(path, base, create=False))
        except (FileNotFoundError, UserError):
            return
        for name in os.listdir(fd):
            if stale(name) and stat.S_ISREG(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                try:
                    os.unlink(name, dir_fd=fd)
                except OSError as exc:
                    raise os_error(exc, Path(path) / name) from None


def remove_stale_temps(path: Path, base: Path) -> None:
    """Remove the temp files (`.tmp-*`) a killed writer left in the folder `path`; call only
    while no other process writes there (the campaign's lock held)."""
    try:
        with folder(path, base, create=False) as fd:
            for name in os.listdir(fd):
                if name.startswith(TMP_PREFIX):
                    with contextlib.suppress(OSError):
                        os.unlink(name, dir_fd=fd)
    except (UserError, OSError):
        return  # not there (an older campaign), or not ours: nothing to tidy


def lock_folder(path: Path) -> Optional[int]:
    """An fd holding an exclusive flock on the folder `path` itself, or None when another
    process holds it. Released when the fd is closed or its process ends, however it ends."""
    try:
        fd = os.open(str(path), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise os_error(exc, path, "open") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except OSError as exc:
        os.close(fd)
        raise UserError("{}: cannot lock the folder ({}); compare needs a file system with "
                        "flock locks (a local disk, or NFS with locking)".format(
                            short(path), exc.strerror or exc)) from None
    return fd


def lock_holder(path: Path) -> Optional[int]:
    """The PID holding a flock on `path`, from the kernel's table of locks (/proc/locks); None
    where it cannot be told."""
    try:
        st = os.stat(str(path))
        with open("/proc/locks") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    device = "{:02x}:{:02x}:{}".format(os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    found = {}
    for line in lines:  # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; "1: -> FLOCK": a waiter
        fields = line.split()
        if len(fields) >= 8 and fields[1] == "FLOCK" and fields[5].endswith(":" + str(st.st_ino)):
            found[fields[5] == device] = int(fields[4]) if fields[4].isdigit() else None
    return found.get(True, found.get(False))
