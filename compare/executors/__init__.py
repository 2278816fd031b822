"""Executors start a backend in its environment and turn whatever happens into a RunResult.

An executor is one module here with one class implementing `Executor`, plus one line in
`EXECUTORS`. `--executor auto` takes the first executor in that order whose class may be chosen
automatically (`auto = True`) and says available; each answer carries the reason, which
`compare run` prints and `compare doctor` lists.
"""
import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Dict, List, Optional, Tuple

from backends.protocol import RunResult, RunSpec

from ..errors import UserError
from ..frameworks import Framework

# name -> "module:Class", in the order `auto` tries them
EXECUTORS: Dict[str, str] = {
    "docker": "compare.executors.docker:DockerExecutor",
    "local": "compare.executors.local:LocalExecutor",
    "slurm": "compare.executors.slurm:SlurmExecutor",
}
AUTO = "auto"


@dataclass
class Context:
    """What an executor is told about the sweep it runs."""

    frameworks: List[Framework]
    device: str  # "cpu" | "cuda" (resolved against the executor's machine)
    overrides: Dict[str, str] = field(default_factory=dict)  # --python FRAMEWORK=PATH
    settings: Dict[str, Any] = field(default_factory=dict)  # executor-specific flags
    log: Callable[[str], None] = lambda s: None
    requested: str = "auto"  # what --executor said: an executor may accept more when named


class Executor:
    """The interface every executor implements (see LocalExecutor for the simplest one)."""

    name: ClassVar[str]
    auto: ClassVar[bool] = True  # may `--executor auto` pick it
    # where runs execute: "host" (this machine; its machine record is the campaign's) or "job"
    # (elsewhere: the machine record and the device check come from there, via machine())
    runs_on: ClassVar[str] = "host"
    multi_node: ClassVar[bool] = False  # can a job span several machines (--nodes > 1)
    # its own flags of `compare run`: Context.settings key -> the flag (e.g. a cluster's partition)
    SETTINGS: ClassVar[Dict[str, str]] = {}

    @classmethod
    def available(cls, ctx: Context) -> Tuple[bool, str]:
        """(can run this sweep here, why or why not: one line)."""
        raise NotImplementedError

    @classmethod
    def check_settings(cls, settings: Dict[str, Any]) -> Dict[str, Any]:
        """Its flags (keys of SETTINGS) checked and typed; a UserError (one line) if bad."""
        return dict(settings)

    @classmethod
    def describe(cls, ctx: Context) -> List[str]:
        """Lines `compare doctor` prints under it when available (a cluster: its partitions)."""
        return []

    @classmethod
    def machine(cls, ctx: Context) -> Dict[str, Any]:
        """The machine record of where the runs execute."""
        from .. import machine
        return machine.info()

    def __init__(self, ctx: Context):
        self.ctx = ctx

    def run(self, spec: RunSpec, campaign, timeout: float) -> RunResult:
        """Run one cell to its end and return its result; never raises for a failing run."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the executor holds (called once after the sweep, also on Ctrl-C)."""


def names() -> List[str]:
    return list(EXECUTORS)


def load(name: str) -> type:
    """The executor class called `name`; UserError naming the valid ones."""
    if name not in EXECUTORS:
        raise UserError("unknown executor {!r}; choose from {}".format(
            name, ", ".join([AUTO] + names())))
    module, cls = EXECUTORS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def status(ctx: Context) -> List[Tuple[str, bool, str]]:
    """(name, available, why) for every executor: what `compare doctor` prints."""
    out = []
    for name in names():
        ok, why = load(name).available(ctx)
        out.append((name, ok, why))
    return out


def choose(requested: str, ctx: Context) -> Tuple[type, str]:
    """(executor class, one line saying why it was picked). An asked-for executor that cannot
    run here is a UserError with its reason."""
    ctx.requested = requested
    if requested != AUTO:
        cls = load(requested)
        ok, why = cls.available(ctx)
        if not ok:
            raise UserError("--executor {}: {}".format(requested, why))
        return cls, "--executor {}".format(requested)
    passed_over = []
    for name in names():
        cls = load(name)
        if not cls.auto:
            continue
        ok, why = cls.available(ctx)
        if ok:
            return cls, "; ".join([why] + passed_over)
        passed_over.append("{} not chosen: {}".format(name, why))
    raise UserError("--executor auto: no executor can run here ({})".format("; ".join(passed_over)))


def check_settings(requested: str, settings: Dict[str, Any]) -> Dict[str, Any]:
    """The executor-specific flags given (empty ones dropped), checked by the executor that reads
    them; a flag given to another executor is a UserError naming the one that reads it."""
    given = {k: v for k, v in settings.items() if v not in (None, "", [], ())}
    cls = load(requested) if requested != AUTO else None
    for key in given:
        if cls is None or key not in cls.SETTINGS:
            owner = next(n for n in names() if key in load(n).SETTINGS)
            raise UserError("{} is read by the {} executor only; add --executor {}".format(
                load(owner).SETTINGS[key], owner, owner))
    return cls.check_settings(given) if cls is not None else {}


def remote(requested: str) -> Optional[type]:
    """The executor class when it runs jobs away from this machine, else None."""
    if requested == AUTO:
        return None
    cls = load(requested)
    return cls if cls.runs_on != "host" else None
