#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The project names only what it holds: no comment, document or test cites a source file by
# a name the history removed (src/loader_gpu.c, cuda/pinned.h, ...) or an internal function
# or type (stoker__*) that no code defines; every function, public name and file that the
# documents (README.md, docs/*.md and every other Markdown file) cite is in the tree (a
# function, static ones included, where the code uses it outside a comment; "`name` in
# `file`" in that file); and the library holds library code only (fuzz targets and their
# helpers live in tests/fuzz/). STOKER_CITED_DOCS (Markdown files) replaces the documents
# checked, e.g. with one citing a bogus name, to see the check fail.
# shellcheck disable=SC2016 # the backquotes in patterns are Markdown's
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
fuzz=$(awk '{ l = $0; sub(/\/\*.*/, "", l); sub(/\/\/.*/, "", l); if (l ~ /^[[:space:]]*\*/) l = ""
    if (tolower(l) ~ /fuzz/) print FILENAME ":" FNR ":" l }' $lib)
if [ -n "$fuzz" ]; then
    report "$fuzz" "fuzz code belongs in tests/fuzz/"
    bad=$((bad + 1))
fi

# The documents checked by 4 and 5.
docs=${STOKER_CITED_DOCS:-$(echo "$texts" | grep -E '\.md$')}
# Every identifier the code, scripts and build files use outside a comment, one a line.
words=$(mktemp) || exit 1
trap 'rm -f "$words"' EXIT
scripts=$(echo "$texts" | grep -E '(\.(py|sh|cmake|in)|(^|/)CMakeLists\.txt)$')
# shellcheck disable=SC2086
{ strip_comments $code; sed -E 's/(^|[[:space:]])#.*//' $scripts; } |
    grep -ohE '\b[A-Za-z_][A-Za-z0-9_]*' | sort -u > "$words"

