"""`compare diff`: machine versus machine on comparable cells; the rest listed with the reason."""
import json

import pytest

from compare.cli import main
from compare.reporting import comparator, diff, tables
from tests.helpers import MACHINE, main_exit, result, save_campaign, scaled, windowed

T4 = dict(MACHINE, gpus=[{"index": 0, "name": "Tesla T4", "driver": "418.67"}])
V100 = dict(MACHINE, gpus=[{"index": 0, "name": "Tesla V100-PCIE-32GB", "driver": "418.67"}])

def _side_a():
    return [result("caffe2", "fp32", 1, 100.0, device_name="Tesla T4"),
            result("caffe2", "fp16", 1, 200.0, device_name="Tesla T4"),
            result("mxnet", "fp32", 1, 90.0, device_name="Tesla T4"),
            result("tf", "fp32", 1, status="oom", reason="ResourceExhaustedError: OOM",
                   device_name="Tesla T4"),
            result("caffe2", "bf16", 1, 150.0, device_name="Tesla T4")]

def _side_b():
    return [result(fw, precision, 1, ips, device_name="Tesla V100-PCIE-32GB") for fw, precision, ips in (
        ("caffe2", "fp32", 360.0), ("caffe2", "fp16", 440.0), ("tf", "fp32", 300.0),
        ("mxnet", "fp16", 500.0), ("caffe2", "bf16", 390.0))]

def test_ratios_on_comparable_cells_and_reasons_for_the_rest():
    d = diff.diff(comparator.cells(_side_a()), comparator.cells(_side_b()))
    by = {(r.framework, r.precision): r for _, r in d.iterrows()}
    assert len(d) == 6  # 5 cells in A, plus mxnet fp16 only in B: nothing dropped
    assert by[("caffe2", "fp32")].ratio == pytest.approx(3.6)
    assert by[("caffe2", "fp16")].ratio == pytest.approx(2.2)
    assert by[("mxnet", "fp32")].why == "missing in B"
    assert by[("mxnet", "fp16")].why == "missing in A"
    assert by[("tf", "fp32")].why == "A: oom (ResourceExhaustedError: OOM)"
    assert by[("tf", "fp32")].ratio is None
    assert diff.summary(d, "T4", "V100") == ("V100 runs at 2.20–3.60× the speed of T4 over 3 "
                                             "comparable cells (median 2.60×); 3 cells not "
                                             "comparable (listed below).")

def test_different_settings_are_not_comparable():
    a = comparator.cells([result("caffe2", "fp32", 1, 100.0)])
    spec_b = result("caffe2", "fp32", 1, 150.0)
    spec_b.spec["compile"] = True
    d = diff.diff(a, comparator.cells([spec_b]))
    assert not d.comparable.iloc[0] and d.why.iloc[0] == "settings differ: compile False vs True"

def _campaign(root, machine, results):
    return save_campaign(root, results, machine)

def test_compare_diff_command(tmp_path, capsys):
    a = _campaign(tmp_path / "t4", T4, _side_a())
    b = _campaign(tmp_path / "v100", V100, _side_b())
    with pytest.raises(SystemExit) as e:
        main(["diff", str(a), str(b), "--out", str(tmp_path / "d")])
    out, err = capsys.readouterr()
    assert e.value.code == 0, err
    assert "runs at 2.20–3.60× the speed of A ({}, 1× Tesla T4)".format(a) in out
    assert "Machines differ in: gpus: ['Tesla T4'] vs ['Tesla V100-PCIE-32GB']" in out
    assert "| PyTorch (Caffe2) | fp32 | 256 | 224 | 1 | 100.00 | 360.00 | 3.60× ±0.04 | better |" in out
    assert "| MXNet | fp16 | 256 | 224 | 1 | missing in A |" in out
    assert out.rstrip().splitlines()[-1] == "Cells: 3 better, 0 worse, 0 within noise, 3 not comparable."
    rows = json.loads((tmp_path / "d" / "diff.json").read_text())
    assert sum(1 for r in rows if r["comparable"]) == 3 and len(rows) == 6

