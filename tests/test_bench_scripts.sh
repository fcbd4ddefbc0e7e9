#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The benchmark scripts on this machine: bench/run.sh --quick on a small JPEG tree gives
# every pipeline a row. Where no GPU is found, or stoker-bench takes no --decoder, the GPU
# decode rows (stoker --decoder cpu, auto and gpu; torchvision's batched GPU decode) are
# skipped with the reason, the plain JPEG row stands for stoker, and the comparison of auto
# against cpu says why it was not measured. report.py on two real stoker-bench runs filed as
# the cpu and auto rows: the comparison's ratio, CPU saving and verdicts follow from the
# rows' own figures. The GPU decode peer run alone prints one row; the never-waits harness
# and its consumer refuse bad arguments by name.
set -u -o pipefail # no -e: run (cli_lib.sh) checks exit codes itself

PY=/usr/bin/python3
if ! "$PY" -c 'import numpy, PIL, h5py' 2> /dev/null; then
    echo "no python3 with numpy, PIL, h5py"
    exit 77
fi
[ -d /usr/share/backgrounds/mate ] || { echo "no photographs for make_data.py"; exit 77; }
[ -n "${STOKER_BUILD_DIR:-}" ] && [ -x "$STOKER_BUILD_DIR/stoker-bench" ] &&
    [ -x "$STOKER_BUILD_DIR/stoker-pack" ] || { echo "stoker-bench not built"; exit 77; }
SRC=${STOKER_SOURCE_DIR:?}
mkdir -p "$STOKER_TEST_TMP"
T=$(mktemp -d "$STOKER_TEST_TMP/bench-scripts-XXXXXX")
trap 'rm -rf "$T"' EXIT
. "$SRC/tests/cli_lib.sh"

# ---- run.sh end to end ----
PYTHON=$PY bash "$SRC/bench/run.sh" --build "$STOKER_BUILD_DIR" --quick --images 120 \
    --threads 2 --out "$T/out" --budget 160 > "$T/run.log" 2>&1 ||
    { cat "$T/run.log" >&2; fail "run.sh failed"; }
decoder_flag=0
"$STOKER_BUILD_DIR/stoker-bench" --help 2>&1 | grep -q -- --decoder && decoder_flag=1

"$PY" - "$T/out" "$decoder_flag" <<'PYEOF' || fail "run.sh's report"
import json, sys
out, decoder_flag = sys.argv[1], sys.argv[2] == "1"
res = json.load(open(out + "/bench-results.json"))
md = open(out + "/bench-results.md").read()
rows = {r["id"]: r for r in res["rows"]}
for rid in ("ceiling-full", "ceiling-crop", "stoker-jpeg-cpu", "stoker-jpeg-auto",
            "stoker-jpeg-gpu", "torch-classic", "torchvision-uint8", "torchvision-gpu-decode",
            "stoker-h5", "stoker-raw", "h5py-dataloader"):
    assert rid in rows, f"no row {rid}: {sorted(rows)}"
gpu_rows = ("stoker-jpeg-cpu", "stoker-jpeg-auto", "stoker-jpeg-gpu", "torchvision-gpu-decode")
for rid in gpu_rows:  # every row either measured or says why not
    r = rows[rid]
    assert (r["status"] == "ok" and r["figure"] > 0) or (r["status"] != "ok" and r["note"]), r
    assert r["name"] in md, r["name"]
cmp = res["decoder_comparison"]
assert "## GPU decode: stoker --decoder auto against --decoder cpu" in md
if res["machine"]["gpu"] == "none":
    for rid in gpu_rows:
        r = rows[rid]
        assert r["status"] == "skipped" and "no CUDA device" in r["note"], r
        assert f"**skipped**; {r['note']}" in md, r["note"]
    if not decoder_flag:
        assert "stoker-bench has no --decoder" in rows["stoker-jpeg-auto"]["note"]
    train = rows["stoker-jpeg-train"]  # the plain row stands for stoker
    assert train["status"] == "ok" and train["figure"] > 0, train
    assert train["ratio_to_stoker"] == 1.0 and train["stoker_reference"] == "stoker-jpeg-train"
    assert train["cpu_seconds_per_image"] > 0, train
    if decoder_flag:  # the decoder's figures of the run travel with the row
        sb = train["stoker_bench"]
        for k in ("decoder", "cpu_decoded", "gpu_decoded", "cpu_busy", "gpu_busy"):
            assert train[k] == sb[k], (k, train[k], sb[k])
        assert train["decoder"] == "cpu" and train["gpu_decoded"] == 0, train
        assert f"decoder {train['decoder']}" in md
    assert cmp["status"] == "not measured" and "no CUDA device" in cmp["why"], cmp
    assert f"Not measured: {cmp['why']}" in md
