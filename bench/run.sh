#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# stoker beside its peers, on one machine and one data set, in one go.
#
#   bench/run.sh [--build DIR] [--images DIR|N] [--h5 FILE|N] [--out DIR] [--threads T]
#                [--photos DIR] [--budget SECONDS] [--quick] [--no-train]
#
# Makes (or takes) an ImageNet-like JPEG tree and an HDF5 file of 224x224x3 uint8 images,
# packs both with stoker-pack, then measures on that data:
#   - stoker-bench: JPEG train transform (224, float16, onto the GPU when one is usable),
#     the HDF5 file read directly, and the same raw records packed into shards; with a GPU
#     and a stoker-bench that takes --decoder, the JPEG row three times: --decoder cpu, auto
#     and gpu (same data, threads and length), each with its decoder figures;
#   - PyTorch DataLoader classic (Pillow) and torchvision-uint8 pipelines; h5py + DataLoader;
#     with a GPU, torchvision's batched GPU decode alone (decode_jpeg(list, device="cuda"));
#   - the libjpeg decode-only ceilings (whole image, and only the crop box);
#   - where torch sees a GPU, a training step: bench/train.py trains ResNet-18 and ResNet-50
#     on the same JPEGs fed by one fixed batch on the GPU, stoker --decoder cpu, stoker's
#     defaults and the DataLoader, and writes its own table (OUT/train-results.md, .json).
# Writes OUT/bench-results.md and OUT/bench-results.json (figures and ratios to stoker, and
# --decoder auto against cpu); logs of every step are in OUT/logs. Peers whose packages are
# absent get a row saying so; rows that need a GPU, or a --decoder, say why they were skipped.
#
# --build DIR    stoker's build folder (default: build; configured and built when it lacks
#                stoker-bench or stoker-pack)
# --images X     a JPEG tree (ImageFolder, or a folder holding train/), or how many to make
#                (default 20000 on 8 or more cores, else 600)
# --h5 X         an HDF5 file with `images` (N,224,224,3) uint8 and `labels`, or how many
#                images to put in a new one (default: as many as --images, at most 20,000)
# --out DIR      results, logs and made data (default: BUILD/bench); made data is reused
# --threads T    stoker threads, DataLoader workers and decode threads (default: cores)
# --photos DIR   photographs to cut the JPEGs from (default: Debian's mate-backgrounds)
# --budget S     wall-clock limit of the whole run (default 470, or 170 with small data; 420
#                more when the training step runs, 150 more with --quick)
# --quick        600 images, fewer epochs; the training step on ResNet-18 only, fewer steps
# --no-train     no training step
# The Python is the first of python3, /usr/bin/python3 that imports numpy, preferring one
# with torch; PYTHON=... chooses the one that runs the peers.
set -eu

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
build=$root/build
images="" h5="" out="" threads="" photos="" budget="" quick=0 train=1
cmdline="bench/run.sh $*"

die() { echo "run.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
        --build) build=${2:?--build needs a folder}; shift ;;
        --images) images=${2:?--images needs a folder or a count}; shift ;;
        --h5) h5=${2:?--h5 needs a file or a count}; shift ;;
        --out) out=${2:?--out needs a folder}; shift ;;
        --threads) threads=${2:?--threads needs a count}; shift ;;
        --photos) photos=${2:?--photos needs a folder}; shift ;;
        --budget) budget=${2:?--budget needs seconds}; shift ;;
        --quick) quick=1 ;;
        --no-train) train=0 ;;
        -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
    shift
done
is_count() { case "$1" in ''|*[!0-9]*) return 1 ;; *) [ "$1" -gt 0 ] ;; esac; }

cores=$(nproc 2>/dev/null || echo 1)
threads_given=${threads:+1}
threads=${threads:-$cores}
is_count "$threads" || die "--threads needs a positive integer"
if [ -z "$images" ]; then
    if [ "$quick" = 1 ] || [ "$cores" -lt 8 ]; then images=600; else images=20000; fi
fi
mkdir -p "$build"
build=$(cd "$build" && pwd)
out=${out:-$build/bench}
mkdir -p "$out/logs" "$out/data"
out=$(cd "$out" && pwd)
rows=$out/rows.jsonl
: > "$rows"
rm -f "$out/train-results.md" "$out/train-results.json"

# ---- the clock: every step gets at most what is left of the budget ----
start=$(date +%s)
if [ -z "$budget" ]; then
    if is_count "$images" && [ "$images" -le 2000 ]; then budget=170; else budget=470; fi
