"""Bounds and user mistakes that used to end as an internal error (exit 1) or ran anyway: each
is one line on stderr and exit code 2, before anything runs."""
import os

import pytest

from compare import study
from compare.errors import UserError
from compare.stages import plan as planning
from tests.helpers import failing_python, main_exit


def _cpu(tmp_path):
    """`compare run` on the CPU that trains nothing should a check be missing (each cell fails
    at once: helpers.failing_python), in a folder of the test."""
    return ["run", "--device", "cpu", "--executor", "local", "--frameworks", "caffe2", "--python",
            "caffe2={}".format(failing_python(tmp_path)), "--results", str(tmp_path / "c")]


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0"])
def test_a_timeout_must_be_finite_and_positive(value, capsys, tmp_path):
    code, _, err = main_exit(_cpu(tmp_path) + ["--timeout", value], capsys)
    assert (code, err) == (2, "compare: error: --timeout {}: must be a finite number of seconds "
                              "> 0\n".format(value))  # as typed: -1, not -1.0


def test_more_cpu_workers_than_cores_needs_saying_so(capsys, monkeypatch, tmp_path):
    cores = os.cpu_count()
    code, _, err = main_exit(_cpu(tmp_path) + ["--gpus", "1,{}".format(cores + 1)], capsys)
    assert (code, err) == (2, "compare: error: --gpus {0}: on CPU each worker is a process and this "
                              "machine has {1} core{2}; give counts from 1 to {1} (or set "
                              "COMPARE_OVERSUBSCRIBE=1 to run more workers than cores)\n".format(
                                  cores + 1, cores, "s" if cores > 1 else ""))
    monkeypatch.setenv("COMPARE_OVERSUBSCRIBE", "1")
    assert planning.make(_study(gpus="1,{}".format(cores + 1))).matrix.gpus == (1, cores + 1)


def test_an_over_long_results_name_is_one_line(tmp_path, capsys):
    long = tmp_path / ("x" * 300)
    code, _, err = main_exit(_cpu(tmp_path)[:-2] + ["--results", str(long)], capsys)
    assert code == 2
    assert err.startswith("compare: error: --results ") and err.endswith(
        ": File name too long; give another folder\n") and err.count("\n") == 1


def test_a_reference_with_a_gpu_count_that_is_no_number(tmp_path, capsys):
    from compare.store import Campaign
    from tests.helpers import MACHINE, result
    c = Campaign.create(tmp_path / "c", {"test": True}, MACHINE)
    c.save_result(result("caffe2", "fp32", 1, 100.0))
    ref = tmp_path / "mine.csv"
    ref.write_text("precision,gpus,images_per_sec\nfp32,1,90\nfp32,abc,180\n")
    code, _, err = main_exit(["report", str(c.root), "--reference", str(ref)], capsys)
    assert (code, err) == (2, "compare: error: reference {}: gpus 'abc' on line 3 is not a GPU count; "
                              "give whole numbers >= 1\n".format(ref))


def test_a_reference_named_twice_is_shown_once_with_a_warning(tmp_path, capsys, monkeypatch):
    from compare.store import Campaign
    from tests.helpers import MACHINE, result
    c = Campaign.create(tmp_path / "c", {"test": True}, MACHINE)
    c.save_result(result("caffe2", "fp32", 1, 100.0))
    ref = tmp_path / "mine.csv"
    ref.write_text("precision,gpus,images_per_sec\nfp32,1,90\n")
    monkeypatch.chdir(tmp_path)
    code, out, err = main_exit(["report", str(c.root), "--reference", str(ref), "--reference",
                                "mine.csv"], capsys)  # the same file by two paths
    assert code == 0 and err.splitlines()[0] == (
        "compare: warning: --reference mine.csv: named twice; shown once")
    assert out.count("mine") == 1, out  # one section of it


def _study(**flags):
    """The Study of `compare run` with these flags (by setting name, as typed)."""
    return study.build(dict(dict(frameworks="caffe2", gpus="1", precision="fp32", batch_size="4",
                                 device="cpu", windows="1", timeout="60", executor="local"), **flags))


def test_relative_paths_are_resolved_where_they_were_typed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").write_text("")
    (tmp_path / "bin" / "python").chmod(0o755)
    s = _study(results="campaign", python=["caffe2=bin/python"])
    assert s.results == str(tmp_path / "campaign")
    assert s.overrides == {"caffe2": str(tmp_path / "bin" / "python")}


