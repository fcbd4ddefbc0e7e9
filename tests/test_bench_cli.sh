#!/bin/bash
# stoker-bench smoke test: --json gives one valid JSON object with the documented keys;
# --dump-indices lists every batch, and each epoch delivers every record exactly once
# (and, for two ranks, disjoint and complete apart from the padding); bad arguments fail.
set -euo pipefail

PY=/usr/bin/python3
[ -x "$PY" ] && "$PY" -c 'import numpy' 2>/dev/null || { echo "no python3 with numpy"; exit 77; }
[ -n "${STOKER_BENCH:-}" ] && [ -x "$STOKER_BENCH" ] || { echo "stoker-bench not built"; exit 77; }
LIB="$STOKER_BUILD_DIR/libstoker.so"
mkdir -p "$STOKER_TEST_TMP"
TMP=$(mktemp -d "$STOKER_TEST_TMP/bench-cli-XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# A sanitizer build's library needs its runtime loaded first when Python dlopens it.
PRELOAD=""
for rt in asan tsan ubsan; do
    if ldd "$LIB" | grep -q "lib$rt"; then
        PRELOAD="$PRELOAD $(ldd "$LIB" | awk -v rt="lib$rt" '$1 ~ rt {print $3}')"
    fi
done
LD_PRELOAD="$PRELOAD" ASAN_OPTIONS=detect_leaks=0 \
    "$PY" "$STOKER_SOURCE_DIR/bench/make_raw_dataset.py" --lib "$LIB" "$TMP/data" \
    --records 203 --shape 5,7,3 --shard-size 65536

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

# bad arguments and a missing data set fail with a message
if "$STOKER_BENCH" "$TMP/data" --backend nope > /dev/null 2> "$TMP/err"; then exit 1; fi
grep -q "bad value for --backend" "$TMP/err"
if "$STOKER_BENCH" "$TMP/nothing" > /dev/null 2> "$TMP/err"; then exit 1; fi
grep -q "stoker-bench:" "$TMP/err"
if "$STOKER_BENCH" "$TMP/data" --rank 2 --world-size 2 > /dev/null 2> "$TMP/err"; then exit 1; fi
grep -q "rank 2" "$TMP/err"
"$STOKER_BENCH" --help | grep -q "usage: stoker-bench"
echo "ok"
