#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The whole test suite on a fresh Debian 12 machine: installs the dependencies, builds
# stoker (warnings are errors), runs the C tests, the Python tests (tests/python/test_torch.py
# among them, on Debian's PyTorch), examples/train_ddp.py on two gloo ranks, CPU smoke runs
# of bench/train.py and bench/step_probe.py, every fuzz target built with clang and run a
# short while on its saved corpus, the C tests again under AddressSanitizer +
# UndefinedBehaviorSanitizer, the multi-threaded ones under ThreadSanitizer, and builds a C
# and a C++ program against an installed copy through both find_package(stoker) and
# pkg-config, and installs the Python package as README.md says (scripts/check-pip-install.sh).
# First, the cheap checks of a change: its C/C++/CUDA files formatted as .clang-format says
# (scripts/check-format.sh) and its commits' subjects within 72 characters
# (scripts/check-commits.sh).
#   scripts/test.sh            everything
#   STOKER_QUICK=1 scripts/test.sh   skip the sanitizer builds
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=$(nproc 2>/dev/null || echo 2)

sh scripts/install-deps.sh

step() { printf '\n==== %s\n' "$*"; }

step "the change's habits: clang-format on the files it touches, commit subjects"
sh scripts/check-format.sh
sh scripts/check-commits.sh

step "build (RelWithDebInfo, -Werror)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTOKER_WERROR=ON > build.log 2>&1 ||
    { cat build.log; exit 1; }
grep -E '^-- (stoker|  )' build.log || true
cmake --build build -j "$jobs" > build-make.log 2>&1 || { grep -B2 -A8 -E 'error|warning' build-make.log | head -n 80; exit 1; }
echo "built: $(ls build/libstoker.so build/stoker-* 2>/dev/null | tr '\n' ' ')"

step "C tests"
(cd build && ctest --output-on-failure -j "$jobs" -LE gpu)

step "Python tests"
if [ -d tests/python ] && ls tests/python/test_*.py > /dev/null 2>&1; then
    STOKER_LIBRARY="$root/build/libstoker.so" STOKER_BUILD_DIR="$root/build" \
        PYTHONPATH="$root/python" /usr/bin/python3 -m pytest -q tests/python
else
    echo "no Python tests yet"
fi

# PyTorch comes with install-deps.sh: without it test_torch.py was skipped above
/usr/bin/python3 -c 'import torch' ||
    { echo "test.sh: no PyTorch for /usr/bin/python3 (python3-torch)"; exit 1; }
torch_tmp=$(mktemp -d)
trap 'rm -rf "$torch_tmp"' EXIT

step "examples/train_ddp.py: two ranks (gloo), started by environment variables"
# not torchrun: Debian 12's (PyTorch 1.13) fails under Python 3.11
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')
ddp_epochs=3 pids=""
for r in 0 1; do
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r \
        LOCAL_WORLD_SIZE=2 STOKER_LIBRARY="$root/build/libstoker.so" timeout 300 \
        /usr/bin/python3 examples/train_ddp.py --make-data "$torch_tmp/ddp" \
        --epochs "$ddp_epochs" --threads 1 > "$torch_tmp/rank$r.log" 2>&1 &
    pids="$pids $!"
done
ddp_rc=0
for p in $pids; do wait "$p" || ddp_rc=1; done
cat "$torch_tmp/rank0.log"
[ "$ddp_rc" = 0 ] ||
    { tail -n 20 "$torch_tmp/rank1.log"; echo "test.sh: train_ddp.py failed"; exit 1; }
