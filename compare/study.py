"""The Study: one frozen description of a campaign, each of its settings declared once, here.

    compare run --frameworks caffe2,jax --gpus 1,2 --quick
    compare run --config study.toml --steps 20      # flags given beside the file override it

Each field of `Study` is a setting: the flag (`--image-size` for `image_size`), the type, the
default (None where the machine decides: compare/defaults.py), the bounds, the help, whether it is
a matrix axis (a comma list; in a file a TOML array or a comma string) and what `--resume` does
with it: HELD (it changes what a cell measures: a resumed campaign keeps it), FREE (it may change)
or SESSION (how this one command runs, never kept). The CLI's `run` options (cli.py), a campaign
file's keys, the bounds, the resume check and campaign.json all read these declarations.
A campaign file's relative paths are taken from the file's folder, a flag's from where it is typed.
"""
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from backends.contract import MODES, PRECISIONS
from backends.contract.shared import networks

from . import campaign_file, executors
from . import frameworks as fws
from . import parsing as p
from .errors import UserError
from .kept import asked_study, check_latest, json_kind, ran_with, rebuilt

FREE, HELD, SESSION = "free", "held", "session"
DEVICES = ("auto", "cuda", "cpu")
SPEC_NAMES = {"warmup": "warmup_steps"}  # a setting whose RunSpec field has another name


@dataclass(frozen=True)
class Setting:
    """How one setting is given, checked and kept (the field of Study it describes)."""

    help: str
    parse: Optional[Callable[[str, str, "Setting"], Any]] = None  # (text, label, self); None: a switch
    default: Any = None
    low: Optional[float] = None  # of a number (each number of a list), with why where it is not plain
    low_why: str = ""
    high: Optional[float] = None
    why: str = ""  # why the largest value is the largest
    rule: str = ""  # what a valid value is, where the bounds alone do not say it
    axis: bool = False  # one cell per value
    resume: str = HELD
    repeat: bool = False  # a flag given once per value
    sep: str = ","  # between the values of a list as typed
    name: str = ""

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


def _s(default, help: str, parse=None, **kw):
    """A field of Study and its declaration."""
    return field(default=default, metadata={"setting": Setting(help, parse, default, **kw)})


def _int(default, help: str, low: int, high: int, why: str, **kw):
    return _s(default, help, p.ints if kw.get("axis") else p.whole, low=low, high=high, why=why, **kw)


_PER_GPU = "images per worker and step"


