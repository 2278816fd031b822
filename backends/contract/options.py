"""Declared backend options: the `--option KEY=VALUE` switches each backend reads.

Standard library only, Python >= 3.8. Each backend lists its options in its package's
`__init__.py` (`OPTIONS = (Option(...), ...)`); the host validates a user's `--option` against
them before anything runs, and the harness parses them again inside the backend (a spec may be
written by hand). The spec then holds typed values, and results record them.
"""
import math
from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Tuple

TRUE = ("true", "1", "yes", "on")
FALSE = ("false", "0", "no", "off")
KINDS = ("bool", "int", "float", "str")
MAX_TEXT = 1000  # characters of a free-text value (e.g. xla_flags): one line, bounded


class OptionError(ValueError):
    """A bad option key or value; the message names it and the valid ones."""


@dataclass(frozen=True)
class Option:
    key: str
    kind: str  # one of KINDS
    help: str  # one line
    default: Any = None  # None: the backend decides at run time, as `default_text` says
    choices: Tuple[str, ...] = ()
    minimum: Optional[float] = None
    maximum: Optional[float] = None  # numbers: the largest value that makes sense (bounds memory/time)
    default_text: str = ""  # how a None default is decided, e.g. "true on cuda, false on cpu"
    # only a GPU reads it: what it does there, "cuDNN's autotuning of a GPU's convolutions"; the
    # plan warns of it given to a CPU run (compare/stages/plan.py), where it has no effect
    gpu: str = ""

    def parse(self, value: Any) -> Any:
        """A command-line string (or a value already typed, from a spec file) -> the typed value."""
        text = str(value).strip()
        if self.kind == "bool":
            if isinstance(value, bool):
                return value
            if text.lower() in TRUE:
                return True
            if text.lower() in FALSE:
                return False
            raise self.error(text, "not a boolean")
        if self.kind in ("int", "float"):
            return self._in_range(_number(self, value, text), text)
        if self.choices and text not in self.choices:
            raise self.error(text, "not a valid value")
        if len(text) > MAX_TEXT or any(ord(c) < 32 or ord(c) == 127 for c in text):
            raise self.error(_cut(text))
        return text

    def error(self, text: str, wrong: str = "") -> "OptionError":
        """`KEY=TEXT: what is wrong; what is valid`: every bad value's message, said here alone."""
        return OptionError("{}={}: {}{}".format(self.key, text, wrong + "; " if wrong else "",
                                                self.valid()))

    def valid(self) -> str:
        """What to give: 'give an integer from 0 to 4, e.g. autotune_level=0', 'choose from c,
        python', 'give true or false (...)', 'give one line of at most 1000 printable characters'."""
        if self.kind == "bool":
            return "give true or false (also 1/0, yes/no, on/off)"
        if self.choices:
            return "choose from {}".format(", ".join(self.choices))
        if self.kind not in ("int", "float"):
            return "give one line of at most {} printable characters".format(MAX_TEXT)
        low, high = self.minimum, self.maximum
        span = ("from {} to {}".format(_plain(low), _plain(high)) if low is not None and high is not None
                else ">= {}".format(_plain(low)) if low is not None
                else "<= {}".format(_plain(high)) if high is not None else "")
        example = next((x for x in (self.default, low, high) if x is not None), 1)
        return "give {}, e.g. {}={}".format(" ".join(filter(None, (_article(self.kind), span))),
                                            self.key, _plain(example))

    def _in_range(self, number: Any, text: str) -> Any:
        low, high = self.minimum, self.maximum
        if (low is not None and number < low) or (high is not None and number > high):
            raise self.error(text, "out of range")
        return number

    def describe(self) -> str:
        """'channels_last=bool (default: true on cuda, false on cpu): NHWC memory format'."""
        kind = "|".join(self.choices) if self.choices else self.kind
        if self.minimum is not None and self.maximum is not None:
            kind += " {}..{}".format(_plain(self.minimum), _plain(self.maximum))
        default = self.default_text or ("" if self.default is None else _plain(self.default))
        return "{}={}{}: {}".format(self.key, kind, " (default: {})".format(default) if default
                                    else "", self.help)


# the one layout switch every backend declares (each puts it in its OPTIONS), so that a sweep
# compares frameworks on the same memory layout; policy.channels_last() applies its default
CHANNELS_LAST = Option("channels_last", "bool", "NHWC memory format for the model and the batch",
                       default_text="true on cuda, false on cpu")

