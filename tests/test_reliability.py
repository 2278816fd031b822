"""No orphaned workers, one writer per campaign, no silently mixed settings, no trusted garbage:
each test runs `compare` as a process, with the real PyTorch backend (marked `backend`) or a fake
framework interpreter (`--python caffe2=FAKE`) where a real one cannot be made to misbehave."""
import json
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

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

# a 2-worker PyTorch cell that trains until it is stopped
ENDLESS = ["run", "--frameworks", "caffe2", "--gpus", "2", "--device", "cpu", "--executor", "local",
           "--batch-size", "4", "--image-size", "32", "--steps", "1000000", "--warmup", "1",
           "--windows", "1"]
RUN_ID = "caffe2-fp32-w2-b4-s32-r0"


def _fast(**given):
    """FAST with some of its flags' values replaced (steps="1": --steps 1), each flag once (one
    given twice is a warning line before the error these tests read)."""
    out = list(FAST)
    for key, value in given.items():
        out[out.index("--" + key.replace("_", "-")) + 1] = value
    return out


@pytest.fixture
def run(capsys, monkeypatch):
    """`compare ARGS` in this process (the backend still runs as a process of its own):
    CompletedProcess-like (returncode, stdout, stderr), `cwd` as the user's folder."""
    monkeypatch.setenv("COLUMNS", "500")  # rich wraps at 80 columns when stderr is no terminal

    def invoke(argv, cwd=None):
        if cwd is not None:
            monkeypatch.chdir(cwd)
        code, out, err = main_exit([str(a) for a in argv], capsys)
        return subprocess.CompletedProcess(argv, code, out, err)
    return invoke


@pytest.fixture
def campaign(tmp_path):
    root = tmp_path / "campaign"
    yield root
    kill_leftovers(root)


def _workers_up(root):
    """Both DDP workers of the campaign exist (torchrun has started them)."""
    return len(processes_of(root, "LOCAL_RANK=")) >= 2


def _none_alive_after(root, seconds=10.0):
    time.sleep(seconds)
    return processes_of(root)


@pytest.mark.backend
def test_timeout_of_a_two_worker_cell_leaves_no_process_and_no_temp_folder(campaign, tmp_path):
    own_tmp = tmp_path / "tmp"  # where torchrun would leave torchelastic_* folders
    own_tmp.mkdir()
    # 10 s, not 3: on a loaded 2-core machine torchrun needs several seconds to start the workers,
    # and a timeout before they exist would test nothing (asserted below)
    proc = start_compare(ENDLESS + ["--results", campaign, "--timeout", "10"],
                         env={"TMPDIR": str(own_tmp)})
    assert wait_for(lambda: _workers_up(campaign), 60), "the workers never started"
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err  # a cell that timed out is a failed run
    result = json.loads((campaign / "results" / (RUN_ID + ".json")).read_text())
    assert (result["status"], result["reason"]) == ("timeout", "killed after the 10 s timeout")
    assert _none_alive_after(campaign) == []
    assert list(own_tmp.glob("torchelastic_*")) == []
    assert list(own_tmp.glob("compare-*")) == []  # the run's own temp folder went with it


@pytest.mark.backend
def test_sigkill_of_compare_mid_cell_leaves_no_process(campaign):
    proc = start_compare(ENDLESS + ["--results", campaign])
    assert wait_for(lambda: _workers_up(campaign), 60), "the workers never started"
    os.kill(proc.pid, signal.SIGKILL)  # compare alone: its children must follow by themselves
    proc.communicate()
    assert _none_alive_after(campaign) == []


