#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# stoker-pack from HDF5 files written by h5py: variable-length JPEG records go through the
# same checks and conversions as a folder of files (by default, as --validate, damaged
# records are left out by name and the data set is marked checked; --strict fails on them,
# --rgb converts CMYK, grey and PNG records, --max-side re-encodes large ones;
# --no-validate copies every record as it is, unchecked); image options on raw records
# (HDF5 or .npy) are refused, not ignored, and raw records pack without them; records
# that are not JPEGs are copied as they are; empty records pack and read back; --verify
# reads an HDF5 file's every record;
# empty sources say that they hold no records; a file is HDF5 by its signature, found past
# a user block too, whatever its name.
set -u
PY=/usr/bin/python3
if ! "$PY" -c "import PIL, numpy, h5py" 2>/dev/null; then
    echo "skip: $PY lacks Pillow, numpy or h5py"
    exit 77
fi
: "${STOKER_PACK:?}" "${STOKER_BUILD_DIR:?}" "${STOKER_TEST_TMP:?}"
export STOKER_LIBRARY="$STOKER_BUILD_DIR/libstoker.so"
[ -f "$STOKER_LIBRARY" ] || { echo "FAIL: no $STOKER_LIBRARY" >&2; exit 1; }
# A library built with AddressSanitizer loads into Python only behind its runtime
PYENV=()
asan=$(ldd "$STOKER_LIBRARY" 2>/dev/null | awk '/libasan/ {print $3}')
if [ -n "$asan" ]; then
    PYENV=(env LD_PRELOAD="$asan" ASAN_OPTIONS=detect_leaks=0)
