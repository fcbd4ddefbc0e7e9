#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The layers depend one way, as docs/ARCHITECTURE.md's layer table says (the table is the
# one statement of the rule; this test reads it): every project header a file of a layer
# includes (`#include "..."`, and `#include <...>` where it names a project header) is of its
# own layer, of a layer its row's "uses" names, or the public header; a header named in a
# "uses" cell (`source/dataset.h`) limits its folder to the headers so named; "all of the
# above" names every layer of the rows above. And no two folders include each other. A
# violation is reported as file:line, the include and the rule it breaks.
#
# Layer cells: `name` is src/name (a folder, or a file such as `capability.c`); a name with a
# slash is a path in the repository (`tools/`, `tools/pack/image.c`). A file belongs to the
# most specific layer that holds it. Files under no layer (tests/, bench/) are not checked.
#
# STOKER_LAYERS_DOC replaces the document read, and STOKER_LAYERS_ROOT the tree checked. The
# test first runs the check on a small tree with a planted upward include, and fails unless
# that is reported: the check can fail.
set -u
root=${STOKER_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
command -v "$PY" > /dev/null || { echo "no python3: skip"; exit 77; }

check() { # check ROOT DOC: prints the violations, exits 1 when there are any, 2 on a bad table
    "$PY" - "$1" "$2" << 'EOF'
import os, re, sys

root, doc = sys.argv[1], sys.argv[2]

# ---- the table ----
rows = []  # (names, uses cell text)
with open(doc, encoding="utf-8") as f:
    lines = f.read().splitlines()
start = None
for i, line in enumerate(lines):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if line.lstrip().startswith("|") and [c.lower() for c in cells[:2]] == ["layer", "uses"]:
        start = i + 2  # past the separator row
        break
if start is None:
    print(f"{doc}: no table with the header | layer | uses |")
    sys.exit(2)
for line in lines[start:]:
    if not line.lstrip().startswith("|"):
        break
    cells = [c.strip() for c in line.strip().strip("|").split("|", 1)]
    names = re.findall(r"`([^`]+)`", cells[0])
    if not names:
        print(f"{doc}: layer row without a `name`: {line.strip()}")
        sys.exit(2)
    rows.append((names, cells[1] if len(cells) > 1 else ""))

def layer_path(name):  # the repository path of a layer named in a cell
    return name.rstrip("/") if "/" in name else "src/" + name

layers = {}  # name -> path
for names, _ in rows:
    for n in names:
        layers[n] = layer_path(n)
allowed = {}  # layer name -> set of layer names it may use
only = {}  # layer name -> {used layer: set of the header paths it is limited to}
above = []
for names, uses in rows:
    ok, lim = set(), {}
    if re.search(r"\ball of the above\b", uses):
        ok.update(above)
    for tok in re.findall(r"`([^`]+)`", uses):
        if tok in layers:
            ok.add(tok)
            continue
        if tok == "include/stoker.h":
            continue  # the public header: every layer may include it
        head = tok.split("/", 1)[0]
        if "/" in tok and tok.endswith(".h") and head in layers:
            ok.add(head)
            lim.setdefault(head, set()).add(layers[head] + "/" + tok.split("/", 1)[1])
    for n in names:
        allowed[n] = ok
        only[n] = lim
    above.extend(names)

def layer_of(path):  # the most specific layer holding a repository path
    best = None
    for n, p in layers.items():
        if path == p or path.startswith(p + "/"):
            if best is None or len(p) > len(layers[best]):
                best = n
    return best

# ---- the includes ----
search = ["src", "include", "tools/common"]
def resolve(frm, inc, quoted):
    cands = ([os.path.join(os.path.dirname(frm), inc)] if quoted else []) + [
        os.path.join(d, inc) for d in search]
    for c in cands:
        c = os.path.normpath(c)
        if os.path.isfile(os.path.join(root, c)):
            return c
    return None

files = []
for top in sorted({p.split("/", 1)[0] for p in layers.values()} | {"include"}):
    for d, _, fs in os.walk(os.path.join(root, top)):
        for fn in fs:
            if fn.endswith((".c", ".h", ".cu", ".cpp")):
                files.append(os.path.relpath(os.path.join(d, fn), root))
bad = []
edges = {}  # folder -> {folder: first (file, line, include)}
inc_re = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')
for path in sorted(files):
    me = layer_of(path)
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        for no, line in enumerate(f, 1):
            m = inc_re.match(line)
            if not m:
                continue
            target = resolve(path, m.group(2), m.group(1) == '"')
            if target is None:
                continue  # a system or third-party header
            close = ">" if m.group(1) == "<" else '"'
            where = f"{path}:{no}: #include {m.group(1)}{m.group(2)}{close}"
            a, b = os.path.dirname(path), os.path.dirname(target)
            if a != b:
                edges.setdefault(a, {}).setdefault(b, where)
            if me is None or target == "include/stoker.h":
                continue
            to = layer_of(target)
            if to is None:
                bad.append(f"{where}: {target} is in no layer of the table")
            elif to == me:
                continue
            elif to not in allowed[me]:
                uses = ", ".join(sorted(allowed[me])) or "nothing"
                bad.append(f"{where}: layer {me} includes layer {to}; its row uses {uses}")
            elif to in only[me] and target not in only[me][to]:
                bad.append(f"{where}: layer {me} may include of {to} only "
                           f"{', '.join(sorted(only[me][to]))}")
for a in sorted(edges):
    for b in sorted(edges[a]):
        if a < b and a in edges.get(b, {}):
            bad.append(f"folders {a} and {b} include each other: {edges[a][b]}; {edges[b][a]}")
for line in bad:
    print(line)
sys.exit(1 if bad else 0)
EOF
}

# The check can fail: a tree whose lowest layer includes a higher one's header, and two
# folders that include each other.
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/docs" "$tmp/src/common" "$tmp/src/loader" "$tmp/src/io"
printf '%s\n' '| layer | uses |' '| --- | --- |' '| `common` | nothing |' '| `io` | `common` |' \
    '| `loader` | all of the above |' > "$tmp/docs/ARCHITECTURE.md"
printf '#include "loader/plan.h"\n' > "$tmp/src/common/util.c"
printf '#include "common/util.h"\n' > "$tmp/src/loader/plan.h"
: > "$tmp/src/common/util.h"
printf '#include "loader/plan.h"\n' > "$tmp/src/io/reader.c"
out=$(check "$tmp" "$tmp/docs/ARCHITECTURE.md")
rc=$?
for want in 'src/common/util.c:1: #include "loader/plan.h": layer common includes layer loader' \
    'src/io/reader.c:1: #include "loader/plan.h": layer io includes layer loader' \
    'folders src/common and src/loader include each other'; do
    if [ $rc -ne 1 ] || ! grep -qF "$want" <<< "$out"; then
        echo "the check missed a planted violation ($want); it said (rc $rc):"
        echo "$out"
        exit 1
    fi
done

tree=${STOKER_LAYERS_ROOT:-$root}
out=$(check "$tree" "${STOKER_LAYERS_DOC:-$tree/docs/ARCHITECTURE.md}")
rc=$?
if [ $rc -ne 0 ]; then
    echo "$out"
    echo "FAIL: includes against docs/ARCHITECTURE.md's layer table (rc $rc)"
    exit 1
fi
echo "ok: every include follows docs/ARCHITECTURE.md's layer table"
