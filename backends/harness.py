"""The one timing loop every framework uses: seed, warm-up, timed windows, result file.

Standard library only, Python >= 3.8. A backend supplies `setup(spec) -> Trainer`; the harness
owns everything a reader of the numbers must be able to trust: what is timed, how it is synced,
how the global figure is computed, and that a failure becomes a recorded result.
"""
import datetime
import math
import os
import platform
import random
import socket
import statistics
import sys
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Sequence

from . import options as opts
from . import phases, telemetry
from .lifeline import die_with_parent
from .machine import cpu_model as cpu_name  # noqa: F401  (the trainers' device_name on CPU)
from .protocol import RunResult, RunSpec, Unsupported, read_spec, write_result

# every backend accepts these besides its own: they make a run fail on purpose, so that the
# recording of failures (a crash, one rank dying, a hang) can be tested with real processes
COMMON_OPTIONS = (
    opts.Option("fail_at", "str", "testing: raise an error as the backend starts (before the "
                "framework is imported), once the trainer is set up, or before the timed steps",
                choices=("start", "setup", "timed")),
    opts.Option("fail_rank", "int", "testing: with fail_at, only this rank fails (default: all)",
                minimum=0),
)
ENV_KEYS = ("NVIDIA_TF32_OVERRIDE", "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "COMPARE_IMAGE",
            "COMPARE_EXECUTOR", "COMPARE_ENV")


class Trainer:
    """What a backend hands the harness. Override step/sync; the rest has safe defaults."""

    rank = 0  # rank 0 measures and writes the result
    distribution = "single"  # ddp | horovod | mirrored | kvstore | single

    def step(self) -> None:
        """One full training step (forward, backward, update). Must not sync the host."""
        raise NotImplementedError

    def sync(self) -> None:
        """Block until all queued device work is done."""

    def barrier(self) -> None:
        """Block until every worker reaches this point (no-op for one process)."""

    def loss(self) -> float:
        """Loss of the last step, as a float (may sync)."""
        return float("nan")

    def describe(self) -> Dict[str, Any]:
        """framework_version, device_name and settings (what was switched on) for the record."""
        return {}

    def close(self) -> None:
        """Release the process group or framework state."""


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


class InjectedFailure(RuntimeError):
    """Raised where the spec's options ask for a failure (COMMON_OPTIONS)."""


def _inject_failure(spec: RunSpec, phase: str, rank: int) -> None:
    o = spec.options
    if o.get("fail_at") == phase and o.get("fail_rank", rank) == rank:
        raise InjectedFailure("fail_at={} on rank {} (asked for by the spec's options)".format(
            phase, rank))


def measure(trainer: Trainer, spec: RunSpec) -> Dict[str, Any]:
    """Warm up, then time the windows. Returns the measured fields of a RunResult."""
    _inject_failure(spec, "setup", trainer.rank)
    for i in range(spec.warmup_steps):
        trainer.step()
        if i == 0:  # the first step's extra cost (compilation, autotuning) is a figure of its own
            trainer.sync()
            phases.mark("first_step_done")
    first_loss = trainer.loss() if spec.warmup_steps else None
    trainer.sync()
    trainer.barrier()
    phases.mark("warmup_done")
    _inject_failure(spec, "timed", trainer.rank)
    window_times = []
    sizes = window_sizes(spec.steps, spec.windows)
    sampler = telemetry.for_spec(spec, trainer.rank)  # GPU power etc.; nulls on CPU
    sampler.start()
    phases.mark("timed_start")
    t_start = time.perf_counter()
    for size in sizes:
        trainer.sync()
        t0 = time.perf_counter()
        for _ in range(size):
            trainer.step()
        trainer.sync()
        window_times.append(time.perf_counter() - t0)
    trainer.barrier()
    wall = time.perf_counter() - t_start
    phases.mark("timed_end")
    gpu_telemetry = sampler.stop()
    final_loss = trainer.loss()
    global_batch = spec.global_batch
    per_window = [global_batch * n / t for n, t in zip(sizes, window_times)]
    return {
        "images_per_sec": global_batch * spec.steps / wall,
        "window_images_per_sec": per_window,
        "median_images_per_sec": median(per_window),
        "uncertainty": uncertainty(per_window),
        "jitter": jitter(per_window),
        "step_time_ms": 1000.0 * wall / spec.steps,
        "timed_steps": spec.steps,
        "wall_time_s": wall,
        "global_batch": global_batch,
        "first_loss": _finite(first_loss),
        "final_loss": _finite(final_loss),
        "telemetry": gpu_telemetry,
    }


