"""The comparator and the Markdown/CSV/JSON reports for a fixed set of results (no training)."""
import json
from pathlib import Path

import pandas as pd
import pytest

from compare.reporting import comparator, report, tables, write_files
from tests.helpers import A6000, MACHINE, fixed_results, result, windowed

GOLDEN = Path(__file__).resolve().parent / "golden" / "report_fixed.md"


@pytest.fixture(scope="module")
def df():
    return comparator.cells(fixed_results())


def _markdown(df, machine=None):
    return tables.markdown(report.build(df, machine).sections())


def _cell(df, framework, precision, gpus):
    rows = df[(df.framework == framework) & (df.precision == precision) & (df.gpus == gpus)]
    assert len(rows) == 1
    return rows.iloc[0]


def test_markdown_matches_the_golden_file(df):
    assert _markdown(df, MACHINE) == GOLDEN.read_text()


def test_seed_row_reads_as_published(df):
    # 1220.76 | 2382.99 (1.952) | 4634.09 (3.796) | 8816.47 (7.222); ± from the recorded std/sqrt(n)
    assert "| TensorFlow (+Horovod) | fp16 | 256 | 224 | 1220.76 | 2382.99 (1.952 ±0.002) | " \
           "4634.09 (3.796 ±0.003) | 8816.47 (7.222 ±0.006) |" in _markdown(df)


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
    write_files(df, tmp_path, ["json", "csv"], MACHINE, fixed_results())
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
    other = comparator.cells(fixed_results(), baseline="caffe2")
    assert _cell(other, "tf", "fp32", 1).framework_ratio == pytest.approx(520.85 / 560.0)


def test_speedup_efficiency_and_gain(df):
    c = _cell(df, "tf", "fp32", 8)
    assert round(c.speedup, 3) == 7.642 and round(c.scaling_efficiency, 3) == 0.955
    gain = _cell(df, "tf", "fp16", 1).precision_gain
    assert gain == pytest.approx(A6000["fp16"][1] / A6000["fp32"][1] - 1)


def test_runs_on_different_devices_in_one_campaign_are_flagged():
    mixed = [result("tf", "fp32", 1, 500.0), result("tf", "fp32", 2, 900.0, device_name="Tesla T4")]
    text = _markdown(comparator.cells(mixed))
    assert "**Warning: this campaign holds cuda runs on different devices: NVIDIA RTX A6000, " \
           "Tesla T4. Compare them only knowingly.**" in text


def test_every_ratio_carries_its_propagated_interval(df):
    c = _cell(df, "tf", "fp16", 8)
    # fixture results carry no windows: their recorded std/sqrt(n) (0.5 img/s), normal quantile
    u = ((0.5 / 8816.47) ** 2 + (0.5 / 1220.76) ** 2) ** 0.5
    assert c.speedup_ci95 == pytest.approx(1.959964 * u * 8816.47 / 1220.76)
    assert c.scaling_efficiency_ci95 == pytest.approx(c.speedup_ci95 / 8)
    one = _cell(df, "tf", "fp16", 1)
    assert (one.speedup, one.speedup_ci95) == (1.0, 0.0)  # the 1-GPU cell against itself
    repeated = _cell(df, "caffe2", "fp16", 1)  # 5 repeats: their spread, not the windows, decides
    runs = [1250.0, 1290.0, 1300.0, 1330.0, 1400.0]
    se = pd.Series(runs).std() / 5 ** 0.5 / pd.Series(runs).mean() * (3.141592653589793 / 2) ** 0.5
    assert repeated.images_per_sec_ci95 == pytest.approx(2.776 * se * 1300.0)


def _nodes_results():
    # one node x 1 GPU, one node x 4 GPUs, two nodes x 4 GPUs; tight windows
    return [windowed("tf", "fp32", 1, [99.0, 100.0, 101.0]),
            windowed("tf", "fp32", 4, [379.0, 380.0, 381.0]),
            windowed("tf", "fp32", 4, [719.0, 720.0, 721.0], nodes=2)]


