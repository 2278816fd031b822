"""The formulas of DESIGN.md, as pure functions. Comparable-or-not is decided by the caller.

speedup(n)          = img/s(n) / img/s(1)     same framework, precision, per-GPU batch, image size
scaling_efficiency  = speedup(n) / n
precision_gain      = img/s(fp16 or bf16) / img/s(fp32) - 1   at equal n ("80-90 % faster")
median, spread, coefficient_of_variation, mlperf_mean: over the repeats of one cell
ratio               = a / b   speedup, framework vs framework, machine vs machine, measured vs published
data_efficiency     = img/s(real data) / img/s(synthetic)   same cell otherwise; input-bound below 0.95
"""
import statistics
from typing import Optional, Sequence


def scaling_efficiency(speedup_n: Optional[float], n: int) -> Optional[float]:
    return None if speedup_n is None or n < 1 else speedup_n / n


# --- repeats of one cell -------------------------------------------------------------------------

def spread(xs: Sequence[float]) -> Optional[float]:
    """(max - min) / median: the relative range of the repeats; None for fewer than 2."""
    return None if len(xs) < 2 else (max(xs) - min(xs)) / statistics.median(xs)


def coefficient_of_variation(xs: Sequence[float]) -> Optional[float]:
    """Sample standard deviation / mean; None for fewer than 2 repeats."""
    return None if len(xs) < 2 else statistics.stdev(xs) / statistics.fmean(xs)


def median(xs) -> Optional[float]:
    """The median of the values that are figures (None and NaN left out); None without one."""
    xs = [float(x) for x in xs if x is not None and x == x]
    return float(statistics.median(xs)) if xs else None


def mlperf_mean(xs: Sequence[float]) -> Optional[float]:
    """The MLPerf rule for 5 or more runs: drop the fastest and the slowest, mean of the rest."""
    return None if len(xs) < 5 else statistics.fmean(sorted(xs)[1:-1])


# --- ratios between comparable cells ---------------------------------------------------------------

def ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    """a / b (framework vs framework, machine vs machine, measured vs published)."""
    return None if a is None or b is None or b <= 0 else a / b


def images_per_watt(ips: Optional[float], watts: Optional[float]) -> Optional[float]:
    """img/s per W of the job's GPUs (= images per joule); None without a power reading."""
    return ratio(ips, watts)


# --- real data versus synthetic ----------------------------------------------------------------

INPUT_BOUND = 0.95  # data efficiency below this: the input pipeline, not the model, sets the pace


def data_efficiency(ips_real: Optional[float], ips_synthetic: Optional[float]) -> Optional[float]:
    """img/s with real data ÷ img/s with synthetic data, the cell otherwise the same."""
    return ratio(ips_real, ips_synthetic)


def input_bound(efficiency: Optional[float]) -> Optional[bool]:
    """True below INPUT_BOUND; None without an efficiency."""
    return None if efficiency is None else efficiency < INPUT_BOUND
