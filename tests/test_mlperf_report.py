"""The report's time-to-accuracy tables and chart (compare/reporting/accuracy.py) from fixed
results: minutes to target across seeds with MLPerf's score, speedup in time to train beside
throughput with the seed caveat flagged, cost to train only with a price."""
import pytest

from backends.protocol import RunResult, RunSpec
from compare.reporting import accuracy, tables


def _result(fw, gpus, repeat, minutes, ips, status="ok", epochs=3, target=0.9):
    spec = RunSpec(framework=fw, backend="caffe2_torch" if fw == "caffe2" else "jax", gpus=gpus,
                   device="cuda", precision="bf16", batch_size=256, image_size=64, data="/d",
                   target_accuracy=target, max_epochs=8, repeat=repeat)
    start = 1_800_000_000_000
    evals = [{"epoch": e, "accuracy": 0.3 * e, "time_s": minutes * 60 * e / epochs}
             for e in range(1, epochs + 1)]
    acc = {"run_start_ms": start, "run_stop_ms": start + round(minutes * 60000),
           "epochs": epochs, "epochs_to_target": epochs if status == "ok" else None,
           "best": evals[-1]["accuracy"], "seed": spec.run_seed, "evals": evals,
           "images_trained": epochs * 30000}
    return RunResult(run_id=spec.run_id, status=status, spec=spec.to_dict(), images_per_sec=ips,
                     accuracy=acc, reason=None if status == "ok" else "target not reached")


@pytest.fixture
def results():
    out = []
    for r, m in enumerate([1.0, 1.2, 1.1, 0.9, 1.3]):  # PyTorch on 1 GPU: 5 seeds
        out.append(_result("caffe2", 1, r, m, 10000 + 10 * r))
    for r, m in enumerate([0.40, 0.42, 0.38, 0.41, 0.39]):  # 2 GPUs: 2.7x in time, 2x in img/s
        out.append(_result("caffe2", 2, r, m, 20000 + 10 * r, epochs=2))
    out.append(_result("jax", 1, 0, 2.0, 9000, status="not_converged", epochs=8))
    return out


def _rows(table):
    return {tuple(row[:table.labels]): dict(zip(table.header, row)) for row in table.rows}


def test_minutes_to_target_median_spread_and_mlperf_score(results):
    time_table = accuracy.tables(results)[0]
    rows = _rows(time_table)
    one = rows[("PyTorch (Caffe2)", "bf16", "256", "64", "1")]
    assert one["converged"] == "5/5" and one["median"] == "1.10" and one["epochs"] == "3"
    assert one["MLPerf score"] == "1.10"  # mean of 1.0, 1.1, 1.2: fastest and slowest dropped
    assert one["spread"] == "36%"  # (1.3 - 0.9) / 1.1
    assert one["minutes to target"].startswith("1.10 ±")
    jax = rows[("JAX (Flax)", "bf16", "256", "64", "1")]
    assert (jax["converged"], jax["median"], jax["MLPerf score"], jax["best top-1"]) == \
        ("0/1", "n/a", "n<5", "2.400")
    assert "$ to target" not in time_table.header  # no price: no cost columns at all


def test_cost_to_train_with_a_price(results):
    rows = _rows(accuracy.tables(results, price=2.5)[0])
    two = rows[("PyTorch (Caffe2)", "bf16", "256", "64", "2")]
    assert two["$ to target"] == "{:.4f}".format(2.5 * 2 * 0.40 / 60)  # 2 GPUs, median 0.40 min
    assert two["$/M images"] == "{:.4f}".format(2.5 * 2 * 0.40 / 60 / 0.06)  # 60,000 images


def test_speedup_in_time_to_train_is_flagged_where_it_beats_throughput(results):
    speedup = accuracy.tables(results)[1]
    (row,) = _rows(speedup).values()
    assert row["time to train"].startswith("2.75×") and row["throughput"].startswith("2.00×")
    assert row["verdict"] == "time to train scales better than throughput (seeds)"
    assert any("differ beyond their 95 % intervals" in n for n in speedup.notes)


def test_throughput_runs_are_left_out_and_the_chart_draws_every_run(results):
    plain = RunResult(run_id="x", status="ok", spec=RunSpec("caffe2", "caffe2_torch").to_dict(),
                      images_per_sec=1.0)
    throughput, trained = accuracy.split(results + [plain])
    assert throughput == [plain] and len(trained) == len(results)
    chart = accuracy.chart(results)
    assert chart.png.startswith(b"\x89PNG") and "one run" in chart.caption
    assert accuracy.tables([plain]) == [] and accuracy.chart([plain]) is None
    assert "## Time to accuracy (minutes to target)" in tables.markdown(accuracy.tables(results))


