"""--resume reloads the campaign's Study (campaign.json keeps it): `compare run --results C --resume`
alone continues the campaign as it was made, flags given now change only what the declaration
lets change; a campaign file's study reloads without the file. A time-to-accuracy run killed
mid-training is run again as a new attempt, its partial MLPerf log kept aside, marked aborted.
The backend is a stand-in interpreter (tests/helpers.py FAKE_PYTHON, and a trainer that learns)."""
import json
import sys

import pytest

from tests.helpers import ANSWERS, FAST, compare, failing_python, fake_python, main_exit, write_python

# a stand-in for caffe2's python in time-to-accuracy cells: the real harness and loop with a
# trainer whose top-1 rises 0.3 an epoch; KILL: the first attempt kills itself in epoch 2
TTA_PYTHON = '''#!{python}
import os, sys, time
''' + ANSWERS + '''from backends import harness
from backends.trainer import Trainer
marker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "killed-once")


class Climber(Trainer):
    def __init__(self, spec):
        self.spec, self.steps = spec, 0

    def steps_per_epoch(self):
        return 2

    def set_learning_rate(self, lr):
        pass

    def step(self):
        if {kill} and self.steps == 3 and not os.path.exists(marker):  # in epoch 2
            open(marker, "w").close()
            os.kill(os.getpid(), 9)
        time.sleep(0.01)
        self.steps += 1

    def evaluate(self):
        return min(4, 2 * self.steps // 3), 4  # val/ holds 4 images

    def warm_up(self):
        pass

    def loss(self):
        return 1.0 / (1 + self.steps)

    def describe(self):  # the CPU's name, as every backend names it on a CPU
        return {{"framework_version": "fake 1.0", "device_name": harness.cpu_name()}}


sys.exit(harness.main(Climber, sys.argv[-2:]))
'''


@pytest.fixture()
def fake(tmp_path):
    return fake_python(tmp_path)


def _held(campaign, said):
    """The line a --resume that changes a held setting gets: what was said, then the rule."""
    return "compare: error: --resume {}: {}: held by the campaign (they change what its cells measure); " \
           "leave them out (the campaign's are used) or start a new campaign\n".format(campaign, said)


def _run(argv, capsys):
    code, out, err = main_exit([str(a) for a in argv], capsys)
    return code, err


def test_resume_alone_continues_the_study_as_it_was_made(tmp_path, fake, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "500")
    campaign = tmp_path / "c"
    code, err = _run(["run", "--frameworks", "caffe2", "--python", "caffe2={}".format(fake),
                      "--results", campaign] + FAST, capsys)
    assert code == 0, err
    meta = json.loads((campaign / "campaign.json").read_text())
    made = meta["sessions"][0]["config"]["study"]
    assert (made["frameworks"], made["steps"], made["batch_size"]) == (["caffe2"], 3, [4])
    code, err = _run(["run", "--results", campaign, "--resume"], capsys)  # no other flag
    assert code == 0 and "1 cell, 0 to run" in err, err
    code, err = _run(["run", "--results", campaign, "--resume", "--repeats", "2"], capsys)  # FREE
    assert code == 0 and "2 runs of 1 cell, 1 to run" in err, err
    sessions = json.loads((campaign / "campaign.json").read_text())["sessions"]
    assert [s["config"]["study"]["repeats"] for s in sessions] == [1, 1, 2]
    assert sessions[2]["config"]["study"]["python"] == made["python"]  # reloaded, not given
    code, err = _run(["run", "--results", campaign, "--resume", "--steps", "5", "--compile"], capsys)
    assert (code, err) == (2, _held(campaign, "--steps 5 (the campaign's: 3); --compile (the campaign's: "
                                              "--no-compile)"))


