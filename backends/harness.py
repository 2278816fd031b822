"""The one timing loop every framework uses: seed, warm-up, timed windows, result file.

Standard library only, Python >= 3.8. A backend supplies a Trainer (backends/trainer.py) through
its runtime, data and train modules (`entry()`); the harness owns everything a reader of the
numbers must be able to trust: what is timed, how it is synced, how the global figure is
computed, and that a failure becomes a recorded result.
"""
import importlib
import math
import os
import platform
import random
import socket
import sys
import threading
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Sequence

from . import accuracy, batchprobe, caches, hostcpu, phases, telemetry, world
from . import options as opts
from .contract.options import COMMON_OPTIONS
from .contract.rules import error_reason, is_oom, unsupported_line
from .contract.stats import jitter, median, uncertainty, window_sizes
from .lifeline import die_with_parent, watch_host_lock
from .machine import cpu_model as cpu_name  # noqa: F401  (the trainers' device_name on CPU)
from .machine import cpuset
from .protocol import RunResult, RunSpec, Unsupported, read_spec, utc_now, write_result
from .trainer import DataOnly, Trainer

CLOSE_WAIT_S = 15.0  # how long a finished run waits for its trainer's close()
ENV_KEYS = ("NVIDIA_TF32_OVERRIDE", "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "COMPARE_IMAGE",
            "COMPARE_EXECUTOR", "COMPARE_ENV")


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
    host = hostcpu.Sampler()  # cores the job keeps busy, input-pipeline workers included
    sampler.start()
    host.start()
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
    gpu_telemetry = dict(sampler.stop(), **host.stop())
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


def environment() -> Dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "cpu_count": os.cpu_count(),
        # the cores this process may run on: fewer than cpu_count where cells share the machine
        "cpu_affinity": _cores(),
        "env": {k: os.environ[k] for k in ENV_KEYS if k in os.environ},
        "compile_cache": caches.record(),
    }


def _cores() -> Optional[str]:
    return cpuset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


def _status(exc: BaseException) -> str:
    return "oom" if is_oom(exc) else "failed"


def limit_memory(spec: RunSpec) -> None:
    """Apply the memory_limit_mb option (COMMON_OPTIONS) to this process and its children."""
    mib = spec.options.get("memory_limit_mb")
    if mib:
        import resource  # POSIX only: imported where the option is used
        limit = int(mib) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def run(spec: RunSpec, result_path: str, setup: Callable[[RunSpec], Trainer],
        declared: Sequence[opts.Option] = ()) -> RunResult:
    """Set up the trainer, measure it, and (on rank 0) write the result. Never raises.

    `declared`: the backend's options; spec.options is checked and typed against them first.
    """
    started = utc_now()
    nonce, spec_hash = spec.nonce, spec.spec_hash  # echoed as given, before options are typed
    random.seed(spec.seed)
    trainer = None  # type: Optional[Trainer]
    fields = {}  # type: Dict[str, Any]
    status, reason = "ok", None
    try:
        spec.validate()
        spec.options = opts.parse(tuple(declared) + COMMON_OPTIONS, spec.options, spec.framework)
        _inject_failure(spec, "start", world.rank())
        limit_memory(spec)
        # time to accuracy (backends/accuracy.py): its log's init_start comes before the set-up
        tta = accuracy.begin(spec, result_path, world.rank()) if spec.kind == "accuracy" else None
        # an auto cell searching its batch in this process (batchprobe.py), or the spec's batch
        batchprobe.LAST.clear()  # a record of this cell only: never an earlier cell's in this process
        trainer = batchprobe.in_process(spec, setup, measure, _status) if spec.search else \
            setup(spec)
        phases.mark("model_built")
        fields.update(measure(trainer, spec) if tta is None else tta.measure(trainer, _inject_failure))
        status, reason = tta.outcome() if tta is not None else (status, reason)
    except Unsupported as exc:
        status, reason = "unsupported", str(exc)
    except opts.OptionError as exc:
        status, reason = "failed", "option {}".format(exc)
    except Exception as exc:  # the framework's failure is a result, not a crash of the sweep
        traceback.print_exc()
        status, reason = _status(exc), error_reason(exc)
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
        settings=dict(described.get("settings", {}), **mode_record(spec), **batchprobe.settings()),
        environment=environment(), started_at=started, finished_at=utc_now(), nonce=nonce,
        spec_hash=spec_hash, phases=phases.record(), **fields)
    rank = trainer.rank if trainer is not None else world.rank()
    if rank == 0:
        write_result(result_path, result)
    elif status == "unsupported":  # its exception printed nothing: the host reads this instead
        sys.stderr.write(unsupported_line(rank, reason or ""))
        sys.stderr.flush()
    if trainer is not None:
        close_within(trainer, CLOSE_WAIT_S)
    return result


