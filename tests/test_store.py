"""The campaign folder: its lock, corrupt files as one-line errors, text made safe to print."""
import fcntl
import json
import os
import re
import subprocess
import sys
import time

import pytest

from compare.errors import UserError
from compare.loading import clean_text
from compare.settings import FREE_FLAGS
from compare.store import Campaign
from tests.helpers import MACHINE, main_exit, result


def _campaign(tmp_path):
    c = Campaign.create(tmp_path / "c", {"test": True}, MACHINE)
    c.save_result(result("caffe2", "fp32", 1, 100.0))
    c.unlock()  # create() returns the campaign locked, as `compare run` goes on to write it
    return c


def test_a_second_writer_is_refused_naming_the_pid_that_holds_the_lock(tmp_path):
    c = _campaign(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time\n"
                               "fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)\n"
                               "fcntl.flock(fd, fcntl.LOCK_EX)\n"
                               "print('locked', flush=True); time.sleep(60)", str(c.root)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        with pytest.raises(UserError, match=r"another `compare run` \(PID {}\) is running this "
                           r"campaign; wait for it to end or stop it, then --resume".format(holder.pid)):
            Campaign.open(c.root).lock()
    finally:
        holder.kill()
        holder.wait()
    # the holder is dead: its lock went with it and is taken over; no file records a PID
    again = Campaign.open(c.root)
    again.lock()
    assert not os.path.lexists(str(c.root / "lock"))
    fd = os.open(str(c.root), os.O_RDONLY | os.O_DIRECTORY)
    try:  # really held: a try from elsewhere fails
        with pytest.raises(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)
    again.unlock()


@pytest.mark.parametrize("name,text,why", [
    ("campaign.json", "{not json", "campaign.json is corrupt: not valid JSON (Expecting property name "
     "enclosed in double quotes: line 1 column 2 (char 1)); restore it or start a new campaign"),
    ("campaign.json", "[1, 2]", "campaign.json is corrupt: not a JSON object; restore it or start a new "
     "campaign"),
    ("machine.json", "\x00\x01", "machine.json is corrupt: not valid JSON (Expecting value: line 1 column "
     "1 (char 0)); restore it or start a new campaign"),
    ("campaign.json", '{"kind": "compare-campaign", "created_at": 5}', "campaign.json is corrupt: "
     "created_at, id or a planned cell's hash is not text; restore it or start a new campaign"),
    ("campaign.json", '{"kind": "compare-campaign", "config": {"x": NaN}}', "campaign.json is corrupt: "
     "config.x is nan, not a finite number; restore it or start a new campaign"),
    ("campaign.json", '{"kind": "compare-campaign", "kind": "compare-campaign"}', "campaign.json is "
     "corrupt: not valid JSON (key 'kind' appears twice in one object: which value holds is not "
     "clear); restore it or start a new campaign"),
    ("campaign.json", '{"kind": "compare-campaign", "created_at": "x", "sessions": [{"n": %s}]}' % (
        "9" * 401), "campaign.json is corrupt: sessions[0].n is an integer of 401 digits; no number in a "
     "campaign file has more than 19; restore it or start a new campaign"),
    ("machine.json", '{"gpus": "8x H200"}', "machine.json is corrupt: gpus is '8x H200', not a list of "
     "objects; restore it or start a new campaign"),
    # what report, diff and history read of it: a TypeError further on before
    ("machine.json", '{"gpus": [{}]}', "machine.json is corrupt: gpus[0].name is missing, not a string; "
     "restore it or start a new campaign"),
    ("machine.json", '{"gpus": [], "git": {"commit": 5}}', "machine.json is corrupt: git.commit is 5, "
     "not a string; restore it or start a new campaign"),
    ("machine.json", '{"gpus": [], "cpu_model": ["x"]}', "machine.json is corrupt: cpu_model is ['x'], "
     "not a string; restore it or start a new campaign"),
], ids=["campaign-garbage", "campaign-list", "machine-garbage", "created-at-number", "campaign-nan",
        "campaign-duplicate-key", "campaign-401-digits", "machine-gpus-text", "machine-gpu-empty",
        "machine-commit-number", "machine-cpu-list"])
def test_a_corrupt_campaign_file_is_one_line_and_exit_2(tmp_path, capsys, name, text, why):
    c = _campaign(tmp_path)
    (c.root / name).write_text(text)
    for argv in (["report", str(c.root)], ["diff", str(c.root), str(c.root)], ["history", str(c.root)],
                 ["run", "--device", "cpu", "--executor", "local", "--resume", "--results", str(c.root)]):
        code, _, err = main_exit(argv, capsys)
        assert (code, err) == (2, "compare: error: {}: {}\n".format(c.root, why)), argv


def test_report_out_must_be_a_folder_that_can_be_written(tmp_path, capsys):
    c = _campaign(tmp_path)
    (tmp_path / "file").write_text("x")
    code, _, err = main_exit(["report", str(c.root), "--out", str(tmp_path / "file")], capsys)
    assert (code, err) == (2, "compare: error: --out {}: is a file, not a folder; give a folder "
                              "path\n".format(tmp_path / "file"))
    code, _, err = main_exit(["report", str(c.root), "--out", "/proc/1/report"], capsys)
    assert (code, err) == (2, "compare: error: --out /proc/1/report: /proc/1 is not writable; give a "
                              "folder you can write\n")
    code, _, err = main_exit(["diff", str(c.root), str(c.root), "--out", str(tmp_path / "file" / "d")],
                             capsys)
    assert (code, err) == (2, "compare: error: --out {0}: {1} is a file, not a folder; give a folder "
                              "path\n".format(tmp_path / "file" / "d", tmp_path / "file"))
    # without --out, the message names the campaign's report folder, not a flag that was not given
    (c.root / "report").write_text("x")
    code, _, err = main_exit(["report", str(c.root)], capsys)
    assert (code, err) == (2, "compare: error: the report folder (no --out given) {}: is a file, not a "
                              "folder; give a folder path\n".format(c.root / "report"))


def test_clean_text_removes_escape_sequences_and_shows_control_characters():
    assert clean_text("\x1b[1;31mred\x1b[0m \x1b]0;title\x07ok\r\nnext\x08\x00\tend") == \
        "red ok\nnext\\x08\\x00\tend"


def test_a_result_of_a_cell_never_planned_is_listed_and_left_out(tmp_path, capsys):
    from tests.helpers import save_campaign, windowed
    root = save_campaign(tmp_path / "c", [windowed("caffe2", "fp32", 1, [100.0, 101.0])])
    stray = windowed("caffe2", "fp32", 4, [300.0, 301.0])  # a 4-worker cell from elsewhere
    Campaign(root).save_result(stray)
    code, out, err = main_exit(["report", str(root)], capsys)
    assert code == 0
    assert ("compare: warning: skipped result {}.json: run {} is not a cell this campaign planned (a "
            "file from another campaign?); results of other cells are never mixed in\n".format(
                stray.run_id, stray.run_id)) in err
    assert "4 GPUs" not in out and "300.50" not in out
    assert "## Result files left out\n\n- skipped result {}.json: run {} is not a cell".format(
        stray.run_id, stray.run_id) in out  # the report says so too


def test_a_fifo_or_a_link_to_dev_zero_is_skipped_without_blocking(tmp_path):
    from tests.helpers import compare
    c = _campaign(tmp_path)
    os.mkfifo(str(c.root / "results" / "zz.json"))
    os.symlink("/dev/zero", str(c.root / "results" / "zero.json"))
    (c.root / "results" / "big.json").write_bytes(b" " * (16 * 2 ** 20 + 1))
    proc = compare(["report", c.root], timeout=60)  # a hang fails the test, not the suite
    assert proc.returncode == 0, proc.stderr
    assert "compare: warning: skipped corrupt result zz.json: not a regular file but a FIFO; only " \
           "regular files are read\n" in proc.stderr
    assert "compare: warning: skipped corrupt result zero.json: not a regular file but a device; " \
           "only regular files are read\n" in proc.stderr
    assert "compare: warning: skipped corrupt result big.json: 16777217 bytes, more than the " \
           "16777216 such a file may have\n" in proc.stderr
    (c.root / "machine.json").unlink()
    os.mkfifo(str(c.root / "machine.json"))
    proc = compare(["report", c.root], timeout=60)
    assert (proc.returncode, proc.stderr) == (2, "compare: error: {}: machine.json is corrupt: not a "
                                                 "regular file but a FIFO; only regular files are read; "
                                                 "restore it or start a new campaign\n".format(c.root))


def test_two_first_runs_into_one_folder_cannot_both_create_the_campaign(tmp_path, monkeypatch):
    import threading

    from compare import files, store
    slow = files.write_json

    def write_slowly(path, data, base=None):  # widen the window between looking for campaign.json and writing it
        time.sleep(0.3)
        slow(path, data, base)
    monkeypatch.setattr(files, "write_json", write_slowly)
    root, start, outcomes = tmp_path / "c", threading.Barrier(2), []

    def first_run(who):
        start.wait()
        try:
            store.Campaign.create(root, {"who": who}, MACHINE)
            outcomes.append("created")
        except UserError as exc:
            outcomes.append(str(exc))
    threads = [threading.Thread(target=first_run, args=(who,)) for who in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes)[1] == "created", outcomes
    assert re.fullmatch(r"--results {}: (another `compare run` \(PID ({}|unknown)\) is running this "
                        r"campaign; wait for it to end or stop it, then --resume|already holds a "
                        r"campaign; add --resume to continue it, or give a new folder)".format(
                            re.escape(str(root)), os.getpid()), sorted(outcomes)[0]), outcomes
    assert json.loads((root / "campaign.json").read_text())["config"]["who"] in ("a", "b")


def test_a_full_disk_under_results_is_one_line_naming_the_file(tmp_path, capsys, monkeypatch):
    import errno

    from compare import files
    from tests.helpers import FAST, fake_python
    root, fake = tmp_path / "c", fake_python(tmp_path)
    real, renamed = files.os.replace, []

    def replace(src, dst, **kw):  # the cell's spec is renamed into place, then its result: the
        if dst == "caffe2-fp32-w1-b4-s32-r0.json":  # disk is full by then
            renamed.append(dst)
            if len(renamed) == 2:
                raise OSError(errno.ENOSPC, "No space left on device")
        return real(src, dst, **kw)
    monkeypatch.setattr(files.os, "replace", replace)
    code, _, err = main_exit(["run", "--frameworks", "caffe2", "--results", str(root), "--python",
                              "caffe2={}".format(fake)] + FAST, capsys)
    path = root / "results" / "caffe2-fp32-w1-b4-s32-r0.json"
    assert (code, err.splitlines()[-1]) == (2, "compare: error: cannot write {} (No space left on "
                                               "device); free space, then run again (a campaign "
                                               "continues with --resume)".format(path))
    assert [p.name for p in (root / "results").iterdir()] == []  # no half-written file either


def test_an_out_folder_that_cannot_be_made_is_one_line(tmp_path, capsys):
    c = _campaign(tmp_path)
    code, _, err = main_exit(["diff", str(c.root), str(c.root), "--out", "/proc/x"], capsys)
    assert (code, err.splitlines()[-1]) == (2, "compare: error: --out /proc/x: cannot create the "
                                               "folder (No such file or directory); give a folder "
                                               "you can write")  # named by its flag, as --results


def test_a_cache_that_is_a_file_is_one_line_naming_it(tmp_path, capsys, monkeypatch):
    cache = tmp_path / "cache"
    cache.write_text("not a folder")
    monkeypatch.setenv("COMPARE_CACHE", str(cache))
    monkeypatch.setenv("COMPARE_NO_CURRENT", "1")  # the managed environment, in the cache
    code, _, err = main_exit(["run", "--frameworks", "caffe2", "--device", "cpu", "--executor", "local",
                              "--quick", "--results", str(tmp_path / "c")], capsys)
    # refused before the campaign is made (it was at the cell's environment, a campaign made)
    assert (code, err.splitlines()[-1]) == (2, "compare: error: COMPARE_CACHE {}: is a file, not a "
                                               "folder; give a folder compare may create or write (or "
                                               "unset it: ~/.cache/compare)".format(cache))
    assert not (tmp_path / "c").exists()


def test_a_campaign_without_settings_whose_results_disagree_is_not_resumed(tmp_path):
    from dataclasses import replace

    from backends.protocol import RunSpec
    from compare.settings import settings_of_results
    a = result("caffe2", "fp32", 1, 100.0)
    spec = replace(RunSpec.from_dict(a.spec), repeat=1, steps=11)
    b = replace(a, run_id=spec.run_id, spec=spec.to_dict())
    assert settings_of_results([a])["steps"] == 50
    with pytest.raises(UserError) as exc:
        settings_of_results([a, b])
    assert str(exc.value) == ("--resume: the campaign stored no settings (an earlier compare made it) "
                              "and its results disagree: steps 50 in caffe2-fp32-g1-b256-s224-r0 vs 11 in "
                              "caffe2-fp32-g1-b256-s224-r1; start a new campaign")
    with pytest.raises(UserError) as exc:  # as every other --resume line, it names the campaign
        settings_of_results([a, b], "--resume {}".format(tmp_path))
    assert str(exc.value).startswith("--resume {}: the campaign stored no settings".format(tmp_path))
    b = replace(a, run_id=spec.run_id, spec=replace(spec, steps=50, compile=True).to_dict())
    with pytest.raises(UserError) as exc:  # a value as campaign.json writes it, not Python's False
        settings_of_results([a, b])
    assert "its results disagree: compile false in caffe2-fp32-g1-b256-s224-r0 vs true in " in str(exc.value)


def _fake_run(tmp_path, capsys, root, *extra):
    from tests.helpers import FAST, fake_python
    args = ["run", "--frameworks", "caffe2", "--results", str(root), "--python",
            "caffe2={}".format(fake_python(tmp_path))] + FAST + list(extra)
    code, _, err = main_exit(args, capsys)
    assert code == 0, err
    return args, err


def test_a_result_of_another_campaign_with_the_same_settings_is_left_out(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "500")  # rich wraps at 80 columns when stderr is no terminal
    args, _ = _fake_run(tmp_path, capsys, tmp_path / "a")
    _fake_run(tmp_path, capsys, tmp_path / "b")  # the same settings, another campaign
    name = "caffe2-fp32-w1-b4-s32-r0.json"
    copied = (tmp_path / "b" / "results" / name).read_text()
    (tmp_path / "a" / "results" / name).write_text(copied)
    code, out, err = main_exit(["report", str(tmp_path / "a")], capsys)
    assert code == 0
    assert ("compare: warning: skipped result {}: its nonce {} is not one of this campaign's attempts "
            "(a result copied from another campaign?); only results of its own runs count\n".format(
                name, json.loads(copied)["nonce"])) in err
    assert "No results yet." in out
    _, err = _fake_run(tmp_path, capsys, tmp_path / "a", "--resume")
    assert "1 cell, 1 to run" in err  # run again, the copy replaced
    assert (tmp_path / "a" / "results" / name).read_text() != copied


def test_a_result_naming_another_machines_device_is_left_out(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "500")
    from backends.machine import cpu_model
    _fake_run(tmp_path, capsys, tmp_path / "a")
    path = tmp_path / "a" / "results" / "caffe2-fp32-w1-b4-s32-r0.json"
    data = json.loads(path.read_text())
    assert data["device_name"] == cpu_model()  # what a run on this machine records
    data["device_name"] = "Other CPU @ 9.99GHz"
    path.write_text(json.dumps(data))
    code, _, err = main_exit(["report", str(tmp_path / "a")], capsys)
    assert ("compare: warning: skipped result {}: it ran on Other CPU @ 9.99GHz, not on this campaign's "
            "machine (CPU {}); results of another machine are never mixed in\n".format(
                path.name, cpu_model())) in err


def test_a_gpu_result_must_name_a_gpu_of_the_campaigns_machine(tmp_path, capsys):
    from tests.helpers import save_campaign
    here = result("caffe2", "fp32", 1, 100.0)  # NVIDIA RTX A6000, as MACHINE's GPUs
    v100 = result("caffe2", "fp16", 1, 300.0, device_name="Tesla V100-PCIE-16GB")
    root = save_campaign(tmp_path / "c", [here, v100], MACHINE)
    code, out, err = main_exit(["report", str(root)], capsys)
    assert code == 0
    assert ("compare: warning: skipped result {}.json: it ran on Tesla V100-PCIE-16GB, not on this "
            "campaign's machine (GPUs NVIDIA RTX A6000); results of another machine are never mixed "
            "in\n".format(v100.run_id)) in err
    assert "100.00" in out and "300.00" not in out


@pytest.mark.parametrize("device,gpus,same", [
    ("NVIDIA RTX A6000", ["NVIDIA RTX A6000"], True),
    ("Tesla V100-PCIE-32GB", ["Tesla V100-SXM2-16GB"], True),  # one model, two boards
    ("NVIDIA GPU 0", ["NVIDIA H200"], True),  # MXNet's name where the driver lists none: no model
    ("gpu", ["NVIDIA H200"], True),  # TensorFlow's where its device details name none
    ("NVIDIA H100 80GB HBM3", ["NVIDIA H200"], False),
    ("NVIDIA RTX A1000", ["NVIDIA RTX A100"], False),
    ("Tesla T4", [], True),  # a machine record without GPUs names none to hold it to
], ids=["same", "same-model", "mxnet-generic", "tf-generic", "h100-on-h200", "a1000-on-a100",
        "no-gpus-recorded"])
def test_a_gpus_name_is_held_to_the_model_words_of_the_machines(device, gpus, same):
    from compare import validate
    machine = dict(MACHINE, gpus=[{"name": g} for g in gpus])
    assert (validate.other_machine("cuda", device, machine) is None) == same


def test_a_clusters_record_holds_no_device_to_one_nodes_model():
    from compare import validate
    node = dict(MACHINE, cpu_model="AMD EPYC 7543", slurm={"partitions": [], "placement": []})
    assert validate.other_machine("cpu", "Intel Xeon Gold 6130", dict(node, slurm=None)) is not None
    assert validate.other_machine("cpu", "Intel Xeon Gold 6130", node) is None  # another node type


def test_resuming_with_another_executor_names_the_flag_that_keeps_the_campaigns(tmp_path):
    c = Campaign.create(tmp_path / "c", {}, MACHINE, settings={"executor": "local", "steps": 2})
    c.unlock()
    with pytest.raises(UserError) as caught:
        Campaign.open(c.root).resume({}, {"executor": "docker", "steps": 2}, free=FREE_FLAGS)
    assert str(caught.value) == (
        "--resume {}: settings differ from the campaign's: executor local (campaign) vs docker (now); "
        "resume with the campaign's settings or start a new campaign (--frameworks, --gpus, --nodes, "
        "--precision, --batch-size, --mode, --repeats, --timeout, --data, --data-only, --model, "
        "--concurrency and --gpu-hour-price may change); --executor local keeps the campaign's "
        "executor".format(c.root))


def test_a_probe_whose_write_was_cut_short_is_not_read_as_a_second_probe(tmp_path):
    """A compare killed between writing a probe and renaming it into place leaves a whole
    `.tmp-*` copy beside it: `compare report` listed that search's probe twice."""
    c = _campaign(tmp_path)
    probe = result("caffe2", "fp32", 1, 90.0)
    c.save_probe(probe)
    (c.root / "probes" / ".tmp-4242-0a1b2c3d.json").write_text(
        (c.root / "probes" / (probe.run_id + ".json")).read_text())
    assert [p.run_id for p in c.probes()] == [probe.run_id]
