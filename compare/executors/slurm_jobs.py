"""How a cell runs on Slurm: as a batch job of its own (Job), or as a step of the allocation
compare itself runs in (Allocation), side by side with other cells:

    salloc --nodes=1 --gpus-per-node=8 --exclusive compare run --executor slurm --gpus 1,2 …
    sbatch --nodes=1 --ntasks=2 --wrap "compare run --executor slurm --concurrency 2 …"

Inside an allocation (SLURM_JOB_ID set) a cell is the job script an sbatch'ed run would get
(slurm_tools.write_job), run here, so its srun is a step of the allocation, with `--exact`: it
asks for exactly its tasks, GPUs and CPUs (the slot's share, COMPARE_STEP_CPUS), and Slurm
places and binds it. The scheduler packs the cells onto one node's GPUs (on a CPU allocation,
its cores: Allocation.pool) by the rule it applies on one machine, so several 1-GPU cells run at
once. A step ends with its cell: its processes carry the attempt's tag and die with compare
(timeout, Ctrl-C), as a local run's do. Cells of more nodes than the allocation has are jobs.
"""
import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from backends.contract import RunSpec

from ..resources import Pool, Slot, core_pool, split
from . import slurm_tools as st
from .base import Handle
from .results import Outcome

# Slurm's end states that say how a job ended whatever it wrote: (status, reason)
ENDS = {"TIMEOUT": ("timeout", "Slurm stopped job {job} at its time limit ({limit})"),
        "CANCELLED": ("failed", "cancelled: Slurm job {job} was cancelled"),
        "OUT_OF_MEMORY": ("oom", "Slurm job {job} ran out of memory (OUT_OF_MEMORY)")}
# why a job stays PENDING that no wait ends (its request is past its partition's limits, which
# Slurm queues without EnforcePartLimits): the job is cancelled and the cell failed, saying so
NEVER_STARTS = {"PartitionNodeLimit": "it asks more nodes ({nodes}) than partition {partition} "
                                      "has or allows",
                "PartitionTimeLimit": "its time limit ({limit}) is above partition {partition}'s"}


class Job(Handle):
    """A cell's batch job, waited for by polling `scontrol show job` (its time limit, not
    compare's timeout, ends it); close() of the executor cancels it. Its end state says how it
    ended, or, once the controller forgot it, the exit code file its script left."""

    def __init__(self, job_id: str, run_id: str, work: Path):
        self.job_id, self.run_id, self.work = job_id, run_id, work
        self.info: Optional[Dict[str, str]] = None  # its last `scontrol show job`
        self.never: Optional[str] = None  # why Slurm could never start it (it was cancelled)

    def wait(self, timeout: float) -> Outcome:
        pause = 0.2
        while True:
            info = st.job_info(self.job_id)
            if info is None or info.get("JobName") != "compare-" + self.run_id:
                info = None  # forgotten, or the id names another job: the controller was wiped
                break
            if st.state_of(info) in st.ENDED:
                break
            if self.never is None and st.state_of(info) == "PENDING" and \
                    info.get("Reason") in NEVER_STARTS:
                self.never = "Slurm cannot start job {} ({}): {}; cancelled".format(
                    self.job_id, info["Reason"], NEVER_STARTS[info["Reason"]].format(
                        nodes=info.get("NumNodes", "?").split("-")[0],
                        partition=info.get("Partition", "?"), limit=info.get("TimeLimit", "?")))
                st.call(["scancel", self.job_id])
            time.sleep(pause)
            pause = min(2.0, pause * 1.5)
        self.info = info
        rc = st.exit_code(info) if info else st.read_exit_code(self.work)
        return Outcome(exit_code=rc, ended=self._ended(rc), kernel_here=False)  # on Slurm's nodes

    @property
    def state(self) -> Optional[str]:
        return st.state_of(self.info) if self.info else None

    def _ended(self, rc: Optional[int]) -> Optional[Tuple[str, str]]:
        """(status, reason) where Slurm's end state says it; None: the run's own result says."""
        state, info = self.state, self.info or {}
        if self.never:
            return "failed", self.never
        if state in ENDS:
            status, reason = ENDS[state]
            return status, reason.format(job=self.job_id, limit=info.get("TimeLimit"))
        if state in ("COMPLETED", "FAILED") or (state is None and rc is not None):
            return None
        if state is None:
            return "failed", "Slurm no longer knows job {} and it left no exit code (cancelled or " \
                             "stopped before its script ended)".format(self.job_id)
        # NODE_FAIL, BOOT_FAIL, PREEMPTED, DEADLINE, ...
        return "failed", "Slurm job {} ended {} (reason: {})".format(self.job_id, state,
                                                                    info.get("Reason", "?"))

    def record(self, rc: Optional[int]) -> Dict[str, Any]:
        """What the result says of the job: its end, its nodes, and that every one ran a task."""
        info = self.info
        out = record(self.work, self.job_id, rc)
        if not out["nodes"] and info:
            with contextlib.suppress(st.SlurmError):
                out["nodes"] = st.hostnames(info.get("NodeList", ""))
        seen = {t["node"] for t in out["tasks"]}
        out.update(state=self.state, partition=info.get("Partition") if info else None,
                   nodelist=info.get("NodeList") if info else ",".join(out["nodes"]),
                   spanned_nodes=bool(out["nodes"]) and set(out["nodes"]) == seen)
        return out


