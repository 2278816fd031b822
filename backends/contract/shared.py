"""What the host uses of backends/ beyond the contract's own definitions: backend modules written
to be read from both sides (standard library only, no framework imported at load), each named here
with what the host needs it for; a backend's package, the plug-in seam; where the code lives.

    batchprobe  the batch search's rule (compare/batchsearch.py runs it probe by probe)
    dataset     a data folder's prepared side: the manifest and file list the host writes, the
                native formats a backend writes, where they live (beside the folder or cached)
    launchers   how a run's processes start: the command an executor runs (for_spec, command)
    lifeline    every process of a run dies with compare (the host's preexec, the backends' start,
                in a container the campaign's lock it watches)
    machine     the record a node takes of itself (Slurm runs MACHINE_SCRIPT on its nodes)
    mllog       MLPerf log lines: a backend writes them, the host reads and scores them
    networks    the networks as tables: names, native sizes, parameters, multiply-adds

Also the few names of them that host modules import one by one (ATTEMPT_ENV, cpu_model, ...).
Imported by the host by name (`from backends.contract.shared import launchers`), never by the
contract's __init__: these modules import the contract's definitions themselves.
"""
import importlib
import os
from types import ModuleType
from typing import List

from .. import batchprobe, dataset, launchers, lifeline, machine, mllog, networks
from ..caches import ENV as COMPILE_CACHE_ENV
from ..lifeline import ATTEMPT_ENV, HOST_LOCK_ENV, HOST_PID_ENV, die_with_parent
from ..machine import (
    command_output,
    cpu_model,
    cpuset,
    cuda_driver_version,
    gpus,
    memory_gib,
    node_info,
)
from ..policy import BF16_CPU_FLAGS, cpu_flags

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # backends/
CODE_ROOT = os.path.dirname(PACKAGE_DIR)  # what PYTHONPATH names, so `-m backends.X` imports
MACHINE_SCRIPT = os.path.abspath(machine.__file__)  # standalone: `python3 -c SOURCE` on a node

__all__ = ["batchprobe", "dataset", "launchers", "lifeline", "machine", "mllog", "networks",
           "COMPILE_CACHE_ENV", "PACKAGE_DIR", "CODE_ROOT", "MACHINE_SCRIPT", "backend",
           "writer_command", "ATTEMPT_ENV", "HOST_LOCK_ENV", "HOST_PID_ENV", "die_with_parent",
           "command_output", "cpu_model", "cpuset", "cuda_driver_version", "gpus", "memory_gib",
           "node_info", "BF16_CPU_FLAGS", "cpu_flags"]


def backend(name: str) -> ModuleType:
    """The package `backends.<name>` that the framework registry names: the plug-in seam. Only
    its __init__ is imported (standard library only): MODULE, OPTIONS, MODES, PIPELINES,
    DATA_FORMAT, command(), launcher(), prepare(); its runtime, data and train modules import the
    framework and run only in the framework's environment."""
    return importlib.import_module("backends." + name)


def writer_command(python: str, backend_name: str, prepared_path: str) -> List[str]:
    """The command that writes a backend's native data format into a prepared folder, run in
    the framework's environment (dataset.writer_main)."""
    return [python, "-m", "backends.{}.data".format(backend_name), "write", prepared_path]
