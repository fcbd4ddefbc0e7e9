#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Cold-cache figures: stoker and its peers reading data that is not in the page cache, beside
# what the storage itself delivers for the same reads.
#
#   bench/cold.sh BUILD_DIR [--images N|DIR] [--raw N] [--out DIR] [--threads T]
#                 [--photos DIR] [--jpeg-maker SCRIPT] [--rounds R] [--budget SECONDS]
#                 [--quick]
#
# Makes (or reuses) the data: an ImageNet-like JPEG tree packed with stoker-pack; N raw
# records of 150,528 bytes (224x224x3 uint8) packed (bench/make_raw_dataset.py), and the
# same records in an HDF5 file as h5py writes it. Then, with the page cache dropped before
# every run (sync; echo 3 > /proc/sys/vm/drop_caches), one shuffled epoch each of:
#   - disk_probe (bench/ceiling/disk_probe.c): random O_DIRECT reads of the raw record size
#     over the raw shards (QD 64, 1 and 4 threads), of the mean JPEG size over the JPEG
#     shards, and sequential 1 MiB reads of the raw shards;
#   - stoker-bench on the packed raw records, buffered and --direct, into host slots
#     (--device cpu) and onto the GPU (--device cuda, when there is one); on the HDF5 file
#     (buffered); on the packed JPEGs, train transform 224 float16, buffered and --direct,
#     into host slots;
#   - PyTorch DataLoader classic on the JPEG tree, and h5py + DataLoader on the HDF5 file,
#     each timing one epoch from its first request (bench/peers/*.py --cold).
# Writes OUT/cold-results.md and OUT/cold-results.json: each figure, its unit, seconds,
# its ratio to the disk probe and to PyTorch's cold row, the machine, command and date.
# Where the page cache cannot be dropped (not root, read-only /proc), every row says so and
# its figures are marked warm.
#
# BUILD_DIR      stoker's build folder: stoker-bench, stoker-pack, libstoker.so (and
#                bench_disk_probe, else disk_probe.c is compiled with cc and liburing)
# --images X     how many JPEGs to make (default 40000, about 3 GB; 500 with --quick), or a
#                JPEG tree to use (an ImageFolder, or a folder holding train/)
# --raw N        raw records to make (default 40000, 6 GB, and as much again in the HDF5
#                file; 2000 with --quick); a cold epoch should last seconds, not one
# --out DIR      results, logs and made data (default: BUILD_DIR/cold); data is reused by the
#                next run with the same counts
# --threads T    stoker threads and DataLoader workers (default: cores)
# --photos DIR   photographs to cut the JPEGs from (default: bench/make_data.py's)
# --jpeg-maker S a script that makes the JPEG tree instead of bench/make_data.py, called as
#                S --src PHOTOS --out DIR --n N --classes C (needs --photos)
# --rounds R     measure everything R times over, each run cold (default 2, 1 with --quick),
#                every second round in the reverse order: the report gives each row's
#                median and the rounds' figures
# --budget S     wall-clock limit of the whole run (default 560, or 240 with --quick)
# --quick        small data, for a try on any machine
# The Python for the peers is the first of python3, /usr/bin/python3 that imports numpy,
# preferring one with torch (PYTHON=... chooses); making data needs numpy, Pillow and h5py.
set -eu

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cmdline="bench/cold.sh $*"
die() { echo "cold.sh: $*" >&2; exit 2; }
case "${1:-}" in
    -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    ''|-*) die "usage: bench/cold.sh BUILD_DIR [options] (see --help)" ;;
esac
build=$1
shift
images="" raw="" out="" threads="" photos="" maker="" budget="" rounds="" quick=0
while [ $# -gt 0 ]; do
    case "$1" in
        --images) images=${2:?--images needs a count or a folder}; shift ;;
        --raw) raw=${2:?--raw needs a count}; shift ;;
        --out) out=${2:?--out needs a folder}; shift ;;
        --threads) threads=${2:?--threads needs a count}; shift ;;
        --photos) photos=${2:?--photos needs a folder}; shift ;;
        --jpeg-maker) maker=${2:?--jpeg-maker needs a script}; shift ;;
        --budget) budget=${2:?--budget needs seconds}; shift ;;
        --rounds) rounds=${2:?--rounds needs a count}; shift ;;
        --quick) quick=1 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
    shift
