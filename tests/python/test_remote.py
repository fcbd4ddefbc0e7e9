# SPDX-License-Identifier: Apache-2.0
"""Remote data sets through the real library: a packed data set served over HTTP (and as a
path-style S3 endpoint) by the test servers in tests/remote, on 127.0.0.1 only, with faults
injected. Batches read through them equal the local data set's, byte for byte."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import conftest as h
import stoker

REMOTE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "remote")
sys.path.insert(0, REMOTE)
import range_server  # noqa: E402
import s3_server  # noqa: E402

BLOCK = 16384  # small blocks: many of them, and records across block edges
RECORDS = 400


pytestmark = pytest.mark.skipif(not h.remote_built(), reason="built without libcurl")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A directory served over HTTP holding `raw` (400 raw records over several shards)
    and `var` (variable-length records, alignment 1)."""
    root = tmp_path_factory.mktemp("served")
    h.write_raw(root / "raw", RECORDS, shard_size=60 * 4096 + 8192)
    with stoker.Writer(root / "var", kind="bytes", align=1, shard_size=64 * 1024,
                       fsync=False) as w:
        for i in range(300):
            w.add(h.var_record(i) * 40, h.label_of(i))
    return root


@pytest.fixture
def raw_local(served):
    return served / "raw"


def opts(tmp_path, **kw):
    o = dict(cache_dir=str(tmp_path / "cache"), block_size=BLOCK, fetch_window=8 * BLOCK,
             fetch_transfers=4, cache_limit=4 << 20, fetch_retries=6, fetch_retry_ms=20000,
             fetch_timeout_ms=5000)
    o.update(kw)
    return o


def epochs(path, n=2, **kw):
    """(ids, labels, data) of n shuffled epochs."""
    out = []
    with stoker.Loader(path, 32, seed=11, device="cpu", threads=2, **kw) as loader:
        for e in range(n):
            loader.set_epoch(e)
            for b in loader:
                out.append((b.indices.copy(), b.labels.copy(), b.numpy().copy()))
    return out


def same(a, b):
    assert len(a) == len(b)
    for (ia, la, da), (ib, lb, db) in zip(a, b):
        assert np.array_equal(ia, ib) and np.array_equal(la, lb) and np.array_equal(da, db)


def test_batches_equal_the_local_data_set(served, tmp_path):
    with range_server.start(served) as srv:
        got = epochs(srv.url + "/raw", **opts(tmp_path))
        # the remote source reads the records from its block cache, not the loader's reader
        with stoker.Loader(srv.url + "/raw", 32, device="cpu", threads=1,
                           **opts(tmp_path)) as loader:
            assert loader.backend == "remote" and loader.stats()["backend"] == "remote"
        bulk = [e for e in srv.log if e["method"] == "GET" and e.get("range")]
    same(got, epochs(str(served / "raw")))
    # blocks, never one request per record: most GETs are whole blocks
    sizes = [e["sent"] for e in bulk]
    assert sum(1 for s in sizes if s == BLOCK) > len(sizes) // 2, sizes[:20]


def test_dataset_reads_records_and_reports_the_source(served, tmp_path):
    with range_server.start(served) as srv:
        with stoker.Dataset(srv.url + "/var/", **opts(tmp_path)) as ds, \
                stoker.Dataset(str(served / "var")) as local:
            assert len(ds) == len(local) == 300
            assert ds.classes == local.classes
            for i in (0, 1, 57, 299, 150):
                assert ds.read(i) == local.read(i)
                assert ds.label(i) == local.label(i)


@pytest.mark.parametrize("fault", [
    "503:prob=0.1,seed=1", "429:every=7,retry_after=0", "reset:at=headers,prob=0.2,seed=2",
    "reset:at=body,prob=0.2,seed=3", "cut:prob=0.2,seed=4", "full:every=4",
    "badrange:every=5", "500:times=3", "latency:ms=5",
])
def test_faults_retries_cure_leave_the_batches_unchanged(served, tmp_path, fault):
    want = epochs(str(served / "raw"), n=1)
    with range_server.start(served, faults=[fault]) as srv:
        got = epochs(srv.url + "/raw", n=1, **opts(tmp_path))
        assert sum(srv.faults_injected.values()) > 0
    same(got, want)


def test_a_fault_that_lasts_fails_the_batch_naming_url_and_range(served, tmp_path):
    with range_server.start(served) as srv:
        url = srv.url + "/raw"
        loader = stoker.Loader(url, 32, seed=1, device="cpu", threads=2,
                               **opts(tmp_path, fetch_retries=2, fetch_retry_ms=2000))
        srv.set_faults(["503:path=/raw/*.stk"])  # shards, after the open
        t0 = time.monotonic()
        with pytest.raises(stoker.StokerError) as e:
            for _ in loader:
                pass
        loader.close()
        assert time.monotonic() - t0 < 60
    msg = str(e.value)
    assert "/raw/" in msg and "503" in msg and "bytes" in msg, msg