def close_within(trainer: Trainer, seconds: float) -> None:
    """trainer.close(), waited for at most `seconds`: the result is on disk already, and a
    pipeline's teardown (a feeder thread, loader workers joined one by one) must not hold the
    cell; what is still running then ends with the process (entry() exits without waiting)."""
    def close() -> None:
        try:
            trainer.close()
        except Exception:
            traceback.print_exc()
    thread = threading.Thread(target=close, name="compare-close", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        sys.stderr.write("harness: the trainer's close() had not returned after {:.0f} s; the "
                         "process exits without it\n".format(seconds))


def mode_record(spec: RunSpec) -> Dict[str, Any]:
    """The mode's part of a result's settings (options.mode_settings), from the MODES the
    backend declares next to its OPTIONS."""
    try:
        modes = getattr(importlib.import_module("backends." + spec.backend), "MODES", {})
    except ImportError:  # a spec naming no backend package of ours (tests' toy trainers)
        modes = {}
    return opts.mode_settings(modes, spec)


def backend_setup(package: str) -> Callable[[RunSpec], Trainer]:
    """The setup of the backend `package` (e.g. "backends.jax"): its prepare(spec) where it has
    one (what must be set before the framework is imported), then its runtime, and on it the
    trainer, or for --data-only the input pipeline alone."""
    backend = importlib.import_module(package)
    runtimes = []  # type: List[Any]  # once per process, for every trainer a batch search builds

    def setup(spec: RunSpec) -> Trainer:
        if not runtimes:
            caches.bytecode(getattr(backend, "FRAMEWORK", None))  # before it is imported
            prepare = getattr(backend, "prepare", None)  # optional: most backends need none
            if prepare is not None:
                prepare(spec)
            start = importlib.import_module(package + ".runtime").start  # imports the framework
            phases.mark("framework_imported")
            runtimes.append(start(spec))  # marks devices_ready
        runtime = runtimes[0]
        if spec.data_only:
            return DataOnly(importlib.import_module(package + ".data").make_feed(spec, runtime),
                            runtime)
        # time to accuracy: the backend's accuracy.py (docs/accuracy.md), else its train.py
        module = ".accuracy" if spec.kind == "accuracy" else ".train"
        return importlib.import_module(package + module).setup(spec, runtime)
    return setup


def entry(package: str, argv: Optional[List[str]] = None) -> int:
    """`python -m backends.<backend> SPEC_JSON RESULT_JSON` of a backend folder (its __main__).
    Exits at once when the run is over: the interpreter's own teardown (joining loader workers
    and threads, one by one) took 70 s after a PyTorch time-to-accuracy run on an H200."""
    code = main(backend_setup(package), argv, declared=importlib.import_module(package).OPTIONS)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def main(setup: Callable[[RunSpec], Trainer], argv: Optional[List[str]] = None,
         declared: Sequence[opts.Option] = ()) -> int:
    """Entry point of `python -m backends.X SPEC_JSON RESULT_JSON`."""
    argv = sys.argv[1:] if argv is None else argv
    die_with_parent()  # a worker never outlives its launcher (lifeline.py)
    watch_host_lock()  # nor, in a container, the compare that started it
    if len(argv) != 2:
        sys.stderr.write("usage: python -m backends.<backend> SPEC_JSON RESULT_JSON\n")
        return 2
    result = run(read_spec(argv[0]), argv[1], setup, declared)
    return 0 if result.status in ("ok", "unsupported", "skipped", "not_converged") else 1
