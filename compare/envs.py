"""Managed per-backend virtual environments: the embedded default where no container engine exists.

Each backend has a pinned requirements file per variant (`requirements/<backend>-<cpu|cuda>.txt`)
and optionally a setup script (`requirements/<backend>.setup.sh`, e.g. building Horovod) run
once inside the new environment. An environment is created on first use under the cache folder,
named by the hash of those files, and reused afterwards.
"""
import datetime
import fcntl
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Optional

from backends.contract import utc_now

from .errors import UserError
from .frameworks import Framework

REQUIREMENTS = Path(__file__).parent / "requirements"
READY = ".compare-ready.json"


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
    return d if (d / READY).exists() else None


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
    from .frameworks import get, names
    out = {}
    for item in items or []:
        name, sep, path = item.partition("=")
        if not sep or not path:
            raise UserError("--python {!r}: expected FRAMEWORK=PATH, e.g. {}=/usr/bin/python3"
                            .format(item, names()[0]))
        if not Path(path).exists():
            raise UserError("--python {!r}: no interpreter at {}".format(item, path))
        if not Path(path).is_file() or not os.access(path, os.X_OK):
            raise UserError("--python {!r}: {} is {}, not an interpreter; give the path of a python "
                            "executable".format(item, path, "a folder" if Path(path).is_dir() else
                                                "not an executable file"))
        out[get(name).name] = path
    return out


def resolve(fw: Framework, variant: str, overrides: Dict[str, str],
            log: Callable[[str], None] = lambda s: None) -> Interpreter:
    """--python FRAMEWORK=PATH, else this interpreter if it has the framework, else a managed env."""
    if fw.name in overrides:
        return Interpreter(overrides[fw.name], "--python")
    if os.environ.get("COMPARE_NO_CURRENT") != "1" and importlib.util.find_spec(fw.import_name):
        return Interpreter(sys.executable, "current")
    path = ensure(fw, variant, log)
    return Interpreter(str(env_python(path)), "managed", str(path))


def ensure(fw: Framework, variant: str, log: Callable[[str], None] = lambda s: None) -> Path:
    """Create the managed environment once (under a lock); return its folder."""
    req = requirements_file(fw, variant)
    if not req.exists():
        raise EnvError("no pinned requirements for {} on {} ({} is missing)".format(
            fw.name, variant, req.name))
    path = env_dir(fw, variant)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(str(path) + ".lock", "w")
    except OSError as exc:  # COMPARE_CACHE is a file, read-only, ...
        raise UserError("COMPARE_CACHE {}: cannot create {} ({}); give a folder you can write".format(
            cache_dir(), exc.filename or path.parent, exc.strerror or exc)) from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (path / READY).exists():
            return path
        log("creating the {} environment in {} (once; reused afterwards)".format(fw.name, path))
        started = time.time()
        logfile = Path(str(path) + ".log")
        with open(logfile, "w") as out:
            steps = [[sys.executable, "-m", "venv", "--clear", str(path)],
                     [str(env_python(path)), "-m", "pip", "install", "-r", str(req)]]
            if setup_script(fw).exists():
                steps.append(["bash", str(setup_script(fw))])
            env = dict(os.environ, VIRTUAL_ENV=str(path),
                       PATH="{}:{}".format(path / "bin", os.environ.get("PATH", "")))
            env.pop("PYTHONPATH", None)
            for cmd in steps:
                out.write("$ {}\n".format(" ".join(cmd)))
                out.flush()
                rc = subprocess.call(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
                if rc != 0:
                    raise EnvError("creating the {} environment failed at `{}` (exit {}); see {}"
                                   .format(fw.name, " ".join(cmd[:4]), rc, logfile))
        info = {"framework": fw.name, "variant": variant, "requirements": req.read_text(),
                "created_at": utc_now(),
                "seconds": round(time.time() - started, 1)}
        (path / READY).write_text(json.dumps(info, indent=2))
        return path


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