def test_resume_on_another_machine_is_refused(tmp_path, capsys):
    root = _campaign(tmp_path / "c", V100, [])
    with pytest.raises(SystemExit) as e:
        main(["run", "--device", "cpu", "--frameworks", "caffe2", "--resume", "--results", str(root)])
    _, err = capsys.readouterr()
    assert e.value.code == 2
    line = err.splitlines()[-1]  # earlier lines may say which executor was picked
    assert line.startswith("compare: error: --resume {}: the campaign was recorded on another "
                           "machine (".format(root)) and "compare diff" in line


# five windows a run, about 1 % apart: what a GPU run's windows look like
WINDOWS = [990.0, 1005.0, 1000.0, 1012.0, 996.0]


def _cells_with_windows():
    return [windowed(fw, p, n, [w * k for w in WINDOWS])
            for fw, k in (("tf", 1.0), ("caffe2", 1.1)) for p in ("fp32", "bf16") for n in (1, 2)]


def test_a_campaign_against_its_own_copy_is_within_noise_everywhere(tmp_path, capsys):
    a = save_campaign(tmp_path / "a", _cells_with_windows())
    b = save_campaign(tmp_path / "b", _cells_with_windows())
    code, out, err = main_exit(["diff", str(a), str(b)], capsys)
    assert code == 0, err
    assert out.count("| within noise |") == 8
    assert out.rstrip().splitlines()[-1] == "Cells: 0 better, 0 worse, 8 within noise, 0 not comparable."


def test_one_cell_at_80_percent_is_worse_the_rest_within_noise(tmp_path, capsys):
    runs = _cells_with_windows()
    slower = [scaled(r, 0.8) if r.run_id == "caffe2-bf16-g2-b256-s224-r0" else r for r in runs]
    a, b = save_campaign(tmp_path / "a", runs), save_campaign(tmp_path / "b", slower)
    code, out, _ = main_exit(["diff", str(a), str(b)], capsys)
    assert code == 0
    assert "| PyTorch (Caffe2) | bf16 | 256 | 224 | 2 | 1100.66 | 880.53 | 0.80× ±0.01 | worse |" in out
    assert out.rstrip().splitlines()[-1] == "Cells: 0 better, 1 worse, 7 within noise, 0 not comparable."
    d = diff.diff(comparator.cells(runs), comparator.cells(slower))
    assert d[d.state == "worse"].ratio.tolist() == [pytest.approx(0.8)]


def test_a_cell_without_an_interval_is_not_comparable():
    one_window = [windowed("tf", "fp32", 1, [100.0], device="cpu")]
    d = diff.diff(comparator.cells(one_window), comparator.cells(one_window))
    assert (d.state.iloc[0], d.why.iloc[0]) == ("not comparable", "no interval: a side has one run with one "
                                                "timed window")


def test_a_campaign_without_results_yet_is_a_diff_not_an_internal_error(tmp_path, capsys):
    # a campaign just started (planned cells, no result) against itself or a finished one: exit 0
    empty = save_campaign(tmp_path / "empty", [], MACHINE)
    full = save_campaign(tmp_path / "full", [result("caffe2", "fp32", 1, 100.0)])
    code, out, err = main_exit(["diff", str(empty), str(empty)], capsys)
    assert (code, err) == (0, "compare: warning: {0} and {0} are the same campaign: each cell is "
                              "compared with itself\n".format(empty))
    assert out.rstrip().splitlines()[-1] == "Cells: 0 better, 0 worse, 0 within noise, 0 not comparable."
    code, out, err = main_exit(["diff", str(empty), str(full)], capsys)
    assert (code, err) == (0, "")
    assert "| PyTorch (Caffe2) | fp32 | 256 | 224 | 1 | missing in A |" in out


def test_a_small_but_sure_change_is_printed_with_the_decimals_that_show_it(tmp_path, capsys):
    # 0.2 % slower with windows steady to 0.01 %: "worse", so not "1.00× ±0.00" beside it
    steady = [windowed("caffe2", "fp32", 1, [1000.0, 1000.1, 999.9, 1000.05, 999.95])]
    a = save_campaign(tmp_path / "a", steady)
    b = save_campaign(tmp_path / "b", [scaled(steady[0], 0.998)])
    code, out, _ = main_exit(["diff", str(a), str(b)], capsys)
    assert code == 0
    assert "| PyTorch (Caffe2) | fp32 | 256 | 224 | 1 | 1000.00 | 998.00 | 0.9980× ±0.0001 | worse |" in out


