"""Slurm executor: one batch job per run, its ranks started by srun across 1 to N nodes.

    compare run --executor slurm --frameworks caffe2 --nodes 1,2 --gpus 1,2 [--partition P]
                [--account A] [--time-limit MINUTES] [--slurm-option KEY=VALUE]

Each run becomes `sbatch` of a job script (slurm_tools.py) on whole nodes; inside it srun starts
the backend's tasks: as many per node, each running what, as the launcher the backend asks for
says (backends/launchers/: one task per worker, each a rank, where it is torchrun or srun; one
per node running the launcher itself otherwise), with the rendezvous at the first node's
address as Slurm knows it. The backend runs in a container through pyxis where srun offers it and
an image is known, else in the managed environment on the shared filesystem (the campaign and
COMPARE_CACHE must be visible to every node). Jobs run one after the other, so runs never share
nodes. Job ids go to the campaign's `jobs` file: `--resume` re-attaches to jobs still queued or
running (or collects what they left) instead of submitting them again (attach()); close()
cancels them. Inside an allocation compare runs in, cells are steps of it (slurm_jobs.py).
"""
import dataclasses
import itertools
import json
import math
import os
import re
import shlex
import time
from pathlib import Path
from typing import Any, Callable, ClassVar, Dict, List, Optional, Tuple

from backends.contract import RunResult, utc_now
from backends.contract.rules import exit_grace
from backends.contract.shared import MACHINE_SCRIPT, dataset, launchers

from .. import datasets, envs, files, resources
from ..errors import UserError
from ..frameworks import Framework, get
from . import processes
from . import slurm_tools as st
from .base import Attempt, Context, Executor, Flag, Refused, flag_named
from .local import managed_environment, stage_backends
from .processes import own_env
from .results import Outcome
from .slurm_jobs import Allocation, Job, record

JOBS_FILE = "jobs"  # JSON lines: one per submitted, collected or cancelled job
TIME_LIMIT = re.compile(r"^(\d+-)?\d+(:\d+){0,2}$")  # Slurm: MM, MM:SS, HH:MM:SS, D-HH[:MM[:SS]]
TIME_FORMS = "minutes (30), MM:SS, HH:MM:SS (01:30:00) or D-HH:MM:SS"
OPTION_KEY = re.compile(r"^[a-z][a-z0-9-]+$")
# where jobs go, and what to give for each (an empty one is refused: sbatch would be told '')
PLACES = {"partition": "a Slurm partition's name (sinfo lists them)",
          "account": "a Slurm account's name (sacctmgr show associations lists them)"}
# sbatch options compare sets itself, and the flag of compare to use instead
OWNED = {"nodes": "nodes", "ntasks": "gpus", "ntasks-per-node": "gpus", "gpus": "gpus",
         "gpus-per-node": "gpus", "time": "time_limit", "partition": "partition",
         "account": "account", "output": "results", "error": "results", "chdir": "results",
         "job-name": "results"}
PROBE_TIMEOUT = 900  # seconds to wait for a node to take the machine record (it may queue)
_PORT_OFFSETS = itertools.count(1)  # one per executor: no two steps running at once share a port
# run on a compute node with paths as arguments: "NODE readable", or "NODE unreadable PATH"
DATA_CHECK = ('for f; do test -r "$f" || { echo "${SLURMD_NODENAME:-$(hostname)} unreadable $f"; '
              'exit 0; }; done; echo "${SLURMD_NODENAME:-$(hostname)} readable"')


class Stopped(UserError):
    """Ctrl-C before the first job (the machine record's srun may wait minutes for a node): one
    line, exit 130 as a shell reports SIGINT."""

    exit_code = 130


