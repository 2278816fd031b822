"""The host<->backend contract: everything `compare/` uses of `backends/`, in one package.

The rule (tests/test_architecture.py checks it, by the AST of every host module, imports inside
functions and the targets of importlib calls included): the host imports `backends.contract` and
its modules, nothing else of backends/. A backend package itself (`backends.<backend>`, what the
framework registry names) is reached only through `shared.backend()`.

    protocol.py  the run's two files: a RunSpec in, a RunResult out; SCHEMA_VERSION, statuses,
                 modes, precisions, JSON read and write (atomic)
    options.py   option declarations: Option, the options every backend takes, modes' switches
    phases.py    the names of a run's moments, and the variables that carry them
    stats.py     a run's timed windows: how steps split into them, their spread
    rules.py     rules both sides apply: out-of-memory words, the GPUs CUDA_VISIBLE_DEVICES names,
                 the grace a run's processes get once one has exited 0
    shared.py    the backend modules the host uses as they are (launchers, dataset, machine,
                 networks, batchprobe, mllog, lifeline), a backend's package, where the code lives

Standard library only, Python >= 3.8: a backend imports the contract too, inside foreign
environments. This __init__ imports only the contract's own definitions, so that any backend
module may import it; shared.py, which imports backend modules, is imported by its name.
"""
from .options import (
    CHANNELS_LAST,
    COMMON_OPTIONS,
    COMPILE,
    Option,
    OptionError,
    Switch,
    mode_settings,
    mode_switches,
)
from .phases import FILE_ENV, LAUNCHED_ENV, OPTIONAL, ORDER, PHASE_FILE
from .protocol import (
    DEFAULT_MODEL,
    DEVICES,
    KINDS,
    MODES,
    NOT_SETTINGS,
    PRECISIONS,
    SCHEMA_VERSION,
    STATUSES,
    RunResult,
    RunSpec,
    SchemaError,
    Unsupported,
    data_mode,
    read_result,
    read_spec,
    utc_now,
    write_json_atomic,
    write_result,
    write_spec,
)
from .rules import is_oom, oom_line, says_out_of_memory, visible_gpus
from .stats import jitter, median, uncertainty, window_sizes

__all__ = [
    "CHANNELS_LAST", "COMMON_OPTIONS", "COMPILE", "Option", "OptionError", "Switch",
    "mode_settings", "mode_switches",
    "FILE_ENV", "LAUNCHED_ENV", "OPTIONAL", "ORDER", "PHASE_FILE",
    "DEFAULT_MODEL", "DEVICES", "KINDS", "MODES", "NOT_SETTINGS", "PRECISIONS", "SCHEMA_VERSION",
    "STATUSES", "RunResult", "RunSpec", "SchemaError", "Unsupported", "data_mode", "read_result", "read_spec",
    "utc_now", "write_json_atomic", "write_result", "write_spec",
    "is_oom", "oom_line", "says_out_of_memory", "visible_gpus",
    "jitter", "median", "uncertainty", "window_sizes",
]
