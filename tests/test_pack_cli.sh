#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# stoker-pack end to end: ImageFolder / list / .npy sources round-trip byte for byte, the
# output does not depend on --jobs, bad inputs are reported by name and left out (or fail
# the run with --strict), JPEGs are decoded by default and the data set marked checked
# (--no-validate: headers only, not marked), the output is atomic (refusals, --force,
# Ctrl-C), and --verify finds damage. Data is generated here with /usr/bin/python3 (Pillow,
# numpy).
set -u
PY=/usr/bin/python3
if ! "$PY" -c "import PIL, numpy" 2>/dev/null; then
    echo "skip: $PY lacks Pillow or numpy"
    exit 77
fi
: "${STOKER_PACK:?}" "${STOKER_BUILD_DIR:?}" "${STOKER_TEST_TMP:?}"
export STOKER_LIBRARY="$STOKER_BUILD_DIR/libstoker.so"
[ -f "$STOKER_LIBRARY" ] || { echo "FAIL: no $STOKER_LIBRARY" >&2; exit 1; }
mkdir -p "$STOKER_TEST_TMP"
T=$(mktemp -d "$STOKER_TEST_TMP/pack-cli-XXXXXX")
trap 'chmod -R u+rwX "$T" 2>/dev/null; rm -rf "$T"' EXIT
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

. "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
# A sanitizer build's library needs its runtime preloaded into Python (which leaks by
# design, so leak checks are off there; the tool itself keeps them).
PYENV=()
asan=$(ldd "$STOKER_LIBRARY" 2>/dev/null | awk '/libasan/ {print $3}')
if [ -n "$asan" ]; then
    PYENV=(env LD_PRELOAD="$asan" ASAN_OPTIONS=detect_leaks=0)
fi
check() { "${PYENV[@]}" "$PY" "$HERE/python/pack_check.py" "$@" || fail "pack_check.py $*"; }
P=$STOKER_PACK

# ---- data ------------------------------------------------------------------------------
"$PY" - "$T" <<'PYEOF' || fail "making test data"
import os, sys
import numpy as np
from PIL import Image
t = sys.argv[1]
rng = np.random.default_rng(1)
def jpeg(path, w, h, **kw):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    y, x = np.mgrid[0:h, 0:w]
    a = np.stack([(x * 7 + y * 3) % 256, (x * y) % 256, rng.integers(0, 256, (h, w))], -1)
    Image.fromarray(a.astype(np.uint8)).save(path, quality=85, **kw)
# Three classes with images (one with a space and a non-ASCII name), one empty class.
for c, name in enumerate(["a_cat", "b dog", "c_caf\u00e9"]):
    for i in range(10):
        sub = "nested/" if (c == 0 and i >= 8) else ""
        fname = f"img {i:02d}.JPG" if (c == 1 and i == 3) else f"{sub}img{i:02d}.jpg"
        jpeg(f"{t}/tree/{name}/{fname}", 24 + 3 * i, 20 + 2 * c, progressive=(i == 5))
os.makedirs(f"{t}/tree/d_empty \"q\" \\ x")  # JSON needs escapes for this name
open(f"{t}/tree/a_cat/notes.txt", "w").write("not an image\n")
# Bad inputs beside good ones.
for i in range(4):
    jpeg(f"{t}/bad/k/good{i}.jpg", 64, 48)
