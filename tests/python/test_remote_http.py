# SPDX-License-Identifier: Apache-2.0
"""The remote client (src/remote/http.c) against the test servers of tests/remote, with their
fault rules: each scenario starts a server in this process and runs the C program
test_remote_http (tests/test_remote_http.c) once, which checks the request's outcome and the
bytes; here the outcome is checked again against the server's counters (every attempt the
client counts is a request the server saw) and the time it took.

The program: $STOKER_TEST_REMOTE_HTTP (a sanitizer build's, say), else
$STOKER_BUILD_DIR/tests/test_remote_http, else build/tests/test_remote_http in the
repository; skipped when it is not built or was built without libcurl. Everything talks to
127.0.0.1 only."""
import os
import random
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "remote"))
import range_server  # noqa: E402
import s3_server  # noqa: E402

SIZE = (1 << 20) + 17
DATA = random.Random(5).randbytes(SIZE)
BUCKET = "bkt"
ODD = "sub dir/odd name+=,~;%$&@!'().bin"  # a key every byte of whose name S3 encodes
OFFSET, LENGTH = 1000, 300000  # the range of the single-request scenarios
TIMEOUT = 120  # seconds one run of the program may take (a loaded machine is slow)


def program():
    path = os.environ.get("STOKER_TEST_REMOTE_HTTP")
    if not path:
        build = os.environ.get("STOKER_BUILD_DIR") or os.path.join(ROOT, "build")
        path = os.path.join(build, "tests", "test_remote_http")
    if not os.path.exists(path):
        pytest.skip("test_remote_http was not built (%s)" % path)
    return path


def _fill(d):
    d.mkdir(parents=True)
    (d / "obj.bin").write_bytes(DATA)
    (d / "small.bin").write_bytes(DATA[:1000])
    (d / "empty.bin").write_bytes(b"")
    (d / "sub dir").mkdir()
    (d / ODD).write_bytes(DATA[:5000])
    return d


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """The served directory: for S3 its sub-directory BUCKET is the bucket."""
    base = tmp_path_factory.mktemp("remote_http")
    _fill(base / "root")
    _fill(base / "root" / BUCKET)
    return base / "root"


@pytest.fixture
def serve(root):
    servers = []

    def start(faults=(), s3=None, **kw):
        if s3 is None:
            srv = range_server.start(str(root), faults=faults, **kw)
        else:
            srv = s3_server.start(str(root), keys=s3, faults=faults, **kw)
        servers.append(srv)
        return srv
    yield start
    for srv in servers:
        srv.stop()


def run(srv, root, mode, s3=False, expect_fail=False, **options):
    """Runs the program once; returns (its result line as a dict, seconds, its stdout).
    options: STOKER_TEST_HTTP_<NAME> variables, and AWS_* ones as they are."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "STOKER_TEST_HTTP_"))
           and not k.lower().endswith("_proxy")}  # 127.0.0.1 is reached directly
    env.update(STOKER_TEST_HTTP_URL=srv.url, STOKER_TEST_HTTP_MODE=mode,
               STOKER_TEST_HTTP_DIR=str(root / BUCKET if s3 else root))
    if s3:
        env["STOKER_TEST_HTTP_BUCKET"] = BUCKET
    for name, value in options.items():
        key = name if name.startswith("AWS_") else "STOKER_TEST_HTTP_" + name.upper()
        env[key] = str(value)
    t0 = time.monotonic()
    proc = subprocess.run([program()], env=env, capture_output=True, text=True,
                          timeout=TIMEOUT)
    took = time.monotonic() - t0
    if proc.returncode == 77:
        pytest.skip(proc.stdout.strip())
    assert proc.returncode == 0, "exit %d\nstdout:\n%s\nstderr:\n%s" % (
        proc.returncode, proc.stdout, proc.stderr)
    return parse(proc.stdout), took, proc.stdout


def parse(out):
    """The last line with key=value words (msg= takes the rest of the line)."""
    lines = [ln for ln in out.splitlines() if "=" in ln]
    if not lines:
        return {}
    line = lines[-1]
    head, _, msg = line.partition(" msg=")
    res = dict(w.split("=", 1) for w in head.split())
    if msg or line.endswith(" msg="):
        res["msg"] = msg
    return {k: _number(v) for k, v in res.items()}


def _number(v):
    for kind in (int, float):
        try:
            return kind(v)
        except ValueError:
            pass
    return v


def connections(srv):
    return len({e["client"] for e in srv.log})


# ---- plain requests

def test_basic(serve, root):
    """Whole objects, ranges, HEAD, If-Match, to a buffer and to a file; what no retry
    cures fails at once; what submit refuses is never sent."""
    srv = serve()
    res, _, _ = run(srv, root, "basic")
    assert srv.requests == res["requests"]
    assert srv.faults_injected == {}
    # keep-alive: one request after another reuses the connection
    assert connections(srv) < srv.requests / 2, srv.log


def test_many_concurrent(serve, root):
    """200 ranges submitted at once from four threads, at most 8 in flight: every byte
    right, the server's latency overlapped, no more connections than transfers."""
    srv = serve(faults=["latency:ms=20"])
    res, took, _ = run(srv, root, "many", max_transfers=8)
    assert srv.requests == res["requests"] == 200
    assert res["retries"] == 0
    assert connections(srv) <= 8, connections(srv)
    # one at a time would take 200 x 20 ms of latency alone
    assert res["elapsed"] < 3.5, res  # room for a slow machine, still under 4 s