def test_resume_takes_the_executor_the_campaign_ran_with_when_named(tmp_path, fake, capsys,
                                                                   monkeypatch):
    """A campaign of --executor auto that ran local: a settings error on resume advises --executor
    local, which was refused as held ("the campaign's: auto"); naming the executor that ran is
    the campaign's own, another is refused naming both."""
    monkeypatch.setenv("COLUMNS", "500")
    campaign = tmp_path / "c"
    fast = [a for a in FAST if a not in ("--executor", "local")]
    code, err = _run(["run", "--frameworks", "caffe2", "--python", "caffe2={}".format(fake),
                      "--results", campaign] + fast, capsys)
    assert code == 0 and "executor: local (" in err, err
    code, err = _run(["run", "--results", campaign, "--resume", "--executor", "docker"], capsys)
    assert (code, err) == (2, _held(campaign, "--executor docker (the campaign's: auto, which ran local)"))
    code, err = _run(["run", "--results", campaign, "--resume", "--executor", "local", "--repeats",
                      "2"], capsys)
    assert code == 0 and "2 runs of 1 cell, 1 to run" in err, err
    code, err = _run(["run", "--results", campaign, "--resume", "--executor", "docker"], capsys)
    assert (code, err) == (2, _held(campaign, "--executor docker (the campaign's: local)"))


def test_a_campaign_files_study_reloads_without_the_file_and_the_report_says_where_each_came_from(
        tmp_path, fake, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "500")
    path, campaign = tmp_path / "study.toml", tmp_path / "c"
    path.write_text('frameworks = "caffe2"\npython = ["caffe2={}"]\ndevice = "cpu"\nexecutor = "local"\n'
                    'batch_size = [4]\nimage-size = 32\nsteps = 3\nwarmup = 1\nwindows = 1\n'
                    'precision = ["fp32", "bf16"]\n'.format(fake))
    code, err = _run(["run", "--config", path, "--precision", "fp32", "--results", campaign], capsys)
    assert code == 0, err
    report = (campaign / "report" / "report.md").read_text()
    assert "- from the campaign file {}: frameworks, batch_size, device, image_size, steps, warmup, " \
           "windows, python, executor\n".format(path) in report
    assert "- from flags given beside it, over the file's: precision\n" in report
    assert "- at compare's defaults: gpus, nodes, batch_search, mode, repeats, timeout, compile, " \
           "quick, option" in report
    path.unlink()  # the campaign holds its study
    code, err = _run(["run", "--results", campaign, "--resume", "--precision", "fp32,bf16"], capsys)
    assert code == 0 and "2 cells, 1 to run" in err, err
    results = sorted(p.name for p in (campaign / "results").iterdir())
    assert results == ["caffe2-bf16-w1-b4-s32-r0.json", "caffe2-fp32-w1-b4-s32-r0.json"]


@pytest.mark.parametrize("edit,message", [
    (lambda m: m.update(settings={}), "--resume {c}: campaign.json holds no settings (an empty object): "
     "nothing would hold the resumed cells to the campaign's; restore it or start a new campaign"),
    (lambda m: m["planned"].update({"../../etc/x": "0123456789abcdef"}),
     "{c}: campaign.json is corrupt (planned cell '../../etc/x' is not a run id with its spec hash); "
     "restore it or start a new campaign"),
    (lambda m: m["planned"].update({"caffe2-fp32-w1-b4-s32-r0": "0123456789abcdef"}),
     "--resume {c}: cell caffe2-fp32-w1-b4-s32-r0 was planned with other settings (spec hash "
     "0123456789abcdef, now {h}): resume with the campaign's (its --data, its options) or start a "
     "new campaign"),
    (lambda m: m["sessions"][-1]["config"].update(sources=["frameworks"]), "--resume {c}: campaign.json is "
     "corrupt (its latest session's sources are a list, not an object); restore it or start a new campaign"),
    (lambda m: m["sessions"][-1]["config"].update(sources=None), "--resume {c}: campaign.json is "
     "corrupt (its latest session's sources are null, not an object); restore it or start a new campaign"),
    (lambda m: m["sessions"][-1]["config"].update(study=["caffe2"]), "--resume {c}: campaign.json is "
     "corrupt (its latest session's study is a list, not an object); restore it or start a new campaign"),
    (lambda m: m["sessions"][-1]["config"].update(study=None), "--resume {c}: campaign.json is "
     "corrupt (its latest session's study is null, not an object); restore it or start a new campaign"),
    (lambda m: m["sessions"][-1].update(config="study"), "--resume {c}: campaign.json is corrupt (its "
     "latest session's config is a string, not an object); restore it or start a new campaign"),
    (lambda m: m["sessions"].append(7), "--resume {c}: campaign.json is corrupt (its latest session is "
     "a number, not an object); restore it or start a new campaign"),
    # a raw Python error said it: "does not load again ('int' object is not iterable)"
    (lambda m: m["sessions"][-1]["config"]["study"].update(executor_flags=7), "--resume {c}: campaign.json "
     "is corrupt (its latest session's study has executor_flags a number, not an object); restore it or "
     "start a new campaign"),
    (lambda m: m["sessions"][-1]["config"]["study"].update(executor_flags=["x"]), "--resume {c}: "
     "campaign.json is corrupt (its latest session's study has executor_flags a list, not an object); "
     "restore it or start a new campaign"),
], ids=["empty-settings", "planned-id", "planned-hash", "sources", "sources-null", "study", "study-null",
        "config", "session", "executor-flags", "executor-flags-list"])
