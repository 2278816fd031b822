"""A campaign folder: the specs, results, logs and machine info of one sweep.

    campaign.json      what was asked (the config) and when; marks the folder as a campaign
    machine.json       the machine the campaign ran on
    specs/<id>.json    one RunSpec per cell, as the backend read it
    results/<id>.json  one RunResult per cell, written as soon as the run ends (atomically)
    logs/<id>.stdout|.stderr
    work/<id>/         scratch space of a run (the backend writes its result here first)
"""
import datetime
import json
import os
import shutil
from pathlib import Path
from typing import Any, Dict, List, Tuple

from backends.protocol import (
    RunResult,
    RunSpec,
    SchemaError,
    read_result,
    write_json_atomic,
    write_result,
    write_spec,
)

from .errors import UserError

CAMPAIGN_FILE = "campaign.json"
CAMPAIGN_KIND = "compare-campaign"
FINISHED = ("ok", "oom", "unsupported", "skipped")  # --resume re-runs failed and timeout cells


def default_root() -> Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("results") / stamp


def _check_writable(root: Path) -> None:
    if root.exists() and not root.is_dir():
        raise UserError("--results {}: is a file, not a folder; give a folder path".format(root))
    parent = root if root.exists() else next((p for p in root.parents if p.exists()), Path("."))
    if not parent.is_dir():
        raise UserError("--results {}: {} is a file, not a folder; give a folder path".format(
            root, parent))
    if not os.access(str(parent), os.W_OK | os.X_OK):
        raise UserError("--results {}: {} is not writable; give a folder you can write".format(
            root, parent))


class Campaign:
    def __init__(self, root: Path):
        self.root = Path(root).absolute()  # backends run with another cwd: every path absolute

    @classmethod
    def create(cls, root: Path, config: Dict[str, Any], machine: Dict[str, Any]) -> "Campaign":
        root = Path(root)
        _check_writable(root)
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
                            "write".format(root, exc.strerror or exc)) from None
        write_json_atomic(str(root / "machine.json"), machine)
        c._write_meta(config, created=True)
        return c

    @classmethod
    def open(cls, root: Path) -> "Campaign":
        root = Path(root)
        if not (root / CAMPAIGN_FILE).is_file():
            raise UserError("{}: not a campaign folder (no {}); give a folder made by "
                            "`compare run`".format(root, CAMPAIGN_FILE))
        try:
            meta = json.loads((root / CAMPAIGN_FILE).read_text())
        except ValueError:
            raise UserError("{}: {} is corrupt".format(root, CAMPAIGN_FILE)) from None
        if meta.get("kind") != CAMPAIGN_KIND:
            raise UserError("{}: {} is not a compare campaign".format(root, CAMPAIGN_FILE))
        return cls(root)

    @property
    def meta(self) -> Dict[str, Any]:
        return json.loads((self.root / CAMPAIGN_FILE).read_text())

    @property
    def machine(self) -> Dict[str, Any]:
        path = self.root / "machine.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def _write_meta(self, config: Dict[str, Any], created: bool) -> None:
        now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        meta = {"kind": CAMPAIGN_KIND, "created_at": now, "config": config, "sessions": []}
        if not created:
            meta = self.meta
        meta["sessions"].append({"started_at": now, "config": config})
        write_json_atomic(str(self.root / CAMPAIGN_FILE), meta)

    def resume(self, config: Dict[str, Any]) -> None:
        self._write_meta(config, created=False)

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

    def results(self) -> Tuple[List[RunResult], List[str]]:
        """Every readable result, and one message per file that could not be read."""
        out, errors = [], []
        for path in sorted((self.root / "results").glob("*.json")):
            try:
                out.append(read_result(str(path)))
            except (SchemaError, OSError) as exc:
                errors.append("skipped corrupt result {}: {}".format(path.name, exc))
        return out, errors
