"""Checks of what compare reads back from a campaign (a backend's result, a hand-edited or a
foreign one; machine.json): the type of every field and of every value the reports read inside
its objects (phases, telemetry, settings, accuracy), no NaN or infinity, no integer of more than
MAX_DIGITS digits and no nesting deeper than MAX_DEPTH anywhere, every number in its range and of
its sign, the spec inside it and its hash, the status agreeing with the figures, and the figures
agreeing with the result's own numbers (global batch × timed steps ÷ wall time, its windows);
other_machine says whether a result ran on the campaign's machine. A result that fails is
skipped by the store with one warning naming the file and the reason, never trusted and never
an internal error further on."""
import math
import re
import statistics
import typing
from dataclasses import fields
from typing import Any, Dict, List, Optional

from backends.contract import RunResult, RunSpec, SchemaError, window_sizes

MAX_DEPTH = 16  # objects and lists inside each other: a result needs 4
MAX_DIGITS = 19  # of an integer: a 64-bit one, the largest any writer of a campaign file makes
FIGURES = (1e-6, 1e9)  # images/sec: from one image in 11 days to a billion a second
LARGEST = 1e12  # any other number a report prints (watts, MiB, cores, seconds)
FIGURE_FIELDS = ("images_per_sec", "median_images_per_sec")
SPREAD_FIELDS = ("uncertainty", "jitter")  # in images/sec, >= 0
# the other numbers of a result: (lowest, highest, what it counts, whether lowest itself is out)
RANGES = {"wall_time_s": (0, 1e9, "seconds of the timed steps", True),
          "step_time_ms": (0, 1e12, "milliseconds a step", True),
          "timed_steps": (1, 1e9, "steps timed", False),
          "global_batch": (1, 2 ** 31, "images a step", False),
          "world_size": (1, 2 ** 20, "workers", False),
          "first_loss": (-LARGEST, LARGEST, "a loss", False),
          "final_loss": (-LARGEST, LARGEST, "a loss", False)}
# a spec's numbers beyond what RunSpec.validate checks (its lower bounds), so that no report
# multiplies or divides by an absurd one
SPEC_RANGES = {"batch_size": (1, 2 ** 20, "images a worker and step"),
               "image_size": (32, 2 ** 14, "pixels a side"), "steps": (1, 1e9, "timed steps"),
               "planned_steps": (1, 1e9, "timed steps planned"),
               "warmup_steps": (0, 1e9, "warm-up steps"), "windows": (1, 1e6, "timed windows"),
               "gpus": (1, 2 ** 20, "workers a node"), "nodes": (1, 2 ** 20, "machines"),
               "repeat": (0, 1e6, "the repeat's index"), "num_classes": (1, 1e7, "classes"),
               "max_epochs": (1, 1e6, "epochs"), "eval_every": (1, 1e6, "epochs")}
# figures the harness computes from the same numbers agree to rounding: within 1 %
TOLERANCE = 0.01
# the timed windows are the timed region less a device sync between them and a barrier at its
# end: they cover far more than a tenth of it in any run that timed something
WINDOWS_COVER = 0.1
# several workers also wait at that closing barrier for the slowest one (and on busy cores a
# barrier of tiny CPU test runs takes tens of milliseconds, longer than their windows): up to a
# second of the timed region outside the windows is then not held against the rule above
BARRIER_ALLOWANCE_S = 1.0
# the values inside free-form objects that the reports read, and what each must be
# (comparator.TELEMETRY and DATA_SETTINGS; a test keeps them in step)
READ: Dict[str, Dict[str, type]] = {
    "telemetry": {"samples": float, "power_avg_w": float, "util_avg_pct": float,
                  "mem_used_max_mib": float, "sm_clock_avg_mhz": float, "temp_max_c": float,
                  "host_cpu_cores": float},
    "settings": {"layout": str, "cpu_cores": float, "loader_workers": float, "data_pipeline": str,
                 "decode": str, "decode_why": str, "images_read": float, "corrupt_skipped": float,
                 "cuda_connections": float},
    # a time-to-accuracy run's (reporting/accuracy.py record, chart)
    "accuracy": {"run_start_ms": float, "run_stop_ms": float, "best": float, "epochs": float,
                 "epochs_to_target": float, "seed": float, "images_trained": float},
}
EVALS = ("epoch", "accuracy", "time_s")  # of each of accuracy.evals, numbers the chart draws
# Unix time in ms (1.8e12 now): every other read number ±LARGEST
BOUND = dict.fromkeys(("run_start_ms", "run_stop_ms"), 1e14)


