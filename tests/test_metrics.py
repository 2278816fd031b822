"""The formulas, checked against the numbers the source studies published."""
import csv
from pathlib import Path

import pytest

from compare.reporting import metrics

REFERENCES = Path(__file__).resolve().parent.parent / "compare" / "references"


def test_a6000_resnet50_fp16_b256_speedups():
    # tf_cnn_benchmarks, 1/2/4/8x A6000: 1220.76 | 2382.99 (1.952) | 4634.09 (3.796) | 8816.47 (7.222)
    assert round(metrics.speedup(2382.99, 1220.76), 3) == 1.952
    s4 = metrics.speedup(4634.09, 1220.76)
    assert round(s4, 3) == 3.796
    assert round(metrics.scaling_efficiency(s4, 4), 3) == 0.949
    assert round(metrics.speedup(8816.47, 1220.76), 3) == 7.222


def test_precision_gain_reads_as_percent_faster():
    assert metrics.precision_gain(1.85, 1.0) == pytest.approx(0.85)
    assert metrics.precision_gain(None, 1.0) is None
    assert metrics.precision_gain(2.0, 0.0) is None


def test_not_comparable_is_none_not_a_division():
    assert metrics.speedup(100.0, None) is None
    assert metrics.scaling_efficiency(None, 2) is None


def test_window_statistics():
    xs = [100.0, 102.0, 98.0, 101.0, 99.0]
    assert metrics.median(xs) == 100.0
    assert metrics.uncertainty(xs) == pytest.approx(1.5811388 / 5 ** 0.5)
    assert metrics.jitter(xs) == pytest.approx(1.4826 * 1.0)


def test_every_published_a6000_speedup_is_reproduced():
    rows = list(csv.DictReader(open(REFERENCES / "a6000_tf_cnn_benchmarks.csv")))
    assert rows, "seed table is empty"
    base = {(r["model"], r["precision"], r["batch_size"]): float(r["images_per_sec"])
            for r in rows if r["gpus"] == "1"}
    checked = 0
    for r in rows:
        if r["gpus"] != "1" and r.get("speedup_published"):
            ours = metrics.speedup(float(r["images_per_sec"]),
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