@pytest.mark.parametrize("args,message", [
    (["--option", "caffe2.fail_at=start", "--repeats", "1000000000"],
     "--repeats 1000000000: must be <= 100 (runs per cell)"),
    (["--batch-size", "100000000"], "--batch-size 100000000: must be <= 16384 (images per worker and step)"),
    (["--batch-size", "32,100000000"], "--batch-size 100000000: must be <= 16384 (images per worker and step)"),
    (["--image-size", "99999"], "--image-size 99999: must be <= 2048 (pixels per side; one 2048 px image "
                                "is 48 MiB as float32)"),
    (["--steps", "1000000000"], "--steps 1000000000: must be <= 1000000 (timed steps)"),
    (["--warmup", "1000000000"], "--warmup 1000000000: must be <= 100000 (warm-up steps)"),
    (["--windows", "100000"], "--windows 100000: must be <= 1000 (timed windows)"),
    (["--timeout", "1e12"], "--timeout 1000000000000: must be <= 604800 (seconds, one week)"),
    (["--nodes", "100000"], "--nodes 100000: must be <= 1024 (machines per job)"),
    (["--batch-size", ",".join(str(b) for b in range(1, 201)), "--repeats", "100"],
     "the matrix has 20000 cells (1 framework × 1 precision × 200 batch sizes × 1 node count × 1 GPU "
     "count × 1 data × 100 repeats); at most 10000 per campaign: give fewer values or split the study "
     "into campaigns"),
], ids=["repeats-1e9", "batch-1e8", "batch-list", "image-99999", "steps", "warmup", "windows",
        "timeout", "nodes", "cells"])
def test_what_sizes_memory_or_time_is_bounded_before_anything_runs(args, message, tmp_path, capsys):
    code, _, err = main_exit(_cpu(tmp_path) + args, capsys)
    assert (code, err) == (2, "compare: error: {}\n".format(message))
    assert not (tmp_path / "c").exists()  # no campaign: nothing ran, nothing was planned


def test_the_cell_count_takes_one_searched_batch_per_tuned_cell(tmp_path, capsys):
    # tuned runs at one searched batch, whatever --batch-size lists: 60 batches in default and
    # tuned make 61 cells per repeat, not 120 (6,100 cells: within the bound)
    from compare.stages import plan as planning
    batches = ",".join(str(b) for b in range(1, 61))
    s = _study(batch_size=batches, mode="default,tuned", repeats="100")
    given = {"precision": ("fp32",), "gpus": (1,)}
    planning._check_size(s, given, s.framework_list())  # within the bound: no error
    # (a study of tuned alone refuses a batch list: test_a_batch_size_no_cell_runs_at_is_one_line)
    for modes, cells in ((s.mode, 6100), (("tuned",), 100)):
        assert len(planning.Matrix(s.framework_list(), [1], ["fp32"], list(s.batch_size),
                                   repeats=s.repeats, modes=modes).specs()) == cells
    code, _, err = main_exit(_cpu(tmp_path) + ["--batch-size", ",".join(str(b) for b in range(1, 101)),
                                               "--mode", "default,tuned", "--repeats", "100"], capsys)
    assert (code, err) == (2, "compare: error: the matrix has 10100 cells (1 framework × 1 precision "
                              "× 1 node count × 1 GPU count × 1 data × 100 repeats × 101 (mode, batch) "
                              "pairs); at most 10000 per campaign: give fewer values or split the "
                              "study into campaigns\n")


def test_python_must_name_an_interpreter_not_a_folder(tmp_path, capsys):
    text = tmp_path / "python.txt"
    text.write_text("")
    for path, what in (("/tmp", "a folder"), (str(text), "not an executable file")):
        code, _, err = main_exit(_cpu(tmp_path)[:-4] + ["--python", "caffe2=" + path, "--results",
                                                        str(tmp_path / "c")], capsys)
        assert (code, err) == (2, "compare: error: --python 'caffe2={0}': {0} is {1}, not an interpreter; "
                                  "give the path of a python executable\n".format(path, what))
    assert not (tmp_path / "c").exists()


