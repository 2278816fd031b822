"""What `compare run` does where a flag is not given: the study the seeds made, sized to the
machine. Pure functions of the machine record (its GPUs and their memory) and the device; one
place. Each returns the value and a sentence saying why, which the campaign keeps and the report
prints ("Defaults").

GPU counts. The seeds measured two ladders: 1, 2, 4, 8 GPUs (seed 000, tf_cnn_benchmarks on RTX
A6000s) and 1, 2, 3 (seed 001, a Dell R740 with 3 V100s). Each ladder is cut at the GPUs present
and the one that reaches the most GPUs is run (the first on a tie): 1 on one GPU, 1, 2 on two,
1, 2, 3 on three, 1, 2, 4 on four to seven, 1, 2, 4, 8 on eight or more. A CPU runs 1 worker.

Precisions. fp32 and fp16 on GPUs (the seeds' pair: speedup at both, and the FP16 gain); fp32 on a
CPU, which has no fp16 hardware.

Batch. Per GPU, the batch that fills the device: an entry of BATCHES (measured: where is said),
else the rule `batch_rule`: the largest batch seed 000 ran for the network at both fp32 and fp16
on its 48 GB A6000 (the largest that fit there, for tf_cnn_benchmarks), scaled by the GPU's
memory ÷ 48 GiB and rounded down to a power of two, within 32…2048; a GPU of unknown memory
(`--plan-gpus`) runs 256. An image larger than the network's native size divides it by the
pixel ratio. On a CPU: 32 (the README's study). One batch serves both precisions, since the
FP16 gain divides cells of the same batch.

Where a tuned cell's batch search starts. Without --batch-search, at fp16 and bf16, at the
entry's `tuned` batch where one is measured (the search then probes it and stops at the search's
maximum: one compile instead of one per doubling, each of 10-78 s on an H200), else at the
default batch. With --batch-search the user asked for a search: it starts at the default batch.

Steps. On GPUs at a batch above 256 the timed steps cover at least the 12,800 images every
earlier figure timed (50 steps of 256): ceil(12,800 ÷ batch) rounded up to the windows, at least
10; warm-up 5 steps (compilation and autotuning happen in the first). Elsewhere 50 and 10. A
tuned cell whose search starts at a measured batch takes the steps of that batch by the same rule
(at 1024: 15 and 5, not the 50 and 10 of the default cells at 256, which timed 4x the images the
rule asks for: ~5 s of each tuned cell on an H200); should its search end below the start, the
cell times as many images as planned (backends/batchprobe.py). A resumed campaign keeps the steps
it resolved when it began (its settings), whatever networks or batches a later session adds: its
cells go on measuring what they measured, and --resume holds them.
"""
import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

CPU_BATCH = 32  # the README's CPU study; cell ids of CPU campaigns stay what they were
UNKNOWN_MEMORY_BATCH = 256  # the batch of every earlier H200 figure
SEED_MEMORY_GIB = 48.0  # RTX A6000 (seed 000)
BATCH_RANGE = (32, 2048)
STEPS = (50, 10)  # timed and warm-up steps of every cell at batch 256 or less
TIMED_IMAGES = 50 * 256  # what 50 steps of batch 256 time
SEED_LADDERS = (("seed 000 (tf_cnn_benchmarks, RTX A6000)", (1, 2, 4, 8)),
                ("seed 001 (Dell R740, 3x V100)", (1, 2, 3)))
SEED_CSV = Path(__file__).parent / "references" / "a6000_tf_cnn_benchmarks.csv"
MEMORY_MATCH = 0.05  # an entry measured on a GPU within 5 % of this one's memory applies


@dataclass(frozen=True)
class Entry:
    """A measured filling batch: `model` on a GPU of `memory_gib` (nominal) ran at `batch`."""
    model: str
    memory_gib: float
    batch: int
    measured: str  # where the measurement is written down
    pending: str = ""  # what it does not cover yet (and what measures it)
    tuned: int = 0  # where a tuned search starts at fp16/bf16 (0: at `batch`)
    tuned_measured: str = ""  # where that is written down


