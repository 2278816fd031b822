"""A campaign folder: the specs, results, logs and machine info of one sweep.

    campaign.json      what was asked, the settings fixed at creation, the planned cells, sessions
    machine.json       the machine the campaign ran on
    (the folder itself is the lock: a `compare run` writing the campaign holds a flock on it)
    specs/<id>.json    one RunSpec per cell, as the backend read it
    results/<id>.json  one RunResult per cell, written as soon as the run ends (atomically)
    probes/<id>.json   one RunResult per probe of a batch search (batchsearch.py): never a cell
    logs/<id>.stdout|.stderr
    work/<id>/         scratch space of a run (the backend writes its result here first)

Every file is written through files.py: never through a link, to a temp name and renamed.
Files are read through loading.py (regular files of bounded size; a result validated, its spec
re-hashed): a bad one is skipped with a warning naming it and why. A result belongs to a cell only
when its re-hashed spec is the planned cell's, its nonce one of this campaign's attempts (each
begins with campaign.json's id) and its device this campaign's machine's: any other file is
listed as foreign and left out.
"""
import contextlib
import datetime
import json
import os
import re
import secrets
import shlex
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from backends.contract import RunResult, RunSpec, SchemaError, utc_now

from . import files, mllogs, validate
from .errors import UserError
from .loading import MAX_CAMPAIGN_BYTES, load_json, load_result, one_line

CAMPAIGN_FILE = "campaign.json"
CAMPAIGN_KIND = "compare-campaign"
LOCK_FILE = "lock"  # an earlier compare's lock (a PID in a file); the folder is the lock now
SUBFOLDERS = ("specs", "results", "logs", "work")  # made with campaign.json
RUN_ID = re.compile(r"[a-z0-9][a-z0-9._-]*\Z")  # what RunSpec.run_id makes: a file name, no path
SPEC_HASH = re.compile(r"[0-9a-f]{16}\Z")
# --resume re-runs failed and timeout cells; not_converged is a finished time-to-accuracy cell
FINISHED = ("ok", "oom", "unsupported", "skipped", "not_converged")
# a run that did not end as measured, so `compare run` exits 1: the others are what was measured
# (oom, unsupported, skipped and not_converged are the cell's answer, reported as such)
FAILED_RUN = ("failed", "timeout")


REPEAT = re.compile(r"-r\d+\Z")  # a run id's repeat: the cell's id without it


def counted(run_ids: Sequence[str], repeated: Optional[bool] = None) -> Tuple[str, str]:
    """Runs counted as the report counts them (`4 runs of 2 cells`) where the study repeats its
    cells, else as cells (`2 cells`); and the word for one of them (run, cell). `repeated` None:
    where a cell of `run_ids` has more than one run (a report knows the runs, not the study)."""
    cells = len({REPEAT.sub("", i) for i in run_ids})
    if not (cells < len(run_ids) if repeated is None else repeated):
        return _many(len(run_ids), "cell"), "cell"
    return "{} of {}".format(_many(len(run_ids), "run"), _many(cells, "cell")), "run"


def still_to_run(missing: Sequence[str], planned: Sequence[str]) -> str:
    """`2 of the campaign's 4 planned runs of 2 cells have no result`: the planned runs without a
    result, counted as `counted` counts the plan. The report's and the check's line begin so."""
    of = counted(list(planned))[0].split(" ", 1)
    return "{} of the campaign's {} planned {} {} no result".format(
        len(missing), of[0], of[1], "has" if len(missing) == 1 else "have")


def _many(n: int, word: str) -> str:
    return "{} {}{}".format(n, word, "" if n == 1 else "s")


def campaign_folders(folder: Path) -> List[Path]:
    """The campaigns a folder names: itself where it is one, else those one level below it (by
    name; [] where there are none). How history, the plan and the packing table find them."""
    folder = Path(folder)
    if (folder / CAMPAIGN_FILE).is_file():
        return [folder]
    return [] if not folder.is_dir() else sorted(p for p in folder.iterdir() if (p / CAMPAIGN_FILE).is_file())


