/* SPDX-License-Identifier: Apache-2.0 */
/* The remote source's client: HTTP(S) and S3 over libcurl's multi interface. One thread
 * drives every transfer of a client (keep-alive, HTTP/2 where the server offers it), at most
 * `max_transfers` at once; callers queue requests from any thread and are told on completion.
 *
 * A request is one GET of a byte range (or of a whole object) or one HEAD. Redirects of
 * http(s):// requests are followed (8 at most, to http(s):// only); the user's `header` goes
 * to the request's own origin (scheme, host and port) only: a hop to another origin, and
 * every hop after it, is sent without it. Faults that a new
 * attempt may cure (5xx, 429, a connection refused or reset, a timeout, a body cut short, a
 * reply that is not the range asked for) are retried with exponential backoff and jitter,
 * honouring Retry-After, within `retries` attempts and `retry_seconds`; then the request
 * fails with a message naming the URL, the byte range and the last status or cause. A 200
 * with the whole object in reply to a range request is cut to the range asked for (never
 * mistaken for it); a 206 whose Content-Range is not the range asked for is a fault.
 *
 * URLs: http://, https:// (certificates verified; `ca_bundle` names another CA file) and
 * s3://BUCKET/KEY, signed with AWS Signature Version 4 (libcurl's CURLOPT_AWS_SIGV4,
 * `x-amz-content-sha256: UNSIGNED-PAYLOAD`, `x-amz-security-token` with a session token);
 * path-style (ENDPOINT/BUCKET/KEY) when an endpoint is set (MinIO and other compatible
 * stores), virtual-hosted style (https://BUCKET.s3.REGION.amazonaws.com/KEY) on AWS.
 * Internal to src/remote/. */
#ifndef STOKER_REMOTE_HTTP_H
#define STOKER_REMOTE_HTTP_H

#include "common/common.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct stoker__http stoker__http;

/* Settings, taken as they are: stoker__http_opts_default fills them from the options table
 * (fetch_transfers, fetch_retries, fetch_retry_ms, fetch_timeout_ms), the one home of the
 * defaults. Deadlines: an attempt (its connection, redirects and body) ends within
 * stall_timeout x (1 + L / 1 MiB) seconds, L the bytes asked for (a range's length, else a
 * buffer's capacity; a whole object of unknown size going to a file has the stall guard
 * only), and fails earlier when no byte moves for stall_timeout; a request starts no attempt
 * more than retry_seconds after its first, so it ends within retry_seconds + one attempt's
 * deadline, and within (retries + 1) attempts' deadlines plus their backoffs. */
typedef struct stoker__http_opts {
    uint32_t max_transfers; /* in flight at once (at least 1) */
    uint32_t write_chunks;  /* chunks of 1 MiB at most on their way to files (0: 32); fewer
                               only to test the client's writing them itself */
    uint32_t retries;       /* attempts after the first, per request (0: none) */
    double retry_seconds;   /* most time one request may spend retrying (0: no retry) */
    double connect_timeout; /* seconds to connect (> 0) */
    double stall_timeout;   /* a transfer that moves no byte for this long fails (> 0); the
                               unit of an attempt's deadline */
    const char *ca_bundle;  /* a CA file for HTTPS [NULL: the system's] */
    const char *header;     /* one extra request header, "Name: value" (a bearer token:
                               "Authorization: Bearer ..."), for http(s):// URLs [none] */
    /* S3, for s3:// URLs. NULL takes the standard environment, read by create:
     * AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION then
     * AWS_DEFAULT_REGION (else us-east-1), AWS_ENDPOINT_URL_S3 then AWS_ENDPOINT_URL (none:
     * AWS itself; an endpoint without a scheme is https://). AWS_SESSION_TOKEN goes with the
     * environment's keys only: with keys given here, only `session_token` is sent. */
    const char *s3_region, *s3_endpoint, *access_key, *secret_key, *session_token;
} stoker__http_opts;

