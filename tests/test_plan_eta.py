"""The plan's ETA against wall times that were measured: recorded campaigns (tests/fixtures/eta/,
made by bench/eta_fixture.py), each case the plan of one campaign's cells from the cell times of
earlier ones, the environments it built estimated apart. Within 25 % of the wall time it took."""
import json
import statistics
from pathlib import Path

import pytest

from backends.protocol import RunResult, RunSpec
from compare import eta as plan
from compare import resources
from compare.reporting import timeline
from tests.helpers import save_campaign

FIXTURES = sorted((Path(__file__).parent / "fixtures" / "eta").glob("*.json"))
TOLERANCE = 0.25


def _cases():
    for path in FIXTURES:
        for case in json.loads(path.read_text())["cases"]:
            yield pytest.param(path, case, id="{}:{}".format(path.stem, case["target"]))


def _results(rows):
    return [RunResult.from_dict(r) for r in rows]


def planned(fixture, case, folder: Path):
    """(eta s, wall s, marks, notes): the plan of the case's target cells, in the order they ran,
    from its earlier campaigns saved under `folder` (bench/eta_case.py prints it)."""
    machine = fixture["machine"]
    for name in case["earlier"]:
        save_campaign(folder / name, _results(fixture["campaigns"][name]), machine=machine)
    target = _results(fixture["campaigns"][case["target"]])
    specs = [RunSpec.from_dict(r.spec) for r in target]
    executor = target[0].environment.get("executor")
    items, marks, _, notes = plan.schedule(specs, resources.single(), 1, folder, machine,
                                           executor, case["unbuilt"])
    return max(it.end for it in items), timeline.study(target)["wall_s"], marks, notes


@pytest.mark.parametrize("path,case", list(_cases()))
def test_the_eta_is_within_a_quarter_of_the_wall_time_it_took(path, case, tmp_path):
    eta, wall, marks, notes = planned(json.loads(path.read_text()), case, tmp_path)
    assert abs(eta - wall) <= TOLERANCE * wall, (eta, wall, marks)
    assert set(marks.values()) <= {"=", "=+", "~", "~+"}  # like cells only, no guess
    if case["unbuilt"]:  # the builds estimated apart, and said so
        assert notes[0].startswith("environments built once, in the first cell of each: ")


def test_the_rule_scales_the_per_step_part_by_steps_and_pixels_and_leaves_builds_out():
    spec = RunSpec("tf", "tf_horovod", image_size=64, steps=10, warmup_steps=3)
    r = RunResult(spec.run_id, "ok", spec.to_dict(), spec_hash=spec.spec_hash,
                  environment={"executor": "local", "env_build_s": 30.0},
                  phases={"cell_start": 0.0, "timed_start": 90.0, "timed_end": 110.0,
                          "cell_end": 130.0})
    # 130 s in the cell, 30 of them building the environment; 2 s per step over 2 + 10 steps
    assert plan.parts(r) == (130.0 - 30.0 - 2.0 * 12, 2.0)
    bigger = RunSpec("tf", "tf_horovod", image_size=128, steps=50, warmup_steps=10)
    assert plan.scaled(r, bigger) == pytest.approx(76.0 + 2.0 * 4 * (9 + 50))
    estimates = plan.Estimates([r], "local")
    assert estimates.of(bigger) == (pytest.approx(548.0), "~")  # a like cell, another size
    assert estimates.of(RunSpec.from_dict(r.spec)) == (pytest.approx(100.0), "=")
    assert plan.Estimates([r], "docker").of(bigger)[1] == "?"  # another executor: not like
    assert estimates.build("tf") == (30.0, "recorded")


def test_a_time_to_accuracy_run_is_not_like_a_throughput_cell_on_the_same_folder():
    # an hour of training to 0.5 top-1 says nothing of a throughput cell reading the same folder,
    # nor a 40 s throughput cell of a run to a target accuracy
    tta = RunSpec("tf", "tf_horovod", data="/d", target_accuracy=0.5)
    cell = RunSpec("tf", "tf_horovod", data="/d")
    ran = [RunResult(s.run_id, "ok", s.to_dict(), spec_hash=s.spec_hash,
                     environment={"executor": "local"}, phases={"cell_start": 0.0, "cell_end": took})
           for s, took in ((tta, 3600.0), (cell, 40.0))]
    assert plan.Estimates(ran[:1], "local").of(cell)[1] == "?"
    assert plan.Estimates(ran[1:], "local").of(tta)[1] == "?"
    assert plan.Estimates(ran, "local").of(RunSpec("tf", "tf_horovod", data="/d", steps=10)) == (
        40.0, "~")


