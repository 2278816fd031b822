"""Packed cells against serial runs of the same cell: did running beside other cells change a figure?

A run is packed when other cells ran beside it (its result's environment["placement"]["beside"],
scheduler.py); serial when none did, or when it was recorded before placements were. A packed
cell is compared with the serial runs of the same cell (same settings: spec hash) on the same
machine, from this campaign and the campaigns next to it (its parent folder), as
packed ÷ serial with its 95 % interval (intervals.py). A figure whose interval excludes 1 is
flagged: packing changed it beyond its noise.
"""
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from backends.contract import RunResult

from . import intervals
from .intervals import pm
from .tables import Section, Table, Text

TITLE = "Packed cells against serial runs (img/s packed ÷ serial, same cell and machine)"


def beside(r: RunResult) -> List[str]:
    return list(((r.environment or {}).get("placement") or {}).get("beside") or [])


def _estimate(rs: Sequence[RunResult]) -> Optional[intervals.Estimate]:
    return intervals.cell([r.images_per_sec for r in rs], [r.window_images_per_sec for r in rs],
                          [r.uncertainty for r in rs])


def serial_runs(root: Path, machine: Dict, own: Sequence[RunResult]) -> List[Tuple[str, RunResult]]:
    """(campaign folder name, result) of every ok serial run in this campaign and its neighbours
    that ran on the same machine."""
    from ..store import neighbours
    out = [(root.name, r) for r in own if r.status == "ok" and not beside(r)]
    for other, results in neighbours(root.parent, machine, skip=root):
        out += [(other.root.name, r) for r in results if r.status == "ok" and not beside(r)]
    return out


def sections(results: Sequence[RunResult], root: Path, machine: Dict) -> List[Section]:
    """The table, or nothing when no cell of the campaign ran packed or none has a serial twin."""
    packed: Dict[str, List[RunResult]] = {}
    for r in results:
        if r.status == "ok" and beside(r) and r.spec_hash:
            packed.setdefault(r.spec_hash, []).append(r)
    if not packed:
        return []
    serial: Dict[str, List[Tuple[str, RunResult]]] = {}
    for where, r in serial_runs(Path(root), machine, results):
        if r.spec_hash in packed:
            serial.setdefault(r.spec_hash, []).append((where, r))
    rows, flagged = [], []
    for key, rs in packed.items():
        if key not in serial:
            continue
        a, b = _estimate(rs), _estimate([r for _, r in serial[key]])
        ratio = intervals.ratio(a, b)
        hw = ratio.half_width() if ratio else None
        state = intervals.state(ratio.value if ratio else None, hw)
        name = rs[0].run_id
        rows.append([name, ", ".join(sorted({x for r in rs for x in beside(r)})),
                     pm(a.value, a.half_width()), pm(b.value, b.half_width()),
                     ", ".join(sorted({w for w, _ in serial[key]})),
                     pm(ratio.value if ratio else None, hw, "{:.3f}"), state])
        if state in (intervals.BETTER, intervals.WORSE):
            flagged.append("{}: packed ÷ serial = {} ({}): packing changed this figure beyond its "
                           "interval".format(name, pm(ratio.value, hw, "{:.3f}"), state))
    if not rows:
        return []
    notes = ["A packed run had other cells beside it on other GPUs and cores; a serial run had none. "
             "Serial runs come from this campaign and the campaigns next to it on the same machine."]
    table = Table(TITLE, ["cell", "beside", "packed img/s", "serial img/s", "serial from",
                          "packed ÷ serial", "state"], rows, notes, name="packing")
    return [table] + ([Text("", [], warnings=["Warning: " + f for f in flagged])] if flagged else [])