# every backend accepts these besides its own: they make a run fail on purpose, so that the
# recording of failures (a crash, one rank dying, a hang) can be tested with real processes
COMMON_OPTIONS = (
    Option("fail_at", "str", "testing: raise an error as the backend starts (before the "
           "framework is imported), once the trainer is set up, or before the timed steps",
           choices=("start", "setup", "timed")),
    Option("fail_rank", "int", "testing: with fail_at, only this rank fails (default: all)",
           minimum=0, maximum=65535),
    # a memory cap the framework meets as its own out-of-memory error, e.g. so that a batch search
    # (--batch-size auto) finds the largest batch that fits on a CPU (the CI test does)
    Option("memory_limit_mb", "int", "cap each worker process's memory (RLIMIT_DATA: heap and "
           "private mappings) at this many MiB, set before the framework loads; a batch "
           "that does not fit fails as the framework's own out-of-memory error", minimum=64,
           maximum=2 ** 22),
)


# --- input pipelines (--data DIR) -------------------------------------------------------------------
# the options that several backends' pipelines read, declared once; `decode` and `pipeline` are
# made from each backend's table of its pipelines (backends/pipelines/: decode_option, ...)
LOADER_WORKERS = Option("loader_workers", "int", "input-pipeline workers (decode processes or "
                        "threads) per local worker, with --data DIR", minimum=1, maximum=256,
                        default_text="cores / local workers")
# the options of decode=hw alone: only a GPU reads them (their Option.gpu)
HW_ONLY = "it tunes decode=hw, which decodes on a GPU's JPEG engines"
# decode=hw (pipelines/nvdecode.py) runs in the training process, beside the step. nvImageCodec's
# decode call lets go of the interpreter and takes it back once or twice per image (its header
# parse and image set-up), so a batch of 256 asks for the GIL ~500 times while the training loop
# holds it; at Python's 5 ms switch interval each of those hand-overs can wait that long
# (bench/feed_contention.py, BENCHMARKS.md "Where decode=hw's loss comes from").
SWITCH_INTERVAL = Option("switch_interval_ms", "float", "with --data DIR and decode=hw: the training "
                         "process's interpreter switch interval (sys.setswitchinterval), in ms",
                         minimum=0.05, maximum=100.0, default=0.5, gpu=HW_ONLY)
NVIMGCODEC_API = Option("nvimgcodec_api", "str", "with --data DIR and decode=hw: call nvImageCodec "
                        "through its C API (c: the GIL let go twice a batch) or its Python binding "
                        "(python: twice an image)", default="c", choices=("c", "python"),
                        gpu=HW_ONLY)
FEEDER_PRIORITY = Option("feeder_priority", "str", "with --data DIR and decode=hw: the CUDA stream "
                         "priority of the feeder's decode and resize against the training step's",
                         default="high", choices=("high", "normal"), gpu=HW_ONLY)
# decode=hw's split (pipelines/splitdecode.py): CPU decoders beside the JPEG engines
CPU_DECODERS = Option("cpu_decoders", "int", "with --data DIR and decode=hw: CPU decoder processes "
                      "(Pillow) that take a share of each batch beside the JPEG engines "
                      "(0: the engines alone)", minimum=0, maximum=256,
                      default_text="cores per local worker - 2", gpu=HW_ONLY)
CPU_SHARE = Option("cpu_share", "float", "with --data DIR and decode=hw: the share of each batch "
                   "the CPU decoders take", minimum=0.0, maximum=1.0,
                   default_text="auto: in proportion to the measured rates", gpu=HW_ONLY)
CPU_DRAFT = Option("cpu_draft", "bool", "with --data DIR and decode=hw: the CPU decoders may "
                   "decode at 1/2-1/8 scale where the crop keeps the image size (faster; its "
                   "pixels then differ from the engines' full-scale decode)", default=False,
                   gpu=HW_ONLY)
# CUDA maps a process's streams onto CUDA_DEVICE_MAX_CONNECTIONS hardware queues (8 unless set);
# nvImageCodec decodes on its own streams (128 in an H100 profile), so with 8 the step's stream
# shares a queue with decode streams whose heads wait (on the JPEG engines, a copy), and its next
# kernel waits behind them. On an H100 (2026-12-05, bench/realdata_gpu.sh conns), fp16 b256:
# real/synthetic 0.833 -> 0.932 (PyTorch) and 0.783 -> 0.977 (JAX) at 32; synthetic unchanged
CUDA_DEFAULT_CONNECTIONS = 8  # CUDA's own, where CUDA_DEVICE_MAX_CONNECTIONS is unset
CUDA_CONNECTIONS = Option("cuda_connections", "int", "with --data DIR and decode=hw (or auto) on "
                          "a GPU: the hardware queues CUDA maps the process's streams onto "
                          "(CUDA_DEVICE_MAX_CONNECTIONS), which the step's stream shares with "
                          "the decode's", minimum=1, maximum=32, default=32,
                          default_text="32, or CUDA_DEVICE_MAX_CONNECTIONS where it is set",
                          gpu="it sets the hardware queues CUDA maps a GPU's streams onto")
