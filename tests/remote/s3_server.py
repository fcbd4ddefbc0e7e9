# SPDX-License-Identifier: Apache-2.0
"""A path-style S3 endpoint (GET and HEAD of ``/BUCKET/KEY``) over a directory, which checks
AWS Signature Version 4 as S3 does for header-signed requests, for the tests of the S3 reader.

A bucket is a sub-directory of the root and a key a file path below it. Virtual-hosted
requests (Host ``BUCKET.s3.amazonaws.com`` or ``BUCKET.s3.REGION.amazonaws.com``, sent to
this server on 127.0.0.1) are understood too, so that AWS's documented examples can be
replayed as they are. Everything else (ranges, validators, fault rules, counters) is the
range server's; faults apply to requests that pass authentication.

As a module: ``s3_server.start(root, keys={"AKID": "SECRET"}, region="us-east-1",
clock=None, faults=...)``; a key's value may be ``(secret, session_token)``, and then the
request must carry that x-amz-security-token. ``clock`` fixes the server's time (epoch
seconds, an x-amz-date string or a callable) to replay a dated example.

As a script: ``s3_server.py ROOT --port-file F --key AKID:SECRET[:TOKEN] [--region R]
[--clock YYYYMMDDTHHMMSSZ] [--fault RULE]...``.

What is refused, with S3's error codes (XML bodies): no Authorization (403 AccessDenied), a
malformed one (400 AuthorizationHeaderMalformed, also for a credential scope of another
date, region or service), an unknown access key (403 InvalidAccessKeyId), no or a bad
x-amz-date (403 AccessDenied), a time more than 15 minutes from the server's (403
RequestTimeTooSkewed), no x-amz-content-sha256 (400 InvalidRequest) or a wrong one (400
XAmzContentSHA256Mismatch), x-amz-* headers left unsigned (403 AccessDenied), a session token
missing or wrong (400 InvalidToken), a signature that does not match (403
SignatureDoesNotMatch, with the string to sign and canonical request S3 also returns), no
such bucket (404 NoSuchBucket) or key (404 NoSuchKey).
"""
import calendar
import hashlib
import hmac
import itertools
import os
import re
import sys
import time
import urllib.parse
from xml.sax.saxutils import escape

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import range_server  # noqa: E402
import sigv4  # noqa: E402

MAX_SKEW = 15 * 60  # seconds, as S3
_VHOST_RE = re.compile(r"^(.+)\.s3(?:[.-][a-z0-9-]+)?\.amazonaws\.com$")
_request_ids = itertools.count(1)


def parse_amz_date(text):
    """Epoch seconds of a "YYYYMMDDTHHMMSSZ" string, or None."""
    try:
        return calendar.timegm(time.strptime(text, "%Y%m%dT%H%M%SZ"))
    except (TypeError, ValueError):
        return None


