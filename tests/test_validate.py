"""A result file holding a value of the wrong type anywhere (phases, telemetry, settings), NaN,
an implausible figure, deep nesting or a spec edited after the run is skipped with the reason by
every command that reads results, never an internal error and never a number in a report."""
import json
import statistics
import time
from dataclasses import replace
from pathlib import Path

import pytest

from backends.contract import SchemaError, window_sizes
from backends.protocol import RunSpec
from compare import validate
from compare.reporting import comparator
from tests.helpers import FAST, fake_python, main_exit, save_campaign, windowed

WINDOWS = [100.0, 101.0, 99.0]


@pytest.fixture
def campaign(tmp_path):
    """Two planned repeats of one cell; the test spoils repeat 1's file."""
    return save_campaign(tmp_path / "c", [windowed("caffe2", "fp32", 1, WINDOWS, repeat=i)
                                          for i in range(2)])


def _spoil(root, change, name="caffe2-fp32-g1-b256-s224-r1.json"):
    """Change the result file `name`: change(data) edits it, or returns the file's new text."""
    path = root / "results" / name
    data = json.loads(path.read_text())
    text = change(data)
    # json writes NaN as NaN and any integer in full, as a careless writer would
    path.write_text(text if isinstance(text, str) else json.dumps(data))
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
    # an integer no float can hold: an OverflowError wherever a reader turned it into a number
    (_set(images_per_sec=int("9" * 401)), "images_per_sec is an integer of 401 digits; no number "
                                          "in a campaign file has more than 19"),
    (_set(window_images_per_sec=[100.0, -int("1" * 401)]), "window_images_per_sec[1] is an integer "
                                                           "of 401 digits; no number in a campaign file "
                                                           "has more than 19"),
    (_set(phases={"cell_start": int("9" * 401)}), "phases.cell_start is an integer of 401 digits; no "
                                                  "number in a campaign file has more than 19"),
    (_set(telemetry={"power_avg_w": int("9" * 401)}), "telemetry.power_avg_w is an integer of 401 "
                                                      "digits; no number in a campaign file has more "
                                                      "than 19"),
    (lambda d: '{"images_per_sec": 100000000.0, ' + json.dumps(d)[1:],
     "not valid JSON (key 'images_per_sec' appears twice in one object: which value holds is not "
     "clear)"),
]
IDS = ["phases-text", "phases-list", "phases-nan", "telemetry-text", "telemetry-list", "telemetry-1e300",
       "settings-list", "settings-object", "ips-1e308", "ips-1e-320", "uncertainty-inf", "deep",
       "ips-401-digits", "window-401-digits", "phase-401-digits", "telemetry-401-digits",
       "duplicate-key"]


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
        assert (code, argv[0] != "check" or "1 of the campaign's 2 planned runs of 1 cell has no "
                "result yet: caffe2-fp32-g1-b256-s224-r1." in out) == (0 if argv[0] != "check" else 1, True), out
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
    assert "1 cell, 1 to run" in err  # the unreadable cell is run again, its file replaced
    assert json.loads((root / "results" / "caffe2-fp32-w1-b4-s32-r0.json").read_text())["status"] == "ok"


def test_an_integer_of_401_digits_neither_blocks_a_resume_nor_a_plan(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "500")
    root = tmp_path / "c"
    run = ["run", "--frameworks", "caffe2", "--results", str(root), "--python",
           "caffe2={}".format(fake_python(tmp_path))] + FAST
    assert main_exit(run, capsys)[0] == 0
    _spoil(root, _set(images_per_sec=int("9" * 401)), "caffe2-fp32-w1-b4-s32-r0.json")
    code, out, err = main_exit(run[:3] + FAST + ["--plan", "--plan-from", str(root)], capsys)
    assert (code, "internal error" in err) == (0, False), err
    code, _, err = main_exit(run + ["--resume"], capsys)
    assert code == 0, err
    assert "1 cell, 1 to run" in err  # the unreadable cell is run again, its file replaced
    assert json.loads((root / "results" / "caffe2-fp32-w1-b4-s32-r0.json").read_text())["status"] == "ok"


