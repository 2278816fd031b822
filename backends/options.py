"""The backends' name for the option declarations, defined in backends/contract/options.py (the
host<->backend contract: the host validates `--option` against them, the harness types them again).
Backend modules import them from here, as they did before the contract was a package.
"""
from .contract.options import (  # noqa: F401  (re-exported: one definition, the contract's)
    CHANNELS_LAST,
    COMMON_OPTIONS,
    COMPILE,
    FALSE,
    HW_DECODE,
    KINDS,
    LOADER_WORKERS,
    MAX_TEXT,
    TRUE,
    WHERE,
    Option,
    OptionError,
    Switch,
    by_key,
    mode_settings,
    mode_switches,
    parse,
    value,
)