def test_a_tampered_campaign_json_does_not_resume(edit, message, tmp_path, fake, capsys):
    campaign, planned, code, err = _resumed_after(edit, tmp_path, fake, capsys)
    assert (code, err) == (2, "compare: error: {}\n".format(message.format(
        c=campaign, h=planned["caffe2-fp32-w1-b4-s32-r0"])))


def _resumed_after(edit, tmp_path, fake, capsys):
    """(the campaign, its planned cells, the exit code and stderr of its --resume) for a campaign
    of one fast cell whose campaign.json `edit` changed before the resume."""
    campaign = tmp_path / "c"
    code, err = _run(["run", "--frameworks", "caffe2", "--python", "caffe2={}".format(fake),
                      "--results", campaign] + FAST, capsys)
    assert code == 0, err
    meta = json.loads((campaign / "campaign.json").read_text())
    planned = dict(meta["planned"])
    edit(meta)
    (campaign / "campaign.json").write_text(json.dumps(meta))
    return (campaign, planned) + _run(["run", "--results", campaign, "--resume"], capsys)


@pytest.mark.parametrize("study,message", [
    ({"gpus": ["abc"]}, "gpus 'abc': not an integer; give integers >= 1, e.g. 1,2); restore it, give "
                        "--gpus anew, or start a new campaign"),
    ({"precision": ["fp8"]}, "precision: unknown precision 'fp8'; choose from fp32, tf32, fp16, bf16); "
                             "restore it, give --precision anew, or start a new campaign"),
    ({"steps": 0}, "steps 0: must be >= 1); restore it or start a new campaign"),
    ({"model": ["nope"]}, "model: unknown model 'nope'; choose from "),
    ({"compile": "yes"}, 'compile = "yes": give true or false); restore it or start a new campaign'),
    # an executor's flag given now does not replace the stored one: no "give it anew"
    ({"executor_flags": {"time_limit": ["1h"]}}, 'executor_flags.time_limit = ["1h"]: give one value, '
     'not a list); restore it or start a new campaign\n'),
], ids=["gpus", "precision", "steps", "model", "compile", "executor-flag"])
def test_a_tampered_study_value_is_named_as_campaign_jsons_key(study, message, tmp_path, fake, capsys):
    # it was named by its flag ("does not load again (--gpus 'abc': ...)"), a flag no one typed
    campaign, _, code, err = _resumed_after(
        lambda m: m["sessions"][-1]["config"]["study"].update(study), tmp_path, fake, capsys)
    assert code == 2 and err.startswith("compare: error: --resume {}: campaign.json is corrupt (its latest "
                                        "session's study has {}".format(campaign, message)), err
    assert err.count("\n") == 1


