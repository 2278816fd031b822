"""The spread of a run's timed windows, as the harness records it and the host's report
recomputes it over repeats: one definition, standard library only, Python >= 3.8."""
import math
import statistics
from typing import Optional, Sequence


def median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs))


def uncertainty(xs: Sequence[float]) -> Optional[float]:
    """Standard error of the mean: std / sqrt(n), as tf_cnn_benchmarks prints it.
    None (n/a) for one window: a single figure says nothing about its spread."""
    if len(xs) < 2:
        return None
    return statistics.stdev(xs) / math.sqrt(len(xs))


def jitter(xs: Sequence[float]) -> Optional[float]:
    """1.4826 * median absolute deviation: a robust spread, as tf_cnn_benchmarks prints it.
    None (n/a) for one window, like the uncertainty."""
    if len(xs) < 2:
        return None
    m = statistics.median(xs)
    return 1.4826 * statistics.median([abs(x - m) for x in xs])
