"""The Executor base class: the one sequence every executor runs for a cell (Executor.run), what
it is told (Context), its own flags (Flag), one attempt (Attempt), what its launch started (Handle).

    attach()? | environment -> stage -> command -> launch  ->  wait -> release -> collect

An executor fills in steps, never the sequence: environment() and launch() are its own, the rest
have defaults (docs/architecture.md, "An executor"). A step that cannot go on raises Refused; the
run is then a recorded result all the same.
"""
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Dict, FrozenSet, List, Optional, Tuple

from backends.contract import RunResult, RunSpec, Unsupported, utc_now
from backends.contract.shared import launchers

from .. import mllogs, resources
from ..frameworks import Framework
from .results import Outcome, collect, failure


@dataclass(frozen=True)
class Flag:
    """A flag of `compare run` that one executor reads (a cluster's partition, ...): cli.py adds
    every executor's FLAGS to the command; Context.flags holds what was given."""

    key: str  # the Context.flags key (and the command's parameter)
    help: str  # one line for `compare run --help`
    repeat: bool = False  # may be given more than once (a list)

    @property
    def option(self) -> str:
        return "--" + self.key.replace("_", "-")


def flag_named(name: str, about: str = "", value: Optional[str] = None) -> str:
    """How an executor's messages name a setting of `compare run` (check_flags' `named`), here by
    its flag: "--time-limit", "--executor slurm" with the `value` to give. `about`: the setting
    the message is about, where `name` is another one (to give instead); "" where `name` is the
    message's subject. A study read from a campaign file passes its own (its keys, the file)."""
    return "--" + name.replace("_", "-") + ("" if value is None else " " + value)


@dataclass
class Context:
    """What an executor is told about the sweep it runs."""

    frameworks: List[Framework]
    device: str  # "cpu" | "cuda" (resolved against the executor's machine)
    overrides: Dict[str, str] = field(default_factory=dict)  # --python FRAMEWORK=PATH
    flags: Dict[str, Any] = field(default_factory=dict)  # the executor's own flags (its FLAGS)
    log: Callable[[str], None] = lambda s: None
    requested: str = "auto"  # what --executor said: an executor may accept more when named
    said: str = "--executor"  # the setting as messages name it (a campaign file's: study.toml: executor)
    needs: Dict[str, str] = field(default_factory=dict)  # capability -> the flag asking for it
    # shared by the executors of one sweep (one per cell running at a time): the campaigns
    # already cleared of what a killed sweep left (Executor.reap_once), under the lock
    reaped: set = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Refused(Exception):
    """A run that never started (no environment, not submitted, unsupported): recorded with
    `status` and this reason."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status = status


@dataclass
class Attempt:
    """One attempt at one cell, filled in by the steps of Executor.run()."""

    spec: RunSpec
    campaign: Any
    started: str  # UTC time the attempt began
    timeout: float  # seconds it may run
    python: str = "python"  # the interpreter that runs the backend, where it runs
    work: Optional[Path] = None  # the run's folder on this machine (result.json, logs)
    spec_path: str = ""  # the spec and the result file as the backend sees them (a container
    result_path: str = ""  # sees its mounts)
    command: List[str] = field(default_factory=list)  # what the launcher says to run
    record: Dict[str, Any] = field(default_factory=dict)  # the result's environment: where it ran
    slot: Any = None  # resources.Slot: the GPUs and cores of a cell packed beside others
    handle: Optional["Handle"] = None  # what launch() (or attach()) started
    notes: Dict[str, Any] = field(default_factory=dict)  # what an executor keeps between steps
    stopped: bool = False  # close() stopped it: the sweep was interrupted, its result not recorded


class Handle:
    """What an executor's launch() started (a process, a container, a Slurm job)."""

    def wait(self, timeout: float) -> Outcome:
        """Until the run ends, or `timeout` seconds (then it is ended: timed_out)."""
        raise NotImplementedError

    def stop(self) -> None:
        """End whatever the run started, however it ended; again, or from another thread (a stop
        signal), is harmless."""