def test_a_campaign_report_holds_the_tables_and_the_chart(tmp_path, results):
    from compare.stages.report import write as write_report
    from compare.store import Campaign
    campaign = Campaign.create(tmp_path / "c", {}, {})
    for r in results:
        campaign.save_result(r)
    text, paths, _ = write_report(campaign, tmp_path / "report", ("md", "html"), price=2.5)
    assert "## Time to accuracy (minutes to target)" in text and "$ to target" in text
    assert "## Speedup in time to train beside speedup in throughput" in text
    page = (tmp_path / "report" / "report.html").read_text()
    assert "<h2>Accuracy versus time to train</h2>" in page and "data:image/png;base64," in page


def test_compare_report_takes_a_gpu_hour_price(tmp_path, results, capsys):
    from tests.helpers import main_exit, save_campaign
    root = save_campaign(tmp_path / "c", results)
    code, out, _ = main_exit(["report", str(root)], capsys)
    assert code == 0 and "## Time to accuracy (minutes to target)" in out and "$ to target" not in out
    code, out, err = main_exit(["report", str(root), "--gpu-hour-price", "2.50"], capsys)
    assert code == 0 and "$ = $2.5/GPU-hour × GPUs" in out and "warning" not in err
    code, _, err = main_exit(["report", str(root), "--gpu-hour-price", "free"], capsys)
    assert (code, err) == (2, "compare: error: --gpu-hour-price 'free': not a number; give a finite "
                              "number of dollars > 0, e.g. 2.50\n")


def test_a_gpu_hour_price_for_a_campaign_without_accuracy_runs_says_it_is_not_used(tmp_path, capsys):
    # a throughput campaign has nothing to price: the flag is said to be unused, not dropped unseen
    from tests.helpers import main_exit, save_campaign, windowed
    root = save_campaign(tmp_path / "c", [windowed("caffe2", "fp32", 1, [100.0, 101.0])])
    code, out, err = main_exit(["report", str(root), "--gpu-hour-price", "2.50"], capsys)
    assert code == 0 and "$" not in out
    assert err.splitlines()[0] == "compare: warning: --gpu-hour-price 2.5: not used: it prices " \
                                  "time-to-accuracy runs (--target-accuracy), and this campaign has none"


def test_a_report_of_accuracy_runs_alone_opens_with_them_and_names_machine_and_software(
        tmp_path, results, capsys):
    # was "No results yet." on top (no throughput cell) and no Machine or Software line
    from tests.helpers import main_exit, save_campaign
    for r in results:
        r.framework_version = "torch 2.3.1" if r.spec["framework"] == "caffe2" else "jax 0.4.30"
    root = save_campaign(tmp_path / "c", results)
    code, out, err = main_exit(["report", str(root)], capsys)
    assert code == 0, err
    assert "No results yet" not in out
    assert out.splitlines()[0] == "Time to accuracy: 3 cells, 11 runs to top-1 0.9: 10 reached the " \
        "target; 1 not_converged (listed under \"Time-to-accuracy runs without a time to target\")."
    assert "\nMachine: " in out and "NVIDIA RTX A6000" in out
    assert "\nSoftware: PyTorch (Caffe2) = torch 2.3.1; JAX (Flax) = jax 0.4.30\n" in out


def test_an_unsupported_or_failed_accuracy_run_shows_its_status_and_reason(tmp_path, results, capsys):
    # was only "0/1 | n/a" in the time table: the status and the reason were nowhere
    from tests.helpers import main_exit, save_campaign
    spec = RunSpec(framework="mxnet", backend="mxnet", device="cuda", precision="fp16",
                   batch_size=256, image_size=64, data="/d", target_accuracy=0.9, max_epochs=8)
    unsupported = RunResult(run_id=spec.run_id, status="unsupported", spec=spec.to_dict(),
                            reason="float16 on cpu(0): mxnet 1.9.1 says: only supported by CuDNN")
    failed = _result("caffe2", 1, 5, 1.0, 100.0, status="failed")
    failed.reason, failed.images_per_sec = "RuntimeError: boom\nTraceback line 2", None
    root = save_campaign(tmp_path / "c", results + [unsupported, failed])
    code, out, err = main_exit(["report", str(root)], capsys)
    assert code == 0, err
    listed = out.split("## Time-to-accuracy runs without a time to target")[1]
    # cell, run, status, seed, epochs, best top-1, the reason's first line, the MLPerf log
    assert "| MXNet | fp16 | 256 | 64 | 1 | {} | unsupported | n/a | n/a | n/a | " \
           "float16 on cpu(0): mxnet 1.9.1 says: only supported by CuDNN | n/a |".format(spec.run_id) in listed
    assert "| {} | failed | {} | 3 | 0.900 | RuntimeError: boom | n/a |".format(
        failed.run_id, failed.accuracy["seed"]) in listed  # its first line
    assert "| not_converged | {} | 8 | 2.400 | target not reached | n/a |".format(
        results[-1].accuracy["seed"]) in listed


