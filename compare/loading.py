"""Reading files compare may not have written itself (a backend's result, a hand-edited or a
foreign one, a campaign's own files, a reference CSV): only regular files of bounded size, opened
without blocking; JSON with a key twice, an integer of more digits than any number a campaign file
holds, NaN or nesting too deep is corrupt; a result is validated (validate.py) and its text made
safe to print. The one loader: `compare run` (resume, --plan, its report), report, diff, history
and check read results through load_result, campaign.json and machine.json through load_json
(store.py), references through read_bounded (reporting/references.py).
"""
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, Dict, List, Tuple

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


def one_line(text: str) -> str:
    """A message as one line (compare: error: …, warning: …): a line break or tab, in a file
    name or a reason, shown as \\n or \\t; other control characters as \\xNN; escape
    sequences removed."""
    return clean_text(str(text)).replace("\n", "\\n").replace("\t", "\\t")


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


def _object(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    """A JSON object whose keys are each named once: of two values for one key, json would keep
    the second without a word."""
    out: Dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError("key {!r} appears twice in one object: which value holds is not "
                             "clear".format(key))
        out[key] = value
    return out


def _integer(text: str) -> Any:
    """An integer of JSON text; one longer than any number a campaign file holds is kept as its
    digit count (validate.plain names where it is): as an int it would take down whatever
    turned it into a float."""
    digits = len(text.lstrip("-"))
    return int(text) if digits <= validate.MAX_DIGITS else validate.Huge(digits)


def parse_json(text: str) -> Any:
    """JSON text as compare reads every campaign file: each key once, integers of bounded
    length, then validate.plain (no NaN or infinity, no deep nesting, no huge integer)."""
    try:
        data = json.loads(text, object_pairs_hook=_object, parse_int=_integer)
    except ValueError as exc:
        raise SchemaError("not valid JSON ({})".format(exc)) from None
    except RecursionError:
        raise SchemaError("not valid JSON (nested too deeply to read)") from None
    validate.plain(data)
    return data


def load_json(path: Path, limit: int) -> Any:
    """A JSON file (read_bounded, parse_json), SchemaError saying what is wrong with it."""
    data = read_bounded(path, limit)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SchemaError("not valid JSON (not UTF-8 text: {})".format(exc.reason)) from None
    return parse_json(text)


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
