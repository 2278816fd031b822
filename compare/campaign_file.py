"""A campaign file (`compare run --config study.toml`): its keys, as given, for study.build to
type. A key is a setting's name (underscores or dashes); a relative path is taken from the file's
folder; anything else is one line naming the file and the key."""
import datetime
import json
import os
import re
from pathlib import Path
from typing import Any, Dict

import tomllib

from . import parsing as p
from .errors import UserError


def read(path: str, known: Dict[str, Any]) -> Dict[str, Any]:
    """A campaign file's settings as given (keys with underscores or dashes); one UserError line
    naming the file and the key for anything that is not a setting of `compare run`."""
    if not path.strip():  # '' would be no file at all: the default study, unsaid
        raise UserError("--config is empty; give a campaign file (a TOML file of compare run's "
                        "settings, e.g. study.toml)")
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8-sig"),  # TOML is UTF-8; a BOM
                             parse_float=Float)  # (as some editors write) is no statement
    except OSError as exc:
        said = {IsADirectoryError: "is a folder", FileNotFoundError: "no such file"}.get(
            type(exc), "cannot read it ({})".format(exc.strerror or exc))
        raise UserError("--config {}: {}; give a campaign file (a TOML file of compare run's settings, "
                        "e.g. study.toml)".format(path, said)) from None
    except UnicodeDecodeError as exc:
        raise UserError("--config {}: not a TOML file (byte {} is not UTF-8); save it as "
                        "UTF-8".format(path, exc.start + 1)) from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError("--config {}: not a TOML file ({})".format(path, exc)) from None
    out = {}
    for key, value in data.items():
        name = key.replace("-", "_")
        if name == "config":  # the one flag that is no key
            raise UserError("{}: {}: a campaign file cannot name another; give one --config, and "
                            "flags beside it".format(path, key))
        if name not in known:
            raise UserError("{}: unknown key {!r}; valid keys: {}".format(path, key, ", ".join(known)))
        if isinstance(value, dict):
            raise UserError("{}: {} is a table; give it a value, as the flag {} takes".format(
                path, key, known[name].flag))
        if name in out:  # image_size and image-size: the one read last would win unseen
            raise UserError("{}: {} is given twice (as {}); give it once".format(
                path, name, " and ".join(k for k in data if k.replace("-", "_") == name)))
        if name == "slurm_option" and isinstance(value, str) and SBATCH_PAIR.search(value):
            raise UserError("{}: {} {}: a string is one sbatch option, as --slurm-option takes it "
                            "(a value may hold commas and pairs: gpu-freq=medium,memory=high); give "
                            "a list: {} for several, {} for one".format(
                                path, key, toml(value), toml(SBATCH_PAIR.sub(r"\n\1", value).split(
                                    "\n")), toml([value])))
        out[name] = _rebase(name, value, Path(path).resolve().parent)
    return out


# a comma, then KEY= of an sbatch option's shape (slurm.OPTION_KEY): in slurm_option's string,
# two options or one value that holds a pair; only a list says which
SBATCH_PAIR = re.compile(r",\s*(-{0,2}[a-z][a-z0-9-]+=)")


class Float(float):
    """A campaign file's float, named in messages as the file writes it: 1e400 (which reads inf)
    and 0.0 (which equals 0) as typed, a digit separator (1_000.5) left out."""

    def __new__(cls, text: str) -> "Float":
        value = super().__new__(cls, text)
        value.text = text.replace("_", "")
        return value

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__


BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def toml(value: Any) -> str:
    """A value as a campaign file writes it (true, "cpu", [1, 2], {key = "x"}), for messages about
    a file's setting; a float as it was typed (Float), else as the flag takes it (0.5, 1e-05)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Float):
        return value.text
    if isinstance(value, float):
        return p.plain(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a TOML basic string: JSON's escapes
    if isinstance(value, (list, tuple)):
        return "[{}]".format(", ".join(toml(v) for v in value))
    if isinstance(value, dict):
        return "{{{}}}".format(", ".join("{} = {}".format(k if BARE_KEY.match(k) else toml(k), toml(v))
                                         for k, v in value.items()))
    if isinstance(value, (datetime.date, datetime.time)):  # datetime too
        return value.isoformat()
    return str(value)


def _rebase(name: str, value: Any, base: Path) -> Any:
    """A campaign file's relative paths, from the file's folder; a value that is no path (a list
    in a list: study._typed says so) as it is."""
    def at(x: Any) -> Any:
        if isinstance(x, (list, dict)):
            return x
        x = toml(x) if isinstance(x, bool) else str(x)  # a number too: a folder's name
        return str(base / os.path.expanduser(x.strip())) if x.strip() not in ("", "synthetic") else x
    if name in ("results", "plan_from"):
        return at(value)
    if name == "data":
        return [at(x) for x in (value if isinstance(value, list) else str(value).split(","))]
    if name == "python":  # a comma string as --python reads it (parsing.python); an item that
        # names no framework ('=x') as written: its message shows what the file says
        return [x.split("=", 1)[0] + "=" + at(x.split("=", 1)[1])
                if isinstance(x, str) and "=" in x and x.split("=", 1)[0].strip() else x
                for x in (value if isinstance(value, list) else p.split_at_keys(str(value), p.is_framework))]
    return value