@pytest.mark.parametrize("chunks", [0, 1])
def test_many_to_files(serve, root, chunks):
    """50 ranges of up to the whole object written to files, 8 in flight: the client's
    writers take the bodies in chunks of 1 MiB; with one chunk (for 8 bodies in flight)
    the client's thread writes most bytes itself. Every byte lands where it belongs."""
    srv = serve()
    res, _, _ = run(srv, root, "many", target="fd", write_chunks=chunks)
    assert srv.requests == res["requests"] == 50
    assert res["retries"] == 0


def test_write_fails(serve, root):
    """A body that cannot be written (a write past the process's file size limit) fails the
    request with the write's error, after one attempt: a full disk is no network fault."""
    srv = serve()
    res, _, _ = run(srv, root, "fail", offset=0, length=SIZE, target="fd", fsize=300000,
                    expect="EFBIG", expect_msg="writing the body: File too large")
    assert res["attempts"] == 1 and res["failures"] == 1


# ---- faults a new attempt cures

CURED = [
    # (id, rules, expected attempts, options)
    ("503x2", ["503:times=2,retry_after=0"], 3, {}),
    ("500", ["500:times=1"], 2, {}),
    ("429", ["429:times=1,retry_after=1"], 2, {}),
    ("reset-headers", ["reset:at=headers,times=2"], 3, {}),
    ("reset-body", ["reset:at=body,times=1"], 2, {}),
    ("reset-body-fd", ["reset:at=body,times=2"], 3, {"target": "fd"}),
    ("cut", ["cut:times=1"], 2, {}),
    ("cut-fd", ["cut:times=1,bytes=10"], 2, {"target": "fd"}),
    ("cut-whole", ["cut:times=1"], 2, {"offset": 0, "length": 0}),
    ("badrange", ["badrange:times=2"], 3, {}),
    ("badrange-back", ["badrange:times=1,shift=-1"], 2, {"target": "fd"}),
    ("full", ["full"], 1, {}),
    ("full-tail", ["full"], 1, {"offset": SIZE - 100, "length": 100, "target": "fd"}),
    ("latency", ["latency:ms=300"], 1, {}),
    ("stall", ["latency:ms=3000,times=1"], 2, {"stall": 1}),
]


