"""Compile caches that outlive the process, under compare's cache folder, and what each run found
in them (recorded in every result's environment["compile_cache"]). Standard library only,
Python >= 3.8.

    $COMPARE_COMPILE_CACHE (default: <compare's cache folder>/compile; "off" switches them off)
      jax/jaxlib-<version>/     JAX's persistent compilation cache. JAX keys an entry on the
                                computation's HLO, jaxlib, the XLA flags and the devices (kind
                                and count); every jitted function is kept, however fast it compiled.
        xla_gpu_per_fusion_autotune_cache_dir/   XLA's GPU autotuning results, one per fusion
                                and GPU model (JAX points XLA there): a 2-GPU step whose fusions
                                a 1-GPU step already tuned is not tuned again.
      torchinductor/torch-<version>/   torch.compile's caches (Inductor's FX graph cache,
                                AOTAutograd's and Triton's kernels), keyed by torch on the graph,
                                its inputs and the compile settings: used with --compile.
      python/<cache tag>/       Python's bytecode of the modules a run imports, where the
                                framework's own folder has none and Python would not write it
                                there (PYTHONDONTWRITEBYTECODE, or a folder it cannot write):
                                without it every process compiles the framework's source again
                                (torch: ~960 modules, 3-4 s of each cell on an H200's host).

A backend claims its framework's folder before it imports the framework, which reads its variables
once, at import (jax/caches.py, caffe2_torch's prepare()); its trainer counts what the compiler
found (note()). A variable the user set already (JAX_COMPILATION_CACHE_DIR,
TORCHINDUCTOR_CACHE_DIR) wins, and is recorded. The jaxlib and torch versions name the folders
because XLA leaves version checks of its autotuning cache to its user. This module knows no
framework: only the folders, and the record every result carries.
"""
import os
import sys
from typing import Any, Callable, Dict, Optional

ENV = "COMPARE_COMPILE_CACHE"  # the folder; "off" or "0": no persistent compile caches

_record: Dict[str, Any] = {}
_at_record: Dict[str, Callable[[Dict[str, Any]], None]] = {}  # cache -> what it adds at the end


def cache_root() -> str:
    """compare's cache folder, as the host's envs.cache_dir() names it."""
    return os.environ.get("COMPARE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache",
                                                           "compare")


def root() -> Optional[str]:
    """The compile caches' folder; None when switched off."""
    value = os.environ.get(ENV)
    if value is not None and value.strip().lower() in ("off", "0", "false", "no"):
        return None
    return value or os.path.join(cache_root(), "compile")


def version(package: str) -> str:
    try:
        from importlib.metadata import version
        return version(package)
    except Exception:  # not installed as a distribution (a source checkout): one shared folder
        return "unknown"


def _folder(*parts: str) -> Optional[str]:
    base = root()
    if base is None:
        return None
    path = os.path.join(base, *parts)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:  # a read-only cache: the run compiles as if there were none
        _record["error"] = "{}: {}".format(path, exc.strerror or exc)
        return None
    return path


def claim(variable: str, name: str, *parts: str) -> Optional[str]:
    """The folder of cache `name`: the user's where `variable` is set already, else ours under
    root() (then set in `variable`); None where the caches are off. Recorded either way."""
    if os.environ.get(variable):
        path, source = os.environ[variable], variable
    else:
        path, source = _folder(*parts), ENV
        if path is None:
            _record[name] = {"dir": None, "state": "off"}
            return None
        os.environ[variable] = path
    _record[name] = {"dir": path, "set_by": source}
    return path


def bytecode(package: Optional[str]) -> None:
    """Before `package` (the framework) is imported: where its folder holds no bytecode of its
    own and Python would not write it there, this process and its children read and write
    bytecode under our folder python/<cache tag> (sys.pycache_prefix, PYTHONPYCACHEPREFIX), never
    beside anyone's sources. A prefix the user set already wins. Recorded as "python_bytecode"."""
    import importlib.util
    spec = importlib.util.find_spec(package) if package and sys.pycache_prefix is None else None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return  # the user's prefix, or nothing of Python's to compile
    folder = os.path.dirname(spec.origin)
    if os.path.exists(importlib.util.cache_from_source(spec.origin)):
        return  # compiled once beside its sources, as pip does
    writable = os.access(folder, os.W_OK)
    if writable and not sys.dont_write_bytecode:
        return  # Python writes it there in this first run
    why = "{} has no bytecode and {}".format(folder, "PYTHONDONTWRITEBYTECODE is set" if writable
                                              else "its folder cannot be written")
    path = _folder("python", sys.implementation.cache_tag or "python")
    if path is None:
        return
    sys.pycache_prefix, sys.dont_write_bytecode = path, False
    os.environ["PYTHONPYCACHEPREFIX"] = path  # the workers a framework starts (compile, decode)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    _record["python_bytecode"] = {"dir": path, "set_by": ENV, "why": why}


def off(name: str, why: str) -> None:
    """Cache `name` is not used in this run, for this reason (recorded)."""
    _record[name] = {"dir": None, "state": "off", "why": why}


def say(name: str, text: str) -> None:
    """What the record says of a cache that has no folder (cuDNN's autotuning)."""
    _record[name] = text


def at_record(name: str, add: Callable[[Dict[str, Any]], None]) -> None:
    """add(value) completes cache `name`'s record when it is taken (counts made at the end)."""
    _at_record[name] = add


def counts(name: str) -> Optional[Dict[str, Any]]:
    """Cache `name`'s record as it is being filled (a framework's listener counts into it)."""
    return _record.get(name)


def note(name: str, **counts: int) -> None:
    """Add what a framework counted (hits, misses) to cache `name`'s record."""
    _record.setdefault(name, {}).update(counts)


def entries(path: str) -> int:
    try:
        return len(os.listdir(path))
    except OSError:
        return 0


def state(hits: int, misses: int) -> str:
    """hit (everything came from the cache), miss (nothing did), partial, or unused."""
    if hits and not misses:
        return "hit"
    if misses and not hits:
        return "miss"
    return "partial" if hits else "unused"


def record() -> Dict[str, Any]:
    """What this run's compile caches held: {cache: {dir, hits, misses, state, ...}}."""
    out = {}
    for name, value in _record.items():
        value = dict(value) if isinstance(value, dict) else value
        if isinstance(value, dict) and "hits" in value and value.get("dir"):
            value["state"] = state(value["hits"], value["misses"])
        if name in _at_record and isinstance(value, dict) and value.get("dir"):
            _at_record[name](value)
        out[name] = value
    return out
