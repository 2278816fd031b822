"""Declared backend options: the `--option KEY=VALUE` switches each backend reads.

Standard library only, Python >= 3.8. Each backend lists its options in its package's
`__init__.py` (`OPTIONS = (Option(...), ...)`); the host validates a user's `--option` against
them before anything runs, and the harness parses them again inside the backend (a spec may be
written by hand). The spec then holds typed values, and results record them.
"""
from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Tuple

TRUE = ("true", "1", "yes", "on")
FALSE = ("false", "0", "no", "off")
KINDS = ("bool", "int", "float", "str")


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
    default_text: str = ""  # how a None default is decided, e.g. "true on cuda, false on cpu"

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
            raise OptionError("{}={}: not a boolean; give true or false (also 1/0, yes/no, "
                              "on/off)".format(self.key, text))
        if self.kind in ("int", "float"):
            number = _number(self, value, text)
            if self.minimum is not None and number < self.minimum:
                raise OptionError("{}={}: must be >= {}".format(self.key, text, _plain(self.minimum)))
            return number
        if self.choices and text not in self.choices:
            raise OptionError("{}={}: not a valid value; choose from {}".format(
                self.key, text, ", ".join(self.choices)))
        return text

    def describe(self) -> str:
        """'channels_last=bool (default: true on cuda, false on cpu): NHWC memory format'."""
        kind = "|".join(self.choices) if self.choices else self.kind
        default = self.default_text or ("" if self.default is None else _plain(self.default))
        return "{}={}{}: {}".format(self.key, kind, " (default: {})".format(default) if default
                                    else "", self.help)


# the one layout switch every backend declares (each puts it in its OPTIONS), so that a sweep
# compares frameworks on the same memory layout; policy.channels_last() applies its default
CHANNELS_LAST = Option("channels_last", "bool", "NHWC memory format for the model and the batch",
                       default_text="true on cuda, false on cpu")


def _plain(x: Any) -> str:
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return str(x)


def _number(opt: Option, value: Any, text: str):
    if isinstance(value, bool):
        raise OptionError("{}={}: not {}".format(opt.key, text, _article(opt.kind)))
    try:
        return int(text) if opt.kind == "int" else float(text)
    except ValueError:
        raise OptionError("{}={}: not {}".format(opt.key, text, _article(opt.kind))) from None


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