def test_a_time_to_accuracy_run_killed_mid_training_runs_again_and_keeps_its_partial_log(tmp_path):
    from compare import learnable
    from compare.imagegen import make
    data = tmp_path / "data"
    make(data, learnable.LearnableSpec(classes=2, train_per_class=4, val_per_class=2), 1,
         lambda n, b: None)
    python = tmp_path / "tta-python"
    write_python(python, TTA_PYTHON.format(python=sys.executable, kill=True))
    campaign, run_id = tmp_path / "c", "caffe2-fp32-w1-b2-s32-real-tta-r0"
    argv = ["run", "--frameworks", "caffe2", "--python", "caffe2={}".format(python), "--device", "cpu",
            "--executor", "local", "--data", data, "--target-accuracy", "0.9", "--max-epochs", "4",
            "--batch-size", "2", "--image-size", "32", "--gpu-hour-price", "3", "--results", campaign]
    first = compare(argv)
    assert first.returncode == 1, first.stderr  # a failed run: exit 1, and --resume runs it again
    killed = json.loads((campaign / "results" / (run_id + ".json")).read_text())
    assert killed["status"] == "failed" and "killed by SIGKILL" in killed["reason"]
    aborted = list((campaign / "logs").glob(run_id + ".*.aborted.mllog"))
    assert len(aborted) == 1 and killed["accuracy"]["aborted_mllog"] == "logs/" + aborted[0].name
    log = aborted[0].read_text()
    assert '"key": "epoch_start"' in log and '"key": "run_stop"' not in log  # killed in epoch 2
    # written when the run failed, before any resume: what happened, and what --resume does
    assert log.splitlines()[-1] == (
        "# compare: attempt aborted (failed: {}); recorded as failed: `compare run --results {} "
        "--resume` runs the cell again as a new attempt".format(killed["reason"].splitlines()[0],
                                                               campaign))
    again = compare(["run", "--results", campaign, "--resume"])  # the study reloads, price and all
    assert again.returncode == 0 and "1 cell, 1 to run" in again.stderr, again.stderr
    done = json.loads((campaign / "results" / (run_id + ".json")).read_text())
    assert done["status"] == "ok" and done["accuracy"]["epochs_to_target"] == 3
    assert done["accuracy"]["mllog"] == "logs/{}.mllog".format(run_id)
    assert list((campaign / "logs").glob(run_id + ".*.aborted.mllog")) == aborted  # still kept
    assert "## Time to accuracy (minutes to target)" in again.stdout and "$ to target" in again.stdout


def test_a_time_to_accuracy_run_stopped_by_ctrl_c_keeps_its_log_marked_interrupted(tmp_path):
    # its log said "failed: killed by SIGTERM … wrote no result; the cell ran again as a new
    # attempt": it was not a failure (the sweep stopped it, and recorded nothing), nor run again
    import signal

    from compare import learnable
    from compare.imagegen import make
    from tests.helpers import start_compare, wait_for
    data = tmp_path / "data"
    make(data, learnable.LearnableSpec(classes=2, train_per_class=4, val_per_class=2), 1,
         lambda n, b: None)
    python = tmp_path / "tta-python"  # the first attempt waits in epoch 2 to be stopped
    write_python(python, TTA_PYTHON.format(python=sys.executable, kill=True).replace(
        "os.kill(os.getpid(), 9)", "time.sleep(300)"))
    campaign, run_id = tmp_path / "c", "caffe2-fp32-w1-b2-s32-real-tta-r0"
    argv = ["run", "--frameworks", "caffe2", "--python", "caffe2={}".format(python), "--device", "cpu",
            "--executor", "local", "--data", data, "--target-accuracy", "0.9", "--max-epochs", "4",
            "--batch-size", "2", "--image-size", "32", "--results", campaign]
    proc = start_compare(argv)
    try:
        assert wait_for(lambda: (tmp_path / "killed-once").exists(), 120), "epoch 2 never came"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert not (campaign / "results" / (run_id + ".json")).exists()  # the stopped cell: no result
    aborted = list((campaign / "logs").glob(run_id + ".*.aborted.mllog"))
    assert len(aborted) == 1 and '"key": "epoch_start"' in aborted[0].read_text()
    assert aborted[0].read_text().splitlines()[-1] == (
        "# compare: attempt aborted (interrupted: compare was stopped while it ran); not recorded: "
        "`compare run --results {} --resume` runs the cell again as a new attempt".format(campaign))
    again = compare(["run", "--results", campaign, "--resume"])
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads((campaign / "results" / (run_id + ".json")).read_text())["status"] == "ok"
    assert list((campaign / "logs").glob(run_id + ".*.aborted.mllog")) == aborted


def _earlier_campaign(tmp_path):
    """A copy of tests/fixtures/campaign_cpu (written at 3f40005: campaign.json's `config` is that
    compare's RunConfig, no study), made this machine's: its machine.json and its results' CPU (a
    result of another CPU model is never resumed)."""
    import shutil

    from compare import machine_record
    from tests.reporting.test_golden_campaign import FIXTURE
    campaign = tmp_path / "c"
    shutil.copytree(str(FIXTURE / "campaign"), str(campaign))
    record = machine_record.info()
    (campaign / "machine.json").write_text(json.dumps(record))
    for path in (campaign / "results").iterdir():
        result = json.loads(path.read_text())
        path.write_text(json.dumps(dict(result, device_name=record["cpu_model"]), indent=2))
    return campaign


