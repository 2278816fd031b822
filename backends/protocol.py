"""The backends' name for the run spec and result, defined in backends/contract/protocol.py (the
host<->backend contract). Backend modules, tests and scripts import them from here, as they did
before the contract was a package; the host imports them from `backends.contract`.
"""
from .contract.protocol import (  # noqa: F401  (re-exported: one definition, the contract's)
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
    read_result,
    read_spec,
    utc_now,
    write_json_atomic,
    write_result,
    write_spec,
)
