"""Real data through each framework's own input pipeline, run for real on the CPU (tiny JPEGs).

One folder for the module: 24 JPEGs of 64x48 in 3 classes made by `compare data make`, plus a
truncated JPEG and a file that is no JPEG at all. One campaign: synthetic and real data for every
framework (TensorFlow, MXNet, PyTorch, JAX), then (--resume) the data-only ceiling.
"""
import json
import os
import subprocess

import pytest

from compare import frameworks
from tests.helpers import ROOT, TINY_RUN, backend_python, run_compare, run_in_backend

pytestmark = pytest.mark.backend  # real frameworks in their environments

FRAMEWORKS = ("tf", "mxnet", "caffe2", "jax")
IMAGES, CLASSES = 24, 3
STEPS, WARMUP, BATCH = 2, 1, 4  # as TINY_RUN


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("data") / "imagenet-like"
    run_compare(["data", "make", str(root), "--images", str(IMAGES), "--classes", str(CLASSES),
                 "--image-size", "64x48", "--workers", "1"])
    good = root / "train" / "n00000000" / "00000000.JPEG"
    (root / "train" / "n00000000" / "truncated.JPEG").write_bytes(good.read_bytes()[:400])
    (root / "train" / "n00000001" / "not-a-jpeg.JPEG").write_bytes(b"GIF89a" + bytes(200))
    return root


@pytest.fixture(scope="module")
def campaign(folder, tmp_path_factory):
    out = tmp_path_factory.mktemp("campaign") / "c"
    common = ["run", "--frameworks", ",".join(FRAMEWORKS), "--executor", "local", "--device", "cpu",
              "--quick", "--results", str(out)] + TINY_RUN
    first = run_compare(common + ["--data", "synthetic,{}".format(folder)])
    run_compare(common + ["--data", str(folder), "--data-only", "--resume"])
    results = {p.stem: json.loads(p.read_text()) for p in (out / "results").glob("*.json")}
    return out, results, first


def test_every_cell_is_ok_in_all_three_data_modes(campaign):
    _, results, _ = campaign
    expected = {"{}-fp32-w1-b4-s32{}-r0".format(fw, mode) for fw in FRAMEWORKS
                for mode in ("", "-real", "-dataonly")}
    assert set(results) == expected
    bad = {k: (r["status"], r["reason"]) for k, r in results.items() if r["status"] != "ok"}
    assert not bad


def test_each_backend_read_steps_times_batch_images_with_labels_in_range(campaign):
    _, results, _ = campaign
    for run_id, r in results.items():
        s = r["settings"]
        if r["spec"]["data"] == "synthetic":
            assert "images_read" not in s
            continue
        # data-only drains what the loader buffered while the run set up before its warm-up
        drained = s["drained_batches"] if "dataonly" in run_id else 0
        assert drained >= (2 if "dataonly" in run_id else 0), run_id  # every loader buffers
        assert s["images_read"] == (WARMUP + STEPS + drained) * BATCH, run_id
        assert s["batches_read"] == WARMUP + STEPS + drained, run_id
        assert 0 <= s["label_min"] <= s["label_max"] < CLASSES, run_id
        assert s["labels_checked_batches"] == WARMUP + STEPS + drained, run_id  # CPU: every batch
        assert s["loader_workers"] >= 1 and s["cpu_cores"] >= 1, run_id
        assert s.get("data_only", False) is ("dataonly" in run_id), run_id
        if r["spec"]["framework"] in ("caffe2", "jax"):  # decode=auto on a CPU: Pillow, and why
            assert (s["decode"], s["decode_why"]) == ("cpu", "decode=auto: no JPEG engines on a "
                                                             "CPU run"), run_id
        if r["spec"]["framework"] == "jax":  # JAX's CPU decode: Grain's worker processes
            assert s["loader"].startswith("grain "), run_id
        assert r["telemetry"]["host_cpu_cores"] is not None, run_id  # the job's CPU use, timed