def default_root() -> Path:
    return Path("results") / datetime.datetime.now().strftime("%Y%m%d-%H%M%S")


def check_new(root: Path, said: str = "--results", resume: str = "--resume") -> None:
    """A folder a new campaign may be created in: absent, empty, or what a creation that did
    not finish left (or an earlier compare's lock file). `said`: the folder's setting as it was
    given (a campaign file's key: study.toml: results), `resume` how to ask for --resume there."""
    check_outside_runs(root, said)
    if (root / CAMPAIGN_FILE).exists():
        raise UserError("{} {}: already holds a campaign; add {} to continue it, or give a new "
                        "folder".format(said, root, resume))
    if root.exists() and not _unfinished(root, empty_too=True):
        raise UserError("{} {}: folder is not empty and not a campaign; give a new or empty "
                        "folder".format(said, root))


def check_outside_runs(path: Path, said: str, advice: str = "") -> None:
    """One line where `path` is inside a folder a campaign's runs write (its SUBFOLDERS, and code:
    the executors'): what compare puts there is read back as a corrupt result, log or spec.
    `said`: the path's setting as given; `advice`: more of what to give instead."""
    where = Path(path).resolve()
    for root in [where] + list(where.parents):
        inside = where.relative_to(root).parts
        if inside and inside[0] in SUBFOLDERS + ("code",) and (root / CAMPAIGN_FILE).is_file():
            raise UserError("{} {}: inside the {} folder of campaign {}, which `compare run` writes; "
                            "give a folder outside it{}".format(said, path, inside[0], root, advice))


def _unfinished(root: Path, empty_too: bool = False) -> bool:
    """Whether `root` holds only what Campaign.create makes before campaign.json (empty
    subfolders, machine.json, temp files): a creation killed or failed half-way."""
    names = [n for n in os.listdir(str(root)) if not n.startswith(files.TMP_PREFIX)]
    ours = set(SUBFOLDERS) | {"machine.json", LOCK_FILE}
    if not names:
        return empty_too
    return all(n in ours and not (root / n).is_symlink() and (
        not (root / n).is_dir() or not os.listdir(str(root / n))) for n in names)


def _corrupt(root: Path, what: str, why: Any) -> UserError:
    return UserError("{}: {} is corrupt: {}; restore it or start a new campaign".format(root, what, why))


def _read_json(root: Path, name: str) -> Dict[str, Any]:
    """`name` (campaign.json or machine.json) in `root` through the one loader (loading.load_json:
    a regular file of bounded size, each key once, no NaN, no huge integer, no deep nesting): a
    JSON object, else one UserError line."""
    try:
        data = load_json(root / name, MAX_CAMPAIGN_BYTES)
        if not isinstance(data, dict):
            raise SchemaError("not a JSON object")
        if name == "machine.json":
            validate.machine(data)
    except SchemaError as exc:
        raise _corrupt(root, name, exc) from None
    return data


