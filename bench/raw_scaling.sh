#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Raw-record read throughput of stoker-bench against `cat` of the same shards, over thread
# counts and back-ends (warm page cache, 150,528-byte records, shuffled).
#
#   bench/raw_scaling.sh BUILD_DIR DATA_DIR [RECORDS] [THREADS...]
#
# Writes the data set with bench/make_raw_dataset.py when DATA_DIR does not exist. Needs a
# python3 with numpy (PYTHON=... to choose).
set -euo pipefail
build=$1 data=$2 records=${3:-2000}
shift $(( $# < 3 ? $# : 3 ))
threads=${*:-1 2}
py=${PYTHON:-python3}
here=$(cd "$(dirname "$0")" && pwd)
[ -d "$data" ] || "$py" "$here/make_raw_dataset.py" --lib "$build/libstoker.so" "$data" \
    --records "$records"
cat "$data"/shard-* > /dev/null # warm
bytes=$(cat "$data"/shard-* | wc -c)
best=0
for i in 1 2 3; do
    t0=$(date +%s%N); cat "$data"/shard-* > /dev/null; t1=$(date +%s%N)
    best=$("$py" -c "print(max($best, $bytes / (($t1 - $t0) / 1e9) / 1e9))")
done
printf 'cat of the shards (best of 3): %.2f GB/s\n' "$best"
printf '%-9s %7s %10s %12s %8s\n' backend threads "GB/s" "records/s" "vs cat"
for be in io_uring pread; do
    for t in $threads; do
        "$build/stoker-bench" "$data" --epochs 3 --threads "$t" --backend "$be" --json |
            "$py" -c "import json,sys; o=json.load(sys.stdin); g=o['bytes_per_sec']/1e9; \
print('%-9s %7d %10.2f %12.0f %8.2f' % (o['backend'], o['threads'], g, o['records_per_sec'], \
g / $best))"
    done
done
