"""Runs through a real Docker engine with the CPU images (`compare images build --cpu`).

scripts/test starts the engine and builds the images, and sets COMPARE_REQUIRE_DOCKER=1: there a
missing engine or image fails these tests. Elsewhere they are skipped with the reason.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from backends.protocol import RunSpec
from compare import envs, executors, frameworks
from compare.executors import docker_images as images
from compare.store import Campaign
from tests.helpers import run_compare

pytestmark = pytest.mark.docker  # a real Docker engine and the CPU images

TINY = ["--image-size", "32", "--batch-size", "4", "--steps", "2", "--warmup", "1",
        "--windows", "2", "--device", "cpu"]
PINS = {"tf": "2.15.1", "mxnet": "1.9.1", "caffe2": "2.13.0"}  # compare/requirements/*-cpu.txt


@pytest.fixture(scope="module")
def engine():
    c, why = images.engine()
    missing = images.missing(c, list(frameworks.FRAMEWORKS), "cpu") if c else []
    problem = why or (missing and "images not built: {} (compare images build --cpu)".format(
        ", ".join(missing)))
    if problem:
        if os.environ.get("COMPARE_REQUIRE_DOCKER") == "1":
            pytest.fail(problem)
        pytest.skip(problem)
    return c


def _compare(args, env=None, code=0):
    return run_compare(args, timeout=1800, env=env, code=code)


def _results(campaign):
    return {p.stem: json.loads(p.read_text()) for p in (campaign / "results").glob("*.json")}


def _leftover_containers(c, campaign):
    label = "org.compare.campaign={}".format(Path(campaign).resolve())
    # one removed between the list and its inspect (a cell's container ending) is gone, not an error
    return c.containers.list(all=True, filters={"label": label}, ignore_removed=True)


def test_three_frameworks_one_and_two_workers_fp32_bf16_in_containers(engine, tmp_path):
    campaign = tmp_path / "c"
    proc = _compare(["run", "--frameworks", "tf,mxnet,caffe2", "--executor", "docker", "--gpus", "1,2",
                     "--precision", "fp32,bf16", "--quick", "--results", str(campaign)] + TINY)
    assert "executor: docker (--executor docker)" in proc.stderr
    results = _results(campaign)
    assert len(results) == 12
    for run_id, r in results.items():
        assert r["status"] in ("ok", "unsupported"), (run_id, r["reason"], r["stderr_tail"])
        if r["status"] == "unsupported":
            assert r["reason"]
            continue
        fw = frameworks.get(r["spec"]["framework"])
        image = engine.images.get(images.image_name(fw, "cpu"))
        assert r["environment"]["image"] == images.image_name(fw, "cpu")
        assert r["environment"]["image_id"] == image.id
        assert r["environment"]["env"]["COMPARE_IMAGE"] == image.id  # seen inside the container
        assert r["environment"]["env"]["COMPARE_EXECUTOR"] == "docker"
        assert PINS[fw.name] in r["framework_version"], r["framework_version"]
        assert r["images_per_sec"] > 0 and r["world_size"] == r["spec"]["gpus"]
        assert (campaign / "logs" / (run_id + ".stderr")).exists()
    two = results["tf-fp32-w2-b4-s32-r0"]
    assert two["status"] == "ok" and two["distribution"] == "horovod", two["reason"]
    assert results["caffe2-fp32-w2-b4-s32-r0"]["distribution"] == "ddp"
    assert results["tf-fp32-w1-b4-s32-r0"]["environment"]["env"]["NVIDIA_TF32_OVERRIDE"] == "0"
    assert not _leftover_containers(engine, campaign)


def test_missing_image_and_crash_inside_are_recorded_and_the_sweep_goes_on(engine, tmp_path):
    campaign = tmp_path / "c"
    # mxnet: an image that does not exist; caffe2: fail_at=setup -> a crash inside
    _compare(["run", "--frameworks", "mxnet,caffe2", "--executor", "docker", "--precision", "fp32",
              "--results", str(campaign), "--option", "caffe2.fail_at=setup"] + TINY,
             env={"COMPARE_IMAGE_MXNET": "compare/does-not-exist:0"}, code=1)  # cells failed
    results = _results(campaign)
    missing = results["mxnet-fp32-w1-b4-s32-r0"]
    assert missing["status"] == "failed"
    # not the engine's "image X: no such image: X: No such image: X"
    assert missing["reason"] == (
        "image compare/does-not-exist:0 (COMPARE_IMAGE_MXNET) is not on this Docker engine: pull "
        "or build it (docker images lists those there), or unset COMPARE_IMAGE_MXNET to run "
        "compare's own")
    crashed = results["caffe2-fp32-w1-b4-s32-r0"]
    assert crashed["status"] == "failed", crashed["reason"]
    assert "InjectedFailure: fail_at=setup on rank 0" in crashed["reason"] and "Traceback" in crashed["stderr_tail"]
    assert crashed["environment"]["image_id"].startswith("sha256:")
    assert not _leftover_containers(engine, campaign)


def test_a_container_past_its_timeout_is_killed_and_the_next_run_goes_on(engine, tmp_path):
    from compare.executors.docker import DockerExecutor
    campaign = Campaign.create(tmp_path / "c", {}, {})
    executor = DockerExecutor(executors.Context([], "cpu"))
    spec = RunSpec("tf", "tf_horovod", image_size=32, batch_size=4, steps=2, warmup_steps=1, windows=2)
    slow = executor.run(spec, campaign, timeout=2)  # TensorFlow alone takes longer to import
    assert (slow.status, slow.reason) == ("timeout", "killed after the 2 s timeout")
    assert not _leftover_containers(engine, campaign.root)
    after = executor.run(RunSpec("caffe2", "caffe2_torch", image_size=32, batch_size=4, steps=2,
                                 warmup_steps=1, windows=2), campaign, timeout=600)
    assert after.status == "ok", after.reason


def test_an_unchanged_image_is_not_rebuilt(engine):
    proc = _compare(["images", "build", "--cpu", "--frameworks", "caffe2"])
    name = images.image_name(frameworks.get("caffe2"), "cpu")
    assert proc.stdout.startswith("caffe2   {} ".format(name)) and "up to date" in proc.stdout


def test_containers_left_by_a_killed_sweep_are_removed_before_the_campaign_goes_on(engine, tmp_path):
    from compare.executors.docker import DockerExecutor
    campaign = Campaign.create(tmp_path / "c", {}, {})
    image = images.wanted(frameworks.get("caffe2"), "cpu")
    orphan = engine.containers.run(image, ["sleep", "600"], detach=True, network_mode="host",
                                   labels={"org.compare.campaign": str(campaign.root.resolve())})
    try:
        executor = DockerExecutor(executors.Context([], "cpu"))
        result = executor.run(RunSpec("caffe2", "caffe2_torch", image_size=32, batch_size=4,
                                      steps=2, warmup_steps=1, windows=2), campaign, timeout=600)
        assert result.status == "ok", result.reason
        assert not _leftover_containers(engine, campaign.root)
    finally:
        try:
            orphan.remove(force=True)
        except Exception:
            pass


def test_docker_executor_builds_a_missing_image_itself_and_runs(engine, tmp_path):
    from tests.test_seams import _copy
    repo = _copy(tmp_path)
    # a changed input gives a new image tag; MXNet's image is the smallest to build again
    init = repo / "backends" / "mxnet" / "__init__.py"
    init.write_text(init.read_text() + "# a changed input: a new image tag\n")
    campaign = tmp_path / "c"
    proc = subprocess.run([sys.executable, "-m", "compare", "run", "--frameworks", "mxnet",
                           "--executor", "docker", "--precision", "fp32", "--results",
                           str(campaign)] + TINY, cwd=str(repo), env=dict(os.environ, PYTHONPATH=str(repo)),
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = _results(campaign)["mxnet-fp32-w1-b4-s32-r0"]
    name = result["environment"]["image"]
    try:
        assert "image {} is not built: building it now".format(name) in proc.stderr
        assert "Step 1/" in proc.stderr and "built {} in ".format(name) in proc.stderr
        assert result["status"] == "ok", result["reason"]
        assert name != images.image_name(frameworks.get("mxnet"), "cpu")  # not the tree's own image
        if images.default_wheelhouse():  # ./scripts/test built the images from it: the install
            # step (pip, apt) comes from Docker's layer cache, only backends/ is copied again
            log = (envs.cache_dir() / "images" / (name.replace("/", "_").replace(":", "_") + ".log"))
            assert "RUN bash /tmp/build/install.sh\n ---> Using cache" in log.read_text()
    finally:
        engine.images.remove(name, force=True)


def test_sigterm_of_compare_stops_its_running_container(engine, tmp_path):
    import signal

    from tests.helpers import start_compare, wait_for
    campaign = tmp_path / "c"
    proc = start_compare(["run", "--frameworks", "caffe2", "--executor", "docker", "--results", campaign,
                          ] + TINY + ["--steps", "1000000"])  # after TINY's 2 steps: the last wins
    try:
        assert wait_for(lambda: _leftover_containers(engine, campaign), 300), "no container started"
        os.kill(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 143, err[-3000:]
        assert not _leftover_containers(engine, campaign)
    finally:
        for container in _leftover_containers(engine, campaign):
            container.remove(force=True)
        proc.kill()


def test_sigkill_of_compare_ends_its_running_container_within_seconds(engine, tmp_path):
    import signal
    import time

    from tests.helpers import start_compare, wait_for
    campaign = tmp_path / "c"
    proc = start_compare(["run", "--frameworks", "caffe2", "--executor", "docker", "--results", campaign,
                          ] + TINY + ["--steps", "1000000"])  # after TINY's 2 steps: the last wins
    try:
        running = lambda: [c for c in _leftover_containers(engine, campaign)  # noqa: E731
                           if c.status == "running"]
        assert wait_for(running, 300), "no container started"
        (container,) = running()
        time.sleep(3)  # the run is training (its watch started with it)
        os.kill(proc.pid, signal.SIGKILL)  # no clean-up of compare's own: the kernel drops its lock
        proc.communicate(timeout=60)
        began = time.monotonic()
        assert wait_for(lambda: not running(), 30), "the container trains on without compare"
        assert time.monotonic() - began < 10
        container.reload()
        assert "the compare that started this run has ended" in container.logs(
            stdout=False, stderr=True).decode()
    finally:
        for container in _leftover_containers(engine, campaign):
            container.remove(force=True)