def test_the_synthetic_and_the_real_data_cell_of_a_setting_are_told_apart():
    """--data synthetic,DIR on both sides: two rows of one setting, each saying its data mode."""
    from backends.protocol import RunSpec

    def real(r):
        spec = RunSpec.from_dict(r.spec)
        spec.data = "/d"
        r.spec, r.run_id = spec.to_dict(), spec.run_id
        return r
    a = [result("caffe2", "fp32", 1, 100.0), real(result("caffe2", "fp32", 1, 50.0))]
    b = [result("caffe2", "fp32", 1, 360.0), real(result("caffe2", "fp32", 1, 60.0))]
    d = diff.diff(comparator.cells(a), comparator.cells(b))
    text = tables.markdown(diff.sections(d, comparator.cells(a), comparator.cells(b), MACHINE,
                                         MACHINE, "a", "b"))
    assert "| framework | precision | batch | image | data | N | A img/s |" in text
    assert "| PyTorch (Caffe2) | fp32 | 256 | 224 | synthetic | 1 | 100.00 | 360.00 |" in text
    assert "| PyTorch (Caffe2) | fp32 | 256 | 224 | real | 1 | 50.00 | 60.00 |" in text


def test_diff_csv_counts_runs_as_numbers_and_the_markdown_says_them_in_words(tmp_path, capsys):
    """diff.csv is for machines: how many runs a side ran, and how many its figure rests on, as
    whole numbers (not ' (2 of 3 runs)'); the Markdown table keeps the words."""
    import csv
    a = [windowed("caffe2", "fp32", 1, WINDOWS, repeat=i) for i in range(2)] + [
        result("caffe2", "fp32", 1, status="failed", reason="killed", repeat=2, batch=256)]
    b = [windowed("caffe2", "fp32", 1, WINDOWS, repeat=i) for i in range(3)]
    ca, cb = save_campaign(tmp_path / "a", a), save_campaign(tmp_path / "b", b)
    code, out, err = main_exit(["diff", str(ca), str(cb), "--out", str(tmp_path / "d")], capsys)
    assert code == 0, err
    assert "| 1000.60 (2 of 3 runs) | 1000.60 |" in out
    with open(str(tmp_path / "d" / "diff.csv")) as f:
        row = next(csv.DictReader(f))
    assert (row["runs_a"], row["repeats_a"], row["runs_b"], row["repeats_b"]) == ("3", "2", "3", "3")
    rows = json.loads((tmp_path / "d" / "diff.json").read_text())
    assert (rows[0]["runs_a"], rows[0]["repeats_a"]) == (3, 2)


def test_the_heading_names_each_side_machine_as_its_record_does(tmp_path, capsys):
    """A campaign without machine.json is 'no machine record' (not 'CPU None'), and a machine of
    two GPU models is named by both, as the machine line under the heading names it."""
    mixed = dict(MACHINE, gpus=[{"index": 0, "name": "Tesla T4", "driver": "418.67"},
                                {"index": 1, "name": "Tesla V100-PCIE-32GB", "driver": "418.67"}])
    a = save_campaign(tmp_path / "a", [result("caffe2", "fp32", 1, 100.0)], mixed)
    b = save_campaign(tmp_path / "b", [result("caffe2", "fp32", 1, 100.0)], MACHINE)
    (b / "machine.json").unlink()
    code, out, err = main_exit(["diff", str(a), str(b)], capsys)
    assert code == 0, err
    assert out.splitlines()[0] == "## B ({}, no machine record) versus A ({}, 2× Tesla T4, Tesla " \
        "V100-PCIE-32GB)".format(b, a)
    assert "CPU None" not in out
    # not "Machines differ in: cpu_model: AMD EPYC 7543 vs None; …": B's machine is not known
    assert "- Whether the machines differ is unknown: B has no machine record." in out