def test_accuracy_tables_name_cells_as_every_other_table(tmp_path, results, capsys):
    # they always had model and mode columns ("resnet50 | default"), where the campaign's other
    # tables and compare diff's time-to-accuracy table (tables.shown) name one network and the
    # default mode in no column; a tuned cell got a mode column with "PyTorch (Caffe2)" beside it
    from tests.helpers import main_exit, save_campaign
    head = ["framework", "precision", "batch", "image", "N"]
    assert [t.header[:t.labels] for t in accuracy.tables(results)] == [head, head, head]
    tuned = _result("caffe2", 1, 0, 1.0, 100.0)
    tuned.spec["mode"], tuned.spec["model"] = "tuned", "resnet152"
    for t in accuracy.tables(results + [tuned]):
        assert t.header[:t.labels] == ["framework", "model", "mode", "precision", "batch", "image", "N"]
    root = save_campaign(tmp_path / "c", results)
    code, out, err = main_exit(["report", str(root)], capsys)
    assert code == 0, err
    assert "| framework | precision | batch | image | N | converged | minutes to target |" in out
    assert "| PyTorch (Caffe2) | bf16 | 256 | 64 | 1 | 5/5 | 1.10 ±" in out
    code, out, err = main_exit(["diff", str(root), str(root)], capsys)
    assert code == 0 and "| framework | precision | batch | image | N | A minutes |" in out


def test_compare_diff_of_two_accuracy_campaigns_compares_minutes_to_target(tmp_path, capsys):
    # was "No comparable cells … 0 not comparable", with no accuracy cell listed
    from tests.helpers import main_exit, save_campaign
    minutes = [1.0, 1.2, 1.1, 0.9, 1.3]
    a = [_result("caffe2", 1, r, m, 10000) for r, m in enumerate(minutes)]
    b = [_result("caffe2", 1, r, m / 2, 20000) for r, m in enumerate(minutes)]
    a.append(_result("jax", 1, 0, 2.0, 9000, status="not_converged", epochs=8))
    b.append(_result("jax", 1, 0, 1.0, 9000))  # one seed: no interval
    ra, rb = save_campaign(tmp_path / "a", a), save_campaign(tmp_path / "b", b)
    code, out, err = main_exit(["diff", str(ra), str(rb), "--out", str(tmp_path / "d")], capsys)
    assert code == 0, err
    assert "B ({}, 8× NVIDIA RTX A6000) trains to the target 2.00× as fast as A ({}, 8× NVIDIA " \
           "RTX A6000) over 1 comparable time-to-accuracy cell; 1 not comparable (listed " \
           "below).".format(rb, ra) in out
    assert "No comparable cells" not in out
    assert "| PyTorch (Caffe2) | bf16 | 256 | 64 | 1 | 1.10 ±0.20 | 0.55 ±0.10 | 2.00× ±0.42 | better |" \
        in out
    assert "| JAX (Flax) | bf16 | 256 | 64 | 1 | n/a | 1.00, one run: no interval | n/a | not comparable: A: no run " \
           "reached the target (1 of 1: not_converged, target not reached) |" in out
    assert out.rstrip().endswith("Cells: 1 better, 0 worse, 0 within noise, 1 not comparable.")
    assert (tmp_path / "d" / "diff_time_to_accuracy.csv").read_text().count("\n") == 3
    # diff.json holds the throughput cells ([] here): the time-to-accuracy cells the Markdown
    # lists were in no JSON file, as report.json's were before accuracy.json
    import json
    cells = json.loads((tmp_path / "d" / "diff_time_to_accuracy.json").read_text())
    assert [(c["framework"], c["state"], c["minutes_a"], c["runs_b"]) for c in cells] == [
        ("caffe2", "better", pytest.approx(1.1), 5), ("jax", "not comparable", None, 1)]
    assert "diff_time_to_accuracy.json" in err


