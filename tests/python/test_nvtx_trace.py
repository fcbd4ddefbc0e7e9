# SPDX-License-Identifier: Apache-2.0
"""The library's NVTX ranges as a tool sees them: a loader runs in a child process with the
NVTX injection library bench/nvtx_trace.c (libbench_nvtx_trace.so in the build folder)
attached, and the Chrome trace it writes at exit is read back. The ranges must be in the
domain "stoker", with the names of src/cuda/nvtx.h, "next" on the consumer's thread once per
call of stoker_loader_take (counted in the child), "piece" on the workers' threads,
push/pop ranges properly nested on each thread, and "fetch" ranges of a remote data set as
start/end pairs, one per block requested."""
import collections
import json
import os
import re
import subprocess
import sys

import pytest

import conftest as h
import stoker

REMOTE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "remote")
sys.path.insert(0, REMOTE)
import range_server  # noqa: E402

BUILD = os.environ.get("STOKER_BUILD_DIR") or os.path.join(h.ROOT, "build")
TOOL = os.path.join(BUILD, "libbench_nvtx_trace.so")
BLOCK = 16384  # the remote data set's block size: many blocks
BATCHES = 9  # taken by the child, fewer than an epoch: every call returns a batch or AGAIN

pytestmark = pytest.mark.skipif(not stoker.capabilities()["cuda_build"],
                                reason="built without CUDA: the library marks no NVTX ranges")

# The child: takes BATCHES batches, counting the library's next calls through the binding's
# own entry (a call that waited a whole step returns AGAIN and is a range too).
CHILD = r"""
import json, sys, threading
import stoker
import stoker.loader as sl
calls = {"all": 0, "ok": 0}
real = sl._TAKE
def counted(*args):
    rc = real(*args)
    calls["all"] += 1
    calls["ok"] += rc == 0
    return rc
sl._TAKE = counted
path, n, kw = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
with stoker.Loader(path, 16, seed=3, device="cpu", threads=2, **kw) as loader:
    it = iter(loader)
    for _ in range(n):
        next(it)
    del it
    retries = loader.stats().get("remote_retries", 0)
print(json.dumps(dict(calls, tid=threading.get_native_id(), retries=retries)))
"""


def traced(tmp_path, path, n=BATCHES, **kw):
    """Runs the child on path; (its report, the trace's events, the trace's otherData)."""
    assert os.path.isfile(TOOL), "%s: not built (the CUDA build makes it)" % TOOL
    out = tmp_path / "trace.json"
    env = dict(os.environ, NVTX_INJECTION64_PATH=TOOL, STOKER_NVTX_TRACE=str(out),
               STOKER_LIBRARY=stoker.library_path,
               PYTHONPATH=os.path.join(h.ROOT, "python"))
    p = subprocess.run([sys.executable, "-c", CHILD, str(path), str(n), json.dumps(kw)],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout.splitlines()[-1])
    assert out.exists(), "no trace written; the child's stderr: " + p.stderr
    with open(out) as f:
        trace = json.load(f)
    assert not [x for x in os.listdir(tmp_path) if ".tmp." in x]
    return report, trace["traceEvents"], trace["otherData"]


def complete(events):
    """The push/pop ranges ("X"), per thread, in order of start."""
    per = collections.defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            per[e["tid"]].append(e)
    for v in per.values():
        v.sort(key=lambda e: (e["ts"], -e["dur"]))
    return per


def check_nesting(per):
    """Ranges of one thread nest: each starts after the enclosing one's start and ends before
    its end, and its depth is the number of ranges enclosing it."""
    for tid, ranges in per.items():
        open_ = []  # end times of the enclosing ranges
        for e in ranges:
            assert e["dur"] >= 0, e
            while open_ and open_[-1] <= e["ts"]:
                open_.pop()
            end = e["ts"] + e["dur"]
            assert not open_ or end <= open_[-1] + 1e-3, ("partial overlap on thread %d" % tid, e)
            assert e["args"]["depth"] == len(open_), e
            open_.append(end)


def thread_names(events):
    return {e["tid"]: e["args"]["name"] for e in events
            if e["ph"] == "M" and e["name"] == "thread_name"}


