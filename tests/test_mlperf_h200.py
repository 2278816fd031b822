"""The MLPerf logs of the 20 time-to-accuracy runs on one H200 (BENCHMARKS.md, "Time to accuracy
on one H200": PyTorch and JAX, fp16 and bf16, 5 seeds each), kept as they came back: every one
passes mlperf-logging's compliance checker, and compare's score of each 5-seed set is the one
mlperf-logging's own scoring code computes from the same files."""
import shutil
from pathlib import Path

import pytest
from mlperf_logging.result_summarizer import result_summarizer as summarizer

from compare import mlperf

LOGS = Path(__file__).parent / "data" / "mllogs-h200"
SETS = [(fw, p) for fw in ("caffe2", "jax") for p in ("fp16", "bf16")]


def _logs(fw, precision):
    return sorted(LOGS.glob("{}-{}-g1-b256-s64-real-tta-r*.mllog".format(fw, precision)))


def test_every_h200_log_passes_the_compliance_checker():
    logs = sorted(LOGS.glob("*.mllog"))
    assert len(logs) == 20
    failed = [p.name for p in logs if not mlperf.check(str(p)).passed]
    assert failed == []


@pytest.mark.parametrize("fw,precision", SETS)
def test_the_score_of_each_five_seed_set_is_mlperf_loggings(tmp_path, fw, precision):
    logs = _logs(fw, precision)
    assert len(logs) == 5 and all(mlperf.converged(str(p)) for p in logs)
    for i, p in enumerate(logs):  # the summarizer reads result_<i>.txt of one folder
        shutil.copy(str(p), str(tmp_path / "result_{}.txt".format(i)))
    theirs, _, _ = summarizer._compute_strong_score_standalone(
        "resnet", None, False, str(tmp_path), mlperf.USAGE, mlperf.RULESET)
    ours = mlperf.score([str(p) for p in logs])
    assert ours == pytest.approx(theirs, rel=1e-12)
    minutes = sorted(mlperf.run_minutes(str(p)) for p in logs)
    assert minutes[0] < ours < minutes[-1]  # the fastest and the slowest dropped
