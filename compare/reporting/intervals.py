"""How sure a figure is: the uncertainty of a cell and of every ratio the reports print, and the
state of a comparison (better / worse / within noise, asv's vocabulary).

The method (README, "How sure is a figure"):

1. A cell's figure is the median of its ok runs' images/sec. Its relative standard error u is the
   larger of two estimates, and its degrees of freedom (dof) are those of the one taken:
   - within runs: each run's timed windows give s_w / sqrt(W) / mean(w); over R runs the mean's
     error is sqrt(sum of their squares) / R; dof = sum(W - 1). Results that carry no window figures
     use their recorded std/sqrt(n) (`uncertainty`), dof unknown (normal quantile).
   - between runs (R >= 2): s_R / sqrt(R) / mean(x), times sqrt(pi/2) for R >= 3 because the figure
     is a median (its error is that much larger than the mean's); dof = R - 1.
   Taking the larger guards against two repeats that agree by chance. One run with one window has
   no estimate (u unknown): no claim is made from it.
2. A ratio a / b of two cells (speedup, scaling efficiency, precision gain, framework versus
   framework, diff B / A): u = sqrt(u_a^2 + u_b^2) (first-order propagation; the runs are
   independent), dof by Welch-Satterthwaite. Measured / published: u = u_measured (a published
   figure carries no spread). Scaling efficiency = speedup / N and precision gain = ratio - 1 keep
   the ratio's interval.
3. The 95 % interval is value * (1 +- t(0.975, dof) * u); tables print it as `1.95 ±0.02`.
   A comparison is "within noise" when the interval holds no difference (ratio 1), "better" when it
   lies above, "worse" when below.

With one run per cell, the windows only see the noise inside that run; on a shared CPU figures move
between runs by much more (BENCHMARKS.md), which is why the findings treat such cells as smoke
numbers (findings.py).
"""
import math
import statistics
from dataclasses import dataclass
from typing import Optional, Sequence

from . import metrics

BETTER, WORSE, NOISE, NOT_COMPARABLE = "better", "worse", "within noise", "not comparable"
STATES = (BETTER, WORSE, NOISE, NOT_COMPARABLE)
# t(0.975, dof) for dof 1..30; above, the Cornish-Fisher expansion below is exact to 0.001
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
         2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
         2.052, 2.048, 2.045, 2.042)
_Z975 = 1.959964


def t975(dof: Optional[float]) -> float:
    """The two-sided 95 % quantile of Student's t (dof None: the normal one). Fractional dof are
    rounded down, which widens the interval."""
    if dof is None or math.isinf(dof):
        return _Z975
    n = max(1, int(math.floor(dof)))
    if n <= len(_T975):
        return _T975[n - 1]
    z = _Z975
    return z + (z ** 3 + z) / (4 * n) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * n ** 2)


@dataclass(frozen=True)
class Estimate:
    """A figure with its relative standard error (None: unknown) and degrees of freedom."""

    value: float
    rel_se: Optional[float]
    dof: Optional[float] = None

    def half_width(self) -> Optional[float]:
        """Half the width of the 95 % interval, in the figure's unit."""
        return None if self.rel_se is None else abs(self.value) * t975(self.dof) * self.rel_se


def _rel_se_windows(windows: Sequence[float]) -> Optional[float]:
    xs = [float(w) for w in windows or () if w]
    return None if len(xs) < 2 else statistics.stdev(xs) / math.sqrt(len(xs)) / statistics.fmean(xs)


