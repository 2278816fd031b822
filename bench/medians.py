"""Milliseconds per call of a device operation, for the bench scripts (stdlib only: each script
brings its own framework)."""
import statistics
import time


def ms_per_call(fn, sync, rounds=5, reps=50) -> float:
    """Median over `rounds` of the mean time of `reps` back-to-back calls of `fn`; `sync()` waits
    for the device at both ends of a round (one untimed call first, for compilation and warm-up)."""
    sync(fn())
    ms = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(reps):
            out = fn()
        sync(out)
        ms.append((time.perf_counter() - t0) * 1e3 / reps)
    return statistics.median(ms)
