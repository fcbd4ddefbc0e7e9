# SPDX-License-Identifier: Apache-2.0
"""HDF5 files over HTTP and S3: h5py-written files in three layouts (chunked uint8 images,
gzip-compressed chunks, variable-length JPEG bytes) served by the test servers in
tests/remote (127.0.0.1 only). Each is loaded with the same options as the local file, and
its batches, ids and labels must equal the local file's byte for byte; a URL naming
something that is not HDF5, and a server that fails, must fail clearly, naming the URL,
within a deadline."""
import io
import os
import sys
import time

import numpy as np
import pytest

import conftest as h
import stoker

h5py = pytest.importorskip("h5py")

REMOTE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "remote")
sys.path.insert(0, REMOTE)
import range_server  # noqa: E402
import s3_server  # noqa: E402

BLOCK = 16384  # small blocks: a chunk or a heap object often spans two
N = 60


def _built():
    """Whether this build reads both HDF5 and URLs."""
    return stoker.capabilities()["hdf5"] and h.remote_built()


pytestmark = pytest.mark.skipif(not _built(), reason="built without HDF5 or libcurl")


def images(n, shape, seed):
    return np.random.default_rng(seed).integers(0, 256, (n,) + shape, dtype=np.uint8)


def jpeg(i):
    from PIL import Image
    img = Image.fromarray(images(1, (20 + i % 7, 24 + i % 5, 3), seed=i)[0])
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=90)
    return buf.getvalue()


