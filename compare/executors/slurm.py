"""Slurm executor: one batch job per run, its ranks started by srun across 1 to N nodes.

    compare run --executor slurm --frameworks caffe2 --nodes 1,2 --gpus 1,2 [--partition P]
                [--account A] [--time-limit MINUTES] [--slurm-option KEY=VALUE]

Each run becomes `sbatch` of a job script (slurm_tools.py) on whole nodes; inside it srun starts
the backend's tasks (one per worker, or one per node where the backend launches its workers
itself: each backend's srun_tasks()/srun_command()), with the rendezvous at the first node's
address as Slurm knows it. The backend runs in a container through pyxis where srun offers it and
an image is known, else in the managed environment on the shared filesystem (the campaign and
COMPARE_CACHE must be visible to every node). Jobs run one after the other, so runs never share
nodes. Job ids go to the campaign's `jobs` file: `--resume` re-attaches to jobs still queued or
running (or collects what they left) instead of submitting them again; close() cancels them.
"""
import dataclasses
import json
import math
import re
import time
from pathlib import Path
from typing import Any, ClassVar, Dict, List, Optional, Tuple

import backends.machine
from backends.protocol import RunResult, RunSpec, Unsupported

from .. import envs
from ..errors import UserError
from ..frameworks import Framework, get
from . import Context, Executor
from . import slurm_tools as st
from .base import collect, failure, now, own_env, tail
from .local import stage_backends

JOBS_FILE = "jobs"  # JSON lines: one per submitted, collected or cancelled job
TIME_LIMIT = re.compile(r"^(\d+-)?\d+(:\d+){0,2}$")  # Slurm: MM, MM:SS, HH:MM:SS, D-HH[:MM[:SS]]
OPTION_KEY = re.compile(r"^[a-z][a-z0-9-]+$")
# sbatch options compare sets itself, and the flag of compare to use instead
OWNED = {"nodes": "--nodes", "ntasks": "--gpus", "ntasks-per-node": "--gpus", "gpus": "--gpus",
         "gpus-per-node": "--gpus", "time": "--time-limit", "partition": "--partition",
         "account": "--account", "output": "--results", "error": "--results", "chdir": "--results",
         "job-name": "--results"}
PROBE_TIMEOUT = 900  # seconds to wait for a node to take the machine record (it may queue)


def _tasks_per_node(module, spec: RunSpec) -> int:
    return getattr(module, "srun_tasks", lambda s: 1)(spec)


def _gpu_count(gres: str) -> int:
    """'gpu:a100:4(S:0-1),nic:1' -> 4 (the GPUs per node a partition's nodes have)."""
    counts = [int(m) for m in re.findall(r"gpu(?::[\w.-]+)?:(\d+)", gres)]
    return max(counts or [0])