def test_a_wheelhouse_that_is_a_file_or_a_ca_bundle_that_is_a_folder_is_one_line(tmp_path, capsys):
    # they passed the "exists" check and failed later inside a build (pip served a file, a copy
    # of a folder), or, as here without an engine, were not named at all
    (tmp_path / "wheels.txt").write_text("x")
    code, _, err = main_exit(["images", "build", "--wheelhouse", str(tmp_path / "wheels.txt")], capsys)
    assert (code, err) == (2, "compare: error: --wheelhouse {}: is a file; give a folder of wheels "
                              "(containers/wheelhouse.sh fills one)\n".format(tmp_path / "wheels.txt"))
    code, _, err = main_exit(["images", "build", "--ca-bundle", str(tmp_path)], capsys)
    assert (code, err) == (2, "compare: error: --ca-bundle {}: is a folder; give a CA certificate "
                              "file (PEM)\n".format(tmp_path))


@pytest.mark.parametrize("option", ["decode=hw", "caffe2.loader_workers=2", "pipeline=dali"])
def test_an_input_pipeline_option_without_a_data_folder_is_refused(option, capsys, tmp_path):
    # it was accepted and did nothing: synthetic data has no input pipeline (as --data-only
    # without --data is refused)
    code, _, err = main_exit(_cpu(tmp_path) + ["--option", option], capsys)
    assert (code, err) == (2, "compare: error: --option {}: belongs to --data (the input pipeline "
                              "of a JPEG folder), and this study's data is synthetic only; add "
                              "--data DIR (synthetic,DIR for both), or leave it out\n".format(option))
    assert not (tmp_path / "c").exists()
    # with a folder beside synthetic it is the folder's cells' (a synthetic cell ignores it)
    folder = tmp_path / "d" / "train" / "n0"
    folder.mkdir(parents=True)
    (folder / "a.JPEG").write_bytes(b"\xff\xd8\xff")  # a JPEG's first bytes: all the plan reads
    code, out, err = main_exit(_cpu(tmp_path) + ["--option", option, "--data", "synthetic,{}".format(
        tmp_path / "d"), "--plan"], capsys)
    assert code == 0, err


@pytest.mark.parametrize("args,message", [
    (["--frameworks", "caffe2,torch"], "--frameworks caffe2,torch: caffe2 is given twice (as caffe2 "
                                       "and torch); give each value once"),
    (["--data", "d,./d"], "--data d,./d: {d} is given twice (as d and ./d); give each value once"),
], ids=["framework-alias", "data-folder"])
def test_a_comma_list_that_names_one_value_twice_is_refused(args, message, tmp_path, capsys, monkeypatch):
    # caffe2,caffe2 was refused, caffe2,torch (its alias) taken as caffe2 alone: one rule for both
    (tmp_path / "d" / "train" / "n0").mkdir(parents=True)
    (tmp_path / "d" / "train" / "n0" / "a.JPEG").write_bytes(b"\xff\xd8\xff")  # as a JPEG starts
    monkeypatch.chdir(tmp_path)
    base = _cpu(tmp_path)
    if args[0] in base:  # the list's flag once (given twice, a warning would come first)
        at = base.index(args[0])
        del base[at:at + 2]
    code, _, err = main_exit(base + args, capsys)
    assert (code, err) == (2, "compare: error: {}\n".format(message.format(d=tmp_path / "d")))
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("argv,message", [
    (["images", "build", "--frameworks", "caffe2,caffe2"],
     "--frameworks caffe2,caffe2: caffe2 is given twice; give each value once"),
    (["images", "build", "--frameworks", "tf,tensorflow"],
     "--frameworks tf,tensorflow: tf is given twice (as tf and tensorflow); give each value once"),
    (["data", "prepare", "nowhere", "--frameworks", "jax,flax"],
     "--frameworks jax,flax: jax is given twice (as jax and flax); give each value once"),
], ids=["images-twice", "images-alias", "data-prepare-alias"])
def test_other_commands_refuse_a_framework_given_twice_as_run_does(argv, message, capsys):
    # they took caffe2,caffe2 as caffe2 without a word, where `compare run` refuses it
    code, _, err = main_exit(argv, capsys)
    assert (code, err) == (2, "compare: error: {}\n".format(message))


