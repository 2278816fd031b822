"""A campaign folder: the specs, results, logs and machine info of one sweep.

    campaign.json      what was asked, the settings fixed at creation, the planned cells, sessions
    machine.json       the machine the campaign ran on
    lock               the PID of the `compare run` writing the campaign (an fcntl lock while it runs)
    specs/<id>.json    one RunSpec per cell, as the backend read it
    results/<id>.json  one RunResult per cell, written as soon as the run ends (atomically)
    logs/<id>.stdout|.stderr
    work/<id>/         scratch space of a run (the backend writes its result here first)

Result files are checked on load (schema, types, status against figures, run id against file
name, settings against the campaign's): a bad one is skipped with a warning naming it.
"""
import datetime
import fcntl
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from backends.protocol import (
    RunResult,
    RunSpec,
    SchemaError,
    write_json_atomic,
    write_result,
    write_spec,
)

from . import validate
from .errors import UserError

CAMPAIGN_FILE = "campaign.json"
CAMPAIGN_KIND = "compare-campaign"
LOCK_FILE = "lock"
FINISHED = ("ok", "oom", "unsupported", "skipped")  # --resume re-runs failed and timeout cells
# terminal escape sequences (CSI, OSC, two-byte) and the other control characters, which must
# never reach a terminal or a report from a backend's stderr or a hand-edited file
_ESCAPES = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
TABLE_TEXT = ("reason", "framework_version", "device_name", "distribution")  # shown in tables


def clean_text(text: str) -> str:
    """Escape sequences removed, carriage returns made newlines, other control characters
    shown as \\xNN; newlines and tabs kept."""
    text = _ESCAPES.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub(lambda m: "\\x{:02x}".format(ord(m.group())), text)


def load_result(path: Path) -> RunResult:
    """A result file, checked (SchemaError saying what is wrong) and with its text made safe to
    print: no control characters, and no `|` in what Markdown tables show."""
    try:
        with open(str(path), "rb") as f:
            data = json.loads(f.read().decode("utf-8"))
    except ValueError as exc:
        raise SchemaError("not valid JSON ({})".format(exc)) from None
    result = RunResult.from_dict(data)
    validate.result(result)
    for name in TABLE_TEXT + ("stderr_tail",):
        value = getattr(result, name)
        if value is not None:
            value = clean_text(value)
            setattr(result, name, value.replace("|", "¦") if name in TABLE_TEXT else value)
    return result


def default_root() -> Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("results") / stamp


def check_writable_dir(path: Path, option: str) -> None:
    """A folder that is, or can be made, writable: else one UserError line naming `option`."""
    try:
        if path.exists() and not path.is_dir():
            raise UserError("{} {}: is a file, not a folder; give a folder path".format(option, path))
        parent = path if path.exists() else next((p for p in path.parents if p.exists()), Path("."))
        if not parent.is_dir():
            raise UserError("{} {}: {} is a file, not a folder; give a folder path".format(
                option, path, parent))
        if not os.access(str(parent), os.W_OK | os.X_OK):
            raise UserError("{} {}: {} is not writable; give a folder you can write".format(
                option, path, parent))
    except OSError as exc:  # e.g. a name longer than the file system allows
        raise UserError("{} {}: {}; give another folder".format(
            option, _short(path), exc.strerror or exc)) from None


def _short(path: Path) -> str:
    text = str(path)
    return text if len(text) <= 120 else text[:60] + "…" + text[-40:]


def _read_json(path: Path, what: str, root: Path) -> Dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (ValueError, OSError) as exc:
        raise UserError("{}: {} is corrupt ({}); restore it or start a new campaign".format(
            root, what, getattr(exc, "strerror", None) or exc)) from None
    if not isinstance(data, dict):
        raise UserError("{}: {} is corrupt (not a JSON object); restore it or start a new "
                        "campaign".format(root, what))
    return data