def _finite(x: Optional[float]) -> Optional[float]:
    return x if x is not None and math.isfinite(x) else None


def env_rank() -> int:
    """This process's rank from whichever launcher started it (torchrun, horovodrun, mpirun)."""
    for key in ("RANK", "HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        if key in os.environ:
            return int(os.environ[key])
    return 0


def environment() -> Dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "cpu_count": os.cpu_count(),
        "env": {k: os.environ[k] for k in ENV_KEYS if k in os.environ},
    }


def is_oom(exc: BaseException) -> bool:
    name = type(exc).__name__
    text = str(exc).lower()
    return (isinstance(exc, MemoryError) or "OutOfMemory" in name or "ResourceExhausted" in name
            or "out of memory" in text or "failed to allocate" in text)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def run(spec: RunSpec, result_path: str, setup: Callable[[RunSpec], Trainer],
        declared: Sequence[opts.Option] = ()) -> RunResult:
    """Set up the trainer, measure it, and (on rank 0) write the result. Never raises.

    `declared`: the backend's options; spec.options is checked and typed against them first.
    """
    started = _now()
    nonce, spec_hash = spec.nonce, spec.spec_hash  # echoed as given, before options are typed
    random.seed(spec.seed)
    trainer = None  # type: Optional[Trainer]
    fields = {}  # type: Dict[str, Any]
    status, reason = "ok", None
    try:
        spec.validate()
        spec.options = opts.parse(tuple(declared) + COMMON_OPTIONS, spec.options, spec.framework)
        _inject_failure(spec, "start", env_rank())
        trainer = setup(spec)
        phases.mark("model_built")
        fields.update(measure(trainer, spec))
    except Unsupported as exc:
        status, reason = "unsupported", str(exc)
    except opts.OptionError as exc:
        status, reason = "failed", "option {}".format(exc)
    except Exception as exc:  # the framework's failure is a result, not a crash of the sweep
        traceback.print_exc()
        status = "oom" if is_oom(exc) else "failed"
        reason = "{}: {}".format(type(exc).__name__, str(exc).strip()[-2000:])
    described = {}  # type: Dict[str, Any]
    if trainer is not None:
        try:
            described = trainer.describe()
        except Exception as exc:  # a failing describe must not lose the measurement
            described = {"settings": {"describe_error": repr(exc)}}
    result = RunResult(
        run_id=spec.run_id, status=status, spec=spec.to_dict(), reason=reason,
        world_size=spec.world_size,
        distribution=getattr(trainer, "distribution", None),
        framework_version=described.get("framework_version"),
        device_name=described.get("device_name"),
        settings=described.get("settings", {}),
        environment=environment(), started_at=started, finished_at=_now(), nonce=nonce,
        spec_hash=spec_hash, phases=phases.record(), **fields)
    rank = trainer.rank if trainer is not None else env_rank()
    if rank == 0:
        write_result(result_path, result)
    if trainer is not None:
        try:
            trainer.close()
        except Exception:
            traceback.print_exc()
    return result


def main(setup: Callable[[RunSpec], Trainer], argv: Optional[List[str]] = None,
         declared: Sequence[opts.Option] = ()) -> int:
    """Entry point of `python -m backends.X SPEC_JSON RESULT_JSON`."""
    argv = sys.argv[1:] if argv is None else argv
    die_with_parent()  # a worker never outlives its launcher (lifeline.py)
    if len(argv) != 2:
        sys.stderr.write("usage: python -m backends.<backend> SPEC_JSON RESULT_JSON\n")
        return 2
    result = run(read_spec(argv[0]), argv[1], setup, declared)
    return 0 if result.status in ("ok", "unsupported", "skipped") else 1