def test_a_report_format_given_twice_is_refused_as_a_run_list_is(tmp_path, capsys):
    # md,md wrote report.md twice and said "wrote" twice
    from compare.store import Campaign
    from tests.helpers import MACHINE, result
    c = Campaign.create(tmp_path / "c", {"test": True}, MACHINE)
    c.save_result(result("caffe2", "fp32", 1, 100.0))
    code, out, err = main_exit(["report", str(c.root), "--format", "md,csv,MD"], capsys)
    assert (code, out, err) == (2, "", "compare: error: --format md,csv,MD: MD is given twice; give "
                                       "each value once\n")
    assert not (c.root / "report").exists()


def test_a_results_folder_that_cannot_be_made_is_refused_by_the_plan_as_by_the_run(tmp_path, capsys):
    # /proc/x passed every check of --plan (as root /proc is "writable"), then the run refused it
    argv = ["run", "--device", "cpu", "--executor", "local", "--frameworks", "caffe2", "--quick",
            "--results", "/proc/x"]
    plan = main_exit(argv + ["--plan"], capsys)
    assert plan == (2, "", main_exit(argv, capsys)[2])
    assert plan[2].startswith("compare: error: --results /proc/x: ") and plan[2].endswith(
        "; give a folder you can write\n") and plan[2].count("\n") == 1
    if os.geteuid() == 0:  # os.access lets root through: only making it tells
        assert plan[2] == ("compare: error: --results /proc/x: cannot create the folder (No such file "
                           "or directory); give a folder you can write\n")


@pytest.mark.parametrize("out", ["/proc/x", "/proc"])
def test_a_report_folder_that_cannot_be_written_names_out(out, tmp_path, capsys):
    # said "cannot write /proc/x (...)" without the flag that named it
    from compare.store import Campaign
    from tests.helpers import MACHINE, result
    c = Campaign.create(tmp_path / "c", {"test": True}, MACHINE)
    c.save_result(result("caffe2", "fp32", 1, 100.0))
    code, out_text, err = main_exit(["report", str(c.root), "--out", out, "--format", "csv"], capsys)
    assert code == 2 and err.startswith("compare: error: --out {}: ".format(out)) and \
        err.count("\n") == 1, err


@pytest.mark.parametrize("inside", ["results/new", "logs"])
def test_a_campaign_is_not_made_inside_another_campaigns_own_folders(inside, tmp_path, capsys):
    # --results C/results/new was planned and run: the outer campaign then found a folder among
    # its results; refused as report --out there is, by the plan as by the run
    from compare.store import Campaign
    from tests.helpers import MACHINE
    outer = Campaign.create(tmp_path / "c", {"test": True}, MACHINE)
    outer.unlock()
    before = sorted(str(p) for p in outer.root.rglob("*"))
    argv = ["run", "--device", "cpu", "--executor", "local", "--frameworks", "caffe2", "--python",
            "caffe2={}".format(failing_python(tmp_path)), "--quick", "--results", str(outer.root / inside)]
    line = ("compare: error: --results {}: inside the {} folder of campaign {}, which `compare run` "
            "writes; give a folder outside it\n".format(outer.root / inside, inside.split("/")[0], outer.root))
    assert main_exit(argv + ["--plan"], capsys) == (2, "", line)
    assert main_exit(argv, capsys)[::2] == (2, line)
    assert sorted(str(p) for p in outer.root.rglob("*")) == before


@pytest.mark.parametrize("argv", [["report", "{f}"], ["diff", "{f}", "{f}"], ["check", "{f}", "--reference",
                                                                               "a6000_tf_cnn_benchmarks"],
                                  ["run", "--results", "{f}", "--resume", "--plan"]],
                         ids=["report", "diff", "check", "resume"])
def test_a_campaign_given_as_a_file_says_it_is_a_file(argv, tmp_path, capsys):
    # it said "not a campaign folder (no campaign.json)", as of a folder without one
    f = tmp_path / "campaign.json"
    f.write_text("{}")
    code, out, err = main_exit([a.format(f=f) for a in argv], capsys)
    said = "--resume {}".format(f) if "--resume" in argv else str(f)
    assert (code, out, err) == (2, "", "compare: error: {}: is a file, not a campaign folder; give a "
                                       "folder made by `compare run`\n".format(said))


