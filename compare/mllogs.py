"""Where a campaign keeps the MLPerf logs of its time-to-accuracy runs (docs/accuracy.md).

A backend writes `mlperf.log` beside the result file it was given (the run's work folder,
rank 0 only: backends/accuracy.py). When the run is collected, the log moves to
`logs/<run_id>.mllog`, and the result's accuracy['mllog'] names it. An attempt that ended
without a finished result (failed, timed out, killed) keeps its partial log as
`logs/<run_id>.<UTC time>.aborted.mllog`, marked with a closing comment line (mlperf-logging's
parser reads only `:::MLLOG` lines) saying what ended it and what becomes of the cell: one failed
or stopped by Ctrl-C runs again on `--resume` as a new attempt, whose log is its own.
"""
import datetime
import os
import shlex
from pathlib import Path
from typing import Any, Dict, Optional

from backends.contract import RunResult
from backends.contract.shared import mllog

from . import files

FINISHED = ("ok", "not_converged")  # a run whose loop ended: its log holds run_stop
ANSWERS = ("oom", "unsupported", "skipped")  # unfinished, but --resume does not run them (store.py)
SUFFIX = ".mllog"


def keep(campaign_root: Path, work: Optional[Path], result: RunResult,
         stopped: bool = False) -> Optional[Path]:
    """After collecting `result` from the work folder: move its MLPerf log into logs/ (aborted
    when the run did not finish). `stopped`: the sweep was interrupted (Ctrl-C, SIGTERM, SIGHUP)
    and stopped the run, whose result is not recorded. Returns where it went (None: no log)."""
    source = Path(work) / mllog.FILE_NAME if work is not None else None
    if source is None or not source.is_file():
        return None
    resume = "`compare run --results {} --resume` runs the cell again as a new attempt".format(
        shlex.quote(str(campaign_root)))
    if stopped:  # its result is a failure of the stop itself (killed by SIGTERM), never saved
        return keep_aborted(campaign_root, result.run_id, work,
                            "interrupted: compare was stopped while it ran",
                            then="not recorded: " + resume)
    if result.status in FINISHED:
        dest = Path(campaign_root) / "logs" / (result.run_id + SUFFIX)
        files.move(source, dest, Path(campaign_root))
        if isinstance(result.accuracy, dict) and result.accuracy:
            result.accuracy["mllog"] = os.path.join("logs", dest.name)
        return dest
    dest = keep_aborted(campaign_root, result.run_id, work,
                        "{}: {}".format(result.status, ((result.reason or "").splitlines() or [""])[0]),
                        then="the cell's answer: --resume does not run it again"
                        if result.status in ANSWERS else "recorded as {}: {}".format(
                            result.status, resume))
    if dest is not None and isinstance(result.accuracy, dict):
        result.accuracy["aborted_mllog"] = os.path.join("logs", dest.name)
        for key, value in partial(dest).items():
            result.accuracy.setdefault(key, value)
    return dest


def partial(path: Path) -> Dict[str, Any]:
    """What a partial log says of a run that did not finish (the report's seed, epochs and best
    top-1 of its row): the seed it trained with, the epochs it completed, its best evaluation."""
    out: Dict[str, Any] = {}
    for event in mllog.read(str(path)):
        key, value = event.get("key"), event.get("value")
        if key == "seed":
            out["seed"] = value
        elif key == "run_start":  # training began: 0 epochs completed until an epoch_stop
            out["epochs"] = 0
        elif key == "epoch_stop":
            out["epochs"] = (event.get("metadata") or {}).get("epoch_num", out.get("epochs", 0))
        elif key == "eval_accuracy" and isinstance(value, (int, float)):
            out["best"] = max(value, out.get("best", value))
    return out


def keep_aborted(campaign_root: Path, run_id: str, work: Path,
                 why: str = "the attempt was not collected (compare was stopped)",
                 then: Optional[str] = None) -> Optional[Path]:
    """Keep a partial log that `work` holds as logs/<run_id>.<time>.aborted.mllog, before the
    folder is reused by a new attempt. None when there is none. `then`: what becomes of the cell
    (default: it runs again as a new attempt, as it is about to)."""
    source = Path(work) / mllog.FILE_NAME
    if not source.is_file() or source.is_symlink():
        return None
    stamp = datetime.datetime.fromtimestamp(source.stat().st_mtime, datetime.timezone.utc)
    dest = Path(campaign_root) / "logs" / "{}.{}.aborted{}".format(
        run_id, stamp.strftime("%Y%m%dT%H%M%SZ"), SUFFIX)
    files.move(source, dest, Path(campaign_root))
    files.append_text(dest, "# compare: attempt aborted ({}); {}\n".format(
        why.replace("\n", " "), then or "the cell ran again as a new attempt"), Path(campaign_root))
    return dest
