"""The tables of bench/tuned_gpu.sh, from the campaigns it left in one folder:

    python3 bench/tuned_summary.py results/tuned-35            # every table
    python3 bench/tuned_summary.py results/tuned-35 --chosen   # fw:precision:batch:steps:warm-up of the
                                                               # study's tuned cells (the fresh stage)
    python3 bench/tuned_summary.py results/tuned-35 --compile  # the compile stage's table

Each campaign's wall time against the ETA its plan printed before the first cell; the tuned
cells with their probes, chosen batch and search seconds; the fresh-process runs of the same
cells against them (ratio with its 95 % interval: within noise or not); fp32/fp16 and the gain of
the no-flag study; JAX against the plain Flax loop per precision; the 2048 probes; the candidates.
"""
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from compare.reporting import intervals, timeline  # noqa: E402
from compare.store import Campaign  # noqa: E402


def results(folder):
    try:
        return Campaign.open(folder).results()[0]
    except Exception:  # a campaign a stopped stage left half-made: nothing to show
        return []


def estimate(folder):
    """The wall time the plan printed before the first cell (its .err), in seconds."""
    try:
        text = open(folder + ".err").read()
    except OSError:
        return None
    found = re.search(r"^estimate: ([0-9:]+) wall", text, re.M)
    if not found:
        return None
    parts = [int(x) for x in found.group(1).split(":")]
    return sum(v * 60 ** i for i, v in enumerate(reversed(parts)))


def est(rs):
    return intervals.cell([r.images_per_sec for r in rs], [r.window_images_per_sec for r in rs],
                          [r.uncertainty for r in rs])


def fig(r):
    e = est([r])
    return "{:,.0f} ±{:,.0f}".format(e.value, e.half_width() or 0) if r.status == "ok" else r.status


def chosen(camp):
    for r in results(os.path.join(camp, "study")):
        if r.spec.get("mode") == "tuned" and r.status == "ok":
            print("{}:{}:{}:{}:{}".format(r.spec["framework"], r.spec["precision"],
                                          r.spec["batch_size"], r.spec["steps"],
                                          r.spec["warmup_steps"]))


def walls(camp):
    print("campaign         runs   wall      ETA printed  ETA / wall")
    for folder in sorted(glob.glob(os.path.join(camp, "*", "campaign.json"))):
        folder = os.path.dirname(folder)
        study = timeline.study(results(folder))
        if not study:
            continue
        eta = estimate(folder)
        print("{:<16} {:>5}  {:<8}  {:<11}  {}".format(
            os.path.basename(folder), len(study["run_ids"]), timeline.clock(study["wall_s"]),
            timeline.clock(eta) if eta else "-",
            "{:.2f}".format(eta / study["wall_s"]) if eta else "-"))


def tuned(camp):
    print("\ncampaign     framework  precision  img/s (95 %)     batch  search s  where / probes")
    for folder in sorted(glob.glob(os.path.join(camp, "*", "campaign.json"))):
        folder = os.path.dirname(folder)
        for r in results(folder):
            if r.spec.get("mode") != "tuned" and not r.spec.get("batch_auto"):
                continue
            s = r.settings.get("batch_search") or {}
            probes = " ".join("b{}:{}".format(p["batch_size"], "{:,.0f}".format(
                p["images_per_sec"]) if p["status"] == "ok" else p["status"])
                for p in s.get("probes", []))
            print("{:<12} {:<10} {:<10} {:<16} {:>5}  {:>8}  {}{} | {}".format(
                os.path.basename(folder), r.spec["framework"], r.spec["precision"], fig(r),
                r.spec["batch_size"], s.get("seconds", "-"), s.get("where", "-"),
                " (reused)" if s.get("reused") else "", probes or s.get("stopped", "")))


def fresh(camp):
    study = {(r.spec["framework"], r.spec["precision"]): r for r in
             results(os.path.join(camp, "study")) if r.spec.get("mode") == "tuned"}
    rows = []
    for folder in sorted(glob.glob(os.path.join(camp, "fresh-*"))):
        for r in results(folder):
            a = study.get((r.spec["framework"], r.spec["precision"]))
            if a is None or a.status != "ok" or r.status != "ok":
                continue
            ratio = intervals.ratio(est([r]), est([a]))
            hw = ratio.half_width() if ratio else None
            rows.append("{:<8} {:<5} b{:<5} in-process {:<14} fresh {:<14} fresh ÷ in-process {:.3f} "
                        "±{:.3f}: {}".format(r.spec["framework"], r.spec["precision"],
                                             r.spec["batch_size"], fig(a), fig(r), ratio.value,
                                             hw or 0, intervals.state(ratio.value, hw)))
    if rows:
        print("\nin-process search against a fresh process at the same batch")
        print("\n".join(rows))


