"""Executors start a backend in its environment and turn whatever happens into a RunResult.

An executor is one module here with one subclass of `Executor` (base.py: the sequence every
executor runs, whose steps it fills in), plus one line in `EXECUTORS`. Each declares its own flags
of `compare run` (FLAGS), what it can run (`capabilities`: real data, several nodes, GPUs) and
the pool its cells are placed on (`pool()`). How the run's processes start is the launcher's
business (backends/launchers/), which the backend names. `--executor auto` takes the first
executor in that order whose class may be chosen automatically (`auto = True`), can run
everything the study asks for, and says available; each answer carries the reason, which
`compare run` prints and `compare doctor` lists.
"""
import importlib
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..errors import UserError
from .base import Attempt, Context, Executor, Flag, Handle, Refused, flag_named
from .results import Outcome

__all__ = ["Attempt", "Context", "Executor", "Flag", "Handle", "Outcome", "Refused", "EXECUTORS",
           "CAPABILITIES"]

# name -> "module:Class", in the order `auto` tries them
EXECUTORS: Dict[str, str] = {
    "docker": "compare.executors.docker:DockerExecutor",
    "local": "compare.executors.local:LocalExecutor",
    "slurm": "compare.executors.slurm:SlurmExecutor",
}
AUTO = "auto"
# what a study may ask of an executor: capability -> (its name, what an executor without it
# does, where to go instead)
CAPABILITIES: Dict[str, Tuple[str, str, str]] = {
    "real_data": ("real data", "does not give its runs a data folder",
                  "real data needs an executor that does"),
    "multi_node": ("several nodes", "runs on one machine", "more nodes need an executor of a cluster"),
    "gpus": ("GPUs", "runs on CPUs only", "GPUs need an executor that has them"),
}


def names() -> List[str]:
    return list(EXECUTORS)


def load(name: str) -> type:
    """The executor class called `name`; UserError naming the valid ones."""
    if name not in EXECUTORS:
        raise UserError("unknown executor {!r}; choose from {}".format(
            name, ", ".join([AUTO] + names())))
    module, cls = EXECUTORS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def can_run(cls: type, gpus_here: bool = True) -> str:
    """'real data, GPUs': what the executor can run, as doctor lists it; on a machine without
    GPUs, its GPUs are said to need a machine that has them."""
    apart = "gpus" in cls.capabilities and not gpus_here  # said after the rest
    labels = ", ".join(label for cap, (label, _, _) in CAPABILITIES.items()
                       if cap in cls.capabilities and not (apart and cap == "gpus"))
    if apart:
        return (labels or "synthetic data") + "; GPUs on a machine that has them (none here)"
    return labels or "synthetic data on CPUs only"


def status(ctx: Context) -> List[Tuple[str, bool, str]]:
    """(name, available, why) for every executor: what `compare doctor` prints."""
    return [(name,) + tuple(load(name).available(ctx)) for name in names()]


def choose(requested: str, ctx: Context, keep: Optional[str] = None) -> Tuple[type, str]:
    """(executor class, one line saying why it was picked). An asked-for executor that cannot
    run here is a UserError with its reason. keep: with auto, the executor a resumed campaign ran
    with, taken first while it can still run the study here (images built since, say, would
    otherwise make auto pick docker for a campaign measured in managed environments)."""
    ctx.requested = requested
    if requested == AUTO and keep in EXECUTORS:
        cls = load(keep)
        if cls.auto and not cls.lacks(ctx):
            ctx.requested = keep  # as if named again: docker builds the images of changed code
            ok, why = cls.available(ctx)
            if ok:
                return cls, "the campaign's executor, kept by --resume: {}".format(why)
            ctx.requested = requested
    if requested != AUTO:
        cls = load(requested)
        missing = cls.lacks(ctx)
        if missing:
            raise UserError(_cannot(cls, *missing))
        ok, why = cls.available(ctx)
        if not ok:
            raise UserError("{} {}: {}".format(ctx.said, requested, why))
        return cls, "--executor {}".format(requested)
    passed_over = []
    for name in names():
        cls = load(name)
        if not cls.auto:
            continue
        missing = cls.lacks(ctx)
        ok, why = (False, "{} ({})".format(CAPABILITIES[missing[0]][1], missing[1])) if missing \
            else cls.available(ctx)
        if ok:
            return cls, "; ".join([why] + passed_over)
        passed_over.append("{} not chosen: {}".format(name, why))
    asked = [n for n in names() if not load(n).auto and not load(n).lacks(ctx)]
    raise UserError("{} auto: no executor can run this study here ({}){}".format(
        ctx.said, "; ".join(passed_over), "; {} can, when asked for: add --executor {}".format(
            " or ".join(asked), asked[0]) if asked else ""))


def _cannot(cls: type, capability: str, flag: str) -> str:
    """'--nodes 2: the local executor runs on one machine; more nodes need an executor of a
    cluster (slurm)': the study asks for what the named executor cannot do."""
    _, does, remedy = CAPABILITIES[capability]
    able = [n for n in names() if capability in load(n).capabilities]
    return "{}: the {} executor {}; {} ({})".format(flag, cls.name, does, remedy,
                                                   ", ".join(able) or "none")


def flags() -> List[Tuple[str, Flag]]:
    """(executor name, flag) of every executor's own flags, in registry order (cli.py adds them)."""
    return [(name, flag) for name in names() for flag in load(name).FLAGS]


def check_flags(requested: str, given: Dict[str, Any],
                named: Callable[..., str] = flag_named) -> Dict[str, Any]:
    """The executor-specific flags given (those not given dropped; an empty one is the executor's
    to refuse), checked by the executor that reads
    them; a flag given to another executor is a UserError naming the one that reads it. Every
    message names its settings through `named(name, about="", value=None)` (base.flag_named: by
    their flags), so a campaign file's keys are said as the user wrote them."""
    given = {k: v for k, v in given.items() if v is not None and v != [] and v != ()}  # '' was given
    cls = load(requested) if requested != AUTO else None
    owners = {flag.key: (name, flag) for name, flag in flags()}
    for key in given:
        if cls is None or key not in {f.key for f in cls.FLAGS}:
            owner = owners[key][0]
            raise UserError("{} is read by the {} executor only; add {}".format(
                named(key), owner, named("executor", key, owner)))
    return cls.check_flags(given, named) if cls is not None else {}


def remote(requested: str) -> Optional[type]:
    """The executor class when it runs jobs away from this machine, else None."""
    if requested == AUTO:
        return None
    cls = load(requested)
    return cls if cls.runs_on != "host" else None