done
is_count() { case "$1" in ''|*[!0-9]*) return 1 ;; *) [ "$1" -gt 0 ] ;; esac; }

[ -d "$build" ] || die "$build: no such build folder"
build=$(cd "$build" && pwd)
for tool in stoker-bench stoker-pack libstoker.so; do
    [ -e "$build/$tool" ] || die "$build/$tool is missing: build stoker with its tools first"
done
cores=$(nproc 2>/dev/null || echo 1)
threads=${threads:-$cores}
is_count "$threads" || die "--threads needs a positive integer"
if [ "$quick" = 1 ]; then
    images=${images:-500} raw=${raw:-2000} budget=${budget:-240} rounds=${rounds:-1}
else
    images=${images:-40000} raw=${raw:-40000} budget=${budget:-560} rounds=${rounds:-2}
fi
is_count "$raw" || die "--raw needs a positive integer"
is_count "$rounds" || die "--rounds needs a positive integer"
is_count "$budget" || die "--budget needs seconds"
if [ -n "$maker" ]; then
    [ -f "$maker" ] || die "--jpeg-maker: no file $maker"
    [ -n "$photos" ] || die "--jpeg-maker needs --photos"
    maker=$(cd "$(dirname "$maker")" && pwd)/$(basename "$maker")
fi
if [ -n "$photos" ]; then
    [ -d "$photos" ] || die "--photos: no folder $photos"
    photos=$(cd "$photos" && pwd)
fi
out=${out:-$build/cold}
mkdir -p "$out/logs" "$out/data"
out=$(cd "$out" && pwd)
runs=$out/runs.tsv
: > "$runs"

# ---- the clock: every step gets at most what is left of the budget ----
start=$(date +%s)
deadline=$((start + budget))
reserve=10 # for the report
# limit, why, step and probe_py: the time-limited steps (bench/steps.sh)
. "$here/steps.sh"

# ---- Python ----
if [ -n "${PYTHON:-}" ]; then py=$PYTHON; else
    py=$(probe_py "numpy, torch") || py=$(probe_py numpy) || py=""
fi
py_data=$(probe_py "numpy, PIL, h5py") || py_data=$(probe_py "numpy, PIL") || py_data=""
py_report=$(command -v python3 || command -v /usr/bin/python3) || die "no python3 found"

# ---- the page cache: dropped before every run, or every figure is warm ----
if err=$( (sync && echo 3 > /proc/sys/vm/drop_caches) 2>&1 ); then
    can_drop=1 cache_note="dropped before every run (sync; echo 3 > /proc/sys/vm/drop_caches)"
else
    can_drop=0
    cache_note="NOT dropped: writing /proc/sys/vm/drop_caches failed (${err##*: }); every \
figure is warm"
fi
drop_cache() {
    sync
    [ "$can_drop" = 1 ] && (echo 3 > /proc/sys/vm/drop_caches) 2> /dev/null
}

gpu=""
if command -v nvidia-smi > /dev/null 2>&1; then
    gpu=$(timeout 20 nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null |
        head -n 1) || gpu=""
fi
echo "cold.sh: out $out; $threads threads; budget $budget s; page cache $cache_note;" \
    "python ${py:-none} (data: ${py_data:-none}); GPU: ${gpu:-none}"

# ---- the disk probe ----
probe=$build/bench_disk_probe
if [ ! -x "$probe" ]; then
    probe=$out/disk_probe
    uring=$(pkg-config --cflags --libs liburing 2>/dev/null) || uring=-luring
    # shellcheck disable=SC2086 # a list of flags
    step compile-probe 60 cc -std=c11 -O2 -Wall -o "$probe" "$here/ceiling/disk_probe.c" \
        $uring -lpthread || probe=""
fi

