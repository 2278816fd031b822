"""The `compare` command line: run, list, doctor here; report, diff, history and check in
commands/reporting.py, images in commands/images.py. One function per command.

Bad input is one line on stderr and exit code 2 (UserError, caught once in main()), an internal
error one line and exit 70; a traceback only with --debug.
"""
import functools
import inspect
import os
import re
import sys
from typing import Any, Dict, List, Optional

import typer

try:  # typer >= 0.2x vendors click
    from typer._click.exceptions import BadOptionUsage, MissingParameter, UsageError
except ImportError:  # pragma: no cover - older typer on real click
    from click.exceptions import BadOptionUsage, MissingParameter, UsageError

from . import executors
from . import frameworks as fws
from .errors import UserError
from .stages.run import Interrupted

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None,
                  help="Benchmark CNN training (ResNet-50 by default) across frameworks.")
list_app = typer.Typer(help="List what compare knows.", no_args_is_help=True)
app.add_typer(list_app, name="list")
from .commands import data_folders as _data  # noqa: E402  (compare data make|prepare|info)
from .commands import err as _err  # noqa: E402
from .commands import images as _images  # noqa: E402  (compare images build|list)
from .commands import reporting as _reporting  # noqa: E402  (report, diff, history, check)

app.add_typer(_images.app, name="images")
app.add_typer(_data.app, name="data")


@app.callback()
def _root(debug: bool = typer.Option(False, "--debug", help="Show tracebacks on errors.")):
    """(--debug is read by main() before the command line is parsed.)"""


def _with_study_flags(command):
    """Give `command` a flag for every setting of the Study (study.declared(): each executor's own
    flags after --executor), each None unless given: typer reads the parameters from
    __signature__; the command gets the ones given as one dict, by setting name."""
    from . import study
    params = []
    for s in study.declared():
        text = s.help + ("" if s.default in (None, (), False) or s.parse is None else
                         " Default: {}.".format(study.show(s.default)))
        if s.parse is None:  # a switch, and its --no- form (to turn off what a file turned on)
            option, kind = typer.Option(None, "{0}/--no-{1}".format(s.flag, s.flag[2:]), help=text), \
                Optional[bool]
        else:
            option = typer.Option(None, s.flag, help=text, metavar="LIST" if s.axis else "TEXT")
            kind = Optional[List[str]] if s.repeat else Optional[str]
        params.append(inspect.Parameter(s.name, inspect.Parameter.KEYWORD_ONLY, default=option,
                                        annotation=kind))

    @functools.wraps(command)
    def with_flags(**given):
        return command({k: v for k, v in given.items() if v is not None and v != []})
    with_flags.__signature__ = inspect.Signature(params)
    return with_flags


@app.command()
@_with_study_flags
def run(flags: Dict[str, Any]):
    """Run the benchmark matrix and record every cell in a campaign folder (flags, or a campaign
    file: --config study.toml)."""
    from . import stages, study
    raise typer.Exit(stages.execute(study.build(flags)))


_reporting.register(app, list_app)  # report, diff, history, check, list references


@list_app.command("frameworks")
def list_frameworks():
    """The frameworks, their aliases and backends."""
    for fw in fws.FRAMEWORKS:
        print("{:<8} aliases: {:<32} backend: {}".format(fw.name, ", ".join(fw.aliases), fw.backend))


@list_app.command("launchers")
def list_launchers():
    """How the processes of a run start (backends/launchers/); each backend asks for one."""
    from backends.contract.shared import launchers
    for name, line in launchers.described().items():
        print("{:<10} {}".format(name, line))


