"""The report's "Batch search" table: every probe of the campaign's batch searches (--batch-size
auto, the tuned mode), listed as probes (short runs that chose a batch), never as cells."""
from typing import Optional, Sequence

from backends.contract import DEFAULT_MODEL, RunResult, data_mode

from . import tables
from .tables import Table

NOTE = ("A probe is a short run of the cell at one batch (backends/batchprobe.py): from the "
        "network's default batch, the batch doubles while the larger is faster beyond the probes' "
        "noise, until one does not fit or the search's maximum or time budget is reached; then the "
        "cell runs at the fastest (chosen). Probe figures are short runs: read them as a ranking "
        "of batches, not as results.")


def table(probes: Sequence[RunResult], cells: Sequence[RunResult]) -> Optional[Table]:
    """One row per probe, in search order, the batch its cell ran at marked chosen; the searches
    of `cells` (the auto cells' results) are said under it: where, how long, why done."""
    if not probes:
        return None
    chosen = {_key(r.spec): r.spec.get("batch_size") for r in cells}  # cell key: the batch it ran
    # a model, image or data column where the searches differ in it (each search its rows); the
    # mode always
    fields = tables.shown([_cell(p.spec) for p in probes],
                          ["framework", "model", "mode", "precision", "image_size", "data_mode", "N",
                           "batch_size"], ("model", "image_size", "data_mode"))
    rows = []
    for p in sorted(probes, key=_order):
        s = p.spec
        key = _key(s)
        mark = "chosen" if chosen and chosen.get(key) == s.get("batch_size") else ""
        rows.append(tables.label(_cell(s), fields) + [
            p.status, "{:.2f}".format(p.images_per_sec) if p.status == "ok" else
            (p.reason or "").splitlines()[0][:120] if p.reason else "", mark])
    return Table("Batch search (probes, not cells)", tables.heading(fields) + [
        "status", "img/s or reason", ""], rows, [NOTE] + searches(cells), name="probes")


def _cell(s: dict) -> dict:
    """A probe's spec as the fields that name its cell (tables.label)."""
    return {"framework": s.get("framework"), "model": _model(s), "mode": s.get("mode", "default"),
            "precision": s.get("precision"), "nodes": s.get("nodes", 1), "gpus": s.get("gpus"),
            "batch_size": s.get("batch_size"), "image_size": s.get("image_size"),
            "data_mode": data_mode(s)}


def searches(cells: Sequence[RunResult]) -> list:
    """One sentence per search: the cell, where its probes ran, how long, why it stopped."""
    out = []
    for r in cells:
        s = (r.settings or {}).get("batch_search") or {}
        if not s.get("probes"):
            continue  # a repeat reusing an earlier search, or one candidate: nothing searched
        out.append("{}: {} probe{} {}{}, {}; chose {}{}.".format(
            r.run_id, len(s["probes"]), "" if len(s["probes"]) == 1 else "s",
            s.get("where", "in separate processes"),
            " in {:.0f} s".format(s["seconds"]) if s.get("seconds") is not None else "",
            s.get("stopped", ""), s.get("chosen"),
            " (the last probe's model went on)" if s.get("reused") else ""))
    return out


def _model(s: dict) -> str:
    return s.get("model") or DEFAULT_MODEL


def _key(s: dict) -> tuple:
    return (s.get("framework"), _model(s), s.get("mode", "default"), s.get("precision"),
            s.get("nodes", 1), s.get("gpus"), s.get("image_size"), s.get("data", "synthetic"),
            bool(s.get("data_only")))


def _order(p: RunResult) -> tuple:
    return tuple(str(x) for x in _key(p.spec)) + (p.spec.get("batch_size") or 0,)