LAYOUTS = ["chunked.h5", "gzip.h5", "vlen.h5"]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A directory served over HTTP: one file per layout, with labels, and an object named
    like an HDF5 file that is not one."""
    pytest.importorskip("PIL")
    root = tmp_path_factory.mktemp("h5served")
    labels = (np.arange(N) * 7) % 11 - 2  # negative labels too
    with h5py.File(root / "chunked.h5", "w") as f:
        # chunks split records along axis 1 too: a record needs two chunks
        f.create_dataset("images", data=images(N, (32, 32, 3), 1), chunks=(4, 16, 32, 3))
        f["labels"] = labels
    with h5py.File(root / "gzip.h5", "w") as f:
        f.create_dataset("images", data=images(N, (32, 32, 3), 2) // 16, chunks=(5, 32, 32, 3),
                         compression="gzip", shuffle=True)
        f["labels"] = labels.astype(np.uint16) + 2
    with h5py.File(root / "vlen.h5", "w") as f:
        d = f.create_dataset("images", (N,), dtype=h5py.vlen_dtype(np.uint8))
        for i in range(N):
            d[i] = np.frombuffer(jpeg(i), dtype=np.uint8)
        f["labels"] = labels
    (root / "notes.h5").write_bytes(b"not HDF5 at all\n" * 4096)
    return root


def opts(tmp_path, **kw):
    o = dict(cache_dir=str(tmp_path / "cache"), block_size=BLOCK, fetch_window=8 * BLOCK,
             fetch_transfers=4, cache_limit=4 << 20, fetch_retries=4, fetch_retry_ms=2000,
             fetch_timeout_ms=5000)
    o.update(kw)
    return o


def epochs(path, name, n=2, **kw):
    """(ids, labels, data) of n shuffled epochs; JPEG records are decoded and resized."""
    extra = dict(size=16, resize=20, transform="eval") if name == "vlen.h5" else {}
    out = []
    with stoker.Loader(path, 8, seed=5, device="cpu", threads=2, **extra, **kw) as loader:
        for e in range(n):
            loader.set_epoch(e)
            for b in loader:
                out.append((b.indices.copy(), b.labels.copy(), b.numpy().copy()))
    return out


def same(a, b):
    assert len(a) == len(b) and len(a) > 0
    for (ia, la, da), (ib, lb, db) in zip(a, b):
        assert np.array_equal(ia, ib) and np.array_equal(la, lb)
        assert da.dtype == db.dtype and da.shape == db.shape and da.tobytes() == db.tobytes()


def records(path, **kw):
    with stoker.Dataset(path, **kw) as ds:
        return [(ds.read(i), ds.label(i)) for i in range(len(ds))]


@pytest.mark.parametrize("name", LAYOUTS)
def test_http_batches_equal_the_local_file(served, tmp_path, name):
    o = opts(tmp_path)
    local = str(served / name)
    with range_server.start(served) as srv:
        url = srv.url + "/" + name
        got = epochs(url, name, **o)
        got_records = records(url, **o)
        gets = [e for e in srv.log if e["method"] == "GET" and e["path"] == "/" + name]
    same(got, epochs(local, name, **o))
    assert got_records == records(local, **o)
    assert gets, "nothing was read over HTTP"


@pytest.mark.parametrize("name", LAYOUTS)
def test_s3_batches_equal_the_local_file(served, tmp_path, monkeypatch, name):
    bucket = tmp_path / "s3"
    bucket.mkdir()
    os.symlink(served, bucket / "bucket")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret/for+tests")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    with s3_server.start(bucket, keys={"AKIDTEST": ("secret/for+tests", None)},
                         region="eu-west-3") as srv:
        o = opts(tmp_path, s3_endpoint=srv.url)
        got = epochs("s3://bucket/" + name, name, **o)
        assert srv.count() > 0
    same(got, epochs(str(served / name), name, **o))


def test_a_dataset_path_inside_the_url(served, tmp_path):
    """URL:/dataset names the dataset, as FILE:/dataset does for a local file."""
    with h5py.File(served / "grouped.h5", "w") as f:
        f.create_dataset("train/x", data=images(12, (4, 4, 3), 3), chunks=(3, 4, 4, 3))
        f["train/labels"] = np.arange(12)
    o = opts(tmp_path)
    with range_server.start(served) as srv:
        got = records(srv.url + "/grouped.h5:/train/x", **o)
    assert got == records(str(served / "grouped.h5") + ":/train/x")
    assert [lab for _, lab in got] == list(range(12))


def test_a_url_to_an_object_that_is_not_hdf5_is_refused(served, tmp_path):
    with range_server.start(served) as srv:
        url = srv.url + "/notes.h5"
        with pytest.raises(stoker.StokerError) as e:
            stoker.Dataset(url, **opts(tmp_path))
        msg = str(e.value)
        assert "notes.h5" in msg and "not an HDF5 file" in msg, msg
        with pytest.raises(stoker.StokerError) as e:
            stoker.Dataset(srv.url + "/missing.h5", **opts(tmp_path))
        assert "missing.h5" in str(e.value), str(e.value)


@pytest.mark.parametrize("name", LAYOUTS)
def test_a_server_fault_at_open_fails_naming_the_url(served, tmp_path, name):
    with range_server.start(served, faults=["503:retry_after=0"]) as srv:
        url = srv.url + "/" + name
        t0 = time.monotonic()
        with pytest.raises(stoker.StokerError) as e:
            stoker.Dataset(url, **opts(tmp_path, fetch_retries=1, fetch_retry_ms=200))
        assert time.monotonic() - t0 < 30
        assert sum(srv.faults_injected.values()) > 0
    msg = str(e.value)
    assert "/" + name in msg and "503" in msg, msg


@pytest.mark.parametrize("name", ["chunked.h5", "gzip.h5"])
@pytest.mark.parametrize("fault", ["500", "hang"])
def test_a_server_fault_while_loading_fails_naming_the_url(served, tmp_path, name, fault):
    """A server that fails (or stops answering) after the open fails the loader's batch with
    the URL named; nothing waits past the timeouts. (A variable-length file's records are all
    read at open, for their lengths: its faults are those of the open.)"""
    extra = {}
    with range_server.start(served) as srv:
        url = srv.url + "/" + name
        loader = stoker.Loader(url, 8, seed=5, device="cpu", threads=2, **extra,
                               **opts(tmp_path, fetch_retries=1, fetch_retry_ms=200,
                                      fetch_timeout_ms=1500, cache_limit=1 << 20))
        srv.set_faults([fault + ":path=/" + name])
        t0 = time.monotonic()
        with pytest.raises(stoker.StokerError) as e:
            for _ in range(3):  # blocks read at open may serve the first epoch
                loader.set_epoch(_)
                for _b in loader:
                    pass
        loader.close()
        assert time.monotonic() - t0 < 40
        srv.set_faults([])
    msg = str(e.value)
    assert "/" + name in msg, msg
