#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# stoker-pack's default alignment (docs/FORMAT.md, "Choosing the alignment"): without
# --align it takes the largest of 4096, 512 and 1 whose padding is at most 5% of the
# payload. Small records (rows of 16 bytes) pack to about their payload and the index, not
# 4 KiB each; rows of 3000 bytes get 512; JPEGs of 70 KB and large raw rows keep 4096;
# --align is honoured as given. --info (text and JSON) gives the size on disk and the
# padding's share, which add up with the files. The loader reads a data set aligned to 1,
# and refuses direct I/O on it. Data is generated with /usr/bin/python3 (Pillow, numpy).
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
T=$(mktemp -d "$STOKER_TEST_TMP/pack-align-XXXXXX")
trap 'rm -rf "$T"' EXIT
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

. "$HERE/cli_lib.sh"
PYENV=()
asan=$(ldd "$STOKER_LIBRARY" 2>/dev/null | awk '/libasan/ {print $3}')
if [ -n "$asan" ]; then
    PYENV=(env LD_PRELOAD="$asan" ASAN_OPTIONS=detect_leaks=0)
fi
check() { "${PYENV[@]}" "$PY" "$HERE/python/pack_check.py" "$@" || fail "pack_check.py $*"; }
P=$STOKER_PACK
N=20000

"$PY" - "$T" "$N" <<'PYEOF' || fail "making test data"
import os, sys
import numpy as np
from PIL import Image
t, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(7)
np.save(f"{t}/x.npy", rng.integers(0, 256, (n, 16), dtype=np.uint8))  # rows of 16 bytes
np.save(f"{t}/y.npy", np.arange(n, dtype=np.int64) % 10)
np.save(f"{t}/small.npy", rng.integers(0, 256, (300, 16), dtype=np.uint8))
np.save(f"{t}/mid.npy", rng.integers(0, 256, (200, 3000), dtype=np.uint8))
np.save(f"{t}/img.npy", rng.integers(0, 256, (8, 224, 224, 3), dtype=np.uint8))
# JPEGs of 67 to 83 KB, as photographs are (noise compresses little: about 0.93 bytes a
# pixel at quality 90).
for c in range(2):
    os.makedirs(f"{t}/jpegs/c{c}")
    for i in range(6):
        a = rng.integers(0, 256, (240 + 10 * i, 300, 3), dtype=np.uint8)
        Image.fromarray(a).save(f"{t}/jpegs/c{c}/{i}.jpg", quality=90)
PYEOF

# info DIR KEY=VALUE...: --info --json holds these values, its disk_bytes is what the files
# take, and its padding_bytes is the files' bytes less payload, index, headers and manifest.
info() {
    local dir=$1
    shift
    "$P" --info --json "$dir" >"$T/info.json" || fail "--info --json $dir"
    "$PY" - "$T/info.json" "$dir" "$@" <<'PYEOF' || fail "--info --json $dir: $(cat "$T/info.json")"
import json, os, sys
d = json.load(open(sys.argv[1]))
root = sys.argv[2]
for kv in sys.argv[3:]:
    k, v = kv.split("=", 1)
    assert str(d[k]) == v, (k, d[k], v)
files = [os.path.join(root, f) for f in os.listdir(root)]
on_disk = sum(os.path.getsize(f) for f in files)
assert d["disk_bytes"] == on_disk, (d["disk_bytes"], on_disk)
shards = [f for f in files if f.endswith(".stk") and not f.endswith("manifest.stk")]
manifest = os.path.getsize(os.path.join(root, "manifest.stk"))
pad = on_disk - manifest - len(shards) * (4096 + 64) - 32 * d["records"] - d["bytes"]
assert d["padding_bytes"] == pad, (d["padding_bytes"], pad)
assert abs(d["padding_share"] - pad / on_disk) < 1e-4, (d["padding_share"], pad / on_disk)
PYEOF
}

# ---- rows of 16 bytes: alignment 1, the size on disk is payload and index --------------
run 0 "$P" --no-fsync --labels "$T/y.npy" "$T/x.npy" "$T/x1"
has stderr "align        1 (default for these records: no padding; 4096 would add 25500%"
info "$T/x1" align=1 padding_bytes=0 records=$N bytes=$((16 * N))
# payload and index: 48 bytes a row, and a few KB of header, footer and manifest
"$PY" -c "import json,sys; sys.exit(json.load(open(sys.argv[1]))['disk_bytes'] > 48 * $N + 65536)" \
    "$T/info.json" || fail "$N rows of 16 bytes take $(cat "$T/info.json")"
check npy "$T/x1" "$T/x.npy" "$T/y.npy" shuffled
run 0 "$P" --info "$T/x1"
has stdout "size on disk    [0-9]* ([0-9.]* MB: 33.[0-9]% payload, 0.0% alignment padding"
has stdout "alignment       1"
# The loader reads it, and refuses direct I/O on it rather than reading it misaligned.
if [ -x "${STOKER_BENCH:-}" ]; then
    run 0 "$STOKER_BENCH" "$T/x1" --epochs 1 --batch-size 256 --threads 2 --device cpu \
        --transform none --json
    "$PY" -c "import json,sys; d=json.load(open(sys.argv[1]))
sys.exit(d['skipped'] != 0 or d['records'] < 1)" "$T/stdout" ||
        fail "stoker-bench on the data set aligned to 1: $(cat "$T/stdout")"
    run 1 "$STOKER_BENCH" "$T/x1" --epochs 1 --device cpu --transform none --direct
    has stderr "direct I/O needs records aligned to 4096 bytes"
fi

# ---- --align is honoured as given -----------------------------------------------------
run 0 "$P" --no-fsync --align 4096 "$T/small.npy" "$T/s4096"
has stderr "align        4096$"
info "$T/s4096" align=4096 padding_bytes=$((300 * 4080))
run 0 "$P" --info "$T/s4096"
has stdout "size on disk    [0-9]* ([0-9.]* MB: 0.4% payload, 9[0-9].[0-9]% alignment padding"
run 0 "$P" --quiet --no-fsync --align 512 --labels "$T/y.npy" "$T/x.npy" "$T/x512"
info "$T/x512" align=512
run 0 "$P" --quiet --no-fsync --align 1 "$T/img.npy" "$T/img1"
info "$T/img1" align=1 padding_bytes=0

# ---- records between: 512 pads them by 2.4%, 4096 would by 37% ------------------------
run 0 "$P" --no-fsync "$T/mid.npy" "$T/mid"
has stderr "align        512 (default for these records: padding 2.4% of the payload; 4096 w"
has stderr "4096 would add 37%)"
info "$T/mid" align=512 padding_bytes=$((200 * 72))

# ---- large records keep 4096: raw images, and JPEGs of photographs' sizes --------------
run 0 "$P" --no-fsync "$T/img.npy" "$T/img"
has stderr "align        4096 (default for these records: padding 0.7% of the payload)"
info "$T/img" align=4096
run 0 "$P" --no-fsync "$T/jpegs" "$T/jpegs_out"
has stderr "align        4096 (default for these records: padding [0-4].[0-9]% of the payload)"
info "$T/jpegs_out" align=4096 records=12 field=jpeg
run 0 "$P" --verify "$T/jpegs_out"
# The same JPEGs as a list file: the sizes come from stat, the choice is the same.
(cd "$T" && for f in jpegs/c*/*.jpg; do printf '%s\t0\n' "$f"; done) >"$T/list.txt"
run 0 "$P" --no-fsync "$T/list.txt" "$T/list_out"
has stderr "align        4096 (default for these records: padding [0-4].[0-9]% of the payload)"

echo "PASS"
