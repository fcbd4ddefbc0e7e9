# SPDX-License-Identifier: Apache-2.0
"""Remote data sets served by nginx (a production HTTP server, its own ranges, ETags and
If-Match) on 127.0.0.1: a packed data set and HDF5 files in three layouts (chunked,
gzip-compressed, variable-length JPEG bytes) give the local copy's batches byte for byte;
a shard rewritten after the open fails naming it, and a new run reads the new bytes."""
import os
import sys
import time

import numpy as np
import pytest

import conftest as h
import stoker

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "remote"))
import nginx_server  # noqa: E402
import test_hdf5_remote as h5r  # noqa: E402

RECORDS = 300


pytestmark = [
    pytest.mark.skipif(not h.remote_built(), reason="built without libcurl"),
    pytest.mark.skipif(not nginx_server.available(),
                       reason="nginx is not installed (scripts/install-deps.sh installs it)"),
]


def batches(path, n=2, **kw):
    out = []
    with stoker.Loader(path, 16, seed=3, device="cpu", threads=2, **kw) as loader:
        for e in range(n):
            loader.set_epoch(e)
            for b in loader:
                out.append((b.indices.copy(), b.labels.copy(), b.numpy().copy()))
                b.release()  # a batch kept (by a failure's traceback) keeps the loader
    return out


def test_a_packed_data_set_over_nginx_equals_the_local_one(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    h.write_raw(root / "raw", RECORDS, shard_size=50 * 4096 + 8192)
    with nginx_server.start(root) as srv:
        got = batches(srv.url + "/raw", **h5r.opts(tmp_path))
        served = len(srv.requests())
    h5r.same(got, batches(str(root / "raw")))
    assert served > 0, "nginx served nothing"


# the HDF5 files of test_hdf5_remote.py (its `served` fixture), served by nginx instead
served = h5r.served


@pytest.mark.skipif(not stoker.capabilities()["hdf5"], reason="built without HDF5")
@pytest.mark.parametrize("name", h5r.LAYOUTS)
def test_hdf5_over_nginx_equals_the_local_file(served, tmp_path, name):
    o = h5r.opts(tmp_path)
    with nginx_server.start(served) as srv:
        url = srv.url + "/" + name
        got = h5r.epochs(url, name, **o)
        got_records = h5r.records(url, **o)
        assert any(("/" + name) in line for line in srv.requests())
    h5r.same(got, h5r.epochs(str(served / name), name, **o))
    assert got_records == h5r.records(str(served / name), **o)


def test_a_shard_rewritten_after_the_open_fails_naming_it(tmp_path):
    """nginx's ETag is the file's mtime and size: the rewritten shard answers If-Match with
    412, which must fail the run naming the shard, never mix two versions' bytes."""
    root = tmp_path / "www"
    root.mkdir()
    h.write_raw(root / "raw", RECORDS, shard_size=50 * 4096 + 8192)
    with nginx_server.start(root) as srv:
        url = srv.url + "/raw"
        loader = stoker.Loader(url, 16, seed=1, device="cpu", threads=2, **h5r.opts(tmp_path))
        time.sleep(1.1)  # a new mtime second: nginx's ETag changes
        shards = sorted(p for p in (root / "raw").iterdir() if p.name.endswith(".stk")
                        and p.name != "manifest.stk")
        for p in shards:  # same size, other bytes (records' payloads), new mtime
            data = bytearray(p.read_bytes())
            data[8192] ^= 0xFF
            p.write_bytes(bytes(data))
        with pytest.raises(stoker.StokerError) as e:
            for b in loader:
                b.release()
        loader.close()
        msg = str(e.value)
        assert "chang" in msg.lower() and ".stk" in msg, msg
        # a new open pins the new version: its damaged record fails its CRC, named
        with pytest.raises(stoker.StokerError) as e:
            batches(url, n=1, **h5r.opts(tmp_path, cache_dir=str(tmp_path / "cache2")))
        assert "CRC" in str(e.value) or "crc" in str(e.value).lower(), str(e.value)
