#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# stoker-pack on hostile source trees and interrupted runs: symbolic link loops are named
# and never followed, a file reached twice through links is packed once; a FIFO named like
# an image is named and left out (never opened to block a worker); SIGTERM and SIGINT end a
# run promptly leaving no output and no temporary directory; the temporary directories that
# a SIGKILLed run leaves are removed by the next successful pack (only those of that output,
# only of dead runs). Data is generated here with /usr/bin/python3 (Pillow, numpy).
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
# A FIFO named like an image beside three images.
for i in range(3):
    jpeg(f"{t}/fifo/k/{i}.jpg", 30 * i)
os.mkfifo(f"{t}/fifo/k/pipe.jpg")
# Many slow files for the interruption tests: hard links to one 512x512 PNG, which --rgb
# must decode and re-encode (milliseconds each), taking no disk space; and a FIFO first in
# storage order (--no-shuffle), where a worker blocked before.
y, x = np.mgrid[0:512, 0:512]
Image.fromarray(np.stack([x // 2, y // 2, (x + y) // 4], -1).astype(np.uint8)).save(
    f"{t}/slow.png")
for c in range(2):
    os.makedirs(f"{t}/big/c{c}")
    for i in range(1500):
        os.link(f"{t}/slow.png", f"{t}/big/c{c}/{i:05d}.png")
os.mkfifo(f"{t}/big/c0/0.png")
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

# ---- a FIFO is named and left out; the pack completes -----------------------------------
run 0 timeout -k 2 20 "$P" "$T/fifo" "$T/out_fifo"
[ "$(records "$T/out_fifo")" = 3 ] || fail "want 3 records beside the FIFO"
has stderr "pipe.jpg"
has stderr "not a regular file"

# ---- SIGTERM and SIGINT end a run within a second or two, leaving nothing ---------------
# The signal comes once the writer's temporary directory exists (the scan is over and
# workers are reading); the tree takes several seconds at --jobs 2.
for sig in TERM INT; do
    out="$T/out_$sig"
    "$P" --no-shuffle --jobs 2 --rgb "$T/big" "$out" 2>"$T/sig.err" &
    pid=$!
    PIDS+=("$pid")
    for _ in $(seq 100); do
        ls -a "$T" | grep -q "^\.out_$sig\.tmp-" && break
        sleep 0.05
    done
    ls -a "$T" | grep -q "^\.out_$sig\.tmp-" || fail "SIG$sig: no temporary directory within 5 s"
    sleep 0.3
    kill -0 "$pid" 2>/dev/null || fail "SIG$sig: the pack ended before the signal"
    t0=$(now)
    kill -"$sig" "$pid"
    gone=0
    for _ in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || { gone=1; break; }
        sleep 0.05
    done
    dt=$(elapsed "$t0")
    [ "$gone" = 1 ] || { kill -KILL "$pid"; fail "SIG$sig: still running ${dt} s after the signal"; }
    wait "$pid"
    rc=$?
    within 2.0 "$dt" || fail "SIG$sig: ended ${dt} s after the signal (want within 2 s)"
    [ "$rc" = 130 ] || { cat "$T/sig.err" >&2; fail "SIG$sig: exit status $rc, want 130"; }
    grep -q "interrupted" "$T/sig.err" || { cat "$T/sig.err" >&2; fail "SIG$sig: no message"; }
    [ ! -e "$out" ] || fail "SIG$sig: output written"
    ls -a "$T" | grep -q "\.tmp-" && fail "SIG$sig: temporary directory left behind"
done

# ---- leftovers of a killed run are removed by the next successful pack -----------------
"$P" --no-shuffle --jobs 1 --rgb "$T/big" "$T/out_kill" 2>/dev/null &
pid=$!
PIDS+=("$pid")
for _ in $(seq 100); do
    ls -a "$T" | grep -q '^\.out_kill\.tmp-' && break
    sleep 0.05
done
sleep 0.3
kill -KILL "$pid"
wait "$pid" 2>/dev/null
killed=$(ls -a "$T" | grep '^\.out_kill\.tmp-......$')
[ -n "$killed" ] || fail "SIGKILL left no temporary directory (nothing to test)"
# By hand: one leftover of this output, and names that must stay (another output's, a
# longer suffix, a file), and one held by a live writer (its lock taken here).
mkdir "$T/.out_kill.tmp-Ab12Cd" && : >"$T/.out_kill.tmp-Ab12Cd/shard-00000.stk"
mkdir "$T/.out_kill.tmp-Ab12Cd7" "$T/.other.tmp-Zy98Xw" "$T/.out_kill.tmp-Live01"
: >"$T/.out_kill.tmp-File01"
"$PY" -c 'import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_EX)
open(sys.argv[2], "w").close()
time.sleep(60)' "$T/.out_kill.tmp-Live01" "$T/locked" >/dev/null 2>&1 &
PIDS+=("$!")
for _ in $(seq 100); do
    [ -e "$T/locked" ] && break
    sleep 0.05
done
[ -e "$T/locked" ] || fail "no lock on .out_kill.tmp-Live01 within 5 s"
run 0 timeout -k 2 30 "$P" --no-shuffle "$T/fifo" "$T/out_kill"
[ ! -e "$T/$killed" ] || fail "the killed run's $killed was not removed"
[ ! -e "$T/.out_kill.tmp-Ab12Cd" ] || fail "the leftover .out_kill.tmp-Ab12Cd was not removed"
has stderr "$killed"
for keep in .out_kill.tmp-Ab12Cd7 .other.tmp-Zy98Xw .out_kill.tmp-Live01 .out_kill.tmp-File01; do
    [ -e "$T/$keep" ] || fail "$keep was removed"
done

echo "ok"