fi
is_count "$budget" || die "--budget needs seconds"
deadline=$((start + budget))
reserve=8 # for the report

# limit, why, step and probe_py: the time-limited steps (bench/steps.sh)
. "$here/steps.sh"

if [ -n "${PYTHON:-}" ]; then
    py=$PYTHON
else
    py=$(probe_py "numpy, torch") || py=$(probe_py numpy) || py=""
fi
py_data=$(probe_py "numpy, PIL, h5py") || py_data=$(probe_py "numpy, PIL") || py_data=""
py_report=${py:-python3}
command -v "$py_report" > /dev/null 2>&1 || die "no python3 found"

# row ID NAME GROUP UNIT STATUS NOTE [ERRFILE]: a row without a figure
row() {
    "$py_report" "$here/report.py" row --id "$1" --name "$2" --group "$3" --unit "$4" \
        --status "$5" --note "$6" ${7:+--err "$7"} >> "$rows"
}
status_of() { case "$1" in 124) echo timeout ;; 125) echo skipped ;; *) echo failed ;; esac; }

# ---- GPU ----
gpu=""
if command -v nvidia-smi > /dev/null 2>&1; then
    gpu=$(timeout 20 nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null |
        head -n 1) || gpu=""
fi

# ---- the training step (bench/train.py): where torch sees a GPU; its time comes on top ----
train_py="" train_budget=420 train_why="skipped (--no-train)"
[ "$quick" = 1 ] && train_budget=150
if [ "$train" = 1 ]; then
    train_why="skipped: no python3 with torch that sees a GPU (torch.cuda.is_available())"
    if [ -n "$py" ] && timeout 120 "$py" -c \
        'import torch; assert torch.cuda.is_available()' > /dev/null 2>&1; then
        train_py=$py
        budget=$((budget + train_budget))
        deadline=$((deadline + train_budget))
    fi
fi

echo "run.sh: out $out; $threads threads; budget ${budget} s; python ${py:-none}" \
    "(data: ${py_data:-none}); GPU: ${gpu:-none}"

# ---- stoker's tools ----
bench_bin=$build/stoker-bench
pack_bin=$build/stoker-pack
if [ ! -x "$bench_bin" ] || [ ! -x "$pack_bin" ]; then
    echo "building stoker in $build"
    step cmake 120 cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release || true
    step build 240 cmake --build "$build" -j "$cores" || true
fi
if [ ! -x "$bench_bin" ] || [ ! -x "$pack_bin" ]; then
    die "no stoker-bench or stoker-pack in $build"
fi
stoker_version=$("$pack_bin" --version 2>/dev/null | head -n 1) || stoker_version=unknown
help=$("$bench_bin" --help 2>&1) || true
# an option of stoker-bench's usage, "[--name ...]" or "[--name]": not a longer one it begins
has() { case "$help" in *"[$1 "* | *"[$1]"*) return 0 ;; *) return 1 ;; esac; }

# ---- data ----
echo "data"
made_jpeg=$out/data/jpeg
if is_count "$images"; then
    if [ "$(cat "$made_jpeg/.made" 2>/dev/null)" != "$images ${photos:-default}" ]; then
        rm -rf "$made_jpeg" "$out/data/.h5made"
        [ -n "$py_data" ] || die "making images needs a python3 with numpy and Pillow"
        step make-images 240 "$py_data" "$here/make_data.py" images --out "$made_jpeg" \
            --n "$images" --classes "$([ "$images" -ge 10000 ] && echo 100 || echo 10)" \
            --jobs "$cores" ${photos:+--src "$photos"} ||
            die "could not make the images (see $out/logs/make-images.err; --photos DIR)"
        echo "$images ${photos:-default}" > "$made_jpeg/.made"
    fi
    jpeg_root=$made_jpeg/train
else
    [ -d "$images" ] || die "--images: no folder $images"
    jpeg_root=$(cd "$images" && pwd)
    [ -d "$jpeg_root/train" ] && jpeg_root=$jpeg_root/train
fi
n_images=$(find "$jpeg_root" -type f \( -iname '*.jpg' -o -iname '*.jpeg' \) | wc -l)
[ "$n_images" -gt 0 ] || die "no JPEGs under $jpeg_root"