@list_app.command("models")
def list_models():
    """The networks --model takes: definition, parameters, image size, FLOPs per image."""
    from backends.contract.shared import networks
    print("{:<11} {:<16} {:>12} {:>7} {:>10} {:>6}  {}".format(
        "model", "network", "parameters", "input", "GFLOPs", "quick", "definition (every framework)"))
    for name, n in networks.summary().items():
        if n["unsupported"]:
            print("{:<11} {:<16} unsupported: {}".format(name, n["title"], n["unsupported"]))
            continue
        print("{:<11} {:<16} {:>12,} {:>7} {:>10.2f} {:>6}  {}: {}".format(
            name, n["title"], n["parameters"], "{0}x{0}".format(n["native"]), 2 * n["macs"] / 1e9,
            n["quick"], n["reference"], n["note"]))
    print("parameters: trainable, 1000 classes (BN running statistics not counted). GFLOPs: "
          "2 x the multiply-adds of the convolutions and fully connected layers of one forward "
          "pass at the native input size, counted from the layer shapes (backends/networks.py); "
          "BN, ReLU, pooling and additions left out; a training step is about 3x. torchvision's "
          "tables list the multiply-adds (half these figures) as GFLOPS. quick: the size --quick "
          "uses. " + networks.DROPOUT_NOTE)


@list_app.command("options")
def list_options(framework: Optional[str] = typer.Argument(
        None, help="One framework (default: all).")):
    """The --option keys each backend reads: type or values, default, what it does."""
    chosen = [fws.get(framework)] if framework is not None else fws.FRAMEWORKS
    for i, fw in enumerate(chosen):
        print("{}{} ({}): --option KEY=VALUE or {}.KEY=VALUE".format(
            "\n" if i else "", fw.name, fw.display, fw.name))
        for opt in fw.options():
            print("  " + opt.describe())
        _print_modes(fw, "  --mode {} sets: ")


@list_app.command("pipelines")
def list_pipelines(framework: Optional[str] = typer.Argument(
        None, help="One framework (default: all).")):
    """The input pipelines of --data DIR each backend has, in order of preference (decode=auto
    takes the first that runs), and what each decodes where (backends/pipelines/)."""
    chosen = [fws.get(framework)] if framework is not None else fws.FRAMEWORKS
    for i, fw in enumerate(chosen):
        rows = fw.pipelines()
        print("{}{} ({}):".format("\n" if i else "", fw.name, fw.display))
        for p in rows:
            how = "its one pipeline" if len(rows) == 1 else \
                "--option {}={}".format("pipeline" if p.own else "decode", p.name)
            print("  {:<9} {}{}: {}".format(p.name, how, ", GPUs only" if p.gpu else "", p.does))


def _print_modes(fw, heading: str) -> None:
    for name, switches in getattr(fw.module(), "MODES", {}).items():
        print((heading.format(name) + ("" if switches else "no switch (the default's), only "
                                       "the best batch (--batch-size auto)")).rstrip())
        for switch in switches:
            print("    " + switch.describe())


@list_app.command("modes")
def list_modes(framework: Optional[str] = typer.Argument(None, help="One framework (default: all).")):
    """What each mode switches on, per framework: `default` sets nothing; `tuned` sets the
    switches below and runs at the best batch (--batch-size auto)."""
    chosen = [fws.get(framework)] if framework is not None else fws.FRAMEWORKS
    for i, fw in enumerate(chosen):
        print("{}{} ({}):".format("\n" if i else "", fw.name, fw.display))
        print("  default: no switch: every option at its default")
        _print_modes(fw, "  {}, at the best batch: ")


