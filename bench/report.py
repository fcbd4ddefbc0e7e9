#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Rows and tables of bench/run.sh. Standard library only: any python3 runs it.

Every measurement is one JSON row: {"id", "name", "group" ("jpeg" | "raw"), "figure",
"unit", "status" ("ok" | "absent" | "failed" | "skipped" | "timeout"), "note", ...details}.

    report.py stoker --id ID --name NAME --group G --unit U [--err FILE] [--note N] [--rc RC]
        one row from stoker-bench --json output (its last JSON object; its details kept)
    report.py ceiling [--err FILE] [--note N] [--rc RC] < OUT
        one row per mode from decode_ceiling's JSON lines
    report.py row --id ID --name NAME --group G --unit U --status S [--note N] [--err FILE]
        a row without a figure (absent, failed, skipped, timeout)
    report.py table ROWS.jsonl --out DIR [--meta KEY=VALUE ...] [--images DIR] [--h5 FILE]
        DIR/bench-results.md (markdown tables) and DIR/bench-results.json

Ratios are figure ÷ stoker's figure of the same group: JPEG rows against stoker's JPEG
train pipeline (with the library's own decoder choice: the plain row, or the --decoder auto
row where the decoder rows ran), raw rows against stoker reading the HDF5 file (or, when it
cannot, the same records packed into shards). Where the --decoder cpu and auto rows both ran,
the table also sets auto against cpu: throughput and CPU time per image, with their targets.
"""
import argparse
import datetime
import json
import os
import platform
import sys

REFERENCE = {"jpeg": ["stoker-jpeg-train", "stoker-jpeg-auto"],
             "raw": ["stoker-h5", "stoker-raw"]}
# stoker-bench's JPEG decoder figures (STOKER_OPT_DECODER), kept on a stoker row
DECODER_KEYS = ("decoder", "cpu_decoded", "gpu_decoded", "gpu_retried", "gpu_fallbacks",
                "gpu_share", "cpu_busy", "gpu_busy", "decoder_note")
# GPU decode against the CPU workers alone (--decoder auto vs cpu): the targets
AUTO_SPEEDUP, AUTO_MIN_FIGURE, AUTO_CPU_SAVING = 1.4, 20000, 0.30
GROUPS = [("jpeg", "JPEG training pipeline: decode, RandomResizedCrop 224, flip, normalise"),
          ("raw", "Raw records: 224×224×3 uint8, random order")]
CEILING = {
    "full": ("ceiling-full", "libjpeg decode only, whole image (no resize, no normalise)"),
    "crop": ("ceiling-crop", "libjpeg decode only, RandomResizedCrop box "
                             "(jpeg_crop_scanline + jpeg_skip_scanlines)"),
}


def emit(row):
    print(json.dumps(row), flush=True)


def last_line(path):
    """The line of a log that says what went wrong, for a row's note: the last one naming a
    tool or an error, else the last one; '' when none."""
    try:
        with open(path, errors="replace") as f:
            lines = [ln.strip() for ln in f if ln.strip()]
    except OSError:
        return ""
    telling = [ln for ln in lines if ln.startswith(("stoker-", "decode_ceiling:", "run.sh:"))
               or "Error" in ln or "error:" in ln]
    return (telling or lines or [""])[-1][:300]


def missing_status(rc):
    """The status of a row whose tool printed no figure, from the tool's exit status."""
    return {"124": "timeout", "137": "timeout", "125": "skipped"}.get(str(rc), "failed")


def json_objects(text):
    out = []
    for ln in text.splitlines():
        ln = ln.strip()
        if ln.startswith("{"):
            try:
                out.append(json.loads(ln))
            except ValueError:
                pass
    return out


def join_notes(*notes):
    return "; ".join(n for n in notes if n)


