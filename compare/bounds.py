"""Bounds of `compare run`: every value that sizes memory or time has a maximum, and the matrix
a largest number of cells, all checked before anything runs (one UserError line each).
Framework options carry their own ranges (backends/options.py)."""
import math
from typing import Any, Dict, List

from .errors import UserError

# the largest values that make sense, and why: beyond them a typo sizes memory or time unbounded
MAXIMA = {"--batch-size": 16384, "--image-size": 2048, "--steps": 1_000_000, "--warmup": 100_000,
          "--windows": 1000, "--repeats": 100, "--timeout": 7 * 24 * 3600, "--gpus": 1024,
          "--nodes": 1024}
MAXIMA_WHY = {"--batch-size": "images per worker and step",
              "--image-size": "pixels per side; one 2048 px image is 48 MiB as float32",
              "--steps": "timed steps", "--warmup": "warm-up steps", "--windows": "timed windows",
              "--repeats": "runs per cell", "--timeout": "seconds, one week", "--gpus": "per node",
              "--nodes": "machines per job"}
MAX_CELLS = 10_000  # cells of one campaign: each is at least one process start


def check(common: Dict[str, Any], windows: int, repeats: int, timeout: float,
          gpus: List[int], nodes: List[int], batches: List[int]) -> None:
    """Every value that sizes memory or time within its range: one UserError line otherwise."""
    if common["image_size"] < 32:
        raise UserError("--image-size {}: must be >= 32 (ResNet-50 downsamples 32x)".format(
            common["image_size"]))
    for name, value, low in (("--steps", common["steps"], 1), ("--warmup", common["warmup_steps"], 0),
                             ("--windows", windows, 1), ("--repeats", repeats, 1)):
        if value < low:
            raise UserError("{} {}: must be >= {}".format(name, value, low))
    if not math.isfinite(timeout) or timeout <= 0:
        raise UserError("--timeout {}: must be a finite number of seconds > 0".format(timeout))
    given = {"--image-size": [common["image_size"]], "--steps": [common["steps"]],
             "--warmup": [common["warmup_steps"]], "--windows": [windows], "--repeats": [repeats],
             "--timeout": [timeout], "--gpus": gpus, "--nodes": nodes, "--batch-size": batches}
    for name, values in given.items():
        if max(values) > MAXIMA[name]:
            raise UserError("{} {}: must be <= {} ({})".format(name, _plain(max(values)),
                                                               MAXIMA[name], MAXIMA_WHY[name]))


def _plain(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def check_size(axes: List[Any]) -> None:
    """At most MAX_CELLS cells, counted before a single one is built."""
    cells = math.prod(n for _, n in axes)
    if cells > MAX_CELLS:
        raise UserError("the matrix has {} cells ({}); at most {} per campaign: give fewer values "
                        "or split the study into campaigns".format(cells, " × ".join(
                            "{} {}{}".format(n, what, "s" if n != 1 else "") for what, n in axes),
                            MAX_CELLS))