def test_a_changed_object_fails_naming_it_and_a_new_run_reads_the_new_one(served, tmp_path):
    with range_server.start(served) as srv:
        url = srv.url + "/raw"
        loader = stoker.Loader(url, 32, seed=1, device="cpu", threads=2, **opts(tmp_path))
        srv.set_faults(["etag:path=/raw/*.stk"])  # every shard changes after the open
        with pytest.raises(stoker.StokerError) as e:
            for _ in loader:
                pass
        loader.close()
        assert "chang" in str(e.value).lower(), str(e.value)
        srv.set_faults([])
        same(epochs(url, n=1, **opts(tmp_path)), epochs(str(served / "raw"), n=1))


def test_a_restart_and_the_close_do_not_wait_on_the_network(served, tmp_path):
    """Workers waiting for blocks of a server that stalls give up when the loader stops."""
    with range_server.start(served) as srv:
        url = srv.url + "/raw"
        loader = stoker.Loader(url, 32, seed=1, device="cpu", threads=2, **opts(tmp_path))
        srv.set_faults(["latency:ms=30000,path=/raw/*.stk"])  # every block stalls
        time.sleep(0.5)  # the workers wait for their first blocks now
        t0 = time.monotonic()
        loader.set_epoch(1)
        assert time.monotonic() - t0 < 5
        t0 = time.monotonic()
        loader.close()
        assert time.monotonic() - t0 < 5
        assert sum(srv.faults_injected.values()) > 0
        srv.set_faults([])


def test_open_errors_name_what_is_wrong(served, tmp_path):
    with range_server.start(served) as srv:
        with pytest.raises(stoker.StokerError) as e:
            stoker.Dataset(srv.url + "/nothing-here", **opts(tmp_path))
        assert "nothing-here" in str(e.value) and "not a stoker data set" in str(e.value)
        srv.set_faults(["403"])
        with pytest.raises(stoker.StokerError) as e:
            stoker.Dataset(srv.url + "/raw", **opts(tmp_path))
        assert "credentials" in str(e.value), str(e.value)
        srv.set_faults([])
        with pytest.raises(stoker.StokerError) as e:  # an HDF5 file's URL (test_hdf5_remote.py)
            stoker.Dataset(srv.url + "/data/file.h5", **opts(tmp_path))
        assert "/data/file.h5" in str(e.value) and "404" in str(e.value), str(e.value)


def test_a_cache_limit_below_what_is_in_flight_is_refused_at_create(served, tmp_path):
    with range_server.start(served) as srv:
        with pytest.raises(stoker.StokerError) as e:
            stoker.Loader(srv.url + "/raw", 32, device="cpu",
                          **opts(tmp_path, cache_limit=BLOCK))
        assert "cache_limit" in str(e.value) and "in flight" in str(e.value)


def test_a_second_run_reads_the_cache(served, tmp_path):
    with range_server.start(served) as srv:
        epochs(srv.url + "/raw", n=1, **opts(tmp_path))
        first = srv.count()
        srv.reset_stats()
        with stoker.Loader(srv.url + "/raw", 32, seed=11, device="cpu", threads=2,
                           **opts(tmp_path)) as loader:
            for _ in loader:
                pass
            st = loader.stats()
        blocks = [e for e in srv.log if e["method"] == "GET" and e["sent"] == BLOCK]
    assert first > 0 and not blocks, blocks[:5]
    assert st["cache_hits"] > 0 and st["cache_misses"] == 0
    assert st["cache_limit"] == 4 << 20 and st["remote_requests"] > 0


def test_records_read_from_the_cache_are_counted(served, tmp_path, raw_local):
    """stats()["cache_records"]: every record the workers read of a remote data set comes
    from a block in the cache, read-ahead included; none of a local one."""
    with range_server.start(served) as srv:
        with stoker.Loader(srv.url + "/raw", 32, seed=11, device="cpu", threads=2,
                           **opts(tmp_path)) as loader:
            for _ in loader:
                pass
            st = loader.stats()
    assert st["cache_records"] == st["records_read"] >= RECORDS, st
    with stoker.Loader(raw_local, 32, device="cpu", threads=2) as loader:
        for _ in loader:
            pass
        assert loader.stats()["cache_records"] == 0


def test_the_cache_limit_holds_and_nothing_else_is_touched(served, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
    (cache / "mine.txt").write_text("keep me")
    limit = 12 * BLOCK
    with range_server.start(served) as srv:
        with stoker.Loader(srv.url + "/raw", 32, seed=2, device="cpu", threads=2,
                           **opts(tmp_path, cache_limit=limit, fetch_window=4 * BLOCK,
                                  fetch_transfers=2)) as loader:
            for e in range(2):
                loader.set_epoch(e)
                for b in loader:
                    del b  # none held at close: the loader is destroyed there, not later
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(cache)
                for f in fs if f.startswith("b") and f[1:].isdigit())
    assert 0 < total <= limit
    assert (cache / "mine.txt").read_text() == "keep me"


