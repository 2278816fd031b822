"""A campaign folder: the specs, results, logs and machine info of one sweep.

    campaign.json      what was asked, the settings fixed at creation, the planned cells, sessions
    machine.json       the machine the campaign ran on
    lock               the PID of the `compare run` writing the campaign (an fcntl lock while it runs)
    specs/<id>.json    one RunSpec per cell, as the backend read it
    results/<id>.json  one RunResult per cell, written as soon as the run ends (atomically)
    probes/<id>.json   one RunResult per probe of a batch search (batchsearch.py): never a cell
    logs/<id>.stdout|.stderr
    work/<id>/         scratch space of a run (the backend writes its result here first)

Files are read through loading.py (regular files of bounded size; a result validated, its spec
re-hashed): a bad one is skipped with a warning naming it and why. A result belongs to a cell only
when its re-hashed spec is the planned cell's, its nonce one of this campaign's attempts (each
begins with campaign.json's id) and its device this campaign's machine's: any other file is
listed as foreign and left out.
"""
import contextlib
import datetime
import fcntl
import json
import os
import re
import secrets
import shutil
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from backends.contract import (
    RunResult,
    RunSpec,
    SchemaError,
    utc_now,
    write_json_atomic,
    write_result,
    write_spec,
)

from . import mllogs, validate
from .errors import UserError
from .loading import MAX_CAMPAIGN_BYTES, clean_text, load_json, load_result, one_line  # noqa: F401

CAMPAIGN_FILE = "campaign.json"
CAMPAIGN_KIND = "compare-campaign"
LOCK_FILE = "lock"
RUN_ID = re.compile(r"[a-z0-9][a-z0-9._-]*\Z")  # what RunSpec.run_id makes: a file name, no path
SPEC_HASH = re.compile(r"[0-9a-f]{16}\Z")
# --resume re-runs failed and timeout cells; not_converged is a finished time-to-accuracy cell
FINISHED = ("ok", "oom", "unsupported", "skipped", "not_converged")
# a run that did not end as measured, so `compare run` exits 1: the others are what was measured
# (oom, unsupported, skipped and not_converged are the cell's answer, reported as such)
FAILED_RUN = ("failed", "timeout")


def campaign_folders(folder: Path) -> List[Path]:
    """The campaigns a folder names: itself where it is one, else those one level below it (by
    name; [] where there are none). How history, the plan and the packing table find them."""
    folder = Path(folder)
    if (folder / CAMPAIGN_FILE).is_file():
        return [folder]
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if (p / CAMPAIGN_FILE).is_file())


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


@contextlib.contextmanager
def user_path(path: Path, option: str) -> Iterator[None]:
    """An OS error while writing under a path the user gave (disk full, read-only, gone) is one
    UserError line naming the path and what happened; what was written before stays."""
    try:
        yield
    except OSError as exc:
        raise UserError("{} {}: cannot write {} ({}); free space or give a folder you can "
                        "write".format(option, _short(path), exc.filename or path,
                                       exc.strerror or exc)) from None


def _check_new(root: Path, ours: Tuple[str, ...]) -> None:
    """A folder a new campaign may be created in: absent, empty, or holding only `ours`."""
    if (root / CAMPAIGN_FILE).exists():
        raise UserError("--results {}: already holds a campaign; add --resume to continue it, "
                        "or give a new folder".format(root))
    if root.exists() and any(p.name not in ours for p in root.iterdir()):
        raise UserError("--results {}: folder is not empty and not a campaign; give a new "
                        "or empty folder".format(root))


def _short(path: Path) -> str:
    text = str(path)
    return text if len(text) <= 120 else text[:60] + "…" + text[-40:]


def _corrupt(root: Path, what: str, why: Any) -> UserError:
    return UserError("{}: {} is corrupt: {}; restore it or start a new campaign".format(root, what, why))


