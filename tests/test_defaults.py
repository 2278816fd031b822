"""The defaults of `compare run` on fake GPU inventories (compare/defaults.py): GPU counts, the
precisions, the per-model batch and the steps, each with the sentence the report prints."""
import os
import sys

import pytest

from backends.contract import RunSpec
from compare import defaults
from tests.helpers import compare, failing_python, write_python

H200 = {"name": "NVIDIA H200", "memory_mib": 143771.0}  # nvidia-smi's memory.total
H100 = {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559.0}


def machine(n, gpu=H200):
    return {"gpus": [dict(gpu, index=i) for i in range(n)], "cpu_count": 16}


@pytest.mark.parametrize("n,counts", [(1, [1]), (2, [1, 2]), (3, [1, 2, 3]), (4, [1, 2, 4]),
                                      (7, [1, 2, 4]), (8, [1, 2, 4, 8]), (16, [1, 2, 4, 8])])
def test_gpu_counts_are_the_seed_ladder_that_reaches_furthest(n, counts):
    got, why = defaults.gpu_counts(machine(n), "cuda")
    assert got == counts
    assert why.startswith("every GPU count the seeds report up to the {} GPU".format(n))


def test_three_gpus_take_the_r740_ladder_and_eight_the_a6000_one():
    assert defaults.gpu_counts(machine(3), "cuda")[1].endswith("(seed 001 (Dell R740, 3x V100))")
    assert defaults.gpu_counts(machine(8), "cuda")[1].endswith(
        "(seed 000 (tf_cnn_benchmarks, RTX A6000))")


def test_a_cpu_keeps_the_readme_study():
    cpu = {"gpus": [], "cpu_count": 2}
    assert defaults.gpu_counts(cpu, "cpu")[0] == [1]
    assert defaults.precisions("cpu")[0] == ["fp32"]
    assert defaults.batch("resnet50", cpu, "cpu") == (32, "the README's CPU study")
    assert defaults.steps([32], "cpu", 5)[:2] == (50, 10)
    # --device cpu on a machine with GPUs is a CPU study too
    assert defaults.gpu_counts(machine(8), "cpu")[0] == [1]
    assert defaults.batch("resnet50", machine(8), "cpu")[0] == 32


def test_gpus_run_fp32_and_fp16():
    assert defaults.precisions("cuda")[0] == ["fp32", "fp16"]


def test_the_seed_batches_are_the_largest_the_a6000_ran_at_both_precisions():
    seed = defaults.seed_batches()
    assert (seed["resnet50"], seed["resnet152"], seed["inception3"], seed["vgg16"]) == \
        (512, 256, 256, 512)


def test_resnet50_on_an_h200_is_the_measured_entry_and_says_what_it_does_not_cover():
    value, why = defaults.batch("resnet50", machine(1), "cuda")
    assert value == 256  # fp32 at 1024 spent minutes autotuning: one batch serves both precisions
    assert why.startswith("resnet50 on 140 GiB: measured, one H200, 2026-12-02 (BENCHMARKS.md)")
    assert "not yet: fp16 fills more at 1024" in why
    assert defaults.batch_rule("resnet50", 140.4) == 1024  # the rule alone would say 1024


def test_an_entry_not_measured_falls_back_to_the_stated_rule():
    value, why = defaults.batch("resnet50", machine(8, H100), "cuda")
    assert value == 512  # 512 x 79.6 / 48 = 849 -> 512
    assert why == ("resnet50 on 80 GiB: not measured; the rule (seed 000's largest batch on 48 GB, "
                   "512, × 80/48, a power of two)")
    assert defaults.batch("resnet152", machine(1), "cuda")[0] == 512  # 256 x 140 / 48 -> 512
    assert defaults.batch("vgg16", machine(1), "cuda")[0] == 1024


def test_unknown_memory_and_larger_images():
    assert defaults.batch("resnet50", {"gpus": [{}] * 8}, "cuda") == (
        256, "resnet50: the GPUs' memory is not known")
    value, why = defaults.batch("resnet50", machine(1), "cuda", image_size=448, native=224)
    assert value == 64 and why.endswith("; at 448 px instead of 224: 64")
    assert defaults.batch("resnet50", machine(1), "cuda", image_size=64, native=224)[0] == 256


def test_steps_at_a_large_batch_time_as_many_images_as_fifty_of_256():
    assert defaults.steps([1024], "cuda", 5) == (
        15, 5, "15 timed steps after 5 warm-up: at batch 1024 they time at least 12,800 images, "
        "as 50 steps of 256 did")
    assert defaults.steps([512, 1024], "cuda", 5)[:2] == (25, 5)
    assert defaults.steps([256], "cuda", 5)[:2] == (50, 10)
    assert defaults.steps([2048], "cuda", 4)[:2] == (12, 5)  # 10 at least, rounded to the windows


