"""Test helpers, in one module: backend interpreters and runners, the CLI as a user types it,
and a fixed set of RunResults for the report tests."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from backends.protocol import RunResult, RunSpec

ROOT = Path(__file__).resolve().parent.parent
RESNET50_TRAINABLE = 25557032  # torchvision's count for resnet50 (ResNet-50 v1.5, 1000 classes)
RESNET50_BN_RUNNING_STATS = 53120  # BN running mean/var: not trained, counted by Keras and Gluon


def _cpu_flags() -> set:
    try:
        with open("/proc/cpuinfo") as f:
            return {w for line in f if line.startswith("flags") for w in line.split(":", 1)[1].split()}
    except OSError:
        return set()


# oneDNN's bfloat16 CPU kernels need AVX-512 (avx512_core: F, BW, VL, DQ). Without it MXNet 1.9.1
# has no bf16 kernel at all and TensorFlow none for NCHW pooling in bf16: those cells are
# recorded `unsupported` with the framework's words, and tests expect that on such a CPU.
AVX512 = "avx512bw" in _cpu_flags()
# with neither, bf16 is emulated and each result says so in settings["note"]
BF16_INSTRUCTIONS = bool(_cpu_flags() & {"avx512_bf16", "amx_bf16"})


def backend_python(name: str) -> str:
    """The interpreter `compare run` would use for framework `name` on this CPU machine."""
    from compare import envs, frameworks
    return envs.resolve(frameworks.get(name), "cpu", {}).python


def run_in_backend(name: str, code: str, timeout: int = 600) -> str:
    """Run `code` with the backend's interpreter, `backends` importable; return its stdout."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if name == "tf":  # what backends.tf_horovod.prepare sets for CPU runs before TF loads
        env.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
    proc = subprocess.run([backend_python(name), "-c", code], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=str(ROOT))
    if proc.returncode != 0:
        raise AssertionError("backend code failed (exit {}):\n{}".format(
            proc.returncode, proc.stderr[-4000:]))
    return proc.stdout


def run_backend(framework: str, tmp_path, timeout: int = 600, **fields):
    """Write a spec, run it in the backend's environment as the local executor would (the launcher
    the backend asks for around its command, same environment variables); return (RunResult,
    CompletedProcess)."""
    from backends import launchers
    from backends.protocol import RunSpec, read_result, write_spec
    from compare import frameworks
    from compare.executors.processes import run_env
    fw = frameworks.get(framework)
    defaults = dict(framework=fw.name, backend=fw.backend, batch_size=4, image_size=32,
                    warmup_steps=2, steps=4, windows=2)
    defaults.update(fields)
    spec = RunSpec(**defaults)
    spec_path, result_path = tmp_path / "spec.json", tmp_path / "result.json"
    write_spec(str(spec_path), spec)
    cmd = launchers.command(backend_python(fw.name), spec, str(spec_path), str(result_path))
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
from backends.caffe2_torch.resnet import ResNet50
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


def run_compare(args, timeout: int = 1500, env=None, code: int = 0) -> subprocess.CompletedProcess:
    """`python -m compare ARGS` from the repo root, as a user types it; asserts exit code `code`
    (0; 1 for a run in which a cell failed or timed out)."""
    proc = subprocess.run([sys.executable, "-m", "compare"] + list(args), cwd=str(ROOT), text=True,
                          capture_output=True, env=dict(os.environ, **(env or {})), timeout=timeout)
    assert proc.returncode == code, proc.stderr[-4000:]
    return proc


def main_exit(argv, capsys):
    """compare.cli.main(argv) in this process: (exit code, stdout, stderr)."""
    import pytest

    from compare.cli import main
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    out, err = capsys.readouterr()
    return exit_info.value.code, out, err


# --- a fixed set of RunResults (no training): the A6000 seed figures for TensorFlow, plus PyTorch
# repeats, an out-of-memory cell and a failed MXNet cell (report, HTML, diff, references tests)
# tf_cnn_benchmarks on 1/2/4/8x RTX A6000, resnet50, batch 256 (compare/references/)
A6000 = {"fp16": {1: 1220.76, 2: 2382.99, 4: 4634.09, 8: 8816.47},
         "fp32": {1: 520.85, 2: 1036.15, 4: 2042.98, 8: 3980.10}}