def test_a_guess_for_a_run_to_a_target_accuracy_comes_from_such_runs_first():
    # ten mxnet runs to 0.6 were planned at 9 s each (the median of the framework's throughput
    # cells) and took a minute each, as its run to 0.5 had; and the other way round
    def ran(spec, took, end):
        return RunResult(spec.run_id, "ok", spec.to_dict(), spec_hash=spec.spec_hash,
                         environment={"executor": "local"},
                         phases={"cell_start": end - took, "cell_end": end})
    tta = RunSpec("mxnet", "mxnet", data="/d", target_accuracy=0.5)
    cells = [RunSpec("mxnet", "mxnet", repeat=i) for i in range(2)]
    results = [ran(tta, 60.0, 100.0), ran(cells[0], 9.0, 200.0), ran(cells[1], 9.0, 300.0)]
    estimates = plan.Estimates(results, "local")
    assert estimates.of(RunSpec("mxnet", "mxnet", data="/d", target_accuracy=0.6)) == (60.0, "?")
    assert estimates.of(RunSpec("mxnet", "mxnet", precision="bf16")) == (9.0, "?")
    # another framework: any framework's runs of the same kind
    assert estimates.of(RunSpec("tf", "tf_horovod", data="/d", target_accuracy=0.6)) == (60.0, "?")
    assert estimates.of(RunSpec("tf", "tf_horovod")) == (9.0, "?")


def test_a_time_to_accuracy_run_is_like_one_only_on_the_same_folder_and_epochs():
    # a run to 0.5 top-1 on a 480-image folder in 4 epochs took 60 s: that says nothing of one on
    # ImageNet, nor of one allowed 40 epochs, yet the plan called it a like cell (~60 s)
    small = RunSpec("caffe2", "caffe2_torch", data="/small", target_accuracy=0.5, max_epochs=4)
    ran = [RunResult(small.run_id, "ok", small.to_dict(), spec_hash=small.spec_hash,
                     environment={"executor": "local"}, phases={"cell_start": 0.0, "cell_end": 60.0})]
    estimates = plan.Estimates(ran, "local")
    for other in (dict(data="/imagenet"), dict(max_epochs=40), dict(eval_every=2)):
        spec = RunSpec.from_dict(dict(small.to_dict(), **other))
        assert estimates.of(spec)[1] == "?", other  # a guess, said so
    assert estimates.of(RunSpec.from_dict(dict(small.to_dict(), image_size=128)))[1] == "~"


def test_a_cold_jax_compile_is_left_out_of_the_same_cells_next_run_only():
    spec = RunSpec("jax", "jax", device="cuda", steps=10, warmup_steps=2)
    cold = RunResult(spec.run_id, "ok", spec.to_dict(), spec_hash=spec.spec_hash,
                     environment={"executor": "local",
                                  "compile_cache": {"jax": {"state": "miss"}}},
                     settings={"compile_s": 19.0},
                     phases={"cell_start": 0.0, "timed_start": 26.0, "timed_end": 27.0,
                             "cell_end": 28.0})
    assert plan.cached_compile(cold) == 19.0
    warm = RunResult.from_dict(dict(cold.to_dict(), environment={
        "executor": "local", "compile_cache": {"jax": {"state": "hit"}}}))
    assert plan.cached_compile(warm) == 0.0  # it compiled nothing: nothing to leave out
    estimates = plan.Estimates([cold], "local")
    assert estimates.of(spec) == (pytest.approx(28.0 - 19.0), "=")  # the same cell: cached now
    other = RunSpec("jax", "jax", device="cuda", steps=10, warmup_steps=2, image_size=112)
    assert estimates.of(other) == (pytest.approx(28.0 - 1.1 + 1.1 / 4), "~")  # not this program's


REFERENCE = Path(plan.__file__).parent / "references" / "cell_times" / "h200.json"