def _study(**given):
    from types import SimpleNamespace
    settings = dict(gpus=None, precision=None, steps=None, warmup=None, model=("resnet50",),
                    image_size=None, batch_size=None, quick=False, windows=5, batch_search=None,
                    mode=("default", "tuned"))
    return SimpleNamespace(**dict(settings, **given))


def test_a_tuned_search_on_an_h200_starts_at_the_measured_batch_at_fp16_and_bf16_only():
    starts, why = defaults.search_starts(["resnet50"], machine(1), "cuda", ["fp32", "fp16", "bf16"])
    assert starts == {("resnet50", "fp16"): 1024, ("resnet50", "bf16"): 1024}  # fp32: at 256
    assert why.startswith("resnet50 at fp16/bf16 starts at 1024 on 140 GiB: measured, one H200")
    assert defaults.search_starts(["resnet50"], machine(8, H100), "cuda", ["fp16"]) == ({}, "")
    assert defaults.search_starts(["vgg16"], machine(1), "cuda", ["fp16"]) == ({}, "")
    assert defaults.search_starts(["resnet50"], machine(1), "cpu", ["fp16"]) == ({}, "")


def test_the_tuned_cells_take_the_start_and_a_search_asked_for_starts_at_the_default():
    from compare import frameworks
    from compare.matrix import Matrix
    given, batches, said = defaults.fill(machine(1), "cuda", _study())
    assert said["batch_search"].startswith("resnet50 at fp16 starts at 1024")
    m = Matrix([frameworks.get("jax")], [1], given["precision"], [], device="cuda",
               modes=["default", "tuned"], search=(64, 1024), model_batches=batches,
               search_starts=given["search_starts"])
    assert [(s.run_id, s.batch_size) for s in m.specs()] == [
        ("jax-fp32-g1-b256-s224-r0", 256), ("jax-fp16-g1-b256-s224-r0", 256),
        ("jax-fp32-g1-bauto-s224-tuned-r0", 256), ("jax-fp16-g1-bauto-s224-tuned-r0", 1024)]
    given, _, said = defaults.fill(machine(1), "cuda", _study(batch_search=(64, 1024)))
    assert given["search_starts"] == {} and "batch_search" not in said  # the user's search
    given, _, said = defaults.fill(machine(1), "cuda", _study(mode=("default",)))
    assert given["search_starts"] == {} and "batch_search" not in said  # no tuned cell


def test_a_tuned_cell_starting_at_1024_times_12800_images_not_four_times_as_many():
    from compare import frameworks
    from compare.matrix import Matrix
    given, batches, said = defaults.fill(machine(1), "cuda", _study())
    assert said["steps"] == (
        "50 timed steps after 10 warm-up; tuned cells from their search's start: 15 timed steps "
        "after 5 warm-up: at batch 1024 they time at least 12,800 images, as 50 steps of 256 did")
    m = Matrix([frameworks.get("caffe2")], [1], given["precision"], [], device="cuda",
               common={"steps": 50, "warmup_steps": 10}, modes=["default", "tuned"],
               search=(64, 1024), model_batches=batches, search_starts=given["search_starts"],
               search_steps=given["search_steps"])
    assert [(s.run_id, s.steps, s.warmup_steps) for s in m.specs()] == [
        ("caffe2-fp32-g1-b256-s224-r0", 50, 10), ("caffe2-fp16-g1-b256-s224-r0", 50, 10),
        ("caffe2-fp32-g1-bauto-s224-tuned-r0", 50, 10),  # fp32 starts at 256
        ("caffe2-fp16-g1-bauto-s224-tuned-r0", 15, 5)]
    for asked in ({"steps": 30}, {"warmup": 3}, {"quick": True}):  # the user's steps win
        given, _, said = defaults.fill(machine(1), "cuda", _study(**asked))
        assert given["search_steps"] == {} and "tuned cells" not in said.get("steps", "")


