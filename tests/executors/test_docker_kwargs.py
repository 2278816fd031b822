"""The Docker executor's pure parts: container arguments for 1, 2, 3 GPUs, environment, choice,
the data folder's mounts."""
import os
from pathlib import Path

import pytest

pytest.importorskip("docker", reason="the docker package (host extra: pip install -e '.[docker]')")

from backends import dataset
from backends.protocol import RunSpec
from compare import datasets, frameworks
from compare.errors import UserError
from compare.executors import docker as dx
from compare.executors import docker_images as images


def _kwargs(spec, ids=None, memlock=-1, mounts=()):
    return dx.run_kwargs(spec, "sha256:abc", ["python", "-m", "backends.caffe2_torch"],
                         Path("/tmp/c/specs/x.json"), Path("/tmp/c/work/x"), {"A": "1"}, ids,
                         "1000:1000", memlock, list(mounts))


@pytest.mark.parametrize("gpus", [1, 2, 3])
def test_gpu_count_goes_to_device_requests(gpus):
    kw = _kwargs(RunSpec("caffe2", "caffe2_torch", gpus=gpus, device="cuda"))
    (request,) = kw["device_requests"]
    assert request["Count"] == gpus and request["Capabilities"] == [["gpu"]]
    assert not request.get("DeviceIDs")


@pytest.mark.parametrize("ids", [["3"], ["0", "2"], ["1", "4", "5"]])
def test_exact_gpu_ids_go_to_device_requests(ids):
    kw = _kwargs(RunSpec("tf", "tf_horovod", gpus=len(ids), device="cuda"), ids=ids)
    (request,) = kw["device_requests"]
    assert request["DeviceIDs"] == ids and not request.get("Count")


def test_ngc_settings_mounts_and_no_privilege():
    kw = _kwargs(RunSpec("mxnet", "mxnet", gpus=2, device="cuda"))
    # host IPC: the host's /dev/shm (a --shm-size beside it would do nothing); no data, no mounts
    assert (kw["ipc_mode"], kw["privileged"]) == ("host", False)
    assert "shm_size" not in kw and "mounts" not in kw
    limits = {u["Name"]: (u["Soft"], u["Hard"]) for u in kw["ulimits"]}
    assert limits == {"memlock": (-1, -1), "stack": (67108864, 67108864)}
    assert kw["volumes"]["/tmp/c/specs/x.json"] == {"bind": dx.SPEC_IN, "mode": "ro"}
    assert kw["volumes"]["/tmp/c/work/x"] == {"bind": dx.OUT_IN, "mode": "rw"}
    assert kw["user"] == "1000:1000" and kw["image"] == "sha256:abc"
    assert _kwargs(RunSpec("mxnet", "mxnet"), memlock=8388608)["ulimits"][0]["Soft"] == 8388608


def test_cpu_run_asks_for_no_gpu():
    assert "device_requests" not in _kwargs(RunSpec("caffe2", "caffe2_torch", gpus=2))


def test_environment_tf32_off_for_fp32_only_and_no_host_variables(monkeypatch):
    monkeypatch.setenv("SOME_HOST_SECRET", "x")
    extra = {"COMPARE_EXECUTOR": "docker", "COMPARE_IMAGE": "sha256:abc"}
    fp32 = dx.container_env(RunSpec("tf", "tf_horovod", precision="fp32", seed=7), extra)
    assert fp32["NVIDIA_TF32_OVERRIDE"] == "0" and fp32["PYTHONHASHSEED"] == "7"
    assert fp32["PYTHONPATH"] == images.CODE_DIR and fp32["COMPARE_IMAGE"] == "sha256:abc"
    assert "SOME_HOST_SECRET" not in fp32
    bf16 = dx.container_env(RunSpec("tf", "tf_horovod", precision="bf16"), extra)
    assert "NVIDIA_TF32_OVERRIDE" not in bf16


