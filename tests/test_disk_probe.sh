#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# bench_disk_probe (bench/ceiling/disk_probe.c) on real files with real O_DIRECT io_uring
# reads: random reads cover every whole 4096-rounded slot of every file once, sequential
# reads every byte, and the JSON's counts, rates and byte sums match the files; --seconds
# stops it early with consistent counts; bad arguments and files are refused with messages
# that name the option or file; a file system that refuses O_DIRECT is named as such.
set -uo pipefail

PY=/usr/bin/python3
PROBE=${STOKER_BUILD_DIR:-}/bench_disk_probe
[ -x "$PROBE" ] || { echo "bench_disk_probe not built"; exit 77; }
mkdir -p "${STOKER_TEST_TMP:?}"
TMP=$(mktemp -d "$STOKER_TEST_TMP/disk-probe-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# two files: 40 slots of 151,552 bytes and a tail; 9 slots and a tail
head -c $((40 * 151552 + 1000)) /dev/urandom > "$TMP/a"
head -c $((9 * 151552 + 4095)) /dev/urandom > "$TMP/b"

"$PROBE" random "$TMP/a" "$TMP/b" --size 150528 --qd 8 --threads 2 --seed 7 --checksum \
    > "$TMP/random.json" 2> "$TMP/random.err"
rc=$?
if [ "$rc" = 3 ]; then
    # the build folder's file system refuses O_DIRECT: the probe must say so, and nothing else
    grep -q "$TMP/a: the file system refuses O_DIRECT" "$TMP/random.err" ||
        fail "refusal not named: $(cat "$TMP/random.err")"
    [ ! -s "$TMP/random.json" ] || fail "figures printed despite the refusal"
    echo "O_DIRECT refused by the file system of $TMP, and said so"
    exit 0
fi
[ "$rc" = 0 ] || fail "random: exit $rc: $(cat "$TMP/random.err")"
"$PROBE" seq "$TMP/a" "$TMP/b" --block 64K --qd 4 --threads 3 --checksum \
    > "$TMP/seq.json" 2> "$TMP/seq.err" || fail "seq: $(cat "$TMP/seq.err")"
head -c $((110 * 151552)) /dev/urandom > "$TMP/c"
"$PROBE" random "$TMP/c" --size 151552 --qd 1 --seconds 0.002 > "$TMP/cut.json" \
    2> "$TMP/cut.err" || fail "cut: $(cat "$TMP/cut.err")"

"$PY" - "$TMP" <<'PYEOF' || exit 1
import json, os, sys
tmp = sys.argv[1]
files = [os.path.join(tmp, n) for n in ("a", "b")]
data = [open(f, "rb").read() for f in files]


def one(name):
    text = open(os.path.join(tmp, name)).read()
    assert text.count("\n") == 1 and text.endswith("}\n"), f"{name}: one JSON line: {text!r}"
    return json.loads(text)


def rates(o):
    assert o["direct"] is True and o["seconds"] > 0
    assert abs(o["mb_per_sec"] - o["bytes"] / o["seconds"] / 1e6) <= 1e-3 * o["mb_per_sec"] + 1e-3
    assert abs(o["reads_per_sec"] - o["reads"] / o["seconds"]) <= 1e-3 * o["reads_per_sec"] + 1e-3
    lat = o["latency_us"]
    if o["reads"]:
        assert 0 < lat["p50"] <= lat["p99"] <= lat["max"] + 1 and lat["mean"] > 0, lat


r = one("random.json")
R = 151552  # 150,528 rounded up to 4096
slots = [len(d) // R for d in data]
assert (r["mode"], r["record_size"], r["read_size"], r["qd"], r["threads"], r["seed"]) == \
    ("random", 150528, R, 8, 2, 7), r
assert r["files"] == 2 and r["file_bytes"] == sum(map(len, data)), r
assert r["reads_planned"] == r["reads"] == sum(slots) == 49 and r["complete"] is True, r
assert r["bytes"] == r["reads"] * R, r
# every whole slot read once: the bytes summed are those of the slots, and only those
assert r["checksum"] == sum(sum(d[:n * R]) for d, n in zip(data, slots)), r
rates(r)

s = one("seq.json")
B = 65536
assert (s["mode"], s["read_size"], s["qd"], s["threads"]) == ("seq", B, 4, 3), s
assert "record_size" not in s and "seed" not in s, s
assert s["reads_planned"] == s["reads"] == sum(-(-len(d) // B) for d in data), s
assert s["complete"] is True and s["bytes"] == s["file_bytes"] == sum(map(len, data)), s
assert s["checksum"] == sum(sum(d) for d in data), s
rates(s)

c = one("cut.json")
assert c["read_size"] == 151552 and c["reads_planned"] == 110, c
assert c["reads"] <= 110 and c["bytes"] == c["reads"] * 151552, c
assert c["complete"] is (c["reads"] == 110), c
assert "checksum" not in c, c
rates(c)
print(f"random {r['reads']} reads, seq {s['reads']} reads, cut run {c['reads']} of 110")
PYEOF

# refused arguments: exit 2 (1 for a file that cannot be opened), a message naming the cause,
# nothing on stdout
: > "$TMP/empty"
mkdir "$TMP/dir"
refuse() {
    local want_rc=$1 want=$2 out rc
    shift 2
    out=$("$PROBE" "$@" 2> "$TMP/err")
    rc=$?
    [ "$rc" = "$want_rc" ] || fail "disk_probe $*: exit $rc, expected $want_rc"
    [ -z "$out" ] || fail "disk_probe $*: printed $out"
    grep -qF -- "$want" "$TMP/err" || fail "disk_probe $*: said '$(cat "$TMP/err")', not '$want'"
}
refuse 2 "--block 1000: not a multiple of 4096" seq "$TMP/a" --block 1000
refuse 2 "--block 0: not a byte count" seq "$TMP/a" --block 0
refuse 2 "--block 4Q: not a byte count" seq "$TMP/a" --block 4Q
refuse 2 "--size is missing" random "$TMP/a"
refuse 2 "--size -5: not a byte count" random "$TMP/a" --size -5
refuse 2 "sequential reads take --block, not --size" seq "$TMP/a" --size 4096
refuse 2 "random reads take --size, not --block" random "$TMP/a" --block 4096
refuse 2 "$TMP/b: $((9 * 151552 + 4095)) bytes, shorter than one 2097152-byte read" \
    random "$TMP/a" "$TMP/b" --size 2M
refuse 2 "$TMP/empty: empty" seq "$TMP/a" "$TMP/empty" --block 4K
refuse 2 "$TMP/dir: not a regular file or a block device" seq "$TMP/dir" --block 4K
refuse 1 "$TMP/none: No such file or directory" seq "$TMP/none" --block 4K
refuse 2 "--qd 0: not a queue depth" seq "$TMP/a" --block 4K --qd 0
refuse 2 "--qd 5000: not a queue depth" seq "$TMP/a" --block 4K --qd 5000
refuse 2 "--threads 0: not a count" seq "$TMP/a" --block 4K --threads 0
refuse 2 "--seconds -1: not a positive number" seq "$TMP/a" --block 4K --seconds -1
refuse 2 "--seed is for random reads" seq "$TMP/a" --block 4K --seed 3
refuse 2 "--qd needs a value" seq "$TMP/a" --block 4K --qd
refuse 2 "unknown option --direct" seq "$TMP/a" --block 4K --direct
refuse 2 "no FILE to read" seq --block 4K
refuse 2 "usage: disk_probe random" scan "$TMP/a"

# a regular file on a file system that refuses O_DIRECT (procfs, on the kernels we know)
"$PROBE" seq /proc/version --block 4K > "$TMP/out" 2> "$TMP/err"
rc=$?
if [ "$rc" = 3 ]; then
    grep -q "^disk_probe: /proc/version: the file system refuses O_DIRECT" "$TMP/err" ||
        fail "refusal not named: $(cat "$TMP/err")"
    [ ! -s "$TMP/out" ] || fail "figures printed despite the refusal"
else
    echo "procfs takes O_DIRECT on this kernel (exit $rc): refusal not exercised"
fi
echo "disk_probe: figures and byte sums match the files; bad arguments refused"
