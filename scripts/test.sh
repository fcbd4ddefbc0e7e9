#!/bin/sh
# The whole test suite on a fresh Debian 12 machine: installs the dependencies, builds
# stoker (warnings are errors), runs the C tests, the Python tests, the C tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer, the multi-threaded ones under
# ThreadSanitizer, and builds a C and a C++ program against an installed copy through both
# find_package(stoker) and pkg-config.
#   scripts/test.sh            everything
#   STOKER_QUICK=1 scripts/test.sh   skip the sanitizer builds
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=$(nproc 2>/dev/null || echo 2)

sh scripts/install-deps.sh

step() { printf '\n==== %s\n' "$*"; }

step "build (Release, -Werror)"
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

if [ "${STOKER_QUICK:-0}" != 1 ]; then
    step "C tests under AddressSanitizer + UndefinedBehaviorSanitizer"
    cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSTOKER_WERROR=ON \
        -DSTOKER_SANITIZE=address,undefined > build-asan.log 2>&1 || { cat build-asan.log; exit 1; }
    cmake --build build-asan -j "$jobs" > build-asan-make.log 2>&1 ||
        { tail -n 50 build-asan-make.log; exit 1; }
    (cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
        ctest --output-on-failure -j "$jobs" -LE gpu)
fi

if [ "${STOKER_QUICK:-0}" != 1 ]; then
    step "multi-threaded tests under ThreadSanitizer"
    mkdir -p build-tsan
    cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTOKER_SANITIZE=thread \
        -DSTOKER_WITH_CUDA=OFF > build-tsan/configure.log 2>&1 ||
        { cat build-tsan/configure.log; exit 1; }
    cmake --build build-tsan --target test_stress test_loader test_loader_faults \
        test_decoder_route -j "$jobs" > build-tsan/make.log 2>&1 ||
        { tail -n 50 build-tsan/make.log; exit 1; }
    (cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
        ctest --output-on-failure -j "$jobs" \
        -R '^(test_stress|test_loader|test_loader_faults|test_decoder_route)$')
fi

step "install and build consumers (find_package and pkg-config, C and C++)"
sh tests/install/check-install.sh "$root/build"

echo
echo "scripts/test.sh: all passed"
