#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The project stands alone: every Markdown document that the code, tests, tools and docs
# name (README.md, docs/FORMAT.md, ...) is in the repository.
set -u
root=${STOKER_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 1
git rev-parse --is-inside-work-tree > /dev/null 2>&1 || { echo "not a git checkout: skip"; exit 77; }

missing=0
while IFS=: read -r file ref; do
    name=${ref##*/}
    # a relative reference resolves from the citing file's folder, a bare name anywhere
    if [ -e "$(dirname "$file")/$ref" ] || [ -e "$ref" ] ||
        git ls-files | grep -q "/$name\$\|^$name\$"; then
        continue
    fi
    echo "$file cites $ref, which is not in the repository"
    missing=$((missing + 1))
done < <(git ls-files -- include src python tools tests docs bench examples scripts README.md \
    CMakeLists.txt | grep -v '^tests/fuzz/corpus/' |
    xargs grep -oE "[A-Za-z0-9_./-]*[A-Z][A-Z0-9_-]+\.md" 2> /dev/null | sort -u)

[ "$missing" -eq 0 ] || { echo "FAIL: $missing missing document(s)"; exit 1; }
echo "every cited document is in the repository"
