"""Local executor: one subprocess per run, with the backend's interpreter (a managed venv or given).

The backend code is staged into the campaign (code/backends) and put on PYTHONPATH alone, so the
framework's environment never sees the host's packages. Every process a run starts ends with it:
the launcher runs in a session of its own and dies with `compare` (parent-death signal), each
worker dies with its launcher (the harness), and whatever is left when the run ends, times out or
is interrupted is found by the attempt's tag in its environment and stopped.
"""
import functools
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Optional, Tuple

import backends
from backends import lifeline
from backends.lifeline import ATTEMPT_ENV, HOST_PID_ENV, die_with_parent
from backends.phases import LAUNCHED_ENV
from backends.protocol import RunResult, RunSpec

from .. import envs
from ..frameworks import get
from . import Context, Executor
from .base import CAMPAIGN_ENV, collect, end_processes, failure, now, run_env


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
        self.interpreters = envs.Interpreters(self.variant, ctx.overrides, ctx.log)
        self._running: Optional[Tuple[subprocess.Popen, str]] = None  # (launcher, nonce)
        self._reaped = set()  # campaigns already cleared of processes left by a killed sweep

    def reap(self, campaign) -> int:
        """End this campaign's processes left by a sweep that was killed before it could (the
        caller holds the campaign's lock, so no live sweep owns them)."""
        left = end_processes(None, CAMPAIGN_ENV, str(campaign.root))
        if left:
            self.ctx.log("ended {} process(es) left by an earlier, killed sweep".format(left))
        return left

    def close(self) -> None:
        self._stop_running()

    def _stop_running(self) -> None:
        if self._running is not None:
            proc, nonce = self._running
            end_processes(proc, ATTEMPT_ENV, nonce)
            self._running = None  # only once they are gone: an interrupted stop is redone by close()

    def run(self, spec: RunSpec, campaign, timeout: float) -> RunResult:
        started = now()
        if campaign.root not in self._reaped:
            self._reaped.add(campaign.root)
            self.reap(campaign)
        fw = get(spec.framework)
        try:
            interp = self.interpreters.get(fw)
        except envs.EnvError as exc:
            return failure(spec, "failed", str(exc), started_at=started)
        code_dir = stage_backends(campaign.root / "code")
        spec_path = campaign.save_spec(spec)
        work = campaign.work_dir(spec.run_id)
        result_file = work / "result.json"
        # the run's temp files (torchrun's torchelastic_*) go with the run; a short path under the
        # system's temp folder, as sockets live there (AF_UNIX paths are limited to 107 bytes)
        tmp = Path(tempfile.mkdtemp(prefix="compare-"))
        cmd = fw.module().command(interp.python, spec, str(spec_path), str(result_file))
        env = run_env(spec, code_dir, {"COMPARE_EXECUTOR": self.name,
                                       "COMPARE_ENV": interp.env_dir or interp.source,
                                       ATTEMPT_ENV: spec.nonce, CAMPAIGN_ENV: str(campaign.root),
                                       HOST_PID_ENV: str(os.getpid()), "TMPDIR": str(tmp)})
        out_path, err_path = campaign.log_paths(spec.run_id)
        timed_out, rc = False, None
        try:
            lifeline.prepare()
            with open(out_path, "w") as out, open(err_path, "w") as err:
                env[LAUNCHED_ENV] = repr(time.time())
                try:
                    proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=str(work),
                                            start_new_session=True,
                                            preexec_fn=functools.partial(die_with_parent,
                                                                         expected=os.getpid()))
                except (OSError, subprocess.SubprocessError) as exc:
                    return failure(spec, "failed", "could not start {}: {}".format(cmd[0], exc),
                                   started_at=started)
                self._running = (proc, spec.nonce)
                try:
                    rc = proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    timed_out = True
                finally:  # timeout, Ctrl-C, SIGTERM, or workers outliving a launcher that exited
                    self._stop_running()
        finally:
            shutil.rmtree(str(tmp), ignore_errors=True)
        result = collect(spec, result_file, rc, err_path, started, timed_out, timeout)
        result.environment.update(executor=self.name, python=interp.python,
                                  interpreter_source=interp.source, env_dir=interp.env_dir)
        return result
