#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# stoker-pack --force replaces a previous data set and nothing else: it refuses an OUT that
# is, holds or lies inside the source (real paths, symbolic links followed), an OUT that
# holds an input (a list file's entry, --labels), and an OUT that is not a stoker data set
# (a file, a link, a folder of other files, a data set with a foreign file beside it). After
# every refusal each of the user's files is still there, byte for byte.
set -u
PY=/usr/bin/python3
if ! "$PY" -c "import PIL, numpy, h5py" 2>/dev/null; then
    echo "skip: $PY lacks Pillow, numpy or h5py"
    exit 77
fi
: "${STOKER_PACK:?}" "${STOKER_TEST_TMP:?}"
mkdir -p "$STOKER_TEST_TMP"
T=$(mktemp -d "$STOKER_TEST_TMP/pack-force-XXXXXX")
trap 'rm -rf "$T"' EXIT
P=$STOKER_PACK

. "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
# snapshot DIR: a listing of every file under DIR with its checksum, into $T/snap.
snapshot() { (cd "$1" && find . -print0 | sort -z | xargs -0 md5sum 2>/dev/null; find . | sort) \
    >"$T/snap"; }
unchanged() {
    (cd "$1" && find . -print0 | sort -z | xargs -0 md5sum 2>/dev/null; find . | sort) \
        >"$T/snap2"
    cmp -s "$T/snap" "$T/snap2" || { diff "$T/snap" "$T/snap2" >&2; fail "$2"; }
}
no_temp() { ls -a "$1" | grep -q '\.tmp-' && fail "temporary directory left in $1"; return 0; }

"$PY" - "$T" <<'PYEOF' || fail "making test data"
import os, sys
import h5py
import numpy as np
from PIL import Image
t = sys.argv[1]
def jpeg(path, w, h):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    y, x = np.mgrid[0:h, 0:w]
    Image.fromarray(np.stack([x * 5 % 256, y * 9 % 256, (x + y) % 256], -1).astype(np.uint8)
                    ).save(path, quality=90)
# A work folder holding a source tree and the user's other files.
for c in ("cat", "dog"):
    for i in range(3):
        jpeg(f"{t}/work/tree/{c}/{i}.jpg", 20 + i, 16)
open(f"{t}/work/notes.txt", "w").write("the user's notes\n")
os.makedirs(f"{t}/work/results")
open(f"{t}/work/results/run1.csv", "w").write("epoch,loss\n1,0.5\n")
open(f"{t}/work/list.txt", "w").write("tree/cat/0.jpg\t0\ntree/dog/1.jpg\t1\n")
np.save(f"{t}/work/x.npy", np.arange(24, dtype=np.uint8).reshape(4, 6))
np.save(f"{t}/work/y.npy", np.arange(4, dtype=np.int64))
with h5py.File(f"{t}/work/d.h5", "w") as f:
    f["images"] = np.arange(30, dtype=np.uint8).reshape(5, 6)
# Sources outside any output.
for c in ("a", "b"):
    for i in range(2):
        jpeg(f"{t}/src/{c}/{i}.jpg", 24, 18 + i)
np.save(f"{t}/y4.npy", np.arange(4, dtype=np.int64))
PYEOF

W=$T/work
snapshot "$W"
# OUT holds the source (the source tree, a list file, a .npy, an HDF5 file and its
# dataset path): refused, nothing under OUT touched.
for src in "$W/tree" "$W/list.txt" "$W/x.npy" "$W/d.h5" "$W/d.h5:/images" "$W/tree/cat/.."; do
    run 2 "$P" --force "$src" "$W"
    has stderr "inside the output"
    unchanged "$W" "--force $src $W changed the user's files"
done
# ... also when OUT is named through a symbolic link, or SRC is.
ln -s "$W" "$T/link_to_work"
snapshot "$W"
run 2 "$P" --force "$W/tree" "$T/link_to_work"
unchanged "$W" "OUT through a link: files changed"
ln -s "$W/tree" "$T/link_to_tree"
run 2 "$P" --force "$T/link_to_tree" "$W"
unchanged "$W" "SRC through a link: files changed"
# OUT is SRC.
run 2 "$P" --force "$W/tree" "$W/tree"
has stderr "is the source"
unchanged "$W" "OUT = SRC changed the user's files"
# OUT inside SRC, with --force too.
run 2 "$P" --force "$W/tree" "$W/tree/cat"
has stderr "inside the source"
unchanged "$W" "OUT inside SRC changed the user's files"
# --labels inside OUT.
run 2 "$P" --force --labels "$W/y.npy" "$T/y4.npy" "$W"
has stderr "y.npy"
unchanged "$W" "--labels inside OUT: files changed"
# A list file outside OUT naming a file inside it.
printf '%s\t0\n' "$W/tree/dog/2.jpg" >"$T/outer_list.txt"
run 2 "$P" --force "$T/outer_list.txt" "$W"
has stderr "2.jpg"
unchanged "$W" "a list entry inside OUT: files changed"
no_temp "$T"
no_temp "$W"

# OUT is not a stoker data set: refused by name, the user's files kept.
echo "precious" >"$T/file_out"
run 2 "$P" --force "$T/src" "$T/file_out"
has stderr "file_out"
has stderr "not a stoker data set"
[ "$(cat "$T/file_out")" = precious ] || fail "--force replaced a regular file"
snapshot "$W"
run 2 "$P" --force "$T/src" "$W"
has stderr "not a stoker data set"
unchanged "$W" "--force replaced a folder of the user's files"
# A genuine data set with a foreign file beside its shards.
run 0 "$P" --quiet --no-fsync "$T/src" "$T/ds"
echo "mine" >"$T/ds/README"
snapshot "$T/ds"
run 2 "$P" --force --no-fsync "$T/src" "$T/ds"
has stderr "README"
unchanged "$T/ds" "--force replaced a data set holding a foreign file"
# A folder named like a shard is foreign too.
rm "$T/ds/README"
mkdir "$T/ds/shard-00007.stk"
snapshot "$T/ds"
run 2 "$P" --force --no-fsync "$T/src" "$T/ds"
has stderr "shard-00007.stk"
unchanged "$T/ds" "--force replaced a data set holding a folder"
rmdir "$T/ds/shard-00007.stk"
# A symbolic link to a data set: the link is not stoker's to replace.
ln -s "$T/ds" "$T/ds_link"
snapshot "$T/ds"
run 2 "$P" --force --no-fsync "$T/src" "$T/ds_link"
has stderr "symbolic link"
[ -L "$T/ds_link" ] || fail "--force replaced a symbolic link"
unchanged "$T/ds" "--force through a link changed the data set"
no_temp "$T"

# A genuine previous data set is replaced; so is an empty folder.
"$P" --info --json "$T/ds" | grep -q '"records": 4' || fail "the first data set has 4 records"
run 0 "$P" --quiet --force --no-fsync --labels "$T/y4.npy" "$W/x.npy" "$T/ds"
"$P" --info --json "$T/ds" | grep -q '"field": "raw"' || fail "--force did not replace"
run 0 "$P" --verify "$T/ds"
mkdir "$T/empty_out"
run 0 "$P" --quiet --force --no-fsync "$T/src" "$T/empty_out"
run 0 "$P" --verify "$T/empty_out"
no_temp "$T"
echo "test_pack_force: ok"