MACHINE = {"hostname": "lab1", "cpu_model": "AMD EPYC 7543", "cpu_count": 64, "memory_gib": 503.7,
           "gpus": [{"index": i, "name": "NVIDIA RTX A6000", "driver": "535.54"} for i in range(8)],
           "cuda_driver_version": "12.2", "compare_version": "0.1.0",
           "git": {"commit": "0123456789abcdef", "dirty": False}}


def result(framework, precision, gpus, ips=None, repeat=0, status="ok", reason=None, watts=None,
           device="cuda", batch=256, device_name="NVIDIA RTX A6000", version=None):
    spec = RunSpec(framework=framework, backend={"tf": "tf_horovod", "caffe2": "caffe2_torch"}.get(
        framework, framework), gpus=gpus, device=device, precision=precision, batch_size=batch,
        repeat=repeat)
    telemetry = {"source": "nvml", "samples": 20, "power_avg_w": watts, "util_avg_pct": 97.0,
                 "mem_used_max_mib": 40000.0, "sm_clock_avg_mhz": 1800.0, "temp_max_c": 80.0}
    ok = status == "ok"
    return RunResult(run_id=spec.run_id, status=status, spec=spec.to_dict(), reason=reason,
                     images_per_sec=ips if ok else None, median_images_per_sec=ips if ok else None,
                     uncertainty=0.5 if ok else None, jitter=1.0 if ok else None,
                     distribution="horovod" if framework == "tf" else "ddp",
                     device_name=device_name,
                     framework_version=version or {"tf": "tensorflow 2.15.1", "caffe2": "torch 2.3.1",
                                                   "mxnet": "mxnet 1.9.1"}[framework],
                     telemetry=telemetry if watts is not None else {})


def fixed_results():
    out = [result("tf", p, n, ips, watts=290.0 * n) for p, row in A6000.items() for n, ips in row.items()]
    out += [result("caffe2", "fp16", 1, ips, repeat=i, watts=280.0)
            for i, ips in enumerate([1250.0, 1290.0, 1300.0, 1330.0, 1400.0])]
    out += [result("caffe2", "fp16", 2, 2450.0, watts=570.0), result("caffe2", "fp32", 1, 560.0),
            result("caffe2", "fp32", 2, status="oom", reason="CUDA out of memory. Tried to allocate 2 GiB"),
            result("mxnet", "fp32", 1, status="failed", reason="MXNetError: cudnn failed\nline 2")]
    return out


# --- results with timed windows (the intervals of report, diff, history and check tests) ---------
def windowed(framework, precision, gpus, windows, repeat=0, device="cuda", nodes=1, batch=256,
             image=224, layout=None):
    """An ok result as the harness writes it: the run's figure is the mean of its window figures."""
    import statistics
    spec = RunSpec(framework=framework, backend={"tf": "tf_horovod", "caffe2": "caffe2_torch"}.get(
        framework, framework), gpus=gpus, nodes=nodes, device=device, precision=precision,
        batch_size=batch, image_size=image, repeat=repeat)
    ws = [float(w) for w in windows]
    return RunResult(run_id=spec.run_id, status="ok", spec=spec.to_dict(), images_per_sec=statistics.fmean(ws),
                     window_images_per_sec=ws, median_images_per_sec=statistics.median(ws),
                     uncertainty=statistics.stdev(ws) / len(ws) ** 0.5 if len(ws) > 1 else 0.0,
                     distribution="ddp", device_name="cpu" if device == "cpu" else "NVIDIA H200",
                     framework_version={"tf": "tensorflow 2.15.1", "caffe2": "torch 2.3.1",
                                        "mxnet": "mxnet 1.9.1"}[framework],
                     settings={"layout": layout} if layout else {})


