# SPDX-License-Identifier: Apache-2.0
"""A read-only HTTP/1.1 server of one directory, with byte ranges and injected faults, for the
tests of the remote (HTTP(S)/S3) reader.

As a module:

    srv = range_server.start(root, faults=["503:times=2", "latency:ms=20"])
    ... srv.url, srv.port, srv.requests, srv.bytes_sent, srv.faults_injected, srv.log ...
    srv.stop()

As a script (for C tests): ``range_server.py ROOT --port-file F [--fault RULE]...`` prints
its URL, writes its port to F (atomically: F appears complete or not at all) and serves until
SIGTERM/SIGINT, its lifetime or its request budget ends; ``--stats-file`` gets the counters
as JSON on the way out.

It binds 127.0.0.1 only, on a port the OS picks. What it implements of RFC 9110: GET and
HEAD; one byte range per request (``bytes=a-b``, ``a-``, ``-n``; a set of several ranges is
ignored and the whole object sent, which the RFC allows); 206 with Content-Range, 416 with
``Content-Range: bytes */SIZE``; a strong ETag (inode, size, mtime) and Last-Modified;
If-Match / If-Unmodified-Since (412), If-None-Match / If-Modified-Since (304) and If-Range,
in the RFC's order of evaluation. HEAD ignores Range, as RFC 9110 section 14.2 says. Every
response carries Content-Length. The fault rules are described in README.md and in
``Rule``.
"""
import argparse
import email.utils
import fnmatch
import http.server
import json
import os
import random
import signal
import socket
import struct
import sys
import threading
import time
import urllib.parse

CHUNK = 64 * 1024
SENDFILE_PIECE = 4 << 20  # a body with no fault goes by os.sendfile, counted in these pieces

# Kinds of fault. A modifier applies together with anything else; of the other rules the
# first that fires (in the order given) answers the request.
STATUS_FAULTS = {"401", "403", "404", "429", "500", "503"}
MODIFIERS = {"latency", "etag"}
KINDS = STATUS_FAULTS | MODIFIERS | {"reset", "cut", "full", "badrange", "trickle", "hang",
                                     "redirect", "nolength", "corrupt"}
_FLIP = bytes(b ^ 0xFF for b in range(256))  # corrupt's table: every bit of a byte flipped
_INT_OPTIONS = {"times", "every", "after", "seed", "ms", "bytes", "shift", "retry_after",
                "status"}