def test_a_fresh_h200_takes_like_cells_measured_cold_on_an_h200_and_says_so():
    h200 = {"gpus": [{"name": "NVIDIA H200", "memory_mib": 143771.0, "driver": "590.1"}]}
    references, where = plan.reference_results(h200)
    assert len(references) == 12 and where[0].startswith("one NVIDIA H200 of 141 GiB") and \
        where[0].endswith("(h200.json)")  # any driver: the GPU models decide
    assert plan.reference_results({"gpus": [{"name": "NVIDIA H100 80GB HBM3"}]}) == ([], [])
    assert plan.reference_results({"gpus": [], "cpu_model": "AMD EPYC"}) == ([], [])
    # measured apart: the plan of the no-flag study's fp16 cells (its own fresh machine) from the
    # 8-cell study's (another fresh machine, an hour before): within the test's tolerance
    runs = json.loads(REFERENCE.read_text())["campaigns"]
    estimates = plan.Estimates([], "local", references=_results(runs["study"]))
    for r in _results(runs["noflags"]):
        if r.spec["precision"] == "fp16":
            seconds, mark = estimates.of(RunSpec.from_dict(r.spec))
            took = r.phases["cell_end"] - r.phases["cell_start"]
            assert mark == "r" and abs(seconds - took) <= TOLERANCE * took, (r.run_id, seconds, took)
    assert plan.Estimates([], "docker", references=_results(runs["study"])).of(
        RunSpec.from_dict(runs["noflags"][1]["spec"]))[1] == "?"  # like cells ran local only


def test_a_cpu_machine_takes_the_references_of_its_cores_and_cpu_kind_only():
    cpu = {"gpus": [], "cpu_count": 2, "cpu_kind": {"avx512f": True, "bf16": True}}
    references, where = plan.reference_results(cpu)
    assert references and {r.spec["device"] for r in references} == {"cpu"}
    assert where[0].startswith("the README's main job")
    # bf16 emulated (no bf16 instructions) is another speed; so are other core counts; a
    # cluster's nodes are not this host
    assert plan.reference_results(dict(cpu, cpu_kind={"avx512f": True, "bf16": False})) == ([], [])
    assert plan.reference_results(dict(cpu, cpu_count=16)) == ([], [])
    assert plan.reference_results(dict(cpu, slurm={"nodes": ["a", "b"]})) == ([], [])
    assert plan.cpu_kind(frozenset({"avx512f", "amx_bf16"})) == {"avx512f": True, "bf16": True}
    assert plan.cpu_kind(frozenset({"sse4_2"})) == {"avx512f": False, "bf16": False}
    builds = [timeline.env_build_s(r) for r in references
              if r.spec["framework"] == "tf" and timeline.env_build_s(r)]
    assert plan.Estimates([], "local", references=references).build("tf") == (
        pytest.approx(statistics.median(builds)), "measured on a machine of this kind")
    assert plan.Estimates([], "local").build("tf") == (plan.ENV_BUILD_GUESS_S, "a guess")


def test_a_cpu_machine_running_containers_takes_the_references_run_in_containers():
    # the README's job through --executor docker (images built by ./scripts/test), planned on a
    # fresh results folder from the reference file's docker campaign (a fresh clone at 725cc9d):
    # the later run of the same job (tests/fixtures/eta/readme_docker_cpu.json) within tolerance
    cpu = {"gpus": [], "cpu_count": 2, "cpu_kind": {"avx512f": True, "bf16": True}}
    references, _ = plan.reference_results(cpu)
    target = _results(json.loads((Path(__file__).parent / "fixtures" / "eta" /
                                  "readme_docker_cpu.json").read_text())["campaigns"]["docker2"])
    estimates = plan.Estimates([], "docker", references=references)
    planned = [estimates.of(RunSpec.from_dict(r.spec)) for r in target]
    assert {mark for _, mark in planned} == {"r"}  # no 60 s guesses (12:00 for 3:17 before)
    wall = timeline.study(target)["wall_s"]
    assert abs(sum(s for s, _ in planned) - wall) <= TOLERANCE * wall


