"""`compare run … --plan`: the schedule a sweep would take and how long, printed before it starts.

    compare run --frameworks caffe2,jax --gpus 1,2 --precision fp32,fp16 --plan
    compare run … --plan --plan-gpus 8          # the same study on a machine of 8 such GPUs

A cell's time is estimated from the cell times (phases cell_start -> cell_end) of earlier results
on the same machine (machine_record.fingerprint: the same CPU, GPU models and driver; any number
of GPUs) in the campaigns under --plan-from (default: the folder holding --results, else `results/`),
from like cells only: the last three runs of the same cell (same settings: spec hash), marked
`=`; else of cells of the same framework, model, precision, GPUs, nodes, device, executor, batch,
mode, data mode and target accuracy (none: throughput), `~`; else of the framework's cells, or of
any cell, those of the same kind (time to accuracy or throughput) first, `?` (a guess); a cell
with nothing to go by counts DEFAULT_S. Each earlier run is scaled
to the cell by one rule (Estimates, `scaled`):

    time = fixed + per-step x (warm-up - 1 + timed steps) x (image side / its image side)^2

where per-step is the earlier run's timed seconds per step and fixed is the rest of its cell time
(start-up, model, the first step's compilation and autotuning, teardown); the median of the three
is the estimate. A run that failed or timed out took no measure of its cell (a bad interpreter
fails in a tenth of a second, a hung run lasts its --timeout): it is left out, its environment
build still counted. A run to a target accuracy times its epochs (run_start to run_stop), not --steps: it is
estimated from runs to a target only, those that ended by themselves (reached it or ran out of
epochs: not timed out, failed or interrupted), its training (the whole cell where the run has no
timed marks) scaled by epochs x images per epoch x pixels (`trained`); with none of its framework
before (nor like it), from a throughput cell of its framework, model, precision, workers, device and
executor (measured here, else a reference), marked `t` (`from_throughput`): the cell's fixed part
+ its seconds per image (seconds per steady step / global batch) x pixels x (max_epochs x images
of train/ + val/ every eval_every epochs at EVAL_SHARE of the cost): all its epochs trained.
The legend under the plan names the rule of the kinds of cells it shows.
An environment built during an earlier cell (its result's env_build_s) is not cell
time: it is left out of `fixed`, and a framework whose environment is not built yet (to_build)
adds a build of its own, once, to its first cell (marked `+`; the recorded builds' median, else a
guess). On a machine with no earlier run of a like cell, a cell takes the time of a like cell
that compare's authors measured cold on a machine of the same GPU models (compare/references/
cell_times/*.json, each saying where it was measured; made by bench/eta_fixture.py), marked
`r`; a CPU machine, one of the same cores and the same kind of CPU: AVX-512 or not, bf16
instructions or not (what decides whether bf16 cells are emulated, ~25x slower). Its environments
to build take the reference's builds where no build is recorded here. A
compile that an earlier run of the same cell (`=`) recorded as made for a cold cache (JAX: its
compile cache `miss` or `partial`, and the seconds it compiled) is left out: that cell's programs
are in the cache now, so its next run loads them (on one H200 the 8-cell study's JAX cells took
9-18 s run again, against 25-85 s cold; BENCHMARKS.md, 2026-12-04). PyTorch's inductor records no
compile seconds, so its cells count what they took; cuDNN's autotuning has no on-disk cache and
counts every time. The schedule is scheduler.plan(): the rule the sweep itself follows.
"""
import os
import statistics
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from backends.contract import RunResult, RunSpec, data_mode

from .reporting.timeline import DEFAULTS, clock, env_build_s
from .resources import Pool, cpuset
from .scheduler import Planned, plan

