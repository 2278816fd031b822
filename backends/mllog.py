"""MLPerf-format logs (`:::MLLOG {json}` lines), written with the standard library inside a backend.

Python >= 3.8. The line format is mlperf-logging's own (mllog/mllog.py `_encode_log`): keys in
the order namespace, time_ms, event_type, key, value, metadata; time_ms in whole milliseconds
since the Unix epoch; metadata carries the caller's file and line number and whatever the event
adds (epoch_num, status...). Each line is flushed as it is written, so a run that is killed
leaves every event it reached. The host checks the logs with mlperf-logging's compliance checker
and scores them (compare/mlperf.py); the backend never imports that package.
"""
import json
import os
import sys
import time
from typing import Any, Dict, Optional

INTERVAL_START = "INTERVAL_START"
INTERVAL_END = "INTERVAL_END"
POINT_IN_TIME = "POINT_IN_TIME"
PREFIX = ":::MLLOG "
FILE_NAME = "mlperf.log"  # written beside the result file the backend was given


def now_ms() -> int:
    """mlperf-logging's clock: integer milliseconds since the Unix epoch."""
    return int(time.time() * 1e3)


def encode(namespace: str, time_ms: int, event_type: str, key: str, value: Any,
           metadata: Dict[str, Any]) -> str:
    """One log line, as mlperf-logging encodes it."""
    return PREFIX + json.dumps({"namespace": namespace, "time_ms": time_ms,
                                "event_type": event_type, "key": key, "value": value,
                                "metadata": metadata})


class Logger:
    """Writes events to `path` (None: writes nothing, as on every rank but 0). Each method returns
    the event's time_ms, so that what a result records is what its log says."""

    def __init__(self, path: Optional[str], namespace: str = ""):
        self.path, self.namespace = path, namespace
        self._file = None
        if path is not None:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            self._file = open(path, "w")

    def _log(self, event_type: str, key: str, value: Any = None,
             metadata: Optional[Dict[str, Any]] = None, time_ms: Optional[int] = None) -> int:
        when = now_ms() if time_ms is None else int(time_ms)
        if self._file is not None:
            caller = sys._getframe(2)  # the loop's line that logged the event
            meta = {"file": os.path.basename(caller.f_code.co_filename), "lineno": caller.f_lineno}
            meta.update(metadata or {})
            self._file.write(encode(self.namespace, when, event_type, key, value, meta) + "\n")
            self._file.flush()
        return when

    def start(self, key: str, value: Any = None, metadata: Optional[Dict[str, Any]] = None,
              time_ms: Optional[int] = None) -> int:
        return self._log(INTERVAL_START, key, value, metadata, time_ms)

    def end(self, key: str, value: Any = None, metadata: Optional[Dict[str, Any]] = None,
            time_ms: Optional[int] = None) -> int:
        return self._log(INTERVAL_END, key, value, metadata, time_ms)

    def event(self, key: str, value: Any = None, metadata: Optional[Dict[str, Any]] = None,
              time_ms: Optional[int] = None) -> int:
        return self._log(POINT_IN_TIME, key, value, metadata, time_ms)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def read(path: str):
    """The events of a log: a list of dicts (namespace, time_ms, event_type, key, value,
    metadata); lines that are not MLPerf events are skipped, as mlperf-logging's parser does."""
    out = []
    with open(path, encoding="latin-1") as f:
        for line in f:
            at = line.find(PREFIX)
            if at < 0:
                continue
            try:
                out.append(json.loads(line[at + len(PREFIX):]))
            except ValueError:
                continue
    return out
