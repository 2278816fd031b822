"""The sweep's progress bar: cell k of n, what runs now, the last figure measured."""
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from backends.protocol import RunResult, RunSpec


class SweepProgress:
    def __init__(self, console: Console, total: int):
        self.console = console
        self.progress = Progress(TextColumn("cell"), MofNCompleteColumn(), BarColumn(),
                                 TextColumn("{task.description}"), TimeElapsedColumn(),
                                 console=console, transient=False)
        self.task = self.progress.add_task("", total=total)
        self.last = ""

    def __enter__(self) -> "SweepProgress":
        self.progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.__exit__(*exc)

    def start(self, spec: RunSpec) -> None:
        unit = "GPU" if spec.device == "cuda" else "worker"
        self.progress.update(self.task, description="{} {} x{} {}{} b{}{}{}".format(
            spec.framework, spec.precision, spec.gpus, unit, "s" if spec.gpus > 1 else "",
            "auto" if spec.batch_auto else spec.batch_size,
            "" if spec.mode == "default" else " " + spec.mode, self.last))

    def done(self, result: RunResult) -> None:
        if result.status == "ok":
            self.last = " | last: {:.1f} img/s".format(result.images_per_sec)
        else:
            self.last = " | last: {}".format(result.status)
        self.console.print("{:<36} {:>8}  {}".format(
            result.run_id, result.status,
            "{:.2f} img/s".format(result.images_per_sec) if result.status == "ok"
            else (result.reason or "").splitlines()[0][:100] if result.reason else ""))
        self.progress.advance(self.task)
