"""A run's timed windows: how its steps are split into them (the harness times them, the host
checks a result's figures against them) and their spread (the harness records it, the report
recomputes it over repeats). One definition, standard library only, Python >= 3.8."""
import math
import statistics
from typing import List, Optional, Sequence


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


def window_sizes(steps: int, windows: int) -> List[int]:
    """Split `steps` timed steps into at most `windows` windows of near-equal size."""
    n = max(1, min(windows, steps))
    base, extra = divmod(steps, n)
    return [base + (1 if i < extra else 0) for i in range(n)]
