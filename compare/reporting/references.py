"""Published figures to hold a campaign against: the source studies, and the user's own CSVs.

Built in: compare/references/*.csv. The user's: any CSV path, or CSVs dropped into
$COMPARE_CACHE/references/ (default ~/.cache/compare/references/). Columns: `precision` and `gpus`
(required), `images_per_sec` and/or `speedup_published` (at least one), and optionally `framework`
(a name or alias; absent = any framework), `batch_size`, `image_size`, `nodes` (absent = one node;
`gpus` is per node), `model` (a network of `compare list models`, e.g. vgg16 or VGG-16; absent =
every row is ResNet-50's; rows match cells of the same network), `data` (`synthetic` or `real`:
what the figure was measured on; absent = synthetic, as tf_cnn_benchmarks runs by default and the
seed studies report; `compare check` holds a cell only against figures of its own data mode),
`gpu`/`system` (shown), and `tolerance` (`5%` or `0.05`: how far below the figure `compare check`
still passes). Matching ignores the other columns the reference does not have.
"""
import csv
import io
import math
import os
import re
from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence, Tuple

import pandas as pd

from backends.contract import DEFAULT_MODEL, PRECISIONS, SchemaError

from .. import envs, frameworks, loading, validate
from ..errors import UserError
from . import tables
from .intervals import pm
from .tables import Table

BUILTIN = Path(__file__).resolve().parent.parent / "references"
REQUIRED = ("precision", "gpus")
FIGURES = ("images_per_sec", "speedup_published")
OPTIONAL_KEYS = ("framework", "batch_size", "image_size")
DATA_MODES = ("synthetic", "real")  # a reference's `data`: a figure of training, never data-only
MAX_REFERENCE_BYTES = 16 * 2 ** 20  # a reference is a table of published figures: a few KB
FIGURE_RANGE = (validate.FIGURES[0], validate.FIGURES[1])  # images/sec or a speedup, as results'


def parse_tolerance(text, where: str = "--tolerance", on: str = "") -> float:
    """'5%' or '0.05' -> 0.05; anything else (or 100 % and more) is a UserError (`on`: where in
    a file, e.g. ' on line 3', said after the value as for the reference's other columns)."""
    raw = str(text).strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        value = None
    if value is None or not 0 <= value < 1:  # nan fails it too
        raise UserError("{} {!r}{}: give a percentage from 0% to under 100% (e.g. 5%) or a fraction "
                        "(e.g. 0.05)".format(where, raw, on))
    return value


def user_dir() -> Path:
    return envs.cache_dir() / "references"


def available() -> Dict[str, Path]:
    """name -> CSV path: the built-in references, then the user's (a built-in name wins)."""
    out = {p.stem: p for p in sorted(BUILTIN.glob("*.csv"))}
    if user_dir().is_dir():
        for p in sorted(user_dir().glob("*.csv")):
            out.setdefault(p.stem, p)
    return out


def resolve(name_or_path: str) -> Path:
    refs = available()
    if name_or_path in refs:
        return refs[name_or_path]
    if not name_or_path.strip():  # Path('') is the current folder
        raise UserError("--reference is empty; give the path of a CSV file, or choose from {}".format(
            ", ".join(refs)))
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return path
    # a path (a folder, a file that is not there) is said as one; a bare word, as a name
    why = "is a folder, not a CSV file" if path.is_dir() else "is not a regular file" if \
        path.exists() else "no such file" if "/" in name_or_path or os.sep in name_or_path or \
        name_or_path.lower().endswith(".csv") else None
    if why:
        raise UserError("--reference {}: {}; give the path of a CSV file, or choose from {}".format(
            name_or_path, why, ", ".join(refs)))
    raise UserError("unknown reference {!r}; choose from {}, or give the path of a CSV file".format(
        name_or_path, ", ".join(refs)))


def _read(path: Path) -> pd.DataFrame:
    """The CSV's cells as text, through the one loader of files compare did not write (a
    regular file of bounded size): every value is converted and checked here, never guessed."""
    try:
        text = loading.read_bounded(path, MAX_REFERENCE_BYTES).decode("utf-8")
        _check_shape(path, text)
        return pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, index_col=False)
    except (ValueError, SchemaError, csv.Error) as exc:  # UnicodeDecodeError and pandas' ParserError too
        raise UserError("reference {}: not a readable CSV ({})".format(path, exc)) from None


