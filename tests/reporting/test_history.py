"""`compare history`: each cell over time (date, commit, versions), regressions flagged."""

import pandas as pd

from tests.helpers import machine_of, main_exit, result, save_campaign, scaled, windowed

WINDOWS = [990.0, 1005.0, 1000.0, 1012.0, 996.0]


def _machine(commit):
    """The machine of windowed()'s results, at a commit."""
    return dict(machine_of(_runs()), git={"commit": commit, "dirty": False})


def _runs(factor=1.0, version="torch 2.3.1"):
    runs = [scaled(windowed("caffe2", "fp32", n, WINDOWS), factor * n) for n in (1, 2)]
    for r in runs:
        r.framework_version = version
    return runs


def _three_campaigns(root):
    """Three campaigns over three days; on the third, the 2-worker cell is 20 % slower."""
    save_campaign(root / "c3", _runs()[:1] + [scaled(_runs()[1], 0.8)], _machine("cccccccccc33"),
                  created_at="2026-12-03T09:00:00+00:00")
    save_campaign(root / "c1", _runs(), _machine("aaaaaaaaaa11"), created_at="2026-12-01T09:00:00+00:00")
    save_campaign(root / "c2", _runs(1.002, "torch 2.4.0"), _machine("bbbbbbbbbb22"),
                  created_at="2026-12-02T09:00:00+00:00")
    return root


def test_history_of_a_folder_orders_by_date_and_flags_the_regression(tmp_path, capsys):
    root = _three_campaigns(tmp_path / "all")
    code, out, err = main_exit(["history", str(root), "--out", str(tmp_path / "h")], capsys)
    assert code == 0, err
    assert "- 3 campaigns from 2026-12-01 09:00:00 to 2026-12-03 09:00:00; 2 cells." in out
    assert "- Regression: PyTorch (Caffe2) fp32 b256 224px ×2 (cuda) at c3 (cccccccccc): 0.80× ±0.01 of " \
           "the previous figure." in out
    two = out.split("## PyTorch (Caffe2) fp32 b256 224px ×2 (cuda)")[1]
    assert "| 2026-12-01 09:00:00 | aaaaaaaaaa | c1 | torch 2.3.1 | 2001.20 ±" in two
    assert "| 2026-12-02 09:00:00 | bbbbbbbbbb | c2 | torch 2.4.0 | 2005.20 ±" in two and "| within noise |" in two
    assert two.rstrip().endswith("| 0.80× ±0.01 | worse — regression |")
    one = out.split("## PyTorch (Caffe2) fp32 b256 224px ×1 (cuda)")[1].split("##")[0]
    assert one.count("within noise") == 2 and "regression" not in one
    rows = pd.read_csv(tmp_path / "h" / "history.csv")
    assert rows.regression.tolist() == [False, False, False, False, False, True]
    page = (tmp_path / "h" / "history.html").read_text()
    assert page.count("data:image/png;base64,") == 2  # a chart per cell


def test_history_of_named_campaigns_and_what_cannot_be_compared(tmp_path, capsys):
    a = save_campaign(tmp_path / "a", _runs()[:1], created_at="2026-12-01T09:00:00+00:00")
    b = save_campaign(tmp_path / "b", [result("caffe2", "fp32", 1, status="oom", reason="OOM",
                                              device_name="NVIDIA H200")],
                      created_at="2026-12-02T09:00:00+00:00")
    on_t4 = _runs()[:1]
    on_t4[0].device_name = "Tesla T4"
    c = save_campaign(tmp_path / "c", on_t4, created_at="2026-12-03T09:00:00+00:00")
    code, out, _ = main_exit(["history", str(c), str(a), str(b)], capsys)
    assert code == 0
    lines = [line for line in out.splitlines() if line.startswith("| 2026")]
    assert lines[0].endswith("| first figure |")
    assert lines[1].endswith("| oom |  | not comparable: now: oom (OOM) |")
    assert "| not comparable: machine changed: gpus: " in lines[2]
    assert "No regression: no cell is worse than its previous figure beyond noise." in out


