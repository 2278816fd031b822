"""The soak's cases on the newer surfaces of `compare run`, each run once when this compare has the
flag it needs (else said to be skipped, with why):

- time to accuracy (--target-accuracy): a PyTorch cell on a tiny learnable set, its compare
  SIGKILLed in the middle of training (a second after its MLPerf log's first epoch_start); the
  resumed session runs it again as a new attempt. Checked: the killed attempt's log kept as an
  aborted log (an epoch begun, no run_stop), the cell finished (`ok` or `not_converged`) with a
  log of its own.
- a campaign file (--config): a study from a TOML file, compare SIGKILLed mid-cell; campaign.json's
  study is the same after the resume as before the kill.

Each returns (faults injected, problems found).
"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Tuple

TTA_FLAGS = ["--frameworks", "caffe2", "--device", "cpu", "--executor", "local", "--batch-size",
             "4", "--image-size", "32", "--target-accuracy", "0.99", "--max-epochs", "2"]


def has_flag(root: Path, flag: str) -> bool:
    out = subprocess.run([sys.executable, "-m", "compare", "run", "--help"], cwd=str(root),
                         capture_output=True, text=True, env=dict(os.environ, COLUMNS="300"))
    return flag in out.stdout


def _start(root: Path, args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "compare"] + [str(a) for a in args],
                            cwd=str(root), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, env=dict(os.environ, COLUMNS="300"))


def _wait_for(predicate, seconds: float, proc: subprocess.Popen) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def _epochs(log: Path) -> int:
    try:
        return log.read_text().count('"key": "epoch_start"')
    except OSError:
        return 0


def time_to_accuracy(root: Path, out: Path) -> Tuple[int, List[str]]:
    """SIGKILL of compare mid-training of a time-to-accuracy cell, then --resume."""
    if not has_flag(root, "--target-accuracy"):
        return 0, ["time to accuracy: skipped (this compare run has no --target-accuracy)"]
    data, campaign = out / "learnable", out / "tta"
    subprocess.run([sys.executable, "-m", "compare", "data", "make", str(data), "--learnable",
                    "small", "--classes", "2", "--images", "24", "--workers", "1"], cwd=str(root),
                   check=True, capture_output=True)
    args = ["run"] + TTA_FLAGS + ["--data", data, "--results", campaign]
    first = _start(root, args)
    logs = lambda: list((campaign / "work").glob("*/mlperf.log"))  # noqa: E731
    midway = _wait_for(lambda: any(_epochs(p) >= 1 for p in logs()), 900, first)
    time.sleep(1.0)  # into the epoch's steps
    if first.poll() is None:
        os.kill(first.pid, signal.SIGKILL)
    first.wait()
    if not midway:
        return 0, ["time to accuracy: the cell never began an epoch ({})".format(
            first.stderr.read()[-500:])]
    again = subprocess.run([sys.executable, "-m", "compare"] + [str(a) for a in args] + ["--resume"],
                           cwd=str(root), capture_output=True, text=True, timeout=1800)
    problems = [] if again.returncode == 0 else ["time to accuracy: resume exit {}: {}".format(
        again.returncode, again.stderr[-500:])]
    results = list((campaign / "results").glob("*.json"))
    done = json.loads(results[0].read_text()) if len(results) == 1 else {}
    aborted = list((campaign / "logs").glob("*.aborted.mllog"))
    if done.get("status") not in ("ok", "not_converged"):
        problems.append("time to accuracy: the cell ended {}".format(done.get("status")))
    if len(aborted) != 1 or '"key": "run_stop"' in aborted[0].read_text() or \
            _epochs(aborted[0]) < 1:
        problems.append("time to accuracy: the killed attempt's log was not kept as aborted: "
                        "{}".format([p.name for p in aborted]))
    own = (campaign / (done.get("accuracy") or {}).get("mllog", "missing"))
    if not own.is_file() or '"key": "run_stop"' not in own.read_text():
        problems.append("time to accuracy: the new attempt has no log of its own")
    return 1, problems


CONFIG = """frameworks = ["caffe2"]
device = "cpu"
executor = "local"
gpus = [1, 2]
batch_size = [2]
image_size = 32
steps = 1
warmup = 0
windows = 1
"""


def campaign_file(root: Path, out: Path) -> Tuple[int, List[str]]:
    """SIGKILL of compare mid-cell of a study read from a campaign file; its study reloads
    unchanged on --resume."""
    if not has_flag(root, "--config"):
        return 0, ["campaign file: skipped (this compare run has no --config)"]
    path, campaign = out / "study.toml", out / "config"
    path.write_text(CONFIG)
    first = _start(root, ["run", "--config", path, "--results", campaign])
    _wait_for(lambda: list((campaign / "work").glob("*")), 600, first)
    meta = campaign / "campaign.json"
    before = json.loads(meta.read_text()) if meta.is_file() else {}
    if first.poll() is None:
        os.kill(first.pid, signal.SIGKILL)
    first.wait()
    again = subprocess.run([sys.executable, "-m", "compare", "run", "--results", str(campaign),
                            "--resume"], cwd=str(root), capture_output=True, text=True, timeout=1800)
    after = json.loads(meta.read_text()) if meta.is_file() else {}
    problems = [] if again.returncode == 0 else ["campaign file: resume exit {}: {}".format(
        again.returncode, again.stderr[-500:])]
    keep = [k for k in before if k not in ("sessions", "planned")]
    if not before or any(before[k] != after.get(k) for k in keep):
        problems.append("campaign file: campaign.json's study changed across the kill: {}".format(
            [k for k in keep if before[k] != after.get(k)]))
    studies = [(s.get("config") or {}).get("study") for s in after.get("sessions") or [{}]]
    if len(studies) < 2 or any(study != studies[0] for study in studies):
        problems.append("campaign file: the resumed session ran another study than the file's")
    return 1, problems