def cell(figures: Sequence[float], windows: Sequence[Sequence[float]],
         recorded: Sequence[Optional[float]] = ()) -> Optional[Estimate]:
    """The estimate of a cell from its runs' figures, their window figures and (for results
    without windows) their recorded std/sqrt(n). None without a figure."""
    xs = [float(x) for x in figures]
    if not xs:
        return None
    value = float(statistics.median(xs))
    within, dof_w = [], 0.0
    for i, x in enumerate(xs):
        w = list(windows[i]) if i < len(windows) and windows[i] else []
        u = _rel_se_windows(w)
        if u is not None:
            within.append(u)
            dof_w += len(w) - 1
        elif i < len(recorded) and recorded[i]:
            within.append(float(recorded[i]) / x)
            dof_w = math.inf
    candidates = []
    if len(within) == len(xs):
        candidates.append((math.sqrt(sum(u * u for u in within)) / len(xs), dof_w))
    if len(xs) >= 2:
        between = statistics.stdev(xs) / math.sqrt(len(xs)) / statistics.fmean(xs)
        candidates.append((between * (math.sqrt(math.pi / 2) if len(xs) >= 3 else 1.0), len(xs) - 1))
    if not candidates:
        return Estimate(value, None)
    u, dof = max(candidates, key=lambda c: c[0])
    return Estimate(value, u, None if math.isinf(dof) else dof)


def ratio(a: Optional[Estimate], b: Optional[Estimate]) -> Optional[Estimate]:
    """a / b with the propagated error (None where either side has no figure or b <= 0)."""
    value = metrics.ratio(a.value if a else None, b.value if b else None)
    if value is None:
        return None
    if a.rel_se is None or b.rel_se is None:
        return Estimate(value, None)
    u2 = a.rel_se ** 2 + b.rel_se ** 2
    return Estimate(value, math.sqrt(u2), _welch(a, b, u2))


def _welch(a: Estimate, b: Estimate, u2: float) -> Optional[float]:
    def term(e: Estimate) -> float:
        return 0.0 if e.dof is None else e.rel_se ** 4 / max(e.dof, 1.0)
    denominator = term(a) + term(b)
    if denominator == 0:
        return None  # neither side knows its dof, or both errors are zero
    return u2 ** 2 / denominator


def state(value: Optional[float], half_width: Optional[float], null: float = 1.0) -> str:
    """better / worse / within noise of `null` (1 for a ratio, 0 for a gain); not comparable
    without a figure or an interval."""
    if value is None or half_width is None:
        return NOT_COMPARABLE
    if value - half_width > null:
        return BETTER
    if value + half_width < null:
        return WORSE
    return NOISE


# what a figure without an interval says beside it: only a figure (or a ratio with a side) that
# rests on one run of one timed window, or one seed, has none (cell(), accuracy.estimate)
NO_INTERVAL = "one run: no interval"


def pm(value: Optional[float], half_width: Optional[float], fmt: str = "{:.2f}",
       hw_fmt: Optional[str] = None, missing: str = "n/a") -> str:
    """'1.95 ±0.02' (the half width in hw_fmt, default the value's format); '1.95, one run: no
    interval' when there is none (it said '1.95 ±?')."""
    if value is None:
        return missing
    if half_width is None:
        return "{}, {}".format(fmt.format(value), NO_INTERVAL)
    return "{} ±{}".format(fmt.format(value), (hw_fmt or fmt).format(half_width).lstrip("+"))


def _places(half_width: Optional[float]) -> int:
    """Two decimals, or a third or fourth where two would print a non-zero interval as ±0.00."""
    places = 2
    while half_width and places < 4 and round(half_width, places) == 0:
        places += 1
    return places


def pm_ratio(value: Optional[float], half_width: Optional[float], missing: str = "n/a") -> str:
    """'0.80× ±0.01'; with a third or fourth decimal where two would print a non-zero interval
    as ±0.00 ('0.998× ±0.001'), so that a state of better or worse is never shown beside
    '1.00× ±0.00'."""
    places = _places(half_width)
    return pm(value, half_width, "{:.%df}×" % places, "{:.%df}" % places, missing)


def pm_minutes(value: Optional[float], half_width: Optional[float], missing: str = "n/a") -> str:
    """Minutes to target '1.10 ±0.20'; '0.160 ±0.002' where seeds a second apart would read
    '0.16 ±0.00', as if they agreed (the report's, diff's and history's, one rule)."""
    places = _places(half_width)
    return pm(value, half_width, "{:.%df}" % places, "{:.%df}" % places, missing)
