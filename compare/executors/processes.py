"""Processes a run starts on this host (a local run, a step of a Slurm allocation): the
environment they run with, their start (a session of their own, pinned to the cell's cores,
dying with `compare`), and their end, whichever way the run or `compare` ends: every process a
run starts is tagged with its attempt, so a worker in a session of its own is found as well."""
import contextlib
import functools
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from backends.contract import LAUNCHED_ENV, RunSpec
from backends.contract.shared import ATTEMPT_ENV, HOST_PID_ENV, die_with_parent, lifeline

from .base import Attempt, Handle, Refused
from .results import Outcome, cgroup_oom_kills

# every process a run starts inherits CAMPAIGN_ENV=<folder> and lifeline.ATTEMPT_ENV=<nonce>, so
# it can be found after its parent died (a torchrun worker runs in a session of its own; an
# orphan is re-parented)
CAMPAIGN_ENV = "COMPARE_CAMPAIGN"
GRACE_S = 3.0  # between SIGTERM (launchers forward it, clean up) and SIGKILL


def run_env(spec: RunSpec, code_dir: Path, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The environment a backend process runs with: this one's, plus the run's own variables."""
    env = dict(os.environ, **own_env(spec, code_dir))
    if spec.precision != "fp32":
        env.pop("NVIDIA_TF32_OVERRIDE", None)
    env.update(extra or {})
    return env


def child_setup(expected: int, cores: Sequence[int] = ()) -> None:
    """A launcher's preexec_fn: pinned to `cores` (a cell sharing the machine; its workers inherit
    them), and dying with `compare` (lifeline.py). Only system calls: it runs between fork and exec."""
    if cores:
        os.sched_setaffinity(0, cores)
    die_with_parent(expected=expected)


def own_env(spec: RunSpec, code_dir) -> Dict[str, str]:
    """The variables a run sets whatever runs it: the staged backends on PYTHONPATH, unbuffered
    output, the seed, and true FP32 (no library may pick TF32 behind our back) for fp32."""
    env = {"PYTHONPATH": str(code_dir), "PYTHONUNBUFFERED": "1", "PYTHONHASHSEED": str(spec.seed)}
    if spec.precision == "fp32":
        env["NVIDIA_TF32_OVERRIDE"] = "0"
    return env


def tagged_pids(name: str, value: str) -> List[int]:
    """This user's live processes whose environment has NAME=VALUE (zombies have none)."""
    needle = "\0{}={}\0".format(name, value).encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open("/proc/{}/environ".format(entry.name), "rb") as f:
                environ = b"\0" + f.read() + b"\0"
        except OSError:  # gone, or another user's
            continue
        if needle in environ and int(entry.name) != os.getpid():
            found.append(int(entry.name))
    return found


def _signal_all(pids: List[int], group: Optional[int], sig: int) -> None:
    if group is not None:
        with contextlib.suppress(OSError):
            os.killpg(group, sig)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, sig)


def end_processes(proc: Optional[subprocess.Popen], name: str, value: str) -> int:
    """End `proc` (a launcher started in a session of its own), its process group and every process
    tagged NAME=VALUE: SIGTERM, up to GRACE_S seconds, then SIGKILL. Returns how many were alive."""
    alive = functools.partial(tagged_pids, name, value)
    running = proc is not None and proc.poll() is None
    group = proc.pid if running else None  # an unreaped launcher keeps its id: no reuse
    first = alive()
    if not first and not running:
        return 0
    _signal_all(first, group, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline and ((proc is not None and proc.poll() is None) or alive()):
        time.sleep(0.05)
    _signal_all(alive(), group if proc is not None and proc.poll() is None else None, signal.SIGKILL)
    if proc is not None:
        proc.wait()
    return len(set(first) | ({proc.pid} if running else set()))


class Process(Handle):
    """A run's launcher on this host: waited for up to the run's timeout; stop() ends it, its
    process group and every process tagged with its attempt, and removes its temp folder."""

    def __init__(self, proc: subprocess.Popen, nonce: str, temp: Optional[Path] = None,
                 oom_kills: Optional[int] = None):
        self.proc, self.nonce, self.temp = proc, nonce, temp
        self.stopped = False
        self.oom_kills = oom_kills  # the memory cgroup's OOM kills when the run started

    def wait(self, timeout: float) -> Outcome:
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return Outcome(timed_out=True)
        # the run's processes share compare's memory cgroup: an OOM kill it counted meanwhile is
        # evidence that memory killed a worker of this run (the launcher shows only the signal)
        now = cgroup_oom_kills()
        kills = None if now is None or self.oom_kills is None else now - self.oom_kills
        return Outcome(exit_code=code, cgroup_oom_kills=kills)

    def stop(self) -> None:
        if not self.stopped:
            end_processes(self.proc, ATTEMPT_ENV, self.nonce)
            self.stopped = True  # only once they are gone: an interrupted stop is redone by close()
        if self.temp is not None:
            shutil.rmtree(str(self.temp), ignore_errors=True)


def start(attempt: Attempt, cmd: Sequence[str], env: Dict[str, str], cores: Sequence[int] = (),
          temp: Optional[Path] = None) -> Process:
    """Start `cmd` for the attempt with `env` and the attempt's tags, in a session of its own,
    pinned to `cores` and dying with compare, its output into the campaign's logs; Refused if it
    does not start. temp: the run's temp folder, removed with it."""
    campaign, spec = attempt.campaign, attempt.spec
    env = dict(env, **{ATTEMPT_ENV: spec.nonce, CAMPAIGN_ENV: str(campaign.root),
                       HOST_PID_ENV: str(os.getpid())})
    lifeline.prepare()
    oom_kills = cgroup_oom_kills()
    try:
        with campaign.log_files(spec.run_id) as (out, err):  # new files, never through a link
            env[LAUNCHED_ENV] = repr(time.time())  # the launch span ends when the backend starts
            proc = subprocess.Popen(list(cmd), stdout=out, stderr=err, env=env, cwd=str(attempt.work),
                                    start_new_session=True, preexec_fn=functools.partial(
                                        child_setup, expected=os.getpid(), cores=tuple(cores)))
    except (OSError, subprocess.SubprocessError) as exc:
        if temp is not None:
            shutil.rmtree(str(temp), ignore_errors=True)
        raise Refused("failed", "could not start {}: {}".format(cmd[0], exc)) from None
    return Process(proc, spec.nonce, temp, oom_kills)