@pytest.mark.parametrize("argv", [["report", "{f}"], ["diff", "{f}", "{f}"], ["check", "{f}", "--reference",
                                                                               "a6000_tf_cnn_benchmarks"],
                                  ["history", "{f}"]], ids=["report", "diff", "check", "history"])
def test_a_campaign_that_is_not_there_says_so(argv, tmp_path, capsys):
    # it said "not a campaign folder (no campaign.json)", as of a folder that is there without one
    f = tmp_path / "gone"
    code, out, err = main_exit([a.format(f=f) for a in argv], capsys)
    assert (code, out, err) == (2, "", "compare: error: {}: no such folder; give a folder made by "
                                       "`compare run`\n".format(f))


def test_a_results_link_to_nothing_is_refused_by_the_plan_as_by_the_run(tmp_path, capsys):
    # --plan passed it (the link "does not exist"), then the run said "cannot create the folder
    # (File exists)"
    link = tmp_path / "c"
    link.symlink_to(tmp_path / "gone")
    argv = ["run", "--device", "cpu", "--executor", "local", "--frameworks", "caffe2", "--python",
            "caffe2={}".format(failing_python(tmp_path)), "--quick", "--results", str(link)]
    line = ("compare: error: --results {}: a symbolic link to {}, which is not there; give a folder, or "
            "make the one it names\n".format(link, tmp_path / "gone"))
    assert main_exit(argv + ["--plan"], capsys) == (2, "", line)
    assert main_exit(argv, capsys)[::2] == (2, line)


@pytest.mark.parametrize("flag,message", [
    ("--wheelhouse", "--wheelhouse is empty; give a folder of wheels (containers/wheelhouse.sh fills one)"),
    ("--ca-bundle", "--ca-bundle is empty; give a CA certificate file (PEM)"),
    ("--base-image", "--base-image is empty; give an image to build on, or leave it out (the NGC image)"),
])
def test_an_empty_build_input_is_refused(flag, message, capsys):
    # '' was the current folder (a wheelhouse of whatever it holds; '--ca-bundle .: is a folder'),
    # or an empty BASE_IMAGE build arg
    code, out, err = main_exit(["images", "build", flag, ""], capsys)
    assert (code, out, err) == (2, "", "compare: error: {}\n".format(message))


@pytest.mark.parametrize("image", ["a b", "Debian:bookworm", "debian:", "debian:bookworm slim", "-x"])
def test_a_base_image_that_is_no_image_reference_is_refused_before_the_engine_is_asked(image, capsys):
    # it went to the build (or, with no engine, said "no Docker engine answers"): docker's own
    # "invalid reference format" came back per framework, after the wait
    code, out, err = main_exit(["images", "build", "--base-image", image], capsys)
    assert (code, out, err) == (2, "", "compare: error: --base-image {!r}: not an image reference; give "
                                       "[REGISTRY/]NAME[:TAG] in lower case (e.g. debian:bookworm-slim, "
                                       "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04), or leave it out (the "
                                       "NGC image)\n".format(image))


def test_a_good_base_image_passes_the_check():
    from compare.commands.images import IMAGE_REFERENCE
    for image in ("debian:bookworm-slim", "nvcr.io/nvidia/pytorch:24.01-py3", "compare/base:bookworm",
                  "localhost:5000/my_img__x/y-z:v1.2", "debian@sha256:" + "a" * 64):
        assert IMAGE_REFERENCE.match(image), image


def test_a_wheelhouse_that_is_not_there_says_what_to_give(tmp_path, capsys):
    code, _, err = main_exit(["images", "build", "--wheelhouse", str(tmp_path / "w")], capsys)
    assert (code, err) == (2, "compare: error: --wheelhouse {}: no such folder; give a folder of wheels "
                              "(containers/wheelhouse.sh fills one)\n".format(tmp_path / "w"))


def test_a_gpu_hour_price_without_a_target_accuracy_is_refused(capsys, tmp_path):
    # it was accepted and priced nothing: the price is the cost to train of time-to-accuracy runs
    # (compare report --gpu-hour-price of a throughput campaign says so too, as a warning)
    for extra in (["--plan"], []):
        code, _, err = main_exit(_cpu(tmp_path) + ["--gpu-hour-price", "2.5"] + extra, capsys)
        assert (code, err) == (2, "compare: error: --gpu-hour-price 2.5: prices time-to-accuracy "
                                  "runs (their cost to train), and this study has none; add "
                                  "--target-accuracy 0.759, or leave the price out\n")
        assert not (tmp_path / "c").exists()


