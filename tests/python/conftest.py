# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures of the Python tests: the stoker binding bound to the library under test,
and small data sets written with the binding's own Writer.

The library: STOKER_LIBRARY, else $STOKER_BUILD_DIR/libstoker.so, else build/libstoker.so
in the repository. The environment is left as it was (other test modules read it).
"""
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _library():
    if os.environ.get("STOKER_LIBRARY"):
        return os.environ["STOKER_LIBRARY"]
    build = os.environ.get("STOKER_BUILD_DIR") or os.path.join(ROOT, "build")
    return os.path.join(build, "libstoker.so")


def _import_stoker():
    if os.path.join(ROOT, "python") not in sys.path:
        sys.path.insert(0, os.path.join(ROOT, "python"))
    old = os.environ.get("STOKER_LIBRARY")
    os.environ["STOKER_LIBRARY"] = _library()
    try:
        import stoker  # noqa: F401  (binds the library now, once)
    finally:
        if old is None:
            del os.environ["STOKER_LIBRARY"]
        else:
            os.environ["STOKER_LIBRARY"] = old


_import_stoker()


def remote_built():
    """Whether this build reads URLs (it refuses them, saying so, without libcurl)."""
    import stoker
    try:
        stoker.Dataset("http://127.0.0.1:9/x", cache_dir="/nonexistent-dir-for-probe")
    except stoker.StokerError as e:
        return "built without libcurl" not in str(e)
    return True

# Each record of the raw data sets is an (8, 8, 3) uint8 tensor whose bytes encode its id.
RECORD_SHAPE = (8, 8, 3)


def record_array(i):
    """Record i's tensor: bytes 0..7 hold i (little-endian), the rest a pattern of i."""
    flat = ((np.arange(int(np.prod(RECORD_SHAPE)), dtype=np.int64) * 7 + i * 13) % 251)
    flat = flat.astype(np.uint8)
    flat[:8] = np.frombuffer(np.int64(i).tobytes(), dtype=np.uint8)
    return flat.reshape(RECORD_SHAPE)


def record_id(arr):
    """The id encoded in a record tensor (or a batch of them)."""
    flat = np.ascontiguousarray(arr).reshape(-1, int(np.prod(RECORD_SHAPE)))
    return flat[:, :8].copy().view(np.int64).reshape(-1)


def label_of(i):
    return (i * 31) % 17 - 3  # negative labels too


def var_record(i):
    """Variable-size record i: 0..300 bytes, the id's text repeated."""
    n = (i * 37) % 301
    return (b"rec%06d;" % i * (n // 10 + 1))[:n]


def write_raw(path, n, shard_size=None, align=None):
    import stoker
    with stoker.Writer(path, kind="raw", dtype="uint8", shape=RECORD_SHAPE,
                       shard_size=shard_size, align=align, fsync=False) as w:
        for i in range(n):
            w.add(record_array(i), label_of(i), "r/%d" % i)
    return str(path)


def write_var(path, n):
    import stoker
    with stoker.Writer(path, kind="bytes", fsync=False) as w:
        for i in range(n):
            w.add(var_record(i), label_of(i))
    return str(path)


@pytest.fixture(scope="session")
def raw_ds(tmp_path_factory):
    """103 raw records over several shards (shards of at most ~20 records)."""
    return write_raw(tmp_path_factory.mktemp("raw") / "ds", 103, shard_size=20 * 4096 + 8192)


@pytest.fixture(scope="session")
def var_ds(tmp_path_factory):
    return write_var(tmp_path_factory.mktemp("var") / "ds", 57)
