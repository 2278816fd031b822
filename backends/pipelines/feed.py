"""What every backend's input pipeline shares once its batches exist: the Feed the steps take
them from (counted in a Tally, described in the common data settings), the thread that prepares
them ahead of the step, and that thread's settings under decode=hw. Standard library only,
Python >= 3.8.
"""
import os
import queue
import sys
import threading
import time
from typing import Any, Callable, Dict, Optional

from ..contract.options import CUDA_DEFAULT_CONNECTIONS
from ..dataset import Tally


class Feed:
    """Batches for the step: next() -> (images, labels), counted in `tally`; sync() waits for the
    last batch handed out where the device fills it asynchronously; describe() -> the data
    settings the result records (`settings(tally)`)."""

    def __init__(self, settings: Callable[[Tally], Dict[str, Any]]):
        self.settings, self.tally = settings, Tally()

    def next(self):
        raise NotImplementedError

    def sync(self) -> None:
        """Nothing to wait for unless the batches are made asynchronously on the device."""

    def buffered(self) -> int:
        """Batches that can be ready before the first is asked for (--data-only drains them)."""
        return 0

    def describe(self) -> Dict[str, Any]:
        return self.settings(self.tally)

    def close(self) -> None:
        """Stop whatever prepares batches."""


class Prefetcher:
    """produce() run over and over on a thread of its own, up to `depth` results ahead of get().

    get() hands them out in order; an exception in produce() (or in start(), run first on the
    thread) is raised by the get() that reaches it, as a RuntimeError naming the input pipeline.
    """

    def __init__(self, produce: Callable[[], Any], depth: int,
                 start: Optional[Callable[[], None]] = None):
        self.produce, self.start = produce, start
        self.queue = queue.Queue(maxsize=depth)  # type: queue.Queue
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="compare-feeder", daemon=True)
        self.thread.start()

    def _put(self, item) -> None:
        while not self.stop.is_set():
            try:
                self.queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def _run(self) -> None:
        try:
            if self.start is not None:
                self.start()
            while not self.stop.is_set():
                self._put(self.produce())
        except BaseException as exc:  # handed to the training thread, which raises it
            self._put(exc)

    def get(self):
        item = self.queue.get()
        if isinstance(item, BaseException):
            raise RuntimeError("input pipeline: {}: {}".format(type(item).__name__, item))
        return item

    def close(self, timeout: float = 60.0) -> None:
        """Stop the thread after the item it is producing; the items waiting are dropped (they
        may hold device memory)."""
        self.stop.set()
        deadline = time.monotonic() + timeout
        while self.thread.is_alive() and time.monotonic() < deadline:
            try:
                self.queue.get(timeout=0.1)
            except queue.Empty:
                pass


CONNECTIONS_ENV = "CUDA_DEVICE_MAX_CONNECTIONS"  # read by CUDA when it creates a context


def hw_connections(spec, declared) -> None:
    """Before the framework creates its CUDA context (a backend's prepare(), `declared` its
    OPTIONS): a run that may decode on the JPEG engines (--data on a GPU, decode hw or auto:
    pipelines.may_use) gets the option cuda_connections' hardware queues; a
    CUDA_DEVICE_MAX_CONNECTIONS the user set stays unless the option is given."""
    from .. import options as opts
    from . import may_use

    def opt(key):
        return opts.value(declared, spec.options, key)
    if spec.data is None or spec.device != "cuda" or not may_use("hw", opt):
        return
    if "cuda_connections" in spec.options or not os.environ.get(CONNECTIONS_ENV):
        os.environ[CONNECTIONS_ENV] = str(opt("cuda_connections"))


def hw_feeder_settings(opt) -> Dict[str, Any]:
    """decode=hw: set this process's switch interval (the option switch_interval_ms) and return
    the settings a result records about the feeder: interval, stream priority and the hardware
    queues CUDA had (hw_connections)."""
    ms = float(opt("switch_interval_ms"))
    sys.setswitchinterval(ms / 1000.0)
    queues = os.environ.get(CONNECTIONS_ENV, "").strip()
    return {"switch_interval_ms": ms, "feeder_priority": opt("feeder_priority"),
            "cuda_connections": int(queues) if queues.isdigit() else CUDA_DEFAULT_CONNECTIONS}
