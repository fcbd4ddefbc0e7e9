# SPDX-License-Identifier: Apache-2.0
"""The test servers of the remote reader (tests/remote): the HTTP range server, its fault
rules and counters, the S3 endpoint's SigV4 checks, and sigv4.py against AWS's published
examples. Everything talks to 127.0.0.1 only; every server is stopped by its fixture."""
import email.utils
import http.client
import json
import os
import random
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from xml.etree import ElementTree

import pytest

REMOTE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "remote")
sys.path.insert(0, REMOTE)
import range_server  # noqa: E402
import s3_server  # noqa: E402
import sigv4  # noqa: E402

SIZE = 1000
DATA = random.Random(7).randbytes(SIZE)
TIMEOUT = 10  # seconds a client waits on one request (a loaded CI machine is slow, not this)


@pytest.fixture
def root(tmp_path):
    d = tmp_path / "root"
    (d / "data").mkdir(parents=True)
    (d / "data" / "obj.bin").write_bytes(DATA)
    (d / "data" / "other.bin").write_bytes(DATA[:100])
    (d / "data" / "empty.bin").write_bytes(b"")
    (tmp_path / "outside.txt").write_bytes(b"not served")
    return d


@pytest.fixture
def serve(root):
    """serve(faults=..., **kw): a range server of `root`; all are stopped afterwards."""
    servers = []

    def start(faults=(), **kw):
        srv = range_server.start(str(root), faults=faults, **kw)
        servers.append(srv)
        return srv
    yield start
    for srv in servers:
        srv.stop()


def request(srv, path, headers=None, method="GET", conn=None):
    """(status, headers as a dict with lower-case names, body) of one request."""
    c = conn or http.client.HTTPConnection("127.0.0.1", srv.port, timeout=TIMEOUT)
    try:
        c.request(method, path, headers=headers or {})
        r = c.getresponse()
        body = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body
    finally:
        if conn is None:
            c.close()


def get_range(srv, rng, path="/data/obj.bin", **kw):
    return request(srv, path, headers={"Range": rng}, **kw)


# ---- ranges, HEAD, validators

@pytest.mark.parametrize("rng, start, end", [
    ("bytes=0-0", 0, 0),            # the first byte
    ("bytes=999-999", 999, 999),    # the last byte
    ("bytes=990-", 990, 999),       # open-ended
    ("bytes=-10", 990, 999),        # a suffix
    ("bytes=-5000", 0, 999),        # a suffix longer than the object: all of it
    ("bytes=900-5000", 900, 999),   # an end past the object is clamped
    ("bytes=100-349", 100, 349),
])
def test_range(serve, rng, start, end):
    srv = serve()
    status, h, body = get_range(srv, rng)
    assert status == 206
    assert body == DATA[start:end + 1]
    assert h["content-range"] == "bytes %d-%d/%d" % (start, end, SIZE)
    assert int(h["content-length"]) == end - start + 1


@pytest.mark.parametrize("rng", ["bytes=1000-", "bytes=1000-1001", "bytes=5000-6000",
                                 "bytes=-0"])
def test_unsatisfiable_range(serve, rng):
    status, h, body = get_range(serve(), rng)
    assert status == 416
    assert h["content-range"] == "bytes */%d" % SIZE
    assert int(h["content-length"]) == len(body)


@pytest.mark.parametrize("rng", [None, "bytes=5-3", "bytes=0-1,5-6", "items=0-1", "bytes=x-3"])
def test_whole_object_without_a_usable_range(serve, rng):
    """No Range, or one the RFC lets a server ignore (invalid, several ranges, another
    unit): a 200 with everything."""
    status, h, body = request(serve(), "/data/obj.bin", headers={"Range": rng} if rng else {})
    assert status == 200
    assert body == DATA and int(h["content-length"]) == SIZE
    assert "content-range" not in h and h["accept-ranges"] == "bytes"


def test_empty_object(serve):
    srv = serve()
    assert request(srv, "/data/empty.bin")[::2] == (200, b"")
    status, h, _ = get_range(srv, "bytes=0-", path="/data/empty.bin")
    assert status == 416 and h["content-range"] == "bytes */0"


def test_head(serve):
    srv = serve()
    status, h, body = request(srv, "/data/obj.bin", method="HEAD")
    assert (status, body, int(h["content-length"])) == (200, b"", SIZE)
    _, hg, _ = request(srv, "/data/obj.bin")
    assert h["etag"] == hg["etag"] and h["last-modified"] == hg["last-modified"]
    # RFC 9110 section 14.2: range handling is defined for GET only
    status, h, _ = request(srv, "/data/obj.bin", method="HEAD", headers={"Range": "bytes=0-9"})
    assert status == 200 and int(h["content-length"]) == SIZE