def _check_shape(path: Path, text: str) -> None:
    """One line where the header names a column twice, or a row has more or fewer fields than
    the header: pandas reads a first row of one more as having an index column, every value
    moved one column left, and one of fewer as its last columns empty."""
    rows = csv.reader(io.StringIO(text))
    header = next(rows, [])
    twice = [c for i, c in enumerate(header) if c in header[:i]]
    if twice:  # pandas keeps the second as NAME.1, never read
        raise UserError("reference {}: its header names {} twice; give each column once".format(
            path, twice[0]))
    for row in rows:
        if row and len(row) != len(header):
            raise UserError("reference {}: line {} has {} field{}, its header {}; give one value per "
                            "column (an empty one: nothing between two commas)".format(
                                path, rows.line_num, len(row), "" if len(row) == 1 else "s",
                                len(header)))


def _column(df: pd.DataFrame, name: str, convert: Callable[[str], Any], why: str,
            path: Path, required: bool = False) -> List[Any]:
    """df[name] converted cell by cell (an empty cell is None, unless required: then it does not
    convert); UserError naming the file, the value and its line (the header is line 1) for the
    first that does not convert."""
    out = []
    for i, text in enumerate(df[name]):
        text = text.strip()
        try:
            out.append(None if text == "" and not required else convert(text))
        except ValueError:
            raise UserError("reference {}: {} {!r} on line {} {}".format(
                path, name, text, i + 2, why)) from None
    return out


def _count(text: str) -> int:
    value = float(text)
    if not (math.isfinite(value) and value >= 1 and value == int(value) and value <= 2 ** 31):
        raise ValueError(text)
    return int(value)


def _positive(text: str) -> float:
    value = float(text)  # '1e400' is inf, 'nan' nan: neither passes
    if not FIGURE_RANGE[0] <= value <= FIGURE_RANGE[1]:
        raise ValueError(text)
    return value


def _precision(text: str) -> str:
    if text.lower() not in PRECISIONS:
        raise ValueError(text)
    return text.lower()


def _data_mode(text: str) -> str:
    if text.lower() not in DATA_MODES:
        raise ValueError(text)
    return text.lower()


def _framework(path: Path, df: pd.DataFrame) -> List[str]:
    out = []
    for i, text in enumerate(df.framework):
        if not text.strip():
            raise UserError("reference {}: framework is empty on line {}; give one of {}, or leave the "
                            "column out (any framework)".format(path, i + 2, frameworks.choices()))
        try:
            out.append(frameworks.get(text.strip()).name)
        except UserError as exc:
            raise UserError("reference {}: framework {!r} on line {}: {}".format(
                path, text.strip(), i + 2, exc)) from None
    return out


def load(name_or_path: str) -> Tuple[str, pd.DataFrame]:
    """(name, rows) of a reference, checked and normalised (framework names canonical, counts
    whole numbers, figures finite and positive); a UserError naming the file and line of the
    first value that is not."""
    path = resolve(name_or_path)
    df = _read(path)
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing or not any(c in df.columns for c in FIGURES):
        raise UserError("reference {}: needs columns {} and one of {}; it has {}".format(
            path, ", ".join(REQUIRED), ", ".join(FIGURES), ", ".join(df.columns)))
    df = df.assign(gpus=_column(df, "gpus", _count, "is not a GPU count; give whole numbers >= 1",
                                path, required=True),  # a precision no cell has matched none, unsaid
                   precision=_column(df, "precision", _precision, "is not a precision; give {}".format(
                       ", ".join(PRECISIONS[:-1]) + " or " + PRECISIONS[-1]), path, required=True))
    for name in ("nodes", "batch_size", "image_size"):
        if name in df.columns:  # an empty cell matches no cell, as before
            df[name] = _column(df, name, _count, "is not a count; give a whole number >= 1", path)
    figures = {c: _column(df, c, _positive, "is not a figure; give a number from {:g} to {:g}".format(
        *FIGURE_RANGE), path) for c in FIGURES if c in df.columns}
    for i, row in enumerate(zip(*figures.values())):
        if all(x is None for x in row):
            raise UserError("reference {}: line {} has no figure ({}); give one".format(
                path, i + 2, ", ".join(figures)))
    df = df.assign(**figures)
    # 'ResNet-50' -> 'resnet50', as `--model` names it; a reference without the column is ResNet-50's
    df = df.assign(model=df.model.astype(str).str.lower().str.replace("-", "").str.strip()
                   if "model" in df.columns else DEFAULT_MODEL)
    if "framework" in df.columns:
        df = df.assign(framework=_framework(path, df))
    if "data" in df.columns:
        df["data"] = _column(df, "data", _data_mode, "is not a data mode; give {}".format(
            " or ".join(DATA_MODES)), path, required=True)
    if "tolerance" in df.columns:
        df = df.assign(tolerance=[None if not t.strip() else parse_tolerance(
            t, "reference {}: tolerance".format(path), " on line {}".format(i + 2))
            for i, t in enumerate(df.tolerance)])
    for name in ("gpu", "system"):  # shown: an empty cell names nothing
        if name in df.columns:
            df[name] = [t.strip() or None for t in df[name]]
    _once(path, df)
    df = df if "data" in df.columns else df.assign(data="synthetic")
    return path.stem, df.reset_index(drop=True).astype(object)


