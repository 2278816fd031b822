"""`compare run --executor slurm` on a real Slurm cluster: two nodes (nodeA, nodeB) on this host.

scripts/test starts the cluster (scripts/slurm-cluster) and sets COMPARE_REQUIRE_SLURM=1: there a
cluster that does not answer fails these tests. Elsewhere they are skipped with the reason; start
one with `eval "$(scripts/slurm-cluster)"`. The flag checks at the top need no cluster.
"""
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compare import executors, frameworks
from compare.errors import UserError
from tests.helpers import ROOT, assert_phases, main_exit, run_compare

TINY = ["--image-size", "32", "--batch-size", "4", "--steps", "2", "--warmup", "1", "--windows", "1",
        "--device", "cpu"]
LONG = ["--image-size", "32", "--batch-size", "4", "--steps", "100000", "--warmup", "1",
        "--windows", "1", "--device", "cpu"]  # runs until stopped

BAD = [
    (["--slurm-option", "qos"], "compare: error: --slurm-option 'qos': expected KEY=VALUE of an sbatch option, e.g. qos=high or constraint=a100 (passed as --KEY=VALUE)"),
    (["--slurm-option", "Q o=s"], "compare: error: --slurm-option 'Q o=s': expected KEY=VALUE of an sbatch option, e.g. qos=high or constraint=a100 (passed as --KEY=VALUE)"),
    (["--slurm-option", "nodes=4"], "compare: error: --slurm-option nodes=4: compare sets --nodes itself; use --nodes"),
    (["--slurm-option", "--time=10"], "compare: error: --slurm-option --time=10: compare sets --time itself; use --time-limit"),
    (["--time-limit", "1h"], "compare: error: --time-limit '1h': not a Slurm time; give minutes (30), MM:SS, HH:MM:SS (01:30:00) or D-HH:MM:SS"),
]