def cmd_stoker(a):
    row = {"id": a.id, "name": a.name, "group": a.group, "unit": a.unit}
    objs = json_objects(sys.stdin.read())
    if not objs:
        row.update(status=missing_status(a.rc),
                   note=join_notes(a.note, last_line(a.err) if a.err else ""))
        return emit(row)
    o = objs[-1]
    cut = "stopped by the time limit" if missing_status(a.rc) == "timeout" else ""
    row.update(status="ok", figure=o.get("records_per_sec"), note=join_notes(a.note, cut))
    for k in ("bytes_per_sec", "wait_fraction", "device", "threads", "backend", "simd",
              "transform", "dtype", "layout", "size", "skipped", "version", "verdict",
              "peak_rss_bytes"):
        if k in o:
            row[k] = o[k]
    cpu = [k for k in o if "cpu" in k and ("per_record" in k or "per_image" in k)]
    if cpu:
        row["cpu_seconds_per_image"] = o[cpu[0]]
    elif "cpu_seconds" in o and o.get("records"):
        row["cpu_seconds_per_image"] = o["cpu_seconds"] / o["records"]
    row.update(decoder_fields(o))
    row["stoker_bench"] = o
    emit(row)


def decoder_fields(o):
    """The JPEG decoder's figures of a stoker-bench report (top-level keys, or one "decoder"
    object holding them), with the share of the decoded images the GPU decoded; none where
    no image pipeline ran (decoder "n/a")."""
    src = o["decoder"] if isinstance(o.get("decoder"), dict) else o
    if src.get("decoder") == "n/a":
        return {}
    out = {k: src[k] for k in DECODER_KEYS if k in src and not isinstance(src[k], dict)}
    gpu, cpu = out.get("gpu_decoded"), out.get("cpu_decoded")
    if isinstance(gpu, (int, float)) and isinstance(cpu, (int, float)) and gpu + cpu > 0:
        out["gpu_decoded_share"] = gpu / (gpu + cpu)
    return out


def cmd_ceiling(a):
    objs = json_objects(sys.stdin.read())
    if not objs:
        for mode, (rid, name) in CEILING.items():
            emit({"id": rid, "name": name, "group": "jpeg", "unit": "img/s",
                  "status": missing_status(a.rc),
                  "note": join_notes(a.note, last_line(a.err) if a.err else "")})
        return
    for o in objs:
        rid, name = CEILING[o["mode"]]
        note = f"{o['threads']} thread{'s' if o['threads'] != 1 else ''}, {o['dct']} IDCT"
        if o.get("failed"):
            note += f", {o['failed']} of {o['images'] + o['failed']} failed (not counted)"
        emit({"id": rid, "name": name, "group": "jpeg", "unit": "img/s", "status": "ok",
              "figure": o["images_per_sec"], "cpu_seconds_per_image": o["cpu_seconds_per_image"],
              "threads": o["threads"], "note": join_notes(note, a.note), "ceiling": o})


def cmd_row(a):
    why = {"skipped": "time budget spent", "timeout": "stopped by the time limit"}
    note = join_notes(a.note or why.get(a.status, ""), last_line(a.err) if a.err else "")
    emit({"id": a.id, "name": a.name, "group": a.group, "unit": a.unit, "status": a.status,
          "note": note})


def machine():
    m = {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
         "kernel": platform.release()}
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("model name"):
                    m["cpu"] = ln.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            m["memory"] = f"{kb / 2**20:.0f} GiB"
        with open("/etc/os-release") as f:
            for ln in f:
                if ln.startswith("PRETTY_NAME="):
                    m["os"] = ln.split("=", 1)[1].strip().strip('"')
    except (OSError, ValueError, IndexError):
        pass
    return m


def describe_images(root):
    n = size = 0
    for dirpath, _, files in os.walk(root):
        for f in files:
            if f.lower().endswith((".jpg", ".jpeg")):
                n += 1
                size += os.path.getsize(os.path.join(dirpath, f))
    return f"{n} JPEGs, {size / 1e6:.1f} MB, mean {size / max(n, 1) / 1e3:.1f} KB"


def fmt_figure(row):
    f = row.get("figure")
    if row.get("status") != "ok" or f is None:
        return "—"
    return f"{f:,.0f}" if f >= 100 else f"{f:,.1f}"


def fmt_cpu(row):
    c = row.get("cpu_seconds_per_image") or row.get("cpu_seconds_per_record")
    return f"{c * 1e3:.2f}" if c else "—"


def details(row):
    bits = []
    if row.get("status") not in (None, "ok"):
        bits.append(f"**{row['status']}**")
    if row.get("device"):
        bits.append(f"device {row['device']}")
    for k in ("workers", "threads"):
        if row.get(k) and "thread" not in (row.get("note") or ""):
            bits.append(f"{k} {row[k]}")
    if row.get("bytes_per_sec"):
        bits.append(f"{row['bytes_per_sec'] / 1e9:.2f} GB/s")
    if row.get("wait_fraction") is not None:
        bits.append(f"consumer waited {100 * row['wait_fraction']:.0f}%")
    if row.get("verdict"):
        bits.append(f"limit: {row['verdict']}")
    bits += decoder_details(row)
    if row.get("note"):
        bits.append(row["note"])
    return "; ".join(bits).replace("|", "/").replace("\n", " ")


