"""Modes (`--mode default,tuned`) and the batch search (`--batch-size auto`), on the host: the
switches each backend declares, how a cell gets them, what run ids and hashes become, the search
over probes, and the comparator's refusal of cross-mode ratios. No framework runs here."""
import json
import re
import sys

import pytest

from backends.options import COMPILE, WHERE, mode_settings
from backends.protocol import RunResult, RunSpec
from compare import batchsearch, frameworks
from compare.matrix import Matrix
from compare.reporting import comparator, findings, report, tables
from tests.helpers import ANSWERS, compare, windowed, write_python


def _matrix(names, modes, device="cuda", gpus=(1, 2), options=None, batches=(256,)):
    return Matrix([frameworks.get(n) for n in names], list(gpus), ["fp16"], list(batches),
                  device=device, common={"image_size": 224, "compile": False},
                  options=options or {}, modes=modes, search=(64, 1024))


def test_every_declared_switch_is_an_option_of_its_backend_and_parses_to_its_value():
    for fw in frameworks.FRAMEWORKS:
        declared = {o.key: o for o in fw.options()}
        switches = fw.module().MODES["tuned"]
        for s in switches:
            assert s.where in WHERE, (fw.name, s)
            assert s.key == COMPILE or declared[s.key].parse(s.value) == s.value, (fw.name, s)
    assert set(frameworks.names()) == {"tf", "mxnet", "caffe2", "jax"}


def test_tuned_pytorch_compiles_and_graphs_one_gpu_but_not_two_and_runs_at_a_searched_batch():
    default, tuned = [s for s in _matrix(["caffe2"], ["default", "tuned"]).specs()
                      if s.gpus == 1]
    assert (default.run_id, default.compile, default.options) == ("caffe2-fp16-g1-b256-s224-r0", False, {})
    assert tuned.run_id == "caffe2-fp16-g1-bauto-s224-tuned-r0"
    assert (tuned.compile, tuned.batch_auto, tuned.batch_size) == (True, True, 64)
    assert tuned.options == {"compile_mode": "default", "cuda_graphs": True}
    two = [s for s in _matrix(["caffe2"], ["tuned"]).specs() if s.gpus == 2][0]
    assert two.options == {"compile_mode": "default"}  # no whole-step CUDA graph under DDP
    cpu = _matrix(["tf", "mxnet", "jax"], ["tuned"], device="cpu", gpus=(1,)).specs()
    assert [(s.framework, s.options) for s in cpu] == [
        ("tf", {"xla": True}), ("mxnet", {"hybridize": "static"}), ("jax", {})]


def test_an_explicit_option_wins_over_the_mode_and_the_result_says_so():
    spec = _matrix(["caffe2"], ["tuned"], gpus=(1,), options={"caffe2": {"cuda_graphs": False}}).specs()[0]
    assert spec.options == {"compile_mode": "default", "cuda_graphs": False}
    record = mode_settings(frameworks.get("caffe2").module().MODES, spec)
    assert record == {"mode": "tuned", "mode_switches": {"compile": True, "compile_mode": "default"},
                      "mode_overridden": {"cuda_graphs": False}}
    assert mode_settings({}, RunSpec("jax", "jax")) == {"mode": "default"}


def test_default_run_ids_and_spec_hashes_are_those_of_before_modes():
    # as computed on main at 6e8c4c6, before modes existed: old campaigns resume unchanged
    spec = RunSpec(framework="caffe2", backend="caffe2_torch", precision="fp16", batch_size=256,
                   device="cuda", gpus=2, options={"cuda_graphs": True})
    assert (spec.run_id, spec.spec_hash) == ("caffe2-fp16-g2-b256-s224-r0", "4afbabff320b7b4f")
    data = RunSpec(framework="jax", backend="jax", data="/d", data_only=True)
    assert (data.run_id, data.spec_hash) == ("jax-fp32-w1-b32-s224-dataonly-r0", "3a7b03b575155d3a")