@pytest.mark.parametrize("argv,message", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_slurm_flags_are_one_line_and_exit_2(argv, message, capsys):
    code, _, err = main_exit(["run", "--executor", "slurm", "--device", "cpu"] + argv, capsys)
    assert (code, err) == (2, message + "\n")


@pytest.mark.parametrize("argv", [["--partition", "gpu"], ["--account", "lab"], ["--time-limit", "10"],
                                  ["--slurm-option", "qos=high"]])
def test_slurm_flags_without_the_slurm_executor_are_refused(argv, capsys):
    code, _, err = main_exit(["run", "--executor", "local", "--device", "cpu"] + argv, capsys)
    assert (code, err) == (2, "compare: error: {} is read by the slurm executor only; add --executor "
                              "slurm\n".format(argv[0]))



@pytest.mark.parametrize("argv,message", [
    (["--partition", ""], "--partition is empty; give a Slurm partition's name (sinfo lists them), or "
                          "leave it out (the cluster's default)"),
    (["--account", " "], "--account is empty; give a Slurm account's name (sacctmgr show associations "
                         "lists them), or leave it out (the cluster's default)"),
    (["--time-limit", ""], "--time-limit is empty; give minutes (30), MM:SS, HH:MM:SS (01:30:00) or "
                           "D-HH:MM:SS, or leave it out (default: --timeout)"),
    (["--time-limit", "0"], "--time-limit '0': a limit of no time (Slurm reads it as no limit at all); "
                            "give a time > 0: minutes (30), MM:SS, HH:MM:SS (01:30:00) or D-HH:MM:SS"),
    (["--time-limit", "0-00:00"], "--time-limit '0-00:00': a limit of no time (Slurm reads it as no "
                                  "limit at all); give a time > 0: minutes (30), MM:SS, HH:MM:SS "
                                  "(01:30:00) or D-HH:MM:SS"),
], ids=["partition", "account", "time-limit-empty", "time-limit-0", "time-limit-0-days"])
def test_an_empty_placement_or_a_time_limit_of_no_time_is_refused_at_plan_time(argv, message, capsys):
    # they were taken as given, and the run failed later, at the machine record on a compute node
    with pytest.raises(UserError) as refused:
        executors.check_flags("slurm", {{"--partition": "partition", "--account": "account",
                                         "--time-limit": "time_limit"}[argv[0]]: argv[1]})
    assert str(refused.value) == message
    code, _, err = main_exit(["run", "--executor", "slurm", "--frameworks", "caffe2", "--plan"] + argv,
                             capsys)
    assert (code, err) == (2, "compare: error: {}\n".format(message))


def test_an_executor_words_every_flag_message_as_check_flags_is_told():
    """check_flags' `named` names each setting a message names, in the caller's words (a campaign
    file's keys): an executor's own messages too. Before, `named` reached only 'is read by the …
    executor', and study.py rewrote the others' text afterwards by matching their start."""
    def named(name, about="", value=None):  # as a study from study.toml names its keys
        if value is not None:
            return '{} = "{}"'.format(name, value)
        return name if about else "study.toml: " + name

    def message(requested, flags):
        with pytest.raises(UserError) as refused:
            executors.check_flags(requested, flags, named)
        return str(refused.value)
    assert message("slurm", {"time_limit": "1h"}) == (
        "study.toml: time_limit '1h': not a Slurm time; give minutes (30), MM:SS, HH:MM:SS (01:30:00) "
        "or D-HH:MM:SS")
    assert message("slurm", {"slurm_option": ["qos"]}) == (
        "study.toml: slurm_option 'qos': expected KEY=VALUE of an sbatch option, e.g. qos=high or "
        "constraint=a100 (passed as --KEY=VALUE)")
    assert message("slurm", {"slurm_option": ["ntasks=2"]}) == (
        "study.toml: slurm_option ntasks=2: compare sets --ntasks itself; use gpus")
    assert message("local", {"partition": "gpu"}) == (
        'study.toml: partition is read by the slurm executor only; add executor = "slurm"')

def test_a_step_of_an_allocation_takes_its_share_of_cpus_and_memory_and_a_port_of_its_own():
    from backends.protocol import RunSpec
    from compare.executors.slurm_jobs import Allocation
    from compare.resources import Slot
    alloc = Allocation("77", nodes=1, cpus=8, gpus=0, mem_mb=16000)
    spec = RunSpec("caffe2", "caffe2_torch", batch_size=4, image_size=32)
    assert alloc.step(spec, Slot(cpus=2), 3) == (
        ["--exact", "--job-name=compare-caffe2-fp32-w1-b4-s32-r0", "--mem=4000M"],
        {"COMPARE_PORT_OFFSET": "3", "COMPARE_STEP_CPUS": "2"}, 2)
    whole = Allocation("77", nodes=1, cpus=8, gpus=0, mem_mb=0).step(spec, None, 1)
    assert whole[0] == ["--exact", "--job-name=compare-caffe2-fp32-w1-b4-s32-r0"] and whole[2] == 8


def _data(tmp_path, monkeypatch, read_only=False):
    """A checked folder (its prepared side beside it, or in the cache as for a read-only one)."""
    from compare import datasets
    run_compare(["data", "make", str(tmp_path / "d"), "--images", "8", "--classes", "2",
                 "--image-size", "64x48", "--workers", "1"])
    monkeypatch.setenv("COMPARE_CACHE", str(tmp_path / "cache"))
    with monkeypatch.context() as patch:
        if read_only:
            patch.setattr(datasets.os, "access", lambda path, mode: False)
        return datasets.check(datasets.open_folder(str(tmp_path / "d")))


@pytest.mark.parametrize("read_only", [False, True], ids=["beside", "cache"])
def test_pyxis_mounts_the_data_read_only_at_its_own_path(tmp_path, monkeypatch, read_only):
    """The srun line of a real-data job in a pyxis container (the test cluster has no pyxis:
    the job script is read, not run)."""
    from backends.protocol import RunSpec
    from compare.executors import slurm
    from compare.store import Campaign
    prepared = _data(tmp_path, monkeypatch, read_only)
    monkeypatch.setattr(slurm.st, "has_pyxis", lambda: True)
    monkeypatch.setattr(slurm.st, "submit", lambda args, script: "42")
    monkeypatch.setenv("COMPARE_IMAGE_CAFFE2", "nvcr.io/nvidia/pytorch:24.03-py3")
    campaign = Campaign.create(tmp_path / "c", {}, {})
    executor = slurm.SlurmExecutor(executors.Context([frameworks.get("caffe2")], "cpu"))
    spec = RunSpec("caffe2", "caffe2_torch", data=prepared.root)
    attempt = executors.Attempt(spec, campaign, "2026-01-01T00:00:00+00:00", 600)
    executor.start(attempt)  # up to sbatch: the job script written and submitted
    work, how = attempt.work, attempt.record
    root, data = str(campaign.root), prepared.root
    mounts = "--container-mounts={0}:{0},{1}:{1}:ro".format(root, data)
    if read_only:
        mounts += ",{0}:{0}:ro".format(prepared.path)
    script = (work / "job.sh").read_text()
    srun = shlex.split(script.split("\nsrun ", 1)[1].split("\nrc=")[0].replace("\\\n", " "))
    at = srun.index(mounts)
    assert srun[at - 1] == "--container-image=nvcr.io#nvidia/pytorch:24.03-py3", srun
    assert how["data_mounts"][0] == {"host": data, "container": data, "mode": "ro"}
    assert ("export COMPARE_CACHE={}".format(tmp_path / "cache") in script) is read_only


@pytest.fixture(scope="module")
def cluster():
    ok, why = executors.load("slurm").available(executors.Context([], "cpu"))
    if not ok:
        if os.environ.get("COMPARE_REQUIRE_SLURM") == "1":
            pytest.fail(why)
        pytest.skip("{} (start one: eval \"$(scripts/slurm-cluster)\")".format(why))


def _slurm_run(campaign, args, **kw):
    return run_compare(["run", "--executor", "slurm", "--results", str(campaign)] + args, **kw)


def _results(campaign):
    return {p.stem: json.loads(p.read_text()) for p in (Path(campaign) / "results").glob("*.json")}


def _jobs(campaign):
    path = Path(campaign) / "jobs"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _squeue(job_ids):
    out = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, check=True).stdout
    return sorted(set(out.split()) & set(job_ids))