h5=${h5:-$(( n_images < 20000 ? n_images : 20000 ))}
npy=$out/data/npy
if is_count "$h5"; then
    h5_file=$out/data/images.h5
    if [ "$(cat "$out/data/.h5made" 2>/dev/null)" != "$h5 $jpeg_root" ] ||
        [ ! -f "$h5_file" ] || [ ! -f "$npy/images.npy" ]; then
        rm -f "$out/data/.h5made"
        if [ -n "$py_data" ] && step make-h5 240 "$py_data" "$here/make_data.py" h5 \
            --out "$h5_file" --n "$h5" --from "$jpeg_root" --npy "$npy" --jobs "$cores"; then
            echo "$h5 $jpeg_root" > "$out/data/.h5made"
        else
            h5_file=""
        fi
    fi
else
    [ -f "$h5" ] || die "--h5: no file $h5"
    h5_file=$(cd "$(dirname "$h5")" && pwd)/$(basename "$h5")
    rm -rf "$npy"
    if [ -z "$py_data" ] || ! step h5-to-npy 180 "$py_data" "$here/make_data.py" h5-to-npy \
        "$h5_file" "$npy"; then
        rm -rf "$npy"
    fi
fi

echo "packing"
jpeg_stk=$out/data/jpeg.stk
raw_stk=$out/data/raw.stk
# scratch data: no fsync
step pack-jpeg 180 "$pack_bin" --quiet --force --no-fsync --jobs "$threads" "$jpeg_root" \
    "$jpeg_stk" || jpeg_stk=""
if [ -f "$npy/images.npy" ]; then
    step pack-raw 180 "$pack_bin" --quiet --force --no-fsync --jobs "$threads" \
        --labels "$npy/labels.npy" "$npy/images.npy" "$raw_stk" || raw_stk=""
else
    raw_stk=""
fi

# Warm the page cache: every pipeline reads from memory, as in the steady state of training.
find "$jpeg_root" -type f -print0 | timeout 60 xargs -0 cat > /dev/null 2>&1 || true
for f in "$h5_file" "$raw_stk"; do
    if [ -n "$f" ] && [ -e "$f" ]; then
        timeout 60 find "$f" -type f -exec cat {} + > /dev/null || true
    fi
done

# ---- how much to measure ----
ceil_div() { echo $((($1 + $2 - 1) / $2)); }
if [ "$quick" = 1 ]; then target=1200 target_raw=6000 target_ceiling=1000; else
    target=4000 target_raw=20000 target_ceiling=4000; fi
epochs=$(ceil_div "$target" "$n_images")
[ "$epochs" -ge 2 ] || epochs=2
[ "$epochs" -le 20 ] || epochs=20
reps=$(ceil_div "$target_ceiling" "$n_images")
n_h5=$n_images
if [ -n "$h5_file" ] && [ -n "$py_data" ]; then
    n_h5=$("$py_data" -c 'import h5py,sys; print(h5py.File(sys.argv[1],"r")["images"].shape[0])' \
        "$h5_file" 2>/dev/null) || n_h5=$n_images
fi
epochs_raw=$(ceil_div "$target_raw" "$n_h5")
[ "$epochs_raw" -ge 2 ] || epochs_raw=2
[ "$epochs_raw" -le 50 ] || epochs_raw=50
peer_epochs=$epochs
# batches of 256, as in the published figures; smaller ones when the data is small
if [ "$n_images" -ge 2048 ]; then batch=256; else batch=64; fi
if [ "$n_h5" -ge 2048 ]; then batch_raw=256; else batch_raw=64; fi
[ "$quick" = 1 ] && peer_epochs=1
if [ -n "$gpu" ]; then device=cuda; else device=cpu; fi

# ---- decode-only ceilings ----
echo "measuring"
ceiling=$out/decode_ceiling
jpeg_flags=$(pkg-config --cflags --libs libjpeg 2>/dev/null) || jpeg_flags=-ljpeg
# shellcheck disable=SC2086 # jpeg_flags is a list of flags
if step compile-ceiling 60 cc -std=c11 -O2 -Wall -Wextra -o "$ceiling" \
    "$here/ceiling/decode_ceiling.c" $jpeg_flags -lpthread -lm; then
    find "$jpeg_root" -type f \( -iname '*.jpg' -o -iname '*.jpeg' \) > "$out/data/jpeg-list.txt"
    rc=0
    step ceiling 120 "$ceiling" --threads "$threads" --reps "$reps" --max-images 20000 \
        "$out/data/jpeg-list.txt" || rc=$?
    "$py_report" "$here/report.py" ceiling --err "$out/logs/ceiling.err" --rc "$rc" \
        < "$out/logs/ceiling.out" >> "$rows"
else
    for m in full crop; do
        row "ceiling-$m" "libjpeg decode only ($m)" jpeg img/s failed "did not compile" \
            "$out/logs/compile-ceiling.err"
    done
