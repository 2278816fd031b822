"""The executor registry: names, the `auto` choice with its reason, doctor's list."""
import pytest

from compare import executors, frameworks, machine_record
from compare.errors import UserError
from compare.executors import docker_images
from tests.helpers import main_exit


def _ctx(**kw):
    return executors.Context([frameworks.get("caffe2")], "cpu", **kw)


def test_an_unknown_executor_names_the_valid_ones():
    with pytest.raises(UserError, match="^unknown executor 'podman'; choose from auto, docker, local, slurm$"):
        executors.load("podman")


def test_auto_takes_local_without_an_engine_and_says_why(monkeypatch):
    monkeypatch.setattr(docker_images, "engine", lambda: (None, "no Docker engine answers (refused)"))
    cls, why = executors.choose("auto", _ctx())
    assert cls.name == "local"
    assert why == ("each backend runs here, in its managed environment (or --python); "
                   "docker not chosen: no Docker engine answers (refused)")


def test_python_overrides_keep_runs_out_of_containers():
    cls, why = executors.choose("auto", _ctx(overrides={"caffe2": "/usr/bin/python3"}))
    assert cls.name == "local"
    assert "docker not chosen: --python names interpreters, which run outside containers" in why


def test_asking_for_an_executor_that_cannot_run_here_is_one_line(monkeypatch, capsys):
    monkeypatch.setattr(docker_images, "engine", lambda: (None, "no Docker engine answers (refused)"))
    code, _, err = main_exit(["run", "--frameworks", "caffe2", "--device", "cpu", "--executor",
                              "docker"], capsys)
    assert (code, err) == (2, "compare: error: --executor docker: no Docker engine answers (refused)\n")


def test_doctor_lists_every_executor_with_its_state(monkeypatch, capsys):
    from compare.executors import slurm
    monkeypatch.setattr(docker_images, "engine", lambda: (None, "no Docker engine answers (refused)"))
    monkeypatch.setattr(slurm.SlurmExecutor, "available",
                        classmethod(lambda cls, ctx: (False, "no sbatch on PATH")))
    monkeypatch.setattr(machine_record, "gpus", lambda: [])
    code, out, _ = main_exit(["doctor"], capsys)
    assert code == 0
    lines = [line for line in out.splitlines() if line.startswith("executor")]
    assert lines[:len(executors.names())] == [
        "executor docker: not available: no Docker engine answers (refused)",
        "executor local:  available: each backend runs here, in its managed environment (or --python)",
        "executor slurm:  not available: no sbatch on PATH"]
    assert lines[-1].startswith("executor: local (--executor auto: each backend runs here")
    assert [line for line in out.splitlines() if line.startswith("  can run: ")] == [
        "  can run: real data; GPUs on a machine that has them (none here)",
        "  can run: real data; GPUs on a machine that has them (none here)",
        "  can run: real data, several nodes; GPUs on a machine that has them (none here)"]
    monkeypatch.setattr(machine_record, "gpus", lambda: [{"name": "NVIDIA H200", "driver": "580"}])
    code, out, _ = main_exit(["doctor"], capsys)
    assert [line for line in out.splitlines() if line.startswith("  can run: ")] == [
        "  can run: real data, GPUs", "  can run: real data, GPUs",
        "  can run: real data, several nodes, GPUs"]


class NoData(executors.Executor):
    """An executor that runs on this machine but cannot give its runs a data folder."""
    name = "nodata"
    capabilities = frozenset({"gpus"})

    @classmethod
    def available(cls, ctx):
        return True, "always here"


def _with_nodata(monkeypatch):
    monkeypatch.setattr(executors, "EXECUTORS", dict(
        {"nodata": "tests.executors.test_registry:NoData"}, **executors.EXECUTORS))


