"""Each framework's native data format (its backend's DATA_FORMAT: TFRecord, RecordIO) written
beside a checked folder, once per fingerprint, by the backend's writer in the framework's own
environment (`python -m backends.<backend>.data write PREPARED_DIR`): here (LocalWriter), or in
an executor's image (its data_writer). The folder and its check: compare/datasets.py.
"""
import os
import subprocess
from pathlib import Path
from typing import IO, Callable, Dict, List, Optional, Sequence

from backends.contract.shared import CODE_ROOT, dataset

from . import envs
from .frameworks import Framework

Log = Callable[[str], None]


def data_format(fw: Framework) -> Optional[str]:
    """The native format fw's backend reads (its DATA_FORMAT), None: the folder itself."""
    return getattr(fw.module(), "DATA_FORMAT", None)


class WriterError(Exception):
    """The environment that writes a native format is not there (not created, not built)."""


class Writer:
    """Runs a backend's format writer (`python -m backends.<backend>.data write PREPARED_DIR`) in
    the framework's environment. An executor whose runs use other environments than this
    machine's (images) has its own (Executor.data_writer)."""

    def where(self, fw: Framework) -> str:
        """Where fw's writer runs, as the log says it."""
        raise NotImplementedError

    def __call__(self, fw: Framework, prepared_path: str, err: IO[str],
                 on_line: Callable[[str], None]) -> int:
        """Run the writer to its end: stdout lines to on_line, stderr to err; its exit code.
        WriterError when its environment is not there."""
        raise NotImplementedError


def writer_command(fw: Framework, python: str, prepared_path: str) -> List[str]:
    return [python, "-m", "backends.{}.data".format(fw.backend), "write", prepared_path]


class LocalWriter(Writer):
    """The writer in fw's environment on this machine: managed (created if missing) or --python."""

    def __init__(self, device: str, overrides: Dict[str, str], log: Log):
        self.variant = "cuda" if device == "cuda" else "cpu"
        self.overrides, self.log = overrides, log

    def where(self, fw: Framework) -> str:
        if fw.name in self.overrides:
            return "with {} (--python)".format(self.overrides[fw.name])
        return "with its environment here"

    def __call__(self, fw, prepared_path, err, on_line) -> int:
        try:
            interp = envs.resolve(fw, self.variant, self.overrides, self.log)
        except envs.EnvError as exc:
            raise WriterError(str(exc)) from None
        env = dict(os.environ, PYTHONPATH=os.path.realpath(CODE_ROOT), PYTHONUNBUFFERED="1")
        proc = subprocess.Popen(writer_command(fw, interp.python, prepared_path),
                                stdout=subprocess.PIPE, stderr=err, text=True, env=env)
        try:
            for line in proc.stdout:
                on_line(line)
        except BaseException:  # stopped (a signal): the writer too, its format left unfinished
            proc.kill()  # (no done marker: written again next time)
            proc.wait()
            raise
        return proc.wait()


def prepare_formats(prepared: dataset.Prepared, frameworks: Sequence[Framework], log: Log,
                    console, writer: Writer) -> Dict[str, str]:
    """Write each framework's native format that is missing or stale, with the backend's writer
    in the framework's environment (a progress bar on `console`). Returns {framework: why it
    failed}; the others are ready."""
    failed: Dict[str, str] = {}
    for fw in frameworks:
        fmt = data_format(fw)
        if fmt is None:
            log("{}: reads the folder itself through its own loader".format(fw.name))
            continue
        if prepared.ready(fmt):
            log("{}: {} up to date in {}".format(fw.name, fmt, prepared.format_dir(fmt)))
            continue
        log("{}: writing {} into {} {} (once; reused while the folder is unchanged)".format(
            fw.name, fmt, prepared.format_dir(fmt), writer.where(fw)))
        why = _run_writer(fw, writer, prepared, fmt, console)
        if why:
            failed[fw.name] = why
    return failed


def _run_writer(fw: Framework, writer: Writer, prepared: dataset.Prepared, fmt: str,
                console) -> Optional[str]:
    log_path = os.path.join(prepared.path, fmt + ".log")
    with open(log_path, "w") as err, progress_bar(console, "{}: {}".format(fw.name, fmt),
                                          disable=not console.is_terminal) as bar:  # no blank line
        task = bar.add_task("", total=None)
        def on_line(line: str) -> None:
            parts = line.split()
            if len(parts) == 3 and parts[0] == "progress":
                bar.update(task, completed=int(parts[1]), total=int(parts[2]))
        try:
            rc = writer(fw, prepared.path, err, on_line)
        except WriterError as exc:
            return str(exc)
    if rc == 0 and prepared.ready(fmt):
        return None
    lines = [ln for ln in Path(log_path).read_text(errors="replace").splitlines() if ln.strip()]
    return "writing {} failed (exit {}){}; see {}".format(
        fmt, rc, ": " + lines[-1][-300:] if lines else "", log_path)


def progress_bar(console, description: str, **kw):
    """A rich progress bar on `console` (done of total, time left), gone when it ends: a writer's,
    and the JPEG check's (datasets.checked)."""
    from rich import progress as rp
    return rp.Progress(rp.TextColumn(description), rp.BarColumn(), rp.MofNCompleteColumn(),
                       rp.TimeRemainingColumn(), console=console, transient=True, **kw)