class S3Handler(range_server.Handler):
    server_version = "stoker-test-s3/1"
    FAULT_CODES = {"401": "Unauthorized", "403": "AccessDenied", "404": "NoSuchKey",
                   "429": "SlowDown", "500": "InternalError", "503": "SlowDown"}

    def end_headers(self):
        self.send_header("x-amz-request-id", "%016X" % next(_request_ids))
        super().end_headers()

    def error(self, status, code, message, **extra):
        parts = ['<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code>'
                 "<Message>%s</Message>" % (code, escape(message))]
        for name, value in extra.items():
            parts.append("<%s>%s</%s>" % (name, escape(str(value)), name))
        parts.append("<Resource>%s</Resource></Error>\n" % escape(self.url_path))
        return range_server.Plan(status, [("Content-Type", "application/xml")],
                                 "".join(parts).encode())

    def resolve(self, url_path):
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0].lower()
        m = _VHOST_RE.match(host)
        if m:
            bucket, key = m.group(1), url_path.lstrip("/")
        else:
            bucket, _, key = url_path.lstrip("/").partition("/")
        root = self.server.root
        bucket_dir = os.path.join(root, bucket)
        if not bucket or "/" in bucket or bucket in (".", "..") or not os.path.isdir(bucket_dir):
            return None, self.error(404, "NoSuchBucket", "The specified bucket does not exist",
                                    BucketName=bucket)
        if not key:
            return None, self.error(501, "NotImplemented",
                                    "Listing a bucket is not implemented here")
        try:
            full = os.path.realpath(os.path.join(bucket_dir, key))
        except ValueError:
            full = bucket_dir
        if not full.startswith(os.path.realpath(bucket_dir) + os.sep) or not os.path.isfile(full):
            return None, self.error(404, "NoSuchKey", "The specified key does not exist.",
                                    Key=key)
        return full, None

    def authorize(self):
        srv = self.server
        h = self.headers
        auth = h.get("Authorization")
        if auth is None:
            return self.error(403, "AccessDenied", "Access Denied")
        parsed = sigv4.parse_authorization(auth)
        if parsed is None:
            return self.error(400, "AuthorizationHeaderMalformed",
                              "The authorization header is malformed")
        akid, date, region, service, signed_names, signature = parsed
        if akid not in srv.keys:
            return self.error(403, "InvalidAccessKeyId", "The AWS Access Key Id you provided "
                              "does not exist in our records.", AWSAccessKeyId=akid)
        secret, token = srv.keys[akid]
        amz_date = h.get("x-amz-date")
        when = parse_amz_date(amz_date)
        if when is None:
            return self.error(403, "AccessDenied",
                              "AWS authentication requires a valid Date or x-amz-date header")
        if date != amz_date[:8]:
            return self.error(400, "AuthorizationHeaderMalformed", "The authorization header "
                              "is malformed; Invalid credential date. Date is not the same "
                              "as X-Amz-Date.")
        if region != srv.region:
            return self.error(400, "AuthorizationHeaderMalformed", "The authorization header "
                              "is malformed; the region '%s' is wrong; expecting '%s'"
                              % (region, srv.region), Region=srv.region)
        if service != "s3":
            return self.error(400, "AuthorizationHeaderMalformed", "The authorization header "
                              "is malformed; incorrect service '%s'. This endpoint belongs "
                              "to 's3'." % service)
        now = srv.now()
        if abs(when - now) > MAX_SKEW:
            return self.error(403, "RequestTimeTooSkewed", "The difference between the "
                              "request time and the current time is too large.",
                              RequestTime=amz_date,
                              ServerTime=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
                              MaxAllowedSkewMilliseconds=MAX_SKEW * 1000)
        payload_hash = h.get("x-amz-content-sha256")
        if payload_hash is None:
            return self.error(400, "InvalidRequest", "Missing required header for this "
                              "request: x-amz-content-sha256")
        if payload_hash != sigv4.UNSIGNED_PAYLOAD:
            if not re.fullmatch(r"[0-9a-f]{64}", payload_hash):
                return self.error(400, "InvalidArgument",
                                  "x-amz-content-sha256 must be UNSIGNED-PAYLOAD or a "
                                  "valid sha256 value.")
            if payload_hash != hashlib.sha256(self._read_body()).hexdigest():
                return self.error(400, "XAmzContentSHA256Mismatch", "The provided "
                                  "'x-amz-content-sha256' header does not match what was "
                                  "computed.")
        unsigned = sorted({n.lower() for n in h.keys() if n.lower().startswith("x-amz-")}
                          - set(signed_names))
        if "host" not in signed_names or unsigned:
            return self.error(403, "AccessDenied", "There were headers present in the "
                              "request which were not signed",
                              HeadersNotSigned=", ".join(unsigned or ["host"]))
        if (token or None) != h.get("x-amz-security-token"):
            return self.error(400, "InvalidToken",
                              "The provided token is malformed or otherwise invalid.")
        # The canonical request from the request as received: the raw path decoded (sign()
        # encodes it again, as a conforming client did), the raw query split and decoded,
        # the signed headers' values as they came (a repeated one with each value).
        raw_path = urllib.parse.urlsplit(self.path)
        query = []
        for part in filter(None, raw_path.query.split("&")):
            k, _, v = part.partition("=")
            query.append((urllib.parse.unquote(k), urllib.parse.unquote(v)))
        headers = []
        for name in signed_names:
            for value in h.get_all(name) or [""]:
                headers.append((name, value))
        expected = sigv4.sign(self.command, urllib.parse.unquote(raw_path.path), query,
                              headers, payload_hash, akid, secret, region, "s3", amz_date)
        if not hmac.compare_digest(expected.signature, signature):
            return self.error(403, "SignatureDoesNotMatch", "The request signature we "
                              "calculated does not match the signature you provided. Check "
                              "your key and signing method.", AWSAccessKeyId=akid,
                              StringToSign=expected.string_to_sign,
                              SignatureProvided=signature,
                              CanonicalRequest=expected.canonical_request)
        return None

    def _read_body(self):
        """The request's body (GET and HEAD normally have none); at most 1 MiB is read."""
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            n = 0
        if n <= 0:
            return b""
        if n > 1 << 20:
            self.close_connection = True
            return b"\0"  # too large to hash here: no hash matches
        return self.rfile.read(n)


class S3Server(range_server.Server):
    def __init__(self, root, rules, handler, keys=None, region="us-east-1", clock=None,
                 **kwargs):
        super().__init__(root, rules, handler, **kwargs)
        self.keys = {k: (v, None) if isinstance(v, str) else tuple(v)
                     for k, v in (keys or {}).items()}
        self.region = region
        if clock is None:
            self.now = time.time
        elif callable(clock):
            self.now = clock
        else:
            fixed = parse_amz_date(clock) if isinstance(clock, str) else float(clock)
            if fixed is None:
                raise ValueError("clock: not YYYYMMDDTHHMMSSZ: %r" % (clock,))
            self.now = lambda: fixed


def start(root, keys=None, region="us-east-1", clock=None, **kwargs):
    """Starts an S3 endpoint over `root` on 127.0.0.1; returns a range_server.RangeServer
    (its url is the endpoint, path-style)."""
    return range_server.start(root, handler=S3Handler, server_class=S3Server, keys=keys,
                              region=region, clock=clock, **kwargs)


def main(argv=None):
    p = range_server.script_arguments(
        "Serve a directory as a path-style S3 endpoint on 127.0.0.1, checking SigV4.")
    p.add_argument("--key", action="append", default=[], metavar="AKID:SECRET[:TOKEN]",
                   help="an access key and its secret (and session token); repeatable")
    p.add_argument("--region", default="us-east-1")
    p.add_argument("--clock", help="the server's fixed time, YYYYMMDDTHHMMSSZ")
    args = p.parse_args(argv)
    keys = {}
    for spec in args.key:
        parts = spec.split(":")
        if len(parts) not in (2, 3):
            p.error("--key takes AKID:SECRET[:TOKEN], not %r" % spec)
        keys[parts[0]] = tuple(parts[1:]) if len(parts) == 3 else parts[1]
    return range_server.run_script(args, start, keys=keys, region=args.region,
                                   clock=args.clock)


if __name__ == "__main__":
    sys.exit(main())