def test_the_plan_of_a_finished_campaign_says_nothing_is_left_to_run():
    # `--resume --plan` of a finished campaign printed "plan: 0 cells on 2 cores ..." over an
    # empty table and "estimate: 0:00 wall, against 0:00 one cell at a time"
    pool = resources.single()
    assert plan.render([], {}, pool, 1, "cell times from 1 earlier run", "--concurrency auto") == (
        "plan: no cell to run on {}: every cell of the study has its result already\n".format(
            plan._machine(pool)))



def test_a_plan_of_one_cell_at_a_time_does_not_call_itself_faster():
    # a CPU plan said "estimate: 0:52 wall, against 0:52 one cell at a time (1.00× faster)"
    from compare.scheduler import Planned
    pool = resources.single()
    spec = RunSpec("caffe2", "caffe2_torch")
    items = [Planned(spec, resources.Slot(), 0.0, 52.0)]
    text = plan.render(items, {spec.run_id: "="}, pool, 1, "cell times from 1 earlier run",
                       "--concurrency auto")
    assert text.splitlines()[3] == "estimate: 0:52 wall, one cell at a time"


def test_a_run_to_a_target_accuracy_is_not_scaled_by_steps_it_never_timed():
    # a run to 0.5 under --quick (10 steps, which time to accuracy does not use) took 100 s, 80 of
    # them training; the same study without --quick was planned at 476 s (80 s x 59 / 12 steps)
    quick = RunSpec("caffe2", "caffe2_torch", data="/d", target_accuracy=0.5, image_size=64,
                    steps=10, warmup_steps=3)
    r = RunResult(quick.run_id, "ok", quick.to_dict(), spec_hash=quick.spec_hash,
                  environment={"executor": "local"},
                  phases={"cell_start": 0.0, "timed_start": 15.0, "timed_end": 95.0,
                          "cell_end": 100.0})
    full = RunSpec("caffe2", "caffe2_torch", data="/d", target_accuracy=0.5, image_size=64,
                   steps=50, warmup_steps=10)
    assert plan.Estimates([r], "local").of(full) == (pytest.approx(100.0), "~")
    bigger = RunSpec("caffe2", "caffe2_torch", data="/d", target_accuracy=0.5, image_size=128,
                     steps=10, warmup_steps=3)
    assert plan.Estimates([r], "local").of(bigger) == (pytest.approx(20.0 + 80.0 * 4), "~")


def _tta_run(took, end, status="ok", epochs=10, image=224, max_epochs=10, images=1000,
             timed=None, target=0.5, data="/d"):
    spec = RunSpec("caffe2", "caffe2_torch", data=data, target_accuracy=target, image_size=image,
                   max_epochs=max_epochs, repeat=int(end))
    phases = {"cell_start": end - took, "cell_end": end}
    if timed:  # run_start..run_stop: the training
        phases.update(timed_start=end - took + 5.0, timed_end=end - took + 5.0 + timed)
    return RunResult(spec.run_id, status, spec.to_dict(), spec_hash=spec.spec_hash,
                     environment={"executor": "local"}, phases=phases,
                     accuracy={"epochs": epochs, "images_trained": epochs * images})


def test_a_guess_for_a_run_to_a_target_leaves_out_runs_that_did_not_end_by_themselves():
    # two runs killed at 10 s (timeout, failed) after one of 1000 s made a 10-epoch study read
    # `?10 s` per run: the median of the last three, two of them stopped before any epoch
    ran = [_tta_run(1000.0, 1000.0), _tta_run(10.0, 2000.0, "timeout"),
           _tta_run(10.0, 3000.0, "failed")]
    other = RunSpec("caffe2", "caffe2_torch", data="/d", target_accuracy=0.6, max_epochs=10)
    assert plan.Estimates(ran, "local").of(other) == (pytest.approx(1000.0), "?")


