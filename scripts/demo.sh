#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# stoker's main job on a small built-in sample, on a fresh Debian 12 machine:
# install the dependencies, build, make ~600 ImageNet-like JPEGs from the photographs of
# Debian's mate-backgrounds package, pack them into shards, verify the result, print a
# summary, then load it (C and Python) and benchmark the loader.
#   scripts/demo.sh             everything (data under demo-data/)
#   STOKER_DEMO_N=2000 scripts/demo.sh   a larger sample
set -eu
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
n=${STOKER_DEMO_N:-600}
data=demo-data

step() { printf '\n==== %s\n' "$*"; }

sh scripts/install-deps.sh

step "build (RelWithDebInfo)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo > build.log 2>&1 || { cat build.log; exit 1; }
cmake --build build -j "$jobs" > build-make.log 2>&1 || { tail -n 40 build-make.log; exit 1; }
echo "built $(ls build/libstoker.so* | head -n 1), build/stoker-pack, build/stoker-bench"

step "make a sample: $n JPEGs from real photographs"
if [ ! -f "$data/sample-$n.done" ]; then
    rm -rf "$data/sample"
    /usr/bin/python3 scripts/make-sample.py --out "$data/sample" --n "$n" --classes 10
    touch "$data/sample-$n.done"
else
    echo "reusing $data/sample ($(find "$data/sample" -name '*.jpg' | wc -l) JPEGs)"
fi

step "pack it (validating every JPEG)"
build/stoker-pack --force --shard-size 8M "$data/sample/train" "$data/packed"

step "verify it"
build/stoker-pack --verify "$data/packed"

step "summary"
build/stoker-pack --info "$data/packed" | tee "$data/info.txt"

step "load it: the training transform (decode the crop, RandomResizedCrop 224, flip, normalise), 3 s or more"
build/stoker-bench "$data/packed" --batch-size 64 --min-seconds 3 | tee "$data/bench-train.txt"

step "load it: the packed JPEG bytes only (no decode), as for decoding elsewhere"
build/stoker-bench "$data/packed" --batch-size 64 --transform none --min-seconds 3 |
    tee "$data/bench-bytes.txt"

step "from Python: one batch as a NumPy array through DLPack"
STOKER_LIBRARY="$(pwd)/build/libstoker.so" PYTHONPATH=python /usr/bin/python3 - "$data/packed" <<'PY'
import sys
import numpy as np
import stoker
with stoker.Loader(sys.argv[1], batch_size=8, device="cpu", dtype="float32") as loader:
    batch = next(iter(loader))
    x = np.from_dlpack(batch.data)
    print(f"{len(loader)} batches per epoch; first batch {x.shape} {x.dtype}, "
          f"mean {x.mean():+.3f}, labels {batch.labels.tolist()}")
PY

# what the report's line NAME says, after the name
said() { sed -n "s/^$1  *//p" "$2" | head -n 1; }
step "what this run measured"
echo "packed      $(said records "$data/info.txt") records from $data/sample/train into $data/packed," \
    "$(said shards "$data/info.txt") shard(s), verified"
echo "training    $(said throughput "$data/bench-train.txt") on device" \
    "$(said device "$data/bench-train.txt"); the consumer $(said consumer "$data/bench-train.txt")"
echo "bytes only  $(said throughput "$data/bench-bytes.txt")"
echo "These figures come from the page cache: the sample was written just now, so every read"
echo "was served from memory. A data set larger than memory, or one read cold, is read from"
echo "the disk (bench/cold.sh measures that); docs/BENCHMARKS.md has figures against the peers."
echo
echo "scripts/demo.sh: done (data in $data/)"
