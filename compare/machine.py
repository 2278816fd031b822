"""What machine this is: CPU, memory, NVIDIA GPUs (nvidia-smi), Docker engine, project commit."""
import datetime
import os
import platform
import shutil
import socket
import subprocess
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
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_gib": memory_gib(),
        "gpus": gpus(),
        "compare_version": __version__,
        "git": git_commit(),
        "recorded_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