def _read_json(path: Path, what: str, root: Path) -> Dict[str, Any]:
    """campaign.json or machine.json through the one loader (loading.load_json: a regular file
    of bounded size, each key once, no NaN, no huge integer, no deep nesting): a JSON object,
    else one UserError line."""
    try:
        data = load_json(path, MAX_CAMPAIGN_BYTES)
    except SchemaError as exc:
        raise _corrupt(root, what, exc) from None
    if not isinstance(data, dict):
        raise _corrupt(root, what, "not a JSON object")
    if what == "machine.json":
        try:
            validate.machine(data)
        except SchemaError as exc:
            raise _corrupt(root, what, exc) from None
    return data


class Campaign:
    def __init__(self, root: Path):
        self.root = Path(root).absolute()  # backends run with another cwd: every path absolute
        self._lock_fd: Optional[int] = None
        self._id: Optional[str] = None  # campaign.json's id, read once (attempt_nonce)

    @classmethod
    def create(cls, root: Path, config: Dict[str, Any], machine: Dict[str, Any],
               settings: Optional[Dict[str, Any]] = None) -> "Campaign":
        """A new campaign in `root` (new or empty), returned locked: the lock is taken before
        campaign.json is looked for and written, so of two first runs into one folder one creates
        it and the other is refused."""
        root = Path(root)
        check_writable_dir(root, "--results")
        try:  # before a lock file is made in a folder that is not ours
            _check_new(root, (LOCK_FILE,))
        except UserError:
            if not (root / LOCK_FILE).exists():
                raise
            # another first run made the lock (and maybe its folders) since: the lock decides
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError("--results {}: cannot create the folder ({}); give a folder you can "
                            "write".format(_short(root), exc.strerror or exc)) from None
        c = cls(root)
        c.lock()
        try:
            _check_new(root, (LOCK_FILE,))  # again, holding the lock: the check that counts
            with user_path(root, "--results"):
                for sub in ("specs", "results", "logs", "work"):
                    (root / sub).mkdir(exist_ok=True)
                write_json_atomic(str(root / "machine.json"), machine)
                now = utc_now()
                # the campaign's id begins the nonce of each of its attempts (attempt_nonce)
                c._write_meta({"kind": CAMPAIGN_KIND, "id": secrets.token_hex(8),
                               "created_at": now, "config": config,
                               "settings": settings or {}, "planned": {},
                               "sessions": [{"started_at": now, "config": config}]})
        except BaseException:
            c.unlock()
            raise
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
            raise _corrupt(root, CAMPAIGN_FILE, "sessions, planned or settings of the wrong type")
        if not isinstance(meta.get("created_at", ""), str) or not all(
                isinstance(h, str) for h in meta.get("planned", {}).values()) or not isinstance(
                meta.get("id", ""), str):
            raise _corrupt(root, CAMPAIGN_FILE, "created_at, id or a planned cell's hash is not text")
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
        with user_path(self.root / CAMPAIGN_FILE, "--results"):
            write_json_atomic(str(self.root / CAMPAIGN_FILE), meta)

    def lock(self) -> None:
        """Hold the campaign's lock until this process ends: one `compare run` writes a campaign at
        a time. A lock left by a dead process is free (the kernel drops it) and is taken over.
        Holding it already is fine (create() returns the campaign locked)."""
        if self._lock_fd is not None:
            return
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

    def resume(self, config: Dict[str, Any], settings: Dict[str, Any],
               reconstruct: Callable[[List[RunResult]], Dict[str, Any]] = lambda rs: {}) -> None:
        """Continue the campaign with `config`: its settings must be the campaign's (new keys, e.g.
        a framework's options when a framework is added, are recorded); else one UserError line.
        A campaign of an earlier compare stored none: `reconstruct` reads them from its results
        (a UserError when they disagree), and they are held to just the same."""
        meta = self.meta
        if "settings" in meta:  # a campaign always holds some (the device, the executor)
            fixed, whose = meta.get("settings"), "campaign"
            if not fixed:
                raise UserError("--resume {}: {} holds no settings (an empty object): nothing would "
                                "hold the resumed cells to the campaign's; restore it or start a new "
                                "campaign".format(self.root, CAMPAIGN_FILE))
        else:
            fixed, whose = reconstruct(self.results()[0]), "its results"
        differ = ["{} {} ({}) vs {} (now)".format(k, _show(fixed[k]), whose, _show(settings[k]))
                  for k in sorted(settings) if k in fixed and fixed[k] != settings[k]]
        if differ:
            raise UserError("--resume {}: settings differ from the campaign's{}: {}; resume with the "
                            "campaign's settings or start a new campaign (--frameworks, --gpus, "
                            "--nodes, --precision, --batch-size, --repeats and --timeout may "
                            "change)".format(self.root, "" if whose == "campaign" else
                                             " (it stored none: read from its results)",
                                             "; ".join(differ)))
        meta["settings"] = dict(fixed, **settings)
        meta.setdefault("sessions", []).append({"started_at": utc_now(), "config": config})
        self._write_meta(meta)

    def plan(self, specs: List[RunSpec]) -> None:
        """Record the cells this session will run (the campaign's planned cells are the union).
        A cell planned before must be the same cell (its spec hash), and every planned id a run
        id (it names files): else one UserError line, before anything runs."""
        meta = self.meta
        planned = meta.get("planned") or {}
        bad = [k for k, v in planned.items() if not RUN_ID.match(k) or not SPEC_HASH.match(v)]
        if bad:
            raise UserError("{}: {} is corrupt (planned cell {!r} is not a run id with its spec hash); "
                            "restore it or start a new campaign".format(self.root, CAMPAIGN_FILE, bad[0]))
        other = [s for s in specs if planned.get(s.run_id, s.spec_hash) != s.spec_hash]
        if other:
            raise UserError("--resume {}: cell {} was planned with other settings (spec hash {}, now "
                            "{}): resume with the campaign's (its --data, its options) or start a new "
                            "campaign".format(self.root, other[0].run_id, planned[other[0].run_id],
                                              other[0].spec_hash))
        planned.update({s.run_id: s.spec_hash for s in specs})
        meta["planned"] = planned
        self._write_meta(meta)

    def attempt_nonce(self) -> str:
        """A fresh nonce for one attempt of a cell: the campaign's id, then 16 random hex digits.
        The result echoes it, so a result names the campaign it ran for (a copy from another
        campaign of the same settings is told apart: _foreign). A campaign of an earlier compare
        has no id: its nonces are random alone."""
        if self._id is None:
            self._id = self.meta.get("id") or ""
        token = secrets.token_hex(8)
        return "{}-{}".format(self._id, token) if self._id else token

    def spec_path(self, run_id: str) -> Path:
        return self.root / "specs" / (run_id + ".json")

    def result_path(self, run_id: str) -> Path:
        return self.root / "results" / (run_id + ".json")

    def log_paths(self, run_id: str) -> Tuple[Path, Path]:
        return (self.root / "logs" / (run_id + ".stdout"), self.root / "logs" / (run_id + ".stderr"))

    def work_dir(self, run_id: str) -> Path:
        d = self.root / "work" / run_id
        mllogs.keep_aborted(self.root, run_id, d)  # an uncollected attempt's MLPerf log
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
        with user_path(path, "--results"):
            write_result(str(path), result)
        return path

    def save_probe(self, result: RunResult) -> Path:
        path = self.root / "probes" / (result.run_id + ".json")
        write_result(str(path), result)
        return path

    def probes(self) -> List[RunResult]:
        """Every readable probe of the campaign's batch searches (none in older campaigns)."""
        out = []
        for path in sorted((self.root / "probes").glob("*.json")):
            try:
                out.append(load_result(path))
            except (SchemaError, OSError):
                continue  # a probe only explains a choice: an unreadable one is left out
        return out

    def run_outcome(self) -> Tuple[int, Optional[str]]:
        """`compare run`'s exit code once its sweep has ended: 1 and a line naming them when
        cells failed or timed out (FAILED_RUN), else 0 and None."""
        results, _ = self.results()
        failed = ["{}: {}".format(r.run_id, r.status) for r in results if r.status in FAILED_RUN]
        if not failed:
            return 0, None
        return 1, "{} cell{} failed or timed out ({}{}); `compare run … --resume` runs {} again".format(
            len(failed), "s" if len(failed) != 1 else "", ", ".join(failed[:5]),
            ", …" if len(failed) > 5 else "", "them" if len(failed) != 1 else "it")

    def results(self) -> Tuple[List[RunResult], List[str]]:
        """Every result that belongs to a planned cell (one per `<run_id>.json`), and one warning
        per file left out, saying why. A campaign without a plan (made by a compare before plans
        were recorded) takes every valid result, and says so."""
        meta, machine = self.meta, self.machine
        planned = meta.get("planned") or {}
        out, errors = [], []
        for path in sorted((self.root / "results").glob("*.json")):
            if path.name.startswith("."):
                continue  # a result being written (.tmp-*), or what a killed write left
            try:
                result = load_result(path)
            except (SchemaError, OSError) as exc:
                errors.append(one_line("skipped corrupt result {}: {}".format(path.name, exc)))
                continue
            why = _foreign(result, path, planned) or _not_ours(result, meta.get("id"), machine)
            if why:
                errors.append(one_line("skipped result {}: {}".format(path.name, why)))
            else:
                out.append(result)
        if out and not planned:
            errors.append("{} records no planned cells (a campaign of an earlier compare): its "
                          "results are taken as found; `compare run … --resume` records the "
                          "plan".format(CAMPAIGN_FILE))
        return out, errors