class Campaign:
    def __init__(self, root: Path):
        self.root = Path(root).absolute()  # backends run with another cwd: every path absolute
        self._lock_fd: Optional[int] = None
        self._id: Optional[str] = None  # campaign.json's id, read once (attempt_nonce)
        self.opened: Dict[str, Any] = {}  # campaign.json as open() read and checked it
        self._held: Optional[Dict[str, Any]] = None  # campaign.json as last read or written locked
        self._snapshot: Optional[Dict[str, Any]] = None  # a read-only campaign's one reading

    @classmethod
    def create(cls, root: Path, config: Dict[str, Any], machine: Dict[str, Any],
               settings: Optional[Dict[str, Any]] = None, said: str = "--results",
               resume: str = "--resume") -> "Campaign":
        """A new campaign in `root` (new, empty, or left by a creation that did not finish),
        returned locked: the lock is taken before campaign.json is looked for and written, so
        of two first runs into one folder one creates it and the other is refused. campaign.json
        is written last: a creation that fails leaves a folder that can be created again."""
        root = Path(root)
        files.check_writable_dir(root, said)
        check_new(root, said, resume)  # before anything is made in a folder that is not ours
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError("{} {}: cannot create the folder ({}); give a folder you can "
                            "write".format(said, files.short(root), exc.strerror or exc)) from None
        c = cls(root)
        c.lock(said, resume)
        try:
            check_new(root, said, resume)  # again, holding the lock: the check that counts
            for sub in SUBFOLDERS:
                with files.folder(c.root / sub, c.root):
                    pass
            files.write_json(c.root / "machine.json", machine, c.root)
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
    def open(cls, root: Path, resume: str = "--resume", said: Optional[str] = None) -> "Campaign":
        """An existing campaign; UserError (one line) for a folder that is not one or is corrupt.
        `resume`: what to leave out to create it instead (a flag, or a campaign file's key);
        `said`: the folder as the message names it (default the folder; `--resume DIR` where a
        resume opens it: study.resuming)."""
        root = Path(root)
        said = said or str(root)
        if not (root / CAMPAIGN_FILE).is_file() and root.is_dir() and _unfinished(root):
            raise UserError("{}: its creation did not finish (no {}); run again without {} "
                            "to create it".format(said, CAMPAIGN_FILE, resume))
        if not (root / CAMPAIGN_FILE).is_file():
            raise UserError("{}: {}; give a folder made by `compare run`".format(
                said, "no such folder" if not root.exists() else "is a file, not a campaign folder"
                if not root.is_dir() else "not a campaign folder (no {})".format(CAMPAIGN_FILE)))
        meta = _read_json(root, CAMPAIGN_FILE)
        if meta.get("kind") != CAMPAIGN_KIND:
            raise UserError("{}: {} is not a compare campaign".format(said, CAMPAIGN_FILE))
        if not isinstance(meta.get("sessions", []), list) or not isinstance(
                meta.get("planned", {}), dict) or not isinstance(meta.get("settings", {}), dict):
            raise _corrupt(root, CAMPAIGN_FILE, "sessions, planned or settings of the wrong type")
        if not isinstance(meta.get("created_at", ""), str) or not all(
                isinstance(h, str) for h in meta.get("planned", {}).values()) or not isinstance(
                meta.get("id", ""), str):
            raise _corrupt(root, CAMPAIGN_FILE, "created_at, id or a planned cell's hash is not text")
        if (root / "machine.json").exists():
            _read_json(root, "machine.json")
        campaign = cls(root)
        campaign.opened = meta
        return campaign

    @classmethod
    def snapshot(cls, root: Path, opened: Dict[str, Any]) -> "Campaign":
        """A campaign as one reading of it, which open() made and checked (`opened`: Study.campaign):
        its meta is that reading and it writes nothing. `--resume --plan`: the study, the resume's
        checks and the finished cells all see one campaign.json."""
        campaign = cls(root)
        campaign.opened = campaign._snapshot = opened
        return campaign

    @property
    def meta(self) -> Dict[str, Any]:
        """campaign.json (a copy of it the caller may change). While this process holds the lock
        no one else writes it, so it is read once and kept as written; unlocked, read each time
        (a snapshot: its one reading)."""
        if self._snapshot is not None:
            return json.loads(json.dumps(self._snapshot))
        if not self.locked:
            return _read_json(self.root, CAMPAIGN_FILE)
        if self._held is None:
            self._held = _read_json(self.root, CAMPAIGN_FILE)
        return json.loads(json.dumps(self._held))

    @property
    def machine(self) -> Dict[str, Any]:
        return _read_json(self.root, "machine.json") if (self.root / "machine.json").exists() else {}

    def _write_meta(self, meta: Dict[str, Any]) -> None:
        if self._snapshot is not None:
            raise RuntimeError("a snapshot of {} writes nothing".format(self.root))
        files.write_json(self.root / CAMPAIGN_FILE, meta, self.root)
        self._held = json.loads(json.dumps(meta)) if self.locked else None

    def lock(self, said: str = "--results", resume: str = "--resume") -> None:
        """Hold the campaign's lock until this process ends: one `compare run` writes a campaign at
        a time. The lock is a flock on the campaign folder itself: a dead holder's goes with it
        (the kernel drops it), and there is no file whose deletion would let a second writer in.
        Holding it already is fine (create() returns the campaign locked). `said`, `resume`: the
        folder's setting and --resume as the study names them (check_new)."""
        if self._lock_fd is not None:
            return
        fd = files.lock_folder(self.root)
        if fd is None:
            holder = files.lock_holder(self.root)
            raise UserError("{} {}: another `compare run` (PID {}) is running this campaign; "
                            "wait for it to end or stop it, then {}".format(
                                said, self.root, holder or "unknown", resume))
        self._lock_fd = fd  # inherited by no child (O_CLOEXEC); released by unlock() or at exit
        for sub in ("",) + SUBFOLDERS[:2] + ("probes",):  # what a killed writer left half-written
            files.remove_stale_temps(self.root / sub, self.root)

    def discard(self, whole: bool = False) -> None:
        """Unmake a campaign create() made whose sweep never began (its prepare failed): its
        campaign.json, written last, removed, so the folder is one whose creation did not finish
        (check_new lets the same command create it again; open() says to leave --resume out);
        `whole`: the rest create() made too (machine.json, the empty subfolders, the folder
        where it is empty then), for a folder no one named (default_root). Call holding the lock."""
        with contextlib.suppress(FileNotFoundError), files.folder(self.root, self.root, create=False) as fd:
            os.unlink(CAMPAIGN_FILE, dir_fd=fd)
            for name in ("machine.json",) + SUBFOLDERS if whole else ():
                with contextlib.suppress(OSError):  # a subfolder not empty stays
                    os.rmdir(name, dir_fd=fd) if name in SUBFOLDERS else os.unlink(name, dir_fd=fd)
        if whole:
            with contextlib.suppress(OSError):
                self.root.rmdir()
        self._held = None

    def restore(self, meta: Dict[str, Any]) -> None:
        """Write campaign.json back as `meta` (as it was before a resume whose prepare failed:
        no session that ran nothing, no planned cell it never ran), if it changed since."""
        if self.meta != meta:
            self._write_meta(meta)

    @property
    def locked(self) -> bool:
        """This process holds the campaign's lock (lock())."""
        return self._lock_fd is not None

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing drops the flock
            self._lock_fd, self._held = None, None

    def resume(self, config: Dict[str, Any], settings: Dict[str, Any],
               reconstruct: Callable[[List[RunResult]], Dict[str, Any]] = lambda rs: {},
               write: bool = True, free: Sequence[str] = (), said: Optional[str] = None) -> None:
        """Continue the campaign with `config`: its settings must be the campaign's (new keys, e.g.
        a framework's options when a framework is added, are recorded); else one UserError line.
        A campaign of an earlier compare stored none: `reconstruct` reads them from its results
        (a UserError when they disagree), and they are held to just the same. `write` False:
        the check alone (`--resume --plan`); `free`: the flags a resume may change, for the message;
        `said`: the resume as the message names it (default `--resume ROOT`: study.resuming)."""
        meta, said = self.meta, said or "--resume {}".format(self.root)
        if "settings" in meta:  # a campaign always holds some (the device, the executor)
            fixed, whose = meta.get("settings"), "campaign"
            if not fixed:
                raise UserError("{}: {} holds no settings (an empty object): nothing would "
                                "hold the resumed cells to the campaign's; restore it or start a new "
                                "campaign".format(said, CAMPAIGN_FILE))
        else:
            fixed, whose = reconstruct(self.results()[0]), "its results"
        changed = [k for k in sorted(settings) if k in fixed and fixed[k] != settings[k]]
        if changed:
            differ = ["{} {} ({}) vs {} (now)".format(k, shown(fixed[k]), whose, shown(settings[k]))
                      for k in changed]
            keep = "; --executor {} keeps the campaign's executor".format(fixed["executor"]) \
                if "executor" in changed else ""
            raise UserError("{}: settings differ from the campaign's{}: {}; resume with the "
                            "campaign's settings or start a new campaign{}{}".format(
                                said, "" if whose == "campaign" else
                                " (it stored none: read from its results)", "; ".join(differ),
                                " ({} and {} may change)".format(", ".join(free[:-1]), free[-1])
                                if free else "", keep))
        if not write:
            return
        meta["settings"] = dict(fixed, **settings)
        meta.setdefault("sessions", []).append({"started_at": utc_now(), "config": config})
        self._write_meta(meta)

    def plan(self, specs: List[RunSpec], write: bool = True, said: Optional[str] = None) -> None:
        """Record the cells this session will run (the campaign's planned cells are the union).
        A cell planned before must be the same cell (its spec hash), every planned id a run id
        (it names files), and where a cell's spec, result and logs go the campaign's own (no
        link, no folder): else one UserError line, before anything runs. `write` False: the
        checks alone; `said`: the resume as a message names it (Campaign.resume)."""
        self.check_cells([s.run_id for s in specs])
        meta = self.meta
        planned = meta.get("planned") or {}
        bad = [k for k, v in planned.items() if not RUN_ID.match(k) or not SPEC_HASH.match(v)]
        if bad:
            raise UserError("{}: {} is corrupt (planned cell {!r} is not a run id with its spec hash); "
                            "restore it or start a new campaign".format(self.root, CAMPAIGN_FILE, bad[0]))
        other = [s for s in specs if planned.get(s.run_id, s.spec_hash) != s.spec_hash]
        if other:
            raise UserError("{}: cell {} was planned with other settings (spec hash {}, now "
                            "{}): resume with the campaign's (its --data, its options) or start a new "
                            "campaign".format(said or "--resume {}".format(self.root), other[0].run_id,
                                              planned[other[0].run_id], other[0].spec_hash))
        if not write:
            return
        planned.update({s.run_id: s.spec_hash for s in specs})
        meta["planned"] = planned
        self._write_meta(meta)

    def check_cells(self, run_ids: List[str]) -> None:
        """Where the cells' files go is the campaign's own: no link, FIFO or folder (UserError)."""
        for sub, suffixes in (("specs", (".json",)), ("results", (".json",)),
                              ("logs", (".stdout", ".stderr"))):
            files.check_files(self.root / sub, [i + x for i in run_ids for x in suffixes], self.root)
        files.check_files(self.root / "work", run_ids, self.root, folders=True)

    def attempt_nonce(self) -> str:
        """A fresh nonce for one attempt of a cell: the campaign's id, then 16 random hex digits.
        The result echoes it, so a result names the campaign it ran for (a copy from another
        campaign of the same settings is told apart: _not_ours). A campaign of an earlier compare
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

    @contextlib.contextmanager
    def log_files(self, run_id: str) -> Iterator[Tuple[Any, Any]]:
        """The run's stdout and stderr logs, new (an earlier attempt's replaced), open to write."""
        out_path, err_path = self.log_paths(run_id)
        with files.new_file(out_path, self.root) as out, files.new_file(err_path, self.root) as err:
            yield out, err

    def work_dir(self, run_id: str) -> Path:
        d = self.root / "work" / run_id
        mllogs.keep_aborted(self.root, run_id, d)  # an uncollected attempt's MLPerf log
        return files.fresh_folder(d, self.root)

    def save_spec(self, spec: RunSpec) -> Path:
        return self._save(self.spec_path(spec.run_id), spec)

    def save_result(self, result: RunResult) -> Path:
        return self._save(self.result_path(result.run_id), result)

    def save_probe(self, result: RunResult) -> Path:
        return self._save(self.root / "probes" / (result.run_id + ".json"), result)

    def _save(self, path: Path, record) -> Path:
        files.write_json(path, record.to_dict(), self.root)
        return path

    def probes(self) -> List[RunResult]:
        """Every readable probe of the campaign's batch searches (none in older campaigns)."""
        out = []
        for path in sorted((self.root / "probes").glob("*.json")):
            if path.name.startswith("."):
                continue  # a probe being written (.tmp-*), or what a killed write left
            try:
                out.append(load_result(path))
            except (SchemaError, OSError):
                continue  # a probe only explains a choice: an unreadable one is left out
        return out

    def run_outcome(self) -> Tuple[int, Optional[str]]:
        """`compare run`'s exit code once its sweep has ended: 1 and a line naming them, and the
        command that runs them again, when cells failed or timed out (FAILED_RUN), else 0 and None."""
        results, _ = self.results()
        failed = ["{}: {}".format(r.run_id, r.status) for r in results if r.status in FAILED_RUN]
        if not failed:
            return 0, None
        word = counted(list(self.meta.get("planned") or {}))[1]  # runs where cells repeat
        return 1, "{} failed or timed out ({}{}); `compare run --results {} --resume` runs {} " \
            "again".format(_many(len(failed), word), ", ".join(failed[:5]),
                           ", …" if len(failed) > 5 else "", shlex.quote(str(self.root)),
                           "them" if len(failed) != 1 else "it")

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
            why = _not_ours(result, path, planned, meta.get("id"), machine)
            if why:
                errors.append(one_line("skipped result {}: {}".format(path.name, why)))
            else:
                out.append(result)
        if out and not planned:
            errors.append("{} records no planned cells (a campaign of an earlier compare): its "
                          "results are taken as found; `compare run … --resume` records the "
                          "plan".format(CAMPAIGN_FILE))
        return out, errors


