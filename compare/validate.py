"""Checks of a result read back from disk (a backend's, a hand-edited or a foreign one): the type
of every field, the spec inside it, and that the status agrees with the figures. A result that
fails is skipped by the store with one warning naming the file, never trusted."""
import math
import typing
from dataclasses import fields
from typing import Any

from backends.protocol import RunResult, RunSpec, SchemaError


def _ok(value: Any, tp: Any) -> bool:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Union:
        return any(_ok(value, a) for a in args)
    if tp is type(None):
        return value is None
    if origin is dict:
        return isinstance(value, dict)
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
    return {bool: "true/false", int: "an integer", float: "a finite number", str: "a string",
            dict: "an object"}.get(typing.get_origin(tp) or tp, str(tp))


def _check_fields(obj: Any, prefix: str) -> None:
    hints = typing.get_type_hints(type(obj))
    for f in fields(obj):
        value = getattr(obj, f.name)
        if not _ok(value, hints[f.name]):
            shown = repr(value)
            raise SchemaError("{}{} is {}, not {}".format(
                prefix, f.name, shown if len(shown) <= 60 else shown[:57] + "...",
                _name(hints[f.name])))


def result(r: RunResult) -> None:
    """SchemaError saying what is wrong, or None for a result that may be trusted."""
    _check_fields(r, "")
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
    if r.status == "ok" and (r.images_per_sec is None or r.images_per_sec <= 0):
        raise SchemaError("status ok needs a positive images_per_sec, not {!r}".format(
            r.images_per_sec))
    if r.status != "ok" and r.images_per_sec is not None:
        raise SchemaError("status {} with images_per_sec {}: a run that did not finish has no "
                          "figure".format(r.status, r.images_per_sec))