def _check_placement(r, nodes, workers):
    """The job ran where Slurm put it: one task per worker, ranks on every node of the job."""
    slurm = r["environment"]["slurm"]
    assert slurm["job_id"].isdigit() and slurm["state"] == "COMPLETED"
    assert slurm["nodes"] == ["nodeA", "nodeB"][:nodes]
    assert slurm["spanned_nodes"] is True
    per_node = [t["node"] for t in slurm["tasks"]]
    assert per_node == [n for n in slurm["nodes"] for _ in range(workers)], slurm["tasks"]
    assert r["environment"]["env"]["COMPARE_EXECUTOR"] == "slurm"  # seen by the backend itself
    assert r["environment"]["slurm_environment"] == "shared filesystem"
    assert_phases(r)  # the "launch" span holds the submission and the queue wait


@pytest.mark.slurm
def test_pytorch_on_one_and_two_nodes_with_one_and_two_workers_each(cluster, tmp_path):
    campaign = tmp_path / "c"
    proc = _slurm_run(campaign, ["--frameworks", "caffe2", "--nodes", "1,2", "--gpus", "1,2"] + TINY)
    assert "executor: slurm (--executor slurm)" in proc.stderr
    results = _results(campaign)
    assert sorted(results) == ["caffe2-fp32-n2xw1-b4-s32-r0", "caffe2-fp32-n2xw2-b4-s32-r0",
                               "caffe2-fp32-w1-b4-s32-r0", "caffe2-fp32-w2-b4-s32-r0"]
    for run_id, r in results.items():
        assert r["status"] == "ok", (run_id, r["reason"], r["stderr_tail"])
        nodes, workers = r["spec"]["nodes"], r["spec"]["gpus"]
        assert r["world_size"] == nodes * workers and r["global_batch"] == 4 * nodes * workers
        assert r["distribution"] == ("ddp" if nodes * workers > 1 else "single")
        _check_placement(r, nodes, workers)
    submitted = [j for j in _jobs(campaign) if j["event"] == "submitted"]
    assert sorted(j["job_id"] for j in submitted) == sorted(r["environment"]["slurm"]["job_id"]
                                                           for r in results.values())
    machine = json.loads((campaign / "machine.json").read_text())
    assert machine["slurm_node"] in ("nodeA", "nodeB")  # taken on a compute node by a job


@pytest.mark.slurm
def test_tensorflow_on_one_node_runs_horovod(cluster, tmp_path):
    campaign = tmp_path / "c"
    _slurm_run(campaign, ["--frameworks", "tf", "--gpus", "2"] + TINY)
    r = _results(campaign)["tf-fp32-w2-b4-s32-r0"]
    assert r["status"] == "ok" and r["distribution"] == "horovod", (r["reason"], r["stderr_tail"])
    assert r["world_size"] == 2 and r["settings"]["horovod_controller"] == "gloo"
    # one srun task on the node; horovodrun starts the two workers there
    assert r["environment"]["slurm"]["tasks"] == [
        {"task": 0, "node": "nodeA", "hostname": r["environment"]["hostname"]}]