def test_history_of_something_else_is_one_line_and_exit_2(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    code, _, err = main_exit(["history", str(tmp_path / "empty")], capsys)
    assert code == 2
    assert err.strip() == "compare: error: {}: neither a campaign nor a folder of campaigns; give campaign " \
                          "folders made by `compare run`, or the folder that holds them".format(tmp_path / "empty")


def test_a_campaign_named_twice_counts_once(tmp_path, capsys):
    a = save_campaign(tmp_path / "a", _runs(), created_at="2026-12-01T09:00:00+00:00")
    code, out, err = main_exit(["history", str(a), str(tmp_path / "." / "a")], capsys)
    assert code == 0
    assert "- 1 campaign from 2026-12-01 09:00:00 to 2026-12-01 09:00:00; 2 cells." in out
    assert "compare: warning: {}: named twice; counted once\n".format(tmp_path / "." / "a") in err


def test_a_corrupt_campaign_in_a_folder_is_skipped_and_the_others_are_shown(tmp_path, capsys):
    root = _three_campaigns(tmp_path / "all")
    (root / "c2" / "campaign.json").write_text("{broken")
    code, out, err = main_exit(["history", str(root)], capsys)
    assert code == 0, err
    assert "- 2 campaigns from 2026-12-01 09:00:00 to 2026-12-03 09:00:00; 2 cells." in out
    assert err == ("compare: warning: skipped {}: campaign.json is corrupt: not valid JSON (Expecting "
                   "property name enclosed in double quotes: line 1 column 2 (char 1)); restore it or start "
                   "a new campaign\n".format(root / "c2"))


def test_a_figure_resting_on_fewer_runs_than_its_cell_ran_says_so_in_history_and_diff(tmp_path, capsys):
    failed = result("caffe2", "fp32", 1, status="failed", repeat=1, reason="killed by SIGKILL",
                    device_name="NVIDIA H200")
    a = save_campaign(tmp_path / "a", _runs(), created_at="2026-12-01T09:00:00+00:00")
    b = save_campaign(tmp_path / "b", _runs() + [failed], created_at="2026-12-02T09:00:00+00:00")
    code, out, _ = main_exit(["history", str(a), str(b)], capsys)
    assert code == 0
    assert "| b | torch 2.3.1 | 1000.60 ±" in out and " (1 of 2 runs) | 1.00× ±" in out
    code, out, _ = main_exit(["diff", str(a), str(b)], capsys)
    assert code == 0 and "| 1000.60 | 1000.60 (1 of 2 runs) | 1.00× ±" in out


def test_campaigns_without_a_result_yet_are_a_history_not_an_internal_error(tmp_path, capsys):
    empty = save_campaign(tmp_path / "empty", [], _machine("aaaaaaaaaa11"))
    code, out, err = main_exit(["history", str(empty), "--out", str(tmp_path / "h")], capsys)
    assert code == 0, err
    assert "- No cell of these campaigns has a result yet: nothing to follow over time (`compare run … " \
           "--resume` runs them)." in out
    assert (tmp_path / "h" / "history.html").is_file()


def test_a_small_regression_is_not_printed_as_1_00(tmp_path, capsys):
    steady = windowed("caffe2", "fp32", 1, [1000.0, 1000.1, 999.9, 1000.05, 999.95])
    a = save_campaign(tmp_path / "a", [steady], created_at="2026-12-01T09:00:00+00:00")
    b = save_campaign(tmp_path / "b", [scaled(steady, 0.997)], created_at="2026-12-02T09:00:00+00:00")
    code, out, _ = main_exit(["history", str(a), str(b)], capsys)
    assert code == 0
    assert "- Regression: PyTorch (Caffe2) fp32 b256 224px ×1 (cuda) at b (0123456789): 0.9970× ±0.0001 of the " \
           "previous figure." in out
    assert out.rstrip().endswith("| 0.9970× ±0.0001 | worse — regression |")


def _variant(r, **fields):
    """A copy of result r as the run of another cell: its spec with `fields` changed."""
    import copy

    from backends.protocol import RunSpec
    out = copy.deepcopy(r)
    spec = RunSpec.from_dict(r.spec)
    for k, v in fields.items():
        setattr(spec, k, v)
    out.spec, out.run_id = spec.to_dict(), spec.run_id
    return out


def test_the_cells_of_a_data_mode_or_a_mode_are_named_apart_in_history(tmp_path, capsys):
    """Synthetic and real data, default and tuned: three cells of otherwise equal settings, each
    table titled as its own, and the regression of the real-data cell named as that cell's."""
    def runs(real_factor):
        base = windowed("caffe2", "fp32", 1, WINDOWS)
        return [base, scaled(_variant(base, data="/d"), real_factor), _variant(base, mode="tuned")]
    a = save_campaign(tmp_path / "a", runs(1.0), created_at="2026-12-01T09:00:00+00:00")
    b = save_campaign(tmp_path / "b", runs(0.8), created_at="2026-12-02T09:00:00+00:00")
    code, out, _ = main_exit(["history", str(a), str(b)], capsys)
    assert code == 0
    titles = [line for line in out.splitlines() if line.startswith("## PyTorch")]
    assert titles == ["## PyTorch (Caffe2) fp32 b256 224px ×1 (cuda)",
                      "## PyTorch (Caffe2) fp32 b256 224px ×1, real data (cuda)",
                      "## PyTorch (Caffe2), tuned fp32 b256 224px ×1 (cuda)"]
    assert "- Regression: PyTorch (Caffe2) fp32 b256 224px ×1, real data (cuda) at b " in out


def test_a_time_to_accuracy_campaign_is_not_a_point_of_a_throughput_cells_history(tmp_path, capsys):
    """A real-data throughput campaign, then a time-to-accuracy campaign of the same settings: the
    accuracy run's images/sec (epochs with evaluations between) is not the throughput cell's next
    figure, so no regression is flagged from it; the report of that campaign shows no throughput
    cell either, and `compare diff` and `compare check` read the campaigns as the report does."""
    timed = _variant(windowed("caffe2", "fp32", 1, WINDOWS), data="/d")
    tta = _variant(scaled(windowed("caffe2", "fp32", 1, WINDOWS), 0.6), data="/d",
                   target_accuracy=0.9)
    a = save_campaign(tmp_path / "a", [timed], created_at="2026-12-01T09:00:00+00:00")
    b = save_campaign(tmp_path / "b", [tta], created_at="2026-12-02T09:00:00+00:00")
    code, out, _ = main_exit(["history", str(a), str(b)], capsys)
    assert code == 0
    assert "regression" not in out.replace("No regression", "")
    assert "| b |" not in out.split("## Time to accuracy:")[0]  # a history of its own (below)
    assert "## Time to accuracy: PyTorch (Caffe2) fp32 b256 224px ×1 (cuda)" in out
    code, out, _ = main_exit(["diff", str(a), str(b)], capsys)
    assert code == 0 and "missing in B" in out and "0.60×" not in out
    code, _, err = main_exit(["check", str(b), "--reference", "a6000_tf_cnn_benchmarks"], capsys)
    assert code == 2 and err.rstrip().endswith(
        "(matched on network, precision and N, and on framework, batch and image size where it has "
        "them: the campaign has no throughput cell (time-to-accuracy runs are not held against "
        "published images/sec)); nothing to check")


def test_a_campaign_without_a_machine_record_is_an_unknown_machine_not_a_changed_one(tmp_path, capsys):
    """machine.json missing in one campaign: its point is not compared (the machine may have
    changed), and says the record is missing, not 'cpu_model: AMD EPYC 7543 vs None; …'."""
    save_campaign(tmp_path / "c1", _runs(), _machine("aaaaaaaaaa11"), created_at="2026-12-01T09:00:00+00:00")
    c2 = save_campaign(tmp_path / "c2", _runs(), _machine("bbbbbbbbbb22"),
                       created_at="2026-12-02T09:00:00+00:00")
    (c2 / "machine.json").unlink()
    code, out, err = main_exit(["history", str(tmp_path)], capsys)
    assert code == 0, err
    assert "vs None" not in out
    assert out.count("| not comparable: machine unknown: c2 has no machine record |") == 2


def test_a_regression_of_single_cpu_runs_is_called_a_hint_as_diff_calls_it(tmp_path, capsys):
    """One run a cell on a CPU: its interval only counts the noise inside the run. `compare diff`
    of the same two campaigns says its states are a hint; history said 'Regression' alone."""
    one = windowed("caffe2", "fp32", 1, WINDOWS, device="cpu")
    a = save_campaign(tmp_path / "a", [one], created_at="2026-12-01T09:00:00+00:00")
    b = save_campaign(tmp_path / "b", [scaled(one, 0.8)], created_at="2026-12-02T09:00:00+00:00")
    code, out, _ = main_exit(["diff", str(a), str(b)], capsys)
    assert code == 0 and "Single runs on a CPU: their intervals only count the noise inside one run" in out
    code, out, _ = main_exit(["history", str(a), str(b)], capsys)
    assert code == 0 and "- Regression: PyTorch (Caffe2) fp32 b256 224px ×1 (cpu) at b" in out
    assert "- Single runs on a CPU: their intervals only count the noise inside one run, so a " \
        "regression from them is a hint, not a finding (use --repeats 3 or more)." in out


def test_history_html_shows_code_as_the_report_page_does(tmp_path, capsys):
    """history.html renders `compare run … --resume` as code, as report.html and Markdown do; it
    printed the backticks."""
    empty = save_campaign(tmp_path / "empty", [], _machine("aaaaaaaaaa11"))
    code, _, err = main_exit(["history", str(empty), "--out", str(tmp_path / "h")], capsys)
    assert code == 0, err
    page = (tmp_path / "h" / "history.html").read_text()
    assert "<code>compare run … --resume</code> runs them" in page and "`" not in page


def test_a_cell_of_two_nodes_is_titled_by_its_gpus_per_node_and_its_nodes(tmp_path, capsys):
    """2 GPUs on each of 2 nodes and 2 GPUs on one node are two histories, each titled in words a
    reader parses once: the multi-node title read '×2×2' (a product sign before nodes×GPUs)."""
    def runs():
        return [windowed("caffe2", "fp32", 2, WINDOWS), windowed("caffe2", "fp32", 2, WINDOWS, nodes=2)]
    a = save_campaign(tmp_path / "a", runs(), created_at="2026-12-01T09:00:00+00:00")
    b = save_campaign(tmp_path / "b", runs(), created_at="2026-12-02T09:00:00+00:00")
    code, out, _ = main_exit(["history", str(a), str(b)], capsys)
    titles = [line for line in out.splitlines() if line.startswith("## PyTorch")]
    assert code == 0 and titles == ["## PyTorch (Caffe2) fp32 b256 224px ×2 (cuda)",
                                    "## PyTorch (Caffe2) fp32 b256 224px ×2 on each of 2 nodes (cuda)"]


def test_throughput_and_time_to_accuracy_histories_head_their_ratio_alike(tmp_path, capsys):
    """A cell twice as fast now, in img/s and in minutes to target: both tables show 2.00× under
    one heading, 'speed now ÷ previous' (they said '÷ previous' and 'previous ÷ now')."""
    from tests.test_mlperf_report import _result
    minutes = [1.0, 1.2, 1.1, 0.9, 1.3]
    for name, day, factor in (("c1", 1, 1.0), ("c2", 2, 2.0)):
        save_campaign(tmp_path / "all" / name, [scaled(windowed("caffe2", "fp32", 1, WINDOWS), factor)] + [
            _result("caffe2", 1, r, m / factor, 100) for r, m in enumerate(minutes)],
            created_at="2026-12-0{}T09:00:00+00:00".format(day))
    code, out, err = main_exit(["history", str(tmp_path / "all")], capsys)
    assert code == 0, err
    heads = [line for line in out.splitlines() if line.startswith("| date")]
    assert heads == ["| date | commit | campaign | version | img/s | speed now ÷ previous | state |",
                     "| date | commit | campaign | version | target | minutes to target | speed now ÷ "
                     "previous | state |"]
    assert "| 2001.20 ±" in out and "| 2.00× ±0.02 | better |" in out
    assert "| 0.55 ±0.10 | 2.00× ±0.42 | better |" in out
    assert "speed now ÷ previous = the previous minutes ÷ now's; > 1: it trains to the target " \
           "faster now." in out


def test_history_html_charts_minutes_to_target_as_it_charts_img_s(tmp_path, capsys):
    """history.html drew a chart per throughput cell and none for a time-to-accuracy cell: it
    draws minutes to target per campaign with their 95 % intervals, the regression marked, under
    the cell's title; a cell with one point has no chart, as a throughput cell's."""
    import re

    from tests.test_mlperf_report import _result
    minutes = [1.0, 1.2, 1.1, 0.9, 1.3]
    for name, day, factor in (("c1", 1, 1.0), ("c2", 2, 1.0), ("c3", 3, 2.0)):
        runs = [_result("caffe2", 1, r, factor * m, 100) for r, m in enumerate(minutes)]
        runs += [_result("jax", 1, 0, 1.0, 100)] if name == "c1" else []  # one point: no chart
        save_campaign(tmp_path / "all" / name, runs + [windowed("caffe2", "fp32", 1, WINDOWS)],
                      created_at="2026-12-0{}T09:00:00+00:00".format(day))
    code, out, err = main_exit(["history", str(tmp_path / "all"), "--out", str(tmp_path / "h")], capsys)
    assert code == 0, err
    page = (tmp_path / "h" / "history.html").read_text()
    titles = re.findall(r'<figure class="chart"><h2>([^<]*)</h2>', page)
    assert titles == ["PyTorch (Caffe2) fp32 b256 224px ×1 (cuda)",
                      "Time to accuracy: PyTorch (Caffe2) bf16 b256 64px ×1 (cuda)"]
    caption = page.split(titles[1])[2].split("<figcaption>")[1].split("</figcaption>")[0]
    assert caption == ("Each point is one campaign (date, commit): minutes to target, the mean of "
                       "its converged runs, with its 95 % interval; a line joins the campaigns of "
                       "one target; a red triangle marks a time slower than the one before beyond "
                       "noise. Lower is better.")


def test_a_campaign_without_a_result_yet_is_counted_and_named_beside_the_others(tmp_path, capsys):
    # `compare history c1 c2` of a c2 stopped before its first result said "1 campaign", c2 unsaid
    root = _three_campaigns(tmp_path / "all")
    save_campaign(root / "c4", [], _machine("dddddddddd44"), created_at="2026-12-04T09:00:00+00:00")
    code, out, err = main_exit(["history", str(root / "c1"), str(root / "c4")], capsys)
    assert code == 0, err
    assert "- 2 campaigns from 2026-12-01 09:00:00 to 2026-12-01 09:00:00; 2 cells." in out
    assert "- No result yet in c4: nothing of it to show (`compare run … --resume` runs its cells)." in out
    code, out, err = main_exit(["history", str(root)], capsys)  # a folder of them, likewise
    assert "- 4 campaigns from 2026-12-01 09:00:00 to 2026-12-03 09:00:00; 2 cells." in out
    assert "- No result yet in c4: nothing of it to show" in out
