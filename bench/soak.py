"""Fault-injection soak of `compare run` (issue 37). A CPU campaign of tiny cells (caffe2 and jax,
1 and 2 workers, repeats: 20 cells) is killed at random moments — SIGKILL and SIGTERM to compare,
to a worker, to a launcher (torchrun); pip when an environment build runs; the disk filled
mid-write (the campaign on a tmpfs, as root); a finished result cut in half — and resumed after
each session until every cell is done (bench/soak_faults.py). After every session it checks: no
process of the campaign alive (orphans), the lock free for the resume, every planned cell with at
most one valid result, no finished result rewritten or lost (checksums), no internal error or
unexpected exit code. At the end: exactly one valid result per planned cell, all `ok`, and the
cells (run ids, spec hashes) equal to a clean run's (--reference clean) or the plan's.

    python bench/soak.py --faults 12                         # CI's size: tests/test_soak.py
    python bench/soak.py --faults 200 --reference clean --out /tmp/soak   # docs/reliability.md

The kinds not hit yet are drawn first (by weight among them), then every kind by weight: the
first 8 faults are the 8 kinds (7 without a tmpfs), one each. When the faults run out before the
campaign is done, it finishes without faults; with faults left, a new campaign (round) starts.
Prints the faults injected by kind (and any kind not hit), sessions, resumes, cells, lost,
rewritten, orphans, errors; exit 0 only when those four are 0 and the cells match.
"""
import argparse
import collections
import fcntl
import hashlib
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import soak_cases
import soak_faults as faults

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from compare.errors import UserError  # noqa: E402  (the repository's own compare)
from compare.store import FINISHED, Campaign  # noqa: E402

GRACE_S = 10.0  # for the kernel to end what a killed compare leaves (parent-death signals)


def run_args(a, root: Path):
    return ["run", "--frameworks", "caffe2,jax", "--device", "cpu", "--executor", "local",
            "--gpus", "1,2", "--repeats", str(a.repeats), "--image-size", "32", "--batch-size", "2",
            "--steps", "1", "--warmup", "0", "--windows", "1", "--timeout", "600",
            "--results", str(root)]


def compare(args, **kw):
    return subprocess.run([sys.executable, "-m", "compare"] + [str(x) for x in args], cwd=str(ROOT),
                          text=True, capture_output=True, env=dict(os.environ, COLUMNS="300"), **kw)


class Session:
    """One `compare run` of a round, and what the faults need to know of the round."""

    def __init__(self, root, tmpfs, finished, destroyed):
        self.root, self.tmpfs, self.finished, self.destroyed = root, tmpfs, finished, destroyed
        self.filled, self.proc, self.hits = False, None, []
        self.pending = None  # (the fault kind drawn, until when it is tried)


class Stats:
    def __init__(self):
        self.faults = collections.Counter()
        self.sessions = self.rounds = self.cells = 0
        self.lost = self.rewritten = self.orphans = self.errors = self.blocked = 0
        self.notes = []

    def error(self, text):
        self.errors += 1
        self.notes.append(text)


def results(root: Path):
    """{run_id: (status, sha256 of the file, spec hash)} of the campaign's valid results, as
    compare reads them (planned cells only, files validated), with "": the files it left out
    and why; and the planned cells."""
    c = Campaign(root)
    try:
        valid, skipped = c.results()
        planned = c.meta.get("planned") or {}
    except (UserError, OSError):  # no campaign.json yet: a creation killed before it
        return {}, {}
    out = {"": skipped}
    for r in valid:
        data = (root / "results" / (r.run_id + ".json")).read_bytes()
        out[r.run_id] = (r.status, hashlib.sha256(data).hexdigest(), planned.get(r.run_id))
    return out, planned


