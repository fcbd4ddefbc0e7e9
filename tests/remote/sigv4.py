# SPDX-License-Identifier: Apache-2.0
"""AWS Signature Version 4 for header-signed requests, as S3 computes it.

One function, ``sign``, does the whole computation and returns the intermediate strings too
(canonical request, string to sign), so that a test can show where a client and the server
disagree. The S3 test server verifies with it, and the S3 reader's C tests can compare their
canonical requests with it.

S3 specifics kept here: the path is URI-encoded once (other services encode it twice), it is
not normalised ("/a//b" stays), and the payload hash is whatever the client states in
x-amz-content-sha256 ("UNSIGNED-PAYLOAD" included).
"""
import collections
import hashlib
import hmac
import re
import urllib.parse

ALGORITHM = "AWS4-HMAC-SHA256"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"

Signed = collections.namedtuple(
    "Signed",
    "authorization signature canonical_request string_to_sign signed_headers scope")


def uri_encode(text, keep_slash=False):
    """AWS's UriEncode: every byte but A-Z a-z 0-9 - _ . ~ as %XX (upper-case hex); "/" too
    unless keep_slash (object key paths)."""
    return urllib.parse.quote(text, safe="/" if keep_slash else "")


def canonical_query(query):
    """query: None, a mapping or (name, value) pairs, decoded; names and values are encoded
    and the pairs sorted by encoded name, then value. A name without value gives "name="."""
    if not query:
        return ""
    items = query.items() if hasattr(query, "items") else query
    pairs = sorted((uri_encode(str(k)), uri_encode("" if v is None else str(v)))
                   for k, v in items)
    return "&".join("%s=%s" % kv for kv in pairs)


def _header_items(headers):
    return headers.items() if hasattr(headers, "items") else headers


def canonical_headers(headers):
    """(canonical header block, signed header list). Names lower-cased and sorted, values
    trimmed with inner runs of spaces collapsed; a repeated name's values joined by ","."""
    values = {}
    for name, value in _header_items(headers):
        values.setdefault(name.strip().lower(), []).append(
            re.sub(r"\s+", " ", str(value).strip()))
    names = sorted(values)
    block = "".join("%s:%s\n" % (n, ",".join(values[n])) for n in names)
    return block, ";".join(names)


def signing_key(secret, date, region, service):
    """The key derived for one day, region and service (kSigning)."""
    key = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def sign(method, path, query, headers, payload_hash, access_key, secret, region, service,
         amz_date):
    """Sign a request. path: the decoded object path ("/bucket/my key"); it is encoded here.
    headers: every header to sign (host and x-amz-date at least), as a mapping or pairs.
    payload_hash: the x-amz-content-sha256 value. amz_date: "YYYYMMDDTHHMMSSZ".
    Returns a Signed tuple; .authorization is the Authorization header's value."""
    block, signed_headers = canonical_headers(headers)
    canonical_request = "\n".join([
        method.upper(),
        uri_encode(path, keep_slash=True) or "/",
        canonical_query(query),
        block,
        signed_headers,
        payload_hash,
    ])
    scope = "%s/%s/%s/aws4_request" % (amz_date[:8], region, service)
    string_to_sign = "\n".join([
        ALGORITHM,
        amz_date,
        scope,
        hashlib.sha256(canonical_request.encode()).hexdigest(),
    ])
    signature = hmac.new(signing_key(secret, amz_date[:8], region, service),
                         string_to_sign.encode(), hashlib.sha256).hexdigest()
    authorization = "%s Credential=%s/%s, SignedHeaders=%s, Signature=%s" % (
        ALGORITHM, access_key, scope, signed_headers, signature)
    return Signed(authorization, signature, canonical_request, string_to_sign,
                  signed_headers, scope)


def s3_headers(method, host, path, access_key, secret, region, amz_date, query=None,
               extra=None, payload_hash=UNSIGNED_PAYLOAD, token=None):
    """The headers of a signed S3 request, Authorization included: host, x-amz-date,
    x-amz-content-sha256, x-amz-security-token when a token is given, and the extra ones
    (all signed)."""
    headers = {"host": host, "x-amz-date": amz_date, "x-amz-content-sha256": payload_hash}
    if token is not None:
        headers["x-amz-security-token"] = token
    headers.update({k.lower(): v for k, v in (extra or {}).items()})
    signed = sign(method, path, query, headers, payload_hash, access_key, secret, region,
                  "s3", amz_date)
    headers["authorization"] = signed.authorization
    return headers


_AUTH_RE = re.compile(
    r"^AWS4-HMAC-SHA256\s+Credential=([^,\s]+)\s*,\s*SignedHeaders=([^,\s]+)\s*,"
    r"\s*Signature=([0-9a-f]{64})\s*$")


def parse_authorization(value):
    """(access key, date, region, service, signed header names, signature) of an
    Authorization header, or None when it is not a well-formed SigV4 one."""
    m = _AUTH_RE.match(value or "")
    if not m:
        return None
    scope = m.group(1).split("/")
    if len(scope) != 5 or scope[4] != "aws4_request":
        return None
    return scope[0], scope[1], scope[2], scope[3], m.group(2).split(";"), m.group(3)