def test_a_guess_for_a_run_to_a_target_scales_by_epochs_images_and_pixels(tmp_path):
    # a 10-epoch run of 1000 s on this folder read `?1000 s` for the same folder with
    # --max-epochs 2, for one twice as large, and at 112 px: its time scales with all three
    folder = tmp_path / "big"
    for c in ("a", "b"):
        (folder / "train" / c).mkdir(parents=True)
        for i in range(100):
            (folder / "train" / c / "{}.JPEG".format(i)).write_bytes(b"")
    ran = [_tta_run(1000.0, 1000.0, "not_converged", images=100)]  # 10 epochs, no timed marks
    estimates = plan.Estimates(ran, "local")
    two = RunSpec("caffe2", "caffe2_torch", data="/d", target_accuracy=0.6, max_epochs=2)
    assert estimates.of(two) == (pytest.approx(200.0), "?")
    big = RunSpec("caffe2", "caffe2_torch", data=str(folder), target_accuracy=0.5, max_epochs=10)
    assert estimates.of(big) == (pytest.approx(2000.0), "?")
    small = RunSpec("caffe2", "caffe2_torch", data="/d", target_accuracy=0.6, max_epochs=10,
                    image_size=112)
    assert estimates.of(small) == (pytest.approx(250.0), "?")
    # with timed marks, the training alone is scaled: 100 s of start-up stay 100 s
    timed = [_tta_run(1000.0, 1000.0, "not_converged", timed=900.0)]
    assert plan.Estimates(timed, "local").of(two) == (pytest.approx(100.0 + 180.0), "?")


def test_a_throughput_cell_is_not_estimated_from_runs_that_failed_or_were_killed():
    # a cell that failed at once (a bad --python: 0.14 s) made every like cell read `~0 s`, and
    # the same cell run again by --resume `=0 s`; one killed at its --timeout is no measure either
    spec = RunSpec("jax", "jax", image_size=64, steps=10, warmup_steps=3)

    def ran(status, took, end):
        return RunResult(spec.run_id, status, spec.to_dict(), spec_hash=spec.spec_hash,
                         environment={"executor": "local"},
                         phases={"cell_start": end - took, "cell_end": end})
    ok = ran("ok", 40.0, 1000.0)
    estimates = plan.Estimates([ok, ran("failed", 0.14, 2000.0), ran("timeout", 5.0, 3000.0)], "local")
    assert estimates.of(spec) == (pytest.approx(40.0), "=")
    # nothing but failures: a guess from the other cells, not the failures' seconds
    assert plan.Estimates([ran("failed", 0.14, 2000.0)], "local").of(spec) == (plan.DEFAULT_S, "?")
    # a cell that ends by itself without a figure (unsupported, out of memory) ends so again
    assert plan.Estimates([ran("unsupported", 2.0, 2000.0)], "local").of(spec) == (
        pytest.approx(2.0), "=")


def test_the_plan_counts_only_the_earlier_runs_its_estimate_uses(tmp_path):
    # "cell times from 3 earlier runs in 2 campaigns" where the estimate left out the two that
    # failed or timed out (and so the campaign of only such)
    from compare.store import FAILED_RUN
    from tests.helpers import MACHINE, save_campaign
    spec = RunSpec("jax", "jax", image_size=64, steps=10, warmup_steps=3)

    def ran(status, precision, end):
        cell = RunSpec("jax", "jax", image_size=64, steps=10, warmup_steps=3, precision=precision)
        return RunResult(cell.run_id, status, cell.to_dict(), spec_hash=cell.spec_hash,
                         reason="as asked", environment={"executor": "local"},
                         phases={"cell_start": end - 40.0, "cell_end": end})
    save_campaign(tmp_path / "a", [ran("unsupported", "fp32", 1000.0), ran("failed", "bf16", 2000.0)],
                  MACHINE)  # unsupported: it ended by itself, so its time counts
    save_campaign(tmp_path / "b", [ran("timeout", "fp32", 3000.0)], MACHINE)
    assert set(FAILED_RUN) == {"failed", "timeout"}
    _, _, source, _ = plan.schedule([spec], resources.single(), 1, tmp_path, MACHINE, "local")
    assert source == "cell times from 1 earlier run in 1 campaign under {} (2 that failed or " \
                     "timed out left out)".format(tmp_path)
    (tmp_path / "a" / "results").rename(tmp_path / "gone")  # nothing but a timeout: none used
    _, _, source, _ = plan.schedule([spec], resources.single(), 1, tmp_path, MACHINE, "local")
    assert source.startswith("no earlier run on a machine like this under {} (1 that failed or "
                             "timed out left out): ".format(tmp_path))