@pytest.mark.backend
@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_the_cell_and_a_second_run_is_refused_meanwhile(campaign, sig, code):
    proc = start_compare(ENDLESS + ["--results", campaign, "--timeout", "600"])
    assert wait_for(lambda: _workers_up(campaign), 60), "the workers never started"
    second = compare(ENDLESS + ["--results", campaign, "--resume"])
    assert (second.returncode, second.stderr) == (2, "compare: error: --results {}: another `compare "
                                                  "run` (PID {}) is running this campaign; wait for it "
                                                  "to end or stop it, then --resume\n".format(campaign, proc.pid))
    os.kill(proc.pid, sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code
    last = err.strip().splitlines()[-1]
    prefix = "compare: interrupted ({}): 0 cells recorded, 1 not run; resume with: ".format(sig.name)
    assert last.startswith(prefix), err[-2000:]
    assert shlex.split(last[len(prefix):]) == ["compare", "run", "--results", str(campaign), "--resume"]
    assert list((campaign / "results").iterdir()) == []  # the stopped cell is not recorded
    assert _none_alive_after(campaign, 5) == []


def test_a_result_left_by_another_attempt_is_ignored(tmp_path, run):
    campaign = tmp_path / "c"
    proc = run(["run", "--frameworks", "caffe2", "--results", campaign,
                    "--python", "caffe2={}".format(fake_python(tmp_path, "stale"))] + FAST)
    assert proc.returncode == 1, proc.stderr  # the cell failed
    result = json.loads((campaign / "results" / "caffe2-fp32-w1-b4-s32-r0.json").read_text())
    assert result["status"] == "failed"
    assert result["reason"].startswith(
        "exited with code 0 and wrote no result (ignored a result file written by another attempt, "
        "nonce 0123456789abcdef, not this attempt's {}: a process left over from an earlier sweep)".format(
            result["nonce"]))
    assert result["images_per_sec"] is None


def test_a_worker_that_outlives_its_launcher_is_ended_with_the_cell(tmp_path, run):
    campaign = tmp_path / "c"
    try:
        proc = run(["run", "--frameworks", "caffe2", "--results", campaign,
                        "--python", "caffe2={}".format(fake_python(tmp_path, "orphan"))] + FAST)
        assert proc.returncode == 0, proc.stderr
        assert json.loads((campaign / "results" / "caffe2-fp32-w1-b4-s32-r0.json").read_text())[
            "status"] == "ok"
        assert processes_of(campaign) == []
    finally:
        kill_leftovers(campaign)


def test_settings_are_fixed_at_creation_but_the_matrix_may_grow(tmp_path, run):
    campaign, fake = tmp_path / "c", fake_python(tmp_path)
    first = ["run", "--frameworks", "caffe2", "--results", campaign, "--python", "caffe2={}".format(fake)]
    assert run(first + FAST).returncode == 0
    changed = run(first + _fast(steps="1") + ["--resume", "--option", "channels_last=true",
                                      "--timeout", "60"])
    assert (changed.returncode, changed.stderr) == (2, (
        "compare: error: --resume {}: --steps 1 (the campaign's: 3); --option channels_last=true (the "
        "campaign's: none): held by the campaign (they change what its cells measure); leave them out "
        "(the campaign's are used) or start a new campaign\n").format(campaign))
    grown = run(first + FAST + ["--resume", "--precision", "fp32,bf16", "--timeout", "60"])
    assert grown.returncode == 0, grown.stderr
    assert "2 cells, 1 to run" in grown.stderr
    assert sorted(p.name for p in (campaign / "results").iterdir()) == [
        "caffe2-bf16-w1-b4-s32-r0.json", "caffe2-fp32-w1-b4-s32-r0.json"]


def test_a_result_of_other_settings_is_never_mixed_into_a_cell(tmp_path, run):
    fake = fake_python(tmp_path)
    for name, steps in (("a", "3"), ("b", "5")):
        args = ["run", "--frameworks", "caffe2", "--results", tmp_path / name, "--python",
                "caffe2={}".format(fake), "--repeats", "2"] + FAST
        assert run(args[:-6] + ["--steps", steps, "--warmup", "1", "--windows", "1"]).returncode == 0
    # a repeat of campaign b's cell, copied into campaign a under the right name
    foreign = tmp_path / "b" / "results" / "caffe2-fp32-w1-b4-s32-r1.json"
    (tmp_path / "a" / "results" / foreign.name).write_text(foreign.read_text())
    report = run(["report", tmp_path / "a", "--format", "csv"])
    assert report.returncode == 0
    assert "compare: warning: skipped result caffe2-fp32-w1-b4-s32-r1.json: its settings (spec hash " \
        in report.stderr
    runs = (tmp_path / "a" / "report" / "runs.csv").read_text().splitlines()
    assert len(runs) == 2  # the header and repeat 0: the foreign repeat is not counted


def test_bad_result_files_are_skipped_with_one_warning_each(tmp_path, run):
    campaign = tmp_path / "c"
    assert run(["run", "--frameworks", "caffe2", "--results", campaign, "--python",
                    "caffe2={}".format(fake_python(tmp_path))] + FAST).returncode == 0
    results = campaign / "results"
    good = json.loads((results / "caffe2-fp32-w1-b4-s32-r0.json").read_text())
    null_figure = dict(good, run_id="caffe2-fp32-w1-b4-s32-r1", images_per_sec=None,
                       spec=dict(good["spec"], repeat=1))
    (results / "caffe2-fp32-w1-b4-s32-r1.json").write_text(json.dumps(null_figure))
    (results / "caffe2-fp32-w1-b4-s32-r2.json").write_text(json.dumps(dict(good, spec=[1, 2])))
    (results / "caffe2-fp32-w1-b4-s32-r0 (copy).json").write_text(json.dumps(good))
    (results / ".tmp-abc123.json").write_text(json.dumps(good))
    diff = run(["diff", campaign, campaign])
    assert diff.returncode == 0 and diff.stderr.count("skipped") == 6, diff.stderr  # 3 per side
    proc = run(["report", campaign, "--format", "md,csv"])
    assert proc.returncode == 0 and proc.stderr.count("warning") == 3, proc.stderr
    assert ("compare: warning: skipped corrupt result caffe2-fp32-w1-b4-s32-r1.json: status ok needs a "
            "positive images_per_sec, not None") in proc.stderr
    assert "skipped corrupt result caffe2-fp32-w1-b4-s32-r2.json: spec is [1, 2], not an object" in proc.stderr
    assert ("skipped result caffe2-fp32-w1-b4-s32-r0 (copy).json: it holds run caffe2-fp32-w1-b4-s32-r0 "
            "(a copy?); only <run_id>.json files count") in proc.stderr
    assert len((campaign / "report" / "runs.csv").read_text().splitlines()) == 2  # header + 1 run


def test_escape_sequences_from_a_backend_reach_neither_terminal_nor_report(tmp_path, run):
    campaign = tmp_path / "c"
    proc = run(["run", "--frameworks", "caffe2", "--results", campaign, "--python",
                    "caffe2={}".format(fake_python(tmp_path, "escape"))] + FAST)
    assert proc.returncode == 1, proc.stderr  # the cell failed
    assert "\x1b" not in proc.stderr and "\x07" not in proc.stderr
    assert "exited with code 3 and wrote no result: boom | done" in proc.stderr
    report = (campaign / "report" / "report.md").read_text()
    assert "boom ¦ done" in report and "\x1b" not in report and "\x07" not in report


def test_results_are_written_like_logs_and_a_half_done_campaign_says_what_is_missing(tmp_path, run):
    campaign = tmp_path / "c"
    old = os.umask(0o022)
    try:
        proc = run(["run", "--frameworks", "caffe2", "--results", campaign, "--precision",
                        "fp32,bf16", "--python", "caffe2={}".format(fake_python(tmp_path))] + FAST)
    finally:
        os.umask(old)
    assert proc.returncode == 0, proc.stderr
    for path in [campaign / "results" / "caffe2-fp32-w1-b4-s32-r0.json",
                 campaign / "logs" / "caffe2-fp32-w1-b4-s32-r0.stderr", campaign / "campaign.json"]:
        assert oct(path.stat().st_mode & 0o777) == "0o644", path
    (campaign / "results" / "caffe2-bf16-w1-b4-s32-r0.json").unlink()  # as if killed before it
    out = run(["report", campaign]).stdout
    assert ("1 of the campaign's 2 planned cells has no result: caffe2-bf16-w1-b4-s32-r0. "
            "`compare run … --resume` runs it.") in out
    assert "| PyTorch (Caffe2) | fp32 | 4 | 32 |" in out
    assert "fake 1.0¦beta" in out  # the backend's version had a `|`: it may end up in a table cell


def test_a_relative_python_path_means_what_it_meant_where_it_was_typed(tmp_path, run):
    fake = fake_python(tmp_path)
    proc = run(["run", "--frameworks", "caffe2", "--results", "c", "--python",
                    "caffe2=./{}".format(fake.name)] + FAST, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = json.loads((tmp_path / "c" / "results" / "caffe2-fp32-w1-b4-s32-r0.json").read_text())
    assert result["status"] == "ok", result["reason"]
    assert result["environment"]["python"] == str(fake)


def test_a_worker_killed_by_a_signal_is_failed_and_run_again_on_resume(tmp_path, run, monkeypatch):
    from compare.executors import results
    monkeypatch.setattr(results, "KERNEL_LOG", str(tmp_path / "no-kernel-log"))  # no OOM logged
    campaign = tmp_path / "c"
    args = ["run", "--frameworks", "caffe2", "--results", campaign, "--python",
            "caffe2={}".format(fake_python(tmp_path, "killed-once"))] + FAST
    assert run(args).returncode == 1  # a failed run: recorded, and the exit says so
    path = campaign / "results" / "caffe2-fp32-w1-b4-s32-r0.json"
    killed = json.loads(path.read_text())
    assert killed["status"] == "failed"
    assert killed["reason"].startswith("killed by SIGKILL (exit code -9) and wrote no result (whether by "
                                       "the kernel's OOM killer is not known: ")
    again = run(args + ["--resume"])
    assert again.returncode == 0 and "1 cell, 1 to run" in again.stderr
    assert json.loads(path.read_text())["status"] == "ok"


def test_a_campaign_that_stored_no_settings_is_held_to_those_of_its_results(tmp_path, run):
    # a campaign made by a compare before settings were stored: its campaign.json has neither
    # settings nor a plan
    campaign = tmp_path / "c"
    args = ["run", "--frameworks", "caffe2", "--results", campaign, "--python",
            "caffe2={}".format(fake_python(tmp_path))] + FAST
    assert run(args).returncode == 0
    meta = json.loads((campaign / "campaign.json").read_text())
    del meta["settings"], meta["planned"]
    for session in meta["sessions"] + [meta]:  # nor a study: it asked with flags alone
        session["config"] = {}
    (campaign / "campaign.json").write_text(json.dumps(meta))
    result = (campaign / "results" / "caffe2-fp32-w1-b4-s32-r0.json").read_text()
    other = run(args[:-len(FAST)] + _fast(steps="11") + ["--resume"])
    assert (other.returncode, other.stderr) == (2, (
        "compare: error: --resume {}: settings differ from the campaign's (it stored none: read from "
        "its results): steps 3 (its results) vs 11 (now); resume with the campaign's settings or "
        "start a new campaign (--frameworks, --gpus, --nodes, --precision, --batch-size, --mode, "
        "--repeats, --timeout, --data, --data-only, --model, --concurrency and --gpu-hour-price may "
        "change)\n").format(campaign))
    assert (campaign / "results" / "caffe2-fp32-w1-b4-s32-r0.json").read_text() == result  # kept
    same = run(args + ["--resume", "--precision", "fp32,bf16"])
    assert same.returncode == 0, same.stderr
    assert "2 cells, 1 to run" in same.stderr  # its ok cell kept, the new one run
    assert json.loads((campaign / "campaign.json").read_text())["settings"]["steps"] == 3


def test_the_temp_folder_of_a_killed_compare_is_removed_by_the_next_one(tmp_path):
    own_tmp, first, second = tmp_path / "tmp", tmp_path / "first", tmp_path / "second"
    own_tmp.mkdir()
    env = {"TMPDIR": str(own_tmp)}
    proc = start_compare(["run", "--frameworks", "caffe2", "--results", first, "--python",
                          "caffe2={}".format(fake_python(tmp_path, "hang"))] + FAST, env=env)
    try:
        left = wait_for(lambda: list(own_tmp.glob("compare-*")), 60)
        assert left == [own_tmp / "compare-{}-{}".format(proc.pid, left[0].name.split("-")[2])], left
        os.kill(proc.pid, signal.SIGKILL)  # no clean-up of its own can run
        proc.communicate()
        assert list(own_tmp.glob("compare-*")) == left  # left behind, and findable by its PID
        again = compare(["run", "--frameworks", "caffe2", "--results", second, "--python",
                         "caffe2={}".format(fake_python(tmp_path))] + FAST, env=env)
        assert again.returncode == 0, again.stderr
        assert list(own_tmp.glob("compare-*")) == []
    finally:
        kill_leftovers(first)


def test_every_test_the_reliability_page_names_exists():
    import re

    from tests.helpers import ROOT
    page = (ROOT / "docs" / "reliability.md").read_text()
    named = re.findall(r"`([\w/]+\.py)::(\w+)`", page)
    assert len(named) >= 40
    missing = ["{}::{}".format(f, t) for f, t in named
               if "def {}(".format(t) not in (ROOT / "tests" / f).read_text()]
    assert missing == []


def test_a_failed_repeat_shows_in_the_report_and_fails_the_check(tmp_path, run, monkeypatch):
    from compare.executors import results
    monkeypatch.setattr(results, "KERNEL_LOG", str(tmp_path / "no-kernel-log"))  # no OOM logged
    campaign = tmp_path / "c"
    args = ["run", "--frameworks", "caffe2", "--repeats", "2", "--results", campaign, "--python",
            "caffe2={}".format(fake_python(tmp_path, "killed-r1"))] + FAST
    first = run(args)  # r0 ok, r1's worker killed by SIGKILL
    assert first.returncode == 1, first.stderr
    report = (campaign / "report" / "report.md").read_text()
    assert " (1 of 2 runs) |" in report  # the figure says what it rests on
    assert "## Runs without a figure in cells that have one" in report
    killed = "r1: failed: killed by SIGKILL (exit code -9) and wrote no result (whether by the kernel's " \
             "OOM killer is not known: "
    assert "| 1 of 2 | " + killed in report
    cell = json.loads((campaign / "report" / "report.json").read_text())[0]
    assert (cell["status"], cell["repeats"], cell["runs"]) == ("ok", 1, 2)
    ref = tmp_path / "ref.csv"  # a figure of the device it ran on (a 1-worker speedup checks nothing)
    ref.write_text('gpu,precision,gpus,images_per_sec\n"{}",fp32,1,0.001\n'.format(cell["device_name"]))
    check = run(["check", campaign, "--reference", ref])
    assert check.returncode == 1
    assert "falls short: 1 of its 2 runs failed (" + killed in check.stdout
    assert " counted an OOM kill while the run ran)); `compare run … --resume` runs it again" in check.stdout
    again = run(args + ["--resume"])
    assert again.returncode == 0 and "2 runs of 1 cell, 1 to run" in again.stderr
    assert " (1 of 2 runs)" not in (campaign / "report" / "report.md").read_text()
    assert run(["check", campaign, "--reference", ref]).returncode == 0



# `compare run` whose report stage is stopped by SIGTERM (or SIGINT) the moment it begins
STOPPED_IN_REPORT = """
import os, signal, sys
from compare.stages import report
write = report.write
def stopped(*args, **kw):
    os.kill(os.getpid(), getattr(signal, sys.argv[1]))
    return write(*args, **kw)
report.write = stopped
from compare.cli import main
main(sys.argv[2:])
"""


@pytest.mark.parametrize("sig,code", [("SIGTERM", 143), ("SIGINT", 130)])
def test_a_signal_while_the_report_is_written_says_the_cells_are_recorded(tmp_path, sig, code):
    # every cell had run and was recorded; a SIGTERM in the report stage ended compare with 143
    # and not a word (SIGINT: "interrupted; results recorded so far are kept"), no report either
    import sys
    campaign = tmp_path / "c"
    proc = subprocess.run([sys.executable, "-c", STOPPED_IN_REPORT, sig, "run", "--frameworks", "caffe2",
                           "--results", str(campaign), "--python", "caffe2={}".format(
                               fake_python(tmp_path))] + FAST,
                          cwd=str(Path(__file__).resolve().parent.parent), text=True,
                          capture_output=True, timeout=120, env=dict(os.environ, COLUMNS="500"))
    assert proc.returncode == code, proc.stderr[-3000:]
    assert proc.stderr.splitlines()[-1] == (
        "compare: interrupted ({}) while writing the report: every cell is recorded (1 cell); "
        "write the report with: compare report {}".format(sig, campaign))
    assert [p.name for p in (campaign / "results").iterdir()] == ["caffe2-fp32-w1-b4-s32-r0.json"]


# `compare run` stopped by a signal while it prepares (writing a data folder's TFRecords can take
# minutes): what prepare.make does before the first cell
STOPPED_IN_PREPARE = """
import os, signal, sys
from compare.stages import prepare
data = prepare._data
def stopped(*args, **kw):
    os.kill(os.getpid(), getattr(signal, sys.argv[1]))
    return data(*args, **kw)
prepare._data = stopped
from compare.cli import main
main(sys.argv[2:])
"""


@pytest.mark.parametrize("sig,code", [("SIGTERM", 143), ("SIGINT", 130)])
def test_a_signal_while_preparing_keeps_no_new_campaign(tmp_path, sig, code):
    # SIGTERM there ended compare with 143 and not a word, and left the new campaign folder, so
    # the same command then said "already holds a campaign; add --resume"
    import sys
    campaign = tmp_path / "c"
    argv = ["run", "--frameworks", "caffe2", "--results", str(campaign), "--python",
            "caffe2={}".format(fake_python(tmp_path))] + FAST
    proc = subprocess.run([sys.executable, "-c", STOPPED_IN_PREPARE, sig] + argv,
                          cwd=str(Path(__file__).resolve().parent.parent), text=True,
                          capture_output=True, timeout=120, env=dict(os.environ, COLUMNS="500"))
    assert proc.returncode == code, proc.stderr[-3000:]
    assert proc.stderr.splitlines()[-1] == (
        "compare: interrupted ({}) while preparing the run: no cell ran and nothing is kept; run "
        "the same command again".format(sig))
    assert not (campaign / "campaign.json").exists()  # (discard: the folder named is left)
    again = compare(argv)  # the same command, as the line says
    assert again.returncode == 0, again.stderr[-3000:]
    # a resumed campaign stopped so is as it was, and says how to go on
    proc = subprocess.run([sys.executable, "-c", STOPPED_IN_PREPARE, sig] + argv + ["--resume"],
                          cwd=str(Path(__file__).resolve().parent.parent), text=True,
                          capture_output=True, timeout=120, env=dict(os.environ, COLUMNS="500"))
    assert proc.returncode == code, proc.stderr[-3000:]
    assert proc.stderr.splitlines()[-1] == (
        "compare: interrupted ({}) while preparing the run: no cell ran and the campaign is as it "
        "was; resume with: compare run --results {} --resume".format(sig, campaign))
    assert len(json.loads((campaign / "campaign.json").read_text())["sessions"]) == 1