def distinct(loaded: Sequence[Tuple[Path, pd.DataFrame]]) -> List[Tuple[str, pd.DataFrame]]:
    """(name, rows) of each of several references (distinct files): its file's stem, or where
    two share one, the stem after as many of its folders as tell them apart ('monday/ref' and
    'tuesday/ref'): each table has its own title and file."""
    def name(path: Path, depth: int) -> str:
        return "/".join(path.parts[max(0, len(path.parts) - 1 - depth):-1] + (path.stem,))
    out = []
    for path, df in loaded:
        depth = 0
        while depth < len(path.parts) and sum(name(p, depth) == name(path, depth)
                                              for p, _ in loaded) > 1:
            depth += 1
        out.append((name(path, depth), df))
    return out


def _once(path: Path, df: pd.DataFrame) -> None:
    """One line naming the first two rows that give the same cell (network, precision, count,
    and the optional keys, GPU model and system where given): a cell would pass against one and
    fall short against the other."""
    keys = [k for k in ("model", "precision", "gpus", "nodes", "data") + OPTIONAL_KEYS +
            ("gpu", "system") if k in df.columns]
    seen: Dict[tuple, int] = {}
    for line, row in enumerate(df[keys].itertuples(index=False), start=2):  # line 1: the header
        cell = tuple(None if pd.isna(v) else v for v in row)
        if cell in seen:
            raise UserError("reference {}: lines {} and {} give the same cell ({}); give each cell "
                            "once".format(path, seen[cell], line, ", ".join(
                                "{} {}".format(k, v) for k, v in zip(keys, cell) if v is not None)))
        seen[cell] = line


def describe(name: str, df: pd.DataFrame) -> str:
    where = sorted({g for g in df.gpu if isinstance(g, str)}) if "gpu" in df.columns else []
    where = where or ["?"]  # an empty gpu cell names no GPU
    figures = [c for c in FIGURES if c in df.columns]
    models = ", ".join("{} {}".format(m, n) for m, n in df.model.value_counts(sort=False).items())
    return "{:<32} {:>4} {:<4} ({})  gpu: {:<12} figures: {}".format(
        name, len(df), "row" if len(df) == 1 else "rows", models, ", ".join(map(str, where)),
        ", ".join(figures))


def _matches(ref: pd.DataFrame, cell: pd.Series) -> pd.DataFrame:
    m = (ref.precision == cell.precision) & (ref.gpus.astype(int) == int(cell.gpus))
    m &= ref.model == cell.model
    # an empty nodes cell matches no cell, as an empty batch or image size does (no astype(int))
    m &= (ref.nodes == int(cell.nodes)) if "nodes" in ref.columns else int(cell.nodes) == 1
    for key in OPTIONAL_KEYS:
        if key in ref.columns:
            m &= ref[key] == cell[key]
    return ref[m]


def unmatched(cells: pd.DataFrame, ref: pd.DataFrame) -> str:
    """Which fields keep every cell from every reference row: 'N: the campaign has 1, 2, the
    reference 8'; the fields whose values the two share nowhere, or, where each field alone
    has a value in common, that no row has all of one cell's."""
    if cells.empty:  # a time-to-accuracy campaign: its runs are not throughput cells
        return "the campaign has no throughput cell (time-to-accuracy runs are not held against " \
            "published images/sec)"
    if ref.empty:  # a header alone: no value of any field to share
        return "the reference has no rows"
    keys = [("model", "network"), ("precision", "precision"), ("gpus", "N")]
    keys += [(k, "nodes") for k in ("nodes",) if k in ref.columns]
    keys += [(k, k.replace("_size", " size").replace("_", " ")) for k in OPTIONAL_KEYS if k in ref.columns]
    said = []
    for key, name in keys:
        text = (lambda v: str(int(v))) if key in ("gpus", "nodes") else str
        ours, theirs = {text(v) for v in cells[key]}, {text(v) for v in ref[key].dropna()}
        if theirs and not ours & theirs:
            said.append("{}: the campaign has {}, the reference {}".format(
                name, ", ".join(sorted(ours)), ", ".join(sorted(theirs))))
    return "; ".join(said) or "each field has a value in both, but no row has all of one cell's"


def _figure(p, column: str):
    x = None if p is None else p.get(column)
    return None if x is None or pd.isna(x) else float(x)


def _versus(measured, half_width, published):
    """(measured ÷ published, its half width): a published figure carries no spread."""
    if measured is None or published is None or published <= 0:
        return None, None
    return measured / published, None if half_width is None else half_width / published