def test_keep_alive(serve):
    """Several requests on one connection (HTTP/1.1 persistent), each answered in full."""
    srv = serve()
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=TIMEOUT)
    try:
        for i in range(5):
            status, _, body = get_range(srv, "bytes=%d-%d" % (i * 100, i * 100 + 99), conn=c)
            assert status == 206 and body == DATA[i * 100:i * 100 + 100]
        status, _, _ = request(srv, "/data/missing.bin", conn=c)
        assert status == 404
        assert request(srv, "/data/other.bin", conn=c)[2] == DATA[:100]
    finally:
        c.close()
    assert len({e["client"] for e in srv.log}) == 1


@pytest.mark.parametrize("path", ["/data/missing.bin", "/data", "/", "/../outside.txt",
                                  "/data/../../outside.txt", "/%2e%2e/outside.txt"])
def test_not_found(serve, path):
    status, h, body = request(serve(), path)
    assert status == 404 and int(h["content-length"]) == len(body)
    assert b"not served" not in body


def test_only_get_and_head(serve):
    status, h, _ = request(serve(), "/data/obj.bin", method="POST")
    assert status == 405 and h["allow"] == "GET, HEAD"


def test_etag_and_last_modified(serve, root):
    srv = serve()
    _, h1, _ = request(srv, "/data/obj.bin")
    _, h2, _ = request(srv, "/data/obj.bin")
    assert re.fullmatch(r'"[^"W/]+"', h1["etag"])  # strong, quoted
    assert h1["etag"] == h2["etag"]
    st = os.stat(root / "data" / "obj.bin")
    assert email.utils.parsedate_to_datetime(h1["last-modified"]).timestamp() == \
        int(st.st_mtime)
    # a new version of the object (same size) has another ETag
    (root / "data" / "obj.bin").write_bytes(DATA[::-1])
    os.utime(root / "data" / "obj.bin", ns=(st.st_atime_ns, st.st_mtime_ns + 1000))
    _, h3, body = request(srv, "/data/obj.bin")
    assert body == DATA[::-1] and h3["etag"] != h1["etag"]
    # an ETag of another file differs
    assert request(srv, "/data/other.bin")[1]["etag"] != h3["etag"]


def test_if_match(serve):
    srv = serve()
    etag = request(srv, "/data/obj.bin", method="HEAD")[1]["etag"]
    ok = request(srv, "/data/obj.bin", headers={"If-Match": etag, "Range": "bytes=0-9"})
    assert ok[0] == 206 and ok[2] == DATA[:10]
    assert request(srv, "/data/obj.bin", headers={"If-Match": '"x", ' + etag})[0] == 200
    assert request(srv, "/data/obj.bin", headers={"If-Match": "*"})[0] == 200
    for bad in ['"nope"', "W/" + etag]:  # strong comparison: a weak tag never matches
        status, h, _ = request(srv, "/data/obj.bin", headers={"If-Match": bad,
                                                              "Range": "bytes=0-9"})
        assert status == 412 and h["etag"] == etag


def test_if_range(serve):
    srv = serve()
    h = request(srv, "/data/obj.bin", method="HEAD")[1]
    etag, lm = h["etag"], h["last-modified"]

    def ask(cond):
        return request(srv, "/data/obj.bin", headers={"Range": "bytes=10-19", "If-Range": cond})
    assert ask(etag)[0] == 206 and ask(etag)[2] == DATA[10:20]
    assert ask(lm)[0] == 206
    for stale in ['"old"', "W/" + etag, "Sun, 06 Nov 1994 08:49:37 GMT"]:
        status, _, body = ask(stale)
        assert status == 200 and body == DATA  # changed: the whole object instead


def test_if_none_match(serve):
    srv = serve()
    etag = request(srv, "/data/obj.bin", method="HEAD")[1]["etag"]
    status, h, body = request(srv, "/data/obj.bin", headers={"If-None-Match": etag})
    assert (status, body, h["etag"]) == (304, b"", etag)
    assert request(srv, "/data/obj.bin", headers={"If-None-Match": '"x"'})[0] == 200


# ---- faults

def statuses(srv, n, path="/data/obj.bin", method="GET"):
    return [request(srv, path, method=method)[0] for _ in range(n)]


def test_503_retry_after_times(serve):
    srv = serve(["503:times=2,retry_after=3"])
    for _ in range(2):
        status, h, body = request(srv, "/data/obj.bin")
        assert status == 503 and h["retry-after"] == "3"
        assert int(h["content-length"]) == len(body)
    assert request(srv, "/data/obj.bin")[::2] == (200, DATA)
    assert srv.faults_injected == {"503": 2} and srv.requests == 3