class SlurmExecutor(Executor):
    name = "slurm"
    auto = False  # a cluster is asked for, never picked behind the user's back
    runs_on = "job"
    multi_node = True
    SETTINGS = {"partition": "--partition", "account": "--account", "time_limit": "--time-limit",
                "slurm_option": "--slurm-option"}
    _machines: ClassVar[Dict[str, Dict[str, Any]]] = {}  # placement -> machine record (one probe)

    @classmethod
    def available(cls, ctx: Context) -> Tuple[bool, str]:
        import shutil
        if not shutil.which("sbatch"):
            return False, ("no sbatch on PATH (not a Slurm login node; scripts/slurm-cluster starts "
                           "a test cluster)")
        try:
            rows = st.partitions()
        except st.SlurmError as exc:
            return False, "sinfo does not answer: {}".format(exc)
        names = sorted({r["partition"] for r in rows})
        return True, "Slurm answers (partitions: {})".format(", ".join(names) or "none")

    @classmethod
    def describe(cls, ctx: Context) -> List[str]:
        lines = [st.describe_partition(r) for r in st.partitions()]
        lines.append("containers: pyxis (srun --container-image)" if st.has_pyxis() else
                     "containers: none (runs use the managed environments on a shared filesystem)")
        return lines

    @classmethod
    def check_settings(cls, settings: Dict[str, Any]) -> Dict[str, Any]:
        out = dict(settings)
        limit = out.get("time_limit")
        if limit is not None and not TIME_LIMIT.match(str(limit)):
            raise UserError("--time-limit {!r}: not a Slurm time; give minutes (30), MM:SS, "
                            "HH:MM:SS (01:30:00) or D-HH:MM:SS".format(limit))
        options = []
        for item in out.get("slurm_option") or []:
            key, sep, value = item.lstrip("-").partition("=")
            if not sep or not value or not OPTION_KEY.match(key):
                raise UserError("--slurm-option {!r}: expected KEY=VALUE of an sbatch option, e.g. "
                                "qos=high or constraint=a100 (passed as --KEY=VALUE)".format(item))
            if key in OWNED:
                raise UserError("--slurm-option {}: compare sets --{} itself; use {}".format(
                    item, key, OWNED[key]))
            options.append("--{}={}".format(key, value))
        if options:
            out["slurm_option"] = options
        return out

    @classmethod
    def _placement(cls, settings: Dict[str, Any]) -> List[str]:
        """sbatch/srun arguments that say where jobs go: partition, account, the user's options."""
        args = ["--{}={}".format(k, settings[k]) for k in ("partition", "account") if settings.get(k)]
        return args + list(settings.get("slurm_option") or [])

    @classmethod
    def machine(cls, ctx: Context) -> Dict[str, Any]:
        """The machine record taken on a compute node by a one-task job (srun), with every GPU a
        node of the partition has; the submitting host adds only compare's version and commit."""
        from .. import machine
        placement = cls._placement(ctx.settings)
        key = " ".join(placement)
        if key not in cls._machines:
            try:
                rows = [r for r in st.partitions()
                        if not ctx.settings.get("partition") or
                        r["partition"].rstrip("*") == ctx.settings["partition"]]
                gpus = max([_gpu_count(r["gres"]) for r in rows] or [0])
                ctx.log("taking the machine record on a Slurm compute node (srun)")
                out = st.call(["srun", "--nodes=1", "--ntasks=1", "--job-name=compare-machine",
                               "--time=5"] + placement +
                              (["--gpus-per-node={}".format(gpus)] if gpus else []) +
                              ["python3", "-c", Path(backends.machine.__file__).read_text()],
                              timeout=PROBE_TIMEOUT)
                record = json.loads(out.strip().splitlines()[-1])
            except (st.SlurmError, ValueError, IndexError) as exc:
                raise UserError("--executor slurm: the machine record could not be taken on a "
                                "compute node ({}); check `srun -N1 python3 -V`".format(exc)) from None
            record.update(machine.host_info())
            record["slurm"] = {"partitions": rows, "placement": placement}
            cls._machines[key] = record
        return dict(cls._machines[key])

    def __init__(self, ctx: Context):
        super().__init__(ctx)
        self.settings = ctx.settings
        self.outstanding: Dict[str, Tuple[str, Any]] = {}  # job id -> (run id, campaign)
        self.interpreters = envs.Interpreters(ctx.device, ctx.overrides, ctx.log)
        self._pyxis: Optional[bool] = None

    # --- where a run's backend runs: a pyxis container or the shared filesystem -------------

    def _image(self, fw: Framework) -> Optional[str]:
        """The container image of fw's runs, when pyxis runs them: COMPARE_IMAGE_<FRAMEWORK>, else
        the pinned NGC image on cuda; None: the managed environment (also with --python)."""
        import os
        if self.ctx.overrides:
            return None
        if self._pyxis is None:
            self._pyxis = st.has_pyxis()
        named = os.environ.get("COMPARE_IMAGE_" + fw.name.upper())
        image = named or (fw.ngc_image if self.ctx.device == "cuda" else None)
        return st.enroot_uri(image) if self._pyxis and image else None

    def _environment(self, fw: Framework, campaign, work: Path) -> Tuple[str, Dict[str, Any], List[str]]:
        """(python, what the result records about it, srun arguments)."""
        image = self._image(fw)
        if image:
            root = str(campaign.root)
            return "python", {"slurm_environment": "pyxis", "image": image}, [
                "--container-image=" + image, "--container-mounts={0}:{0}".format(root),
                "--container-workdir=" + str(work)]
        interp = self.interpreters.get(fw)
        return interp.python, {"slurm_environment": "shared filesystem", "python": interp.python,
                               "interpreter_source": interp.source, "env_dir": interp.env_dir}, []

    # --- one run -----------------------------------------------------------------------------

    def run(self, spec: RunSpec, campaign, timeout: float) -> RunResult:
        started = now()
        earlier = self._attachable(campaign, spec.run_id)
        if earlier:
            job_id, work, how = earlier["job_id"], Path(earlier["work"]), earlier["how"]
            started = earlier.get("at", started)
            # the job runs the attempt it was submitted with: its result echoes that nonce
            spec = dataclasses.replace(spec, nonce=earlier.get("nonce", spec.nonce))
            self.ctx.log("re-attaching to Slurm job {} of {} (submitted by an earlier session)".format(
                job_id, spec.run_id))
        else:
            try:
                job_id, work, how = self._submit(spec, campaign, timeout)
            except Unsupported as exc:
                return failure(spec, "unsupported", str(exc), started_at=started)
            except (envs.EnvError, st.SlurmError) as exc:
                return failure(spec, "failed", "not submitted: {}".format(exc), started_at=started)
        self.outstanding[job_id] = (spec.run_id, campaign)
        info = self._wait(job_id, spec.run_id)
        result = self._result(spec, job_id, work, info, campaign, started)
        result.environment.update(executor=self.name, **how)
        self.outstanding.pop(job_id, None)  # (close() may have run meanwhile, from a signal)
        self._log_job(campaign, "collected", spec.run_id, job_id, state=result.environment["slurm"]["state"])
        return result

    def _submit(self, spec: RunSpec, campaign, timeout: float) -> Tuple[str, Path, Dict[str, Any]]:
        fw = get(spec.framework)
        module = fw.module()
        tasks = _tasks_per_node(module, spec)
        work = campaign.work_dir(spec.run_id)
        python, how, srun_args = self._environment(fw, campaign, work)
        command = getattr(module, "srun_command", module.command)
        cmd = command(python, spec, str(campaign.save_spec(spec)), str(work / "result.json"))
        code_dir = stage_backends(campaign.root / "code")
        env: Dict[str, Optional[str]] = dict(own_env(spec, code_dir), COMPARE_EXECUTOR=self.name,
                                             COMPARE_LAUNCHER="srun",
                                             COMPARE_ENV=how.get("env_dir") or how.get("image") or python)
        if spec.precision != "fp32":
            env["NVIDIA_TF32_OVERRIDE"] = None  # only fp32 forbids TF32
        if spec.device == "cuda":
            srun_args = ["--gpus-per-node={}".format(spec.gpus)] + srun_args
        script = st.write_job(work, spec.run_id, spec.nodes, tasks, cmd, env, srun_args,
                              ranks=tasks == spec.gpus)
        out_path, err_path = campaign.log_paths(spec.run_id)
        limit = self.settings.get("time_limit") or str(math.ceil(timeout / 60))
        args = ["--job-name=compare-" + spec.run_id, "--chdir=" + str(work), "--output=" + str(out_path),
                "--error=" + str(err_path), "--nodes={}".format(spec.nodes),
                "--ntasks-per-node={}".format(tasks), "--exclusive", "--mem=0", "--no-requeue",
                "--time=" + limit] + self._placement(self.settings)
        if spec.device == "cuda":
            args.append("--gpus-per-node={}".format(spec.gpus))
        job_id = st.submit(args, script)
        how = dict(how, slurm_tasks_per_node=tasks, slurm_time_limit=limit)
        self._log_job(campaign, "submitted", spec.run_id, job_id, work=str(work), how=how,
                      nonce=spec.nonce)
        self.ctx.log("submitted Slurm job {} for {}".format(job_id, spec.run_id))
        return job_id, work, how

    def _wait(self, job_id: str, run_id: str) -> Optional[Dict[str, str]]:
        """Poll until the job has ended; its last `scontrol show job`, or None once forgotten
        (or when the id now names another job: the controller's state was wiped)."""
        pause = 0.2
        while True:
            info = st.job_info(job_id)
            if info is None or info.get("JobName") != "compare-" + run_id:
                return None
            if st.state_of(info) in st.ENDED:
                return info
            time.sleep(pause)
            pause = min(2.0, pause * 1.5)

    def _result(self, spec: RunSpec, job_id: str, work: Path, info: Optional[Dict[str, str]],
                campaign, started: str) -> RunResult:
        """Slurm's end state -> our status; the job's own result file where it wrote one."""
        err_path = campaign.log_paths(spec.run_id)[1]
        state = st.state_of(info) if info else None
        rc = st.exit_code(info) if info else st.read_exit_code(work)
        errors = tail(err_path)
        if state == "TIMEOUT":
            result = failure(spec, "timeout", "Slurm stopped job {} at its time limit ({})".format(
                job_id, info.get("TimeLimit")), errors, started)
        elif state == "CANCELLED":
            result = failure(spec, "failed", "cancelled: Slurm job {} was cancelled".format(job_id),
                             errors, started)
        elif state == "OUT_OF_MEMORY":
            result = failure(spec, "oom", "Slurm job {} ran out of memory (OUT_OF_MEMORY)".format(job_id),
                             errors, started)
        elif state in ("COMPLETED", "FAILED") or (state is None and rc is not None):
            result = collect(spec, work / "result.json", rc, err_path, started, False, 0)
        elif state is None:
            result = failure(spec, "failed", "Slurm no longer knows job {} and it left no exit code "
                             "(cancelled or stopped before its script ended)".format(job_id),
                             errors, started)
        else:  # NODE_FAIL, BOOT_FAIL, PREEMPTED, DEADLINE, ...
            result = failure(spec, "failed", "Slurm job {} ended {} (reason: {})".format(
                job_id, state, info.get("Reason", "?")), errors, started)
        nodes = self._nodes(work, info)
        tasks = st.tasks_seen(work)
        result.environment["slurm"] = {
            "job_id": job_id, "state": state, "exit_code": rc, "nodes": nodes,
            "nodelist": info.get("NodeList") if info else ",".join(nodes),
            "partition": info.get("Partition") if info else None,
            "tasks": [{"task": t, "node": n, "hostname": h} for t, n, h in tasks],
            # every node of the allocation ran a task of the job
            "spanned_nodes": bool(nodes) and set(nodes) == {n for _, n, _ in tasks}}
        return result

    @staticmethod
    def _nodes(work: Path, info: Optional[Dict[str, str]]) -> List[str]:
        path = work / st.NODES_FILE
        if path.exists():
            return path.read_text().split()
        try:
            return st.hostnames(info.get("NodeList", "")) if info else []
        except st.SlurmError:
            return []

    # --- the campaign's jobs file: resume and cancel -----------------------------------------

    def _log_job(self, campaign, event: str, run_id: str, job_id: str, **fields) -> None:
        entry = dict(event=event, run_id=run_id, job_id=job_id, at=now(), **fields)
        with open(str(campaign.root / JOBS_FILE), "a") as f:
            f.write(json.dumps(entry, sort_keys=True) + "\n")

    def _attachable(self, campaign, run_id: str) -> Optional[Dict[str, Any]]:
        """The submission of run_id by an earlier session when nothing collected it since and its
        job is still known to Slurm as ours, or left its exit code or result behind."""
        path = campaign.root / JOBS_FILE
        last = None
        for line in (path.read_text().splitlines() if path.exists() else []):
            entry = json.loads(line)
            if entry.get("run_id") == run_id:
                last = entry
        if not last or last["event"] != "submitted" or last["job_id"] in self.outstanding:
            return None
        work = Path(last["work"])
        info = st.job_info(last["job_id"])
        if info is not None and info.get("JobName") == "compare-" + run_id:
            return last
        left = (work / st.EXIT_CODE_FILE).exists() or (work / "result.json").exists()
        return last if left else None

    def close(self) -> None:
        """Cancel the jobs still queued or running (Ctrl-C, SIGTERM), and wait until squeue no
        longer lists them; each is recorded as cancelled, so --resume submits it again."""
        jobs, self.outstanding = dict(self.outstanding), {}
        if not jobs:
            return
        ids = list(jobs)
        try:
            st.cancel(ids)
            deadline = time.time() + 30
            while st.queued(ids) and time.time() < deadline:
                time.sleep(0.2)
        except st.SlurmError as exc:
            self.ctx.log("could not cancel Slurm job(s) {}: {}".format(", ".join(ids), exc))
            return
        for job_id, (run_id, campaign) in jobs.items():
            self._log_job(campaign, "cancelled", run_id, job_id)
        self.ctx.log("cancelled Slurm job(s) {}".format(", ".join(ids)))
