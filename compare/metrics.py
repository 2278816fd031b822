"""The formulas of DESIGN.md, as pure functions. Comparable-or-not is decided by the caller.

speedup(n)          = img/s(n) / img/s(1)     same framework, precision, per-GPU batch, image size
scaling_efficiency  = speedup(n) / n
precision_gain      = img/s(fp16 or bf16) / img/s(fp32) - 1   at equal n ("80-90 % faster")
"""
from typing import Optional

from backends.harness import jitter, median, uncertainty  # noqa: F401  (one definition, re-exported)


def speedup(ips_n: Optional[float], ips_1: Optional[float]) -> Optional[float]:
    if ips_n is None or ips_1 is None or ips_1 <= 0:
        return None
    return ips_n / ips_1


def scaling_efficiency(speedup_n: Optional[float], n: int) -> Optional[float]:
    if speedup_n is None or n < 1:
        return None
    return speedup_n / n


def precision_gain(ips_mixed: Optional[float], ips_fp32: Optional[float]) -> Optional[float]:
    if ips_mixed is None or ips_fp32 is None or ips_fp32 <= 0:
        return None
    return ips_mixed / ips_fp32 - 1.0