class SlurmExecutor(Executor):
    name = "slurm"
    auto = False  # a cluster is asked for, never picked behind the user's back
    runs_on = "job"
    capabilities = frozenset({"real_data", "multi_node", "gpus"})
    FLAGS = (Flag("partition", "Slurm partition of the jobs (--executor slurm)."),
             Flag("account", "Slurm account charged (--executor slurm)."),
             Flag("time_limit", "Slurm time limit per job: minutes or HH:MM:SS (default: --timeout; "
                  "--executor slurm)."),
             Flag("slurm_option", "KEY=VALUE passed to sbatch as --KEY=VALUE, e.g. qos=high "
                  "(--executor slurm).", repeat=True))
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
            return False, "sinfo does not answer: {}{}".format(exc, _conf_hint())
        names = sorted({r["partition"] for r in rows})
        return True, "Slurm answers (partitions: {})".format(", ".join(names) or "none")

    @classmethod
    def describe(cls, ctx: Context) -> List[str]:
        lines = [st.describe_partition(r) for r in st.partitions()]
        lines.append("containers: pyxis (srun --container-image)" if st.has_pyxis() else
                     "containers: none (runs use the managed environments on a shared filesystem)")
        return lines

    @classmethod
    def check_flags(cls, flags: Dict[str, Any], named: Callable[..., str] = flag_named) -> Dict[str, Any]:
        out = dict(flags)
        for key, what in PLACES.items():  # '' would reach sbatch and the machine record's srun
            if key in out and not str(out[key]).strip():
                raise UserError("{} is empty; give {}, or leave it out (the cluster's default)".format(
                    named(key), what))
        limit = out.get("time_limit")
        if limit is not None and not str(limit).strip():
            raise UserError("{} is empty; give {}, or leave it out (default: {})".format(
                named("time_limit"), TIME_FORMS, named("timeout", "time_limit")))
        if limit is not None and not TIME_LIMIT.match(str(limit)):
            raise UserError("{} {!r}: not a Slurm time; give {}".format(named("time_limit"), limit,
                                                                        TIME_FORMS))
        if limit is not None and not any(c not in "0:-" for c in str(limit)):
            raise UserError("{} {!r}: a limit of no time (Slurm reads it as no limit at all); give a "
                            "time > 0: {}".format(named("time_limit"), limit, TIME_FORMS))
        options = []
        for item in out.get("slurm_option") or []:
            key, sep, value = item.lstrip("-").partition("=")
            if not sep or not value or not OPTION_KEY.match(key):
                raise UserError("{} {!r}: expected KEY=VALUE of an sbatch option, e.g. qos=high or "
                                "constraint=a100 (passed as --KEY=VALUE)".format(named("slurm_option"), item))
            if key in OWNED:
                raise UserError("{} {}: compare sets --{} itself; use {}".format(
                    named("slurm_option"), item, key, named(OWNED[key], "slurm_option")))
            options.append("--{}={}".format(key, value))
        if options:
            out["slurm_option"] = options
        return out

    @classmethod
    def _placement(cls, flags: Dict[str, Any]) -> List[str]:
        """sbatch/srun arguments that say where jobs go: partition, account, the user's options."""
        args = ["--{}={}".format(k, flags[k]) for k in ("partition", "account") if flags.get(k)]
        return args + list(flags.get("slurm_option") or [])

    @classmethod
    def machine(cls, ctx: Context) -> Dict[str, Any]:
        """The machine record taken on a compute node by a one-task job (srun), with every GPU a
        node of the partition has; the submitting host adds only compare's version and commit."""
        from .. import machine_record
        placement = cls._placement(ctx.flags)
        key = " ".join(placement)
        if key not in cls._machines:
            try:
                rows = [r for r in st.partitions()
                        if not ctx.flags.get("partition") or
                        r["partition"].rstrip("*") == ctx.flags["partition"]]
                gpus = max([st.gpu_count(r["gres"]) for r in rows] or [0])
                ctx.log("taking the machine record on a Slurm compute node (srun)")
                out = st.call(["srun", "--nodes=1", "--ntasks=1", "--job-name=compare-machine",
                               "--time=5"] + placement +
                              (["--gpus-per-node={}".format(gpus)] if gpus else []) +
                              ["python3", "-c", Path(MACHINE_SCRIPT).read_text()],
                              timeout=PROBE_TIMEOUT)
                record = json.loads(out.strip().splitlines()[-1])
            except KeyboardInterrupt:  # typer would end it with 130 and no word; srun is ended
                raise Stopped("interrupted (SIGINT) while taking the machine record on a Slurm "
                              "compute node (srun): nothing was submitted or written; "
                              "run the same command again") from None
            except (st.SlurmError, ValueError, IndexError) as exc:
                raise UserError("{} slurm: the machine record could not be taken on a "
                                "compute node: {}{}; check `{}`".format(
                                    ctx.said, exc, _conf_hint(), " ".join(map(shlex.quote,  # as doctor
                                        ["srun", "-N1"] + placement + ["python3", "-V"])))) from None
            record.update(machine_record.host_info())
            record["slurm"] = {"partitions": rows, "placement": placement}
            cls._machines[key] = record
        cls._check_pythons(ctx, placement)
        return dict(cls._machines[key])

    @classmethod
    def _check_pythons(cls, ctx: Context, placement: List[str]) -> None:
        """Each --python is a path on the nodes: asked there by one short job (srun), at plan
        time, as the plan asks one on this host (envs.check_python): a UserError (one line) where
        it lacks a module every run of its framework imports, or does not answer as a python."""
        given = [fw for fw in ctx.frameworks if fw.name in ctx.overrides]
        if not given:
            return
        ctx.log("asking the --python interpreter(s) on a Slurm compute node (srun)")
        try:
            node, answers = st.ask_pythons([(ctx.overrides[fw.name], fw.modules) for fw in given],
                                           envs.PROBE, envs.PROBE_TIMEOUT, placement, PROBE_TIMEOUT)
        except KeyboardInterrupt:  # as the machine record's srun
            raise Stopped("interrupted (SIGINT) while asking the --python interpreter(s) on a "
                          "Slurm compute node (srun): nothing was submitted or written; run the "
                          "same command again") from None
        except st.SlurmError as exc:
            raise UserError("--python: could not ask the interpreter(s) on a Slurm compute node: "
                            "{}{}".format(exc, _conf_hint())) from None
        for fw, (code, said) in zip(given, answers):
            envs.check_python(fw, ctx.overrides[fw.name], asked=lambda _p, _f, c=code, s=said: (
                st.answered(c, s)), where="on Slurm node {}, ".format(node))

    def check_data(self, prepared: List[dataset.Prepared]) -> None:
        """Every --data folder and its prepared side must be readable on the compute nodes (a
        shared filesystem; pyxis mounts them from there too): a one-task job tests each one's
        manifest, file list and first image before anything is submitted."""
        for p in prepared:
            paths = [os.path.join(p.path, dataset.MANIFEST), p.file_list_path()]
            paths += [os.path.join(p.root, rel) for rel, _ in p.files()[:1]]
            self.ctx.log("checking that the Slurm compute nodes read {} (srun)".format(p.root))
            try:
                out = st.call(["srun", "--nodes=1", "--ntasks=1", "--job-name=compare-data-check",
                               "--time=5"] + self._placement(self.ctx.flags) +
                              ["bash", "-c", DATA_CHECK, "check"] + paths, timeout=PROBE_TIMEOUT)
            except st.SlurmError as exc:
                raise UserError("--data {}: could not check it on a compute node ({})".format(
                    p.root, exc)) from None
            node, _, missing = (out.strip().splitlines() or [""])[-1].partition(" unreadable ")
            if missing:
                raise UserError("--data {}: Slurm node {} cannot read {}; the folder{} must be on a "
                                "filesystem every node mounts".format(
                                    p.root, node, missing, "" if datasets.beside(p) else
                                    " and the cache of its prepared side (COMPARE_CACHE)"))

    def __init__(self, ctx: Context):
        super().__init__(ctx)
        self.outstanding: Dict[str, Tuple[str, Any]] = {}  # job id -> (run id, campaign)
        self.interpreters = envs.Interpreters(ctx.device, ctx.overrides, ctx.log)
        self._pyxis: Optional[bool] = None
        self.port_offset = next(_PORT_OFFSETS)

    @classmethod
    def pool(cls, ctx: Context, largest: int, concurrency: Optional[int]) -> Tuple[resources.Pool, int]:
        """Inside an allocation, its node's GPUs (or cores), each cell a step of it; else one
        batch job after the other, placed by Slurm."""
        alloc = Allocation.here()
        if alloc is None:
            return resources.single(), 1
        return resources.at_once(alloc.pool(ctx.device, concurrency or (
            alloc.gpus if ctx.device == "cuda" else 1)), concurrency)

    # --- where a run's backend runs: a pyxis container or the shared filesystem -------------

    def _image(self, fw: Framework) -> Optional[str]:
        """The container image of fw's runs, when pyxis runs them: COMPARE_IMAGE_<FRAMEWORK>, else
        the pinned NGC image on cuda; None: the managed environment (also with --python)."""
        if self.ctx.overrides:
            return None
        if self._pyxis is None:
            self._pyxis = st.has_pyxis()
        named = os.environ.get("COMPARE_IMAGE_" + fw.name.upper())
        image = named or (fw.ngc_image if self.ctx.device == "cuda" else None)
        return st.enroot_uri(image) if self._pyxis and image else None

    def environment(self, attempt: Attempt) -> None:
        """A step of the allocation compare runs in, where it has the nodes, else a job; run in a
        pyxis container where srun runs them and an image is known, else in the managed
        environment on the shared filesystem: attempt.python, the record, srun's arguments (a
        real-data run's folder mounted read-only into a container)."""
        alloc = Allocation.here()
        attempt.notes["allocation"] = alloc if alloc and attempt.spec.nodes <= alloc.nodes else None
        try:
            self._environment(attempt)
        except (envs.EnvError, dataset.DataError) as exc:
            raise self._refused(attempt, exc) from None

    def _environment(self, attempt: Attempt) -> None:
        spec, campaign = attempt.spec, attempt.campaign
        work = campaign.work_dir(spec.run_id)
        data, attempt.notes["data_env"] = ([], {}) if spec.data == "synthetic" else \
            datasets.mounts(dataset.Prepared.find(spec.data))  # DataError: not prepared
        image = self._image(get(spec.framework))
        if image:
            attempt.python, attempt.record = "python", dict(
                {"slurm_environment": "pyxis", "image": image},
                **({"data_mounts": [m.record() for m in data]} if data else {}))
            attempt.notes["srun_args"] = ["--container-image=" + image,
                                          st.container_mounts(str(campaign.root), data),
                                          "--container-workdir=" + str(work)]
            return
        managed_environment(self.interpreters, attempt)
        attempt.record["slurm_environment"] = "shared filesystem"
        attempt.notes["srun_args"] = []

    # --- one run: a job, or a step of the allocation ---------------------------------------

    @staticmethod
    def _refused(attempt: Attempt, exc: Exception) -> Refused:
        return Refused("failed", "{}: {}".format(
            "not started" if attempt.notes.get("allocation") else "not submitted", exc))

    def attach(self, attempt: Attempt) -> bool:
        """Re-attach to the job an earlier session submitted for this cell, if any."""
        earlier = self._attachable(attempt.campaign, attempt.spec.run_id)
        if not earlier:
            return False
        attempt.work, attempt.record = Path(earlier["work"]), earlier["how"]
        attempt.started = earlier.get("at", attempt.started)
        # the job runs the attempt it was submitted with: its result echoes that nonce
        attempt.spec = dataclasses.replace(attempt.spec, nonce=earlier.get("nonce", attempt.spec.nonce))
        attempt.handle = Job(earlier["job_id"], attempt.spec.run_id, attempt.work)
        self.outstanding[earlier["job_id"]] = (attempt.spec.run_id, attempt.campaign)
        self.ctx.log("re-attaching to Slurm job {} of {} (submitted by an earlier session)".format(
            earlier["job_id"], attempt.spec.run_id))
        return True

    def command(self, attempt: Attempt) -> List[str]:
        """What each srun task runs, as many tasks per node as the backend's launcher says."""
        spec = attempt.spec
        launcher = launchers.for_spec(spec)
        attempt.notes["tasks"] = launcher.tasks_per_node(spec)
        return launcher.task_command(attempt.python, spec, launchers.rank_command(
            attempt.python, spec, attempt.spec_path, attempt.result_path))

    def _write_job(self, attempt: Attempt, srun_extra=(), env_extra=None) -> Path:
        spec = attempt.spec
        code_dir = stage_backends(attempt.campaign.root / "code")
        env: Dict[str, Optional[str]] = dict(
            own_env(spec, code_dir), COMPARE_EXECUTOR=self.name, COMPARE_LAUNCHER="srun",
            COMPARE_ENV=attempt.record.get("env_dir") or attempt.record.get("image") or attempt.python,
            **attempt.notes["data_env"], **(env_extra or {}))
        if spec.precision != "fp32":
            env["NVIDIA_TF32_OVERRIDE"] = None  # only fp32 forbids TF32
        srun_args = attempt.notes["srun_args"]
        if spec.device == "cuda":
            srun_args = ["--gpus-per-node={}".format(spec.gpus)] + srun_args
        return st.write_job(attempt.work, spec.run_id, spec.nodes, attempt.notes["tasks"],
                            attempt.command, env, list(srun_extra) + srun_args)

    def launch(self, attempt: Attempt) -> None:
        try:  # the job script hands it to srun as it is: srun's refusal would name no variable
            exit_grace()
        except ValueError as exc:
            raise self._refused(attempt, exc) from None
        alloc = attempt.notes["allocation"]
        if alloc is not None:  # a step: `bash job.sh` here, its srun a step of the allocation
            srun, env, attempt.notes["cpus"] = alloc.step(attempt.spec, attempt.slot, self.port_offset)
            script = self._write_job(attempt, srun, env)
            attempt.handle = processes.start(attempt, ["bash", str(script)], dict(os.environ))
            return
        try:
            self._submit(attempt)
        except st.SlurmError as exc:
            raise self._refused(attempt, exc) from None

    def _submit(self, attempt: Attempt) -> None:
        """Write the job script and sbatch it on whole nodes."""
        spec, campaign, work, tasks = attempt.spec, attempt.campaign, attempt.work, attempt.notes["tasks"]
        script = self._write_job(attempt)
        out_path, err_path = campaign.log_paths(spec.run_id)
        with campaign.log_files(spec.run_id):  # new regular files for slurmd to write: no link
            pass
        limit = self.ctx.flags.get("time_limit") or str(math.ceil(attempt.timeout / 60))
        args = ["--job-name=compare-" + spec.run_id, "--chdir=" + str(work), "--output=" + str(out_path),
                "--error=" + str(err_path), "--nodes={}".format(spec.nodes),
                "--ntasks-per-node={}".format(tasks), "--exclusive", "--mem=0", "--no-requeue",
                "--time=" + limit] + self._placement(self.ctx.flags)
        if spec.device == "cuda":
            args.append("--gpus-per-node={}".format(spec.gpus))
        job_id = st.submit(args, script)
        attempt.handle = Job(job_id, spec.run_id, work)
        self.outstanding[job_id] = (spec.run_id, campaign)
        attempt.record.update(slurm_tasks_per_node=tasks, slurm_time_limit=limit)
        self._log_job(campaign, "submitted", spec.run_id, job_id, work=str(work),
                      how=attempt.record, nonce=spec.nonce)
        self.ctx.log("submitted Slurm job {} for {}".format(job_id, spec.run_id))

    def collect(self, attempt: Attempt, outcome: Outcome) -> RunResult:
        """The result, with what Slurm says of the job (or step): its nodes, its tasks."""
        result, alloc = super().collect(attempt, outcome), attempt.notes.get("allocation")
        if alloc is not None:
            result.environment["slurm"] = record(
                attempt.work, alloc.job_id, outcome.exit_code, step=True, cpus=attempt.notes["cpus"],
                tasks_per_node=attempt.notes["tasks"])
            return result
        job = attempt.handle
        result.environment["slurm"] = job.record(outcome.exit_code)
        # close() takes the jobs it cancels (a stop signal, from another thread): such a job is
        # logged cancelled, and --resume submits it again
        if self.outstanding.pop(job.job_id, None) is not None:
            self._log_job(attempt.campaign, "collected", attempt.spec.run_id, job.job_id, state=job.state)
        return result

    # --- the campaign's jobs file: resume and cancel -----------------------------------------

    def _log_job(self, campaign, event: str, run_id: str, job_id: str, **fields) -> None:
        entry = dict(event=event, run_id=run_id, job_id=job_id, at=utc_now(), **fields)
        files.append_text(campaign.root / JOBS_FILE, json.dumps(entry, sort_keys=True) + "\n",
                          campaign.root)

    def _attachable(self, campaign, run_id: str) -> Optional[Dict[str, Any]]:
        """The submission of run_id by an earlier session when nothing collected it since and its
        job is still known to Slurm as ours, or left its exit code or result behind."""
        path = campaign.root / JOBS_FILE
        lines = path.read_text().splitlines() if path.exists() else []
        entries = [json.loads(line) for line in lines]
        last = next((e for e in reversed(entries) if e.get("run_id") == run_id), None)
        if not last or last["event"] != "submitted" or last["job_id"] in self.outstanding:
            return None
        work = Path(last["work"])
        info = st.job_info(last["job_id"])
        if info is not None and info.get("JobName") == "compare-" + run_id:
            return last
        left = (work / st.EXIT_CODE_FILE).exists() or (work / "result.json").exists()
        return last if left else None

    def close(self) -> None:
        """Stop the job step running (inside an allocation); cancel the jobs still queued or
        running (Ctrl-C, SIGTERM), and wait until squeue no longer lists them; each is recorded
        as cancelled, so --resume submits it again."""
        super().close()
        jobs, self.outstanding = dict(self.outstanding), {}
        if not jobs:
            return
        ids = list(jobs)
        try:
            st.call(["scancel"] + ids)
            deadline = time.time() + 30
            while st.queued(ids) and time.time() < deadline:
                time.sleep(0.2)
        except st.SlurmError as exc:
            self.ctx.log("could not cancel Slurm job(s) {}: {}".format(", ".join(ids), exc))
            return
        for job_id, (run_id, campaign) in jobs.items():
            self._log_job(campaign, "cancelled", run_id, job_id)
        self.ctx.log("cancelled Slurm job(s) {}".format(", ".join(ids)))


def _conf_hint() -> str:
    """Where Slurm's commands look for the cluster, said beside their failure: SLURM_CONF, or
    that it is unset (then /etc/slurm/slurm.conf or a configless controller)."""
    conf = os.environ.get("SLURM_CONF")
    if conf:
        return " (SLURM_CONF={}{})".format(conf, "" if os.path.exists(conf) else ": no such file")
    return (" (SLURM_CONF is not set: point it at the cluster's slurm.conf; for the test cluster: "
            "eval \"$(scripts/slurm-cluster env)\")")