@pytest.mark.slurm
def test_tensorflow_across_two_nodes_runs_multiworker_mirrored_strategy(cluster, tmp_path):
    campaign = tmp_path / "c"
    _slurm_run(campaign, ["--frameworks", "tf", "--nodes", "2", "--gpus", "2"] + TINY)
    r = _results(campaign)["tf-fp32-n2xw2-b4-s32-r0"]
    assert r["status"] == "ok", (r["reason"], r["stderr_tail"])
    assert r["distribution"] == "multiworker" and r["world_size"] == 4
    assert r["settings"]["allreduce"] == "MultiWorkerMirroredStrategy RING"
    assert r["settings"]["replicas"] == 4
    _check_placement(r, 2, 2)


@pytest.mark.slurm
def test_mxnet_across_nodes_is_unsupported_without_a_job(cluster, tmp_path):
    campaign = tmp_path / "c"
    _slurm_run(campaign, ["--frameworks", "mxnet", "--nodes", "2", "--gpus", "2"] + TINY)
    r = _results(campaign)["mxnet-fp32-n2xw2-b4-s32-r0"]
    assert r["status"] == "unsupported"
    assert r["reason"].startswith("MXNet runs as one process driving its node's contexts through a kvstore")
    assert _jobs(campaign) == []


@pytest.mark.slurm
def test_jax_on_one_and_two_nodes(cluster, tmp_path):
    if not (ROOT / "backends" / "jax").is_dir():
        pytest.skip("backends/jax is not in this tree yet (the JAX backend is written separately)")
    jax = next(fw for fw in frameworks.FRAMEWORKS if fw.backend == "jax")
    campaign = tmp_path / "c"
    _slurm_run(campaign, ["--frameworks", jax.name, "--nodes", "1,2", "--gpus", "1,2"] + TINY)
    results = _results(campaign)
    assert len(results) == 4
    for run_id, r in results.items():
        assert r["status"] == "ok", (run_id, r["reason"], r["stderr_tail"])
        assert r["world_size"] == r["spec"]["nodes"] * r["spec"]["gpus"]
        slurm = r["environment"]["slurm"]
        assert slurm["nodes"] == ["nodeA", "nodeB"][:r["spec"]["nodes"]] and slurm["spanned_nodes"]


@pytest.mark.slurm
def test_one_rank_crashing_fails_the_job_at_once_not_at_its_time_limit(cluster, tmp_path):
    campaign = tmp_path / "c"
    started = time.time()
    _slurm_run(campaign, ["--frameworks", "caffe2", "--nodes", "2", "--gpus", "1", "--time-limit", "10",
                          "--option", "fail_at=timed", "--option", "fail_rank=1"] + TINY, code=1)
    took = time.time() - started
    r = _results(campaign)["caffe2-fp32-n2xw1-b4-s32-r0"]
    assert r["status"] == "failed" and r["environment"]["slurm"]["state"] == "FAILED"
    assert took < 180, "the surviving rank waited {:.0f} s".format(took)  # the limit is 600 s
    log = (campaign / "logs" / "caffe2-fp32-n2xw1-b4-s32-r0.stderr").read_text()
    assert "InjectedFailure: fail_at=timed on rank 1" in log
    assert "srun: error: nodeB: task 1: Exited with exit code 1" in log
    # the reason's first line (what reports show) names rank 1's error, not only what rank 0 saw
    # next (its peer gone) or srun's SIGTERM; it leads the reason where rank 0 recorded a result
    # first, and follows how the job ended where srun ended rank 0 before it wrote one (a race)
    first = r["reason"].splitlines()[0]
    assert first.startswith("InjectedFailure: fail_at=timed on rank 1") or first.startswith(
        "exited with code 143 (srun: error: nodeB: task 1: Exited with exit code 1; srun then ended "
        "the other tasks) and wrote no result: InjectedFailure: fail_at=timed on rank 1"), r["reason"]


