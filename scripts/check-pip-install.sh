#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Proves the Python install as README.md gives it: runs README's pip-steps lines, as they are,
# in a clean copy of the repository (no build tree), then, from a folder outside it and with no
# STOKER_* variable set, imports stoker from the venv, loads one epoch of a small data set it
# writes, and runs the commands the package brings (stoker-pack, stoker-bench, python -m
# stoker). python/README.md must give the same lines.
#   scripts/check-pip-install.sh [WORKDIR]
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)
work=${1:-$(mktemp -d)}
mkdir -p "$work"
trap 'rm -rf "$work/src" "$work/run"' EXIT

steps() { sed -n '/^<!-- pip-steps/,/^<!-- \/pip-steps/p' "$1" | sed '1d;$d' | sed 's/^    //'; }
steps README.md > "$work/steps.sh"
[ -s "$work/steps.sh" ] || { echo "check-pip-install: README.md has no pip-steps block"; exit 1; }
steps python/README.md | cmp -s - "$work/steps.sh" ||
    { echo "check-pip-install: python/README.md's pip-steps differ from README.md's"; exit 1; }

# a clean copy: the committed tree and the working changes, no build folder, no egg-info
rm -rf "$work/src" && mkdir -p "$work/src"
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$work/src"
cd "$work/src"
# README's python3 is Debian's (/usr/bin/python3): the one whose site packages hold NumPy
unset STOKER_LIBRARY STOKER_BUILD_DIR PYTHONPATH
export PATH="/usr/bin:$PATH"
echo "check-pip-install: running README.md's steps:"
sed 's/^/    /' "$work/steps.sh"
sh -eu "$work/steps.sh" > "$work/steps.log" 2>&1 || { tail -n 40 "$work/steps.log"; exit 1; }
venv="$work/src/venv"
ls "$venv"/lib/python3*/site-packages/stoker/libstoker.so > /dev/null ||
    { echo "check-pip-install: the installed package holds no libstoker.so"; exit 1; }
ls "$venv"/lib/python3*/site-packages/stoker-*.dist-info/WHEEL > /dev/null
grep -q '^Tag: py3-none-linux_' "$venv"/lib/python3*/site-packages/stoker-*.dist-info/WHEEL ||
    { echo "check-pip-install: the wheel is not tagged for the platform"; exit 1; }

# outside the source tree: the package alone
mkdir -p "$work/run" && cd "$work/run"
"$venv/bin/python" - <<'PYEOF'
import os, sys
import numpy as np
import stoker
here = os.path.dirname(stoker.__file__)
assert stoker.library_path == os.path.join(here, "libstoker.so"), stoker.library_path
assert not here.startswith(os.environ.get("STOKER_SRC", "/nonexistent")), here
n = 100
with stoker.Writer("ds", kind="raw", dtype="uint8", shape=(4, 4, 3)) as w:
    for i in range(n):
        w.add(np.full((4, 4, 3), i, np.uint8), label=i)
with stoker.Loader("ds", batch_size=16, device="cpu", threads=1) as loader:
    seen = []
    for batch in loader:
        data = np.from_dlpack(batch.data)
        assert (data[:, 0, 0, 0] == batch.labels).all()
        seen += batch.labels.tolist()
assert sorted(seen) == list(range(n)), seen
print("check-pip-install: one epoch of %d records from %s" % (n, stoker.library_path))
PYEOF
"$venv/bin/python" -m stoker info > info.json
"$venv/bin/python" -c 'import json; d = json.load(open("info.json")); assert all(d["tools"].values()), d'
"$venv/bin/stoker-pack" --info ds > info.txt || { cat info.txt; exit 1; }
grep -Eq "^records +100$" info.txt || { cat info.txt; echo "check-pip-install: stoker-pack --info"; exit 1; }
"$venv/bin/stoker-bench" ds --json --epochs 1 --batch-size 16 --device cpu > bench.json ||
    { cat bench.json; exit 1; }
"$venv/bin/python" -m stoker bench --help > /dev/null
echo "check-pip-install: README's steps install stoker; import, an epoch, stoker-pack and stoker-bench work outside the source tree"
