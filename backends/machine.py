"""The machine record of wherever this runs: CPU, memory, NVIDIA GPUs (nvidia-smi), CUDA driver.

Standard library only, Python >= 3.8, and no import from this package: a Slurm job runs this
file's source on a compute node (`python3 -c SOURCE`), where neither `compare` nor the staged
backends need to exist. `python3 backends/machine.py` prints the record as JSON.
"""
import json
import os
import platform
import shutil
import socket
import subprocess
from typing import Any, Dict, List, Optional


def command_output(cmd: List[str], timeout: float = 10) -> Optional[str]:
    """A command's stdout, stripped; None where it cannot run, fails or times out (the host asks
    nvidia-smi, docker and git through it too)."""
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def memory_gib() -> Optional[float]:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2 ** 20, 1)
    except OSError:
        pass
    return None


def gpus() -> List[Dict[str, Any]]:
    """NVIDIA GPUs as nvidia-smi lists them; [] where there is no driver."""
    if not shutil.which("nvidia-smi"):
        return []
    out = command_output(["nvidia-smi", "--query-gpu=index,name,memory.total,driver_version",
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
    for line in (command_output(["nvidia-smi"]) or "").splitlines():
        if "CUDA Version:" in line:
            return line.split("CUDA Version:", 1)[1].strip(" |").split()[0]
    return None


def cpuset(cores) -> str:
    """[0, 1, 2, 3, 8] -> '0-3,8' (the kernel's list format): the cores a run had, short."""
    parts = []  # type: List[List[int]]
    for c in sorted(cores):
        if parts and c == parts[-1][-1] + 1:
            parts[-1].append(c)
        else:
            parts.append([c])
    return ",".join(str(r[0]) if len(r) == 1 else "{}-{}".format(r[0], r[-1]) for r in parts)


def node_info() -> Dict[str, Any]:
    """What this machine is, as far as the standard library and nvidia-smi can tell."""
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
        # where this runs: a container (/.dockerenv) or the bare machine
        "in_container": os.path.exists("/.dockerenv"),
    }


if __name__ == "__main__":
    record = node_info()
    if os.environ.get("SLURMD_NODENAME"):  # run by srun: the node as Slurm names it
        record["slurm_node"] = os.environ["SLURMD_NODENAME"]
    print(json.dumps(record))