def test_corrupt_jpegs_are_counted_skipped_and_reported(campaign):
    _, results, first = campaign
    assert "{} JPEGs in {} classes".format(IMAGES, CLASSES) in first.stderr
    assert "2 corrupt (skipped)" in first.stderr
    assert "truncated.JPEG (does not decode" in first.stderr
    assert "not-a-jpeg.JPEG (not a JPEG" in first.stderr
    for run_id, r in results.items():
        if r["spec"]["data"] != "synthetic":
            assert (r["settings"]["corrupt_skipped"], r["settings"]["dataset_images"]) == (2, IMAGES)


def test_report_shows_data_efficiency_beside_real_synthetic_and_the_ceiling(campaign):
    out, results, _ = campaign
    text = (out / "report" / "report.md").read_text()
    assert "## Input pipeline (real data vs synthetic, img/s)" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and " | 4 | 32 | 1 | " in line]
    assert len(rows) == len(FRAMEWORKS)
    for fw in FRAMEWORKS:
        ips = {mode: results["{}-fp32-w1-b4-s32{}-r0".format(fw, suffix)]["images_per_sec"]
               for mode, suffix in (("synthetic", ""), ("real", "-real"), ("data-only", "-dataonly"))}
        efficiency = ips["real"] / ips["synthetic"]
        row = next(line for line in rows if line.startswith("| {} |".format(frameworks.display(fw))))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[5:9] == ["{:.2f}".format(ips["synthetic"]), "{:.2f}".format(ips["real"]),
                              "{:.2f}".format(ips["data-only"]), "{:.3f}{}".format(
                                  efficiency, " input-bound" if efficiency < 0.95 else "")]
    cells = json.loads((out / "report" / "report.json").read_text())
    assert sorted({c["data_mode"] for c in cells}) == ["data-only", "real", "synthetic"]


def test_a_second_run_reuses_the_prepared_formats(folder, tmp_path):
    proc = run_compare(["data", "prepare", str(folder), "--frameworks", ",".join(FRAMEWORKS),
                        "--device", "cpu"])
    assert "tf       tfrecord   ready in" in proc.stdout
    assert "mxnet    recordio   ready in" in proc.stdout
    assert "caffe2   folder     ready in {}".format(folder) in proc.stdout
    assert "jax      folder     ready in {}".format(folder) in proc.stdout
    assert "writing" not in proc.stderr and "up to date" in proc.stderr


TORCH_GPU_PATH = r"""
import io, json, os, sys
import torch
import torch.nn.functional as F
from PIL import Image
from backends import dataset as ds
from backends.caffe2_torch import data as d

def pillow_decode(x):  # stands in for nvJPEG: (3, H, W) uint8 from the bytes
    def one(t):
        im = Image.open(io.BytesIO(bytes(t.tolist()))).convert("RGB")
        return torch.frombuffer(bytearray(im.tobytes()), dtype=torch.uint8).view(
            im.size[1], im.size[0], 3).permute(2, 0, 1).contiguous()
    return [one(t) for t in x] if isinstance(x, list) else one(x)

# 1. crop_resize (all images in one gather) against grid_sample image by image
g = torch.Generator().manual_seed(0)
sizes = [(48, 64), (37, 50), (64, 40)]
images = [torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=g) for h, w in sizes]
meta = torch.tensor([[5, 7, 30, 40, 0, 48, 64], [0, 0, 37, 50, 1, 37, 50],
                     [10.5, 3.25, 20, 17, 0, 64, 40]], dtype=torch.float64)
S = 16
out = d.crop_resize(images, meta, S)
worst = 0.0
for i, (im, (y, x, h, w, flip, H, W)) in enumerate(zip(images, meta.tolist())):
    t = (torch.arange(S, dtype=torch.float64) + 0.5) / S
    gy = (2 * (y + t * h - 0.5) + 1) / H - 1
    gx = (2 * (x + t * w - 0.5) + 1) / W - 1
    grid = torch.stack(torch.meshgrid(gy, gx, indexing="ij")[::-1], -1).float()[None]
    ref = F.grid_sample(im[None].float(), grid, mode="bilinear", padding_mode="border",
                        align_corners=False)[0]
    ref = ref.flip(-1) if flip else ref
    worst = max(worst, float((ref.permute(1, 2, 0) - out[i]).abs().max()))

# 2. the decode=gpu path (worker reads bytes + header, batch decode, crop, normalise) on the CPU
root = sys.argv[1]
prepared = ds.Prepared.find(root)
files = [(os.path.join(prepared.root, rel), label) for rel, label in prepared.files()]
loader = torch.utils.data.DataLoader(
    d.FolderDataset(files, d._encoded, 32, 7), batch_size=4, sampler=d._Shuffled(len(files), 7),
    num_workers=1, collate_fn=d.collate_encoded, drop_last=True)
feed = d.Feed(loader, d.decoded_to_device(torch.device("cpu"), 32, True, pillow_decode),
              torch.device("cpu"), lambda tally: {})
for _ in range(3):
    x, y = feed.next()
feed.close()

# 3. a file that does not decode is skipped for the next one, and counted
bad = os.path.join(prepared.root, "train", "n00000001", "not-a-jpeg.JPEG")
item = d.FolderDataset([(bad, 0), files[0]], d._pixels, 32, 1)[0]
print(json.dumps({"worst": worst, "shape": list(x.shape), "dtype": str(x.dtype),
                  "channels_last": x.is_contiguous(memory_format=torch.channels_last),
                  "finite": bool(torch.isfinite(x).all()), "images": feed.tally.images,
                  "labels": [feed.tally.label_min, feed.tally.label_max],
                  "skipped": [list(item[0].shape), item[1], item[2]]}))
"""


