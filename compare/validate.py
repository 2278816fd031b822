"""Checks of a result read back from disk (a backend's, a hand-edited or a foreign one): the type
of every field and of every value the reports read inside its objects (phases, telemetry,
settings), no NaN or infinity and no nesting deeper than MAX_DEPTH anywhere, figures within a
plausible range, the spec inside it and its hash, and that the status agrees with the figures.
A result that fails is skipped by the store with one warning naming the file and the reason,
never trusted and never an internal error further on."""
import math
import typing
from dataclasses import fields
from typing import Any, Dict

from backends.contract import RunResult, RunSpec, SchemaError

MAX_DEPTH = 16  # objects and lists inside each other: a result needs 4
FIGURES = (1e-6, 1e9)  # images/sec: from one image in 11 days to a billion a second
LARGEST = 1e12  # any other number a report prints (watts, MiB, cores, seconds)
FIGURE_FIELDS = ("images_per_sec", "median_images_per_sec")
SPREAD_FIELDS = ("uncertainty", "jitter")  # in images/sec, >= 0
# the values inside free-form objects that the reports read, and what each must be
# (comparator.TELEMETRY and DATA_SETTINGS; a test keeps them in step)
READ: Dict[str, Dict[str, type]] = {
    "telemetry": {"samples": float, "power_avg_w": float, "util_avg_pct": float,
                  "mem_used_max_mib": float, "sm_clock_avg_mhz": float, "temp_max_c": float,
                  "host_cpu_cores": float},
    "settings": {"layout": str, "cpu_cores": float, "loader_workers": float, "data_pipeline": str,
                 "decode": str, "decode_why": str, "images_read": float, "corrupt_skipped": float},
}


def _ok(value: Any, tp: Any) -> bool:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Union:
        return any(_ok(value, a) for a in args)
    if tp is type(None):
        return value is None
    if origin is dict:
        return isinstance(value, dict) and all(_ok(v, args[1]) for v in value.values())
    if origin is list:
        return isinstance(value, list) and all(_ok(v, args[0]) for v in value)
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if tp is str:
        return isinstance(value, str)
    return True  # Any


def _name(tp: Any) -> str:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) is typing.Union:
        return " or ".join(_name(a) for a in args) + " or null"
    if typing.get_origin(tp) is list:
        return "a list of finite numbers" if args[0] is float else "a list"
    if typing.get_origin(tp) is dict and args[1] is float:
        return "an object of finite numbers"
    return {bool: "true/false", int: "an integer", float: "a finite number", str: "a string",
            dict: "an object"}.get(typing.get_origin(tp) or tp, str(tp))


def _shown(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def _check_fields(obj: Any, prefix: str) -> None:
    hints = typing.get_type_hints(type(obj))
    for f in fields(obj):
        value = getattr(obj, f.name)
        if not _ok(value, hints[f.name]):
            raise SchemaError("{}{} is {}, not {}".format(prefix, f.name, _shown(value),
                                                          _name(hints[f.name])))


def plain(data: Any) -> None:
    """SchemaError for a NaN or infinity anywhere, or nesting deeper than MAX_DEPTH (walked
    without recursion: a file of 200,000 `[` must not take the reader down)."""
    stack = [(data, "", 0)]
    while stack:
        value, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise SchemaError("{} is nested deeper than {} levels".format(where, MAX_DEPTH))
        if isinstance(value, float) and not math.isfinite(value):
            raise SchemaError("{} is {}, not a finite number".format(where or "the file", value))
        if isinstance(value, dict):
            stack += [(v, "{}.{}".format(where, k) if where else str(k), depth + 1)
                      for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(v, "{}[{}]".format(where, i), depth + 1) for i, v in enumerate(value)]


def _check_read(r: RunResult) -> None:
    """The values the reports read inside telemetry and settings: numbers or text, or null."""
    for name, wanted in READ.items():
        for key, tp in wanted.items():
            value = getattr(r, name).get(key)
            if value is None:
                continue
            if not _ok(value, tp) or (tp is float and abs(value) > LARGEST):
                raise SchemaError("{}.{} is {}, not {}".format(name, key, _shown(value), "a string"
                                  if tp is str else "a number from -1e12 to 1e12"))


def _check_figures(r: RunResult) -> None:
    low, high = FIGURES
    figures = [(n, getattr(r, n)) for n in FIGURE_FIELDS] + [
        ("window_images_per_sec[{}]".format(i), w) for i, w in enumerate(r.window_images_per_sec)]
    for name, value in figures:
        if value is not None and not low <= value <= high:
            raise SchemaError("{} {!r} is outside {:g} to {:g} images/sec: no run measures "
                              "that".format(name, value, low, high))
    for name in SPREAD_FIELDS:
        value = getattr(r, name)
        if value is not None and not 0 <= value <= high:
            raise SchemaError("{} {!r} is outside 0 to {:g} images/sec".format(name, value, high))


def result(r: RunResult) -> RunSpec:
    """The result's spec, checked; SchemaError saying what is wrong for a result that may not be
    trusted (its spec re-hashed: a spec edited after the run no longer matches its hash)."""
    plain({f.name: getattr(r, f.name) for f in fields(r)})
    _check_fields(r, "")
    _check_read(r)
    _check_figures(r)
    try:
        spec = RunSpec.from_dict(r.spec)
    except TypeError as exc:  # a field the dataclass does not take
        raise SchemaError("spec: {}".format(exc)) from None
    except SchemaError as exc:
        raise SchemaError("spec: {}".format(exc)) from None
    _check_fields(spec, "spec.")
    try:
        spec.validate()
    except SchemaError as exc:
        raise SchemaError("spec: {}".format(exc)) from None
    if spec.run_id != r.run_id:
        raise SchemaError("run_id {} is not the run id of its spec ({})".format(r.run_id, spec.run_id))
    for where, stored in (("spec_hash", r.spec_hash), ("spec.spec_hash", r.spec.get("spec_hash"))):
        if stored is not None and stored != spec.spec_hash:
            raise SchemaError("{} {} is not the hash of its spec ({}): the spec was changed after "
                              "the run".format(where, stored if isinstance(stored, str) else _shown(stored),
                                             spec.spec_hash))
    if r.status == "ok" and (r.images_per_sec is None or r.images_per_sec <= 0):
        raise SchemaError("status ok needs a positive images_per_sec, not {!r}".format(
            r.images_per_sec))
    if r.status != "ok" and r.images_per_sec is not None:
        raise SchemaError("status {} with images_per_sec {}: a run that did not finish has no "
                          "figure".format(r.status, r.images_per_sec))
    return spec