BATCHES = (
    # 1024 fills an H200 best at fp16 (every tuned search of 64…1024 chose it: PyTorch fp16 7,969,
    # bf16 8,110; JAX fp16 8,267 img/s), but one batch serves both precisions, and PyTorch's fp32
    # cell at 1024 was still in its first step (cuDNN's autotuning) after 3 min 41 s
    # (bench/tuned_gpu.sh noflags, one H200, 2026-12-02): the defaults take 256, where fp32 is
    # measured (1,059 img/s, first step 57 s) beside fp16 (6,113) and bf16 (4,698). 2048 fits an
    # H200 and is not faster (tuned JAX fp16: b1024 8,231, b2048 8,184 img/s, 2026-12-03)
    Entry("resnet50", 141, 256, "one H200, 2026-12-02 (BENCHMARKS.md): fp32 1,059, fp16 6,113 "
          "img/s at 256; fp32 at 1024 spent over 3.5 min in its first step",
          "fp16 fills more at 1024 (--batch-size 1024 or --mode tuned)",
          # tuned searches of 256...1024 on one H200: JAX fp16 chose 1024 every time (7,983-8,267
          # img/s; 2048 no faster), PyTorch fp16 and bf16 chose 1024 on 12-02 (7,969, 8,110) and
          # 512 on 12-03 (bf16 b1024 7,084 against b512 7,814; fp16 stopped at 512 within the
          # probes' noise); each cell's probes cost 112-125 s of compiles (b1024's alone 69-78 s)
          tuned=1024, tuned_measured="one H200, 2026-12-02/03 (BENCHMARKS.md): most searches of "
          "256-1024 chose 1024 (JAX fp16 8,074-8,267, PyTorch bf16 8,110 img/s); the probes below "
          "it cost 30-60 s of compiles per cell"),
)
HALF = ("fp16", "bf16")  # the precisions a tuned entry covers


def gpu_memory_gib(machine: Dict[str, Any]) -> Optional[float]:
    """The smallest GPU's memory in GiB (nvidia-smi's memory.total), None when not recorded."""
    sizes = [g.get("memory_mib") for g in machine.get("gpus") or []]
    return min(sizes) / 1024.0 if sizes and all(sizes) else None


def gpu_counts(machine: Dict[str, Any], device: str) -> Tuple[List[int], str]:
    present = len(machine.get("gpus") or [])
    if device != "cuda" or not present:
        return [1], "on a CPU, N is worker processes sharing the cores"
    name, ladder = max(((n, [c for c in lad if c <= present]) for n, lad in SEED_LADDERS),
                       key=lambda x: max(x[1]))  # max() keeps the first of a tie
    return ladder, "every GPU count the seeds report up to the {} GPU{} present ({})".format(
        present, "s" if present > 1 else "", name)


def precisions(device: str) -> Tuple[List[str], str]:
    if device == "cuda":  # the report reads "fp32, fp16 (WHY)": WHY does not name them again
        return ["fp32", "fp16"], "the seeds' pair: speedup at each, FP16 gain"
    return ["fp32"], "a CPU has no fp16 hardware"


def _pow2_floor(x: float) -> int:
    return 2 ** int(math.floor(math.log2(max(x, 1.0))))


def seed_batches() -> Dict[str, int]:
    """model -> the largest batch seed 000 ran at both fp32 and fp16 on its 48 GB A6000."""
    largest: Dict[Tuple[str, str], int] = {}
    with open(str(SEED_CSV), newline="") as f:
        for row in csv.DictReader(f):
            key = (row["model"], row["precision"])
            largest[key] = max(largest.get(key, 0), int(row["batch_size"]))
    models = {m for m, _ in largest}
    return {m: min(largest.get((m, p), 0) for p in ("fp32", "fp16")) for m in models
            if all((m, p) in largest for p in ("fp32", "fp16"))}


def batch_rule(model: str, memory_gib: float) -> Optional[int]:
    """The seed's largest batch for `model` scaled to `memory_gib`, a power of two in range."""
    seed = seed_batches().get(model)
    if seed is None:
        return None
    low, high = BATCH_RANGE
    return max(low, min(high, _pow2_floor(seed * memory_gib / SEED_MEMORY_GIB)))


def measured(model: str, memory_gib: float) -> Optional[Entry]:
    return next((e for e in BATCHES if e.model == model
                 and abs(memory_gib - e.memory_gib) <= MEMORY_MATCH * e.memory_gib), None)


def batch(model: str, machine: Dict[str, Any], device: str, image_size: Optional[int] = None,
          native: Optional[int] = None) -> Tuple[int, str]:
    """The per-GPU batch of `model` at defaults here, and why."""
    if device != "cuda":
        return CPU_BATCH, "the README's CPU study"
    memory = gpu_memory_gib(machine)
    entry = measured(model, memory) if memory else None
    rule = batch_rule(model, memory) if memory else None
    if entry is not None:
        value, why = entry.batch, "{} on {:.0f} GiB: measured, {}{}".format(
            model, memory, entry.measured, "; not yet: " + entry.pending if entry.pending else "")
    elif rule is not None:
        value, why = rule, ("{} on {:.0f} GiB: not measured; the rule (seed 000's largest batch "
                            "on 48 GB, {}, × {:.0f}/48, a power of two)".format(
                                model, memory, seed_batches()[model], memory))
    else:
        value, why = UNKNOWN_MEMORY_BATCH, "{}: the GPUs' memory is not known".format(model)
    if image_size and native and image_size > native:  # more pixels per image: fewer images
        value = max(1, _pow2_floor(value * (native / image_size) ** 2))
        why += "; at {} px instead of {}: {}".format(image_size, native, value)
    return value, why


