# SPDX-License-Identifier: Apache-2.0
"""The block cache under pressure: a small file system (a tmpfs of 20 MB, mounted by the
test, as root only) and several processes sharing one small cache, against the range server
of tests/remote on 127.0.0.1. What the cache cannot hold is an error naming the cache
directory and its free space, never a failure blamed on the URL; processes sharing a cache
share its limit and wait for room instead of failing."""
import contextlib
import os
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np
import pytest

import conftest as h
import stoker

HERE = os.path.dirname(os.path.abspath(__file__))
REMOTE = os.path.join(os.path.dirname(HERE), "remote")
sys.path.insert(0, REMOTE)
import range_server  # noqa: E402
from test_remote import BLOCK, RECORDS, epochs, opts, same, pytestmark  # noqa: E402,F401


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("served")
    h.write_raw(root / "raw", RECORDS, shard_size=60 * 4096 + 8192)
    return root


@contextlib.contextmanager
def small_fs(tmp_path, size="20m"):
    """A tmpfs of `size` at tmp_path/fs, unmounted on every path out."""
    d = tmp_path / "fs"
    d.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=" + size, "tmpfs", str(d)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("mount -t tmpfs was refused: " + r.stderr.strip())
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], check=False)


def fill(path):
    """Writes zeros to `path` until the file system is full."""
    chunk = b"\0" * (64 << 10)
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(chunk)
        except OSError:
            pass
        for n in (4096, 512, 1):
            try:
                while True:
                    f.write(chunk[:n])
            except OSError:
                pass


def test_default_limit_that_cannot_fit_is_an_error_at_create(served, tmp_path):
    with small_fs(tmp_path) as fs, range_server.start(served) as srv:
        cache = str(fs / "cache")
        with pytest.raises(stoker.StokerError) as e:
            stoker.Dataset(srv.url + "/raw", cache_dir=cache)
        msg = str(e.value)
        assert cache in msg and "free" in msg and "fetch_window" in msg, msg
        # the same file system takes a cache whose blocks in flight fit
        o = opts(tmp_path)
        del o["cache_limit"]
        o["cache_dir"] = cache
        same(epochs(srv.url + "/raw", n=1, **o), epochs(served / "raw", n=1))


def test_full_disk_evicts_and_goes_on(served, tmp_path):
    with small_fs(tmp_path) as fs, range_server.start(served) as srv:
        url = srv.url + "/raw"
        base = opts(tmp_path, cache_dir=str(fs / "cache"), cache_limit=12 << 20)
        # blocks of other objects (other block sizes), unpinned once their loaders close
        epochs(url, n=1, **dict(base, block_size=BLOCK))
        epochs(url, n=1, **dict(base, block_size=4 * BLOCK))
        want = epochs(served / "raw")
        got = []
        with stoker.Loader(url, 32, seed=11, device="cpu", threads=2,
                           **dict(base, block_size=2 * BLOCK)) as loader:
            fill(fs / "filler")  # another file takes every byte left
            for e in range(2):
                loader.set_epoch(e)
                for b in loader:
                    got.append((b.indices.copy(), b.labels.copy(), b.numpy().copy()))
        same(got, want)


def test_full_disk_with_nothing_to_evict_names_the_cache(served, tmp_path):
    with small_fs(tmp_path) as fs, range_server.start(served) as srv:
        cache = str(fs / "cache")
        with stoker.Loader(srv.url + "/raw", 32, seed=11, device="cpu", threads=2,
                           **opts(tmp_path, cache_dir=cache, cache_limit=12 << 20)) as loader:
            fill(fs / "filler")
            t0 = time.monotonic()
            with pytest.raises(stoker.StokerError) as e:
                for _ in loader:
                    pass
            assert time.monotonic() - t0 < 30
        msg = str(e.value)
        assert cache in msg and "free" in msg, msg
        assert "writing the body" not in msg, msg


SHARER = textwrap.dedent("""
    import sys
    import numpy as np
    import stoker
    url, local, cache, limit, seed = sys.argv[1:6]
    kw = dict(cache_dir=cache, block_size=%d, fetch_window=8 * %d, fetch_transfers=4,
              cache_limit=int(limit), fetch_retries=6, fetch_retry_ms=20000,
              fetch_timeout_ms=5000)
    def run(path, **kw):
        out = []
        with stoker.Loader(path, 32, seed=int(seed), device="cpu", threads=2, **kw) as ld:
            for e in range(2):
                ld.set_epoch(e)
                for b in ld:
                    out.append((b.indices.copy(), b.labels.copy(), b.numpy().copy()))
        return out
    got, want = run(url, **kw), run(local)
    assert len(got) == len(want), (len(got), len(want))
    for (ia, la, da), (ib, lb, db) in zip(got, want):
        assert np.array_equal(ia, ib) and np.array_equal(la, lb) and np.array_equal(da, db)
    print("ok", len(got))
""" % (BLOCK, BLOCK))


def test_processes_sharing_a_small_cache_wait_for_room(served, tmp_path):
    script = tmp_path / "sharer.py"
    script.write_text(SHARER)
    cache = str(tmp_path / "cache")
    limit = 8 * BLOCK + 2 * 4 * BLOCK  # what one process needs in flight, no more
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [HERE] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    with range_server.start(served) as srv:
        procs = [subprocess.Popen([sys.executable, str(script), srv.url + "/raw",
                                   str(served / "raw"), cache, str(limit), str(seed)],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env=env) for seed in (1, 2, 3)]
        outs = []
        try:
            for p in procs:
                outs.append(p.communicate(timeout=240)[0])
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out[-3000:]
