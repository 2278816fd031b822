"""The Study (compare/study.py): one declaration per setting, read by the flags, a campaign file
(`compare run --config study.toml`), the bounds and campaign.json. A file and the same study as
flags plan the same cells; a bad key or value in a file is one line naming it; the bad inputs of
issue 37 are one line each; the stage checks of time to accuracy are the host's, before any spec."""
import json
import os

import pytest

from compare import study
from compare.stages import plan as planning
from tests.helpers import main_exit

CPU = {"device": "cpu", "executor": "local"}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A learnable DIR/train + DIR/val (2 classes), as `compare data make --learnable` writes it."""
    from compare import learnable
    from compare.imagegen import make
    root = tmp_path_factory.mktemp("data") / "tiny"
    make(root, learnable.LearnableSpec(classes=2, train_per_class=16, val_per_class=2), 1,
         lambda n, b: None)  # 32 training images: the global batch of each test's cells at most
    return root


def _hashes(flags):
    return [(s.run_id, s.spec_hash) for s in planning.make(study.build(flags)).cells]


def test_a_campaign_file_and_the_same_study_as_flags_plan_the_same_cells(tmp_path, folder):
    (tmp_path / "study.toml").write_text(
        'frameworks = ["caffe2", "jax"]\ngpus = [1, 2]\nprecision = "fp32,bf16"\nbatch-size = [8, 16]\n'
        'quick = true\nsteps = 4\nwindows = 2\nrepeats = 2\noption = ["caffe2.channels_last=true"]\n'
        'data = "{}"\ntarget_accuracy = 0.5\nmax_epochs = 3\neval-every = 2\ndevice = "cpu"\n'
        'executor = "local"\n'.format(os.path.relpath(folder, tmp_path)))  # relative: the file's folder
    from_file = _hashes({"config": str(tmp_path / "study.toml")})
    as_flags = _hashes(dict(CPU, frameworks="caffe2,jax", gpus="1,2", precision="fp32,bf16",
                            batch_size="8,16", quick=True, steps="4", windows="2", repeats="2",
                            option=["caffe2.channels_last=true"], data=str(folder),
                            target_accuracy="0.5", max_epochs="3", eval_every="2"))
    assert from_file == as_flags and len(from_file) == 2 * 2 * 2 * 2 * 2  # fw x gpus x prec x batch x r
    assert from_file[0][0] == "caffe2-fp32-w1-b8-s64-real-tta-r0"
    # flags beside the file override it, and each setting says where it came from
    over = study.build({"config": str(tmp_path / "study.toml"), "steps": "6", "windows": "3"})
    assert (over.steps, over.windows, over.repeats) == (6, 3, 2)
    assert (over.sources["steps"], over.sources["repeats"]) == ("flag over file", "file")
    assert "timeout" not in over.sources  # at its default


def test_the_golden_campaigns_study_plans_the_cells_it_recorded():
    # the study of tests/fixtures/campaign_cpu (made at 3f40005): the same cells, the same hashes
    from tests.reporting.test_golden_campaign import FIXTURE
    planned = json.loads((FIXTURE / "campaign" / "campaign.json").read_text())["planned"]
    cells = _hashes(dict(CPU, frameworks="caffe2", quick=True, image_size="32", steps="2",
                         warmup="1", windows="2", repeats="2", gpus="1,2"))
    assert dict(cells) == planned


@pytest.mark.parametrize("text,message", [
    ('gpu = [1, 2]\n', "{f}: unknown key 'gpu'; valid keys: frameworks, gpus, nodes, precision, "),
    ('gpus = "two"\n', "{f}: gpus 'two': not an integer; give integers >= 1, e.g. 1,2"),
    ('precision = ["fp8"]\n', "{f}: precision: unknown precision 'fp8'; choose from fp32, tf32, fp16, bf16"),
    ('quick = "yes"\n', '{f}: quick = "yes": give true or false'),
    ('compile = 2026-12-05\n', "{f}: compile = 2026-12-05: give true or false"),
    ('compile = [true, 0.0]\n', "{f}: compile = [true, 0.0]: give true or false"),
    ('steps = [1, 2.50]\n', "{f}: steps = [1, 2.50]: give one value, not a list"),
    ('timeout = 1e400\n', "{f}: timeout 1e400: must be a finite number of seconds > 0"),
    ('timeout = 0.0\n', "{f}: timeout 0.0: must be a finite number of seconds > 0"),
    ('target_accuracy = -1e400\n', "{f}: target_accuracy -1e400: must be a top-1 accuracy in (0, 1]"),
    ('steps = [1, 2]\n', "{f}: steps = [1, 2]: give one value, not a list"),
    ('steps = true\n', "{f}: steps 'true': not an integer; give an integer >= 1"),
    ('gpus = [1, false]\n', "{f}: gpus 'false': not an integer; give integers >= 1, e.g. 1,2"),
    ('steps = 0\n', "{f}: steps 0: must be >= 1"),
    ('target_accuracy = 1.5\n', "{f}: target_accuracy 1.5: must be a top-1 accuracy in (0, 1]"),
    ('[executor]\nname = "local"\n', "{f}: executor is a table; give it a value, as the flag "
                                     "--executor takes"),
    ('gpus = [1, 2\n', "--config {f}: not a TOML file (Unclosed array (at end of document))"),
    ('image-size = 64\nimage_size = 32\n', "{f}: image_size is given twice (as image-size and image_size); "
                                         "give it once"),
    ('frameworks = "caffe2"\noption = ["nope=1"]\n', "{f}: option nope=1: unknown key 'nope' for "
                                                   "caffe2; valid keys: caffe2: channels_last, "),
    ('frameworks = "caffe2"\noption = ["foo.x=1"]\n', "{f}: option foo.x=1: unknown framework 'foo'; "
                                                    "choose from tf, mxnet, caffe2, jax\n"),
    ('gpus = [[1, 2]]\n', "{f}: gpus = [[1, 2]]: give a list of values, not of lists or tables\n"),
    ('config = "other.toml"\n', "{f}: config: a campaign file cannot name another; give one --config, and "
                               "flags beside it\n"),
    ('python = ["caffe2=nope"]\n', "{f}: python 'caffe2={d}/nope': no interpreter at {d}/nope\n"),
    ('[[option]]\nkey = "x"\n', '{f}: option = [{{key = "x"}}]: give a list of values, not of lists or '
                                'tables\n'),
    ('slurm_option = "qos=high, constraint=a100"\n', '{f}: slurm_option "qos=high, constraint=a100": a '
     'string is one sbatch option, as --slurm-option takes it (a value may hold commas and pairs: '
     'gpu-freq=medium,memory=high); give a list: ["qos=high", "constraint=a100"] for several, ["qos=high, '
     'constraint=a100"] for one\n'),
    ('data = [1]\n', "{f}: data {d}/1: no such folder; give an ImageNet-layout folder"),
    ('data = [["x"]]\n', '{f}: data = [["x"]]: give a list of values, not of lists or tables\n'),
    ('python = [["caffe2=/x"]]\n', '{f}: python = [["caffe2=/x"]]: give a list of values, not of lists or '
                                   'tables\n'),
    ('results = [1]\n', "{f}: results = [1]: give one value, not a list\n"),
    ('plan = true\nplan_from = ["."]\n', '{f}: plan_from = ["."]: give one value, not a list\n'),
    ('executor = "slurm"\ntime_limit = "1h"\n', "{f}: time_limit '1h': not a Slurm time; give minutes (30), "
                                               "MM:SS, HH:MM:SS (01:30:00) or D-HH:MM:SS\n"),
    ('executor = "slurm"\nslurm_option = ["time=2"]\n', "{f}: slurm_option time=2: compare sets --time "
                                                       "itself; use time_limit\n"),
], ids=["key", "int", "choice", "bool", "bool-date", "bool-list", "list-of-floats", "inf-as-typed",
        "zero-as-typed", "minus-inf-as-typed", "list", "toml-bool", "toml-bool-in-list", "bound", "target", "table",
        "toml", "twice", "option", "option-framework", "nested-list", "config", "python", "array-of-tables",
        "slurm-option-pairs", "data-number", "data-nested", "python-nested", "results-list",
        "plan-from-list", "slurm-time-limit", "slurm-owned-option"])
def test_a_bad_key_or_value_in_the_file_is_one_line_naming_it(text, message, tmp_path, capsys,
                                                              monkeypatch):
    (tmp_path / "study.toml").write_text(text)
    monkeypatch.chdir(tmp_path)  # the file named as the user gave it, relative, in every message
    code, _, err = main_exit(["run", "--config", "study.toml", "--results", "c"], capsys)
    assert code == 2 and err.startswith("compare: error: " + message.format(f="study.toml", d=tmp_path)), err
    assert err.count("\n") == 1 and not (tmp_path / "c").exists()


@pytest.mark.parametrize("text,flags,message", [
    ('plan_gpus = 2\n', [], "{f}: plan_gpus belongs to plan (print the schedule and exit); add plan = true"),
    ('plan-from = "."\n', [], "{f}: plan_from belongs to plan (print the schedule and exit); add plan = true"),
    ('max_epochs = 3\n', [], "{f}: max_epochs belongs to target_accuracy (time to accuracy); add "
                             "target_accuracy = 0.759"),
    ('data_only = true\n', [], '{f}: data_only times an input pipeline: give data = "DIR" (a folder), e.g. '
                               'data = ["synthetic", "DIR"] with data_only = true'),
    ('batch_search = "8-16"\n', [], '{f}: batch_search 8-16: bounds the batch search of batch_size auto '
                                    'and mode tuned, and no cell searches; add batch_size = ["auto"] (or '
                                    'mode = ["tuned"]), or leave it out'),
    ('target_accuracy = 0.5\n', [], '{f}: target_accuracy trains on a folder and evaluates on its held-out '
                                    'part: give data = "DIR" (DIR/train and DIR/val), without synthetic or '
                                    'data_only'),
    ('steps = 4\nwindows = 5\n', ["--plan"], "{f}: windows 5: more windows than the 4 timed steps; give "
                                              "windows <= steps"),
    ('steps = 4\n', ["--windows", "5"], "{f}: --windows 5: more windows than the 4 timed steps; give "
                                        "--windows <= steps"),
    ('plan = true\nplan_gpus = 2\n', [], "{f}: plan_gpus 2: plans the study on GPUs, and --device cpu "
                                          "runs it on the CPU; leave one of them out"),
    ('gpus = [1, 1024]\n', [], "{f}: gpus 1024: on CPU each worker is a process and this machine has "),
    ('device = "cuda"\n', [], '{f}: device cuda: no NVIDIA GPU found on this machine (nvidia-smi lists '
                              'none); use device = "cpu"'),
    ('concurrency = 100000\n', [], "{f}: concurrency 100000: on CPU each cell needs a core of its own and there "),
    ('plan_gpus = 2\n', ["--plan-from", "."], "{f}: plan_gpus belongs to plan (print the schedule and "
                                               "exit); add plan = true"),
    ('partition = "gpu"\n', [], '{f}: partition is read by the slurm executor only; add --executor slurm'),
    ('option = ["jax.xla_flags=x"]\n', [], "{f}: option jax.xla_flags=x: jax is not in this run's "
                                           "frameworks (caffe2)"),  # it said --frameworks
], ids=["plan-gpus", "plan-from", "max-epochs", "data-only", "batch-search", "target", "windows",
        "windows-flag", "plan-gpus-cpu", "gpus-cores", "device-cuda", "concurrency", "plan-gpus-beside",
        "executor-flag", "option-framework"])
def test_a_rule_between_a_files_settings_names_the_file_and_its_keys(text, flags, message, tmp_path,
                                                                     capsys, monkeypatch):
    """A setting from the campaign file is named as its key, after the file as the user gave it;
    one from a flag as its flag."""
    (tmp_path / "study.toml").write_text('frameworks = "caffe2"\n' + text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("COMPARE_OVERSUBSCRIBE", raising=False)
    cpu = [] if "device" in text else ["--device", "cpu"]
    code, _, err = main_exit(["run", "--config", "study.toml", "--executor", "local", "--results", "c"]
                             + cpu + flags, capsys)
    assert code == 2 and err.startswith("compare: error: " + message.format(f="study.toml")), err
    assert err.count("\n") == 1 and not (tmp_path / "c").exists()


@pytest.mark.parametrize("text,flags,message", [
    ('executor = "local"\n', ["--partition", "gpu"], '--partition is read by the slurm executor only; add '
                                                    'executor = "slurm" in study.toml'),
    ('batch_search = "8-16"\n', ["--batch-size", "8"], 'study.toml: batch_search 8-16: bounds the batch '
     'search of --batch-size auto and mode tuned, and no cell searches; add --batch-size auto (or mode = '
     '["tuned"]), or leave it out'),
    ('data = "synthetic"\n', ["--data-only"], '--data-only times an input pipeline: give data = "DIR" in '
     'study.toml (a folder), e.g. data = ["synthetic", "DIR"] in study.toml with --data-only'),
    # the data to add and the data "for both" were each in the other's words: "add data = "DIR"
    # in study.toml (synthetic,DIR for both)", "add --data DIR (["synthetic", "DIR"] for both)"
    ('data = "synthetic"\n', ["--option", "loader_workers=2"], '--option loader_workers=2: belongs '
     'to data (the input pipeline of a JPEG folder), and this study\'s data is synthetic only; add '
     'data = "DIR" in study.toml (["synthetic", "DIR"] for both), or leave it out'),
    ('option = ["loader_workers=2"]\n', ["--data", "synthetic"], 'study.toml: option loader_workers=2: '
     'belongs to --data (the input pipeline of a JPEG folder), and this study\'s data is synthetic '
     'only; add --data DIR (synthetic,DIR for both), or leave it out'),
], ids=["executor-in-the-file", "batch-size-flag", "data-in-the-file", "pipeline-option-flag",
        "pipeline-option-in-the-file"])
def test_a_rules_advice_names_a_setting_where_it_is_in_effect(text, flags, message, tmp_path, capsys,
                                                              monkeypatch):
    """What to change is named where it holds: a flag given beside the file (over it) as the flag,
    a setting of the file as its key in the file, whichever gave the setting the rule is about."""
    (tmp_path / "study.toml").write_text('frameworks = "caffe2"\ndevice = "cpu"\n' + text)
    monkeypatch.chdir(tmp_path)
    code, _, err = main_exit(["run", "--config", "study.toml", "--results", "c"] + flags, capsys)
    assert (code, err) == (2, "compare: error: {}\n".format(message))


@pytest.mark.parametrize("args,message", [
    (["--plan", "--plan-gpus", "100000000"], "--plan-gpus 100000000: must be <= 1024 (GPUs of the "
                                             "planned machine)"),
    (["--batch-size", "auto,auto"], "--batch-size auto,auto: auto is given twice; give each value once"),
    (["--gpus", "1,2,1"], "--gpus 1,2,1: 1 is given twice; give each value once"),
    (["--gpus", "1,01"], "--gpus 1,01: 1 is given twice (as 1 and 01); give each value once"),
    (["--batch-size", "32,032,auto"], "--batch-size 32,032,auto: 32 is given twice (as 32 and 032); give "
     "each value once"),
    (["--option", "channels_last=true", "--option", "channels_last=false"],
     "--option channels_last=false: channels_last is given twice for caffe2; give each key once"),
    (["--steps", "4", "--windows", "5"], "--windows 5: more windows than the 4 timed steps; give "
                                         "--windows <= --steps"),
    (["--steps", "1_0"], "--steps '1_0': not an integer; give an integer >= 1"),
    (["--repeats", "١٠"], "--repeats '١٠': not an integer; give an integer >= 1"),
    (["--timeout", "1_0"], "--timeout '1_0': not a number; give a finite number of seconds > 0"),
    (["--option", "loader_workers=1_0"], "--option loader_workers=1_0: not an integer; give an integer from "
                                         "1 to 256, e.g. loader_workers=1"),
    (["--option", "loader_workers=١٠"], "--option loader_workers=\\u0661\\u0660: not an integer; give an "
                                        "integer from 1 to 256, e.g. loader_workers=1"),
    (["--plan-gpus", "2"], "--plan-gpus belongs to --plan (print the schedule and exit); add --plan"),
    (["--timeout", "1e400"], "--timeout 1e400: must be a finite number of seconds > 0"),
    (["--option", "caffe2.channels_last=maybe"], "--option caffe2.channels_last=maybe: not a boolean; "
                                                 "give true or false (also 1/0, yes/no, on/off)"),
], ids=["plan-gpus", "auto-twice", "gpus-twice", "gpus-leading-zero", "batch-leading-zero",
        "option-twice", "windows", "underscore",
        "arabic", "float", "option-underscore", "option-arabic", "plan-gpus-alone", "timeout-as-typed",
        "option-scoped-value"])
def test_bad_input_of_issue_37_is_one_line(args, message, tmp_path, capsys):
    code, _, err = main_exit(["run", "--frameworks", "caffe2", "--device", "cpu", "--executor", "local",
                              "--results", str(tmp_path / "c")] + args, capsys)
    assert (code, err) == (2, "compare: error: {}\n".format(message))
    assert not (tmp_path / "c").exists()


def test_time_to_accuracy_settings_go_into_every_cell(folder):
    plan = planning.make(study.build(dict(CPU, frameworks="caffe2", data=str(folder), quick=True,
                                          target_accuracy="0.5", max_epochs="3", repeats="2",
                                          gpu_hour_price="2.5")))
    assert [s.run_id for s in plan.cells] == ["caffe2-fp32-w1-b32-s64-real-tta-r0",
                                              "caffe2-fp32-w1-b32-s64-real-tta-r1"]
    spec = plan.cells[0]
    assert (spec.kind, spec.target_accuracy, spec.max_epochs, spec.eval_every) == ("accuracy", 0.5, 3, 1)
    assert spec.num_classes == 2  # the train part's classes: the model's outputs
    assert plan.held()["target_accuracy"] == 0.5 and plan.study.gpu_hour_price == 2.5


@pytest.mark.parametrize("args,message", [
    (["--target-accuracy", "0"], "--target-accuracy 0: must be a top-1 accuracy in (0, 1], e.g. "
                                 "0.759 (MLPerf's ResNet-50 target)"),
    (["--target-accuracy", "1.01"], "--target-accuracy 1.01: must be a top-1 accuracy in (0, 1], e.g. "
                                    "0.759 (MLPerf's ResNet-50 target)"),
    (["--target-accuracy", "0.9"], "--target-accuracy trains on a folder and evaluates on its held-out "
                                   "part: give --data DIR (DIR/train and DIR/val), without synthetic "
                                   "or --data-only"),
    (["--max-epochs", "0"], "--max-epochs 0: must be >= 1"),
    (["--max-epochs", "3"], "--max-epochs belongs to --target-accuracy (time to accuracy); add "
                            "--target-accuracy"),
    (["--gpu-hour-price", "0"], "--gpu-hour-price 0: must be a finite number of dollars > 0, e.g. 2.50"),
    (["--gpu-hour-price", "-2.5"], "--gpu-hour-price -2.5: must be a finite number of dollars > 0, "
                                   "e.g. 2.50"),
    (["--target-accuracy", "0.9", "--data", "{train}"], "--data {train}: no held-out part: time to "
     "accuracy evaluates top-1 on DIR/val beside DIR/train (`compare data make DIR --learnable small` "
     "makes both; else move a fixed share of each class's JPEGs into DIR/val/<class>)"),
    (["--target-accuracy", "0.9", "--data", "{folder}", "--batch-size", "auto"],
     "--target-accuracy: --batch-size auto and --mode tuned choose the batch by throughput probes, "
     "not built for time to accuracy; give --batch-size N and --mode default"),
], ids=["zero", "above-one", "no-data", "epochs-0", "epochs-alone", "price-0", "price-negative",
        "no-val", "auto"])
def test_bad_time_to_accuracy_input_is_one_line(args, message, folder, tmp_path, capsys):
    import shutil
    train = tmp_path / "only-train"
    shutil.copytree(str(folder / "train"), str(train / "train"))
    args = [a.format(folder=folder, train=train) for a in args]
    code, _, err = main_exit(["run", "--frameworks", "caffe2", "--device", "cpu", "--executor", "local",
                              "--results", str(tmp_path / "c")] + args, capsys)
    assert (code, err) == (2, "compare: error: {}\n".format(message.format(train=train)))
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("flags,message", [
    ({"gpu_hour_price": "2.5"}, "--gpu-hour-price 2.5: prices time-to-accuracy runs (their cost to "
                                "train), and this study has none; add --target-accuracy 0.759, or leave "
                                "the price out"),
    ({"target_accuracy": "0.5", "max_epochs": "2", "eval_every": "5"},
     "--eval-every 5: more than --max-epochs 2, so it would evaluate once, after the last epoch; give "
     "--eval-every from 1 to 2"),
], ids=["price", "eval-every"])
def test_every_time_to_accuracy_rule_is_the_studys_own(flags, message, folder):
    # the price and eval-every rules sat in the plan stage, apart from Study._accuracy_rules: a
    # Study built without a plan (a campaign file read, a resume) took them unchecked
    from compare.errors import UserError
    with pytest.raises(UserError) as refused:
        study.build(dict(CPU, frameworks="caffe2", data=str(folder), **flags))
    assert str(refused.value) == message


def test_every_flag_of_compare_run_is_a_declared_setting_and_a_file_key(tmp_path, capsys):
    code, out, _ = main_exit(["run", "--help"], capsys)
    import re
    flags = set(re.findall(r"^  (--[a-z-]+)", out, re.M)) - {"--help"}
    assert flags == {s.flag for s in study.declared()}
    assert {"--target-accuracy", "--max-epochs", "--eval-every", "--gpu-hour-price", "--config"} <= flags
    keys = study.read_file(str(_write(tmp_path, "".join(
        '{} = {}\n'.format(s.name, "true" if s.parse is None else '"x"') for s in study.declared()
        if s.name != "config"))))
    assert set(keys) == {s.name for s in study.declared()} - {"config"}


def _write(tmp_path, text):
    path = tmp_path / "all.toml"
    path.write_text(text)
    return path


def test_option_as_a_comma_string_reads_as_the_flags_comma_list(tmp_path, folder):
    """`option = "a=1,b=2"` in a file is two options, as `--option a=1,b=2` and as a TOML array; a
    comma not followed by a declared KEY= stays in the value (jax's xla_flags may hold commas)."""
    (tmp_path / "study.toml").write_text('frameworks = "caffe2,jax"\noption = "caffe2.channels_last=true,'
                                         ' loader_workers=2"\ndata = "{}"\n'.format(folder))
    from_file = study.build(dict(CPU, config=str(tmp_path / "study.toml")))
    as_flag = study.build(dict(CPU, frameworks="caffe2,jax", data=str(folder),  # loader_workers'
                               option=["caffe2.channels_last=true, loader_workers=2"]))
    assert from_file.option == as_flag.option == ("caffe2.channels_last=true", "loader_workers=2")
    held = planning.make(from_file).held()
    assert (held["options.caffe2"], held["options.jax"]) == ({"channels_last": True, "loader_workers": 2},
                                                           {"loader_workers": 2})
    flags = study.build(dict(CPU, frameworks="jax", option=["xla_flags=--a=X,Y,sync_bn=true"]))
    assert flags.option == ("xla_flags=--a=X,Y", "sync_bn=true")


def test_slurm_option_as_a_string_is_one_sbatch_option_as_the_flag_reads_it(tmp_path):
    # a value may hold commas (gres=gpu:2,foo); a list gives several, or one holding a pair
    (tmp_path / "study.toml").write_text('executor = "slurm"\nslurm_option = "gres=gpu:2,foo"\n')
    one = study.build({"config": str(tmp_path / "study.toml")})
    assert one.executor_flags["slurm_option"] == ["--gres=gpu:2,foo"]
    (tmp_path / "study.toml").write_text('executor = "slurm"\nslurm_option = ["qos=high", '
                                         '"gpu-freq=medium,memory=high"]\n')
    two = study.build({"config": str(tmp_path / "study.toml")})
    assert two.executor_flags["slurm_option"] == ["--qos=high", "--gpu-freq=medium,memory=high"]


def test_python_as_a_comma_string_reads_as_a_list_and_a_framework_given_twice_is_one_line(
        tmp_path, capsys):
    """`python = "caffe2=P,jax=Q"` (or --python caffe2=P,jax=Q) is two interpreters, each path
    taken from the file's folder; the same framework twice (an alias too) is one line, where the
    last one won unseen."""
    import sys
    (tmp_path / "bin").mkdir()
    here = tmp_path / "bin" / "python"
    here.symlink_to(sys.executable)
    (tmp_path / "study.toml").write_text('python = "caffe2=bin/python,jax=bin/python"\n')
    from_file = study.build(dict(CPU, frameworks="caffe2,jax", config=str(tmp_path / "study.toml")))
    as_flag = study.build(dict(CPU, frameworks="caffe2,jax", python=["caffe2={0},jax={0}".format(here)]))
    assert from_file.overrides == as_flag.overrides == {"caffe2": str(here), "jax": str(here)}
    code, _, err = main_exit(["run", "--frameworks", "caffe2", "--python", "caffe2={}".format(here),
                              "--python", "torch={}".format(here), "--results", str(tmp_path / "c")], capsys)
    assert (code, err) == (2, "compare: error: --python caffe2={}: caffe2 is given twice; give each "
                              "framework once\n".format(here))


def test_a_campaign_file_with_a_byte_order_mark_reads_and_one_not_in_utf8_is_one_line(tmp_path, capsys):
    (tmp_path / "bom.toml").write_bytes(b"\xef\xbb\xbfsteps = 3\n")  # as Notepad saves UTF-8
    assert study.build(dict(CPU, frameworks="caffe2", config=str(tmp_path / "bom.toml"))).steps == 3
    (tmp_path / "latin.toml").write_bytes(b"steps = 3  # caf\xe9\n")
    code, _, err = main_exit(["run", "--config", str(tmp_path / "latin.toml")], capsys)
    assert (code, err) == (2, "compare: error: --config {}: not a TOML file (byte 17 is not UTF-8); save it "
                              "as UTF-8\n".format(tmp_path / "latin.toml"))


def test_a_setting_an_earlier_session_read_from_its_file_is_named_by_its_flag_on_resume():
    # a resumed study keeps where each setting came from; the file is not this command's
    with pytest.raises(study.UserError) as exc:
        study.Study(data_only=True, sources={"data_only": "file"})
    assert str(exc.value) == ("--data-only times an input pipeline: give --data DIR (a folder), e.g. "
                              "--data synthetic,DIR --data-only")


def test_a_setting_kept_from_an_earlier_sessions_file_is_not_this_files_on_resume(folder, tmp_path,
                                                                                 capsys, monkeypatch):
    """--resume --config more.toml: the settings the campaign keeps from study.toml are the
    campaign's, not more.toml's: a rule names them by their flags, and the report says they were
    kept, where both named more.toml for keys it never had."""
    from compare.stages.report import origins
    from compare.store import CAMPAIGN_KIND
    campaign = tmp_path / "c"
    campaign.mkdir()
    made = {"study": {"frameworks": ["caffe2"], "device": "cpu", "executor": "local", "data_only": True,
                      "data": ["synthetic", str(folder)]},
            "sources": {k: "file" for k in ("frameworks", "device", "executor", "data_only", "data")},
            "file": str(tmp_path / "study.toml")}
    (campaign / "campaign.json").write_text(json.dumps({"kind": CAMPAIGN_KIND, "settings": {"device": "cpu"},
                                                        "planned": {}, "sessions": [{"config": made}]}))
    (tmp_path / "more.toml").write_text('data = "synthetic"\n')
    monkeypatch.chdir(tmp_path)
    code, _, err = main_exit(["run", "--config", "more.toml", "--results", "c", "--resume"], capsys)
    assert (code, err) == (2, 'compare: error: --data-only times an input pipeline: give data = "DIR" in '
                              'more.toml (a folder), e.g. data = ["synthetic", "DIR"] in more.toml with '
                              '--data-only\n')
    (tmp_path / "more.toml").write_text('repeats = 2\n')
    resumed = study.build({"config": "more.toml", "results": "c", "resume": True})
    lines = origins({"sources": resumed.sources, "file": str(tmp_path / "more.toml")})
    assert lines[:2] == ["from the campaign file {}: repeats".format(tmp_path / "more.toml"),
                         "kept from the campaign (as an earlier session gave them): frameworks, device, "
                         "executor, data, data_only"]


@pytest.mark.parametrize("plan", [["--plan"], []], ids=["plan", "run"])
def test_a_files_results_that_holds_a_campaign_is_named_by_the_file_and_key(plan, tmp_path, capsys,
                                                                            monkeypatch):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "campaign.json").write_text("{}")
    (tmp_path / "study.toml").write_text('results = "c"\nframeworks = "caffe2"\ndevice = "cpu"\n')
    monkeypatch.chdir(tmp_path)
    code, _, err = main_exit(["run", "--config", "study.toml"] + plan, capsys)
    assert (code, err) == (2, "compare: error: study.toml: results {}: already holds a campaign; add "
                              "resume = true to continue it, or give a new folder\n".format(tmp_path / "c"))


def test_plan_from_help_says_its_default_is_the_folder_holding_results(capsys):
    # it said "(default results)", where `--results /x/c --plan` reads the campaigns under /x
    code, out, _ = main_exit(["run", "--help"], capsys)
    assert code == 0 and "--plan-from TEXT With --plan: the folder of earlier campaigns whose cell " \
        "times make the estimate (default: the folder holding --results, else results/)." in " ".join(
            out.split())