def steps(batches: Sequence[int], device: str, windows: int) -> Tuple[int, int, str]:
    """(timed steps, warm-up steps, why) for a study of these per-GPU batches."""
    smallest = min(batches) if batches else CPU_BATCH
    if device != "cuda" or smallest <= 256:
        return STEPS + ("{} timed steps after {} warm-up".format(*STEPS),)
    n = max(10, math.ceil(TIMED_IMAGES / smallest))
    n = windows * math.ceil(n / windows)
    return n, 5, ("{} timed steps after 5 warm-up: at batch {} they time at least {:,} images, as "
                  "50 steps of 256 did".format(n, smallest, TIMED_IMAGES))


def search_starts(models: Sequence[str], machine: Dict[str, Any], device: str,
                  precisions: Sequence[str]) -> Tuple[Dict[Tuple[str, str], int], str]:
    """{(model, precision): where its tuned search starts} for the measured entries here (the
    others start at the default batch), and the sentence the report prints (empty: none)."""
    memory = gpu_memory_gib(machine) if device == "cuda" else None
    starts: Dict[Tuple[str, str], int] = {}
    words = []
    for model in models:
        entry = measured(model, memory) if memory else None
        if entry is None or not entry.tuned:
            continue
        half = [p for p in precisions if p in HALF]
        starts.update({(model, p): entry.tuned for p in half})
        if half:
            words.append("{} at {} starts at {} on {:.0f} GiB: measured, {}".format(
                model, "/".join(half), entry.tuned, memory, entry.tuned_measured))
    return starts, "; ".join(words)


def _tuned_steps(out: Dict[str, Any], said: Dict[str, str], device: str, windows: int) -> None:
    """The steps of the tuned cells whose search starts at a measured batch, by steps()' rule
    at that batch, into out["search_steps"] ({(model, precision): (steps, warm-up)}) and said."""
    words = {}
    for key, start in out["search_starts"].items():
        n, warm, why = steps([start], device, windows)
        if (n, warm) != (out["steps"] or STEPS[0], out["warmup"] or STEPS[1]):
            out["search_steps"][key] = (n, warm)
            words[why] = None
    if words:
        said["steps"] = "; ".join([said.get("steps", steps([256], device, windows)[2])] + [
            "tuned cells from their search's start: " + w for w in words])


def native_size(model: str) -> Optional[int]:
    from backends.contract.shared import networks
    try:
        return networks.get(model).native
    except (KeyError, ValueError):
        return None


# how the report names each setting
WORDS = {"gpus": "GPU counts", "precision": "precisions", "batch_size": "batch", "steps": "steps",
         "batch_search": "tuned batch search"}


def lines(said: Dict[str, str]) -> List[str]:
    """The report's words for the settings a campaign ran at their defaults."""
    return ["{}: {}".format(WORDS.get(k, k), v) for k, v in said.items()]


def fill(machine: Dict[str, Any], device: str, study, held: Optional[Tuple[int, int]] = None
         ) -> Tuple[Dict[str, Any], Dict[str, int], Dict[str, str]]:
    """The study's gpus, precision, steps and warmup with each one not given (None) at its default
    here: (those four and `search_starts`, each network's default batch, {setting: why} for the
    defaults used). Explicit flags win; the batch of an auto cell starts at its network's default
    batch, or at a measured tuned entry where --batch-search is not given. `held`: the (timed,
    warm-up) steps a resumed campaign resolved, which it keeps where they were not given."""
    out = {k: getattr(study, k) for k in ("gpus", "precision", "steps", "warmup")}
    said: Dict[str, str] = {}
    batches = {m: batch(m, machine, device, study.image_size, native_size(m)) for m in study.model}
    for key, (values, why) in (("gpus", gpu_counts(machine, device)), ("precision", precisions(device))):
        if out[key] is None:
            out[key] = tuple(values)
            said[key] = "{} ({})".format(", ".join(str(v) for v in values), why)
    if study.batch_size is None:  # the matrix takes each network's own
        unit = "GPU" if device == "cuda" else "worker"
        said["batch_size"] = "; ".join("{} per {} ({})".format(b, unit, why)
                                       for b, why in batches.values())
        if study.steps is None and study.warmup is None and not study.quick:
            n, warm, why = steps([b for b, _ in batches.values()], device, study.windows)
            if (n, warm) != STEPS:
                out["steps"], out["warmup"] = n, warm
                said["steps"] = why
    if held and study.steps is None and study.warmup is None and not study.quick and \
            tuple(held) != (out["steps"] or STEPS[0], out["warmup"] or STEPS[1]):
        out["steps"], out["warmup"] = held
        said["steps"] = "{} timed steps after {} warm-up: the campaign's, as they resolved when it " \
            "began (--resume holds them)".format(*held)
    out["search_starts"], out["search_steps"] = {}, {}
    if study.batch_search is None and "tuned" in study.mode:
        out["search_starts"], why = search_starts(study.model, machine, device, out["precision"])
        if why:
            said["batch_search"] = why
        if study.steps is None and study.warmup is None and not study.quick:
            _tuned_steps(out, said, device, study.windows)
    return out, {m: b for m, (b, _) in batches.items()}, said