def _bare_python(folder, site=None):
    """A python 3 that finds no installed package (-S: no site-packages), or only `site`'s."""
    import sys
    path = folder / "bare-python"
    path.write_text('#!/bin/sh\n{}exec {} -S "$@"\n'.format(
        "PYTHONPATH={} ".format(site) if site else "", sys.executable))
    path.chmod(0o755)
    return path


LEAVE = "or leave jax out of {} (compare then runs jax in its managed environment)"


def test_a_python_without_its_frameworks_modules_is_refused_by_the_plan_as_by_the_run(tmp_path, capsys):
    # --plan printed a schedule and exit 0; the run then failed every jax cell
    python = _bare_python(tmp_path)
    argv = ["run", "--device", "cpu", "--executor", "local", "--frameworks", "jax", "--python",
            "jax={}".format(python), "--quick", "--results", str(tmp_path / "c")]
    line = ("compare: error: --python 'jax={0}': {0} lacks jax, jaxlib, flax, optax (every jax run "
            "imports jax, jaxlib, flax, optax); give a python that has them, {1}\n".format(
                python, LEAVE.format("--python")))
    assert main_exit(argv + ["--plan"], capsys) == (2, "", line)
    assert main_exit(argv, capsys)[::2] == (2, line)
    assert not (tmp_path / "c").exists()


def test_a_python_lacking_one_module_names_that_one_and_a_campaign_files_by_its_key(tmp_path, capsys,
                                                                                    monkeypatch):
    for module in ("jax", "jaxlib", "flax"):  # optax left out
        (tmp_path / "site" / module).mkdir(parents=True)
        (tmp_path / "site" / module / "__init__.py").write_text("")
    python = _bare_python(tmp_path, tmp_path / "site")
    (tmp_path / "study.toml").write_text('frameworks = "jax"\npython = ["jax=bare-python"]\n')
    monkeypatch.chdir(tmp_path)
    code, out, err = main_exit(["run", "--device", "cpu", "--executor", "local", "--config",
                                "study.toml", "--quick", "--plan"], capsys)
    assert (code, out, err) == (2, "", "compare: error: study.toml: python 'jax={0}': {0} lacks optax "
                                       "(every jax run imports jax, jaxlib, flax, optax); give a python "
                                       "that has them, {1}\n".format(python, LEAVE.format("python")))


def test_a_python_that_does_not_answer_as_one_is_refused(tmp_path, capsys):
    code, out, err = main_exit(["run", "--device", "cpu", "--executor", "local", "--frameworks", "jax",
                                "--python", "jax=/bin/false", "--quick", "--plan"], capsys)
    assert (code, out, err) == (2, "", "compare: error: --python 'jax=/bin/false': /bin/false did not "
                                       "say which modules it has, as a python asked with -c does (exit "
                                       "1, nothing said); give a python that has jax, jaxlib, flax, "
                                       "optax, {}\n".format(LEAVE.format("--python")))


def test_a_python_is_asked_only_where_it_runs_here(tmp_path):
    # a Slurm job runs its --python on the cluster's nodes: its path there, not asked here
    from compare.executors.local import LocalExecutor
    from compare.executors.slurm import SlurmExecutor
    s = _study(frameworks="jax", python=["jax={}".format(_bare_python(tmp_path))])
    planning._check_python(s, SlurmExecutor)
    with pytest.raises(UserError) as refused:
        planning._check_python(s, LocalExecutor)
    assert "lacks jax, jaxlib, flax, optax" in str(refused.value)


GRACE = ("compare: error: COMPARE_EXIT_GRACE_S='{}' is not a whole number of seconds (0: no limit); "
         "give whole seconds, or unset it for the default 40 s\n")