# ---- data ----
echo "data"
data=$out/data
if is_count "$images"; then
    made=$data/jpeg
    tag="$images ${photos:-default} ${maker:-make_data.py}"
    if [ "$(cat "$made/.made" 2>/dev/null)" != "$tag" ]; then
        rm -rf "$made"
        [ -n "$py_data" ] || die "making images needs a python3 with numpy and Pillow"
        classes=$([ "$images" -ge 10000 ] && echo 100 || echo 10)
        if [ -n "$maker" ]; then
            step make-images 300 "$py_data" "$maker" --src "$photos" --out "$made" \
                --n "$images" --classes "$classes"
        else
            step make-images 300 "$py_data" "$here/make_data.py" images --out "$made" \
                --n "$images" --classes "$classes" --jobs "$cores" ${photos:+--src "$photos"}
        fi || die "could not make the images (see $out/logs/make-images.err)"
        echo "$tag" > "$made/.made"
    fi
    jpeg_root=$made/train
else
    [ -d "$images" ] || die "--images: no folder $images"
    jpeg_root=$(cd "$images" && pwd)
    [ -d "$jpeg_root/train" ] && jpeg_root=$jpeg_root/train
fi
read -r n_jpeg jpeg_bytes < <(find "$jpeg_root" -type f \( -iname '*.jpg' -o -iname '*.jpeg' \) \
    -printf '%s\n' | awk '{ s += $1; n++ } END { print n + 0, s + 0 }')
[ "$n_jpeg" -gt 0 ] || die "no JPEGs under $jpeg_root"
mean_jpeg=$((jpeg_bytes / n_jpeg))

jpeg_stk=$data/jpeg.stk
tag="$jpeg_root $n_jpeg $jpeg_bytes"
if [ "$(cat "$data/.jpeg-packed" 2>/dev/null)" != "$tag" ] || [ ! -d "$jpeg_stk" ]; then
    rm -f "$data/.jpeg-packed"
    # --align 4096: the --direct rows read it with O_DIRECT, whatever the JPEGs' size (the
    # default picks a smaller alignment for small records)
    if step pack-jpeg 180 "$build/stoker-pack" --quiet --force --no-fsync --align 4096 \
        --jobs "$threads" "$jpeg_root" "$jpeg_stk"; then
        echo "$tag" > "$data/.jpeg-packed"
    else
        jpeg_stk=""
    fi
fi

raw_stk=$data/raw.stk
if [ "$(cat "$data/.raw-made" 2>/dev/null)" != "$raw" ] || [ ! -d "$raw_stk" ]; then
    rm -f "$data/.raw-made"
    if [ -n "$py_data" ] && step make-raw 240 "$py_data" "$here/make_raw_dataset.py" \
        --lib "$build/libstoker.so" "$raw_stk" --records "$raw"; then
        echo "$raw" > "$data/.raw-made"
    else
        raw_stk=""
    fi
fi

# The HDF5 file holds the packed records' bytes: record i is (k * 7 + (k >> 8) + 1 + i * 131)
# mod 256 at byte k, as bench/make_raw_dataset.py writes it; its label is i mod 10 - 3.
h5=$data/raw.h5
if [ "$(cat "$data/.h5-made" 2>/dev/null)" != "$raw" ] || [ ! -f "$h5" ]; then
    rm -f "$data/.h5-made" "$h5"
    if [ -n "$py_data" ] && step make-h5 240 "$py_data" -c '
import sys
import h5py, numpy as np
path, n = sys.argv[1], int(sys.argv[2])
k = np.arange(224 * 224 * 3, dtype=np.uint64)
base = ((k * 7 + (k >> 8) + 1) & 0xFF).astype(np.uint8)
with h5py.File(path + ".tmp", "w") as f:
    d = f.create_dataset("images", (n, 224, 224, 3), dtype="uint8")
    for s in range(0, n, 256):
        i = np.arange(s, min(n, s + 256), dtype=np.uint64)
        shift = ((i * 131) & 0xFF).astype(np.uint8)
        d[s:s + len(i)] = (base[None, :] + shift[:, None]).reshape(len(i), 224, 224, 3)
    f.create_dataset("labels", data=np.arange(n, dtype=np.int64) % 10 - 3)