@app.command()
def doctor():
    """What this machine offers: GPUs, CUDA driver, executors, backend environments."""
    from . import envs, machine_record
    gpus = machine_record.gpus()
    print("cpu:     {} ({} cores, {} GiB)".format(
        machine_record.cpu_model(), machine_record.info()["cpu_count"], machine_record.memory_gib()))
    print("gpus:    {}".format(", ".join(g["name"] for g in gpus) if gpus else
                               "none (nvidia-smi lists no GPU)"))
    print("driver:  {}".format(gpus[0]["driver"] if gpus else "none"))
    device = "cuda" if gpus else "cpu"
    ctx = executors.Context(fws.FRAMEWORKS, device)
    for name, ok, why in executors.status(ctx):
        print("{:<17}{}: {}".format("executor " + name + ":", "available" if ok else "not available",
                                    why))
        print("  can run: " + executors.can_run(executors.load(name), bool(gpus)))
        for line in executors.load(name).describe(ctx) if ok else []:
            print("  " + line)
    try:
        cls, why = executors.choose(executors.AUTO, ctx)
        print("executor: {} (--executor auto: {})".format(cls.name, why))
    except UserError as exc:
        print("executor: none ({})".format(exc))
    problem = envs.cache_problem()
    print("cache:   {}".format(problem or envs.cache_dir()))
    for fw in fws.FRAMEWORKS:
        if envs.in_current(fw):
            where = "current interpreter ({})".format(sys.executable)
        else:
            found = None if problem else envs.existing(fw, device)
            where = "managed env {}".format(found) if found else \
                "managed env not created yet (cannot be made: {} is not a folder)".format(
                    problem.split(" ", 1)[0]) if problem else \
                "managed env not created yet (made on first run: {})".format(envs.env_dir(fw, device))
        print("{:<8} {}".format(fw.name + ":", where))


# exit codes: 0 pass; 1 a measured shortfall (`check` FAIL) or a failed run (a cell `failed` or
# `timeout`); 2 bad input; 70 an internal error (EX_SOFTWARE); 130/143 stopped by SIGINT/SIGTERM
BAD_INPUT, INTERNAL = UserError.exit_code, 70


def main(argv: Optional[List[str]] = None) -> None:
    """Console entry point: one line on stderr per error; exit 2 for bad input, 70 for an
    internal error (so that CI tells a crash from the 1 of a failed check). A reader that goes
    away (`compare list options | head -1`) ends the output quietly: exit 0, or the code the
    command had already decided."""
    try:
        _main(argv)
        code = 0
    except SystemExit as exc:
        # click answers a broken pipe itself: exit 1, stdout swapped for its PacifyFlushWrapper
        code = 0 if type(sys.stdout).__name__ == "PacifyFlushWrapper" else exc.code
    except BrokenPipeError:
        code = 0
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # nothing more may reach it, also not at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(code)


def _not_an_integer(exc: UsageError) -> Optional[str]:
    """An integer option given text ('--images abc'): its flag and the value as typed, as the
    settings' own parsers say it, in place of typer's 'Invalid value for ...: Input should be a
    valid integer, unable to parse string as an integer' (which names neither)."""
    param, cause = getattr(exc, "param", None), exc.__cause__
    try:
        first = cause.errors()[0] if hasattr(cause, "errors") else {}
    except Exception:  # noqa: BLE001 - another validator's exception: click's line as it is
        return None
    opts = getattr(param, "opts", None)
    if not opts or not str(first.get("type", "")).startswith("int_"):
        return None
    return "{} {!r}: not an integer; give a whole number".format(
        max(opts, key=len), str(first.get("input")))


def _arguments(exc: UsageError) -> Optional[str]:
    """A command given too few arguments (or not a required option): what it needs, with its
    help; given too many: what it takes. None for any other usage error."""
    ctx = exc.ctx
    if ctx is None:
        return None
    more = "(`{} --help` says ".format(ctx.command_path)
    param = getattr(exc, "param", None)
    if isinstance(exc, MissingParameter) and param is not None:
        name = max(param.opts, key=len) if param.param_type_name == "option" else (
            param.metavar or param.name.upper())
        text = (getattr(param, "help", None) or "").strip().rstrip(".")
        if text[:1].isupper() and not text[1:2].isupper():  # "A folder" -> "a folder", not "DIR"
            text = text[0].lower() + text[1:]
        return "{} needs {}{} {}more)".format(ctx.command_path, name, ": " + text if text else "", more)
    extra = re.match(r"Got unexpected extra arguments? ?(?:\(s\))? \((.*)\)$", exc.format_message())
    if extra:
        takes = [p.name.upper() for p in ctx.command.params if p.param_type_name == "argument"]
        return "{} takes {}; got {}{} {}what it does)".format(
            ctx.command_path, " ".join(takes) or "no argument", extra.group(1) or "''",  # '' given
            " too" * bool(takes), more)
    return None


