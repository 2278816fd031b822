"""Where a PyTorch training step's time goes on the GPU: forward, backward, optimizer (CUDA
events), and kernel time by kind (torch.profiler). Evidence for the limits in BENCHMARKS.md.

    python bench/profile_step.py --precision fp16 --batch-size 512 [--compile]
"""
import argparse
import collections
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from backends.caffe2_torch.train import setup  # noqa: E402
from backends.protocol import RunSpec  # noqa: E402

KINDS = (("triton (fused BN/ReLU/add)", ("triton",)),  # order matters: first match wins
         ("batchnorm", ("batch_norm", "batchnorm", "bn_fw", "bn_bw", "bn_")),
         ("optimizer", ("sgd", "multi_tensor")),
         ("conv/matmul", ("conv", "gemm", "xmma", "cutlass", "sm90", "implicit", "fprop", "dgrad",
                          "wgrad")),
         ("elementwise/other", ("",)))


def phases(t, steps: int):
    """Mean ms of forward, backward and optimizer over `steps` eager steps (CUDA events)."""
    ev = [[torch.cuda.Event(enable_timing=True) for _ in range(4)] for _ in range(steps)]
    for e in ev:
        t.optimizer.zero_grad(set_to_none=True)
        e[0].record()
        with torch.autocast("cuda", dtype=t.amp_dtype or torch.float32, enabled=t.amp_dtype is not None):
            loss = F.cross_entropy(t.model(t.images), t.labels)
        e[1].record()
        (t.scaler.scale(loss) if t.scaler else loss).backward()
        e[2].record()
        if t.scaler:
            t.scaler.step(t.optimizer)
            t.scaler.update()
        else:
            t.optimizer.step()
        e[3].record()
    torch.cuda.synchronize()
    return [sum(e[i].elapsed_time(e[i + 1]) for e in ev) / steps for i in range(3)]


def kernels(t, steps: int):
    acts = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(steps):
            t.step()
        torch.cuda.synchronize()
    by_kind = collections.Counter()
    for evt in prof.key_averages():
        us = getattr(evt, "device_time_total", None) or getattr(evt, "cuda_time_total", 0)
        if not us or evt.key.startswith(("ProfilerStep", "aten::", "cudaGraph")):
            continue
        name = evt.key.lower()
        kind = next(k for k, words in KINDS if any(w in name for w in words))
        by_kind[kind] += us / 1000.0 / steps
    return by_kind


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--compile", action="store_true")
    a = ap.parse_args()
    spec = RunSpec(framework="caffe2", backend="caffe2_torch", device="cuda", precision=a.precision,
                   batch_size=a.batch_size, compile=a.compile)
    t = setup(spec)
    for _ in range(10):
        t.step()
    fwd, bwd, opt = phases(t, 20)
    step = fwd + bwd + opt
    print("{} b{} compile={}: step {:.2f} ms = forward {:.2f} + backward {:.2f} + optimizer {:.2f}"
          " ({:.0f} img/s at this split)".format(a.precision, a.batch_size, a.compile, step, fwd, bwd,
                                                opt, a.batch_size / step * 1000))
    k = kernels(t, 10)
    total = sum(k.values())
    print("kernel time per step {:.2f} ms (GPU idle inside the step: {:.1%})".format(
        total, max(0.0, 1 - total / step)))
    for kind, ms in k.most_common():
        print("  {:<28} {:7.2f} ms  {:5.1%}".format(kind, ms, ms / total))


if __name__ == "__main__":
    main()
