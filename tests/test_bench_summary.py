"""bench/tuned_summary.py, the tables of bench/tuned_gpu.sh's device calls, read on a campaign
this repository keeps: a device call's summary must not end in a traceback (it did, on the
study's wall time, after timeline.study stopped returning a cell count of its own)."""
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_summary_gives_the_studys_wall_time_with_its_runs_counted(tmp_path):
    shutil.copytree(ROOT / "tests" / "fixtures" / "campaign_cpu" / "campaign", tmp_path / "study")
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "tuned_summary.py"), str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    row = next(line for line in out.stdout.splitlines() if line.startswith("study "))
    runs = len(list((tmp_path / "study" / "results").glob("*.json")))
    assert row.split()[1] == str(runs)  # the campaign's runs, its one row of the walls table
