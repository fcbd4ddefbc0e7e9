#!/usr/bin/env bash
# The project names only what it holds: no comment, document or test cites a source file by
# a name the history removed (src/loader_gpu.c, cuda/pinned.h, ...) or an internal function
# or type (stoker__*) that no code defines; and the library holds library code only (fuzz
# targets and their helpers live in tests/fuzz/).
set -u
root=${STOKER_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 1
git rev-parse --is-inside-work-tree > /dev/null 2>&1 ||
    { echo "not a git checkout: skip"; exit 77; }

tracked=$(git ls-files)
texts=$(echo "$tracked" | grep -v '^tests/fuzz/corpus/' | grep -vE '\.(svg|png|jpe?g|h5)$' |
    while read -r f; do [ -f "$f" ] && echo "$f"; done)
code=$(echo "$tracked" | grep -E '\.(c|h|cu|cpp)$' |
    while read -r f; do [ -f "$f" ] && echo "$f"; done)
bad=0

# Code lines with comments blanked (a line inside a block comment starts with '*').
strip_comments() {
    sed -E 's#/\*.*##; s#//.*##; s#^[[:space:]]*\*.*##' "$@"
}

# Each line of $1 (file:line: text) followed by the reason $2.
report() {
    while IFS= read -r line; do echo "$line   <- $2"; done <<< "$1"
}

# 1. Source files the history deleted or renamed: the old path is never cited, nor the bare
# name unless a file of the current tree bears it.
while read -r old; do
    [ -e "$old" ] && continue
    name=${old##*/}
    pat=$name
    echo "$tracked" | grep -q "/$name\$\|^$name\$" && pat=$old
    # shellcheck disable=SC2086
    hits=$(grep -nwF -- "$pat" $texts 2> /dev/null | grep -v "^tests/test_cited_names.sh:")
    if [ -n "$hits" ]; then
        report "$hits" "cites $pat, which is no longer in the repository"
        bad=$((bad + 1))
    fi
done < <(git log --no-renames --diff-filter=D --name-only --format= 2> /dev/null |
    grep -E '\.(c|h|cu|cpp)$' | sort -u)

# 2. Internal names cited anywhere are defined (used outside a comment) in the code.
defined=$(mktemp) || exit 1
# shellcheck disable=SC2086
strip_comments $code | grep -ohE '\bstoker__[A-Za-z0-9_]*[A-Za-z0-9]' | sort -u > "$defined"
# shellcheck disable=SC2086
missing=$(grep -ohE '\bstoker__[A-Za-z0-9_]*[A-Za-z0-9]\b' $texts 2> /dev/null | sort -u |
    comm -23 - "$defined")
rm -f "$defined"
for name in $missing; do
    # shellcheck disable=SC2086
    report "$(grep -nw -- "$name" $texts)" "cites $name, which no code defines"
    bad=$((bad + 1))
done

# 3. No fuzz entry or fuzz helper in the library.
lib=$(echo "$code" | grep -E '^(src|include)/')
# shellcheck disable=SC2086
fuzz=$(for f in $lib; do strip_comments "$f" | grep -n -i 'fuzz' | while IFS= read -r l; do
    echo "$f:$l"; done; done)
if [ -n "$fuzz" ]; then
    report "$fuzz" "fuzz code belongs in tests/fuzz/"
    bad=$((bad + 1))
fi

[ "$bad" -eq 0 ] || { echo "FAIL: $bad stale or misplaced name(s)"; exit 1; }
echo "every cited source file and internal name exists; the library holds no fuzz code"