fi

# stoker_run ID NAME GROUP UNIT DATA [ARGS...]: stoker-bench, onto the GPU when there is one
# (onto the host when that fails); one row
stoker_run() {
    local id=$1 name=$2 group=$3 unit=$4 data=$5 rc=0 note=""
    shift 5
    local args=(--json --threads "$threads" "$@") stop_signal=INT
    if [ "$device" = cuda ] && has --device; then
        step "$id" 120 "$bench_bin" "$data" "${args[@]}" --device cuda || rc=$?
        if [ "$rc" != 0 ] && [ "$rc" -lt 124 ]; then
            note="--device cuda failed ($(why "$out/logs/$id.err")): host delivery"
            rc=0
            step "$id" 120 "$bench_bin" "$data" "${args[@]}" --device cpu || rc=$?
        fi
    else
        [ "$device" = cuda ] && note="stoker-bench has no --device: host delivery"
        step "$id" 120 "$bench_bin" "$data" "${args[@]}" || rc=$?
    fi
    "$py_report" "$here/report.py" stoker --id "$id" --name "$name" --group "$group" \
        --unit "$unit" --err "$out/logs/$id.err" --note "$note" --rc "$rc" \
        < "$out/logs/$id.out" >> "$rows"
}

jpeg_args=(--epochs "$epochs" --batch-size "$batch" --transform train)
has --size && jpeg_args+=(--size 224)
has --dtype && jpeg_args+=(--dtype float16)
plot=()
has --plot && plot=(--plot "$out/stoker-jpeg-train.svg")
# The GPU decode rows (--decoder cpu, auto, gpu) need batches on a GPU and a stoker-bench that
# takes --decoder; without either, the plain row stands for stoker and they say why not.
decoder_skip=""
[ "$device" = cuda ] || decoder_skip="no CUDA device (nvidia-smi found none)"
has --decoder || decoder_skip="${decoder_skip:+$decoder_skip; }stoker-bench has no --decoder"
decoder_name() { echo "stoker: JPEG train transform, --decoder $1 (224, float16)"; }
if [ -z "$jpeg_stk" ]; then
    row stoker-jpeg-train "stoker: JPEG train transform" jpeg img/s failed "packing failed" \
        "$out/logs/pack-jpeg.err"
    if [ -z "$decoder_skip" ]; then
        for d in cpu auto gpu; do
            row "stoker-jpeg-$d" "$(decoder_name "$d")" jpeg img/s failed "packing failed"
        done
    fi
elif [ -n "$decoder_skip" ]; then
    stoker_run stoker-jpeg-train "stoker: JPEG train transform (crop-in-decode, 224, float16)" \
        jpeg img/s "$jpeg_stk" "${jpeg_args[@]}" "${plot[@]}"
else
    for d in cpu auto gpu; do
        more=()
        [ "$d" = auto ] && more=("${plot[@]}")
        stoker_run "stoker-jpeg-$d" "$(decoder_name "$d")" jpeg img/s "$jpeg_stk" \
            "${jpeg_args[@]}" --decoder "$d" "${more[@]}"
    done
fi
if [ -n "$decoder_skip" ]; then
    for d in cpu auto gpu; do
        row "stoker-jpeg-$d" "$(decoder_name "$d")" jpeg img/s skipped "$decoder_skip"
    done
fi
if [ -n "$h5_file" ]; then
    stoker_run stoker-h5 "stoker: HDF5 file read directly, raw records" raw rec/s "$h5_file" \
        --epochs "$epochs_raw" --batch-size "$batch_raw"
else
    row stoker-h5 "stoker: HDF5 file read directly" raw rec/s failed "no HDF5 file" \
        "$out/logs/make-h5.err"
fi
if [ -n "$raw_stk" ]; then
    stoker_run stoker-raw "stoker: the same records packed into shards" raw rec/s "$raw_stk" \
        --epochs "$epochs_raw" --batch-size "$batch_raw" --transform none
else
    row stoker-raw "stoker: the same records packed into shards" raw rec/s failed \
        "no packed records" "$out/logs/pack-raw.err"
fi