def test_the_exit_grace_the_host_sets_reaches_the_processes_launcher_in_the_container(monkeypatch):
    """Before, a local run's processes launcher inherited COMPARE_EXIT_GRACE_S and a Slurm job's
    srun was handed it, but a container's launcher gave the default 40 s."""
    spec = RunSpec("jax", "jax", gpus=2, options={"processes": 2})
    assert "COMPARE_EXIT_GRACE_S" not in dx.container_env(spec, {})
    monkeypatch.setenv("COMPARE_EXIT_GRACE_S", "5")
    assert dx.container_env(spec, {})["COMPARE_EXIT_GRACE_S"] == "5"


def test_gpu_ids_follow_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3,5")
    assert dx.gpu_ids(2) == ["2", "3"]
    assert dx.gpu_ids(4) is None
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert dx.gpu_ids(1) is None


@pytest.mark.parametrize("fw", frameworks.FRAMEWORKS, ids=lambda f: f.name)
def test_gpu_images_build_on_the_pinned_ngc_image(fw):
    assert images.default_base(None, fw, "gpu") == fw.ngc_image
    assert images.context_files(fw, "gpu")["build/base-image"] == fw.ngc_image.encode()
    assert "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n" in images.dockerfile(fw, "gpu").read_text()
    assert "ARG BASE_IMAGE=debian:bookworm-slim\n" in images.dockerfile(fw, "cpu").read_text()


def test_one_generic_dockerfile_serves_every_framework():
    assert {images.dockerfile(fw, "cpu") for fw in frameworks.FRAMEWORKS} == \
        {images.CONTAINERS / "Dockerfile.cpu"}
    mxnet = images.context_files(frameworks.get("mxnet"), "cpu")
    assert mxnet["build/system-packages"] == b"libgomp1 libquadmath0 libgfortran5"


def test_a_changed_input_changes_the_tag(tmp_path):
    fw = frameworks.get("mxnet")
    files = images.context_files(fw, "cpu")
    assert set(files) >= {"Dockerfile", "backends/protocol.py", "backends/harness.py",
                          "build/requirements.txt", "build/install.sh"}
    assert not any(name.startswith("compare/") for name in files)
    before = images.inputs_hash(files)
    changed = dict(files, Dockerfile=files["Dockerfile"] + b"# changed\n")
    assert images.inputs_hash(changed) != before
    assert "build/setup.sh" in images.context_files(frameworks.get("tf"), "cpu")



def _prepared(tmp_path, monkeypatch, capsys, read_only=False):
    """A checked folder of 6 JPEGs whose prepared side is beside it, or in the cache."""
    from tests.test_data import make
    make(tmp_path / "d", capsys=capsys)
    monkeypatch.setenv("COMPARE_CACHE", str(tmp_path / "cache"))
    if read_only:
        monkeypatch.setattr(datasets.os, "access", lambda path, mode: False)
    return datasets.check(datasets.open_folder(str(tmp_path / "d")))


def _binds(kw):
    return [(m["Source"], m["Target"], m["ReadOnly"]) for m in kw["mounts"]]


def test_a_real_data_run_mounts_its_folder_read_only_at_its_own_path(tmp_path, monkeypatch, capsys):
    prepared = _prepared(tmp_path, monkeypatch, capsys)
    root = str(tmp_path / "d")
    spec = RunSpec("caffe2", "caffe2_torch", data=root)
    mounts, env = dx.data_mounts(spec)
    assert (env, [m.record() for m in mounts]) == ({}, [{"host": root, "container": root, "mode": "ro"}])
    assert _binds(_kwargs(spec, mounts=mounts)) == [(root, root, True)]  # .compare/ lies inside
    assert prepared.path == root + "/.compare"
    assert dx.data_mounts(RunSpec("caffe2", "caffe2_torch")) == ([], {})


def test_the_prepared_side_in_the_cache_is_mounted_read_only_under_compare_cache(tmp_path, monkeypatch, capsys):
    prepared = _prepared(tmp_path, monkeypatch, capsys, read_only=True)
    root, key = str(tmp_path / "d"), os.path.basename(prepared.path)
    mounts, env = dx.data_mounts(RunSpec("mxnet", "mxnet", data=root))
    inside = dx.CACHE_IN + "/data/" + key
    assert [(m.host, m.container, m.read_only) for m in mounts] == [
        (root, root, True), (prepared.path, inside, True)]
    assert env == {"COMPARE_CACHE": dx.CACHE_IN}
    # inside, with COMPARE_CACHE so set, backends look exactly there
    monkeypatch.setenv("COMPARE_CACHE", dx.CACHE_IN)
    assert dataset.candidates(root)[1] == inside


