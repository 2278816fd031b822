"""Modes and the batch search end to end on the CPU, with the real frameworks: both modes of all
four backends in one campaign, and `--batch-size auto` under an imposed memory limit."""
import json

import pytest

from compare import frameworks
from tests.helpers import compare

pytestmark = pytest.mark.backend  # real frameworks in their environments

# what each backend's tuned mode switches on a CPU, as its result must record it
TUNED_ON_CPU = {"tf": {"xla": True}, "mxnet": {"hybridize": "static"},
                "caffe2": {"compile": True, "compile_mode": "default"}, "jax": {}}


def test_both_modes_run_for_all_four_frameworks_and_record_their_switches(tmp_path):
    campaign = tmp_path / "c"
    # --batch-search 2-2: one candidate, so the tuned cells run at batch 2 without probes
    proc = compare(["run", "--frameworks", "tf,mxnet,caffe2,jax", "--mode", "default,tuned",
                    "--quick", "--image-size", "32", "--batch-size", "2", "--batch-search", "2-2",
                    "--steps", "2", "--warmup", "1", "--windows", "1", "--device", "cpu",
                    "--executor", "local", "--results", campaign], timeout=1800)
    assert proc.returncode == 0, proc.stderr
    results = {p.stem: json.loads(p.read_text()) for p in (campaign / "results").glob("*.json")}
    assert len(results) == 8
    for fw in frameworks.names():
        default = results["{}-fp32-w1-b2-s32-r0".format(fw)]
        tuned = results["{}-fp32-w1-bauto-s32-tuned-r0".format(fw)]
        for r in (default, tuned):
            assert r["status"] == "ok", (r["run_id"], r["reason"])
        assert default["settings"]["mode"] == "default"
        assert (tuned["settings"]["mode"], tuned["settings"]["mode_switches"],
                tuned["settings"]["mode_overridden"]) == ("tuned", TUNED_ON_CPU[fw], {})
        assert tuned["spec"]["batch_size"] == 2 and tuned["spec"]["batch_auto"] is True
    # the switches really ran: read back by each backend, not just asked for
    assert results["caffe2-fp32-w1-bauto-s32-tuned-r0"]["settings"]["compiler"] == "torch.compile default"
    assert results["caffe2-fp32-w1-b2-s32-r0"]["settings"]["compiler"] is None
    assert results["tf-fp32-w1-bauto-s32-tuned-r0"]["settings"]["xla"] is True
    assert results["tf-fp32-w1-b2-s32-r0"]["settings"]["xla"] is False
    assert results["mxnet-fp32-w1-bauto-s32-tuned-r0"]["settings"]["hybridize"] == "static_alloc, static_shape"
    # JAX's tuned sets no switch: the very program of its default (a hash of the compiled step)
    fingerprints = {results[i]["settings"]["program_fingerprint"] for i in
                    ("jax-fp32-w1-b2-s32-r0", "jax-fp32-w1-bauto-s32-tuned-r0")}
    assert len(fingerprints) == 1 and len(fingerprints.pop()) == 16
    report_md = (campaign / "report" / "report.md").read_text()
    assert "| JAX (Flax) | tuned | fp32 | auto | 32 | " in report_md
    assert "| JAX (Flax) | default | fp32 | 2 | 32 | " in report_md


def _limited(campaign):
    # PyTorch at 64 px needs ~660 MiB of data memory plus ~8.5 MiB per image (measured on this
    # VM): under 1050 MiB batch 32 fits and 64 does not, as the allocator's own error
    proc = compare(["run", "--frameworks", "caffe2", "--batch-size", "auto", "--batch-search", "32-64",
                    "--option", "memory_limit_mb=1050", "--image-size", "64", "--steps", "1",
                    "--warmup", "1", "--windows", "1", "--device", "cpu", "--executor", "local",
                    "--results", campaign], timeout=1200)
    assert proc.returncode == 0, proc.stderr
    probes = {p.stem: json.loads(p.read_text()) for p in (campaign / "probes").glob("*.json")}
    cell = json.loads((campaign / "results" / "caffe2-fp32-w1-bauto-s64-r0.json").read_text())
    return probes, cell


def test_batch_auto_finds_a_batch_under_a_memory_limit_and_records_its_probes(tmp_path):
    """A probe out of memory ends only itself; on a CPU under a memory limit every probe is a
    process of its own (a probe in the cell's process would still count what the one before it
    left mapped), and says so."""
    probes, cell = _limited(tmp_path / "c")
    assert sorted(probes) == ["caffe2-fp32-w1-b{}-s64-probe".format(b) for b in (32, 48, 64)]
    assert probes["caffe2-fp32-w1-b32-s64-probe"]["status"] == "ok"
    oom = probes["caffe2-fp32-w1-b64-s64-probe"]
    # the limit refuses an allocation: PyTorch's own error, or (from one run to the next) a
    # crash in native code that does not check, taken as out of memory (batchsearch.limit_crash)
    assert oom["status"] == "oom" and ("DefaultCPUAllocator: can't allocate memory" in oom["reason"] or
                                       oom["reason"].endswith("under memory_limit_mb=1050: taken as "
                                                              "out of memory")), oom["reason"]
    fastest = max((p for p in probes.values() if p["status"] == "ok"),
                  key=lambda p: p["images_per_sec"])["spec"]["batch_size"]
    assert (cell["status"], cell["spec"]["batch_size"]) == ("ok", fastest)
    search = cell["settings"]["batch_search"]
    assert search["stopped"].startswith("batch 64 oom; then batch 48 ")
    assert search["where"] == "separate processes: on a CPU under memory_limit_mb, the address " \
        "space the C allocator keeps after a probe still counts against the limit, so a later " \
        "probe in the same process would not fit where a fresh one does"
    assert cell["spec"]["options"] == {"memory_limit_mb": 1050}  # the cell ran under the limit too
    report_md = (tmp_path / "c" / "report" / "report.md").read_text()
    assert "## Batch search (probes, not cells)" in report_md
    assert "| PyTorch (Caffe2) | default | fp32 | 1 | 64 | oom |" in report_md


def test_pytorch_probes_inside_the_cells_own_process_on_a_cpu(tmp_path):
    campaign = tmp_path / "c"
    proc = compare(["run", "--frameworks", "caffe2", "--batch-size", "auto", "--batch-search", "32-64",
                    "--image-size", "32", "--steps", "2", "--warmup", "1", "--windows", "2",
                    "--device", "cpu", "--executor", "local", "--results", campaign], timeout=1200)
    assert proc.returncode == 0, proc.stderr
    cell = json.loads((campaign / "results" / "caffe2-fp32-w1-bauto-s32-r0.json").read_text())
    search = cell["settings"]["batch_search"]
    assert (cell["status"], search["where"], search["start"]) == ("ok", "in the cell's process", 32)
    assert [(p["batch_size"], p["status"]) for p in search["probes"]] == [(32, "ok"), (64, "ok")]
    assert cell["spec"]["batch_size"] == search["chosen"] == max(
        search["probes"], key=lambda p: p["images_per_sec"])["batch_size"]
    assert search.get("reused", False) == (search["chosen"] == 64)  # the last probe went on
    assert cell["phases"]["devices_ready"] < cell["phases"]["batch_searched"] <= \
        cell["phases"]["model_built"]
    assert sorted(p.name for p in (campaign / "probes").glob("*.json")) == [
        "caffe2-fp32-w1-b32-s32-probe.json", "caffe2-fp32-w1-b64-s32-probe.json"]