@pytest.mark.slurm
def test_a_job_past_its_time_limit_is_a_timeout(cluster, tmp_path):
    campaign = tmp_path / "c"
    _slurm_run(campaign, ["--frameworks", "caffe2", "--time-limit", "1"] + LONG, code=1)  # timed out
    r = _results(campaign)["caffe2-fp32-w1-b4-s32-r0"]
    job = r["environment"]["slurm"]["job_id"]
    assert (r["status"], r["reason"]) == ("timeout", "Slurm stopped job {} at its time limit (00:01:00)".format(job))
    assert r["environment"]["slurm"]["state"] == "TIMEOUT"


def _start(campaign, args):
    """compare run in the background, as a user starts it; returns (process, first job's id)."""
    proc = subprocess.Popen([sys.executable, "-m", "compare", "run", "--executor", "slurm",
                             "--results", str(campaign)] + args, cwd=str(ROOT), text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while time.time() < deadline:
        running = [j for j in _jobs(campaign) if j["event"] == "submitted"]
        if running:
            job = running[0]["job_id"]
            # running, and the backend's tasks have started
            if list((Path(running[0]["work"]) / "tasks").glob("*")):
                return proc, job
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.5)
    proc.kill()
    raise AssertionError("no job started within 300 s")


@pytest.mark.slurm
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_stopping_compare_cancels_its_jobs(cluster, tmp_path, sig):
    campaign = tmp_path / "c"
    proc, job = _start(campaign, ["--frameworks", "caffe2", "--nodes", "2", "--gpus", "1"] + LONG)
    assert _squeue([job]) == [job]
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert "cancelled Slurm job(s) {}".format(job) in err
    assert _squeue([job]) == []
    assert [j["event"] for j in _jobs(campaign)] == ["submitted", "cancelled"]


@pytest.mark.slurm
def test_resume_after_compare_was_killed_reattaches_and_runs_nothing_twice(cluster, tmp_path):
    campaign = tmp_path / "c"
    args = ["--frameworks", "caffe2", "--gpus", "1,2"] + TINY
    proc, job = _start(campaign, args)
    proc.kill()  # SIGKILL: no close(), the job goes on without compare
    proc.communicate()
    assert _squeue([job]) == [job]
    resumed = _slurm_run(campaign, args + ["--resume"])
    assert "re-attaching to Slurm job {} of caffe2-fp32-w1-b4-s32-r0".format(job) in resumed.stderr
    results = _results(campaign)
    assert {k: r["status"] for k, r in results.items()} == {
        "caffe2-fp32-w1-b4-s32-r0": "ok", "caffe2-fp32-w2-b4-s32-r0": "ok"}
    assert results["caffe2-fp32-w1-b4-s32-r0"]["environment"]["slurm"]["job_id"] == job
    submitted = [j["run_id"] for j in _jobs(campaign) if j["event"] == "submitted"]
    assert sorted(submitted) == ["caffe2-fp32-w1-b4-s32-r0", "caffe2-fp32-w2-b4-s32-r0"]


@pytest.mark.slurm
def test_real_data_on_the_shared_filesystem_is_checked_on_a_node_then_read(cluster, tmp_path):
    data = tmp_path / "d"
    run_compare(["data", "make", str(data), "--images", "16", "--classes", "2", "--image-size",
                 "96x72", "--workers", "1"])
    campaign = tmp_path / "c"
    proc = _slurm_run(campaign, ["--frameworks", "caffe2", "--data", str(data), "--option",
                                 "loader_workers=2"] + TINY)
    assert "checking that the Slurm compute nodes read {} (srun)".format(data) in proc.stderr
    r = _results(campaign)["caffe2-fp32-w1-b4-s32-real-r0"]
    assert r["status"] == "ok", (r["reason"], r["stderr_tail"])
    assert r["settings"]["images_read"] == (1 + 2) * 4 and r["settings"]["loader_workers"] == 2
    assert r["environment"]["slurm_environment"] == "shared filesystem"


@pytest.mark.slurm
def test_a_folder_the_nodes_cannot_read_is_one_line_before_anything_is_submitted(
        cluster, tmp_path, monkeypatch):
    from compare.errors import UserError
    from compare.executors import slurm
    prepared = _data(tmp_path, monkeypatch)
    first = prepared.files()[0][0]
    os.remove(os.path.join(prepared.root, first))  # gone after the host checked it
    executor = slurm.SlurmExecutor(executors.Context([frameworks.get("caffe2")], "cpu"))
    with pytest.raises(UserError) as info:
        executor.check_data([prepared])
    node, path = str(info.value).split("Slurm node ")[1].split(" cannot read ")
    assert node in ("nodeA", "nodeB")
    assert str(info.value) == ("--data {0}: Slurm node {1} cannot read {0}/{2}; the folder must be on a "
                               "filesystem every node mounts".format(prepared.root, node, first))


