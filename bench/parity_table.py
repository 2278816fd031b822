"""The table of bench/jax_parity.sh: the plain Flax loop against `compare run` at each precision,
then each variant, each fp32 run with its program's fingerprint. Reads what the script wrote:

    python3 bench/parity_table.py OUTDIR
"""
import glob
import json
import os
import sys


def loops(out):
    """{(precision, variant, tag): record} of bench/flax_loop.py's JSON lines (*.jsonl)."""
    rows = {}
    for path in sorted(glob.glob(os.path.join(out, "*.jsonl"))):
        tag = os.path.basename(path)[:-6]
        for line in open(path):
            if line.startswith("{"):
                r = json.loads(line)
                rows[(r["precision"], r["variant"], tag)] = r
    return rows


def cells(out):
    """{campaign: [result, ...]} of every compare campaign under OUTDIR."""
    found = {}
    for path in sorted(glob.glob(os.path.join(out, "*", "results", "*.json"))):
        campaign = path.split(os.sep)[-3]
        found.setdefault(campaign, []).append(json.load(open(path)))
    return found


def fig(x):
    return "{:,.0f}".format(x) if x else "-"


def main(out):
    plain, runs = loops(out), cells(out)

    def loop(precision, variant="plain", tag="loop"):
        return (plain.get((precision, variant, tag)) or {}).get("images_per_sec")

    def ours(campaign, precision):
        ok = [r for r in runs.get(campaign, []) if r["spec"]["precision"] == precision
              and r["status"] == "ok"]
        return ok[0]["images_per_sec"] if ok else None

    print("precision | plain loop | + windows sync | compare's step in the loop | compare run | "
          "compare ÷ plain")
    for p in ("fp32", "tf32", "bf16", "fp16"):
        base, c = loop(p), ours("compare", p)
        print("{} | {} | {} | {} | {} | {}".format(
            p, fig(base), fig(loop(p, "windows")), fig(loop(p, "ours")), fig(c),
            "{:.3f}".format(c / base) if base and c else "-"))
    print("\nvariants (compare run, 1 GPU; ÷ the plain loop of the same precision):")
    for campaign in sorted(runs):
        if campaign == "compare":
            continue
        for r in runs[campaign]:
            p, ips = r["spec"]["precision"], r.get("images_per_sec")
            base = loop(p)
            print("  {:<14} {} r{}: {} {}{}{}".format(
                campaign, p, r["spec"]["repeat"], r["status"], fig(ips),
                " ({:.3f})".format(ips / base) if ips and base else "",
                "" if r["status"] == "ok" else " " + (r.get("reason") or "")[:100]))
    print("\nprograms (fingerprint: a hash of the compiled step; conv algorithm ids x uses):")
    for (p, variant, tag), r in sorted(plain.items()):
        print("  loop {}/{} {}: {} {} [{}]".format(tag, variant, p, fig(r["images_per_sec"]),
                                                  r["fingerprint"], r["conv_algorithms"]))
    for campaign in sorted(runs):
        for r in runs[campaign]:
            s = r.get("settings", {})
            cache = (r.get("environment", {}).get("compile_cache") or {}).get("jax") or {}
            print("  {} {} r{}: {} {} [{}] compile {} s (cache hits {}), flags {}".format(
                campaign, r["spec"]["precision"], r["spec"]["repeat"], fig(r.get("images_per_sec")),
                s.get("program_fingerprint"), s.get("conv_algorithms"), s.get("compile_s"),
                cache.get("hits", "off"), s.get("xla_flags_added")))


if __name__ == "__main__":
    main(sys.argv[1])
