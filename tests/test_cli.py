"""The command line: every bad input is one line on stderr and exit code 2."""

import pytest

from tests.helpers import main_exit

BAD = [
    (["run", "--frameworks", "tf,foo"], "compare: error: unknown framework 'foo'; choose from tf, mxnet, caffe2, jax"),
    (["run", "--frameworks", ","], "compare: error: --frameworks is empty; choose from tf, mxnet, caffe2, jax"),
    (["run", "--gpus", ""], "compare: error: --gpus is empty; give one or more integers >= 1, e.g. 1,2"),
    (["run", "--gpus", "0"], "compare: error: --gpus 0: must be >= 1"),
    (["run", "--gpus", "1,-2"], "compare: error: --gpus -2: must be >= 1"),
    (["run", "--gpus", "two"], "compare: error: --gpus 'two': not an integer; give integers >= 1, e.g. 1,2"),
    (["run", "--precision", "fp8"], "compare: error: unknown precision 'fp8'; choose from fp32, tf32, fp16, bf16"),
    (["run", "--precision", ""], "compare: error: --precision is empty; choose from fp32, tf32, fp16, bf16"),
    (["run", "--batch-size", "0"], "compare: error: --batch-size 0: must be >= 1"),
    (["run", "--batch-size", "-32"], "compare: error: --batch-size -32: must be >= 1"),
    (["run", "--image-size", "16"], "compare: error: --image-size 16: must be >= 32 (ResNet-50 downsamples 32x)"),
    (["run", "--device", "tpu"], "compare: error: unknown device 'tpu'; choose from auto, cuda, cpu"),
    (["run", "--resume"], "compare: error: --resume needs --results DIR naming the campaign to continue"),
    (["run", "--python", "caffe2"], "compare: error: --python 'caffe2': expected FRAMEWORK=PATH, e.g. tf=/usr/bin/python3"),
    (["run", "--nodes", "1,2", "--executor", "local", "--device", "cpu"], "compare: error: --nodes 2: the local executor runs on one machine; more nodes need an executor of a cluster (slurm)"),
    (["report", "x", "--format", "xml"], "compare: error: unknown format 'xml'; choose from md, csv, json, html"),
    # a command group without its command, or with one it does not have: the ones it has
    ([], "compare: error: compare needs a command; choose from run, report, diff, history, check, doctor, list, "
         "images, data (`compare --help` says what each does)"),
    (["list"], "compare: error: compare list needs a command; choose from references, frameworks, launchers, "
               "models, options, pipelines, modes (`compare list --help` says what each does)"),
    (["list", "refs"], "compare: error: No such command 'refs'. Choose from references, frameworks, launchers, "
                       "models, options, pipelines, modes."),
    (["images"], "compare: error: compare images needs a command; choose from build, list (`compare images "
                 "--help` says what each does)"),
]




