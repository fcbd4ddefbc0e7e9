#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Holds the C, C++ and CUDA files a change touches to .clang-format: clang-format --dry-run
# -Werror over each file that differs between BASE and the work tree (committed or not, new
# untracked files included; deleted files skipped), so that a file once formatted stays so.
#   scripts/check-format.sh [BASE]
# BASE defaults to the merge base with origin/main, or HEAD~1 where there is no origin/main
# or HEAD is on it (CI on main checks the last commit). With no base (a shallow clone of one
# commit, not a git checkout) it checks nothing and says so. CLANG_FORMAT names the binary
# (default clang-format; CI uses Debian 12's, version 14, that .clang-format was tuned on).
# Fix a file with: clang-format -i FILE
set -eu
cd "$(dirname "$0")/.."
cf=${CLANG_FORMAT:-clang-format}

if ! git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
    echo "check-format: not a git checkout: nothing to compare with, nothing checked"
    exit 0
fi
command -v "$cf" > /dev/null 2>&1 ||
    { echo "check-format: $cf not found (scripts/install-deps.sh installs it)"; exit 1; }

if [ $# -gt 0 ]; then
    base=$(git rev-parse --verify -q "$1^{commit}") ||
        { echo "check-format: $1 is not a commit"; exit 2; }
else
    head=$(git rev-parse HEAD)
    base=""
    if git rev-parse --verify -q origin/main > /dev/null; then
        base=$(git merge-base origin/main HEAD 2> /dev/null || true)
        [ "$base" != "$head" ] || base=""
    fi
    if [ -z "$base" ]; then
        base=$(git rev-parse --verify -q "HEAD~1^{commit}") || {
            echo "check-format: HEAD has no parent here (a shallow clone?): nothing checked"
            exit 0
        }
    fi
fi

# the files: changed since BASE (tracked, present) and new untracked ones; C/C++/CUDA only;
# none of the tree's sources is third-party or generated today (skip them here if one comes)
files=$({
    git diff --name-only --no-renames --diff-filter=d "$base" --
    git ls-files --others --exclude-standard
} | grep -E '\.(c|h|cu|cuh|cc|cpp|hpp)$' | sort -u) || true

if [ -z "$files" ]; then
    echo "check-format: no C, C++ or CUDA file changed since $(git rev-parse --short "$base")"
    exit 0
fi
bad=0 n=0
for f in $files; do
    [ -f "$f" ] || continue
    n=$((n + 1))
    "$cf" --style=file --dry-run -Werror --ferror-limit=3 "$f" 2>&1 || {
        echo "check-format: $f is not as .clang-format has it (clang-format -i $f)"
        bad=$((bad + 1))
    }
done
if [ "$bad" -gt 0 ]; then
    echo "check-format: files changed $n, not formatted $bad ($("$cf" --version))"
    exit 1
fi
echo "check-format: files changed $n, all formatted (since $(git rev-parse --short "$base"))"