def decoder_details(row):
    """The decoder's figures of a stoker row, for its notes."""
    bits = []
    if row.get("decoder") is not None:
        bits.append(f"decoder {row['decoder']}")
    if row.get("gpu_decoded_share") is not None:
        bits.append(f"GPU decoded {100 * row['gpu_decoded_share']:.0f}%")
    for k, what in (("gpu_busy", "GPU decode busy"), ("cpu_busy", "workers busy")):
        if isinstance(row.get(k), (int, float)):
            bits.append(f"{what} {100 * row[k]:.0f}%")
    for k, what in (("gpu_retried", "retried on the CPU"), ("gpu_fallbacks", "CPU fallbacks")):
        if row.get(k):
            bits.append(f"{row[k]} {what}")
    if row.get("decoder_note"):
        bits.append(row["decoder_note"])
    return bits


def decoder_comparison(rows):
    """stoker --decoder auto against --decoder cpu (same data, threads and length): the
    throughput ratio and the CPU time saved per image, each against its target; None when
    neither row is in the run."""
    by_id = {r.get("id"): r for r in rows}
    pair = {d: by_id.get(f"stoker-jpeg-{d}") for d in ("cpu", "auto")}
    if not any(pair.values()):
        return None
    why = {}  # what went wrong -> the rows it went wrong for
    for d, r in pair.items():
        if not r or r.get("status") != "ok" or not r.get("figure"):
            text = join_notes(r.get("status", "?"), r.get("note", "")) if r else "no row"
            why.setdefault(text, []).append(d)
    if why:
        return {"status": "not measured",
                "why": "; ".join(f"{' and '.join(ds)}: {t}" for t, ds in why.items())}
    cpu, auto = pair["cpu"], pair["auto"]
    speedup = auto["figure"] / cpu["figure"]
    out = {"status": "measured", "cpu_figure": cpu["figure"], "auto_figure": auto["figure"],
           "speedup": speedup, "speedup_target": AUTO_SPEEDUP,
           "figure_target": AUTO_MIN_FIGURE,
           "speedup_pass": speedup >= AUTO_SPEEDUP and auto["figure"] >= AUTO_MIN_FIGURE}
    c_cpu, c_auto = cpu.get("cpu_seconds_per_image"), auto.get("cpu_seconds_per_image")
    if c_cpu and c_auto is not None:
        out.update(cpu_seconds_per_image_cpu=c_cpu, cpu_seconds_per_image_auto=c_auto,
                   cpu_saving=1 - c_auto / c_cpu, cpu_saving_target=AUTO_CPU_SAVING,
                   cpu_saving_pass=1 - c_auto / c_cpu >= AUTO_CPU_SAVING)
    if auto.get("gpu_decoded_share") is not None:
        out["auto_gpu_decoded_share"] = auto["gpu_decoded_share"]
    if auto.get("decoder_note"):
        out["auto_decoder_note"] = auto["decoder_note"]
    return out


def decoder_lines(c):
    """The markdown of decoder_comparison's result."""
    md = ["", "## GPU decode: stoker --decoder auto against --decoder cpu", ""]
    if c["status"] != "measured":
        return md + [f"Not measured: {c['why']}".replace("\n", " ")]
    verdict = {True: "PASS", False: "FAIL"}
    md.append(f"- throughput: auto {c['auto_figure']:,.0f} img/s ÷ cpu {c['cpu_figure']:,.0f} "
              f"img/s = {c['speedup']:.2f}× (target ≥ {c['speedup_target']}× and ≥ "
              f"{c['figure_target']:,} img/s): {verdict[c['speedup_pass']]}")
    if "cpu_saving" in c:
        md.append(f"- CPU time per image: auto {c['cpu_seconds_per_image_auto'] * 1e3:.3f} ms, "
                  f"cpu {c['cpu_seconds_per_image_cpu'] * 1e3:.3f} ms: "
                  f"{100 * c['cpu_saving']:.0f}% lower (target ≥ "
                  f"{100 * c['cpu_saving_target']:.0f}% lower): {verdict[c['cpu_saving_pass']]}")
    else:
        md.append("- CPU time per image: not in stoker-bench's report")
    if "auto_gpu_decoded_share" in c:
        md.append(f"- with auto, the GPU decoded {100 * c['auto_gpu_decoded_share']:.0f}% of "
                  "the images" + (f" ({c['auto_decoder_note']})" if "auto_decoder_note" in c
                                  else ""))
    return md