def test_nodes_columns_speedups_and_efficiency_per_gpu():
    cells = comparator.cells(_nodes_results())
    two = cells[cells.nodes == 2].iloc[0]
    assert two.world_size == 8
    assert two.speedup == pytest.approx(7.2)  # versus the 1-GPU cell of the row
    assert two.speedup_one_node == pytest.approx(720.0 / 380.0)  # versus 1 node x 4 GPUs
    assert two.scaling_efficiency == pytest.approx(0.9)  # per GPU of the whole job
    assert cells[cells.nodes == 1].speedup_one_node.tolist() == [None, None]
    text = _markdown(cells)
    assert "| framework | precision | batch | image | 1 node × 1 GPU | 1 node × 4 GPUs | 2 nodes × 4 GPUs |" in text
    # 3 windows, std 1: u = 0.577 % and 0.152 %; Welch dof 2.3 -> t(2) = 4.303; 4.303 x 0.597 % x 3.8
    assert "| TensorFlow (+Horovod) | fp32 | 256 | 224 | 100.00 | 380.00 (3.800 ±0.098) | 720.00 (7.200 ±0.181) |" in text
    assert "## Speedup vs one node (img/s ÷ img/s of 1 node, same GPUs per node)" in text
    assert "| TensorFlow (+Horovod) | fp32 | 256 | 224 | 1.895 ±0.010 |" in text
    assert "| TensorFlow (+Horovod) | fp32 | 256 | 224 | 0.950 ±0.024 | 0.900 ±0.023 |" in text
    assert "on 2 nodes × 4 GPUs is 7.20× as fast as on one GPU (±0.18): 90% scaling efficiency." in text


def test_one_node_everywhere_keeps_the_plain_gpu_labels(df):
    assert "| framework | precision | batch | image | 1 GPU | 2 GPUs | 4 GPUs | 8 GPUs |" in _markdown(df)
    assert "Speedup vs one node" not in _markdown(df)


def test_layout_is_recorded_and_shown_where_it_varies(tmp_path):
    runs = [windowed("tf", "fp32", 1, [99.0, 101.0], layout="NHWC"),
            windowed("caffe2", "fp32", 1, [89.0, 91.0], layout="NCHW")]
    write_files(comparator.cells(runs), tmp_path, ["json", "csv", "md"], MACHINE, runs)
    records = json.loads((tmp_path / "report.json").read_text())
    assert [(r["framework"], r["layout"]) for r in records] == [("tf", "NHWC"), ("caffe2", "NCHW")]
    assert pd.read_csv(tmp_path / "report.csv").layout.tolist() == ["NHWC", "NCHW"]
    text = (tmp_path / "report.md").read_text()
    assert "| framework | precision | batch | image | layout | 1 GPU |" in text
    assert "| PyTorch (Caffe2) | fp32 | 256 | 224 | NCHW | 90.00 |" in text
    same = _markdown(comparator.cells(runs[:1]))
    assert "| layout |" not in same and "Layout: NHWC in every cell." in same


def test_each_table_is_also_written_as_shown_to_csv(df, tmp_path):
    _, paths = write_files(df, tmp_path, ["csv"], MACHINE, fixed_results())
    assert tmp_path / "tables" in paths
    shown = pd.read_csv(tmp_path / "tables" / "images_sec.csv", dtype=str)
    assert list(shown.columns) == ["framework", "precision", "batch", "image", "1 GPU", "2 GPUs",
                                   "4 GPUs", "8 GPUs"]
    assert shown.iloc[0]["2 GPUs"] == "2382.99 (1.952 ±0.002)"
    failed = pd.read_csv(tmp_path / "tables" / "cells_without_a_figure.csv")
    assert failed.status.tolist() == ["oom", "failed"]


def test_a_baseline_the_campaign_never_ran_is_one_line_and_exit_2(tmp_path, capsys):
    from tests.helpers import main_exit, save_campaign
    root = save_campaign(tmp_path / "c", [result("tf", "fp32", 1, 500.0), result("caffe2", "fp32", 1, 560.0)])
    code, out, err = main_exit(["report", str(root), "--baseline", "mxnet"], capsys)
    assert (code, out, err) == (2, "", "compare: error: --baseline mxnet: no cell of the campaign ran "
                                       "it; choose from tf, caffe2\n")
    code, out, _ = main_exit(["report", str(root), "--baseline", "pytorch"], capsys)
    assert code == 0 and "Framework vs framework (img/s ÷ img/s of PyTorch (Caffe2)" in out