class Rule:
    """One fault rule: ``KIND[:OPT=VALUE[,OPT=VALUE]...]``.

    Which requests it may apply to: ``path=GLOB`` (fnmatch on the decoded URL path, default
    every path), ``method=GET|HEAD``. Among those (the rule's "eligible" requests, counted
    from 1) it fires on: every one after the first ``after=N``; only each Nth of them with
    ``every=N``; with probability ``prob=P`` from its own ``random.Random(seed)`` (``seed``,
    default 0, so a run is deterministic for a given request order); at most ``times=N``
    times in all.

    Kinds: ``503`` and ``429`` (with ``Retry-After: retry_after``, default 1), ``500``,
    ``401``, ``403``, ``404``; ``reset`` (abortive close: ``at=headers``, the default, before
    any byte of the response; ``at=body`` after the headers and ``bytes=N`` bytes of the
    body, default half); ``cut`` (Content-Length as due, ``bytes=N`` of the body, default
    half, then a clean close); ``full`` (a 200 with the whole object in reply to a range
    request); ``badrange`` (a 206 with the bytes asked for but a Content-Range shifted by
    ``shift=N``, default 1); ``etag`` (a different ETag, for the validators too, each time
    it fires: with ``after=N`` and no ``times``, from request N+1 on); ``latency`` (waits
    ``ms=N`` milliseconds, default 20, before the first byte of the response); ``trickle``
    (the headers as due, then the body at ``rate=R`` bytes per second, default 2.5, one byte
    at a time); ``hang`` (reads the request and never answers, until the server stops);
    ``redirect`` (a ``status=N`` redirect, default 302, to the same path and query under the
    base URL ``to=URL``, e.g. another server's); ``nolength`` (no Content-Length: a body
    then ends with the connection); ``corrupt`` (a 206 with the right Content-Range and
    length whose body has every bit flipped: wrong bytes no header betrays).

    Some kinds can apply to some responses only, and count only those as eligible: ``cut``
    and ``reset:at=body`` a GET with a non-empty body, ``full``, ``badrange`` and
    ``corrupt`` a GET answered 206, ``etag`` a request for an existing file.
    """

    def __init__(self, kind, path="*", method=None, times=None, every=None, after=0,
                 prob=None, seed=0, ms=20, at="headers", bytes=None, shift=1, retry_after=1,
                 rate=2.5, to=None, status=302):
        if kind not in KINDS:
            raise ValueError("unknown fault kind %r (one of %s)" % (kind, sorted(KINDS)))
        if at not in ("headers", "body"):
            raise ValueError("at= takes headers or body, not %r" % at)
        if prob is not None and not 0.0 <= prob <= 1.0:
            raise ValueError("prob= takes a probability, not %r" % prob)
        if every is not None and every < 1:
            raise ValueError("every= takes a count of at least 1")
        if not rate > 0:
            raise ValueError("rate= takes a positive number of bytes per second, not %r" % rate)
        if kind == "redirect" and not (to and to.startswith(("http://", "https://"))):
            raise ValueError("a redirect needs to=URL (http:// or https://), not %r" % to)
        if status not in (301, 302, 303, 307, 308):
            raise ValueError("status= takes a redirect status (301, 302, 303, 307, 308)")
        self.kind, self.path, self.method = kind, path, method and method.upper()
        self.times, self.every, self.after, self.prob = times, every, after, prob
        self.ms, self.at, self.bytes, self.shift = ms, at, bytes, shift
        self.retry_after = retry_after
        self.rate, self.to, self.status = rate, to and to.rstrip("/"), status
        self.rng = random.Random(seed)
        self.eligible = 0  # eligible requests seen
        self.injected = 0  # times fired

    @classmethod
    def parse(cls, text):
        kind, _, opts = text.strip().partition(":")
        kwargs = {}
        for opt in filter(None, opts.split(",")):
            name, eq, value = opt.partition("=")
            if not eq:
                raise ValueError("fault option %r is not NAME=VALUE (in %r)" % (opt, text))
            name = name.strip()
            if name in _INT_OPTIONS:
                kwargs[name] = int(value)
            elif name in ("prob", "rate"):
                kwargs[name] = float(value)
            elif name in ("path", "method", "at", "to"):
                kwargs[name] = value
            else:
                raise ValueError("unknown fault option %r (in %r)" % (name, text))
        return cls(kind, **kwargs)

    def matches(self, method, path):
        return ((self.method is None or self.method == method)
                and fnmatch.fnmatchcase(path, self.path))

    def fire(self):
        """Counts one eligible request; True when the rule fires on it. The caller holds
        the server's lock, so counts and the RNG's draws follow the order of requests."""
        self.eligible += 1
        if self.eligible <= self.after:
            return False
        if self.every is not None and (self.eligible - self.after) % self.every:
            return False
        # Drawn on every eligible request past the filters above, so that a seeded run does
        # not depend on how many times the rule has fired.
        if self.prob is not None and self.rng.random() >= self.prob:
            return False
        if self.times is not None and self.injected >= self.times:
            return False
        self.injected += 1
        return True

    def __repr__(self):
        return "Rule(%s, path=%s, injected=%d)" % (self.kind, self.path, self.injected)


