"""Shared fixtures: backend interpreters (managed environments) and a runner for code inside them."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def backend_python(name: str) -> str:
    """The interpreter `compare run` would use for framework `name` on this CPU machine."""
    from compare import envs, frameworks
    return envs.resolve(frameworks.get(name), "cpu", {}).python


def run_in_backend(name: str, code: str, timeout: int = 600) -> str:
    """Run `code` with the backend's interpreter, `backends` importable; return its stdout."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([backend_python(name), "-c", code], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=str(ROOT))
    if proc.returncode != 0:
        raise AssertionError("backend code failed (exit {}):\n{}".format(
            proc.returncode, proc.stderr[-4000:]))
    return proc.stdout


@pytest.fixture
def in_backend():
    return run_in_backend
