"""The formulas, checked against the numbers the source studies published."""
import csv

import pytest

from compare.reporting import metrics
from tests.helpers import ROOT

REFERENCES = ROOT / "compare" / "references"


def test_a6000_resnet50_fp16_b256_speedups():
    # tf_cnn_benchmarks, 1/2/4/8x A6000: 1220.76 | 2382.99 (1.952) | 4634.09 (3.796) | 8816.47 (7.222)
    assert round(metrics.ratio(2382.99, 1220.76), 3) == 1.952
    s4 = metrics.ratio(4634.09, 1220.76)
    assert round(s4, 3) == 3.796
    assert round(metrics.scaling_efficiency(s4, 4), 3) == 0.949
    assert round(metrics.ratio(8816.47, 1220.76), 3) == 7.222


def test_not_comparable_is_none_not_a_division():
    assert metrics.ratio(100.0, None) is None
    assert metrics.scaling_efficiency(None, 2) is None


def test_window_statistics():
    from backends.contract import jitter, median, uncertainty
    xs = [100.0, 102.0, 98.0, 101.0, 99.0]
    assert median(xs) == 100.0
    assert uncertainty(xs) == pytest.approx(1.5811388 / 5 ** 0.5)
    assert jitter(xs) == pytest.approx(1.4826 * 1.0)


def test_every_published_a6000_speedup_is_reproduced():
    rows = list(csv.DictReader(open(REFERENCES / "a6000_tf_cnn_benchmarks.csv")))
    assert rows, "seed table is empty"
    base = {(r["model"], r["precision"], r["batch_size"]): float(r["images_per_sec"])
            for r in rows if r["gpus"] == "1"}
    checked = 0
    for r in rows:
        if r["gpus"] != "1" and r.get("speedup_published"):
            ours = metrics.ratio(float(r["images_per_sec"]),
                                 base[(r["model"], r["precision"], r["batch_size"])])
            assert abs(ours - float(r["speedup_published"])) <= 0.0015, r
            checked += 1
    assert checked > 100


def test_repeat_statistics_of_known_runs():
    runs = [1250.0, 1290.0, 1300.0, 1330.0, 1400.0]
    assert metrics.spread(runs) == pytest.approx(150.0 / 1300.0)
    assert metrics.coefficient_of_variation([9.0, 10.0, 11.0]) == pytest.approx(0.1)
    assert metrics.spread([5.0]) is None and metrics.coefficient_of_variation([5.0]) is None


def test_mlperf_mean_drops_the_fastest_and_the_slowest():
    assert metrics.mlperf_mean([100.0, 1.0, 10.0, 11.0, 12.0]) == pytest.approx(11.0)
    assert metrics.mlperf_mean([1.0, 2.0, 3.0, 4.0, 5.0, 600.0]) == pytest.approx(3.5)
    assert metrics.mlperf_mean([1.0, 2.0, 3.0, 4.0]) is None  # the rule needs 5 runs


def test_ratio_and_images_per_watt():
    # MLPerf v0.5 ResNet-50: V100 3.6x faster than T4
    assert metrics.ratio(360.0, 100.0) == pytest.approx(3.6)
    assert metrics.ratio(1.0, None) is None and metrics.ratio(1.0, 0.0) is None
    assert metrics.images_per_watt(1220.76, 300.0) == pytest.approx(4.0692)
    assert metrics.images_per_watt(1220.76, None) is None  # no NVML: null, not zero


# --- intervals: the uncertainty of a cell and of a ratio (compare/reporting/intervals.py) -----------

def test_t_quantiles():
    from compare.reporting.intervals import t975
    assert t975(1) == 12.706 and t975(4) == 2.776 and t975(4.9) == 2.776  # fractional dof: round down
    assert t975(60) == pytest.approx(2.000, abs=1e-3) and t975(None) == pytest.approx(1.96, abs=1e-3)


def test_cell_estimate_from_windows_and_from_repeats():
    from compare.reporting import intervals
    one = intervals.cell([100.0], [[98.0, 100.0, 102.0]])
    assert one.rel_se == pytest.approx(2.0 / 3 ** 0.5 / 100.0) and one.dof == 2
    assert one.half_width() == pytest.approx(4.303 * 2.0 / 3 ** 0.5)
    assert intervals.cell([100.0], [[100.0]]).rel_se is None  # one run, one window: unknown
    # repeats that disagree more than their windows: the spread of the repeats decides
    three = intervals.cell([90.0, 100.0, 110.0], [[89.9, 90.1], [99.9, 100.1], [109.9, 110.1]])
    assert three.value == 100.0 and three.dof == 2
    assert three.rel_se == pytest.approx(10.0 / 3 ** 0.5 / 100.0 * (3.141592653589793 / 2) ** 0.5)


def test_ratio_interval_and_states():
    from compare.reporting import intervals
    a, b = intervals.Estimate(200.0, 0.01, None), intervals.Estimate(100.0, 0.01, None)
    r = intervals.ratio(a, b)
    assert r.value == 2.0 and r.rel_se == pytest.approx(2 ** 0.5 * 0.01)
    assert r.half_width() == pytest.approx(1.959964 * 2 ** 0.5 * 0.01 * 2.0)
    assert intervals.state(1.05, 0.04) == "better" and intervals.state(0.95, 0.04) == "worse"
    assert intervals.state(1.03, 0.04) == "within noise" and intervals.state(1.0, None) == "not comparable"
    assert intervals.state(0.30, 0.05, null=0.0) == "better"  # a precision gain against no gain
    assert intervals.pm(1.952, 0.0021, "{:.3f}") == "1.952 ±0.002" and intervals.pm(1.5, None) == "1.50, one run: no interval"