def test_an_auto_cell_is_one_cell_whatever_batch_it_chose_and_a_probe_is_named_apart():
    cell = RunSpec("jax", "jax", device="cuda", batch_size=64, batch_auto=True, mode="tuned")
    chosen = RunSpec("jax", "jax", device="cuda", batch_size=512, batch_auto=True, mode="tuned")
    assert (cell.run_id, cell.spec_hash) == (chosen.run_id, chosen.spec_hash)
    fixed = RunSpec("jax", "jax", device="cuda", batch_size=512, mode="tuned")
    assert fixed.spec_hash != chosen.spec_hash
    probe = batchsearch.probe_spec(chosen, 512)
    assert probe.run_id == "jax-fp32-g1-b512-s224-tuned-probe"
    assert (probe.steps, probe.warmup_steps, probe.windows) == (10, 5, 2)
    # an in-process search's probes are saved with the steps they ran (a FIT probe: 2 and 1)
    result = RunResult(run_id=chosen.run_id, status="ok", spec=chosen.to_dict(), settings={
        "batch_search": {"probes": [{"batch_size": 512, "status": "ok", "images_per_sec": 9.0,
                                     "steps": 2, "warmup_steps": 1}]}})
    saved = batchsearch.probe_results(chosen, result)[0]
    assert (saved.spec["steps"], saved.spec["warmup_steps"], saved.images_per_sec) == (2, 1, 9.0)


def _fake_run(fits_up_to, ips=lambda b: 100.0 * b ** 0.5, seen=None, rse=0.0):
    def run(spec):
        if seen is not None:
            seen.append(spec.batch_size)
        b = spec.batch_size
        if b > fits_up_to:
            return RunResult(spec.run_id, "oom", spec.to_dict(), reason="CUDA out of memory")
        return RunResult(spec.run_id, "ok", spec.to_dict(), images_per_sec=ips(b),
                         uncertainty=rse * ips(b))
    return run


def test_the_search_doubles_until_out_of_memory_then_tries_one_batch_between():
    seen = []
    out = batchsearch.search(RunSpec("jax", "jax", batch_size=8, batch_auto=True), (8, 1024),
                             _fake_run(100, seen=seen), budget_s=1e9)
    assert seen == [8, 16, 32, 64, 128, 96]
    assert out.batch == 96  # the largest that fits is the fastest here
    assert out.stopped == "batch 128 oom; then batch 96 ok"
    assert [p["status"] for p in out.record("here")["probes"]] == ["ok"] * 4 + ["oom", "ok"]


def test_the_search_starts_at_the_cells_batch_and_stops_at_a_gain_within_the_noise():
    saturating = _fake_run(10 ** 6, ips=lambda b: 1000.0 * min(b, 64) + b / 100, rse=0.02)
    out = batchsearch.search(RunSpec("jax", "jax", batch_size=32), (8, 1024), saturating, 1e9)
    assert [p["batch_size"] for p in out.probes] == [32, 64, 128]
    # 2 x the two probes' 2 % relative errors in quadrature: a gain of 0.02 % is noise
    assert out.stopped == "batch 128 gains +0.0% over 64: not beyond the probes' noise (±5.7%)"
    assert out.batch == 128  # the fastest of the probes, however slightly
    assert out.record("here")["start"] == 32
    peaked = _fake_run(10 ** 6, ips=lambda b: -abs(b - 64) + 1000.0)  # fastest at 64
    out = batchsearch.search(RunSpec("jax", "jax", batch_size=16), (16, 200), peaked, budget_s=1e9)
    assert [p.spec["batch_size"] for p in out.results] == [16, 32, 64, 128]
    assert (out.batch, out.stopped) == (64, "batch 128 gains -6.4% over 64: slower beyond the "
                                            "probes' noise (±1.0%)")


def test_the_search_stops_at_its_maximum_or_budget():
    out = batchsearch.search(RunSpec("jax", "jax", batch_size=16), (16, 200), _fake_run(10 ** 6), 1e9)
    assert [p["batch_size"] for p in out.probes] == [16, 32, 64, 128, 200]
    assert (out.batch, out.stopped) == (200, "reached the maximum, 200")
    ticks = iter(range(100))
    out = batchsearch.search(RunSpec("jax", "jax", batch_size=16), (16, 1024), _fake_run(10 ** 6),
                             budget_s=2, clock=lambda: next(ticks))
    assert [p["batch_size"] for p in out.probes] == [16, 32]
    assert out.stopped == "time budget of 2 s spent"