def test_compare_history_of_accuracy_campaigns_follows_minutes_to_target(tmp_path, capsys):
    # was "No cell of these campaigns has a result yet" for a campaign, and a folder's accuracy
    # campaigns skipped without a word
    from tests.helpers import main_exit, save_campaign, windowed
    minutes = [1.0, 1.2, 1.1, 0.9, 1.3]
    save_campaign(tmp_path / "all" / "c1", [_result("caffe2", 1, r, m, 100) for r, m in enumerate(minutes)],
                  created_at="2026-12-01T09:00:00+00:00")
    save_campaign(tmp_path / "all" / "c2", [_result("caffe2", 1, r, 2 * m, 100) for r, m in enumerate(minutes)],
                  created_at="2026-12-02T09:00:00+00:00")
    code, out, err = main_exit(["history", str(tmp_path / "all" / "c1")], capsys)
    assert code == 0, err
    assert "No cell of these campaigns has a result yet" not in out
    assert "| 2026-12-01 09:00:00 | 0123456789 | c1 |  | 0.9 | 1.10 ±0.20 |  | first figure |" in out
    code, out, err = main_exit(["history", str(tmp_path / "all"), "--out", str(tmp_path / "h")], capsys)
    assert code == 0, err
    assert "- 2 campaigns from 2026-12-01 09:00:00 to 2026-12-02 09:00:00; 1 cell of time to " \
           "accuracy." in out
    assert "- Regression: PyTorch (Caffe2) bf16 b256 64px ×1 (cuda), time to accuracy, at c2 " \
           "(0123456789): trains to the target at 0.50× ±0.10 the previous speed." in out
    assert "| c2 |  | 0.9 | 2.20 ±0.39 | 0.50× ±0.10 | worse — regression |" in out
    assert (tmp_path / "h" / "history_time_to_accuracy.csv").exists()
    save_campaign(tmp_path / "all" / "c3", [windowed("caffe2", "fp32", 1, [100.0, 101.0])],
                  created_at="2026-12-03T09:00:00+00:00")  # a throughput campaign beside them
    code, out, err = main_exit(["history", str(tmp_path / "all")], capsys)
    assert code == 0 and "3 campaigns from 2026-12-01 09:00:00 to 2026-12-03 09:00:00; 2 cells (1 " \
                         "of them time to accuracy)." in out


def test_the_study_line_counts_runs_of_cells_as_the_opening_line_does(tmp_path, results, capsys):
    # "Time to accuracy: 3 cells, 11 runs ..." opened the report and "Study: ... for 11 cells"
    # closed it: the Study line called every repeat (seed) a cell
    from tests.helpers import main_exit, save_campaign
    for i, r in enumerate(results):
        r.phases = {"cell_start": 10.0 * i, "cell_end": 10.0 * i + 9}
    root = save_campaign(tmp_path / "c", results)
    code, out, err = main_exit(["report", str(root)], capsys)
    assert code == 0, err
    assert out.startswith("Time to accuracy: 3 cells, 11 runs to top-1 0.9")
    assert "\nStudy: 1:39 wall for 11 runs of 3 cells, one run at a time.\n" in out


def test_history_says_why_a_time_to_accuracy_point_has_no_ratio_in_its_runs_own_words(tmp_path, capsys):
    # the why of compare diff ("B: no run reached ...") was turned into history's by replacing
    # every "A: " and "B: " in it, the run's reason included: "CUDA: out of memory" read
    # "CUDbefore: out of memory"
    from tests.helpers import main_exit, save_campaign
    before = [_result("caffe2", 1, r, m, 100) for r, m in enumerate([1.0, 1.2, 1.1])]
    now = _result("caffe2", 1, 0, 1.0, 100, status="failed")
    now.reason, now.images_per_sec = "MXNetError: CUDA: an illegal memory access was encountered", None
    save_campaign(tmp_path / "all" / "c1", before, created_at="2026-12-01T09:00:00+00:00")
    save_campaign(tmp_path / "all" / "c2", [now], created_at="2026-12-02T09:00:00+00:00")
    code, out, err = main_exit(["history", str(tmp_path / "all")], capsys)
    assert code == 0, err
    assert "not comparable: now: no run reached the target (1 of 1: failed, MXNetError: CUDA: an " \
           "illegal memory access was encountered)" in out


def test_history_of_time_to_accuracy_names_the_framework_version_of_each_point(tmp_path, capsys):
    # a throughput cell's history has a version column (a regression after an upgrade shows
    # which); a time-to-accuracy cell's had none, in history.md or history_time_to_accuracy.csv
    import csv

    from tests.helpers import main_exit, save_campaign
    for name, day, version, factor in (("c1", 1, "torch 2.3.1", 1), ("c2", 2, "torch 2.4.0", 2)):
        runs = [_result("caffe2", 1, r, factor * m, 100) for r, m in enumerate([1.0, 1.2, 1.1])]
        for r in runs:
            r.framework_version = version
        save_campaign(tmp_path / "all" / name, runs, created_at="2026-12-0{}T09:00:00+00:00".format(day))
    code, out, err = main_exit(["history", str(tmp_path / "all"), "--out", str(tmp_path / "h")], capsys)
    assert code == 0, err
    assert "| date | commit | campaign | version | target | minutes to target | speed now ÷ previous | " \
        "state |" in out
    assert "| 0123456789 | c1 | torch 2.3.1 | 0.9 | 1.10 ±" in out
    assert "| 0123456789 | c2 | torch 2.4.0 | 0.9 | 2.20 ±" in out
    with open(tmp_path / "h" / "history_time_to_accuracy.csv") as f:
        assert [r["framework_version"] for r in csv.DictReader(f)] == ["torch 2.3.1", "torch 2.4.0"]