@pytest.mark.parametrize("kind", ["429", "500", "401", "403", "404"])
def test_status_faults(serve, kind):
    srv = serve(["%s:times=1" % kind])
    status, h, _ = request(srv, "/data/obj.bin")
    assert status == int(kind)
    if kind == "429":
        assert h["retry-after"] == "1"
    assert request(srv, "/data/obj.bin")[0] == 200


def test_every_after_path_method(serve):
    srv = serve(["503:every=3,path=/data/obj*"])
    assert statuses(srv, 6) == [200, 200, 503, 200, 200, 503]
    assert statuses(srv, 3, path="/data/other.bin") == [200] * 3  # another path
    srv.set_faults(["500:after=2"])
    assert statuses(srv, 4) == [200, 200, 500, 500]
    srv.set_faults(["404:method=HEAD"])
    assert statuses(srv, 1, method="HEAD") == [404] and statuses(srv, 1) == [200]


def test_probability_is_seeded(serve):
    """prob=P fires as random.Random(seed) draws below P, one draw per eligible request, so
    two runs of a test see the same faults."""
    runs = []
    for _ in range(2):
        srv = serve(["500:prob=0.4,seed=11"])
        runs.append(statuses(srv, 25))
    rng = random.Random(11)
    expected = [500 if rng.random() < 0.4 else 200 for _ in range(25)]
    assert runs[0] == runs[1] == expected
    assert 200 in expected and 500 in expected


def test_first_firing_rule_answers(serve):
    srv = serve(["503:times=1", "500:times=1"])
    assert statuses(srv, 3) == [503, 500, 200]


def test_reset_before_headers(serve):
    srv = serve(["reset:times=1"])
    with pytest.raises((http.client.HTTPException, OSError)):
        request(srv, "/data/obj.bin")
    assert request(srv, "/data/obj.bin")[2] == DATA
    assert srv.faults_injected == {"reset": 1}
    assert [e["status"] for e in srv.log] == [None, 200]  # nothing answered the first


def raw_get(srv, path, extra=b""):
    """A GET over a raw socket: (bytes received until the end, the exception that ended it
    or None for a clean end of stream)."""
    with socket.create_connection(("127.0.0.1", srv.port), timeout=TIMEOUT) as s:
        s.sendall(b"GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n" % (path.encode(), extra))
        data = b""
        for _ in range(1000):  # bounded: the server ends the stream long before
            try:
                chunk = s.recv(65536)
            except OSError as e:
                return data, e
            if not chunk:
                return data, None
            data += chunk
    raise AssertionError("the server did not end the stream")


def test_reset_is_a_tcp_reset(serve):
    """An abortive close (RST), not a clean end of stream: recv fails with ECONNRESET."""
    srv = serve(["reset:times=1", "reset:at=body,bytes=100,times=1"])
    data, err = raw_get(srv, "/data/obj.bin")
    assert data == b"" and isinstance(err, ConnectionResetError)
    data, err = raw_get(srv, "/data/obj.bin")
    assert isinstance(err, ConnectionResetError)
    head, _, body = data.partition(b"\r\n\r\n")
    assert len(body) <= 100 and DATA.startswith(body)
    assert srv.faults_injected == {"reset": 2}


def test_reset_mid_body(serve):
    srv = serve(["reset:at=body,bytes=100"])
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=TIMEOUT)
    try:
        c.request("GET", "/data/obj.bin")
        r = c.getresponse()
        assert r.status == 200 and int(r.getheader("Content-Length")) == SIZE
        with pytest.raises((http.client.HTTPException, OSError)):
            r.read()
    finally:
        c.close()
    assert srv.log[0]["sent"] == 100 and srv.bytes_sent == 100


def test_cut_short(serve):
    """Content-Length as due, fewer bytes, a clean close: read over a raw socket, the body
    ends (EOF) before Content-Length."""
    srv = serve(["cut:bytes=300"])
    data, err = raw_get(srv, "/data/obj.bin", b"Range: bytes=0-599\r\n")
    assert err is None  # a clean close
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 206")
    assert re.search(rb"(?i)content-length: 600\r\n", head + b"\r\n")
    assert body == DATA[:300]
    # http.client sees it as an incomplete read
    with pytest.raises(http.client.IncompleteRead) as e:
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=TIMEOUT)
        try:
            c.request("GET", "/data/obj.bin")
            c.getresponse().read()
        finally:
            c.close()
    assert len(e.value.partial) == 300
    assert srv.faults_injected == {"cut": 2}