@pytest.mark.parametrize("executor", ["local", "docker", "slurm"])
@pytest.mark.parametrize("grace", ["1.5", "abc", "-3"])
def test_an_exit_grace_that_is_not_whole_seconds_is_refused_once_before_any_cell(executor, grace, tmp_path,
                                                                                 capsys, monkeypatch):
    """Before, Slurm refused it cell by cell (each `failed`, not submitted), and local or docker
    failed only the cells of more than one process (their launcher reads it): --plan said nothing."""
    monkeypatch.setenv("COMPARE_EXIT_GRACE_S", grace)
    argv = _cpu(tmp_path)[:-1] + [str(tmp_path / "c"), "--quick"]
    argv[argv.index("--executor") + 1] = executor
    if executor != "local":  # docker and a Slurm job take no --python of this host
        argv[argv.index("--python"):argv.index("--python") + 2] = []
    assert main_exit(argv + ["--plan"], capsys) == (2, "", GRACE.format(grace))
    assert main_exit(argv, capsys)[::2] == (2, GRACE.format(grace))
    assert not (tmp_path / "c").exists()


def test_an_exit_grace_of_whole_seconds_or_empty_passes_the_plan(tmp_path, capsys, monkeypatch):
    for grace in ("0", "5", ""):
        monkeypatch.setenv("COMPARE_EXIT_GRACE_S", grace)
        assert main_exit(_cpu(tmp_path) + ["--quick", "--plan"], capsys)[0] == 0


def _old_python(folder, version):
    """A python that says it is `version` (sys.version_info as an old one has it) and runs `-c`
    code as this one does, its site-packages included (jax's modules found or not alike)."""
    import sys
    path = folder / "old-python"
    path.write_text("#!/bin/sh\n[ \"$1\" = -c ] || exit 1\nshift\nexec {} -c 'import sys; "
                    "sys.version_info = {!r}; code = sys.argv.pop(1); exec(code)' \"$@\"\n".format(
                        sys.executable, tuple(version) + (0,)))
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("version", [(3, 6), (3, 7), (2, 7)])
def test_a_python_older_than_the_backends_need_is_refused_by_the_plan(version, tmp_path, capsys):
    # its modules may all be there: the backends' own syntax (3.8) fails each cell at once
    python = _old_python(tmp_path, version)
    argv = ["run", "--device", "cpu", "--executor", "local", "--frameworks", "jax", "--python",
            "jax={}".format(python), "--quick", "--results", str(tmp_path / "c")]
    line = ("compare: error: --python 'jax={0}': {0} is Python {1}.{2}, and compare's backends need "
            "3.8 or newer; give a python 3.8 or newer that has jax, jaxlib, flax, optax, {3}\n".format(
                python, *version, LEAVE.format("--python")))
    assert main_exit(argv + ["--plan"], capsys) == (2, "", line)
    assert main_exit(argv, capsys)[::2] == (2, line)
    assert not (tmp_path / "c").exists()


def test_a_python_of_3_8_passes_the_version_check(tmp_path, capsys):
    python = _old_python(tmp_path, (3, 8))  # this venv's site-packages: jax's modules or not
    code, out, err = main_exit(["run", "--device", "cpu", "--executor", "local", "--frameworks", "jax",
                                "--python", "jax={}".format(python), "--quick", "--plan"], capsys)
    assert "is Python" not in err


def test_a_batch_size_no_cell_runs_at_is_one_line(tmp_path, capsys):
    # --mode tuned runs each framework at its best batch (auto): a --batch-size 16 beside it
    # alone was dropped unseen, the plan's cell reading bauto
    code, _, err = main_exit(_cpu(tmp_path) + ["--mode", "tuned", "--batch-size", "16", "--plan"],
                             capsys)
    assert (code, err) == (2, "compare: error: --batch-size 16: --mode tuned runs each framework at "
                              "its best batch (auto, searched within --batch-search), so no cell "
                              "would run at it; add --mode default,tuned, or leave it out (bound "
                              "the search with --batch-search MIN-MAX)\n")
    toml = tmp_path / "study.toml"
    toml.write_text('mode = ["tuned"]\nbatch_size = [16, 32]\n')
    code, _, err = main_exit(_cpu(tmp_path) + ["--config", str(toml), "--plan"], capsys)
    assert (code, err) == (2, "compare: error: {}: batch_size 16,32: mode tuned runs each framework "
                              "at its best batch (auto, searched within batch_search), so no cell "
                              "would run at it; add mode = [\"default\", \"tuned\"], or leave it out "
                              "(bound the search with batch_search MIN-MAX)\n".format(toml))
    for fine in (["--mode", "default,tuned", "--batch-size", "16"],
                 ["--mode", "tuned", "--batch-size", "auto"]):
        code, _, err = main_exit(_cpu(tmp_path) + fine + ["--plan"], capsys)
        assert code == 0, err