def scaled(r, factor):
    """A copy of result r whose windows (and so its figures) are `factor` times as fast."""
    import copy
    out = copy.deepcopy(r)
    out.window_images_per_sec = [w * factor for w in r.window_images_per_sec]
    for name in ("images_per_sec", "median_images_per_sec", "uncertainty"):
        setattr(out, name, getattr(r, name) * factor)
    return out


def machine_of(results, machine=None):
    """MACHINE (or `machine`) as the machine `results` ran on: its GPUs named as the results'
    cuda devices, its CPU as their cpu device (a campaign's results name its machine's devices)."""
    record = dict(machine if machine is not None else MACHINE)
    gpus = sorted({r.device_name for r in results if r.spec["device"] == "cuda" and r.device_name})
    cpus = [r.device_name for r in results if r.spec["device"] == "cpu" and r.device_name]
    if gpus:
        record["gpus"] = [dict(g, name=gpus[i % len(gpus)]) for i, g in enumerate(record["gpus"])]
    if cpus:
        record["cpu_model"] = cpus[0]
    return record


def save_campaign(root, results, machine=None, created_at=None):
    """A campaign folder holding `results` (created_at: the ISO time campaign.json records), on
    `machine`, by default the machine they ran on (machine_of)."""
    from backends.protocol import write_json_atomic
    from compare.store import CAMPAIGN_FILE, Campaign
    c = Campaign.create(root, {"test": True}, machine if machine is not None else machine_of(results))
    c.plan([RunSpec.from_dict(r.spec) for r in results])  # as `compare run` plans its cells
    for r in results:
        c.save_result(r)
    c.unlock()
    if created_at:
        write_json_atomic(str(c.root / CAMPAIGN_FILE), dict(c.meta, created_at=created_at))
    return c.root


def timed_campaign(folder, cells):
    """A campaign of this machine (machine_record.fingerprint) at `folder` whose caffe2 cells
    (precision, gpus, seconds) took those seconds from start to end: what the plan's ETA reads."""
    from compare import machine_record
    earlier = []
    for precision, gpus, seconds in cells:
        r = result("caffe2", precision, gpus, 1000.0)
        r.phases = {"cell_start": 1000.0, "cell_end": 1000.0 + seconds}
        r.spec_hash = RunSpec.from_dict(r.spec).spec_hash
        earlier.append(r)
    save_campaign(folder, earlier, machine={"cpu_model": machine_record.cpu_model(),
                                            "cpu_count": os.cpu_count(), "gpus": []})


def assert_phases(result: dict) -> None:
    """A result of `compare run` accounts for its time: every phase is there, in order, and the
    spans between them add up to no more than the cell's wall time."""
    from backends.phases import OPTIONAL, ORDER, durations
    marks = result["phases"]
    expected = [n for n in ORDER if n not in OPTIONAL or n in marks]
    assert [n for n in ORDER if n in marks] == expected, sorted(marks)
    times = [marks[n] for n in expected]
    assert times == sorted(times), marks
    spans = durations(marks)
    wall = marks["cell_end"] - marks["cell_start"]
    assert 0 < sum(spans.values()) <= wall + 1e-6
    assert marks["first_step_done"] - marks["launched"] > 0  # time to first step


# --- stand-ins for a framework's python (`--python caffe2=THIS`). Before its first cell, compare
# asks an interpreter which of the framework's modules it has (`THIS -c CODE MODULE...`:
# envs.probe); a stand-in answers with empty packages of those names beside it
STAND_INS = "stand-ins"
# the answer, in a stand-in that is a Python script: CODE run as `python -c` runs it, the
# stand-ins first on its path (no braces: it goes into templates that str.format fills)
ANSWERS = '''
if sys.argv[1:2] == ["-c"]:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "stand-ins"))
    code, sys.argv = sys.argv[2], ["-c"] + sys.argv[3:]
    exec(code)
    sys.exit(0)
'''


