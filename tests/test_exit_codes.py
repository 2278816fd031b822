"""Exit codes CI can trust: 0 pass, 1 a measured shortfall (`check` FAIL) or a failed run, 2 bad
input, 70 an internal error; and every one-line message stays one line."""
import json

from tests.helpers import FAST, fake_python, main_exit, save_campaign, windowed


def test_an_internal_error_is_70_not_the_1_of_a_failed_check(tmp_path, capsys, monkeypatch):
    from compare.stages import report as stage
    root = save_campaign(tmp_path / "c", [windowed("caffe2", "fp32", 1, [100.0, 101.0])])

    def broken(*args, **kwargs):
        raise RuntimeError("boom\nsecond line")
    monkeypatch.setattr(stage, "write", broken)
    code, out, err = main_exit(["report", str(root)], capsys)
    assert (code, out, err) == (70, "", "compare: internal error: RuntimeError: boom\\nsecond line (rerun "
                                        "with --debug for the traceback)\n")


def test_debug_given_after_the_command_shows_the_traceback(tmp_path, capsys, monkeypatch):
    # "rerun with --debug": appended to the command line as typed, it is not an unknown option
    import pytest

    from compare.cli import main
    from compare.stages import report as stage
    root = save_campaign(tmp_path / "c", [windowed("caffe2", "fp32", 1, [100.0, 101.0])])

    def broken(*args, **kwargs):
        raise RuntimeError("boom")
    monkeypatch.setattr(stage, "write", broken)
    with pytest.raises(RuntimeError, match="boom"):
        main(["report", str(root), "--debug"])
    code, out, err = main_exit(["list", "references", "--debug"], capsys)
    assert (code, err) == (0, "") and out.startswith("a6000_tf_cnn_benchmarks")


def test_a_failed_run_is_exit_1_and_a_measured_outcome_is_not(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "500")
    run = ["run", "--frameworks", "caffe2", "--results", str(tmp_path / "c"), "--python",
           "caffe2={}".format(fake_python(tmp_path, "killed-once"))] + FAST
    code, _, err = main_exit(run, capsys)
    assert code == 1, err  # the cell failed: CI must not read the run as a success
    assert err.splitlines()[-1] == "1 cell failed or timed out (caffe2-fp32-w1-b4-s32-r0: failed); " \
        "`compare run --results {} --resume` runs it again".format(tmp_path / "c")  # as Ctrl-C's line
    code, _, err = main_exit(run + ["--resume"], capsys)
    assert code == 0, err
    # unsupported is the framework's answer for the cell: a measured outcome, not a failed run
    other = ["run", "--frameworks", "caffe2", "--results", str(tmp_path / "u"), "--python",
             "caffe2={}".format(fake_python(tmp_path, "unsupported"))] + FAST
    code, _, err = main_exit(other, capsys)
    assert code == 0, err
    result = json.loads((tmp_path / "u" / "results" / "caffe2-fp32-w1-b4-s32-r0.json").read_text())
    assert (result["status"], result["reason"]) == ("unsupported", "no such device here (the test's fake)")


def test_a_line_break_in_a_path_stays_on_the_one_line_of_the_error(tmp_path, capsys):
    odd = tmp_path / "a\nb\tc"
    odd.mkdir()
    code, out, err = main_exit(["report", str(odd)], capsys)
    assert (code, out) == (2, "")
    assert err == "compare: error: {}\\nb\\tc: not a campaign folder (no campaign.json); give a folder " \
                  "made by `compare run`\n".format(tmp_path / "a")


def test_a_line_break_in_a_result_files_name_stays_on_its_warnings_one_line(tmp_path, capsys):
    root = save_campaign(tmp_path / "c", [windowed("caffe2", "fp32", 1, [100.0, 101.0])])
    (root / "results" / "x\ny.json").write_text("{")
    code, out, err = main_exit(["report", str(root)], capsys)
    assert code == 0
    assert "compare: warning: skipped corrupt result x\\ny.json: not valid JSON (Expecting property name " \
           "enclosed in double quotes: line 1 column 2 (char 1))\n" in err
    assert "- skipped corrupt result x\\ny.json: not valid JSON" in out  # report.md shows it so too