def test_the_legend_names_the_rule_of_the_cells_in_the_plan():
    # a plan of one run to a target accuracy (--max-epochs 1) said "Each is scaled by the rule:
    # fixed part + per-step part x steps x pixels ratio": a run measured in epochs is not
    from compare.scheduler import Planned
    pool = resources.single()
    tta = RunSpec("caffe2", "caffe2_torch", data="/d", target_accuracy=0.5, max_epochs=1)
    cell = RunSpec("caffe2", "caffe2_torch")

    def legend(*specs):
        items = [Planned(s, resources.Slot(), 0.0, 10.0) for s in specs]
        return plan.render(items, {s.run_id: "?" for s in specs}, pool, 1, "no earlier run",
                           "--concurrency auto").splitlines()[-1]
    steps, epochs = "per-step part x steps x pixels", "x epochs x images per epoch x pixels"
    assert epochs in legend(tta) and steps not in legend(tta)
    assert steps in legend(cell) and epochs not in legend(cell)
    assert steps in legend(tta, cell) and epochs in legend(tta, cell)


def _learnable(folder: Path, train: int, val: int) -> str:
    """A folder of `train` + `val` (empty) JPEGs in 10 classes, as `compare data make --learnable`."""
    for part, n in (("train", train), ("val", val)):
        for i in range(n):
            d = folder / part / "c{}".format(i % 10)
            d.mkdir(parents=True, exist_ok=True)
            (d / "{}.JPEG".format(i)).write_bytes(b"")
    return str(folder)


def test_a_run_to_a_target_with_none_before_takes_a_throughput_cells_seconds_per_image(tmp_path):
    # `compare run --frameworks tf --data small4 --target-accuracy 0.5 --max-epochs 1` on a
    # machine with no run to a target read `?5 s` (another framework's run, or 60 s with none)
    # though its own throughput cells measured seconds per image: it trains max_epochs x the
    # images of train/ and evaluates val/ every eval_every epochs
    spec = RunSpec("caffe2", "caffe2_torch", data=_learnable(tmp_path / "small", 480, 200),
                   target_accuracy=0.5, max_epochs=2)
    cell = RunSpec("caffe2", "caffe2_torch", image_size=112, batch_size=16, steps=10, warmup_steps=3)
    r = RunResult(cell.run_id, "ok", cell.to_dict(), spec_hash=cell.spec_hash,
                  environment={"executor": "local"},
                  phases={"cell_start": 0.0, "timed_start": 4.0, "timed_end": 10.0,
                          "cell_end": 12.0})
    # 6 s over 10 timed steps of 16 images at 112 px: 0.0375 s an image, 0.15 s at 224 px; fixed:
    # the 12 s less 2 + 10 steady steps (parts)
    each = 0.6 / 16 * 4
    expected = 12.0 - 0.6 * 12 + each * (2 * 480 + 2 * 200 * plan.EVAL_SHARE)
    assert plan.Estimates([r], "local").of(spec) == (pytest.approx(expected), "t")
    assert plan.Estimates([], "local", references=[r]).of(spec) == (pytest.approx(expected), "t")
    # not another framework's, precision's or device's seconds: a guess, said so
    for other in (dict(framework="tf", backend="tf_horovod"), dict(precision="bf16")):
        assert plan.Estimates([r], "local").of(RunSpec.from_dict(dict(spec.to_dict(), **other)))[1] \
            == "?", other
    # a run to a target of its framework's before is still what such a run goes by
    assert plan.Estimates([r, _tta_run(100.0, 50.0, data=spec.data)], "local").of(spec)[1] == "?"
    # the legend says what `t` is
    from compare.scheduler import Planned
    items = [Planned(spec, resources.Slot(), 0.0, expected)]
    text = plan.render(items, {spec.run_id: "t"}, resources.single(), 1, "", "")
    assert "t a run to a target accuracy with none of its framework's before: a throughput " \
           "cell's seconds per image" in text
    assert "t a run to a target" not in plan.render(items, {spec.run_id: "?"}, resources.single(),
                                                     1, "", "")


