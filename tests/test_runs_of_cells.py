"""Where a cell is repeated, the plan, the sweep's lines, its progress bar and the failed-run line
count runs of cells, as the report does ("Study: 0:01 wall for 4 runs of 2 cells, one run at a
time."); where each cell runs once, they count cells."""
import re

import pytest

from tests.helpers import FAST, fake_python, main_exit


def _run(argv, capsys):
    return main_exit([str(a) for a in argv], capsys)


@pytest.fixture()
def wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "500")


def test_a_repeated_cells_plan_and_sweep_count_runs_of_cells_as_the_report(tmp_path, capsys, wide):
    fake, campaign = fake_python(tmp_path), tmp_path / "c"
    study = ["run", "--frameworks", "caffe2", "--python", "caffe2={}".format(fake), "--precision",
             "fp32,bf16", "--repeats", "2", "--results", campaign] + FAST
    code, out, err = _run(study + ["--plan"], capsys)
    assert code == 0 and out.startswith("plan: 4 runs of 2 cells on "), out
    assert re.search(r"^ +start +end +GPUs +cores +time +run$", out, re.M), out
    assert re.search(r"^estimate: \S+ wall, one run at a time$", out, re.M), out
    code, out, err = _run(study, capsys)
    assert code == 0, err
    assert "campaign {}: 4 runs of 2 cells, 4 to run".format(campaign) in err.splitlines()
    assert re.search(r"^plan: 4 runs of 2 cells on ", err, re.M), err
    assert re.search(r"^estimate: \S+ wall, one run at a time$", err, re.M), err
    assert re.search(r"^run 4/4 ", err, re.M), err  # the bar, as it ends
    assert "wall for 4 runs of 2 cells, one run at a time." in (campaign / "report" / "report.md").read_text()
    code, out, err = _run(["run", "--results", campaign, "--resume", "--plan"], capsys)
    assert (code, out.splitlines()[0]) == (0, "plan: nothing to run on 2 cores: every run of the "
                                              "study has its result already"), out


def test_cells_run_once_are_counted_as_cells(tmp_path, capsys, wide):
    fake, campaign = fake_python(tmp_path), tmp_path / "c"
    code, out, err = _run(["run", "--frameworks", "caffe2", "--python", "caffe2={}".format(fake),
                           "--precision", "fp32,bf16", "--results", campaign] + FAST, capsys)
    assert code == 0, err
    assert "campaign {}: 2 cells, 2 to run".format(campaign) in err.splitlines()
    assert re.search(r"^plan: 2 cells on ", err, re.M) and re.search(r"^cell 2/2 ", err, re.M), err
    assert re.search(r"^estimate: \S+ wall, one cell at a time$", err, re.M), err


def test_failed_repeats_are_named_runs_in_the_line_that_ends_the_sweep(tmp_path, capsys, wide):
    fake = fake_python(tmp_path, "escape")  # every run crashes
    code, out, err = _run(["run", "--frameworks", "caffe2", "--python", "caffe2={}".format(fake),
                           "--repeats", "2", "--results", tmp_path / "c"] + FAST, capsys)
    assert code == 1 and err.splitlines()[-1] == (
        "2 runs failed or timed out (caffe2-fp32-w1-b4-s32-r0: failed, caffe2-fp32-w1-b4-s32-r1: "
        "failed); `compare run --results {} --resume` runs them again".format(tmp_path / "c")), err


def test_a_sweep_of_repeats_stopped_by_ctrl_c_counts_runs(tmp_path):
    import signal

    from tests.helpers import processes_of, start_compare, wait_for
    hold = tmp_path / "hold"  # the fake's first run waits while this file is there
    hold.write_text("")
    fake, campaign = fake_python(tmp_path, "hold"), tmp_path / "c"
    proc = start_compare(["run", "--frameworks", "caffe2", "--python", "caffe2={}".format(fake),
                          "--repeats", "2", "--results", campaign] + FAST)
    try:
        assert wait_for(lambda: processes_of(campaign, "COMPARE_ATTEMPT="), 60), "no run started"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        hold.unlink()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and \
        "compare: interrupted (SIGINT): 0 runs recorded, 2 not run; resume with: " in err, err


def test_the_plans_timeout_warning_counts_runs_of_cells(tmp_path, capsys, wide):
    # two cells of 70 and 80 s run twice each under --timeout 60: "4 cells estimated beyond"
    # counted the runs as cells
    from tests.helpers import failing_python, timed_campaign
    timed_campaign(tmp_path / "runs" / "old", (("fp32", 1, 70.0), ("fp32", 2, 80.0)))
    code, out, err = _run(["run", "--frameworks", "caffe2", "--gpus", "1,2", "--precision", "fp32",
                           "--batch-size", "256", "--plan", "--plan-gpus", "2", "--plan-from",
                           tmp_path / "runs", "--python", "caffe2={}".format(failing_python(tmp_path)),
                           "--timeout", "60", "--repeats", "2"], capsys)
    assert code == 0, err
    assert ("warning: 4 runs of 2 cells estimated beyond --timeout 60 s (the longest, "
            "caffe2-fp32-g2-b256-s224-r0: 80 s): a run is stopped there and recorded timeout; give "
            "a larger --timeout") in out.splitlines(), out
