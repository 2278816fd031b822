"""What a backend hands the harness (a Trainer), what its runtime.py returns (a Runtime), and the
trainer of a --data-only run, which the harness builds from the runtime and the feed.

Standard library only, Python >= 3.8. A backend folder's modules import one way:

    runtime.py  (join the world, devices, sync, barrier, close)  <-  data.py, train.py
    data.py     (the input pipeline: make_feed(spec, runtime))    <-  train.py
"""
from typing import Any, Dict, Optional


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


class Runtime:
    """This process's place in the job and its devices: what `runtime.start(spec)` returns, and
    what both the trainer and the input pipeline are built on."""

    rank = 0  # this process's rank (0 writes the result)
    distribution = "single"  # how the workers are joined, as results name it

    def sync(self) -> None:
        """Block until the work queued on this process's devices is done."""

    def barrier(self) -> None:
        """Block until every process of the job reaches this point."""

    def describe(self) -> Dict[str, Any]:
        """{"framework_version": ..., "device_name": ...} for the record."""
        return {}

    def close(self) -> None:
        """Leave the job (process group, coordination service)."""


class RuntimeTrainer(Trainer):
    """A trainer built on a backend's Runtime, with a Feed where the spec reads real data (None
    for synthetic data): sync, barrier and close go through them; record() joins the runtime's
    record, the trainer's settings and the feed's data settings into what describe() returns."""

    runtime = Runtime()
    feed = None

    def sync(self) -> None:
        self.runtime.sync()

    def barrier(self) -> None:
        self.runtime.barrier()

    def record(self, settings: Dict[str, Any]) -> Dict[str, Any]:
        if self.feed is not None:
            settings.update(self.feed.describe())
        return dict(self.runtime.describe(), settings=settings)

    def close(self) -> None:
        if self.feed is not None:
            self.feed.close()
        self.runtime.close()


class DataOnly(Trainer):
    """--data-only: a step is fetching the next batch onto the device; no model, no training.

    feed: the backend's pipeline (a feed.Feed: next() -> (images, labels), sync(), describe() ->
    settings, buffered() -> the batches its buffers can hold before the first is asked for,
    close()); runtime: the devices and ranks a training run of the same spec would use.

    The loader's workers fill those buffers while the run sets up (seconds: spawning workers,
    compiling), so the first `buffered()` batches come at no cost: 64 of them with 16 DataLoader
    workers x prefetch 4, more than a short run reads. The first step therefore drains them
    (`drained_batches` in settings, counted in images_read), and the warm-up and timed steps
    that follow see the pipeline's steady rate.
    """

    def __init__(self, feed, runtime: Runtime):
        self.feed, self.runtime = feed, runtime
        self.rank, self.distribution = runtime.rank, runtime.distribution
        self.drained: Optional[int] = None  # batches the first step drained

    def step(self) -> None:
        if self.drained is None:
            self.drained = int(self.feed.buffered())
            for _ in range(self.drained):
                self.feed.next()
        self.feed.next()

    def sync(self) -> None:
        self.feed.sync()
        self.runtime.sync()

    def barrier(self) -> None:
        self.runtime.barrier()

    def describe(self) -> Dict[str, Any]:
        out = self.runtime.describe()
        out["settings"] = dict(self.feed.describe(), data_only=True, drained_batches=self.drained)
        return out

    def close(self) -> None:
        self.feed.close()
        self.runtime.close()