# ---- peers (each prints its own row, also when its packages are absent) ----
# peer_row ID STATUS NOTE [ERRFILE]: the row of a peer that printed none
peer_row() {
    case "$1" in
        torch-classic)
            row "$1" "PyTorch DataLoader classic (Pillow)" jpeg img/s "$2" "$3" ${4:+"$4"} ;;
        torchvision-uint8) row "$1" "PyTorch DataLoader + torchvision.io.decode_jpeg, uint8" \
            jpeg img/s "$2" "$3" ${4:+"$4"} ;;
        torchvision-gpu-decode) row "$1" "torchvision.io.decode_jpeg on the GPU (batched \
nvJPEG), whole images, decode only" jpeg img/s "$2" "$3" ${4:+"$4"} ;;
        *) row "$1" "h5py + PyTorch DataLoader" raw rec/s "$2" "$3" ${4:+"$4"} ;;
    esac
}
# peer NAME SCRIPT DATA EPOCHS BATCH: the peer gets 150 s, of which it times at most 105
peer() {
    local name=$1 script=$2 data=$3 ep=$4 bs=$5 t rc=0
    t=$(limit 150)
    if [ -z "$py" ]; then
        peer_row "$name" absent "no python3 with numpy"
        return
    fi
    step "$name" "$t" "$py" "$here/peers/$script" "$data" --workers "$threads" \
        --batch-size "$bs" --epochs "$ep" --max-seconds "$(( t > 60 ? t - 45 : t / 2 ))" || rc=$?
    if [ -f "$out/logs/$name.out" ] && grep -q '^{' "$out/logs/$name.out"; then
        grep '^{' "$out/logs/$name.out" | tail -n 1 >> "$rows"
    else
        peer_row "$name" "$(status_of "$rc")" "" "$out/logs/$name.err"
    fi
}
peer torch-classic torch_classic.py "$jpeg_root" "$peer_epochs" "$batch"
peer torchvision-uint8 torchvision_uint8.py "$jpeg_root" "$peer_epochs" "$batch"
if [ "$device" = cuda ]; then
    peer torchvision-gpu-decode torchvision_gpu_decode.py "$jpeg_root" "$peer_epochs" "$batch"
else
    peer_row torchvision-gpu-decode skipped "no CUDA device (nvidia-smi found none)"
fi
if [ -n "$h5_file" ]; then
    peer h5py-dataloader h5py_loader.py "$h5_file" "$(( epochs_raw < 5 ? epochs_raw : 5 ))" \
        "$batch_raw"
else
    peer_row h5py-dataloader failed "no HDF5 file"
fi

# ---- the training step: a model trained on the same JPEGs, fed four ways ----
if [ -n "$train_py" ] && [ -z "$jpeg_stk" ]; then
    train_why="not run: packing failed"
elif [ -n "$train_py" ]; then
    t=$(limit "$train_budget")
    train_args=(--data "$jpeg_stk" --imagefolder "$jpeg_root" --build "$build"
        --batch-size "$batch" --workers "$threads" --budget "$(( t > 60 ? t - 40 : t ))"
        --json "$out/train-results.json" --md "$out/train-results.md")
    # stoker's threads: the library's default (cores - 1, a core for the training loop)
    # unless --threads was given
    [ -n "$threads_given" ] && train_args+=(--threads "$threads")
    [ "$quick" = 1 ] && train_args+=(--models resnet18 --steps 40 --warmup 10)
    rc=0
    step train "$train_budget" "$train_py" "$here/train.py" "${train_args[@]}" || rc=$?
    case "$rc" in
        0) train_why="" ;;
        1) train_why="some runs failed: see OUT/train-results.md and logs/train.err" ;;
        *) train_why="$(status_of "$rc"): $(why "$out/logs/train.err")" ;;
    esac
fi

# ---- report ----
torch_v=""
if [ -n "$py" ]; then
    torch_v=$("$py" -c 'import torch, torchvision; print("torch", torch.__version__,
"torchvision", torchvision.__version__)' 2>/dev/null) || torch_v=""
fi
"$py_report" "$here/report.py" table "$rows" --out "$out" --images "$jpeg_root" \
    ${h5_file:+--h5 "$h5_file"} --meta "command=$cmdline" --meta "gpu=${gpu:-none}" \
    --meta "stoker=$stoker_version" --meta "threads=$threads" \
    --meta "batch size=$batch (JPEG), $batch_raw (raw)" \
    --meta "python=${py:-none}${torch_v:+ ($torch_v)}" > /dev/null
echo "run.sh: done in $(($(date +%s) - start)) s: $out/bench-results.md, bench-results.json"
cat "$out/bench-results.md"
if [ -f "$out/train-results.md" ]; then
    echo
    cat "$out/train-results.md"
fi
echo "training step (bench/train.py): ${train_why:-$out/train-results.md, train-results.json}"