def compare(cells: pd.DataFrame, ref: pd.DataFrame) -> pd.DataFrame:
    """Each measured cell beside the published figure(s) it matches, with measured ÷ published
    and the half width of its 95 % interval."""
    rows = []
    for _, c in cells.iterrows():
        found = _matches(ref, c)
        for _, p in (found.iterrows() if len(found) else [(None, None)]):
            pub_ips, pub_sp = _figure(p, "images_per_sec"), _figure(p, "speedup_published")
            r, r_hw = _versus(c.images_per_sec, c.images_per_sec_ci95, pub_ips)
            s, s_hw = _versus(c.speedup, c.speedup_ci95, pub_sp)
            rows.append({"framework": c.framework, "mode": c["mode"], "data_mode": c.data_mode,
                         "model": c.model, "precision": c.precision,
                         "batch_size": c.batch_size, "image_size": c.image_size, "nodes": c.nodes,
                         "gpus": c.gpus, "status": c.status, "reason": c.reason,
                         "repeats": c.repeats, "runs": c.runs, "failed_runs": c.failed_runs,
                         "failed_statuses": c.failed_statuses,
                         "images_per_sec": c.images_per_sec, "published_images_per_sec": pub_ips,
                         "ratio": r, "ratio_ci95": r_hw,
                         "speedup": c.speedup, "published_speedup": pub_sp,
                         "speedup_ratio": s, "speedup_ratio_ci95": s_hw,
                         "tolerance": _figure(p, "tolerance"),
                         "reference_data": None if p is None else p.get("data"),
                         "reference_gpu": None if p is None or pd.isna(p.get("gpu")) else p.get("gpu")})
    return pd.DataFrame(rows).astype(object).where(lambda d: d.notna(), None)


def crossed_data(r) -> bool:
    """Whether a compared row's reference figure is of other data than its cell's (check: its
    images/sec are not comparable; a speedup is shown across data, and says so)."""
    return r.reference_data is not None and r.data_mode != r.reference_data


def _across_data(compared: pd.DataFrame) -> List[str]:
    """The note under the table where some reference figures are of other data than the cells'."""
    if not any(crossed_data(r) for _, r in compared.iterrows()):
        return []
    theirs = sorted({d for d in compared.reference_data if d is not None})
    ours = sorted(set(compared.data_mode))
    return ["The reference's figures are of {} data, these cells' of {}: images/sec are not held "
            "against figures of other data (\"other data\"); speedups, ratios on one machine, "
            "are shown across data.".format("/".join(theirs), "/".join(ours))]


def table(name: str, compared: pd.DataFrame) -> Table:
    """The report section 'Measured versus published'."""
    def num(x, fmt):
        return fmt.format(x) if x is not None else "—"
    gpu = sorted({str(g) for g in compared.reference_gpu if g is not None})
    # a model, image or data column where the campaign has several; N as nodes×GPUs per node
    fields = tables.shown(compared, ["framework", "model", "mode", "precision", "batch_size",
                                     "image_size", "data_mode", "N"], tables.OPTIONAL_IMAGE)
    rows = [tables.label(r, fields) + [
             num(r.images_per_sec, "{:.2f}") if r.status == "ok" else r.status,
             num(r.published_images_per_sec, "{:.2f}"),
             "other data" if crossed_data(r) and r.published_images_per_sec is not None else
             pm(r.ratio, r.ratio_ci95, "{:.2f}×", "{:.2f}", missing="—"), num(r.speedup, "{:.3f}"),
             num(r.published_speedup, "{:.3f}"),
             pm(r.speedup_ratio, r.speedup_ratio_ci95, "{:.2f}×", "{:.2f}", missing="—")]
            for _, r in compared.iterrows()]
    # cells, not rows: a cell that two reference rows match (two GPUs' figures) is one cell
    keys = ["framework", "mode", "data_mode", "model", "precision", "batch_size", "image_size",
            "nodes", "gpus"]
    measured = {tuple(r[k] for k in keys) for _, r in compared.iterrows()}
    matched = len({tuple(r[k] for k in keys) for _, r in compared.iterrows()
                   if r.published_images_per_sec is not None or r.published_speedup is not None})
    where = " ({})".format(", ".join(gpu)) if gpu else ""
    return Table("Measured versus published: {}{}".format(name, where),
                 tables.heading(fields) + ["img/s", "published", "ratio", "speedup",
                  "published speedup", "ratio"], rows,
                 ["ratio = measured ÷ published (± from the measured side; a published figure has "
                  "no spread). {} of {} measured cells have a published figure (matched on "
                  "network, precision and N, and on framework, batch and image size where the reference has "
                  "them).".format(matched, len(measured))] + _across_data(compared),
                 name="reference_" + re.sub(r"[^A-Za-z0-9_.-]", "_", name))  # monday/ref: a file