def test_a_first_probe_that_does_not_fit_halves_the_batch_until_one_does():
    seen = []
    out = batchsearch.search(RunSpec("jax", "jax", batch_size=256), (64, 1024),
                             _fake_run(100, seen=seen), budget_s=1e9)
    assert seen == [256, 128, 64, 96]
    assert (out.batch, out.stopped) == (96, "batch 128 oom; 64 fits; then batch 96 ok")


def test_a_search_whose_first_probe_does_not_fit_says_so():
    out = batchsearch.search(RunSpec("jax", "jax", batch_size=256), (256, 1024), _fake_run(100),
                             budget_s=1e9)
    assert out.batch is None
    assert out.failure_reason() == ("batch search from 256: the probe at batch 256 ended oom: CUDA out "
                                    "of memory")
    assert batchsearch.search(RunSpec("jax", "jax"), (4, 4), None, budget_s=0).batch == 4  # no probe


def test_a_probe_that_crashes_under_the_memory_limit_is_out_of_memory_and_the_search_goes_below():
    def crash_above_48(spec):
        if spec.batch_size > 48:
            return RunResult(spec.run_id, "failed", spec.to_dict(),
                             reason="killed by SIGSEGV (exit code -11) and wrote no result")
        return RunResult(spec.run_id, "ok", spec.to_dict(), images_per_sec=10.0 * spec.batch_size)
    cell = RunSpec("caffe2", "caffe2_torch", batch_size=32, options={"memory_limit_mb": 1050})
    out = batchsearch.search(cell, (32, 64), lambda s: batchsearch.limit_crash(crash_above_48(s)),
                             budget_s=1e9)
    assert (out.batch, out.stopped) == (48, "batch 64 oom; then batch 48 ok")
    assert out.results[1].reason == ("killed by SIGSEGV (exit code -11) and wrote no result under "
                                     "memory_limit_mb=1050: taken as out of memory")
    failed = RunResult("p", "failed", cell.to_dict(), reason="RuntimeError: could not create a primitive")
    assert (batchsearch.limit_crash(failed).status, failed.reason) == ("oom", (
        "RuntimeError: could not create a primitive under memory_limit_mb=1050: taken as out of memory"))
    # without a limit a crash is a crash: the search stops there
    free = RunSpec("caffe2", "caffe2_torch", batch_size=32)
    out = batchsearch.search(free, (32, 64), lambda s: batchsearch.limit_crash(crash_above_48(s)), 1e9)
    assert (out.batch, out.stopped, out.results[1].status) == (32, "batch 64 failed", "failed")


def test_tensorflow_and_mxnet_search_in_separate_processes_and_say_why(monkeypatch):
    def cell(fw, **kw):
        return RunSpec(fw, frameworks.get(fw).backend, device="cuda", batch_auto=True, **kw)
    assert batchsearch.where(cell("caffe2")) == (True, "")
    assert batchsearch.where(cell("jax", gpus=2)) == (True, "")  # one process, two devices
    assert batchsearch.where(cell("tf"))[1].startswith("TensorFlow keeps the device memory")
    assert batchsearch.where(cell("mxnet"))[1].startswith("MXNet's pooled storage keeps")
    assert batchsearch.where(cell("caffe2", gpus=2))[1].startswith("a job of several processes")
    assert batchsearch.where(cell("jax", data="/data"))[1].startswith("real data: the input pipeline")
    monkeypatch.setenv("COMPARE_BATCH_SEARCH", "process")
    assert batchsearch.where(cell("caffe2")) == (False, "COMPARE_BATCH_SEARCH=process")


