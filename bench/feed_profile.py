"""Where a decode=hw feeder's cost to the PyTorch step lands on the GPU (issue 36): the step
alone, then beside a load of bench/feed_contention.py (default `split`: the engines' share and
the CPU decoders, compare's prepare), each for --steps steps under torch.profiler (CUPTI), and
from its trace, per CUDA stream: the kernels and copies, their GPU time, and how long each waited
between its launch call's end and its start on the GPU; per thread: the CUDA calls that took the
most time (a synchronisation the decode thread waits in); for the step: its kernels' GPU time
and the gaps between them, per step. So the loss is named: the step's kernels slower beside the
decode (the GPU shared), or gaps in the step's stream (its launches late: the CPU or the GIL), or
the decode's kernels queued behind the step's.

    python3 bench/feed_profile.py DIR [--mode split] [--precision fp16] [--batch-size 256]
        [--steps 20] [--trace-dir DIR]

DIR: JPEGs (`compare data make DIR --images 2048 --classes 100`). One device call, ~1-2 min.
"""
import argparse
import gzip
import json
import os
import sys
import threading
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import feed_contention as fc  # noqa: E402  (bench/'s own, beside this file)


def summarise(trace_path: str, steps: int, main_tid: int, names) -> None:
    """Print the trace's streams, waits, threads and the step's busy time."""
    opener = gzip.open if trace_path.endswith(".gz") else open
    with opener(trace_path, "rt") as f:
        events = json.load(f)["traceEvents"]
    launches = {}  # correlation -> the launch call's end (us)
    calls = defaultdict(lambda: defaultdict(lambda: [0, 0.0]))  # tid -> name -> [count, us]
    gpu = []
    for e in events:
        cat, args = e.get("cat", ""), e.get("args") or {}
        if cat in ("cuda_runtime", "cuda_driver"):
            if "correlation" in args:
                launches[args["correlation"]] = e["ts"] + e.get("dur", 0)
            c = calls[e.get("tid")][e["name"]]
            c[0] += 1
            c[1] += e.get("dur", 0)
        elif cat in ("kernel", "gpu_memcpy", "gpu_memset"):
            gpu.append(e)
    by_stream = defaultdict(list)
    for e in gpu:
        by_stream[(e.get("args") or {}).get("stream")].append(e)
    step_stream = max(by_stream, key=lambda s: sum(e.get("dur", 0) for e in by_stream[s]))
    print("  stream  kernels  copies   GPU ms/step  wait after launch ms: median  p90    max   "
          "(the step's stream: {})".format(step_stream))
    for stream, evs in sorted(by_stream.items(), key=lambda kv: -len(kv[1])):
        waits = sorted((e["ts"] - launches[e["args"]["correlation"]]) / 1000.0 for e in evs
                       if (e.get("args") or {}).get("correlation") in launches)
        kernels = sum(1 for e in evs if e["cat"] == "kernel")
        gpu_ms = sum(e.get("dur", 0) for e in evs) / 1000.0 / steps
        p = (lambda q: waits[min(len(waits) - 1, int(q * len(waits)))]) if waits else (lambda q: 0)
        print("  {:>6}  {:>7}  {:>6}  {:>11.2f}  {:>27.3f}  {:>5.3f}  {:>6.3f}".format(
            str(stream), kernels, len(evs) - kernels, gpu_ms, p(0.5), p(0.9), p(1.0)))
        if stream != step_stream:
            top = defaultdict(lambda: [0, 0.0])
            for e in evs:
                top[e["name"][:70]][0] += 1
                top[e["name"][:70]][1] += e.get("dur", 0)
            for name, (n, us) in sorted(top.items(), key=lambda kv: -kv[1][1])[:4]:
                print("          {:>5} x {:>8.2f} ms  {}".format(n, us / 1000.0, name))
    evs = sorted(by_stream[step_stream], key=lambda e: e["ts"])
    busy = sum(e.get("dur", 0) for e in evs)
    span = evs[-1]["ts"] + evs[-1].get("dur", 0) - evs[0]["ts"]
    gaps = [b["ts"] - (a["ts"] + a.get("dur", 0)) for a, b in zip(evs, evs[1:])]
    big = sorted((g for g in gaps if g > 50), reverse=True)
    print("  the step's stream: kernels {:.2f} ms/step busy, span {:.2f} ms/step, idle {:.1%}; "
          "gaps > 50 us: {} ({:.2f} ms/step; largest {})".format(
              busy / 1000.0 / steps, span / 1000.0 / steps, 1 - busy / span if span else 0,
              len(big), sum(big) / 1000.0 / steps, ", ".join("{:.2f}".format(g / 1000.0)
                                                           for g in big[:5])))
    for tid, named in sorted(calls.items(), key=lambda kv: -sum(v[1] for v in kv[1].values())):
        total = sum(v[1] for v in named.values())
        label = "main (the step)" if tid == main_tid else names.get(tid, "thread {}".format(tid))
        print("  {}: CUDA calls {:.2f} ms/step; most: {}".format(label, total / 1000.0 / steps, "; ".join(
            "{} {}x {:.2f} ms".format(name, n, us / 1000.0 / steps)
            for name, (n, us) in sorted(named.items(), key=lambda kv: -kv[1][1])[:4])))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root")
    ap.add_argument("--mode", default="split", help="a mode of bench/feed_contention.py")
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--trace-dir", default="/tmp/feed-profile")
    a = ap.parse_args()
    import torch
    from torch.profiler import ProfilerActivity, profile

    from backends.caffe2_torch.train import setup
    from backends.protocol import RunSpec
    spec = RunSpec(framework="caffe2", backend="caffe2_torch", device="cuda",
                   precision=a.precision, batch_size=a.batch_size)
    t = setup(spec)
    data = fc.batches(a.root, a.batch_size, 8)
    for _ in range(15):
        t.step()
    torch.cuda.synchronize()
    os.makedirs(a.trace_dir, exist_ok=True)
    sys.setswitchinterval(0.0005)  # compare's default with decode=hw
    for mode in ("alone", a.mode):
        tokens, stop, done, names = threading.Semaphore(2), threading.Event(), [0], {}
        if mode != "alone":
            def load():
                names[threading.get_native_id()] = "the decode thread"
                fc.load_thread(mode, t.device, data, tokens, stop, done)
            th = threading.Thread(target=load, daemon=True)
            th.start()
            for _ in range(300):  # the load's set-up (CPU decoders started) and its first
                t.step()  # batches outside the profile
                tokens.release()
                if done[0] >= 3:
                    break
            torch.cuda.synchronize()
        n0 = done[0]
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            dt = fc.timed_steps(t, tokens, a.steps)
        stop.set()
        if mode != "alone":
            th.join(timeout=30)
        path = os.path.join(a.trace_dir, "{}.json".format(mode))
        prof.export_chrome_trace(path)
        print("== {}: {:.1f} img/s, the load {:.2f} batches/step, trace {}".format(
            mode, a.steps * a.batch_size / dt, (done[0] - n0) / a.steps, path), flush=True)
        summarise(path, a.steps, threading.get_native_id(), names)
    print("(figures per step; the step's stream is the one with the most GPU time)", flush=True)


if __name__ == "__main__":
    main()