@dataclass(frozen=True, kw_only=True)
class Study:
    """A campaign: its axes, its fixed settings, where and how it runs. Checks itself whole."""

    config: Optional[str] = _s(None, "A campaign file (TOML): every flag of `compare run` is a key "
                               "of the same name; flags given beside it override it.", p.as_given,
                               resume=SESSION)
    frameworks: Optional[Tuple[str, ...]] = _s(None, "Comma list of {} (aliases: `compare list "
                                               "frameworks`). Default: all available.".format(
                                                   fws.choices()), p.frameworks, axis=True, resume=FREE)
    gpus: Optional[Tuple[int, ...]] = _int(
        None, "Comma list of GPU counts per node (on CPU: worker processes). Default: every count the "
        "seeds report up to the GPUs present (1, 2, 4, 8 on eight); 1 on a CPU.", 1, 1024, "per node",
        axis=True, resume=FREE)
    nodes: Tuple[int, ...] = _int((1,), "Comma list of node counts (an executor of a cluster).", 1,
                                  1024, "machines per job", axis=True, resume=FREE)
    precision: Optional[Tuple[str, ...]] = _s(
        None, "Comma list of fp32, tf32, fp16, bf16. Default: fp32,fp16 on GPUs, fp32 on a CPU.",
        p.choice(lambda: PRECISIONS, "precision"), axis=True, resume=FREE)
    batch_size: Optional[Tuple] = _s(
        None, "Comma list of per-GPU batch sizes, and/or auto: the fastest batch that fits, searched "
        "(--batch-search). Default: a batch that fills the GPU, per network (compare/defaults.py); "
        "32 on a CPU.", p.batches, low=1, high=16384, why=_PER_GPU, axis=True, resume=FREE)
    batch_search: Optional[Tuple[int, int]] = _s(
        None, "MIN-MAX: where an auto batch is searched, doubling from MIN (default: cuda 64-1024, "
        "cpu 8-128).", p.search, high=16384, why=_PER_GPU, sep="-")
    mode: Tuple[str, ...] = _s(("default",), "Comma list of default, tuned: each framework as a "
                               "plain script runs it, or its documented fastest way at its best "
                               "batch (`compare list modes`).", p.choice(lambda: MODES, "mode"),
                               axis=True, resume=FREE)
    device: str = _s("auto", "auto, cuda or cpu.", p.choice(lambda: DEVICES, "device"))
    image_size: Optional[int] = _int(None, "Square image side (default: each network's native size, "
                                     "224 or 299; --quick 64 or 75).", 32, 2048, "pixels per side; "
                                     "one 2048 px image is 48 MiB as float32",
                                     low_why=" (ResNet-50 downsamples 32x)")
    steps: Optional[int] = _int(None, "Timed steps (default 50; --quick 10).", 1, 1_000_000,
                                "timed steps")
    warmup: Optional[int] = _int(None, "Warm-up steps (default 10; --quick 3).", 0, 100_000,
                                 "warm-up steps")
    windows: int = _int(5, "Timed steps are split into this many windows (at most --steps).", 1,
                        1000, "timed windows")
    repeats: int = _int(1, "Runs per cell.", 1, 100, "runs per cell", resume=FREE)
    results: Optional[str] = _s(None, "Campaign folder (default results/<time>).", p.path,
                                resume=SESSION)
    resume: bool = _s(False, "Continue the campaign in --results (its study as it was made, the "
                      "flags given now over it); skip finished cells.", resume=SESSION)
    timeout: float = _s(1800.0, "Seconds before a run is killed and recorded as timeout.", p.number,
                        low=0, high=7 * 24 * 3600, why="seconds, one week",
                        rule="a finite number of seconds > 0", resume=FREE)
    compile: bool = _s(False, "Compile the step where the backend can (`compare list options` says "
                       "how each does).")
    quick: bool = _s(False, "Small images, few steps: a CPU sweep in minutes.")
    python: Tuple[str, ...] = _s((), "FRAMEWORK=PATH: run that backend with this python.", p.python,
                                 repeat=True)
    option: Tuple[str, ...] = _s((), "KEY=VALUE (or FRAMEWORK.KEY=VALUE) switch of the backends, "
                                 "checked against `compare list options`; several: the flag again, "
                                 "or a comma list.", p.option, repeat=True)
    executor: str = _s(p.AUTO, "auto or one of {} (`compare doctor` says which can run here).".format(
        ", ".join(executors.names())), p.choice(lambda: [p.AUTO] + executors.names(), "executor"))
    # every executor's own flags (Executor.FLAGS), checked by the executor chosen
    executor_flags: Dict[str, Any] = field(default_factory=dict)
    data: Tuple[str, ...] = _s(("synthetic",), "Comma list of synthetic and/or an ImageNet-layout "
                               "folder read by each framework's own input pipeline (docs/data.md).",
                               p.data, axis=True, resume=FREE)
    data_only: bool = _s(False, "Time the input pipeline alone on the --data folder, no training: "
                         "its ceiling.", resume=FREE)
    model: Tuple[str, ...] = _s(
        ("resnet50",), "Comma list of networks (`compare list models`); each runs at its native image "
        "size unless --image-size is given.", p.choice(lambda: networks.names(supported_only=False),
                                                      "model", " (`compare list models`)"),
        axis=True, resume=FREE)
    concurrency: Optional[int] = _s(None, "Cells at once, each on GPUs (or cores) of its own: auto = "
                                    "as many as the free GPUs allow, 1 on a CPU.", p.concurrency,
                                    resume=FREE)
    target_accuracy: Optional[float] = _s(
        None, "Time to accuracy (docs/accuracy.md): train on DIR/train of --data DIR until top-1 on "
        "DIR/val reaches this, instead of timing steps.", p.number, low=0, high=1,
        rule="a top-1 accuracy in (0, 1], e.g. 0.759 (MLPerf's ResNet-50 target)")
    max_epochs: int = _int(10, "With --target-accuracy: epochs before a run stops as not_converged.",
                           1, 1000, "epochs per run")
    eval_every: int = _int(1, "With --target-accuracy: epochs between evaluations on DIR/val.", 1,
                           1000, "epochs")
    gpu_hour_price: Optional[float] = _s(
        None, "Dollars per GPU-hour: the report's cost to train of time-to-accuracy runs.", p.number,
        low=0, rule="a finite number of dollars > 0, e.g. 2.50", resume=FREE)
    plan: bool = _s(False, "Print the schedule (which cells run together, where) and its estimated "
                    "wall time from earlier runs, then exit.", resume=SESSION)
    plan_gpus: Optional[int] = _int(None, "With --plan: the same study on a machine of this many "
                                    "GPUs.", 1, 1024, "GPUs of the planned machine", resume=SESSION)
    plan_from: Optional[str] = _s(None, "With --plan: the folder of earlier campaigns whose cell "
                                  "times make the estimate (default: the folder holding "
                                  "--results, else results/).", p.folder,
                                  resume=SESSION)
    # where each setting came from: "default", "file" (this command's --config), "flag", "flag over
    # file" or "campaign" (--resume: kept from the campaign, as an earlier session gave it)
    sources: Dict[str, str] = field(default_factory=dict, compare=False)
    # campaign.json of the campaign --resume continues, as build() read it ({} otherwise)
    campaign: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    kept: Tuple[str, ...] = field(default=(), compare=False)  # the settings taken from it

    def __post_init__(self) -> None:
        """The rules between settings (each value was checked alone when it was parsed); a
        message names each setting as it was given: a key of the campaign file, or a flag."""
        n = self.said
        if self.resume and not self.results:
            raise UserError("{}{} needs {} naming the campaign to continue".format(
                self.at("resume"), n("resume"), self.ask("resume", "results", "DIR", '"DIR"')))
        for name in ("plan_gpus", "plan_from"):
            if getattr(self, name) is not None and not self.plan:
                raise UserError("{}{} belongs to {} (print the schedule and exit); add {}".format(
                    self.at(name), n(name), n("plan", name), self.ask(name, "plan")))
        self.options()  # each key declared, typed, given once
        names = [item.split("=", 1)[0] for item in self.python]
        twice = [item for i, item in enumerate(self.python) if names[i] in names[:i]]
        if twice:  # the last would win unseen
            raise UserError("{}{} {}: {} is given twice; give each framework once".format(
                self.at("python"), n("python"), twice[0], twice[0].split("=", 1)[0]))
        if self.data_only and set(self.data) == {"synthetic"}:
            both = (self.ask("data_only", "data", "synthetic,DIR", '["synthetic", "DIR"]'),
                    "data_only = true" if self.from_file("data_only") else "--data-only")
            raise UserError("{}{} times an input pipeline: give {} (a folder), e.g. {}".format(
                self.at("data_only"), n("data_only"), self.ask("data_only", "data", "DIR", '"DIR"'),
                (" " if all(x.startswith("--") for x in both) else " with ").join(both)))
        if set(self.data) == {"synthetic"}:
            self._no_pipeline_options()
        folders = [d for d in self.data if d != "synthetic"]
        if len(folders) > 1:  # a run id names the data mode (-real), not the folder
            raise UserError("{}{} {}: one folder per campaign (the cells of two folders would "
                            "have the same run ids, -real); run each folder in a campaign of its "
                            "own".format(self.at("data"), n("data"), ",".join(folders)))
        object.__setattr__(self, "executor_flags", executors.check_flags(
            self.executor, self.executor_flags, self.named))
        if self.batch_search is not None and not self.resume and p.AUTO not in (
                self.batch_size or ()) and "tuned" not in self.mode:  # a resumed campaign holds it
            raise UserError("{}{} {}: bounds the batch search of {} auto and {} tuned, and no cell "
                            "searches; add {} (or {}), or leave it out".format(
                                self.at("batch_search"), n("batch_search"),
                                "-".join(map(str, self.batch_search)), n("batch_size", "batch_search"),
                                n("mode", "batch_search"),
                                self.ask("batch_search", "batch_size", "auto", '["auto"]'),
                                self.ask("batch_search", "mode", "tuned", '["tuned"]')))
        self._tuned_batch()
        self._accuracy_rules()

    def _tuned_batch(self) -> None:
        """--mode tuned runs each cell at its best batch (auto): a batch size given beside tuned
        alone would name a batch no cell runs at (it was dropped unseen)."""
        sizes = [b for b in self.batch_size or () if b != p.AUTO]
        if not sizes or "default" in self.mode or self.sources.get("batch_size") in (None, "default",
                                                                                      "campaign"):
            return
        n = self.said
        raise UserError("{}{} {}: {} tuned runs each framework at its best batch (auto, searched "
                        "within {}), so no cell would run at it; add {}, or leave it out (bound "
                        "the search with {} MIN-MAX)".format(
                            self.at("batch_size"), n("batch_size"),
                            given_as(DECLARED["batch_size"], tuple(sizes), False), n("mode", "batch_size"),
                            n("batch_search", "batch_size"),
                            self.ask("batch_size", "mode", "default,tuned", '["default", "tuned"]'),
                            n("batch_search", "batch_size")))

    def _no_pipeline_options(self) -> None:
        """Synthetic data has no input pipeline: an --option of one (its help says PIPELINE_HELP)
        would do nothing, so it is refused, as --data-only without a folder is (a resumed
        campaign's own options are left alone)."""
        if self.resume and "option" in self.kept:
            return
        add = self.ask("option", "data", "DIR", '"DIR"')  # both in the words of the one to give
        both = "synthetic,DIR" if add.startswith("--") else '["synthetic", "DIR"]'
        for item in self.option:
            key = item.partition("=")[0].rpartition(".")[2]
            if any(o.key == key and PIPELINE_HELP in o.help
                   for fw in self.framework_list() for o in fw.options()):
                raise UserError("{} {}: belongs to {} (the input pipeline of a JPEG folder), and "
                                "this study's data is synthetic only; add {} ({} for both), or "
                                "leave it out".format(self.label("option"), item,
                                                      self.said("data", "option"), add, both))

    def _accuracy_rules(self) -> None:
        """Time to accuracy trains on DIR/train and evaluates on DIR/val (docs/accuracy.md). A
        GPU-hour price prices its runs only (their cost to train: reporting/accuracy.py); given to
        a throughput study it would be kept and used nowhere."""
        from .datasets import held_out
        n, target = self.said, "target_accuracy"
        if self.target_accuracy is None:
            for name in ("max_epochs", "eval_every"):
                if getattr(self, name) != DECLARED[name].default:
                    raise UserError("{}{} belongs to {} (time to accuracy); add {}".format(
                        self.at(name), n(name), n(target, name), self.ask(name, target, "", "0.759")))
            if self.gpu_hour_price is not None:
                raise UserError("{}{} {}: prices time-to-accuracy runs (their cost to train), and "
                                "this study has none; add {}, or leave the price out".format(
                                    self.at("gpu_hour_price"), n("gpu_hour_price"), self.gpu_hour_price,
                                    self.ask("gpu_hour_price", target, "0.759", "0.759")))
            return
        if "synthetic" in self.data or self.data_only:
            raise UserError("{}{} trains on a folder and evaluates on its held-out part: give {} "
                            "(DIR/train and DIR/val), without synthetic or {}".format(
                                self.at(target, "data", "data_only"), n(target),
                                self.ask(target, "data", "DIR", '"DIR"'), n("data_only", target)))
        for folder in self.data:
            if not held_out(folder):
                raise UserError("{}{} {}: no held-out part: time to accuracy evaluates top-1 on "
                                "DIR/val beside DIR/train (`compare data make DIR --learnable small` "
                                "makes both; else move a fixed share of each class's JPEGs into "
                                "DIR/val/<class>)".format(self.at("data"), n("data"), folder))
        if p.AUTO in (self.batch_size or ()) or "tuned" in self.mode:
            raise UserError("{}{}: {} auto and {} tuned choose the batch by throughput probes, not "
                            "built for time to accuracy; give {} and {}".format(
                                self.at(target, "batch_size", "mode"), n(target),
                                n("batch_size", target), n("mode", target),
                                self.ask(target, "batch_size", "N", "[N]"),
                                self.ask(target, "mode", "default", '"default"')))
        if self.eval_every > self.max_epochs:  # the harness evaluates after the last epoch only,
            # once, which --eval-every did not ask for (no documented use needs it)
            raise UserError("{}{} {}: more than {} {}, so it would evaluate once, after the last "
                            "epoch; give {} from 1 to {}".format(
                                self.at("eval_every", "max_epochs"), n("eval_every"), self.eval_every,
                                n("max_epochs", "eval_every"), self.max_epochs, n("eval_every"),
                                self.max_epochs))

    def from_file(self, name: str) -> bool:
        """Whether the setting's value is this command's campaign file's (not a flag's, not a
        default, not one a resumed campaign kept: its source is then "campaign")."""
        return self.config is not None and self.sources.get(name) == "file"

    def at(self, *names: str) -> str:
        """A message's start: the campaign file as it was given, where one of `names` came
        from it (as every other message about the file's values begins)."""
        return "{}: ".format(self.config) if any(map(self.from_file, names)) else ""

    def said(self, name: str, beside: str = "") -> str:
        """A setting in a message: its key where it (or the setting `beside` it, when it was not
        given) came from the campaign file, else its flag."""
        near = self.from_file(name) or (not self.given(name) and beside and self.from_file(beside))
        return name if near else _setting(name).flag

    def label(self, name: str) -> str:
        """One setting in a message about it alone: `study.toml: gpus` or `--gpus`."""
        return self.at(name) + self.said(name)

    def named(self, name: str, about: str = "", value: Optional[str] = None) -> str:
        """A setting as the executors' messages name it (executors.check_flags' `named`): the
        message's subject `name` as label() says it; another setting to give instead of what
        `about` holds, in the words `about` was given in; with a `value`, as ask() says it."""
        if value is not None:
            return self.ask(about, name, value, '"{}"'.format(value))
        if not about:
            return self.label(name)
        return name if self.from_file(about) else _setting(name).flag

    def ask(self, trigger: str, name: str, flag_value: str = "", toml_value: str = "true") -> str:
        """What to give for `name`, where it is in effect: its flag where a flag gave it (over
        the file too), its key of the campaign file where the file did (the file named, where
        `trigger` is a flag's); not given, as `trigger` was given: a key of the file, else a flag
        (a switch's flag alone)."""
        if self.from_file(name) or (not self.given(name) and self.from_file(trigger)):
            return "{} = {}{}".format(name, toml_value, "" if self.from_file(trigger) else
                                      " in {}".format(self.config))
        return "{} {}".format(DECLARED[name].flag, flag_value).rstrip()

    def resuming(self, folder: Any = None) -> str:
        """The resume in a message about the campaign it continues (`folder`, default --results):
        `--resume DIR`, or the campaign file's key where the file asked for it."""
        return resuming(self.sources, self.config, self.results if folder is None else folder)

    def options(self) -> Dict[str, Dict[str, Any]]:
        """--option as {framework: {key: typed value}}; a resumed campaign's own (not given now)
        may name a framework the resume leaves out (parsing.options)."""
        return p.options(self.option, self.framework_list(), self.label("option"),
                         kept=self.resume and "option" in self.kept,
                         named=self.said("frameworks", "option"))

    def framework_list(self) -> List[fws.Framework]:
        return [fws.get(n) for n in self.frameworks] if self.frameworks else list(fws.FRAMEWORKS)

    def given(self, name: str) -> bool:
        """Whether the setting was given (by a flag or the campaign file), not left at its default."""
        return self.sources.get(name, "default") != "default"

    @property
    def overrides(self) -> Dict[str, str]:
        """--python as {framework: absolute path}."""
        return dict(item.split("=", 1) for item in self.python)

    def to_json(self) -> Dict[str, Any]:
        """What campaign.json keeps: every setting but the SESSION ones, lists as lists."""
        return {name: list(v) if isinstance(v, tuple) else v for name, v in vars(self).items()
                if name == "executor_flags" or name in DECLARED and DECLARED[name].resume != SESSION}


