"""What machine this is: CPU, memory, NVIDIA GPUs (nvidia-smi), driver and CUDA, Docker engine,
project commit; and whether two machine records are the same machine (never mix them silently).

The part a compute node can answer alone lives in backends/machine.py (stdlib only), so that an
executor whose runs execute elsewhere (Slurm) takes the record there; this adds the host's side.
"""
import sys
from pathlib import Path
from typing import Any, Dict, List

from backends.contract import utc_now
from backends.contract.shared import (
    command_output,
    cpu_model,
    gpus,
    memory_gib,
    node_info,
)

from . import __version__

__all__ = ["cpu_model", "gpus", "memory_gib", "info", "host_info"]


def fingerprint(record: Dict[str, Any]) -> Dict[str, Any]:
    """What makes two machine records the same machine, the one rule every comparison applies
    (resume, diff, history, the packing table's serial twins, the plan's earlier cell times):
    the same CPU model and core count, the same GPU model(s) and driver. Not the number of GPUs:
    a cell names how many it uses, and measures the same on a machine with more of them; not the
    time, host name or commit."""
    return {"cpu_model": record.get("cpu_model"), "cpu_count": record.get("cpu_count"),
            "gpus": sorted({g.get("name") for g in record.get("gpus", [])}),
            "driver": next((g.get("driver") for g in record.get("gpus", [])), None)}


def differences(a: Dict[str, Any], b: Dict[str, Any]) -> List[str]:
    """'gpus: [T4] vs [V100]' for each fingerprint field that differs; [] for the same machine."""
    fa, fb = fingerprint(a), fingerprint(b)
    return ["{}: {} vs {}".format(k, fa[k], fb[k]) for k in fa if fa[k] != fb[k]]


def describe(record: Dict[str, Any]) -> str:
    """One line for a report: host, CPU, memory, GPUs with driver and CUDA, commit."""
    names = [g.get("name") for g in record.get("gpus", [])]
    gpus = "{}× {}".format(len(names), ", ".join(sorted(set(names)))) if names else "none"
    git = record.get("git") or {}
    commit = (git.get("commit") or "unknown")[:10] + (" (dirty)" if git.get("dirty") else "")
    driver = next((g.get("driver") for g in record.get("gpus", [])), None)
    return "{} · {} · {} cores · {} GiB · GPUs: {}{}{} · compare {} at {}".format(
        record.get("hostname", "?"), record.get("cpu_model"), record.get("cpu_count"),
        record.get("memory_gib"), gpus, " · driver {}".format(driver) if driver else "",
        " · CUDA {}".format(record["cuda_driver_version"]) if record.get("cuda_driver_version") else "",
        record.get("compare_version"), commit)


def git_commit() -> Dict[str, Any]:
    """The commit compare runs from, only when its source tree is this project's own checkout (the
    folder above the package is the top of the work tree): a copy inside another repository, or an
    installed package under one, would otherwise be credited with that repository's commit."""
    root = Path(__file__).resolve().parent.parent
    top = command_output(["git", "-C", str(root), "rev-parse", "--show-toplevel"])
    commit = command_output(["git", "-C", str(root), "rev-parse", "HEAD"])
    if top is None or commit is None or Path(top).resolve() != root:
        return {"commit": None, "dirty": None}
    dirty = command_output(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"])
    return {"commit": commit, "dirty": bool(dirty)}


def host_info() -> Dict[str, Any]:
    """What the submitting side adds to any machine record: compare's version and commit."""
    return {
        "host_python": sys.executable,
        "compare_version": __version__,
        "git": git_commit(),
        "recorded_at": utc_now(),
    }


def info() -> Dict[str, Any]:
    """The machine record stored with every campaign whose runs execute on this machine."""
    return dict(node_info(), **host_info())
