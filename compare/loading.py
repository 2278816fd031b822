"""Reading files compare may not have written itself (a backend's result, a hand-edited or a
foreign one, a campaign's own files): only regular files of bounded size, opened without blocking;
JSON that is nested too deeply or holds NaN is corrupt; a result is validated (validate.py) and
its text made safe to print. The one loader of results: `compare run` (resume, its report),
report, diff, history and check all read through load_result.
"""
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from backends.contract import RunResult, SchemaError

from . import validate

# terminal escape sequences (CSI, OSC, two-byte) and the other control characters, which must
# never reach a terminal or a report from a backend's stderr or a hand-edited file
_ESCAPES = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
TABLE_TEXT = ("reason", "framework_version", "device_name", "distribution")  # shown in tables
MAX_RESULT_BYTES = 16 * 2 ** 20  # a result is a few KB; its largest part, a stderr tail, 4,000 chars
MAX_CAMPAIGN_BYTES = 64 * 2 ** 20  # campaign.json grows with the plan (<= 10,000 cells) and sessions


def clean_text(text: str) -> str:
    """Escape sequences removed, carriage returns made newlines, other control characters
    shown as \\xNN; newlines and tabs kept."""
    text = _ESCAPES.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub(lambda m: "\\x{:02x}".format(ord(m.group())), text)


def read_bounded(path: Path, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, else SchemaError saying what it is.
    Opened without blocking (a FIFO would wait for a writer forever) and checked once open."""
    try:
        fd = os.open(str(path), os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise SchemaError("cannot open it ({})".format(exc.strerror or exc)) from None
    try:
        mode, size = os.fstat(fd).st_mode, os.fstat(fd).st_size
        if not stat.S_ISREG(mode):
            kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or
                    stat.S_ISBLK(mode) else "a folder" if stat.S_ISDIR(mode) else "a socket")
            raise SchemaError("not a regular file but {}; only regular files are read".format(kind))
        if size > limit:
            raise SchemaError("{} bytes, more than the {} such a file may have".format(size, limit))
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:
            raise SchemaError("grew past {} bytes while being read".format(limit))
        return b"".join(chunks)
    except OSError as exc:
        raise SchemaError("cannot read it ({})".format(exc.strerror or exc)) from None
    finally:
        os.close(fd)


def load_json(path: Path, limit: int) -> Any:
    """A JSON file (read_bounded), SchemaError for anything that is not readable JSON."""
    data = read_bounded(path, limit)
    try:
        return json.loads(data.decode("utf-8"))
    except ValueError as exc:
        raise SchemaError("not valid JSON ({})".format(exc)) from None
    except RecursionError:
        raise SchemaError("not valid JSON (nested too deeply to read)") from None


def load_result(path: Path) -> RunResult:
    """A result file, checked (SchemaError saying what is wrong) and with its text made safe to
    print: no control characters, and no `|` in what Markdown tables show. The one loader of
    results: `compare run` (resume, its report), report, diff, history and check read through it."""
    result = RunResult.from_dict(load_json(path, MAX_RESULT_BYTES))
    validate.result(result)
    for name in TABLE_TEXT + ("stderr_tail",):
        value = getattr(result, name)
        if value is not None:
            value = clean_text(value)
            setattr(result, name, value.replace("|", "¦") if name in TABLE_TEXT else value)
    return result
