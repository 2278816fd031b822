"""The `compare` command line: run, list, doctor here; report, diff, history and check in
commands/reporting.py, images in commands/images.py. One function per command.

Bad input is one line on stderr and exit code 2 (UserError, caught once in main()); a traceback
only with --debug.
"""
import shlex
import signal
import sys
from pathlib import Path
from typing import List, Optional

import typer

try:  # typer >= 0.2x vendors click
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover - older typer on real click
    from click.exceptions import UsageError

from . import executors
from . import frameworks as fws
from .errors import UserError
from .runner import Interrupted

FRAMEWORKS_HELP = "Comma list of {} (aliases: `compare list frameworks`).".format(fws.choices())
app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None, help="Benchmark ResNet-50 training across frameworks.")
list_app = typer.Typer(help="List what compare knows.", no_args_is_help=True)
app.add_typer(list_app, name="list")
from .commands import data as _data  # noqa: E402  (compare data make|prepare|info)
from .commands import images as _images  # noqa: E402  (compare images build|list)
from .commands import reporting as _reporting  # noqa: E402  (report, diff, history, check)

app.add_typer(_images.app, name="images")
app.add_typer(_data.app, name="data")


@app.callback()
def _root(debug: bool = typer.Option(False, "--debug", help="Show tracebacks on errors.")):
    """(--debug is read by main() before the command line is parsed.)"""


def _err(msg: str) -> None:
    sys.stderr.write("compare: {}\n".format(msg))


@app.command()
def run(
    frameworks: str = typer.Option(None, help=FRAMEWORKS_HELP + " Default: all available."),
    gpus: str = typer.Option("1", help="Comma list of GPU counts per node (on CPU: worker processes)."),
    nodes: str = typer.Option("1", help="Comma list of node counts (an executor of a cluster)."),
    precision: str = typer.Option("fp32", help="Comma list of fp32, tf32, fp16, bf16."),
    batch_size: str = typer.Option("32", help="Comma list of per-GPU batch sizes."),
    device: str = typer.Option("auto", help="auto, cuda or cpu."),
    image_size: Optional[int] = typer.Option(None, help="Square image side (default 224; --quick 64)."),
    steps: Optional[int] = typer.Option(None, help="Timed steps (default 50; --quick 10)."),
    warmup: Optional[int] = typer.Option(None, help="Warm-up steps (default 10; --quick 3)."),
    windows: int = typer.Option(5, help="Timed steps are split into this many windows."),
    repeats: int = typer.Option(1, help="Runs per cell."),
    results: Optional[Path] = typer.Option(None, help="Campaign folder (default results/<time>)."),
    resume: bool = typer.Option(False, help="Continue the campaign in --results; skip finished cells."),
    timeout: float = typer.Option(1800, help="Seconds before a run is killed and recorded as timeout."),
    compile: bool = typer.Option(False, "--compile", help="Compile the step where the backend can "
                                 "(`compare list options` says how each does)."),
    quick: bool = typer.Option(False, help="Small images, few steps: a CPU sweep in minutes."),
    python: List[str] = typer.Option([], help="FRAMEWORK=PATH: run that backend with this python."),
    option: List[str] = typer.Option([], help="KEY=VALUE (or FRAMEWORK.KEY=VALUE) switch of the "
                                     "backends, checked against `compare list options`."),
    executor: str = typer.Option("auto", help="auto or one of {} (`compare doctor` says which "
                                 "can run here).".format(", ".join(executors.names()))),
    partition: Optional[str] = typer.Option(None, help="Slurm partition of the jobs (--executor slurm)."),
    account: Optional[str] = typer.Option(None, help="Slurm account charged (--executor slurm)."),
    time_limit: Optional[str] = typer.Option(None, help="Slurm time limit per job: minutes or "
                                             "HH:MM:SS (default: --timeout; --executor slurm)."),
    slurm_option: List[str] = typer.Option([], help="KEY=VALUE passed to sbatch as --KEY=VALUE, "
                                           "e.g. qos=high (--executor slurm)."),
    data: str = typer.Option("synthetic", help="Comma list of synthetic and/or an ImageNet-layout "
                             "folder read by each framework's own input pipeline (docs/data.md)."),
    data_only: bool = typer.Option(False, "--data-only", help="Time the input pipeline alone on "
                                   "the --data folder, no training: its ceiling."),
):
    """Run the benchmark matrix and record every cell in a campaign folder."""
    from .runner import RunConfig, execute
    cfg = RunConfig.parse(frameworks=frameworks, gpus=gpus, precision=precision,
                          batch_size=batch_size, device=device, image_size=image_size, steps=steps,
                          warmup=warmup, windows=windows, repeats=repeats, results=results,
                          resume=resume, timeout=timeout, compile=compile, quick=quick,
                          python=python, option=option, executor=executor, nodes=nodes,
                          settings={"partition": partition, "account": account,
                                    "time_limit": time_limit, "slurm_option": slurm_option},
                          data=data, data_only=data_only)
    raise typer.Exit(execute(cfg))