def test_torch_gpu_decode_path_runs_on_the_cpu_with_a_stand_in_decoder(folder):
    """Everything of decode=gpu but nvJPEG itself: the one-gather crop matches grid_sample image
    by image, and the batches come out normalised, channels_last, counted, labels in range."""
    run_compare(["data", "prepare", str(folder), "--frameworks", "caffe2", "--device", "cpu"])
    out = json.loads(run_in_backend("caffe2", TORCH_GPU_PATH.replace(
        "sys.argv[1]", repr(str(folder)))).strip().splitlines()[-1])
    assert out["worst"] < 1e-3
    assert (out["shape"], out["dtype"], out["channels_last"], out["finite"]) == \
        ([4, 3, 32, 32], "torch.float32", True, True)
    assert out["images"] == 12 and 0 <= out["labels"][0] <= out["labels"][1] < CLASSES
    assert out["skipped"] == [[32, 32, 3], 0, 1]  # the next file's pixels (label 0), 1 skipped


def _data_only(folder, tmp_path, option, frameworks="caffe2,jax"):
    out = tmp_path / "c"
    run_compare(["run", "--frameworks", frameworks, "--executor", "local", "--device", "cpu",
                 "--data", str(folder), "--data-only", "--option", option,
                 "--results", str(out)] + TINY_RUN)
    return {fw: json.loads((out / "results" / "{}-fp32-w1-b4-s32-dataonly-r0.json".format(fw))
                           .read_text()) for fw in frameworks.split(",")}


def test_gpu_and_hardware_decode_on_a_cpu_are_recorded_unsupported_with_the_reason(folder, tmp_path):
    r = _data_only(folder, tmp_path / "gpu", "decode=gpu", "caffe2")["caffe2"]
    assert (r["status"], r["reason"]) == (
        "unsupported", "decode=gpu decodes with nvJPEG on a CUDA device; this run is on the cpu")
    for fw, r in _data_only(folder, tmp_path / "hw", "decode=hw").items():
        assert (r["status"], r["reason"]) == (
            "unsupported", "decode=hw decodes on a GPU's JPEG engines; this run is on the cpu"), fw


def test_dali_cpu_only_pipeline_reads_steps_times_batch_images_with_labels_in_range(folder, tmp_path):
    """pipeline=dali without a GPU: DALI's CPU operators (device_id=None), in both frameworks."""
    for fw, r in _data_only(folder, tmp_path, "pipeline=dali").items():
        probe = run_in_backend(fw, "import nvidia.dali as d; print(d.__version__)") \
            if r["status"] != "ok" else None
        assert r["status"] == "ok", (fw, r["reason"], probe)
        s = r["settings"]
        read = WARMUP + STEPS + s["drained_batches"]  # DALI's queue (2), JAX's device prefetch
        assert (s["decode"], s["images_read"], s["batches_read"]) == ("dali", read * BATCH, read), fw
        assert s["drained_batches"] == (2 if fw == "caffe2" else 2 + 2 + 1), fw  # CPU: no feeder
        assert 0 <= s["label_min"] <= s["label_max"] < CLASSES, fw
        assert s["dali_version"] and s["hw_decoder_load"] is None, fw  # CPU operators only
        assert s["data_pipeline"].startswith("DALI CPU-only: readers.file"), fw


