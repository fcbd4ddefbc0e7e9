#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/check-format.sh and scripts/check-commits.sh, run in a scratch git repository that
# holds them: a changed file that clang-format would change fails, by name, and a formatted,
# deleted or unchanged one does not; a subject over 72 characters or a body without a blank
# line before it fails, by commit, while the history before the check is left alone; a
# clone of one commit and a folder outside git check nothing and say so.
set -u
root=${STOKER_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
command -v clang-format > /dev/null || { echo "no clang-format: skip"; exit 77; }
command -v git > /dev/null || { echo "no git: skip"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.org GIT_COMMITTER_NAME=t \
    GIT_COMMITTER_EMAIL=t@example.org GIT_CONFIG_NOSYSTEM=1 HOME=$tmp
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect RC PATTERN CMD...: CMD exits RC and prints a line matching PATTERN
expect() {
    local rc=$1 pat=$2 out got ok=0
    shift 2
    out=$("$@" 2>&1)
    got=$?
    [ "$got" = "$rc" ] || { bad "$* exited $got, not $rc: $out"; ok=1; }
    echo "$out" | grep -qE -- "$pat" || { bad "$* printed no line matching '$pat': $out"; ok=1; }
    return $ok
}

repo=$tmp/repo
mkdir -p "$repo/scripts" && cd "$repo" || exit 1
git init -q -b main . || exit 1
printf 'int old(void) { return 0; }\n' > old.c # not formatted, and never touched below
git add old.c
git commit -q -m "an old commit, before the checks came, whose subject runs past seventy-two characters"
cp "$root/.clang-format" .
cp "$root/scripts/check-format.sh" "$root/scripts/check-commits.sh" scripts/
git add .clang-format scripts
git commit -q -m "the checks"
expect 0 "no C, C\+\+ or CUDA file changed" sh scripts/check-format.sh
expect 0 "commits checked from .* on: 1," sh scripts/check-commits.sh

printf 'int f(int a){return a+1;}\n' > f.c
git add f.c && git commit -q -m "f.c, not formatted"
expect 1 "f.c is not as .clang-format has it" sh scripts/check-format.sh
printf 'a change of a file that is not C\n' > notes.txt
git add notes.txt && git commit -q -m "notes"
expect 0 "no C, C\+\+ or CUDA file changed" sh scripts/check-format.sh
expect 1 "f.c is not as" sh scripts/check-format.sh HEAD~2 # an explicit base
clang-format -i f.c && git commit -q -am "f.c formatted"
expect 0 "files changed 1, all formatted" sh scripts/check-format.sh
expect 2 "nonsense is not a commit" sh scripts/check-format.sh nonsense
printf 'int g(int a){return a;}\n' > g.cu # new and untracked: checked too
expect 1 "g.cu is not as" sh scripts/check-format.sh
rm g.cu
git rm -q f.c && git commit -q -m "f.c removed"
expect 0 "no C, C\+\+ or CUDA file changed" sh scripts/check-format.sh

git commit -q --allow-empty -m "a subject of seventy-three characters, one more than the rule allows....."
expect 1 "a subject of 73 characters" sh scripts/check-commits.sh
git commit -q --amend --allow-empty -m "a subject of seventy-two characters, exactly what the rule allows......."
expect 0 "subjects within 72 characters" sh scripts/check-commits.sh
git commit -q --allow-empty -F - <<'EOF'
a subject
and a body with no blank line before it
EOF
expect 1 "no blank line after the subject" sh scripts/check-commits.sh
git reset -q --hard HEAD~1
expect 0 "commits checked from .* on: 6," sh scripts/check-commits.sh

# a clone of one commit: no parent to compare with; the commits it has are checked
git clone -q --depth 1 "file://$repo" "$tmp/shallow" 2> /dev/null
expect 0 "HEAD has no parent here" sh "$tmp/shallow/scripts/check-format.sh"
expect 0 "commits checked from .* on: 1," sh "$tmp/shallow/scripts/check-commits.sh"

# no git at all
mkdir -p "$tmp/plain/scripts" && cp scripts/check-*.sh "$tmp/plain/scripts/"
(cd / && expect 0 "not a git checkout" env GIT_CEILING_DIRECTORIES="$tmp" \
    sh "$tmp/plain/scripts/check-format.sh") || fails=$((fails + 1))
(cd / && expect 0 "no git history here" env GIT_CEILING_DIRECTORIES="$tmp" \
    sh "$tmp/plain/scripts/check-commits.sh") || fails=$((fails + 1))

[ "$fails" = 0 ] || { echo "test_check_scripts: $fails failure(s)"; exit 1; }
echo "test_check_scripts: ok"
