"""The input-pipeline table: for every cell run with real data, its synthetic and real img/s, the
data-only ceiling where it was measured, data efficiency = real ÷ synthetic (flagged input-bound
below metrics.INPUT_BOUND), and what bounds the pipeline: CPU cores, loader workers, the pipeline.

data_table(cells) takes the comparator's cells (one row per cell *and data mode*) and returns one
row per cell; table(cells) is the report's section (a tables.Table).
"""
from typing import Dict, List, Optional

import pandas as pd

from backends.contract.options import CUDA_DEFAULT_CONNECTIONS

from .. import frameworks
from . import metrics, tables
from .comparator import DATA_SETTINGS, KEY
from .tables import Table, n_of, num

CELL = ["framework", "model", "precision", "batch_size", "image_size", "device", "nodes", "gpus",
        "mode"]
COLUMNS = CELL + ["synthetic_ips", "real_ips", "data_only_ips", "data_efficiency", "input_bound",
                  "pipeline_share", "cpu_cores", "loader_workers", "host_cpu_cores",
                  "data_pipeline", "decode", "decode_why", "images_read", "corrupt_skipped",
                  "cuda_connections", "real_status"]


def _ips(row: Optional[pd.Series]) -> Optional[float]:
    return None if row is None or row["status"] != "ok" else row["images_per_sec"]


def _first(rows, column: str):
    """The value of `column` in the first of rows that has one (real runs before data-only)."""
    return next((row[column] for row in rows if row is not None and column in row
                 and row[column] is not None and row[column] == row[column]), None)


