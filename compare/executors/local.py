"""Local executor: one subprocess per run, with the backend's interpreter (a managed venv or given).

The backend code is staged into the campaign (code/backends) and put on PYTHONPATH alone, so the
framework's environment never sees the host's packages. Every process a run starts ends with it:
the launcher runs in a session of its own and dies with `compare` (parent-death signal), each
worker dies with its launcher (the harness), and whatever is left when the run ends, times out or
is interrupted is found by the attempt's tag in its environment and stopped.
"""
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Optional, Tuple

from backends.contract import FILE_ENV, LAUNCHED_ENV, PHASE_FILE
from backends.contract.shared import ATTEMPT_ENV, HOST_PID_ENV, PACKAGE_DIR

from .. import envs
from ..frameworks import get
from . import Attempt, Context, Executor, Refused
from .base import CAMPAIGN_ENV, end_processes, run_env, start_launcher


def stage_backends(dest: Path) -> Path:
    """Copy the backends package to dest/backends (once); return dest for PYTHONPATH. The copy
    is made aside and renamed into place: cells starting at once never see half of it."""
    target = dest / "backends"
    if not target.exists():
        dest.mkdir(parents=True, exist_ok=True)
        aside = Path(tempfile.mkdtemp(prefix=".staging-", dir=str(dest)))
        try:
            shutil.copytree(PACKAGE_DIR, str(aside / "backends"),
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            os.rename(str(aside / "backends"), str(target))
        except OSError:
            if not target.is_dir():  # not another cell's rename that came first
                raise
        finally:
            shutil.rmtree(str(aside), ignore_errors=True)
    return dest


TMP_PREFIX = "compare-"  # a run's temp folder: compare-<pid of the compare that made it>-XXXX


def clean_stale_tmp() -> int:
    """Remove this user's run temp folders whose compare is dead (killed before it could remove
    them, e.g. by SIGKILL); return how many. A live or reused PID keeps its folders."""
    removed = 0
    for path in Path(tempfile.gettempdir()).glob(TMP_PREFIX + "*-*"):
        pid = path.name[len(TMP_PREFIX):].split("-")[0]
        try:
            if not pid.isdigit() or path.lstat().st_uid != os.getuid() or not path.is_dir():
                continue
            os.kill(int(pid), 0)
            continue  # alive (or reused): not ours to remove
        except ProcessLookupError:
            shutil.rmtree(str(path), ignore_errors=True)
            removed += 1
        except OSError:  # gone meanwhile, or a PID of another user: alive
            continue
    return removed


class LocalExecutor(Executor):
    name = "local"
    capabilities = frozenset({"real_data", "gpus"})

    @classmethod
    def available(cls, ctx: Context) -> Tuple[bool, str]:
        return True, "each backend runs here, in its managed environment (or --python)"

    def __init__(self, ctx: Context):
        super().__init__(ctx)
        self.variant = ctx.device
        self.interpreters = envs.Interpreters(self.variant, ctx.overrides, ctx.log)
        self._running: Optional[Tuple[subprocess.Popen, str]] = None  # (launcher, nonce)

    def reap(self, campaign) -> int:
        """End this campaign's processes left by a sweep that was killed before it could (the
        caller holds the campaign's lock, so no live sweep owns them)."""
        left = end_processes(None, CAMPAIGN_ENV, str(campaign.root))
        if left:
            self.ctx.log("ended {} process(es) left by an earlier, killed sweep".format(left))
        clean_stale_tmp()
        return left

    def close(self) -> None:
        self._stop_running()

    def _stop_running(self) -> None:
        if self._running is not None:
            proc, nonce = self._running
            end_processes(proc, ATTEMPT_ENV, nonce)
            self._running = None  # only once they are gone: an interrupted stop is redone by close()

    def environment(self, attempt: Attempt) -> None:
        since = time.time()
        try:
            interp = self.interpreters.get(get(attempt.spec.framework))
        except envs.EnvError as exc:
            raise Refused("failed", str(exc)) from None
        attempt.python = interp.python
        attempt.record = dict(python=interp.python, interpreter_source=interp.source,
                              env_dir=interp.env_dir)
        built = envs.built_during(interp.env_dir, since)  # a one-time build, not cell time
        if built is not None:
            attempt.record["env_build_s"] = built

    def launch(self, attempt: Attempt) -> None:
        spec, campaign, slot = attempt.spec, attempt.campaign, attempt.slot
        # the run's temp files (torchrun's torchelastic_*) go with the run; a short path under the
        # system's temp folder, as sockets live there (AF_UNIX paths are limited to 107 bytes)
        attempt.handle = tmp = Path(tempfile.mkdtemp(prefix="{}{}-".format(TMP_PREFIX, os.getpid())))
        env = run_env(spec, stage_backends(campaign.root / "code"), {
            "COMPARE_EXECUTOR": self.name,
            "COMPARE_ENV": attempt.record["env_dir"] or attempt.record["interpreter_source"],
            ATTEMPT_ENV: spec.nonce, CAMPAIGN_ENV: str(campaign.root),
            HOST_PID_ENV: str(os.getpid()), "TMPDIR": str(tmp), **(slot.env() if slot else {}),
            FILE_ENV: str(attempt.work / PHASE_FILE)})  # the progress bar reads the phase there
        out_path, err_path = campaign.log_paths(spec.run_id)
        with open(out_path, "w") as out, open(err_path, "w") as err:
            env[LAUNCHED_ENV] = repr(time.time())
            try:
                proc = start_launcher(attempt.command, out, err, env, attempt.work,
                                      slot.cores if slot else ())
            except (OSError, subprocess.SubprocessError) as exc:
                raise Refused("failed", "could not start {}: {}".format(
                    attempt.command[0], exc)) from None
        self._running = (proc, spec.nonce)

    def wait(self, attempt: Attempt, timeout: float) -> Tuple[Optional[int], bool]:
        try:
            return self._running[0].wait(timeout=timeout), False
        except subprocess.TimeoutExpired:
            return None, True

    def release(self, attempt: Attempt) -> None:
        self._stop_running()  # timeout, Ctrl-C, SIGTERM, or workers outliving a launcher that exited
        if attempt.handle is not None:
            shutil.rmtree(str(attempt.handle), ignore_errors=True)