def test_separate_probes_ending_below_the_start_give_every_repeat_the_planned_cells_hash(monkeypatch):
    # the plan set 4 steps of 64 (256 images); 64 does not fit, 48 is chosen: each repeat times
    # 6 steps at 48 and its result is still the planned cell (the store keeps a result whose
    # re-hashed spec is the planned cell's), the second repeat at the first's batch and steps
    from dataclasses import replace
    from types import SimpleNamespace
    monkeypatch.setenv("COMPARE_BATCH_SEARCH", "process")
    cell = RunSpec("caffe2", "caffe2_torch", batch_size=64, batch_auto=True, steps=4, windows=2,
                   mode="tuned")

    class Executor:
        def run(self, spec, campaign, timeout, slot=None):
            ok = spec.batch_size <= 48
            return RunResult(spec.run_id, "ok" if ok else "oom", spec.to_dict(), spec_hash=spec.spec_hash,
                             images_per_sec=10.0 * spec.batch_size if ok else None)
    campaign = SimpleNamespace(attempt_nonce=lambda: "n", save_probe=lambda r: None)
    plan = SimpleNamespace(study=SimpleNamespace(timeout=60.0), matrix=Matrix(
        [], [1], ["fp32"], [], search=(8, 64), search_steps={("resnet50", "fp32"): (4, 1)}))
    searched = {}
    for repeat in (0, 1):
        result = batchsearch.run_auto(replace(cell, repeat=repeat), campaign, Executor(), plan, None,
                                      lambda line: None, searched)
        spec = RunSpec.from_dict(result.spec)
        assert (result.status, spec.batch_size, spec.steps) == ("ok", 48, 6)
        assert result.spec_hash == spec.spec_hash == cell.spec_hash


def _tuned(result):
    spec = dict(result.spec, mode="tuned")
    return RunResult(**dict(result.to_dict(), spec=spec, run_id=RunSpec.from_dict(spec).run_id))


def test_the_comparator_refuses_a_ratio_across_modes():
    torch_default = windowed("caffe2", "fp16", 1, [1000, 1002, 998])
    mxnet_tuned = _tuned(windowed("mxnet", "fp16", 1, [1500, 1503, 1497]))
    df = comparator.cells([torch_default, mxnet_tuned])
    rows = {r["framework"]: r for _, r in df.iterrows()}
    with pytest.raises(comparator.NotComparable, match=r"^a ratio across modes \(tuned ÷ default\) is "
                                                         r"not a verdict; compare cells of one mode$"):
        comparator.ratio(rows["mxnet"], rows["caffe2"])
    assert rows["mxnet"]["ratio_baseline"] == "mxnet"  # the baseline framework (registry order)
    assert rows["caffe2"]["framework_ratio"] is None  # never divided by the tuned MXNet cell
    text = tables.markdown(report.build(df).sections())
    assert "0.67×" not in text and "1.50×" not in text
    assert "Framework vs framework" not in text  # no ratio in any row: no table


def test_findings_name_the_mode_of_each_verdict():
    cells = [windowed("caffe2", "fp16", 1, [1000, 1001, 999], repeat=i) for i in range(3)]
    cells += [windowed("mxnet", "fp16", 1, [1170, 1171, 1169], repeat=i) for i in range(3)]
    cells += [_tuned(windowed("caffe2", "fp16", 1, [1500, 1502, 1498], repeat=i)) for i in range(3)]
    cells += [_tuned(windowed("mxnet", "fp16", 1, [1500, 1499, 1501], repeat=i)) for i in range(3)]
    df = comparator.cells(cells)
    lines = findings.summary(df, report.layout_of(df)).lines
    assert lines[0].startswith("By mode: at defaults, PyTorch (Caffe2) is 0.85× MXNet; tuned, PyTorch "
                               "(Caffe2) is level with MXNet (within noise, ±")
    assert any(line.startswith("At defaults, fastest: MXNet at fp16") for line in lines)
    assert any(line.startswith("Tuned, PyTorch (Caffe2) and MXNet are within noise") for line in lines)
    text = tables.markdown(report.build(df).sections())
    assert "| MXNet | tuned | fp16 | 256 | 224 |" in text and "| MXNet | default | fp16 | 256 | 224 |" in text


FAKE = '''#!{python}
import os, sys, time
''' + ANSWERS + '''from backends import harness
FITS = {fits}
with open({pids!r}, "a") as f:  # one line per process: what a search costs in processes
    f.write("{{}}\\n".format(os.getpid()))


class Fake(harness.Trainer):
    def __init__(self, spec):
        if spec.batch_size > FITS:
            raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate "
                               "{{}} bytes".format(spec.batch_size * 10 ** 8))
        self.spec = spec

    def step(self):
        time.sleep(0.02)  # per step, whatever the batch: a bigger batch is faster


sys.exit(harness.main(Fake, sys.argv[-2:]))
'''