def parse_range(value, size):
    """The single byte range a Range header asks of an object of `size` bytes: (start, end)
    inclusive, "unsatisfiable", or None when the header is to be ignored (not bytes, not
    well formed, several ranges)."""
    unit, eq, spec = value.partition("=")
    if not eq or unit.strip().lower() != "bytes" or "," in spec:
        return None
    first, dash, last = spec.strip().partition("-")
    if not dash or not (first.isdigit() or first == "") or not (last.isdigit() or last == ""):
        return None
    if first == "":
        if last == "":
            return None
        n = int(last)
        if n == 0 or size == 0:  # a suffix of nothing, or of an empty object
            return "unsatisfiable"
        return (max(0, size - n), size - 1)
    start = int(first)
    if last != "" and int(last) < start:
        return None  # invalid: a range set that is not well formed is ignored
    if start >= size:
        return "unsatisfiable"
    return (start, size - 1 if last == "" else min(int(last), size - 1))


def _etag_list(value):
    """The entity tags of an If-Match / If-None-Match value ("*" as such)."""
    tags, rest = [], value.strip()
    while rest:
        rest = rest.lstrip(" ,")
        if rest.startswith("*"):
            tags.append("*")
            rest = rest[1:]
            continue
        weak = rest.startswith("W/")
        body = rest[2:] if weak else rest
        if not body.startswith('"'):
            break
        end = body.find('"', 1)
        if end < 0:
            break
        tags.append(("W/" if weak else "") + body[:end + 1])
        rest = body[end + 1:]
    return tags


def _http_date(value):
    """Seconds since the epoch of an HTTP-date, or None."""
    try:
        dt = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return None if dt is None else int(dt.timestamp())


class _Abort(Exception):
    """Raised by a handler to drop the connection with a TCP reset."""


class Plan:
    """What a request is answered with before faults: status, headers, body source."""

    def __init__(self, status, headers=(), body=b"", path=None, start=0, length=0,
                 content_length=None):
        self.status, self.headers, self.body = status, list(headers), body
        self.path, self.start, self.length = path, start, length  # a file's slice, or body
        # Content-Length when it is not the body's (a 304 states the 200's length).
        self.content_length = content_length

    def body_length(self):
        return self.length if self.path else len(self.body)