def test_a_report_of_no_results_names_only_the_files_it_wrote(tmp_path, capsys):
    # a campaign whose cells have not run: no table to write, so no tables/ folder to announce
    import shutil

    from tests.helpers import main_exit
    from tests.reporting.test_golden_campaign import FIXTURE
    root = tmp_path / "c"
    shutil.copytree(FIXTURE / "campaign", root)
    for p in (root / "results").glob("*.json"):
        p.unlink()
    code, _, err = main_exit(["report", str(root), "--format", "csv", "--out", str(tmp_path / "o")], capsys)
    assert (code, err) == (0, "compare: wrote {}\n".format(tmp_path / "o" / "report.csv"))


def test_one_planned_cell_without_a_result_is_said_in_the_singular(tmp_path, capsys):
    """'1 of the campaign's 2 planned cells has no result: … runs it', as `compare check` says it."""
    from tests.helpers import main_exit, save_campaign
    root = save_campaign(tmp_path / "c", [result("caffe2", "fp32", 1, 100.0),
                                          result("caffe2", "fp16", 1, 200.0)])
    (root / "results" / "caffe2-fp16-g1-b256-s224-r0.json").unlink()
    code, out, err = main_exit(["report", str(root)], capsys)
    assert code == 0, err
    assert "1 of the campaign's 2 planned cells has no result: caffe2-fp16-g1-b256-s224-r0. " \
        "`compare run … --resume` runs it." in out


def test_planned_runs_of_repeated_cells_without_a_result_are_counted_as_runs_of_cells(tmp_path, capsys):
    """Where cells repeat, the line counts runs of cells, as the plan and the progress do (it said
    "2 of the campaign's 2 planned cells have no result: x-r0, x-r1": two runs of one cell)."""
    from tests.helpers import main_exit, save_campaign
    root = save_campaign(tmp_path / "c", [result("caffe2", "fp32", 1, 100.0, repeat=i) for i in (0, 1)]
                         + [result("caffe2", "fp16", 1, 200.0, repeat=i) for i in (0, 1)])
    for i in (0, 1):
        (root / "results" / "caffe2-fp16-g1-b256-s224-r{}.json".format(i)).unlink()
    code, out, err = main_exit(["report", str(root)], capsys)
    assert code == 0, err
    assert "2 of the campaign's 4 planned runs of 2 cells have no result: caffe2-fp16-g1-b256-s224-r0, " \
        "caffe2-fp16-g1-b256-s224-r1. `compare run … --resume` runs them." in out


def test_the_probes_of_two_image_sizes_say_which_they_searched():
    """Batch searches of one setting at image sizes 224 and 112 are two searches: each probe row
    says its image size (the table named none: two searches read as one with each batch twice)."""
    from backends.protocol import RunResult, RunSpec
    from compare.reporting import probes

    def probe(image, batch, ips):
        spec = RunSpec("caffe2", "caffe2_torch", device="cuda", precision="fp32", batch_size=batch,
                       image_size=image, probe=True, batch_auto=True)
        return RunResult(spec.run_id, "ok", spec.to_dict(), images_per_sec=ips)
    table = probes.table([probe(224, 256, 900.0), probe(112, 256, 2500.0)], [])
    assert table.header[:6] == ["framework", "mode", "precision", "image", "N", "batch"]
    assert [row[:6] for row in table.rows] == [["PyTorch (Caffe2)", "default", "fp32", "112", "1", "256"],
                                               ["PyTorch (Caffe2)", "default", "fp32", "224", "1", "256"]]


def test_the_repeats_table_counts_the_runs_as_the_other_tables_do():
    """A cell of 3 runs, one failed: its figure rests on 2, and the Repeats table says '2 of 3'
    under runs, as the images table ('(2 of 3 runs)') and the failed runs' table do (it said 2)."""
    runs = [windowed("caffe2", "fp32", 1, [990.0 + i, 1000.0 + i, 1010.0 + i], repeat=i) for i in range(2)]
    runs.append(result("caffe2", "fp32", 1, status="failed", reason="killed", repeat=2))
    text = tables.markdown(report.build(comparator.cells(runs)).sections())
    repeats = text.split("## Repeats")[1].split("##")[0]
    assert "| PyTorch (Caffe2) | fp32 | 256 | 224 | 1 | 2 of 3 | 1000.50 ±" in repeats
    assert "1000.50 (2 of 3 runs)" in text


