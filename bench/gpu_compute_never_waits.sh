#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The compute-never-waits benchmark: a training-loop consumer (examples/train_loop.cpp) on
# its own CUDA stream, per step: next -> stream waits on the batch's event -> a kernel that
# runs X ms on the batch -> release_stream -> wait for the previous step's kernel (as
# loss.item() would). Reported per X: the fraction of wall time the GPU was idle between
# consumer kernels (CUDA events), the fraction the host blocked in next, p50/p99 of next,
# and the consumer kernel's median time in the run beside its median time alone.
#
#   bench/gpu_compute_never_waits.sh BUILD_DIR DATA_DIR [BATCH] [STEPS] [-- ARGS...]
#
# ARGS go to every run of train_loop_cpp (e.g. `-- --decoder auto` for JPEG data).
# DATA_DIR: any data set (a JPEG train-224 one, or raw records); when it does not exist, a
# raw data set of 4000 records of 150,528 bytes (224x224x3 uint8) is written there.
# Steps: (1) the loader alone (X = 0, device delivery) gives its per-batch time T and the
# H2D throughput; (2) X = 1.1 T, 0.5 T and 2 T, plus fixed 5, 20 and 50 ms, with device
# delivery; (3) X = 1.1 T with host delivery (--device cpu: pageable batches copied by the
# consumer) for comparison; (4) PyTorch's pin_memory + .to(non_blocking=True) copy rate on
# batches of the same size, when torch is importable; (5) the consumer's own kernels: at
# X = 1.1 T with --kernel work (a fixed amount of arithmetic on every SM in short blocks, as
# a GEMM's tiles, sized to last X ms alone before the loader starts), its median time in
# the steps against its median time alone after the loader is destroyed, and the idle and
# next targets judged on that run too (the spin kernel holds every SM for the whole X ms,
# so the loader's own kernels, the GPU decode's, can only run between steps). Targets (design): at X = 1.1 T, gpu_idle_fraction
# <= 0.01 and next_p99_us <= 100, and the consumer's kernel at most 5% slower than alone,
# for any data; delivery >= 40 GB/s at X = 0 for raw records of 150,528 bytes only (other
# data is "n/a": a JPEG batch is bound by decoding, not by copies). What the data is comes
# from `stoker-pack --info --json`.
# (6) a network-like consumer (--kernel net): per step a chain of NET_LAUNCHES short kernels
# (default 300, as a network's layers, each reading the previous one's output) launched one
# by one from the consuming thread, their GPU time alone sized to X_net (NET_MS, default 1.1
# times the slowest of the loader's per-batch times with the decoders below, so that the
# loader keeps up), with NET_HOST_US of host work before each launch (default X_net /
# NET_LAUNCHES: the host's own work per step as long as the GPU's, so that the step is set
# by the host's time, as an eager framework's step of short kernels is, and a costlier
# launch lengthens it). It is fed a fixed batch with no loader (synthetic), then by the
# loader with each decoder of NET_DECODERS (default "cpu auto" for JPEG data; the library's
# default for other data), with the same kernels; a table gives per feed the step time, the
# mean host time of one launch call (and the same before the loader started, in that run),
# the GPU's idle share, img/s, and the step time and the launch time against synthetic's.
# The interference it looks for: other threads of the process (the GPU decode's) making
# each of the consumer's launches costlier. NET_ARGS go to these runs only (e.g.
# NET_ARGS=--backward-thread); NET=0 leaves them out.
# Env: DEVICE (GPU ordinal, default 0), THREADS (loader threads, default the library's:
# cores - 1; for raw records use fewer, e.g. 12 of 16 cores: the consumer spins on its core
# and the workers are bound by memory bandwidth, see docs/GPU.md), DEPTH (host batch slots,
# default the library's: 4, more for image transforms with many threads), SYNC (spin|block),
# DECODER (auto|cpu|gpu: who decodes JPEGs; default the library's, auto), PYTHON, JSONL (a
# file that gets every run's JSON line), SWEEP (0: of step 2, X = 1.1 T only, default 1),
# WARMUP (untimed steps first, default 40: at X = 1.1 T the loader gains a tenth of a batch
# per step on the consumer, so it takes about 10 x depth steps after start to build the
# lead of full slots it keeps from then on; the figures are those of that steady state).
set -euo pipefail
pos=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
    pos+=("$1")
    shift
