"""Time to accuracy on one GPU (issue 34): PyTorch and JAX, fp16 and bf16, 5 seeds each, on the
large learnable set, each run through its backend as `compare run` starts it
(`python -m backends.<backend> SPEC RESULT` with the run's environment), within a deadline.

    python3 bench/accuracy_gpu.py OUTDIR DATA [--deadline 450] [--repeats 5] [--target 0.9]
        [--max-epochs 12] [--batch 256] [--gpus 1] [--device cuda] [--image-size 64]

Runs go precision by precision and, within one, seed by seed (every framework once, then the next
seed), so a deadline leaves whole 5-seed sets of the first precisions; a run that would start
after it is listed as not run. Writes OUTDIR/runs/
<run_id>/{spec,result}.json and mlperf.log, OUTDIR/logs/<run_id>.mllog (for mlperf-logging's
checker on the host), OUTDIR/accuracy.md (the report's time-to-accuracy tables) and prints it.
"""
import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends import launchers, mllog  # noqa: E402
from backends.protocol import RunSpec, read_result, write_spec  # noqa: E402
from compare import frameworks  # noqa: E402
from compare.executors.processes import run_env  # noqa: E402
from compare.reporting import accuracy, tables  # noqa: E402


def spec_of(fw: str, precision: str, repeat: int, args, classes: int) -> RunSpec:
    f = frameworks.get(fw)
    return RunSpec(framework=f.name, backend=f.backend, device=args.device, gpus=args.gpus,
                   precision=precision,
                   batch_size=args.batch, image_size=args.image_size, num_classes=classes, data=args.data,
                   target_accuracy=args.target, max_epochs=args.max_epochs, eval_every=1,
                   repeat=repeat, options=dict(
                       {"loader_workers": args.workers},
                       # grain is not installed on the lent machine: JAX's thread-pool loader
                       **({"loader": "threads"} if fw == "jax" and not _has("grain") else {})))


def _has(module: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(module) is not None


def run_one(spec: RunSpec, out: Path, timeout: float, python: str):
    work = out / "runs" / spec.run_id
    work.mkdir(parents=True, exist_ok=True)
    write_spec(str(work / "spec.json"), spec)
    cmd = launchers.command(python, spec, str(work / "spec.json"), str(work / "result.json"))
    with open(work / "stderr.txt", "w") as err:
        try:
            subprocess.run(cmd, stdout=err, stderr=subprocess.STDOUT, env=run_env(spec, ROOT),
                           cwd=str(work), timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
    if not (work / "result.json").exists():
        print("  no result; its output ends: " + (work / "stderr.txt").read_text()[-600:])
        return None
    if (work / mllog.FILE_NAME).exists():
        (out / "logs").mkdir(exist_ok=True)
        shutil.copy(str(work / mllog.FILE_NAME), str(out / "logs" / (spec.run_id + ".mllog")))
    return read_result(str(work / "result.json"))


def _finished(out: Path, spec: RunSpec):
    """The finished result of `spec` left in OUT/runs by an earlier call, if its spec is this one."""
    path = out / "runs" / spec.run_id / "result.json"
    if not path.exists():
        return None
    result = read_result(str(path))
    same = result.spec_hash == spec.spec_hash and result.status in ("ok", "not_converged")
    return result if same and result.accuracy else None


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("data")
    p.add_argument("--deadline", type=float, default=450.0)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--target", type=float, default=0.9)
    p.add_argument("--max-epochs", type=int, default=12)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--frameworks", default="caffe2,jax")
    p.add_argument("--precisions", default="fp16,bf16")
    p.add_argument("--python", action="append", default=[], help="FRAMEWORK=PATH (default: this one)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--gpus", type=int, default=1)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    args = p.parse_args()
    out, t0 = Path(args.out), time.time()
    out.mkdir(parents=True, exist_ok=True)
    classes = len([d for d in os.listdir(os.path.join(args.data, "train")) if not d.startswith(".")])
    results, skipped = [], []
    pythons = dict(item.split("=", 1) for item in args.python)
    # precision by precision, seed by seed within it: a deadline leaves whole 5-seed sets (what
    # MLPerf's score needs) of the first precisions rather than fewer seeds of every one
    runs = [(fw, p, r) for p in args.precisions.split(",") for r in range(args.repeats)
            for fw in args.frameworks.split(",")]
    if True:
        for fw, precision, repeat in runs:
            spec = spec_of(fw, precision, repeat, args, classes)
            kept = _finished(out, spec)  # an earlier call's run of the same spec (carried back)
            if kept is not None:
                print("{} {} kept from an earlier call".format(spec.run_id, kept.status))
                results.append(kept)
                continue
            left = args.deadline - (time.time() - t0)
            if left < 30:
                skipped.append(spec.run_id)
                continue
            started = time.time()
            result = run_one(spec, out, left, pythons.get(fw, sys.executable))
            a = (result.accuracy if result else {}) or {}
            print("{} {} {:.0f} s wall: time to train {} s, epochs {}, best {}, init {} s, "
                  "compile {} s{}".format(
                      spec.run_id, result.status if result else "no result",
                      time.time() - started, _r(a.get("time_to_train_s")), a.get("epochs"),
                      _r(a.get("best"), 3), _r(a.get("init_s")), _r(a.get("compile_s")),
                      "" if not result or result.status == "ok" else ": " + str(result.reason)[:300]),
                  flush=True)
            if result is not None:
                results.append(result)
    text = tables.markdown(accuracy.tables(results, price=2.5))
    if skipped:
        text += "\nNot run (deadline): " + ", ".join(skipped) + "\n"
    (out / "accuracy.md").write_text(text)
    print(text)
    return 0


def _r(x, digits=1):
    return None if x is None else round(x, digits)


if __name__ == "__main__":
    sys.exit(main())