def test_cut_defaults_to_half_and_skips_empty_bodies(serve):
    srv = serve(["cut"])
    assert request(srv, "/data/obj.bin", method="HEAD")[0] == 200   # no body to cut
    assert request(srv, "/data/empty.bin")[0] == 200
    with pytest.raises(http.client.IncompleteRead) as e:
        get_range(srv, "bytes=0-99")
    assert len(e.value.partial) == 50
    assert srv.rules[0].eligible == 1 and srv.faults_injected == {"cut": 1}


def test_full_object_for_a_range(serve):
    srv = serve(["full:times=1"])
    assert request(srv, "/data/obj.bin")[0] == 200  # not a range request: not eligible
    status, h, body = get_range(srv, "bytes=10-19")
    assert status == 200 and body == DATA and "content-range" not in h
    assert get_range(srv, "bytes=10-19")[::2] == (206, DATA[10:20])
    assert srv.faults_injected == {"full": 1}


def test_wrong_content_range(serve):
    srv = serve(["badrange:shift=5"])
    status, h, body = get_range(srv, "bytes=10-19")
    assert status == 206 and body == DATA[10:20]
    assert h["content-range"] == "bytes 15-24/%d" % SIZE


def test_corrupt_bytes_under_the_right_range(serve):
    srv = serve(["corrupt:times=1"])
    assert request(srv, "/data/obj.bin")[::2] == (200, DATA)  # not a range request
    status, h, body = get_range(srv, "bytes=10-19")
    assert status == 206 and h["content-range"] == "bytes 10-19/%d" % SIZE
    assert len(body) == 10 and body == bytes(b ^ 0xFF for b in DATA[10:20])
    assert get_range(srv, "bytes=10-19")[::2] == (206, DATA[10:20])  # times=1
    assert srv.faults_injected == {"corrupt": 1}


def test_changing_etag(serve):
    srv = serve(["etag:after=2"])
    tags = [request(srv, "/data/obj.bin", method="HEAD")[1]["etag"] for _ in range(4)]
    assert tags[0] == tags[1] != tags[2] == tags[3]
    assert re.fullmatch(r'"[^"]+"', tags[2])
    # the server's own validators follow the new tag
    assert request(srv, "/data/obj.bin", headers={"If-Match": tags[0]})[0] == 412
    status, _, body = request(srv, "/data/obj.bin",
                              headers={"Range": "bytes=0-9", "If-Range": tags[0]})
    assert status == 200 and body == DATA
    assert request(srv, "/data/obj.bin", headers={"If-Match": tags[2]})[0] == 200


def test_latency(serve):
    srv = serve(["latency:ms=60,path=/data/obj.bin"])
    t0 = time.monotonic()
    assert get_range(srv, "bytes=0-9")[0] == 206
    assert time.monotonic() - t0 >= 0.06  # a lower bound only: the machine may be slow
    assert srv.faults_injected == {"latency": 1}
    request(srv, "/data/other.bin")
    assert srv.faults_injected == {"latency": 1}  # another path


def test_latency_combines_with_a_fault(serve):
    srv = serve(["latency:ms=30", "503:times=1"])
    t0 = time.monotonic()
    assert request(srv, "/data/obj.bin")[0] == 503
    assert time.monotonic() - t0 >= 0.03
    assert srv.log[0]["faults"] == ["latency", "503"]


def test_trickle(serve):
    """Headers at once, then the body one byte every 1/rate s; the server's stop ends it."""
    srv = serve(["trickle:rate=20,path=/data/obj.bin"])
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=TIMEOUT)
    t0 = time.monotonic()
    c.request("GET", "/data/obj.bin", headers={"Range": "bytes=0-99"})
    r = c.getresponse()
    assert r.status == 206 and r.getheader("Content-Length") == "100"
    assert time.monotonic() - t0 < 1.0  # the headers came at once
    got = r.read(5)
    assert got == DATA[:5]
    assert time.monotonic() - t0 >= 0.2  # 5 bytes at 20 bytes/s: a lower bound only
    assert srv.faults_injected == {"trickle": 1}
    t1 = time.monotonic()
    srv.stop()
    assert time.monotonic() - t1 < 5
    c.close()
    assert request(serve(), "/data/other.bin")[0] == 200  # other servers are not slowed