def test_a_campaign_of_the_earlier_format_resumes_and_reports(tmp_path, capsys, monkeypatch):
    # its study is rebuilt from that config (kept.study_of_config): `--resume` alone continues
    # it as it was made; a held setting given anew is checked as it resolves, against the settings
    # it stored; from then on it keeps its study
    monkeypatch.setenv("COLUMNS", "500")
    campaign = _earlier_campaign(tmp_path)
    before = {p.name: p.read_bytes() for p in (campaign / "results").iterdir()}
    meta = (campaign / "campaign.json").read_bytes()
    for plan_only in (["--plan"], []):  # --plan refuses what the run refuses, and writes nothing
        code, err = _run(["run", "--results", campaign, "--resume", "--steps", "50"] + plan_only,
                         capsys)
        assert (code, err) == (2, "compare: error: --resume {}: settings differ from the campaign's: "
                                  "steps 2 (campaign) vs 50 (now); resume with the campaign's settings "
                                  "or start a new campaign (--frameworks, --gpus, --nodes, --precision, "
                                  "--batch-size, --mode, --repeats, --timeout, --data, --data-only, "
                                  "--model, --concurrency and --gpu-hour-price may change)\n".format(
                                      campaign))
        assert (campaign / "campaign.json").read_bytes() == meta
    code, err = _run(["run", "--results", campaign, "--resume", "--plan"], capsys)
    assert code == 0 and (campaign / "campaign.json").read_bytes() == meta, err
    code, err = _run(["run", "--results", campaign, "--resume"], capsys)  # no other flag
    assert code == 0 and "4 runs of 2 cells, 0 to run" in err, err
    assert {p.name: p.read_bytes() for p in (campaign / "results").iterdir()} == before
    assert "| PyTorch (Caffe2) | fp32 | 32 | 32 | 9.36 | 58.47 (6.246 ±7.773) |" in (
        campaign / "report" / "report.md").read_text()
    study = json.loads((campaign / "campaign.json").read_text())["sessions"][-1]["config"]["study"]
    assert (study["frameworks"], study["gpus"], study["precision"], study["batch_size"], study["steps"],
            study["warmup"], study["windows"], study["image_size"], study["repeats"]) == (
        ["caffe2"], [1, 2], ["fp32"], [32], 2, 1, 2, 32, 2)
    code, err = _run(["run", "--results", campaign, "--resume", "--plan", "--steps", "50"], capsys)
    assert (code, err) == (2, _held(campaign, "--steps 50 (the campaign's: 2)"))


def test_an_earlier_campaign_that_does_not_say_a_setting_asks_for_its_flag(tmp_path, capsys,
                                                                            monkeypatch):
    # what its config does not say, its results' specs do; with no result either, one line names
    # the flags to give
    import shutil
    monkeypatch.setenv("COLUMNS", "500")
    campaign = _earlier_campaign(tmp_path)
    meta = json.loads((campaign / "campaign.json").read_text())
    for config in [meta["config"]] + [s["config"] for s in meta["sessions"]]:
        del config["frameworks"], config["common"]["steps"]
    (campaign / "campaign.json").write_text(json.dumps(meta))
    code, err = _run(["run", "--results", campaign, "--resume"], capsys)
    assert code == 0 and "4 runs of 2 cells, 0 to run" in err, err
    (campaign / "campaign.json").write_text(json.dumps(meta))  # as it was: no study stored
    shutil.rmtree(str(campaign / "results"))
    (campaign / "results").mkdir()
    code, err = _run(["run", "--results", campaign, "--resume", "--plan"], capsys)
    assert (code, err) == (2, "compare: error: --resume {}: the campaign was made by an earlier compare, "
                              "which stored no study, and its campaign.json does not say its "
                              "frameworks, steps; give --frameworks LIST --steps VALUE as the campaign "
                              "was made\n".format(campaign))
    code, out, err = main_exit(["run", "--results", str(campaign), "--resume", "--plan", "--frameworks",
                                "caffe2", "--steps", "2"], capsys)
    assert code == 0 and out.startswith("plan: 4 runs of 2 cells on "), err