def lock_free(root: Path) -> bool:
    if not root.is_dir():
        return True
    fd = os.open(str(root), os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def run_session(a, s: Session, stats: Stats, rng, delay_max: float) -> int:
    """Start compare on the round's campaign, inject faults at random moments while it runs
    (while the budget lasts), wait for it to end; its exit code."""
    resume = (s.root / "campaign.json").is_file()
    log = open(str(a.out / "sessions.log"), "a")
    log.write("\n=== {} session {} ({})\n".format(s.root.name, stats.sessions, "resume" if resume else
                                                  "new"))
    log.flush()
    s.proc = subprocess.Popen([sys.executable, "-m", "compare"] + run_args(a, s.root) +
                              (["--resume"] if resume else []), cwd=str(ROOT), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, start_new_session=True,
                              env=dict(os.environ, COLUMNS="300"))
    err = []
    reader = _drain(s.proc.stderr, err)
    due = time.monotonic() + rng.uniform(0.2, delay_max)
    while s.proc.poll() is None:
        if sum(stats.faults.values()) < a.faults and time.monotonic() >= due:
            hit = faults.inject(s, rng, stats.faults)
            if hit:
                stats.faults[hit] += 1
                s.hits.append(hit)
                log.write("fault: {}\n".format(hit))
            due = time.monotonic() + (rng.uniform(0.2, delay_max) if hit else 0.2)
        time.sleep(0.05)
    reader.join()
    log.write("".join(err)[-3000:] + "exit {}\n".format(s.proc.returncode))
    log.close()
    stats.sessions += 1
    _check_exit(s, "".join(err), stats)
    return s.proc.returncode


def _drain(stream, into):
    t = threading.Thread(target=lambda: into.extend(stream), daemon=True)
    t.start()
    return t


def _check_exit(s: Session, err: str, stats: Stats) -> None:
    """An exit code the session's faults explain, and no internal error or traceback."""
    allowed = {0}  # 1: a cell failed (its worker or launcher killed); 2: no space (a user's error)
    for hit in s.hits:
        allowed |= {"SIGKILL compare": {-9}, "SIGTERM compare": {143, -15}, "disk full": {1, 2},
                    "truncated result": set()}.get(hit, {1})
    if s.proc.returncode not in allowed or "internal error" in err or "Traceback" in err:
        stats.error("{}: exit {} after {}: {}".format(s.root.name, s.proc.returncode, s.hits or
                                                      "no fault", err.strip().splitlines()[-1:]))


def after_session(s: Session, stats: Stats, sums: dict) -> bool:
    """The checks after a session; True when the round's campaign is done."""
    if s.filled:
        (s.tmpfs / "filler").unlink()
    deadline = time.monotonic() + GRACE_S
    while faults.processes(s.root) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = faults.processes(s.root)
    if left:
        stats.orphans += len(left)
        stats.notes.append("orphans after {}: {}".format(s.hits, [p.cmdline[:120] for p in left]))
        for p in left:
            os.kill(p.pid, 9)
    if not lock_free(s.root):
        stats.blocked += 1
        stats.error("{}: the lock is held with no compare running".format(s.root.name))
    found, planned = results(s.root)
    cut = ["skipped corrupt result {}.json".format(r) for r in s.destroyed]
    for why in found.pop("", []):  # a file compare left out: only those the soak cut in half
        if not any(why.startswith(c) for c in cut):
            stats.error("{}: {} after {}".format(s.root.name, why, s.hits))
    for run_id, (status, digest, _) in sorted(sums.items()):
        if run_id in s.destroyed:
            continue
        now = found.get(run_id)
        if now is None:
            stats.lost += 1
            stats.notes.append("lost {} after {}".format(run_id, s.hits))
        elif now[1] != digest:
            stats.rewritten += 1
            stats.notes.append("rewritten {} after {}".format(run_id, s.hits))
    for run_id, (status, digest, _) in found.items():
        if status in FINISHED and (run_id not in sums or run_id in s.destroyed):
            sums[run_id] = (status, digest, None)
            s.destroyed.discard(run_id)
    s.finished.clear()
    s.finished.update(r for r, v in found.items() if v[0] in FINISHED)
    return bool(planned) and s.proc.returncode == 0 and all(
        found.get(r, ("missing",))[0] == "ok" for r in planned)


def run_round(a, index: int, stats: Stats, rng, tmpfs):
    """One campaign, faulted and resumed until done; {run_id: (status, spec hash)} at its end."""
    root = (tmpfs or a.out) / "round-{:02d}".format(index)
    s, sums, delay = Session(root, tmpfs, set(), set()), {}, a.max_delay
    limit = 6 * a.repeats * 4 + 2 * a.faults + 10
    for _ in range(limit):
        s.hits, s.filled, s.pending = [], False, None
        before = len(sums)
        run_session(a, s, stats, rng, delay)
        if after_session(s, stats, sums):
            break
        delay = min(120.0, delay * 1.3) if len(sums) == before else max(a.max_delay, delay / 1.1)
    else:
        stats.error("{}: not done after {} sessions".format(root.name, limit))
    found, planned = results(root)
    found.pop("", None)
    stats.rounds += 1
    stats.cells += len(planned)
    return {r: (v[0], v[2]) for r, v in found.items()}, planned


def reference(a):
    """{run_id: spec hash or None}: a clean run's cells, or the plan's run ids."""
    if a.reference == "clean":
        root = a.out / "clean"
        done = compare(run_args(a, root), timeout=3600)
        if done.returncode != 0:
            raise SystemExit("the clean run failed: " + done.stderr[-2000:])
        found, _ = results(root)
        return {r: v[2] for r, v in found.items() if r and v[0] == "ok"}
    plan = compare(run_args(a, a.out / "plan") + ["--plan"], timeout=600)
    return {r: None for r in re.findall(r"\b([a-z0-9_]+-(?:fp32|tf32|fp16|bf16)-[\w-]*-r\d+)\b",
                                        plan.stdout + plan.stderr)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--faults", type=int, default=20, help="faults to inject in all (default 20)")
    p.add_argument("--repeats", type=int, default=5, help="repeats of each of the 4 cells (5: 20 cells)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--reference", choices=("plan", "clean"), default="plan",
                   help="what the final cells must equal: the plan's run ids, or a clean run's cells")
    p.add_argument("--max-delay", type=float, default=12.0,
                   help="seconds: a fault comes within this of the session's start or the last fault")
    p.add_argument("--no-cases", dest="cases", action="store_false",
                   help="leave out the time-to-accuracy and campaign-file cases")
    p.add_argument("--out", type=Path, default=None, help="working folder (default: a temp folder)")
    a = p.parse_args(argv)
    a.out = (a.out or Path(tempfile.mkdtemp(prefix="compare-soak-"))).absolute()
    a.out.mkdir(parents=True, exist_ok=True)
    rng, stats, started = random.Random(a.seed), Stats(), time.time()
    expected = reference(a)
    tmpfs = faults.mount_tmpfs(a.out / "fs", "256m")
    mismatched = 0
    try:
        while stats.rounds == 0 or sum(stats.faults.values()) < a.faults:
            final, planned = run_round(a, stats.rounds + 1, stats, rng, tmpfs)
            cells = {r: planned.get(r) for r, (status, _) in final.items() if status == "ok"}
            if set(cells) != set(expected) or any(expected[r] not in (None, cells[r]) for r in cells):
                mismatched += 1
                stats.notes.append("round {}: cells differ from the reference: {} vs {}".format(
                    stats.rounds, sorted(cells), sorted(expected)))
    finally:
        faults.unmount(tmpfs)
    for case in (soak_cases.time_to_accuracy, soak_cases.campaign_file) if a.cases else ():
        hit, problems = case(ROOT, a.out)
        if hit:
            stats.faults["SIGKILL compare ({})".format(case.__name__.replace("_", " "))] += hit
        for problem in problems:
            (stats.error if hit else stats.notes.append)(problem)
    print(summary(a, stats, mismatched, time.time() - started, tmpfs is not None))
    for note in stats.notes[:20]:
        print("  " + note)
    return 0 if not (stats.lost or stats.rewritten or stats.orphans or stats.errors or mismatched) \
        else 1


def summary(a, stats: Stats, mismatched: int, wall: float, tmpfs: bool) -> str:
    kinds = ", ".join("{} {}".format(n, k) for k, n in sorted(stats.faults.items()))
    missed = [k for k in faults.kinds(tmpfs) if not stats.faults[k]]
    return ("soak: {} faults injected ({}); {}; {} sessions, {} resumes; {} cells in {} round(s); "
            "lost {}, rewritten {}, orphans {}, errors {}, lock blocked {}; final cells {} the "
            "{} reference; disk-full faults {}; {:.0f} s (seed {})".format(
                sum(stats.faults.values()), kinds or "none",
                "kinds not hit: " + ", ".join(missed) if missed else "every kind hit", stats.sessions,
                stats.sessions - stats.rounds, stats.cells, stats.rounds, stats.lost,
                stats.rewritten, stats.orphans, stats.errors, stats.blocked,
                "equal to" if not mismatched else "DIFFERENT from", a.reference,
                "on (tmpfs)" if tmpfs else "off (no tmpfs: needs root)", wall, a.seed))


if __name__ == "__main__":
    sys.exit(main())
