#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# stoker-pack --info of a remote data set (http://): the same description as of the local
# copy (records, shards, classes, payload bytes, field, checked, the alignment its manifest
# states), the size on the server said not to be measured, never "an HDF5 file". Served by
# tests/remote/range_server.py on 127.0.0.1, started and stopped here.
set -u
PY=/usr/bin/python3
if ! "$PY" -c "import PIL, numpy" 2>/dev/null; then
    echo "skip: $PY lacks Pillow or numpy"
    exit 77
fi
: "${STOKER_PACK:?}" "${STOKER_TEST_TMP:?}"
mkdir -p "$STOKER_TEST_TMP"
T=$(mktemp -d "$STOKER_TEST_TMP/pack-remote-XXXXXX")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRV=
cleanup() {
    [ -n "$SRV" ] && kill -TERM "$SRV" 2>/dev/null && wait "$SRV" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
P=$STOKER_PACK
export STOKER_CACHE_DIR="$T/cache"

. "$HERE/cli_lib.sh"
lacks() { ! grep -q -- "$2" "$T/$1" || { cat "$T/$1" >&2; fail "$1 has '$2'"; }; }

"$PY" - "$T" <<'PYEOF' || fail "making test data"
import os, sys
import numpy as np
from PIL import Image
t = sys.argv[1]
for c in ("cat", "dog"):
    for i in range(5):
        os.makedirs(f"{t}/tree/{c}", exist_ok=True)
        Image.fromarray(np.full((16, 24, 3), 20 * i, np.uint8)).save(f"{t}/tree/{c}/{i}.jpg")
PYEOF
mkdir "$T/www"
run 0 "$P" --no-fsync --align 512 "$T/tree" "$T/www/ds"

"$PY" "$HERE/remote/range_server.py" "$T/www" --port-file "$T/port" --lifetime 120 \
    >/dev/null 2>"$T/server.err" &
SRV=$!
for _ in $(seq 200); do
    [ -s "$T/port" ] && break
    sleep 0.05
done
[ -s "$T/port" ] || { cat "$T/server.err" >&2; fail "the range server did not start in 10 s"; }
URL="http://127.0.0.1:$(cat "$T/port")/ds"

"$P" --info "$URL" >"$T/stdout" 2>"$T/stderr"
rc=$?
if [ "$rc" -ne 0 ] && grep -q "built without libcurl" "$T/stderr"; then
    echo "skip: this build cannot read remote data sets"
    exit 77
fi
[ "$rc" -eq 0 ] || { cat "$T/stderr" >&2; fail "--info $URL exited $rc"; }
has stdout "data set        $URL"
has stdout "records         10"
has stdout "alignment       512"
has stdout "checked         yes"
has stdout "classes         2: cat, dog"
has stdout "size on server  n/a"
lacks stdout "HDF5"

run 0 "$P" --info --json "$URL"
"$PY" - "$T/stdout" "$URL" <<'PYEOF' || fail "--info --json $URL"
import json, sys
o = json.load(open(sys.argv[1]))
want = {"path": sys.argv[2], "records": 10, "shards": 1, "classes": 2, "align": 512,
        "field": "jpeg", "jpeg_checked": True, "class_names": ["cat", "dog"],
        "disk_bytes": None}
bad = {k: (o.get(k), v) for k, v in want.items() if o.get(k) != v}
assert not bad, bad
PYEOF
# the local copy says the same, with its size on disk
run 0 "$P" --info --json "$T/www/ds"
"$PY" -c 'import json, sys; o = json.load(open(sys.argv[1])); assert o["align"] == 512, o' \
    "$T/stdout" || fail "--info --json of the local copy"

echo "test_pack_remote: ok"