# what the help of a backend's --option that only an input pipeline reads says (backends/)
PIPELINE_HELP = "with --data DIR"

DECLARED: Dict[str, Setting] = {f.name: replace(f.metadata["setting"], name=f.name)
                                for f in fields(Study) if "setting" in f.metadata}


def _setting(name: str) -> Setting:
    """A setting by its name, an executor's own flag too."""
    return DECLARED.get(name) or next(s for s in declared() if s.name == name)


def declared() -> List[Setting]:
    """Every setting of `compare run`, in the order of its help: Study's, with each executor's own
    flags (Executor.FLAGS) after --executor."""
    own = list(DECLARED.values())
    extra = [Setting(flag.help, lambda text, label, s: text, None, repeat=flag.repeat, resume=FREE,
                     name=flag.key) for _, flag in executors.flags()]
    at = [s.name for s in own].index("executor") + 1
    return own[:at] + extra + own[at:]


def _typed(s: Setting, value: Any, where: Optional[str] = None, key: Optional[str] = None) -> Any:
    """A value as given (text from a flag; text, number, list or boolean from a file `where`)
    -> typed; a message about a file's value names the file and the key; one about campaign.json's
    names its `key` (gpus, executor_flags.time_limit)."""
    label = "{}: {}".format(where, s.name) if where else key or s.flag
    where = where or key
    try:
        if s.parse is None:
            if not isinstance(value, bool):
                raise UserError("{} = {}: give true or false".format(label, campaign_file.toml(value)))
            return value
        if isinstance(value, (list, tuple)) and any(isinstance(v, (list, tuple, dict)) for v in value):
            raise UserError("{} = {}: give a list of values, not of lists or tables".format(
                label, campaign_file.toml(value)))
        if s.repeat:  # a parser may read several from one text (option: a comma list)
            parsed = [s.parse(p.as_text(v), label, s) for v in (
                value if isinstance(value, (list, tuple)) else [value])]
            return tuple(x for v in parsed for x in (v if isinstance(v, tuple) else (v,)))
        if isinstance(value, (list, tuple)):
            if not s.axis and s.sep == ",":
                raise UserError("{} = {}: give one value, not a list".format(
                    label, campaign_file.toml(value)))
            value = s.sep.join(p.as_text(v) for v in value)
        return s.parse(p.as_text(value), label, s)
    except UserError as exc:
        if where and not str(exc).startswith(label):
            raise UserError("{}: {}".format(label, exc)) from None
        raise


