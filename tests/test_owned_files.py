"""A campaign owns its files (issue 37): compare never writes through a link or into something
that is not its own regular file inside a campaign, the lock is the folder's (a dead holder
frees it, deleting a file cannot let a second writer in), and what a file system refuses (no
space, read-only, a folder where a file goes) is one line naming the path, exit 2."""
import json
import os
import signal

import pytest

from tests.helpers import (
    FAST,
    compare,
    fake_python,
    kill_leftovers,
    main_exit,
    processes_of,
    start_compare,
    wait_for,
)

CELL = "caffe2-fp32-w1-b4-s32-r0"
NEW_CELL = "caffe2-bf16-w1-b4-s32-r0"  # what `--resume --precision fp32,bf16` adds


@pytest.fixture
def run(capsys, monkeypatch):
    """`compare ARGS` in this process: (exit code, stdout, stderr)."""
    monkeypatch.setenv("COLUMNS", "500")
    return lambda argv: main_exit([str(a) for a in argv], capsys)


def _args(tmp_path, root, mode="ok"):
    return ["run", "--frameworks", "caffe2", "--results", root, "--python",
            "caffe2={}".format(fake_python(tmp_path, mode))] + FAST


def _victim(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    return victim


def test_a_lock_that_is_a_link_is_never_written_through(tmp_path, run):
    root, victim = tmp_path / "c", _victim(tmp_path)
    assert run(_args(tmp_path, root))[0] == 0
    if os.path.lexists(str(root / "lock")):
        os.unlink(str(root / "lock"))
    os.symlink(str(victim), str(root / "lock"))
    code, _, err = run(_args(tmp_path, root) + ["--resume"])
    assert code == 0, err  # the lock is the folder's own: a file named `lock` is not read
    assert victim.read_text() == "precious\n"
    assert os.readlink(str(root / "lock")) == str(victim)


@pytest.mark.parametrize("where", ["logs/{}.stdout", "logs/{}.stderr", "specs/{}.json",
                                   "results/{}.json"])
def test_a_link_where_a_cell_writes_is_refused_before_the_cell_runs(tmp_path, run, where):
    root, victim = tmp_path / "c", _victim(tmp_path)
    assert run(_args(tmp_path, root))[0] == 0
    link = root / where.format(NEW_CELL)
    os.symlink(str(victim), str(link))
    code, _, err = run(_args(tmp_path, root) + ["--resume", "--precision", "fp32,bf16"])
    assert (code, err.splitlines()[-1]) == (2, "compare: error: {}: is a symbolic link; compare "
                                               "never writes through a link inside a campaign: "
                                               "remove it, then run again".format(link))
    assert victim.read_text() == "precious\n"
    assert os.path.islink(str(link))
    assert not (root / "work" / NEW_CELL).exists()  # refused before the cell ran


def test_a_results_file_that_is_a_folder_is_found_before_the_cell_trains(tmp_path, run):
    root = tmp_path / "c"
    assert run(_args(tmp_path, root))[0] == 0
    (root / "results" / (NEW_CELL + ".json")).mkdir()
    code, _, err = run(_args(tmp_path, root) + ["--resume", "--precision", "fp32,bf16"])
    assert (code, err.splitlines()[-1]) == (2, "compare: error: {}: is a folder, not a file; "
                                               "remove it, then run again".format(
                                                   root / "results" / (NEW_CELL + ".json")))
    assert not (root / "work" / NEW_CELL).exists()


@pytest.mark.parametrize("sub", ["logs", "work", "specs"])
def test_a_file_where_a_campaign_folder_goes_is_one_line(tmp_path, run, sub):
    root = tmp_path / "c"
    assert run(_args(tmp_path, root))[0] == 0
    import shutil
    shutil.rmtree(str(root / sub))
    (root / sub).write_text("not a folder")
    code, _, err = run(_args(tmp_path, root) + ["--resume", "--precision", "fp32,bf16"])
    assert (code, err.splitlines()[-1]) == (2, "compare: error: {}: is a file, not a folder; remove "
                                               "it, then run again".format(root / sub))
    assert (root / sub).read_text() == "not a folder"


@pytest.mark.parametrize("where", ["report/report.md", "report/runs.csv", "report/report.html",
                                   "report/tables", "report"])
def test_compare_report_never_writes_through_a_link(tmp_path, run, where):
    root, victim = tmp_path / "c", _victim(tmp_path)
    assert run(_args(tmp_path, root))[0] == 0
    link = root / where
    if link.is_dir():
        import shutil
        shutil.rmtree(str(link))
    else:
        link.unlink()
    target = victim if "." in link.name else tmp_path  # a file for a file, a folder for a folder
    os.symlink(str(target), str(link))
    before = sorted(os.listdir(str(tmp_path)))
    code, _, err = run(["report", root, "--format", "md,csv,html"])
    assert (code, err.splitlines()[-1]) == (2, "compare: error: {}: is a symbolic link; compare "
                                               "never writes through a link inside a campaign: "
                                               "remove it, then run again".format(link))
    assert victim.read_text() == "precious\n"
    assert sorted(os.listdir(str(tmp_path))) == before  # nothing written where a link points


def test_a_report_is_replaced_whole_never_written_in_place(tmp_path, run):
    root = tmp_path / "c"
    assert run(_args(tmp_path, root))[0] == 0
    path = root / "report" / "report.md"
    before = os.stat(str(path)).st_ino
    os.link(str(path), str(tmp_path / "hard"))  # another name of the same file, outside
    held = (tmp_path / "hard").read_text()
    assert run(["report", root])[0] == 0
    assert os.stat(str(path)).st_ino != before  # a new file renamed into place
    assert (tmp_path / "hard").read_text() == held


def _held_run(tmp_path, root):
    """`compare run` of one cell that runs while tmp_path/hold exists."""
    (tmp_path / "hold").write_text("")
    return start_compare(_args(tmp_path, root, "hold"))


def _worker(root):
    return [pid for pid, cmd in processes_of(root, "COMPARE_ATTEMPT=") if "fake-python-hold" in cmd]


def test_a_finished_run_leaves_no_lock_file_to_delete(tmp_path, run):
    root = tmp_path / "c"
    assert run(_args(tmp_path, root))[0] == 0
    assert not os.path.lexists(str(root / "lock"))  # nothing holding a dead PID invites deleting it


def test_deleting_the_lock_file_lets_no_second_writer_in(tmp_path):
    root = tmp_path / "c"
    first = _held_run(tmp_path, root)
    try:
        assert wait_for(lambda: _worker(root), 60), first.stderr.read() if first.poll() else "no worker"
        workers = _worker(root)
        if os.path.lexists(str(root / "lock")):
            os.unlink(str(root / "lock"))  # what a user cleaning up a dead PID would do
        second = compare(_args(tmp_path, root, "hold") + ["--resume"], timeout=60)
        assert (second.returncode, second.stderr.splitlines()[-1]) == (
            2, "compare: error: --results {}: another `compare run` (PID {}) is running this "
               "campaign; wait for it to end or stop it, then --resume".format(root, first.pid))
        assert _worker(root) == workers  # the first run's worker was left alone
        (tmp_path / "hold").unlink()
        _, err = first.communicate(timeout=60)
        assert first.returncode == 0, err
    finally:
        first.kill()
        kill_leftovers(root)
    result = json.loads((root / "results" / (CELL + ".json")).read_text())
    assert result["status"] == "ok"  # the first run's own result, and its report says so
    assert "| ok " in (root / "report" / "report.md").read_text() or result["images_per_sec"] > 0


def test_a_sigkilled_run_holds_no_lock(tmp_path):
    root = tmp_path / "c"
    first = _held_run(tmp_path, root)
    try:
        assert wait_for(lambda: _worker(root), 60)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
        assert wait_for(lambda: not _worker(root), 10)  # the worker died with it
        (tmp_path / "hold").unlink()
        again = compare(_args(tmp_path, root, "hold") + ["--resume"], timeout=120)
        assert again.returncode == 0, again.stderr
        assert json.loads((root / "results" / (CELL + ".json")).read_text())["status"] == "ok"
    finally:
        kill_leftovers(root)


def test_a_campaign_whose_creation_was_cut_short_can_be_created_again(tmp_path, run):
    root = tmp_path / "c"
    for sub in ("specs", "results", "logs", "work"):  # what a create killed before campaign.json left
        (root / sub).mkdir(parents=True)
    (root / "machine.json").write_text("{}")
    code, _, err = run(_args(tmp_path, root) + ["--resume"])
    assert (code, err.splitlines()[-1]) == (2, "compare: error: --resume {}: its creation did not finish (no "
                                               "campaign.json); run again without --resume to create "
                                               "it".format(root))
    code, _, err = run(_args(tmp_path, root))
    assert code == 0, err
    assert json.loads((root / "results" / (CELL + ".json")).read_text())["status"] == "ok"


def test_a_symlink_loop_in_a_data_folder_is_skipped_not_fatal(tmp_path, run):
    data = tmp_path / "d"
    assert run(["data", "make", data, "--images", "8", "--classes", "2", "--image-size", "64x64",
                "--workers", "1"])[0] == 0
    classes = sorted((data / "train").iterdir())
    os.symlink("loop", str(data / "train" / "loop"))  # a class entry that is a loop
    os.symlink("self.JPEG", str(classes[0] / "self.JPEG"))  # an image that is a loop
    code, out, err = run(["data", "prepare", data, "--frameworks", "caffe2"])
    assert code == 0, err
    assert "8 JPEGs in 2 classes" in out + err

