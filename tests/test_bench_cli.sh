#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# stoker-bench smoke test: --json gives one valid JSON object with the documented keys;
# --dump-indices lists every batch, and each epoch delivers every record exactly once
# (and, for two ranks, disjoint and complete apart from the padding); bad arguments fail
# with the option parser's messages (shared with stoker-pack); names are printed escaped;
# --warmup counts batches, and one that leaves --epochs N nothing to time is refused;
# --plot draws a run of any length.
# On a JPEG data set: the pipeline's options and per-stage times in the JSON, --plot's SVG,
# the consumer verdict under --compute-ms, --io's two read rates, --decoder read back with
# the images each side decoded, and SIGINT (exit 130 with the partial results).
set -euo pipefail

PY=/usr/bin/python3
[ -x "$PY" ] && "$PY" -c 'import numpy' 2>/dev/null || { echo "no python3 with numpy"; exit 77; }
[ -n "${STOKER_BENCH:-}" ] && [ -x "$STOKER_BENCH" ] || { echo "stoker-bench not built"; exit 77; }
[ -n "${STOKER_PACK:-}" ] && [ -x "$STOKER_PACK" ] || { echo "stoker-pack not built"; exit 77; }
mkdir -p "$STOKER_TEST_TMP"
TMP=$(mktemp -d "$STOKER_TEST_TMP/bench-cli-XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# 203 raw uint8 records of shape 5x7x3, packed from a .npy by stoker-pack (no library is
# loaded into Python, which a sanitizer build's runtime does not always allow); aligned to
# 4096 (stoker-pack would pack records this small back to back), so that they fill several
# shards of 64 KiB
"$PY" -c 'import numpy as np, sys
np.save(sys.argv[1], (np.arange(203 * 105) % 251).astype(np.uint8).reshape(203, 5, 7, 3))' \
    "$TMP/raw.npy"
"$STOKER_PACK" --shard-size 65536 --align 4096 "$TMP/raw.npy" "$TMP/data" > /dev/null 2>&1

"$STOKER_BENCH" "$TMP/data" --epochs 3 --batch-size 16 --threads 2 --json \
    --dump-indices "$TMP/idx.txt" > "$TMP/out.json"
"$STOKER_BENCH" "$TMP/data" --epochs 1 --batch-size 10 --threads 1 --backend pread \
    --no-shuffle --rank 0 --world-size 2 --json --dump-indices "$TMP/r0.txt" > "$TMP/r0.json"
"$STOKER_BENCH" "$TMP/data" --epochs 1 --batch-size 10 --threads 3 --depth 2 \
    --no-shuffle --rank 1 --world-size 2 --dump-indices "$TMP/r1.txt" > "$TMP/r1.txt.out"
grep -q "^back-end " "$TMP/r1.txt.out"
grep -q "^simd " "$TMP/r1.txt.out"
grep -q "world_size=2" "$TMP/r1.txt.out"

"$PY" - "$TMP" <<'PYEOF'
import json, sys
tmp = sys.argv[1]
text = open(tmp + "/out.json").read()
assert text.count("\n") == 1, "one JSON object on one line"
o = json.loads(text)
need = ["records_per_sec", "bytes_per_sec", "wait_fraction", "backend", "device", "threads",
        "batches", "skipped", "simd", "epochs", "records", "bytes", "seconds", "version"]
missing = [k for k in need if k not in o]
assert not missing, "missing keys: %s" % missing
assert o["backend"] in ("io_uring", "pread"), o["backend"]
assert o["device"] == "cpu" and o["threads"] == 2 and o["epochs"] == 3 and o["skipped"] == 0
assert 0 <= o["wait_fraction"] <= 1.0001, o["wait_fraction"]
assert o["records_per_sec"] > 0 and o["bytes_per_sec"] > 0
assert o["simd"] in ("scalar", "avx2", "avx512"), o["simd"]
# the options as the loader runs with them: the back-end it chose, no image pipeline
op = o["options"]
assert (op["backend"], op["simd"], op["batch_size"], op["threads"]) == \
    (o["backend"], o["simd"], 16, 2), op
assert (op["transform"], op["dtype"], op["size"], op["layout"], op["dct"]) == \
    ("none", "uint8", 0, "n/a", "n/a"), op
# nothing to decode: no decoder, no image decoded on either side
assert (op["decoder"], o["decoder"], o["cpu_decoded"], o["gpu_decoded"]) == \
    ("n/a", "n/a", 0, 0), o

# 203 records, batch 16: 13 batches per epoch, the last of 11; warm-up batch included
lines = [l.split() for l in open(tmp + "/idx.txt").read().splitlines()]
assert len(lines) == 3 * 13, len(lines)
assert o["batches"] == 3 * 13 - 1 and o["records"] == 3 * 203 - 16, (o["batches"], o["records"])
assert o["bytes"] == o["records"] * 105
orders = []
for e in range(3):
    ep = [int(x) for l in lines[13 * e:13 * (e + 1)] for x in l]
    assert sorted(ep) == list(range(203)), "epoch %d is not a permutation" % e
    assert [len(l) for l in lines[13 * e:13 * (e + 1)]] == [16] * 12 + [11]
    orders.append(ep)
assert orders[0] != orders[1] and orders[1] != orders[2], "epochs share an order"

# two ranks, no shuffle: 204 padded records, global batches of 20, rank r takes its slice
r0 = [[int(x) for x in l.split()] for l in open(tmp + "/r0.txt").read().splitlines()]
r1 = [[int(x) for x in l.split()] for l in open(tmp + "/r1.txt").read().splitlines()]
assert len(r0) == len(r1) == 11, (len(r0), len(r1))
assert [len(b) for b in r0] == [len(b) for b in r1] == [10] * 10 + [2]
perm = list(range(203)) + [0]
for k in range(11):
    g = perm[20 * k:20 * (k + 1)]
    half = len(g) // 2
    assert r0[k] == g[:half] and r1[k] == g[half:], k
allids = [x for b in r0 + r1 for x in b]
assert sorted(allids) == sorted(list(range(203)) + [0])
assert json.load(open(tmp + "/r0.json"))["backend"] == "pread"
print("bench cli ok")
PYEOF

# The length of the run. Left out, --epochs runs whole epochs until at least 10 have passed
# and --min-seconds (3 by default) of timed delivery; an explicit --epochs N runs exactly N.
# A figure from a run shorter than --min-seconds says so (0 disables the rule and the note).
"$STOKER_BENCH" "$TMP/data" --batch-size 16 --json --dump-indices "$TMP/long_idx.txt" \
    > "$TMP/long.json"
"$STOKER_BENCH" "$TMP/data" --batch-size 16 --min-seconds 0.2 --json > "$TMP/min.json"
"$STOKER_BENCH" "$TMP/data" --batch-size 16 --epochs 1 --json > "$TMP/one.json"
"$STOKER_BENCH" "$TMP/data" --batch-size 16 --epochs 1 > "$TMP/one.txt"
grep -Eq "^warning      run too short for a stable figure: [0-9.]+ s < 3 s; .*--epochs" \
    "$TMP/one.txt"
"$STOKER_BENCH" "$TMP/data" --batch-size 16 --epochs 1 --min-seconds 0 > "$TMP/one0.txt"
! grep -q "too short" "$TMP/one0.txt" || { echo "--min-seconds 0 still warns"; exit 1; }
# epochs of no batch (a global batch larger than the data set, dropped): nothing to time, so
# the run ends instead of spinning through empty epochs for --min-seconds, or in the warm-up
"$STOKER_BENCH" "$TMP/data" --batch-size 300 --drop-last --json > "$TMP/empty.json"
"$STOKER_BENCH" "$TMP/data" --batch-size 300 --drop-last --warmup 5 --json > "$TMP/empty_w.json"
# --warmup counts batches, never an epoch's end: 20 of 3 epochs of 13 leave 19 to time, 12
# of one leave 1; without --epochs the run goes on past a warm-up of 10 whole epochs to time
# the next one
"$STOKER_BENCH" "$TMP/data" --batch-size 16 --epochs 3 --warmup 20 --json > "$TMP/w20.json"
"$STOKER_BENCH" "$TMP/data" --batch-size 16 --epochs 1 --warmup 12 --json > "$TMP/w12.json"
"$STOKER_BENCH" "$TMP/data" --batch-size 16 --warmup 130 --min-seconds 0 --json \
    > "$TMP/w130.json"
# a warm-up that takes every batch of --epochs N would leave nothing to time: refused before
# the run, saying how many batches the run has
for w in 13 1000; do
    if "$STOKER_BENCH" "$TMP/data" --batch-size 16 --epochs 1 --warmup $w > "$TMP/out" \
        2> "$TMP/err"; then exit 1; fi
    grep -q -- "--warmup $w takes every batch of --epochs 1 (13 batches an epoch)" "$TMP/err" ||
        { cat "$TMP/err"; exit 1; }
    [ ! -s "$TMP/out" ] || { echo "--warmup $w: the run went ahead"; exit 1; }
done
# --max-cache: the page cache the data set may fill; a larger one is read dropping its pages
"$STOKER_BENCH" "$TMP/data" --epochs 2 --batch-size 16 --max-cache 4K --json > "$TMP/mc.json"
"$STOKER_BENCH" "$TMP/data" --epochs 2 --batch-size 16 --max-cache 4K > "$TMP/mc.txt"
grep -Eq "^options .* max_cache=4096( |$)" "$TMP/mc.txt"
grep -Eq "^stats .* dropped_bytes=[1-9][0-9]*( |$)" "$TMP/mc.txt"
"$STOKER_BENCH" "$TMP/data" --epochs 1 --max-cache 1G --json > "$TMP/mc1g.json"
"$PY" - "$TMP" <<'PYEOF'
import json, sys
tmp = sys.argv[1]
load = lambda name: json.load(open("%s/%s.json" % (tmp, name)))
# 203 records, batch 16: 13 batches an epoch, the first one taken by the warm-up
for name, least in (("long", 3.0), ("min", 0.2)):
    o = load(name)
    assert o["epochs"] >= 10 and o["seconds"] >= least, (name, o["epochs"], o["seconds"])
    assert o["min_seconds"] == least and o["too_short"] is False, (name, o)
    assert o["options"]["epochs"] is None and o["options"]["min_seconds"] == least, o["options"]
    assert o["batches"] == 13 * o["epochs"] - 1, (name, o["batches"], o["epochs"])
    assert o["records"] == 203 * o["epochs"] - 16, (name, o["records"], o["epochs"])
assert load("min")["seconds"] < 3, "--min-seconds 0.2 ran for the default 3 s"
lines = open(tmp + "/long_idx.txt").read().splitlines()
assert len(lines) == 13 * load("long")["epochs"], len(lines)  # whole epochs only
one = load("one")
assert (one["epochs"], one["options"]["epochs"], one["batches"]) == (1, 1, 12), one
assert one["too_short"] is True and one["seconds"] < one["min_seconds"] == 3, one
empty = load("empty")
assert empty["records"] == 0 and empty["epochs"] <= 2 and empty["too_short"] is True, empty
empty = load("empty_w")
assert empty["records"] == empty["warmup_batches"] == 0 and empty["epochs"] <= 2, empty
w = load("w20")
assert (w["warmup_batches"], w["warmup_records"], w["batches"], w["records"], w["epochs"]) == \
    (20, 203 + 7 * 16, 19, 3 * 203 - 203 - 7 * 16, 3), w
w = load("w12")
assert (w["warmup_batches"], w["batches"], w["records"], w["epochs"]) == (12, 1, 11, 1), w
w = load("w130")
assert (w["warmup_batches"], w["batches"], w["records"], w["epochs"]) == (130, 13, 203, 11), w
# the timeline ends where the timed run does, however short: a point at least
assert one["timeline"] and abs(one["timeline"][-1][0] - one["seconds"]) < 0.01, one
mc = load("mc")
assert mc["options"]["max_cache"] == 4096 and mc["dropped_bytes"] > 0, mc
assert load("mc1g")["options"]["max_cache"] == 1 << 30
# the library's default: half the memory available, more than this data set's 21 KB
big = load("long")
assert big["options"]["max_cache"] > 203 * 105 and big["dropped_bytes"] == 0, big
print("bench length ok")
PYEOF

# bad arguments and a missing data set fail with a message
if "$STOKER_BENCH" "$TMP/data" --backend nope > /dev/null 2> "$TMP/err"; then exit 1; fi
grep -q "invalid value 'nope' for --backend: expected one of auto, io_uring, pread" "$TMP/err"
# the option parser stoker-pack shares: --name=value and unambiguous prefixes are taken;
# usage errors name the option and say where the options are listed
"$STOKER_BENCH" "$TMP/data" --epochs=1 --batch-si 64 --no-shuf --json > /dev/null
usage_err() {
    local want=$1
    shift
    if "$STOKER_BENCH" "$@" > /dev/null 2> "$TMP/err"; then exit 1; fi
    grep -qF -- "stoker-bench: $want" "$TMP/err" || { cat "$TMP/err"; exit 1; }
    grep -qF -- "(stoker-bench --help lists the options)" "$TMP/err"
}
usage_err "--epochs requires a value" "$TMP/data" --epochs
usage_err "unknown option '--bogus'" "$TMP/data" --bogus
usage_err "--json takes no value" "$TMP/data" --json=1
usage_err "ambiguous option '--dc' (--dct, --dct-scale)" "$TMP/data" --dc fast
usage_err "invalid value '0' for --epochs: expected an integer >= 1" "$TMP/data" --epochs 0
# enum values are named as the library's tables name them; "hdf5" is a back-end that is only
# ever reported
usage_err "invalid value 'hdf5' for --backend: expected one of auto, io_uring, pread" \
    "$TMP/data" --backend hdf5
usage_err "invalid value 'slow' for --dct: expected one of islow, ifast" "$TMP/data" --dct slow
usage_err "invalid value 'nvjpeg' for --decoder: expected one of auto, cpu, gpu" "$TMP/data" \
    --decoder nvjpeg
usage_err "unexpected argument '$TMP/data'" "$TMP/data" "$TMP/data"
usage_err "invalid value '-1' for --min-seconds: expected a number from 0" "$TMP/data" \
    --min-seconds -1
usage_err "invalid value '0' for --max-cache: expected a size in bytes > 0" "$TMP/data" \
    --max-cache 0
usage_err "invalid value '2X' for --max-cache" "$TMP/data" --max-cache 2X
# the library's options take the ranges of its table, as the Python binding does: 0 is the
# default where the table says so, and the seed is 64 bits, from 0 to 2^64 - 1
usage_err "invalid value '-1' for --seed: expected an integer >= 0" "$TMP/data" --seed -1
usage_err "invalid value '2000' for --threads: expected an integer from 0 to 1024" \
    "$TMP/data" --threads 2000
usage_err "invalid value '0' for --batch-size: expected an integer from 1 to" "$TMP/data" \
    --batch-size 0
# a flag takes what its option's row takes: fetch_retries 0 means no retry (not a size > 0),
# and a block size below the table's least is refused naming the range
"$STOKER_BENCH" "$TMP/data" --epochs 1 --fetch-retries 0 --fetch-retry-ms 0 > /dev/null
usage_err "invalid value '1K' for --block-size: expected a size from 4096 to" "$TMP/data" \
    --block-size 1K
"$STOKER_BENCH" "$TMP/data" --epochs 1 --threads 0 --seed 18446744073709551615 --json \
    > "$TMP/seed.json" 2> /dev/null || { cat "$TMP/seed.json"; exit 1; }
grep -q '"seed":18446744073709551615,' "$TMP/seed.json" || { cat "$TMP/seed.json"; exit 1; }
grep -q '"threads":[1-9]' "$TMP/seed.json" || { cat "$TMP/seed.json"; exit 1; }
if "$STOKER_BENCH" "$TMP/nothing" > /dev/null 2> "$TMP/err"; then exit 1; fi
grep -q "stoker-bench:" "$TMP/err"
if "$STOKER_BENCH" "$TMP/data" --rank 2 --world-size 2 > /dev/null 2> "$TMP/err"; then exit 1; fi
grep -q "rank 2" "$TMP/err"
# (into a file: grep -q would leave at the first line, and the rest of the help hit a closed
# pipe)
"$STOKER_BENCH" --help > "$TMP/help"
grep -q "usage: stoker-bench" "$TMP/help"
grep -q -- "--vflip X .*probability" "$TMP/help"
# --plot into a folder that does not exist fails before the run: no report is printed
if "$STOKER_BENCH" "$TMP/data" --epochs 50 --plot "$TMP/no/such/dir/p.svg" > "$TMP/out" \
    2> "$TMP/err"; then exit 1; fi
grep -q -- "--plot .*no/such/dir.*No such file or directory" "$TMP/err"
[ ! -s "$TMP/out" ] || { echo "--plot into a missing folder: the run went ahead"; exit 1; }
# output files never overwrite the data set's own files, nor each other
cp "$TMP/data/manifest.stk" "$TMP/manifest.before"
for opt in --plot --dump-indices; do
    if "$STOKER_BENCH" "$TMP/data" $opt "$TMP/data/manifest.stk" > /dev/null 2> "$TMP/err"
    then exit 1; fi
    grep -q -- "$opt .*manifest.stk.*data set" "$TMP/err"
    cmp "$TMP/data/manifest.stk" "$TMP/manifest.before"
done
if "$STOKER_BENCH" "$TMP/data" --plot "$TMP/same" --dump-indices "$TMP/same" > /dev/null \
    2> "$TMP/err"; then exit 1; fi
grep -q "same file" "$TMP/err"
# image pipeline options on raw records would do nothing: refused before the run
for opt in "--size 64" "--resize 80" "--layout NHWC" "--dct fast" "--antialias always" \
    "--resampler pillow" "--dct-scale never" "--decoder cpu" "--decoder auto" "--decoder gpu" \
    "--vflip 0.5" "--scale-min 0.5" "--ratio-max 2"; do
    if "$STOKER_BENCH" "$TMP/data" $opt > "$TMP/out" 2> "$TMP/err"; then exit 1; fi
    grep -q -- "${opt% *} applies to the JPEG image pipeline" "$TMP/err"
    [ ! -s "$TMP/out" ] || { echo "$opt on raw records: the run went ahead"; exit 1; }
done
if "$STOKER_BENCH" "$TMP/data" --compute-sleep > /dev/null 2> "$TMP/err"; then exit 1; fi
grep -q -- "--compute-sleep .*--compute-ms" "$TMP/err"
# names from the command line and the library's messages about them are printed with
# control characters escaped, never raw to the terminal
ESC=$(printf '\033')
ODD="$TMP/odd
name$ESC[31m"
cp -r "$TMP/data" "$ODD"
raw_esc() { LC_ALL=C grep -q "$ESC" "$1"; }
"$STOKER_BENCH" "$ODD" --epochs 1 --batch-size 64 > "$TMP/out" 2> "$TMP/err"
grep -qF 'data set     '"$TMP"'/odd\nname\x1b[31m' "$TMP/out"
! raw_esc "$TMP/out" && ! raw_esc "$TMP/err" || { echo "a raw ESC was printed"; exit 1; }
if "$STOKER_BENCH" "$ODD-missing" > /dev/null 2> "$TMP/err"; then exit 1; fi
grep -qF 'odd\nname\x1b[31m-missing' "$TMP/err"
! raw_esc "$TMP/err" || { echo "a raw ESC was printed with the library's message"; exit 1; }
if "$STOKER_BENCH" "$ODD" --size 64 > /dev/null 2> "$TMP/err"; then exit 1; fi
grep -qF 'odd\nname\x1b[31m (its records are not JPEG)' "$TMP/err"
for opt in --plot --dump-indices; do
    if "$STOKER_BENCH" "$ODD" $opt "$TMP/no$ESC/x" > /dev/null 2> "$TMP/err"; then exit 1; fi
    grep -qF -- "$opt $TMP/no\x1b/x: cannot write it" "$TMP/err"
    ! raw_esc "$TMP/err" || { echo "$opt: a raw ESC was printed"; exit 1; }
done
if "$STOKER_BENCH" "$ODD" --io --epochs 1 --batch-size 64 --backend "$ESC" > /dev/null \
    2> "$TMP/err"; then exit 1; fi
grep -qF "invalid value '\x1b' for --backend" "$TMP/err"
! raw_esc "$TMP/err" || { echo "a raw ESC was printed with a bad value"; exit 1; }
rm -rf "$ODD"
# --json stays valid JSON whatever bytes the data set's name holds: quotes and controls
# escaped, bytes that are not UTF-8 as U+FFFD
ODD="$TMP/q\"b$(printf '\377\t')x"
cp -r "$TMP/data" "$ODD"
"$STOKER_BENCH" "$ODD" --epochs 1 --batch-size 64 --json > "$TMP/odd.json"
"$PY" - "$TMP/odd.json" "$TMP" <<'PYEOF'
import json, sys
o = json.loads(open(sys.argv[1], "rb").read())
assert o["data"] == sys.argv[2] + '/q"b\ufffd\tx', o["data"]
PYEOF
rm -rf "$ODD"

# a failed run leaves no partial --dump-indices file, and an older one as it was
cp -r "$TMP/data" "$TMP/bad"
"$PY" - "$TMP/bad" <<'PYEOF'
import glob, sys
shard = sorted(glob.glob(sys.argv[1] + "/shard-*.stk"))[1]
b = bytearray(open(shard, "rb").read())
b[4096 + 50] ^= 0xFF  # inside the shard's first payload
open(shard, "wb").write(bytes(b))
PYEOF
echo "an older dump" > "$TMP/bad_dump.txt"
if "$STOKER_BENCH" "$TMP/bad" --batch-size 4 --no-shuffle --dump-indices "$TMP/bad_dump.txt" \
    > /dev/null 2> "$TMP/err"; then exit 1; fi
grep -q "CRC" "$TMP/err"
[ "$(cat "$TMP/bad_dump.txt")" = "an older dump" ] ||
    { echo "a failed run spoilt the older dump"; exit 1; }
ls "$TMP" | grep -q "bad_dump.txt.tmp" && { echo "a temporary dump was left"; exit 1; }
# a run shorter than a timeline's step is plotted all the same: its one point holds across
# the run (before, no plot, and a failing exit status after a good benchmark)
"$STOKER_BENCH" "$TMP/data" --epochs 1 --plot "$TMP/short.svg" > "$TMP/out"
grep -q "^result " "$TMP/out"
"$PY" - "$TMP/short.svg" <<'PYEOF'
import sys
import xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
lines = ET.parse(sys.argv[1]).getroot().findall(ns + "polyline")
assert len(lines) == 2 and all(len(l.get("points").split()) >= 2 for l in lines), \
    [l.get("points") for l in lines]
PYEOF
# --gpu-normalize needs a device: without one (or with --device cpu) create says so
if "$STOKER_BENCH" "$TMP/data" --device cpu --gpu-normalize > /dev/null 2> "$TMP/err"; then
    exit 1
fi
grep -q "GPU normalisation needs a usable CUDA device" "$TMP/err"

# ---- a JPEG data set: the image pipeline's options, stages, plot, verdicts, --io, SIGINT ----
"$PY" -c 'import PIL' 2>/dev/null || { echo "no PIL: JPEG part skipped"; echo "ok"; exit 0; }
"$PY" - "$TMP/jpg" <<'PYEOF'
import os, sys
import numpy as np
from PIL import Image
rng = np.random.default_rng(3)
for i in range(96):
    d = os.path.join(sys.argv[1], "c%d" % (i % 3))
    os.makedirs(d, exist_ok=True)
    w, h = int(rng.integers(80, 300)), int(rng.integers(80, 300))
    x = np.linspace(0, 255, w)[None, :, None] + rng.integers(0, 60, (h, w, 3))
    Image.fromarray(np.clip(x, 0, 255).astype(np.uint8)).save(os.path.join(d, "%d.jpg" % i),
                                                             quality=85)
PYEOF
"$STOKER_PACK" --shard-size 200K "$TMP/jpg" "$TMP/jds" > /dev/null 2>&1
# the same JPEGs unchecked: each decoded to its end once, on its first use (full_checks)
"$STOKER_PACK" --no-validate "$TMP/jpg" "$TMP/jds_unchecked" > /dev/null 2>&1
"$STOKER_BENCH" "$TMP/jds_unchecked" --epochs 3 --batch-size 16 --threads 2 --size 32 \
    --device cpu --json > "$TMP/unchecked.json"
"$STOKER_BENCH" "$TMP/jds_unchecked" --epochs 1 --batch-size 16 --threads 2 --size 32 \
    --device cpu > "$TMP/unchecked.txt"
# (a record read ahead into the next epoch while its first use is still being decoded may
# be checked twice: at most a batch more)
grep -Eq "full_checks=(9[6-9]|10[0-9]|11[0-2])( |$)" "$TMP/unchecked.txt" ||
    { echo "full_checks not 96..112 in:"; cat "$TMP/unchecked.txt"; exit 1; }

# a consumer of 80 ms a batch makes the run long enough for a timeline of several points
"$STOKER_BENCH" "$TMP/jds" --epochs 2 --batch-size 16 --threads 2 --size 64 --json \
    --compute-ms 80 --compute-sleep --plot "$TMP/plot.svg" > "$TMP/j.json"
"$STOKER_BENCH" "$TMP/jds" --epochs 1 --batch-size 8 --threads 2 --size 32 --dtype uint8 \
    --layout NHWC --transform eval --dct fast --antialias always --resampler pillow --simd scalar \
    --dct-scale never --compute-ms 150 --compute-sleep --decoder CPU --json \
    > "$TMP/c.json"
"$STOKER_BENCH" "$TMP/jds" --epochs 1 --batch-size 16 --threads 1 --size 32 --io \
    --device cpu --decoder gpu --vflip 0.25 > "$TMP/io.txt"
# the float options as the loader runs with them, every one the table has
grep -q "^floats       vflip=0.25 mean_r=0.485 .* std_b=0.225 scale_min=0.08 scale_max=1 ratio_min=0.75 ratio_max=1.33333 min_box_size=0 min_box_visibility=0 hflip=0.5$" "$TMP/io.txt"
RATES="buffered [0-9]+ MB/s, O_DIRECT ([0-9]+ MB/s|not measured \(O_DIRECT refused)"
grep -Eq "^raw read .* $RATES" "$TMP/io.txt"
grep -q "^pipeline     transform=train size=32 resize=37 dct=islow antialias=over2x \
resampler=fast dct_scale=train dtype=float32 layout=nchw gpu_normalize=0 decoder=cpu$" \
    "$TMP/io.txt"
# host batches: the workers decode every image, even with --decoder gpu, and the report
# says why the GPU decoded none
grep -Eq "^decoder      cpu: cpu_decoded=[1-9][0-9]* gpu_decoded=0 gpu_retried=0 \
gpu_fallbacks=0 gpu_share=0.00 cpu_busy=[01]\.[0-9]+ gpu_busy=0.00 full_checks=0 \(.+\)$" "$TMP/io.txt"
grep -Eq "^stats .* reduced=[1-9][0-9]*( |$)" "$TMP/io.txt" # 80..300-pixel images, 32 out
grep -q "^verdict      [a-z]" "$TMP/io.txt"

# SIGINT: stops at the next batch, reports what it measured, exit status 130
"$STOKER_BENCH" "$TMP/jds" --epochs 1000000 --batch-size 8 --threads 1 --size 32 --json \
    > "$TMP/int.json" 2> "$TMP/int.err" &
PID=$!
sleep 2
kill -INT $PID
set +e
wait $PID
RC=$?
set -e
[ "$RC" = 130 ] || { echo "SIGINT: exit status $RC, want 130"; cat "$TMP/int.err"; exit 1; }

"$PY" - "$TMP" <<'PYEOF'
import json, sys
import xml.etree.ElementTree as ET
tmp = sys.argv[1]
text = open(tmp + "/j.json").read()
assert text.count("\n") == 1, "one JSON object on one line"
o = json.loads(text)
need = ["records_per_sec", "bytes_per_sec", "wait_fraction", "backend", "device", "threads",
        "batches", "skipped", "simd", "version", "epochs", "records", "bytes", "seconds",
        "cpu_seconds_per_record", "peak_rss_bytes", "pinned_bytes", "stage_seconds",
        "verdict", "options", "timeline"]
missing = [k for k in need if k not in o]
assert not missing, "missing keys: %s" % missing
st = o["stage_seconds"]
for k in ("read", "crc", "decode", "resize", "normalize", "h2d", "wait"):
    assert k in st and st[k] >= 0, (k, st)
assert st["decode"] > 0 and st["resize"] > 0 and st["read"] > 0, st
op = o["options"]
assert (op["transform"], op["size"], op["dtype"], op["layout"], op["dct"], op["antialias"],
        op["resampler"], op["dct_scale"]) == ("train", 64, "float32", "nchw", "islow",
                                             "over2x", "fast", "train"), op
assert 0 < o["reduced"] < o["records_read"], o  # crops of 128+ pixels both ways, only
assert o["device"] == "cpu" and op["device"] == "cpu"
assert o["records"] == 2 * 96 - 16 and o["bytes"] == o["records"] * 3 * 64 * 64 * 4, o
assert 0 < o["cpu_seconds_per_record"] < 1 and o["peak_rss_bytes"] > 1 << 20
assert o["verdict"] in ("storage", "crc", "decode", "transform", "host-to-device copy",
                        "consumer"), o["verdict"]
# host batches: the default decoder decodes on the CPU, every image delivered and more
# (the read-ahead), and says why the GPU decoded none
for c in (o, json.load(open(tmp + "/c.json"))):
    assert c["options"]["decoder"] == c["decoder"] == "cpu", c
    assert c["cpu_decoded"] >= c["records"] + c["warmup_records"], c
    assert (c["gpu_decoded"], c["gpu_retried"], c["gpu_fallbacks"]) == (0, 0, 0), c
    assert c["gpu_share"] == 0 and c["gpu_busy"] == 0 and 0 <= c["cpu_busy"] <= 1, c
    assert isinstance(c["decoder_note"], str) and c["decoder_note"], c
for t, rps, wf in o["timeline"]:
    assert t > 0 and rps >= 0 and 0 <= wf <= 1, (t, rps, wf)

svg = ET.parse(tmp + "/plot.svg").getroot()
assert svg.tag.endswith("svg"), svg.tag
ns = "{http://www.w3.org/2000/svg}"
lines = svg.findall(ns + "polyline")
assert len(lines) == 2 and all(len(l.get("points").split()) >= 2 for l in lines), lines
assert any("records/s" in (t.text or "") for t in svg.iter(ns + "text"))

c = json.load(open(tmp + "/c.json"))
assert c["wait_fraction"] < 0.05 and c["verdict"] == "consumer", (c["wait_fraction"],
                                                                  c["verdict"])
co = c["options"]
assert (co["transform"], co["size"], co["dtype"], co["layout"], co["dct"], co["antialias"],
        co["resampler"], co["dct_scale"], co["simd"], co["compute_ms"], co["compute"]) == \
    ("eval", 32, "uint8", "nhwc", "ifast", "always", "pillow", "never", "scalar", 150,
     "sleep"), co
assert c["reduced"] == 0, c
assert c["bytes"] == c["records"] * 32 * 32 * 3

u = json.load(open(tmp + "/unchecked.json"))
assert 96 <= u["full_checks"] <= 96 + 16, u  # once per record over three epochs
assert o["full_checks"] == 0, o   # a checked data set's JPEGs never

i = json.load(open(tmp + "/int.json"))
assert i["interrupted"] is True and i["records"] > 0, i
assert i["too_short"] is (i["seconds"] < 3), i  # stopped after about 2 s
print("bench jpeg ok")
PYEOF
echo "ok"