class Campaign:
    def __init__(self, root: Path):
        self.root = Path(root).absolute()  # backends run with another cwd: every path absolute
        self._lock_fd: Optional[int] = None

    @classmethod
    def create(cls, root: Path, config: Dict[str, Any], machine: Dict[str, Any],
               settings: Optional[Dict[str, Any]] = None) -> "Campaign":
        root = Path(root)
        check_writable_dir(root, "--results")
        if (root / CAMPAIGN_FILE).exists():
            raise UserError("--results {}: already holds a campaign; add --resume to continue it, "
                            "or give a new folder".format(root))
        if root.exists() and any(root.iterdir()):
            raise UserError("--results {}: folder is not empty and not a campaign; give a new "
                            "or empty folder".format(root))
        c = cls(root)
        try:
            for sub in ("specs", "results", "logs", "work"):
                (root / sub).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError("--results {}: cannot create the folder ({}); give a folder you can "
                            "write".format(_short(root), exc.strerror or exc)) from None
        write_json_atomic(str(root / "machine.json"), machine)
        now = _now()
        c._write_meta({"kind": CAMPAIGN_KIND, "created_at": now, "config": config,
                       "settings": settings or {}, "planned": {},
                       "sessions": [{"started_at": now, "config": config}]})
        return c

    @classmethod
    def open(cls, root: Path) -> "Campaign":
        """An existing campaign; UserError (one line) for a folder that is not one or is corrupt."""
        root = Path(root)
        if not (root / CAMPAIGN_FILE).is_file():
            raise UserError("{}: not a campaign folder (no {}); give a folder made by "
                            "`compare run`".format(root, CAMPAIGN_FILE))
        meta = _read_json(root / CAMPAIGN_FILE, CAMPAIGN_FILE, root)
        if meta.get("kind") != CAMPAIGN_KIND:
            raise UserError("{}: {} is not a compare campaign".format(root, CAMPAIGN_FILE))
        if not isinstance(meta.get("sessions", []), list) or not isinstance(
                meta.get("planned", {}), dict) or not isinstance(meta.get("settings", {}), dict):
            raise UserError("{}: {} is corrupt (sessions, planned or settings of the wrong type); "
                            "restore it or start a new campaign".format(root, CAMPAIGN_FILE))
        if (root / "machine.json").exists():
            _read_json(root / "machine.json", "machine.json", root)
        return cls(root)

    @property
    def meta(self) -> Dict[str, Any]:
        return _read_json(self.root / CAMPAIGN_FILE, CAMPAIGN_FILE, self.root)

    @property
    def machine(self) -> Dict[str, Any]:
        path = self.root / "machine.json"
        return _read_json(path, "machine.json", self.root) if path.exists() else {}

    def _write_meta(self, meta: Dict[str, Any]) -> None:
        write_json_atomic(str(self.root / CAMPAIGN_FILE), meta)

    def lock(self) -> None:
        """Hold the campaign's lock until this process ends: one `compare run` writes a campaign at
        a time. A lock left by a dead process is free (the kernel drops it) and is taken over."""
        path = self.root / LOCK_FILE
        try:
            fd = os.open(str(path), os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise UserError("--results {}: cannot open {} ({})".format(
                self.root, path, exc.strerror)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise UserError("--results {}: another `compare run` (PID {}) is running this campaign; "
                            "wait for it to end or stop it, then --resume".format(
                                self.root, holder)) from None
        os.ftruncate(fd, 0)
        os.write(fd, "{}\n".format(os.getpid()).encode())
        self._lock_fd = fd  # inherited by no child (close_fds); released by unlock() or at exit

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing drops the flock; the file (a dead PID) stays
            self._lock_fd = None

    def resume(self, config: Dict[str, Any], settings: Dict[str, Any]) -> None:
        """Continue the campaign with `config`: its settings must be the campaign's (new keys, e.g.
        a framework's options when a framework is added, are recorded); else one UserError line."""
        meta = self.meta
        fixed = meta.get("settings") or {}
        differ = ["{} {} (campaign) vs {} (now)".format(k, _show(fixed[k]), _show(settings[k]))
                  for k in sorted(settings) if k in fixed and fixed[k] != settings[k]]
        if differ:
            raise UserError("--resume {}: settings differ from the campaign's: {}; resume with the "
                            "campaign's settings or start a new campaign (--frameworks, --gpus, "
                            "--nodes, --precision, --batch-size, --repeats and --timeout may "
                            "change)".format(self.root, "; ".join(differ)))
        meta["settings"] = dict(fixed, **settings)
        meta.setdefault("sessions", []).append({"started_at": _now(), "config": config})
        self._write_meta(meta)

    def plan(self, specs: List[RunSpec]) -> None:
        """Record the cells this session will run (the campaign's planned cells are the union)."""
        meta = self.meta
        planned = meta.get("planned") or {}
        planned.update({s.run_id: s.spec_hash for s in specs})
        meta["planned"] = planned
        self._write_meta(meta)

    def spec_path(self, run_id: str) -> Path:
        return self.root / "specs" / (run_id + ".json")

    def result_path(self, run_id: str) -> Path:
        return self.root / "results" / (run_id + ".json")

    def log_paths(self, run_id: str) -> Tuple[Path, Path]:
        return (self.root / "logs" / (run_id + ".stdout"), self.root / "logs" / (run_id + ".stderr"))

    def work_dir(self, run_id: str) -> Path:
        d = self.root / "work" / run_id
        if d.exists():
            shutil.rmtree(str(d))
        d.mkdir(parents=True)
        return d

    def save_spec(self, spec: RunSpec) -> Path:
        path = self.spec_path(spec.run_id)
        write_spec(str(path), spec)
        return path

    def save_result(self, result: RunResult) -> Path:
        path = self.result_path(result.run_id)
        write_result(str(path), result)
        return path

    def finished_ids(self) -> set:
        results, _ = self.results()
        return {r.run_id for r in results if r.status in FINISHED}

    def missing(self, results: List[RunResult]) -> List[str]:
        """Planned cells with no result yet (a half-done campaign), by run id."""
        have = {r.run_id for r in results}
        return [run_id for run_id in self.meta.get("planned", {}) if run_id not in have]

    def results(self) -> Tuple[List[RunResult], List[str]]:
        """Every valid result (one per `<run_id>.json`), and one warning per file skipped."""
        planned = self.meta.get("planned", {})
        out, errors = [], []
        for path in sorted((self.root / "results").glob("*.json")):
            if path.name.startswith("."):
                continue  # a result being written (.tmp-*), or what a killed write left
            try:
                result = load_result(path)
            except (SchemaError, OSError) as exc:
                errors.append("skipped corrupt result {}: {}".format(path.name, exc))
                continue
            want = planned.get(result.run_id)
            if result.run_id != path.stem:
                errors.append("skipped result {}: it holds run {} (a copy?); only <run_id>.json "
                              "files count".format(path.name, result.run_id))
            elif want and result.spec_hash and result.spec_hash != want:
                errors.append("skipped result {}: its settings (spec hash {}) are not the "
                              "campaign's ({}); results of other settings are never mixed into a "
                              "cell".format(path.name, result.spec_hash, want))
            else:
                out.append(result)
        return out, errors


def _show(value: Any) -> str:
    return json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else str(value)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