def test_a_time_to_accuracy_campaign_report_says_what_it_holds_and_on_what_software(tmp_path, results):
    # a campaign of accuracy runs only: not "No results yet." above its tables, and the machine and
    # software lines a throughput report ends with (which framework version trained to the target)
    from compare.stages.report import write as write_report
    from compare.store import Campaign
    campaign = Campaign.create(tmp_path / "c", {}, {})
    for r in results:
        r.framework_version, r.device_name = "2.5.1" if r.spec["framework"] == "caffe2" else \
            "0.4.38", "NVIDIA H100 80GB HBM3"
        campaign.save_result(r)
    text, _, _ = write_report(campaign, tmp_path / "report", ("md",))
    assert "No results yet." not in text
    assert text.startswith("Time to accuracy: 3 cells, 11 runs to top-1 0.9: 10 reached the target")
    assert "Software: PyTorch (Caffe2) = 2.5.1; JAX (Flax) = 0.4.38" in text


def test_runs_that_did_not_reach_the_target_are_listed_with_their_reason_and_log(results):
    # the time table says 0/1 converged; which run, why (not converged, timed out) and where its
    # (partial) MLPerf log is were nowhere in the report
    results[-1].reason = "target accuracy 0.9 not reached: best top-1 2.4000 (8 epochs trained)"
    results[-1].accuracy["mllog"] = "logs/{}.mllog".format(results[-1].run_id)
    killed = RunResult(run_id="caffe2-bf16-w1-b256-s64-real-tta-r5", status="timeout",
                       spec=dict(results[0].spec, repeat=5), reason="killed after the 60 s timeout",
                       accuracy={"aborted_mllog": "logs/x.20261205T082837Z.aborted.mllog"})
    shown = [t for t in accuracy.tables(results + [killed]) if t.name == "tta_not_reached"]
    assert len(shown) == 1
    assert shown[0].title == "Time-to-accuracy runs without a time to target"
    rows = {r["run"]: r for r in (dict(zip(shown[0].header, row)) for row in shown[0].rows)}
    assert set(rows) == {results[-1].run_id, killed.run_id}
    jax = rows[results[-1].run_id]
    assert [jax[k] for k in ("framework", "precision", "batch", "image", "N")] == [
        "JAX (Flax)", "bf16", "256", "64", "1"]  # its cell, as the time table names it
    assert (jax["status"], jax["epochs"], jax["best top-1"], jax["MLPerf log"]) == (
        "not_converged", "8", "2.400", results[-1].accuracy["mllog"])
    assert jax["reason"] == results[-1].reason
    late = rows[killed.run_id]
    assert (late["status"], late["epochs"], late["reason"], late["MLPerf log"]) == (
        "timeout", "n/a", "killed after the 60 s timeout", "logs/x.20261205T082837Z.aborted.mllog")


def test_report_json_of_a_time_to_accuracy_campaign_holds_its_figures(tmp_path, results):
    # report.json is the throughput cells' records: for an accuracy campaign it was [] and the
    # minutes to target, MLPerf score and epochs were in no machine-readable file of --format json
    import json

    from compare.stages.report import write as write_report
    from compare.store import Campaign
    campaign = Campaign.create(tmp_path / "c", {}, {})
    for r in results:
        campaign.save_result(r)
    _, paths, _ = write_report(campaign, tmp_path / "report", ("json",), price=2.5)
    assert tmp_path / "report" / "accuracy.json" in paths
    cells = json.loads((tmp_path / "report" / "accuracy.json").read_text())
    one = [c for c in cells if (c["framework"], c["gpus"]) == ("caffe2", 1)][0]
    assert (one["target"], one["runs"], one["converged"], one["epochs_to_target"]) == (
        0.9, 5, 5, [3, 3, 3, 3, 3])
    assert one["minutes_median"] == pytest.approx(1.1) and one["mlperf_score"] == pytest.approx(1.1)
    assert one["minutes_mean"] == pytest.approx(1.1) and one["minutes_ci95"] > 0
    assert one["cost_to_target"] == pytest.approx(2.5 * 1.1 / 60)
    # the table's $/M images too (it was in report.md and not in accuracy.json)
    assert one["cost_per_million_images"] == pytest.approx(2.5 * 1.1 / 60 / 0.09)  # 90,000 images
    jax = [c for c in cells if c["framework"] == "jax"][0]
    assert (jax["converged"], jax["mlperf_score"], jax["best"]) == (0, None, pytest.approx(2.4))
    assert [r["status"] for r in jax["run_records"]] == ["not_converged"]


