"""Harness overhead: the same configuration through `compare run` and through bench/bare_loop.py,
one after the other, alternated; prints the ratio compare / bare (target >= 0.98).

    python bench/harness_overhead.py --device cpu --precision fp32 --batch-size 32 --image-size 64
    python bench/harness_overhead.py --device cuda --precision fp16 --batch-size 256 --rounds 2

--compile and --cuda-graphs switch the same thing on in both. Run on an otherwise idle machine.
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def compare_run(a, folder: Path) -> float:
    cmd = [sys.executable, "-m", "compare", "run", "--frameworks", "caffe2", "--gpus", "1",
           "--executor", "local",
           "--device", a.device, "--precision", a.precision, "--batch-size", str(a.batch_size),
           "--image-size", str(a.image_size), "--steps", str(a.steps), "--warmup", str(a.warmup),
           "--results", str(folder)]
    cmd += (["--compile"] if a.compile else []) + (["--option", "cuda_graphs=true"] if a.cuda_graphs else [])
    subprocess.run(cmd, cwd=str(ROOT), check=True, capture_output=True)
    result = json.loads(next((folder / "results").glob("*.json")).read_text())
    if result["status"] != "ok":
        raise SystemExit("compare run: {} {}".format(result["status"], result["reason"]))
    return result["images_per_sec"]


def torch_python(device: str) -> str:
    """The interpreter `compare run` uses for PyTorch here: the bare loop must use the same."""
    sys.path.insert(0, str(ROOT))
    from compare import envs, frameworks
    return envs.resolve(frameworks.get("caffe2"), device, {}).python


def bare_run(a) -> float:
    bare_extra = (["--compile"] if a.compile else []) + (["--cuda-graphs"] if a.cuda_graphs else [])
    cmd = [torch_python(a.device), str(ROOT / "bench" / "bare_loop.py"), "--device", a.device,
           "--precision", a.precision, "--batch-size", str(a.batch_size), "--image-size",
           str(a.image_size), "--steps", str(a.steps), "--warmup", str(a.warmup)] + bare_extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["images_per_sec"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--cuda-graphs", action="store_true")
    a = ap.parse_args()
    harness, bare = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.rounds):
            harness.append(compare_run(a, Path(tmp) / "c{}".format(i)))
            bare.append(bare_run(a))
            print("round {}: compare {:.2f} img/s, bare loop {:.2f} img/s".format(
                i + 1, harness[-1], bare[-1]), flush=True)
    ratio = statistics.median(harness) / statistics.median(bare)
    print("ratio compare/bare = {:.4f}  (medians: {:.2f} / {:.2f} img/s; {} {} b{} s{})".format(
        ratio, statistics.median(harness), statistics.median(bare), a.device, a.precision,
        a.batch_size, a.image_size))


if __name__ == "__main__":
    main()