def test_energy_of_a_job_on_two_nodes_counts_the_power_of_both():
    """Rank 0 samples the GPUs of its own node (backends/telemetry.py): on 2 nodes × 2 GPUs its
    1000 W are half the job's. img/s per W divides the job's img/s by the job's power, 4000 ÷
    2000 = 2.00, not by one node's (4.00: twice as efficient as the same GPUs on one node)."""
    one = result("caffe2", "fp32", 2, 2000.0, watts=1000.0)
    two = result("caffe2", "fp32", 2, 4000.0, watts=1000.0)
    two.spec = dict(two.spec, nodes=2)
    two.run_id = "caffe2-fp32-n2-g2-b256-s224-r0"
    df = comparator.cells([one, two])
    assert sorted(df.images_per_watt) == [pytest.approx(2.0), pytest.approx(2.0)]
    text = tables.markdown(report.build(df).sections())
    energy = text.split("## Energy")[1].split("##")[0]
    assert "| 2.00 (1000 W) | 2.00 (2000 W) |" in energy
    assert "measured on the first node's GPUs" in energy


def test_report_csv_power_is_the_whole_jobs_on_two_nodes(tmp_path):
    """report.csv, report.json and runs.csv say the power of the whole cell (both nodes: rank 0's
    1000 W counted once per node), the figure the Energy table shows and img/s per W divides by:
    a reader dividing images_per_sec by power_avg_w gets images_per_watt on every row."""
    one = result("caffe2", "fp32", 2, 2000.0, watts=1000.0)
    two = result("caffe2", "fp32", 2, 4000.0, watts=1000.0)
    two.spec = dict(two.spec, nodes=2)
    two.run_id = "caffe2-fp32-n2-g2-b256-s224-r0"
    df = comparator.cells([one, two])
    write_files(df, tmp_path, ["csv", "json"], None, [one, two])
    cells = pd.read_csv(tmp_path / "report.csv")
    assert list(zip(cells.nodes, cells.power_avg_w)) == [(1, 1000.0), (2, 2000.0)]
    assert list(cells.images_per_sec / cells.power_avg_w) == list(cells.images_per_watt)
    assert [r["power_avg_w"] for r in json.loads((tmp_path / "report.json").read_text())] == [
        1000.0, 2000.0]
    assert list(pd.read_csv(tmp_path / "runs.csv").power_avg_w) == [1000.0, 2000.0]


def test_a_figure_of_one_run_says_it_has_no_interval_in_words_in_every_format(tmp_path):
    """One run of one timed window per cell: the speedup has no interval, and the report said
    '1.900 ±?'. Markdown, HTML and the table's CSV say 'one run: no interval' instead; so does a
    time to accuracy of one seed."""
    from tests.test_mlperf_report import _result
    runs = [windowed("caffe2", "fp32", 1, [1000.0]), windowed("caffe2", "fp32", 2, [1900.0])]
    trained = [_result("jax", 1, 0, 1.0, 9000)]
    df = comparator.cells(runs)
    from compare.reporting import accuracy
    text, _ = write_files(df, tmp_path, ["md", "csv", "html"], None, runs,
                          extra=accuracy.tables(trained), trained=trained)
    assert "| 1000.00 | 1900.00 (1.900, one run: no interval) |" in text
    assert "| 1/1 | 1.00, one run: no interval |" in text
    assert "±?" not in text and "±?" not in (tmp_path / "report.html").read_text()
    assert "1900.00 (1.900, one run: no interval)" in (tmp_path / "report.html").read_text()
    assert "1900.00 (1.900, one run: no interval)" in (tmp_path / "tables" / "images_sec.csv").read_text()