print("run.sh rows:", ", ".join(f"{k} {r['status']}" for k, r in rows.items()))
PYEOF

# ---- the comparison of auto against cpu, from two real stoker-bench runs ----
stk=$T/out/data/jpeg.stk
[ -d "$stk" ] || fail "run.sh left no packed JPEGs at $stk"
: > "$T/rows.jsonl"
for d in cpu auto; do
    threads=$([ "$d" = cpu ] && echo 1 || echo 2)
    extra=()
    [ "$decoder_flag" = 1 ] && extra=(--decoder "$d")
    run 0 "$STOKER_BUILD_DIR/stoker-bench" "$stk" --json --threads "$threads" --epochs 2 \
        --batch-size 32 --transform train "${extra[@]}"
    "$PY" "$SRC/bench/report.py" stoker --id "stoker-jpeg-$d" --name "stoker --decoder $d" \
        --group jpeg --unit img/s < "$T/stdout" >> "$T/rows.jsonl" || fail "report.py stoker"
done
run 0 "$PY" "$SRC/bench/report.py" table "$T/rows.jsonl" --out "$T/cmp"
"$PY" - "$T/cmp" <<'PYEOF' || fail "the comparison of auto against cpu"
import json, sys
res = json.load(open(sys.argv[1] + "/bench-results.json"))
md = open(sys.argv[1] + "/bench-results.md").read()
rows = {r["id"]: r for r in res["rows"]}
cpu, auto, c = rows["stoker-jpeg-cpu"], rows["stoker-jpeg-auto"], res["decoder_comparison"]
assert c["status"] == "measured", c
speedup = auto["figure"] / cpu["figure"]
assert abs(c["speedup"] - speedup) < 1e-12, (c, speedup)
assert c["speedup_pass"] == (speedup >= 1.4 and auto["figure"] >= 20000), c
saving = 1 - auto["cpu_seconds_per_image"] / cpu["cpu_seconds_per_image"]
assert abs(c["cpu_saving"] - saving) < 1e-12, (c, saving)
assert c["cpu_saving_pass"] == (saving >= 0.30), c
verdict = {True: "PASS", False: "FAIL"}
assert f"= {speedup:.2f}× (target ≥ 1.4× and ≥ 20,000 img/s): {verdict[c['speedup_pass']]}" \
    in md, md
assert f"{100 * saving:.0f}% lower (target ≥ 30% lower): {verdict[c['cpu_saving_pass']]}" \
    in md, md
# the JPEG group's reference is the auto row where the plain one did not run
assert cpu["stoker_reference"] == "stoker-jpeg-auto"
assert abs(cpu["ratio_to_stoker"] - cpu["figure"] / auto["figure"]) < 1e-12
print(f"auto/cpu {speedup:.3f}x, CPU saving {100 * saving:.1f}%")
PYEOF

# ---- the GPU decode peer alone: one row, measured or saying why not ----
run 0 "$PY" "$SRC/bench/peers/torchvision_gpu_decode.py" "$T/out/data/jpeg/train" --epochs 1 \
    --batch-size 16 --max-seconds 30
"$PY" - "$T/stdout" <<'PYEOF' || fail "the GPU decode peer's row"
import json, sys
lines = [ln for ln in open(sys.argv[1]) if ln.strip()]
assert len(lines) == 1, lines
r = json.loads(lines[0])
assert r["id"] == "torchvision-gpu-decode" and r["group"] == "jpeg", r
if r["status"] == "ok":
    assert r["images"] > 0 and r["accepted"] + r["refused"] == r["screened"], r
else:
    assert r["status"] in ("absent", "skipped") and r["note"], r
print("GPU decode peer:", r["status"], r.get("note", ""))
PYEOF

# ---- the never-waits harness and its consumer: arguments ----
run 2 bash "$SRC/bench/gpu_compute_never_waits.sh" "$STOKER_BUILD_DIR"
has stderr "usage: .*BUILD_DIR DATA_DIR"
exe=$STOKER_BUILD_DIR/examples/train_loop_cpp
if [ -x "$exe" ]; then
    run 1 "$exe" "$stk" --decoder fast
    has stderr "train_loop_cpp: --decoder: needs auto, cpu or gpu"
    run 1 "$exe" "$stk" --kernel sleep
    has stderr "train_loop_cpp: --kernel: needs spin, work or net"
    run 1 "$exe" "$stk" --kernel net --launches 0
    has stderr "train_loop_cpp: --launches: needs a positive number"
    run 1 "$exe" "$stk" --synthetic --device cpu
    has stderr "train_loop_cpp: --synthetic: needs a GPU"
fi
echo "bench scripts: ok"