def write_python(path: Path, text: str) -> Path:
    """A stand-in interpreter at `path` (the script `text`), with the stand-ins of every
    framework's modules beside it."""
    from compare import frameworks
    for module in {m for fw in frameworks.FRAMEWORKS for m in fw.modules}:
        (path.parent / STAND_INS / module).mkdir(parents=True, exist_ok=True)
        (path.parent / STAND_INS / module / "__init__.py").write_text("")
    path.write_text(text)
    path.chmod(0o755)
    return path


def failing_python(folder: Path) -> Path:
    """A framework's python that trains nothing should a check be missing: it says it has the
    framework's modules, and fails whatever else it is asked (each cell at once)."""
    return write_python(Path(folder) / "failing-python", '#!/bin/sh\n[ "$1" = -c ] && PYTHONPATH={} '
                        'exec {} "$@"\nexit 1\n'.format(Path(folder) / STAND_INS, sys.executable))


# --- the reliability tests: `compare` as a process, a fake framework interpreter, and the process
# table (which processes belong to a campaign)
# a stand-in for a framework's python: the real harness with a trainer that only sleeps, or a
# backend misbehaving as MODE says
FAKE_PYTHON = '''#!{python}
import os, subprocess, sys, time
''' + ANSWERS + '''from backends import harness
from backends.protocol import read_spec
MODE = {mode!r}
spec_path, result_path = sys.argv[-2:]


class Idle(harness.Trainer):
    def step(self):
        time.sleep(0.001)

    def describe(self):  # the CPU's name, as every backend names it on a CPU
        return {{"framework_version": "fake 1.0|beta", "device_name": harness.cpu_name()}}


if MODE == "stale":  # only a result written by another attempt (a late orphan's) is there
    spec = read_spec(spec_path)
    spec.nonce = "0123456789abcdef"
    harness.run(spec, result_path, lambda s: Idle())
    sys.exit(0)
if MODE == "orphan":  # a worker that leaves its launcher's session and outlives it
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
if MODE == "killed-once":  # killed by SIGKILL (`kill -9`) with nothing on stderr, the first time
    marker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "killed-once")
    if not os.path.exists(marker):
        open(marker, "w").close()
        os.kill(os.getpid(), 9)
if MODE == "killed-r1":  # repeat 1 alone killed by SIGKILL, the first time
    marker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "killed-r1")
    if read_spec(spec_path).repeat == 1 and not os.path.exists(marker):
        open(marker, "w").close()
        os.kill(os.getpid(), 9)
if MODE == "unsupported":  # the framework cannot run the cell here: a recorded outcome
    def setup(spec):
        raise harness.Unsupported("no such device here (the test's fake)")
    sys.exit(harness.main(setup, [spec_path, result_path]))
if MODE == "hang":  # a cell that runs until it is stopped
    time.sleep(300)
if MODE == "hold":  # a cell that runs while a file `hold` lies beside this script
    while os.path.exists(os.path.join(os.path.dirname(os.path.abspath(__file__)), "hold")):
        time.sleep(0.05)
if MODE == "escape":  # colours, a window title and a bell on stderr, then a crash
    sys.stderr.write("\\x1b[31mboom\\x1b[0m\\x1b]0;pwned\\x07 | done\\r\\n")
    sys.exit(3)
sys.exit(harness.main(lambda s: Idle(), [spec_path, result_path]))
'''
FAST = ["--device", "cpu", "--executor", "local", "--batch-size", "4", "--image-size", "32",
        "--steps", "3", "--warmup", "1", "--windows", "1"]


def fake_python(folder: Path, mode: str = "ok") -> Path:
    return write_python(Path(folder) / "fake-python-{}".format(mode),
                        FAKE_PYTHON.format(python=sys.executable, mode=mode))


WIDE = {"COLUMNS": "500"}  # rich wraps what it prints at 80 columns when stderr is no terminal


def compare(args, cwd=ROOT, timeout=300, env=None) -> subprocess.CompletedProcess:
    """`python -m compare ARGS` as a user types it; returns whatever it returned."""
    return subprocess.run([sys.executable, "-m", "compare"] + [str(a) for a in args], cwd=str(cwd),
                          text=True, capture_output=True, timeout=timeout,
                          env=dict(os.environ, **WIDE, **(env or {})))