def _fake_campaign(tmp_path, name, env=None):
    python, pids = tmp_path / (name + "-python"), tmp_path / (name + ".pids")
    write_python(python, FAKE.format(python=sys.executable, fits=50, pids=str(pids)))
    campaign = tmp_path / name
    proc = compare(["run", "--frameworks", "caffe2", "--python", "caffe2={}".format(python),
                    "--device", "cpu", "--executor", "local", "--batch-size", "4,auto",
                    "--batch-search", "8-128", "--image-size", "32", "--steps", "3", "--warmup", "1",
                    "--results", campaign], env=env)
    assert proc.returncode == 0, proc.stderr
    auto = json.loads((campaign / "results" / "caffe2-fp32-w1-bauto-s32-r0.json").read_text())
    return campaign, auto, len(pids.read_text().split())


def test_batch_auto_records_its_probes_apart_from_the_cells(tmp_path):
    campaign, auto, processes = _fake_campaign(tmp_path, "c")
    assert processes == 2  # the cell at batch 4, and the auto cell whose probes ran inside it
    probes = sorted(p.name for p in (campaign / "probes").glob("*.json"))
    # from the CPU's default batch, 32: 64 does not fit (the fake's 50), 48 lies between
    assert probes == ["caffe2-fp32-w1-b{}-s32-probe.json".format(b) for b in (32, 48, 64)]
    oom = json.loads((campaign / "probes" / "caffe2-fp32-w1-b64-s32-probe.json").read_text())
    assert oom["status"] == "oom" and "can't allocate memory" in oom["reason"]
    cells = sorted(p.name for p in (campaign / "results").glob("*.json"))
    assert cells == ["caffe2-fp32-w1-b4-s32-r0.json", "caffe2-fp32-w1-bauto-s32-r0.json"]
    assert (auto["status"], auto["spec"]["batch_size"], auto["spec"]["batch_auto"]) == ("ok", 48, True)
    search = auto["settings"]["batch_search"]
    assert (search["stopped"], search["where"], search["start"]) == (
        "batch 64 oom; then batch 48 ok", "in the cell's process", 32)
    assert search["reused"] is True  # the last probe was the fastest: its trainer went on
    assert "batch_searched" in auto["phases"]
    report_md = (campaign / "report" / "report.md").read_text()
    assert "## Batch search (probes, not cells)" in report_md
    assert "| PyTorch (Caffe2) | default | fp32 | 1 | 48 | ok |" in report_md
    assert "[b48]" in report_md and "| auto |" in report_md
    assert re.search(r"caffe2-fp32-w1-bauto-s32-r0: 3 probes in the cell's process in \d+ s, batch 64 "
                     r"oom; then batch 48 ok; chose 48 \(the last probe's model went on\)\.", report_md)


def test_the_separate_process_search_chooses_the_same_batch_in_five_processes(tmp_path):
    _, inside, _ = _fake_campaign(tmp_path, "in")
    _, apart, processes = _fake_campaign(tmp_path, "apart", env={"COMPARE_BATCH_SEARCH": "process"})
    assert processes == 5  # batch 4; probes 32, 64, 48; the cell at 48
    assert apart["spec"]["batch_size"] == inside["spec"]["batch_size"] == 48
    assert apart["settings"]["batch_search"]["where"] == \
        "separate processes: COMPARE_BATCH_SEARCH=process"
    assert [p["batch_size"] for p in apart["settings"]["batch_search"]["probes"]] == \
        [p["batch_size"] for p in inside["settings"]["batch_search"]["probes"]] == [32, 64, 48]