class Executor:
    """The interface every executor implements (see LocalExecutor for the simplest one)."""

    name: ClassVar[str]
    auto: ClassVar[bool] = True  # may `--executor auto` pick it
    # where runs execute: "host" (this machine; its machine record is the campaign's) or "job"
    # (elsewhere: the machine record and the device check come from there, via machine())
    runs_on: ClassVar[str] = "host"
    capabilities: ClassVar[FrozenSet[str]] = frozenset()  # keys of CAPABILITIES it can run
    FLAGS: ClassVar[Tuple[Flag, ...]] = ()  # its own flags of `compare run`

    @classmethod
    def available(cls, ctx: Context) -> Tuple[bool, str]:
        """(can run this sweep here, why or why not: one line)."""
        raise NotImplementedError

    @classmethod
    def check_flags(cls, flags: Dict[str, Any], named: Callable[..., str] = flag_named) -> Dict[str, Any]:
        """Its flags (keys of FLAGS) checked and typed; a UserError (one line) if bad, naming
        each setting through `named` (flag_named: the words the user gave them in)."""
        return dict(flags)

    @classmethod
    def describe(cls, ctx: Context) -> List[str]:
        """Lines `compare doctor` prints under it when available (a cluster: its partitions)."""
        return []

    @classmethod
    def machine(cls, ctx: Context) -> Dict[str, Any]:
        """The machine record of where the runs execute."""
        from .. import machine_record
        return machine_record.info()

    @classmethod
    def lacks(cls, ctx: Context) -> Optional[Tuple[str, str]]:
        """(capability, the flag asking for it) of the first thing the study needs that this
        executor cannot do; None when it can run the whole study."""
        return next(((cap, flag) for cap, flag in ctx.needs.items()
                     if cap not in cls.capabilities), None)

    @classmethod
    def pool(cls, ctx: Context, largest: int, concurrency: Optional[int]) -> Tuple[resources.Pool, int]:
        """The units (GPUs, blocks of cores) this executor hands to cells, and how many cells run
        at once (concurrency: --concurrency, None for auto; largest: the most GPUs one cell of the
        sweep takes): this machine's."""
        return resources.machine_pool(ctx.device, largest, concurrency)

    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.attempt: Optional[Attempt] = None  # the one it runs now (close() stops its handle)

    def data_writer(self):
        """What writes the native formats of --data folders before the sweep, where the runs'
        environment is not this machine's (an image): a formats.Writer; None: the frameworks'
        environments here (formats.LocalWriter)."""
        return None

    def check_data(self, prepared: List[Any]) -> None:
        """Before the sweep: a UserError (one line) if the runs cannot read these folders
        (dataset.Prepared: the images and their prepared side)."""

    def run(self, spec: RunSpec, campaign, timeout: float, slot=None) -> RunResult:
        """Run one cell to its end and return its result; never raises for a failing run.

        slot (resources.Slot, or None: the executor's choice): the GPUs the cell gets and the
        cores it is pinned to, while other cells run beside it on other GPUs and cores. The
        scheduler gives each cell running at once an executor instance of its own, so an
        instance runs one cell at a time; close() may come from another thread (a stop signal).
        """
        self.attempt = attempt = Attempt(spec, campaign, utc_now(), timeout, slot=slot)
        self.reap_once(campaign)
        try:
            try:
                self.start(attempt)
                outcome = self.wait(attempt)
            finally:
                self.release(attempt)
        except Refused as exc:
            return failure(attempt.spec, exc.status, str(exc), started_at=attempt.started)
        result = self.collect(attempt, outcome)
        mllogs.keep(attempt.campaign.root, attempt.work, result,  # time to accuracy's MLPerf log
                    stopped=attempt.stopped)
        result.environment.update(executor=self.name, **attempt.record)
        return result

    def start(self, attempt: Attempt) -> None:
        """Everything before the wait: a run an earlier session started, else the environment,
        the staged spec, the command and the launch."""
        if self.attach(attempt):
            return
        try:
            self.environment(attempt)
            self.stage(attempt)
            attempt.command = self.command(attempt)
        except Unsupported as exc:  # what the backend's launcher cannot run
            raise Refused("unsupported", str(exc)) from None
        self.launch(attempt)

    def attach(self, attempt: Attempt) -> bool:
        """Take up the run of this cell an earlier session started and left running (or ended
        since), instead of starting one: attempt.handle, .work, .record. False: there is none."""
        return False

    def environment(self, attempt: Attempt) -> None:
        """Find where the backend runs: attempt.python and attempt.record."""

    def stage(self, attempt: Attempt) -> None:
        """The spec saved in the campaign, the run's work folder, the paths the backend is given."""
        attempt.spec_path = str(attempt.campaign.save_spec(attempt.spec))
        attempt.work = attempt.campaign.work_dir(attempt.spec.run_id)
        attempt.result_path = str(attempt.work / "result.json")

    def command(self, attempt: Attempt) -> List[str]:
        """What starts the run's processes: the launcher the backend asks for, on one host."""
        return launchers.command(attempt.python, attempt.spec, attempt.spec_path,
                                 attempt.result_path)

    def launch(self, attempt: Attempt) -> None:
        """Start attempt.command; attempt.handle (a Handle) as soon as there is something to stop."""
        raise NotImplementedError

    def wait(self, attempt: Attempt) -> Outcome:
        """Until the run ends or times out: how it ended."""
        return attempt.handle.wait(attempt.timeout)

    def release(self, attempt: Attempt) -> None:
        """End whatever the run started, however it ended (also on Ctrl-C)."""
        if attempt.handle is not None:
            attempt.handle.stop()

    def collect(self, attempt: Attempt, outcome: Outcome) -> RunResult:
        """The run's own result file, or a failure saying why there is none."""
        return collect(attempt.spec, outcome, attempt.work / "result.json",
                       attempt.campaign.log_paths(attempt.spec.run_id)[1], attempt.started,
                       attempt.timeout)

    def reap(self, campaign) -> None:
        """End what a sweep that was killed left running of `campaign`."""

    def reap_once(self, campaign) -> None:
        """reap() once per campaign and sweep, before its first cell: the executors of one sweep
        share the context, so no executor's first cell ends a cell another one runs."""
        with self.ctx.lock:
            if campaign.root not in self.ctx.reaped:
                self.ctx.reaped.add(campaign.root)
                self.reap(campaign)

    def close(self) -> None:
        """Release what the executor holds (called once after the sweep, and again and again on
        Ctrl-C or SIGTERM, from another thread): the running attempt's handle stopped."""
        attempt = self.attempt
        if attempt is not None and attempt.handle is not None:
            attempt.stopped = True  # (after the sweep: an attempt already collected)
            attempt.handle.stop()
