"""The file list of a data folder (DIR/.compare/files.jsonl) holds any file name: a tab, a line
break, bytes that are not UTF-8 reach every reader and writer intact; an earlier compare's
files.tsv is still read."""
import json
import os

from backends import dataset as ds
from compare import datasets
from tests.test_data import make


def _odd_names(tmp_path, capsys):
    """A made folder plus copies of one JPEG under names a tab-separated list cannot hold: a tab, a
    line break, a byte that is not UTF-8; and a corrupt file whose name breaks lines."""
    make(tmp_path / "d", capsys=capsys)
    src = next((tmp_path / "d" / "train").rglob("*.JPEG"))
    odd = [src.parent / name for name in ("a\tb.JPEG", "c\nd.JPEG", os.fsdecode(b"e\xff.JPEG"))]
    for path in odd:
        path.write_bytes(src.read_bytes())
    (src.parent / "cut\n# x.JPEG").write_bytes(src.read_bytes()[:300])
    return datasets.check(datasets.open_folder(str(tmp_path / "d"))), odd


def test_a_tab_or_line_break_in_a_file_name_reaches_every_reader_intact(tmp_path, capsys):
    prepared, odd = _odd_names(tmp_path, capsys)
    files = dict(prepared.files())
    assert len(files) == 9 and all(os.path.relpath(str(p), str(tmp_path / "d")) in files for p in odd)
    assert {files[os.path.relpath(str(p), str(tmp_path / "d"))] for p in odd} == {0}  # their class
    # a native format's writer (writer_main) gets every file by a path it can open
    opened = []

    def write(prepared, files, folder, progress):
        for path, label in files:
            with open(path, "rb") as f:
                opened.append((path, label, len(f.read()) > 300))
            progress.advance()
        return {}
    assert ds.writer_main(write, "fmt", ["write", prepared.path]) == 0
    assert len(opened) == 9 and {str(p) for p in odd} <= {path for path, _, _ in opened}
    assert prepared.ready("fmt")
    # the corrupt one is listed on one line: its line break shown, not made
    assert "train/n00000000/cut\\n# x.JPEG (does not decode: " in datasets.summary(prepared)
    again = datasets.check(datasets.open_folder(str(tmp_path / "d")))  # reused as it is
    assert (again.fingerprint, dict(again.files())) == (prepared.fingerprint, files)


def test_a_file_list_of_an_earlier_compare_is_still_read(tmp_path, capsys):
    make(tmp_path / "d", capsys=capsys)
    prepared = datasets.check(datasets.open_folder(str(tmp_path / "d")))
    files = prepared.files()
    # what an earlier compare wrote: relative path <TAB> label <TAB> size <TAB> mtime_ns
    entries = {e[0]: e for e in datasets.open_folder(str(tmp_path / "d")).entries}
    os.remove(prepared.file_list_path())
    with open(os.path.join(prepared.path, "files.tsv"), "w") as f:
        f.writelines("{}\t{}\t{}\t{}\n".format(*entries[rel]) for rel, _ in files)
    assert ds.Prepared(prepared.path).files() == files
    checked = []
    real = datasets.check_jpeg
    datasets.check_jpeg = lambda p: checked.append(p) or real(p)
    manifest = os.path.join(prepared.path, ds.MANIFEST)
    with open(manifest) as f:
        stale = dict(json.load(f), fingerprint="of an earlier folder")
    with open(manifest, "w") as f:
        json.dump(stale, f)
    try:  # a folder to check again takes the earlier list's checks: no file is checked twice
        again = datasets.check(datasets.open_folder(str(tmp_path / "d")))
    finally:
        datasets.check_jpeg = real
    assert (checked, again.files()) == ([], files)
    assert sorted(os.listdir(prepared.path)) == ["files.jsonl", "manifest.json"]  # the old list gone