def noflags(camp):
    rs = [r for r in results(os.path.join(camp, "noflags")) if r.status == "ok"]
    by = {(r.spec["framework"], r.spec["precision"], r.spec["gpus"]): r for r in rs}
    if not by:
        return
    print("\nno flags: framework  GPUs  batch  fp32             fp16             fp16 gain")
    for (fw, p, g), r in sorted(by.items()):
        if p != "fp16" or (fw, "fp32", g) not in by:
            continue
        base = by[(fw, "fp32", g)]
        print("          {:<10} {:>4}  {:>5}  {:<16} {:<16} {:+.0%}".format(
            fw, g, r.spec["batch_size"], fig(base), fig(r), r.images_per_sec / base.images_per_sec - 1))


def parity(camp):
    loops = {}
    for path in glob.glob(os.path.join(camp, "loop*.jsonl")):
        tag = os.path.basename(path)[:-6]
        for line in open(path):
            if line.startswith("{"):
                d = json.loads(line)
                loops[(tag, d["precision"], d["variant"])] = d["images_per_sec"]
    ours = {r.spec["precision"]: r for r in results(os.path.join(camp, "parity")) if r.status == "ok"}
    if not loops and not ours:
        return
    print("\nJAX b256  precision  plain loop  loop, TF32_OVERRIDE=0  compare's step in it  compare run"
          "  run ÷ loop  run ÷ loop (override)")
    for p in ("fp32", "tf32", "bf16", "fp16"):
        loop, off = loops.get(("loop", p, "plain")), loops.get(("loop-tf32override0", p, "plain"))
        step, run = loops.get(("loop-tf32override0", p, "ours")), ours.get(p)
        ips = run.images_per_sec if run else None
        print("          {:<9}  {:>10}  {:>21}  {:>20}  {:>11}  {:>10}  {:>10}".format(
            p, *("{:,.0f}".format(x) if x else "-" for x in (loop, off, step, ips)),
            "{:.3f}".format(ips / loop) if ips and loop else "-",
            "{:.3f}".format(ips / off) if ips and off else "-"))


def compile_costs(camp):
    """The compile stage: per cell, the switch, its figure, the seconds from launch to the end of
    the first step (imports, model, compile or autotuning, first step), JAX's own compile_s."""
    rows = []
    for folder in sorted(glob.glob(os.path.join(camp, "compile-*", "campaign.json"))):
        folder = os.path.dirname(folder)
        for r in results(folder):
            ph, s = r.phases or {}, r.settings or {}
            first = (ph["first_step_done"] - ph["launched"]
                     if "first_step_done" in ph and "launched" in ph else None)
            cell = ph["cell_end"] - ph["cell_start"] if "cell_end" in ph and "cell_start" in ph else None
            rows.append("{:<26} {:<7} b{:<5} {:<16} {:>13} {:>9} {:>7}  {}".format(
                os.path.basename(folder), r.spec["framework"], r.spec["batch_size"], fig(r),
                "{:.1f}".format(first) if first is not None else "-",
                s.get("compile_s", "-"), "{:.0f}".format(cell) if cell is not None else "-",
                s.get("conv_algorithms") or s.get("cudnn_benchmark", "")))
    if rows:
        print("\ncompile costs: campaign   framework batch img/s (95 %)  to 1st step s  compile_s  cell s"
              "  conv algorithms / cudnn_benchmark")
        print("\n".join(rows))


def main(argv):
    camp = argv[0]
    if "--chosen" in argv:
        return chosen(camp)
    if "--compile" in argv:
        return compile_costs(camp)
    walls(camp)
    tuned(camp)
    fresh(camp)
    noflags(camp)
    parity(camp)
    compile_costs(camp)


if __name__ == "__main__":
    main(sys.argv[1:])
