"""A `compare run` that fails in the prepare stage (a --data folder it cannot use, an executor
that cannot start) ran no cell: a new campaign is not kept (its folder is one whose creation did
not finish, so the same command makes it again and --resume says to leave --resume out), and a
resume's campaign.json is as it was (no session, no planned cell that never ran)."""
import json

import pytest

from compare.errors import UserError
from compare.executors.local import LocalExecutor
from tests.helpers import FAST, fake_python, main_exit


def _run(argv, capsys):
    return main_exit([str(a) for a in argv], capsys)


@pytest.fixture()
def study(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "500")
    fake = fake_python(tmp_path)
    return ["run", "--frameworks", "caffe2", "--python", "caffe2={}".format(fake), "--results",
            tmp_path / "c"] + FAST


@pytest.fixture()
def failing(monkeypatch):
    """The local executor cannot start: as an environment or a container engine that fails."""
    original = LocalExecutor.__init__

    def refuse(self, ctx):
        if failing.on:
            raise UserError("the test's executor: cannot start (its environment failed)")
        original(self, ctx)
    failing.on = True
    monkeypatch.setattr(LocalExecutor, "__init__", refuse)
    return failing


def test_a_new_campaign_whose_prepare_fails_is_made_again_by_the_same_command(study, failing, tmp_path,
                                                                             capsys):
    code, out, err = _run(study, capsys)
    assert (code, err.splitlines()[-1]) == (
        2, "compare: error: the test's executor: cannot start (its environment failed)")
    assert not (tmp_path / "c" / "campaign.json").exists()
    code, out, err = _run(["run", "--results", tmp_path / "c", "--resume"], capsys)
    assert (code, err) == (2, "compare: error: --resume {}: its creation did not finish (no campaign.json); "
                              "run again without --resume to create it\n".format(tmp_path / "c"))
    failing.on = False  # fixed: the same command makes the campaign and runs it
    code, out, err = _run(study, capsys)
    assert code == 0 and "campaign {}: 1 cell, 1 to run".format(tmp_path / "c") in err, err
    assert [p.name for p in (tmp_path / "c" / "results").iterdir()] == ["caffe2-fp32-w1-b4-s32-r0.json"]


def test_a_resume_whose_prepare_fails_leaves_the_campaign_as_it_was(study, failing, tmp_path, capsys):
    failing.on = False
    code, out, err = _run(study, capsys)
    assert code == 0, err
    before = (tmp_path / "c" / "campaign.json").read_bytes()
    failing.on = True
    code, out, err = _run(["run", "--results", tmp_path / "c", "--resume", "--repeats", "2"], capsys)
    assert (code, err.splitlines()[-1]) == (
        2, "compare: error: the test's executor: cannot start (its environment failed)")
    assert (tmp_path / "c" / "campaign.json").read_bytes() == before  # no session, no cell planned
    failing.on = False
    code, out, err = _run(["run", "--results", tmp_path / "c", "--resume", "--repeats", "2"], capsys)
    assert code == 0 and "2 runs of 1 cell, 1 to run" in err, err
    sessions = json.loads((tmp_path / "c" / "campaign.json").read_text())["sessions"]
    assert [s["config"]["study"]["repeats"] for s in sessions] == [1, 2]


def test_a_data_folder_no_frameworks_can_use_leaves_no_campaign(study, tmp_path, capsys):
    for name in ("a", "b"):  # a JPEG's first bytes, no JPEG after: passed by the plan's look at
        (tmp_path / "bad" / "train" / name).mkdir(parents=True)  # them, refused by prepare's decode
        (tmp_path / "bad" / "train" / name / "x.JPEG").write_bytes(b"\xff\xd8\xffjunk")
    code, out, err = _run(study + ["--data", tmp_path / "bad"], capsys)
    assert code == 2 and err.splitlines()[-1].startswith(
        "compare: error: --data {}: none of its 2 JPEG files can be used".format(tmp_path / "bad")), err
    code, out, err = _run(study + ["--data", "synthetic"], capsys)  # the folder fixed: run again
    assert code == 0 and "1 cell, 1 to run" in err, err


def test_a_resume_refused_for_a_cell_planned_otherwise_writes_no_session(study, tmp_path, capsys):
    # Campaign.resume wrote the session before Campaign.plan refused the cell
    code, out, err = _run(study, capsys)
    assert code == 0, err
    meta = json.loads((tmp_path / "c" / "campaign.json").read_text())
    meta["planned"] = {k: "0" * 16 for k in meta["planned"]}  # a hand edit
    (tmp_path / "c" / "campaign.json").write_text(json.dumps(meta))
    code, out, err = _run(["run", "--results", tmp_path / "c", "--resume"], capsys)
    assert code == 2 and "was planned with other settings" in err, err
    assert json.loads((tmp_path / "c" / "campaign.json").read_text()) == meta