@pytest.mark.parametrize("framework,name,api,split", [
    ("caffe2", "torch", "c", 0), ("jax", "jax", "c", 0), ("caffe2", "torch", "python", 0),
    ("caffe2", "torch", "c", 2), ("jax", "jax", "c", 2)])
def test_the_hardware_decode_path_gives_pillows_pixels(folder, framework, name, api, split):
    """Everything of decode=hw but the JPEG engines: nvImageCodec's CPU backend decodes the crop
    windows into the flat buffer (through its C API, the default, or its Python binding), the
    framework's gather resizes them; Pillow's decode of the same boxes, resized by the same
    formula, agrees (bench/pipes_probe.py, as on the GPU). split: the batch shared with that
    many CPU decoder processes (splitdecode.py), whose pixels equal the engines' alone."""
    proc = subprocess.run([backend_python(framework), str(ROOT / "bench" / "pipes_probe.py"), name,
                           str(folder / "train" / "n00000002"), "cpu", "--batch", "6", "--size", "24",
                           "--api", api, "--cpu-decoders", str(split)],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (out["ok"], out["images"], out["shape"], out["api"]) == (True, 6, [6, 24, 24, 3], api)
    assert out["mean_abs"] < 1.0  # the same libjpeg-turbo: the same pixels
    if split:
        assert out["split_vs_single_mean_abs"] < 1.0 and out["cpu_images"] > 0 and out["hw_images"] > 0
        assert out["split"]["cpu_decoders"] == 2 and out["split"]["cpu_share_first"] == 0.5


C_API_BATCH = r"""
import json, sys
import numpy as np
from backends.pipelines import nvdecode as nvd
good = sorted(FILES)[:3]
datas = [open(p, "rb").read() for p in good]
datas.insert(1, datas[0][:400])  # truncated after its headers
datas.insert(3, b"GIF89a" + bytes(200))  # no JPEG at all
datas[2] = np.frombuffer(datas[2], np.uint8)  # a numpy view, as the loaders hand them over
boxes = [[3, 2, 20, 16], [0, 0, 8, 8], [0, 0, 64, 48], [1, 1, 4, 4], [60, 40, 4, 8]]
offsets, total = nvd.layout(boxes)
out = {}
for api in ("c", "python"):
    buf = np.zeros(total, np.uint8)
    bad = nvd.BatchDecoder(None, "cpu", api).decode_into(datas, boxes, buf.ctypes.data, 0)
    out[api] = [bad, buf.tolist()]
try:
    nvd.probe(0, good[0], "hw", "c")
    out["probe"] = "decoded"
except nvd.NotAvailable as exc:
    out["probe"] = str(exc)
print(json.dumps(out))
"""


def test_the_c_api_decodes_what_the_python_binding_decodes_and_names_what_did_not(folder):
    """nvcapi.py (the default) against nvImageCodec's own Python binding on the CPU backend: the
    same pixels for every crop (one of them from a numpy view), the same images reported bad (a
    truncated JPEG, bytes that are no JPEG); the hardware probe on a machine without a GPU fails
    with a reason that names the API."""
    files = sorted(str(p) for p in (folder / "train" / "n00000002").glob("*.JPEG"))
    out = json.loads(run_in_backend("caffe2", C_API_BATCH.replace("FILES", repr(files)))
                     .strip().splitlines()[-1])
    (bad_c, pixels_c), (bad_py, pixels_py) = out["c"], out["python"]
    assert bad_c == bad_py == [1, 3]
    good = [i for i in range(5) if i not in (1, 3)]
    boxes = [[3, 2, 20, 16], [0, 0, 8, 8], [0, 0, 64, 48], [1, 1, 4, 4], [60, 40, 4, 8]]
    at = [sum(b[2] * b[3] * 3 for b in boxes[:i]) for i in range(5)]
    for i in good:
        span = slice(at[i], at[i] + boxes[i][2] * boxes[i][3] * 3)
        assert pixels_c[span] == pixels_py[span], i
        assert max(pixels_c[span]) > 0, i  # something was written
    assert "C API through ctypes" in out["probe"] and "device 0" in out["probe"], out["probe"]


JAX_HW_FEED = r"""
import json, os
os.environ.update(JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=2")
import jax
import numpy as np
from jax.sharding import Mesh
from backends import dataset as ds
from backends.jax import grain_loader as gl, hwfeed
prepared = ds.Prepared.find(FOLDER)
files = [(os.path.join(prepared.root, rel), label) for rel, label in prepared.files()]
loader = gl.GrainLoader(files, 8, 16, 7, 1, 2, gl.encoded)  # 1 worker: bytes and crop boxes
source = hwfeed.HwSource(loader, Mesh(np.array(jax.devices()[:2]), ("data",)), 4, 16, "cpu",
                         cpu_decoders=2)  # one CPU decoder process per device beside the engines
seen = []
for _ in range(5):
    x, y, (n, (lo, hi), bad) = source.next()
    seen.append([n, int(lo), int(hi), list(x.shape), len(x.sharding.device_set),
                 bool(np.isfinite(np.asarray(x)).all()), np.asarray(y).tolist()])
print(json.dumps({"batches": seen, "describe": source.describe(), "buffered": source.buffered()}))
source.close()
"""


def test_jax_hardware_decode_feed_reads_the_folder_through_grain(folder):
    """decode=hw's JAX feed but the JPEG engines (nvImageCodec's CPU backend): Grain's worker
    reads bytes and crop boxes, one decode thread per device fills its ring, sharing each of its
    batches with a CPU decoder process, the resize makes one global batch sharded over both
    devices, counted, labels in range."""
    run_compare(["data", "prepare", str(folder), "--frameworks", "jax", "--device", "cpu"])
    out = json.loads(run_in_backend("jax", JAX_HW_FEED.replace("FOLDER", repr(str(folder))))
                     .strip().splitlines()[-1])
    for n, lo, hi, shape, devices, finite, labels in out["batches"]:
        assert (n, shape, devices, finite) == (8, [8, 16, 16, 3], 2, True)
        assert 0 <= lo <= hi < CLASSES and all(0 <= v < CLASSES for v in labels)
    d = out["describe"]
    assert (d["decode_ring"], d["decoders"]) == (4, 1)  # hwfeed.RING; the host's one decoder
    assert out["buffered"] == 1 * (2 * 2 + 2) + 2 + 1  # Grain's, two decoded, one decoding
    for split in d["decode_split"]:  # each device's decoder and its CPU decoder
        assert split["cpu_decoders"] == 1 and split["cpu_images"] > 0 and split["hw_images"] > 0
        assert split["cpu_images"] + split["hw_images"] >= 5 * 4  # 5 batches of 4 a device


def test_two_torch_workers_each_read_their_own_shard(folder, tmp_path):
    out = tmp_path / "c"
    run_compare(["run", "--frameworks", "caffe2", "--executor", "local", "--device", "cpu",
                 "--gpus", "2", "--data", str(folder), "--data-only", "--results", str(out)] + TINY_RUN)
    r = json.loads((out / "results" / "caffe2-fp32-w2-b4-s32-dataonly-r0.json").read_text())
    assert r["status"] == "ok", r["reason"]
    s = r["settings"]
    assert s["images_read"] == 2 * (WARMUP + STEPS + s["drained_batches"]) * BATCH  # global batch 8
    assert s["shard_images"] == IMAGES // 2
    assert s["loader_workers_from"].endswith("/ 2 local workers")



def test_two_jax_processes_each_read_their_own_shard_onto_their_own_devices(folder, tmp_path):
    """processes=2: two jax.distributed processes, one CPU device each, each pinned to its share
    of the cores; each reads every other file and fills its own slice of the global batch."""
    out = tmp_path / "c"
    run_compare(["run", "--frameworks", "jax", "--executor", "local", "--device", "cpu",
                 "--gpus", "2", "--option", "processes=2", "--data", str(folder), "--data-only",
                 "--results", str(out)] + TINY_RUN)
    r = json.loads((out / "results" / "jax-fp32-w2-b4-s32-dataonly-r0.json").read_text())
    assert (r["status"], r["distribution"]) == ("ok", "jax-spmd"), r["reason"]
    s = r["settings"]
    read = (WARMUP + STEPS + s["drained_batches"]) * BATCH
    assert (s["images_read"], s["images_read_rank0"]) == (2 * read, read)
    assert (s["shard_images"], s["process_batch"]) == (IMAGES // 2, BATCH)
    assert s["loader_workers_from"].endswith(" / 1 local worker")  # its own cores, its own device


TORCH_HW_SPLIT = r"""
import json, os
import torch
from backends import dataset as ds
from backends.caffe2_torch import data as d, hwdecode
prepared = ds.Prepared.find(FOLDER)
files = [(os.path.join(prepared.root, rel), label) for rel, label in prepared.files()]
cpu = torch.device("cpu")
# 1. the feed over the folder, each batch shared by the engines' stand-in and 2 CPU decoders
decoder, note = hwdecode.make(cpu, "cpu", "c", 2, 4, None)
loader = torch.utils.data.DataLoader(
    d.FolderDataset(files, d._encoded, 32, 7), batch_size=4, sampler=d._Shuffled(len(files), 7),
    num_workers=1, collate_fn=d.collate_encoded, drop_last=True)
feed = d.Feed(loader, hwdecode.hw_to_device(cpu, 32, True, decoder, d._scale(cpu)), cpu,
              lambda tally: {}, closing=[decoder.close])
for _ in range(4):
    x, y = feed.next()
split = decoder.describe()
feed.close()
# 2. a truncated JPEG in each half of one batch (share 1/2: the first 3 go to the CPU decoders)
truncated = os.path.join(prepared.root, "train", "n00000000", "truncated.JPEG")
picked = [files[0], (truncated, 1), files[1], files[2], (truncated, 2), files[3]]
batch = d.collate_encoded([d.FolderDataset(picked, d._encoded, 32, 1)[i] for i in range(6)])
half, _ = hwdecode.make(cpu, "cpu", "c", 2, 6, 0.5)
prepare = hwdecode.hw_to_device(cpu, 32, True, half, d._scale(cpu))
images, labels, errors = prepare(batch)
half.close()
# 3. the run's options: cpu_decoders (default: the cores less two), cpu_share
from backends import options
from backends.caffe2_torch import OPTIONS
from backends.protocol import RunSpec
runs = []
for given in ({"cpu_share": 0.25}, {"cpu_share": 0.25, "cpu_decoders": 2}):
    spec = RunSpec(framework="caffe2", backend="caffe2_torch", batch_size=4, image_size=32,
                   options=given)
    made, why = hwdecode.split_decoder(spec, lambda key: options.value(OPTIONS, spec.options, key),
                                       cpu, "c", kind="cpu")
    runs.append([made.describe()["cpu_decoders"], made.describe()["rule"], why])
    made.close()
print(json.dumps({"shape": list(x.shape), "finite": bool(torch.isfinite(x).all()),
                  "images": feed.tally.images, "note": note, "split": split, "errors": errors,
                  "failed": prepare.failed, "labels": labels.tolist(), "runs": runs,
                  "cores": len(os.sched_getaffinity(0)),
                  "half": half.describe(), "bad_finite": bool(torch.isfinite(images).all())}))
"""


def test_torch_split_feed_reads_the_folder_and_a_corrupt_jpeg_in_either_half_is_listed(folder):
    """decode=hw's PyTorch feed but the engines (nvImageCodec's CPU backend): the DataLoader's
    batches shared with CPU decoder processes; and a truncated JPEG in each half of a batch is
    counted, replaced by the first good image (its crop and label), and listed by index."""
    run_compare(["data", "prepare", str(folder), "--frameworks", "caffe2", "--device", "cpu"])
    out = json.loads(run_in_backend("caffe2", TORCH_HW_SPLIT.replace("FOLDER", repr(str(folder))))
                     .strip().splitlines()[-1])
    assert (out["shape"], out["finite"], out["images"], out["note"]) == ([4, 3, 32, 32], True, 16, None)
    s = out["split"]
    assert s["cpu_images"] + s["hw_images"] == 16 and s["cpu_images"] > 0 and s["hw_images"] > 0
    assert s["rule"] == "auto: in proportion to each side's wall time per image" and s["cpu_img_s"] > 0
    assert (out["errors"], out["failed"], out["bad_finite"]) == (2, [1, 4], True)
    first = out["labels"][0]
    assert out["labels"][1] == out["labels"][4] == first  # the first good image's label
    assert (out["half"]["cpu_images"], out["half"]["hw_images"]) == (3, 3)
    rule = "--option cpu_share=0.25"
    assert out["runs"] == [[max(0, out["cores"] - 2), rule if out["cores"] > 2 else
                            "no CPU decoders: the engines alone", None], [2, rule, None]]


JAX_HW_HALVES = r"""
import json, os
os.environ.update(JAX_PLATFORMS="cpu")
import jax
import numpy as np
from jax.sharding import Mesh
from backends import dataset as ds
from backends.pipelines import nvdecode as nvd
from backends.jax import hwfeed
import random
prepared = ds.Prepared.find(FOLDER)
files = [os.path.join(prepared.root, rel) for rel, _ in prepared.files()][:4]
truncated = os.path.join(prepared.root, "train", "n00000000", "truncated.JPEG")
paths = [files[0], truncated, files[1], files[2], truncated, files[3]]
picked = [nvd.read_encoded(p, 16, random.Random(i)) for i, p in enumerate(paths)]
datas = [d for d, _ in picked]
meta = [m + [i] for i, (_, m) in enumerate(picked)]  # the file's index, as the loaders add it

class Once:
    def next(self):
        return datas, meta, np.arange(6, dtype=np.int32), 0
    def buffered(self):
        return 0
    def close(self):
        pass
source = hwfeed.HwSource(Once(), Mesh(np.array(jax.devices()[:1]), ("data",)), 6, 16, "cpu",
                         cpu_decoders=2, share=0.5)
x, y, counts = source.next()
print(json.dumps({"errors": counts[2], "failed": source.failed[:2], "labels": np.asarray(y).tolist(),
                  "finite": bool(np.isfinite(np.asarray(x)).all()),
                  "split": source.describe()["decode_split"]}))
source.close()
"""


def test_jax_a_corrupt_jpeg_in_either_half_is_counted_replaced_and_listed(folder):
    out = json.loads(run_in_backend("jax", JAX_HW_HALVES.replace("FOLDER", repr(str(folder))))
                     .strip().splitlines()[-1])
    assert (out["errors"], out["failed"], out["finite"]) == (2, [1, 4], True)
    assert out["labels"] == [0, 0, 2, 3, 0, 5]  # the first good image's label in their place
    assert out["split"]["cpu_share_first"] == 0.5 and out["split"]["rule"] == "--option cpu_share=0.5"



def test_mxnet_on_a_folder_smaller_than_one_batch_says_so(tmp_path):
    # 16 JPEGs and a batch of 32 failed as "StopIteration: ", 8 as a multi-line MXNetError
    # ("number of input images must be bigger than the batch size" among C++ frames)
    small = tmp_path / "small"
    run_compare(["data", "make", str(small), "--images", "8", "--classes", "2", "--image-size",
                 "64x48", "--workers", "1"])
    out = tmp_path / "c"
    run_compare(["run", "--frameworks", "mxnet", "--executor", "local", "--device", "cpu", "--quick",
                 "--results", str(out), "--data", str(small), "--batch-size", "32", "--image-size",
                 "32", "--steps", "2", "--warmup", "1", "--windows", "1"], code=1)
    result = json.loads((out / "results" / "mxnet-fp32-w1-b32-s32-real-r0.json").read_text())
    assert (result["status"], result["reason"]) == (
        "failed", "ValueError: the folder's 8 training images are fewer than this process's "
        "batch of 32, and MXNet's ImageRecordIter needs more images than the batch size; give a "
        "--batch-size of at most 8 per worker, or more images")
