"""What a decode=hw feeder costs the PyTorch training step beside it, piece by piece (issue 22).

The real-data cells lose 13-18 % against synthetic although the pipeline alone delivers 1.3x what
training consumes. This script trains on the synthetic batch (so the step's work is the same in
every mode) while a load runs beside it, paced to one batch per step (two ahead at most), and
prints the step's img/s against training alone:

  alone      nothing beside the step
  thread     the feeder's prepare (hwdecode.hw_to_device: per-image nvImageCodec objects, ROI
             decode on the JPEG engines, one-gather resize) on a thread of this process, as in
             compare's Feed, from file bytes read beforehand (no DataLoader)
  switch     thread, with the interpreter's switch interval at 0.5 ms instead of 5 ms
  pyonly     thread, the per-image Python objects only (no decode, no resize): the GIL's share
  decode     thread, the decode without the resize
  process    the same prepare in a child process (its own interpreter and CUDA context, same GPU)
  split      thread, each batch split between the engines and CPU decoder processes (the cores
             less two; backends/pipelines/splitdecode.py), as decode=hw runs since issue 36

    python bench/feed_contention.py DIR [--precision fp16] [--batch-size 256] [--steps 60]
        [--modes alone,decode,...] [--cuda-graphs]
"""
import argparse
import multiprocessing as mp
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

MODES = ("alone", "thread", "switch", "pyonly", "decode", "process", "split")
# more: NAME_hp = NAME on a stream of the highest priority; NAME_py = NAME through nvImageCodec's
# Python binding (else its C API, nvcapi.py, the default; pyonly always uses the binding);
# decode_switch; decode_proc = decode only in a child process; decode_alone = the decode flat out
# with no training (its rate alone). Keep the binding (_py) and the C API in separate runs: one
# hardware decoder per process.


def batches(root: str, size: int, count: int, seed: int = 0):
    """`count` batches in collate_encoded's form, from the JPEGs under root (read once)."""
    import torch

    from backends.caffe2_torch.data import collate_encoded
    from backends.pipelines import nvdecode as nvd
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs
                   if f.lower().endswith((".jpg", ".jpeg")))
    rng = random.Random(seed)
    out = []
    for b in range(count):
        samples = []
        for i in range(size):
            data, meta = nvd.read_encoded(files[(b * size + i) % len(files)], 224, rng)
            samples.append(((torch.frombuffer(bytearray(data), dtype=torch.uint8), meta), i % 1000, 0))
        out.append(collate_encoded(samples))
    return out


def prepare_for(mode: str, device):
    """The load's per-batch function on this process's device."""
    import torch

    from backends.caffe2_torch import hwdecode
    from backends.caffe2_torch.data import _scale
    from backends.pipelines import cpudecode
    from backends.pipelines import nvdecode as nvd
    # pyonly makes the binding's own objects, so it runs through the binding
    base = mode.replace("_hp", "").replace("_py", "")
    cpus = cpudecode.default_processes(len(os.sched_getaffinity(0))) if base == "split" else 0
    decoder, _ = hwdecode.make(device, api="python" if "_py" in mode or "pyonly" in mode else "c",
                               processes=cpus, batch=1024)  # split: the CPU decoders beside
    full = hwdecode.hw_to_device(device, 224, True, decoder, _scale(device))
    if base in ("thread", "switch", "process", "split"):
        return full
    nv = decoder.engines.nv if decoder.engines.api == "python" else None

    def unpack(batch):
        """(JPEG views, boxes, offsets, a flat device buffer for the crops, the current stream)"""
        flat_bytes, lengths, meta = batch[:3]
        datas = [t.numpy() for t in flat_bytes.split(lengths.tolist())]
        boxes = hwdecode.boxes_of(meta)
        offsets, total = nvd.layout(boxes)
        pixels = torch.empty(total, dtype=torch.uint8, device=device)
        return datas, boxes, offsets, pixels, torch.cuda.current_stream().cuda_stream

    def pyonly(batch):
        datas, boxes, offsets, pixels, stream = unpack(batch)
        for i, (data, box) in enumerate(zip(datas, boxes)):
            x, y, w, h = (int(v) for v in box[:4])
            code = nv.CodeStream(data).get_sub_code_stream(region=nv.Region(y, x, y + h, x + w))
            nv.as_image(nvd.View(pixels.data_ptr() + offsets[i], h, w, True), stream)
        return code

    def decode_only(batch):
        datas, boxes, _, pixels, stream = unpack(batch)
        decoder.decode_into(datas, boxes, pixels.data_ptr(), stream)
        return pixels
    return pyonly if base == "pyonly" else decode_only


