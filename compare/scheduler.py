"""Which cells run together, and the threads that run them side by side.

The rule is a simple greedy one, on purpose: at the start and whenever a cell ends, walk the cells
still to run in sweep order and start each one whose units (GPUs, or blocks of cores on a CPU:
resources.py) are free, while fewer than `concurrency` cells run. So a later cell may start before
an earlier one that waits for more GPUs (a 1-GPU cell takes a free GPU while a 2-GPU cell waits
for two): cells of many GPUs tend to run last, and none waits forever, as the list only shrinks.
A repeat of an auto cell whose batch is not known yet waits while another repeat of it runs: that
one searches the batch for all of them (batchsearch.run_auto), once. `plan()` applies the same
rule to estimated durations, so `compare run --plan` shows the order the sweep will take.

Each running cell has a thread and an executor of its own (a lane: an executor holds the process
it runs), reused by the next cell. The calling thread alone writes the campaign and the progress,
from the results the lanes hand back. A stop signal reaches only the calling thread: it closes
every lane's executor (which stops what runs) until each lane has returned; the cells it stopped
are not recorded.
"""
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Container, Dict, Iterator, List, Optional, Sequence, Set, Tuple

from backends.contract import RunResult, RunSpec

from .resources import Pool, Slot, at_once, cpuset, planned_gpus

STOP_WAIT_S = 120.0  # how long a stop waits for the lanes to return (each ends its run's processes)
POLL_S = 0.5  # the calling thread wakes this often while it waits (signals are handled there)


def pool_for(executor: type, ctx: Any, gpus: Sequence[int], concurrency: Optional[int],
             planned: Optional[int] = None, cells: Optional[int] = None) -> Tuple[Pool, int]:
    """The pool a sweep places its cells on and how many run at once: the executor's own (this
    machine's GPUs or cores, a Slurm allocation's: Executor.pool), or the N GPUs of
    `--plan-gpus N` (another machine's: its cores are not known here). A study of fewer `cells`
    than that runs them all at once: the cores are split between them (a slot no cell would take
    keeps none), and one cell alone keeps every core, unpinned, as a serial sweep."""
    if concurrency and cells:
        concurrency = min(concurrency, cells)
    if planned:
        pool, count = at_once(planned_gpus(planned), concurrency)
    else:
        pool, count = executor.pool(ctx, max(gpus), concurrency)
    if cells and cells < count:  # auto: as many as the pool has units
        count = cells
        pool.pin = pool.pin and count > 1
    return pool, count


class Placer:
    """The free units of a pool, handed out by the greedy rule above."""

    def __init__(self, pool: Pool, concurrency: int):
        self.pool, self.concurrency = pool, max(1, concurrency)
        self.free = list(pool.units)
        self.running = 0
        self.searching: Dict[str, int] = {}  # spec hash -> its auto cells running
        # id of an auto cell's spec -> (the spec, its hash), made once; holding the spec keeps
        # its id from being reused by a later spec while the entry lives
        self.hashes: Dict[int, Tuple[RunSpec, str]] = {}

    def place(self, pending: Sequence[RunSpec],
              known: Container[str] = ()) -> List[Tuple[RunSpec, List[str]]]:
        """The cells of `pending` (in sweep order) that start now, each with its units; `known`:
        the spec hashes of the auto cells whose batch is known (no repeat of theirs waits)."""
        out = []
        for spec in pending:
            if self.running >= self.concurrency:
                break
            if spec.batch_auto and self.searching and self._hash(spec) in self.searching and \
                    self._hash(spec) not in known:
                continue  # another repeat of it runs, and searches the batch it will take
            units = self._take(self.pool.need(spec.gpus))
            if units:
                self.running += 1
                if spec.batch_auto:
                    self.searching[self._hash(spec)] = self.searching.get(self._hash(spec), 0) + 1
                out.append((spec, units))
        return out

    def _hash(self, spec: RunSpec) -> str:
        """An auto cell's spec hash (a sha256 of its settings: made once per cell, not per walk
        of the pending cells)."""
        held = self.hashes.get(id(spec))
        if held is None or held[0] is not spec:
            held = self.hashes[id(spec)] = (spec, spec.spec_hash)
        return held[1]

    def _take(self, n: int) -> List[str]:
        """n free units, adjacent in pool order where possible (one NUMA node, one switch)."""
        if n > len(self.free):
            return []
        order = {u: i for i, u in enumerate(self.pool.units)}
        idx = [order[u] for u in self.free]
        start = next((i for i in range(len(idx) - n + 1) if idx[i + n - 1] - idx[i] == n - 1), 0)
        taken = self.free[start:start + n]
        self.free = [u for u in self.free if u not in taken]
        return taken

    def release(self, spec: RunSpec, units: Sequence[str]) -> None:
        back = set(self.free) | set(units)
        self.free = [u for u in self.pool.units if u in back]
        self.running -= 1
        if spec.batch_auto:
            self.searching[self._hash(spec)] -= 1
            if not self.searching[self._hash(spec)]:
                del self.searching[self._hash(spec)]


@dataclass
class Planned:
    """One cell of a plan: when it would start and end (seconds from the start), on which units."""

    spec: RunSpec
    slot: Slot
    start: float
    end: float