# --- figures a run cannot have measured: the harness's own arithmetic, redone on load -------------
def harnessed(folder, **fields):
    """A result as the real harness writes it (in this process, a trainer that sleeps 1 ms a
    step): a 1-worker CPU caffe2 cell, batch 4, 4 timed steps in 2 windows unless `fields` say."""
    from backends import harness
    from backends.protocol import read_result

    class Idle(harness.Trainer):
        def step(self):
            time.sleep(0.001)

        def describe(self):
            return {"framework_version": "fake 1.0", "device_name": harness.cpu_name()}
    spec = RunSpec(**dict(dict(framework="caffe2", backend="caffe2_torch", device="cpu",
                               batch_size=4, image_size=32, steps=4, warmup_steps=1, windows=2),
                          **fields))
    path = Path(folder) / (spec.run_id + ".json")
    harness.run(spec, str(path), lambda s: Idle())
    return read_result(str(path))


def _harnessed_campaign(tmp_path):
    return save_campaign(tmp_path / "c", [harnessed(tmp_path, repeat=i) for i in range(2)])


R1 = "caffe2-fp32-w1-b4-s32-r1.json"
IMPOSSIBLE = [
    (lambda d: d.update(images_per_sec=1e8),
     lambda d: "images_per_sec 1e+08 is not global_batch × timed_steps ÷ wall_time_s (4 × 4 ÷ {:.6g} s "
               "= {:.6g}) within 1 %".format(d["wall_time_s"], 16 / d["wall_time_s"])),
    (lambda d: d.update(wall_time_s=-0.01), lambda d: "wall_time_s is -0.01, not from 0 to 1e+09 "
                                                      "(seconds of the timed steps)"),
    (lambda d: d.update(global_batch=-4), lambda d: "global_batch is -4, not from 1 to 2.14748e+09 "
                                                    "(images a step)"),
    (lambda d: d.update(timed_steps=-4), lambda d: "timed_steps is -4, not from 1 to 1e+09 (steps "
                                                   "timed)"),
    (lambda d: d["spec"].update(batch_size=-4), lambda d: "spec: batch_size must be >= 1, got -4"),
    (lambda d: d["spec"].update(planned_steps=0),
     lambda d: "spec.planned_steps is 0, not from 1 to 1e+09 (timed steps planned)"),
    (lambda d: d.update(global_batch=400),
     lambda d: "global_batch 400 is not the spec's batch_size × workers (4 × 1 = 4)"),
    (lambda d: d.update(timed_steps=400), lambda d: "timed_steps 400 is not the spec's steps (4)"),
    (lambda d: d.update(median_images_per_sec=1e8),
     lambda d: "median_images_per_sec 1e+08 is not the median of its windows ({:.6g}) within "
               "1 %".format(statistics.median(d["window_images_per_sec"]))),
    (lambda d: d.update(window_images_per_sec=[1e8, 1e8], median_images_per_sec=1e8),
     lambda d: "its 2 windows take 1.6e-07 s at the images/sec they state, less than a tenth of "
               "wall_time_s ({:.6g} s): no timed region is mostly outside its windows".format(
                   d["wall_time_s"])),
    (lambda d: d.update(window_images_per_sec=[1.0, 1.0], median_images_per_sec=1.0),
     lambda d: "its 2 windows take 16 s at the images/sec they state, longer than wall_time_s "
               "({:.6g} s) that holds them".format(d["wall_time_s"])),
    (lambda d: d.update(window_images_per_sec=[d["images_per_sec"]] * 3),
     lambda d: "3 windows, not the 2 its spec times (4 steps in 2 windows)"),
]


# change(data) edits repeat 1's result; why(data) is the reason the loader must give, from the
# figures as the harness wrote them
@pytest.mark.parametrize("change,why", IMPOSSIBLE, ids=[
    "ips-1e8", "wall-negative", "batch-negative", "steps-negative", "spec-batch-negative",
    "spec-planned-steps-zero",
    "global-batch-not-the-spec's", "steps-not-the-spec's", "median-not-the-windows'",
    "windows-too-fast", "windows-too-slow", "window-count"])
