"""A cell that ran 5 runs, one of which timed out: the tables that need 5 runs with a figure (the
MLPerf mean of the repeats, MLPerf's score of time to accuracy) said 'n<5' of a cell that ran 5;
they say '4 of 5 runs' and what became of the fifth."""
from compare.reporting import accuracy, comparator, report, tables, write_files
from tests.helpers import result, windowed
from tests.test_mlperf_report import _result

WINDOWS = [990.0, 1005.0, 1000.0, 1012.0, 996.0]


def test_repeats_table_says_4_of_5_runs_and_the_timeout_where_it_said_n_under_5(tmp_path):
    runs = [windowed("caffe2", "fp32", 1, WINDOWS, repeat=i) for i in range(4)]
    runs.append(result("caffe2", "fp32", 1, status="timeout", reason="no result after 600 s", repeat=4))
    df = comparator.cells(runs)
    text, _ = write_files(df, tmp_path, ["md", "csv"], None, runs)
    repeats = text.split("## Repeats")[1].split("##")[0]
    row = [line for line in repeats.splitlines() if line.startswith("| PyTorch")][0]
    assert row.endswith("| 4 of 5 runs (1 timeout) |") and "n<5" not in row
    assert "1000.60 (4 of 5 runs)" in text  # the images table, as before
    assert "| 4 of 5 | r4: timeout: no result after 600 s |" in text  # and why, as before
    assert (tmp_path / "tables" / "repeats.csv").read_text().rstrip().endswith(
        ",4 of 5 runs (1 timeout)")


def test_a_cell_of_fewer_runs_keeps_n_under_5():
    runs = [windowed("caffe2", "fp32", 1, WINDOWS, repeat=i) for i in range(3)]
    text = tables.markdown(report.build(comparator.cells(runs)).sections())
    assert text.split("## Repeats")[1].split("\n\n")[1].splitlines()[-1].endswith("| n<5 |")


def test_mlperf_score_says_4_of_5_runs_and_the_timeout_where_it_said_n_under_5():
    runs = [_result("caffe2", 1, r, m, 100) for r, m in enumerate([1.0, 1.2, 1.1, 0.9])]
    late = _result("caffe2", 1, 4, 1.0, None, status="timeout")
    runs.append(late)
    table = accuracy.tables(runs)[0]
    row = dict(zip(table.header, table.rows[0]))
    assert (row["converged"], row["MLPerf score"]) == ("4/5", "4 of 5 runs (1 timeout)")


def test_a_reason_that_reads_like_another_run_is_not_counted_as_one():
    """failed_runs is prose ('r4: oom: …; r2: timeout'): its statuses were read back out of it, so
    a reason holding '; r2: timeout' counted a timeout that never happened."""
    runs = [windowed("caffe2", "fp32", 1, WINDOWS, repeat=i) for i in range(4)]
    runs.append(result("caffe2", "fp32", 1, status="oom", repeat=4,
                       reason="NCCL watchdog; r2: timeout: the allocator retried for 600 s"))
    df = comparator.cells(runs)
    text = tables.markdown(report.build(df).sections())
    repeats = text.split("## Repeats")[1].split("##")[0]
    row = [line for line in repeats.splitlines() if line.startswith("| PyTorch")][0]
    assert row.endswith("| 4 of 5 runs (1 oom) |"), row
    # what users read of the run is as it was
    assert "| 4 of 5 | r4: oom: NCCL watchdog; r2: timeout: the allocator retried for 600 s |" in text