def _option_usage(exc: UsageError, argv: List[str]) -> Optional[str]:
    """An option given without its value ('--gpus' last), or a switch given one ('--quick=1'):
    what it takes, from its help. click says "Option '--gpus' requires an argument." without its
    command (the error carries no context): the command is found from `argv`."""
    if not isinstance(exc, BadOptionUsage):
        return None
    command, path = typer.main.get_command(app), ["compare"]
    for word in argv:  # the (sub)command the words name, up to the first that is none
        sub = command.commands.get(word) if hasattr(command, "commands") else None
        if sub is None:
            break
        command, path = sub, path + [word]
    param = next((p for p in command.params if exc.option_name in p.opts + p.secondary_opts), None)
    if param is None:
        return None
    more = "(`{} --help` says more)".format(" ".join(path))
    if param.is_flag:
        return "{} takes no value: give {} {}".format(exc.option_name, " or ".join(
            param.opts + param.secondary_opts), more)
    text = re.split(r"(?<!e\.g)(?<!i\.e)\.(?:\s|$)", (param.help or "").strip())[0]  # 1st sentence
    text = text[0].lower() + text[1:] if text[:1].isupper() and not text[1:2].isupper() else text
    return "{} needs a value{} {}".format(exc.option_name, ": " + text if text else "", more)


def _usage_line(exc: UsageError) -> str:
    """click's message in one line; where a command group wants a command (none given, or one it
    does not have), with the commands it has, as every other bad value names the valid ones;
    where a command lacks an argument or has one too many, what it needs or takes."""
    line = exc.format_message().splitlines()[0]
    bad = _not_an_integer(exc) or _arguments(exc)
    if bad:
        return bad
    ctx = exc.ctx
    group = ctx.command if ctx is not None else None
    wanted = line.startswith(("Usage:", "Missing command", "No such command"))
    if not hasattr(group, "list_commands") or not wanted:
        return line
    names = ", ".join(n for n in group.list_commands(ctx) if not group.get_command(ctx, n).hidden)
    if not line.startswith("No such command"):  # no_args_is_help: its usage line says nothing here
        return "{} needs a command; choose from {} (`{} --help` says what each does)".format(
            ctx.command_path, names, ctx.command_path)
    return "{} Choose from {}.".format(line, names)


class _CtrlC(Exception):
    """A Ctrl-C (KeyboardInterrupt) carried past typer, which turns one into a silent exit 130."""


def _command():
    """`app` as the command it runs, each value in its --help named as a reader gives it: typer
    0.2x printed the code's types (`campaigns... <list[str]>`, `--images <int>`) and braces in the
    usage line (`{campaign}`). An argument is its metavar (NAME, `NAME...` where it takes several;
    `[NAME]` in the usage where it may be left out), an option without one click's TEXT,
    INTEGER or FLOAT; an older typer (on click) printed them so already."""
    command = typer.main.get_command(app)
    invoke = command.invoke

    def invoke_keeping_ctrl_c(ctx):
        try:
            return invoke(ctx)
        except KeyboardInterrupt:  # typer would return a silent 130 for it: _main says it
            raise _CtrlC() from None
    command.invoke = invoke_keeping_ctrl_c
    todo = [command]
    while todo:
        cmd = todo.pop()
        todo += list(getattr(cmd, "commands", {}).values())
        for param in cmd.params:
            if hasattr(param, "type_descriptor"):  # typer's own parameters (0.2x)
                _plain_metavar(param)
    return command


