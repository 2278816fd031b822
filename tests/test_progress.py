"""The progress bar's phase of a running cell (from its backend's phase file) and the sweep's ETA
(from the plan's estimates)."""
import io

from rich.console import Console

from backends import phases
from backends.protocol import RunSpec
from compare.progress import SweepProgress, phase_of


def _bar(tmp_path, estimates, building=lambda spec: False):
    return SweepProgress(Console(file=io.StringIO()), len(estimates), tmp_path, estimates, 1.0,
                         building)


def test_the_phase_is_the_latest_mark_in_order_whatever_the_order_written(tmp_path):
    path = tmp_path / "phase"
    assert phase_of(path) is None
    # the backend writes its start-up marks (launched, process_started) only with its result
    path.write_text("framework_imported 1.0\ndevices_ready 2.0\nmodel_built 3.0\nprocess_started 0.5\n")
    assert phase_of(path) == "compiling (first step)"
    path.write_text(path.read_text() + "first_step_done 9.0\n")
    assert phase_of(path) == "warm-up"


def test_a_backend_writes_each_mark_as_it_happens(tmp_path, monkeypatch):
    monkeypatch.setattr(phases, "_marks", {})
    monkeypatch.setenv(phases.FILE_ENV, str(tmp_path / "phase"))
    phases.mark("framework_imported")
    phases.mark("framework_imported")  # the first mark wins, once in the file too
    phases.mark("timed_start")
    assert [line.split()[0] for line in (tmp_path / "phase").read_text().splitlines()] == [
        "framework_imported", "timed_start"]
    assert phase_of(tmp_path / "phase") == "timed"


def test_status_says_each_running_cells_phase_and_the_plans_eta(tmp_path, monkeypatch):
    a = RunSpec("caffe2", "caffe2_torch", precision="fp32")
    b = RunSpec("tf", "tf_horovod", precision="fp32")
    bar = _bar(tmp_path, {a.run_id: 100.0, b.run_id: 50.0}, building=lambda s: s.framework == "tf")
    clock = iter([1000.0, 1030.0, 1030.0, 1200.0])
    monkeypatch.setattr("compare.progress.time.monotonic", lambda: next(clock))
    bar.start(a)  # at 1000
    (tmp_path / a.run_id).mkdir()
    (tmp_path / a.run_id / "phase").write_text("framework_imported 1.0\n")
    assert bar.status() == "setting up devices · ETA ~2:00"  # 70 s of a's left + b's 50
    # a finishes; b starts at 1030, its environment still being built; 170 s later it is
    # 120 s past its estimate of 50
    bar.running.pop(a.run_id)
    bar.estimates.pop(a.run_id)
    bar.start(b)
    assert bar.status() == "building env · ETA ~0:00 (running past its estimate by 2:00)"


def test_a_time_to_accuracy_cell_says_it_trains_to_its_target_and_ends_with_its_minutes(tmp_path):
    # its progress said "timed" and its line the img/s of the training epochs, not what it
    # measures: the minutes to the target (docs/accuracy.md)
    from backends.protocol import RunResult
    spec = RunSpec("caffe2", "caffe2_torch", data="/d", target_accuracy=0.9)
    out = io.StringIO()
    bar = SweepProgress(Console(file=out, width=200), 1, tmp_path, {spec.run_id: 60.0})
    bar.start(spec)
    (tmp_path / spec.run_id).mkdir()
    (tmp_path / spec.run_id / "phase").write_text("warmup_done 1.0\ntimed_start 2.0\n")
    assert bar.phase(spec) == "training to top-1 0.9"
    bar.done(RunResult(spec.run_id, "ok", spec.to_dict(), images_per_sec=48.72, accuracy={
        "target": 0.9, "reached": True, "epochs": 4, "epochs_to_target": 4,
        "time_to_train_s": 42.0}))
    assert out.getvalue().splitlines()[-1] == "{:<36} {:>8}  0.70 min to top-1 0.9 (4 epochs)".format(
        spec.run_id, "ok")
    assert bar.last == " | last: 0.70 min to target"
    missed = RunResult(spec.run_id, "not_converged", spec.to_dict(), images_per_sec=40.0,
                       reason="target accuracy 0.9 not reached: best top-1 0.5000 (10 epochs trained)",
                       accuracy={"target": 0.9, "reached": False, "epochs": 10, "time_to_train_s": 99.0})
    bar.done(missed)
    assert out.getvalue().splitlines()[-1].endswith(
        "not_converged  target accuracy 0.9 not reached: best top-1 0.5000 (10 epochs trained)")