def plan(specs: Sequence[RunSpec], pool: Pool, concurrency: int,
         seconds: Callable[[RunSpec], float], known: Container[str] = ()) -> List[Planned]:
    """The schedule the sweep would take if each cell lasted `seconds(spec)`, in start order;
    `known`: the spec hashes of auto cells whose batch is known (a cell that ends finds it)."""
    placer, pending, found = Placer(pool, concurrency), list(specs), set(known)
    now, running, out = 0.0, [], []
    while pending or running:
        for spec, units in placer.place(pending, found):
            pending.remove(spec)
            item = Planned(spec, pool.slot(units), now, now + seconds(spec))
            running.append((item, units))
            out.append(item)
        item, units = min(running, key=lambda r: r[0].end)
        running.remove((item, units))
        now = item.end
        placer.release(item.spec, units)
        if item.spec.batch_auto:
            found.add(placer._hash(item.spec))
    return out


@dataclass
class _Job:
    spec: RunSpec
    units: List[str]
    slot: Slot
    lane: int
    beside: Set[str] = field(default_factory=set)  # run ids of the cells in flight beside it


class Lanes:
    """Runs cells on the pool, up to `concurrency` at once (the module's docstring says how).

    with Lanes(new_executor, pool, concurrency) as lanes:
        for spec, result in lanes.run(todo, run_cell, on_start):
            ...  # record it
    """

    def __init__(self, new_executor: Callable[[], Any], pool: Pool, concurrency: int,
                 log: Callable[[str], None] = lambda s: None, first: Any = None):
        self.new_executor, self.pool, self.concurrency = new_executor, pool, concurrency
        self.log = log
        # lane -> its executor; `first`, made already (it wrote the data), is the first lane's
        self.executors: List[Any] = [first] if first is not None else []
        self.idle: List[int] = list(range(len(self.executors)))
        self.threads: List[threading.Thread] = []
        self.done: "queue.Queue[Tuple[str, str, Any]]" = queue.Queue()

    def __enter__(self) -> "Lanes":
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if kind is None:
            for executor in self.executors:
                executor.close()
        else:
            self.stop()

    def run(self, todo: Sequence[RunSpec],
            run_cell: Callable[[Any, RunSpec, Slot], RunResult],
            on_start: Callable[[RunSpec, Slot], None] = lambda spec, slot: None,
            known: Container[str] = ()) -> Iterator[Tuple[RunSpec, RunResult]]:
        """Yield (spec, result) of each cell as it ends, its placement recorded in the result's
        environment; an exception of run_cell is raised here. `known`: the spec hashes of auto
        cells whose batch is known, as run_cell finds them."""
        placer, pending = Placer(self.pool, self.concurrency), list(todo)
        running: Dict[str, _Job] = {}
        while pending or running:
            for spec, units in placer.place(pending, known):
                pending.remove(spec)
                job = _Job(spec, units, self.pool.slot(units), self._lane())
                for other in running.values():
                    other.beside.add(spec.run_id)
                    job.beside.add(other.spec.run_id)
                running[spec.run_id] = job
                on_start(spec, job.slot)
                self._start(job, run_cell)
            kind, run_id, payload = self._next()
            job = running.pop(run_id)
            placer.release(job.spec, job.units)
            self.idle.append(job.lane)
            if kind == "error":
                raise payload
            payload.environment["placement"] = self._record(job)
            yield job.spec, payload

    def _lane(self) -> int:
        if self.idle:
            return self.idle.pop()
        self.executors.append(self.new_executor())
        return len(self.executors) - 1

    def _start(self, job: _Job, run_cell) -> None:
        def work():
            try:
                result = run_cell(self.executors[job.lane], job.spec, job.slot)
                self.done.put(("ok", job.spec.run_id, result))
            except BaseException as exc:  # handed to the calling thread, which raises it
                self.done.put(("error", job.spec.run_id, exc))
        # a process started by a thread gets its parent-death signal when that thread ends
        # (lifeline.py): the thread lives until its run has ended, so that is never early
        thread = threading.Thread(target=work, name="cell " + job.spec.run_id, daemon=True)
        self.threads.append(thread)
        thread.start()

    def _next(self) -> Tuple[str, str, Any]:
        while True:  # a timed wait: the calling thread stays responsive to signals
            try:
                return self.done.get(timeout=POLL_S)
            except queue.Empty:
                continue

    def _record(self, job: _Job) -> Dict[str, Any]:
        """What the result says of its placement: GPUs and cores (which, where compare chose
        them), its share of cores, how many cells could run at once, and which ran beside it."""
        chosen = self.pool.assigned_by == "compare"
        return {"gpus": list(job.slot.gpus) if chosen and job.slot.gpus else None,
                "gpu_count": len(job.slot.gpus) or None,
                "cores": cpuset(job.slot.cores) if job.slot.cores else None, "cpus": job.slot.cpus,
                "pinned": bool(job.slot.cores), "assigned_by": self.pool.assigned_by,
                "concurrency": self.concurrency, "beside": sorted(job.beside)}

    def stop(self) -> None:
        """Stop every running cell: close each lane's executor, again and again, until every lane
        has returned (a lane may start its process just after a close)."""
        deadline = time.monotonic() + STOP_WAIT_S
        while True:
            for executor in self.executors:
                executor.close()
            alive = [t for t in self.threads if t.is_alive()]
            if not alive:
                return
            if time.monotonic() > deadline:
                self.log("{} cell(s) did not stop within {:.0f} s: {}".format(
                    len(alive), STOP_WAIT_S, ", ".join(t.name for t in alive)))
                return
            for thread in alive:
                thread.join(0.2)