def _plain_metavar(param) -> None:
    """One parameter of _command(): its metavar, and what shows it."""
    if param.param_type_name == "argument":
        shown = param.metavar or param.name.upper() + ("..." if param.nargs != 1 else "")
        usage = shown if param.required else "[{}]".format(shown)
        param.metavar = shown
        param._rich_display_name = lambda: shown  # the name column, the type column none
        param._usage_display_name = lambda: usage
        param.display_type_rich = lambda ctx: None
    elif param.metavar is None and not getattr(param, "is_flag", False):
        kind = param.type_descriptor.annotation
        param.metavar = {int: "INTEGER", float: "FLOAT"}.get(kind, "TEXT")


def _given_twice(argv: List[str]) -> List[str]:
    """A flag of one value given twice ('--frameworks caffe2 --frameworks jax'): click takes the
    last, where --option and --python gather every one; a warning that says so for each. A
    warning, not an error: a script may give defaults and then the caller's flags over them
    (bench/realdata_gpu.sh's RUNARGS)."""
    command = typer.main.get_command(app)
    words = list(argv[:argv.index("--")] if "--" in argv else argv)
    while words and hasattr(command, "commands") and words[0] in command.commands:
        command = command.commands[words.pop(0)]
    seen: Dict[str, str] = {}
    said: List[str] = []
    skip = False
    for i, word in enumerate(words):
        if skip:  # the value of the flag before it ('--results --steps' names a folder)
            skip = False
            continue
        name, eq, value = word.partition("=")
        param = next((p for p in getattr(command, "params", []) if p.param_type_name == "option"
                      and name in p.opts + p.secondary_opts), None)
        if param is None or not name.startswith("--"):
            continue
        skip = not eq and not param.is_flag
        if param.multiple:
            continue
        if not eq:
            value = name if param.is_flag else words[i + 1] if i + 1 < len(words) else ""
        label = "/".join(param.opts + param.secondary_opts)
        if param.name in seen:
            several = "Comma list" in (param.help or "") and not param.is_flag
            said.append("{} is given twice ({}, then {}): {} is used, the first left out{}".format(
                label, seen[param.name], value, value, " (a comma list gives several: {} {},{})".format(
                    label, seen[param.name], value) if several else ""))
        seen[param.name] = value
    return said


def _main(argv: Optional[List[str]]) -> None:
    argv = sys.argv[1:] if argv is None else argv
    debug = "--debug" in argv
    for line in _given_twice([a for a in argv if a != "--debug"]):
        _err("warning: " + line)
    try:  # --debug is read here, so it may follow the command too ("rerun with --debug")
        code = _command()(args=["--debug"] * debug + [a for a in argv if a != "--debug"], prog_name="compare",
                   standalone_mode=False)
    except UserError as exc:
        if debug:
            raise
        _err("error: {}".format(exc))
        sys.exit(exc.exit_code)
    except Interrupted as exc:
        _err(exc.line())
        sys.exit(exc.exit_code)
    except UsageError as exc:
        _err("error: {}".format(_option_usage(exc, [a for a in argv if a != "--debug"]) or _usage_line(exc)))
        sys.exit(BAD_INPUT)
    except (typer.Abort, KeyboardInterrupt, _CtrlC):
        _err("interrupted; results recorded so far are kept")
        sys.exit(130)
    except BrokenPipeError:
        raise  # main() ends quietly
    except Exception as exc:  # unexpected: one line unless --debug
        if debug:
            raise
        if isinstance(exc, OSError) and exc.filename:  # on a path, most often one the user gave
            _err("error: {}: {}".format(exc.filename, exc.strerror or exc))
            sys.exit(BAD_INPUT)
        _err("internal error: {}: {} (rerun with --debug for the traceback)".format(
            type(exc).__name__, exc))
        sys.exit(INTERNAL)
    sys.exit(code if isinstance(code, int) else 0)