def test_hang(serve):
    """A hang reads the request and answers nothing: the client times out; stop ends it."""
    srv = serve(["hang:path=/data/obj.bin"])
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=0.5)
    c.request("GET", "/data/obj.bin")
    with pytest.raises(TimeoutError):
        c.getresponse()
    c.close()
    assert request(srv, "/data/other.bin")[0] == 200  # another path is served
    assert srv.faults_injected == {"hang": 1}
    assert srv.log[0]["status"] is None
    t0 = time.monotonic()
    srv.stop()
    assert time.monotonic() - t0 < 5


def test_nolength(serve):
    srv = serve(["nolength:method=HEAD"])
    status, headers, _ = request(srv, "/data/obj.bin", method="HEAD")
    assert status == 200 and "content-length" not in headers
    status, headers, body = request(srv, "/data/obj.bin")
    assert status == 200 and headers["content-length"] == str(SIZE) and body == DATA
    srv.set_faults(["nolength"])
    status, headers, body = request(srv, "/data/obj.bin")  # ends with the connection
    assert status == 200 and "content-length" not in headers and body == DATA


def test_redirect_and_request_headers(serve):
    """redirect:to=URL sends the same path and query to another base URL; the log keeps
    every request's headers, so a test can count which requests carried one."""
    target = serve()
    srv = serve(["redirect:to=%s/,status=307,path=/data/*" % target.url])
    status, headers, _ = request(srv, "/data/obj.bin?x=1", headers={"X-Api-Key": "k1"})
    assert status == 307 and headers["location"] == target.url + "/data/obj.bin?x=1"
    assert srv.log[0]["headers"]["x-api-key"] == "k1"
    assert request(srv, "/other")[0] == 404  # outside the rule's paths
    req = urllib.request.Request(srv.url + "/data/other.bin", headers={"X-Api-Key": "k2"})
    with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
        assert r.read() == DATA[:100]
    assert target.count("/data/other.bin") == 1
    assert srv.faults_injected == {"redirect": 2}


def test_counters_each_block_once(serve):
    srv = serve()
    blocks = [(i, min(i + 256, SIZE) - 1) for i in range(0, SIZE, 256)]
    got = b"".join(get_range(srv, "bytes=%d-%d" % b)[2] for b in blocks)
    assert got == DATA
    request(srv, "/data/obj.bin", method="HEAD")
    assert srv.requests == len(blocks) + 1 and srv.bytes_sent == SIZE
    assert srv.count(path="/data/obj.bin", method="GET") == len(blocks)
    ranges = [e["range"] for e in srv.log if e["method"] == "GET"]
    assert sorted(ranges) == sorted("bytes=%d-%d" % b for b in blocks)  # each block once
    assert srv.faults_injected == {}
    srv.reset_stats()
    assert (srv.requests, srv.bytes_sent, srv.log) == (0, 0, [])


@pytest.mark.parametrize("text", ["bogus", "503:times", "503:colour=red", "reset:at=middle",
                                  "500:prob=2", "500:every=0", "503:times=x",
                                  "trickle:rate=0", "redirect", "redirect:to=ftp://x",
                                  "redirect:to=http://x,status=200"])
def test_bad_rules(text):
    with pytest.raises(ValueError):
        range_server.Rule.parse(text)


def test_urllib_client(serve):
    """The standard library's plain client sees the same things."""
    srv = serve(["503:times=1"])
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(srv.url + "/data/obj.bin", timeout=TIMEOUT)
    assert e.value.code == 503 and e.value.headers["Retry-After"] == "1"
    e.value.close()
    req = urllib.request.Request(srv.url + "/data/obj.bin", headers={"Range": "bytes=-3"})
    with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
        assert r.status == 206 and r.read() == DATA[-3:]


def wait_for_file(path, proc, seconds=30):
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        assert proc.poll() is None, "the server exited: %s" % proc.stderr.read()
        assert time.monotonic() < deadline, "no port file after %d s" % seconds
        time.sleep(0.02)
    with open(path) as f:
        return int(f.read())


