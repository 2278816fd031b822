"""Local executor: one subprocess per run, with the backend's interpreter (a managed venv or given).

The backend code is staged into the campaign (code/backends) and put on PYTHONPATH alone, so the
framework's environment never sees the host's packages. Every process a run starts ends with it:
the launcher runs in a session of its own and dies with `compare` (parent-death signal), each
worker dies with its launcher (the harness), and whatever is left when the run ends, times out or
is interrupted is found by the attempt's tag in its environment and stopped.
"""
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Tuple

from backends.contract import FILE_ENV, PHASE_FILE
from backends.contract.shared import PACKAGE_DIR

from .. import envs, files
from ..frameworks import get
from . import processes
from .base import Attempt, Context, Executor, Refused
from .processes import CAMPAIGN_ENV, end_processes, run_env


def stage_backends(dest: Path) -> Path:
    """Copy the backends package to dest/backends (once; dest is a campaign's `code`); return
    dest for PYTHONPATH. The copy is made aside and renamed into place: cells starting at once
    never see half of it, and one that fails (a full disk) leaves nothing (files.copy_folder)."""
    files.copy_folder(Path(PACKAGE_DIR), dest / "backends", dest.parent)
    return dest


def managed_environment(interpreters: envs.Interpreters, attempt: Attempt) -> None:
    """attempt.python and .record: the framework's managed environment (built first where it is
    missing) or its --python; EnvError if there is none."""
    since = time.time()
    interp = interpreters.get(get(attempt.spec.framework))
    attempt.python = interp.python
    attempt.record = dict(python=interp.python, interpreter_source=interp.source,
                          env_dir=interp.env_dir)
    built = envs.built_during(interp.env_dir, since)  # a one-time build, not cell time
    if built is not None:
        attempt.record["env_build_s"] = built


TMP_PREFIX = "compare-"  # a run's temp folder: compare-<pid of the compare that made it>-XXXX


def clean_stale_tmp() -> None:
    """Remove this user's run temp folders whose compare is dead (killed before it could remove
    them, e.g. by SIGKILL). A live or reused PID keeps its folders."""
    for path in Path(tempfile.gettempdir()).glob(TMP_PREFIX + "*-*"):
        pid = path.name[len(TMP_PREFIX):].split("-")[0]
        try:
            if pid.isdigit() and path.lstat().st_uid == os.getuid() and path.is_dir():
                os.kill(int(pid), 0)  # alive (or reused): not ours to remove
        except ProcessLookupError:
            shutil.rmtree(str(path), ignore_errors=True)
        except OSError:  # gone meanwhile, or a PID of another user: alive
            pass


class LocalExecutor(Executor):
    name = "local"
    capabilities = frozenset({"real_data", "gpus"})

    @classmethod
    def available(cls, ctx: Context) -> Tuple[bool, str]:
        return True, "each backend runs here, in its managed environment (or --python)"

    def __init__(self, ctx: Context):
        super().__init__(ctx)
        self.interpreters = envs.Interpreters(ctx.device, ctx.overrides, ctx.log)

    def reap(self, campaign) -> None:
        """End this campaign's processes left by a sweep that was killed before it could (the
        caller holds the campaign's lock, so no live sweep owns them)."""
        left = end_processes(None, CAMPAIGN_ENV, str(campaign.root))
        if left:
            self.ctx.log("ended {} process(es) left by an earlier, killed sweep".format(left))
        clean_stale_tmp()

    def environment(self, attempt: Attempt) -> None:
        try:
            managed_environment(self.interpreters, attempt)
        except envs.EnvError as exc:
            raise Refused("failed", str(exc)) from None

    def launch(self, attempt: Attempt) -> None:
        spec, campaign, slot = attempt.spec, attempt.campaign, attempt.slot
        env = run_env(spec, stage_backends(campaign.root / "code"), {
            "COMPARE_EXECUTOR": self.name,
            "COMPARE_ENV": attempt.record["env_dir"] or attempt.record["interpreter_source"],
            **(slot.env() if slot else {}),
            FILE_ENV: str(attempt.work / PHASE_FILE)})  # the progress bar reads the phase there
        # the run's temp files (torchrun's torchelastic_*) go with the run; a short path under the
        # system's temp folder, as sockets live there (AF_UNIX paths are limited to 107 bytes)
        tmp = Path(tempfile.mkdtemp(prefix="{}{}-".format(TMP_PREFIX, os.getpid())))
        env["TMPDIR"] = str(tmp)
        attempt.handle = processes.start(attempt, attempt.command, env,
                                         slot.cores if slot else (), temp=tmp)