@pytest.mark.slurm
def test_cells_in_one_allocation_run_side_by_side_as_job_steps(cluster, tmp_path):
    """Inside an allocation (salloc) the cells are `srun --exact` steps of it, packed by the same
    rule as on one machine: here two 1-worker cells on the two CPUs of one node."""
    campaign = tmp_path / "c"
    proc = subprocess.run(["salloc", "--nodes=1", "--ntasks=2", "--time=10", sys.executable, "-m",
                           "compare", "run", "--executor", "slurm", "--frameworks", "caffe2",
                           "--precision", "fp32,bf16", "--concurrency", "2", "--results",
                           str(campaign)] + TINY, cwd=str(ROOT), capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = _results(campaign)
    assert sorted(results) == ["caffe2-bf16-w1-b4-s32-r0", "caffe2-fp32-w1-b4-s32-r0"]
    jobs = set()
    for run_id, r in results.items():
        assert r["status"] == "ok", (run_id, r["reason"], r["stderr_tail"])
        slurm, placed = r["environment"]["slurm"], r["environment"]["placement"]
        assert slurm["step"] is True and slurm["cpus"] == 1 and len(slurm["nodes"]) == 1
        assert placed["assigned_by"] == "slurm" and placed["beside"] == sorted(set(results) - {run_id})
        jobs.add(slurm["job_id"])
    assert len(jobs) == 1  # one allocation, no job of their own
    assert not (campaign / "jobs").exists()


@pytest.mark.slurm
def test_a_python_missing_or_lacking_its_modules_on_the_nodes_is_one_line_before_any_job(
        cluster, tmp_path):
    """--python is a path on the nodes: one srun asks it there, as the plan asks it on this host.
    Before: not asked; --plan said nothing, and each cell's job failed on its own, the reason the
    harness's import error of every cell."""
    bare, gone = tmp_path / "bare-python", tmp_path / "gone-python"
    bare.write_text('#!/bin/sh\nexec {} -S "$@"\n'.format(sys.executable))  # no site-packages
    gone.write_text("#!{}/venv/bin/python3\n".format(tmp_path))  # a venv's link to a python the
    for path in (bare, gone):  # nodes lack: its interpreter is missing there
        path.chmod(0o755)
    leave = "or leave caffe2 out of --python (compare then runs caffe2 in its managed environment)"
    for python, problem in (
            (gone, "did not say which modules it has, as a python asked with -c does (exit 127: "
                   "timeout: failed to run command '{}': No such file or directory); give a python "
                   "that has torch".format(gone)),
            (bare, "lacks torch (every caffe2 run imports torch); give a python that has them")):
        for plan in (["--plan"], []):
            campaign = tmp_path / "c"
            proc = _slurm_run(campaign, ["--frameworks", "caffe2", "--python", "caffe2={}".format(
                python)] + TINY + plan, code=2)
            line = proc.stderr.splitlines()[-1]
            node = line.split("on Slurm node ")[1].split(",")[0]
            assert node in ("nodeA", "nodeB"), line
            assert line == "compare: error: --python 'caffe2={0}': on Slurm node {1}, {0} {2}, " \
                           "{3}".format(python, node, problem, leave)
            assert not campaign.exists()
    (tmp_path / "site" / "torch").mkdir(parents=True)  # a python that has torch: asked, and planned
    (tmp_path / "site" / "torch" / "__init__.py").write_text("")
    bare.write_text('#!/bin/sh\nPYTHONPATH={} exec {} -S "$@"\n'.format(tmp_path / "site", sys.executable))
    proc = _slurm_run(tmp_path / "c", ["--frameworks", "caffe2", "--python", "caffe2={}".format(bare),
                                       "--plan"] + TINY)
    assert "asking the --python interpreter(s) on a Slurm compute node (srun)" in proc.stderr


MACHINE = json.dumps({"cpu_model": "x", "cpu_count": 2, "memory_gb": 1.0, "gpus": []})


@pytest.mark.parametrize("python,waits_in", [
    (False, "taking the machine record on a Slurm compute node (srun)"),
    (True, "asking the --python interpreter(s) on a Slurm compute node (srun)")])
def test_ctrl_c_while_the_machine_record_waits_for_a_node_is_one_line(tmp_path, python, waits_in):
    """A user saw `compare run --executor slurm` exit 130 without a word when Ctrl-C came while
    the machine record's srun waited for a compute node (on a busy cluster: minutes)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    started = tmp_path / "srun-started"
    wait = "touch {}; exec sleep 60".format(shlex.quote(str(started)))
    srun = wait if not python else (  # the record answers; the python check waits
        'case "$*" in *compare-machine*) echo {};; *) {};; esac'.format(shlex.quote(MACHINE), wait))
    fakes = {"sbatch": "exit 0",
             "sinfo": "echo 'debug*|up|2|2|10000|(null)|idle|nodeA,nodeB'",
             "srun": srun}
    for name, body in fakes.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body + "\n")
        (bin_dir / name).chmod(0o755)
    env = dict(os.environ, PATH="{}:{}".format(bin_dir, os.environ["PATH"]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "compare", "run", "--executor", "slurm", "--frameworks", "caffe2",
         "--results", str(tmp_path / "c")] + TINY + ["--python", "caffe2=/usr/bin/python3"] * python,
        cwd=str(ROOT), env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as a terminal's Ctrl-C
    deadline = time.time() + 60
    while not started.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert started.exists(), proc.communicate()[1]
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert err.splitlines()[-1] == (
        "compare: error: interrupted (SIGINT) while " + waits_in + ": nothing was submitted or "
        "written; run the same command again")
    assert not (tmp_path / "c").exists()


def test_a_job_that_asks_more_nodes_than_its_partition_has_fails_instead_of_waiting_forever(
        tmp_path, monkeypatch):
    """A user typed `compare run --executor slurm --nodes 3` on a partition of two nodes: the job
    stayed PENDING (PartitionNodeLimit) and compare showed 'starting' until it was killed."""
    from compare.executors import slurm_tools as st
    from compare.executors.slurm_jobs import Job
    cancelled = []
    name = "compare-caffe2-fp32-n3xw1-b32-s32-r0"

    def info(job_id):
        state = "CANCELLED" if cancelled else "PENDING"
        return {"JobName": name, "JobState": state, "Reason": "PartitionNodeLimit",
                "NumNodes": "3-3", "Partition": "debug", "ExitCode": "0:0"}

    monkeypatch.setattr(st, "job_info", info)
    monkeypatch.setattr(st, "call", lambda cmd, **kw: cancelled.append(cmd) or "")
    outcome = Job("7", "caffe2-fp32-n3xw1-b32-s32-r0", tmp_path).wait(60)
    assert cancelled == [["scancel", "7"]]
    assert outcome.ended == (
        "failed", "Slurm cannot start job 7 (PartitionNodeLimit): it asks more nodes (3) than "
        "partition debug has or allows; cancelled")


def test_a_machine_record_refused_for_a_placement_names_it_in_the_command_to_check(tmp_path):
    """A user typed `--slurm-option constraint=zzz` and read 'Invalid feature specification …;
    check `srun -N1 python3 -V`', a command that works: the check now carries the placement."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fakes = {"sbatch": "exit 0",
             "sinfo": "echo 'debug*|up|2|2|10000|(null)|idle|nodeA,nodeB'",
             "srun": "echo 'srun: error: Unable to allocate resources: Invalid feature "
                     "specification' >&2; exit 1"}
    for name, body in fakes.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body + "\n")
        (bin_dir / name).chmod(0o755)
    proc = run_compare(["run", "--executor", "slurm", "--frameworks", "caffe2", "--partition",
                        "debug", "--slurm-option", "constraint=zzz", "--results",
                        str(tmp_path / "c")] + TINY,
                       env={"PATH": "{}:{}".format(bin_dir, os.environ["PATH"]),
                            "SLURM_CONF": "/nonexistent/slurm.conf"}, code=2)
    assert proc.stderr.splitlines()[-1] == (
        "compare: error: --executor slurm: the machine record could not be taken on a compute "
        "node: srun: error: Unable to allocate resources: Invalid feature specification "
        "(SLURM_CONF=/nonexistent/slurm.conf: no such file); check `srun -N1 --partition=debug "
        "--constraint=zzz python3 -V`")
