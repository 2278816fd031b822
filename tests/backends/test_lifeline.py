"""A run in a container ends with the compare that started it (backends/lifeline.py): it watches
the flock compare holds on its campaign folder, as the docker executor mounts it."""
import fcntl
import os
import subprocess
import sys
import time

from tests.helpers import ROOT

WORKER = ("import time; from backends.lifeline import watch_host_lock; watch_host_lock(0.1); "
          "print('training', flush=True); time.sleep(60)")


def _worker(folder):
    return subprocess.Popen([sys.executable, "-c", WORKER], cwd=str(ROOT), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, COMPARE_HOST_LOCK=str(folder)))


def test_a_worker_ends_when_the_compare_holding_the_campaign_lock_is_gone(tmp_path):
    held = os.open(str(tmp_path), os.O_RDONLY)  # as Campaign.lock() holds it
    fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    worker = _worker(tmp_path)
    try:
        assert worker.stdout.readline() == "training\n"
        time.sleep(0.5)
        assert worker.poll() is None  # compare holds its lock: the run goes on
        began = time.monotonic()
        os.close(held)  # compare ends (SIGKILL included: the kernel drops its flock)
        _, err = worker.communicate(timeout=10)
        assert time.monotonic() - began < 2
        assert worker.returncode == 1
        assert err == ("lifeline: the compare that started this run has ended (its lock on the "
                       "campaign is gone); the run ends with it\n")
    finally:
        worker.kill()


def test_a_worker_started_by_no_compare_has_nothing_to_watch(tmp_path):
    worker = subprocess.Popen([sys.executable, "-c", WORKER.replace("sleep(60)", "sleep(0.5)")],
                              cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env={k: v for k, v in os.environ.items()
                                              if k != "COMPARE_HOST_LOCK"})
    out, err = worker.communicate(timeout=10)
    assert (worker.returncode, out, err) == (0, "training\n", "")


def test_a_lock_already_free_at_the_first_look_ends_the_run(tmp_path):
    # compare mounts the folder only while it holds the lock: free at the first look, it was
    # SIGKILLed right after the container started, before the worker had imported its framework
    worker = _worker(tmp_path)
    try:
        _, err = worker.communicate(timeout=10)
        assert worker.returncode == 1 and "the run ends with it" in err
    finally:
        worker.kill()