def test_auto_passes_over_an_executor_that_cannot_run_the_study_and_says_why(monkeypatch):
    _with_nodata(monkeypatch)
    monkeypatch.setattr(docker_images, "engine", lambda: (None, "no Docker engine answers (refused)"))
    cls, why = executors.choose("auto", _ctx())
    assert (cls.name, why) == ("nodata", "always here")  # synthetic data: it can
    cls, why = executors.choose("auto", _ctx(needs={"real_data": "--data /d"}))
    assert cls.name == "local"
    assert why == ("each backend runs here, in its managed environment (or --python); "
                   "nodata not chosen: does not give its runs a data folder (--data /d); "
                   "docker not chosen: no Docker engine answers (refused)")


def test_naming_an_executor_that_lacks_a_capability_is_one_line(monkeypatch):
    _with_nodata(monkeypatch)
    with pytest.raises(UserError, match=r"^--data /d: the nodata executor does not give its runs a "
                       r"data folder; real data needs an executor that does \(docker, local, slurm\)$"):
        executors.choose("nodata", _ctx(needs={"real_data": "--data /d"}))


def test_docker_is_chosen_for_real_data_when_its_images_are_built(monkeypatch):
    monkeypatch.setattr(docker_images, "engine", lambda: (object(), None))
    monkeypatch.setattr(docker_images, "missing", lambda c, fws, variant: [])
    cls, why = executors.choose("auto", _ctx(needs={"real_data": "--data /d"}))
    assert (cls.name, why) == ("docker", "the Docker engine answers and the cpu images are built")


def test_a_study_no_executor_can_run_stops_before_anything_starts(tmp_path, capsys):
    code, out, err = main_exit(["run", "--frameworks", "caffe2", "--device", "cpu", "--nodes", "1,2",
                                "--results", str(tmp_path / "c")], capsys)
    assert (code, out) == (2, "")
    assert err == ("compare: error: --executor auto: no executor can run this study here (docker not "
                   "chosen: runs on one machine (--nodes 2); local not chosen: runs on one machine "
                   "(--nodes 2)); slurm can, when asked for: add --executor slurm\n")
    assert not (tmp_path / "c").exists()


def test_what_a_study_needs_comes_from_its_flags(tmp_path):
    from compare import study
    from compare.stages.plan import _needs
    folder = tmp_path / "d" / "c0"
    folder.mkdir(parents=True)
    (folder / "a.jpg").write_bytes(b"\xff\xd8\xff")  # a JPEG's first bytes: all the plan reads
    s = study.build({"frameworks": "caffe2", "nodes": "1,4", "data": "synthetic,{}".format(folder.parent)})
    assert _needs(s, "cuda") == {"multi_node": "--nodes 4", "real_data": "--data {}".format(
        folder.parent), "gpus": "--device cuda"}
    assert _needs(study.build({"frameworks": "caffe2"}), "cpu") == {}
    assert {n: sorted(executors.load(n).capabilities) for n in executors.names()} == {
        "docker": ["gpus", "real_data"], "local": ["gpus", "real_data"],
        "slurm": ["gpus", "multi_node", "real_data"]}


@pytest.mark.parametrize("error, said", [
    ("Error while fetching server API version: ('Connection aborted.', FileNotFoundError(2, 'No "
     "such file or directory'))", "nothing at unix:///var/run/docker.sock: start dockerd, or set DOCKER_HOST"),
    ("Error while fetching server API version: ('Connection aborted.', ConnectionRefusedError(111, "
     "'Connection refused'))", "unix:///var/run/docker.sock refuses connections: is dockerd running?"),
    ("Error while fetching server API version: ('Connection aborted.', PermissionError(13, "
     "'Permission denied'))", "no permission to use unix:///var/run/docker.sock: run as root or join the "
                              "docker group"),
])
def test_why_no_docker_engine_answers_is_said_in_words_not_as_a_python_exception(monkeypatch, error, said):
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    assert docker_images.why_not(RuntimeError(error)) == said