def test_a_resume_reads_campaign_json_once_for_the_study_and_once_under_the_lock(tmp_path, fake, capsys,
                                                                              monkeypatch):
    """The study, the executor it ran with and the steps it resolved come from one reading
    (Study.campaign); prepare reads it again once it holds the lock (the resume's checks, the plan
    and the finished cells share that reading)."""
    import traceback
    from collections import Counter

    from compare import store
    monkeypatch.setenv("COLUMNS", "500")
    campaign = tmp_path / "c"
    code, err = _run(["run", "--frameworks", "caffe2", "--python", "caffe2={}".format(fake),
                      "--results", campaign] + FAST, capsys)
    assert code == 0, err
    reads, read = Counter(), store._read_json

    def counted(root, name):
        if name == "campaign.json":
            where = {(f.filename.split("/")[-1], f.name) for f in traceback.extract_stack()}
            reads["prepare" if ("prepare.py", "make") in where else "study" if {
                ("study.py", "build"), ("plan.py", "make")} & where else "other"] += 1
        return read(root, name)
    monkeypatch.setattr(store, "_read_json", counted)
    code, err = _run(["run", "--results", campaign, "--resume", "--repeats", "2"], capsys)
    assert code == 0 and "2 runs of 1 cell, 1 to run" in err, err
    assert (reads["study"], reads["prepare"]) == (1, 2)  # prepare: opened, then read once locked


def test_resume_plan_reads_campaign_json_once(tmp_path, fake, capsys, monkeypatch):
    """--resume --plan writes nothing: the study, the resume's checks, the cells planned before and
    the finished ones all come from one reading (Campaign.snapshot); the estimate reads the
    campaigns of its folder as ever (eta.earlier_results), this one among them."""
    import traceback
    from collections import Counter

    from compare import store
    campaign = tmp_path / "c"
    code, err = _run(["run", "--frameworks", "caffe2", "--python", "caffe2={}".format(fake),
                      "--results", campaign] + FAST, capsys)
    assert code == 0, err
    meta = (campaign / "campaign.json").read_bytes()
    reads, read = Counter(), store._read_json

    def counted(root, name):
        if name == "campaign.json":
            reads["estimate" if "earlier_results" in {f.name for f in traceback.extract_stack()}
                  else "plan"] += 1
        return read(root, name)
    monkeypatch.setattr(store, "_read_json", counted)
    code, out, err = main_exit(["run", "--results", str(campaign), "--resume", "--plan", "--repeats",
                                "2"], capsys)
    assert code == 0 and out.startswith("plan: 1 run of 1 cell on "), err
    assert reads["plan"] == 1 and (campaign / "campaign.json").read_bytes() == meta


def test_resume_plan_of_an_earlier_campaign_reads_campaign_json_once(tmp_path, capsys, monkeypatch):
    """A campaign of an earlier compare, its study rebuilt from its results' specs where its config
    does not say: those results are the ones of the reading the study was built from (they were
    read through a second reading of campaign.json, its planned cells and id)."""
    from collections import Counter

    from compare import store
    monkeypatch.setenv("COLUMNS", "500")
    campaign = _earlier_campaign(tmp_path)
    meta = json.loads((campaign / "campaign.json").read_text())
    for config in [meta["config"]] + [s["config"] for s in meta["sessions"]]:
        del config["frameworks"]  # its results' specs say them
    (campaign / "campaign.json").write_text(json.dumps(meta))
    reads, read = Counter(), store._read_json

    def counted(root, name):
        import traceback
        if name == "campaign.json" and "earlier_results" not in {
                f.name for f in traceback.extract_stack()}:
            reads["plan"] += 1
        return read(root, name)
    monkeypatch.setattr(store, "_read_json", counted)
    code, out, err = main_exit(["run", "--results", str(campaign), "--resume", "--plan"], capsys)
    assert code == 0 and out.startswith("plan: nothing to run on "), err
    assert reads["plan"] == 1


def test_a_held_setting_of_a_campaign_file_given_on_resume_names_the_file_and_key(tmp_path, fake, capsys,
                                                                                monkeypatch):
    campaign = tmp_path / "c"
    code, err = _run(["run", "--frameworks", "caffe2", "--python", "caffe2={}".format(fake),
                      "--results", campaign] + FAST, capsys)
    assert code == 0, err
    (tmp_path / "more.toml").write_text("steps = 5\nrepeats = 2\n")
    monkeypatch.chdir(tmp_path)
    code, err = _run(["run", "--config", "more.toml", "--results", campaign, "--resume"], capsys)
    assert (code, err) == (2, _held(campaign, "more.toml: steps 5 (the campaign's: 3)"))