def test_a_report_written_again_leaves_no_table_of_the_one_before(tmp_path, capsys):
    # a cell that timed out, run again by --resume: tables/cells_without_a_figure.csv of the
    # earlier report must not outlive it (report.md no longer has that table)
    from tests.helpers import main_exit, save_campaign
    root = save_campaign(tmp_path / "c", [result("caffe2", "fp32", 1, 100.0),
                                          result("caffe2", "fp16", 1, status="timeout",
                                                 reason="killed after the 2 s timeout")])
    tables_dir = root / "report" / "tables"
    code, out, err = main_exit(["report", str(root), "--format", "md,csv"], capsys)
    assert code == 0, err
    assert (tables_dir / "cells_without_a_figure.csv").is_file()
    from compare.store import Campaign
    Campaign.open(root).save_result(result("caffe2", "fp16", 1, 190.0))  # the resumed run
    code, out, err = main_exit(["report", str(root), "--format", "md,csv"], capsys)
    assert code == 0, err
    assert "Cells without a figure" not in out
    assert sorted(p.name for p in tables_dir.iterdir()) == [
        "images_sec.csv", "precision_gain_over_fp32.csv"]
    # files of the user's own beside them are left alone: only stale tables go
    (tables_dir / "notes.txt").write_text("mine\n")
    main_exit(["report", str(root), "--format", "csv"], capsys)
    assert (tables_dir / "notes.txt").read_text() == "mine\n"
    # all results gone (deleted by hand): no runs.csv or table of runs that are not there
    for p in (root / "results").glob("*.json"):
        p.unlink()
    code, _, err = main_exit(["report", str(root), "--format", "csv"], capsys)
    assert code == 0, err
    assert not (root / "report" / "runs.csv").exists()
    assert sorted(p.name for p in tables_dir.iterdir()) == ["notes.txt"]


def test_a_report_into_an_out_of_another_campaigns_leaves_no_accuracy_json_of_it(tmp_path, capsys):
    # accuracy.json (time-to-accuracy runs) of campaign A stayed beside campaign B's report.json
    from tests.helpers import main_exit, save_campaign
    from tests.test_mlperf_report import _result
    a = save_campaign(tmp_path / "a", [_result("caffe2", 1, r, m, 100) for r, m in enumerate([1.0, 1.2])])
    b = save_campaign(tmp_path / "b", [result("caffe2", "fp32", 1, 100.0)])
    out = tmp_path / "out"
    code, _, err = main_exit(["report", str(a), "--format", "json", "--out", str(out)], capsys)
    assert code == 0, err
    assert (out / "accuracy.json").is_file()
    code, _, err = main_exit(["report", str(b), "--format", "json", "--out", str(out)], capsys)
    assert (code, err) == (0, "compare: wrote {}\n".format(out / "report.json"))
    assert sorted(p.name for p in out.iterdir()) == ["report.json"]


def test_a_tables_link_or_file_in_a_report_folder_is_left_alone_when_nothing_goes_there(tmp_path, capsys):
    # the stale tables are removed only from a folder of ours: a link named tables (or a file) is
    # not followed, and a report with no table to write does not fail on it
    from tests.helpers import main_exit, save_campaign
    root = save_campaign(tmp_path / "c", [result("caffe2", "fp32", 1, 100.0)])
    (root / "results" / "caffe2-fp32-g1-b256-s224-r0.json").unlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.csv").write_text("x\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "tables").symlink_to(elsewhere)
    code, _, err = main_exit(["report", str(root), "--format", "csv", "--out", str(out)], capsys)
    assert (code, err) == (0, "compare: wrote {}\n".format(out / "report.csv"))
    assert (elsewhere / "keep.csv").read_text() == "x\n"


def test_a_campaign_without_a_machine_record_says_so_where_the_machine_line_would_be(tmp_path, capsys):
    # machine.json deleted or emptied by hand: the report dropped its Machine line unsaid, where
    # `compare diff` says "no machine record"
    from tests.helpers import main_exit, save_campaign
    root = save_campaign(tmp_path / "c", [result("caffe2", "fp32", 1, 100.0)])
    code, out, _ = main_exit(["report", str(root)], capsys)
    assert "\nMachine: " in out  # save_campaign's machine
    (root / "machine.json").unlink()
    code, out, err = main_exit(["report", str(root)], capsys)
    assert code == 0, err
    assert "\nMachine: no machine record (machine.json missing or empty): what it ran on is not " \
           "known.\n" in out
