"""MLPerf's view of time-to-accuracy runs: each run's log checked by mlperf-logging's compliance
checker, and the score of a set of runs computed as mlperf-logging's result summarizer does.

    python -m mlperf_logging.compliance_checker --usage training --ruleset 4.0.0 LOG

checks a log as an open-division ResNet submission (compare's logs say so: backends/accuracy.py).
The score (result_summarizer `_compute_strong_score_standalone`) is the olympic mean of the runs'
minutes from run_start to run_stop: with N runs of which D did not converge (at most 1; more and
there is no score), sort the minutes of the others, drop the fastest and, unless a non-converged
run was already dropped in its place, the slowest, and average the rest. compare computes it from
the same log lines (backends/mllog.read); tests check it equals mlperf-logging's own.
"""
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import List, Optional, Sequence

from backends.contract.shared import mllog

USAGE, RULESET = "training", "4.0.0"
MAX_DROPPED = 1  # mlperf-logging's max_dropped_scores for every benchmark but unet3d
REQUIRED_RUNS = 5  # mlperf-logging's result file count for resnet (benchmark_meta)


@dataclass
class Check:
    """The compliance checker's verdict on one log."""
    path: str
    passed: bool
    output: str  # what the checker said (its last lines where it failed)

    def line(self) -> str:
        if self.passed:
            return "{}: passes mlperf-logging's compliance checker ({} {}, open ResNet)".format(
                self.path, USAGE, RULESET)
        return "{}: fails mlperf-logging's compliance checker: {}".format(
            self.path, " | ".join(self.output.strip().splitlines()[-6:]))


def check(path: str, python: str = sys.executable, timeout: float = 120.0) -> Check:
    """Run the compliance checker on one log, as its README says (a process of its own: the
    checker keeps module-level state between files)."""
    with tempfile.TemporaryDirectory(prefix="compare-mlperf-") as tmp:
        cmd = [python, "-m", "mlperf_logging.compliance_checker", "--usage", USAGE,
               "--ruleset", RULESET, "--log_output", os.path.join(tmp, "checker.log"),
               os.path.abspath(path)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=tmp)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Check(path, False, "could not run the checker: {}".format(exc))
    out = proc.stdout + proc.stderr
    return Check(path, proc.returncode == 0 and "SUCCESS" in out, out)


def run_minutes(path: str) -> Optional[float]:
    """Minutes from run_start to run_stop of one log, as mlperf-logging's summarizer reads them
    (the first of each); None when either is missing (a run that was killed)."""
    start = stop = None
    for event in mllog.read(path):
        if event.get("key") == "run_start" and start is None:
            start = float(event["time_ms"])
        elif event.get("key") == "run_stop" and stop is None:
            stop = float(event["time_ms"])
    return None if start is None or stop is None else (stop - start) / 60 / 1000


def converged(path: str) -> bool:
    """Whether the run stopped at its target: run_stop with status success."""
    return any(e.get("key") == "run_stop" and (e.get("metadata") or {}).get("status") == "success"
               for e in mllog.read(path))


def olympic_mean(minutes: Sequence[float], dropped: int = 0) -> Optional[float]:
    """mlperf-logging's _compute_olympic_average with max_dropped_scores = 1: `dropped` runs
    that did not converge count as the slowest. None when nothing is left or too many were
    dropped."""
    if dropped > MAX_DROPPED:
        return None
    kept = sorted(minutes)[MAX_DROPPED:len(minutes) - (MAX_DROPPED - dropped)]
    return sum(kept) / len(kept) if kept else None


def score(paths: Sequence[str]) -> Optional[float]:
    """The MLPerf score (minutes) of one cell's runs from their logs: the olympic mean of the
    converged runs' times to train, a run that did not converge dropped as mlperf-logging drops
    one that fails its checks. None for fewer than REQUIRED_RUNS logs or more than one dropped."""
    if len(paths) < REQUIRED_RUNS:
        return None
    good: List[float] = []
    for path in paths:
        minutes = run_minutes(path)
        if minutes is not None and converged(path):
            good.append(minutes)
    return olympic_mean(good, len(paths) - len(good))
