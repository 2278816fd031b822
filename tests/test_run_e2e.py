"""`compare run` end to end on the CPU with the real PyTorch backend, then `compare report`."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compare.cli import main
from tests.helpers import assert_phases

pytestmark = pytest.mark.backend  # a real framework in its environment

ROOT = Path(__file__).resolve().parent.parent
# the managed-environment path (the embedded default without Docker); containers: test_docker.py
TINY = ["--image-size", "32", "--batch-size", "4", "--steps", "2", "--warmup", "1", "--windows", "2",
        "--device", "cpu", "--executor", "local"]


def _compare(argv, capsys, code=0):
    with pytest.raises(SystemExit) as e:
        main(argv)
    out, err = capsys.readouterr()
    assert e.value.code == code, err
    return out, err


def test_one_and_two_workers_fp32_and_bf16(tmp_path, capsys):
    campaign = tmp_path / "c"
    out, err = _compare(["run", "--frameworks", "caffe2", "--gpus", "1,2", "--precision", "fp32,bf16",
                         "--results", str(campaign)] + TINY, capsys)
    assert "| PyTorch (Caffe2) | fp32 | 4 | 32 |" in out
    _compare(["report", str(campaign), "--format", "json,csv,md", "--out", str(tmp_path / "rep")], capsys)
    cells = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert len(cells) == 4
    assert [c["status"] for c in cells] == ["ok"] * 4, [c.get("reason") for c in cells]
    for c in cells:
        assert c["images_per_sec"] > 0
        assert set(c) >= {"framework", "precision", "gpus", "batch_size", "image_size", "status",
                          "images_per_sec", "speedup", "scaling_efficiency", "precision_gain"}
        if c["gpus"] == 1:
            assert c["speedup"] == 1.0
        if c["precision"] == "bf16":
            assert c["precision_gain"] is not None
    for path in (campaign / "results").glob("*.json"):
        assert_phases(json.loads(path.read_text()))
    report_md = (tmp_path / "rep" / "report.md").read_text()
    assert "## Where the time goes" in report_md and "Duty cycle: " in report_md
    two = json.loads((campaign / "results" / "caffe2-fp32-w2-b4-s32-r0.json").read_text())
    assert (two["distribution"], two["world_size"], two["global_batch"]) == ("ddp", 2, 8)
    assert two["settings"]["process_group"] == "gloo"
    assert (campaign / "logs" / "caffe2-fp32-w2-b4-s32-r0.stderr").exists()
    assert json.loads((campaign / "machine.json").read_text())["cpu_count"] == os.cpu_count()


def test_a_crashing_run_is_recorded_and_the_sweep_goes_on(tmp_path, capsys):
    campaign = tmp_path / "c"
    # tf32 cannot run on a CPU (unsupported); fail_at=setup -> a crash inside the backend
    _compare(["run", "--frameworks", "caffe2", "--precision", "tf32,fp32", "--results", str(campaign),
              "--option", "caffe2.fail_at=setup"] + TINY, capsys, code=1)  # 1: a cell failed
    results = {p.stem: json.loads(p.read_text()) for p in (campaign / "results").glob("*.json")}
    assert results["caffe2-tf32-w1-b4-s32-r0"]["status"] == "unsupported"
    crashed = results["caffe2-fp32-w1-b4-s32-r0"]
    assert crashed["status"] == "failed"
    assert "InjectedFailure: fail_at=setup on rank 0" in crashed["reason"] and "Traceback" in crashed["stderr_tail"]


def test_report_skips_a_corrupt_result(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a relative --results, as a user types it
    campaign = tmp_path / "c"
    _compare(["run", "--frameworks", "caffe2", "--results", "c"] + TINY, capsys)
    result = json.loads((campaign / "results" / "caffe2-fp32-w1-b4-s32-r0.json").read_text())
    assert result["status"] == "ok", result["reason"]
    (campaign / "results" / "broken.json").write_text("{not json")
    out, err = _compare(["report", str(campaign)], capsys)
    assert "compare: warning: skipped corrupt result broken.json" in err
    assert "| PyTorch (Caffe2) | fp32 | 4 | 32 |" in out


def test_resume_after_kill_repeats_no_finished_cell(tmp_path):
    campaign = tmp_path / "c"
    argv = [sys.executable, "-m", "compare", "run", "--frameworks", "caffe2", "--gpus", "1,2",
            "--precision", "fp32,bf16", "--results", str(campaign)] + TINY
    proc = subprocess.Popen(argv, cwd=str(ROOT), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 600
    while time.time() < deadline and len(list((campaign / "results").glob("*.json"))) < 1:
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = {p.stem: json.loads(p.read_text())["started_at"]
              for p in (campaign / "results").glob("*.json")}
    assert 1 <= len(before) < 4
    subprocess.run(argv + ["--resume"], cwd=str(ROOT), check=True, capture_output=True)
    after = {p.stem: json.loads(p.read_text()) for p in (campaign / "results").glob("*.json")}
    assert len(after) == 4 and all(r["status"] == "ok" for r in after.values())
    for run_id, started in before.items():
        assert after[run_id]["started_at"] == started, "finished cell {} was run again".format(run_id)
    sessions = json.loads((campaign / "campaign.json").read_text())["sessions"]
    assert len(sessions) == 2


def test_time_to_accuracy_from_the_command_line(tmp_path, capsys):
    # a learnable set of 4 classes at 32x32 (tests/backends/test_accuracy.py: ResNet-50 passes 0.5
    # within a few epochs); the run reaches the target or is not_converged, never a silent stop
    data, campaign = tmp_path / "data", tmp_path / "c"
    _compare(["data", "make", str(data), "--learnable", "small", "--classes", "4", "--images", "64",
              "--workers", "1"], capsys)
    out, err = _compare(["run", "--frameworks", "caffe2", "--target-accuracy", "0.5", "--data", str(data),
                         "--max-epochs", "3", "--quick", "--image-size", "32", "--batch-size", "8",
                         "--option", "loader_workers=1", "--gpu-hour-price", "2.5", "--results",
                         str(campaign), "--device", "cpu", "--executor", "local"], capsys)
    result = json.loads((campaign / "results" / "caffe2-fp32-w1-b8-s32-real-tta-r0.json").read_text())
    assert result["status"] in ("ok", "not_converged"), result["reason"]
    assert result["spec"]["num_classes"] == 4 and result["accuracy"]["epochs"] <= 3
    assert (campaign / result["accuracy"]["mllog"]).is_file()
    assert "## Time to accuracy (minutes to target)" in out and "$ to target" in out
