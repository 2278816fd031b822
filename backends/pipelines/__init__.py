"""The input pipelines of --data DIR: each backend's table of them, and the one rule that picks
the pipeline a run uses.

A backend lists its pipelines in its __init__.py, in order of preference:

    PIPELINES = (Pipeline("hw", "backends.jax.data:hw", "the GPU's JPEG engines (nvImageCodec)",
                          gpu="decodes on a GPU's JPEG engines", probe=...), ...)

`--option decode` and `--option pipeline` are made from that table (decode_option,
pipeline_option), `compare list pipelines` prints it, and the backend's data.py asks choose() which
row runs, then calls the row's maker: nothing else picks a pipeline. The modules
here are what several backends' pipelines share: the Feed and its feeder thread (feed.py), DALI's
graph (dali.py), hardware JPEG decode (nvdecode.py, nvcapi.py) and the CPU decoders beside it
(cpudecode.py, splitdecode.py), time to accuracy's evaluation batches (accuracy_data.py).
Framework code stays in the backend folders. (nvdecode's decoder `kind`, "hw" or "cpu", names
nvImageCodec's backend, the engines or its CPU one that tests use, not a row.)

Standard library only, Python >= 3.8 (the host reads the tables).
"""
import importlib
from typing import Any, Callable, NamedTuple, Optional, Sequence, Tuple

from ..contract import options as opts
from ..protocol import Unsupported

AUTO = "auto"  # --option decode=auto: the first decode of the table that runs here
NATIVE = "native"  # --option pipeline=native: the framework's own pipeline, its decode as asked


class NotAvailable(RuntimeError):
    """A pipeline cannot run here; the message says why (recorded with the result)."""


class Pipeline(NamedTuple):
    """One row of a backend's PIPELINES."""

    name: str  # a value of --option decode (of --option pipeline where `own`); results' `decode`
    make: str  # "module:function" in the backend's folder that makes it (its data.py calls it)
    does: str  # one line: what decodes, where (the options' help and `compare list pipelines`)
    short: str = ""  # how a report's sentences name it ("": the first stage of its pipeline text)
    gpu: str = ""  # why it needs a GPU, "decodes on ...": a CPU run of it is unsupported
    probe: str = ""  # "module:function(device_id, sample_path, opt)": NotAvailable where it cannot
    own: bool = False  # a pipeline of its own (--option pipeline=NAME), not a decode of the native one
    # decode=auto's reason for passing it over: on a CPU run, and where its probe failed
    passed_over: Tuple[str, str] = ("", "")


def hw_row(make: str) -> Pipeline:
    """decode=hw, as every backend that has it: nvImageCodec on the JPEG engines (nvdecode.py),
    CPU decoders beside them (splitdecode.py); `make`: the backend's maker."""
    return Pipeline("hw", make, "the GPU's JPEG engines (nvImageCodec)",
                    short="nvImageCodec on the JPEG engines", gpu="decodes on a GPU's JPEG engines",
                    probe="backends.pipelines.nvdecode:can_decode",
                    passed_over=("no JPEG engines on a CPU run", "hardware decode unavailable"))


def dali_row(make: str) -> Pipeline:
    """pipeline=dali, as every backend that has it: DALI's graph (dali.py); `make`: the
    backend's maker (the hand-over of DALI's batches to the framework)."""
    return Pipeline("dali", make, "DALI (decoding on the GPU's JPEG engines; CPU operators on a "
                    "CPU run)", short="DALI", own=True)


def decodes(table: Sequence[Pipeline]) -> Tuple[Pipeline, ...]:
    return tuple(p for p in table if not p.own)


def decode_option(table: Sequence[Pipeline]) -> opts.Option:
    """`--option decode` of a backend: auto, or one of its table's decodes, as the table says."""
    paths = decodes(table)
    return opts.Option("decode", "str", "with --data DIR: {}; auto = {} where it decodes here, else {} "
                       "with the reason recorded".format(
                           ", ".join("{} = {}".format(p.name, p.does) for p in paths),
                           paths[0].name, paths[1].name),
                       default=AUTO, choices=(AUTO,) + tuple(p.name for p in paths))


def pipeline_option(table: Sequence[Pipeline]) -> opts.Option:
    """`--option pipeline` of a backend: the framework's own, or a pipeline of its own."""
    others = [p for p in table if p.own]
    return opts.Option("pipeline", "str", "with --data DIR: the framework's own input pipeline, or "
                       + " or ".join(p.does for p in others), default=NATIVE,
                       choices=(NATIVE,) + tuple(p.name for p in others))


def may_use(name: str, opt: Callable[[str], Any]) -> bool:
    """Whether a run may use decode `name`: asked for by name, or decode=auto (which takes it
    where it runs), with the framework's own pipeline. For what must be set before the framework
    starts, when choose() cannot run yet."""
    return opt("pipeline") == NATIVE and opt("decode") in (AUTO, name)


def function(where: str) -> Callable[..., Any]:
    """The function a table names as "module:function"."""
    module, name = where.split(":")
    return getattr(importlib.import_module(module), name)


def choose(table: Sequence[Pipeline], opt: Callable[[str], Any], cuda: bool,
           device_id: Optional[int], sample: str) -> Tuple[Pipeline, Optional[str]]:
    """The row a run uses, and why it is not the table's first decode (None where it is).
    --option pipeline names a pipeline of its own; else --option decode a decode, or auto: the
    first that runs here (the reason for each passed over recorded). A decode asked for by name
    that cannot run here is Unsupported with the reason: never a silent fallback."""
    by_name = {p.name: p for p in table}
    asked = opt("pipeline")
    if asked != NATIVE:
        return by_name[asked], "--option pipeline={} (decode={} not used)".format(asked, opt("decode"))
    asked, paths = opt("decode"), decodes(table)
    if asked != AUTO:
        chosen = by_name[asked]
        cannot = _cannot(chosen, opt, cuda, device_id, sample)
        if cannot:
            raise Unsupported("decode={}{}".format(asked, cannot[1]))
        return chosen, None if chosen is paths[0] else "--option decode={}".format(asked)
    passed = []
    for path in paths:
        cannot = _cannot(path, opt, cuda, device_id, sample)
        if cannot is None:
            return path, None if not passed else "decode=auto: " + "; ".join(passed)
        passed.append(cannot[0])
    raise Unsupported("decode=auto: " + "; ".join(passed))


def _cannot(path: Pipeline, opt, cuda: bool, device_id: Optional[int],
            sample: str) -> Optional[Tuple[str, str]]:
    """None where `path` runs here; else (decode=auto's reason, decode=NAME's reason's end)."""
    if path.gpu and not cuda:
        return path.passed_over[0], " {}; this run is on the cpu".format(path.gpu)
    if path.probe:
        try:
            function(path.probe)(device_id, sample, opt)
        except NotAvailable as exc:
            return "{}: {}".format(path.passed_over[1], exc), ": {}".format(exc)
    return None