def _ok(value: Any, tp: Any) -> bool:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Union:
        return any(_ok(value, a) for a in args)
    if tp is type(None):
        return value is None
    if origin is dict:
        return isinstance(value, dict) and all(_ok(v, args[1]) for v in value.values())
    if origin is list:
        return isinstance(value, list) and all(_ok(v, args[0]) for v in value)
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if tp is str:
        return isinstance(value, str)
    return True  # Any


def _name(tp: Any) -> str:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) is typing.Union:
        return " or ".join(_name(a) for a in args) + " or null"
    if typing.get_origin(tp) is list:
        return "a list of finite numbers" if args[0] is float else "a list"
    if typing.get_origin(tp) is dict and args[1] is float:
        return "an object of finite numbers"
    return {bool: "true/false", int: "an integer", float: "a finite number", str: "a string",
            dict: "an object"}.get(typing.get_origin(tp) or tp, str(tp))


def _shown(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def _check_fields(obj: Any, prefix: str) -> None:
    hints = typing.get_type_hints(type(obj))
    for f in fields(obj):
        value = getattr(obj, f.name)
        if not _ok(value, hints[f.name]):
            raise SchemaError("{}{} is {}, not {}".format(prefix, f.name, _shown(value),
                                                          _name(hints[f.name])))


class Huge:
    """An integer of more than MAX_DIGITS digits where a file was parsed (loading.parse_json):
    its digit count only, so that nothing can turn it into a float."""

    def __init__(self, digits: int):
        self.digits = digits


def plain(data: Any) -> None:
    """SchemaError for a NaN or infinity anywhere, an integer of more than MAX_DIGITS digits,
    or nesting deeper than MAX_DEPTH (walked without recursion: a file of 200,000 `[` must not
    take the reader down)."""
    stack = [(data, "", 0)]
    while stack:
        value, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise SchemaError("{} is nested deeper than {} levels".format(where, MAX_DEPTH))
        if isinstance(value, float) and not math.isfinite(value):
            raise SchemaError("{} is {}, not a finite number".format(where or "the file", value))
        if isinstance(value, Huge) or (isinstance(value, int) and abs(value) >= 10 ** MAX_DIGITS):
            raise SchemaError("{} is an integer of {} digits; no number in a campaign file has more "
                              "than {}".format(where or "the file", value.digits if isinstance(
                                  value, Huge) else len(str(abs(value))), MAX_DIGITS))
        if isinstance(value, dict):
            stack += [(v, "{}.{}".format(where, k) if where else str(k), depth + 1)
                      for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(v, "{}[{}]".format(where, i), depth + 1) for i, v in enumerate(value)]


def _check_value(value: Any, tp: type, where: str, bound: float = LARGEST) -> None:
    if value is not None and (not _ok(value, tp) or (tp is float and abs(value) > bound)):
        power = "1e{}".format(round(math.log10(bound)))  # 1e12, as the limits table writes it
        raise SchemaError("{} is {}, not {}".format(where, _shown(value), "a string" if tp is str
                                                    else "a number from -{0} to {0}".format(power)))


def _check_read(r: RunResult) -> None:
    """The values the reports read inside telemetry, settings and accuracy: numbers or text, or
    null; accuracy.evals a list of objects of numbers."""
    for name, wanted in READ.items():
        for key, tp in wanted.items():
            _check_value(getattr(r, name).get(key), tp, "{}.{}".format(name, key),
                         BOUND.get(key, LARGEST))
    evals = r.accuracy.get("evals")
    if evals is not None and not (isinstance(evals, list) and all(isinstance(e, dict) for e in evals)):
        raise SchemaError("accuracy.evals is {}, not a list of objects".format(_shown(evals)))
    for i, e in enumerate(evals or []):
        for key in EVALS:
            _check_value(e.get(key), float, "accuracy.evals[{}].{}".format(i, key))


def _check_figures(r: RunResult) -> None:
    low, high = FIGURES
    figures = [(n, getattr(r, n)) for n in FIGURE_FIELDS] + [
        ("window_images_per_sec[{}]".format(i), w) for i, w in enumerate(r.window_images_per_sec)]
    for name, value in figures:
        if value is not None and not low <= value <= high:
            raise SchemaError("{} {!r} is outside {:g} to {:g} images/sec: no run measures "
                              "that".format(name, value, low, high))
    for name in SPREAD_FIELDS:
        value = getattr(r, name)
        if value is not None and not 0 <= value <= high:
            raise SchemaError("{} {!r} is outside 0 to {:g} images/sec".format(name, value, high))


def _in_range(value: Any, name: str, low: float, high: float, what: str, above: bool) -> None:
    if value is not None and not ((low < value if above else low <= value) and value <= high):
        raise SchemaError("{} is {}, not from {:g} to {:g} ({})".format(name, _shown(value), low,
                                                                        high, what))


def _check_ranges(r: RunResult, spec: RunSpec) -> None:
    """Every number a report or the consistency check reads, of the right sign and bounded."""
    for name, (low, high, what, above) in RANGES.items():
        _in_range(getattr(r, name), name, low, high, what, above)
    for name, value in r.phases.items():
        _in_range(value, "phases." + name, 0, LARGEST, "a time in seconds since 1970", False)
    for name, (low, high, what) in SPEC_RANGES.items():
        _in_range(getattr(spec, name), "spec." + name, low, high, what, False)


def _near(value: float, expected: float) -> bool:
    return abs(value - expected) <= TOLERANCE * abs(expected)


def _check_consistent(r: RunResult, spec: RunSpec) -> None:
    """A throughput result's figures redone from its own numbers, as the harness computes them:
    images/sec = global batch × timed steps ÷ wall time, the median of its windows, and windows
    that fit inside the timed region (backends/harness.py measure). A result without a wall time
    (one of an earlier compare, a probe's record) has nothing to redo them from."""
    if r.status != "ok" or spec.kind != "throughput" or r.wall_time_s is None:
        return
    batch, steps, wall = spec.global_batch, spec.steps, r.wall_time_s
    if r.global_batch is not None and r.global_batch != batch:
        raise SchemaError("global_batch {} is not the spec's batch_size × workers ({} × {} = {})".format(
            r.global_batch, spec.batch_size, spec.world_size, batch))
    if r.timed_steps is not None and r.timed_steps != steps:
        raise SchemaError("timed_steps {} is not the spec's steps ({})".format(r.timed_steps, steps))
    if not _near(r.images_per_sec, batch * steps / wall):
        raise SchemaError("images_per_sec {:g} is not global_batch × timed_steps ÷ wall_time_s ({} × {} ÷ "
                          "{:.6g} s = {:.6g}) within {:g} %".format(r.images_per_sec, batch, steps, wall,
                                                                  batch * steps / wall, 100 * TOLERANCE))
    windows = r.window_images_per_sec
    if not windows:
        return
    sizes = window_sizes(steps, spec.windows)
    if len(windows) != len(sizes):
        raise SchemaError("{} windows, not the {} its spec times ({} steps in {} windows)".format(
            len(windows), len(sizes), steps, spec.windows))
    middle = statistics.median(windows)
    if r.median_images_per_sec is not None and not _near(r.median_images_per_sec, middle):
        raise SchemaError("median_images_per_sec {:g} is not the median of its windows ({:.6g}) within "
                          "{:g} %".format(r.median_images_per_sec, middle, 100 * TOLERANCE))
    inside = sum(batch * n / w for n, w in zip(sizes, windows))
    if inside > wall * (1 + TOLERANCE):
        raise SchemaError("its {} windows take {:.6g} s at the images/sec they state, longer than "
                          "wall_time_s ({:.6g} s) that holds them".format(len(sizes), inside, wall))
    allowance = BARRIER_ALLOWANCE_S if spec.world_size > 1 else 0.0
    if inside < wall * WINDOWS_COVER and wall - inside > allowance:
        raise SchemaError("its {} windows take {:.6g} s at the images/sec they state, less than a tenth "
                          "of wall_time_s ({:.6g} s): no timed region is mostly outside its "
                          "windows".format(len(sizes), inside, wall))


def result(r: RunResult) -> RunSpec:
    """The result's spec, checked; SchemaError saying what is wrong for a result that may not be
    trusted (its spec re-hashed: a spec edited after the run no longer matches its hash)."""
    plain({f.name: getattr(r, f.name) for f in fields(r)})
    _check_fields(r, "")
    _check_read(r)
    _check_figures(r)
    try:
        spec = RunSpec.from_dict(r.spec)
    except (TypeError, SchemaError) as exc:  # TypeError: a field the dataclass does not take
        raise SchemaError("spec: {}".format(exc)) from None
    _check_fields(spec, "spec.")
    try:
        spec.validate()
    except SchemaError as exc:
        raise SchemaError("spec: {}".format(exc)) from None
    _check_ranges(r, spec)
    if spec.run_id != r.run_id:
        raise SchemaError("run_id {} is not the run id of its spec ({})".format(r.run_id, spec.run_id))
    for where, stored in (("spec_hash", r.spec_hash), ("spec.spec_hash", r.spec.get("spec_hash"))):
        if stored is not None and stored != spec.spec_hash:
            raise SchemaError("{} {} is not the hash of its spec ({}): the spec was changed after "
                              "the run".format(where, stored if isinstance(stored, str) else _shown(stored),
                                             spec.spec_hash))
    if r.status == "ok" and (r.images_per_sec is None or r.images_per_sec <= 0):
        raise SchemaError("status ok needs a positive images_per_sec, not {!r}".format(
            r.images_per_sec))
    # not_converged: a time-to-accuracy run that trained to its last epoch, at a measured rate
    if r.status not in ("ok", "not_converged") and r.images_per_sec is not None:
        raise SchemaError("status {} with images_per_sec {}: a run that did not finish has no "
                          "figure".format(r.status, r.images_per_sec))
    _check_consistent(r, spec)
    return spec


# what the reports read of machine.json (machine_record.describe, fingerprint; diff, history,
# check, plan): each key, where present, of this type or null
MACHINE = {"hostname": str, "cpu_model": str, "cpu_count": int, "memory_gib": float,
           "cuda_driver_version": str, "compare_version": str, "host_python": str,
           "recorded_at": str}
MACHINE_GPU = {"name": str, "driver": str, "index": int, "memory_mib": float}
MACHINE_GIT = {"commit": str, "dirty": bool}


def _check_object(obj: Dict[str, Any], wanted: Dict[str, type], where: str) -> None:
    for key, tp in wanted.items():
        value = obj.get(key)
        if value is not None and not _ok(value, tp):
            raise SchemaError("{}{} is {}, not {}".format(where, key, _shown(value), _name(tp)))


def machine(record: Dict[str, Any]) -> None:
    """SchemaError saying what is wrong with a machine record (machine.json) that a report could
    not read: gpus a list of objects each naming its GPU, git an object, text where text is."""
    _check_object(record, MACHINE, "")
    gpus, git = record.get("gpus", []), record.get("git")
    if not isinstance(gpus, list):
        raise SchemaError("gpus is {}, not a list of objects".format(_shown(gpus)))
    for i, gpu in enumerate(gpus):
        if not isinstance(gpu, dict):
            raise SchemaError("gpus[{}] is {}, not an object".format(i, _shown(gpu)))
        if not isinstance(gpu.get("name"), str):
            raise SchemaError("gpus[{}].name is {}, not a string".format(
                i, "missing" if "name" not in gpu else _shown(gpu["name"])))
        _check_object(gpu, MACHINE_GPU, "gpus[{}].".format(i))
    if git is not None and not isinstance(git, dict):
        raise SchemaError("git is {}, not an object".format(_shown(git)))
    _check_object(git or {}, MACHINE_GIT, "git.")


def _words(text: str) -> List[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def _models(name: str) -> set:
    """The words of a GPU's name that name its model ('v100' of 'Tesla V100-PCIE-16GB', 'h200',
    '4090'), not its memory or board ('16gb', 'sxm2', 'pcie'): a generic name has none."""
    return {w for w in _words(name) if re.search(r"\d", w) and (re.search(r"[a-z]", w) or len(w) >= 3)
            and not re.fullmatch(r"\d+(gb|g|mb)|(sxm|hbm|gddr)\d+[a-z]*", w)}


def other_machine(device: Any, name: Optional[str], record: Dict[str, Any]) -> Optional[str]:
    """Why a result whose device is named `name` did not run on the machine of `record` (the
    campaign's machine.json), or None: on a CPU the machine's CPU model, word for word; on a GPU
    a model word of one of its GPUs. A name or record that names no model holds to nothing, nor
    does a Slurm cluster's record."""
    if not name or not record or record.get("slurm"):
        # a cluster's record is one compute node's: a partition may hold nodes of other models,
        # and the nonce alone ties a result to the campaign there
        return None
    if device == "cpu":
        cpu = record.get("cpu_model")
        if cpu and _words(cpu) != _words(name):
            return "it ran on {}, not on this campaign's machine (CPU {})".format(name, cpu)
        return None
    gpus = sorted({g.get("name") for g in record.get("gpus", []) if g.get("name")})
    held = set().union(*(_models(g) for g in gpus))
    if held and _models(name) and not held & _models(name):
        return "it ran on {}, not on this campaign's machine (GPUs {})".format(name, ", ".join(gpus))
    return None
