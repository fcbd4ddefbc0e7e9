#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Commit messages: a subject of at most 72 characters, then (if there is a body) a blank
# line; the figures and the reasons go in the body. Checks the commits reachable from HEAD
# and not from BASE's parent: by default BASE is the commit that added this script, so the
# history before it is left as it is.
#   scripts/check-commits.sh [BASE]
# Not a git checkout, or a history that does not reach back to a commit having this script
# (a shallow clone begins with one that has it, and is checked from there): nothing to check.
set -eu
cd "$(dirname "$0")/.."
MAX=72
self=scripts/check-commits.sh

if ! git rev-parse --verify -q HEAD > /dev/null 2>&1; then
    echo "check-commits: no git history here: nothing checked"
    exit 0
fi
if [ $# -gt 0 ]; then
    base=$(git rev-parse --verify -q "$1^{commit}") ||
        { echo "check-commits: $1 is not a commit"; exit 2; }
else
    base=$(git log --diff-filter=A --format=%H -- "$self" | tail -n 1)
    if [ -z "$base" ]; then
        echo "check-commits: no commit adds $self in this history: nothing checked"
        exit 0
    fi
fi
# the base itself is checked too; a base with no parent here (a shallow clone's first
# commit) is checked with everything after it
if git rev-parse --verify -q "$base^" > /dev/null; then
    range="$base^..HEAD"
else
    range=HEAD
fi

bad=0 n=0
for h in $(git rev-list "$range"); do
    n=$((n + 1))
    short=$(git rev-parse --short "$h")
    subject=$(git log -1 --format=%B "$h" | head -n 1)
    len=$(printf '%s' "$subject" | LC_ALL=C.UTF-8 wc -m)
    if [ "$len" -gt "$MAX" ]; then
        echo "check-commits: $short: a subject of $len characters (at most $MAX): $subject"
        bad=$((bad + 1))
    elif [ -n "$(git log -1 --format=%B "$h" | sed -n 2p)" ]; then
        echo "check-commits: $short: no blank line after the subject: $subject"
        bad=$((bad + 1))
    fi
done
since=$(git rev-parse --short "$base")
if [ "$bad" -gt 0 ]; then
    echo "check-commits: commits checked from $since on: $n, breaking the rule: $bad"
    exit 1
fi
echo "check-commits: commits checked from $since on: $n, subjects within $MAX characters"
