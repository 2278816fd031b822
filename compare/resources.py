"""What cells can be placed on: pools of units (GPUs, blocks of CPU cores) split so that cells run
side by side on disjoint sets (compare/scheduler.py places them). Each executor owns its pool
(Executor.pool): local and docker this machine's (machine_pool), Slurm its allocation's.

On GPUs the unit is a GPU: the pool is the GPUs `CUDA_VISIBLE_DEVICES` names (else every GPU
nvidia-smi lists), less those another process computes on. Each GPU owns a block of cores: the
cores of its own NUMA node (/sys/bus/pci/devices/<bus>/numa_node, /sys/devices/system/node) split
between the GPUs of that node; where the machine does not say, the cores in node order split evenly.
On a CPU the unit is a block of cores: `--concurrency N` splits them into N blocks, in node order
(into as many as the study has cells, where it has fewer: scheduler.pool_for). A cell is pinned
to the cores of its units only while cells share the machine (concurrency > 1); one cell at a
time keeps every core, as a serial sweep always did.
"""
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from backends.contract import visible_gpus
from backends.contract.shared import command_output, cpuset

__all__ = ["Slot", "Pool", "cpulist", "cpuset", "machine_pool", "at_once"]

SYS = Path("/sys")


@dataclass(frozen=True)
class Slot:
    """Where one cell runs: its GPUs (as CUDA_VISIBLE_DEVICES names them; () on a CPU), the
    cores it is pinned to (() = not pinned: every core of the machine), and how many cores are
    its share (a Slurm step asks for that many; Slurm picks which)."""

    gpus: Tuple[str, ...] = ()
    cores: Tuple[int, ...] = ()
    cpus: int = 0

    def env(self) -> Dict[str, str]:
        """The variables that give a process exactly these GPUs, numbered as nvidia-smi does."""
        if not self.gpus:
            return {}
        return {"CUDA_VISIBLE_DEVICES": ",".join(self.gpus), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


@dataclass
class Pool:
    """The units cells take (GPU ids, or names of core blocks on a CPU), each with its cores."""

    units: List[str]
    cores: Dict[str, List[int]]  # unit -> its cores
    gpu: bool  # units are GPUs (else blocks of cores)
    pin: bool  # pin each cell to the cores of its units (cells share the machine)
    notes: List[str] = field(default_factory=list)  # what was left out of the pool, and why
    # who picks the GPUs and cores of a slot: compare (CUDA_VISIBLE_DEVICES, affinity), or slurm
    # (job steps of an allocation ask for counts; the units are then only counted)
    assigned_by: str = "compare"

    def need(self, workers: int) -> int:
        """Units a cell of `workers` workers per node takes: its GPUs, or on a CPU enough blocks
        for one core per worker; never more than the pool has (such a cell runs alone)."""
        if self.gpu:
            n = workers
        else:
            size = max(1, min(len(c) for c in self.cores.values()))
            n = -(-workers // size)
        return max(1, min(n, len(self.units)))

    def describe(self, concurrency: int) -> str:
        """', up to 2 at once on GPUs 0,1 (each pinned to its cores)'; '' for one at a time."""
        if concurrency == 1:
            return ""
        where = "GPUs " + ",".join(self.units) if self.gpu else \
            "{} blocks of cores".format(len(self.units))
        return ", up to {} at once on {}{}".format(concurrency, where, " (each pinned to its cores)"
                                                   if self.pin else "")

    def slot(self, units: Sequence[str]) -> Slot:
        share = sorted({c for u in units for c in self.cores[u]})
        return Slot(tuple(units) if self.gpu else (), tuple(share) if self.pin else (), len(share))


def cpulist(text: str) -> List[int]:
    """'0-3,8,10-11' (the kernel's list format) -> [0, 1, 2, 3, 8, 10, 11]."""
    out: List[int] = []
    for part in text.strip().split(","):
        if not part.strip():
            continue
        first, _, last = part.partition("-")
        out.extend(range(int(first), int(last or first) + 1))
    return out


def numa_nodes(allowed: Sequence[int], sys_root: Path = SYS) -> Dict[int, List[int]]:
    """The allowed cores by NUMA node, as /sys/devices/system/node says; {0: allowed} where it
    says nothing."""
    allowed_set, out = set(allowed), {}
    folder = sys_root / "devices" / "system" / "node"
    for node in sorted(folder.glob("node[0-9]*"), key=lambda p: int(p.name[4:])):
        try:
            cores = [c for c in cpulist((node / "cpulist").read_text()) if c in allowed_set]
        except (OSError, ValueError):
            continue
        if cores:
            out[int(node.name[4:])] = cores
    seen = {c for cores in out.values() for c in cores}
    if not out or seen != allowed_set:  # a node list that misses cores is not to be trusted
        return {0: sorted(allowed_set)}
    return out


def gpu_node(bus_id: str, sys_root: Path = SYS) -> Optional[int]:
    """The NUMA node of the GPU at PCI address bus_id (nvidia-smi: 00000000:18:00.0), or None."""
    domain, _, rest = bus_id.strip().lower().partition(":")
    path = sys_root / "bus" / "pci" / "devices" / "{}:{}".format(domain[-4:], rest)
    try:
        node = int((path / "numa_node").read_text())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


def split(items: Sequence[int], parts: int) -> List[List[int]]:
    """`items` in `parts` contiguous runs whose sizes differ by at most one."""
    base, extra = divmod(len(items), parts)
    out, start = [], 0
    for i in range(parts):
        size = base + (1 if i < extra else 0)
        out.append(list(items[start:start + size]))
        start += size
    return out


def gpu_cores(gpus: Sequence[str], nodes_of: Dict[str, Optional[int]],
              cores_by_node: Dict[int, List[int]]) -> Dict[str, List[int]]:
    """Each GPU's block of cores: its NUMA node's cores split between that node's GPUs where every
    GPU's node is known; else every core, in node order, split evenly between the GPUs."""
    out: Dict[str, List[int]] = {}
    flat = [c for n in sorted(cores_by_node) for c in cores_by_node[n]]  # every core, in node order
    if all(nodes_of.get(g) in cores_by_node for g in gpus):
        for node, cores in cores_by_node.items():
            mine = [g for g in gpus if nodes_of[g] == node]
            out.update(zip(mine, split(cores, len(mine))) if mine else [])
    if not out or any(not c for c in out.values()):
        out = dict(zip(gpus, split(flat, len(gpus))))
    # more GPUs than cores: the GPUs without a core of their own share them round robin
    return {g: c or [flat[i % len(flat)]] for i, (g, c) in enumerate(out.items())}


def allowed_cores() -> List[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def gpu_pool(largest: int) -> Pool:
    """This machine's GPUs as a pool (see the module's docstring); `largest`: the most GPUs one
    cell of the sweep takes (busy GPUs stay in the pool when leaving them out leaves too few)."""
    rows = [r.split(",") for r in (command_output(["nvidia-smi", "--query-gpu=index,pci.bus_id,uuid",
                                         "--format=csv,noheader"]) or "").splitlines()]
    rows = [[x.strip() for x in r] for r in rows if len(r) == 3]
    busy = set((command_output(["nvidia-smi", "--query-compute-apps=gpu_uuid", "--format=csv,noheader"])
                or "").split())
    visible = visible_gpus()
    ids = visible if visible is not None else [r[0] for r in rows]
    by_id = {k: r for r in rows for k in (r[0], r[2])}  # by index and by UUID
    notes = []
    free = [g for g in ids if g not in by_id or by_id[g][2] not in busy]
    if len(free) < len(ids):
        taken = [g for g in ids if g not in free]
        if len(free) >= largest:
            notes.append("GPU {} left out: another process computes on it".format(", ".join(taken)))
            ids = free
        else:
            notes.append("GPU {} in use by another process, but the sweep needs {} GPUs: kept in "
                         "the pool".format(", ".join(taken), largest))
    nodes = numa_nodes(allowed_cores())
    blocks = gpu_cores(ids, {g: gpu_node(by_id[g][1]) if g in by_id else None for g in ids}, nodes)
    return Pool(ids, blocks, gpu=True, pin=True, notes=notes)


def core_pool(concurrency: int, cores: Optional[List[int]] = None,
              nodes: Optional[Dict[int, List[int]]] = None) -> Pool:
    """A CPU's cores as `concurrency` blocks (one block, unpinned, for a serial sweep)."""
    cores = allowed_cores() if cores is None else cores
    nodes = numa_nodes(cores) if nodes is None else nodes
    flat = [c for n in sorted(nodes) for c in nodes[n]]
    parts = split(flat, max(1, min(concurrency, len(flat))))
    names = ["cores{}".format(i) for i in range(len(parts))]
    return Pool(names, dict(zip(names, parts)), gpu=False, pin=concurrency > 1)


def planned_gpus(count: int) -> Pool:
    """A pool of `count` GPUs for `--plan-gpus` (another machine: its cores are not known here)."""
    ids = [str(i) for i in range(count)]
    return Pool(ids, {g: [] for g in ids}, gpu=True, pin=False)


def single() -> Pool:
    """One unit: one cell at a time, placed by the executor itself (jobs that run elsewhere)."""
    return Pool(["all"], {"all": []}, gpu=False, pin=False)


def machine_pool(device: str, largest: int, concurrency: Optional[int]) -> Tuple[Pool, int]:
    """This machine's pool and how many cells run at once on it: its free GPUs (auto: all of
    them; `largest`: the most GPUs one cell takes) or its cores (auto: one cell at a time)."""
    if device != "cuda":
        pool = core_pool(concurrency or 1)
        return pool, len(pool.units)
    pool = gpu_pool(largest)
    if not pool.units:  # no GPU that nvidia-smi or CUDA_VISIBLE_DEVICES names: the executor picks
        return single(), 1
    return at_once(pool, concurrency)


def at_once(pool: Pool, concurrency: Optional[int]) -> Tuple[Pool, int]:
    """(pool, how many cells run on it at once): `concurrency`, or every unit (None); a cell is
    pinned to its units' cores only while it shares the pool."""
    count = min(concurrency or len(pool.units), len(pool.units))
    pool.pin = pool.pin and count > 1
    return pool, count
