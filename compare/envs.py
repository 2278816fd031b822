"""Managed per-backend virtual environments: the embedded default where no container engine exists.

Each backend has a pinned requirements file per variant (`requirements/<backend>-<cpu|cuda>.txt`)
and optionally a setup script (`requirements/<backend>.setup.sh`, e.g. building Horovod) run
once inside the new environment. An environment is created on first use under the cache folder,
named by the hash of those files, and reused afterwards. A build ends with the compare that
started it, every process of it (reaper.py), and one that did not finish is built again.
"""
import datetime
import fcntl
import functools
import hashlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from backends.contract import utc_now
from backends.contract.shared import lifeline

from . import files, frameworks
from .errors import UserError
from .frameworks import Framework
from .loading import one_line

REQUIREMENTS = Path(__file__).parent / "requirements"
READY = ".compare-ready.json"  # written last, whole: a folder without it is a build cut short
REAPER = Path(__file__).parent / "reaper.py"


@dataclass
class Interpreter:
    """The python that runs a backend, and where it came from (recorded in every result)."""

    python: str
    source: str  # "--python", "current", "managed"
    env_dir: Optional[str] = None


class EnvError(Exception):
    """An environment could not be created; the runs of that framework are recorded as failed."""


def cache_dir() -> Path:
    return Path(os.environ.get("COMPARE_CACHE", Path.home() / ".cache" / "compare"))


def cache_problem() -> Optional[str]:
    """Why the cache folder cannot be one (one line: it, or a folder above it, is a file), or None
    (it is a folder, or can be made one)."""
    root = cache_dir()
    found = root
    while not os.path.lexists(str(found)) and found != found.parent:
        found = found.parent
    if found.is_dir():
        return None
    return "{} {}: {}is a file, not a folder; give a folder compare may create or write ({})".format(
        "COMPARE_CACHE" if os.environ.get("COMPARE_CACHE") else "cache", root,
        "" if found == root else "{} ".format(found),
        "or unset it: ~/.cache/compare" if os.environ.get("COMPARE_CACHE") else "COMPARE_CACHE=DIR")


def check_cache() -> None:
    """A UserError line where the cache cannot be a folder (the managed environments, the
    prepared side of read-only data folders and the references live there)."""
    problem = cache_problem()
    if problem:
        raise UserError(problem)


def requirements_file(fw: Framework, variant: str) -> Path:
    return REQUIREMENTS / "{}-{}.txt".format(fw.backend, variant)


def setup_script(fw: Framework) -> Path:
    return REQUIREMENTS / "{}.setup.sh".format(fw.backend)


def env_dir(fw: Framework, variant: str) -> Path:
    h = hashlib.sha256()
    for path in (requirements_file(fw, variant), setup_script(fw)):
        if path.exists():
            h.update(path.read_bytes())
    h.update(sys.version.split()[0].encode())
    return cache_dir() / "envs" / "{}-{}-{}".format(fw.backend, variant, h.hexdigest()[:12])


def env_python(path: Path) -> Path:
    return path / "bin" / "python"


def existing(fw: Framework, variant: str) -> Optional[Path]:
    d = env_dir(fw, variant)
    return d if (d / READY).is_file() and env_python(d).exists() else None


def built_during(path: Optional[str], since: float) -> Optional[float]:
    """Seconds spent on the environment at `path` since `since` when it was created (or waited
    for, while another cell created it) after then; None for one that existed already. A result
    records it (environment.env_build_s), so that a one-time build is not read as cell time."""
    try:
        info = json.loads((Path(path) / READY).read_text()) if path else None
        created = datetime.datetime.fromisoformat(info["created_at"]).timestamp() if info else None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if created is None or created < since - 1:  # to the second, as created_at is written
        return None
    return round(min(float(info.get("seconds") or 0.0), time.time() - since), 1)


def parse_overrides(items) -> Dict[str, str]:
    """['NAME=/usr/bin/python3'] -> {'NAME': '/usr/bin/python3'} (framework names resolved)."""
    out = {}
    for item in items or []:
        name, sep, path = item.partition("=")
        if not sep or not path or not name.strip():  # '=x' names no framework
            raise UserError("--python {!r}: expected FRAMEWORK=PATH, e.g. {}=/usr/bin/python3"
                            .format(item, frameworks.names()[0]))
        if not Path(path).exists():
            raise UserError("--python {!r}: no interpreter at {}".format(item, path))
        if not Path(path).is_file() or not os.access(path, os.X_OK):
            raise UserError("--python {!r}: {} is {}, not an interpreter; give the path of a python "
                            "executable".format(item, path, "a folder" if Path(path).is_dir() else
                                                "not an executable file"))
        out[frameworks.get(name).name] = path
    return out


