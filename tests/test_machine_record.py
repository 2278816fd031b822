"""Provenance: the version is the package's own, the commit only that of this project's own
checkout (never the commit of a repository the source tree happens to sit in)."""
import json
import re
import shutil
import subprocess
import sys

from compare import __version__, machine_record
from tests.helpers import ROOT


def _git(cwd, *args):
    return subprocess.run(["git", "-C", str(cwd)] + list(args), capture_output=True, text=True,
                          check=True).stdout.strip()


def test_the_version_is_the_packages_own():
    declared = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    assert __version__ == declared
    assert machine_record.host_info()["compare_version"] == declared


def test_the_commit_is_this_checkouts():
    assert machine_record.git_commit()["commit"] == _git(ROOT, "rev-parse", "HEAD")


def test_a_copy_inside_another_repository_names_no_commit(tmp_path):
    outer = tmp_path / "outer"
    copy = outer / "vendor" / "compare-copy"
    for name in ("compare", "backends"):
        shutil.copytree(str(ROOT / name), str(copy / name),
                        ignore=shutil.ignore_patterns("__pycache__"))
    _git(tmp_path, "init", "-q", str(outer))
    _git(outer, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "x")
    proc = subprocess.run([sys.executable, "-c", "import json; from compare.machine_record import host_info; "
                           "print(json.dumps(host_info()))"], cwd=str(copy), capture_output=True,
                          text=True, timeout=120, check=True)
    info = json.loads(proc.stdout)
    assert info["git"] == {"commit": None, "dirty": None}  # not the enclosing repository's commit
    assert info["compare_version"] == __version__
