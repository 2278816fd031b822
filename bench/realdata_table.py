"""The table bench/realdata_gpu.sh prints: every campaign under WORKDIR, one row per framework,
precision, mode and cores, with synthetic and real img/s, data efficiency (real / synthetic, the
synthetic of the same mode at any core count where the row's own is missing), decode=hw's split
(the CPU decoders' share of the images, their rate and the engines'), host CPU cores busy,
decode errors and the feeder's milliseconds per batch. Cells that did not end ok are listed with
their reason; the table is printed whatever is missing.

    python bench/realdata_table.py WORKDIR [--cells]    # --cells: one line per result instead
"""
import glob
import json
import os
import sys

KEY = ("framework", "precision", "mode", "cores")


def cores(result) -> int:
    """The cores the cell's job could run on (its affinity: '0-7' or '0-3,8-11')."""
    text = str((result.get("environment") or {}).get("cpu_affinity") or "")
    count = 0
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        count += int(hi or lo) - int(lo) + 1 if lo.isdigit() else 0
    return count or int((result.get("environment") or {}).get("cpu_count") or 0)


def load(workdir: str):
    out = []
    for path in sorted(glob.glob(os.path.join(workdir, "*", "results", "*.json"))):
        with open(path) as f:
            r = json.load(f)
        spec = r["spec"]
        r["_key"] = (spec["framework"], spec["precision"], spec.get("mode", "default"), cores(r))
        r["_campaign"] = path.split(os.sep)[-3]
        out.append(r)
    return out


def _split(settings):
    split = settings.get("decode_split") or {}
    if isinstance(split, list):  # one per device
        split = split[0] if split else {}
    return split


def cell_line(r) -> str:
    s, t = r.get("settings") or {}, r.get("telemetry") or {}
    split = _split(s)
    return " ".join(str(x) for x in (
        r["_campaign"], r["run_id"], r["status"], round(r.get("images_per_sec") or 0, 1),
        "windows", [round(x) for x in r.get("window_images_per_sec") or []], "b", r.get("global_batch"),
        "| decode", s.get("decode"), "workers", s.get("loader_workers"), "read", s.get("images_read"),
        "errors", s.get("decode_errors"), s.get("decode_error_files") or "",
        "queues", s.get("cuda_connections"),
        "| split", {k: split.get(k) for k in ("cpu_share", "cpu_share_first", "cpu_share_last",
                                              "cpu_img_s", "hw_img_s", "cpu_decoders",
                                              "cpu_crops_buffer", "cpu_decode_cpu_seconds")},
        "feeder ms", split.get("feeder_ms_per_batch"), s.get("feeder_ms_per_batch_loader"),
        s.get("feeder_ms_per_batch_prepare"), "| host CPU", t.get("host_cpu_cores"),
        s.get("cpu_decoders_note") or "", (r.get("reason") or "")[:300]))


def table(results) -> str:
    rows = {}
    for r in results:
        rows.setdefault(r["_key"], {})[r["spec"]["data_mode"]] = r
    synthetic_any = {}
    for key, cells in rows.items():
        if "synthetic" in cells and cells["synthetic"]["status"] == "ok":
            synthetic_any.setdefault(key[:3], cells["synthetic"]["images_per_sec"])
    lines = ["| framework | precision | mode | cores | batch | synthetic | real | data efficiency "
             "| CPU share | CPU img/s | engines img/s | host CPU cores | decode errors "
             "| feeder ms/batch (loader, prepare; hw, cpu wait, copy) |",
             "|" + "---|" * 14]
    failed = []
    for key in sorted(rows):
        cells = rows[key]
        for r in cells.values():
            if r["status"] != "ok":
                failed.append("{} {}: {} {}".format(r["_campaign"], r["run_id"], r["status"],
                                                    (r.get("reason") or "")[:300]))
        syn, real = cells.get("synthetic"), cells.get("real")
        syn_ips = syn["images_per_sec"] if syn and syn["status"] == "ok" else None
        own = syn_ips is not None
        syn_ips = syn_ips if own else synthetic_any.get(key[:3])
        real_ips = real["images_per_sec"] if real and real["status"] == "ok" else None
        s = (real or {}).get("settings") or {}
        split = _split(s)
        feeder = split.get("feeder_ms_per_batch") or {}
        eff = "{:.3f}{}".format(real_ips / syn_ips, "" if own else " (synthetic of another row)") \
            if real_ips and syn_ips else ""
        lines.append("| " + " | ".join(str(x) for x in (
            key[0], key[1], key[2], key[3], (real or syn or {}).get("global_batch", ""),
            _num(syn_ips) + ("" if own or syn_ips is None else "*"), _num(real_ips), eff,
            split.get("cpu_share", ""), split.get("cpu_img_s", ""), split.get("hw_img_s", ""),
            ((real or {}).get("telemetry") or {}).get("host_cpu_cores", ""),
            s.get("decode_errors", ""),
            "{}, {}; {}".format(s.get("feeder_ms_per_batch_loader", ""),
                                s.get("feeder_ms_per_batch_prepare", ""),
                                ", ".join(str(feeder.get(k, "")) for k in ("hw", "cpu_wait", "copy")))
            if real else "")) + " |")
    if failed:
        lines += ["", "Not ok:"] + ["- " + f for f in failed]
    return "\n".join(lines)


def _num(x) -> str:
    return "" if x is None else "{:,.1f}".format(x)


def main(argv) -> int:
    if not argv:
        sys.stderr.write(__doc__)
        return 2
    results = load(argv[0])
    if not results:
        print("no results under {}".format(argv[0]))
        return 0
    if "--cells" in argv:
        for r in results:
            print(cell_line(r))
    else:
        print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
