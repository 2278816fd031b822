"""Shared fixtures: backend interpreters (managed environments) and a runner for code inside them."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RESNET50_TRAINABLE = 25557032  # torchvision's count for resnet50 (ResNet-50 v1.5, 1000 classes)
RESNET50_BN_RUNNING_STATS = 53120  # BN running mean/var: not trained, counted by Keras and Gluon
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


def run_backend(framework: str, tmp_path, timeout: int = 600, **fields):
    """Write a spec, run the backend's command() in its environment as the local executor would
    (same environment variables); return (RunResult, CompletedProcess)."""
    import importlib

    from backends.protocol import RunSpec, read_result, write_spec
    from compare import frameworks
    from compare.executors.local import run_env
    fw = frameworks.get(framework)
    defaults = dict(framework=fw.name, backend=fw.backend, batch_size=4, image_size=32,
                    warmup_steps=2, steps=4, windows=2)
    defaults.update(fields)
    spec = RunSpec(**defaults)
    spec_path, result_path = tmp_path / "spec.json", tmp_path / "result.json"
    write_spec(str(spec_path), spec)
    backend = importlib.import_module("backends." + fw.backend)
    cmd = backend.command(backend_python(fw.name), spec, str(spec_path), str(result_path))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=run_env(spec, ROOT),
                          timeout=timeout, cwd=str(tmp_path))
    assert result_path.exists(), "no result file; exit {}:\n{}".format(
        proc.returncode, proc.stderr[-4000:])
    return read_result(str(result_path)), proc


_TORCH_LAYERS = None


def torch_layers() -> dict:
    """The PyTorch model's layers, read in its own environment (the host test venv has no torch):
    trainable shapes in order, every conv's stride, and [stride, kernel shape] of the main-path
    convs (downsample branches left out). The other backends' twins are checked against these."""
    global _TORCH_LAYERS
    if _TORCH_LAYERS is None:
        out = run_in_backend("caffe2", """
import json
from torch import nn
from backends.caffe2_torch.resnet50 import ResNet50
m = ResNet50(1000)
convs = [(n, c) for n, c in m.named_modules() if isinstance(c, nn.Conv2d)]
print(json.dumps({
    "shapes": [list(p.shape) for p in m.parameters()],
    "strides": [c.stride[0] for _, c in convs],
    "main_convs": [[c.stride[0], [c.kernel_size[0], c.kernel_size[1], c.in_channels, c.out_channels]]
                   for n, c in convs if "downsample" not in n]}))
""")
        _TORCH_LAYERS = json.loads(out.strip().splitlines()[-1])
    return _TORCH_LAYERS


TINY_RUN = ["--batch-size", "4", "--image-size", "32", "--steps", "2", "--warmup", "1", "--windows", "1"]


def run_compare(args, timeout: int = 1500, env=None) -> subprocess.CompletedProcess:
    """`python -m compare ARGS` from the repo root, as a user types it; asserts exit code 0."""
    proc = subprocess.run([sys.executable, "-m", "compare"] + list(args), cwd=str(ROOT), text=True,
                          capture_output=True, env=dict(os.environ, **(env or {})), timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc
