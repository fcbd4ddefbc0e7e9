#!/usr/bin/env bash
# stoker-pack on hostile source trees: symbolic link loops are named and never followed, a
# file reached twice through links is packed once. Data is generated here with
# /usr/bin/python3 (Pillow, numpy).
set -u
PY=/usr/bin/python3
if ! "$PY" -c "import PIL, numpy" 2>/dev/null; then
    echo "skip: $PY lacks Pillow or numpy"
    exit 77
fi
: "${STOKER_PACK:?}" "${STOKER_TEST_TMP:?}"
mkdir -p "$STOKER_TEST_TMP"
T=$(mktemp -d "$STOKER_TEST_TMP/pack-tree-XXXXXX")
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
P=$STOKER_PACK

. "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
records() { "$P" --info --json "$1" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["records"])'; }
now() { date +%s.%N; }
# elapsed START: seconds since START, to two decimals
elapsed() { "$PY" -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$(now)"; }
# within LIMIT SECONDS: SECONDS <= LIMIT
within() { "$PY" -c "import sys; sys.exit(float(sys.argv[2]) > float(sys.argv[1]))" "$1" "$2"; }

"$PY" - "$T" <<'PYEOF' || fail "making test data"
import os, sys
import numpy as np
from PIL import Image
t = sys.argv[1]
def jpeg(path, v):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    Image.fromarray(np.full((16, 16, 3), v, np.uint8)).save(path, quality=90)
# Class a: four images and a link to its own folder (a loop).
for i in range(4):
    jpeg(f"{t}/loops/a/{i}.jpg", 10 * i)
os.symlink(".", f"{t}/loops/a/loop")
# Class b: two images and two links to its own folder (before: a walk without end).
for i in range(2):
    jpeg(f"{t}/loops/b/{i}.jpg", 100 + 10 * i)
os.symlink(".", f"{t}/loops/b/l1")
os.symlink(".", f"{t}/loops/b/l2")
# Class c: one image reached three times (itself and two links to it), a folder reached
# twice (itself and a link to it) holding one image, and a link up to the tree's root.
jpeg(f"{t}/loops/c/real.jpg", 200)
os.makedirs(f"{t}/loops/c/x")
os.makedirs(f"{t}/loops/c/y")
os.symlink("../real.jpg", f"{t}/loops/c/x/alias.jpg")
os.symlink("../real.jpg", f"{t}/loops/c/y/alias.jpg")
jpeg(f"{t}/loops/c/sub/s.jpg", 220)
os.symlink("sub", f"{t}/loops/c/sub_again")
os.symlink("../..", f"{t}/loops/c/up")
PYEOF

# ---- links: loops named and never followed, a file reached twice packed once ------------
run 0 timeout -k 2 10 "$P" --no-shuffle "$T/loops" "$T/out_loops"
# a: 4, b: 2, c: real.jpg once and sub/s.jpg once
[ "$(records "$T/out_loops")" = 8 ] || { cat "$T/stderr" >&2; fail "want 8 records"; }
has stderr "a/loop"
has stderr "b/l1"
has stderr "b/l2"
has stderr "c/up"
has stderr "loop"
has stderr "c/sub_again"
has stderr "c/x/alias.jpg"
has stderr "c/y/alias.jpg"
has stderr "packed once"
"$P" --info --json "$T/out_loops" >/dev/null || fail "--info of the looped tree's output"

echo "ok"