def test_an_auto_cell_of_the_default_mode_starts_where_it_would_without_tuned_cells_beside_it():
    # --batch-size 256,auto: the default mode's auto cell searches from the default batch at the
    # default steps whether or not --mode also lists tuned (else adding tuned on --resume made it
    # another cell: 'planned with other settings'); the tuned cell starts at the measured 1024
    from compare import frameworks
    from compare.matrix import Matrix
    def cells(modes):
        given, batches, _ = defaults.fill(machine(1), "cuda", _study(batch_size=(256, "auto"),
                                                                     mode=tuple(modes)))
        m = Matrix([frameworks.get("caffe2")], [1], ["fp16"], [256, "auto"], device="cuda",
                   common={"steps": 50, "warmup_steps": 10}, modes=modes, search=(64, 1024),
                   model_batches=batches, search_starts=given["search_starts"],
                   search_steps=given["search_steps"])
        return {s.run_id: (s.batch_size, s.steps, s.warmup_steps, s.spec_hash) for s in m.specs()}
    both, alone = cells(["default", "tuned"]), cells(["default"])
    assert both["caffe2-fp16-g1-bauto-s224-r0"] == alone["caffe2-fp16-g1-bauto-s224-r0"]
    assert both["caffe2-fp16-g1-bauto-s224-r0"][:3] == (256, 50, 10)
    assert both["caffe2-fp16-g1-bauto-s224-tuned-r0"][:3] == (1024, 15, 5)


def test_a_search_ending_below_its_start_times_the_images_planned_for_the_start():
    from backends import batchprobe
    cell = RunSpec(framework="jax", backend="jax", batch_size=1024, steps=15, windows=5)
    assert batchprobe.steps_covering(cell, 512, 15 * 1024) == 30
    assert batchprobe.steps_covering(cell, 768, 15 * 1024) == 20  # 20 = ceil(15360/768)
    assert batchprobe.steps_covering(cell, 1000, 15 * 1024) == 20  # 16, up to the windows
    assert batchprobe.steps_covering(cell, 1024, 15 * 1024) == 15
    assert batchprobe.steps_covering(cell, 512, None) == 15  # steps the plan did not set


# --- compare run with no flag: the plan of the study it would run ------------------------------

def _gpus(tmp_path, n, memory_mib=143771):
    rows = "".join("{0}, NVIDIA H200, {1}, 580.1\\n".format(i, memory_mib) for i in range(n))
    ids = "".join("{0}, 00000000:{0:02d}:00.0, GPU-{0}\\n".format(i) for i in range(n))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(
        '#!/bin/sh\ncase "$*" in\n  *index,name,memory.total,driver_version*) printf \'{}\' ;;\n'
        '  *index,pci.bus_id,uuid*) printf \'{}\' ;;\n  *query-compute-apps*) ;;\n'
        '  *) echo "| NVIDIA-SMI 580.1   Driver Version: 580.1   CUDA Version: 13.0 |" ;;\n'
        'esac\n'.format(rows, ids))
    (bin_dir / "nvidia-smi").chmod(0o755)
    return {"PATH": "{}:{}".format(bin_dir, os.environ["PATH"])}


def _planned(folder, args, env=None):
    out = compare(["run", "--frameworks", "caffe2", "--python", "caffe2={}".format(failing_python(folder)),
                   "--plan"] + args, env=env)
    assert out.returncode == 0, out.stderr
    return sorted(line.split()[-1] for line in out.stdout.splitlines() if "-r0" in line)


def test_no_flag_on_three_h200s_plans_the_seeds_study_at_a_filling_batch(tmp_path):
    cells = _planned(tmp_path, ["--plan-from", tmp_path], env=_gpus(tmp_path, 3))
    assert cells == ["caffe2-{}-g{}-b256-s224-r0".format(p, g) for p in ("fp16", "fp32")
                     for g in (1, 2, 3)]


def test_explicit_flags_win_and_a_cpu_plans_the_readme_study(tmp_path):
    env = _gpus(tmp_path, 8)
    assert _planned(tmp_path, ["--plan-from", tmp_path, "--gpus", "2", "--precision", "bf16",
                     "--batch-size", "256"], env=env) == ["caffe2-bf16-g2-b256-s224-r0"]
    assert _planned(tmp_path, ["--plan-from", tmp_path, "--device", "cpu"], env=env) == \
        ["caffe2-fp32-w1-b32-s224-r0"]


def test_a_campaign_at_its_defaults_says_so_in_its_report(tmp_path):
    from tests.test_modes import FAKE
    python = tmp_path / "fake-python"
    write_python(python, FAKE.format(python=sys.executable, fits=50, pids=str(tmp_path / "pids")))
    out = compare(["run", "--frameworks", "caffe2", "--python", "caffe2={}".format(python),
                   "--device", "cpu", "--executor", "local", "--image-size", "32", "--steps", "2",
                   "--warmup", "1", "--results", tmp_path / "c"])
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "c" / "results" / "caffe2-fp32-w1-b32-s32-r0.json").exists()
    text = (tmp_path / "c" / "report" / "report.md").read_text()
    assert "## Defaults (flags not given: the seeds' study sized to this machine" in text
    assert "- GPU counts: 1 (on a CPU, N is worker processes sharing the cores)" in text
    assert "- precisions: fp32 (a CPU has no fp16 hardware)" in text  # each value named once
    assert "- batch: 32 per worker (the README's CPU study)" in text
    assert "plan: 1 cell on " in out.stderr  # the plan before the first cell


