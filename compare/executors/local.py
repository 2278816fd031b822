"""Local executor: one subprocess per run, with the backend's interpreter (a managed venv or given).

The backend code is staged into the campaign (code/backends) and put on PYTHONPATH alone, so the
framework's environment never sees the host's packages.
"""
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Callable, Dict, Optional

import backends
from backends.protocol import RunResult, RunSpec

from .. import envs, frameworks
from ..store import Campaign
from .base import collect, failure, now


def stage_backends(dest: Path) -> Path:
    """Copy the backends package to dest/backends (once); return dest for PYTHONPATH."""
    target = dest / "backends"
    if not target.exists():
        shutil.copytree(str(Path(backends.__file__).parent), str(target),
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


def run_env(spec: RunSpec, code_dir: Path, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The environment a backend process runs with."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(code_dir)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONHASHSEED"] = str(spec.seed)
    if spec.precision == "fp32":
        env["NVIDIA_TF32_OVERRIDE"] = "0"  # true FP32: no library may pick TF32 behind our back
    else:
        env.pop("NVIDIA_TF32_OVERRIDE", None)
    env.update(extra or {})
    return env


class LocalExecutor:
    name = "local"

    def __init__(self, variant: str, overrides: Dict[str, str],
                 log: Callable[[str], None] = lambda s: None):
        self.variant = variant
        self.overrides = overrides
        self.log = log
        self._interpreters: Dict[str, object] = {}

    def interpreter(self, fw: frameworks.Framework):
        """The interpreter for fw (cached); an envs.EnvError if it cannot be had."""
        if fw.name not in self._interpreters:
            try:
                self._interpreters[fw.name] = envs.resolve(fw, self.variant, self.overrides, self.log)
            except envs.EnvError as exc:
                self._interpreters[fw.name] = exc
        found = self._interpreters[fw.name]
        if isinstance(found, Exception):
            raise found
        return found

    def run(self, spec: RunSpec, campaign: Campaign, timeout: float) -> RunResult:
        started = now()
        fw = frameworks.get(spec.framework)
        try:
            interp = self.interpreter(fw)
        except envs.EnvError as exc:
            return failure(spec, "failed", str(exc), started_at=started)
        code_dir = stage_backends(campaign.root / "code")
        spec_path = campaign.save_spec(spec)
        work = campaign.work_dir(spec.run_id)
        result_file = work / "result.json"
        backend = __import__("backends." + fw.backend, fromlist=["command"])
        cmd = backend.command(interp.python, spec, str(spec_path), str(result_file))
        env = run_env(spec, code_dir, {"COMPARE_EXECUTOR": self.name,
                                       "COMPARE_ENV": interp.env_dir or interp.source})
        out_path, err_path = campaign.log_paths(spec.run_id)
        timed_out, rc = False, None
        with open(out_path, "w") as out, open(err_path, "w") as err:
            try:
                proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=str(work),
                                        start_new_session=True)
            except OSError as exc:
                return failure(spec, "failed", "could not start {}: {}".format(cmd[0], exc),
                               started_at=started)
            try:
                rc = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)  # the launcher and every worker it started
                proc.wait()
        result = collect(spec, result_file, rc, err_path, started, timed_out, timeout)
        result.environment.update(executor=self.name, python=interp.python,
                                  interpreter_source=interp.source, env_dir=interp.env_dir)
        return result