def test_only_a_format_writer_gets_the_prepared_side_writable(tmp_path, monkeypatch, capsys):
    beside = _prepared(tmp_path, monkeypatch, capsys)
    mounts, _ = datasets.mounts(beside, dx.CACHE_IN, write=True)
    assert [m.record()["mode"] for m in mounts] == ["ro", "rw"]  # the folder, then .compare/ over it
    assert mounts[1].host == mounts[1].container == beside.path


@pytest.mark.parametrize("folder,hidden", [("/", "/tmp"), ("/tmp", "/tmp"), ("/opt", "/opt/venv"),
                                           ("/compare", "/compare")])
def test_a_folder_that_would_hide_what_runs_need_inside_is_refused(folder, hidden):
    class P:
        root = folder
    executor = dx.DockerExecutor.__new__(dx.DockerExecutor)
    with pytest.raises(UserError, match="^--data {}: the docker executor mounts the folder at its "
                       "own path, where it would hide {} inside the containers; ".format(folder, hidden)):
        executor.check_data([P])
    P.root = "/tmp/imagenet"
    executor.check_data([P])
    P.root = "/data/compare"  # /compare is not under it
    executor.check_data([P])


def test_an_engine_that_may_not_lift_memlock_runs_with_the_hosts_own_limit(monkeypatch):
    """The engine refuses `memlock=-1` (no CAP_SYS_RESOURCE): the container is removed and made
    again with this machine's hard limit, once; whoever holds the run's handle holds each."""
    import docker

    from compare import executors
    created, removed, notes = [], [], []

    class Container:
        def __init__(self, kwargs):
            self.memlock = kwargs["ulimits"][0]["Soft"]

        def start(self):
            if self.memlock == -1:
                raise docker.errors.APIError("OCI runtime create failed: setrlimit RLIMIT_MEMLOCK: "
                                             "operation not permitted")

        def remove(self, force):
            removed.append(self)

    class Engine:
        class containers:
            @staticmethod
            def create(**kwargs):
                created.append(Container(kwargs))
                return created[-1]

    monkeypatch.setattr(images, "client", Engine)
    monkeypatch.setattr(dx.resource, "getrlimit", lambda which: (65536, 8 * 2 ** 20))
    executor = dx.DockerExecutor(executors.Context([], "cpu", log=notes.append))
    held = []
    started = executor._start(_kwargs(RunSpec("mxnet", "mxnet")), held.append)
    assert started is created[1] and held == created and removed == [created[0]]
    assert (started.memlock, executor.memlock) == (8 * 2 ** 20, 8 * 2 ** 20)
    assert notes == ["note: Docker may not lift the limit on memory a container can pin (locked "
                     "memory, which NGC images ask to be unlimited for fast GPU copies); running "
                     "with this machine's own limit, 8 MiB, instead"]


def test_an_image_build_stops_at_once_when_compare_stops_even_in_a_silent_step(tmp_path):
    import threading
    import time
    stopping, silent = [], threading.Event()

    def output():  # what the engine streams: a step that prints nothing for a minute
        yield {"stream": "Step 6/14 : RUN bash /tmp/build/install.sh\n"}
        yield {"stream": "  Building wheel for horovod (setup.py): started\n"}
        stopping.append(True)  # a SIGTERM arrives: close() sets the executor's stop
        silent.wait(60)
        yield {"stream": "never read\n"}
    log, began = tmp_path / "build.log", time.monotonic()
    with pytest.raises(images.ImageError, match=r"^stopped after \d+ s: compare is stopping"):
        images._stream(output(), log, 0.0, lambda line: None, stop=lambda: bool(stopping))
    assert time.monotonic() - began < 5 * images.STOP_POLL_S  # not the minute of silence
    silent.set()
    assert log.read_text().splitlines() == [
        "Step 6/14 : RUN bash /tmp/build/install.sh",
        "  Building wheel for horovod (setup.py): started", "stopped: compare is stopping"]


