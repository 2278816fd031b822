"""Real data in containers, through a real Docker engine and the CPU images: `--executor auto`
picks docker for `--data DIR`, each backend's writer runs in its image, every run reads the folder
through a read-only mount, and the data-efficiency table comes from containers.

One folder for the module (`compare data make DIR --images 64 --classes 4 --image-size 96x72`),
one campaign: the real-data cells of all four frameworks, then (--resume) their synthetic twins.
"""
import json
import os

import pytest

from backends import dataset
from backends.protocol import RunSpec
from compare import datasets, frameworks
from compare.executors import docker as dx
from compare.executors import docker_images as images
from tests.executors.test_docker import _leftover_containers, engine  # noqa: F401  (the fixture)
from tests.helpers import run_compare

pytestmark = pytest.mark.docker

FRAMEWORKS = ("tf", "mxnet", "caffe2", "jax")
IMAGES, CLASSES = 64, 4
STEPS, WARMUP, BATCH, WORKERS = 2, 1, 4, 2
RUN = ["run", "--quick", "--device", "cpu", "--batch-size", str(BATCH), "--image-size", "32",
       "--steps", str(STEPS), "--warmup", str(WARMUP), "--windows", "1",
       "--option", "loader_workers={}".format(WORKERS)]  # several loader workers share /dev/shm
# TF's CPU max-pooling has NCHW (the CPU default) only through oneDNN, which TF turns on by itself
# only on CPUs with AVX-512 and the like: NHWC runs on any CPU
ALL = ["--frameworks", ",".join(FRAMEWORKS), "--option", "tf.channels_last=true"]


def _make(folder):
    run_compare(["data", "make", str(folder), "--images", str(IMAGES), "--classes", str(CLASSES),
                 "--image-size", "96x72", "--workers", "1"])
    return str(folder)


def _results(campaign):
    return {p.stem: json.loads(p.read_text()) for p in (campaign / "results").glob("*.json")}


@pytest.fixture(scope="module")
def campaign(engine, tmp_path_factory):  # noqa: F811
    folder = _make(tmp_path_factory.mktemp("data") / "imagenet-like")
    out = tmp_path_factory.mktemp("campaign") / "c"
    real = run_compare(RUN + ALL + ["--data", folder, "--results", str(out)], timeout=1800)
    both = run_compare(RUN + ALL + ["--data", "synthetic," + folder, "--results", str(out),
                                    "--resume"], timeout=1800)
    return folder, out, real, both


def test_auto_picks_docker_and_each_format_is_written_in_its_image(campaign):
    folder, _, real, both = campaign
    assert "executor: docker (the Docker engine answers and the cpu images are built)" in real.stderr
    for fw, fmt in (("tf", "tfrecord"), ("mxnet", "recordio")):
        image = images.image_name(frameworks.get(fw), "cpu")
        assert "{}: writing {} into {}/.compare/{} in image {} (once;".format(
            fw, fmt, folder, fmt, image) in real.stderr
        assert "{}: {} up to date in {}/.compare/{}".format(fw, fmt, folder, fmt) in both.stderr
    assert "writing" not in both.stderr


def test_every_cell_is_ok_and_read_steps_times_batch_images_through_a_read_only_mount(
        campaign, engine):  # noqa: F811
    folder, out, _, _ = campaign
    results = _results(out)
    assert set(results) == {"{}-fp32-w1-b4-s32{}-r0".format(fw, mode) for fw in FRAMEWORKS
                            for mode in ("", "-real")}
    bad = {k: (r["status"], r["reason"], r["stderr_tail"]) for k, r in results.items()
           if r["status"] != "ok"}
    assert not bad
    for run_id, r in results.items():
        env = r["environment"]
        assert (env["executor"], env["ipc_mode"], env["shm_bytes"]) == (
            "docker", "host", dx.shm_bytes()), run_id
        if r["spec"]["data"] == "synthetic":
            assert "data_mounts" not in env and "images_read" not in r["settings"]
            continue
        assert env["data_mounts"] == [{"host": folder, "container": folder, "mode": "ro"}]
        s = r["settings"]
        assert s["images_read"] == (WARMUP + STEPS) * BATCH, run_id
        assert s["batches_read"] == WARMUP + STEPS, run_id
        assert 0 <= s["label_min"] <= s["label_max"] < CLASSES, run_id
        assert (s["dataset_images"], s["dataset_classes"]) == (IMAGES, CLASSES), run_id
        assert s["loader_workers"] == WORKERS and s["decode_errors"] == 0, run_id
    assert not _leftover_containers(engine, out)
    assert not engine.containers.list(all=True, filters={"label": "org.compare.writer"},
                                      ignore_removed=True)