def test_history_of_time_to_accuracy_campaigns_follows_their_minutes_to_target_not_throughput(
        tmp_path, results, capsys):
    # for campaigns of accuracy runs history said that none had a result yet, and to --resume
    # them, when every run had finished: it follows their minutes to target, a table per cell,
    # and an accuracy run is never a point of a throughput cell's history
    from compare.reporting import history
    from tests.helpers import main_exit, save_campaign, windowed
    save_campaign(tmp_path / "all" / "c", results, created_at="2026-12-01T09:00:00+00:00")
    save_campaign(tmp_path / "all" / "t", [windowed("caffe2", "bf16", 1, [100.0, 101.0], image=64)],
                  created_at="2026-12-02T09:00:00+00:00")  # a throughput campaign of the same cell
    code, out, _ = main_exit(["history", str(tmp_path / "all")], capsys)
    assert code == 0 and "has a result yet" not in out and "--resume" not in out
    assert "which history does not follow" not in out
    throughput, tta = out.split("## Time to accuracy: ", 1)
    assert "| c |" not in throughput and "| t |" in throughput
    assert out.count("## Time to accuracy: ") == 3 and "| t |" not in tta
    assert "| c |  | 0.9 | 1.10 ±0.20 |  | first figure |" in tta
    assert "| c |  | 0.9 | not_converged |  | no figure: not_converged |" in tta
    h = history.history(history.campaigns([tmp_path / "all"]))
    assert set(h.campaign) == {"t"}  # the throughput cells' frame holds no accuracy run


def test_diff_of_time_to_accuracy_campaigns_compares_their_runs_instead_of_leaving_them_out(
        tmp_path, results, capsys):
    # diff compared images/sec cells only: two accuracy campaigns gave "No comparable cells" and
    # "Cells: 0 better, ..." with no word of the 11 runs each held; it compares minutes to target
    from tests.helpers import main_exit, save_campaign
    a, b = save_campaign(tmp_path / "a", results), save_campaign(tmp_path / "b", results)
    code, out, err = main_exit(["diff", str(a), str(b)], capsys)
    assert code == 0 and "left out" not in err and "No comparable cells" not in out
    assert "over 2 comparable time-to-accuracy cells; 1 not comparable (listed below)." in out
    assert "| PyTorch (Caffe2) | bf16 | 256 | 64 | 1 | 1.10 ±0.20 | 1.10 ±0.20 | 1.00× ±0.21 | " \
           "within noise |" in out
    assert "| JAX (Flax) | bf16 | 256 | 64 | 1 | n/a | n/a | n/a | not comparable: A: no run reached " \
           "the target (1 of 1: not_converged, target not reached) |" in out
    assert out.rstrip().endswith("Cells: 0 better, 0 worse, 2 within noise, 1 not comparable.")


def test_a_report_of_accuracy_runs_alone_shows_its_table_before_where_the_time_went(
        tmp_path, results, capsys):
    # its opening line, then the duty cycle and the Study line, and only then the table the
    # campaign was run for: a throughput report puts its own tables first, as this one does now
    from tests.helpers import main_exit, save_campaign
    for i, r in enumerate(results):
        r.phases = {"cell_start": 10.0 * i, "launched": 10.0 * i + 1, "timed_start": 10.0 * i + 2,
                    "timed_end": 10.0 * i + 8, "cell_end": 10.0 * i + 9}
    code, out, err = main_exit(["report", str(save_campaign(tmp_path / "c", results))], capsys)
    assert code == 0, err
    assert "\nStudy: " in out
    assert out.index("## Time to accuracy (minutes to target)") < out.index("\nStudy: ") < \
        out.index("\nMachine: ")


def test_a_target_no_better_than_chance_is_said_under_the_table():
    # 4 classes, target 0.25: a network that learned nothing (one class for every image) scores
    # 0.25 on a balanced val/, and the table read as if it had been trained to its target
    import dataclasses
    runs = []
    for target, classes in ((0.25, 4), (0.3, 4), (0.1, 20)):
        r = _result("caffe2", 1, 0, 1.0, 100)
        spec = dataclasses.replace(RunSpec.from_dict(r.spec), target_accuracy=target,
                                   num_classes=classes)
        runs.append(dataclasses.replace(r, spec=spec.to_dict()))
    notes = accuracy.tables(runs[:1])[0].notes
    assert notes[-1] == ("Target top-1 0.25 is no better than chance with 4 classes (1/4 = 0.25 "
                         "on a balanced val/): a network that learned nothing reaches it; give a "
                         "--target-accuracy well above 1/classes.")
    for above in runs[1:]:  # 0.3 of 4 classes, 0.1 of 20: above chance, no note
        assert not [n for n in accuracy.tables([above])[0].notes if "chance" in n]


