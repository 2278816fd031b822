"""A result file holding a value of the wrong type anywhere (phases, telemetry, settings), NaN,
an implausible figure, deep nesting or a spec edited after the run is skipped with the reason by
every command that reads results, never an internal error and never a number in a report."""
import json

import pytest

from compare import validate
from compare.reporting import comparator
from tests.helpers import FAST, fake_python, main_exit, save_campaign, windowed

WINDOWS = [100.0, 101.0, 99.0]


@pytest.fixture
def campaign(tmp_path):
    """Two planned repeats of one cell; the test spoils repeat 1's file."""
    return save_campaign(tmp_path / "c", [windowed("caffe2", "fp32", 1, WINDOWS, repeat=i)
                                          for i in range(2)])


def _spoil(root, change):
    path = root / "results" / "caffe2-fp32-g1-b256-s224-r1.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))  # json writes NaN as NaN, as a careless writer would
    return path.name


def _set(**fields):
    return lambda data: data.update(fields)


BAD = [
    (_set(phases={"timed_start": "soon"}), "phases is {'timed_start': 'soon'}, not an object of finite numbers"),
    (_set(phases=["cell_start", 1.0]), "phases is ['cell_start', 1.0], not an object of finite numbers"),
    (_set(phases={"timed_start": float("nan")}), "phases.timed_start is nan, not a finite number"),
    (_set(telemetry={"power_avg_w": "hot"}), "telemetry.power_avg_w is 'hot', not a number from -1e12 to 1e12"),
    (_set(telemetry={"samples": [1, 2]}), "telemetry.samples is [1, 2], not a number from -1e12 to 1e12"),
    (_set(telemetry={"power_avg_w": 1e300}), "telemetry.power_avg_w is 1e+300, not a number from -1e12 to 1e12"),
    (_set(settings={"layout": ["NHWC"]}), "settings.layout is ['NHWC'], not a string"),
    (_set(settings={"loader_workers": {"n": 4}}), "settings.loader_workers is {'n': 4}, not a number from -1e12 to 1e12"),
    (_set(images_per_sec=1e308), "images_per_sec 1e+308 is outside 1e-06 to 1e+09 images/sec: no run measures that"),
    (_set(images_per_sec=1e-320, median_images_per_sec=1e-320, window_images_per_sec=[1e-320]),
     "images_per_sec 1e-320 is outside 1e-06 to 1e+09 images/sec: no run measures that"),
    (_set(uncertainty=float("inf")), "uncertainty is inf, not a finite number"),
    (_set(environment={"deep": json.loads("[" * 40 + "]" * 40)}),
     "environment.deep" + "[0]" * 15 + " is nested deeper than 16 levels"),
]
IDS = ["phases-text", "phases-list", "phases-nan", "telemetry-text", "telemetry-list", "telemetry-1e300",
       "settings-list", "settings-object", "ips-1e308", "ips-1e-320", "uncertainty-inf", "deep"]


@pytest.mark.parametrize("change,why", BAD, ids=IDS)
def test_a_wrong_value_anywhere_is_skipped_with_the_reason_by_every_reader(campaign, tmp_path, capsys,
                                                                          change, why):
    name = _spoil(campaign, change)
    warning = "compare: warning: {}: skipped corrupt result {}: {}\n".format(campaign, name, why)
    ref = tmp_path / "ref.csv"
    ref.write_text("gpu,precision,gpus,images_per_sec\nH200,fp32,1,90\n")
    for argv in (["diff", campaign, campaign], ["history", campaign], ["check", campaign, "--reference", ref]):
        code, out, err = main_exit([str(a) for a in argv], capsys)
        assert warning in err, (argv, err)
        assert "nan" not in out and "inf" not in out and "1e+" not in out
        # check: the spoilt repeat's cell has no usable result, so the study is not done
        assert (code, argv[0] != "check" or "1 planned cell of the campaign has no result yet: "
                "caffe2-fp32-g1-b256-s224-r1." in out) == (0 if argv[0] != "check" else 1, True), out
    code, out, err = main_exit(["report", str(campaign), "--format", "md,csv,html"], capsys)
    assert code == 0, err
    assert "compare: warning: skipped corrupt result {}: {}\n".format(name, why) in err
    assert "| PyTorch (Caffe2) | fp32 | 256 | 224 | 100.00 |" in out  # repeat 0 alone makes the cell
    assert "nan%" not in out and "inf ±" not in out and "0" * 30 not in out
    assert "## Result files left out\n\n- skipped corrupt result {}: ".format(name) in out


def test_the_reports_read_no_value_the_loader_does_not_check():
    # what comparator.py reads inside telemetry and settings is declared to the loader
    assert set(comparator.TELEMETRY) | {"samples"} <= set(validate.READ["telemetry"])
    assert {"layout"} | set(comparator.DATA_SETTINGS) <= set(validate.READ["settings"])


@pytest.mark.parametrize("change,why", [
    (lambda d: d["spec"].update(steps=11), "spec_hash {} is not the hash of its spec ({}): the spec was "
                                           "changed after the run"),
    (lambda d: (d["spec"].update(steps=11, spec_hash=None), d.update(spec_hash=None)),
     "its settings (spec hash {1}) are not the campaign's ({0}); results of other settings are never "
     "mixed into a cell"),
], ids=["stored-hash-kept", "stored-hash-null"])
def test_a_spec_changed_after_the_run_is_re_hashed_and_left_out(campaign, capsys, change, why):
    kept = windowed("caffe2", "fp32", 1, WINDOWS, repeat=1).spec
    edited = dict(kept, steps=11)
    from backends.protocol import RunSpec
    planned, actual = RunSpec.from_dict(kept).spec_hash, RunSpec.from_dict(edited).spec_hash

    def spoil(data):
        data["spec_hash"] = planned
        change(data)
    name = _spoil(campaign, spoil)
    code, out, err = main_exit(["report", str(campaign), "--format", "csv"], capsys)
    assert code == 0
    assert why.format(planned, actual) in err and name in err
    assert len((campaign / "report" / "runs.csv").read_text().splitlines()) == 2  # header + repeat 0


def test_a_file_nested_200000_deep_neither_crashes_a_report_nor_blocks_a_resume(tmp_path, capsys,
                                                                                monkeypatch):
    monkeypatch.setenv("COLUMNS", "500")  # rich wraps at 80 columns when stderr is no terminal
    root = tmp_path / "c"
    run = ["run", "--frameworks", "caffe2", "--results", str(root), "--python",
           "caffe2={}".format(fake_python(tmp_path))] + FAST
    assert main_exit(run, capsys)[0] == 0
    (root / "results" / "caffe2-fp32-w1-b4-s32-r0.json").write_text("[" * 200000)
    code, _, err = main_exit(["report", str(root)], capsys)
    assert code == 0
    assert "skipped corrupt result caffe2-fp32-w1-b4-s32-r0.json: not valid JSON (nested too deeply " \
           "to read)" in err
    code, _, err = main_exit(run + ["--resume"], capsys)
    assert code == 0, err
    assert "1 cells, 1 to run" in err  # the unreadable cell is run again, its file replaced
    assert json.loads((root / "results" / "caffe2-fp32-w1-b4-s32-r0.json").read_text())["status"] == "ok"