def test_a_python_for_a_framework_the_run_leaves_out_is_said(tmp_path, capsys):
    # --python jax=PATH beside --frameworks caffe2 was taken and never used, unsaid (a script may
    # give every framework's python and pick --frameworks: a warning, not an error)
    python = failing_python(tmp_path)
    argv = ["run", "--device", "cpu", "--executor", "local", "--frameworks", "caffe2", "--results",
            str(tmp_path / "c"), "--plan", "--python", "jax={}".format(python)]
    code, _, err = main_exit(argv, capsys)
    assert code == 0, err
    assert err.splitlines()[0] == "warning: --python jax={}: not used: jax is not in this run's " \
                                  "--frameworks (caffe2)".format(python)
    toml = tmp_path / "study.toml"
    toml.write_text('frameworks = ["caffe2"]\npython = ["mxnet={}"]\n'.format(python))
    code, _, err = main_exit(argv[:5] + argv[7:-2] + ["--config", str(toml)], capsys)
    assert code == 0, err
    assert err.splitlines()[0] == "warning: {}: python mxnet={}: not used: mxnet is not in this " \
                                  "run's frameworks (caffe2)".format(toml, python)
    code, _, err = main_exit(argv[:-1] + ["caffe2={}".format(python)], capsys)  # used: no word
    assert "not used" not in err


def test_a_gpu_only_option_on_the_cpu_is_said_once_at_plan_time(tmp_path, capsys):
    # --option cuda_connections=16 with --device cpu was planned without a word, then ignored
    # (cuda_graphs=true: recorded unsupported) at run time: one warning, and the plan goes on
    from tests.helpers import learnable_folder
    data = learnable_folder(tmp_path / "jpegs", train_per_class=1, val_per_class=1)
    argv = _cpu(tmp_path) + ["--data", str(data), "--option", "cuda_connections=16", "--option",
                             "caffe2.cuda_graphs=true", "--option", "channels_last=false", "--plan"]
    code, _, err = main_exit(argv, capsys)
    assert code == 0, err
    warned = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert warned == [
        "warning: --option cuda_connections=16: has no effect on a CPU, and this run is on one "
        "(--device cpu): it sets the hardware queues CUDA maps a GPU's streams onto",
        "warning: --option caffe2.cuda_graphs=true: has no effect on a CPU, and this run is on one "
        "(--device cpu): a CUDA graph needs a GPU (a CPU cell with it true is recorded "
        "unsupported)"]
    toml = tmp_path / "study.toml"
    toml.write_text('option = ["cudnn_benchmark=false"]\n')
    code, _, err = main_exit(_cpu(tmp_path) + ["--config", str(toml), "--plan"], capsys)
    assert code == 0, err
    assert err.splitlines()[0] == "warning: {}: option cudnn_benchmark=false: has no effect on a " \
        "CPU, and this run is on one (--device cpu): cuDNN's autotuning of a GPU's " \
        "convolutions".format(toml)
    code, _, err = main_exit(_cpu(tmp_path) + ["--option", "channels_last=true", "--plan"], capsys)
    assert (code, "warning" in err) == (0, False)  # a CPU option: no word
    code, _, err = main_exit(_cpu(tmp_path) + ["--option", "cudnn_benchmark=false"], capsys)
    assert code == 1  # the run says it too, as it plans (its one cell fails: failing_python)
    assert err.splitlines()[0] == "warning: --option cudnn_benchmark=false: has no effect on a " \
        "CPU, and this run is on one (--device cpu): cuDNN's autotuning of a GPU's convolutions"


def test_every_option_that_only_a_gpu_reads_is_marked():
    # the mark is the declaration's (Option.gpu), read by the plan: not a list of names there
    from compare import frameworks as fws
    marked = {o.key for fw in fws.FRAMEWORKS for o in fw.options() if o.gpu}
    assert {"cuda_connections", "cuda_graphs", "cudnn_benchmark", "cudnn_benchmark_limit",
            "inductor_tuning", "autotune_level", "latency_hiding", "allreduce_combine_mb",
            "nvimgcodec_api", "switch_interval_ms", "feeder_priority", "cpu_decoders",
            "cpu_share", "cpu_draft"} == marked