def start_compare(args, env=None) -> subprocess.Popen:
    """`compare ARGS` in the background, in a session of its own (signals reach only it)."""
    return subprocess.Popen([sys.executable, "-m", "compare"] + [str(a) for a in args],
                            cwd=str(ROOT), text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True,
                            env=dict(os.environ, **WIDE, **(env or {})))


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def processes_of(campaign: Path, needle: str = ""):
    """[(pid, command line)] of live processes whose environment or command line names the
    campaign folder (and whose environment holds `needle`, if given)."""
    key, found = str(campaign).encode(), []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        environ = _read("/proc/{}/environ".format(entry.name))
        cmdline = _read("/proc/{}/cmdline".format(entry.name))
        if (key in environ or key in cmdline) and needle.encode() in environ:
            found.append((int(entry.name), cmdline.replace(b"\0", b" ").decode(errors="replace")))
    return found


def wait_for(condition, timeout: float, step: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(step)
    return condition()


def kill_leftovers(campaign: Path) -> None:
    """After a test: end whatever of the campaign is still alive (the test already failed)."""
    for pid, _ in processes_of(campaign):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


# --- time to accuracy (docs/accuracy.md): a learnable folder and one cell run by the harness
def write_formats(root: Path, frameworks) -> None:
    """The native formats of `frameworks` for the folder `root` (checked: its manifest exists),
    written by their own writers in their environments, as `compare data prepare` does."""
    from compare import datasets, formats
    from compare import frameworks as fws
    train = datasets.check(datasets.open_folder(str(root)))
    for name in frameworks:
        subprocess.run(formats.writer_command(fws.get(name), backend_python(name), train.path),
                       check=True, capture_output=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))


def learnable_folder(root: Path, frameworks=(), train_per_class: int = 16,
                     val_per_class: int = 8) -> Path:
    """DIR/train + DIR/val of the learnable generator's 10 classes (compare/learnable.py), both
    checked as `compare data prepare` checks them, with the native formats of `frameworks`."""
    from compare import datasets, learnable
    from compare.imagegen import make
    make(root, learnable.LearnableSpec(classes=10, train_per_class=train_per_class,
                                       val_per_class=val_per_class), 1, lambda n, b: None)
    datasets.check(datasets.open_folder(str(root / "val")))
    write_formats(root, frameworks)
    return root


_HARNESS = """
import importlib, json
from backends import harness, protocol
spec = protocol.read_spec({spec!r})
package = "backends." + spec.backend
setup, report = harness.backend_setup(package), {{}}
{wrap}
def wrapped(s):
    trainer = setup(s)
    wrap(trainer, report)
    return trainer
harness.run(spec, {result!r}, wrapped, importlib.import_module(package).OPTIONS)
print("REPORT " + json.dumps(report))
"""


def run_wrapped(framework: str, out: Path, wrap: str, timeout: int = 600, **fields):
    """One worker's run through harness.run in the backend's environment (its run_env), the
    trainer passed to `wrap` (code defining wrap(trainer, report)) before the harness measures
    it; returns (RunResult, the report dict wrap filled in)."""
    from backends.protocol import RunSpec, read_result, write_spec
    from compare import frameworks
    from compare.executors.processes import run_env
    fw = frameworks.get(framework)
    spec = RunSpec(**dict(dict(framework=fw.name, backend=fw.backend), **fields))
    out.mkdir(parents=True, exist_ok=True)
    spec_path, result_path = out / "spec.json", out / "result.json"
    write_spec(str(spec_path), spec)
    code = _HARNESS.format(spec=str(spec_path), result=str(result_path), wrap=wrap)
    proc = subprocess.run([backend_python(framework), "-c", code], capture_output=True, text=True,
                          env=run_env(spec, ROOT), timeout=timeout, cwd=str(out))
    assert result_path.exists(), "no result; exit {}:\n{}".format(proc.returncode, proc.stderr[-4000:])
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("REPORT ")]
    return read_result(str(result_path)), json.loads(lines[-1][7:]) if lines else {}