class Handler(http.server.BaseHTTPRequestHandler):
    """Serves server.root. Subclasses (the S3 server) change resolve() and error(), and may
    refuse a request in authorize()."""

    protocol_version = "HTTP/1.1"
    server_version = "stoker-test-range/1"
    timeout = 30  # an idle keep-alive connection is dropped after this many seconds
    # The error codes of the injected status faults, as error() names them.
    FAULT_CODES = {"401": "Unauthorized", "403": "Forbidden", "404": "NotFound",
                   "429": "TooManyRequests", "500": "InternalError", "503": "ServiceUnavailable"}

    # ---- hooks for subclasses

    def resolve(self, url_path):
        """(file path or None, Plan for the error) of a decoded URL path."""
        root = self.server.root
        try:
            full = os.path.realpath(os.path.join(root, url_path.lstrip("/")))
        except ValueError:  # a NUL in the path
            full = root
        if (full != root and not full.startswith(root + os.sep)) or not os.path.isfile(full):
            return None, self.error(404, "NotFound", "no such file")
        return full, None

    def authorize(self):
        """A Plan refusing the request, or None to serve it."""
        return None

    def error(self, status, code, message):
        body = ("%d %s: %s\n" % (status, code, message)).encode()
        return Plan(status, [("Content-Type", "text/plain")], body)

    # ---- the request

    def log_message(self, fmt, *args):
        if not self.server.quiet:
            super().log_message(fmt, *args)

    def handle(self):
        try:
            super().handle()
        except _Abort:
            # SO_LINGER 0 makes close() send RST; the file objects hold references to the
            # socket, so they are closed first for close() to take effect now.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            self.rfile.close()
            self.wfile.close()
            self.connection.close()
        except (ConnectionError, TimeoutError):
            pass  # the client went away; nothing to answer

    def do_GET(self):
        self._serve_counted(head=False)

    def do_HEAD(self):
        self._serve_counted(head=True)

    def _serve_counted(self, head):
        srv = self.server
        with srv.lock:
            srv.active += 1
            srv.peak_active = max(srv.peak_active, srv.active)
        try:
            self._serve(head)
        finally:
            with srv.lock:
                srv.active -= 1

    def _refuse_method(self):
        self.close_connection = True  # its body, if any, is not read
        entry = self._record()
        entry["status"] = 405
        self._send(Plan(405, [("Allow", "GET, HEAD")], b"405 method not allowed\n"), entry)

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse_method

    def _record(self):
        """Parses the target and logs the request; returns its log entry."""
        url = urllib.parse.urlsplit(self.path)
        self.url_path = urllib.parse.unquote(url.path)
        self.url_query = url.query
        entry = {"method": self.command, "path": self.url_path, "range": self.headers.get("Range"),
                 "status": None, "sent": 0, "faults": [], "client": self.client_address[1],
                 "headers": {k.lower(): v for k, v in self.headers.items()}}
        self.server.record(entry)
        return entry

    def _serve(self, head):
        srv = self.server
        entry = self._record()
        plan = self.authorize()
        refused = plan is not None
        path = None
        if not refused:
            path, plan = self.resolve(self.url_path)
        with srv.lock:
            # A request refused by authorize() is answered as is: the rules do not see it.
            rules = [] if refused else [r for r in srv.rules
                                        if r.matches(self.command, self.url_path)]
            delay = 0
            etag_changed = False
            for r in rules:
                if r.kind == "latency" and r.fire():
                    delay += r.ms
                    entry["faults"].append("latency")
                elif r.kind == "etag" and path is not None and r.fire():
                    etag_changed = True
                    entry["faults"].append("etag")
        if path is not None:
            plan = self._plan_file(path, head, etag_changed)
        fault = None
        with srv.lock:
            for r in rules:
                if r.kind not in MODIFIERS and self._eligible(r, plan, head) and r.fire():
                    fault = r
                    entry["faults"].append(r.kind)
                    break
            for kind in entry["faults"]:
                srv.faults_injected[kind] = srv.faults_injected.get(kind, 0) + 1
        if delay:
            time.sleep(delay / 1000.0)
        if fault is not None:
            plan = self._apply(fault, plan, path)
        # a reset before the headers answers nothing: no status in the log
        aborted = fault is not None and (fault.kind == "hang" or
                                         (fault.kind == "reset" and fault.at == "headers"))
        entry["status"] = None if aborted else plan.status
        self._send(plan, entry, head=head, fault=fault)

    def _eligible(self, rule, plan, head):
        has_body = not head and plan.status in (200, 206) and plan.body_length() > 0
        if rule.kind == "cut" or (rule.kind == "reset" and rule.at == "body"):
            return has_body
        if rule.kind in ("full", "badrange", "corrupt"):
            return not head and plan.status == 206
        if rule.kind == "trickle":
            return has_body
        return True

    def _plan_file(self, path, head, etag_changed):
        try:
            st = os.stat(path)
        except OSError:
            return self.error(404, "NotFound", "no such file")
        size = st.st_size
        etag = '"%x-%x-%x"' % (st.st_ino, size, st.st_mtime_ns)
        if etag_changed:
            etag = etag[:-1] + '-changed"'
        mtime = int(st.st_mtime)
        validators = [("ETag", etag),
                      ("Last-Modified", email.utils.formatdate(mtime, usegmt=True)),
                      ("Accept-Ranges", "bytes")]
        h = self.headers
        # RFC 9110 section 13.2.2: the order in which preconditions are evaluated.
        if h.get("If-Match") is not None:
            tags = _etag_list(h["If-Match"])
            if "*" not in tags and etag not in tags:  # strong comparison: W/ never matches
                return self._precondition_failed(validators)
        elif h.get("If-Unmodified-Since") is not None:
            since = _http_date(h["If-Unmodified-Since"])
            if since is not None and mtime > since:
                return self._precondition_failed(validators)
        if h.get("If-None-Match") is not None:
            tags = [t[2:] if t.startswith("W/") else t for t in _etag_list(h["If-None-Match"])]
            if "*" in tags or etag in tags:  # weak comparison
                return Plan(304, validators, content_length=size)
        elif h.get("If-Modified-Since") is not None:
            since = _http_date(h["If-Modified-Since"])
            if since is not None and mtime <= since:
                return Plan(304, validators, content_length=size)
        headers = validators + [("Content-Type", "application/octet-stream")]
        rng = None
        if not head and h.get("Range") is not None:
            rng = parse_range(h["Range"], size)
            if rng is not None and h.get("If-Range") is not None:
                cond = h["If-Range"].strip()
                if cond.startswith('"') or cond.startswith("W/"):
                    same = cond == etag  # strong comparison
                else:
                    same = _http_date(cond) == mtime
                if not same:
                    rng = None  # the object changed: the whole of it, with a 200
        if rng == "unsatisfiable":
            return Plan(416, [("Content-Range", "bytes */%d" % size)] + validators,
                        b"416 range not satisfiable\n")
        if rng is None:
            return Plan(200, headers, path=path, start=0, length=size)
        start, end = rng
        return Plan(206, headers + [("Content-Range", "bytes %d-%d/%d" % (start, end, size))],
                    path=path, start=start, length=end - start + 1)

    def _precondition_failed(self, validators):
        return Plan(412, validators, b"412 precondition failed\n")

    def _apply(self, rule, plan, path):
        """The plan a firing (non-modifier) rule turns `plan` into."""
        kind = rule.kind
        if kind in STATUS_FAULTS:
            new = self.error(int(kind), self.FAULT_CODES[kind], "injected fault")
            if kind in ("429", "503"):
                new.headers.append(("Retry-After", str(rule.retry_after)))
            if kind == "401":
                new.headers.append(("WWW-Authenticate", 'Basic realm="stoker-test"'))
            return new
        if kind == "full":
            size = os.stat(path).st_size
            headers = [(k, v) for k, v in plan.headers if k != "Content-Range"]
            return Plan(200, headers, path=path, start=0, length=size)
        if kind == "badrange":
            headers = [(k, v) for k, v in plan.headers if k != "Content-Range"]
            size = os.stat(path).st_size
            first = plan.start + rule.shift
            headers.append(("Content-Range", "bytes %d-%d/%d"
                            % (first, first + plan.length - 1, size)))
            return Plan(206, headers, path=path, start=plan.start, length=plan.length)
        if kind == "redirect":
            return Plan(rule.status, [("Location", rule.to + self.path)],
                        b"redirected\n")
        return plan  # reset, cut, trickle and hang act while sending

    def _write(self, data, entry, counted):
        """Sends body bytes. The counters are updated first: a client that has read the last
        byte of a response sees them complete. counted: bytes of a file (bytes_sent counts
        those only, not error texts)."""
        srv = self.server
        with srv.lock:
            entry["sent"] += len(data)
            if counted:
                srv.bytes_sent += len(data)
        try:
            self.wfile.write(data)
        except OSError:
            with srv.lock:  # not sent after all (a part may have been: not known)
                entry["sent"] -= len(data)
                if counted:
                    srv.bytes_sent -= len(data)
            raise

    def _sendfile(self, f, start, limit, entry):
        """Sends limit bytes of f from start by os.sendfile (socket.sendfile): the bytes go
        from the page cache to the socket without passing through Python, and the GIL is
        released meanwhile, so the server's threads send at once as a web server's would.
        Counted as _write counts, a piece at a time; returns the bytes sent (fewer when the
        file shrank under us)."""
        srv = self.server
        sent = 0
        while sent < limit:
            n = min(SENDFILE_PIECE, limit - sent)
            with srv.lock:
                entry["sent"] += n
                srv.bytes_sent += n
            got = 0
            try:
                got = self.connection.sendfile(f, start + sent, n)
            finally:
                if got < n:  # not sent after all, or the file ended (a part: not known)
                    with srv.lock:
                        entry["sent"] -= n - max(got, 0)
                        srv.bytes_sent -= n - max(got, 0)
            sent += got
            if got < n:
                break
        return sent

    def _trickle(self, plan, limit, entry, rate):
        """Sends the body one byte every 1/rate seconds, until it is sent, the client goes
        or the server stops; returns the bytes sent."""
        sent = 0
        with open(plan.path, "rb") as f:
            f.seek(plan.start)
            while sent < limit and not self.server.stopping.wait(1.0 / rate):
                data = f.read(1)
                if not data:
                    break
                self._write(data, entry, counted=True)
                self.wfile.flush()
                sent += 1
        return sent

    def _send(self, plan, entry, head=False, fault=None):
        if fault is not None and fault.kind == "reset" and fault.at == "headers":
            raise _Abort()
        if fault is not None and fault.kind == "hang":
            self.server.stopping.wait()  # no answer at all, until the server stops
            self.close_connection = True
            return
        self.send_response(plan.status)
        for name, value in plan.headers:
            self.send_header(name, value)
        length = plan.body_length()
        if fault is not None and fault.kind == "nolength":
            self.close_connection = True  # the body ends with the connection
        else:
            self.send_header("Content-Length", str(
                length if plan.content_length is None else plan.content_length))
        self.end_headers()
        if head or plan.status == 304:
            return
        limit = length
        if fault is not None and fault.kind in ("cut", "reset"):
            limit = min(length - 1, length // 2 if fault.bytes is None else fault.bytes)
        sent = 0
        if fault is not None and fault.kind == "trickle":
            sent = self._trickle(plan, limit, entry, fault.rate)
        elif plan.path is None:
            self._write(plan.body[:limit], entry, counted=False)
            sent = min(limit, len(plan.body))
        elif fault is None:
            with open(plan.path, "rb") as f:
                sent = self._sendfile(f, plan.start, limit, entry)
        else:
            with open(plan.path, "rb") as f:
                f.seek(plan.start)
                while sent < limit:
                    data = f.read(min(CHUNK, limit - sent))
                    if not data:
                        break  # the file shrank under us: the client sees it cut short
                    if fault.kind == "corrupt":
                        data = data.translate(_FLIP)
                    self._write(data, entry, counted=True)
                    sent += len(data)
        if sent < length:
            if fault is not None and fault.kind == "reset":
                raise _Abort()
            self.close_connection = True  # a clean close after too few bytes


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, root, rules, handler, quiet=True, max_requests=100000):
        super().__init__(("127.0.0.1", 0), handler)
        self.root = os.path.realpath(root)
        self.rules = rules
        self.quiet = quiet
        self.max_requests = max_requests
        self.lock = threading.Lock()
        self.log = []
        self.requests = 0
        self.bytes_sent = 0
        self.faults_injected = {}
        self.connections = set()
        self.stopping = threading.Event()  # set by stop(): hang and trickle give up
        self.active = 0       # requests being answered now
        self.peak_active = 0  # the most at once since the start (or reset_stats)

    def record(self, entry):
        with self.lock:
            self.requests += 1
            self.log.append(entry)
            over = self.requests >= self.max_requests
        if over:  # the request budget is spent: stop serving (from another thread)
            threading.Thread(target=self.shutdown, daemon=True).start()

    def process_request(self, request, client_address):
        with self.lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        with self.lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self):
        """Ends the keep-alive connections still open, so their threads end."""
        with self.lock:
            conns = list(self.connections)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class RangeServer:
    """A running server. Counters: requests, bytes_sent (bytes of files sent in bodies, error
    texts not counted), faults_injected ({kind: count}), peak_active (the most GETs and HEADs
    answered at once); log: one dict per request (method, path, range, status, sent: body
    bytes sent, faults: the kinds that fired, client: the client's port, one per
    connection)."""

    def __init__(self, server, lifetime):
        self._server = server
        self.port = server.server_address[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self._thread = threading.Thread(target=server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        # A bounded life: a server left running by a test that crashed ends by itself.
        self._timer = threading.Timer(lifetime, server.shutdown) if lifetime else None
        if self._timer:
            self._timer.daemon = True
            self._timer.start()

    @property
    def rules(self):
        return self._server.rules

    def set_faults(self, faults):
        """Replaces the fault rules (strings or Rule objects) from the next request on."""
        rules = [f if isinstance(f, Rule) else Rule.parse(f) for f in faults]
        with self._server.lock:
            self._server.rules = rules
        return rules

    @property
    def requests(self):
        return self._server.requests

    @property
    def bytes_sent(self):
        return self._server.bytes_sent

    @property
    def peak_active(self):
        return self._server.peak_active

    @property
    def faults_injected(self):
        with self._server.lock:
            return dict(self._server.faults_injected)

    @property
    def log(self):
        with self._server.lock:
            return [dict(e) for e in self._server.log]

    def count(self, path=None, method=None):
        """Requests so far, of one path and/or method."""
        return sum(1 for e in self.log
                   if (path is None or e["path"] == path)
                   and (method is None or e["method"] == method))

    def stats(self):
        with self._server.lock:
            return {"url": self.url, "requests": self._server.requests,
                    "peak_active": self._server.peak_active,
                    "bytes_sent": self._server.bytes_sent,
                    "faults_injected": dict(self._server.faults_injected),
                    "rules": [{"kind": r.kind, "path": r.path, "eligible": r.eligible,
                               "injected": r.injected} for r in self._server.rules],
                    "log": [dict(e) for e in self._server.log]}

    def reset_stats(self):
        with self._server.lock:
            self._server.requests = 0
            self._server.bytes_sent = 0
            self._server.faults_injected = {}
            self._server.log = []
            self._server.peak_active = self._server.active

    def stop(self):
        if self._timer:
            self._timer.cancel()
        self._server.stopping.set()
        self._server.shutdown()
        self._server.close_connections()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def start(root, faults=(), quiet=True, lifetime=600, max_requests=100000, handler=Handler,
          server_class=Server, **server_kwargs):
    """Starts serving `root` on 127.0.0.1 (a port the OS picks) in a thread; returns a
    RangeServer. faults: rule strings or Rule objects. lifetime: seconds after which it stops
    by itself (None: never)."""
    if not os.path.isdir(root):
        raise ValueError("not a directory: %r" % (root,))
    rules = [f if isinstance(f, Rule) else Rule.parse(f) for f in faults]
    server = server_class(root, rules, handler, quiet=quiet, max_requests=max_requests,
                          **server_kwargs)
    return RangeServer(server, lifetime)


def _write_atomic(path, text):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def script_arguments(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("root", help="the directory served (read-only)")
    p.add_argument("--port-file", help="file to write the port number to, once listening")
    p.add_argument("--stats-file", help="file to write the counters to (JSON), on exit")
    p.add_argument("--fault", action="append", default=[], metavar="RULE",
                   help="a fault rule, KIND[:OPT=VALUE,...] (repeatable; see README.md)")
    p.add_argument("--lifetime", type=float, default=600,
                   help="seconds after which the server exits (default 600)")
    p.add_argument("--max-requests", type=int, default=100000,
                   help="requests after which the server exits (default 100000)")
    p.add_argument("--verbose", action="store_true", help="log each request to stderr")
    return p


def run_script(args, start_fn, **kwargs):
    """Script mode: start, announce, wait for a signal or the end of the server's life."""
    srv = start_fn(args.root, faults=args.fault, quiet=not args.verbose,
                   lifetime=args.lifetime, max_requests=args.max_requests, **kwargs)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    print(srv.url, flush=True)
    if args.port_file:
        _write_atomic(args.port_file, "%d\n" % srv.port)
    # The serving thread ends when the lifetime or the request budget runs out.
    while not done.is_set() and srv._thread.is_alive():
        done.wait(0.2)
    srv.stop()
    if args.stats_file:
        _write_atomic(args.stats_file, json.dumps(srv.stats(), indent=1) + "\n")
    return 0


def main(argv=None):
    args = script_arguments("Serve a directory over HTTP/1.1 on 127.0.0.1, with byte ranges "
                            "and injected faults.").parse_args(argv)
    return run_script(args, start)


if __name__ == "__main__":
    sys.exit(main())