typedef struct stoker__http_req stoker__http_req;
struct stoker__http_req {
    /* ---- in (not touched by the client) ---- */
    const char *url;      /* http://, https:// or s3://BUCKET/KEY */
    bool head;            /* HEAD: only the size and validators */
    uint64_t offset;      /* GET: the byte range [offset, offset + length) */
    uint64_t length;      /* 0: the whole object */
    const char *if_match; /* an ETag the object must still have (sent as If-Match; a 412, or
                             a reply with another ETag, fails at once with -ESTALE); NULL */
    int fd;               /* the body goes to this file at file offset 0 (pwrite, by the
                             client's writer threads, so any attempt rewrites it from the
                             start, once the attempt before's writes are done); -1: to buf */
    uint8_t *buf;         /* else the body goes here, at most `cap` bytes (a longer body
                             fails with STOKER_E_LIMIT) */
    size_t cap;
    void (*done)(stoker__http_req *r, void *ctx); /* once: on the client's thread, or a
                            writer's (a request to a file whose last bytes it wrote) */
    void *ctx;

    /* ---- out (valid in done) ---- */
    int rc;            /* 0; -ENOENT (404), -EACCES (401, 403), -ESTALE (the ETag
                          changed), STOKER_E_LIMIT, -ECANCELED (the client was destroyed),
                          -EIO or -ETIMEDOUT (retries spent) */
    long status;       /* the last HTTP status (0: none came) */
    uint64_t size;     /* the object's size (Content-Range's total, or Content-Length of a
                          200 or HEAD); UINT64_MAX when the server did not say */
    uint64_t got;      /* body bytes delivered (length for a range) */
    uint32_t attempts; /* 1 + retries used */
    char etag[128];    /* the ETag as sent (quotes included), "" if none */
    char last_modified[64];
    char msg[512];   /* on failure: "URL (bytes A-B): cause" */
    void *internal_; /* the client's own */
};

typedef struct stoker__http_stats {
    uint64_t requests; /* attempts sent */
    uint64_t bytes;    /* body bytes received */
    uint64_t retries;
    uint64_t failures; /* requests that failed for good */
    uint64_t busy_ns;  /* time with at least one transfer in flight */
} stoker__http_stats;

/* The options table's defaults, with no CA file, header nor S3 setting. */
void stoker__http_opts_default(stoker__http_opts *o);
/* Creates a client and starts its thread ("stoker-http") and its writers ("stoker-http-w").
 * o may be NULL (stoker__http_opts_default's). 0; STOKER_E_INVALID (a time that is not
 * positive, no transfer, a header that is not "Name: value"), -ENOMEM, -EIO (libcurl's
 * initialisation failed) or a thread's start failure, with *out NULL and err set. */
int stoker__http_create(stoker__http **out, const stoker__http_opts *o, stoker__err *err);
/* Fails what is queued, in flight or waiting to retry with -ECANCELED (each `done` is called,
 * on the client's thread or a writer's) and joins the threads; NULL is a no-op. Not
 * concurrently with another call on h, nor from a `done` callback. */
void stoker__http_destroy(stoker__http *h);
/* Queues r (any thread, and from a `done` callback); its done runs once (see `done`); r and
 * the strings it points to stay untouched and alive until then. 0, or -ENOMEM /
 * STOKER_E_INVALID (a URL it cannot take, an s3:// URL without credentials, no target or a
 * range longer than buf: r->msg says why; done is then not called). */
int stoker__http_submit(stoker__http *h, stoker__http_req *r);
/* Submits r and waits for it (done and ctx are the client's own here). Returns r->rc, or
 * submit's refusal. Any thread but the client's own (never from a `done` callback). */
int stoker__http_run(stoker__http *h, stoker__http_req *r);
/* The counters so far (any thread; each read on its own, not a snapshot of all). */
void stoker__http_stats_get(stoker__http *h, stoker__http_stats *s);

/* Whether `path` is a URL the client takes (http://, https://, s3://). */
bool stoker__http_is_url(const char *path);
/* base + "/" + name as a URL (malloc'd; NULL when out of memory): for http(s) the name is one
 * path segment, percent-encoded, so no byte of it ('%', '/', '?', '#' ...) can change what the
 * URL names; for s3:// it is appended as it is, being part of the key that is encoded when
 * the request is made. */
char *stoker__http_join(const char *base, const char *name);

#endif
