"""What machine this is: CPU, memory, NVIDIA GPUs (nvidia-smi), driver and CUDA, Docker engine,
project commit; and whether two machine records are the same machine (never mix them silently)."""
import datetime
import os
import platform
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from . import __version__


def _run(cmd: List[str], timeout: float = 10) -> Optional[str]:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def memory_gib() -> Optional[float]:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2 ** 20, 1)
    except OSError:
        pass
    return None


def gpus() -> List[Dict[str, Any]]:
    """NVIDIA GPUs as nvidia-smi lists them; [] where there is no driver."""
    if not shutil.which("nvidia-smi"):
        return []
    out = _run(["nvidia-smi", "--query-gpu=index,name,memory.total,driver_version",
                "--format=csv,noheader,nounits"])
    rows = []
    for line in (out or "").splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4:
            rows.append({"index": int(parts[0]), "name": parts[1],
                         "memory_mib": float(parts[2]), "driver": parts[3]})
    return rows


def cuda_driver_version() -> Optional[str]:
    """The CUDA version the driver supports, from nvidia-smi's header ("CUDA Version: 12.4")."""
    if not shutil.which("nvidia-smi"):
        return None
    for line in (_run(["nvidia-smi"]) or "").splitlines():
        if "CUDA Version:" in line:
            return line.split("CUDA Version:", 1)[1].strip(" |").split()[0]
    return None


def fingerprint(record: Dict[str, Any]) -> Dict[str, Any]:
    """What makes two machine records the same machine for benchmarking (not the time or commit)."""
    return {"cpu_model": record.get("cpu_model"), "cpu_count": record.get("cpu_count"),
            "gpus": sorted(g.get("name") for g in record.get("gpus", [])),
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


def docker_status() -> str:
    """'reachable (Docker X)' or why not."""
    if not shutil.which("docker"):
        return "no docker client"
    version = _run(["docker", "version", "--format", "{{.Server.Version}}"], timeout=5)
    return "reachable (Docker {})".format(version) if version else "engine not reachable"


def git_commit() -> Dict[str, Any]:
    root = Path(__file__).resolve().parent.parent
    commit = _run(["git", "-C", str(root), "rev-parse", "HEAD"])
    if commit is None:
        return {"commit": None, "dirty": None}
    dirty = _run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"])
    return {"commit": commit, "dirty": bool(dirty)}


def info() -> Dict[str, Any]:
    """The machine record stored with every campaign."""
    found = gpus()
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_gib": memory_gib(),
        "gpus": found,
        "gpu_count": len(found),
        "cuda_driver_version": cuda_driver_version(),
        "python": platform.python_version(),
        "host_python": sys.executable,
        # where the host runs: a container (/.dockerenv) or the bare machine
        "in_container": os.path.exists("/.dockerenv"),
        "compare_version": __version__,
        "git": git_commit(),
        "recorded_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