DEFAULT_S = 60.0  # a cell with no earlier result of any kind to go by
ENV_BUILD_GUESS_S = 300.0  # an environment to build with none built before to go by
EVAL_SHARE = 1 / 3  # an image evaluated (forward pass) against one trained (forward, backward)
ENDED = ("ok", "not_converged")  # a run to a target that ended by itself (not killed, failed)
RECENT = 3  # the last runs of a cell that make its estimate (caches warm up over time)
LEGEND = ("= the same cell ran before (median of its last {} runs); ~ a like cell (same framework, "
          "model, precision, GPUs, nodes, device, executor, batch, mode, data, target accuracy; a run to "
          "a target: its folder and epochs too); r a "
          "like cell measured cold on a machine of this kind by compare's authors; ? the framework's or any "
          "cell's: a guess.")
PER_IMAGE_LEGEND = ("t a run to a target accuracy with none of its framework's before: a throughput "
                    "cell's seconds per image (same framework, model, precision, workers, device, "
                    "executor; measured here, else on a machine of this kind) x --max-epochs x "
                    "train/ images, + val/ every --eval-every epochs at a third of the cost, + its "
                    "fixed part: all --max-epochs trained (it may reach its target sooner).")
# the rule each kind of cell is scaled by (scaled, trained); the legend names those in the plan
RULES = {"throughput": "Throughput cells are scaled by the rule: fixed part + per-step part x steps "
                       "x pixels ratio",
         "accuracy": "Runs to a target accuracy are scaled by the rule: fixed part + training x "
                     "epochs x images per epoch x pixels ratio (evaluations of val/ included)"}
REFERENCES = Path(__file__).parent / "references" / "cell_times"


def cpu_kind(flags: Optional[frozenset] = None) -> Dict[str, bool]:
    """What of a CPU decides its reference cell times: AVX-512, bf16 instructions (this host's
    /proc/cpuinfo unless `flags` are given)."""
    from backends.contract.shared import BF16_CPU_FLAGS, cpu_flags
    flags = cpu_flags() if flags is None else flags
    return {"avx512f": "avx512f" in flags, "bf16": any(f in flags for f in BF16_CPU_FLAGS)}


def _kind(machine: Dict[str, Any]) -> Optional[Tuple]:
    """What a reference must share with `machine`: its GPU models (the set of names); on a
    machine without GPUs, its cores and CPU kind (this host's: None for a cluster's record,
    whose nodes this host cannot read)."""
    names = {g.get("name") for g in machine.get("gpus") or []}
    if names:
        return None if None in names else ("gpus", frozenset(names))
    if machine.get("slurm") or not machine.get("cpu_count"):
        return None
    kind = machine.get("cpu_kind") or cpu_kind()
    return ("cpu", machine["cpu_count"], kind["avx512f"], kind["bf16"])


def reference_results(machine: Dict[str, Any]) -> Tuple[List[RunResult], List[str]]:
    """The cells measured on machines of `machine`'s kind (_kind) in REFERENCES, and where each
    file says they were measured."""
    import json
    kind = _kind(machine)
    if kind is None:
        return [], []
    out, where = [], []
    for path in sorted(REFERENCES.glob("*.json")):
        data = json.loads(path.read_text())
        if _kind(data["machine"]) == kind:
            out += [RunResult.from_dict(r) for rows in data["campaigns"].values() for r in rows]
            where.append("{} ({})".format(data["measured"], path.name))
    return out, where


def earlier_results(folder: Path, machine: Dict[str, Any]) -> Tuple[List[RunResult], int]:
    """Results with cell times from campaigns in `folder` (or `folder` itself) recorded on a
    machine the same as `machine` (machine_record.differences); and how many campaigns the
    estimates take cell times from (those with a run that measured its cell: measured_cell)."""
    from .store import neighbours
    out, used = [], 0
    for _, results in neighbours(folder, machine):
        timed = [r for r in results if _cell_s(r) is not None]
        used += any(map(measured_cell, timed))  # a campaign of failures alone lends no cell time
        out += timed
    return out, used


def measured_cell(r: RunResult) -> bool:
    """Whether a run took a measure of its cell's time: one that ended by itself did (oom too);
    one that failed or was killed did not (0.1 s for a bad interpreter, the timeout for a hung
    one), and the estimates leave it out (its environment build still counts)."""
    from .store import FAILED_RUN
    return r.status not in FAILED_RUN


