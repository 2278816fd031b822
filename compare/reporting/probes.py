"""The report's "Batch search" table: every probe of the campaign's batch searches (--batch-size
auto, the tuned mode), listed as probes (short runs that chose a batch), never as cells."""
from typing import Optional, Sequence

from backends.protocol import RunResult

from .. import frameworks
from .tables import Table

NOTE = ("A probe is a short run of the cell at one batch (compare/batchsearch.py); the batch "
        "doubles until one does not fit or the search's maximum or time budget is reached, then "
        "the cell runs at the fastest (chosen). Probe figures are short runs: read them as a "
        "ranking of batches, not as results.")


def table(probes: Sequence[RunResult], chosen: Optional[dict] = None) -> Optional[Table]:
    """One row per probe, in search order; `chosen`: {(cell key): batch} marks the pick."""
    if not probes:
        return None
    rows = []
    for p in sorted(probes, key=_order):
        s = p.spec
        key = _key(s)
        mark = "chosen" if chosen and chosen.get(key) == s.get("batch_size") else ""
        rows.append([frameworks.display(s.get("framework")), s.get("mode", "default"),
                     s.get("precision"), _n(s), str(s.get("batch_size")), p.status,
                     "{:.2f}".format(p.images_per_sec) if p.status == "ok" else
                     (p.reason or "").splitlines()[0][:120] if p.reason else "", mark])
    return Table("Batch search (probes, not cells)", ["framework", "mode", "precision", "N", "batch",
                                                      "status", "img/s or reason", ""], rows, [NOTE],
                 name="probes")


def _key(s: dict) -> tuple:
    return (s.get("framework"), s.get("mode", "default"), s.get("precision"), s.get("nodes", 1),
            s.get("gpus"), s.get("image_size"), s.get("data", "synthetic"))


def _order(p: RunResult) -> tuple:
    return tuple(str(x) for x in _key(p.spec)) + (p.spec.get("batch_size") or 0,)


def _n(s: dict) -> str:
    nodes = s.get("nodes", 1)
    return "{}×{}".format(nodes, s.get("gpus")) if nodes > 1 else str(s.get("gpus"))


def chosen_batches(results: Sequence[RunResult]) -> dict:
    """{(cell key): the batch its search chose} from the auto cells' results."""
    return {_key(r.spec): r.spec.get("batch_size") for r in results if r.spec.get("batch_auto")}