# what the example checks itself, checked again from what it printed: each epoch's ids
# disjoint and complete over the two ranks, the loss down from the first epoch to the last
/usr/bin/python3 - "$torch_tmp" "$ddp_epochs" <<'PYEOF' ||
import re, sys
tmp, epochs = sys.argv[1], int(sys.argv[2])
logs = [open("%s/rank%d.log" % (tmp, r)).read() for r in (0, 1)]
head = re.search(r"^backend (\w+), world (\d+), (\d+) records", logs[0], re.M)
assert head and head.group(1, 2) == ("gloo", "2"), "no 'backend gloo, world 2' line"
total = int(head.group(3))
losses = []
for e in range(epochs):
    m = re.search(r"^epoch %d: loss ([0-9.]+); ids complete: (\w+), overlap (\d+) "
                  r"\(padding (\d+)\)$" % e, logs[0], re.M)
    assert m, "rank 0 printed no check of epoch %d" % e
    assert m.group(2) == "True" and int(m.group(3)) <= int(m.group(4)), m.group(0)
    losses.append(float(m.group(1)))
    seen = [re.search(r"^rank %d epoch %d: \d+ batches, (\d+) records$" % (r, e), logs[r],
                      re.M) for r in (0, 1)]
    assert all(seen), "a rank printed no count of epoch %d" % e
    seen = [int(s.group(1)) for s in seen]
    assert min(seen) > 0 and sum(seen) == total + int(m.group(4)), (e, seen, total)
assert losses[-1] < losses[0], "the loss did not go down: %s" % losses
assert re.search(r"^loss went down", logs[0], re.M)
print("train_ddp.py: %d epochs of %d records over two ranks, disjoint and complete; "
      "loss %.4f -> %.4f" % (epochs, total, losses[0], losses[-1]))
PYEOF
    { echo "test.sh: train_ddp.py's output fails the check"; exit 1; }

step "examples/checkpoint_resume.py: interrupted + resumed run = the uninterrupted one (CPU)"
STOKER_LIBRARY="$root/build/libstoker.so" timeout 300 /usr/bin/python3 \
    examples/checkpoint_resume.py --make-data "$torch_tmp/ck" --threads 1 --device cpu ||
    { echo "test.sh: checkpoint_resume.py failed"; exit 1; }

step "bench/train.py: CPU smoke run of every feed (synthetic, stoker cpu and default, DataLoader)"
timeout 300 /usr/bin/python3 bench/train.py --build "$root/build" --device cpu --models tiny \
    --make-data "$torch_tmp/train" --images 128 --size 32 --batch-size 16 --steps 6 \
    --warmup 2 --workers 2 --json "$torch_tmp/train.json" \
    --feeds synthetic,cpu,default,torch,cpu:consume=background,cpu:consume=discard ||
    { echo "test.sh: bench/train.py failed"; exit 1; }
/usr/bin/python3 - "$torch_tmp/train.json" <<'PYEOF' ||
import json, sys
res = json.load(open(sys.argv[1]))
runs = {r["feed"]: r for r in res["runs"]}
assert sorted(runs) == ["cpu", "cpu:consume=background", "cpu:consume=discard", "default",
                        "synthetic", "torch"], sorted(runs)
for r in runs.values():
    assert r["status"] == "ok" and r["img_per_s"] > 0 and r["images"] == 6 * 16, r
    assert 0 <= r["wait_share"] < 1 and r["input"]["shape"] == [16, 3, 32, 32], r
    assert r["input"]["channels_last"] and r["loss_last"] == r["loss_last"], r  # not NaN
    assert len(r["step_waits_ms"]) == 2 + 6 and min(r["step_waits_ms"]) >= 0, r
for feed in ("cpu", "default"):  # the decoder's figures: the CPU decoded the timed images
    d = runs[feed]["decoder_timed"]
    assert d["decoder"] == "cpu" and d["gpu_decoded"] == 0 and d["cpu_decoded"] >= 6 * 16, d
    w = runs[feed]["window"]  # the loader's own figures over the timed steps
    assert w["seconds"] > 0 and 0 <= w["wait_share"] <= 1 and w["verdict"], w
assert runs["torch"]["pipeline"] in ("torchvision", "pil") and runs["torch"]["workers"] == 2
bg, dis = runs["cpu:consume=background"], runs["cpu:consume=discard"]
assert bg["consume"] == "background" and bg["loader_img_per_s"] > 0, bg  # batches drained
assert dis["consume"] == "discard" and dis["decoder_timed"]["cpu_decoded"] >= 6 * 16, dis
rows = {r["feed"]: r for r in res["rows"]}
assert rows["synthetic"]["x_synthetic"] == 1.0, rows
assert all(r["img_per_s"] > 0 and r["x_synthetic"] > 0 for r in rows.values()), rows
print("bench/train.py:", ", ".join("%s %.0f img/s" % (f, r["img_per_s"])
                                   for f, r in rows.items()))