def _foreign(result: RunResult, path: Path, planned: Dict[str, str]) -> Optional[str]:
    """Why a valid result is not one of the campaign's cells, or None when it is: its run id is
    its file's name and a planned cell's, and its spec, re-hashed, is that cell's spec."""
    if result.run_id != path.stem:
        return "it holds run {} (a copy?); only <run_id>.json files count".format(result.run_id)
    if not planned:
        return None
    if result.run_id not in planned:
        return ("run {} is not a cell this campaign planned (a file from another campaign?); "
                "results of other cells are never mixed in".format(result.run_id))
    actual = RunSpec.from_dict(result.spec).spec_hash
    if actual != planned[result.run_id]:
        return ("its settings (spec hash {}) are not the campaign's ({}); results of other "
                "settings are never mixed into a cell".format(actual, planned[result.run_id]))
    return None


def _not_ours(result: RunResult, campaign_id: Optional[str], machine: Dict[str, Any]) -> Optional[str]:
    """Why a result of a planned cell and its settings was not run by this campaign, or None: its
    nonce is of another campaign's attempt, or the device it names is not its machine's. (A
    nonce of None: a backend older than nonces, or a campaign of an earlier compare.)"""
    if campaign_id and result.nonce and not result.nonce.startswith(campaign_id + "-"):
        return ("its nonce {} is not one of this campaign's attempts (a result copied from another "
                "campaign?); only results of its own runs count".format(result.nonce))
    why = validate.other_machine(result.spec.get("device"), result.device_name, machine)
    return why + "; results of another machine are never mixed in" if why else None


def _show(value: Any) -> str:
    return json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else str(value)


def neighbours(folder: Path, machine: Dict[str, Any],
               skip: Optional[Path] = None) -> Iterator[Tuple["Campaign", List[RunResult]]]:
    """(campaign, its results) of each campaign `folder` names (campaign_folders) that ran on
    `machine` (machine_record.differences: one rule), `skip` left out. One that cannot be read is
    skipped: it is `compare report`'s to complain about, not the plan's or another's report."""
    from .machine_record import differences
    for root in [p for p in campaign_folders(folder) if p != skip]:
        try:
            campaign = Campaign.open(root)
            if not differences(campaign.machine, machine):
                yield campaign, campaign.results()[0]
        except (UserError, OSError):
            continue
