"""Phase times: the marks a backend records, and the report's time-to-first-step and duty cycle."""
import time

import pytest

from backends import phases
from compare.reporting import tables
from compare.reporting import timeline as report_phases
from tests.helpers import result


def _marks(t0, **spans):
    """Marks starting at t0, each phase `spans[name]` seconds after the one before."""
    marks, t = {}, t0
    for name in phases.ORDER:
        if name == "batch_searched" and name not in spans:  # only a cell that searched its batch
            continue
        t += spans.get(name, 0.5)
        marks[name] = t
    return marks


def test_launch_time_comes_from_the_executor_and_marks_come_in_order(monkeypatch):
    monkeypatch.setattr(phases, "_marks", {})
    monkeypatch.setenv(phases.LAUNCHED_ENV, "1000.5")
    phases.mark("framework_imported")
    phases.mark("framework_imported")  # the first mark wins
    marks = phases.record()
    assert marks["launched"] == 1000.5
    assert list(marks) == [n for n in phases.ORDER if n in marks]
    assert marks["process_started"] <= marks["framework_imported"] <= time.time()
    with pytest.raises(ValueError, match="unknown phase 'lunch'"):
        phases.mark("lunch")


def test_spans_and_time_to_first_step():
    marks = _marks(100.0, first_step_done=20.0, timed_start=0.0, timed_end=7.0)
    assert report_phases.time_to_first_step(marks) == pytest.approx(0.5 * 4 + 20.0)
    assert report_phases.span(marks, "timed_start", "timed_end") == pytest.approx(7.0)
    assert sum(phases.durations(marks).values()) == pytest.approx(marks["cell_end"] - marks["cell_start"])


def test_duty_cycle_is_timed_work_over_the_cells_wall_time():
    a = result("caffe2", "fp32", 1, 1000.0)
    a.phases = _marks(0.0, first_step_done=60.0, timed_start=0.0, timed_end=7.0, cell_end=1.0)
    b = result("caffe2", "fp16", 1, 6000.0)
    b.phases = _marks(0.0, timed_start=0.0, timed_end=3.0)
    failed = result("caffe2", "bf16", 1, status="failed", reason="x")
    failed.phases = {"cell_start": 0.0, "cell_end": 10.0}
    duty = report_phases.study([a, b, failed])
    wall = (a.phases["cell_end"] - a.phases["cell_start"]) + (b.phases["cell_end"] - b.phases["cell_start"]) + 10.0
    assert duty["timed_s"] == pytest.approx(10.0)
    assert duty["timed_s"] / duty["serial_s"] == pytest.approx(10.0 / wall)
    rows = {r["precision"]: r for r in report_phases.rows([a, b, failed])}
    assert set(rows) == {"fp32", "fp16"}  # a failed cell has no spans to show
    assert rows["fp32"]["first step"] == pytest.approx(60.0)
    text = tables.markdown(report_phases.sections([a, b, failed]))
    assert "| PyTorch (Caffe2) | fp32 | 256 | 1 | 0.5 | 0.5 | 0.5 | 0.5 | 0.5 | 60.0 |" in text
    assert "= {:.1%} of the sweep spent measuring".format(10.0 / wall) in text


def test_results_from_before_phases_were_recorded_give_no_section():
    assert report_phases.sections([result("caffe2", "fp32", 1, 1000.0)]) == []


def test_the_synthetic_and_the_real_data_run_of_a_cell_are_two_rows():
    """--data synthetic,DIR: the same cell on synthetic data and through its input pipeline are
    two cells with their own spans, never one row of their medians, and rows say which is which."""
    synthetic = result("caffe2", "fp32", 1, 1000.0)
    synthetic.phases = _marks(0.0, first_step_done=10.0, timed_start=0.0, timed_end=7.0)
    real = result("caffe2", "fp32", 1, 800.0)
    real.spec = dict(real.spec, data="/d", data_mode="real")
    real.phases = _marks(0.0, first_step_done=30.0, timed_start=0.0, timed_end=9.0)
    rows = report_phases.rows([synthetic, real])
    assert sorted((r["data_mode"], r["first step"]) for r in rows) == [("real", 30.0),
                                                                       ("synthetic", 10.0)]
    text = tables.markdown(report_phases.sections([synthetic, real]))
    assert "| PyTorch (Caffe2) | fp32 | 256 | synthetic | 1 | 0.5 | 0.5 | 0.5 | 0.5 | 0.5 | 10.0 |" in text
    assert "| PyTorch (Caffe2) | fp32 | 256 | real | 1 | 0.5 | 0.5 | 0.5 | 0.5 | 0.5 | 30.0 |" in text


def test_rows_name_their_cell_as_every_table_of_the_report_does():
    """Two image sizes are two rows that say which (an image column, as in the report's other
    tables); two nodes of two GPUs are 2×2, as elsewhere; and a network column where the campaign
    holds two, though the other network's run failed and has no spans to show."""
    from backends.protocol import RunSpec
    small, large = result("caffe2", "fp32", 1, 3000.0), result("caffe2", "fp32", 2, 4000.0)
    small.spec = dict(small.spec, image_size=112)
    large.spec = dict(large.spec, nodes=2)
    failed = result("caffe2", "fp32", 1, status="failed", reason="x")
    spec = RunSpec.from_dict(failed.spec)
    spec.model = "vgg16"
    failed.spec = spec.to_dict()
    plain = result("caffe2", "fp32", 1, 1000.0)
    for r in (plain, small, large):
        r.phases = _marks(0.0, first_step_done=10.0, timed_start=0.0, timed_end=7.0)
    text = tables.markdown(report_phases.sections([plain, small, large, failed]))
    assert "| framework | model | precision | batch | image | N | launch |" in text
    assert "| PyTorch (Caffe2) | resnet50 | fp32 | 256 | 224 | 1 | 0.5 |" in text
    assert "| PyTorch (Caffe2) | resnet50 | fp32 | 256 | 112 | 1 | 0.5 |" in text
    assert "| PyTorch (Caffe2) | resnet50 | fp32 | 256 | 224 | 2×2 | 0.5 |" in text


def test_a_searched_batch_cell_is_one_row_named_auto_as_in_the_report():
    """A cell of --batch-size auto whose repeats chose 256 and 512 is one cell, 'auto', in every
    table; where the time goes had two rows, '256' and '512', that no other table has."""
    runs = []
    for i, chosen in enumerate((256, 512)):
        r = result("caffe2", "fp32", 1, 1000.0, repeat=i, batch=chosen)
        r.spec = dict(r.spec, batch_auto=True)
        r.phases = _marks(0.0, first_step_done=10.0 * (i + 1), timed_start=0.0, timed_end=7.0)
        runs.append(r)
    rows = report_phases.rows(runs)
    assert [(r["batch_size"], r["first step"]) for r in rows] == [("auto", 15.0)]
    assert "| PyTorch (Caffe2) | fp32 | auto | 1 |" in tables.markdown(report_phases.sections(runs))