@pytest.mark.parametrize("argv,message", [
    (["--mode", "fast"], "unknown mode 'fast'; choose from default, tuned"),
    (["--batch-size", "big"], "--batch-size 'big': not an integer or auto; give per-GPU batch sizes "
                              ">= 1 and/or auto, e.g. 256,auto"),
    (["--batch-search", "512-64"], "--batch-search '512-64': give MIN-MAX, two per-GPU batch sizes "
                                   "with 1 <= MIN <= MAX, e.g. 64-1024"),
    (["--batch-search", "64-99999"], "--batch-search 99999: must be <= 16384 (images per worker and step)"),
])
def test_bad_modes_and_searches_are_one_line(argv, message, tmp_path):
    proc = compare(["run", "--frameworks", "caffe2", "--device", "cpu", "--results",
                    tmp_path / "c"] + argv)
    assert (proc.returncode, proc.stderr) == (2, "compare: error: {}\n".format(message))


def test_a_batch_search_no_cell_makes_is_refused_not_ignored(tmp_path):
    """--batch-search bounds only auto batches (--batch-size auto, --mode tuned): beside fixed
    batches it was silently dropped; --plan, so that a regression trains nothing."""
    base = ["run", "--plan", "--frameworks", "caffe2", "--device", "cpu", "--batch-search", "8-16"]
    proc = compare(base + ["--batch-size", "32"])
    assert (proc.returncode, proc.stderr) == (2, "compare: error: --batch-search 8-16: bounds the "
                                                 "batch search of --batch-size auto and --mode tuned, "
                                                 "and no cell searches; add --batch-size auto (or "
                                                 "--mode tuned), or leave it out\n")
    for more in (["--batch-size", "32,auto"], ["--mode", "tuned"]):
        proc = compare(base + more)
        assert proc.returncode == 0 and "-bauto-" in proc.stdout, proc.stderr


def test_jax_hides_latency_only_where_there_is_a_collective():
    from backends.jax.flags import xla_flags
    from backends.world import World
    lhs = "--xla_gpu_enable_latency_hiding_scheduler=true"
    one, two = (RunSpec("jax", "jax", device="cuda", gpus=n) for n in (1, 2))
    assert lhs not in xla_flags(one, World())  # as the plain Flax loop runs one GPU
    assert lhs in xla_flags(two, World())
    asked = RunSpec("jax", "jax", device="cuda", options={"latency_hiding": True})
    assert lhs in xla_flags(asked, World())


def test_a_model_and_a_mode_are_both_named_in_the_run_id():
    spec = RunSpec("caffe2", "caffe2_torch", device="cuda", model="resnet152", mode="tuned",
                   batch_auto=True, batch_size=64)
    assert spec.run_id == "caffe2-resnet152-fp32-g1-bauto-s224-tuned-r0"
    m = Matrix([frameworks.get("jax")], [1], ["bf16"], [256], device="cuda", common={"image_size": 224},
               models=["resnet50", "vgg16"], modes=["default", "tuned"], search=(64, 512))
    assert [s.run_id for s in m.specs()] == [
        "jax-bf16-g1-b256-s224-r0", "jax-bf16-g1-bauto-s224-tuned-r0",
        "jax-vgg16-bf16-g1-b256-s224-r0", "jax-vgg16-bf16-g1-bauto-s224-tuned-r0"]


def test_the_probes_of_two_networks_mark_each_networks_own_chosen_batch():
    """--model resnet50,resnet152 --batch-size auto: ResNet-50's search chose 128, ResNet-152's
    64; each network's probe at its own batch is the one marked chosen, and rows name the network."""
    from compare.reporting import probes as probe_table

    def spec(model, batch, probe):
        return RunSpec("caffe2", "caffe2_torch", device="cuda", batch_size=batch, model=model,
                       batch_auto=True, probe=probe)
    probes, cells = [], []
    for model, chose in (("resnet50", 128), ("resnet152", 64)):
        for b in (64, 128):
            s = spec(model, b, True)
            probes.append(RunResult(s.run_id, "ok", s.to_dict(), images_per_sec=float(b)))
        s = spec(model, chose, False)
        cells.append(RunResult(s.run_id, "ok", s.to_dict(), images_per_sec=float(chose)))
    table = probe_table.table(probes, cells)
    assert "model" in table.header
    marked = {(r[table.header.index("model")], r[table.header.index("batch")]): r[-1]
              for r in table.rows}
    assert marked == {("resnet50", "64"): "", ("resnet50", "128"): "chosen",
                      ("resnet152", "64"): "chosen", ("resnet152", "128"): ""}