def in_current(fw: Framework) -> bool:
    """Whether runs of fw use this interpreter: it has the framework (COMPARE_NO_CURRENT=1: never)."""
    return os.environ.get("COMPARE_NO_CURRENT") != "1" and all(
        importlib.util.find_spec(m) for m in fw.modules)


# `PATH -c PROBE MODULE...`: its version, then the modules it cannot find, found without importing
# any (TensorFlow's import alone takes seconds). The version is written first, in words Python 2
# parses too, so an interpreter too old for the rest still says what it is.
PROBE = ("import sys; sys.stdout.write('python: %d.%d\\n' % tuple(sys.version_info[:2])); "
         "sys.stdout.flush(); import importlib.util; print('missing: ' + ' '.join("
         "m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))")
PROBE_TIMEOUT = 60  # seconds: an interpreter's start, its site-packages on a slow filesystem
OLDEST_PYTHON = (3, 8)  # the backends' syntax and standard library (DESIGN.md)
Answer = Tuple[Tuple[int, int], Optional[List[str]]]  # probe(): the version, the modules it lacks


def probe(python: str, fw: Framework) -> Answer:
    """((major, minor), the modules of fw it lacks) of the interpreter at `python`, asked as a run
    would start it: PYTHONPATH none of the user's (a run's is the staged backends alone), from a
    folder of no modules (a run's own). The modules are None where one too old to look for them
    said its version; EnvError (one line) where it does not answer as a Python does."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    try:
        done = subprocess.run([python, "-c", PROBE] + list(fw.modules), capture_output=True,
                              text=True, errors="replace", env=env, cwd="/", timeout=PROBE_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise EnvError("no answer within {} s".format(PROBE_TIMEOUT)) from None
    except OSError as exc:  # not an executable it can start (a script without its interpreter)
        raise EnvError("cannot be started: {}".format(exc.strerror or exc)) from None
    return read_probe(done.returncode, done.stdout, done.stderr)


def read_probe(returncode: int, stdout: str, stderr: str) -> Answer:
    """probe()'s answer from what the PROBE run said, here or where it runs (a Slurm node)."""
    said = {}
    for line in stdout.splitlines():
        key, _, value = line.partition(": ")
        said[key] = value.split()
    version = tuple(int(v) for v in said.get("python", [""])[0].split(".") if v.isdigit())
    if len(version) == 2 and version < OLDEST_PYTHON:
        return version, None
    if returncode != 0 or len(version) != 2 or "missing" not in said:
        last = (stderr.strip().splitlines() or stdout.strip().splitlines() or [""])[-1]
        raise EnvError("exit {}{}".format(returncode, ": " + one_line(last[-200:]) if last
                                          else ", nothing said"))
    return version, said["missing"]


def check_python(fw: Framework, python: str, label: str = "--python", said: str = "--python",
                 asked: Optional[Callable[[str, Framework], Answer]] = None,
                 where: str = "") -> None:
    """UserError (one line) where the interpreter `python` given for fw (as `label` names the
    setting, `said` as the user would write it) is older than the backends need, lacks a module
    every run of fw imports, or does not answer as a python: each run of it, and its data writer,
    would fail at once. `asked`: probe()'s answer where the runs are (a Slurm node, `where` says
    which: "on Slurm node nodeA, "); probe() here by default."""
    try:
        version, missing = (asked or probe)(python, fw)
    except EnvError as exc:
        problem = "did not say which modules it has, as a python asked with -c does ({}); give a " \
            "python that has {}".format(exc, ", ".join(fw.modules))
    else:
        if missing is None:
            problem = "is Python {}.{}, and compare's backends need {}.{} or newer; give a python " \
                "{}.{} or newer that has {}".format(*version, *OLDEST_PYTHON, *OLDEST_PYTHON,
                                                    ", ".join(fw.modules))
        elif missing:
            problem = "lacks {} (every {} run imports {}); give a python that has them".format(
                ", ".join(missing), fw.name, ", ".join(fw.modules))
        else:
            return
    raise UserError("{} {!r}: {}{} {}, or leave {} out of {} (compare then runs {} in its managed "
                    "environment)".format(label, "{}={}".format(fw.name, python), where, python,
                                          problem, fw.name, said, fw.name))


