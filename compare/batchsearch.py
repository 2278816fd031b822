"""The batch search behind `--batch-size auto` and the tuned mode: the fastest per-GPU batch up to
the largest that fits, per framework x mode x precision x GPU count (one search per cell).

The rule is backends/batchprobe.py's: start at the cell's batch (its network's default, within
MIN-MAX), double while the gain is beyond the probes' noise, one batch between after an
out-of-memory. Where the framework allows, the probes run inside the cell's own process (one
import, one device set-up, one compile cache, a fresh model per batch) and the cell goes on at
the batch chosen; elsewhere (SEPARATE says why) each probe is a process of its own, run by the
executor like any cell. Either way every probe is recorded in the campaign's probes/ folder and
shown in the report as a probe, never as a cell, and the cell's result records the search
(settings.batch_search: bounds, start, every probe's figure, why it stopped, where, seconds).
Where each probe is a process of its own, the backend says why (its SEPARATE_PROBES).
`COMPARE_BATCH_SEARCH=process` makes every search use separate processes (to measure the two).
"""
import os
import time
from dataclasses import replace
from typing import Callable, Dict, List, Optional, Tuple

from backends.contract import RunResult, RunSpec
from backends.contract.shared import batchprobe

probe_spec = batchprobe.probe_spec  # one definition, the backends'

BUDGET_S = {"cuda": 900.0, "cpu": 300.0}  # no new probe starts after this long (one search)
FORCE_ENV = "COMPARE_BATCH_SEARCH"  # =process: every search in separate processes
# measured (PyTorch, 64 px, 1050 MiB): after a probe out of memory at 64, VmData stayed at
# 1,037-1,075 MiB, so 48 and then 32 failed where a fresh process fits 32; malloc_trim gives back
# pages, not address space
RLIMIT_KEPT = ("on a CPU under memory_limit_mb, the address space the C allocator keeps after a "
               "probe still counts against the limit, so a later probe in the same process would "
               "not fit where a fresh one does")


def where(cell: RunSpec) -> Tuple[bool, str]:
    """(whether the cell searches in its own process, why not where it does not). A backend
    says why its probes need processes of their own (SEPARATE_PROBES: its framework does not
    give device memory back); a job of several processes, a cell reading real data and one
    under a memory limit on a CPU search apart too."""
    from . import frameworks
    if os.environ.get(FORCE_ENV) == "process":
        return False, "{}=process".format(FORCE_ENV)
    module = frameworks.get(cell.framework).module()
    if getattr(module, "SEPARATE_PROBES", None):
        return False, module.SEPARATE_PROBES
    if cell.nodes > 1 or module.launcher(cell) != "single":
        return False, ("a job of several processes would have to agree on each probe's "
                       "out-of-memory before the next; not built")
    if cell.device == "cpu" and cell.options.get("memory_limit_mb"):
        return False, RLIMIT_KEPT
    if cell.data != "synthetic":
        return False, ("real data: the input pipeline (its loader workers, shared memory, JPEG "
                       "decoders) is not rebuilt for each probe in one process; not built")
    return True, ""


def search(cell: RunSpec, bounds: Tuple[int, int], run: Callable[[RunSpec], RunResult],
           budget_s: float, clock=time.monotonic) -> batchprobe.Outcome:
    """Probe `cell` from its batch by the rule; `run` runs (and records) one probe process. The
    outcome keeps each probe's RunResult in `results`."""
    results: List[RunResult] = []

    def one(batch: int) -> batchprobe.Probe:
        results.append(run(probe_spec(cell, batch)))
        return as_probe(results[-1])
    out = batchprobe.search(cell.batch_size, bounds, one, budget_s, clock)
    out.results = results
    return out


def as_probe(r: RunResult) -> batchprobe.Probe:
    return {"batch_size": r.spec["batch_size"], "status": r.status,
            "images_per_sec": r.images_per_sec, "uncertainty": r.uncertainty,
            "window_images_per_sec": list(r.window_images_per_sec or []), "reason": r.reason,
            "seconds": _seconds(r)}


def _seconds(r: RunResult) -> Optional[float]:
    p = r.phases or {}
    start = p.get("launched") or p.get("process_started")
    return round(p["timed_end"] - start, 1) if start and p.get("timed_end") else None


