"""The faults bench/soak.py injects into a running `compare run`, and how it finds the processes
of a campaign. Each fault is a function fault(session, rng) -> a label of what it did, or None
where it finds nothing to hit (no worker between cells, no finished result yet, no tmpfs)."""
import errno
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple, Optional

CAMPAIGN_ENV = "COMPARE_CAMPAIGN"  # compare/executors/base.py: in every process of a run
ATTEMPT_ENV = "COMPARE_ATTEMPT"


class Proc(NamedTuple):
    pid: int
    ppid: int
    cmdline: str
    environ: bytes


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def table() -> Dict[int, Proc]:
    """Every live process but this one (zombies, which only wait for their parent, left out)."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        stat = _read("/proc/{}/stat".format(name)).rsplit(b")", 1)[-1].split()
        if len(stat) < 2 or stat[0] == b"Z":
            continue
        cmdline = _read("/proc/{}/cmdline".format(name)).replace(b"\0", b" ")
        out[int(name)] = Proc(int(name), int(stat[1]), cmdline.decode(errors="replace"),
                              b"\0" + _read("/proc/{}/environ".format(name)))
    return out


def processes(root: Path) -> List[Proc]:
    """Live processes of the campaign at `root`: its runs' (tagged with it by compare) and
    whatever names it on its command line (compare itself)."""
    key = str(root)
    return [p for p in table().values()
            if ("\0{}={}\0".format(CAMPAIGN_ENV, key).encode() in p.environ + b"\0")
            or " {} ".format(key) in " {} ".format(p.cmdline)]


def descendants(pid: int) -> List[Proc]:
    procs, found, todo = table(), [], [pid]
    while todo:
        parent = todo.pop()
        children = [p for p in procs.values() if p.ppid == parent]
        found += children
        todo += [c.pid for c in children]
    return found


def _is_worker(p: Proc) -> bool:
    return b"\0" + ATTEMPT_ENV.encode() in p.environ and " -m backends." in p.cmdline and \
        "torch.distributed.run" not in p.cmdline and "backends.launchers" not in p.cmdline


def _is_launcher(p: Proc, compare_pid: int) -> bool:
    """A run's launcher: what compare started for the run (its direct child) that starts the
    workers (torchrun, horovod or processes), not a single worker started directly."""
    return p.ppid == compare_pid and b"\0" + ATTEMPT_ENV.encode() in p.environ and not _is_worker(p)


def _signal(pids: List[int], sig: int, rng) -> Optional[int]:
    if not pids:
        return None
    pid = rng.choice(pids)
    try:
        os.kill(pid, sig)
    except OSError:
        return None
    return pid


def _label(label: str, fault: Callable) -> Callable:
    fault.label = label  # what the fault returns when it hits: the kinds the soak counts
    return fault


def compare_signal(sig: int) -> Callable:
    label = "{} compare".format(signal.Signals(sig).name)

    def fault(session, rng) -> Optional[str]:
        if session.proc.poll() is not None:
            return None
        os.kill(session.proc.pid, sig)
        return label
    return _label(label, fault)


def worker_signal(sig: int) -> Callable:
    label = "{} worker".format(signal.Signals(sig).name)

    def fault(session, rng) -> Optional[str]:
        hit = _signal([p.pid for p in processes(session.root) if _is_worker(p)], sig, rng)
        return label if hit else None
    return _label(label, fault)


def launcher_signal(sig: int) -> Callable:
    label = "{} launcher".format(signal.Signals(sig).name)

    def fault(session, rng) -> Optional[str]:
        hit = _signal([p.pid for p in processes(session.root)
                       if _is_launcher(p, session.proc.pid)], sig, rng)
        return label if hit else None
    return _label(label, fault)


def kill_pip(session, rng) -> Optional[str]:
    """pip of a managed-environment build, where one runs (the environments are cached: rare)."""
    pips = [p.pid for p in descendants(session.proc.pid) if " -m pip install" in p.cmdline]
    return "SIGKILL pip" if _signal(pips, signal.SIGKILL, rng) else None


def disk_full(session, rng) -> Optional[str]:
    """Fill the campaign's tmpfs, leaving 0-16 KB free, so the next write fails part-way; the
    soak frees it once the session has ended."""
    if session.tmpfs is None:
        return None
    filler = session.tmpfs / "filler"
    st = os.statvfs(str(session.tmpfs))
    spare = rng.randrange(0, 16 * 1024)
    with open(str(filler), "ab", buffering=0) as f:
        left = st.f_bavail * st.f_frsize - spare
        try:
            while left > 0:
                left -= f.write(b"\0" * min(left, 1 << 20))
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
    session.filled = True
    return "disk full"


disk_full.label = "disk full"


def truncate_result(session, rng) -> Optional[str]:
    """Cut a finished result in half (a torn copy, a bad disk): compare must skip it and run the
    cell again; the soak counts that cell as destroyed on purpose, not as lost."""
    done = sorted(session.finished)
    if not done or session.destroyed:  # one at a time: the last one cut is run again first
        return None
    run_id = rng.choice(done)
    path = session.root / "results" / (run_id + ".json")
    try:
        size = path.stat().st_size
        os.truncate(str(path), size // 2)
    except OSError:
        return None
    session.destroyed.add(run_id)
    session.finished.discard(run_id)  # once is enough: it is run again on resume
    return "truncated result"


truncate_result.label = "truncated result"


# what the soak draws from, with weights: killing compare most of all
FAULTS: Dict[Callable, int] = {
    compare_signal(signal.SIGKILL): 4, compare_signal(signal.SIGTERM): 2,
    worker_signal(signal.SIGKILL): 2, worker_signal(signal.SIGTERM): 1,
    launcher_signal(signal.SIGKILL): 1, launcher_signal(signal.SIGTERM): 1,
    disk_full: 1, truncate_result: 1,
}


def kinds(tmpfs: bool) -> List[str]:
    """The labels of the kinds the soak draws from (disk full only with a tmpfs to fill)."""
    return [k.label for k in FAULTS if tmpfs or k is not disk_full]


def inject(session, rng, done=()) -> Optional[str]:
    """One fault: pip if an environment build runs; else a kind drawn by weight, tried until
    it finds something to hit (a worker appears when a cell starts) for up to 5 s, then another
    kind is drawn. Kinds not in `done` (the labels hit so far) are drawn first, so that a short
    soak hits every kind once before any twice. None while nothing was hit (the caller asks
    again shortly)."""
    hit = kill_pip(session, rng)
    if hit:
        return hit
    now = time.monotonic()
    if session.pending is None or now > session.pending[1]:
        possible = set(kinds(session.tmpfs is not None))
        draw = [k for k in FAULTS if k.label in possible and k.label not in done] or list(FAULTS)
        session.pending = (rng.choices(draw, weights=[FAULTS[k] for k in draw])[0], now + 5.0)
    hit = session.pending[0](session, rng)
    if hit:
        session.pending = None
    return hit


def mount_tmpfs(where: Path, size: str) -> Optional[Path]:
    """A tmpfs of `size` at `where` (root only); None where it cannot be mounted."""
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=" + size, "tmpfs", str(where)],
                          capture_output=True)
    return where if done.returncode == 0 else None


def unmount(where: Optional[Path]) -> None:
    if where is not None:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)
