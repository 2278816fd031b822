"""Real data on the host, without a framework: compare data make, folder checks and their
messages, the manifest (corrupt JPEGs, reuse), the shared helpers of backends/dataset.py, run ids
and the matrix's data axis, and the data-efficiency table of the report."""
import io
import os
import random

import pytest
from PIL import Image

from backends import dataset as ds
from backends.protocol import RunResult, RunSpec, SchemaError
from compare import datasets, formats, imagegen
from compare.errors import UserError
from compare.reporting import data_table, metrics, report, tables
from compare.reporting.comparator import cells as comparator_cells
from tests.helpers import main_exit

LAYOUT = ("give an ImageNet-layout folder (DIR/train/<class>/*.JPEG) or make one with: "
          "compare data make DIR")


def make(path, images=6, classes=3, seed=1234, capsys=None):
    code, out, err = main_exit(["data", "make", str(path), "--images", str(images), "--classes",
                                str(classes), "--image-size", "64x48", "--seed", str(seed),
                                "--workers", "1"], capsys)
    assert code == 0, err
    return out


def test_make_writes_an_imagenet_layout_folder_deterministically(tmp_path, capsys):
    out = make(tmp_path / "a", capsys=capsys)
    assert out.startswith("{}: 6 JPEGs of 64x48 in 3 classes".format(tmp_path / "a"))
    files = sorted(p.relative_to(tmp_path / "a").as_posix()
                   for p in (tmp_path / "a" / "train").rglob("*.JPEG"))
    assert files == ["train/n{:08d}/{:08d}.JPEG".format(i % 3, i) for i in (0, 3, 1, 4, 2, 5)]
    with Image.open(tmp_path / "a" / files[0]) as im:
        assert (im.format, im.size, im.mode) == ("JPEG", (64, 48), "RGB")
    make(tmp_path / "b", capsys=capsys)
    make(tmp_path / "c", seed=7, capsys=capsys)
    same = [(tmp_path / d / files[1]).read_bytes() for d in "abc"]
    assert same[0] == same[1] != same[2]


def test_default_jpegs_have_imagenet_size_and_entropy():
    """500x375, ~110 KB (ImageNet's average), baseline 4:2:0: what nvJPEG's hardware decodes."""
    from PIL import JpegImagePlugin
    data = [imagegen.render(imagegen.MakeSpec(), i) for i in range(3)]
    assert 90e3 < sum(map(len, data)) / 3 < 130e3
    with Image.open(io.BytesIO(data[0])) as im:
        assert im.size == (500, 375) and not im.info.get("progressive")
        assert JpegImagePlugin.get_sampling(im) == 2  # 4:2:0


def test_make_again_is_a_no_op_and_other_settings_are_refused(tmp_path, capsys):
    make(tmp_path / "a", capsys=capsys)
    code, _, err = main_exit(["data", "make", str(tmp_path / "a"), "--images", "6", "--classes", "3",
                              "--image-size", "64x48", "--workers", "1"], capsys)
    assert (code, err.strip()) == (0, "{}: already holds these 6 images; nothing to do".format(
        tmp_path / "a"))
    code, _, err = main_exit(["data", "make", str(tmp_path / "a"), "--images", "7"], capsys)
    assert (code, err.strip()) == (2, "compare: error: {0}: already holds images made with other "
                                      "settings ({0}/make.json); give a new folder".format(tmp_path / "a"))
    code, _, err = main_exit(["data", "make", str(tmp_path / "x"), "--image-size", "500by375"], capsys)
    assert (code, err.strip()) == (2, "compare: error: --image-size '500by375': give WIDTHxHEIGHT, "
                                      "each from 16 to 4096 (ImageNet's largest), e.g. 500x375")


def test_make_without_images_writes_the_default_count_and_says_so(tmp_path, capsys, monkeypatch):
    """--images left out is 10000 (the help's default): the summary and the no-op line count them
    (they read None: exit 70 after the whole folder was written). Rendering is stubbed: the count
    is what is checked, not 10000 JPEGs."""
    def fake_make(dest, spec, jobs, advance):
        advance(spec.images, spec.images * 1000)
        return spec.images * 1000
    monkeypatch.setattr(imagegen, "make", fake_make)
    code, out, err = main_exit(["data", "make", str(tmp_path / "a"), "--image-size", "64x48"], capsys)
    assert (code, out) == (0, "{0}: 10000 JPEGs of 64x48 in 1000 classes, 10.0 MB (1 KB each); use: "
                              "compare run --data {0}\n".format(tmp_path / "a"))
    monkeypatch.setattr(imagegen, "check_destination", lambda dest, spec: True)
    code, _, err = main_exit(["data", "make", str(tmp_path / "a"), "--image-size", "64x48"], capsys)
    assert (code, err.strip()) == (0, "{}: already holds these 10000 images; nothing to do".format(
        tmp_path / "a"))


@pytest.mark.parametrize("case,why", [
    ("missing", "no such folder"), ("file", "is a file, not a folder"),
    ("empty", "the folder is empty"), ("flat", "no class subfolders with JPEG files in {}")])
def test_bad_folders_are_one_line_and_exit_2_before_anything_runs(tmp_path, capsys, case, why):
    path = tmp_path / case
    if case == "file":
        path.write_text("x")
    elif case == "empty":
        path.mkdir()
    elif case == "flat":  # JPEGs, but no class subfolders
        make(tmp_path / "made", capsys=capsys)
        path.mkdir()
        for p in (tmp_path / "made" / "train").rglob("*.JPEG"):
            (path / p.name).write_bytes(p.read_bytes())
    code, out, err = main_exit(["run", "--frameworks", "caffe2", "--results", str(tmp_path / "c"),
                                "--data", "synthetic,{}".format(path)], capsys)
    assert (code, out) == (2, "")
    assert err == "compare: error: --data {}: {}; {}\n".format(path, why.format(path), LAYOUT)
    assert not (tmp_path / "c").exists()


def test_data_only_needs_a_folder(tmp_path, capsys):
    code, _, err = main_exit(["run", "--frameworks", "caffe2", "--data-only"], capsys)
    assert (code, err) == (2, "compare: error: --data-only times an input pipeline: give --data DIR "
                              "(a folder), e.g. --data synthetic,DIR --data-only\n")


def test_two_folders_in_one_study_are_refused_not_run_under_one_run_id(tmp_path, capsys):
    # a cell of /a and the same cell of /b were both caffe2-fp32-w1-b32-s224-real-r0: one result
    # file, one planned cell; the second folder's result replaced the first's
    for name in ("a", "b"):
        make(tmp_path / name, capsys=capsys)
    code, _, err = main_exit(["run", "--frameworks", "caffe2", "--device", "cpu", "--plan",
                              "--data", "synthetic,{0}/a,{0}/b".format(tmp_path)], capsys)
    assert (code, err) == (2, "compare: error: --data {0}/a,{0}/b: one folder per campaign (the "
                              "cells of two folders would have the same run ids, -real); run each "
                              "folder in a campaign of its own\n".format(tmp_path))