def read_file(path: str) -> Dict[str, Any]:
    """A campaign file's settings as given (campaign_file.py): every setting but --config."""
    return campaign_file.read(path, {s.name: s for s in declared() if s.name != "config"})


def build(flags: Dict[str, Any]) -> "Study":
    """The Study of `compare run`: the flags given (by name) over the campaign file --config names,
    over the declared defaults; with --resume, over the study the campaign stored (a HELD setting
    given with another value is one line naming it)."""
    known = {s.name: s for s in declared()}
    path = flags.get("config")
    values: Dict[str, Any] = {}
    sources: Dict[str, str] = {}
    for given, where in ((read_file(path) if path is not None else {}, path), (flags, None)):
        for name, value in given.items():
            values[name] = _typed(known[name], value, where)
            sources[name] = "flag over file" if not where and name in sources else (
                "file" if where else "flag")
    own = {k: v for k, v in values.items() if k in DECLARED}
    ex = {k: v for k, v in values.items() if k not in DECLARED}
    if not (own.get("resume") and own.get("results")):
        return Study(**own, executor_flags=ex, sources=sources)
    said = resuming(sources, path, own["results"])  # the message's start names the file, if any
    meta = _campaign_json(own["results"], resume_off(sources, path), said)
    base, base_sources, its_own = stored(meta, own["results"], set(values), said)
    ran = ran_with(meta)
    def held(k, v):  # a held setting given anew, as it was given: a campaign file's by the file
        s, in_file = DECLARED[k], sources.get(k) == "file"  # and its key in TOML, a flag's as typed
        theirs = base.get(k, s.default)
        return "{}{} (the campaign's: {}{})".format(
            "{}{} ".format("" if said.startswith(path + ": ") else path + ": ", k) if in_file else
            "" if s.parse is None else s.flag + " ",
            given_as(s, v, in_file), given_as(s, theirs, in_file), ", which ran {}".format(
                given_as(s, ran, in_file)) if k == "executor" and ran and ran != theirs else "")
    frameworks = own.get("frameworks", base.get("frameworks"))
    differ = [held(k, v) for k, v in own.items() if DECLARED[k].resume == HELD and not _same(
        k, v, base.get(k, DECLARED[k].default), frameworks) and not (k == "executor" and v == ran)]
    # (auto's choice, named, is the campaign's: what the error advises)
    if differ and its_own:  # a rebuilt study's are checked as they resolve (Campaign.resume)
        raise UserError("{}: {}: held by the campaign (they change what its cells measure); "
                        "leave them out (the campaign's are used) or start a new campaign".format(
                            said, "; ".join(differ)))
    ex = dict(base.pop("executor_flags", {}), **ex)
    return Study(**dict(base, **own), executor_flags=ex, sources=dict(dict.fromkeys(
        base_sources, "campaign"), **sources), campaign=meta, kept=tuple(k for k in base if k not in own))