def test_the_readme_cpu_references_plan_a_recorded_run_to_a_target_by_seconds_per_image(tmp_path):
    # the tester's command (tests/fixtures/eta/tta/: caffe2, small4 of 480 + 200 JPEGs, one
    # epoch, 224 px) on a 2-core VM with no run to a target before: planned ?60 s, it took 465 s
    # (the VM shared with another test suite). From the shipped references of such a VM (the
    # README's job: caffe2 fp32, one worker, local, 64 px synthetic): their fixed part + seconds
    # per image x (224/64)^2 x (480 + 200 / 3)
    fixture = json.loads((Path(__file__).parent / "fixtures" / "eta" / "tta" /
                          "caffe2_cpu_small4.json").read_text())
    ran = RunResult.from_dict(fixture["result"])
    spec = RunSpec.from_dict(dict(ran.spec, data=_learnable(tmp_path / "small4", 480, 200)))
    references, _ = plan.reference_results(fixture["machine"])
    cells = [r for r in references if (r.spec["framework"], r.spec["precision"], r.spec["gpus"],
                                       r.environment["executor"]) == ("caffe2", "fp32", 1, "local")]
    assert len(cells) == 2
    expected = statistics.median(plan.parts(r)[0] + plan.parts(r)[1] / 32 * (224 / 64) ** 2 * (
        480 + 200 * plan.EVAL_SHARE) for r in cells)
    seconds, mark = plan.Estimates([], "local", references=references).of(spec)
    assert (seconds, mark) == (pytest.approx(expected), "t") and seconds == pytest.approx(123, abs=1)
    took = ran.phases["cell_end"] - ran.phases["cell_start"]
    assert took == pytest.approx(464.6, abs=0.1) and abs(seconds - took) < abs(plan.DEFAULT_S - took)


def test_a_run_to_a_target_planned_from_the_cpu_references_is_within_a_quarter_of_what_it_took(
        tmp_path):
    # the tester's command at 64 px (the references' size) on an idle 2-core VM: t15 s planned,
    # 16.4 s taken (tests/fixtures/eta/tta/caffe2_cpu_small4_64px.json); before `t`: ?60 s
    fixture = json.loads((Path(__file__).parent / "fixtures" / "eta" / "tta" /
                          "caffe2_cpu_small4_64px.json").read_text())
    ran = RunResult.from_dict(fixture["result"])
    spec = RunSpec.from_dict(dict(ran.spec, data=_learnable(tmp_path / "small4", 480, 200)))
    references, _ = plan.reference_results(fixture["machine"])
    seconds, mark = plan.Estimates([], "local", references=references).of(spec)
    took = ran.phases["cell_end"] - ran.phases["cell_start"]
    assert mark == "t" and abs(seconds - took) <= TOLERANCE * took, (seconds, took)


def test_the_plans_source_line_names_t_where_a_run_to_a_target_took_it(tmp_path):
    # with no earlier run, the header said "like cells measured on a machine of this kind (r),
    # else 60 s" where the one cell planned was marked t
    fixture = json.loads((Path(__file__).parent / "fixtures" / "eta" / "tta" /
                          "caffe2_cpu_small4_64px.json").read_text())
    ran = RunResult.from_dict(fixture["result"])
    spec = RunSpec.from_dict(dict(ran.spec, data=_learnable(tmp_path / "small4", 480, 200)))
    _, marks, source, _ = plan.schedule([spec], resources.single(), 1, tmp_path / "none",
                                        fixture["machine"], "local")
    assert marks == {spec.run_id: "t"}
    assert source.endswith(": like cells measured on a machine of this kind (r), runs to a target "
                           "from their throughput cells (t), else 60 s"), source
    throughput = RunSpec.from_dict({k: v for k, v in ran.spec.items()
                                    if k not in ("target_accuracy", "data")})
    _, _, source, _ = plan.schedule([throughput], resources.single(), 1, tmp_path / "none",
                                    fixture["machine"], "local")
    assert source.endswith("this kind (r), else 60 s"), source


def test_a_plan_of_jobs_placed_elsewhere_names_no_count_of_cores():
    # compare run --executor slurm (batch jobs, outside an allocation) printed "plan: 1 cell on
    # 0 core": the pool of jobs Slurm places lists no cores
    spec = RunSpec("caffe2", "caffe2_torch")
    from compare.scheduler import Planned
    text = plan.render([Planned(spec, resources.Slot(), 0.0, 10.0)], {spec.run_id: "?"},
                       resources.single(), 1, "no earlier run", "--concurrency auto")
    assert text.startswith("plan: 1 cell on nodes the scheduler picks, up to 1 at once"), text
