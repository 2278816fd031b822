"""The campaign folder: its lock, corrupt files as one-line errors, text made safe to print."""
import fcntl
import os
import subprocess
import sys

import pytest

from compare.errors import UserError
from compare.store import Campaign, clean_text
from tests.helpers import MACHINE, main_exit, result


def _campaign(tmp_path):
    c = Campaign.create(tmp_path / "c", {"test": True}, MACHINE)
    c.save_result(result("caffe2", "fp32", 1, 100.0))
    return c


def test_a_second_writer_is_refused_naming_the_pid_that_holds_the_lock(tmp_path):
    c = _campaign(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time\n"
                               "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
                               "fcntl.flock(fd, fcntl.LOCK_EX); os.write(fd, b'%d' % os.getpid())\n"
                               "print('locked', flush=True); time.sleep(60)", str(c.root / "lock")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        with pytest.raises(UserError, match=r"another `compare run` \(PID {}\) is running this "
                           r"campaign; wait for it to end or stop it, then --resume".format(holder.pid)):
            Campaign.open(c.root).lock()
    finally:
        holder.kill()
        holder.wait()
    # the holder is dead: its PID stays in the file, its lock went with it and is taken over
    assert (c.root / "lock").read_text() == str(holder.pid)
    again = Campaign.open(c.root)
    again.lock()
    assert (c.root / "lock").read_text() == "{}\n".format(os.getpid())
    with open(str(c.root / "lock")) as f:  # really held: a try from elsewhere fails
        with pytest.raises(OSError):
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    again.unlock()


@pytest.mark.parametrize("name,text,why", [
    ("campaign.json", "{not json", "campaign.json is corrupt (Expecting property name enclosed in double "
     "quotes: line 1 column 2 (char 1)); restore it or start a new campaign"),
    ("campaign.json", "[1, 2]", "campaign.json is corrupt (not a JSON object); restore it or start a new "
     "campaign"),
    ("machine.json", "\x00\x01", "machine.json is corrupt (Expecting value: line 1 column 1 (char 0)); "
     "restore it or start a new campaign"),
], ids=["campaign-garbage", "campaign-list", "machine-garbage"])
def test_a_corrupt_campaign_file_is_one_line_and_exit_2(tmp_path, capsys, name, text, why):
    c = _campaign(tmp_path)
    (c.root / name).write_text(text)
    for argv in (["report", str(c.root)], ["diff", str(c.root), str(c.root)],
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


def test_clean_text_removes_escape_sequences_and_shows_control_characters():
    assert clean_text("\x1b[1;31mred\x1b[0m \x1b]0;title\x07ok\r\nnext\x08\x00\tend") == \
        "red ok\nnext\\x08\\x00\tend"