@pytest.mark.parametrize("name, rules, attempts, options", CURED, ids=[c[0] for c in CURED])
def test_fault_cured(serve, root, name, rules, attempts, options):
    srv = serve(faults=rules)
    opts = {"mode": "get", "offset": OFFSET, "length": LENGTH}
    opts.update(options)
    res, took, _ = run(srv, root, opts.pop("mode"), **opts)
    assert res["rc"] == 0 and res["msg"] == "", res
    assert res["attempts"] == attempts, res
    assert res["retries"] == attempts - 1
    assert srv.count("/obj.bin", "GET") == attempts, srv.log
    kind = rules[0].split(":")[0]
    if kind == "full":  # a 200 with the whole object, of which the range is taken
        assert res["status"] == 200 and srv.faults_injected == {"full": 1}
    else:
        assert res["status"] == (206 if opts["length"] else 200)
    if kind != "latency" and kind != "full":
        assert srv.faults_injected == {kind: attempts - 1}, srv.faults_injected
    if name == "503x2":  # two backoffs of about 50 and 100 ms: no slower wake-up
        assert took < 1.5
    if name == "429":
        assert took >= 1.0  # Retry-After: 1 was honoured
    if name == "latency":
        assert took >= 0.3
    if name == "stall":  # the first attempt given up after 1 s without a byte
        assert 1.0 <= took < 10.0


# ---- faults that are not cured

def test_retries_exhausted(serve, root):
    srv = serve(faults=["503:retry_after=0"])
    res, took, _ = run(srv, root, "fail", offset=OFFSET, length=LENGTH, expect="EIO",
                       expect_msg="last status 503 after 5 attempts", retries=4,
                       retry_seconds=30)
    assert res["attempts"] == 5 and res["retries"] == 4 and res["failures"] == 1
    assert srv.count("/obj.bin") == 5
    assert "/obj.bin (bytes %d-%d): " % (OFFSET, OFFSET + LENGTH - 1) in res["msg"]
    assert took < 10.0  # backoff of 50, 100, 200, 400 ms, with jitter


def test_retry_seconds_bound(serve, root):
    """Many retries allowed, but not the time for them: Retry-After 1 s, 2.5 s to spend."""
    srv = serve(faults=["503:retry_after=1"])
    res, took, _ = run(srv, root, "fail", offset=OFFSET, length=LENGTH, expect="EIO",
                       expect_msg="last status 503 after", retries=100, retry_seconds=2.5)
    assert 2 <= res["attempts"] <= 4, res
    assert srv.count("/obj.bin") == res["attempts"]
    assert took < 8.0


def test_stall_timeout(serve, root):
    srv = serve(faults=["latency:ms=4000"])
    res, took, _ = run(srv, root, "fail", offset=OFFSET, length=LENGTH, expect="ETIMEDOUT",
                       retries=1, stall=1)
    assert res["attempts"] == 2 and srv.count("/obj.bin") == 2
    assert "after 2 attempts" in res["msg"]
    assert took < 10.0


@pytest.mark.parametrize("rule, code, text", [
    ("404", "ENOENT", "not found (404)"),
    ("403", "EACCES", "access denied (403): check the credentials"),
    ("401", "EACCES", "access denied (401)"),
])
def test_refused(serve, root, rule, code, text):
    srv = serve(faults=[rule])
    res, _, _ = run(srv, root, "fail", offset=OFFSET, length=LENGTH, expect=code,
                    expect_msg=text)
    assert res["attempts"] == 1 and res["retries"] == 0
    assert srv.count("/obj.bin") == 1


def test_etag_changed(serve, root):
    """If-Match with the ETag a HEAD read; the object changes after it: -ESTALE at once."""
    srv = serve(faults=["etag:after=1"])
    res, _, _ = run(srv, root, "stale")
    assert res["rc"] != 0 and res["attempts"] == 1
    assert srv.count("/obj.bin", "HEAD") == 1 and srv.count("/obj.bin", "GET") == 1
    assert [e["status"] for e in srv.log] == [200, 412]


def test_destroy_cancels(serve, root):
    """Two slow transfers in flight, ten queued, four waiting to retry: each is told
    -ECANCELED once and destroy does not wait for the server."""
    srv = serve(faults=["latency:ms=3000,path=/obj.bin", "503:path=/small.bin,retry_after=5"])
    res, _, out = run(srv, root, "cancel")
    assert "destroy=" in out
    assert srv.count("/small.bin") == 4  # one attempt each, no retry after destroy
    assert srv.count("/obj.bin") == 2