# 4. Functions the documents cite (`name()`, `name(args)`, name() in prose, "function
# `name`", "`name` call"; the part after the last dot for a method) and the public names
# (stoker_*, STOKER_*) are used in the code. A function of a library stoker calls that the
# code does not call itself (CUDA's cu*/cuda*, nvJPEG's, libhdf5's H5*, libjpeg's jpeg_*,
# libpng's png_*) is the library's to define.
fn='\b[A-Za-z_][A-Za-z0-9_.]*\(\)|`[A-Za-z_][A-Za-z0-9_.]*\('
fn+='|(function|macro)s? `[A-Za-z_][A-Za-z0-9_.]*`|`[A-Za-z_][A-Za-z0-9_.]*` (function|macro|call)'
fn+='|\b(stoker_[A-Za-z0-9_]*[A-Za-z0-9]|STOKER_[A-Z0-9_]*[A-Z0-9])\b'
# shellcheck disable=SC2086
hits=$(grep -HnoE "$fn" $docs 2> /dev/null | awk -F: '
    NR == FNR { used[$0] = 1; next }
    {
        n = $3; sub(/^(function|macro)s? /, "", n); sub(/ (function|macro|call)$/, "", n)
        gsub(/[`()]/, "", n); sub(/.*\./, "", n)
        if (n in used || n ~ /^(cu[A-Z]|cuda[A-Z]|nvjpeg|NVJPEG_|H5[A-Z]|jpeg_|png_)/) next
        print $1 ":" $2 ": " $3 "   <- cites " n ", which no code uses"
    }' "$words" -)
if [ -n "$hits" ]; then
    echo "$hits"
    bad=$((bad + $(echo "$hits" | wc -l)))
fi

# "`name` in `file`": the file (a path, a file name, or a test's name without its extension)
# uses the name outside a comment.
# shellcheck disable=SC2086
while IFS=: read -r doc line cite; do
    name=$(echo "$cite" | sed -E 's/^`([^`]*)`.*/\1/')
    where=$(echo "$cite" | sed -E 's/.*in `([^`]*)`$/\1/')
    files=$(echo "$code" | awk -v w="$where" '
        { b = $0; sub(/.*\//, "", b); s = b; sub(/\.[^.]*$/, "", s) } $0 == w || b == w || s == w')
    [ -n "$files" ] || continue # not a source file: 5 checks paths
    # shellcheck disable=SC2086
    if ! strip_comments $files | sed -E 's/"([^"\\]|\\.)*"//g' | grep -qw -- "$name"; then
        echo "$doc:$line: $cite   <- $where does not use $name"
        bad=$((bad + 1))
    fi
done < <(grep -HnoE '`[A-Za-z_][A-Za-z0-9_]*`,? in `[A-Za-z0-9_./-]+`' $docs 2> /dev/null)

# 5. Files and folders the documents cite are in the tree: a path under one of its top-level
# folders, or a file name with a source or document extension, from the citing document's
# folder, the root, or (a bare name) anywhere; a glob matches a tracked file. Not in it by
# design: build outputs (under build*/ or a program or library CMake builds), placeholders
# (FILE.svg, tests/fuzz/corpus/NAME/), the reader's own programs (app.c, train.py) and what
# bench/run.sh writes (bench-results.md, .json).
exts='c|h|cu|cpp|sh|py|md|txt|cmake|svg|json|toml'
targets=$(echo "$tracked" | grep -E '(^|/)CMakeLists\.txt$' | xargs sed -nE \
    's/.*add_(executable|library)\(([A-Za-z0-9_-]+).*/\2/p' | sort -u | paste -sd' ')
path="[A-Za-z0-9_.*-]*(/[A-Za-z0-9_.*-]+)+/?|[A-Za-z0-9_*-][A-Za-z0-9_.*-]*\.($exts)\b"
# shellcheck disable=SC2086
hits=$(grep -HnoE "$path" $docs 2> /dev/null | awk -F: -v exts="$exts" -v targets="$targets" '
    BEGIN {
        n = split(targets, t, " "); for (i = 1; i <= n; i++) target[t[i]] = 1
        n = split("app.c train.py bench-results.md bench-results.json", t, " ")
        for (i = 1; i <= n; i++) exempt[t[i]] = 1
    }
    NR == FNR { # the tracked files: their paths, folders, names and top-level folders
        have[$0] = 1; files[++nf] = $0
        b = $0; sub(/.*\//, "", b); base[b] = 1
        d = $0; while (sub(/\/[^\/]*$/, "", d)) have[d] = 1
        if (d != $0) top[d] = 1
        next
    }
    {
        p = $3; sub(/\.$/, "", p); sub(/\/$/, "", p)
        if (p ~ /^(build|BUILD|\/|\.)/) next
        if (p ~ /\//) { f = p; sub(/\/.*/, "", f); if (!(f in top)) next }
        else if (p !~ ("\\.(" exts ")$")) next
        if (p ~ /(^|\/)(FILE|NAME|OUT|DATA|SRC|DIR)(\/|\.|$)/) next
        b = p; sub(/.*\//, "", b)
        if (b in exempt || b in target) next
        dir = $1; if (!sub(/\/[^\/]*$/, "", dir)) dir = ""
        rel = dir == "" ? p : dir "/" p
        if (p ~ /\*/) {
            re = p; gsub(/\./, "\\.", re); gsub(/\*/, ".*", re)
            re = (p ~ /\//) ? ("^" re "(/|$)") : ("(^|/)" re "$")
            for (i = 1; i <= nf; i++) if (files[i] ~ re) next
        } else if (p in have || rel in have || (p !~ /\// && p in base)) next
        print $1 ":" $2 ": " $3 "   <- cites " p ", which is not in the repository"
    }' <(echo "$tracked") -)
if [ -n "$hits" ]; then
    echo "$hits"
    bad=$((bad + $(echo "$hits" | wc -l)))
fi

[ "$bad" -eq 0 ] || { echo "FAIL: $bad stale or misplaced name(s)"; exit 1; }
echo "every cited file, function, public and internal name exists; the library holds no fuzz code"