done
[ $# -gt 0 ] && shift # the --: what follows goes to train_loop_cpp
if [ ${#pos[@]} -lt 2 ]; then
    echo "usage: $0 BUILD_DIR DATA_DIR [BATCH] [STEPS] [-- ARGS]" >&2
    exit 2
fi
build=${pos[0]} data=${pos[1]} batch=${pos[2]:-256} steps=${pos[3]:-300}
py=${PYTHON:-python3}
dev=${DEVICE:-0}
exe=$build/examples/train_loop_cpp
[ -x "$exe" ] || { echo "no $exe: build with CUDA and nvcc" >&2; exit 1; }
threads=()
[ -n "${THREADS:-}" ] && threads=(--threads "$THREADS")
[ -n "${DEPTH:-}" ] && threads+=(--depth "$DEPTH")
[ -n "${SYNC:-}" ] && threads+=(--sync "$SYNC")
[ -n "${DECODER:-}" ] && threads+=(--decoder "$DECODER")
threads+=("$@")

if [ ! -d "$data" ]; then
    echo "writing a raw data set at $data (4000 x 150528 bytes)" >&2
    "$py" - "$build/libstoker.so" "$data" <<'PYEOF'
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1]); out = sys.argv[2].encode()
vp = ctypes.c_void_p
for f, a in [("stoker_config_create", [ctypes.POINTER(vp)]),
             ("stoker_config_set_int", [vp, ctypes.c_int, ctypes.c_int64]),
             ("stoker_writer_create", [ctypes.POINTER(vp), ctypes.c_char_p, vp]),
             ("stoker_writer_set_field", [vp, ctypes.c_int, ctypes.c_int32, ctypes.c_int32,
                                          ctypes.POINTER(ctypes.c_int64)]),
             ("stoker_writer_add", [vp, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int64,
                                    ctypes.c_char_p]),
             ("stoker_writer_finish", [vp]), ("stoker_writer_destroy", [vp])]:
    getattr(lib, f).argtypes = a
cfg, w = vp(), vp()
def ok(rc, what):
    if rc != 0:
        sys.exit("%s failed: %d" % (what, rc))
ok(lib.stoker_config_create(ctypes.byref(cfg)), "config")
ok(lib.stoker_config_set_int(cfg, 3, 1), "overwrite")   # STOKER_OPT_OVERWRITE
ok(lib.stoker_config_set_int(cfg, 4, 0), "fsync")       # STOKER_OPT_FSYNC
ok(lib.stoker_writer_create(ctypes.byref(w), out, cfg), "create")
shape = (ctypes.c_int64 * 3)(224, 224, 3)
ok(lib.stoker_writer_set_field(w, 3, 1, 3, shape), "field")  # RAW, UINT8
size = 224 * 224 * 3
base = bytes((k * 7 + (k >> 8) + 1) & 255 for k in range(size))
for i in range(4000):
    table = bytes(((b + i * 131) & 255) for b in range(256))
    rec = base.translate(table)
    ok(lib.stoker_writer_add(w, rec, size, i % 10 - 3, None), "add")
ok(lib.stoker_writer_finish(w), "finish")
lib.stoker_writer_destroy(w)
PYEOF
fi
cat "$data"/shard-* > /dev/null 2>&1 || true # warm the page cache

# kind: "raw150" for raw 150,528-byte records, else what the data is, for the verdicts
info=$("$build/stoker-pack" --info --json "$data" 2>&1) || info="error: ${info:-no output}"
kind=$("$py" -c '
import json, sys
try:
    o = json.loads(sys.argv[1])
    field, rec = o["field"], o["bytes"] // o["records"]
except (ValueError, KeyError, TypeError, ZeroDivisionError):
    print("data of unknown kind (stoker-pack --info: %s)" % sys.argv[1].strip()[:200])
else:
    if field == "raw":
        print("raw150" if rec == 150528 else "raw records of %d bytes" % rec)
    else:
        print("JPEG data" if field == "jpeg" else "%s records" % field)
' "$info")
echo "data: $data: ${kind/raw150/raw records of 150528 bytes}"

# run DEVICE X [ARGS...]: one run of the consumer; its JSON line (also into JSONL)
run() {
    local out
    out=$("$exe" "$data" --device "$1" --compute-ms "$2" --batch-size "$batch" \
        --steps "$steps" --warmup "${WARMUP:-40}" "${threads[@]}" "${@:3}") || return
    [ -z "${JSONL:-}" ] || echo "$out" >> "$JSONL"
    echo "$out"
}
field() { "$py" -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }

printf '%-8s %-5s %-7s %10s %9s %11s %10s %10s %9s %10s %9s\n' delivery kern X_ms ms/step \
    "GB/s" gpu_idle next_block p50_us p99_us kernel_ms alone_ms
row() {
    "$py" -c "
import json, sys
o = json.loads(sys.argv[1])
print('%-8s %-5s %-7.2f %10.3f %9.2f %11.4f %10.4f %10.1f %9.1f %10.3f %9.3f' % (o['delivery'],
      o.get('kernel', 'spin'), o['compute_ms'], o['ms_per_step'], o['GB_per_s'],
      o['gpu_idle_fraction'], o['next_block_fraction'], o['next_p50_us'], o['next_p99_us'],
      o.get('kernel_ms', float('nan')), o.get('kernel_alone_ms', float('nan'))))" "$1"
}

base=$(run "$dev" 0)
row "$base"
T=$(field "$base" ms_per_step)
echo "device: $(field "$base" device); $(field "$base" threads) loader threads;" \
     "consumer waits by $(field "$base" sync); loader per-batch time T = $T ms;" \
     "H2D delivery $(field "$base" GB_per_s) GB/s; pinned $(field "$base" pinned_bytes) bytes;" \
     "decoder $(field "$base" decoder) (GPU decoded $(field "$base" gpu_decoded)," \
     "CPU $(field "$base" cpu_decoded) images)"
verdict=""
xs="0.5*t, 1.1*t, 2*t, 5, 20, 50"
[ "${SWEEP:-1}" = 0 ] && xs="1.1*t,"
for X in $("$py" -c "t=$T; print(' '.join('%.3f' % x for x in ($xs)))"); do
    out=$(run "$dev" "$X")
    row "$out"
    if [ "$X" = "$("$py" -c "print('%.3f' % (1.1*$T))")" ]; then
        verdict=$("$py" -c "import json,sys; o=json.loads(sys.argv[1]); \
ok=o['gpu_idle_fraction']<=0.01 and o['next_p99_us']<=100; \
print('X = 1.1 T = %.3f ms: gpu idle %.2f%% (target <= 1%%), p99 next %.1f us (target <= 100): %s' \
% (o['compute_ms'], 100*o['gpu_idle_fraction'], o['next_p99_us'], 'PASS' if ok else 'FAIL'))" "$out")
    fi
done
X11=$("$py" -c "print('%.3f' % (1.1*$T))")
row "$(run cpu "$X11")"
# The consumer's own kernels: fixed work, X = 1.1 T alone, timed beside the loader
work=$(run "$dev" "$X11" --kernel work)
row "$work"
echo "$verdict (spin: every SM held for X ms per step)"
"$py" -c "import json,sys; o=json.loads(sys.argv[1]); \
ok=o['gpu_idle_fraction']<=0.01 and o['next_p99_us']<=100; \
print('X = 1.1 T = %.3f ms, fixed work in short blocks: gpu idle %.2f%% (target <= 1%%), p99 next %.1f us (target <= 100): %s' \
% (o['compute_ms'], 100*o['gpu_idle_fraction'], o['next_p99_us'], 'PASS' if ok else 'FAIL'))" "$work"
"$py" -c "import json, sys; o = json.loads(sys.argv[1])
k, a = o['kernel_ms'], o['kernel_alone_ms']
slow = k / a - 1 if a > 0 else float('inf')
print('consumer kernel at X = 1.1 T (fixed work): alone %.3f ms, beside the loader %.3f ms: '
      '%+.1f%% (target <= +5%%): %s (decoder %s: GPU decoded %d, CPU %d images)'
      % (a, k, 100 * slow, 'PASS' if slow <= 0.05 else 'FAIL', o['decoder'],
         o['gpu_decoded'], o['cpu_decoded']))" "$work"
gbs=$(field "$base" GB_per_s)
"$py" -c "import sys; g, kind = $gbs, sys.argv[1]
print('delivery to device at X = 0: %.2f GB/s (target >= 40 for raw 150 KB records): %s'
      % (g, ('PASS' if g >= 40 else 'FAIL') if kind == 'raw150' else 'n/a for ' + kind))" "$kind"

bytes=$(field "$base" batch_bytes)
"$py" - "$bytes" "$dev" 2>/dev/null <<'PYEOF' || echo "torch baseline: torch with CUDA not available"
import sys, time
import torch
n, dev = int(sys.argv[1]), int(sys.argv[2])
src = [torch.empty(n, dtype=torch.uint8).pin_memory() for _ in range(4)]
torch.cuda.synchronize(dev)
for s in src:
    s.to(f"cuda:{dev}", non_blocking=True)
torch.cuda.synchronize(dev)
k = 200
t0 = time.perf_counter()
for i in range(k):
    src[i % 4].to(f"cuda:{dev}", non_blocking=True)
torch.cuda.synchronize(dev)
dt = time.perf_counter() - t0
print("torch pin_memory=True + .to(non_blocking=True), %d-byte batches: %.2f GB/s "
      "(copy only, batches already pinned)" % (n, n * k / dt / 1e9))
PYEOF

# ---- (6) the network-like consumer: synthetic feed, then the loader with each decoder ----
[ "${NET:-1}" = 0 ] && exit 0
launches=${NET_LAUNCHES:-300}
if [ -n "${NET_DECODERS:-}" ]; then
    read -r -a decoders <<< "$NET_DECODERS"
elif [ "$kind" = "JPEG data" ]; then
    decoders=(cpu auto)
else
    decoders=(default) # no decoder to choose: the loader as it is
fi
# dec DECODER: the arguments that choose it (none for "default")
dec() { dargs=(); [ "$1" = default ] || dargs=(--decoder "$1"); }
xnet=${NET_MS:-}
if [ -z "$xnet" ]; then # 1.1 x the slowest loader of the rows, each alone (X = 0)
    tmax=$T
    for d in "${decoders[@]}"; do
        dec "$d"
        out=$(run "$dev" 0 "${dargs[@]}")
        t=$(field "$out" ms_per_step)
        tmax=$("$py" -c "print(max($tmax, $t))")
        echo "loader alone, decoder $d: $t ms per batch"
    done
    xnet=$("$py" -c "print('%.3f' % (1.1 * $tmax))")
fi
host_us=${NET_HOST_US:-$("$py" -c "print('%.2f' % (1000.0 * $xnet / $launches))")}
net=(--kernel net --launches "$launches" --host-us "$host_us")
read -r -a more <<< "${NET_ARGS:-}"
net+=("${more[@]}")
echo "network-like consumer at X = $xnet ms: synthetic feed, then decoders ${decoders[*]}"
synth=$(run "$dev" "$xnet" "${net[@]}" --synthetic)
net+=(--net-iters "$(field "$synth" net_iters)") # the same kernels for every feed
rows=("$synth")
for d in "${decoders[@]}"; do
    dec "$d"
    out=$(run "$dev" "$xnet" "${net[@]}" "${dargs[@]}")
    rows+=("$out")
done
"$py" - "${rows[@]}" <<'PYEOF'
import json, sys
rows = [json.loads(a) for a in sys.argv[1:]]
s = rows[0]
print()
print("network-like consumer: %d kernel launches a step, chained, %d rounds each: GPU time "
      "alone %.3f ms a step (X = %.3f ms); %.1f us of host work before each launch%s"
      % (s["launches"], s["net_iters"], s["chain_gpu_ms"], s["compute_ms"], s["host_us"],
         ", two thirds from a second thread" if s["backward_thread"] else ""))
print("%-10s %-8s %9s %10s %8s %10s %9s %9s %10s %7s %9s" % (
    "feed", "decoder", "step_ms", "launch_us", "p99_us", "before_us", "gpu_idle",
    "next_blk", "img/s", "step_x", "launch_x"))
for o in rows:
    feed = "synthetic" if o["delivery"] == "synthetic" else "loader"
    print("%-10s %-8s %9.3f %10.2f %8.1f %10.2f %9.4f %9.4f %10.1f %7.3f %9.3f" % (
        feed, o["decoder"], o["ms_per_step"], o["launch_us_mean"], o["launch_us_p99"],
        o["launch_us_before"], o["net_gpu_idle_fraction"], o["next_block_fraction"],
        o["img_per_s"], o["ms_per_step"] / s["ms_per_step"],
        o["launch_us_mean"] / s["launch_us_mean"] if s["launch_us_mean"] > 0 else float("nan")))
for o in rows[1:]:
    print("decoder %s against synthetic: step %+.1f%%, launch %.2f us against %.2f (x%.2f); "
          "GPU decoded %d, CPU %d images" % (
              o["decoder"], 100 * (o["ms_per_step"] / s["ms_per_step"] - 1), o["launch_us_mean"],
              s["launch_us_mean"], o["launch_us_mean"] / max(s["launch_us_mean"], 1e-9),
              o["gpu_decoded"], o["cpu_decoded"]))
print("(launch_us: host time of one launch call, mean over the timed steps; before_us: the "
      "same in that run before its loader started; gpu_idle: share of the wall time the GPU "
      "did not run the chain)")
PYEOF