def resolve(fw: Framework, variant: str, overrides: Dict[str, str],
            log: Callable[[str], None] = lambda s: None) -> Interpreter:
    """--python FRAMEWORK=PATH, else this interpreter if it has the framework, else a managed env."""
    if fw.name in overrides:
        return Interpreter(overrides[fw.name], "--python")
    if in_current(fw):
        return Interpreter(sys.executable, "current")
    path = ensure(fw, variant, log)
    return Interpreter(str(env_python(path)), "managed", str(path))


def ensure(fw: Framework, variant: str, log: Callable[[str], None] = lambda s: None) -> Path:
    """Create the managed environment once; return its folder. One build at a time per folder
    (a flock, held by the build's processes too: a second compare waits for the first, and a
    killed one's build is over before the next begins); a folder without the completion
    marker (written last) is a build that did not finish, cleared and built again."""
    req = requirements_file(fw, variant)
    if not req.exists():
        raise EnvError("no pinned requirements for {} on {} ({} is missing)".format(
            fw.name, variant, req.name))
    path = env_dir(fw, variant)
    lock = _build_lock(path)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (path / READY).is_file() and env_python(path).exists():
            return path
        log("creating the {} environment in {} (once; reused afterwards)".format(fw.name, path))
        started = time.time()
        _build(fw, path, req, lock)
        info = {"framework": fw.name, "variant": variant, "requirements": req.read_text(),
                "created_at": utc_now(), "seconds": round(time.time() - started, 1)}
        files.write_text(path / READY, json.dumps(info, indent=2), path)  # last, whole
        return path
    finally:
        os.close(lock)


def _build_lock(path: Path) -> int:
    """The fd of the build lock beside the environment's folder (opened, not yet locked)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(str(path) + ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                       0o644)
    except OSError as exc:  # COMPARE_CACHE is a file, read-only, a link where the lock goes...
        raise UserError("COMPARE_CACHE {}: cannot create {} ({}); give a folder you can write".format(
            cache_dir(), exc.filename or path.parent, exc.strerror or exc)) from None


def _build(fw: Framework, path: Path, req: Path, lock: int) -> None:
    """venv (cleared: what a build that did not finish left goes), pip install, setup script;
    each step under reaper.py, so that it and everything it starts end with this compare."""
    logfile = Path(str(path) + ".log")
    steps = [[sys.executable, "-m", "venv", "--clear", str(path)],
             [str(env_python(path)), "-m", "pip", "install", "-r", str(req)]]
    if setup_script(fw).exists():
        steps.append(["bash", str(setup_script(fw))])
    env = dict(os.environ, VIRTUAL_ENV=str(path),
               PATH="{}:{}".format(path / "bin", os.environ.get("PATH", "")))
    env.pop("PYTHONPATH", None)
    lifeline.prepare()
    with files.new_file(logfile) as out:
        for cmd in steps:
            out.write("$ {}\n".format(" ".join(cmd)))
            out.flush()
            # the step holds the build lock too (pass_fds): while any of it lives, no other build
            rc = subprocess.call([sys.executable, str(REAPER)] + cmd, stdout=out,
                                 stderr=subprocess.STDOUT, env=env, pass_fds=(lock,),
                                 preexec_fn=functools.partial(lifeline.die_with_parent,
                                                              signal.SIGTERM, os.getpid()))
            if rc != 0:
                raise EnvError("creating the {} environment failed at `{}` (exit {}); see {}"
                               .format(fw.name, " ".join(cmd[:4]), rc, logfile))


class Interpreters:
    """The interpreter of each framework for one sweep: resolved on first use, kept (a failure to
    get one too, so a sweep does not try to build the same broken environment for every cell)."""

    def __init__(self, variant: str, overrides: Dict[str, str],
                 log: Callable[[str], None] = lambda s: None):
        self.variant, self.overrides, self.log = variant, overrides, log
        self._found: Dict[str, object] = {}

    def get(self, fw: Framework) -> Interpreter:
        """fw's interpreter; EnvError (the same one each time) if it cannot be had."""
        if fw.name not in self._found:
            try:
                self._found[fw.name] = resolve(fw, self.variant, self.overrides, self.log)
            except EnvError as exc:
                self._found[fw.name] = exc
        found = self._found[fw.name]
        if isinstance(found, EnvError):
            raise found
        return found
