"""What the plan refuses of a campaign file's settings is named by the file and its key, as
every other message about the file's values is (`study.toml: nodes 2: ...`), never by a flag the
user did not type."""
import pytest

from tests.helpers import main_exit


@pytest.fixture()
def study(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def write(text):
        (tmp_path / "study.toml").write_text(text)
        return ["run", "--config", "study.toml", "--plan"]
    return write


def test_nodes_the_files_executor_cannot_run_are_named_by_the_file(study, capsys):
    code, out, err = main_exit(study('frameworks = "caffe2"\nexecutor = "local"\nnodes = [2]\n'), capsys)
    assert (code, err) == (2, "compare: error: study.toml: nodes 2: the local executor runs on one "
                              "machine; more nodes need an executor of a cluster (slurm)\n")


def test_nodes_given_as_a_flag_are_named_by_the_flag(study, capsys):
    code, out, err = main_exit(study('frameworks = "caffe2"\nexecutor = "local"\n') + ["--nodes", "2"],
                               capsys)
    assert (code, err) == (2, "compare: error: --nodes 2: the local executor runs on one machine; "
                              "more nodes need an executor of a cluster (slurm)\n")


def test_an_executor_the_file_names_that_cannot_run_here_is_named_by_the_file(study, capsys,
                                                                             monkeypatch):
    from compare.executors.docker import DockerExecutor
    monkeypatch.setattr(DockerExecutor, "available", classmethod(
        lambda cls, ctx: (False, "no Docker engine answers (the test's)")))
    code, out, err = main_exit(study('frameworks = "caffe2"\nexecutor = "docker"\n'), capsys)
    assert (code, err) == (2, "compare: error: study.toml: executor docker: no Docker engine answers "
                              "(the test's)\n")
    code, out, err = main_exit(study('frameworks = "caffe2"\n') + ["--executor", "docker"], capsys)
    assert (code, err) == (2, "compare: error: --executor docker: no Docker engine answers (the "
                              "test's)\n")


@pytest.mark.parametrize("given,message", [
    (".", "--config .: is a folder; give a campaign file (a TOML file of compare run's settings, e.g. "
          "study.toml)"),
    ("nope.toml", "--config nope.toml: no such file; give a campaign file (a TOML file of compare run's "
                  "settings, e.g. study.toml)"),
    ("", "--config is empty; give a campaign file (a TOML file of compare run's settings, e.g. "
         "study.toml)"),
], ids=["folder", "missing", "empty"])
def test_a_config_that_is_no_file_says_what_it_is_and_what_to_give(given, message, study, capsys):
    # it said "cannot read it (Is a directory)" for a folder, gave no advice for a missing file, and
    # an empty --config was no file at all: the default study ran
    code, out, err = main_exit(["run", "--config", given, "--plan"], capsys)
    assert (code, err) == (2, "compare: error: {}\n".format(message))


@pytest.mark.parametrize("text,item", [('python = "=x"\n', "=x"), ('python = ["=x"]\n', "=x"),
                                       ('python = "x"\n', "x")])
def test_a_python_that_names_no_framework_is_shown_as_the_file_writes_it(text, item, study, capsys):
    # '=x' was shown rebased on the file's folder ('=/dir/x'): a value the user never wrote
    code, out, err = main_exit(study('frameworks = "caffe2"\nexecutor = "local"\n' + text), capsys)
    assert (code, err) == (2, "compare: error: study.toml: python {!r}: expected FRAMEWORK=PATH, e.g. "
                              "tf=/usr/bin/python3\n".format(item))