def add_ratios(rows):
    refs = {}
    for group, ids in REFERENCE.items():
        for rid in ids:
            r = next((x for x in rows if x.get("id") == rid and x.get("status") == "ok"
                      and x.get("figure")), None)
            if r:
                refs[group] = r
                break
    for r in rows:
        ref = refs.get(r.get("group"))
        if ref and r.get("status") == "ok" and r.get("figure") is not None:
            r["ratio_to_stoker"] = r["figure"] / ref["figure"]
            r["stoker_reference"] = ref["id"]
    return refs


def cmd_table(a):
    rows = []
    with open(a.rows) as f:
        for ln in f:
            ln = ln.strip()
            if ln:
                try:
                    rows.append(json.loads(ln))
                except ValueError:
                    pass
    refs = add_ratios(rows)
    meta = dict(kv.split("=", 1) for kv in a.meta if "=" in kv)
    data = {}
    if a.images:
        data["images"] = f"{describe_images(a.images)} ({a.images})"
    if a.h5:
        data["h5"] = f"{a.h5} ({os.path.getsize(a.h5) / 1e6:.1f} MB)" \
            if os.path.exists(a.h5) else a.h5
    result = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "machine": dict(machine(), **{k: v for k, v in meta.items() if k != "command"}),
              "command": meta.get("command", ""), "data": data, "rows": rows}
    comparison = decoder_comparison(rows)
    if comparison:
        result["decoder_comparison"] = comparison
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "bench-results.json"), "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    md = ["# stoker benchmark results", "",
          f"{result['date']}. Command: `{result['command']}`", ""]
    for k, v in result["machine"].items():
        md.append(f"- {k}: {v}")
    for k, v in data.items():
        md.append(f"- data ({k}): {v}")
    for group, title in GROUPS:
        grows = [r for r in rows if r.get("group") == group]
        if not grows:
            continue
        ref = refs.get(group)
        unit = grows[0].get("unit", "")
        md += ["", f"## {title}", "",
               "ratio: figure ÷ " + (f"{ref['name']} ({ref['figure']:,.0f} {unit})"
                                     if ref else "stoker's figure (stoker did not run)"), "",
               "| pipeline | figure | unit | ratio to stoker | CPU ms per item | notes |",
               "| --- | ---: | --- | ---: | ---: | --- |"]
        for r in grows:
            ratio = f"{r['ratio_to_stoker']:.2f}×" if "ratio_to_stoker" in r else "—"
            md.append(f"| {r['name']} | {fmt_figure(r)} | {r.get('unit', '')} | {ratio} | "
                      f"{fmt_cpu(r)} | {details(r)} |")
    if comparison:
        md += decoder_lines(comparison)
    with open(os.path.join(a.out, "bench-results.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("stoker", "row"):
        p = sub.add_parser(name)
        p.add_argument("--id", required=True)
        p.add_argument("--name", required=True)
        p.add_argument("--group", required=True, choices=["jpeg", "raw"])
        p.add_argument("--unit", required=True)
        p.add_argument("--err")
        p.add_argument("--note", default="")
        if name == "row":
            p.add_argument("--status", required=True)
        else:
            p.add_argument("--rc", default="0", help="the tool's exit status")
    p = sub.add_parser("ceiling")
    p.add_argument("--err")
    p.add_argument("--note", default="")
    p.add_argument("--rc", default="0", help="the tool's exit status")
    p = sub.add_parser("table")
    p.add_argument("rows")
    p.add_argument("--out", required=True)
    p.add_argument("--meta", action="append", default=[])
    p.add_argument("--images")
    p.add_argument("--h5")
    a = ap.parse_args()
    {"stoker": cmd_stoker, "ceiling": cmd_ceiling, "row": cmd_row, "table": cmd_table}[a.cmd](a)


if __name__ == "__main__":
    main()