def record(work: Path, job_id: str, rc: Optional[int], **more) -> Dict[str, Any]:
    """result.environment["slurm"]: the job's id, its exit code, its nodes and where each of its
    srun tasks ran (the files its scripts wrote)."""
    nodes_file = work / st.NODES_FILE
    return dict(job_id=job_id, exit_code=rc,
                nodes=nodes_file.read_text().split() if nodes_file.exists() else [],
                tasks=[{"task": t, "node": n, "hostname": h} for t, n, h in st.tasks_seen(work)],
                **more)


def _count(text: Optional[str]) -> int:
    """'4', 'a100:4', '2(x2)' -> 4, 4, 2; 0 for nothing."""
    digits = (text or "").split("(")[0].split(":")[-1]
    return int(digits) if digits.isdigit() else 0


@dataclass(frozen=True)
class Allocation:
    """The Slurm allocation compare runs in: its job id, nodes, and what it holds on each node."""

    job_id: str
    nodes: int
    cpus: int
    gpus: int
    mem_mb: int

    @classmethod
    def here(cls) -> Optional["Allocation"]:
        """The allocation this process runs in (salloc, or a batch script that runs compare)."""
        env = os.environ
        if not env.get("SLURM_JOB_ID"):
            return None
        gpus = (_count(env.get("SLURM_GPUS_ON_NODE")) or _count(env.get("SLURM_GPUS_PER_NODE"))
                or len([g for g in env.get("SLURM_JOB_GPUS", "").split(",") if g.strip()]))
        cpus = (_count(env.get("SLURM_CPUS_ON_NODE")) or _count(env.get("SLURM_JOB_CPUS_PER_NODE"))
                or os.cpu_count() or 1)
        nodes = _count(env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES")) or 1
        return cls(env["SLURM_JOB_ID"], nodes, cpus, gpus, _count(env.get("SLURM_MEM_PER_NODE")))

    def pool(self, device: str, concurrency: int) -> Pool:
        """The GPUs of one node (on a CPU allocation, its cores in `concurrency` blocks), each
        with its share of the node's CPUs: counted here, picked by Slurm (--exact)."""
        cores = list(range(self.cpus))
        if device == "cuda" and self.gpus:
            ids = [str(i) for i in range(self.gpus)]
            pool = Pool(ids, dict(zip(ids, split(cores, len(ids)))), gpu=True, pin=False)
        else:
            pool = core_pool(concurrency, cores, {0: cores})
            pool.pin = False
        pool.assigned_by = "slurm"
        return pool

    def step(self, spec: RunSpec, slot: Optional[Slot],
             port_offset: int) -> Tuple[List[str], Dict[str, str], int]:
        """(srun's arguments, the job script's variables, CPUs) of the cell's step: its slot's
        share of the node's CPUs (and memory, where that is a resource), a port of its own."""
        cpus = slot.cpus if slot is not None and slot.cpus else self.cpus
        srun = ["--exact", "--job-name=compare-" + spec.run_id]
        if self.mem_mb:  # memory is a resource here: the step takes its share, not all of it
            srun.append("--mem={}M".format(max(1, self.mem_mb * cpus // self.cpus)))
        return srun, {"COMPARE_PORT_OFFSET": str(port_offset), "COMPARE_STEP_CPUS": str(cpus)}, cpus