def test_diff_of_accuracy_campaigns_with_other_targets_says_so_before_convergence(tmp_path, capsys):
    # A trained to 0.99 and did not get there, B to 0.5: the row said "A: no run reached the
    # target", as if A were slower at the same task; the targets differ, and that is said first
    from tests.helpers import main_exit, save_campaign
    a = [_result("jax", 1, 0, 2.0, 9000, status="not_converged", epochs=8, target=0.99)]
    b = [_result("jax", 1, 0, 1.0, 9000, target=0.5)]
    ra, rb = save_campaign(tmp_path / "a", a), save_campaign(tmp_path / "b", b)
    code, out, err = main_exit(["diff", str(ra), str(rb)], capsys)
    assert code == 0, err
    assert "not comparable: settings differ: target 0.99 vs 0.5 |" in out
    assert "no run reached the target" not in out


def test_the_html_page_of_accuracy_runs_alone_is_headed_time_to_accuracy(tmp_path, results):
    """A campaign of time-to-accuracy runs alone was headed 'Training throughput — compare
    report' (it measured no throughput cell): its page names its network and what it measured."""
    from compare.stages.report import write as write_report
    from compare.store import Campaign
    campaign = Campaign.create(tmp_path / "c", {}, {})
    for r in results:
        campaign.save_result(r)
    write_report(campaign, tmp_path / "report", ("html",))
    page = (tmp_path / "report" / "report.html").read_text()
    assert "<h1>ResNet-50 v1.5 time to accuracy — compare report</h1>" in page
    assert "Training throughput" not in page


def test_minutes_to_target_of_seeds_that_differ_never_read_plus_or_minus_zero(tmp_path, capsys):
    """Five MXNet seeds of 0.158-0.162 min on a CPU read '0.16 ±0.00' in the report, in diff and
    in history, as if the seeds agreed to the second: the interval takes the decimals it needs
    (as a ratio's does), the minutes as many."""
    from tests.helpers import main_exit, save_campaign
    minutes = [0.16115, 0.16003, 0.16002, 0.1584, 0.16195]
    runs = [_result("caffe2", 1, r, m, 100) for r, m in enumerate(minutes)]
    row = _rows(accuracy.tables(runs)[0])[("PyTorch (Caffe2)", "bf16", "256", "64", "1")]
    assert row["minutes to target"] == "0.160 ±0.002"
    a = save_campaign(tmp_path / "a", runs, created_at="2026-12-01T09:00:00+00:00")
    b = save_campaign(tmp_path / "b", runs, created_at="2026-12-02T09:00:00+00:00")
    code, out, err = main_exit(["diff", str(a), str(b)], capsys)
    assert code == 0, err
    assert "| 0.160 ±0.002 | 0.160 ±0.002 |" in out and "±0.00 " not in out
    code, out, err = main_exit(["history", str(a), str(b)], capsys)
    assert code == 0, err
    assert "| 0.160 ±0.002 |" in out and "±0.00 " not in out


def test_initialisation_and_compilation_are_reported_beside_time_to_train(tmp_path, results):
    """README and docs/accuracy.md promise init_s and compile_s 'reported beside' minutes to
    target, and every result records them; the report and accuracy.json showed neither."""
    import json

    from compare.stages.report import write as write_report
    from compare.store import Campaign
    for i, r in enumerate(results):
        r.accuracy.update(init_s=10.0 + i, compile_s=4.0 + i)
    rows = _rows(accuracy.tables(results)[0])
    one = rows[("PyTorch (Caffe2)", "bf16", "256", "64", "1")]
    assert one["init s (compile)"] == "12.0 (6.0)"  # medians of 10..14 and 4..8
    assert "init" in accuracy.tables(results)[0].notes[0]
    campaign = Campaign.create(tmp_path / "c", {}, {})
    for r in results:
        campaign.save_result(r)
    write_report(campaign, tmp_path / "report", ("json",))
    cells = json.loads((tmp_path / "report" / "accuracy.json").read_text())
    c = [c for c in cells if (c["framework"], c["gpus"]) == ("caffe2", 1)][0]
    assert (c["init_s_median"], c["compile_s_median"]) == (12.0, 6.0)
    assert [x["init_s"] for x in c["run_records"]] == [10.0, 11.0, 12.0, 13.0, 14.0]
    assert [x["compile_s"] for x in c["run_records"]] == [4.0, 5.0, 6.0, 7.0, 8.0]