def _cell_s(r: RunResult) -> Optional[float]:
    start, end = (r.phases or {}).get("cell_start"), (r.phases or {}).get("cell_end")
    return end - start if start is not None and end is not None and end >= start else None


def _steady_steps(spec: Dict[str, Any]) -> int:
    """Steps that run at the steady rate: all but the first (compilation, autotuning)."""
    warmup = int(spec.get("warmup_steps") or 0)
    return max(warmup - 1, 0) + int(spec.get("steps") or 0)


def parts(r: RunResult) -> Optional[Tuple[float, Optional[float]]]:
    """(fixed seconds, seconds per steady step) of a recorded cell, its environment build left
    out; the per-step part is None where the result has no timed marks (then all is fixed)."""
    total = _cell_s(r)
    if total is None:
        return None
    p, steps = r.phases or {}, int(r.spec.get("steps") or 0)
    timed = p.get("timed_end", 0.0) - p.get("timed_start", 0.0) if "timed_start" in p else None
    if _kind_of(r.spec) == "accuracy":  # timed = run_start..run_stop, its epochs (scaled())
        steps = _steady_steps(r.spec)
    per_step = timed / steps if timed and steps else None
    fixed = total - env_build_s(r) - (per_step or 0.0) * _steady_steps(r.spec)
    return max(fixed, 0.0), per_step


def scaled(r: RunResult, spec: RunSpec) -> Optional[float]:
    """The rule: a cell's time = fixed part + per-step part x steps x pixels ratio, from `r`."""
    found = parts(r)
    if found is None:
        return None
    fixed, per_step = found
    if per_step is None:
        return fixed
    pixels = (spec.image_size / float(r.spec.get("image_size") or spec.image_size)) ** 2
    if _kind_of(r.spec) == "accuracy":  # it trained epochs to its target, whatever --steps said:
        return fixed + per_step * pixels * _steady_steps(r.spec)  # that training, at this size
    return fixed + per_step * pixels * _steady_steps(spec.to_dict())


def trained(r: RunResult, spec: RunSpec) -> Optional[float]:
    """A run to a target accuracy from an earlier one `r` (ended by itself: ENDED): its training
    (run_start..run_stop; the whole cell where `r` has no timed marks) scaled by epochs x images
    per epoch x pixels, the rest as it was. The epochs: --max-epochs, or those `r` took where it
    reached a target at least as high."""
    total = _cell_s(r)
    if total is None or r.status not in ENDED:
        return None
    total -= env_build_s(r)
    p, acc = r.phases or {}, r.accuracy or {}
    training = p["timed_end"] - p["timed_start"] if "timed_start" in p and "timed_end" in p \
        else total
    epochs = acc.get("epochs") or r.spec.get("max_epochs") or spec.max_epochs
    ahead = spec.max_epochs
    if r.status == "ok" and (r.spec.get("target_accuracy") or 0) >= spec.target_accuracy:
        ahead = min(ahead, epochs)
    mine, theirs = _images(spec.data), (acc.get("images_trained") or 0) / epochs or _images(
        r.spec.get("data"))
    per_epoch = mine / theirs if mine and theirs else 1.0
    pixels = (spec.image_size / float(r.spec.get("image_size") or spec.image_size)) ** 2
    return max(total - training, 0.0) + training * ahead / epochs * per_epoch * pixels


def _images(folder: Optional[str], part: str = "train") -> int:
    """The training (or `part`'s) images of a data folder (DIR/train's JPEG files; 0: none found)."""
    if not folder or folder == "synthetic":
        return 0
    from .datasets import jpeg_count
    return jpeg_count(os.path.join(folder, part))