def test_the_report_gives_data_efficiency_from_containers(campaign):
    _, out, _, both = campaign
    results = _results(out)
    text = (out / "report" / "report.md").read_text()
    assert "## Input pipeline (real data vs synthetic, img/s)" in text
    table = text.split("## Input pipeline")[1].split("\n\n")[1].splitlines()
    # no --data-only cell in this campaign: the report leaves that empty column out
    assert table[0].startswith("| framework | precision | batch | image | N | synthetic | real | "
                               "data efficiency |")
    for fw in FRAMEWORKS:
        synthetic, real = (results["{}-fp32-w1-b4-s32{}-r0".format(fw, m)]["images_per_sec"]
                           for m in ("", "-real"))
        efficiency = real / synthetic
        (row,) = [line for line in table if line.startswith("| {} |".format(frameworks.display(fw)))]
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1:8] == ["fp32", "4", "32", "1", "{:.2f}".format(synthetic),
                              "{:.2f}".format(real), "{:.3f}{}".format(
                                  efficiency, " input-bound" if efficiency < 0.95 else "")], row


def test_inside_the_folder_is_read_only_and_dev_shm_is_the_hosts(campaign, engine):  # noqa: F811
    folder, _, _, _ = campaign
    spec_mounts, env = dx.data_mounts(RunSpec("caffe2", "caffe2_torch", data=folder))
    probe = ("import os, errno\n"
             "st = os.statvfs('/dev/shm'); print(st.f_blocks * st.f_frsize)\n"
             "for d in ({0!r}, {0!r} + '/.compare'):\n"
             "    try:\n"
             "        open(os.path.join(d, 'x'), 'w')\n"
             "    except OSError as exc:\n"
             "        print(errno.errorcode[exc.errno])\n").format(folder)
    image = images.wanted(frameworks.get("caffe2"), "cpu")
    out = engine.containers.run(
        image, ["python", "-c", probe], remove=True, network_mode="host", ipc_mode="host",
        mounts=dx.bind(spec_mounts), environment=env, user="{}:{}".format(os.getuid(), os.getgid()))
    assert out.decode().split() == [str(dx.shm_bytes()), "EROFS", "EROFS"]


def test_a_read_only_folder_is_read_with_its_prepared_side_from_the_cache(engine, tmp_path,  # noqa: F811
                                                                          monkeypatch):
    folder = _make(tmp_path / "d")
    cache = tmp_path / "cache"
    monkeypatch.setenv("COMPARE_CACHE", str(cache))
    with monkeypatch.context() as patch:  # as compare prepares a folder it may not write
        patch.setattr(datasets.os, "access", lambda path, mode: False)
        prepared = datasets.check(datasets.open_folder(folder))
    before = sorted(os.walk(folder))
    out = tmp_path / "c"
    proc = run_compare(RUN + ["--frameworks", "mxnet", "--executor", "docker", "--data", folder,
                              "--results", str(out)], env={"COMPARE_CACHE": str(cache)})
    assert "mxnet: writing recordio into {}/recordio in image".format(prepared.path) in proc.stderr
    r = _results(out)["mxnet-fp32-w1-b4-s32-real-r0"]
    assert r["status"] == "ok", (r["reason"], r["stderr_tail"])
    assert r["settings"]["images_read"] == (WARMUP + STEPS) * BATCH
    inside = "{}/data/{}".format(dx.CACHE_IN, os.path.basename(prepared.path))
    assert r["environment"]["data_mounts"] == [
        {"host": folder, "container": folder, "mode": "ro"},
        {"host": prepared.path, "container": inside, "mode": "ro"}]
    assert dataset.Prepared(prepared.path).ready("recordio")
    assert sorted(os.walk(folder)) == before  # nothing was written into the folder
