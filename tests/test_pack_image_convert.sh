#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs tests/python/test_image_convert.py (stoker-pack's --rgb and --max-side against
# Pillow) with this build's stoker-pack and shared library, so the colour-conversion checks
# run with ctest too.
set -u
PY=/usr/bin/python3
if ! "$PY" -c "import PIL, numpy, pytest" 2>/dev/null; then
    echo "skip: $PY lacks Pillow, numpy or pytest"
    exit 77
fi
: "${STOKER_BUILD_DIR:?}" "${STOKER_SOURCE_DIR:?}" "${STOKER_PACK:?}"
export STOKER_LIBRARY="$STOKER_BUILD_DIR/libstoker.so" STOKER_PACK PYTHONDONTWRITEBYTECODE=1
[ -f "$STOKER_LIBRARY" ] || { echo "FAIL: no $STOKER_LIBRARY" >&2; exit 1; }
[ -x "$STOKER_PACK" ] || { echo "FAIL: no $STOKER_PACK" >&2; exit 1; }
# A sanitizer build's library needs its runtime preloaded into Python.
asan=$(ldd "$STOKER_LIBRARY" 2>/dev/null | awk '/libasan/ {print $3}')
if [ -n "$asan" ]; then
    export LD_PRELOAD="$asan" ASAN_OPTIONS=detect_leaks=0
fi
cd "$STOKER_SOURCE_DIR/tests/python" || exit 1
exec "$PY" -m pytest -q -p no:cacheprovider test_image_convert.py