def test_a_slurm_that_finds_no_configuration_points_at_slurm_conf(monkeypatch, tmp_path):
    import shutil

    from compare.executors import slurm

    def no_config():
        raise slurm.st.SlurmError("sinfo: fatal: Could not establish a configuration source")
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/" + name)
    monkeypatch.setattr(slurm.st, "partitions", no_config)
    monkeypatch.delenv("SLURM_CONF", raising=False)
    ctx = executors.Context(frameworks.FRAMEWORKS, "cpu")
    assert slurm.SlurmExecutor.available(ctx) == (False, (
        "sinfo does not answer: sinfo: fatal: Could not establish a configuration source (SLURM_CONF "
        "is not set: point it at the cluster's slurm.conf; for the test cluster: "
        "eval \"$(scripts/slurm-cluster env)\")"))
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "slurm.conf"))
    assert slurm.SlurmExecutor.available(ctx)[1].endswith(
        "(SLURM_CONF={}: no such file)".format(tmp_path / "slurm.conf"))


def test_a_resumed_campaign_keeps_its_executor_while_it_can_run_here(monkeypatch):
    """--resume with --executor auto: images built since the campaign began would make auto pick
    docker for a campaign measured in managed environments; the campaign's own is taken first."""
    _with_nodata(monkeypatch)  # the executor auto would pick now
    assert executors.choose("auto", _ctx())[0].name == "nodata"
    cls, why = executors.choose("auto", _ctx(), keep="local")
    assert (cls.name, why) == ("local", "the campaign's executor, kept by --resume: each backend runs "
                                        "here, in its managed environment (or --python)")
    assert executors.choose("auto", _ctx(), keep="podman")[0].name == "nodata"  # not one of ours
    assert executors.choose("nodata", _ctx(), keep="local")[0].name == "nodata"  # asked for: taken


def test_a_resumed_docker_campaign_keeps_docker_after_the_code_changed(monkeypatch):
    """Changed backends/ (a git pull) means images not built yet: auto passed docker over for
    local, and --resume then stopped with exit 2 (executor docker vs local). The campaign's
    executor builds them, as --executor docker does."""
    monkeypatch.setattr(docker_images, "engine", lambda: (object(), None))
    monkeypatch.setattr(docker_images, "missing", lambda client, fws, variant: ["compare/caffe2:x"])
    assert executors.choose("auto", _ctx())[0].name == "local"  # a new campaign: nothing built
    cls, why = executors.choose("auto", _ctx(), keep="docker")
    assert (cls.name, why) == ("docker", "the campaign's executor, kept by --resume: the Docker "
                                         "engine answers; compare/caffe2:x is not built yet and "
                                         "will be built first")
    monkeypatch.setattr(docker_images, "engine", lambda: (None, "no Docker engine answers (refused)"))
    ctx = _ctx()
    assert executors.choose("auto", ctx, keep="docker")[0].name == "local"  # it cannot run here
    assert ctx.requested == "auto"


def test_a_slurm_run_that_finds_no_configuration_points_at_slurm_conf_as_doctor_does(
        monkeypatch, tmp_path, capsys):
    # it said "the machine record could not be taken on a compute node (…); check
    # `srun -N1 python3 -V`", where doctor says SLURM_CONF is not set
    from compare.executors import slurm

    def no_config():
        raise slurm.st.SlurmError("sinfo: fatal: Could not establish a configuration source")
    monkeypatch.setattr(slurm.st, "partitions", no_config)
    monkeypatch.delenv("SLURM_CONF", raising=False)
    code, out, err = main_exit(["run", "--frameworks", "caffe2", "--executor", "slurm", "--device",
                                "cpu", "--results", str(tmp_path / "c")], capsys)
    assert (code, out) == (2, "") and err == (
        "compare: error: --executor slurm: the machine record could not be taken on a compute node: "
        "sinfo: fatal: Could not establish a configuration source (SLURM_CONF is not set: point it "
        "at the cluster's slurm.conf; for the test cluster: eval \"$(scripts/slurm-cluster env)\"); "
        "check `srun -N1 python3 -V`\n")
    assert not (tmp_path / "c").exists()
