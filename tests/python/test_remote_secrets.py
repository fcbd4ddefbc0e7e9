# SPDX-License-Identifier: Apache-2.0
"""Credentials of a remote data set (a password in the URL, sent as Basic auth; the value of
http_header) never reach a file under the block cache, an error message, the stats or
stoker-bench's report, and the cache is not readable by other users; a remote data set
gives the records' keys as the local copy does. Served by tests/remote/range_server.py on
127.0.0.1 only."""
import base64
import json
import os
import stat
import subprocess
import sys

import pytest

import conftest as h
import stoker

REMOTE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "remote")
sys.path.insert(0, REMOTE)
import range_server  # noqa: E402
from test_remote import BLOCK, RECORDS, opts, pytestmark  # noqa: E402,F401

PASSWORD = "S3CRETPASS"
TOKEN = "T0KENVALUE"
SECRETS = (PASSWORD, TOKEN)
HEADER = "X-Api-Key: " + TOKEN


class AuthHandler(range_server.Handler):
    """Serves only requests with Basic auth user:S3CRETPASS and the API key header."""

    def authorize(self):
        basic = "Basic " + base64.b64encode(("user:" + PASSWORD).encode()).decode()
        if self.headers.get("Authorization") != basic or \
                self.headers.get("X-Api-Key") != TOKEN:
            return self.error(401, "Unauthorized", "credentials required")
        return None


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("served")
    h.write_raw(root / "raw", RECORDS, shard_size=60 * 4096 + 8192)
    return root


def secret_url(srv, path="/raw"):
    assert srv.url.startswith("http://")
    return "http://user:%s@%s%s" % (PASSWORD, srv.url[len("http://"):], path)


def assert_clean(text, what):
    for s in SECRETS:
        assert s not in text, "%s holds the secret %s: %r" % (what, s, text[:2000])


def assert_cache_clean(cache):
    """No file under the cache holds a secret; nothing is open to group or others."""
    seen = 0
    for dirpath, dirnames, filenames in os.walk(cache):
        for d in [dirpath] + [os.path.join(dirpath, n) for n in dirnames]:
            mode = stat.S_IMODE(os.lstat(d).st_mode)
            assert mode & 0o077 == 0, "%s has mode %o" % (d, mode)
        for n in filenames:
            p = os.path.join(dirpath, n)
            mode = stat.S_IMODE(os.lstat(p).st_mode)
            assert mode & 0o077 == 0, "%s has mode %o" % (p, mode)
            with open(p, "rb") as f:
                data = f.read()
            for s in SECRETS:
                assert s.encode() not in data, "%s holds the secret %s" % (p, s)
            seen += 1
    assert seen > 0, "the cache holds no file"


def test_credentials_reach_no_file_message_stats_or_report(served, tmp_path):
    cache = tmp_path / "cache"
    o = opts(tmp_path, http_header=HEADER)
    with range_server.start(served, handler=AuthHandler) as srv:
        url = secret_url(srv)
        # a successful epoch: the credentials are sent and work
        with stoker.Loader(url, 32, seed=3, device="cpu", threads=2, **o) as loader:
            n = sum(len(b.indices) for b in loader)
            assert n == RECORDS
            stats = loader.stats()
            assert_clean(json.dumps(stats), "loader.stats()")
            assert_clean(repr(loader), "repr(loader)")
        assert srv.count(method="GET") > 0
        assert all(e["status"] != 401 for e in srv.log), "a request went without credentials"

        # a failing open (a wrong path): the message names the URL without the password
        with pytest.raises(stoker.StokerError) as e:
            stoker.Dataset(secret_url(srv, "/nothing-here"), **o)
        msg = str(e.value)
        assert "user:***@127.0.0.1" in msg, msg
        assert_clean(msg, "the failing open's message")

        # a failing read after the open: the server refuses the shards
        with stoker.Dataset(url, **opts(tmp_path, http_header=HEADER, fetch_retries=0,
                                        fetch_retry_ms=1000, cache_dir=str(tmp_path / "c2"))) \
                as ds:
            srv.set_faults(["500:path=/raw/*.stk"])
            with pytest.raises(stoker.StokerError) as e:
                ds.read(5)
            assert "user:***@" in str(e.value), str(e.value)
            assert_clean(str(e.value), "the failing read's message")
            assert_clean(str(ds.shard_path(0)) if hasattr(ds, "shard_path") else "", "shard path")
            srv.set_faults([])

        # a header ending in a newline: refused, its value not shown
        for bad in (HEADER + "\n", HEADER + "\r\n"):
            with pytest.raises(stoker.StokerError) as e:
                stoker.Dataset(url, **opts(tmp_path, http_header=bad))
            msg = str(e.value)
            assert "X-Api-Key" in msg and "***" in msg, msg
            assert_clean(msg, "the refused header's message")

        # stoker-bench's text and --json report
        bench = os.path.join(os.environ.get("STOKER_BUILD_DIR") or
                             os.path.join(h.ROOT, "build"), "stoker-bench")
        if os.access(bench, os.X_OK):
            args = [bench, url, "--epochs", "1", "--batch-size", "32", "--threads", "2",
                    "--cache-dir", str(cache), "--block-size", str(BLOCK),
                    "--http-header", HEADER]
            for extra in ([], ["--json"]):
                out = subprocess.run(args + extra, capture_output=True, text=True,
                                     timeout=120)
                assert out.returncode == 0, out.stderr
                assert "user:***@" in out.stdout, out.stdout
                assert_clean(out.stdout + out.stderr, "stoker-bench %s" % extra)
            out = subprocess.run([bench, secret_url(srv, "/nothing-here"), "--epochs", "1",
                                  "--cache-dir", str(cache), "--http-header", HEADER,
                                  "--json"], capture_output=True, text=True, timeout=120)
            assert out.returncode != 0
            assert_clean(out.stdout + out.stderr, "stoker-bench's failure")
    assert_cache_clean(cache)
    assert_cache_clean(tmp_path / "c2")


def test_remote_keys_equal_the_local_copy(served, tmp_path):
    with range_server.start(served) as srv:
        with stoker.Dataset(srv.url + "/raw", **opts(tmp_path)) as ds, \
                stoker.Dataset(str(served / "raw")) as local:
            keys = [local.key(i) for i in range(len(local))]
            assert keys[0] is not None and len(set(keys)) == len(keys)
            assert [ds.key(i) for i in range(len(ds))] == keys