PYEOF
    { echo "test.sh: bench/train.py's results fail the check"; exit 1; }

step "bench/step_probe.py: CPU smoke run (the host's parts of a step; no CUDA graph or device profile without CUDA)"
for feed in cpu default; do
    timeout 120 /usr/bin/python3 bench/step_probe.py --build "$root/build" --device cpu \
        --model tiny --data "$torch_tmp/train/packed" --feed $feed --size 32 --batch-size 16 \
        --steps 6 --warmup 2 --trace --json "$torch_tmp/probe-$feed.json" ||
        { echo "test.sh: bench/step_probe.py --feed $feed failed"; exit 1; }
    /usr/bin/python3 - "$torch_tmp/probe-$feed.json" <<'PYEOF' ||
import json, sys
r = json.load(open(sys.argv[1]))
assert r["img_per_s"] > 0 and 0 <= r["host_waited"] < 1, r
m = r["median_ms"]
assert all(m[k] is not None and m[k] >= 0
           for k in ("host", "take", "binding", "dlpack", "labels")), m
assert m["binding"] <= m["take"], m  # each step's binding part lies inside its take
assert r["loader"]["decoder"] == "cpu" and r["loader"]["cpu_decoded"] >= 8 * 16, r["loader"]
assert r["split_trace"] and r["device_idle_at_next"] is None and r["profile"] is None, r
PYEOF
        { echo "test.sh: bench/step_probe.py's record fails the check"; exit 1; }
done
if /usr/bin/python3 bench/step_probe.py --device cpu --model tiny --feed synthetic \
    --mode graph > "$torch_tmp/probe-graph.log" 2>&1 ||
    [ $? -ne 2 ] || ! grep -q "needs a CUDA device" "$torch_tmp/probe-graph.log"; then
    cat "$torch_tmp/probe-graph.log"; echo "test.sh: step_probe.py --mode graph on the CPU"; exit 1
fi
if /usr/bin/python3 bench/step_probe.py --device cpu --model tiny --feed synthetic \
    --profile 4 > "$torch_tmp/probe-profile.log" 2>&1 ||
    [ $? -ne 2 ] || ! grep -q "profile needs a CUDA device" "$torch_tmp/probe-profile.log"; then
    cat "$torch_tmp/probe-profile.log"; echo "test.sh: step_probe.py --profile on the CPU"; exit 1
fi

step "bench/binding_cost.py: the binding's host time per batch, a short run"
timeout 120 /usr/bin/python3 bench/binding_cost.py --build "$root/build" --batch-size 16 \
    --steps 40 --evict-mb 8 --json "$torch_tmp/binding-cost.json" ||
    { echo "test.sh: bench/binding_cost.py failed"; exit 1; }
/usr/bin/python3 - "$torch_tmp/binding-cost.json" <<'PYEOF' ||
import json, sys
r = json.load(open(sys.argv[1]))["runs"][0]
assert all(r[k] > 0 for k in ("take", "binding", "data", "label", "release", "total")), r
assert r["binding"] <= r["take"] and r["take"] < r["total"], r
PYEOF
    { echo "test.sh: bench/binding_cost.py's record fails the check"; exit 1; }

step "fuzz targets (clang, libFuzzer): built, each run on its saved corpus"
# Built with clang so that code only gcc accepts cannot land unseen; each target runs for
# STOKER_FUZZ_SECONDS (default 20) from its saved corpus, new inputs going to a scratch
# folder, not the tree. CUDA is left out: the targets parse bytes on the host.
fuzz_targets=$(for f in tests/fuzz/fuzz_*.c; do basename "$f" .c; done)
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSTOKER_WERROR=ON -DSTOKER_BUILD_FUZZERS=ON -DSTOKER_WITH_CUDA=OFF > build-fuzz.log 2>&1 ||
    { cat build-fuzz.log; exit 1; }