def per_image(r: RunResult) -> Optional[Tuple[float, float]]:
    """(fixed seconds, seconds per image trained) of a throughput cell with timed marks (parts):
    its seconds per steady step over its global batch; None for a run to a target or no marks."""
    found = parts(r) if _kind_of(r.spec) == "throughput" else None
    images = int(r.spec.get("batch_size") or 0) * int(r.spec.get("gpus") or 1) * int(
        r.spec.get("nodes") or 1)
    if found is None or found[1] is None or not images:
        return None
    return found[0], found[1] / images


def from_throughput(r: RunResult, spec: RunSpec) -> Optional[float]:
    """A run to a target accuracy from a throughput cell `r` of its framework, model, precision,
    device and workers (`t`): the cell's fixed part + its seconds per image x pixels ratio x the
    images the run handles at most: --max-epochs x train/, and val/ every --eval-every epochs
    (an image evaluated costs EVAL_SHARE of one trained: a forward pass, no backward)."""
    found, train = per_image(r), _images(spec.data)
    if found is None or not train:
        return None
    fixed, each = found
    pixels = (spec.image_size / float(r.spec.get("image_size") or spec.image_size)) ** 2
    evaluations = max(spec.max_epochs // max(spec.eval_every, 1), 1)
    images = spec.max_epochs * train + evaluations * _images(spec.data, "val") * EVAL_SHARE
    return fixed + each * pixels * images


def cached_compile(r: RunResult) -> float:
    """Seconds `r` spent compiling what its compile cache lacked, which a rerun of its cell on the
    same machine finds cached: the compile_s it recorded where a cache it names was a `miss` or
    `partial` (JAX's); 0 where the result does not say (PyTorch's inductor records no seconds)."""
    caches = ((r.environment or {}).get("compile_cache") or {}).values()
    if any(isinstance(c, dict) and c.get("state") in ("miss", "partial") for c in caches):
        return float((r.settings or {}).get("compile_s") or 0.0)
    return 0.0


def _kind_of(spec: Dict[str, Any]) -> str:
    """accuracy (a run to a target accuracy) or throughput."""
    return "throughput" if spec.get("target_accuracy") is None else "accuracy"


def _batch(spec: Dict[str, Any]):
    return "auto" if spec.get("batch_auto") else spec.get("batch_size")


# the target accuracy: a run to one (docs/accuracy.md) trains for epochs; a throughput cell (None)
# times steps, on the same folder too
LIKE = ("framework", "model", "precision", "gpus", "nodes", "device", "mode", "target_accuracy",
        "data_mode")
# what a throughput cell shares with a run to a target whose seconds per image it lends (`t`)
PER_IMAGE = ("framework", "model", "precision", "gpus", "nodes", "device", "mode")


class Estimates:
    """seconds(spec) and how sure (=, ~, ?) from the earlier results; environments to build
    (envs.py) and first steps (compilation, autotuning) are estimated apart."""

    def __init__(self, results: Sequence[RunResult], executor: Optional[str] = None,
                 references: Sequence[RunResult] = ()):
        self.by_hash: Dict[str, List[RunResult]] = {}
        self.by_fw: Dict[str, List[RunResult]] = {}
        self.by_kind: Dict[Tuple, List[RunResult]] = {}  # (framework or None, kind) -> results
        builds = self._index(results)[1]  # an environment built before a run failed is a build
        results = [r for r in results if measured_cell(r)]
        references = [r for r in references if measured_cell(r)]
        for r in results:
            self.by_hash.setdefault(r.spec_hash or "", []).append(r)
            self.by_fw.setdefault(r.spec.get("framework"), []).append(r)
            for fw in (r.spec.get("framework"), None):
                self.by_kind.setdefault((fw, _kind_of(r.spec)), []).append(r)
        # like key -> results, framework -> environment builds: recorded here, measured elsewhere
        self.by_like, self.builds = self._index(results)[0], builds
        self.references, self.reference_builds = self._index(references)
        # per-image key -> throughput cells with timed marks: measured here, else elsewhere (`t`)
        self.per_image = [self._per_image(found) for found in (results, references)]
        self.all, self.executor = list(results), executor
        self.first_steps = 0.0  # seconds of first steps in the estimates given so far
        self.cached = 0.0  # seconds of cold compiles left out of `=` estimates (cached_compile)

    @classmethod
    def _index(cls, results: Sequence[RunResult]) -> Tuple[Dict[Tuple, List[RunResult]],
                                                           Dict[str, List[float]]]:
        """(like key -> results, framework -> the environment builds they recorded)."""
        like: Dict[Tuple, List[RunResult]] = {}
        builds: Dict[str, List[float]] = {}
        for r in results:
            like.setdefault(cls._like(r.spec, (r.environment or {}).get("executor")), []).append(r)
            if env_build_s(r):
                builds.setdefault(r.spec.get("framework"), []).append(env_build_s(r))
        return like, builds

    def _per_image(self, results: Sequence[RunResult]) -> Dict[Tuple, List[RunResult]]:
        out: Dict[Tuple, List[RunResult]] = {}
        for r in results:
            if per_image(r) is not None:
                out.setdefault(self._per_image_key(r.spec, (r.environment or {}).get("executor")),
                               []).append(r)
        return out

    @staticmethod
    def _per_image_key(spec: Dict[str, Any], executor: Optional[str]) -> Tuple:
        return tuple(spec.get(k, DEFAULTS.get(k)) for k in PER_IMAGE) + (executor,)

    @staticmethod
    def _like(spec: Dict[str, Any], executor: Optional[str]) -> Tuple:
        # a run to a target trains epochs over its folder: like only on the same folder and epochs
        trained = (spec.get("data"), spec.get("max_epochs"), spec.get("eval_every")) \
            if spec.get("target_accuracy") is not None else None
        return tuple(spec.get(k, DEFAULTS.get(k)) for k in LIKE[:-1]) + (
            trained, data_mode(spec), _batch(spec), executor)

    def of(self, spec: RunSpec) -> Tuple[float, str]:
        """The cell's own time (no environment build) and its mark."""
        like, kind = self._like(spec.to_dict(), self.executor), _kind_of(spec.to_dict())
        per_image_key = self._per_image_key(spec.to_dict(), self.executor)
        # a guess from cells of the same kind first: a run to a target accuracy trains for
        # epochs, a throughput cell times a few steps; a run to a target with none of its
        # framework's before: the seconds per image of its throughput cells (t)
        for mark, found in (("=", self.by_hash.get(spec.spec_hash)), ("~", self.by_like.get(like)),
                            ("r", self.references.get(like)),
                            ("?", self.by_kind.get((spec.framework, kind))),
                            ("t", self.per_image[0].get(per_image_key) if kind == "accuracy" else None),
                            ("t", self.per_image[1].get(per_image_key) if kind == "accuracy" else None),
                            ("?", self.by_fw.get(spec.framework)),
                            ("?", self.by_kind.get((None, kind))), ("?", self.all)):
            if kind == "accuracy" and mark != "t":  # epochs of training: like runs that ended
                found = [r for r in found or [] if _kind_of(r.spec) == kind and r.status in ENDED]
            recent = sorted(found or [], key=lambda r: r.phases["cell_end"])[-RECENT:]
            rule = from_throughput if mark == "t" else trained if kind == "accuracy" else scaled
            pairs = [(r, v) for r, v in ((r, rule(r, spec)) for r in recent) if v is not None]
            values = [v for _, v in pairs]
            if values and mark == "=":  # the same cell: what it compiled cold is cached now
                saved = [min(cached_compile(r), v) for r, v in pairs]
                self.cached += statistics.median(saved)
                values = [v - c for v, c in zip(values, saved)]
            if values:
                self.first_steps += statistics.median(first_step(r) for r in recent)
                return float(statistics.median(values)), mark
        return DEFAULT_S, "?"

    def build(self, framework: str) -> Tuple[float, str]:
        """Seconds to build the framework's environment: recorded builds' median, or a guess."""
        for seen, how in ((self.builds.get(framework), "recorded"),
                          (self.reference_builds.get(framework), "measured on a machine of this kind")):
            if seen:
                return float(statistics.median(seen)), how
        return ENV_BUILD_GUESS_S, "a guess"


def first_step(r: RunResult) -> float:
    p = r.phases or {}
    start = p.get("model_built")
    return p["first_step_done"] - start if start and p.get("first_step_done") else 0.0


def render(items: List[Planned], marks: Dict[str, str], pool: Pool, concurrency: int,
           source: str, asked: str, notes: Sequence[str] = (), repeated: bool = False,
           about: Sequence[str] = ()) -> str:
    """The plan as text: one line per run in start order, then the totals. `repeated`: the study
    repeats its cells, and the plan counts runs of cells, as the report does (store.counted);
    `about`: lines under the first, of what the runs do (a run to a target accuracy's)."""
    from .store import counted
    what, word = counted([it.spec.run_id for it in items], repeated)
    if not items:  # `--resume --plan` of a campaign whose every cell is finished
        return "plan: {} to run on {}: every {} of the study has its result already\n".format(
            "nothing" if repeated else "no cell", _machine(pool), word)
    lines = ["plan: {} on {}, up to {} at once ({}); {}".format(
        what, _machine(pool), concurrency, asked, source)]
    lines += list(about) + ["note: " + n for n in pool.notes]
    rows = [(clock(it.start), clock(it.end), ",".join(it.slot.gpus) or "-",
             cpuset(it.slot.cores) if it.slot.cores else ("-" if pool.gpu and not pool.cores[
                 pool.units[0]] else "all"),
             "{}{:.0f} s".format(marks[it.spec.run_id][0], it.end - it.start), it.spec.run_id
             + (" (+ builds its environment first)" if "+" in marks[it.spec.run_id] else ""))
            for it in items]
    # the GPUs, cores and time columns as wide as their longest entry ("0,1,2,3" on 8 GPUs)
    gpus_w, cores_w, time_w = (max([least] + [len(r[i]) for r in rows])
                               for i, least in ((2, 5), (3, 9), (4, 6)))
    row = "{:>8} {:>8}  {:<%d} {:<%d} {:>%d}  {}" % (gpus_w, cores_w, time_w)
    lines.append(row.format("start", "end", "GPUs", "cores", "time", word))
    lines += [row.format(*r) for r in rows]
    wall = max((it.end for it in items), default=0.0)
    serial = sum(it.end - it.start for it in items)
    if serial - wall < 0.5:  # nothing side by side (a CPU, --concurrency 1): no "1.00× faster"
        total = "estimate: {} wall, one {} at a time".format(clock(wall), word)
    else:
        total = "estimate: {} wall, against {} one {} at a time ({:.2f}× faster)".format(
            clock(wall), clock(serial), word, serial / wall)
    if pool.gpu:
        total += "; {} held {:.2f} GPU-hours".format(_machine(pool), len(pool.units) * wall / 3600)
    return "\n".join(lines + [total] + list(notes) + [legend(items, marks)]) + "\n"


def legend(items: Sequence[Planned], marks: Optional[Dict[str, str]] = None) -> str:
    """The marks (`t` where a cell has it), and the rule of each kind of cell the plan holds."""
    kinds = {_kind_of(it.spec.to_dict()) for it in items}
    per_image = any(m.startswith("t") for m in (marks or {}).values())
    return " ".join([LEGEND.format(RECENT)] + [PER_IMAGE_LEGEND] * per_image
                    + ["{}.".format(RULES[k]) for k in RULES if k in kinds])


def _machine(pool: Pool) -> str:
    if pool.gpu:
        return "{} GPU{}".format(len(pool.units), "s" if len(pool.units) > 1 else "")
    cores = sum(len(c) for c in pool.cores.values())
    if not cores:  # resources.single(): jobs placed elsewhere (Slurm batch jobs), cores not known
        return "nodes the scheduler picks"
    return "{} core{}".format(cores, "s" if cores > 1 else "")


def schedule(specs: Sequence[RunSpec], pool: Pool, concurrency: int, folder: Path,
             machine: Dict[str, Any], executor: Optional[str] = None,
             unbuilt: Sequence[str] = (), timeout: Optional[float] = None,
             known: Sequence[str] = (), repeated: bool = False
             ) -> Tuple[List[Planned], Dict[str, str], str, List[str]]:
    """(the planned cells, each one's mark, where the estimates came from, notes). `executor`:
    the one that will run them (like cells ran on it); `unbuilt`: the frameworks whose
    environment the sweep builds first (to_build), each counted once, in its first cell;
    `timeout`: --timeout, which a cell estimated from a run (not a guess) is held against;
    `known`: the spec hashes of auto cells whose batch an earlier session found; `repeated`: the
    study repeats its cells (the notes count runs of cells: store.counted)."""
    from .store import counted
    results, campaigns = earlier_results(folder, machine)
    used = [r for r in results if measured_cell(r)]  # the runs the estimates take their times from
    left = "" if len(used) == len(results) else " ({} that failed or timed out left out)".format(
        len(results) - len(used))
    references, measured = reference_results(machine)
    estimates = Estimates(results, executor, references)
    marks: Dict[str, str] = {}
    builds: Dict[str, Tuple[float, str]] = {}
    over: Dict[str, float] = {}  # run id -> its estimate, where that is beyond --timeout

    def seconds(spec: RunSpec) -> float:
        value, marks[spec.run_id] = estimates.of(spec)
        if timeout and value > timeout and not marks[spec.run_id].startswith("?"):
            over[spec.run_id] = value
        if spec.framework in unbuilt and spec.framework not in builds:
            builds[spec.framework] = estimates.build(spec.framework)
            value += builds[spec.framework][0]
            marks[spec.run_id] += "+"
        return value
    items = plan(specs, pool, concurrency, seconds, known)
    source = "cell times from {} earlier run{} in {} campaign{} under {}{}".format(
        len(used), "" if len(used) == 1 else "s", campaigns, "" if campaigns == 1 else "s",
        folder, left) if used else "no earlier run on a machine like this under {}{}: {}".format(
        folder, left, "like cells measured on a machine of this kind (r){}, else {:.0f} s".format(
            ", runs to a target from their throughput cells (t)" if any(
                m.startswith("t") for m in marks.values()) else "", DEFAULT_S)
        if references else "every cell counts {:.0f} s".format(DEFAULT_S))
    notes = []
    if any(m.startswith("r") for m in marks.values()):
        notes.append("cells marked r: like cells measured cold, on a fresh machine of this kind: "
                     "{}".format("; ".join(measured)))
    if builds:
        notes.append("environments built once, in the first cell of each: {} (not cell time; "
                     "later sweeps reuse them)".format(", ".join(
                         "{} {:.0f} s ({})".format(fw, s, how) for fw, (s, how) in builds.items())))
    if over:
        longest = max(over, key=over.get)
        notes.append("warning: {} estimated beyond --timeout {:.0f} s (the longest, {}: {:.0f} "
                     "s): a run is stopped there and recorded timeout; give a larger --timeout".format(
                         counted(list(over), repeated)[0], timeout, longest, over[longest]))
    if estimates.first_steps:
        notes.append("of the cells' time, first steps (compilation, autotuning) ~{:.0f} s, from "
                     "the earlier runs' own (compile caches now warm may shorten them)".format(
                         estimates.first_steps))
    if estimates.cached:
        notes.append("compiles of ~{:.0f} s that earlier runs of the same cells made with a cold "
                     "cache are left out: their programs are cached now".format(estimates.cached))
    return items, marks, source, notes


def to_build(frameworks, device: str, overrides: Dict[str, str], executor: str) -> List[str]:
    """The names of the frameworks whose managed environment the local executor would create
    first (envs.py: no --python, not in this interpreter, not built yet); none for the other
    executors."""
    from . import envs
    if executor != "local":
        return []
    return [fw.name for fw in frameworks if fw.name not in overrides and not envs.in_current(fw)
            and not envs.existing(fw, device)]
