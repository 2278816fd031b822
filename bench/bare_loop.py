"""A bare PyTorch training loop of the same ResNet-50: no harness, no subprocess, no windows.

The yardstick for the harness overhead (bench/harness_overhead.py) and for "is compare's number as
good as a hand-written loop". Prints one JSON line: {"images_per_sec": ...}.

    python bench/bare_loop.py --device cuda --precision fp16 --batch-size 256 --cuda-graphs
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from backends.caffe2_torch.resnet import ResNet50  # noqa: E402  (the network only)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "fp16", "bf16"])
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--cuda-graphs", action="store_true")
    a = ap.parse_args()
    dev = torch.device(a.device)
    tf32 = a.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    fmt = torch.channels_last if dev.type == "cuda" else torch.contiguous_format
    model = ResNet50().to(dev, memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9,
                          **({"fused": True} if dev.type == "cuda" else {"foreach": True}))
    net = torch.compile(model) if a.compile else model
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(a.precision)
    scaler = torch.amp.GradScaler(dev.type) if a.precision == "fp16" else None
    x = torch.randn(a.batch_size, 3, a.image_size, a.image_size, device=dev).to(memory_format=fmt)
    y = torch.randint(0, 1000, (a.batch_size,), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=dtype or torch.float32, enabled=dtype is not None,
                            cache_enabled=not a.cuda_graphs):
            loss = F.cross_entropy(net(x), y)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()

    run = step
    if a.cuda_graphs:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(g):
            step()
        run = g.replay
    for _ in range(a.warmup):
        run()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        run()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    print(json.dumps({"images_per_sec": a.batch_size * a.steps / dt, "seconds": dt}))


if __name__ == "__main__":
    main()
