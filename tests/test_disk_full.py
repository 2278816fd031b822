"""A full disk is a user's problem with a user's answer (issue 37): one line naming the path and
what to do, exit 2, nothing already written damaged, and the campaign resumable once there is
space. The campaign lives on a small tmpfs (mounting one needs root; skipped otherwise)."""
import errno
import json
import os
import subprocess

import pytest

from tests.helpers import FAST, compare, fake_python

CELL = "caffe2-fp32-w1-b4-s32-r0"


@pytest.fixture
def tmpfs(tmp_path):
    mnt = tmp_path / "fs"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root): " + done.stderr.strip())
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _resize(mnt, size):
    subprocess.run(["mount", "-o", "remount,size=" + size, str(mnt)], check=True)


def _fill(mnt):
    """Fill the file system to the last byte; return the filler's path."""
    filler = mnt / "filler"
    with open(str(filler), "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


def _args(tmp_path, root):
    return ["run", "--frameworks", "caffe2", "--results", root, "--python",
            "caffe2={}".format(fake_python(tmp_path))] + FAST


def _one_line_no_space(proc, under):
    """The run's last line says which file could not be written, and to free space."""
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.splitlines()[-1]
    assert last.startswith("compare: error: ") and len(last) < 400, last
    assert str(under) in last and "(No space left on device); free space" in last, last
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr


def test_a_full_disk_while_staging_code_is_one_line_and_the_campaign_resumes(tmp_path, tmpfs):
    root = tmpfs / "c"
    proc = compare(_args(tmp_path, root), timeout=120)  # 200 KB: the campaign fits, its code not
    _one_line_no_space(proc, root)
    _resize(tmpfs, "20m")
    again = compare(_args(tmp_path, root) + ["--resume"], timeout=120)
    assert again.returncode == 0, again.stderr
    assert json.loads((root / "results" / (CELL + ".json")).read_text())["status"] == "ok"
    assert [p.name for p in (root / "code").iterdir()] == ["backends"]  # no half copy left


def test_a_full_disk_mid_campaign_then_space_freed_finishes_it(tmp_path, tmpfs):
    _resize(tmpfs, "20m")
    root = tmpfs / "c"
    assert compare(_args(tmp_path, root), timeout=120).returncode == 0
    first = (root / "results" / (CELL + ".json")).read_bytes()
    filler = _fill(tmpfs)
    grown = _args(tmp_path, root) + ["--resume", "--precision", "fp32,bf16"]
    _one_line_no_space(compare(grown, timeout=120), root)
    assert (root / "results" / (CELL + ".json")).read_bytes() == first
    json.loads((root / "campaign.json").read_text())  # whole: written aside and renamed
    filler.unlink()
    again = compare(grown, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "2 cells, 1 to run" in again.stderr
    assert (root / "results" / (CELL + ".json")).read_bytes() == first


def test_a_full_disk_while_reporting_keeps_the_last_report_whole(tmp_path, tmpfs):
    _resize(tmpfs, "20m")
    root = tmpfs / "c"
    assert compare(_args(tmp_path, root), timeout=120).returncode == 0
    before = {p.name: p.read_bytes() for p in (root / "report").iterdir() if p.is_file()}
    assert before["report.html"]
    filler = _fill(tmpfs)
    proc = compare(["report", root, "--format", "md,csv,html"], timeout=120)
    _one_line_no_space(proc, root / "report")
    after = {p.name: p.read_bytes() for p in (root / "report").iterdir() if p.is_file()}
    assert after == before  # no file emptied or cut short
    assert not [n for n in os.listdir(str(root / "report")) if n.startswith(".tmp")]
    filler.unlink()
    assert compare(["report", root, "--format", "md,csv,html"], timeout=120).returncode == 0


def test_a_read_only_campaign_is_one_line_and_its_files_stay(tmp_path, tmpfs):
    _resize(tmpfs, "20m")
    root = tmpfs / "c"
    assert compare(_args(tmp_path, root), timeout=120).returncode == 0
    before = {str(p): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    try:
        for args in (_args(tmp_path, root) + ["--resume", "--precision", "fp32,bf16"],
                     ["report", root, "--format", "md,html"]):
            proc = compare(args, timeout=120)
            last = proc.stderr.splitlines()[-1]
            assert proc.returncode == 2 and str(root) in last and "read-only file system" in \
                last.lower() and "give a folder on a writable one" in last, proc.stderr
            assert "internal error" not in proc.stderr
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(tmpfs)], check=True)
    assert {str(p): p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def test_a_full_disk_as_data_make_writes_its_manifest_leaves_none_half_written(tmp_path, tmpfs):
    """The disk fills after the last image, as make.json is written: one line naming it, and no
    make.json cut short (a later `compare data make` would read it as other settings) nor a
    temp file left; with space again the same command makes the folder."""
    from compare import imagegen
    from compare.errors import UserError
    _resize(tmpfs, "20m")
    dest, spec, chunks = tmpfs / "d", imagegen.MakeSpec(images=4, classes=2, width=32, height=32), []

    def advance(images, nbytes):  # after each image: the last one fills the disk
        chunks.append(images)
        if sum(chunks) == spec.images:
            chunks.append(_fill(tmpfs))
    with pytest.raises(UserError) as raised:
        imagegen.make(dest, spec, 1, advance)
    assert str(raised.value).startswith("cannot write {} (No space left on device); free space, "
                                        "then run again".format(dest / "make.json"))
    assert sorted(os.listdir(str(dest))) == ["train"]
    chunks[-1].unlink()
    imagegen.make(dest, spec, 1, lambda n, b: None)
    assert imagegen.check_destination(dest, spec) is True
