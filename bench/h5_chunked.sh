#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A chunked, compressed HDF5 file read in random order, three ways:
#   1. stoker-bench --order records (a permutation of all records: most records cost a
#      partial inflation of their chunk);
#   2. stoker-bench --order blocks (chunk by chunk: each chunk's rows visited together, in a
#      seeded order, so a chunk is inflated about once per epoch; docs/HDF5.md);
#   3. h5py in one process: per batch, 256 random ids of a seeded permutation, sorted,
#      read with one fancy-indexed f["images"][ids] (what an h5py Dataset's __getitem__ does
#      for one batch).
# Each prints records/s; the summary gives the ratios to h5py.
#
#   bench/h5_chunked.sh BUILD FILE
#
# FILE: datasets `images` (N, ...) and optionally `labels`, `images` chunked and compressed,
#   e.g. written with h5py as
#   f.create_dataset("images", data=x, chunks=(64, 224, 224, 3), compression="gzip")
#   (bench/make_data.py h5 writes contiguous arrays: rewrite its `images` that way)
# Env: THREADS (stoker's worker threads; default the library's), EPOCHS (timed epochs,
# default 3), DEVICE (stoker-bench --device: cpu, cuda, N; default the library's), PYTHON
# (an interpreter with numpy and h5py; default the first of python3, /usr/bin/python3 that
# has them).
set -euo pipefail
build=${1:?usage: h5_chunked.sh BUILD FILE}
file=${2:?usage: h5_chunked.sh BUILD FILE}
epochs=${EPOCHS:-3}
bench=$build/stoker-bench
[ -x "$bench" ] || { echo "no $bench: build the tools first" >&2; exit 1; }
[ -f "$file" ] || { echo "no file $file" >&2; exit 1; }
py=${PYTHON:-}
if [ -z "$py" ]; then
    for c in python3 /usr/bin/python3; do
        if "$c" -c 'import numpy, h5py' 2>/dev/null; then py=$c; break; fi
    done
fi
[ -n "$py" ] || { echo "no python with numpy and h5py (set PYTHON)" >&2; exit 1; }

opts=(--epochs "$epochs" --json)
[ -n "${THREADS:-}" ] && opts+=(--threads "$THREADS")
[ -n "${DEVICE:-}" ] && opts+=(--device "$DEVICE")

# Warm the page cache: all three read from memory.
cat "$file" >/dev/null

rate() { sed -n 's/.*"records_per_sec":\([0-9.]*\).*/\1/p'; }

echo "file: $file ($(du -h "$file" | cut -f1)), epochs $epochs, threads ${THREADS:-default}"
declare -A rps
for order in records blocks; do
    json=$("$bench" "$file" --order "$order" "${opts[@]}")
    rps[$order]=$(echo "$json" | rate)
    echo "stoker-bench --order $order: ${rps[$order]} records/s"
    echo "  $json" | cut -c1-400
done

rps[h5py]=$("$py" - "$file" "$epochs" <<'PYEOF'
import sys, time
import numpy as np, h5py
path, epochs = sys.argv[1], int(sys.argv[2])
with h5py.File(path, "r") as f:
    d = f["images"]
    n, bs = d.shape[0], 256
    def epoch(e):
        order = np.random.default_rng(e).permutation(n)
        got = 0
        for s in range(0, n, bs):
            got += len(d[np.sort(order[s:s + bs])])
        return got
    epoch(100)  # warm-up, as stoker-bench's first batch
    t0 = time.perf_counter()
    got = sum(epoch(e) for e in range(epochs))
    print("%.1f" % (got / (time.perf_counter() - t0)))
PYEOF
)
echo "h5py, one process, sorted random batches of 256: ${rps[h5py]} records/s"

echo
echo "| reader | records/s | vs h5py |"
echo "| --- | ---: | ---: |"
for k in h5py records blocks; do
    name=$k
    [ "$k" != h5py ] && name="stoker --order $k"
    ratio=$(echo "${rps[$k]} ${rps[h5py]}" | awk '{printf "%.2f", $1 / $2}')
    echo "| $name | ${rps[$k]} | ${ratio}x |"
done