def test_the_plan_on_a_fresh_h200_takes_its_cells_from_the_h200_references(tmp_path):
    out = compare(["run", "--frameworks", "caffe2", "--python", "caffe2={}".format(failing_python(tmp_path)),
                   "--executor", "local", "--plan", "--plan-from", tmp_path], env=_gpus(tmp_path, 1))
    assert out.returncode == 0, out.stderr
    times = {line.split()[-1]: line.split()[-3] for line in out.stdout.splitlines() if "-r0" in line}
    # measured cold on an H200 on 2026-12-04: fp32 80.6 s; fp16 26.5 and 28.2 s (two studies)
    assert times == {"caffe2-fp32-g1-b256-s224-r0": "r81", "caffe2-fp16-g1-b256-s224-r0": "r27"}
    assert "like cells measured on a machine of this kind (r), else 60 s" in out.stdout
    assert "cells marked r: like cells measured cold, on a fresh machine of this kind: one NVIDIA " \
        "H200 of 141 GiB" in out.stdout


@pytest.mark.parametrize("added", [{"model": "vgg16,resnet50"}, {"batch_size": "1024,256"}],
                         ids=["a-network", "a-batch"])
def test_a_resume_adding_a_network_or_a_batch_keeps_the_steps_the_campaign_resolved(
        added, tmp_path, monkeypatch):
    # vgg16 fills an H200 at 1024: its campaign times 15 steps after 5; adding resnet50 (256) or
    # --batch-size 1024,256 (both FREE) on --resume re-sized them to 50 and 10 and was refused as a
    # change of held settings: the campaign's steps are kept, for every cell
    from compare import study
    from compare.stages import plan as planning
    from compare.stages import prepare
    from compare.store import Campaign
    monkeypatch.setenv("PATH", _gpus(tmp_path, 1)["PATH"])
    root = tmp_path / "c"
    flags = dict(frameworks="caffe2", python=["caffe2={}".format(failing_python(tmp_path))], executor="local",
                 model="vgg16", precision="fp16", gpus="1", results=str(root))
    first = planning.make(study.build(flags))
    assert [(s.run_id, s.steps, s.warmup_steps) for s in first.cells] == [
        ("caffe2-vgg16-fp16-g1-b1024-s224-r0", 15, 5)]
    prepare._campaign(first).unlock()
    again = planning.make(study.build(dict(flags, resume=True, **added)))
    prepare.check_resume(again, Campaign.open(root), write=False)  # refused nothing
    assert {(s.steps, s.warmup_steps) for s in again.cells} == {(15, 5)} and len(again.cells) == 2
    assert again.defaults["steps"] == ("15 timed steps after 5 warm-up: the campaign's, as they "
                                       "resolved when it began (--resume holds them)")


def test_fewer_timed_steps_than_the_default_windows_record_the_windows_timed(tmp_path, capsys):
    # --steps 4 (windows left at 5): the harness times 4 windows of one step, and the spec and
    # the result said windows 5
    import json

    from tests.helpers import fake_python, main_exit
    argv = ["run", "--device", "cpu", "--executor", "local", "--frameworks", "caffe2", "--python",
            "caffe2={}".format(fake_python(tmp_path)), "--batch-size", "4", "--image-size", "32",
            "--steps", "4", "--warmup", "1", "--results", str(tmp_path / "c")]
    code, _, err = main_exit(argv, capsys)
    assert code == 0, err
    (spec,) = [json.loads(p.read_text()) for p in (tmp_path / "c" / "specs").glob("*.json")]
    (result,) = [json.loads(p.read_text()) for p in (tmp_path / "c" / "results").glob("*.json")]
    assert (spec["windows"], result["spec"]["windows"], len(result["window_images_per_sec"])) == (
        4, 4, 4)
    settings = json.loads((tmp_path / "c" / "campaign.json").read_text())["settings"]
    assert settings["windows"] == 4
    code, out, err = main_exit(["run", "--results", str(tmp_path / "c"), "--resume", "--plan"],
                               capsys)  # its cells, as they were made
    assert code == 0, err