def _folder_with_corrupt_files(tmp_path, capsys):
    make(tmp_path / "d", capsys=capsys)
    good = next((tmp_path / "d" / "train").rglob("*.JPEG")).read_bytes()
    (tmp_path / "d" / "train" / "n00000000" / "cut.JPEG").write_bytes(good[:300])
    (tmp_path / "d" / "train" / "n00000002" / "png.jpg").write_bytes(b"\x89PNG\r\n" + bytes(50))
    return datasets.open_folder(str(tmp_path / "d"))


def test_corrupt_jpegs_are_listed_with_the_reason_and_left_out(tmp_path, capsys, monkeypatch):
    folder = _folder_with_corrupt_files(tmp_path, capsys)
    monkeypatch.setattr(datasets, "PARALLEL_CHECK", 1)  # the process pool of large folders
    prepared = datasets.check(folder)
    assert prepared.path == str(tmp_path / "d" / ".compare")
    corrupt = {c["path"]: c["reason"] for c in prepared.manifest["corrupt"]}
    assert corrupt["train/n00000002/png.jpg"] == "not a JPEG (no JPEG frame header)"
    assert corrupt["train/n00000000/cut.JPEG"].startswith("does not decode: ")
    assert (prepared.manifest["images"], prepared.classes, len(prepared.files())) == (6, 3, 6)
    assert sorted({label for _, label in prepared.files()}) == [0, 1, 2]
    assert datasets.summary(prepared).startswith(
        "{}: 6 JPEGs in 3 classes, 0.0 MB; 2 corrupt (skipped): ".format(tmp_path / "d"))


def test_the_manifest_is_reused_and_only_changed_files_are_checked_again(tmp_path, capsys,
                                                                         monkeypatch):
    folder = _folder_with_corrupt_files(tmp_path, capsys)
    first = datasets.check(folder)
    (tmp_path / "d" / ".compare" / "tfrecord").mkdir()
    first.mark_done("tfrecord")
    checked = []
    real = datasets.check_jpeg
    monkeypatch.setattr(datasets, "check_jpeg", lambda p: checked.append(p) or real(p))
    again = datasets.check(datasets.open_folder(str(tmp_path / "d")))
    assert (checked, again.fingerprint, again.ready("tfrecord")) == ([], first.fingerprint, True)
    changed = tmp_path / "d" / "train" / "n00000001" / "00000001.JPEG"
    os.utime(str(changed), ns=(1, 1))
    later = datasets.check(datasets.open_folder(str(tmp_path / "d")))
    assert checked == [str(changed)]
    assert later.fingerprint != first.fingerprint and not later.ready("tfrecord")
    assert len(later.manifest["corrupt"]) == 2  # remembered, not checked again


def test_a_moved_folder_gets_its_new_root_and_keeps_its_formats(tmp_path, capsys):
    make(tmp_path / "d", capsys=capsys)
    first = datasets.check(datasets.open_folder(str(tmp_path / "d")))
    os.makedirs(first.format_dir("recordio"))
    first.mark_done("recordio")
    os.rename(str(tmp_path / "d"), str(tmp_path / "moved"))
    again = datasets.check(datasets.open_folder(str(tmp_path / "moved")))
    # backends (and containers, which mount the folder at its path) name files by the root
    assert (again.root, again.fingerprint) == (str(tmp_path / "moved"), first.fingerprint)
    assert again.ready("recordio")


