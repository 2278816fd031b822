"""How the text of a setting becomes its value: a flag as typed, or a campaign file's value made
text (compare/study.py declares which parser each setting takes and its bounds). Each parser is
(text, label, setting) -> value, where label names the value in messages (`--gpus`, or
`study.toml: gpus`); anything else is one UserError line saying what is valid.
"""
import math
import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from backends.contract import OptionError

from . import frameworks as fws
from .errors import UserError

AUTO = "auto"  # --batch-size auto: the batch is searched (batchsearch.py)
Setting = Any  # study.Setting: the bounds and rule a parser checks


def plain(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def as_text(value: Any) -> str:
    """A value as a flag's text: a boolean as TOML and campaign.json write it (true, not Python's
    True), anything else as str() gives it."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def bounded(v, label: str, s: Setting):
    if s.low is not None and v < s.low:
        raise UserError("{} {}: must be >= {}{}".format(label, v, plain(s.low), s.low_why))
    if s.high is not None and v > s.high:
        raise UserError("{} {}: must be <= {} ({})".format(label, plain(v), plain(s.high), s.why))
    return v


def whole(text: str, label: str, s: Setting) -> int:
    t = text.strip()
    if not (t.isascii() and t.lstrip("-").isdigit()):  # int() also reads 1_0 and ١٠
        raise UserError("{} {!r}: not an integer; give {}".format(label, t, (
            "integers >= {}, e.g. 1,2" if s.axis else "an integer >= {}").format(plain(s.low))))
    return bounded(int(t), label, s)


def number(text: str, label: str, s: Setting) -> float:
    t = text.strip()
    try:
        v = float(t) if t.isascii() and "_" not in t else None
    except ValueError:
        v = None
    if v is None:
        raise UserError("{} {!r}: not a number; give {}".format(label, t, s.rule))
    if not math.isfinite(v) or v <= s.low or (s.high is not None and v > s.high and not s.why):
        raise UserError("{} {}: must be {}".format(label, t, s.rule))  # as typed: 0, not 0.0
    return bounded(v, label, replace(s, low=None))


def listed(text: str, label: str, hint: str) -> List[str]:
    """'a, b' -> ['a', 'b']; one line for an empty list, an empty value in it (1,,2: a value
    was meant there) or a value given twice."""
    items = [x.strip() for x in str(text).split(",")]
    if not any(items):
        raise UserError("{} is empty; {}".format(label, hint))
    if not all(items):
        raise UserError("{} {}: an empty value in the list; {}".format(label, text, hint))
    twice = [x for i, x in enumerate(items) if x.lower() in (y.lower() for y in items[:i])]
    if twice:
        raise UserError("{} {}: {} is given twice; give each value once".format(label, text, twice[0]))
    return items


def once(values: Tuple, text: str, label: str, spelled: Sequence[str] = ()) -> Tuple:
    """values, parsed from text (each of `spelled`, as typed); one line where two are one value
    (1 and 01, caffe2 and its alias torch, a folder by two paths), naming both spellings."""
    for i, v in enumerate(values):
        if v in values[:i]:
            first = spelled[values.index(v)] if spelled else v
            raise UserError("{} {}: {} is given twice{}; give each value once".format(
                label, text, v, " (as {} and {})".format(first, spelled[i]) if spelled and
                first != spelled[i] else ""))
    return tuple(values)


def ints(text: str, label: str, s: Setting) -> Tuple[int, ...]:
    items = listed(text, label, "give one or more integers >= {}, e.g. 1,2".format(plain(s.low)))
    return once(tuple(whole(x, label, s) for x in items), text, label, items)


def choice(valid: Callable[[], List[str]], what: str, hint: str = "") -> Callable:
    """A parser of one value (or, for an axis, a list) out of valid()."""
    def parse(text: str, label: str, s: Setting):
        choose = "choose from {}".format(", ".join(valid()))
        items = listed(text, label, choose) if s.axis else [str(text).strip()]
        for x in items:
            if x.lower() not in valid():
                raise UserError("unknown {} {!r}; {}{}".format(what, x, choose, hint))
        return tuple(x.lower() for x in items) if s.axis else items[0].lower()
    return parse


def frameworks(text: str, label: str = "--frameworks", s: Optional[Setting] = None) -> Tuple[str, ...]:
    """'tf,torch' -> ('tf', 'caffe2'), in the given order; a framework named twice (by an alias
    too) is one line, as any comma list's value given twice (every command's --frameworks)."""
    items = listed(text, label, "choose from {}".format(fws.choices()))
    return once(tuple(fws.get(x).name for x in items), text, label, items)


def batches(text: str, label: str, s: Setting) -> Tuple:
    """'256,auto' -> (256, 'auto'): per-GPU batch sizes, `auto` for a searched one (last)."""
    items = [x.lower() for x in listed(text, label, "give one or more integers >= 1, e.g. 1,2")]
    bad = [x for x in items if x != AUTO and not (x.isascii() and x.lstrip("-").isdigit())]
    if bad:
        raise UserError("{} {!r}: not an integer or auto; give per-GPU batch sizes >= 1 and/or "
                        "auto, e.g. 256,auto".format(label, bad[0]))
    sizes = [x for x in items if x != AUTO]
    return once(tuple(bounded(int(x), label, s) for x in sizes), text, label, sizes) + (
        (AUTO,) if AUTO in items else ())


def search(text: str, label: str, s: Setting) -> Tuple[int, int]:
    low, sep, high = str(text).partition("-")
    try:
        bounds = (int(low), int(high)) if (low + high).isascii() else (0, 0)
    except ValueError:
        bounds = (0, 0)
    if not sep or bounds[0] < 1 or bounds[1] < bounds[0]:
        raise UserError("{} {!r}: give MIN-MAX, two per-GPU batch sizes with 1 <= MIN <= MAX, e.g. "
                        "64-1024".format(label, text))
    return bounded(bounds[0], label, s), bounded(bounds[1], label, s)


def data(text: str, label: str, s: Setting) -> Tuple[str, ...]:
    """synthetic and/or folders, each with class folders of files named as JPEGs, a sample of
    which starts as a JPEG does (datasets.check_sample: the run would refuse it)."""
    from .datasets import check_sample, open_folder

    def folder(x: str) -> str:
        found = open_folder(x, label)
        check_sample(found, "{} {}".format(label, x))
        return found.root
    items = listed(text, label, "give synthetic and/or a folder DIR/train/<class>/*.JPEG (`compare "
                   "data make DIR` makes one)")
    return once(tuple(x if x == "synthetic" else folder(x) for x in items), text, label, items)


def python(text: str, label: str, s: Setting) -> Tuple[str, ...]:
    """'caffe2=/a/python,jax=/b/python' -> both (absolute: backends run from work/<id>); a comma
    splits only before FRAMEWORK=, so a path may hold commas."""
    from .envs import parse_overrides
    out = []
    for item in split_at_keys(text, is_framework):
        try:
            ((name, path),) = parse_overrides([item]).items()
        except UserError as exc:  # named as given: a campaign file's key
            raise UserError(str(exc).replace("--python", label, 1)) from None
        out.append("{}={}".format(name, os.path.abspath(path)))
    return tuple(out)


def split_at_keys(text: str, starts: Callable[[str], bool]) -> List[str]:
    """text split at each comma that a KEY= with starts(KEY) follows; other commas kept."""
    first, *rest = text.split(",")
    items = [first]
    for piece in rest:
        if "=" in piece and starts(piece.partition("=")[0].strip()):
            items.append(piece.strip())
        else:
            items[-1] += "," + piece
    return items


def is_framework(name: str) -> bool:
    try:
        fws.get(name)
    except UserError:
        return False
    return True


def option(text: str, label: str, s: Setting) -> Tuple[str, ...]:
    """'channels_last=true,loader_workers=2' -> both, as a comma list of any other setting reads:
    split only where a comma is followed by a declared KEY= (or FRAMEWORK.KEY=), so a value that
    holds commas (jax's xla_flags=--a=X,Y) stays whole."""
    items = split_at_keys(text, _option_key)
    for item in items:
        key, sep, _ = item.partition("=")
        if not sep or not key:
            raise UserError("{} {!r}: expected KEY=VALUE, e.g. channels_last=true".format(label, item))
    return tuple(items)


def _option_key(key: str) -> bool:
    """Whether `key` is a backend's declared option key, bare or FRAMEWORK.KEY."""
    scope, dot, bare = key.rpartition(".")
    try:
        owners = [fws.get(scope)] if dot else fws.FRAMEWORKS
    except UserError:
        return False
    return any(bare in {o.key for o in fw.options()} for fw in owners)


def concurrency(text: str, label: str, s: Setting) -> Optional[int]:
    t = str(text).strip().lower()
    if t == AUTO:
        return None
    if not (t.isascii() and t.isdigit()) or int(t) < 1:
        raise UserError("{} {!r}: give auto or a count of cells at once >= 1".format(label, text))
    return int(t)


def folder(text: str, label: str, s: Setting) -> str:
    given(text, label, "give the folder that holds earlier campaigns (default results)")
    if not Path(text).is_dir():
        raise UserError("{} {}: {}; give the folder that holds earlier campaigns (default "
                        "results)".format(label, text, "is a file, not a folder" if
                                          Path(text).exists() else "no such folder"))
    return os.path.abspath(text)


def as_given(text: str, label: str, s: Setting) -> str:
    """A path as typed (the campaign file: messages name it as the user gave it)."""
    return text


def path(text: str, label: str, s: Setting) -> str:
    return os.path.abspath(given(text, label, "give a folder path (default results/<time>)"))


def given(text: str, label: str, hint: str) -> str:
    """A path as typed, refused where empty (`--out is empty; give …`, `compare report: CAMPAIGN
    is empty; give …`): typer and Path read '' as the current folder, a folder no one named."""
    if not text:
        raise UserError("{} is empty; {}".format(label, hint))
    return text


def options(items, frameworks: List[fws.Framework], label: str = "--option", kept: bool = False,
            named: str = "--frameworks") -> Dict[str, Dict[str, Any]]:
    """['channels_last=false', 'tf.xla=true'] -> {framework: {key: typed value}}.

    A plain KEY goes to every framework of the run that declares it (and must be declared by one);
    FRAMEWORK.KEY to that framework only. Values are checked against the declaration; a key given
    twice for one framework is one line (the last would win unseen). `label` names them in a
    message: the flag, or `study.toml: option` for a campaign file's. `kept`: the options a resumed
    campaign holds (checked when it began), where an option of a framework the resume leaves out
    is left out too. `named`: the frameworks setting as the study names it (a file's key).
    """
    out: Dict[str, Dict[str, Any]] = {fw.name: {} for fw in frameworks}
    for item in items:
        key, _, value = item.partition("=")
        scope, dot, bare = key.rpartition(".")
        targets = frameworks
        if dot:
            try:
                fw = fws.get(scope)
            except UserError as exc:  # named with the option it scopes
                raise UserError("{} {}: {}".format(label, item, exc)) from None
            if fw not in frameworks and kept:
                continue
            if fw not in frameworks:
                raise UserError("{} {}: {} is not in this run's {} ({})".format(
                    label, item, fw.name, named, ", ".join(f.name for f in frameworks)))
            targets, key = [fw], bare
        takers = [fw for fw in targets if key in {o.key for o in fw.options()}]
        if not takers and kept:
            continue
        if not takers:
            valid = "; ".join("{}: {}".format(fw.name, ", ".join(sorted(o.key for o in fw.options())))
                              for fw in targets)
            raise UserError("{} {}: unknown key {!r} for {}; valid keys: {}".format(
                label, item, key, ", ".join(fw.name for fw in targets), valid))
        for fw in takers:
            if key in out[fw.name]:
                raise UserError("{} {}: {} is given twice for {}; give each key once".format(
                    label, item, key, fw.name))
            declared = {o.key: o for o in fw.options()}
            try:
                out[fw.name][key] = declared[key].parse(value)
            except OptionError as exc:  # named as given: FRAMEWORK.KEY where it was scoped
                raise UserError("{} {}{}".format(label, scope + "." if dot else "", exc)) from None
    return out
