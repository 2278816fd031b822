"""The comparator and the Markdown/CSV/JSON reports for a fixed set of results (no training)."""
import json
from pathlib import Path

import pandas as pd
import pytest

from compare.reporting import report
from tests.helpers import A6000, MACHINE, fixed_results, result

GOLDEN = Path(__file__).resolve().parent / "golden" / "report_fixed.md"


@pytest.fixture(scope="module")
def df():
    return report.cells(fixed_results())


def _cell(df, framework, precision, gpus):
    rows = df[(df.framework == framework) & (df.precision == precision) & (df.gpus == gpus)]
    assert len(rows) == 1
    return rows.iloc[0]


def test_markdown_matches_the_golden_file(df):
    assert report.markdown(df, MACHINE) == GOLDEN.read_text()


def test_seed_row_reads_as_published(df):
    # 1220.76 | 2382.99 (1.952) | 4634.09 (3.796) | 8816.47 (7.222)
    assert "| TensorFlow (+Horovod) | fp16 | 256 | 224 | 1220.76 | 2382.99 (1.952) | 4634.09 (3.796) " \
           "| 8816.47 (7.222) |" in report.markdown(df)


def test_repeats_median_spread_cv_and_mlperf_mean(df):
    c = _cell(df, "caffe2", "fp16", 1)
    assert c.repeats == 5 and c.images_per_sec == 1300.0
    assert (c.ips_min, c.ips_max) == (1250.0, 1400.0)
    assert c.spread == pytest.approx(150.0 / 1300.0)
    assert c.mlperf_mean == pytest.approx((1290.0 + 1300.0 + 1330.0) / 3)
    assert c.cv == pytest.approx(0.0427, abs=5e-4)
    single = _cell(df, "tf", "fp16", 1)
    assert single.spread is None and single.cv is None and single.mlperf_mean is None


def test_window_statistics_and_telemetry_are_in_the_json_records(df, tmp_path):
    report.write(df, tmp_path, ["json", "csv"], MACHINE, fixed_results())
    records = json.loads((tmp_path / "report.json").read_text())
    tf8 = next(r for r in records if (r["framework"], r["precision"], r["gpus"]) == ("tf", "fp16", 8))
    assert (tf8["uncertainty"], tf8["jitter"]) == (0.5, 1.0)
    assert tf8["power_avg_w"] == 2320.0
    assert tf8["images_per_watt"] == pytest.approx(8816.47 / 2320.0)
    no_power = next(r for r in records if (r["framework"], r["precision"], r["gpus"]) == ("caffe2", "fp32", 1))
    assert no_power["power_avg_w"] is None and no_power["images_per_watt"] is None
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert len(runs) == len(fixed_results())  # every repeat, not just the cell medians
    assert sorted(runs[runs.framework == "caffe2"].images_per_sec.dropna())[:2] == [560.0, 1250.0]
    assert {"uncertainty", "jitter", "power_avg_w", "framework_version"} <= set(runs.columns)


def test_framework_ratio_at_equal_settings(df):
    assert _cell(df, "caffe2", "fp16", 2).framework_ratio == pytest.approx(2450.0 / 2382.99)
    assert _cell(df, "caffe2", "fp32", 2).framework_ratio is None  # oom: not divided
    assert _cell(df, "tf", "fp32", 4).framework_ratio == 1.0
    other = report.cells(fixed_results(), baseline="caffe2")
    assert _cell(other, "tf", "fp32", 1).framework_ratio == pytest.approx(520.85 / 560.0)


def test_speedup_efficiency_and_gain(df):
    c = _cell(df, "tf", "fp32", 8)
    assert round(c.speedup, 3) == 7.642 and round(c.scaling_efficiency, 3) == 0.955
    gain = _cell(df, "tf", "fp16", 1).precision_gain
    assert gain == pytest.approx(A6000["fp16"][1] / A6000["fp32"][1] - 1)


def test_runs_on_different_devices_in_one_campaign_are_flagged():
    mixed = [result("tf", "fp32", 1, 500.0), result("tf", "fp32", 2, 900.0, device_name="Tesla T4")]
    text = report.markdown(report.cells(mixed))
    assert "**Warning: this campaign holds cuda runs on different devices: NVIDIA RTX A6000, " \
           "Tesla T4." in text