def test_baseline_and_reference_for_accuracy_runs_alone_say_they_are_not_used(tmp_path, results,
                                                                              capsys):
    """`compare report TTA --baseline caffe2` said "no cell of the campaign ran it; choose from
    none (no results yet)" of a campaign of caffe2 results, exit 2; `--reference NAME` was
    dropped without a word. Both divide throughput cells: said unused, as --gpu-hour-price is."""
    from tests.helpers import main_exit, save_campaign
    root = save_campaign(tmp_path / "c", results)
    code, out, err = main_exit(["report", str(root), "--baseline", "caffe2"], capsys)
    assert code == 0, err
    assert "no results yet" not in err and "## Time to accuracy (minutes to target)" in out
    assert "compare: warning: --baseline caffe2: not used: it divides throughput cells "\
           "(framework versus framework), and this campaign has time-to-accuracy runs alone" in err
    code, out, err = main_exit(["report", str(root), "--reference", "a6000_tf_cnn_benchmarks"],
                               capsys)
    assert code == 0, err
    assert "compare: warning: --reference a6000_tf_cnn_benchmarks: not used: published images/sec "\
           "are held against throughput cells, and this campaign has time-to-accuracy runs " \
           "alone" in err


def test_the_history_chart_joins_only_points_of_one_target(monkeypatch):
    """History's chart of a time-to-accuracy cell drew one line through campaigns of target 0.3
    and then 0.5 (0.08 then 0.16 min: a slowdown to the eye), where its table says 'not
    comparable: settings differ: target 0.3 vs 0.5'; each target is now a line of its own."""
    import pandas as pd

    from compare.reporting import charts
    drawn = []
    monkeypatch.setattr(charts, "_png", lambda fig: drawn.append(fig) or b"png")
    t = pd.DataFrame({"framework": ["mxnet"] * 4, "target": [0.3, 0.5, 0.5, 0.3],
                      "minutes": [0.08, 0.16, 0.17, 0.09], "minutes_ci95": [None, 0.01, 0.01, None],
                      "regression": [False] * 4, "date": ["2026-12-0{}".format(i) for i in range(1, 5)],
                      "commit": ["0123456789"] * 4})
    assert charts.tta_history(t, "Time to accuracy: x") is not None
    lines = [sorted(float(y) for y in line.get_ydata()) for line in drawn[0].axes[0].get_lines()
             if line.get_linestyle() not in ("None", "none", "")]  # not the error bars' caps
    assert sorted(lines) == [[0.08, 0.09], [0.16, 0.17]], lines
    assert sorted(x.get_text() for x in drawn[0].axes[0].get_legend().get_texts()) == [
        "target 0.3", "target 0.5"]


def test_diff_and_history_of_other_max_epochs_or_eval_every_say_the_settings_differ(tmp_path,
                                                                                     capsys):
    """--max-epochs sets the learning-rate schedule (warm-up, then decay to its end) and
    --eval-every when the target is seen; two campaigns of one target but another of either
    were divided as the same measurement ('better'), where the plan already tells them apart."""
    from tests.helpers import main_exit, save_campaign
    minutes = [1.0, 1.2, 1.1, 0.9, 1.3]

    def runs(scale, **fields):
        import dataclasses
        out = []
        for i, m in enumerate(minutes):
            r = _result("caffe2", 1, i, m * scale, 10000)
            spec = dataclasses.replace(RunSpec.from_dict(r.spec), **fields)
            out.append(dataclasses.replace(r, spec=spec.to_dict(), run_id=spec.run_id))
        return out
    a = save_campaign(tmp_path / "a", runs(1.0), created_at="2026-12-01T09:00:00+00:00")
    b = save_campaign(tmp_path / "b", runs(0.5, max_epochs=3), created_at="2026-12-02T09:00:00+00:00")
    c = save_campaign(tmp_path / "c", runs(0.5, eval_every=2), created_at="2026-12-03T09:00:00+00:00")
    code, out, err = main_exit(["diff", str(a), str(b)], capsys)
    assert code == 0, err
    assert "not comparable: settings differ: max_epochs 8 vs 3 |" in out
    assert "Cells: 0 better, 0 worse, 0 within noise, 1 not comparable." in out
    code, out, err = main_exit(["diff", str(a), str(c)], capsys)
    assert "not comparable: settings differ: eval_every 1 vs 2 |" in out
    code, out, err = main_exit(["history", str(a), str(b)], capsys)
    assert code == 0 and "not comparable: settings differ: max_epochs 8 vs 3 |" in out
