"""What the backends' input pipelines share (backends/pipelines/feed.py) and the --data-only trainer the
harness builds from a runtime and a feed (backends/trainer.py): stdlib, tested without a
framework."""
import threading
import time

import pytest

from backends.pipelines.feed import Feed, Prefetcher
from backends.trainer import DataOnly, Runtime


def test_the_prefetcher_hands_out_what_it_made_in_order_and_at_most_depth_ahead():
    made = []

    def produce():
        made.append(len(made))
        return made[-1]
    ahead = Prefetcher(produce, depth=2)
    try:
        assert [ahead.get() for _ in range(5)] == [0, 1, 2, 3, 4]
        time.sleep(0.3)
        assert len(made) <= 5 + 2 + 1  # the queue's two, and the one waiting to go in
    finally:
        ahead.close()
    assert not ahead.thread.is_alive()


def test_a_failure_in_the_pipeline_is_raised_where_the_step_takes_the_batch():
    def produce():
        raise OSError("disk gone")
    ahead = Prefetcher(produce, depth=2)
    with pytest.raises(RuntimeError, match="^input pipeline: OSError: disk gone$"):
        ahead.get()
    ahead.close()


def test_start_runs_on_the_feeder_thread_before_the_first_batch():
    seen = []
    ahead = Prefetcher(lambda: threading.current_thread().name, depth=1,
                       start=lambda: seen.append(threading.current_thread().name))
    assert ahead.get() == "compare-feeder" and seen == ["compare-feeder"]
    ahead.close()


class _Counting(Feed):
    def __init__(self):
        super().__init__(lambda tally: {"images_read": tally.images})
        self.closed = False

    def next(self):
        self.tally.add(4, (0, 2))
        return "images", "labels"

    def buffered(self):
        return 2  # batches its workers have ready before the first step asks

    def close(self):
        self.closed = True


class _Runtime(Runtime):
    rank, distribution = 1, "ddp"

    def __init__(self):
        self.calls = []

    def sync(self):
        self.calls.append("sync")

    def barrier(self):
        self.calls.append("barrier")

    def describe(self):
        return {"framework_version": "fake 1.0", "device_name": "fake cpu"}

    def close(self):
        self.calls.append("close")


def test_a_data_only_run_steps_the_feed_on_the_runtimes_devices_and_records_both():
    feed, runtime = _Counting(), _Runtime()
    trainer = DataOnly(feed, runtime)
    assert (trainer.rank, trainer.distribution) == (1, "ddp")
    for _ in range(3):
        trainer.step()
    trainer.sync()
    trainer.barrier()
    # the first step drains what the buffers held, so the steps after it see the steady rate
    assert trainer.describe() == {"framework_version": "fake 1.0", "device_name": "fake cpu",
                                  "settings": {"images_read": 20, "data_only": True,
                                               "drained_batches": 2}}
    trainer.close()
    assert feed.closed and runtime.calls == ["sync", "barrier", "close"]