def test_a_figure_the_run_cannot_have_measured_is_skipped_with_the_reason(tmp_path, capsys, change,
                                                                          why):
    root = _harnessed_campaign(tmp_path)
    code, out, err = main_exit(["report", str(root)], capsys)
    assert (code, "skipped" in err) == (0, False), err  # the harness's own results pass
    data = json.loads((root / "results" / R1).read_text())
    expected = why(data)  # from the figures as written
    _spoil(root, lambda d: change(d) and None, R1)
    code, out, err = main_exit(["report", str(root)], capsys)
    assert code == 0, err
    assert "compare: warning: skipped corrupt result {}: {}\n".format(R1, expected) in err
    assert "## Result files left out\n\n- skipped corrupt result {}: ".format(R1) in out
    assert "100000000" not in out and "1e+08" not in out.replace(expected, "")


@pytest.mark.parametrize("change,why", [
    (lambda a: a.update(best="high"), "accuracy.best is 'high', not a number from -1e12 to 1e12"),
    (lambda a: a.update(run_stop_ms=[1]), "accuracy.run_stop_ms is [1], not a number from -1e14 to 1e14"),
    (lambda a: a.update(evals="many"), "accuracy.evals is 'many', not a list of objects"),
    (lambda a: a["evals"][0].update(accuracy="0.3"), "accuracy.evals[0].accuracy is '0.3', not a number "
                                                      "from -1e12 to 1e12"),
], ids=["best-text", "stop-list", "evals-text", "eval-accuracy-text"])
def test_what_the_time_to_accuracy_tables_read_is_checked_too(tmp_path, capsys, change, why):
    from tests.test_mlperf_report import _result
    runs = [_result("caffe2", 1, r, m, 10000.0) for r, m in enumerate([1.0, 1.2])]
    root = save_campaign(tmp_path / "c", runs)
    name = runs[1].run_id + ".json"
    _spoil(root, lambda d: change(d["accuracy"]), name)
    code, out, err = main_exit(["report", str(root)], capsys)
    assert code == 0, err
    assert "compare: warning: skipped corrupt result {}: {}\n".format(name, why) in err


def test_a_run_of_two_workers_may_wait_at_its_closing_barrier_outside_its_windows(tmp_path):
    """On busy cores the closing barrier of a tiny two-worker CPU run took longer than its windows
    (tests/backends/test_data_pipelines.py once: a 4 ms window): up to a second outside the
    windows is a barrier's wait; a second and more, or one worker, is not."""
    one = harnessed(tmp_path)
    inside = sum(one.global_batch * n / w for n, w in zip(window_sizes(4, 2), one.window_images_per_sec))

    def with_wall(r, wall):  # the same windows in a longer timed region, its figure redone
        return replace(r, wall_time_s=wall, images_per_sec=r.global_batch * 4 / wall)
    two = harnessed(tmp_path, gpus=2)
    assert validate.result(with_wall(two, inside * 20)).world_size == 2  # 5 % inside: accepted
    with pytest.raises(SchemaError, match="less than a tenth of wall_time_s"):
        validate.result(with_wall(two, inside + 1.5))  # 1.5 s outside: no barrier waits so long
    with pytest.raises(SchemaError, match="less than a tenth of wall_time_s"):
        validate.result(with_wall(one, inside * 20))  # one worker waits for no one


def test_a_time_to_accuracy_run_that_did_not_converge_keeps_its_training_rate(tmp_path, capsys):
    """not_converged is a finished run (it trained to its last epoch) and the harness records the
    rate it trained at: its result is read, not skipped as a failed run with a figure (the soak's
    time-to-accuracy case found it recorded `failed: unreadable result file`)."""
    from tests.test_mlperf_report import _result
    runs = [_result("caffe2", 1, 0, 1.0, 10000.0), _result("caffe2", 1, 1, 2.0, 9000.0,
                                                            status="not_converged", epochs=8)]
    root = save_campaign(tmp_path / "c", runs)
    code, out, err = main_exit(["report", str(root)], capsys)
    assert code == 0 and "skipped" not in err, err
    assert validate.result(runs[1]).run_id == runs[1].run_id
    with pytest.raises(SchemaError, match="status failed with images_per_sec 9000"):
        validate.result(replace(runs[1], status="failed"))