def data_table(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per cell with a real or data-only run; empty when the campaign is all synthetic."""
    if cells.empty or "data_mode" not in cells or not (cells.data_mode != "synthetic").any():
        return pd.DataFrame(columns=COLUMNS)
    rows: List[Dict] = []
    for key, group in cells.groupby(CELL, sort=False):
        by_mode = {r["data_mode"]: r for _, r in group.iterrows()}
        real, ceiling = by_mode.get("real"), by_mode.get("data-only")
        if real is None and ceiling is None:
            continue
        synthetic = _ips(by_mode.get("synthetic"))
        efficiency = metrics.data_efficiency(_ips(real), synthetic)
        rows.append(dict(
            zip(CELL, key), synthetic_ips=synthetic, real_ips=_ips(real),
            data_only_ips=_ips(ceiling), data_efficiency=efficiency,
            input_bound=metrics.input_bound(efficiency),
            # how much of the pipeline's ceiling training uses: near 1, the pipeline sets the pace
            pipeline_share=metrics.ratio(_ips(real), _ips(ceiling)),
            real_status=None if real is None else real["status"],
            **{c: _first((real, ceiling), c) for c in DATA_SETTINGS + ("host_cpu_cores",)}))
    table = pd.DataFrame(rows, columns=COLUMNS)
    return table.astype(object).where(table.notna(), None)


def pipeline_name(row) -> str:
    """A cell's input pipeline in a few words: the short name its framework's table of pipelines
    gives the decode it ran (backends/pipelines/), else its pipeline's first stage."""
    decode, text = row.get("decode"), row.get("data_pipeline") or "its pipeline"
    short = {p.name: p.short for p in frameworks.pipelines(row.get("framework")) if p.short}
    if decode in short:
        return short[decode]
    return text.split(" -> ")[0].split(": ")[0].split(" (")[0]


def pipeline_verdicts(cells: pd.DataFrame) -> Dict[tuple, Dict]:
    """For every real-data or data-only cell (key: comparator.KEY): its pipeline's name, whether
    it is input-bound (None: unknown, no synthetic twin) and its data efficiency."""
    out: Dict[tuple, Dict] = {}
    if cells.empty or "data_mode" not in cells:
        return out
    rows = {tuple(r[c] for c in CELL): r for _, r in data_table(cells).iterrows()}
    for _, r in cells[cells.data_mode != "synthetic"].iterrows():
        found = rows.get(tuple(r[c] for c in CELL))
        out[cell_key(r)] = {
            "pipeline": pipeline_name(r), "input_bound": None if found is None else found["input_bound"],
            "efficiency": None if found is None else found["data_efficiency"]}
    return out


def cell_key(row, framework=None) -> tuple:
    """comparator.KEY of a cell record, for `framework` (default: the row's own)."""
    return tuple((framework or row[c]) if c == "framework" else row[c] for c in KEY)


def pipelines_compared(row, base: str, verdicts: Dict[tuple, Dict]) -> Optional[str]:
    """Why the framework ratio of a real-data or data-only cell against the `base` framework's
    compares input pipelines, not frameworks; None when it compares frameworks (synthetic data,
    or both cells within INPUT_BOUND of synthetic)."""
    if row["data_mode"] == "synthetic":
        return None
    if row["data_mode"] == "data-only":
        return "data-only: the input pipelines alone"
    pair = [(row["framework"], verdicts.get(cell_key(row), {})),
            (base, verdicts.get(cell_key(row, base), {}))]
    bound = ["{} is input-bound (data efficiency {:.3f})".format(frameworks.display(fw), v["efficiency"])
             for fw, v in pair if v.get("input_bound")]
    if bound:
        return " and ".join(bound)
    unknown = [frameworks.display(fw) for fw, v in pair if v.get("input_bound") is None]
    if unknown:
        return "not known to be within {:.0%} of synthetic: {} ran no synthetic twin".format(
            1 - metrics.INPUT_BOUND, " and ".join(unknown))
    return None


def _efficiency(r) -> str:
    if r["data_efficiency"] is None:
        return "n/a" if r["real_status"] in (None, "ok") else r["real_status"]
    return "{:.3f}{}".format(r["data_efficiency"], " input-bound" if r["input_bound"] else "")


def table(cells: pd.DataFrame) -> Optional[Table]:
    """The report section, or None when no cell ran with real data."""
    rows = data_table(cells)
    if rows.empty:
        return None
    # a model column where the study holds several networks (all its cells: as its other tables)
    fields = tables.shown(cells, ["framework", "model", "mode", "precision", "batch_size", "image_size",
                                  "N"])
    head = tables.heading(fields) + [
        "synthetic", "real", "data-only", "data efficiency", "CPU cores", "loader workers",
        "host CPU (cores busy)", "pipeline"]
    out = []
    for _, r in rows.iterrows():
        pipeline = r["data_pipeline"] or "n/a"
        if r["decode"]:
            pipeline += " (decode={})".format(r["decode"])
        out.append(tables.label(r, fields) + [
            num(r["synthetic_ips"], "{:.2f}"), num(r["real_ips"], "{:.2f}"),
            num(r["data_only_ips"], "{:.2f}"), _efficiency(r), num(r["cpu_cores"], "{:.0f}"),
            num(r["loader_workers"], "{:.0f}"), num(r["host_cpu_cores"], "{:.1f}"), pipeline])
    why = ["{} ({}{}, N={}): {}.".format(frameworks.display(r["framework"]),
                                         r["model"] + ", " if "model" in fields else "",
                                         r["precision"],
                                         n_of(r["nodes"], r["gpus"]), r["decode_why"])
           for _, r in rows.iterrows() if r["decode_why"]]
    return Table("Input pipeline (real data vs synthetic, img/s)", head, out, [
        "data efficiency = img/s with real data ÷ img/s synthetic, the cell otherwise the same; "
        "below {:.2f} the input pipeline, not the model, sets the pace (input-bound). data-only = "
        "the input pipeline alone, no training: its ceiling. Loader workers are per local worker "
        "(MXNet: the threads of its one iterator). Host CPU = CPU seconds of the job's processes "
        "÷ wall seconds of the timed region.".format(metrics.INPUT_BOUND)]
        + (["Decode other than the default (hardware decode where it works): " + " ".join(why)]
           if why else []) + _queues(rows), name="input_pipeline", labels=len(fields))


def _queues(rows: pd.DataFrame) -> List[str]:
    """The note on CUDA's hardware queues where a real cell ran with more than CUDA's default (a
    decode on the JPEG engines: docs/data.md), as its synthetic twin did not."""
    queues = sorted({int(q) for q in rows["cuda_connections"] if q is not None and q == q
                     and int(q) != CUDA_DEFAULT_CONNECTIONS})
    if not queues:
        return []
    return ["Real cells decoding on the JPEG engines ran with {} CUDA hardware queues "
            "(CUDA_DEVICE_MAX_CONNECTIONS; --option cuda_connections), their synthetic twins with "
            "CUDA's default of {}: with {} the step's stream shares a queue with the decode's and "
            "waits behind it (docs/data.md).".format(" or ".join(map(str, queues)),
                                                     CUDA_DEFAULT_CONNECTIONS,
                                                     CUDA_DEFAULT_CONNECTIONS)]