def test_local_loader_ranges(tmp_path):
    ds = h.write_raw(tmp_path / "ds", 400)
    report, events, other = traced(tmp_path, ds)
    assert other == dict(other, dropped=0, unmatched=0, unclosed=0)
    assert report["ok"] == BATCHES
    assert {e["cat"] for e in events if e["ph"] != "M"} == {"stoker"}
    per = complete(events)
    check_nesting(per)
    names = collections.Counter(e["name"] for v in per.values() for e in v)
    assert set(names) <= {"next", "piece"}, names
    nexts = [e for v in per.values() for e in v if e["name"] == "next"]
    assert len(nexts) == report["all"], (names, report)
    assert {e["tid"] for e in nexts} == {report["tid"]}
    pieces = [e for v in per.values() for e in v if e["name"] == "piece"]
    assert len(pieces) >= BATCHES, names  # a batch of 16 is one piece or more
    workers = {e["tid"] for e in pieces}
    assert report["tid"] not in workers
    tn = thread_names(events)
    assert all(tn.get(t, "").startswith("stoker-") for t in workers), (workers, tn)


@pytest.mark.skipif(not h.remote_built(), reason="built without libcurl")
def test_remote_fetch_ranges(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    h.write_raw(root / "raw", 400, shard_size=60 * 4096 + 8192)
    kw = dict(cache_dir=str(tmp_path / "cache"), block_size=BLOCK, fetch_window=8 * BLOCK,
              fetch_transfers=4)
    with range_server.start(root) as srv:
        report, events, other = traced(tmp_path, srv.url + "/raw", **kw)
        gets = [e for e in srv.log if e["method"] == "GET" and e.get("range")]
    assert other == dict(other, dropped=0, unmatched=0, unclosed=0)
    assert report["ok"] == BATCHES
    check_nesting(complete(events))
    begin = {e["id"]: e for e in events if e["ph"] == "b"}
    end = {e["id"]: e for e in events if e["ph"] == "e"}
    assert begin.keys() == end.keys() and begin
    assert {e["name"] for e in begin.values()} == {"fetch"}
    assert {e["cat"] for e in begin.values()} == {"stoker"}
    assert all(end[i]["ts"] >= b["ts"] for i, b in begin.items())
    # Every block fetched (a GET aligned to a block, longer than the 64-byte header and footer
    # reads) is a fetch range; a few more ranges may be requests that the loader's close cut
    # short. A block's request that reaches the server twice within its one range (sent
    # again by the client, as a retry after a fault does) is one fetch: blocks are counted
    # once (no faults injected, a cache that holds the data set, so no block is fetched in
    # two ranges).
    blocks = set()
    for g in gets:
        a, b = (int(x) for x in re.fullmatch(r"bytes=(\d+)-(\d+)", g["range"]).groups())
        if a % BLOCK == 0 and b - a + 1 > 64:
            blocks.add((g["path"], a, b))
    in_set = sum(-(-os.path.getsize(root / "raw" / f) // BLOCK)
                 for f in os.listdir(root / "raw") if f.startswith("shard-"))
    assert len(blocks) <= len(begin), (len(blocks), len(begin), report["retries"])
    assert len(begin) <= in_set, (len(begin), in_set)


def test_train_nvtx_trace(tmp_path):
    """bench/train.py --nvtx-trace: the stoker child's trace, and its counts printed."""
    pytest.importorskip("torch")
    pytest.importorskip("PIL")
    out = tmp_path / "nvtx"
    p = subprocess.run(
        [sys.executable, os.path.join(h.ROOT, "bench", "train.py"), "--build", BUILD,
         "--device", "cpu", "--models", "tiny", "--make-data", str(tmp_path / "data"),
         "--images", "32", "--size", "32", "--batch-size", "8", "--steps", "3", "--warmup",
         "1", "--threads", "1", "--feeds", "synthetic,cpu", "--nvtx-trace", str(out)],
        env=dict(os.environ, STOKER_LIBRARY=stoker.library_path),
        capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert os.listdir(out) == ["tiny-cpu-r0.json"]  # the stoker child's only
    with open(out / "tiny-cpu-r0.json") as f:
        events = json.load(f)["traceEvents"]
    n = collections.Counter(e["name"] for e in events if e["ph"] == "X")
    assert n["next"] >= 4 and n["piece"] >= 4, n
    line = "NVTX ranges in %s: next %d, piece %d" % (out / "tiny-cpu-r0.json", n["next"],
                                                      n["piece"])
    assert line in p.stdout, p.stdout