def test_a_read_only_folder_is_prepared_in_the_cache(tmp_path, capsys, monkeypatch):
    folder = _folder_with_corrupt_files(tmp_path, capsys)
    monkeypatch.setenv("COMPARE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(datasets.os, "access", lambda path, mode: False)
    prepared = datasets.check(folder)
    assert prepared.path.startswith(str(tmp_path / "cache" / "data"))
    assert ds.Prepared.find(folder.root).path == prepared.path  # where backends look too


def test_missing_preparation_is_a_clear_backend_error(tmp_path, capsys):
    make(tmp_path / "d", capsys=capsys)
    with pytest.raises(ds.DataError, match="has no manifest .* run `compare data prepare"):
        ds.Prepared.find(str(tmp_path / "d"))
    prepared = datasets.check(datasets.open_folder(str(tmp_path / "d")))
    with pytest.raises(ds.DataError, match="has no up-to-date recordio"):
        prepared.require("recordio")
    with pytest.raises(ds.DataError, match="has 3 classes, the model only 2 outputs"):
        prepared.check_labels(2)


def test_jpeg_size_reads_the_frame_header():
    data = imagegen.render(imagegen.MakeSpec(width=123, height=45), 0)
    assert ds.jpeg_size(data) == (123, 45)
    assert ds.jpeg_size(b"GIF89a" + bytes(20)) is None
    assert ds.jpeg_size(data[:20]) is None  # cut before the frame header


def test_random_resized_crop_stays_in_the_image_and_the_ranges():
    rng = random.Random(0)
    for _ in range(2000):
        x, y, w, h = ds.random_resized_crop(500, 375, rng)
        assert 0 <= x and x + w <= 500 and 0 <= y and y + h <= 375
        assert 0.07 < w * h / (500 * 375) <= 1.0 and 0.70 < w / h < 1.40
    assert ds.random_resized_crop(1000, 10, rng) == (493, 0, 13, 10)  # no fit: central crop


def test_loader_workers_share_the_cores_and_shards_split_the_files(monkeypatch):
    monkeypatch.setattr(ds, "available_cores", lambda: 16)
    assert ds.loader_workers(RunSpec("caffe2", "caffe2_torch", gpus=2), None) == (
        8, "16 cores / 2 local workers")
    assert ds.loader_workers(RunSpec("caffe2", "caffe2_torch"), 3) == (3, "--option loader_workers")
    items = list(range(10))
    parts = [ds.shard(items, r, 3) for r in range(3)]
    assert sorted(sum(parts, [])) == items and [len(p) for p in parts] == [4, 3, 3]
    with pytest.raises(ds.DataError, match="^2 images cannot be shared among 3 workers$"):
        ds.shard([1, 2], 2, 3)


def test_run_ids_and_specs_carry_the_data_mode():
    spec = RunSpec("caffe2", "caffe2_torch", precision="fp16", device="cuda", batch_size=256)
    assert (spec.run_id, spec.data_mode) == ("caffe2-fp16-g1-b256-s224-r0", "synthetic")
    spec.data = "/data/imagenet"
    assert (spec.run_id, spec.to_dict()["data_mode"]) == ("caffe2-fp16-g1-b256-s224-real-r0", "real")
    spec.data_only = True
    assert spec.run_id == "caffe2-fp16-g1-b256-s224-dataonly-r0"
    with pytest.raises(SchemaError, match="data_only measures an input pipeline"):
        RunSpec("caffe2", "caffe2_torch", data_only=True).validate()


def test_the_matrix_runs_each_cell_in_every_data_mode(tmp_path, capsys):
    from compare import study
    from compare.stages import plan as planning
    make(tmp_path / "d", capsys=capsys)
    plan = planning.make(study.build(dict(
        frameworks="caffe2", gpus="1", precision="fp32,fp16", batch_size="4", device="cpu",
        windows="1", timeout="60", quick=True, option=["decode=gpu", "loader_workers=3"],
        executor="local", data="synthetic,{}".format(tmp_path / "d"))))
    ids = [s.run_id for s in plan.cells]
    assert ids == ["caffe2-fp32-w1-b4-s64-r0", "caffe2-fp32-w1-b4-s64-real-r0",
                   "caffe2-fp16-w1-b4-s64-r0", "caffe2-fp16-w1-b4-s64-real-r0"]
    assert plan.cells[1].data == str((tmp_path / "d").resolve())
    assert plan.matrix.options["caffe2"] == {"decode": "gpu", "loader_workers": 3}


@pytest.mark.parametrize("option,message", [
    ("tf.decode=gpu", "--option tf.decode=gpu: unknown key 'decode' for tf; valid keys: tf: "),
    ("loader_workers=0", "--option loader_workers=0: out of range; give an integer from 1 to 256, e.g. "
                         "loader_workers=1"),
    ("caffe2.decode=nvjpeg", "--option caffe2.decode=nvjpeg: not a valid value; choose from auto, hw, cpu, "
                             "gpu")])
def test_data_options_are_checked(capsys, option, message):
    code, _, err = main_exit(["run", "--frameworks", "tf,caffe2", "--option", option], capsys)
    assert code == 2 and err.startswith("compare: error: " + message), err


# --- the report: data efficiency -------------------------------------------------------------------

def _result(framework, mode, ips, status="ok", workers=16):
    spec = RunSpec(framework, {"tf": "tf_horovod"}.get(framework, framework), device="cuda",
                   precision="fp16", batch_size=256, data="synthetic" if mode == "synthetic" else "/d",
                   data_only=mode == "data-only")
    settings = {} if mode == "synthetic" else {
        "cpu_cores": 16, "loader_workers": workers, "data_pipeline": "pipe " + framework,
        "decode": "gpu" if framework == "caffe2" else None, "images_read": 15360, "corrupt_skipped": 0}
    ok = status == "ok"
    return RunResult(spec.run_id, status, spec.to_dict(), reason=None if ok else "boom",
                     images_per_sec=ips if ok else None, settings=settings)


def test_data_efficiency_and_the_input_bound_flag():
    assert metrics.data_efficiency(5700.0, 6000.0) == pytest.approx(0.95)
    assert (metrics.input_bound(0.949), metrics.input_bound(0.95), metrics.input_bound(None)) == \
        (True, False, None)
    assert metrics.data_efficiency(5700.0, None) is None


def test_report_puts_real_synthetic_ceiling_and_efficiency_side_by_side():
    results = [_result("caffe2", "synthetic", 6000.0), _result("caffe2", "real", 1800.0),
               _result("caffe2", "data-only", 1900.0), _result("tf", "synthetic", 1000.0),
               _result("tf", "real", 970.0), _result("mxnet", "synthetic", 900.0),
               _result("mxnet", "real", None, status="failed")]
    cells = comparator_cells(results)
    assert len(cells) == 7  # synthetic and real of one cell are two cells, never merged
    table = data_table.data_table(cells)
    rows = {r["framework"]: r for _, r in table.iterrows()}
    assert rows["caffe2"]["data_efficiency"] == pytest.approx(0.3)
    assert rows["caffe2"]["pipeline_share"] == pytest.approx(1800 / 1900)
    assert (rows["caffe2"]["input_bound"], rows["tf"]["input_bound"]) == (True, False)
    text = tables.markdown(report.build(cells).sections())
    assert ("| PyTorch (Caffe2) | fp16 | 256 | 224 | 1 | 6000.00 | 1800.00 | 1900.00 | 0.300 "
            "input-bound | 16 | 16 | pipe caffe2 (decode=gpu) |") in text
    assert "| TensorFlow (+Horovod) | fp16 | 256 | 224 | 1 | 1000.00 | 970.00 | n/a | 0.970 | 16 |" in text
    assert "| MXNet | fp16 | 256 | 224 | 1 | 900.00 | n/a | n/a | failed | 16 | 16 | pipe mxnet |" in text
    assert "| PyTorch (Caffe2) | fp16 | 256 | 224 | data-only | 1900.00 |" in text  # the main table
    assert "Data: data-only, real, synthetic; figures are global images/sec" in text


def test_real_cells_run_with_more_cuda_queues_than_their_twins_say_so_under_the_table():
    """decode=hw starts CUDA with 32 hardware queues (backends/pipelines/feed.py), its synthetic
    twin with CUDA's 8: the table's data efficiency divides the one by the other, and says so."""
    real = _result("jax", "real", 5795.6)
    real.settings["cuda_connections"] = 32
    cells = comparator_cells([_result("jax", "synthetic", 5867.0), real])
    text = tables.markdown(report.build(cells).sections())
    assert ("Real cells decoding on the JPEG engines ran with 32 CUDA hardware queues "
            "(CUDA_DEVICE_MAX_CONNECTIONS; --option cuda_connections), their synthetic twins with "
            "CUDA's default of 8: with 8 the step's stream shares a queue with the decode's and "
            "waits behind it (docs/data.md).") in text
    real.settings["cuda_connections"] = 8  # the user's own 8, or a result of before: no note
    plain = tables.markdown(report.build(comparator_cells([_result("jax", "synthetic", 5867.0),
                                                           real])).sections())
    assert "CUDA hardware queues" not in plain


def test_an_all_synthetic_report_has_no_data_section():
    cells = comparator_cells([_result("caffe2", "synthetic", 6000.0)])
    assert data_table.data_table(cells).empty
    text = tables.markdown(report.build(cells).sections())
    assert "Input pipeline" not in text and "| data |" not in text and "Synthetic data;" in text


# --- input-bound cells: a framework ratio that compares input pipelines says so -------------------

def _cell(framework, mode, ips, decode, pipeline, repeats=(0, 1, 2)):
    """Runs of one H200 cell (three repeats a little apart, so that the findings rank them)."""
    out = []
    for i in repeats:
        r = _result(framework, mode, None if ips is None else ips * (1 + 0.002 * i))
        r.spec = dict(r.spec, repeat=i)
        r.settings = {} if mode == "synthetic" else dict(r.settings, decode=decode,
                                                          data_pipeline=pipeline)
        out.append(r)
    return out


def _pipeline_report(jax_real: float, torch_real: float, synthetic_jax: bool = True):
    results = (_cell("caffe2", "synthetic", 6000.0, None, None)
               + _cell("caffe2", "real", torch_real, "hw", "torch DataLoader (file bytes) -> x")
               + (_cell("jax", "synthetic", 7000.0, None, None) if synthetic_jax else [])
               + _cell("jax", "real", jax_real, "cpu", "Grain worker processes (Pillow) -> x"))
    cells = comparator_cells(results)
    built = report.build(cells)
    return built.summary.lines, tables.markdown(built.sections())


def test_a_ratio_of_an_input_bound_cell_is_a_comparison_of_input_pipelines():
    lines, text = _pipeline_report(jax_real=700.0, torch_real=5900.0)
    line = next(x for x in lines if "real data" in x)
    assert line.startswith("Input pipelines, not frameworks: JAX (Flax) (Grain worker processes) vs "
                           "PyTorch (Caffe2) (nvImageCodec on the JPEG engines): 0.12× ")
    assert line.endswith("(real data, fp16, batch 256, on 1 GPU); JAX (Flax) is input-bound "
                         "(data efficiency 0.100).")
    assert "JAX (Flax) versus PyTorch (Caffe2) at equal settings: faster in 1 setting (1.17×)." in lines
    ratios = text.split("## Framework vs framework")[1].split("##")[0]
    row = next(x for x in ratios.splitlines() if x.startswith("| JAX (Flax) | fp16 | 256 | 224 | real |"))
    assert row.endswith(" (pipelines) |")
    assert "(pipelines): real-data cells where either cell is input-bound" in text


def test_a_ratio_of_two_cells_near_synthetic_compares_the_frameworks():
    lines, text = _pipeline_report(jax_real=6900.0, torch_real=5900.0)
    line = next(x for x in lines if "real data" in x)
    assert line.startswith("JAX (Flax) (Grain worker processes) vs PyTorch (Caffe2) (nvImageCodec "
                           "on the JPEG engines): 1.17× ")
    assert line.endswith("; both cells within 5% of synthetic: a comparison of the frameworks.")
    assert "(pipelines)" not in text


def test_a_real_cell_without_a_synthetic_twin_is_not_taken_for_a_framework_verdict():
    lines, _ = _pipeline_report(jax_real=6900.0, torch_real=5900.0, synthetic_jax=False)
    line = next(x for x in lines if "real data" in x)
    assert line.startswith("Input pipelines, not frameworks: ")
    assert line.endswith("not known to be within 5% of synthetic: JAX (Flax) ran no synthetic twin.")


def _two_networks():
    """Runs of ResNet-50 and ResNet-152, otherwise the same cells: JAX's ResNet-50 is input-bound,
    its ResNet-152 (a slower step the same pipeline keeps up with) is not."""
    results = []
    for model, jax_real in (("resnet50", 700.0), ("resnet152", 2950.0)):
        runs = (_cell("caffe2", "synthetic", 6000.0, None, None)
                + _cell("caffe2", "real", 5900.0, "hw", "torch DataLoader (file bytes) -> x")
                + _cell("jax", "synthetic", 3000.0 if model == "resnet152" else 7000.0, None, None)
                + _cell("jax", "real", jax_real, "cpu", "Grain worker processes (Pillow) -> x"))
        for r in runs:
            r.spec = dict(r.spec, model=model)
        results += runs
    return results


def test_each_network_of_a_real_data_study_gets_its_own_pipeline_verdict():
    """Two networks, otherwise the same cells: JAX's ResNet-50 is input-bound, its ResNet-152 (a
    slower step the same pipeline keeps up with) is not; each ratio row says its own."""
    cells = comparator_cells(_two_networks())
    verdicts = data_table.pipeline_verdicts(cells)
    jax = cells[(cells.framework == "jax") & (cells.data_mode == "real")]
    assert {r.model: verdicts[data_table.cell_key(r)]["input_bound"] for _, r in jax.iterrows()} == \
        {"resnet50": True, "resnet152": False}
    ratios = tables.markdown(report.build(cells).sections()).split("## Framework vs framework")[1] \
        .split("##")[0]
    rows = [x for x in ratios.splitlines() if x.startswith("| JAX (Flax) |") and "| real |" in x]
    assert len(rows) == 2 and sum(x.endswith(" (pipelines) |") for x in rows) == 1, rows


def test_a_study_of_one_precision_and_one_gpu_count_prints_no_empty_columns():
    lines, text = _pipeline_report(jax_real=700.0, torch_real=5900.0)
    assert "Precision gain" not in text  # fp16 only: no fp32 to gain over
    head = next(x for x in text.splitlines() if x.startswith("| framework | precision | batch | "
                                                              "image | N | synthetic |"))
    assert "data-only" not in head and "host CPU" not in head  # no cell measured them
    assert "n/a" not in text.split("## Input pipeline")[1].split("##")[0]


def test_a_folder_missing_where_the_run_executes_says_where_to_look(tmp_path):
    with pytest.raises(ds.DataError, match=r"^data folder {} does not exist where this run executes "
                       r"\(a container sees only what is mounted into it; ".format(tmp_path / "gone")):
        ds.Prepared.find(str(tmp_path / "gone"))


@pytest.mark.parametrize("args,message", [
    (["--workers", "0"], "--workers 0: must be >= 1"),
    (["--workers", "100000"], "--workers 100000: must be <= 256"),
    (["--image-size", "99999x99999"], "--image-size '99999x99999': give WIDTHxHEIGHT, each from 16 to 4096 "
                                      "(ImageNet's largest), e.g. 500x375"),
    (["--images", "1000000000"], "--images 1000000000: must be <= 10000000"),
    (["--classes", "1000000000"], "--classes 1000000000: must be <= 100000"),
    (["--images", "abc"], "--images 'abc': not an integer; give a whole number"),
    (["--quality", "9.5"], "--quality '9.5': not an integer; give a whole number"),
], ids=["workers-0", "workers-1e5", "size", "images", "classes", "images-text", "quality-float"])
def test_make_bounds_what_sizes_memory_and_time(tmp_path, capsys, args, message):
    code, _, err = main_exit(["data", "make", str(tmp_path / "d")] + args, capsys)
    assert (code, err) == (2, "compare: error: {}\n".format(message))
    assert not (tmp_path / "d").exists()


def test_prepare_of_a_folder_of_only_bad_files_is_one_line_and_exit_2(tmp_path, capsys):
    for name in ("a.JPEG", "b.jpg"):
        (tmp_path / "d" / "train" / "n0").mkdir(parents=True, exist_ok=True)
        (tmp_path / "d" / "train" / "n0" / name).write_bytes(b"\x89PNG\r\n" + bytes(50))
    code, out, err = main_exit(["data", "prepare", str(tmp_path / "d"), "--frameworks", "caffe2"], capsys)
    assert (code, out) == (2, "")
    assert err == ("compare: error: {}: none of its 2 JPEG files can be used (train/n0/a.JPEG: not a JPEG "
                   "(no JPEG frame header); train/n0/b.jpg: not a JPEG (no JPEG frame header)); {}\n".format(
                       tmp_path / "d", LAYOUT))


def test_a_folder_with_fewer_images_than_a_batch_is_said_to_repeat_them(tmp_path, capsys, monkeypatch):
    from tests.helpers import FAST, fake_python
    monkeypatch.setenv("COLUMNS", "500")
    make(tmp_path / "d", images=1, classes=1, capsys=capsys)
    code, _, err = main_exit(["run", "--frameworks", "caffe2", "--results", str(tmp_path / "c"), "--python",
                              "caffe2={}".format(fake_python(tmp_path))] + FAST + [
                                  "--batch-size", "32", "--data", str(tmp_path / "d")], capsys)
    assert code == 0, err
    assert "warning: {} holds 1 usable image, fewer than a global batch of 32: every step repeats " \
           "images, so the input pipeline decodes fewer distinct files than real data would".format(
               (tmp_path / "d").resolve()) in err


def test_each_node_count_of_a_real_data_study_gets_its_own_pipeline_verdict():
    """One GPU per node on one and on two nodes: JAX's two-node cell is input-bound, its one-node
    cell is not; the input-pipeline table has a row for each, and each ratio row says its own."""
    results = []
    for nodes, jax_real in ((1, 6900.0), (2, 1400.0)):
        runs = (_cell("caffe2", "synthetic", 6000.0 * nodes, None, None)
                + _cell("caffe2", "real", 5900.0 * nodes, "hw", "torch DataLoader (file bytes) -> x")
                + _cell("jax", "synthetic", 7000.0 * nodes, None, None)
                + _cell("jax", "real", jax_real, "cpu", "Grain worker processes (Pillow) -> x"))
        for r in runs:
            r.spec = dict(r.spec, nodes=nodes)
        results += runs
    cells = comparator_cells(results)
    rows = data_table.data_table(cells)
    jax_rows = rows[rows.framework == "jax"]
    assert sorted(zip(jax_rows.nodes, jax_rows.input_bound)) == [(1, False), (2, True)]
    verdicts = data_table.pipeline_verdicts(cells)
    jax = cells[(cells.framework == "jax") & (cells.data_mode == "real")]
    assert {r.nodes: verdicts[data_table.cell_key(r)]["input_bound"] for _, r in jax.iterrows()} == \
        {1: False, 2: True}
    text = tables.markdown(report.build(cells).sections())
    pipeline = text.split("## Input pipeline")[1].split("##")[0]
    assert "| JAX (Flax) | fp16 | 256 | 224 | 1 | 7014.00 |" in pipeline
    assert "| JAX (Flax) | fp16 | 256 | 224 | 2×1 | 14028.00 |" in pipeline


def test_the_input_pipeline_table_of_two_networks_names_each_rows_network():
    """ResNet-50 and ResNet-152, otherwise the same cells: two rows per framework, each naming its
    network (without it the two rows read as one cell given twice, with two verdicts)."""
    results = []
    for model, jax_real in (("resnet50", 700.0), ("resnet152", 2950.0)):
        runs = (_cell("jax", "synthetic", 3000.0 if model == "resnet152" else 7000.0, None, None)
                + _cell("jax", "real", jax_real, "cpu", "Grain worker processes (Pillow) -> x"))
        for r in runs:
            r.spec = dict(r.spec, model=model)
        results += runs
    text = tables.markdown(report.build(comparator_cells(results)).sections())
    pipeline = text.split("## Input pipeline")[1].split("##")[0]
    assert "| framework | model | precision | batch | image | N | synthetic |" in pipeline
    assert "| JAX (Flax) | resnet50 | fp16 | 256 | 224 | 1 | 7014.00 | 701.40 | 0.100 input-bound |" \
        in pipeline
    assert "| JAX (Flax) | resnet152 | fp16 | 256 | 224 | 1 | 3006.00 | 2955.90 | 0.983 |" in pipeline


def test_the_repeats_of_a_synthetic_and_a_real_data_cell_are_told_apart():
    """Three repeats of a cell on synthetic data and three through its input pipeline: two rows
    of the repeats table, each saying its data mode (they read as one cell listed twice)."""
    _, text = _pipeline_report(jax_real=700.0, torch_real=5900.0)
    repeats = text.split("## Repeats")[1].split("##")[0]
    assert "| framework | precision | batch | image | data | N | runs | median |" in repeats
    assert "| JAX (Flax) | fp16 | 256 | 224 | synthetic | 1 | 3 | 7014.00 ±" in repeats
    assert "| JAX (Flax) | fp16 | 256 | 224 | real | 1 | 3 | 701.40 ±" in repeats


def test_the_pipeline_findings_of_two_networks_name_each_network():
    """Two networks through the same pipelines: each 'real data' sentence names its network."""
    results = _two_networks()
    lines = report.build(comparator_cells(results)).summary.lines
    said = [x for x in lines if "real data" in x]
    assert len(said) == 2
    assert said[0].startswith("Input pipelines, not frameworks: JAX (Flax) resnet50 (Grain worker "
                              "processes) vs PyTorch (Caffe2) resnet50 (nvImageCodec")
    assert said[1].startswith("JAX (Flax) resnet152 (Grain worker processes) vs PyTorch (Caffe2) "
                              "resnet152 (nvImageCodec")
    tuned = [r for r in results if r.spec["model"] == "resnet50"]
    for r in tuned:
        r.spec = dict(r.spec, mode="tuned")
    line = next(x for x in report.build(comparator_cells(tuned)).summary.lines if "real data" in x)
    assert "(real data, tuned, fp16, batch 256, on 1 GPU)" in line, line


def test_one_image_of_one_class_is_said_in_the_singular(tmp_path, capsys):
    # "1 JPEGs in 1 classes" read wrong, in make's summary and in info's
    out = make(tmp_path / "a", images=1, classes=1, capsys=capsys)
    assert out.startswith("{}: 1 JPEG of 64x48 in 1 class, ".format(tmp_path / "a"))
    code, out, err = main_exit(["data", "info", str(tmp_path / "a")], capsys)
    assert (code, out) == (0, "{}: 1 file in 1 class; not checked yet (compare data prepare {})\n".format(
        tmp_path / "a", tmp_path / "a")), err


def test_the_input_pipeline_table_names_the_network_where_the_study_has_several():
    """ResNet-50 on synthetic and real data, VGG-16 on synthetic only: every other table has a
    model column, so the input-pipeline table (of ResNet-50 rows alone) says which network too."""
    results = [_result("caffe2", "synthetic", 6000.0), _result("caffe2", "real", 5900.0)]
    vgg = _result("caffe2", "synthetic", 2000.0)
    vgg.spec = dict(vgg.spec, model="vgg16")
    text = tables.markdown(report.build(comparator_cells(results + [vgg])).sections())
    section = text.split("## Input pipeline")[1].split("##")[0]
    assert "| framework | model | precision | batch | image | N | synthetic |" in section
    assert "| PyTorch (Caffe2) | resnet50 | fp16 | 256 | 224 | 1 | 6000.00 | 5900.00 |" in section


def test_a_study_of_two_modes_has_a_mode_column_in_every_table_of_the_report(tmp_path):
    """Default and tuned cells: the pivots name each row's mode in a mode column; the input
    pipeline, reference and time tables did too ('PyTorch (Caffe2), tuned' in the framework
    column instead: a column the other tables have, missing)."""
    from compare.reporting import references, timeline
    runs = []
    for mode in ("default", "tuned"):
        for kind in ("synthetic", "real"):
            r = _result("caffe2", kind, 6000.0 if kind == "synthetic" else 5000.0)
            spec = RunSpec.from_dict(dict(r.spec, mode=mode))
            r.spec, r.run_id = spec.to_dict(), spec.run_id
            r.phases = {"cell_start": 0.0, "launched": 1.0, "cell_end": 9.0}
            runs.append(r)
    cells = comparator_cells(runs)
    text = tables.markdown(report.build(cells).sections())
    pipeline = text.split("## Input pipeline")[1].split("##")[0]
    assert "| framework | mode | precision | batch | image | N | synthetic |" in pipeline
    assert "| PyTorch (Caffe2) | tuned | fp16 | 256 | 224 | 1 | 6000.00 | 5000.00 |" in pipeline
    path = tmp_path / "ref.csv"
    path.write_text("precision,gpus,images_per_sec\nfp16,1,5000\n")
    ref = references.table("ref", references.compare(cells, references.load(str(path))[1]))
    assert ref.header[:3] == ["framework", "mode", "precision"]
    assert ref.rows[-1][:2] == ["PyTorch (Caffe2)", "tuned"]
    spans = timeline.sections(runs)[0]
    assert spans.header[:3] == ["framework", "mode", "precision"]
    assert [row[:2] for row in spans.rows][-1] == ["PyTorch (Caffe2)", "tuned"]


def test_a_real_data_ratio_sentence_names_its_image_size_where_the_study_has_several():
    """The input-pipeline sentences of two image sizes say which each is, as the scaling and
    gain sentences do (two sentences alike but for their figures, else)."""
    results = []
    for size in (224, 112):
        runs = (_cell("caffe2", "synthetic", 6000.0, None, None)
                + _cell("caffe2", "real", 5900.0, "hw", "torch DataLoader (file bytes) -> x")
                + _cell("jax", "synthetic", 7000.0, None, None)
                + _cell("jax", "real", 700.0, "cpu", "Grain worker processes (Pillow) -> x"))
        for r in runs:
            spec = RunSpec.from_dict(dict(r.spec, image_size=size))
            r.spec, r.run_id = spec.to_dict(), spec.run_id
        results += runs
    lines = report.build(comparator_cells(results)).summary.lines
    said = [x for x in lines if "real data" in x]
    assert len(said) == 2
    assert any("(real data, fp16, batch 256, image 224, on 1 GPU)" in x for x in said), said
    assert any("(real data, fp16, batch 256, image 112, on 1 GPU)" in x for x in said), said


def test_writing_a_format_leaves_no_blank_line_where_stderr_is_not_a_terminal(tmp_path, capsys,
                                                                              monkeypatch):
    # the writer's progress bar printed an empty line into logs and pipes after each format
    make(tmp_path / "d", capsys=capsys)

    def write(self, fw, prepared_path, err, on_line):
        on_line("progress 3 6\n")
        ds.Prepared.find(str(tmp_path / "d")).mark_done("recordio")
        return 0
    monkeypatch.setattr(formats.LocalWriter, "__call__", write)
    code, out, err = main_exit(["data", "prepare", str(tmp_path / "d"), "--frameworks", "mxnet"],
                               capsys)
    assert code == 0, err
    assert err.splitlines() == ["mxnet: writing recordio into {} with its environment here (once; "
                                "reused while the folder is unchanged)".format(
                                    tmp_path / "d" / ".compare" / "recordio")]


@pytest.mark.parametrize("extra", [[], ["--learnable", "small"]])
def test_a_negative_seed_is_one_line_and_writes_nothing(tmp_path, capsys, extra):
    # it was "compare: internal error: ValueError: expected non-negative integer", exit 70, after
    # the folder was created
    code, out, err = main_exit(["data", "make", str(tmp_path / "d"), "--images", "4", "--classes",
                                "2", "--seed", "-1"] + extra, capsys)
    assert (code, err) == (2, "compare: error: --seed -1: must be >= 0\n")
    assert not (tmp_path / "d").exists()


def test_a_writer_run_with_python_says_which_python(tmp_path, capsys):
    # "tf: writing tfrecord ... with its environment here" while --python tf=PATH ran it
    from tests.helpers import failing_python  # has tf's modules as asked, fails as the writer
    python = failing_python(tmp_path)
    make(tmp_path / "d", capsys=capsys)
    code, out, err = main_exit(["data", "prepare", str(tmp_path / "d"), "--frameworks", "tf",
                                "--python", "tf={}".format(python)], capsys)
    assert code == 1
    assert err.splitlines()[0] == ("tf: writing tfrecord into {} with {} (--python) (once; "
                                   "reused while the folder is unchanged)".format(
                                       tmp_path / "d" / ".compare" / "tfrecord", python))
    assert out.splitlines()[-1].startswith("tf       tfrecord   failed: writing tfrecord failed (exit 1)")


@pytest.mark.parametrize("python, problem", [
    ("bare", "lacks tensorflow (every tf run imports tensorflow); give a python that has them"),
    ("/bin/false", "did not say which modules it has, as a python asked with -c does (exit 1, nothing "
                   "said); give a python that has tensorflow"),
], ids=["lacks", "no-python"])
def test_a_writer_python_without_its_frameworks_modules_is_refused_before_the_folder_is_checked(
        python, problem, tmp_path, capsys):
    """Before, the writer ran and failed: `tf tfrecord failed: writing tfrecord failed (exit 1)`,
    exit 1, where `compare run --python` refuses that python in this line."""
    import sys
    if python == "bare":  # a python 3 that finds no installed package
        python = tmp_path / "bare-python"
        python.write_text('#!/bin/sh\nexec {} -S "$@"\n'.format(sys.executable))
        python.chmod(0o755)
    make(tmp_path / "d", capsys=capsys)
    code, out, err = main_exit(["data", "prepare", str(tmp_path / "d"), "--frameworks", "tf",
                                "--python", "tf={}".format(python)], capsys)
    assert (code, out, err) == (2, "", "compare: error: --python 'tf={0}': {0} {1}, or leave tf out of "
                                       "--python (compare then runs tf in its managed environment)\n"
                                       .format(python, problem))
    assert not (tmp_path / "d" / ".compare").exists()  # not checked, nothing written


@pytest.mark.parametrize("names", [["caffe2"], ["caffe2", "jax"]], ids=["one", "two"])
def test_a_python_of_a_framework_without_a_writer_is_not_probed_and_said_unused(names, tmp_path, capsys):
    """caffe2 and jax read the JPEG folder itself (DATA_FORMAT None): their --python writes
    nothing, yet it was probed, and /bin/false refused the whole prepare (exit 2)."""
    make(tmp_path / "d", capsys=capsys)
    python = ["--python", "{}=/bin/false".format(names[0])] + (
        ["--python", "{}=/bin/false".format(names[1])] if len(names) > 1 else [])
    code, out, err = main_exit(["data", "prepare", str(tmp_path / "d"), "--frameworks",
                                ",".join(names)] + python, capsys)
    assert code == 0, err
    said = ", ".join("{}=/bin/false".format(n) for n in names)
    assert err.splitlines()[0] == ("warning: --python {}: not used: caffe2 reads the JPEG folder itself "
                                   "(no native format to write)".format(said) if len(names) == 1 else
                                   "warning: --python {}: not used: caffe2 and jax read the JPEG folder "
                                   "themselves (no native format to write)".format(said))
    assert sum("not used" in line for line in err.splitlines()) == 1
    assert out.splitlines()[-1] == "{:<8} {:<10} ready in {}".format(names[-1], "folder", tmp_path / "d")


def test_a_folder_make_cannot_create_is_one_line_before_any_progress(tmp_path, capsys):
    # it drew an empty progress bar, then "compare: error: DIR: Not a directory" (or, under /proc,
    # "No such file or directory" for the folder it was asked to create)
    (tmp_path / "file").write_text("x")
    code, out, err = main_exit(["data", "make", str(tmp_path / "file" / "sub"), "--images", "4",
                                "--classes", "2", "--workers", "1"], capsys)
    assert (code, err) == (2, "compare: error: {}: cannot create the folder (Not a directory); give "
                              "a new or empty folder you can write\n".format(tmp_path / "file" / "sub"))


def test_make_inside_another_data_sets_train_folder_is_refused(tmp_path, capsys):
    # it was made there, and the data set got a class folder more
    make(tmp_path / "a", capsys=capsys)
    (tmp_path / "b" / "train" / "n0").mkdir(parents=True)  # made by hand: no make.json
    (tmp_path / "b" / "train" / "n0" / "x.JPEG").write_bytes(b"")
    assert main_exit(["data", "make", str(tmp_path / "c"), "--learnable", "small", "--classes", "2",
                      "--images", "4", "--workers", "1"], capsys)[0] == 0
    for dest, root, part in ((tmp_path / "a" / "train" / "n9", tmp_path / "a", "train"),
                             (tmp_path / "b" / "train" / "new" / "deeper", tmp_path / "b", "train"),
                             (tmp_path / "c" / "val" / "x", tmp_path / "c", "val")):
        code, out, err = main_exit(["data", "make", str(dest), "--images", "2", "--classes", "1",
                                    "--workers", "1"], capsys)
        assert (code, out, err) == (2, "", (
            "compare: error: {}: inside the {}/ of the data set {}, where it would be one more class "
            "folder; give a folder outside {}\n".format(dest, part, root, root)))
        assert not dest.exists()
    code, out, err = main_exit(["data", "make", str(tmp_path / "a" / "more"), "--images", "2",
                                "--workers", "1"], capsys)
    assert (code, err) == (2, "compare: error: {}: inside the data set {}; give a folder outside "
                              "it\n".format(tmp_path / "a" / "more", tmp_path / "a"))


def test_prepare_for_cuda_on_a_machine_without_gpus_is_refused_as_run_refuses_it(tmp_path, capsys,
                                                                                 monkeypatch):
    # it went on to download the CUDA environments (GBs), where a CPU one writes the same formats
    from compare import machine_record
    monkeypatch.setattr(machine_record, "gpus", lambda: [])
    make(tmp_path / "d", capsys=capsys)
    code, out, err = main_exit(["data", "prepare", str(tmp_path / "d"), "--device", "cuda"], capsys)
    assert (code, out, err) == (2, "", "compare: error: --device cuda: no NVIDIA GPU found on this "
                                       "machine (nvidia-smi lists none); use --device cpu: its "
                                       "environments write the same formats, which GPU runs read\n")


def _unusable(root, classes=("a", "b")):
    """A folder whose every file is named as a JPEG and is none: junk, or empty."""
    for c in classes:
        (root / "train" / c).mkdir(parents=True)
        (root / "train" / c / "x.JPEG").write_bytes(b"junk")
        (root / "train" / c / "y.jpg").write_bytes(b"")
    return root


def test_a_folder_with_no_jpeg_among_the_files_checked_is_refused_by_the_plan_as_by_the_run(tmp_path,
                                                                                            capsys):
    # --plan printed a schedule and exit 0 (the run refused it in prepare, checking every file)
    from tests.helpers import FAST, failing_python
    data = _unusable(tmp_path / "d")
    argv = ["run", "--frameworks", "caffe2", "--python", "caffe2={}".format(failing_python(tmp_path)),
            "--results", str(tmp_path / "c")] + FAST + ["--data", str(data)]
    line = ("compare: error: --data {}: none of the 4 files checked (up to 4 in each of 2 classes) is a "
            "JPEG, which starts with ff d8 ff: train/a/x.JPEG starts with 6a 75 6e; train/b/x.JPEG "
            "starts with 6a 75 6e; train/a/y.jpg is empty …; {}\n".format(data, LAYOUT))
    assert main_exit(argv + ["--plan"], capsys) == (2, "", line)
    assert main_exit(argv, capsys)[::2] == (2, line)
    assert not (tmp_path / "c").exists()


def test_a_campaign_files_data_with_no_jpeg_is_named_by_the_file_and_key(tmp_path, capsys, monkeypatch):
    _unusable(tmp_path / "d", classes=("a",))
    (tmp_path / "study.toml").write_text('data = "d"\n')
    monkeypatch.chdir(tmp_path)
    code, out, err = main_exit(["run", "--frameworks", "caffe2", "--config", "study.toml", "--plan"],
                               capsys)
    assert (code, out, err) == (2, "", "compare: error: study.toml: data {}: none of the 2 files checked "
                                       "(up to 4 in each of 1 class) is a JPEG, which starts with ff d8 ff: "
                                       "train/a/x.JPEG starts with 6a 75 6e; train/a/y.jpg is empty; "
                                       "{}\n".format(tmp_path / "d", LAYOUT))


def test_a_folder_with_some_bad_files_is_planned_and_its_bad_files_left_to_prepare(tmp_path, capsys):
    # the first file of every class is bad: the check reads on, and prepare skips and lists them
    from tests.helpers import FAST, failing_python
    make(tmp_path / "d", capsys=capsys)
    for c in (tmp_path / "d" / "train").iterdir():
        (c / "0-bad.JPEG").write_bytes(b"junk")
    code, out, err = main_exit(["run", "--frameworks", "caffe2", "--python", "caffe2={}".format(
        failing_python(tmp_path)), "--plan"] + FAST + ["--data", str(tmp_path / "d")], capsys)
    assert code == 0 and out.startswith("plan: 1 cell"), err


def test_the_plan_reads_a_bounded_sample_spread_over_a_big_folders_classes(tmp_path):
    # never every file of ImageNet: up to 4 files in each of up to 16 classes, evenly spread
    entries = [("train/c{:03d}/{:04d}.JPEG".format(c, i), c, 100, 0) for c in range(100) for i in range(50)]
    folder = datasets.Folder(str(tmp_path), str(tmp_path / "train"), ["c{:03d}".format(c) for c in range(100)],
                             entries)
    picked = datasets.sample(folder)
    assert len(picked) == 64 and len({e[1] for e in picked}) == 16
    assert picked[:3] == [entries[0], entries[6 * 50], entries[12 * 50]]  # the first of each class first
    assert sorted(e[0] for e in picked if e[1] == 0) == ["train/c000/{:04d}.JPEG".format(i)
                                                         for i in (0, 12, 25, 37)]
    with pytest.raises(UserError) as refused:  # these files are not there: each unreadable
        datasets.check_sample(folder, "--data D")
    assert str(refused.value).startswith(
        "--data D: none of the 64 files checked (up to 4 in each of 16 of its 100 classes) is a JPEG, "
        "which starts with ff d8 ff: train/c000/0000.JPEG is unreadable (No such file or directory); ")


def test_the_plans_check_of_a_folder_reads_the_size_of_its_sample_only(tmp_path, monkeypatch):
    # the plan's --data check (parsing.data) read os.stat of every file (its size and mtime, for
    # prepare's fingerprint): minutes on ImageNet's 1.28 million; it needs the sample's 64 at most
    from compare import parsing
    from compare.study import DECLARED
    for c in range(40):
        (tmp_path / "d" / "train" / "c{:02d}".format(c)).mkdir(parents=True)
        for i in range(30):
            (tmp_path / "d" / "train" / "c{:02d}".format(c) / "{:02d}.JPEG".format(i)).write_bytes(
                datasets.JPEG_START)
    real, stats, listed = os.scandir, [], []

    class Entry:
        def __init__(self, e):
            self.e = e

        def __getattr__(self, name):
            return getattr(self.e, name)

        def stat(self, **kw):
            stats.append(self.e.path)
            return self.e.stat(**kw)

    class Listing:
        def __init__(self, path):
            self.it = real(path)

        def __iter__(self):
            for e in self.it:
                listed.append(e.path)
                yield Entry(e)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.it.close()
    monkeypatch.setattr(os, "scandir", Listing)
    assert parsing.data(str(tmp_path / "d"), "--data", DECLARED["data"]) == (str(tmp_path / "d"),)
    assert len(stats) <= datasets.SAMPLE_CLASSES * datasets.SAMPLE_PER_CLASS, len(stats)
    assert sum(p.endswith(".JPEG") for p in listed) < 40 * 30 // 2  # 16 classes listed whole, at most
    monkeypatch.setattr(os, "scandir", real)
    picked = datasets.sample(datasets.open_folder(str(tmp_path / "d")))  # the plan's, as above
    folder = datasets.open_folder(str(tmp_path / "d"))  # prepare's: every file, for the fingerprint
    assert len(folder.entries) == 1200 and datasets.sample(folder) == picked  # the same 64


def test_a_writer_is_ended_when_compare_is_stopped_while_it_writes(tmp_path):
    # Ctrl-C or SIGTERM (the sweep's handler raises KeyboardInterrupt) while a framework's writer
    # ran left the writer running on, an orphan still writing into DIR/.compare after compare ended
    import subprocess
    import sys

    from compare import frameworks as fws
    pid_file = tmp_path / "pid"
    python = tmp_path / "python"
    python.write_text("#!{}\nimport os, sys, time\nopen({!r}, 'w').write(str(os.getpid()))\n"
                      "print('wrote 1 of 8 shards', flush=True)\ntime.sleep(60)\n".format(
                          sys.executable, str(pid_file)))
    python.chmod(0o755)
    writer = formats.LocalWriter("cpu", {"tf": str(python)}, lambda s: None)

    def stopped(line):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt), open(str(tmp_path / "err"), "w") as err:
        writer(fws.get("tf"), str(tmp_path), err, stopped)
    pid = int(pid_file.read_text())
    alive = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True)
    assert alive.stdout.strip()[:1] in ("", "Z"), "the writer {} still runs".format(pid)


def test_make_with_fewer_images_than_classes_says_how_many_classes_it_made(tmp_path, capsys):
    # `compare data make DIR --images 500` (1000 classes by default) wrote 500 class folders of
    # one image each and said only "in 500 classes"; --learnable says how it rounds, this did not
    code, out, err = main_exit(["data", "make", str(tmp_path / "a"), "--images", "3", "--classes",
                                "5", "--image-size", "40x30", "--workers", "1"], capsys)
    assert code == 0, err
    assert "note: --classes 5: 3 images fill 3 classes of one image each (labels 0..2); give " \
           "--images 5 or more for 5 classes" in err
    assert sorted(os.listdir(tmp_path / "a" / "train")) == ["n00000000", "n00000001", "n00000002"]
    code, out, err = main_exit(["data", "make", str(tmp_path / "b"), "--images", "6", "--classes",
                                "3", "--image-size", "40x30", "--workers", "1"], capsys)
    assert code == 0 and "note:" not in err