def probe_results(cell: RunSpec, result: RunResult) -> List[RunResult]:
    """The probes an in-process search recorded in the cell's result, as probe results (the
    report's table and the probes/ folder read them as they read a separate probe's)."""
    out = []
    for p in (result.settings.get("batch_search") or {}).get("probes", []):
        spec = replace(probe_spec(cell, p["batch_size"]), **{
            k: p[k] for k in ("steps", "warmup_steps") if k in p})  # as it ran (FIT or PROBE)
        out.append(RunResult(
            run_id=spec.run_id, status=p["status"], spec=spec.to_dict(), reason=p.get("reason"),
            images_per_sec=p.get("images_per_sec"), uncertainty=p.get("uncertainty"),
            window_images_per_sec=p.get("window_images_per_sec") or [],
            settings={"probe_of": result.run_id, "seconds": p.get("seconds"),
                      "where": "in the cell's process"},
            device_name=result.device_name, framework_version=result.framework_version,
            spec_hash=spec.spec_hash, nonce=result.nonce))
    return out


def run_auto(cell: RunSpec, campaign, executor, plan, slot, log: Callable[[str], None],
             searched: Dict[str, int]) -> RunResult:
    """Run an auto cell: find its batch once for all its repeats and sessions (`searched`: spec
    hash -> the batch chosen; in its own process, or by probe processes run by `executor` on the
    cell's `slot`, each saved in the campaign), then the cell at that batch with the search in
    its settings. A search that finds no batch is the cell's result, with why."""
    from .executors.results import failure
    timeout, bounds, (inside, why) = plan.study.timeout, tuple(plan.matrix.search), where(cell)
    # the images a cell times where the plan set its steps for its search's start
    images = cell.steps * cell.batch_size if plan.matrix.start_steps(
        cell.model, cell.precision, cell.mode) else None
    batch = searched.get(cell.spec_hash)
    if batch is not None:
        result = executor.run(replace(cell, **batchprobe.at_batch(cell, batch, images)), campaign,
                              timeout, slot=slot)
        result.settings["batch_search"] = {
            "chosen": batch, "stopped": "chosen by an earlier search of this cell (its first repeat)"}
        return result
    if inside and bounds[0] < bounds[1]:
        asked = {"bounds": list(bounds), "budget_s": BUDGET_S[cell.device]}
        asked.update({"images": images} if images else {})
        result = executor.run(replace(cell, search=asked), campaign, timeout, slot=slot)
        for probe in probe_results(cell, result):
            campaign.save_probe(probe)
            _log(log, probe)
        if result.status == "ok":
            searched[cell.spec_hash] = result.spec["batch_size"]
        return result

    def probe(spec: RunSpec) -> RunResult:  # the search by probe processes
        result = limit_crash(executor.run(replace(spec, nonce=campaign.attempt_nonce()), campaign,
                                          timeout, slot=slot))
        campaign.save_probe(result)
        _log(log, result)
        return result
    outcome = search(cell, bounds, probe, BUDGET_S[cell.device])
    batch = outcome.batch
    if batch is None:
        first = outcome.results[0]
        return failure(cell, first.status, outcome.failure_reason(), first.stderr_tail)
    searched[cell.spec_hash] = batch  # then the cell at the batch chosen
    result = executor.run(replace(cell, **batchprobe.at_batch(cell, batch, images)), campaign,
                          timeout, slot=slot)
    result.settings["batch_search"] = outcome.record("separate processes" + (": " + why if why else ""))
    return result


# how an allocation the limit refused shows where the code does not say "out of memory": a crash
# before any result, or oneDNN's failure to make a kernel (BENCHMARKS.md, issue 35)
LIMIT_WORDS = ("killed by SIG", "could not create a primitive")


def limit_crash(result: RunResult) -> RunResult:
    """A probe under memory_limit_mb that failed in one of LIMIT_WORDS' ways is out of memory: an
    allocation the limit refused in native code that does not report it as such (PyTorch at
    64 px under 1,050 MiB on this project's VM: now `can't allocate memory`, now SIGSEGV, now
    oneDNN's "could not create a primitive", from one run to the next). So marked, with the
    original words kept in the reason, the search goes on below it as after any out-of-memory,
    instead of stopping there."""
    limit = (result.spec or {}).get("options", {}).get("memory_limit_mb")
    if limit and result.status == "failed" and any(w in (result.reason or "") for w in LIMIT_WORDS):
        result.status = "oom"
        result.reason = "{} under memory_limit_mb={}: taken as out of memory".format(result.reason,
                                                                                     limit)
    return result


def _log(log: Callable[[str], None], result: RunResult) -> None:
    log("  probe {:<30} {:>8}  {}".format(result.run_id, result.status, "{:.2f} img/s".format(
        result.images_per_sec) if result.status == "ok" else ""))