def test_the_block_order_fetches_each_block_about_once_an_epoch(served, tmp_path):
    """A data set larger than the cache: in the block order, runs of ids the size of a block."""
    limit = 24 * BLOCK  # of 107 blocks
    kw = opts(tmp_path, cache_limit=limit, fetch_window=8 * BLOCK, fetch_transfers=2)
    with range_server.start(served) as srv:
        url = srv.url + "/raw"
        with pytest.warns(stoker.StokerWarning), stoker.Dataset(url, **kw):
            nblocks = sum(-(-os.path.getsize(os.path.join(served, "raw", f)) // BLOCK)
                          for f in os.listdir(served / "raw") if f.endswith(".stk")
                          and f != "manifest.stk")
        got = []
        with pytest.warns(stoker.StokerWarning, match="exceed the block cache"):
            loader = stoker.Loader(url, 32, seed=3, device="cpu", threads=2, order="blocks",
                                   **kw)
        with loader:
            srv.reset_stats()
            for e in range(2):
                loader.set_epoch(e)
                for b in loader:
                    got.append(b.indices.copy())
            gets = srv.count(method="GET")
    ids = np.concatenate(got)
    assert sorted(ids[:len(ids) // 2]) == list(range(RECORDS))  # each epoch whole
    assert gets <= 1.3 * 2 * nblocks, (gets, nblocks)  # the record order: 2-3 times as many


def test_slow_blocks_leave_the_blocks_read_ahead_pinned_until_read(served, tmp_path):
    """Some blocks come late (a worker waits for one while the other and the read-ahead go
    on, as under CPU starvation): the block files the workers read and let go must not stay
    locked by their reader (io_uring's registered files keep a closed file, and its flock
    pin, open), or the cache fills with blocks it cannot evict, the read-ahead's own pins
    are given up and evicted unread, and each block is fetched several times."""
    kw = opts(tmp_path, cache_limit=24 * BLOCK, fetch_window=8 * BLOCK, fetch_transfers=2)
    with range_server.start(served, faults=["latency:ms=300,method=GET,every=12"]) as srv:
        nblocks = sum(-(-os.path.getsize(os.path.join(served, "raw", f)) // BLOCK)
                      for f in os.listdir(served / "raw") if f.endswith(".stk")
                      and f != "manifest.stk")
        got = []
        with pytest.warns(stoker.StokerWarning, match="exceed the block cache"):
            loader = stoker.Loader(srv.url + "/raw", 32, seed=3, device="cpu", threads=2,
                                   order="blocks", **kw)
        with loader:
            srv.reset_stats()
            for b in loader:
                got.append(b.indices.copy())
            gets = srv.count(method="GET")
    assert sorted(np.concatenate(got)) == list(range(RECORDS))
    assert gets <= 1.3 * nblocks, (gets, nblocks)  # about twice as many or more while the reader kept them locked


def test_a_block_order_state_resumes_only_with_the_same_blocks(served, tmp_path):
    """The block order's runs come from the source (four blocks' records over a URL, so
    block_size decides them; the local copy has its own): a state saved over one is refused,
    naming the run lengths, by a loader whose runs differ, and continues exactly where they
    are the same."""
    def run(path, kw, n_batches=None, state=None):
        """ids of two epochs (or the first n_batches, then the state)."""
        ids = []
        with stoker.Loader(path, 32, seed=5, device="cpu", threads=2, order="blocks",
                           **kw) as loader:
            if state is not None:
                loader.load_state_dict(state)
            for e in range(loader.epoch, 2):
                if state is None or e > 0:  # a restored state goes on where it stands
                    loader.set_epoch(e)
                for b in loader:
                    ids.append(b.indices.copy())
                    if n_batches is not None and len(ids) == n_batches:
                        return ids, loader.state_dict()
        return ids, None

    with range_server.start(served) as srv:
        url = srv.url + "/raw"
        whole, _ = run(url, opts(tmp_path))
        head, state = run(url, opts(tmp_path), n_batches=5)
        assert all(np.array_equal(a, b) for a, b in zip(head, whole))
        rest, _ = run(url, opts(tmp_path), state=state)
        same([(i, i, i) for i in whole[5:]], [(i, i, i) for i in rest])
        for path, kw in ((url, opts(tmp_path, block_size=4 * BLOCK)), (str(served / "raw"), {})):
            with pytest.raises(stoker.StokerError, match=r"the state was saved with blocks of "
                               r"\d+ records; this loader's order uses blocks of \d+ "
                               r"\(block_size or source differs\)"):
                run(path, kw, state=state)


def test_a_cold_first_batch_keeps_the_transfers_busy_beyond_the_window(served, tmp_path):
    """The first batch of a shuffled epoch needs blocks far beyond a small window: they are
    fetched fetch_transfers at a time, not one at a time for the one waiting worker."""
    kw = opts(tmp_path, fetch_window=2 * BLOCK, fetch_transfers=8)
    with range_server.start(served, faults=["latency:ms=40,method=GET"]) as srv:
        with stoker.Loader(srv.url + "/raw", 32, seed=4, device="cpu", threads=1,
                           **kw) as loader:
            srv.reset_stats()  # the open's requests are over; the first batch's are not
            first = next(iter(loader))
            peak = srv.peak_active
            assert len(first.indices) == 32
    assert peak >= 6, peak  # the window alone: 2 blocks and the worker's one


def client_threads():
    """This process's threads called stoker-http: the remote source's HTTP clients."""
    names = []
    for t in os.listdir("/proc/self/task"):
        try:
            with open("/proc/self/task/%s/comm" % t) as f:
                names.append(f.read().strip())
        except OSError:
            pass
    return names.count("stoker-http")


@pytest.mark.parametrize("clients,want", [(0, 2), (1, 1), (3, 3), (9, 6)])
def test_the_clients_share_the_transfers(served, tmp_path, clients, want):
    """fetch_clients HTTP clients (a thread each; 0: two) share fetch_transfers: the batches
    are the local data set's, the transfers at once never more than fetch_transfers, and
    there are never more clients than transfers."""
    kw = opts(tmp_path, fetch_transfers=6, fetch_clients=clients, fetch_window=4 * BLOCK)
    got = []
    before = client_threads()  # of loaders other tests left to the garbage collector
    with range_server.start(served, faults=["latency:ms=10,method=GET"]) as srv:
        with stoker.Loader(srv.url + "/raw", 32, seed=11, device="cpu", threads=2,
                           **kw) as loader:
            assert client_threads() - before == want
            for e in range(2):
                loader.set_epoch(e)
                for b in loader:
                    got.append((b.indices.copy(), b.labels.copy(), b.numpy().copy()))
                    del b  # none held at close: the loader is destroyed there
            peak = srv.peak_active
    assert client_threads() == before
    assert 2 <= peak <= 6, peak
    same(got, epochs(str(served / "raw")))


WORKER = r"""
import sys
sys.path.insert(0, sys.argv[1])
import stoker
url, cache, block = sys.argv[2], sys.argv[3], int(sys.argv[4])
with stoker.Loader(url, 32, seed=5, device="cpu", threads=2, cache_dir=cache,
                   block_size=block, fetch_window=8 * block, fetch_transfers=4,
                   cache_limit=4 << 20) as loader:
    n = sum(1 for _ in loader)
print(n)
"""


def test_two_processes_on_one_cache_fetch_each_block_once(served, tmp_path):
    env = dict(os.environ, STOKER_LIBRARY=stoker._lib.path)
    py = os.path.join(h.ROOT, "python")
    with range_server.start(served) as srv:
        url = srv.url + "/raw"
        procs = [subprocess.Popen([sys.executable, "-c", WORKER, py, url, str(tmp_path / "c"),
                                   str(BLOCK)], env=env, stdout=subprocess.PIPE, text=True)
                 for _ in range(2)]
        outs = [p.communicate(timeout=120)[0] for p in procs]
        assert all(p.returncode == 0 for p in procs), outs
        ranges = [(e["path"], e["range"]) for e in srv.log
                  if e["method"] == "GET" and e["sent"] == BLOCK]
    assert ranges and len(ranges) == len(set(ranges)), "a block was fetched twice"


def test_a_killed_process_leaves_a_cache_the_next_run_uses(served, tmp_path):
    env = dict(os.environ, STOKER_LIBRARY=stoker._lib.path)
    py = os.path.join(h.ROOT, "python")
    with range_server.start(served, faults=["latency:ms=30"]) as srv:
        url = srv.url + "/raw"
        p = subprocess.Popen([sys.executable, "-c", WORKER, py, url, str(tmp_path / "c"),
                              str(BLOCK)], env=env, stdout=subprocess.PIPE, text=True)
        time.sleep(1.5)  # mid-fetch
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
        srv.set_faults([])
        got = epochs(url, n=1, **opts(tmp_path, cache_dir=str(tmp_path / "c")))
    same(got, epochs(str(served / "raw"), n=1))


def test_s3_path_style_with_signatures(served, tmp_path, monkeypatch):
    bucket = tmp_path / "s3"
    bucket.mkdir()
    os.symlink(served, bucket / "bucket")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret/for+tests")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "tok")
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    with s3_server.start(bucket, keys={"AKIDTEST": ("secret/for+tests", "tok")},
                         region="eu-west-3") as srv:
        got = epochs("s3://bucket/raw", n=1, **opts(tmp_path, s3_endpoint=srv.url))
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
        with pytest.raises(stoker.StokerError) as e:
            stoker.Dataset("s3://bucket/raw", **opts(tmp_path, s3_endpoint=srv.url))
        assert "credentials" in str(e.value)
    same(got, epochs(str(served / "raw"), n=1))


def test_stoker_pack_info_and_verify_and_bench_take_urls(served, tmp_path):
    build = os.environ.get("STOKER_BUILD_DIR") or os.path.join(h.ROOT, "build")
    pack, bench = os.path.join(build, "stoker-pack"), os.path.join(build, "stoker-bench")
    if not (os.access(pack, os.X_OK) and os.access(bench, os.X_OK)):
        pytest.skip("the tools are not built")
    env = dict(os.environ, STOKER_CACHE_DIR=str(tmp_path / "cache"))
    with range_server.start(served) as srv:
        url = srv.url + "/raw"
        out = subprocess.run([pack, "--info", url], capture_output=True, text=True, env=env,
                             timeout=120)
        assert out.returncode == 0 and str(RECORDS) in out.stdout, out.stderr
        out = subprocess.run([pack, "--verify", url], capture_output=True, text=True, env=env,
                             timeout=120)
        assert out.returncode == 0 and "intact" in out.stdout, out.stdout + out.stderr
        out = subprocess.run([bench, url, "--epochs", "1", "--batch-size", "32", "--device",
                              "cpu", "--json", "--block-size", str(BLOCK)], capture_output=True,
                             text=True, env=env, timeout=120)
        assert out.returncode == 0, out.stderr
        rep = json.loads(out.stdout)
        assert rep["remote_requests"] > 0 and rep["remote_bytes"] > 0
        assert rep["backend"] == "remote", rep["backend"]  # the remote source reads them
        out = subprocess.run([bench, url, "--epochs", "1", "--batch-size", "32", "--device",
                              "cpu", "--block-size", str(BLOCK), "--cache-limit", str(24 * BLOCK),
                              "--fetch-window", str(8 * BLOCK), "--fetch-transfers", "2",
                              "--order", "blocks"], capture_output=True, text=True, env=env,
                             timeout=120)  # a data set larger than its cache: the warning
        assert out.returncode == 0, out.stderr
        assert "warning" in out.stderr and "exceed the block cache" in out.stderr, out.stderr
        out = subprocess.run([bench, url, "--io"], capture_output=True, text=True, env=env,
                             timeout=120)  # a local disk's figure: refused, saying why
        assert out.returncode == 2 and "is a URL" in out.stderr, out.stderr


def test_verify_finds_a_damaged_record_remotely(served, tmp_path, monkeypatch):
    import shutil
    copy = tmp_path / "served"
    shutil.copytree(served / "raw", copy / "raw")
    shutil.copytree(served / "var", copy / "var")
    shard = sorted((copy / "raw").glob("shard-*.stk"))[0]
    data = bytearray(shard.read_bytes())
    data[4096 + 5] ^= 0xFF  # the first record's payload
    shard.write_bytes(bytes(data))
    monkeypatch.setenv("STOKER_CACHE_DIR", str(tmp_path / "cache"))
    with range_server.start(copy) as srv:
        problems = stoker.verify(srv.url + "/raw")
        assert stoker.verify(srv.url + "/var") == []
    assert [p for p in problems if p[1] == 0 and "CRC32C" in p[3]], problems


def _c_program(name):
    build = os.environ.get("STOKER_BUILD_DIR") or os.path.join(
        os.path.dirname(REMOTE), "..", "build")
    path = os.path.join(build, "tests", name)
    if not os.path.exists(path):
        pytest.skip("%s was not built (%s)" % (name, path))
    return path


@pytest.mark.parametrize("faults", [[], ["503:prob=0.05,seed=3", "latency:ms=2"]])
def test_the_c_loader_equals_the_local_one_across_a_restart(served, tmp_path, faults):
    """tests/test_remote_loader.c (also run under ThreadSanitizer by scripts/test.sh)."""
    prog = _c_program("test_remote_loader")
    with range_server.start(served, faults=faults) as srv:
        env = dict(os.environ, STOKER_TEST_REMOTE_URL=srv.url + "/var",
                   STOKER_TEST_REMOTE_LOCAL=str(served / "var"),
                   STOKER_TEST_REMOTE_CACHE=str(tmp_path / "cache"))
        out = subprocess.run([prog], env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "requests=" in out.stdout
        if faults:
            assert sum(srv.faults_injected.values()) > 0


# ---- deadlines, failing fast, retries as set, redirects, lengths (issue 42) ----

def test_a_trickling_server_fails_a_read_within_the_stated_deadline(served, tmp_path):
    """Headers, then 2.5 bytes/s: curl's low-speed guard never fires, the request's
    deadline does (docs/REMOTE.md): with fetch_timeout_ms T = 1 s, fetch_retry_ms 2 s and
    16 KiB blocks an attempt ends within T x (1 + 16 KiB / 1 MiB), the request within
    fetch_retry_ms + one attempt, about 3 s."""
    import threading
    with range_server.start(served) as srv:
        ds = stoker.Dataset(srv.url + "/raw", **opts(tmp_path, fetch_timeout_ms=1000,
                                                      fetch_retry_ms=2000))
        srv.set_faults(["trickle:rate=2.5,path=/raw/*.stk"])
        out = {}

        def read():
            t0 = time.monotonic()
            try:
                ds.read(0)
            except stoker.StokerError as e:
                out["err"] = e
            out["t"] = time.monotonic() - t0
        t = threading.Thread(target=read, daemon=True)
        t.start()
        t.join(30)
        srv.stop()  # ends the trickle (and, before the fix, the read)
        t.join(30)
        ds.close()
    assert out.get("t") is not None and out["t"] < 25, "the read neither ended nor failed"
    assert out["t"] < 3.1 + 3, out["t"]  # the bound, with a margin for a loaded machine
    msg = str(out.get("err"))
    assert "/raw/" in msg and "bytes" in msg and "timed out" in msg.lower(), msg


def test_no_retry_and_no_wait_mean_what_they_say(served, tmp_path):
    """fetch_retries=0: one attempt per request; fetch_retry_ms=0: no time to retry."""
    for retries, retry_ms in ((0, 20000), (3, 0)):
        with range_server.start(served) as srv:
            loader = stoker.Loader(srv.url + "/raw", 32, seed=1, device="cpu", threads=2,
                                   **opts(tmp_path, fetch_retries=retries,
                                          fetch_retry_ms=retry_ms))
            srv.set_faults(["503:path=/raw/*.stk,retry_after=0"])
            t0 = time.monotonic()
            with pytest.raises(stoker.StokerError) as e:
                next(iter(loader))
            took = time.monotonic() - t0
            retries = loader.stats()["remote_retries"]
            loader.close()
        assert retries == 0, retries
        assert "after 1 attempts" in str(e.value), str(e.value)
        assert took < 3, took


def test_a_user_header_stays_with_the_origin_across_redirects(served, tmp_path):
    """http_header goes to the data set's host only: the shards redirect to another server
    (another port of 127.0.0.1: another origin), which never sees the header; the batches
    are the local data set's."""
    want = epochs(str(served / "raw"), n=1)
    with range_server.start(served) as other, range_server.start(served) as srv:
        srv.set_faults(["redirect:to=%s,path=/raw/*.stk" % other.url])
        got = epochs(srv.url + "/raw", n=1,
                     **opts(tmp_path, http_header="X-Api-Key: k-123"))
        assert other.requests > 0 and srv.faults_injected["redirect"] > 0
        leaked = [x for x in other.log if "x-api-key" in x["headers"]]
        assert not leaked, "%d of %d requests to the other host carried the header" % (
            len(leaked), other.requests)
        assert all(x["headers"].get("x-api-key") == "k-123" for x in srv.log)
    same(got, want)


def test_a_head_without_content_length_says_the_length_is_missing(served, tmp_path):
    with range_server.start(served, faults=["nolength:method=HEAD"]) as srv:
        with pytest.raises(stoker.StokerError) as e:
            stoker.Dataset(srv.url + "/raw", **opts(tmp_path))
    msg = str(e.value)
    assert "manifest.stk" in msg and "Content-Length" in msg, msg
    assert "18446744073709551615" not in msg, msg


class _Interrupted(Exception):
    pass


def test_close_and_a_signal_end_a_remote_wait_within_a_second(served, tmp_path):
    """A server that starts to trickle (headers, then 2.5 bytes/s) once the loader is open,
    with long deadlines: next() comes to wait for a block. A signal (its handler raising, as
    Ctrl-C's does) ends that wait within a second, and so does close() from another thread;
    close() itself returns within a second, the transfers still trickling (docs/REMOTE.md,
    "Deadlines")."""
    import signal
    import threading
    slow = opts(tmp_path, fetch_timeout_ms=60000, fetch_retry_ms=60000)

    def consume(loader, out):
        """Takes batches until one does not come: what ended the wait, and when."""
        try:
            for _ in loader:
                pass
            out["end"] = "epoch"
        except (_Interrupted, ValueError) as e:
            out["end"] = e
        out["t"] = time.monotonic()

    with range_server.start(served) as srv:
        # a signal: its handler runs between the binding's steps of waiting
        loader = stoker.Loader(srv.url + "/raw", 32, device="cpu", threads=2, **slow)
        srv.set_faults(["trickle:rate=2.5,path=/raw/shard-*"])
        sent = {}

        def interrupt():
            sent["t"] = time.monotonic()
            os.kill(os.getpid(), signal.SIGINT)
        old = signal.signal(signal.SIGINT, lambda *a: (_ for _ in ()).throw(_Interrupted()))
        out = {}
        try:
            timer = threading.Timer(2.0, interrupt)
            timer.start()
            consume(loader, out)
            timer.join()
        finally:
            signal.signal(signal.SIGINT, old)
        assert isinstance(out["end"], _Interrupted), out
        assert out["t"] - sent["t"] < 1.0, out["t"] - sent["t"]
        t1 = time.monotonic()
        loader.close()
        assert time.monotonic() - t1 < 1.0, time.monotonic() - t1
        # close() from another thread while next() waits
        srv.set_faults([])
        loader = stoker.Loader(srv.url + "/raw", 32, device="cpu", threads=2,
                               **opts(tmp_path / "2", fetch_timeout_ms=60000,
                                      fetch_retry_ms=60000))
        srv.set_faults(["trickle:rate=2.5,path=/raw/shard-*"])
        out = {}
        th = threading.Thread(target=consume, args=(loader, out), daemon=True)
        th.start()
        time.sleep(2.0)
        t2 = time.monotonic()
        loader.close()
        closed = time.monotonic()
        th.join(10)
        assert closed - t2 < 1.0, closed - t2
        assert "closed" in str(out.get("end")), out
        assert out["t"] - t2 < 1.0, out["t"] - t2


@pytest.mark.parametrize("fault", ["hang", "trickle:rate=2.5"])
def test_a_batch_fails_as_soon_as_one_record_has_failed(served, tmp_path, fault):
    """A server that accepts and never answers the shards' requests, or answers them at 2.5
    bytes/s; T = 1 s, one retry, 1 s to retry: a request ends within fetch_retry_ms +
    T x (1 + 16 KiB / 1 MiB), about 2 s (docs/REMOTE.md). The first batch fails once its
    first record has failed for good, not after each of its records has waited out its own
    block's attempts."""
    with range_server.start(served) as srv:
        loader = stoker.Loader(srv.url + "/raw", 64, device="cpu", threads=2,
                               **opts(tmp_path, fetch_timeout_ms=1000, fetch_retries=1,
                                      fetch_retry_ms=1000))
        srv.set_faults([fault + ("," if ":" in fault else ":") + "path=/raw/shard-*"])
        t0 = time.monotonic()
        with pytest.raises(stoker.StokerError) as e:
            next(iter(loader))
        took = time.monotonic() - t0
        t1 = time.monotonic()
        loader.close()
        closed = time.monotonic() - t1
        srv.set_faults([])
    assert took < 2.1 + 2.5, took  # the bound, with a margin for a loaded machine
    assert closed < 1.0, closed
    msg = str(e.value)
    assert "/raw/shard-" in msg and "ETIMEDOUT" in msg, msg


def _crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def _rename_shard_in_manifest(ds, old, new):
    """Rewrites ds's manifest naming shard `old` as `new`, with a new CRC line."""
    path = os.path.join(ds, "manifest.stk")
    body = open(path, "rb").read()
    body = body[:body.rindex(b"crc32c ")]
    assert (" %s " % old).encode() in body
    body = body.replace((" %s " % old).encode(), (" %s " % new).encode())
    with open(path, "wb") as f:
        f.write(body + b"crc32c %08x\n" % _crc32c(body))


@pytest.mark.parametrize("name", ["%2e%2e%2fother%2fshard-00000.stk",
                                  "%2E%2E%2Fother%2Fshard-00000.stk",
                                  "..%2fother%2fshard-00000.stk",
                                  "%2e%2e%5cother%5cshard-00000.stk",
                                  "%2fetc%2fpasswd", "shard%00.stk", "%2e%2e"])
def test_a_percent_encoded_shard_name_cannot_leave_the_data_set(tmp_path, name):
    h.write_raw(tmp_path / "other", 40)
    h.write_raw(tmp_path / "evil", 40)
    _rename_shard_in_manifest(str(tmp_path / "evil"), "shard-00000.stk", name)
    with range_server.start(tmp_path) as srv:
        with pytest.raises(stoker.StokerError) as e:
            stoker.Dataset(srv.url + "/evil", **opts(tmp_path))
        paths = [x["path"] for x in srv.log]
    msg = str(e.value)
    assert "manifest.stk" in msg and name in msg, msg
    assert paths and all(os.path.normpath(p).startswith("/evil/") for p in paths), paths
    # the local copy refuses the name too
    with pytest.raises(stoker.StokerError) as e:
        stoker.Dataset(str(tmp_path / "evil"))
    assert "manifest.stk" in str(e.value) and name in str(e.value), str(e.value)


def test_a_shard_name_goes_into_the_url_percent_encoded(tmp_path):
    """A plain name with bytes that mean something in a URL reaches the server as itself."""
    h.write_raw(tmp_path / "ds", 40)
    name = "shard#1?a=b&c%25.stk"
    os.rename(tmp_path / "ds" / "shard-00000.stk", tmp_path / "ds" / name)
    _rename_shard_in_manifest(str(tmp_path / "ds"), "shard-00000.stk", name)
    with range_server.start(tmp_path) as srv:
        with stoker.Dataset(srv.url + "/ds", **opts(tmp_path)) as ds:
            got = [ds.read(i) for i in range(len(ds))]
        paths = {x["path"] for x in srv.log}
    with stoker.Dataset(str(tmp_path / "ds")) as ds:
        assert got == [ds.read(i) for i in range(len(ds))]
    assert "/ds/" + name in paths, paths


def _one_epoch(url, **kw):
    """The loader's first epoch; the faults of `faults` start once the open is done, so that
    they hit the blocks' GETs and not the open's reads."""
    faults = kw.pop("faults", None)
    srv = kw.pop("srv")
    opened = kw.pop("opened", None)
    out = []
    with stoker.Loader(url, 32, seed=11, device="cpu", threads=2, **kw) as loader:
        if faults:
            srv.set_faults(faults)
        if opened:
            opened()
        loader.set_epoch(0)
        for b in loader:
            out.append((b.indices.copy(), b.labels.copy(), b.numpy().copy()))
    return out


def _block_gets(srv, path):
    """{range: GETs} of the blocks of `path` the server answered."""
    got = {}
    for e in srv.log:
        if e["method"] == "GET" and e["path"] == path and e["sent"] == BLOCK:
            got[e["range"]] = got.get(e["range"], 0) + 1
    return got


def test_a_poisoned_block_is_fetched_again_and_heals(served, tmp_path):
    want = epochs(str(served / "raw"), n=1)
    with range_server.start(served) as srv:
        got = _one_epoch(srv.url + "/raw", srv=srv, faults=["corrupt:times=1,path=/raw/shard-00001.stk"],
                         **opts(tmp_path, cache_limit=64 << 20))
        bad = [e["range"] for e in srv.log if "corrupt" in e["faults"]]
        gets = _block_gets(srv, "/raw/shard-00001.stk")
    same(want, got)
    # fetched again (a third time when two workers dropped it at once)
    assert len(bad) == 1 and 2 <= gets[bad[0]] <= 3, (bad, gets)


def test_a_block_damaged_in_the_cache_is_fetched_again(served, tmp_path):
    want = epochs(str(served / "raw"), n=1)
    o = opts(tmp_path, cache_limit=64 << 20)
    with range_server.start(served) as srv:
        same(want, _one_epoch(srv.url + "/raw", srv=srv, **o))
        # a block of records (a shard's first block holds its header, its last the index)
        files = sorted((tmp_path / "cache").glob("*/b0000000001"))
        assert len(files) > 2
        victim = files[1]
        size = victim.stat().st_size
        with open(victim, "r+b") as f:  # zeroed by hand, the size kept
            f.write(bytes(size))
        n0 = []
        same(want, _one_epoch(srv.url + "/raw", srv=srv, opened=lambda: n0.append(len(srv.log)),
                              **o))
        again = [e for e in srv.log[n0[0]:] if e["method"] == "GET"]
        # the damaged block alone was fetched again: once, or twice when two workers found
        # records of it damaged at once and the second dropped the first's new copy
        assert 1 <= len(again) <= 2 and {(e["range"], e["sent"]) for e in again} == \
            {(again[0]["range"], size)}, again
        # Dataset.read heals the same way, and a block file cut short is fetched again too
        with open(victim, "r+b") as f:
            f.write(bytes(size))
        cut = files[2]
        os.truncate(cut, cut.stat().st_size // 2)
        with stoker.Dataset(srv.url + "/raw", **o) as ds, \
                stoker.Dataset(str(served / "raw")) as local:
            assert [ds.read(i) for i in range(len(ds))] == [local.read(i) for i in range(len(ds))]


def test_a_block_that_stays_corrupt_fails_saying_it_was_fetched_again(served, tmp_path):
    with range_server.start(served) as srv:
        with pytest.raises(stoker.StokerError) as e:
            _one_epoch(srv.url + "/raw", srv=srv, faults=["corrupt:path=/raw/shard-00001.stk"],
                       **opts(tmp_path, cache_limit=64 << 20))
    msg = str(e.value)
    assert "CRC32C mismatch" in msg and "fetched again" in msg, msg
    assert "/raw/shard-00001.stk" in msg and str(tmp_path / "cache") in msg, msg