def resuming(sources: Dict[str, str], config: Optional[str], folder: Any) -> str:
    """How a message names the resume of the campaign in `folder`: as typed (`--resume DIR`), or,
    where campaign file `config` asked for it, by the file and its key, the folder as given
    (`study.toml: resume = true (results DIR)`, or `(--results DIR)` where a flag named it)."""
    if config and sources.get("resume") == "file":
        return "{}: resume = true ({} {})".format(config, "results" if sources.get("results") == "file"
                                                  else "--results", folder)
    return "--resume {}".format(folder)


def resume_off(sources: Dict[str, str], config: Optional[str]) -> str:
    """What to leave out to create a campaign instead of resuming it: the flag, or the file's key."""
    return "resume = true in {}".format(config) if config and sources.get("resume") == "file" \
        else "--resume"


def _same(name: str, mine: Any, theirs: Any, frameworks) -> bool:
    """Whether a held setting given anew is the campaign's: --option and --python by what they
    say, in any order or spelling (loader_workers=1,channels_last=true is channels_last=1 and
    loader_workers=1), each option as the frameworks of this run take it."""
    if mine == theirs or name not in ("option", "python"):
        return mine == theirs
    if name == "python":
        return dict(x.split("=", 1) for x in mine) == dict(x.split("=", 1) for x in theirs or ())
    try:
        chosen = [fws.get(n) for n in frameworks] if frameworks else list(fws.FRAMEWORKS)
        return p.options(mine, chosen) == p.options(theirs or (), chosen, kept=True)
    except UserError:  # a bad option given now: Study says so
        return False


