"""Launchers: how the processes of one run start (HOW), a separate axis from executors (WHERE:
this machine, a container, a Slurm job), as ReFrame keeps launchers beside its schedulers.

A launcher is one module here with one class implementing `Launcher` (launcher.py), plus one line in
LAUNCHERS. Each backend names the launcher a spec needs (`launcher(spec)` in its __init__.py);
an executor asks for it (`for_spec`) and runs what it says: `command()` on one host, or under a
cluster's task launcher (srun) `tasks_per_node()` tasks on every node, each running
`task_command()`. Launchers that must decide inside the framework's environment (which Horovod
is built there) are stdlib programs run there: `python -m backends.launchers.<name> RANK_COMMAND`.

Standard library only, Python >= 3.8: the host imports this package, and it runs in foreign
environments. `compare list launchers` lists them.
"""
import importlib
from typing import Dict, List

from ..protocol import RunSpec

# name -> "module:Class"
LAUNCHERS = {
    "single": "backends.launchers.single:Single",
    "torchrun": "backends.launchers.torchrun:Torchrun",
    "horovod": "backends.launchers.horovod:Horovod",
    "processes": "backends.launchers.processes:Processes",
    "srun": "backends.launchers.srun:Srun",
}


def names() -> List[str]:
    return list(LAUNCHERS)


def get(name: str):
    """The launcher called `name`; ValueError naming the valid ones."""
    if name not in LAUNCHERS:
        raise ValueError("unknown launcher {!r}; choose from {}".format(name, ", ".join(names())))
    module, cls = LAUNCHERS[name].split(":")
    return getattr(importlib.import_module(module), cls)()


def for_spec(spec: RunSpec):
    """The launcher the spec's backend asks for (its `launcher(spec)`; a backend without one runs
    as one process). Unsupported where the backend cannot run the spec at all."""
    backend = importlib.import_module("backends." + spec.backend)
    return get(backend.launcher(spec) if hasattr(backend, "launcher") else "single")


def rank_command(python: str, spec: RunSpec, spec_path: str, result_path: str) -> List[str]:
    """What one process of the run executes: the backend's own command line."""
    return importlib.import_module("backends." + spec.backend).command(
        python, spec, spec_path, result_path)


def command(python: str, spec: RunSpec, spec_path: str, result_path: str) -> List[str]:
    """The command line that runs `spec` on one host: its launcher around the rank command."""
    return for_spec(spec).command(python, spec, rank_command(python, spec, spec_path, result_path))


def described() -> Dict[str, str]:
    """name -> the first line of the launcher's docstring."""
    return {name: (type(get(name)).__doc__ or "").strip().splitlines()[0] for name in names()}