' "$h5" "$raw" && mv "$h5.tmp" "$h5"; then
        echo "$raw" > "$data/.h5-made"
    else
        rm -f "$h5.tmp"
        h5=""
    fi
fi

# ---- runs ----
# batches of 256 as in bench/run.sh; smaller ones when the data is small
batch_jpeg=$([ "$n_jpeg" -ge 2048 ] && echo 256 || echo 32)
batch_raw=$([ "$raw" -ge 2048 ] && echo 256 || echo 32)
round=1

# note ID KIND GROUP RC CACHE WALL NAME [NOTE]: one line of OUT/runs.tsv for the report
note() {
    local why=${8:-}
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" "$7" \
        "${why//$'\t'/ }" "$round" >> "$runs"
}

# measure ID KIND GROUP NAME CAP CMD...: drops the page cache, then runs CMD; its output is
# OUT/logs/ID.rROUND.*
measure() {
    local id=$1 kind=$2 group=$3 name=$4 cap=$5 rc=0 cache=cold t0
    shift 5
    drop_cache || cache=warm
    t0=$(date +%s.%N)
    step "$id.r$round" "$cap" "$@" || rc=$?
    note "$id" "$kind" "$group" "$rc" "$cache" \
        "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')" "$name"
}

shards() { find "$1" -maxdepth 1 -name 'shard-*.stk' | sort; }
probes() {
    local files
    if [ -n "$probe" ] && [ -n "$raw_stk" ]; then
        mapfile -t files < <(shards "$raw_stk")
        measure probe-raw-random-1 probe raw "disk: random O_DIRECT reads of 150,528 bytes \
(151,552 with alignment), QD 64, 1 thread" 60 "$probe" random "${files[@]}" --size 150528 \
            --qd 64 --seconds 30 --seed "$round"
        measure probe-raw-random probe raw "disk: random O_DIRECT reads of 150,528 bytes \
(151,552 with alignment), QD 64 x 4 threads" 60 "$probe" random "${files[@]}" \
            --size 150528 --qd 64 --threads 4 --seconds 30 --seed "$round"
        measure probe-seq probe raw "disk: sequential O_DIRECT reads of the raw shards, \
1 MiB blocks, QD 32" 60 "$probe" seq "${files[@]}" --block 1M --qd 32 --seconds 30
    else
        note probe-raw-random probe raw failed "" "" "disk: random O_DIRECT reads of \
150,528 bytes" "$([ -z "$probe" ] && echo "no disk probe" || echo "no packed raw records")"
    fi
    if [ -n "$probe" ] && [ -n "$jpeg_stk" ]; then
        mapfile -t files < <(shards "$jpeg_stk")
        measure probe-jpeg-random probe jpeg "disk: random O_DIRECT reads of the mean JPEG's \
size ($mean_jpeg bytes), QD 64 x 4 threads" 60 "$probe" random "${files[@]}" \
            --size "$mean_jpeg" --qd 64 --threads 4 --seconds 30 --seed "$round"
    fi
}

# stoker ID GROUP NAME DATA ARGS...: one cold epoch of stoker-bench, nothing untimed
stoker() {
    local id=$1 group=$2 name=$3 dat=$4 stop_signal=INT
    shift 4
    measure "$id" stoker "$group" "$name" 120 "$build/stoker-bench" "$dat" --json --epochs 1 \
        --warmup 0 --threads "$threads" --seed "$round" "$@"
}
stokers() {
    local dev where devices=(cpu)
    [ -n "$gpu" ] && devices+=(cuda)
    for dev in "${devices[@]}"; do
        where=$([ "$dev" = cpu ] && echo "host slots" || echo "onto the GPU")
        if [ -n "$raw_stk" ]; then
            stoker "stoker-raw-$dev" raw "stoker: packed raw records, buffered, $where" \
                "$raw_stk" --batch-size "$batch_raw" --transform none --device "$dev"
            stoker "stoker-raw-$dev-direct" raw "stoker: packed raw records, --direct, $where" \
                "$raw_stk" --batch-size "$batch_raw" --transform none --device "$dev" --direct
        else
            note "stoker-raw-$dev" stoker raw failed "" "" "stoker: packed raw records, $where" \
                "no packed raw records ($(why "$out/logs/make-raw.err"))"
        fi
        if [ -n "$h5" ]; then
            stoker "stoker-h5-$dev" raw "stoker: the HDF5 file, buffered, $where" "$h5" \
                --batch-size "$batch_raw" --device "$dev"
        else
            note "stoker-h5-$dev" stoker raw failed "" "" "stoker: the HDF5 file, $where" \
                "no HDF5 file ($(why "$out/logs/make-h5.err"))"
        fi
    done
    [ -n "$gpu" ] || note stoker-raw-cuda stoker raw skipped "" "" \
        "stoker: packed raw records and the HDF5 file, onto the GPU" "no GPU (nvidia-smi)"
    local jpeg_args=(--batch-size "$batch_jpeg" --transform train --size 224 --dtype float16
        --device cpu)
    if [ -n "$jpeg_stk" ]; then
        stoker stoker-jpeg-cpu jpeg "stoker: packed JPEGs, train transform (224, float16), \
buffered, host slots" "$jpeg_stk" "${jpeg_args[@]}"
        stoker stoker-jpeg-cpu-direct jpeg "stoker: packed JPEGs, train transform (224, \
float16), --direct, host slots" "$jpeg_stk" "${jpeg_args[@]}" --direct
    else
        note stoker-jpeg-cpu stoker jpeg failed "" "" "stoker: packed JPEGs, train transform" \
            "packing failed ($(why "$out/logs/pack-jpeg.err"))"
    fi
}

# peer ID GROUP NAME SCRIPT DATA BATCH: one cold epoch of a PyTorch pipeline
peer() {
    local id=$1 group=$2 name=$3 script=$4 dat=$5 bs=$6 t
    if [ -z "$py" ]; then
        note "$id" peer "$group" absent "" "" "$name" "no python3 with numpy"
        return
    fi
    t=$(limit 150)
    measure "$id" peer "$group" "$name" "$t" "$py" "$here/peers/$script" "$dat" \
        --workers "$threads" --batch-size "$bs" --epochs 1 --cold \
        --max-seconds "$((t > 60 ? t - 40 : (t + 1) / 2))"
}
peers() {
    peer torch-classic jpeg "PyTorch DataLoader classic (ImageFolder, Pillow, \
RandomResizedCrop 224, flip, float32 normalise)" torch_classic.py "$jpeg_root" "$batch_jpeg"
    if [ -n "$h5" ]; then
        peer h5py-dataloader raw "h5py + PyTorch DataLoader, sorted random batches" \
            h5py_loader.py "$h5" "$batch_raw"
    else
        note h5py-dataloader peer raw failed "" "" "h5py + PyTorch DataLoader" "no HDF5 file"
    fi
}

# Round by round, so that a drift of the storage's speed touches every row alike; every
# second round in the reverse order, so that what ran just before (a virtual disk's host
# may cache or throttle) does too.
for round in $(seq 1 "$rounds"); do
    echo "measuring, round $round of $rounds"
    if [ $((round % 2)) = 1 ]; then
        probes; stokers; peers
    else
        peers; stokers; probes
    fi
done

# ---- report ----
src=$(findmnt -no SOURCE -T "$data" 2>/dev/null | head -n 1) || src=""
fstype=$(findmnt -no FSTYPE -T "$data" 2>/dev/null | head -n 1) || fstype=""
model=$(lsblk -dno MODEL,SIZE "$src" 2>/dev/null | head -n 1 | tr -s ' ' | sed 's/^ //') ||
    model=""
disk=$(lsblk -no PKNAME "$src" 2>/dev/null | head -n 1) || disk=""
disk=${disk:-$(basename "${src:-none}")}
read_ahead=$(cat "/sys/block/$disk/queue/read_ahead_kb" 2>/dev/null) || read_ahead="?"
stoker_version=$("$build/stoker-pack" --version 2>/dev/null | head -n 1) || stoker_version=""
raw_desc="${raw} records of 150,528 bytes ($(du -sb "$raw_stk" 2>/dev/null | cut -f 1) \
bytes packed, $raw_stk)"
h5_desc="${h5:-none}${h5:+ ($(stat -c %s "$h5") bytes)}"
report_args=(--here "$here" --runs "$runs" --logs "$out/logs" --out "$out"
    --mean-jpeg "$mean_jpeg" --dropped "$can_drop"
    --meta "command=$cmdline" --meta "gpu=${gpu:-none}" --meta "stoker=$stoker_version"
    --meta "threads=$threads"
    --meta "storage=${src:-?} ${fstype} ${model:+($model)}, read-ahead $read_ahead KiB"
    --meta "page cache=$cache_note"
    --meta "batch size=$batch_jpeg (JPEG), $batch_raw (raw)"
    --data "JPEG=$n_jpeg JPEGs, $jpeg_bytes bytes, mean $mean_jpeg bytes ($jpeg_root)"
    --data "raw=$raw_desc" --data "HDF5=$h5_desc")
"$py_report" - "${report_args[@]}" <<'PYEOF'
"""cold.sh's report: rows from OUT/runs.tsv and the tools' logs, with ratios."""
import argparse
import datetime
import json
import os
import sys

ap = argparse.ArgumentParser()
for opt in ("--here", "--runs", "--logs", "--out"):
    ap.add_argument(opt, required=True)
ap.add_argument("--mean-jpeg", type=int, required=True)
ap.add_argument("--dropped", choices=["0", "1"], required=True)
ap.add_argument("--meta", action="append", default=[])
ap.add_argument("--data", action="append", default=[])
a = ap.parse_args()
sys.path.insert(0, a.here)
from report import json_objects, last_line, machine  # noqa: E402

RAW = 150528
GROUPS = [("raw", "Raw records: 224×224×3 uint8 (150,528 bytes), one shuffled epoch each",
           "probe-raw-random", "h5py-dataloader"),
          ("jpeg", "JPEG training pipeline: one shuffled epoch each", "probe-jpeg-random",
           "torch-classic")]


def log(rid, ext):
    path = os.path.join(a.logs, f"{rid}.{ext}")
    try:
        with open(path, errors="replace") as f:
            return path, f.read()
    except OSError:
        return path, ""


def from_stoker(r, o):
    opts = o.get("options", {})
    r.update(figure=o["records_per_sec"], seconds=o["seconds"], items=o["records"],
             device=o.get("device"), direct=opts.get("direct"), verdict=o.get("verdict"))
    r["mb_per_sec"] = (o["bytes_per_sec"] if r["group"] == "raw"
                       else o["records_per_sec"] * a.mean_jpeg) / 1e6
    notes = [f"{o.get('threads')} threads", f"limit: {o.get('verdict')}"]
    if o.get("interrupted"):
        notes.append("stopped by the time limit: not a whole epoch")
    return notes


def from_probe(r, o):
    r.update(seconds=o["seconds"], items=o["reads"], mb_per_sec=o["mb_per_sec"])
    if o["mode"] == "seq":
        r.update(figure=o["mb_per_sec"], unit="MB/s")
    elif r["group"] == "jpeg":  # JPEGs/s the disk delivers: MB/s over the mean JPEG
        r.update(figure=o["mb_per_sec"] * 1e6 / a.mean_jpeg, unit="img/s")
    else:
        r.update(figure=o["reads_per_sec"])
    lat = o["latency_us"]
    notes = [f"{o['reads']:,} reads of {o['read_size']:,} bytes at {o['mb_per_sec']:,.0f} MB/s,"
             f" {o['reads_per_sec']:,.0f} reads/s; latency p50 {lat['p50']:,.0f} µs, "
             f"p99 {lat['p99']:,.0f} µs"]
    if not o["complete"]:
        notes.append(f"cut by time: {o['reads']:,} of {o['reads_planned']:,} reads")
    return notes


def from_peer(r, o):
    r["status"] = o.get("status", "failed")
    if r["status"] != "ok":
        return [o.get("note", "")]
    r.update(figure=o["figure"], seconds=o["seconds"], device=o.get("device"),
             items=o.get("images", o.get("records")))
    r["mb_per_sec"] = (o["bytes_per_sec"] if "bytes_per_sec" in o
                       else o["figure"] * a.mean_jpeg) / 1e6
    return [f"{o.get('workers')} workers", o.get("note", "")]


def fill(r):
    """One run's row from its logs."""
    out_path, out = log(f"{r['id']}.r{r['round']}", "out")
    err_path, _ = log(f"{r['id']}.r{r['round']}", "err")
    rc = r.pop("rc")
    if not rc.isdigit():  # a run that did not happen: its status and why
        r["status"] = rc
        return
    objs = [o for o in json_objects(out) if o]
    if not objs:
        r["status"] = {"124": "timeout", "125": "skipped"}.get(rc, "failed")
        r["note"] = "; ".join(n for n in (r["note"], last_line(err_path)) if n)
        return
    r["status"] = "ok"
    kinds = {"stoker": from_stoker, "probe": from_probe, "peer": from_peer}
    try:
        notes = kinds[r["kind"]](r, objs[-1])
    except (KeyError, TypeError, ValueError) as e:
        r.update(status="failed", figure=None)
        notes = [f"unreadable output in {out_path}: {type(e).__name__} {e}"]
    if rc == "124":
        notes.append("stopped by the time limit")
    r["note"] = "; ".join(n for n in [r["note"]] + notes if n)
    r["tool"] = objs[-1]


def median(v):
    v = sorted(v)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2 if v else None


def merge(runs):
    """A row from a measurement's rounds: the median of those that measured, their spread."""
    good = [r for r in runs if r["status"] == "ok" and r.get("figure") is not None]
    row = dict(good[0] if good else runs[-1])
    row.pop("tool", None)
    row["rounds"] = [{k: r.get(k) for k in ("round", "status", "figure", "seconds", "cache",
                                             "note", "tool")} for r in runs]
    if not good:  # the same reason every round, as a rule: said once
        row["cache"] = "—"
        row["note"] = "; ".join(dict.fromkeys(r["note"] for r in runs if r["note"]))
        return row
    for k in ("figure", "mb_per_sec", "seconds", "wall_seconds"):
        row[k] = median([r[k] for r in good if r.get(k) is not None])
    row["cache"] = "cold" if all(r["cache"] == "cold" for r in good) else "warm"
    notes = ["page cache NOT dropped: warm"] if row["cache"] == "warm" else []
    if len(runs) > 1:
        figs = ", ".join(num(r["figure"]) for r in good)
        notes.append(f"median of {len(good)} of {len(runs)} rounds ({figs})")
    notes += [f"round {r['round']} {r['status']}: {r['note']}" for r in runs if r not in good]
    if row["seconds"] is not None and row["seconds"] < 1:
        notes.append("under 1 s: a noisy figure, use more data")
    first = good[0]["note"]
    if len(runs) > 1:
        first = f"round {good[0]['round']}: {first}"
    row["note"] = "; ".join(n for n in notes + [first] if n)
    return row


def load():
    runs = {}
    with open(a.runs) as f:
        for ln in f:
            p = ln.rstrip("\n").split("\t")
            if len(p) < 9:
                continue
            rid, kind, group, rc, cache, wall, name, note, rnd = p[:9]
            unit = "img/s" if group == "jpeg" else "rec/s"
            r = {"id": rid, "name": name, "kind": kind, "group": group, "unit": unit,
                 "rc": rc, "cache": cache or "—", "note": note, "figure": None, "round": rnd}
            if wall:
                r["wall_seconds"] = float(wall)
            fill(r)
            runs.setdefault(rid, []).append(r)
    return [merge(v) for v in runs.values()]


def ok(r):
    return r.get("status") == "ok" and r.get("figure")


def add_ratios(rows):
    refs = {}
    for group, _, probe, torch in GROUPS:
        probes = [r for r in rows if r["id"].startswith(probe) and ok(r)]
        peer = next((r for r in rows if r["id"] == torch and ok(r)), None)
        refs[group] = {"probe": max(probes, key=lambda r: r["figure"]) if probes else None,
                       "pytorch": peer}
        for r in rows:
            if r["group"] != group or not ok(r) or r["unit"] == "MB/s":
                continue
            for key, ref in refs[group].items():
                if ref:
                    r[f"ratio_to_{key}"] = r["figure"] / ref["figure"]
    return refs


def num(v, digits=0):
    return "—" if v is None else f"{v:,.{digits}f}"


def ratio(v):
    return "—" if v is None else f"{v:.2f}×"


def table(rows, refs, group, title):
    grows = [r for r in rows if r["group"] == group]
    if not grows:
        return []
    md = ["", f"## {title}", ""]
    for key, what in (("probe", "disk"), ("pytorch", "PyTorch")):
        ref = refs[group][key]
        md.append(f"- ratio to {what}: figure ÷ " + (
            f"{ref['name']} ({num(ref['figure'])} {ref['unit']})" if ref else
            "(no such row measured)"))
    if group == "jpeg" and refs["jpeg"]["probe"]:
        p = refs["jpeg"]["probe"]
        md.append(f"- JPEGs/s the disk delivers: {num(p['figure'])} = random O_DIRECT reads "
                  f"at {num(p['mb_per_sec'])} MB/s ÷ mean JPEG {a.mean_jpeg / 1e3:.1f} KB")
    md += ["", "| run | figure | unit | MB/s read | seconds | ratio to disk | "
           "ratio to PyTorch | cache | notes |",
           "| --- | ---: | --- | ---: | ---: | ---: | ---: | --- | --- |"]
    for r in grows:
        status = "" if r["status"] == "ok" else f"**{r['status']}** "
        fig = num(r["figure"]) if ok(r) else "—"
        md.append(f"| {r['name']} | {fig} | {r['unit']} | {num(r.get('mb_per_sec'))} | "
                  f"{num(r.get('seconds'), 2)} | {ratio(r.get('ratio_to_probe'))} | "
                  f"{ratio(r.get('ratio_to_pytorch'))} | {r['cache']} | "
                  + (status + r["note"]).replace("|", "/").replace("\n", " ") + " |")
    return md


rows = load()
refs = add_ratios(rows)
meta = dict(kv.split("=", 1) for kv in a.meta if "=" in kv)
data = dict(kv.split("=", 1) for kv in a.data if "=" in kv)
cold = a.dropped == "1" and all(r["cache"] != "warm" for r in rows)
result = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
          "command": meta.pop("command", ""), "cold": cold,
          "machine": dict(machine(), **meta), "data": data, "mean_jpeg_bytes": a.mean_jpeg,
          "references": {g: {k: v["id"] if v else None for k, v in refs[g].items()}
                         for g in refs},
          "rows": rows}
