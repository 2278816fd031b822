"""Where a PyTorch cell's set-up goes before its first step (issue 35: 5-6 s from `devices_ready`
to `model_built` in every PyTorch cell on an H200, against 0.2 s to build the network on a CPU).

    python3 bench/torch_setup.py [--batch 256] [--precision fp16] [--top 25]

Builds the backend's own trainer (backends/caffe2_torch, default mode) under cProfile, in a fresh
process, and prints the wall time of the runtime's start and of the trainer, then the functions
with the most cumulative time. One device call; no compare campaign.
"""
import argparse
import cProfile
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--device", default="cuda", help="cpu: a dry run of the script")
    a = ap.parse_args()
    t0 = time.perf_counter()
    import backends.caffe2_torch as package
    from backends import harness
    from backends import options as opts
    from backends.protocol import RunSpec
    spec = RunSpec("caffe2", "caffe2_torch", batch_size=a.batch, precision=a.precision,
                   device=a.device, steps=10, warmup_steps=2)
    spec.options = opts.parse(tuple(package.OPTIONS) + harness.COMMON_OPTIONS, spec.options,
                              "caffe2")
    setup = harness.backend_setup("backends.caffe2_torch")
    from backends import caches
    caches.bytecode(package.FRAMEWORK)  # as the harness does before the framework's import
    import torch
    t1 = time.perf_counter()
    from backends.caffe2_torch import runtime, train
    prof = cProfile.Profile()
    prof.enable()
    rt = runtime.start(spec)
    t2 = time.perf_counter()
    trainer = train.TorchTrainer(spec, rt)
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    sync()
    t3 = time.perf_counter()
    prof.disable()
    trainer.step()
    sync()
    t4 = time.perf_counter()
    print("imports {:.2f} s, runtime start {:.2f} s, trainer {:.2f} s, first step {:.2f} s".format(
        t1 - t0, t2 - t1, t3 - t2, t4 - t3))
    print("bytecode: {}".format(caches.record().get("python_bytecode", "as the machine has it")))
    pstats.Stats(prof).sort_stats("cumulative").print_stats(a.top)
    del setup


if __name__ == "__main__":
    main()