_reporting.register(app, list_app)  # report, diff, history, check, list references


@list_app.command("frameworks")
def list_frameworks():
    """The frameworks, their aliases, backends and availability."""
    for fw in fws.FRAMEWORKS:
        state = "available" if fw.available else fw.unavailable_reason
        print("{:<8} aliases: {:<32} backend: {:<13} {}".format(
            fw.name, ", ".join(fw.aliases), fw.backend, state))


@list_app.command("options")
def list_options(framework: Optional[str] = typer.Argument(
        None, help="One framework (default: all).")):
    """The --option keys each backend reads: type or values, default, what it does."""
    chosen = [fws.get(framework)] if framework else fws.FRAMEWORKS
    for i, fw in enumerate(chosen):
        print("{}{} ({}): --option KEY=VALUE or {}.KEY=VALUE".format(
            "\n" if i else "", fw.name, fw.display, fw.name))
        for opt in fw.options():
            print("  " + opt.describe())


@app.command()
def doctor():
    """What this machine offers: GPUs, CUDA driver, executors, backend environments."""
    import importlib.util

    from . import envs, machine
    gpus = machine.gpus()
    print("cpu:     {} ({} cores, {} GiB)".format(machine.cpu_model(), machine.info()["cpu_count"],
                                                 machine.memory_gib()))
    print("gpus:    {}".format(", ".join(g["name"] for g in gpus) if gpus else
                               "none (nvidia-smi lists no GPU)"))
    print("driver:  {}".format(gpus[0]["driver"] if gpus else "none"))
    device = "cuda" if gpus else "cpu"
    ctx = executors.Context(fws.available(), device)
    for name, ok, why in executors.status(ctx):
        print("{:<17}{}: {}".format("executor " + name + ":", "available" if ok else "not available",
                                    why))
        for line in executors.load(name).describe(ctx) if ok else []:
            print("  " + line)
    try:
        cls, why = executors.choose(executors.AUTO, ctx)
        print("executor: {} (--executor auto: {})".format(cls.name, why))
    except UserError as exc:
        print("executor: none ({})".format(exc))
    for fw in fws.FRAMEWORKS:
        if not fw.available:
            where = fw.unavailable_reason
        elif importlib.util.find_spec(fw.import_name):
            where = "current interpreter ({})".format(sys.executable)
        else:
            found = envs.existing(fw, device)
            where = "managed env {}".format(found) if found else \
                "managed env not created yet (made on first run: {})".format(envs.env_dir(fw, device))
        print("{:<8} {}".format(fw.name + ":", where))


def resume_command(argv: List[str], campaign: Path) -> str:
    """The command line that continues `campaign`: argv with --results (absolute) and --resume."""
    args, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--results":
            skip = True
        elif not arg.startswith("--results=") and arg != "--resume":
            args.append(arg)
    args += ["--results", str(campaign), "--resume"]
    return "compare " + " ".join(shlex.quote(a) for a in args)


def main(argv: Optional[List[str]] = None) -> None:
    """Console entry point: one line on stderr per error, exit 2 for bad input."""
    argv = sys.argv[1:] if argv is None else argv
    debug = "--debug" in argv
    try:
        code = app(args=argv, prog_name="compare", standalone_mode=False)
    except UserError as exc:
        if debug:
            raise
        _err("error: {}".format(exc))
        sys.exit(exc.exit_code)
    except Interrupted as exc:
        _err("interrupted ({}): {} cell{} recorded, {} not run; resume with: {}".format(
            signal.Signals(exc.signum).name, exc.recorded, "" if exc.recorded == 1 else "s",
            exc.remaining, resume_command(argv, exc.campaign.root)))
        sys.exit(exc.exit_code)
    except UsageError as exc:
        _err("error: {}".format(exc.format_message().splitlines()[0]))
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        _err("interrupted; results recorded so far are kept")
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:  # unexpected: one line unless --debug
        if debug:
            raise
        _err("internal error: {}: {} (rerun with --debug for the traceback)".format(
            type(exc).__name__, exc))
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)