def test_a_campaign_another_run_holds_is_named_as_the_campaign_file_gives_it(tmp_path, fake, capsys,
                                                                            monkeypatch):
    # check_new named a campaign file's results by file and key; the lock's refusal of a second
    # writer, its twin, still said "--results DIR: ... then --resume"
    import subprocess
    import sys
    campaign = tmp_path / "c"
    code, err = _run(["run", "--frameworks", "caffe2", "--python", "caffe2={}".format(fake),
                      "--results", campaign] + FAST, capsys)
    assert code == 0, err
    (tmp_path / "study.toml").write_text('results = "c"\nresume = true\n')
    monkeypatch.chdir(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time\n"
                               "fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)\n"
                               "fcntl.flock(fd, fcntl.LOCK_EX)\n"
                               "print('locked', flush=True); time.sleep(60)", str(campaign)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        code, err = _run(["run", "--config", "study.toml"], capsys)
    finally:
        holder.kill()
        holder.wait()
    assert (code, err.splitlines()[-1]) == (2, (
        "compare: error: study.toml: results {}: another `compare run` (PID {}) is running this "
        "campaign; wait for it to end or stop it, then resume = true").format(campaign, holder.pid))


def test_a_resume_that_leaves_a_framework_out_keeps_its_options_aside(tmp_path, fake, capsys, monkeypatch):
    """--frameworks may change on --resume: the campaign's option of a framework left out is no
    error (it was refused: `caffe2 is not in this run's --frameworks`), and a later resume with it
    is held to it as before; an option typed now is checked as ever."""
    monkeypatch.setenv("COLUMNS", "500")
    campaign = tmp_path / "c"
    code, err = _run(["run", "--frameworks", "caffe2,jax", "--python", "caffe2={}".format(fake), "--python",
                      "jax={}".format(fake), "--option", "caffe2.memory_limit_mb=4096", "--results",
                      campaign] + FAST, capsys)
    assert code == 0, err
    code, err = _run(["run", "--results", campaign, "--resume", "--frameworks", "jax", "--repeats", "2"],
                     capsys)
    assert code == 0 and "2 runs of 1 cell, 1 to run" in err, err
    code, err = _run(["run", "--results", campaign, "--resume", "--frameworks", "caffe2,jax"], capsys)
    assert code == 0 and "4 runs of 2 cells, 1 to run" in err, err  # its repeats: the latest session's, 2
    code, err = _run(["run", "--results", campaign, "--resume", "--frameworks", "jax", "--option",
                      "caffe2.memory_limit_mb=4096"], capsys)
    assert (code, err) == (2, "compare: error: --option caffe2.memory_limit_mb=4096: caffe2 is not in this "
                              "run's --frameworks (jax)\n")
    spec = json.loads((campaign / "results" / "caffe2-fp32-w1-b4-s32-r1.json").read_text())["spec"]
    assert spec["options"] == {"memory_limit_mb": 4096}


def test_a_held_setting_given_anew_is_named_as_its_user_gives_it(tmp_path, fake, capsys, monkeypatch):
    """A flag's value as the flag is typed (--compile, 8-64), a campaign file's as TOML writes it
    (true, "8-64", "docker"): never Python's True or a tuple's 8,64."""
    monkeypatch.setenv("COLUMNS", "500")
    campaign = tmp_path / "c"
    code, err = _run(["run", "--frameworks", "caffe2", "--python", "caffe2={}".format(fake),
                      "--results", campaign] + FAST, capsys)
    assert code == 0, err
    code, err = _run(["run", "--results", campaign, "--resume", "--batch-search", "8-64", "--compile"],
                     capsys)
    assert (code, err) == (2, _held(campaign, "--batch-search 8-64 (the campaign's: not given); --compile "
                                              "(the campaign's: --no-compile)"))
    (tmp_path / "more.toml").write_text('compile = true\nbatch_search = "8-64"\nexecutor = "docker"\n'
                                        'device = "cpu"\n')
    monkeypatch.chdir(tmp_path)
    code, err = _run(["run", "--config", "more.toml", "--results", campaign, "--resume"], capsys)
    assert (code, err) == (2, _held(campaign, "more.toml: compile true (the campaign's: false); more.toml: "
                                              "batch_search \"8-64\" (the campaign's: not given); more.toml: "
                                              "executor \"docker\" (the campaign's: \"local\")"))


def test_a_held_setting_of_an_earlier_campaign_is_named_in_campaign_json_words(tmp_path, capsys,
                                                                              monkeypatch):
    # its settings are checked as they resolve, by their campaign.json keys: JSON's true, and
    # not given for compare's own interpreter, not Python's False and None
    monkeypatch.setenv("COLUMNS", "500")
    campaign = _earlier_campaign(tmp_path)
    may = ("resume with the campaign's settings or start a new campaign (--frameworks, --gpus, --nodes, "
           "--precision, --batch-size, --mode, --repeats, --timeout, --data, --data-only, --model, "
           "--concurrency and --gpu-hour-price may change)\n")
    code, err = _run(["run", "--results", campaign, "--resume", "--plan", "--compile"], capsys)
    assert (code, err) == (2, "compare: error: --resume {}: settings differ from the campaign's: compile "
                              "false (campaign) vs true (now); {}".format(campaign, may))
    python = failing_python(tmp_path)
    code, err = _run(["run", "--results", campaign, "--resume", "--plan", "--python",
                      "caffe2={}".format(python)], capsys)
    assert (code, err) == (2, "compare: error: --resume {}: settings differ from the campaign's: "
                              "python.caffe2 not given (campaign) vs {} (now); {}".format(
                                  campaign, python, may))


@pytest.mark.parametrize("edit,what", [
    ({"python": ["caffe2=/usr/bin/python3"]}, "python a list, not an object"),
    ({"options": {"caffe2": 5}}, "options.caffe2 a number, not an object"),
    ({"model_batches": [32]}, "model_batches a list, not an object"),
    ({"batch_search": 8}, "batch_search a number, not a list"),
], ids=["python", "options", "model-batches", "batch-search"])
def test_an_earlier_campaign_whose_config_is_of_the_wrong_shape_is_corrupt(edit, what, tmp_path, capsys):
    # a RunConfig of the wrong JSON types is a bad copy or a hand edit: one line, not an internal error
    campaign = _earlier_campaign(tmp_path)
    meta = json.loads((campaign / "campaign.json").read_text())
    meta["sessions"][-1]["config"].update(edit)
    (campaign / "campaign.json").write_text(json.dumps(meta))
    code, err = _run(["run", "--results", campaign, "--resume", "--plan"], capsys)
    assert (code, err) == (2, "compare: error: --resume {}: campaign.json is corrupt (its latest session's "
                              "config, of an earlier compare, has {}); restore it or start a new "
                              "campaign\n".format(campaign, what))


def test_options_and_pythons_given_again_in_another_order_are_the_campaigns(tmp_path, fake, capsys,
                                                                            monkeypatch):
    # held by what they say: another order or spelling of the same options is no change
    monkeypatch.setenv("COLUMNS", "500")
    campaign = tmp_path / "c"
    _run(["run", "--frameworks", "caffe2", "--python", "caffe2={}".format(fake), "--results", campaign,
          "--option", "channels_last=true", "--option", "optimizer=foreach"] + FAST, capsys)
    for given in ("optimizer=foreach,channels_last=true", "caffe2.channels_last=1,optimizer=foreach"):
        code, out, err = main_exit(["run", "--results", str(campaign), "--resume", "--plan", "--option",
                                    given, "--python", "caffe2={}".format(fake)], capsys)
        assert code == 0 and out.startswith("plan: 1 cell on "), err
    code, err = _run(["run", "--results", campaign, "--resume", "--plan", "--option",
                      "channels_last=false,optimizer=foreach"], capsys)
    assert (code, err) == (2, _held(campaign, "--option channels_last=false,optimizer=foreach (the "
                                              "campaign's: channels_last=true,optimizer=foreach)"))
    from compare.study import _same
    assert _same("python", ("jax=/b", "caffe2=/a"), ["caffe2=/a", "jax=/b"], ["caffe2", "jax"])
    assert not _same("python", ("jax=/b",), ["caffe2=/a", "jax=/b"], ["caffe2", "jax"])
