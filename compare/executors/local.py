"""Local executor: one subprocess per run, with the backend's interpreter (a managed venv or given).

The backend code is staged into the campaign (code/backends) and put on PYTHONPATH alone, so the
framework's environment never sees the host's packages.
"""
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Dict, Tuple

import backends
from backends.phases import LAUNCHED_ENV
from backends.protocol import RunResult, RunSpec

from .. import envs
from ..frameworks import Framework, get
from . import Context, Executor
from .base import collect, failure, now, run_env


def stage_backends(dest: Path) -> Path:
    """Copy the backends package to dest/backends (once); return dest for PYTHONPATH."""
    target = dest / "backends"
    if not target.exists():
        shutil.copytree(str(Path(backends.__file__).parent), str(target),
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


class LocalExecutor(Executor):
    name = "local"

    @classmethod
    def available(cls, ctx: Context) -> Tuple[bool, str]:
        return True, "each backend runs here, in its managed environment (or --python)"

    def __init__(self, ctx: Context):
        super().__init__(ctx)
        self.variant = ctx.device
        self._interpreters: Dict[str, object] = {}

    def interpreter(self, fw: Framework):
        """The interpreter for fw (cached); an envs.EnvError if it cannot be had."""
        if fw.name not in self._interpreters:
            try:
                self._interpreters[fw.name] = envs.resolve(fw, self.variant, self.ctx.overrides,
                                                           self.ctx.log)
            except envs.EnvError as exc:
                self._interpreters[fw.name] = exc
        found = self._interpreters[fw.name]
        if isinstance(found, Exception):
            raise found
        return found

    def run(self, spec: RunSpec, campaign, timeout: float) -> RunResult:
        started = now()
        fw = get(spec.framework)
        try:
            interp = self.interpreter(fw)
        except envs.EnvError as exc:
            return failure(spec, "failed", str(exc), started_at=started)
        code_dir = stage_backends(campaign.root / "code")
        spec_path = campaign.save_spec(spec)
        work = campaign.work_dir(spec.run_id)
        result_file = work / "result.json"
        cmd = fw.module().command(interp.python, spec, str(spec_path), str(result_file))
        env = run_env(spec, code_dir, {"COMPARE_EXECUTOR": self.name,
                                       "COMPARE_ENV": interp.env_dir or interp.source})
        out_path, err_path = campaign.log_paths(spec.run_id)
        timed_out, rc = False, None
        with open(out_path, "w") as out, open(err_path, "w") as err:
            env[LAUNCHED_ENV] = repr(time.time())
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
