"""Real data through each framework's own input pipeline, run for real on the CPU (tiny JPEGs).

One folder for the module: 24 JPEGs of 64x48 in 3 classes made by `compare data make`, plus a
truncated JPEG and a file that is no JPEG at all. One campaign: synthetic and real data for every
framework (TensorFlow, MXNet, PyTorch, JAX), then (--resume) the data-only ceiling.
"""
import json

import pytest

from compare import frameworks
from tests.helpers import TINY_RUN, run_compare, run_in_backend

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
        assert s["images_read"] == (WARMUP + STEPS) * BATCH, run_id
        assert s["batches_read"] == WARMUP + STEPS, run_id
        assert 0 <= s["label_min"] <= s["label_max"] < CLASSES, run_id
        assert s["labels_checked_batches"] == WARMUP + STEPS, run_id  # CPU: every batch
        assert s["loader_workers"] >= 1 and s["cpu_cores"] >= 1, run_id
        assert s.get("data_only", False) is ("dataonly" in run_id), run_id


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


def test_decode_gpu_on_a_cpu_is_a_recorded_unsupported(folder, tmp_path):
    out = tmp_path / "c"
    run_compare(["run", "--frameworks", "caffe2", "--executor", "local", "--device", "cpu",
                 "--data", str(folder), "--data-only", "--option", "decode=gpu",
                 "--results", str(out)] + TINY_RUN)
    r = json.loads((out / "results" / "caffe2-fp32-w1-b4-s32-dataonly-r0.json").read_text())
    assert (r["status"], r["reason"]) == (
        "unsupported", "decode=gpu decodes with nvJPEG on a CUDA device; this run is on the cpu")


def test_two_torch_workers_each_read_their_own_shard(folder, tmp_path):
    out = tmp_path / "c"
    run_compare(["run", "--frameworks", "caffe2", "--executor", "local", "--device", "cpu",
                 "--gpus", "2", "--data", str(folder), "--data-only", "--results", str(out)] + TINY_RUN)
    r = json.loads((out / "results" / "caffe2-fp32-w2-b4-s32-dataonly-r0.json").read_text())
    assert r["status"] == "ok", r["reason"]
    s = r["settings"]
    assert s["images_read"] == 2 * (WARMUP + STEPS) * BATCH  # global batch 8
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
    assert (s["images_read"], s["images_read_rank0"]) == (2 * (WARMUP + STEPS) * BATCH,
                                                          (WARMUP + STEPS) * BATCH)
    assert (s["shard_images"], s["process_batch"]) == (IMAGES // 2, BATCH)
    assert s["loader_workers_from"].endswith(" / 1 local worker")  # its own cores, its own device
