#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# stoker-pack's speed on a JPEG tree:
#  1. packing without checking the JPEGs (--no-validate: a copy with headers parsed) against
#     `cp -r` of the same tree on the same disk (best of 3 each, page cache warmed first;
#     caches are not dropped, which needs root and is unreliable), and the default, which
#     entropy-decodes every JPEG, against the same copy;
#  2. the check's records/s per core against a full-size TurboJPEG decode loop's per-thread
#     rate (the decode-ceiling binary, run with 1 thread), when its path is given.
# usage: bench/pack_speed.sh SRC_TREE [DECODE_CEILING_BINARY]
# env: STOKER_PACK (default: build/stoker-pack), JOBS (default: online cores),
#      WORK (scratch folder on the disk to measure; default: beside SRC_TREE)
set -euo pipefail
SRC=${1:?usage: pack_speed.sh SRC_TREE [DECODE_CEILING_BINARY]}
CEILING=${2:-}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PACK=${STOKER_PACK:-$HERE/../build/stoker-pack}
JOBS=${JOBS:-$(nproc)}
WORK=$(mktemp -d "${WORK:-$(dirname "$SRC")}/pack-speed-XXXXXX")
trap 'rm -rf "$WORK"' EXIT

files=$(find "$SRC" -type f | wc -l)
bytes=$(du -sb "$SRC" | cut -f1)
echo "source: $SRC ($files files, $((bytes / 1000000)) MB); stoker-pack: $PACK; jobs: $JOBS"
"$PACK" --version

# Warm the page cache, so both sides read from memory.
find "$SRC" -type f -print0 | xargs -0 cat >/dev/null

div() { echo "$1 $2" | awk '{printf "%.2f", $1 / $2}'; }

# best_of3 NAME CMD...: runs CMD three times (removing $WORK/dst before each), prints and
# returns (in $best) the fastest wall time in seconds.
best_of3() {
    local name=$1
    shift
    best=
    for _ in 1 2 3; do
        rm -rf "$WORK/dst"
        local t0 t1
        t0=$(date +%s.%N)
        "$@" >/dev/null
        t1=$(date +%s.%N)
        best=$(echo "$t0 $t1 ${best:-inf}" |
            awk '{d = $2 - $1; print ($3 == "inf" || d < $3) ? d : $3}')
    done
    printf "%-44s %8.3f s  %8.0f files/s\n" "$name" "$best" "$(div "$files" "$best")"
}

best_of3 "cp -r (no fsync)" cp -r "$SRC" "$WORK/dst"
t_cp=$best
best_of3 "stoker-pack --no-fsync --no-validate" "$PACK" --quiet --no-fsync --no-validate \
    --jobs "$JOBS" "$SRC" "$WORK/dst"
t_pack=$best
best_of3 "stoker-pack --no-validate (fsync)" "$PACK" --quiet --no-validate --jobs "$JOBS" \
    "$SRC" "$WORK/dst"
t_fsync=$best
best_of3 "stoker-pack --no-fsync (JPEGs checked)" "$PACK" --quiet --no-fsync --jobs "$JOBS" \
    "$SRC" "$WORK/dst"
t_checked=$best
best_of3 "cp -r + sync" bash -c "cp -r '$SRC' '$WORK/dst' && sync"
t_cpsync=$best
echo "ratio stoker-pack --no-validate --no-fsync / cp -r: $(div "$t_pack" "$t_cp") (target <= 1.10)"
echo "ratio stoker-pack --no-validate / cp -r + sync:    $(div "$t_fsync" "$t_cpsync")"
echo "ratio stoker-pack --no-fsync (checked) / cp -r:    $(div "$t_checked" "$t_cp")"
echo "(cp does not fsync; stoker-pack fsyncs shards and manifest by default)"

best_of3 "stoker-pack --jobs 1 (JPEGs checked)" \
    "$PACK" --quiet --no-fsync --jobs 1 "$SRC" "$WORK/dst"
per_core=$(echo "$files $best" | awk '{printf "%.0f", $1 / $2}')
echo "checking: $per_core records/s on one core"
if [ -n "$CEILING" ]; then
    line=$(find "$SRC" -iname '*.jpg' -o -iname '*.jpeg' | "$CEILING" 1 1 | grep full-size)
    echo "ceiling: $line"
    ceil=$(echo "$line" | sed -n 's/.* \([0-9][0-9]*\) img\/s\/thread.*/\1/p')
    echo "checking per core / full-size decode per thread: $(div "$per_core" "$ceil")" \
        "(target >= 0.90)"
fi
