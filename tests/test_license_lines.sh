#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Every source file of the tree names its licence in an SPDX line within its first three
# lines (LICENSE holds the text): C and CUDA sources and headers, Python, shell, CMake.
set -u
SRC=${STOKER_SOURCE_DIR:?}
cd "$SRC" || exit 1
git rev-parse --is-inside-work-tree > /dev/null 2>&1 || { echo "not a git checkout"; exit 77; }
grep -q "Apache License" LICENSE || { echo "FAIL: LICENSE is not the Apache License"; exit 1; }
missing=0
while IFS= read -r -d '' f; do
    case "$f" in
    tests/fuzz/corpus/*) continue ;;
    *.c | *.h | *.cu | *.cpp | *.py | *.sh | */CMakeLists.txt | CMakeLists.txt | *.cmake.in | .ci/run) ;;
    *) continue ;;
    esac
    [ -f "$f" ] || continue
    if ! head -n 3 "$f" | grep -q "SPDX-License-Identifier: Apache-2.0"; then
        echo "FAIL: $f has no SPDX-License-Identifier line in its first three lines"
        missing=$((missing + 1))
    fi
done < <(git ls-files -z)
[ "$missing" = 0 ] || exit 1
echo "test_license_lines: ok"
