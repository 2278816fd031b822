"""Recorded campaigns as one small JSON fixture for the plan's ETA test (tests/test_plan_eta.py):
each result cut to what the plan reads (spec, status, phases, the executor and the environment
build it recorded), the machine record cut to what tells machines apart, and the cases to check.

    python3 bench/eta_fixture.py tests/fixtures/eta/readme_fp32_cpu.json \\
        fresh=/tmp/e-fix/fresh fresh2=/tmp/e-fix/fresh2 warm=/tmp/e-fix/warm \\
        --case fresh2:fresh:tf,mxnet,caffe2 --case warm:fresh,fresh2:

The plan's reference cell times (compare/references/cell_times/, compare/eta.py) are the same
format with `--measured TEXT` (where and when) and no case:

    python3 bench/eta_fixture.py compare/references/cell_times/h200.json \
        --measured "one H200, 16 cores, ..." study=/tmp/study noflags=/tmp/noflags

`--add` keeps the file's campaigns and machine and adds the named ones (the `--measured` text
given replaces the file's):

    python3 bench/eta_fixture.py compare/references/cell_times/cpu2-avx512-bf16.json --add \
        --measured "..." docker=/tmp/fresh3/results/20261204-203848

A case TARGET:EARLIER[,EARLIER]:UNBUILT says: the plan of TARGET's cells, from the EARLIER
campaigns' cell times, with the UNBUILT frameworks' environments still to build, must come within
the test's tolerance of TARGET's wall time.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from compare.store import Campaign  # noqa: E402

KEEP = ("run_id", "status", "spec", "phases", "spec_hash", "images_per_sec", "schema_version")
MACHINE = ("cpu_model", "cpu_count", "gpus", "memory_gib", "cpu_kind")


def trimmed(folder: str) -> list:
    results, _ = Campaign.open(folder).results()
    out = []
    for r in sorted(results, key=lambda r: r.phases.get("cell_start", 0.0)):
        d = {k: v for k, v in r.to_dict().items() if k in KEEP}
        d["environment"] = {k: v for k, v in (r.environment or {}).items()
                            if k in ("executor", "env_build_s")}
        caches = {k: {"state": c["state"]} for k, c in  # what the plan reads of a cold compile
                  ((r.environment or {}).get("compile_cache") or {}).items()  # (eta.cached_compile)
                  if isinstance(c, dict) and "state" in c}
        if caches:
            d["environment"]["compile_cache"] = caches
        if (r.settings or {}).get("compile_s") is not None:
            d["settings"] = {"compile_s": r.settings["compile_s"]}
        out.append(d)
    return out


def main(argv) -> None:
    path, named, cases, measured, add = argv[0], {}, [], None, False
    args = iter(argv[1:])
    for arg in args:
        if arg == "--add":
            add = True
        elif arg == "--measured":
            measured = next(args)
        elif arg == "--case":
            target, earlier, unbuilt = next(args).split(":")
            cases.append({"target": target, "earlier": earlier.split(","),
                          "unbuilt": [u for u in unbuilt.split(",") if u]})
        else:
            name, _, folder = arg.partition("=")
            named[name] = folder
    machine = Campaign.open(next(iter(named.values()))).machine
    if measured and not machine.get("gpus"):  # a CPU's reference: its kind, read here (run this
        from compare.eta import cpu_kind  # where the campaigns ran)
        machine = dict(machine, cpu_kind=cpu_kind())
    campaigns = {n: trimmed(p) for n, p in named.items()}
    if add:
        with open(path) as f:
            kept = json.load(f)
        machine, campaigns = kept["machine"], dict(kept["campaigns"], **campaigns)
        cases = kept.get("cases", []) + cases
    with open(path, "w") as f:
        json.dump(dict({"machine": {k: machine.get(k) for k in MACHINE},
                        "campaigns": campaigns},
                       **({"measured": measured} if measured else {"cases": cases})),
                  f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