# ---- S3

KEYS = {"AKID": "SECRET/with+plus"}
TOKEN_KEYS = {"ASIATEMP": ("TEMPSECRET", "FwoGZXIvYXdzEBYaDtoken//with+odd=chars")}


def s3_env(srv, akid, secret, token=None, **more):
    env = {"AWS_ACCESS_KEY_ID": akid, "AWS_SECRET_ACCESS_KEY": secret,
           "AWS_ENDPOINT_URL_S3": srv.url}
    if token:
        env["AWS_SESSION_TOKEN"] = token
    env.update(more)
    return env


@pytest.mark.parametrize("mode", ["s3", "s3_opts"])
def test_s3(serve, root, mode):
    srv = serve(s3=KEYS)
    res, _, _ = run(srv, root, mode, s3=True, **s3_env(srv, "AKID", KEYS["AKID"]))
    assert srv.requests == res["requests"]
    # only the missing key fails: every signature was accepted
    assert [e["status"] for e in srv.log if e["status"] not in (200, 206)] == [404], srv.log
    assert srv.count("/%s/%s" % (BUCKET, ODD)) == 5


@pytest.mark.parametrize("mode", ["s3", "s3_opts"])
def test_s3_session_token(serve, root, mode):
    srv = serve(s3=TOKEN_KEYS, region="eu-west-3")
    secret, token = TOKEN_KEYS["ASIATEMP"]
    run(srv, root, mode, s3=True,
        **s3_env(srv, "ASIATEMP", secret, token, AWS_REGION="eu-west-3"))
    assert [e["status"] for e in srv.log if e["status"] not in (200, 206)] == [404], srv.log


def test_s3_fallback_variables(serve, root):
    """AWS_DEFAULT_REGION and AWS_ENDPOINT_URL when the specific ones are unset."""
    srv = serve(s3=KEYS, region="ap-south-1")
    env = s3_env(srv, "AKID", KEYS["AKID"], AWS_DEFAULT_REGION="ap-south-1",
                 AWS_ENDPOINT_URL=srv.url + "/")
    del env["AWS_ENDPOINT_URL_S3"]
    res, _, _ = run(srv, root, "get", s3=True, offset=OFFSET, length=LENGTH, **env)
    assert res["rc"] == 0 and srv.count("/%s/obj.bin" % BUCKET) == 1


def test_s3_retried(serve, root):
    srv = serve(s3=KEYS, faults=["503:times=1,retry_after=0", "reset:at=body,times=1"])
    res, _, _ = run(srv, root, "get", s3=True, offset=OFFSET, length=LENGTH,
                    **s3_env(srv, "AKID", KEYS["AKID"]))
    assert res["attempts"] == 3 and srv.count("/%s/obj.bin" % BUCKET) == 3


@pytest.mark.parametrize("akid, secret, token, code, text, status", [
    ("AKID", "WRONG", None, "EACCES", "access denied (403 SignatureDoesNotMatch)", 403),
    ("NOSUCHKEY", "x", None, "EACCES", "access denied (403 InvalidAccessKeyId)", 403),
    ("ASIATEMP", "TEMPSECRET", None, "EIO", "status 400 InvalidToken", 400),
    ("ASIATEMP", "TEMPSECRET", "wrong", "EIO", "status 400 InvalidToken", 400),
])
def test_s3_refused(serve, root, akid, secret, token, code, text, status):
    srv = serve(s3=dict(KEYS, **TOKEN_KEYS))
    res, _, _ = run(srv, root, "fail", s3=True, offset=OFFSET, length=LENGTH, expect=code,
                    expect_msg=text, **s3_env(srv, akid, secret, token))
    assert res["attempts"] == 1 and res["status"] == status
    assert srv.count() == 1
    assert "s3://%s/obj.bin (bytes %d-%d): " % (BUCKET, OFFSET, OFFSET + LENGTH - 1) \
        in res["msg"]