def test_a_finished_time_to_accuracy_run_says_its_minutes_to_target_not_only_img_s(tmp_path):
    from backends.protocol import RunResult
    spec = RunSpec("caffe2", "caffe2_torch", precision="fp32", data="/d", target_accuracy=0.9,
                   max_epochs=8)
    bar = SweepProgress(Console(file=io.StringIO(), width=80), 1, tmp_path, {spec.run_id: 60.0})
    bar.start(spec)
    bar.done(RunResult(run_id=spec.run_id, status="ok", spec=spec.to_dict(), images_per_sec=17.2,
                       accuracy={"reached": True, "target": 0.9, "time_to_train_s": 93.0,
                                 "epochs_to_target": 3}))
    line = bar.console.file.getvalue().splitlines()[-1]
    assert line.split(None, 2)[2] == "1.55 min to top-1 0.9 (3 epochs)"
    assert len(line.rstrip()) <= 80  # one line of a terminal's 80 columns
    assert bar.last == " | last: 1.55 min to target"


def test_the_bar_as_it_ends_shows_the_last_figure_and_no_phase_or_eta_of_a_cell_done(tmp_path):
    # it ended "cell 4/4 ... caffe2 bf16 x1 worker b4 | last: <the figure before the last> ...
    # timed · ETA ~0:01": the status read while the last cell ran, and its description set
    # when that cell started
    from backends.protocol import RunResult
    a, b = (RunSpec("caffe2", "caffe2_torch", precision=p) for p in ("fp32", "bf16"))
    out = io.StringIO()
    bar = SweepProgress(Console(file=out, width=200), 2, tmp_path, {a.run_id: 60.0, b.run_id: 60.0})
    with bar:
        for spec, ips in ((a, 11.0), (b, 22.0)):
            bar.start(spec)
            bar.progress.refresh()  # what runs, read while it runs
            bar.done(RunResult(spec.run_id, "ok", spec.to_dict(), images_per_sec=ips))
    last = out.getvalue().splitlines()[-1]
    assert last.startswith("cell 2/2 ") and "last: 22.0 img/s" in last, last
    assert "ETA" not in last and "starting" not in last, last


def test_a_sweep_with_nothing_to_run_draws_no_bar(tmp_path):
    # `--resume` of a finished campaign ended its lines with an empty "cell 0/0 ━━━ 0:00:00"
    out = io.StringIO()
    with SweepProgress(Console(file=out, width=200), 0, tmp_path, {}):
        pass
    assert out.getvalue() == ""


def test_a_failed_cells_line_keeps_the_end_of_its_reason_where_it_says_where_to_look(tmp_path):
    # an environment that failed to build ended "... failed at `/…/bin/python -m pip" (100
    # characters), its "(exit 1); see /…/jax-cpu-….log" cut off
    from backends.protocol import RunResult
    spec = RunSpec("jax", "jax", precision="fp32")
    out = io.StringIO()
    bar = SweepProgress(Console(file=out, width=400), 2, tmp_path, {})
    reason = ("creating the jax environment failed at `/root/.cache/compare/envs/jax-cpu-c60267d24615/"
              "bin/python -m pip install` (exit 1); see /root/.cache/compare/envs/jax-cpu-c60267d24615.log")
    bar.done(RunResult(spec.run_id, "failed", spec.to_dict(), reason=reason + "\nmore"))
    assert out.getvalue().splitlines()[-1] == "{:<36} {:>8}  {}".format(spec.run_id, "failed", reason)
    long = "exited with code 3 and wrote no result: " + "x" * 400 + " | see the log"
    bar.done(RunResult(spec.run_id, "failed", spec.to_dict(), reason=long))
    line = out.getvalue().splitlines()[-1]
    assert line.endswith(" … " + long[-97:]) and len(line.split("  ", 1)[1].strip()) <= 240, line


def test_a_cell_of_several_nodes_names_them_in_its_progress(tmp_path):
    # a 2-node Slurm cell read "caffe2 fp32 x1 worker b32", as a 1-node one does
    out = io.StringIO()
    one, two = RunSpec("caffe2", "caffe2_torch", device="cpu"), RunSpec(
        "caffe2", "caffe2_torch", device="cpu", nodes=2)
    bar = SweepProgress(Console(file=out, width=200), 2, tmp_path, {})
    bar.start(two)
    assert bar.what == "caffe2 fp32 2 nodes x1 worker b32"
    bar.start(one)
    assert bar.what == "caffe2 fp32 x1 worker b32"