# shellcheck disable=SC2086
cmake --build build-fuzz -j "$jobs" --target $fuzz_targets > build-fuzz-make.log 2>&1 ||
    { grep -B2 -A8 -E 'error' build-fuzz-make.log | head -n 80; exit 1; }
fuzz_tmp=$(mktemp -d)
for t in $fuzz_targets; do
    mkdir -p "$fuzz_tmp/$t"
    (cd "$fuzz_tmp" && "$root/build-fuzz/tests/$t" -max_total_time="${STOKER_FUZZ_SECONDS:-20}" \
        -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 "$fuzz_tmp/$t" \
        "$root/tests/fuzz/corpus/$t" > "$fuzz_tmp/$t.log" 2>&1) ||
        { tail -n 60 "$fuzz_tmp/$t.log"; echo "test.sh: $t found a failure"; exit 1; }
    echo "$t: $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$fuzz_tmp/$t.log" |
        grep -o '[0-9]*$') inputs, no finding"
done
rm -rf "$fuzz_tmp"

if [ "${STOKER_QUICK:-0}" != 1 ]; then
    step "C tests under AddressSanitizer + UndefinedBehaviorSanitizer"
    cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSTOKER_WERROR=ON \
        -DSTOKER_SANITIZE=address,undefined > build-asan.log 2>&1 || { cat build-asan.log; exit 1; }
    cmake --build build-asan -j "$jobs" > build-asan-make.log 2>&1 ||
        { tail -n 50 build-asan-make.log; exit 1; }
    (cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
        ctest --output-on-failure -j "$jobs" -LE gpu)
    if grep -q '^STOKER_CURL_FOUND:INTERNAL=1' build-asan/CMakeCache.txt; then
        # the remote client and the remote source, driven against the test servers
        ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
            STOKER_BUILD_DIR="$root/build-asan" STOKER_LIBRARY="$root/build/libstoker.so" \
            PYTHONPATH="$root/python" /usr/bin/python3 -m pytest -q tests/python/test_remote_http.py \
            "tests/python/test_remote.py::test_the_c_loader_equals_the_local_one_across_a_restart"
    fi
fi

if [ "${STOKER_QUICK:-0}" != 1 ]; then
    step "multi-threaded tests under ThreadSanitizer"
    mkdir -p build-tsan
    cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTOKER_SANITIZE=thread \
        -DSTOKER_WITH_CUDA=OFF > build-tsan/configure.log 2>&1 ||
        { cat build-tsan/configure.log; exit 1; }
    remote_tests=""
    if grep -q '^STOKER_CURL_FOUND:INTERNAL=1' build-tsan/CMakeCache.txt; then
        remote_tests="test_remote_cache test_remote_http test_remote_loader"
    fi
    # shellcheck disable=SC2086
    cmake --build build-tsan --target test_stress test_loader test_loader_faults \
        test_decoder_route $remote_tests -j "$jobs" > build-tsan/make.log 2>&1 ||
        { tail -n 50 build-tsan/make.log; exit 1; }
    (cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
        ctest --output-on-failure -j "$jobs" \
        -R '^(test_stress|test_loader|test_loader_faults|test_decoder_route|test_remote_cache)$')
    if [ -n "$remote_tests" ]; then
        # the remote client and the remote source's threads, driven against the test servers
        TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" STOKER_BUILD_DIR="$root/build-tsan" \
            STOKER_LIBRARY="$root/build/libstoker.so" PYTHONPATH="$root/python" \
            /usr/bin/python3 -m pytest -q tests/python/test_remote_http.py \
            "tests/python/test_remote.py::test_the_c_loader_equals_the_local_one_across_a_restart"
    fi
fi

step "pip install ./python as README.md gives it, then stoker used outside the source tree"
sh scripts/check-pip-install.sh

step "install and build consumers (find_package and pkg-config, C and C++)"
sh tests/install/check-install.sh "$root/build"

echo
echo "scripts/test.sh: all passed"