def run_script(args):
    """Starts a server script as a C test would; yields (process, port); stops it."""
    return subprocess.Popen([sys.executable] + args, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def stop_script(proc):
    proc.terminate()
    try:
        out, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return out, err


def test_script_mode(root, tmp_path):
    port_file, stats_file = tmp_path / "port", tmp_path / "stats.json"
    proc = run_script([os.path.join(REMOTE, "range_server.py"), str(root),
                       "--port-file", str(port_file), "--stats-file", str(stats_file),
                       "--fault", "503:times=1", "--lifetime", "120"])
    try:
        port = wait_for_file(port_file, proc)
        url = "http://127.0.0.1:%d" % port
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
        try:
            for expected in (503, 206):
                c.request("GET", "/data/obj.bin", headers={"Range": "bytes=0-9"})
                r = c.getresponse()
                r.read()
                assert r.status == expected
        finally:
            c.close()
    finally:
        out, err = stop_script(proc)
    assert proc.returncode == 0, err
    assert out.splitlines()[0] == url
    stats = json.loads(stats_file.read_text())
    assert stats["requests"] == 2 and stats["bytes_sent"] == 10
    assert stats["faults_injected"] == {"503": 1}


def test_script_mode_request_budget(root, tmp_path):
    """--max-requests: the server exits by itself once its budget of requests is spent."""
    port_file = tmp_path / "port"
    proc = run_script([os.path.join(REMOTE, "range_server.py"), str(root),
                       "--port-file", str(port_file), "--max-requests", "2"])
    try:
        port = wait_for_file(port_file, proc)
        for _ in range(2):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
            c.request("GET", "/data/other.bin")
            assert c.getresponse().read() == DATA[:100]
            c.close()
        proc.wait(timeout=30)
    finally:
        stop_script(proc)
    assert proc.returncode == 0


# ---- SigV4 and the S3 endpoint

AKID, SECRET = "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
EXAMPLE_DATE = "20130524T000000Z"
EXAMPLE_SIGNATURE = "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"


def example_headers():
    """The AWS S3 documentation's "GET Object" example of header-based SigV4."""
    return {"host": "examplebucket.s3.amazonaws.com", "range": "bytes=0-9",
            "x-amz-content-sha256": sigv4.EMPTY_SHA256, "x-amz-date": EXAMPLE_DATE}


def test_sigv4_aws_get_object_example():
    s = sigv4.sign("GET", "/test.txt", None, example_headers(), sigv4.EMPTY_SHA256, AKID,
                   SECRET, "us-east-1", "s3", EXAMPLE_DATE)
    assert s.canonical_request == (
        "GET\n/test.txt\n\n"
        "host:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
        "x-amz-content-sha256:" + sigv4.EMPTY_SHA256 + "\n"
        "x-amz-date:20130524T000000Z\n\n"
        "host;range;x-amz-content-sha256;x-amz-date\n" + sigv4.EMPTY_SHA256)
    assert s.string_to_sign == (
        "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
        "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972")
    assert s.signature == EXAMPLE_SIGNATURE
    assert s.authorization == (
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Signature=" +
        EXAMPLE_SIGNATURE)


@pytest.mark.parametrize("query, signature", [
    # the same documentation's "GET Bucket Lifecycle" and "Get Bucket (List Objects)"
    ({"lifecycle": ""}, "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"),
    ([("prefix", "J"), ("max-keys", "2")],
     "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"),
])
def test_sigv4_aws_query_examples(query, signature):
    headers = {k: v for k, v in example_headers().items() if k != "range"}
    s = sigv4.sign("GET", "/", query, headers, sigv4.EMPTY_SHA256, AKID, SECRET, "us-east-1",
                   "s3", EXAMPLE_DATE)
    assert s.signature == signature


def test_sigv4_canonical_forms():
    assert sigv4.uri_encode("/a b/c+d~e_f.g-h/%", keep_slash=True) == \
        "/a%20b/c%2Bd~e_f.g-h/%25"
    assert sigv4.uri_encode("a/b=c&d:é") == "a%2Fb%3Dc%26d%3A%C3%A9"
    assert sigv4.canonical_query([("b", "2"), ("a", "x y"), ("a", "1"), ("c", None)]) == \
        "a=1&a=x%20y&b=2&c="
    block, names = sigv4.canonical_headers([("X-Amz-Meta", "  a   b  "), ("Host", "h"),
                                            ("x-amz-meta", "c")])
    assert block == "host:h\nx-amz-meta:a b,c\n" and names == "host;x-amz-meta"


def test_s3_accepts_the_aws_example_as_sent(root):
    """The documentation's request, byte for byte (virtual-hosted Host header, sent to
    127.0.0.1), with the server's clock set to its date."""
    bucket = root / "examplebucket"
    bucket.mkdir()
    (bucket / "test.txt").write_bytes(b"Welcome to Amazon S3.")
    srv = s3_server.start(str(root), keys={AKID: SECRET}, clock=EXAMPLE_DATE)
    try:
        headers = example_headers()
        headers["Authorization"] = (
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
            "aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
            "Signature=" + EXAMPLE_SIGNATURE)
        status, h, body = request(srv, "/test.txt", headers=headers)
        assert (status, body) == (206, b"Welcome to"), body
        assert h["content-range"] == "bytes 0-9/21"
        headers["range"] = "bytes=0-10"  # no longer what was signed
        status, _, body = request(srv, "/test.txt", headers=headers)
        assert status == 403 and s3_code(body) == "SignatureDoesNotMatch"
    finally:
        srv.stop()


REGION = "eu-central-1"
CLOCK = "20240301T120000Z"
KEYS = {"AKIDPLAIN": "secret/plain+key", "AKIDTOKEN": ("secret-token-key", "session-tok")}


@pytest.fixture
def s3(root):
    bucket = root / "bucket"
    (bucket / "dir").mkdir(parents=True)
    (bucket / "dir" / "obj.bin").write_bytes(DATA)
    (bucket / "my file+x~.bin").write_bytes(DATA[:50])
    srv = s3_server.start(str(root), keys=KEYS, region=REGION, clock=CLOCK)
    yield srv
    srv.stop()


def s3_code(body):
    return ElementTree.fromstring(body).findtext("Code")


def s3_get(srv, key_path, akid="AKIDPLAIN", secret=None, region=REGION, date=CLOCK,
           extra=None, query=None, token=None, method="GET", tamper=None, **kw):
    """A signed path-style request for the decoded key_path ("/bucket/key"), with sigv4.py
    on the client's own inputs; `tamper` changes the headers after signing."""
    if secret is None:
        secret = KEYS[akid] if isinstance(KEYS[akid], str) else KEYS[akid][0]
    host = "127.0.0.1:%d" % srv.port
    headers = sigv4.s3_headers(method, host, key_path, akid, secret, region, date, query=query,
                               extra=extra, token=token, **kw)
    if tamper:
        tamper(headers)
    target = sigv4.uri_encode(key_path, keep_slash=True)
    if query:
        target += "?" + "&".join("%s=%s" % (sigv4.uri_encode(k), sigv4.uri_encode(v))
                                 for k, v in query)
    del headers["host"]  # http.client sends the same Host itself
    return request(srv, target, headers=headers, method=method)


def test_s3_signed_get_and_head(s3):
    status, h, body = s3_get(s3, "/bucket/dir/obj.bin", extra={"Range": "bytes=100-199"})
    assert (status, body) == (206, DATA[100:200])
    assert h["content-range"] == "bytes 100-199/%d" % SIZE and "x-amz-request-id" in h
    status, h, body = s3_get(s3, "/bucket/dir/obj.bin", method="HEAD")
    assert (status, body, int(h["content-length"])) == (200, b"", SIZE)
    # the empty payload's hash instead of UNSIGNED-PAYLOAD
    assert s3_get(s3, "/bucket/dir/obj.bin", payload_hash=sigv4.EMPTY_SHA256)[2] == DATA


def test_s3_encoded_key_and_query(s3):
    """A key that needs encoding, and a signed query string, round-trip through the
    server's own reading of the request line."""
    status, _, body = s3_get(s3, "/bucket/my file+x~.bin",
                             query=[("x-id", "GetObject"), ("a b", "c/d")])
    assert (status, body) == (200, DATA[:50])


def test_s3_session_token(s3):
    assert s3_get(s3, "/bucket/dir/obj.bin", akid="AKIDTOKEN", token="session-tok")[0] == 200
    for token in (None, "other"):
        status, _, body = s3_get(s3, "/bucket/dir/obj.bin", akid="AKIDTOKEN", token=token)
        assert status == 400 and s3_code(body) == "InvalidToken"


def test_s3_wrong_secret_shows_the_same_canonical_request(s3):
    """A wrong secret is refused; the server's canonical request and string to sign, read
    back from the error, are the client's: the server rebuilt them from the wire."""
    status, _, body = s3_get(s3, "/bucket/dir/obj.bin", secret="not-the-secret",
                             extra={"Range": "bytes=0-9"})
    assert status == 403 and s3_code(body) == "SignatureDoesNotMatch"
    err = ElementTree.fromstring(body)
    mine = sigv4.sign("GET", "/bucket/dir/obj.bin", None,
                      {"host": "127.0.0.1:%d" % s3.port, "x-amz-date": CLOCK,
                       "x-amz-content-sha256": sigv4.UNSIGNED_PAYLOAD, "range": "bytes=0-9"},
                      sigv4.UNSIGNED_PAYLOAD, "AKIDPLAIN", "not-the-secret", REGION, "s3",
                      CLOCK)
    assert err.findtext("CanonicalRequest") == mine.canonical_request
    assert err.findtext("StringToSign") == mine.string_to_sign
    assert err.findtext("SignatureProvided") == mine.signature


def test_s3_refusals(s3):
    def code(*args, **kw):
        status, _, body = s3_get(s3, *args, **kw)
        return status, s3_code(body)
    obj = "/bucket/dir/obj.bin"
    assert code(obj, region="us-east-1") == (400, "AuthorizationHeaderMalformed")

    def tamper_range(h):
        h["range"] = "bytes=0-99"
    assert code(obj, extra={"Range": "bytes=0-9"}, tamper=tamper_range) == \
        (403, "SignatureDoesNotMatch")

    def tamper_date(h):  # the date within the skew, but not the one signed
        h["x-amz-date"] = "20240301T120001Z"
    assert code(obj, tamper=tamper_date) == (403, "SignatureDoesNotMatch")

    def add_unsigned(h):
        h["x-amz-meta-extra"] = "1"
    assert code(obj, tamper=add_unsigned) == (403, "AccessDenied")

    def wrong_hash(h):
        h["x-amz-content-sha256"] = "0" * 64
    assert code(obj, tamper=wrong_hash) == (400, "XAmzContentSHA256Mismatch")
    assert code(obj, akid="AKIDPLAIN", secret="x", tamper=lambda h: h.update(
        authorization=h["authorization"].replace("AKIDPLAIN", "AKIDUNKNOWN"))) == \
        (403, "InvalidAccessKeyId")
    assert code("/bucket/dir/missing.bin") == (404, "NoSuchKey")
    assert code("/nobucket/obj.bin") == (404, "NoSuchBucket")
    status, _, body = request(s3, "/bucket/dir/obj.bin")  # not signed at all
    assert (status, s3_code(body)) == (403, "AccessDenied")


@pytest.mark.parametrize("date, ok", [
    ("20240301T121400Z", True),    # 14 minutes ahead
    ("20240301T114600Z", True),    # 14 minutes behind
    ("20240301T121600Z", False),   # 16 minutes ahead
    ("20240301T114400Z", False),   # 16 minutes behind
    ("20240302T120000Z", False),
])
def test_s3_skew(s3, date, ok):
    status, _, body = s3_get(s3, "/bucket/dir/obj.bin", date=date)
    if ok:
        assert status == 200
    else:
        assert (status, s3_code(body)) == (403, "RequestTimeTooSkewed")


def test_s3_real_clock_and_faults(root):
    """With no clock override the server's time is the machine's; fault rules apply to
    requests that pass authentication, with S3's error codes."""
    (root / "bucket").mkdir()
    (root / "bucket" / "k").write_bytes(b"value")
    srv = s3_server.start(str(root), keys={"AK": "SK"}, faults=["503:times=1"])
    try:
        now = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        headers = sigv4.s3_headers("GET", "127.0.0.1:%d" % srv.port, "/bucket/k", "AK", "SK",
                                   "us-east-1", now)
        del headers["host"]
        status, h, body = request(srv, "/bucket/k", headers=headers)
        assert status == 503 and s3_code(body) == "SlowDown" and h["retry-after"] == "1"
        assert request(srv, "/bucket/k", headers=headers)[::2] == (200, b"value")
        # an unsigned request is refused before the rules see it
        assert request(srv, "/bucket/k")[0] == 403
        assert srv.faults_injected == {"503": 1} and srv.rules[0].eligible == 2
    finally:
        srv.stop()


def test_s3_script_mode(root, tmp_path):
    bucket = root / "examplebucket"
    bucket.mkdir()
    (bucket / "test.txt").write_bytes(b"Welcome to Amazon S3.")
    port_file = tmp_path / "port"
    proc = run_script([os.path.join(REMOTE, "s3_server.py"), str(root),
                       "--port-file", str(port_file), "--key", AKID + ":" + SECRET,
                       "--clock", EXAMPLE_DATE, "--lifetime", "120"])
    try:
        port = wait_for_file(port_file, proc)
        s = sigv4.sign("GET", "/examplebucket/test.txt", None,
                       {"host": "127.0.0.1:%d" % port, "x-amz-date": EXAMPLE_DATE,
                        "x-amz-content-sha256": sigv4.UNSIGNED_PAYLOAD},
                       sigv4.UNSIGNED_PAYLOAD, AKID, SECRET, "us-east-1", "s3", EXAMPLE_DATE)
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
        try:
            c.request("GET", "/examplebucket/test.txt", headers={
                "x-amz-date": EXAMPLE_DATE, "x-amz-content-sha256": sigv4.UNSIGNED_PAYLOAD,
                "Authorization": s.authorization})
            r = c.getresponse()
            assert (r.status, r.read()) == (200, b"Welcome to Amazon S3.")
        finally:
            c.close()
    finally:
        _, err = stop_script(proc)
    assert proc.returncode == 0, err
