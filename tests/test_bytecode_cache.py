"""A framework whose folder holds no bytecode, on a machine that would not write it there
(PYTHONDONTWRITEBYTECODE, a read-only install), is compiled from source by every process: torch's
~960 modules cost each cell 3-4 s on an H200's host (BENCHMARKS.md, 2026-12-05). The backends then
keep its bytecode under compare's compile caches (backends/caches.py: bytecode)."""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# one backend process's start as far as the bytecode goes: the harness's call, then the import;
# it prints the record and how many of fakefw's sources Python compiled
PROBE = """
import builtins, json, sys
compiled = []
real = builtins.compile
def counting(source, filename, *args, **kwargs):
    if "fakefw" in str(filename):
        compiled.append(filename)
    return real(source, filename, *args, **kwargs)
builtins.compile = counting
from backends import caches
caches.bytecode("fakefw")
import fakefw.layers
print(json.dumps({"record": caches.record(), "compiled": len(compiled),
                  "prefix": sys.pycache_prefix}))
"""


def _package(tmp_path: Path) -> Path:
    pkg = tmp_path / "site" / "fakefw"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import core\n")
    (pkg / "core.py").write_text("VALUE = 1\n")
    (pkg / "layers.py").write_text("from .core import VALUE\n")
    return pkg


def _start(tmp_path: Path, **env):
    variables = dict(os.environ, PYTHONPATH="{}:{}".format(ROOT, tmp_path / "site"),
                     COMPARE_CACHE=str(tmp_path / "cache"))
    for name in ("PYTHONPYCACHEPREFIX", "COMPARE_COMPILE_CACHE", "PYTHONDONTWRITEBYTECODE"):
        variables.pop(name, None)
    variables.update(env)
    out = subprocess.run([sys.executable, "-c", PROBE], env=variables, capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out.splitlines()[-1])


def test_a_framework_without_bytecode_is_compiled_once_into_the_cache_not_beside_it(tmp_path):
    pkg = _package(tmp_path)
    first = _start(tmp_path, PYTHONDONTWRITEBYTECODE="1")
    second = _start(tmp_path, PYTHONDONTWRITEBYTECODE="1")
    prefix = tmp_path / "cache" / "compile" / "python" / sys.implementation.cache_tag
    assert first["compiled"] == 3 and second["compiled"] == 0  # the second read what the first wrote
    assert first["record"]["python_bytecode"] == {
        "dir": str(prefix), "set_by": "COMPARE_COMPILE_CACHE",
        "why": "{} has no bytecode and PYTHONDONTWRITEBYTECODE is set".format(pkg)}
    assert not (pkg / "__pycache__").exists()  # nothing written into the user's install


def test_bytecode_beside_the_sources_or_a_prefix_of_the_users_is_left_alone(tmp_path):
    pkg = _package(tmp_path)
    mine = tmp_path / "mine"
    theirs = _start(tmp_path, PYTHONDONTWRITEBYTECODE="1", PYTHONPYCACHEPREFIX=str(mine))
    assert theirs["prefix"] == str(mine) and "python_bytecode" not in theirs["record"]
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(pkg)], check=True)
    beside = _start(tmp_path, PYTHONDONTWRITEBYTECODE="1")
    assert beside["prefix"] is None and beside["compiled"] == 0
    assert "python_bytecode" not in beside["record"]


def test_compile_caches_off_leave_pythons_bytecode_as_the_machine_has_it(tmp_path):
    _package(tmp_path)
    off = _start(tmp_path, PYTHONDONTWRITEBYTECODE="1", COMPARE_COMPILE_CACHE="off")
    assert off["prefix"] is None and off["compiled"] == 3
    assert not (tmp_path / "cache" / "compile").exists()