def test_a_resume_says_which_result_files_it_left_out_before_running_their_cells_again(study, tmp_path,
                                                                                      capsys):
    code, out, err = _run(study, capsys)
    assert code == 0, err
    (tmp_path / "c" / "results" / "caffe2-fp32-w1-b4-s32-r0.json").write_text("{bad")
    code, out, err = _run(["run", "--results", tmp_path / "c", "--resume"], capsys)
    lines = err.splitlines()
    warning = "warning: skipped corrupt result caffe2-fp32-w1-b4-s32-r0.json: not valid JSON " \
        "(Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"
    assert code == 0 and warning in lines, err  # said before its cell runs again (and replaces it)
    assert lines.index(warning) < lines.index("campaign {}: 1 cell, 1 to run".format(tmp_path / "c"))


def test_a_campaign_of_the_default_folder_whose_prepare_fails_leaves_no_folder(study, failing, tmp_path,
                                                                               capsys, monkeypatch):
    # results/<time> is named by no one: nothing to resume there, nothing to keep
    monkeypatch.chdir(tmp_path)
    without = [a for a in study if a not in ("--results", tmp_path / "c")]
    code, out, err = _run(without, capsys)
    assert code == 2 and err.endswith("cannot start (its environment failed)\n"), err
    assert list((tmp_path / "results").iterdir()) == []


def test_a_data_folder_a_campaign_file_gives_is_named_by_the_file(study, tmp_path, capsys, monkeypatch):
    for name in ("a", "b"):  # as above: prepare's refusal, not the plan's
        (tmp_path / "bad" / "train" / name).mkdir(parents=True)
        (tmp_path / "bad" / "train" / name / "x.JPEG").write_bytes(b"\xff\xd8\xffjunk")
    (tmp_path / "study.toml").write_text('data = "bad"\n')
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(study + ["--config", "study.toml"], capsys)
    assert code == 2 and err.splitlines()[-1].startswith(
        "compare: error: study.toml: data {}: none of its 2 JPEG files can be used".format(
            tmp_path / "bad")), err


def test_a_held_out_part_no_framework_can_use_is_named_as_the_study_names_its_folder(study, tmp_path,
                                                                                     capsys):
    # DIR/val of JPEG first bytes and no JPEG after: the plan's look passes it, prepare's decode
    # refuses it, and the line began with the bare folder, without the --data that gave it
    from compare import learnable
    from compare.imagegen import make
    root = tmp_path / "imagenet"
    make(root, learnable.LearnableSpec(classes=2, train_per_class=4, val_per_class=1), 1,
         lambda n, b: None)
    for jpeg in (root / "val").rglob("*.JPEG"):
        jpeg.write_bytes(b"\xff\xd8\xffjunk")
    code, out, err = _run(study + ["--data", root, "--target-accuracy", "0.5"], capsys)
    assert code == 2 and err.splitlines()[-1].startswith(
        "compare: error: --data {}: none of its 2 JPEG files can be used".format(root / "val")), err


def test_a_message_is_matched_to_its_data_folder_by_path_components_not_text():
    # /data/imagenet2 is not /data/imagenet, nor inside it; /data/imagenet/val is inside it
    from compare.stages.prepare import folder_of
    siblings = ["/data/imagenet", "/data/imagenet2"]
    assert folder_of("/data/imagenet2: none of its 2 JPEG files can be used", siblings[:1]) is None
    assert folder_of("/data/imagenet2: none of its 2 JPEG files can be used", siblings) == siblings[1]
    assert folder_of("/data/imagenet: none of its 2 JPEG files can be used", siblings) == siblings[0]
    assert folder_of("/data/imagenet/val: none of its 2 JPEG files", siblings[1:]) is None
    assert folder_of("/data/imagenet/val: none of its 2 JPEG files", siblings) == siblings[0]
    assert folder_of("/data/imagenet/: none", ["/data//imagenet/"]) == "/data//imagenet/"
    assert folder_of("/data/a: b: none of its 2 JPEG files", ["/data/a: b"]) == "/data/a: b"
    assert folder_of("--data /data/imagenet: no such folder", siblings) is None  # named already