def test_throughput_and_time_to_accuracy_ratios_go_one_way_and_their_headings_say_so(tmp_path, capsys):
    """B twice as fast as A, in img/s and in minutes to target: both tables show 2.00× under one
    heading, 'speed B ÷ A' (the time table said 'A ÷ B' beside the other's 'B ÷ A'), and both CSV
    files hold 2.0, with the direction in the notes."""
    import csv

    from tests.test_mlperf_report import _result
    minutes = [1.0, 1.2, 1.1, 0.9, 1.3]
    a = [windowed("caffe2", "fp32", 1, WINDOWS)] + [_result("caffe2", 1, r, m, 100) for r, m in
                                                     enumerate(minutes)]
    b = [scaled(windowed("caffe2", "fp32", 1, WINDOWS), 2.0)] + [
        _result("caffe2", 1, r, m / 2, 200) for r, m in enumerate(minutes)]
    ca, cb = save_campaign(tmp_path / "a", a), save_campaign(tmp_path / "b", b)
    code, out, err = main_exit(["diff", str(ca), str(cb), "--out", str(tmp_path / "d")], capsys)
    assert code == 0, err
    heads = [line for line in out.splitlines() if line.startswith("| framework")]
    assert heads[0].endswith("| A img/s | B img/s | speed B ÷ A | state |")
    assert heads[1].endswith("| A minutes | B minutes | speed B ÷ A | state |")
    assert "| 1000.60 | 2001.20 | 2.00× ±0.02 | better |" in out
    assert "| 1.10 ±0.20 | 0.55 ±0.10 | 2.00× ±0.42 | better |" in out
    assert "speed B ÷ A = B's img/s ÷ A's img/s; > 1: B is faster." in out
    assert "speed B ÷ A = A's minutes ÷ B's minutes; > 1: B trains to the target faster." in out
    for name in ("diff.csv", "diff_time_to_accuracy.csv"):
        with open(str(tmp_path / "d" / name)) as f:
            assert float(next(csv.DictReader(f))["ratio"]) == pytest.approx(2.0, rel=1e-3), name


def test_a_campaign_named_as_both_sides_is_said(tmp_path, capsys):
    # `compare diff results/x results/x/` (a slip of the shell): every cell "within noise" of
    # itself, under "a before/after comparison", said as if two campaigns had been compared
    a = save_campaign(tmp_path / "a", _cells_with_windows())
    (tmp_path / "link").symlink_to(a)
    for other in (str(a) + "/", str(tmp_path / "link")):
        code, out, err = main_exit(["diff", str(a), other], capsys)
        assert (code, err) == (0, "compare: warning: {} and {} are the same campaign: each cell is "
                                  "compared with itself\n".format(a, other))
        assert out.rstrip().splitlines()[-1] == "Cells: 0 better, 0 worse, 8 within noise, 0 not " \
                                                "comparable."


def test_a_diff_into_the_same_out_leaves_no_time_to_accuracy_file_of_the_one_before(tmp_path, capsys):
    # diff_time_to_accuracy.csv/.json of an earlier diff of other campaigns stayed beside the new
    # diff.md, whose campaigns have no time-to-accuracy cell; history's likewise
    from tests.test_mlperf_report import _result
    minutes = [1.0, 1.2, 1.1, 0.9, 1.3]
    tta = save_campaign(tmp_path / "tta", [windowed("caffe2", "fp32", 1, WINDOWS)] + [
        _result("caffe2", 1, r, m, 100) for r, m in enumerate(minutes)])
    plain = save_campaign(tmp_path / "plain", _cells_with_windows())
    out = tmp_path / "d"
    for argv, names in ((["diff", str(tta), str(tta)], ["diff_time_to_accuracy.csv",
                                                         "diff_time_to_accuracy.json"]),
                        (["history", str(tta)], ["history_time_to_accuracy.csv"])):
        code, _, err = main_exit(argv + ["--out", str(out)], capsys)
        assert code == 0, err
        assert all((out / n).is_file() for n in names)
        code, _, err = main_exit([argv[0], str(plain)] + [str(plain)] * (argv[0] == "diff") +
                                 ["--out", str(out)], capsys)
        assert code == 0, err
        assert [n for n in names if (out / n).exists()] == []