jpeg(f"{t}/bad/k/trunc.jpg", 96, 64)
data = open(f"{t}/bad/k/trunc.jpg", "rb").read()
open(f"{t}/bad/k/trunc.jpg", "wb").write(data[: len(data) // 2])
open(f"{t}/bad/k/zero.jpg", "wb").close()
open(f"{t}/bad/k/text.jpg", "w").write("hello, I am text\n")
Image.fromarray(rng.integers(0, 256, (20, 30, 4), dtype=np.uint8), "RGBA").save(
    f"{t}/bad/k/png_named.jpg", "PNG")
Image.fromarray(rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)).save(f"{t}/bad/k/pic.bmp")
# A JPEG cut short in the middle of its entropy-coded data and closed with an EOI marker:
# its header and markers are intact, only libjpeg's decode finds the damage.
for i in range(3):
    jpeg(f"{t}/eoi/k/good{i}.jpg", 64, 48)
jpeg(f"{t}/eoi/k/cut_eoi.jpg", 96, 64)
data = open(f"{t}/eoi/k/cut_eoi.jpg", "rb").read()
sos = data.index(b"\xff\xda")
start = sos + 2 + int.from_bytes(data[sos + 2:sos + 4], "big")  # entropy-coded data
end = data.rindex(b"\xff\xd9")
assert end - start > 100, (start, end)
open(f"{t}/eoi/k/cut_eoi.jpg", "wb").write(data[: (start + end) // 2] + b"\xff\xd9")
# A list file: relative and absolute paths, arbitrary labels.
with open(f"{t}/list.txt", "w") as f:
    f.write("# path<TAB>label\n")
    f.write("tree/a_cat/img00.jpg\t7\n")
    f.write("tree/b dog/img 03.JPG\t3\n")
    f.write(f"{t}/tree/c_caf\u00e9/img09.jpg\t-2\n")
# .npy: records of shape (4, 5) uint8, labels int16; and float32 rows without labels.
np.save(f"{t}/x.npy", rng.integers(0, 256, (20, 4, 5), dtype=np.uint8))
np.save(f"{t}/y.npy", rng.integers(-5, 100, (20,), dtype=np.int16))
np.save(f"{t}/f.npy", rng.standard_normal((9, 3)).astype(np.float32))
np.save(f"{t}/y_short.npy", np.arange(5, dtype=np.int64))
raw = open(f"{t}/x.npy", "rb").read()
open(f"{t}/x_trunc.npy", "wb").write(raw[:-7])
np.save(f"{t}/v2.npy", np.arange(6, dtype="<u2").reshape(3, 2))
def npy(name, header, data=b"\0" * 64, version=1):
    h = header.encode()
    h += b" " * (63 - (len(h) + 10) % 64) + b"\n"
    size = len(h).to_bytes(2 if version == 1 else 4, "little")
    open(f"{t}/{name}.npy", "wb").write(b"\x93NUMPY" + bytes([version, 0]) + size + h + data)
npy("bigend", "{'descr': '>i4', 'fortran_order': False, 'shape': (4, 4), }")
npy("fortran", "{'descr': '<u1', 'fortran_order': True, 'shape': (8, 8), }")
npy("garbled", "{'descr': '<u1', 'fortran_order': False, 'shape': (8, 8, }")
npy("struct", "{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (16,), }")
npy("huge", "{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999, 99999999999), }")
npy("scalar", "{'descr': '<u1', 'fortran_order': False, 'shape': (), }", b"\0")
npy("v2hdr", "{'descr': '<u4', 'fortran_order': False, 'shape': (4, 4), }", version=2)
# Many slow files for the interruption test: hard links to one 512x512 PNG, which --rgb
# must decode and re-encode (milliseconds each), taking no disk space.
y, x = np.mgrid[0:512, 0:512]
Image.fromarray(np.stack([x // 2, y // 2, (x + y) // 4], -1).astype(np.uint8)).save(
    f"{t}/slow.png")
for c in range(3):
    os.makedirs(f"{t}/big/c{c}")
    for i in range(1000):
        os.link(f"{t}/slow.png", f"{t}/big/c{c}/{i:05d}.png")
PYEOF

# ---- usage -----------------------------------------------------------------------------
run 0 "$P" --help
has stdout "usage:"
run 0 "$P" --version
has stdout "stoker-pack"
run 2 "$P"
run 2 "$P" --bogus "$T/tree" "$T/o"
run 2 "$P" --align 3 "$T/tree" "$T/o"
run 2 "$P" --shard-size 12Q "$T/tree" "$T/o"
[ ! -e "$T/o" ] || fail "usage errors must not write"

# ---- ImageFolder round trip ------------------------------------------------------------
run 0 "$P" "$T/tree" "$T/out1"
has stderr "stoker-pack 0."
has stderr "d_empty"        # the empty class is warned about
has stderr "30 records"
has stderr "validate     yes"
run 0 "$P" --verify "$T/out1"
run 0 "$P" --info --json "$T/out1"
# Decoded by default: the manifest (version 2) says that its JPEGs were checked.
check json "$T/stdout" records=30 classes=4 shards=1 format_version=2 field=jpeg \
    jpeg_checked=True
check checked "$T/out1" yes
check folder "$T/out1" "$T/tree"
run 0 "$P" --info "$T/out1"
has stdout "records         30"
has stdout "checked         yes"
# --no-validate: the same records, headers only; version 1, not checked.
run 0 "$P" --no-validate "$T/tree" "$T/unchecked"
has stderr "validate     no (--no-validate"
check checked "$T/unchecked" no
check folder "$T/unchecked" "$T/tree"
run 0 "$P" --info "$T/unchecked"
has stdout "checked         no"
check json <("$P" --info --json "$T/unchecked") format_version=1 jpeg_checked=False
# --validate, the default said aloud, gives the same bytes; with --no-validate it is refused.
run 0 "$P" --quiet --validate "$T/tree" "$T/validated"
diff -r "$T/out1" "$T/validated" >/dev/null || fail "--validate differs from the default"
run 2 "$P" --validate --no-validate "$T/tree" "$T/o"
has stderr "choose one of --validate and --no-validate"

# Deterministic whatever --jobs; shuffled by seed unless --no-shuffle.
run 0 "$P" --jobs 1 --quiet "$T/tree" "$T/j1"
run 0 "$P" --jobs 4 --quiet "$T/tree" "$T/j4"
diff -r "$T/j1" "$T/j4" >/dev/null || fail "--jobs 1 and --jobs 4 outputs differ"
diff -r "$T/out1" "$T/j1" >/dev/null || fail "default --jobs output differs"
run 0 "$P" --quiet --seed 5 "$T/tree" "$T/s5"
diff -r "$T/j1" "$T/s5" >/dev/null && fail "--seed 5 gave the order of seed 0"
run 0 "$P" --quiet --no-shuffle --shard-size 16K --align 512 "$T/tree" "$T/ordered"
check sorted "$T/ordered" "$T/tree"
check folder "$T/ordered" "$T/tree"
run 0 "$P" --info --json "$T/ordered"
"$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(d['shards'] < 2)" \
    "$T/stdout" || fail "--shard-size 16K should give several shards"
check json "$T/stdout" align=512
run 0 "$P" --verify "$T/ordered"
check shuffled "$T/out1"
run 0 "$P" --quiet --max-side 16 --quality 80 "$T/tree" "$T/small"
check maxside "$T/small" 16
check checked "$T/small" yes    # re-encoded here, or decoded: checked either way
run 0 "$P" --quiet --no-validate --max-side 16 "$T/tree" "$T/small_unchecked"
check checked "$T/small_unchecked" no

# ---- list file -------------------------------------------------------------------------
run 0 "$P" --quiet "$T/list.txt" "$T/listout"
check list "$T/listout" "$T/list.txt"
check checked "$T/listout" yes
printf 'tree/a_cat/img00.jpg\tseven\n' >"$T/badlist.txt"
run 1 "$P" "$T/badlist.txt" "$T/o"
has stderr "badlist.txt:1"
[ ! -e "$T/o" ] || fail "a bad list must not write"

# ---- .npy ------------------------------------------------------------------------------
# Raw records: validation, on by default for images, neither applies nor is refused.
run 0 "$P" --no-shuffle --labels "$T/y.npy" "$T/x.npy" "$T/npyout"
grep -q "images only" "$T/stderr" && fail ".npy without image options: $(cat "$T/stderr")"
has stderr "validate     n/a"
check npy "$T/npyout" "$T/x.npy" "$T/y.npy" ordered
run 0 "$P" --info --json "$T/npyout"
check json "$T/stdout" records=20 field=raw dtype=uint8 shape=4,5 format_version=1 \
    jpeg_checked=False
run 0 "$P" --info "$T/npyout"
has stdout "checked         n/a"
run 0 "$P" --quiet --no-validate --no-shuffle --labels "$T/y.npy" "$T/x.npy" "$T/npy_nv"
diff -r "$T/npyout" "$T/npy_nv" >/dev/null || fail ".npy: --no-validate changed the output"
run 0 "$P" --quiet --labels "$T/y.npy" "$T/x.npy" "$T/npyshuf"
check npy "$T/npyshuf" "$T/x.npy" "$T/y.npy" shuffled
run 0 "$P" --quiet "$T/f.npy" "$T/fout"
check json <("$P" --info --json "$T/fout") records=9 dtype=float32 shape=3
run 1 "$P" --labels "$T/y_short.npy" "$T/x.npy" "$T/o"
has stderr "y_short.npy"
run 1 "$P" "$T/x_trunc.npy" "$T/o"
has stderr "x_trunc.npy"
for bad in bigend fortran garbled struct huge scalar; do
    run 1 "$P" "$T/$bad.npy" "$T/o"
    has stderr "$bad.npy: "
done
[ ! -e "$T/o" ] || fail "a bad .npy must not write"
run 0 "$P" --quiet "$T/v2hdr.npy" "$T/v2out"
check json <("$P" --info --json "$T/v2out") records=4 dtype=uint32 shape=4

# ---- bad inputs ------------------------------------------------------------------------
run 0 "$P" --no-validate "$T/bad" "$T/bad_plain"
has stderr "zero.jpg: empty file"
has stderr "text.jpg: not JPEG"
has stderr "png_named.jpg: PNG, not JPEG (use --rgb)"
has stderr "pic.bmp: not JPEG"
# With --no-validate the truncated file passes the header check.
check json <("$P" --info --json "$T/bad_plain") records=5
check checked "$T/bad_plain" no
run 0 "$P" "$T/bad" "$T/bad_valid"
has stderr "trunc.jpg: JPEG: Premature end of JPEG file"
has stderr "zero.jpg: empty file"
check json <("$P" --info --json "$T/bad_valid") records=4
check checked "$T/bad_valid" yes
run 1 "$P" --strict "$T/bad" "$T/bad_strict"
has stderr "--strict"
[ ! -e "$T/bad_strict" ] || fail "--strict failure must leave no output"
run 0 "$P" --rgb "$T/bad" "$T/bad_rgb"
check json <("$P" --info --json "$T/bad_rgb") records=5
check jpeg_key "$T/bad_rgb" k/png_named.jpg
check checked "$T/bad_rgb" yes  # the PNG re-encoded here, the JPEGs decoded

# A JPEG cut short and closed with EOI: left out by default, kept with --no-validate.
run 0 "$P" "$T/eoi" "$T/eoi_checked"
has stderr "cut_eoi.jpg: JPEG: Corrupt JPEG data"
has stderr "1 file left out"
check json <("$P" --info --json "$T/eoi_checked") records=3
check checked "$T/eoi_checked" yes
run 1 "$P" --strict "$T/eoi" "$T/eoi_strict"
has stderr "cut_eoi.jpg: JPEG: Corrupt JPEG data"
[ ! -e "$T/eoi_strict" ] || fail "--strict failure must leave no output"
run 0 "$P" --no-validate "$T/eoi" "$T/eoi_unchecked"
grep -q "cut_eoi" "$T/stderr" && fail "--no-validate left out cut_eoi.jpg: $(cat "$T/stderr")"
check json <("$P" --info --json "$T/eoi_unchecked") records=4
check checked "$T/eoi_unchecked" no
ls -a "$T" | grep -q '\.tmp-' && fail "temporary directory left behind"

# Unreadable file: root reads it anyway, so only check when not root.
if [ "$(id -u)" -ne 0 ]; then
    mkdir -p "$T/noread/k" && cp "$T/bad/k/good0.jpg" "$T/noread/k/a.jpg"
    cp "$T/bad/k/good1.jpg" "$T/noread/k/b.jpg" && chmod 000 "$T/noread/k/b.jpg"
    run 0 "$P" "$T/noread" "$T/noread_out"
    has stderr "b.jpg: cannot read"
fi

# Empty sources: nothing written.
mkdir -p "$T/empty/only_class"
run 1 "$P" "$T/empty" "$T/o"
has stderr "no records"
mkdir -p "$T/noclass"
run 1 "$P" "$T/noclass" "$T/o"
mkdir -p "$T/allbad/k" && cp "$T/bad/k/text.jpg" "$T/allbad/k/"
run 1 "$P" "$T/allbad" "$T/o"
has stderr "no records"
[ ! -e "$T/o" ] || fail "an empty source must not write"

# ---- atomic output ---------------------------------------------------------------------
run 2 "$P" "$T/tree" "$T/tree/b dog/inside"
has stderr "inside"
[ ! -e "$T/tree/b dog/inside" ] || fail "wrote inside the source"
run 2 "$P" "$T/tree" "$T/tree/../tree/x"
sum_before=$(cat "$T/listout"/* | md5sum)
run 2 "$P" "$T/tree" "$T/listout"
has stderr "--force"
[ "$(cat "$T/listout"/* | md5sum)" = "$sum_before" ] || fail "refused pack changed the old output"
run 0 "$P" --quiet --force "$T/tree" "$T/listout"
check json <("$P" --info --json "$T/listout") records=30

# Ctrl-C: a slow pack of 3000 files is interrupted; the old output stays, no temp left.
sum_before=$(cat "$T/listout"/* | md5sum)
"$P" --quiet --force --jobs 1 --rgb "$T/big" "$T/listout" 2>"$T/int.err" &
pid=$!
sleep 0.5
kill -INT "$pid"
wait "$pid"
rc=$?
if [ "$rc" -eq 130 ]; then
    [ "$(cat "$T/listout"/* | md5sum)" = "$sum_before" ] ||
        fail "interrupted pack changed the old output"
    grep -q "interrupted" "$T/int.err" || fail "no 'interrupted' message"
elif [ "$rc" -eq 0 ]; then
    echo "note: the pack finished before SIGINT arrived"
else
    cat "$T/int.err" >&2
    fail "interrupted pack exited $rc"
fi
ls -a "$T" | grep -q '\.tmp-' && fail "temporary directory left behind after SIGINT"

# ---- --verify finds damage -------------------------------------------------------------
cp -r "$T/ordered" "$T/dmg"
id=$("${PYENV[@]}" "$PY" "$HERE/python/pack_check.py" flip "$T/dmg" "$T/tree") ||
    fail "flipping a payload byte"
run 1 "$P" --verify "$T/dmg"
has stdout "record $id"
has stdout "shard "
cp -r "$T/ordered" "$T/cut"
shard=$(ls "$T/cut" | grep -v manifest | head -n 1)
truncate -s -100 "$T/cut/$shard"
run 1 "$P" --verify "$T/cut"
cp -r "$T/ordered" "$T/gone"
rm "$T/gone/$shard"
run 1 "$P" --verify "$T/gone"
run 1 "$P" --verify "$T/nonexistent"
run 1 "$P" --info "$T/nonexistent"

echo "test_pack_cli: ok"