def _campaign_json(results: str, resume: str, said: str) -> Dict[str, Any]:
    """campaign.json of the campaign --resume continues, read once: the study, the executor and
    the steps it resolved are each taken from this one reading (Study.campaign). `resume`: what
    to leave out to create it instead (resume_off); `said`: the resume in messages (resuming)."""
    from .store import Campaign
    return Campaign.open(Path(results), resume, said).opened


def show(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value) or "none"
    if isinstance(value, float):
        return p.plain(value)
    return "not given" if value is None else str(value)


def given_as(s: Setting, value: Any, in_file: bool) -> str:
    """A setting's value as its user gives it: a campaign file's as TOML writes it (true, "cpu",
    "64-1024"), a flag's as typed (--compile or --no-compile, 1,2, 64-1024); None: not given."""
    if value is None:
        return "not given"
    if isinstance(value, tuple) and s.sep != ",":  # one text in a file too (batch_search)
        value = s.sep.join(map(str, value))
    if in_file:
        return campaign_file.toml(value)
    if s.parse is None:
        return s.flag if value else "--no-" + s.flag[2:]
    if isinstance(value, tuple):
        return ",".join(given_as(s, v, False) for v in value) or "none"
    return p.plain(value) if isinstance(value, float) else str(value)


def stored(meta: Dict[str, Any], results: str, given,
           said: str = "") -> Tuple[Dict[str, Any], Dict[str, str], bool]:
    """(the settings campaign.json `meta` stored: its latest session's study, typed; where each came
    from; whether it is the study itself), the FREE ones given again left out. A campaign of an
    earlier compare stored no study: it is rebuilt from that compare's `config`, else from its
    results' specs (kept.py), and False says so (its held settings are then checked as they
    resolve: campaign.json's settings); a setting neither says, and not given now, is one line
    naming the flags to give (a campaign that ran nothing and says nothing takes today's).
    `said`: the resume as messages name it (resuming)."""
    said = said or "--resume {}".format(results)
    check_latest(meta, said)
    asked, its_own = asked_study(meta), True
    if asked is None:
        from .store import Campaign
        asked, its_own = {"study": rebuilt(meta, said, given, lambda: [  # meta's own results
            r.spec for r in Campaign.snapshot(Path(results), meta).results()[0]],
            lambda n: "{} {}".format(
                DECLARED[n].flag, "LIST" if DECLARED[n].axis else "VALUE")), "sources": {}}, False
    known = {s.name: s for s in declared()}
    values: Dict[str, Any] = {}
    flags = asked["study"].get("executor_flags", {})
    if not isinstance(flags, dict):  # an executor's flags by name: a hand edit or a bad copy
        raise UserError("{}: campaign.json is corrupt (its latest session's study has executor_flags "
                        "{}, not an object); restore it or start a new campaign".format(
                            said, json_kind(flags)))
    for name, value in asked["study"].items():
        s = DECLARED.get(name)
        try:  # a value as campaign.json's key names it (gpus 'abc': ...), never by a flag not typed
            if name == "executor_flags":
                values[name] = {}
                for k, v in value.items():
                    if k in known:
                        s, values[name][k] = known[k], _typed(known[k], v, key="executor_flags." + k)
            elif s and s.resume != SESSION and not (s.resume == FREE and name in given):
                values[name] = None if value is None else _typed(s, value, key=name)
        except (UserError, TypeError, ValueError) as exc:
            raise UserError("{}: campaign.json is corrupt (its latest session's study has {}); restore "
                            "it{} or start a new campaign".format(said, exc, ", give {} anew,".format(
                                s.flag) if name in DECLARED and s.resume == FREE else "")) from None
    sources = asked.get("sources", {})
    if not isinstance(sources, dict):  # where each setting came from: setting -> how
        raise UserError("{}: campaign.json is corrupt (its latest session's sources are "
                        "{}, not an object); restore it or start a new campaign".format(
                            said, json_kind(sources)))
    return values, {k: v for k, v in sources.items() if k in known}, its_own