@pytest.mark.parametrize("argv,message", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    code, out, err = main_exit(argv, capsys)
    assert code == 2
    assert err == message + "\n"


@pytest.mark.parametrize("flags,message", [
    # an empty value in a list was dropped (1,,2 planned 1,2): a typo where a value was meant
    (["--gpus", "1,,2"], "--gpus 1,,2: an empty value in the list; give one or more integers >= 1, e.g. 1,2"),
    (["--precision", "fp32,"], "--precision fp32,: an empty value in the list; choose from fp32, tf32, "
                               "fp16, bf16"),
    (["--batch-size", "32,,auto"], "--batch-size 32,,auto: an empty value in the list; give one or more "
                                   "integers >= 1, e.g. 1,2"),
    (["--frameworks", ",caffe2"], "--frameworks ,caffe2: an empty value in the list; choose from tf, mxnet, "
                                  "caffe2, jax"),
    (["--python", "=x"], "--python '=x': expected FRAMEWORK=PATH, e.g. tf=/usr/bin/python3"),  # was "no
    # interpreter at x"; a file where a folder is wanted was "no such folder"
    (["--plan-from", "/etc/passwd"], "--plan-from /etc/passwd: is a file, not a folder; give the folder "
                                     "that holds earlier campaigns (default results)"),
    (["--data", ""], "--data is empty; give synthetic and/or a folder DIR/train/<class>/*.JPEG (`compare "
                     "data make DIR` makes one)"),  # its advice was in parentheses in parentheses
], ids=["gpus-empty-item", "precision-trailing-comma", "batch-empty-item", "frameworks-leading-comma",
        "python-no-framework", "plan-from-file", "data-empty"])
def test_a_bad_list_or_path_of_run_is_one_line(flags, message, tmp_path, capsys):
    base = ["run", "--device", "cpu", "--executor", "local", "--quick", "--plan", "--results",
            str(tmp_path / "c")]
    code, out, err = main_exit(base + (["--frameworks", "caffe2"] if "--frameworks" not in flags else [])
                               + flags, capsys)
    assert (code, err) == (2, "compare: error: {}\n".format(message))


def test_data_prepare_names_a_python_without_its_framework_as_run_does(capsys):
    code, _, err = main_exit(["data", "prepare", "x", "--python", "=x"], capsys)
    assert (code, err) == (2, "compare: error: --python '=x': expected FRAMEWORK=PATH, e.g. "
                              "tf=/usr/bin/python3\n")


def test_more_gpus_than_the_machine_has(monkeypatch, capsys):
    from backends import machine  # the machine record, taken once by the plan stage
    monkeypatch.setattr(machine, "gpus", lambda: [{"index": 0, "name": "H200"}])
    code, _, err = main_exit(["run", "--device", "cuda", "--gpus", "1,2"], capsys)
    assert (code, err) == (2, "compare: error: --gpus 2: this machine has 1 GPU; give counts from 1 to 1\n")


def test_cuda_without_a_gpu(monkeypatch, capsys):
    from backends import machine
    monkeypatch.setattr(machine, "gpus", lambda: [])
    code, _, err = main_exit(["run", "--device", "cuda"], capsys)
    assert (code, err) == (2, "compare: error: --device cuda: no NVIDIA GPU found on this machine (nvidia-smi lists none); use --device cpu\n")


def test_results_is_a_file(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    code, _, err = main_exit(["run", "--device", "cpu", "--results", str(f)], capsys)
    assert (code, err) == (2, "compare: error: --results {0}: is a file, not a folder; give a folder path\n".format(f))


def test_results_not_writable(capsys):
    code, _, err = main_exit(["run", "--device", "cpu", "--results", "/proc/1/campaign"], capsys)
    assert (code, err) == (2, "compare: error: --results /proc/1/campaign: /proc/1 is not writable; give a folder you can write\n")


def test_resume_on_a_folder_that_is_not_a_campaign(tmp_path, capsys):
    code, _, err = main_exit(["run", "--device", "cpu", "--resume", "--results", str(tmp_path)], capsys)
    assert code == 2
    assert err == "compare: error: --resume {}: not a campaign folder (no campaign.json); give a folder made by " \
                  "`compare run`\n".format(tmp_path)


def test_unknown_option_is_one_line(capsys):
    code, _, err = main_exit(["run", "--bogus"], capsys)
    assert code == 2 and err.startswith("compare: error: No such option: --bogus") and err.count("\n") == 1


def test_list_frameworks(capsys):
    code, out, _ = main_exit(["list", "frameworks"], capsys)
    assert code == 0
    names = [line.split()[0] for line in out.splitlines()]
    assert names == ["tf", "mxnet", "caffe2", "jax"]
    assert "torch, pytorch" in out


def test_a_reader_that_goes_away_ends_the_output_quietly():
    # `compare list options | head -1`: the pipe closes before compare has written all
    import subprocess
    import sys

    from tests.helpers import ROOT
    reader = subprocess.run("{} -m compare list options | head -1; exit ${{PIPESTATUS[0]}}".format(
        sys.executable), shell=True, executable="/bin/bash", cwd=str(ROOT), capture_output=True,
        text=True, timeout=120)
    assert (reader.returncode, reader.stdout, reader.stderr) == (
        0, "tf (TensorFlow (+Horovod)): --option KEY=VALUE or tf.KEY=VALUE\n", "")
    proc = subprocess.Popen([sys.executable, "-m", "compare", "list", "options"], cwd=str(ROOT),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # gone before compare writes a byte
    assert (proc.wait(timeout=120), proc.stderr.read()) == (0, b"")


def test_an_os_error_on_a_path_is_one_line_naming_it(tmp_path, capsys, monkeypatch):
    from compare import cli

    def fails():
        raise IsADirectoryError(21, "Is a directory", str(tmp_path))
    command = next(c for c in cli.list_app.registered_commands if c.callback.__name__ == "list_frameworks")
    monkeypatch.setattr(command, "callback", fails)
    code, _, err = main_exit(["list", "frameworks"], capsys)
    assert (code, err) == (2, "compare: error: {}: Is a directory\n".format(tmp_path))


@pytest.mark.parametrize("flags,message", [
    (["--results", ""], "--results is empty; give a folder path (default results/<time>)"),
    (["--plan-from", ""], "--plan-from is empty; give the folder that holds earlier campaigns (default "
                          "results)"),
], ids=["results", "plan-from"])
def test_an_empty_path_is_refused_not_taken_as_the_current_folder(flags, message, tmp_path, capsys,
                                                                  monkeypatch):
    # '' was the current folder: a campaign made there, or its neighbours read as earlier campaigns
    monkeypatch.chdir(tmp_path)
    code, _, err = main_exit(["run", "--device", "cpu", "--executor", "local", "--frameworks", "caffe2",
                              "--quick", "--plan"] + flags, capsys)
    assert (code, err) == (2, "compare: error: {}\n".format(message))


@pytest.mark.parametrize("argv,message", [
    (["report", "{c}", "--baseline", ""], "--baseline '': unknown framework; choose from tf, mxnet, caffe2, "
                                          "jax"),
    (["report", "{c}", "--baseline", "foo"], "--baseline 'foo': unknown framework; choose from tf, mxnet, "
                                             "caffe2, jax"),
    (["report", "{c}", "--out", ""], "--out is empty; give a folder path"),
    (["diff", "{c}", "{c}", "--out", ""], "--out is empty; give a folder path"),
    (["history", "{c}", "--out", ""], "--out is empty; give a folder path"),
    (["list", "pipelines", ""], "unknown framework ''; choose from tf, mxnet, caffe2, jax"),
    (["list", "options", ""], "unknown framework ''; choose from tf, mxnet, caffe2, jax"),
    (["list", "modes", ""], "unknown framework ''; choose from tf, mxnet, caffe2, jax"),
], ids=["baseline-empty", "baseline-unknown", "report-out", "diff-out", "history-out", "pipelines",
        "options", "modes"])
def test_an_empty_value_of_a_report_or_list_is_refused(argv, message, tmp_path, capsys, monkeypatch):
    # '' was taken as not given: --out '' wrote the report into the current folder, --baseline ''
    # took the default, `list pipelines ''` listed every framework
    from compare.store import Campaign
    from tests.helpers import MACHINE, result
    c = Campaign.create(tmp_path / "c", {"test": True}, MACHINE)
    c.save_result(result("caffe2", "fp32", 1, 100.0))
    monkeypatch.chdir(tmp_path)
    code, out, err = main_exit([a.format(c=c.root) for a in argv], capsys)
    assert (code, out, err) == (2, "", "compare: error: {}\n".format(message))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]


@pytest.mark.parametrize("argv", [["report", "{c}", "--format", "json"], ["diff", "{c}", "{c}"],
                                  ["history", "{c}"]], ids=["report", "diff", "history"])
@pytest.mark.parametrize("inside", ["results", "logs/x", "code"])
def test_report_files_are_not_written_into_a_campaigns_own_folders(argv, inside, tmp_path, capsys):
    # --out CAMPAIGN/results wrote report.json beside the results: every later reading of the
    # campaign warned "skipped corrupt result report.json"
    from compare.store import Campaign
    from tests.helpers import MACHINE, result
    c = Campaign.create(tmp_path / "c", {"test": True}, MACHINE)
    c.save_result(result("caffe2", "fp32", 1, 100.0))
    c.unlock()
    before = sorted(str(p) for p in c.root.rglob("*"))
    out = c.root / inside
    code, _, err = main_exit([a.format(c=c.root) for a in argv] + ["--out", str(out)], capsys)
    assert (code, err) == (2, "compare: error: --out {}: inside the {} folder of campaign {}, which "
                              "`compare run` writes; give a folder outside it (a campaign's report "
                              "folder, or any other)\n".format(out, inside.split("/")[0], c.root))
    assert sorted(str(p) for p in c.root.rglob("*")) == before


@pytest.mark.parametrize("argv,what", [
    (["report", "{c}", "--format", "json"], "not the campaign reported ({c}); give a folder inside it "
                                            "(the default: {c}/report) or outside every campaign"),
    (["diff", "{c}", "{c}"], "not one of the campaigns compared ({c}); give a folder inside one of "
                             "them or outside every campaign"),
    (["history", "{c}"], "not one of the campaigns of the history ({c}); give a folder inside one of "
                         "them or outside every campaign")], ids=["report", "diff", "history"])
@pytest.mark.parametrize("inside", ["", "report", "report/new"], ids=["its-root", "its-report", "below"])
def test_report_files_are_not_written_into_another_campaigns_folder(argv, what, inside, tmp_path, capsys):
    # `compare report A --out B/report` wrote A's report.md, tables and runs.csv over B's own report
    from compare.store import Campaign
    from tests.helpers import MACHINE, result
    c, other = (Campaign.create(tmp_path / name, {"test": True}, MACHINE) for name in ("c", "other"))
    for camp in (c, other):
        camp.save_result(result("caffe2", "fp32", 1, 100.0))
        camp.unlock()
    (other.root / "report").mkdir()
    (other.root / "report" / "report.md").write_text("the other campaign's report\n")
    before = sorted(str(p) for p in other.root.rglob("*"))
    out = other.root / inside if inside else other.root
    code, stdout, err = main_exit([a.format(c=c.root) for a in argv] + ["--out", str(out)], capsys)
    assert (code, stdout, err) == (2, "", "compare: error: --out {}: inside the folder of campaign {}, "
                                          "{}\n".format(out, other.root, what.format(c=c.root)))
    assert sorted(str(p) for p in other.root.rglob("*")) == before
    assert (other.root / "report" / "report.md").read_text() == "the other campaign's report\n"
    code, _, err = main_exit([a.format(c=c.root) for a in argv] + ["--out", str(c.root / "mine")],
                             capsys)  # inside a campaign it reads, and outside any: written
    assert code == 0, err
    code, _, err = main_exit([a.format(c=c.root) for a in argv] + ["--out", str(tmp_path / "apart")],
                             capsys)
    assert code == 0 and (tmp_path / "apart").is_dir(), err


@pytest.mark.parametrize("argv,message", [
    (["data", "info", ""], "compare data info: FOLDER is empty; give an ImageNet-layout folder "
                           "(DIR/train/<class>/*.JPEG) or make one with: compare data make DIR"),
    (["data", "prepare", ""], "compare data prepare: FOLDER is empty; give an ImageNet-layout folder "
                              "(DIR/train/<class>/*.JPEG) or make one with: compare data make DIR"),
    (["data", "prepare", "x", "--frameworks", ""], "--frameworks is empty; choose from tf, mxnet, caffe2, "
                                                  "jax"),
    (["images", "build", "--frameworks", ""], "--frameworks is empty; choose from tf, mxnet, caffe2, jax"),
    # typer read each of these '' as Path('.'), the current folder: '.: not a campaign folder (no
    # campaign.json)', '.: folder is not empty' (and an empty current folder was written into)
    (["report", ""], "compare report: CAMPAIGN is empty; give a campaign folder made by `compare run`"),
    (["diff", "", "x"], "compare diff: CAMPAIGN_A is empty; give a campaign folder made by `compare run`"),
    (["diff", "x", ""], "compare diff: CAMPAIGN_B is empty; give a campaign folder made by `compare run`"),
    (["history", "x", ""], "compare history: CAMPAIGNS is empty; give campaign folders made by `compare "
                           "run`, or the folder that holds them"),
    (["check", "", "--reference", "x"], "compare check: CAMPAIGN is empty; give a campaign folder made by "
                                        "`compare run`"),
    (["data", "make", ""], "compare data make: DEST is empty; give a new or empty folder"),
], ids=["info", "prepare", "prepare-frameworks", "images-frameworks", "report", "diff-a", "diff-b",
        "history", "check", "make"])
def test_an_empty_folder_or_list_of_data_and_images_is_one_line(argv, message, capsys, tmp_path,
                                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)
    # info/prepare '' said "compare data info : no class subfolders with JPEG files in ; ..."; an
    # empty --frameworks was taken as not given: every framework
    code, out, err = main_exit(argv, capsys)
    assert (code, out, err) == (2, "", "compare: error: {}\n".format(message))


@pytest.mark.parametrize("argv,line", [
    (["report", "--help"], "--reference NAME|CSV"),
    (["data", "prepare", "--help"], "--python FRAMEWORK=PATH"),
])
def test_help_names_what_a_repeated_option_takes_not_a_python_type(argv, line, capsys, monkeypatch):
    # the help read "--reference <list[str]>": a type of the code, where the reader wants a value
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = main_exit(argv, capsys)
    assert code == 0
    assert line in " ".join(out.split()) and "list[" not in out.split("Options:")[1]


def test_history_help_names_its_campaigns_as_a_reader_gives_them(capsys, monkeypatch):
    # typer printed "Usage: compare history [OPTIONS] {campaigns}..." and "campaigns...
    # <list[str]>": the names and types of the code
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = main_exit(["history", "--help"], capsys)
    assert code == 0
    assert out.splitlines()[0] == "Usage: compare history [OPTIONS] CAMPAIGN..."
    arguments = out.split("Arguments:")[1].split("Options:")[0]
    assert " ".join(arguments.split()) == "CAMPAIGN... Campaign folders made by `compare run`, " \
                                          "or one folder holding them. [required]"


def _commands(command, path):
    yield path
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _commands(sub, path + [name])


def test_no_help_shows_a_type_of_the_code_or_braces_for_a_value(capsys, monkeypatch):
    # "<str>", "<int>", "<list[str]>" beside arguments and options, "{campaign}" in the usage
    import re

    import typer

    from compare.cli import app
    monkeypatch.setenv("COLUMNS", "200")
    paths = list(_commands(typer.main.get_command(app), []))
    assert ["data", "make"] in paths and ["list", "options"] in paths
    for path in paths:
        code, out, err = main_exit(path + ["--help"], capsys)
        assert code == 0, err
        usage = out.splitlines()[0]
        assert usage.startswith("Usage: compare") and "{" not in usage, (path, usage)
        typed = re.findall(r"<(?:str|int|float|bool|path|list\[[^\]]*\])>", out)
        assert not typed, (path, typed)


@pytest.mark.parametrize("argv,line", [
    # --option and --python gather each time they are given; these took the last, unsaid: a
    # `--frameworks caffe2 --frameworks jax` ran jax alone (a warning: scripts give defaults and
    # then the caller's flags over them, as bench/realdata_gpu.sh's RUNARGS)
    (["--frameworks", "caffe2", "--frameworks", "jax"],
     "--frameworks is given twice (caffe2, then jax): jax is used, the first left out (a comma "
     "list gives several: --frameworks caffe2,jax)"),
    (["--frameworks", "caffe2", "--steps=4", "--steps", "5"],
     "--steps is given twice (4, then 5): 5 is used, the first left out"),
    (["--frameworks", "caffe2", "--quick", "--no-quick"],
     "--quick/--no-quick is given twice (--quick, then --no-quick): --no-quick is used, the first "
     "left out"),
])
def test_a_flag_that_takes_one_value_given_twice_is_said(argv, line, tmp_path, capsys):
    code, out, err = main_exit(["run", "--plan", "--results", str(tmp_path / "c")] + argv, capsys)
    assert code == 0, err
    assert err.splitlines()[0] == "compare: warning: {}".format(line)


def test_a_report_format_given_twice_is_said(tmp_path, capsys):
    from tests.helpers import result, save_campaign
    root = save_campaign(tmp_path / "c", [result("caffe2", "fp32", 1, 100.0)])
    code, _, err = main_exit(["report", str(root), "--format", "csv", "--format", "json"], capsys)
    assert code == 0
    assert err.splitlines()[0] == "compare: warning: --format is given twice (csv, then json): json " \
                                  "is used, the first left out (a comma list gives several: --format " \
                                  "csv,json)"


def test_flags_that_gather_may_be_given_again(tmp_path, capsys):
    code, _, err = main_exit(["run", "--frameworks", "caffe2", "--option", "channels_last=false",
                              "--option", "optimizer=loop", "--plan", "--results", str(tmp_path / "c"),
                              "--results", str(tmp_path / "c")], capsys)
    assert code == 0, err
    assert err.count("warning") == 1  # --results twice; --option gathers


def test_ctrl_c_outside_a_stage_that_handles_it_is_one_line_not_a_silent_130(tmp_path, capsys,
                                                                            monkeypatch):
    # typer 0.2x turns a KeyboardInterrupt into a silent exit 130: Ctrl-C while the plan was
    # made (a Slurm machine record, a --python probe, a large --data folder) said nothing
    from compare.stages import plan

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(plan, "make", interrupted)
    code, out, err = main_exit(["run", "--frameworks", "caffe2", "--device", "cpu", "--executor",
                                "local", "--results", str(tmp_path / "c"), "--plan"], capsys)
    assert (code, err.splitlines()[-1:]) == (130, ["compare: interrupted; results recorded so far "
                                                   "are kept"])


def test_plan_says_which_executor_the_run_would_take(tmp_path, capsys):
    # --plan never said which executor auto would take, though its estimate depends on it
    code, out, err = main_exit(["run", "--frameworks", "caffe2", "--device", "cpu", "--executor",
                                "local", "--results", str(tmp_path / "c"), "--plan"], capsys)
    assert code == 0 and "executor: local (--executor local)" in err, err