with open(os.path.join(a.out, "cold-results.json"), "w") as f:
    json.dump(result, f, indent=1, ensure_ascii=False)
    f.write("\n")
title = "# Cold-cache read figures" if cold else \
    "# Read figures: WARM (the page cache was not dropped)"
md = [title, "", f"{result['date']}. Command: `{result['command']}`", ""]
md += [f"- {k}: {v}" for k, v in result["machine"].items()]
md += [f"- data ({k}): {v}" for k, v in data.items()]
for group, heading, _, _ in GROUPS:
    md += table(rows, refs, group, heading)
md += ["", "Figures are items per second over the run's timed part (stoker-bench: the whole "
       "epoch, nothing untimed; the PyTorch rows: one epoch from the first request, the "
       "workers' start included); MB/s read counts record bytes (JPEG rows: images × the mean "
       "JPEG size). The disk rows read whole 4096-byte pages with O_DIRECT, past any cache, "
       "one read per record: buffered runs can pass them (ratio above 1), as the kernel's "
       "read-ahead fetches the neighbouring records of the epoch in the same, larger reads."]
with open(os.path.join(a.out, "cold-results.md"), "w") as f:
    f.write("\n".join(md) + "\n")
PYEOF
echo "cold.sh: done in $(($(date +%s) - start)) s: $out/cold-results.md, cold-results.json"
cat "$out/cold-results.md"
