#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# stoker-pack's messages say what is wrong: a missing OUT, an extra argument, options that
# would be ignored or contradict each other (pack options with --verify or --info, --json
# without --info, --seed with --no-shuffle, --validate with --no-validate), --verify on
# something that is not a data set, an output whose folder is missing (the folder named);
# and file names with control characters are printed escaped (\n, \x1b), never raw to the
# terminal.
set -u
PY=/usr/bin/python3
if ! "$PY" -c "import PIL, numpy" 2>/dev/null; then
    echo "skip: $PY lacks Pillow or numpy"
    exit 77
fi
: "${STOKER_PACK:?}" "${STOKER_TEST_TMP:?}"
mkdir -p "$STOKER_TEST_TMP"
T=$(mktemp -d "$STOKER_TEST_TMP/pack-msg-XXXXXX")
trap 'rm -rf "$T"' EXIT
P=$STOKER_PACK

. "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
lacks() { ! grep -q -- "$2" "$T/$1" || { cat "$T/$1" >&2; fail "$1 has '$2'"; }; }

"$PY" - "$T" <<'PYEOF' || fail "making test data"
import os, sys
import numpy as np
from PIL import Image
t = sys.argv[1]
os.makedirs(f"{t}/tree/k")
for i in range(3):
    Image.fromarray(np.full((8, 8, 3), 40 * i, np.uint8)).save(f"{t}/tree/k/{i}.jpg")
# Control characters in names: a damaged file and an empty class folder.
open(f"{t}/tree/k/bad\nname\x1b[31m.jpg", "wb").write(b"not a JPEG")
os.makedirs(f"{t}/tree/empty\x1b]0;title\x07")
np.save(f"{t}/x.npy", np.arange(6, dtype=np.uint8).reshape(3, 2))
PYEOF

# ---- arguments --------------------------------------------------------------------------
run 2 "$P" "$T/tree"
has stderr "missing the output"
run 2 "$P" "$T/tree" "$T/o" "$T/extra"
has stderr "unexpected argument '$T/extra'"
run 2 "$P"
has stderr "no source"
run 2 "$P" --verify
has stderr "--verify needs"
run 2 "$P" --verify "$T/a" "$T/b"
has stderr "unexpected argument '$T/b'"
run 2 "$P" --json "$T/tree" "$T/o"
has stderr "--json"
run 2 "$P" --verify --force "$T/tree"
has stderr "--force"
run 2 "$P" --info --rgb "$T/tree"
has stderr "--rgb"
run 2 "$P" --info --verify "$T/tree"
has stderr "one of --verify and --info"
run 2 "$P" --verify --no-validate "$T/tree"
has stderr "no-validate is an option of packing"
run 2 "$P" --no-validate --validate "$T/tree" "$T/o"
has stderr "choose one of --validate and --no-validate"
run 2 "$P" --no-shuffle --seed 4 "$T/tree" "$T/o"
has stderr "--seed"
# the option parser stoker-bench shares: the same syntax and the same usage errors
run 2 "$P" --align
has stderr "stoker-pack: --align requires a value"
has stderr "(stoker-pack --help lists the options)"
run 2 "$P" --bogus "$T/tree" "$T/o"
has stderr "unknown option '--bogus'"
run 2 "$P" --rgb=1 "$T/tree" "$T/o"
has stderr "--rgb takes no value"
run 2 "$P" --ver
has stderr "ambiguous option '--ver' (--verify, --version)"
run 2 "$P" --jobs 0 "$T/tree" "$T/o"
has stderr "invalid value '0' for --jobs: expected an integer from 1 to 1024"
run 2 "$P" --shard-size 12Q "$T/tree" "$T/o"
has stderr "invalid value '12Q' for --shard-size"
run 2 "$P" "--bad$(printf '\033')[31m" "$T/tree" "$T/o"
has stderr 'unknown option .--bad\\x1b\[31m.'
[ ! -e "$T/o" ] || fail "an argument error wrote output"
run 0 "$P" -h
has stdout "usage:"

# ---- an output whose folder is missing: the message names the folder -------------------
run 1 "$P" --no-fsync "$T/tree" "$T/nodir/sub/o"
has stderr "folder $T/nodir does not exist"
lacks stderr "tmp-"
[ ! -e "$T/nodir" ] || fail "a missing output folder was created"
mkdir "$T/somedir"
run 1 "$P" --no-fsync "$T/tree" "$T/somedir/sub/o"
has stderr "folder $T/somedir/sub does not exist"
: >"$T/afile"
run 1 "$P" --no-fsync "$T/tree" "$T/afile/o"
has stderr "$T/afile is not a folder"
lacks stderr "tmp-"

# ---- --verify on what is not a data set -------------------------------------------------
run 1 "$P" --verify "$T/x.npy"
has stdout "not a stoker data set"
lacks stdout "problem"
run 1 "$P" --verify "$T/tree"
lacks stdout "problem"
run 1 "$P" --verify "$T/nonexistent"
lacks stdout "problem"

# ---- progress counts what the source holds ---------------------------------------------
run 0 "$P" --no-fsync --shard-s=64K "$T/x.npy" "$T/npy_out"
has stderr "3/3 rows"
lacks stderr "files"

# ---- control characters are escaped -----------------------------------------------------
run 0 "$P" --no-fsync "$T/tree" "$T/out"
has stderr 'bad\\nname\\x1b\[31m.jpg: not JPEG'
has stderr 'empty\\x1b\]0;title\\x07'
if LC_ALL=C grep -q "$(printf '\033')" "$T/stderr"; then
    fail "a raw ESC reached stderr"
fi
run 0 "$P" --info "$T/out"
LC_ALL=C grep -q "$(printf '\033')" "$T/stdout" && fail "a raw ESC reached --info's output"
has stdout 'empty\\x1b'
echo "test_pack_messages: ok"
