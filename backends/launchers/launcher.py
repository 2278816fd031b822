"""The Launcher interface, and what the launchers that run inside a framework's environment share:
reading the run's spec from the rank command, starting children that die with the launcher,
and writing a `failed` result (through the harness) when the processes wrote none.

Standard library only, Python >= 3.8.
"""
import importlib
import os
import subprocess
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from .. import lifeline
from ..protocol import RunSpec, SchemaError, read_spec


class Launcher:
    """How the processes of one run start. `rank` is the command one process of the run executes
    (the backend's command(): `python -m backends.X SPEC RESULT`)."""

    def command(self, python: str, spec: RunSpec, rank: List[str]) -> List[str]:
        """The command that starts every process of the run on one host."""
        return list(rank)

    def tasks_per_node(self, spec: RunSpec) -> int:
        """Under a cluster's task launcher (srun): the tasks to start on each node."""
        return 1

    def task_command(self, python: str, spec: RunSpec, rank: List[str]) -> List[str]:
        """Under a cluster's task launcher: what each of those tasks runs."""
        return self.command(python, spec, rank)


def files(rank: Sequence[str]) -> Tuple[str, str]:
    """(spec path, result path): the last two arguments of every backend's command."""
    return rank[-2], rank[-1]


def read(rank: Sequence[str]) -> Optional[RunSpec]:
    """The run's spec, or None where it does not read (the harness of the rank reports it)."""
    try:
        return read_spec(files(rank)[0])
    except (OSError, SchemaError):
        return None


def declared(spec: RunSpec):
    """The backend's declared options (its stdlib __init__)."""
    return tuple(importlib.import_module("backends." + spec.backend).OPTIONS)


def record(spec: RunSpec, result_path: str, error: Exception) -> int:
    """Write the result of a run whose processes wrote none (through the harness, as usual)."""
    from .. import harness

    def setup(_spec):
        raise error
    result = harness.run(spec, result_path, setup, declared(spec))
    return 0 if result.status in ("ok", "unsupported", "skipped") else 1


def start(cmd: Sequence[str], env: Optional[Dict[str, str]] = None) -> subprocess.Popen:
    """Start a child of this launcher that never outlives it (lifeline.py)."""
    lifeline.prepare()
    return subprocess.Popen(list(cmd), env=env, preexec_fn=lifeline.die_with_parent)


def run(cmd: Sequence[str], env: Optional[Dict[str, str]] = None) -> int:
    """Start a child (start()) and wait for it: its exit code, a signal that killed it as a shell
    says it (128 + N; sys.exit(-9) would exit 247, which names no signal), so the host reads the
    signal (a SIGKILL: the kernel's OOM killer, where its evidence says so)."""
    code = start(cmd, env).wait()
    return 128 - code if code < 0 else code


def wrote_result(result_path: str, started: float) -> bool:
    """Whether a result was written since `started` (one of an earlier attempt does not count)."""
    return os.path.exists(result_path) and os.path.getmtime(result_path) >= started - 1


def say(cmd: Sequence[str]) -> None:
    """The command a launcher runs, on its stderr (the run's log)."""
    sys.stderr.write("compare: {}\n".format(" ".join(cmd)))
    sys.stderr.flush()