def pace(prepare, stream, data, tokens, stop, report) -> None:
    """prepare() the batches in turn on `stream`, one per token, until `stop`; report(count) after
    each (Feed hands the step an event; here the load just keeps pace)."""
    import torch
    i = 0
    while not stop.is_set():
        if not tokens.acquire(timeout=0.1):
            continue
        with torch.cuda.stream(stream):
            prepare(data[i % len(data)])
        stream.synchronize()
        i += 1
        report(i)


def load_thread(mode, device, data, tokens, stop, done):
    import torch
    torch.cuda.set_device(device)
    prepare = prepare_for(mode, device)
    stream = torch.cuda.Stream(device, priority=-100 if "_hp" in mode else 0)
    pace(prepare, stream, data, tokens, stop, lambda i: done.__setitem__(0, i))


def load_process(root, batch, count, tokens, stop, done, mode="process"):
    import torch
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    data = batches(root, batch, count)
    prepare = prepare_for(mode, device)
    prepare(data[0])
    done.value = -1  # ready

    def report(i):
        done.value = i
    pace(prepare, torch.cuda.Stream(device), data, tokens, stop, report)


def timed_steps(trainer, tokens, steps: int) -> float:
    """Seconds for `steps` steps, each letting the load prepare one more batch (synchronised)."""
    import torch
    t0 = time.perf_counter()
    for _ in range(steps):
        trainer.step()
        tokens.release()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batches", type=int, default=8, help="distinct batches the load cycles over")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--cuda-graphs", action="store_true", help="the step replayed as one CUDA "
                    "graph (the tuned mode's): no Python, no GIL in the training thread")
    a = ap.parse_args()
    import torch

    from backends.caffe2_torch.train import setup
    from backends.protocol import RunSpec
    spec = RunSpec(framework="caffe2", backend="caffe2_torch", device="cuda",
                   precision=a.precision, batch_size=a.batch_size,
                   options={"cuda_graphs": True} if a.cuda_graphs else {})
    t = setup(spec)
    device = t.device
    data = batches(a.root, a.batch_size, a.batches)
    for _ in range(15):
        t.step()
    torch.cuda.synchronize()
    base = None
    print("mode      img/s   vs alone  load batches/step")
    for mode in a.modes.split(","):
        ctx = mp.get_context("spawn")
        if mode.startswith("decode_alone"):
            tokens, stop, done = threading.Semaphore(10 ** 6), threading.Event(), [0]
            th = threading.Thread(target=load_thread, daemon=True, args=(
                mode.replace("_alone", ""), device, data, tokens, stop, done))
            th.start()
            time.sleep(3)
            n0, t0 = done[0], time.perf_counter()
            time.sleep(3)
            rate = (done[0] - n0) * a.batch_size / (time.perf_counter() - t0)
            stop.set()
            th.join(timeout=30)
            print("decode alone (no training, stream synchronised per batch): {:.0f} img/s".format(rate))
            continue
        proc = mode.replace("_py", "") in ("process", "decode_proc")
        if proc:
            tokens, stop, done = ctx.Semaphore(0), ctx.Event(), ctx.Value("i", 0)
            child = ctx.Process(target=load_process, args=(a.root, a.batch_size, a.batches,
                                                           tokens, stop, done,
                                                           mode.replace("_proc", "")), daemon=True)
            child.start()
            while done.value != -1 and child.is_alive():
                time.sleep(0.1)
            done.value = 0
        else:
            tokens, stop, done = threading.Semaphore(0), threading.Event(), [0]
            if "switch" in mode:
                sys.setswitchinterval(0.0005)
            if mode != "alone":
                th = threading.Thread(target=load_thread, daemon=True, args=(
                    mode.replace("_switch", ""), device, data, tokens, stop, done))
                th.start()
        tokens.release()
        tokens.release()
        for _ in range(5):  # the load's first batches (its set-up) outside the timed region
            t.step()
            tokens.release()
        torch.cuda.synchronize()
        start_done = done.value if proc else done[0]
        dt = timed_steps(t, tokens, a.steps)
        got = (done.value if proc else done[0]) - start_done
        stop.set()
        if proc:
            child.join(timeout=30)
        elif mode != "alone":
            th.join(timeout=30)
        sys.setswitchinterval(0.005)
        rate = a.steps * a.batch_size / dt
        base = base or rate
        print("{:<8} {:8.1f}  {:7.3f}  {:5.2f}".format(mode, rate, rate / base, got / a.steps),
              flush=True)


if __name__ == "__main__":
    main()