def test_an_image_build_error_is_raised_with_the_last_lines_of_its_output(tmp_path):
    chunks = [{"stream": "Step 6/14 : RUN bash /tmp/build/install.sh\n"},
              {"stream": "ERROR: No matching distribution found for mxnet==1.9.1\n"},
              {"error": "The command '/bin/sh -c bash /tmp/build/install.sh' returned a non-zero "
                        "code: 1"}]
    with pytest.raises(images.ImageError, match=r"No matching distribution found for mxnet==1.9.1"
                                                r"\nThe command .* returned a non-zero code: 1\n"):
        images._stream(iter(chunks), tmp_path / "build.log", 0.0, lambda line: None)


def test_a_run_builds_its_images_from_the_wheelhouse_the_test_script_filled(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPARE_CACHE", str(tmp_path))
    assert images.default_wheelhouse() is None  # none: the package index
    (tmp_path / "wheelhouse").mkdir()
    assert images.default_wheelhouse() is None  # empty: the package index
    (tmp_path / "wheelhouse" / "six-1.17.0-py2.py3-none-any.whl").write_bytes(b"")
    assert images.default_wheelhouse() == tmp_path / "wheelhouse"


def test_a_containers_logs_are_saved_without_holding_them_in_memory(tmp_path):
    """A run that logged a lot (here 64 MiB on stderr) has its logs copied into the campaign
    chunk by chunk; before, each was fetched whole into memory first (gigabytes took compare's
    memory with them)."""
    import tracemalloc
    mib = b"x" * (1 << 20)

    class Container:
        attrs = {"State": {"OOMKilled": False}}

        def wait(self, timeout=None):
            return {"StatusCode": 1}

        def reload(self):
            pass

        def logs(self, stdout=True, stderr=True, stream=False, follow=None):
            chunks = (mib for _ in range(64 if stderr else 1))
            return chunks if stream else b"".join(chunks)
    logs = tmp_path / "logs"
    logs.mkdir()
    paths = (logs / "x.stdout", logs / "x.stderr")
    tracemalloc.start()
    try:
        outcome = dx.Container(Container(), paths).wait(600)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert outcome.exit_code == 1
    assert (paths[0].stat().st_size, paths[1].stat().st_size) == (1 << 20, 64 << 20)
    assert peak < 16 << 20, "{:.0f} MiB held at once".format(peak / 2 ** 20)


def test_an_engine_that_accepts_but_never_answers_is_told_in_seconds(tmp_path, monkeypatch):
    """A user's DOCKER_HOST pointed at a hung engine: `compare doctor` sat silent for minutes
    (the client's 60 s timeout, for its version request and again for its ping, on every probe)."""
    import socket
    import threading
    import time
    path = str(tmp_path / "hung.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(8)
    held = []

    def hold():  # accept, never answer; ends when the test closes the socket
        try:
            for _ in range(8):
                held.append(server.accept())
        except OSError:
            pass
    threading.Thread(target=hold, daemon=True).start()
    monkeypatch.setenv("DOCKER_HOST", "unix://" + path)
    start = time.monotonic()
    client, why = images.engine()
    assert client is None and why == "no Docker engine answers (unix://{} did not answer in " \
                                     "time)".format(path)
    assert time.monotonic() - start < images.PROBE_S + 5
    server.close()


def test_images_list_says_a_named_image_is_missing_not_unbuilt(monkeypatch, capsys):
    """`COMPARE_IMAGE_CAFFE2=compare/nope:1 compare images list --cpu` said 'not built', though
    `compare images build` builds compare's own image, never the one named."""
    from tests.helpers import main_exit
    monkeypatch.setattr(images, "engine", lambda: (object(), None))
    monkeypatch.setattr(images, "find", lambda c, name: None)
    monkeypatch.setenv("COMPARE_IMAGE_CAFFE2", "compare/nope:1")
    code, out, _ = main_exit(["images", "list", "--cpu"], capsys)
    assert code == 0
    lines = dict(line.split(None, 1) for line in out.splitlines())
    assert lines["caffe2"] == "compare/nope:1 not on this Docker engine (named by " \
                              "COMPARE_IMAGE_CAFFE2: pull or build it yourself)"
    assert lines["jax"].endswith(" not built")
