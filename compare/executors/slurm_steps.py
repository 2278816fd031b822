"""Cells as job steps of the Slurm allocation compare itself runs in, side by side.

    salloc --nodes=1 --gpus-per-node=8 --exclusive compare run --executor slurm --gpus 1,2 …
    sbatch --nodes=1 --ntasks=2 --wrap "compare run --executor slurm --concurrency 2 …"

Inside an allocation (SLURM_JOB_ID set) the Slurm executor submits no job: each cell is the job
script an sbatch'ed run would get (slurm_tools.write_job), run here, so its srun is a step of the
allocation, with `--exact`: it asks for exactly its tasks, GPUs and CPUs (the slot's share,
COMPARE_STEP_CPUS), and Slurm places and binds it. The scheduler packs the cells onto one node's
GPUs (on a CPU allocation, its cores) by the rule it applies on one machine (scheduler.py,
resources.allocation_pool), so several 1-GPU cells run at once. A step ends with its cell: its
processes carry the attempt's tag and die with compare (timeout, Ctrl-C), as a local run's do.
Cells of more nodes than the allocation has are submitted as jobs of their own (slurm.py).
"""
import itertools
import os
from typing import Any, Dict, Optional

from backends.contract import RunResult, RunSpec, Unsupported, utc_now
from backends.contract.shared import ATTEMPT_ENV, dataset

from .. import envs
from ..resources import allocation
from . import slurm_tools as st
from .base import CAMPAIGN_ENV, collect, end_processes, failure, start_and_wait

__all__ = ["allocation", "run_step", "stop"]
_offsets = itertools.count(1)  # one per executor: no two steps running at once share a port


def run_step(executor, spec: RunSpec, campaign, timeout: float, slot=None) -> RunResult:
    """Run `spec` as a step of the allocation and return its result (never raises for a run)."""
    started, alloc = utc_now(), allocation()
    if not hasattr(executor, "port_offset"):
        executor.port_offset = next(_offsets)
    cpus = slot.cpus if slot is not None and slot.cpus else alloc["cpus"]
    srun = ["--exact", "--job-name=compare-" + spec.run_id]
    if alloc.get("mem_mb"):  # memory is a resource here: the step takes its share, not all of it
        srun.append("--mem={}M".format(max(1, alloc["mem_mb"] * cpus // alloc["cpus"])))
    try:
        script, work, how, tasks = executor.job_script(
            spec, campaign, srun,
            {"COMPARE_PORT_OFFSET": str(executor.port_offset), "COMPARE_STEP_CPUS": str(cpus)})
    except Unsupported as exc:
        return failure(spec, "unsupported", str(exc), started_at=started)
    except (envs.EnvError, st.SlurmError, dataset.DataError) as exc:
        return failure(spec, "failed", "not started: {}".format(exc), started_at=started)
    out_path, err_path = campaign.log_paths(spec.run_id)
    env = dict(os.environ, **{ATTEMPT_ENV: spec.nonce, CAMPAIGN_ENV: str(campaign.root)})
    with open(str(out_path), "w") as out, open(str(err_path), "w") as err:
        try:
            rc, timed_out = start_and_wait(["bash", str(script)], out, err, env, work, timeout,
                                           lambda proc: setattr(executor, "step", (proc, spec.nonce)),
                                           lambda: stop(executor))
        except OSError as exc:
            return failure(spec, "failed", "could not start the job step: {}".format(exc),
                           started_at=started)
    result = collect(spec, work / "result.json", rc, err_path, started, timed_out, timeout)
    result.environment.update(executor=executor.name, **how)
    result.environment["slurm"] = _record(alloc, work, rc, tasks, cpus)
    return result


def _record(alloc: Dict[str, Any], work, rc: Optional[int], tasks: int, cpus: int) -> Dict[str, Any]:
    seen = st.tasks_seen(work)
    nodes_file = work / st.NODES_FILE
    return {"job_id": alloc["job_id"], "step": True, "exit_code": rc, "cpus": cpus,
            "tasks_per_node": tasks, "nodes": nodes_file.read_text().split() if nodes_file.exists()
            else [], "tasks": [{"task": t, "node": n, "hostname": h} for t, n, h in seen]}


def stop(executor) -> None:
    """End the step `executor` runs (its srun and every process of its attempt), if any."""
    step = getattr(executor, "step", None)
    if step is not None:
        proc, nonce = step
        end_processes(proc, ATTEMPT_ENV, nonce)
        executor.step = None