def _not_ours(result: RunResult, path: Path, planned: Dict[str, str], campaign_id: Optional[str],
              machine: Dict[str, Any]) -> Optional[str]:
    """Why a valid result is not one of the campaign's cells, or None when it is: its run id is
    its file's name and a planned cell's, its spec, re-hashed, is that cell's spec, its nonce is
    of one of this campaign's attempts and the device it names is its machine's. (A nonce of
    None: a backend older than nonces, or a campaign of an earlier compare.)"""
    if result.run_id != path.stem:
        return "it holds run {} (a copy?); only <run_id>.json files count".format(result.run_id)
    if planned and result.run_id not in planned:
        return ("run {} is not a cell this campaign planned (a file from another campaign?); "
                "results of other cells are never mixed in".format(result.run_id))
    actual = RunSpec.from_dict(result.spec).spec_hash
    if planned and actual != planned[result.run_id]:
        return ("its settings (spec hash {}) are not the campaign's ({}); results of other "
                "settings are never mixed into a cell".format(actual, planned[result.run_id]))
    if campaign_id and result.nonce and not result.nonce.startswith(campaign_id + "-"):
        return ("its nonce {} is not one of this campaign's attempts (a result copied from another "
                "campaign?); only results of its own runs count".format(result.nonce))
    why = validate.other_machine(result.spec.get("device"), result.device_name, machine)
    return why + "; results of another machine are never mixed in" if why else None


def shown(value: Any) -> str:
    """A held setting's value as campaign.json writes it (true, {"channels_last": true}), None
    (compare's own choice, no --python given) as not given, as the study's messages say it."""
    if value is None:
        return "not given"
    return json.dumps(value, sort_keys=True) if isinstance(value, (dict, list, bool)) else str(value)


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