fi
"$STOKER_PACK" --help > /dev/null || { echo "FAIL: $STOKER_PACK --help" >&2; exit 1; }
hdf5=$("${PYENV[@]}" "$PY" -c "
import ctypes; print(ctypes.CDLL('$STOKER_LIBRARY').stoker_capability_get(5))" 2>&1) ||
    { echo "FAIL: $STOKER_LIBRARY does not load into $PY: $hdf5" >&2; exit 1; }
if [ "$hdf5" != 1 ]; then
    echo "skip: the library has no HDF5 support"
    exit 77
fi
mkdir -p "$STOKER_TEST_TMP"
T=$(mktemp -d "$STOKER_TEST_TMP/pack-h5-XXXXXX")
trap 'rm -rf "$T"' EXIT
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
P=$STOKER_PACK

. "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
lacks() { ! grep -q -- "$2" "$T/$1" || { cat "$T/$1" >&2; fail "$1 has '$2'"; }; }
check() { "${PYENV[@]}" "$PY" "$HERE/python/pack_check.py" "$@" || fail "pack_check.py $*"; }

"$PY" - "$T" <<'PYEOF' || fail "making test data"
import io, os, sys
import h5py
import numpy as np
from PIL import Image
t = sys.argv[1]
def image(w, h, mode="RGB", fmt="JPEG"):
    y, x = np.mgrid[0:h, 0:w]
    a = np.stack([x * 7 % 256, y * 5 % 256, (x * y) % 256], -1).astype(np.uint8)
    b = io.BytesIO()
    Image.fromarray(a).convert(mode).save(b, fmt)
    return b.getvalue()
def vlen(path, records, labels=None, userblock=0):
    with h5py.File(path, "w", userblock_size=userblock) as f:
        d = f.create_dataset("images", (len(records),), dtype=h5py.vlen_dtype(np.uint8))
        for i, r in enumerate(records):
            d[i] = np.frombuffer(r, np.uint8)
        if labels is not None:
            f["labels"] = np.asarray(labels, np.int64)
whole = image(200, 150)
# 0 RGB, 1 large RGB, 2 CMYK, 3 grey, 4 PNG, 5 truncated JPEG, 6 not an image
vlen(f"{t}/v.h5", [image(64, 48), image(300, 200), image(40, 40, "CMYK"), image(30, 30, "L"),
                   image(20, 20, "RGB", "PNG"), whole[: len(whole) // 2], b"not an image"],
     labels=[10, 11, 12, 13, 14, 15, 16])
# Three records behind a user block (the superblock at byte 1024), named as no HDF5 file is.
vlen(f"{t}/ub.hdf", [image(64, 48), image(30, 30, "L"), b"not an image"], labels=[1, 2, 3],
     userblock=1024)
# The first record empty (and the last), then bytes that are no image, then a JPEG.
vlen(f"{t}/empty_first.h5", [b"", b"abc", image(16, 16), b""], labels=[3, 2, 1, 0])
vlen(f"{t}/zero.h5", [])
with h5py.File(f"{t}/raw.h5", "w") as f:
    f["images"] = np.arange(30, dtype=np.uint8).reshape(5, 6)
np.save(f"{t}/x.npy", np.arange(12, dtype=np.uint8).reshape(4, 3))
# An image folder whose name ends like an HDF5 file's.
os.makedirs(f"{t}/tree.h5/k")
open(f"{t}/tree.h5/k/a.jpg", "wb").write(image(12, 10))
np.save(f"{t}/zero.npy", np.zeros((0, 3), np.uint8))
PYEOF

# ---- image options on variable-length JPEG records --------------------------------------
run 0 "$P" --no-fsync --validate "$T/v.h5" "$T/valid"
has stderr "v.h5: record 5: JPEG: Premature end of JPEG file"
has stderr "v.h5: record 6: not JPEG"
has stderr "v.h5: record 4: PNG, not JPEG (use --rgb)"
has stderr "3 records left out"
check h5 "$T/valid" "$T/v.h5" 4
check checked "$T/valid" yes
run 0 "$P" --verify "$T/valid"
# The same by default: a source of JPEG records is checked as a folder of JPEGs is.
run 0 "$P" --no-fsync "$T/v.h5" "$T/default"
has stderr "validate     yes"
has stderr "v.h5: record 5: JPEG: Premature end of JPEG file"
has stderr "3 records left out"
check h5 "$T/default" "$T/v.h5" 4
check checked "$T/default" yes

run 1 "$P" --no-fsync --validate --strict "$T/v.h5" "$T/strict"
has stderr "v.h5: record [0-9]*: .*(--strict: no output written)"
[ ! -e "$T/strict" ] || fail "--strict failure left output"

run 0 "$P" --no-fsync --validate --rgb "$T/v.h5" "$T/rgb"
check jpegs "$T/rgb" 300 RGB 1 2 3 4 0
check checked "$T/rgb" yes
"$P" --info --json "$T/rgb" | grep -q '"records": 5' || fail "--rgb: want 5 records"

run 0 "$P" --no-fsync --validate --max-side 100 --quality 80 "$T/v.h5" "$T/small"
check jpegs "$T/small" 100 any 1 0 2 3
"$P" --info --json "$T/small" | grep -q '"field": "jpeg"' || fail "--max-side: not jpeg"

# With --no-validate (and no other image option) the records are copied as they are, every
# one of them, and the data set is not marked checked.
run 0 "$P" --no-fsync --no-validate "$T/v.h5" "$T/copy"
has stderr "validate     no (--no-validate"
check h5 "$T/copy" "$T/v.h5" 7
check checked "$T/copy" no
run 0 "$P" --info "$T/copy"
has stdout "field           jpeg"
has stdout "checked         no"

# ---- refused where they make no sense ---------------------------------------------------
for opt in --validate --strict --rgb "--max-side 64"; do
    # shellcheck disable=SC2086
    run 2 "$P" --no-fsync $opt "$T/raw.h5" "$T/o"
    has stderr "raw.h5"
    has stderr "raw"
    # shellcheck disable=SC2086
    run 2 "$P" --no-fsync $opt "$T/x.npy" "$T/o"
    has stderr "x.npy"
done
run 2 "$P" --no-fsync --quality 70 "$T/v.h5" "$T/o"
has stderr "quality"
[ ! -e "$T/o" ] || fail "a refused option wrote output"
# ... and raw records pack without them, as before: validation is for images only.
run 0 "$P" --no-fsync "$T/raw.h5" "$T/raw_out"
has stderr "validate     n/a"
lacks stderr "images only"
check json <("$P" --info --json "$T/raw_out") records=5 field=raw format_version=1 \
    jpeg_checked=False
run 0 "$P" --no-fsync --no-validate "$T/raw.h5" "$T/raw_nv"
run 0 "$P" --no-fsync "$T/x.npy" "$T/npy_out"
lacks stderr "images only"

# ---- empty records ----------------------------------------------------------------------
# Record 0 is no JPEG, so the records are bytes: copied as they are, by default too.
run 0 "$P" --no-fsync --no-shuffle "$T/empty_first.h5" "$T/e1"
check h5 "$T/e1" "$T/empty_first.h5" 4
check json <("$P" --info --json "$T/e1") field=bytes jpeg_checked=False
run 0 "$P" --verify "$T/e1"
for seed in 1 2 3; do
    run 0 "$P" --no-fsync --seed $seed "$T/empty_first.h5" "$T/e_$seed"
    check h5 "$T/e_$seed" "$T/empty_first.h5" 4
    run 0 "$P" --verify "$T/e_$seed"
done
run 0 "$P" --no-fsync --validate "$T/empty_first.h5" "$T/e_valid"
has stderr "empty_first.h5: record 0: empty record (0 bytes)"
check h5 "$T/e_valid" "$T/empty_first.h5" 1
check checked "$T/e_valid" yes

# ---- --verify on an HDF5 file; empty sources --------------------------------------------
run 0 "$P" --verify "$T/v.h5"
has stdout "7 records"
lacks stdout "problem"
run 0 "$P" --verify "$T/v.h5:/images"
run 1 "$P" --no-fsync "$T/zero.h5" "$T/o"
has stderr "holds no records"
lacks stderr "image files"
run 1 "$P" --no-fsync "$T/zero.npy" "$T/o"
has stderr "holds no records"
lacks stderr "image files"
[ ! -e "$T/o" ] || fail "an empty source wrote output"

# ---- an HDF5 file known by its signature past a user block, not by its name -----------
run 0 "$P" --no-fsync --no-validate "$T/ub.hdf" "$T/ub"
check h5 "$T/ub" "$T/ub.hdf" 3
run 0 "$P" --verify "$T/ub.hdf"
has stdout "3 records"

# ---- a folder named like an HDF5 file is a folder ---------------------------------------
run 0 "$P" --no-fsync "$T/tree.h5" "$T/tree_out"
has stderr "image folder"
cp -r "$T/e1" "$T/set.h5"
run 0 "$P" --verify "$T/set.h5"
has stdout "set.h5: intact"
echo "test_pack_h5: ok"