# what a backend with decode=hw lists after its `pipeline` option
HW_DECODE = (NVIMGCODEC_API, SWITCH_INTERVAL, FEEDER_PRIORITY, CPU_DECODERS, CPU_SHARE, CPU_DRAFT,
             CUDA_CONNECTIONS)


def _plain(x: Any) -> str:
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return str(x)


def _cut(text: str) -> str:
    shown = text.encode("unicode_escape").decode("ascii")
    return shown if len(shown) <= 40 else shown[:37] + "..."


def _number(opt: Option, value: Any, text: str):
    """An int, or a finite float: NaN and infinity (also 1e400) are no setting."""
    # int() and float() also read 1_0 and Arabic-Indic digits: a setting is ASCII digits alone
    if isinstance(value, bool) or not text.isascii() or "_" in text:
        raise opt.error(_cut(text), "not " + _article(opt.kind))
    try:
        number = int(text) if opt.kind == "int" else float(text)
    except ValueError:
        raise opt.error(_cut(text), "not " + _article(opt.kind)) from None
    if opt.kind == "float" and not math.isfinite(number):
        raise opt.error(text, "not a finite number")
    return number


def _article(kind: str) -> str:
    return "an integer" if kind == "int" else "a number"


def by_key(declared: Sequence[Option]) -> Dict[str, Option]:
    return {o.key: o for o in declared}


def parse(declared: Sequence[Option], given: Dict[str, Any], owner: str) -> Dict[str, Any]:
    """Check and type every given option against `declared`; OptionError on the first bad one.

    `owner` names the backend in the message, e.g. "caffe2".
    """
    known = by_key(declared)
    out = {}
    for key, value in given.items():
        if key not in known:
            raise OptionError("{}: unknown option for {}; valid: {}".format(
                key, owner, ", ".join(sorted(known)) or "none"))
        out[key] = known[key].parse(value)
    return out


def value(declared: Sequence[Option], given: Dict[str, Any], key: str) -> Any:
    """The value of `key`: given, else the declared default (None: decide at run time)."""
    if key in given:
        return given[key]
    return by_key(declared)[key].default


# --- modes ------------------------------------------------------------------------------------------
# A mode is a named set of switches (docs/modes.md). `default` sets none: each option keeps its
# declared default. Each backend declares its other modes next to its OPTIONS, in one place:
#     MODES = {"tuned": (Switch("xla", True, "why ..."), ...)}
# A switch's key is one of the backend's options, or COMPILE (the RunSpec field `compile`, i.e.
# --compile). The host applies them before the run (an explicit --option wins) and every result
# records them (mode_settings below).
COMPILE = "compile"
WHERE = {"any": "everywhere", "cuda": "on cuda", "cpu": "on cpu",
         "cuda-1": "on cuda, one GPU", "cuda-n": "on cuda, more than one GPU"}


@dataclass(frozen=True)
class Switch:
    key: str  # an option key of the backend, or COMPILE
    value: Any  # the typed value, as Option.parse returns it
    why: str  # one line: the documentation or the measurement it rests on
    where: str = "any"  # one of WHERE

    def applies(self, device: str, world: int) -> bool:
        return {"any": True, "cuda": device == "cuda", "cpu": device == "cpu",
                "cuda-1": device == "cuda" and world == 1,
                "cuda-n": device == "cuda" and world > 1}[self.where]

    def describe(self) -> str:
        """'compile=true (everywhere): torch.compile, ...'."""
        return "{}={} ({}): {}".format(self.key, _plain(self.value), WHERE[self.where], self.why)


def mode_switches(modes: Dict[str, Sequence[Switch]], mode: str, device: str,
                  world: int) -> Dict[str, Any]:
    """The switches `mode` sets for a run on `device` with `world` workers: {key: value}."""
    return {s.key: s.value for s in modes.get(mode, ()) if s.applies(device, world)}


def mode_settings(modes: Dict[str, Sequence[Switch]], spec: Any) -> Dict[str, Any]:
    """What a result records of its mode: the mode, the switches it set, and those the user's
    explicit --option (or a hand-written spec) overrode, with the value that ran instead."""
    wanted = mode_switches(modes, spec.mode, spec.device, spec.world_size)
    ran = dict(spec.options, **{COMPILE: spec.compile})
    if spec.mode == "default":  # no switches: each option at its default or as given
        return {"mode": spec.mode}
    return {"mode": spec.mode,
            "mode_switches": {k: v for k, v in wanted.items() if ran.get(k) == v},
            "mode_overridden": {k: ran.get(k) for k, v in wanted.items() if ran.get(k) != v}}
