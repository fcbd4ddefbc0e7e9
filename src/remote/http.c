/* SPDX-License-Identifier: Apache-2.0 */
/* The remote source's client (http.h): libcurl's multi interface, driven by one thread per
 * client.
 *
 * Threads and ownership: stoker__http_submit (any thread) builds a request's transfer
 * state (its URL, its header list) and appends it to `queue` under `lock`; the client's
 * thread takes the queue whole under the lock and owns everything else: the multi handle,
 * the easy handles, the ready, active and timer lists and each transfer once taken. `lock`
 * is the only lock of the client, and no callback runs under it. Counters are relaxed
 * atomics: they are read by anyone, and order nothing.
 *
 * A request's life: queued -> ready -> active (an easy handle in the multi handle) -> done,
 * or back to the timer list for a retry, never sleeping the thread: a retry waits as a due
 * time that bounds curl_multi_poll's wait. Each attempt's reply is checked as it comes: at
 * the end of a final response's headers (the status, the Content-Range, the ETag), then
 * byte by byte (the part of the body that is delivered), then at its end (the bytes due).
 *
 * Writers. A body that goes to a file is copied into chunks of WRITE_CHUNK bytes, and
 * WRITERS threads of the client write them (pwrite), so that the client's thread only
 * receives: one thread receiving and writing every block was the limit of a fast link
 * (docs/REMOTE.md). `wlock` guards the chunks (the free list and the
 * queue) and each transfer's `writes`, `werr` and `settling`. At most `max_chunks` chunks
 * exist; when none is free the client's thread writes the bytes itself, so the memory stays
 * bounded and a slow disk slows the transfers instead of queueing their bodies. A request
 * whose chunks are still being written when its transfer ends is settled by the writer that
 * writes the last of them: its done then runs on that writer's thread. A retry waits until
 * the chunks of the attempt before it are written. */
#include "remote/http.h"
#include "common/config.h"
#include "common/rng.h"

#include <curl/curl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define BACKOFF_FIRST 0.05       /* seconds before the first retry (then x2, with jitter) */
#define BACKOFF_MAX 5.0          /* the longest backoff between two attempts */
#define RETRY_AFTER_MAX 30.0     /* the longest Retry-After honoured */
#define POLL_MAX_MS 1000         /* the longest wait in curl_multi_poll */
#define RECV_BUFFER (512L << 10) /* CURLOPT_BUFFERSIZE: libcurl's largest */
#define ERRBODY_CAP 1024         /* bytes of an error reply's body kept (S3's <Code>) */
#define WRITE_CHUNK (1u << 20)   /* bytes of a body handed to the writers at a time */
#define WRITE_CHUNKS 32u         /* chunks at most, by default: bodies on their way to files */
#define WRITERS 2u               /* threads writing the chunks */
#define WRITES_WAIT 0.001        /* seconds a retry waits again for the attempt before's writes */
#define MAX_HOPS 8               /* redirects followed per attempt */
#define DEADLINE_UNIT (1u << 20) /* an attempt's deadline grows by stall_timeout per MiB */

/* What an attempt's checks decided before the transfer ended (they abort it). */
enum verdict {
    V_NONE = 0,
    V_DONE,  /* every byte asked for is in: the rest of a 200 is not wanted */
    V_RETRY, /* a fault a new attempt may cure: x->cause says which */
    V_FAIL,  /* a failure for good: x->fail_rc, the message in r->msg */
    V_HOP,   /* a redirect to follow: x->hop */
};

typedef struct xfer xfer;

/* A piece of a body on its way to the request's file: len bytes at file offset `at`. */
typedef struct wchunk wchunk;
struct wchunk {
    wchunk *next; /* in the free list or the queue */
    xfer *x;
    uint64_t at;
    size_t len;
    uint8_t data[];
};

struct xfer {
    stoker__http *h;
    stoker__http_req *r;
    xfer *next;              /* in the queue, ready, active or timer list */
    char *url;               /* the URL sent (an s3:// URL made http(s)) */
    struct curl_slist *hdrs; /* the request's own headers */
    char *hop;               /* the attempt's redirect target, or NULL: url */
    struct curl_slist *bare; /* hdrs without the user's header (another origin's), or NULL */
    uint32_t hops;           /* redirects followed by this attempt */
    bool foreign;            /* this attempt left the request's origin: no user header */
    bool hopping;            /* the next start is a hop of the same attempt */
    double attempt_started;  /* the attempt's deadline runs from here, across its hops */
    bool s3;
    bool ranged;     /* a GET of [offset, offset + length) */
    double started;  /* the first attempt's start, for retry_seconds */
    double due;      /* in the timer list: when the next attempt may start */
    CURL *easy;      /* while active */
    char cause[256]; /* the last failed attempt's cause, for the final message */
    bool timed_out;  /* that cause was a timeout */
    /* ---- the attempt in progress (attempt_reset) ---- */
    int verdict, fail_rc;
    long status;
    bool have_crange, have_clen;
    uint64_t cr_first, cr_last, cr_total, clen;
    double retry_after;          /* seconds; < 0: none */
    uint64_t pos;                /* body bytes received */
    uint64_t keep_from, keep_to; /* the body's bytes that are delivered (to is exclusive) */
    uint64_t got;                /* body bytes delivered */
    char errbody[ERRBODY_CAP + 1];
    size_t errlen;
    char errbuf[CURL_ERROR_SIZE];
    wchunk *fill; /* the chunk being filled (client's thread) */
    /* ---- under the client's wlock ---- */
    uint32_t writes; /* chunks queued or being written */
    int werr;        /* the first failed write's errno (0: none) */
    bool settling;   /* the transfer is over: the last write settles it with settle_rc */
    int settle_rc;
};

typedef struct xlist {
    xfer *head, *tail;
} xlist;

struct stoker__http {
    uint32_t max_transfers, retries;
    double retry_seconds, connect_timeout, stall_timeout;
    long stall_seconds;
    char *ca_bundle, *header;
    char *region, *endpoint, *access_key, *secret_key, *session_token, *sigv4;
    CURLM *multi;
    pthread_t thread;
    bool has_thread;

    pthread_mutex_t lock; /* guards queue and stopping */
    xlist queue;
    bool stopping;

    /* the client's thread only */
    xlist ready, active;
    xfer *timers; /* sorted by due time */
    uint32_t nactive;
    CURL **idle; /* easy handles kept for the next transfers (max_transfers) */
    uint32_t nidle;
    uint64_t jitter;

    _Atomic uint64_t n_requests, n_bytes, n_retries, n_failures, busy_ns;

    /* the writers (see the top of this file) */
    pthread_mutex_t wlock;
    pthread_cond_t wcond;
    wchunk *wfree, *whead, *wtail; /* free chunks; the queue */
    uint32_t nchunks, max_chunks;  /* chunks allocated; at most */
    bool wstop;
    pthread_t writers[WRITERS];
    uint32_t nwriters;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void count(_Atomic uint64_t *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* ---- lists ---- */

static void list_push(xlist *l, xfer *x)
{
    x->next = NULL;
    if (l->tail)
        l->tail->next = x;
    else
        l->head = x;
    l->tail = x;
}

static xfer *list_pop(xlist *l)
{
    xfer *x = l->head;
    if (x) {
        l->head = x->next;
        if (!l->head)
            l->tail = NULL;
        x->next = NULL;
    }
    return x;
}

static void list_remove(xlist *l, xfer *x)
{
    xfer *prev = NULL;
    for (xfer *it = l->head; it; prev = it, it = it->next) {
        if (it != x)
            continue;
        if (prev)
            prev->next = x->next;
        else
            l->head = x->next;
        if (l->tail == x)
            l->tail = prev;
        x->next = NULL;
        return;
    }
}

static void timer_insert(stoker__http *h, xfer *x)
{
    xfer **at = &h->timers;
    while (*at && (*at)->due <= x->due)
        at = &(*at)->next;
    x->next = *at;
    *at = x;
}

/* ---- the request's URL and headers (submit's thread) ---- */

static const char *env_or(const char *opt, const char *name)
{
    if (opt)
        return opt;
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

bool stoker__http_is_url(const char *path)
{
    return path && (strncasecmp(path, "http://", 7) == 0 || strncasecmp(path, "https://", 8) == 0 ||
                    strncasecmp(path, "s3://", 5) == 0);
}

/* A prefix for messages: "URL (bytes A-B)" for a range, "URL" otherwise; the URL as shown
 * (stoker_redact). */
static void req_prefix(const stoker__http_req *r, char *buf, size_t cap)
{
    char raw[400];
    if (!r->head && r->length > 0)
        snprintf(raw, sizeof raw, "%s (bytes %llu-%llu)", r->url, (unsigned long long)r->offset,
                 (unsigned long long)(r->offset + r->length - 1));
    else
        snprintf(raw, sizeof raw, "%s", r->url);
    stoker_redact(raw, buf, cap);
}

/* Sets r->msg to "PREFIX: cause" and returns code. */
static int req_fail(stoker__http_req *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int req_fail(stoker__http_req *r, int code, const char *fmt, ...)
{
    char prefix[400], cause[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cause, sizeof cause, fmt, ap);
    va_end(ap);
    req_prefix(r, prefix, sizeof prefix);
    snprintf(r->msg, sizeof r->msg, "%.*s: %.*s", 300, prefix, 200, cause);
    r->rc = code;
    return code;
}

/* Copies v, cut to cap - 1 bytes. */
static void copy_value(char *dst, size_t cap, const char *v)
{
    const size_t n = strnlen(v, cap - 1);
    memcpy(dst, v, n);
    dst[n] = '\0';
}

/* s with every byte but the unreserved ones (and '/' where keep_slash) as %XX (malloc'd;
 * NULL when out of memory). */
static char *percent_encode(const char *s, bool keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    char *out = stoker__malloc(3 * strlen(s) + 1);
    if (!out)
        return NULL;
    char *o = out;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        const int c = *p;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~' || (c == '/' && keep_slash)) {
            *o++ = (char)c;
        } else {
            *o++ = '%';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        }
    }
    *o = '\0';
    return out;
}

/* S3's URI encoding of a key: every byte but the unreserved ones and '/' as %XX. */
static char *s3_encode_key(const char *key)
{
    return percent_encode(key, true);
}

char *stoker__http_join(const char *base, const char *name)
{
    /* an s3:// URL names a key, which s3_url encodes when it builds the request */
    if (strncasecmp(base, "s3://", 5) == 0) {
        const size_t n = strlen(base) + strlen(name) + 2;
        char *out = stoker__malloc(n);
        if (out)
            snprintf(out, n, "%s/%s", base, name);
        return out;
    }
    char *enc = percent_encode(name, false);
    const size_t n = enc ? strlen(base) + strlen(enc) + 2 : 0;
    char *out = enc ? stoker__malloc(n) : NULL;
    if (out)
        snprintf(out, n, "%s/%s", base, enc);
    stoker__free(enc);
    return out;
}

/* The http(s) URL of s3://BUCKET/KEY: path-style under an endpoint; else virtual-hosted on
 * AWS, or path-style on AWS for a bucket with a dot (which the wildcard certificate of
 * *.s3.REGION.amazonaws.com does not cover). */
static int s3_url(const stoker__http *h, stoker__http_req *r, char **out)
{
    const char *bucket = r->url + 5;
    const char *slash = strchr(bucket, '/');
    if (!slash || slash == bucket || slash[1] == '\0')
        return req_fail(r, STOKER_E_INVALID, "not s3://BUCKET/KEY");
    if (!h->access_key || !h->secret_key)
        return req_fail(r, STOKER_E_INVALID,
                        "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
                        "(and AWS_SESSION_TOKEN for temporary ones)");
    const int blen = (int)(slash - bucket);
    char *key = s3_encode_key(slash + 1);
    if (!key)
        return req_fail(r, -ENOMEM, "out of memory");
    const size_t cap = strlen(key) + (size_t)blen + strlen(h->region) +
                       (h->endpoint ? strlen(h->endpoint) : 0) + 64;
    char *url = stoker__malloc(cap);
    if (url && h->endpoint)
        snprintf(url, cap, "%s/%.*s/%s", h->endpoint, blen, bucket, key);
    else if (url && memchr(bucket, '.', (size_t)blen))
        snprintf(url, cap, "https://s3.%s.amazonaws.com/%.*s/%s", h->region, blen, bucket, key);
    else if (url)
        snprintf(url, cap, "https://%.*s.s3.%s.amazonaws.com/%s", blen, bucket, h->region, key);
    stoker__free(key);
    if (!url)
        return req_fail(r, -ENOMEM, "out of memory");
    *out = url;
    return 0;
}

/* Appends "Name: value" to *l; false when out of memory (*l is kept for the caller). */
static bool header_add(struct curl_slist **l, const char *name, const char *value)
{
    const size_t n = strlen(name) + strlen(value) + 3;
    char *line = stoker__malloc(n);
    if (!line)
        return false;
    snprintf(line, n, "%s: %s", name, value);
    struct curl_slist *nl = curl_slist_append(*l, line); /* copies the line */
    stoker__free(line);
    if (!nl)
        return false;
    *l = nl;
    return true;
}

static int xfer_build(stoker__http *h, xfer *x, stoker__http_req *r)
{
    x->h = h;
    x->r = r;
    x->ranged = !r->head && r->length > 0;
    x->s3 = strncasecmp(r->url, "s3://", 5) == 0;
    if (x->s3) {
        const int rc = s3_url(h, r, &x->url);
        if (rc < 0)
            return rc;
    } else {
        x->url = stoker__strdup(r->url);
        if (!x->url)
            return req_fail(r, -ENOMEM, "out of memory");
    }
    bool ok = true;
    if (x->s3) {
        /* curl's SigV4 signs these as it signs every header of the list */
        ok = header_add(&x->hdrs, "x-amz-content-sha256", "UNSIGNED-PAYLOAD");
        if (ok && h->session_token)
            ok = header_add(&x->hdrs, "x-amz-security-token", h->session_token);
    } else if (h->header) {
        struct curl_slist *nl = curl_slist_append(x->hdrs, h->header);
        ok = nl != NULL;
        x->hdrs = nl ? nl : x->hdrs;
    }
    if (ok && r->if_match)
        ok = header_add(&x->hdrs, "If-Match", r->if_match);
    if (!ok)
        return req_fail(r, -ENOMEM, "out of memory for the request's headers");
    return 0;
}

static void xfer_free(xfer *x)
{
    curl_slist_free_all(x->hdrs);
    curl_slist_free_all(x->bare);
    stoker__free(x->hop);
    stoker__free(x->url);
    stoker__free(x);
}

/* ---- the writers ---- */

/* Writes all n bytes at `at`: 0, or the errno of the failure. */
static int pwrite_full(int fd, const uint8_t *data, size_t n, uint64_t at)
{
    while (n > 0) {
        const ssize_t w = pwrite(fd, data, n, (off_t)at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : EIO;
        data += w;
        n -= (size_t)w;
        at += (uint64_t)w;
    }
    return 0;
}

/* A free chunk for x's bytes from `at`, or NULL when all `max_chunks` are taken. */
static wchunk *chunk_take(stoker__http *h, xfer *x, uint64_t at)
{
    pthread_mutex_lock(&h->wlock);
    wchunk *c = h->wfree;
    if (c)
        h->wfree = c->next;
    else if (h->nchunks < h->max_chunks && (c = stoker__malloc(sizeof *c + WRITE_CHUNK)) != NULL)
        h->nchunks++;
    pthread_mutex_unlock(&h->wlock);
    if (c) {
        c->next = NULL;
        c->x = x;
        c->at = at;
        c->len = 0;
    }
    return c;
}

/* Queues x's chunk in filling for the writers (an empty one goes back). Returns 0, or the
 * errno of a write of x's that failed: its bytes are not worth receiving any more. */
static int fill_flush(stoker__http *h, xfer *x)
{
    wchunk *c = x->fill;
    x->fill = NULL;
    pthread_mutex_lock(&h->wlock);
    if (c && c->len > 0) {
        x->writes++;
        if (h->wtail)
            h->wtail->next = c;
        else
            h->whead = c;
        h->wtail = c;
        pthread_cond_signal(&h->wcond);
    } else if (c) {
        c->next = h->wfree;
        h->wfree = c;
    }
    const int werr = x->werr;
    pthread_mutex_unlock(&h->wlock);
    return werr;
}

/* Gives x's chunk in filling back unwritten (an attempt that failed). */
static void fill_drop(stoker__http *h, xfer *x)
{
    if (x->fill)
        x->fill->len = 0;
    fill_flush(h, x);
}

/* ---- completion ---- */

/* Ends a request: r's outputs are set (rc and msg by the caller), x is freed, then done. */
static void complete(stoker__http *h, xfer *x, int rc)
{
    stoker__http_req *r = x->r;
    r->rc = rc;
    if (rc < 0)
        count(&h->n_failures, 1);
    r->internal_ = NULL;
    xfer_free(x);
    r->done(r, r->ctx);
}

/* A write of r's body failed with errno e: r's message; returns -e. */
static int write_failed(stoker__http_req *r, int e)
{
    return req_fail(r, -e, "writing the body: %s", strerror(e));
}

/* Completes x once its bytes are written: a transfer that succeeded fails if a write did. */
static void finish(stoker__http *h, xfer *x, int rc, int werr)
{
    if (rc == 0 && werr != 0)
        rc = write_failed(x->r, werr);
    complete(h, x, rc);
}

/* The end of x's last attempt (client's thread): completes it now, or leaves that to the
 * writer of its last chunk. */
static void settle(stoker__http *h, xfer *x, int rc)
{
    fill_drop(h, x); /* a successful attempt's last chunk was flushed already */
    pthread_mutex_lock(&h->wlock);
    const bool later = x->writes > 0;
    if (later) {
        x->settling = true;
        x->settle_rc = rc;
    }
    const int werr = x->werr;
    pthread_mutex_unlock(&h->wlock);
    if (!later)
        finish(h, x, rc, werr);
}

static void *writer_main(void *arg)
{
    stoker__http *h = arg;
    stoker__thread_name("stoker-http-w");
    pthread_mutex_lock(&h->wlock);
    for (;;) {
        wchunk *c = h->whead;
        if (!c) {
            if (h->wstop)
                break;
            pthread_cond_wait(&h->wcond, &h->wlock);
            continue;
        }
        h->whead = c->next;
        if (!h->whead)
            h->wtail = NULL;
        pthread_mutex_unlock(&h->wlock);
        xfer *x = c->x;
        const int e = pwrite_full(x->r->fd, c->data, c->len, c->at);
        pthread_mutex_lock(&h->wlock);
        if (e != 0 && x->werr == 0)
            x->werr = e;
        c->next = h->wfree;
        h->wfree = c;
        if (--x->writes == 0 && x->settling) {
            const int rc = x->settle_rc, werr = x->werr;
            pthread_mutex_unlock(&h->wlock);
            finish(h, x, rc, werr);
            pthread_mutex_lock(&h->wlock);
        }
    }
    pthread_mutex_unlock(&h->wlock);
    return NULL;
}

static void cancel(stoker__http *h, xfer *x)
{
    req_fail(x->r, -ECANCELED, "canceled (the client was destroyed)");
    settle(h, x, -ECANCELED);
}

/* ---- parsing a reply (client's thread, in curl's callbacks) ---- */

/* Digits only (no sign, no space): strtoull takes both. */
static const char *parse_u64(const char *s, uint64_t *v)
{
    if (*s < '0' || *s > '9')
        return NULL;
    uint64_t n = 0;
    for (; *s >= '0' && *s <= '9'; s++)
        if (stoker__mul_ovf(n, 10, &n) || stoker__add_ovf(n, (uint64_t)(*s - '0'), &n))
            return NULL;
    *v = n;
    return s;
}

/* "bytes A-B/TOTAL", or a star for TOTAL when the server does not know it (a 416 puts the
 * star for A-B: no range at all). */
static void parse_content_range(xfer *x, const char *v)
{
    uint64_t a, b, t = UINT64_MAX;
    if (strncasecmp(v, "bytes ", 6) != 0)
        return;
    const char *p = parse_u64(v + 6, &a);
    if (!p || *p != '-' || !(p = parse_u64(p + 1, &b)) || *p != '/' || b < a)
        return;
    if (strcmp(p + 1, "*") != 0 && (!(p = parse_u64(p + 1, &t)) || *p != '\0' || b >= t))
        return;
    x->have_crange = true;
    x->cr_first = a;
    x->cr_last = b;
    x->cr_total = t;
}

static void parse_retry_after(xfer *x, const char *v)
{
    uint64_t s;
    const char *end = parse_u64(v, &s);
    if (end && *end == '\0') {
        x->retry_after = s > 86400 ? 86400.0 : (double)s;
        return;
    }
    const time_t when = curl_getdate(v, NULL); /* an HTTP-date */
    if (when != (time_t)-1)
        x->retry_after = when > time(NULL) ? (double)(when - time(NULL)) : 0.0;
}

static void response_reset(xfer *x)
{
    x->status = 0;
    x->have_crange = x->have_clen = false;
    x->retry_after = -1.0;
    x->pos = x->got = 0;
    x->errlen = 0;
    x->r->etag[0] = x->r->last_modified[0] = '\0';
}

static void attempt_reset(xfer *x)
{
    response_reset(x);
    x->verdict = V_NONE;
    x->fail_rc = 0;
    x->errbuf[0] = '\0';
}

static void verdict_retry(xfer *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void verdict_retry(xfer *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->cause, sizeof x->cause, fmt, ap);
    va_end(ap);
    x->timed_out = false;
    x->verdict = V_RETRY;
}

/* A 2xx GET of a range: which body bytes are the range's. */
static void check_range_reply(xfer *x)
{
    const stoker__http_req *r = x->r;
    const uint64_t last = r->offset + r->length - 1;
    if (x->status == 206) {
        if (x->have_crange && x->cr_first == r->offset && x->cr_last == last) {
            x->keep_from = 0;
            x->keep_to = r->length;
            x->r->size = x->cr_total;
        } else if (x->have_crange && x->cr_first == r->offset && x->cr_last + 1 == x->cr_total) {
            x->fail_rc = req_fail(x->r, -EIO, "past the end of the object (%llu bytes)",
                                  (unsigned long long)x->cr_total);
            x->verdict = V_FAIL;
        } else if (x->have_crange) {
            verdict_retry(x, "a reply of bytes %llu-%llu/%llu", (unsigned long long)x->cr_first,
                          (unsigned long long)x->cr_last, (unsigned long long)x->cr_total);
        } else {
            verdict_retry(x, "a 206 without a valid Content-Range");
        }
        return;
    }
    /* a 200: the whole object, of which the range is cut (the rest skipped) */
    x->r->size = x->have_clen ? x->clen : UINT64_MAX;
    if (x->have_clen && x->clen <= last) {
        x->fail_rc = req_fail(x->r, -EIO, "past the end of the object (%llu bytes)",
                              (unsigned long long)x->clen);
        x->verdict = V_FAIL;
        return;
    }
    x->keep_from = r->offset;
    x->keep_to = r->offset + r->length;
}

/* A 2xx GET of the whole object. */
static void check_whole_reply(xfer *x)
{
    if (x->status == 206 &&
        !(x->have_crange && x->cr_first == 0 && x->cr_last + 1 == x->cr_total)) {
        verdict_retry(x, "a partial reply (206) to a request for the whole object");
        return;
    }
    if (x->status == 206)
        x->clen = x->cr_total, x->have_clen = true;
    x->keep_from = 0;
    x->keep_to = x->have_clen ? x->clen : UINT64_MAX;
    x->r->size = x->have_clen ? x->clen : UINT64_MAX;
}

/* The headers of a 2xx response are in: decide what of its body is delivered. */
static void headers_done(xfer *x)
{
    stoker__http_req *r = x->r;
    if (r->if_match && r->etag[0] && strcmp(r->etag, r->if_match) != 0) {
        x->fail_rc =
            req_fail(r, -ESTALE, "the object changed (ETag %s, expected %s)", r->etag, r->if_match);
        x->verdict = V_FAIL;
        return;
    }
    if (r->head) {
        r->size = x->have_clen ? x->clen : UINT64_MAX;
        return;
    }
    if (x->status != 200 && x->status != 206) {
        x->fail_rc = req_fail(r, -EIO, "unexpected status %ld", x->status);
        x->verdict = V_FAIL;
        return;
    }
    if (x->ranged)
        check_range_reply(x);
    else
        check_whole_reply(x);
    if (x->verdict == V_NONE && r->fd < 0 && x->keep_to != UINT64_MAX &&
        x->keep_to - x->keep_from > r->cap) {
        x->fail_rc = req_fail(r, STOKER_E_LIMIT, "%llu bytes do not fit the buffer of %zu",
                              (unsigned long long)(x->keep_to - x->keep_from), r->cap);
        x->verdict = V_FAIL;
    }
}

static void header_field(xfer *x, const char *name, size_t nlen, const char *v)
{
    stoker__http_req *r = x->r;
    if (nlen == 13 && strncasecmp(name, "content-range", 13) == 0) {
        parse_content_range(x, v);
    } else if (nlen == 14 && strncasecmp(name, "content-length", 14) == 0) {
        const char *end = parse_u64(v, &x->clen);
        x->have_clen = end && *end == '\0';
    } else if (nlen == 4 && strncasecmp(name, "etag", 4) == 0) {
        copy_value(r->etag, sizeof r->etag, v);
    } else if (nlen == 13 && strncasecmp(name, "last-modified", 13) == 0) {
        copy_value(r->last_modified, sizeof r->last_modified, v);
    } else if (nlen == 11 && strncasecmp(name, "retry-after", 11) == 0) {
        parse_retry_after(x, v);
    }
}

/* CURLOPT_HEADERFUNCTION: one line of a response's head (each response of a redirect or an
 * interim 1xx begins with its status line, which starts the parse afresh). */
static size_t on_header(char *line, size_t size, size_t n, void *p)
{
    xfer *x = p;
    const size_t len = size * n;
    size_t end = len;
    while (end > 0 && (line[end - 1] == '\r' || line[end - 1] == '\n'))
        end--;
    if (len >= 5 && strncasecmp(line, "HTTP/", 5) == 0) {
        response_reset(x);
        const char *sp = memchr(line, ' ', end);
        if (sp)
            x->status = strtol(sp + 1, NULL, 10);
        return len;
    }
    if (end == 0) {
        if (x->status >= 200 && x->status < 300)
            headers_done(x);
        return x->verdict == V_NONE ? len : 0;
    }
    const char *colon = memchr(line, ':', end);
    if (!colon)
        return len;
    const char *v = colon + 1;
    while (v < line + end && (*v == ' ' || *v == '\t'))
        v++;
    size_t vlen = (size_t)(line + end - v);
    while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
        vlen--;
    char value[512];
    snprintf(value, sizeof value, "%.*s", (int)(vlen < sizeof value ? vlen : sizeof value - 1), v);
    header_field(x, line, (size_t)(colon - line), value);
    return len;
}

/* Delivers body bytes at `at` of the target: copied to the buffer, or to chunks for the
 * writers (written here when none is free). False with V_FAIL set on failure. */
static bool deliver(xfer *x, const char *data, size_t n, uint64_t at)
{
    stoker__http_req *r = x->r;
    if (r->fd < 0) {
        if (at + n > r->cap) {
            x->fail_rc =
                req_fail(r, STOKER_E_LIMIT, "a body longer than the buffer of %zu", r->cap);
            x->verdict = V_FAIL;
            return false;
        }
        memcpy(r->buf + at, data, n);
        return true;
    }
    int e = 0;
    while (n > 0) {
        wchunk *c = x->fill;
        if (c && (c->len == WRITE_CHUNK || c->at + c->len != at)) {
            if ((e = fill_flush(x->h, x)) != 0)
                break;
            c = NULL;
        }
        if (!c)
            c = x->fill = chunk_take(x->h, x, at);
        if (!c) { /* every chunk is taken: the writers are behind */
            e = pwrite_full(r->fd, (const uint8_t *)data, n, at);
            break;
        }
        const size_t take = n < WRITE_CHUNK - c->len ? n : WRITE_CHUNK - c->len;
        memcpy(c->data + c->len, data, take);
        c->len += take;
        data += take;
        n -= take;
        at += take;
    }
    if (e == 0)
        return true;
    x->fail_rc = write_failed(r, e);
    x->verdict = V_FAIL;
    return false;
}

/* CURLOPT_WRITEFUNCTION: body bytes. Those of [keep_from, keep_to) are delivered; an error
 * reply's are kept (its start) for the message. */
static size_t on_body(char *data, size_t size, size_t n, void *p)
{
    xfer *x = p;
    const size_t len = size * n;
    count(&x->h->n_bytes, len);
    if (x->verdict != V_NONE)
        return 0;
    if (x->status < 200 || x->status >= 300) {
        const size_t take = len < ERRBODY_CAP - x->errlen ? len : ERRBODY_CAP - x->errlen;
        memcpy(x->errbody + x->errlen, data, take);
        x->errlen += take;
        return len;
    }
    const uint64_t from = x->pos, to = x->pos + len;
    x->pos = to;
    const uint64_t lo = from > x->keep_from ? from : x->keep_from;
    const uint64_t hi = to < x->keep_to ? to : x->keep_to;
    if (lo < hi) {
        if (!deliver(x, data + (lo - from), (size_t)(hi - lo), lo - x->keep_from))
            return 0;
        x->got += hi - lo;
    }
    if (to > x->keep_to) {
        if (x->ranged && x->status == 200) {
            x->verdict = V_DONE; /* the rest of the object is not wanted */
            return 0;
        }
        verdict_retry(x, "a body longer than promised");
        return 0;
    }
    if (x->ranged && x->status == 200 && to == x->keep_to && !(x->have_clen && x->clen == to)) {
        x->verdict = V_DONE;
        return 0;
    }
    return len;
}

/* ---- starting an attempt (client's thread) ---- */

static CURL *easy_take(stoker__http *h)
{
    if (h->nidle > 0) {
        CURL *e = h->idle[--h->nidle];
        curl_easy_reset(e); /* keeps its connections, DNS and TLS session caches */
        return e;
    }
    return curl_easy_init();
}

static void easy_give(stoker__http *h, CURL *e)
{
    if (h->nidle < h->max_transfers)
        h->idle[h->nidle++] = e;
    else
        curl_easy_cleanup(e);
}

/* What is left of the attempt's deadline (http.h), in milliseconds for CURLOPT_TIMEOUT_MS:
 * stall_timeout x (1 + L / 1 MiB) from the attempt's start, its hops included; 0 (none)
 * for a whole object of unknown size going to a file. */
static long attempt_left_ms(const stoker__http *h, const xfer *x)
{
    const stoker__http_req *r = x->r;
    if (!r->head && r->length == 0 && r->fd >= 0)
        return 0;
    const uint64_t len = r->head ? 0 : r->length ? r->length : r->cap;
    const double limit = h->stall_timeout * (1.0 + (double)len / DEADLINE_UNIT);
    const double ms = (limit - (stoker__now() - x->attempt_started)) * 1000.0;
    return ms < 1.0 ? 1L : ms > 2e9 ? 2000000000L : (long)ms;
}

/* Sets every option of one attempt; a CURLcode other than CURLE_OK when one is refused. */
static CURLcode easy_setup(const stoker__http *h, xfer *x, CURL *e)
{
    const stoker__http_req *r = x->r;
    CURLcode c = CURLE_OK;
#define SET(opt, val)                                                                              \
    do {                                                                                           \
        if (c == CURLE_OK)                                                                         \
            c = curl_easy_setopt(e, opt, val);                                                     \
    } while (0)
    SET(CURLOPT_URL, x->hop ? x->hop : x->url);
    SET(CURLOPT_PRIVATE, x);
    SET(CURLOPT_ERRORBUFFER, x->errbuf);
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    SET(CURLOPT_PIPEWAIT, 1L);
    SET(CURLOPT_TCP_KEEPALIVE, 1L);
    SET(CURLOPT_TCP_KEEPIDLE, 30L);
    SET(CURLOPT_TCP_KEEPINTVL, 15L);
    SET(CURLOPT_CONNECTTIMEOUT_MS, (long)(h->connect_timeout * 1000.0));
    SET(CURLOPT_LOW_SPEED_LIMIT, 1L);
    SET(CURLOPT_LOW_SPEED_TIME, h->stall_seconds);
    SET(CURLOPT_TIMEOUT_MS, attempt_left_ms(h, x));
    SET(CURLOPT_SSL_VERIFYPEER, 1L);
    SET(CURLOPT_SSL_VERIFYHOST, 2L);
    if (h->ca_bundle)
        SET(CURLOPT_CAINFO, h->ca_bundle);
    SET(CURLOPT_HEADERFUNCTION, on_header);
    SET(CURLOPT_HEADERDATA, x);
    SET(CURLOPT_WRITEFUNCTION, on_body);
    SET(CURLOPT_WRITEDATA, x);
    /* the client's one thread receives all its transfers: larger reads, fewer calls per
     * byte (libcurl's default is 16 KiB a read and a write callback) */
    SET(CURLOPT_BUFFERSIZE, RECV_BUFFER);
    SET(CURLOPT_HTTPHEADER, x->foreign ? x->bare : x->hdrs);
    if (r->head)
        SET(CURLOPT_NOBODY, 1L);
    if (x->ranged) {
        char range[48];
        snprintf(range, sizeof range, "%llu-%llu", (unsigned long long)r->offset,
                 (unsigned long long)(r->offset + r->length - 1));
        SET(CURLOPT_RANGE, range); /* copied by curl */
    }
    if (x->s3) {
        SET(CURLOPT_AWS_SIGV4, h->sigv4);
        SET(CURLOPT_USERNAME, h->access_key);
        SET(CURLOPT_PASSWORD, h->secret_key);
        SET(CURLOPT_PATH_AS_IS, 1L); /* a key's "." and ".." segments are its own */
    } else {
        /* redirects are followed by the client (follow_hop), which knows which headers
         * may go to another origin; curl would send them all */
        SET(CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
        SET(CURLOPT_PROTOCOLS_STR, "http,https");
#else
        SET(CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    }
#undef SET
    return c;
}

static void attempt_start(stoker__http *h, xfer *x)
{
    stoker__http_req *r = x->r;
    if (r->attempts > 0) { /* a retry rewrites the file: the attempt before's writes first */
        pthread_mutex_lock(&h->wlock);
        const uint32_t writes = x->writes;
        pthread_mutex_unlock(&h->wlock);
        if (writes > 0) {
            x->due = stoker__now() + WRITES_WAIT;
            timer_insert(h, x);
            return;
        }
    }
    if (r->attempts == 0)
        x->started = stoker__now();
    if (!x->hopping) { /* a new attempt starts from the request's own URL */
        r->attempts++;
        x->attempt_started = stoker__now();
        x->hops = 0;
        x->foreign = false;
        stoker__free(x->hop);
        x->hop = NULL;
    }
    x->hopping = false;
    count(&h->n_requests, 1);
    attempt_reset(x);
    CURL *e = easy_take(h);
    if (!e) {
        req_fail(r, -ENOMEM, "out of memory for a transfer");
        settle(h, x, -ENOMEM);
        return;
    }
    const CURLcode c = easy_setup(h, x, e);
    const CURLMcode mc = c == CURLE_OK ? curl_multi_add_handle(h->multi, e) : CURLM_OK;
    if (c != CURLE_OK || mc != CURLM_OK) {
        easy_give(h, e);
        const int rc = c == CURLE_OUT_OF_MEMORY || mc == CURLM_OUT_OF_MEMORY ? -ENOMEM : -EIO;
        req_fail(r, rc, "cannot start the transfer: %s",
                 c != CURLE_OK ? curl_easy_strerror(c) : curl_multi_strerror(mc));
        settle(h, x, rc);
        return;
    }
    x->easy = e;
    list_push(&h->active, x);
    h->nactive++;
}

/* ---- judging a finished attempt (client's thread) ---- */

static bool curl_retryable(CURLcode c)
{
    switch (c) {
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_PARTIAL_FILE:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_WEIRD_SERVER_REPLY: return true;
    default: return false;
    }
}

/* S3's <Code> in an error reply's body, into code (empty when there is none). */
static void s3_error_code(const xfer *x, char *code, size_t cap)
{
    code[0] = '\0';
    char body[ERRBODY_CAP + 1];
    memcpy(body, x->errbody, x->errlen);
    body[x->errlen] = '\0';
    const char *a = strstr(body, "<Code>");
    const char *b = a ? strstr(a, "</Code>") : NULL;
    if (b && b - a - 6 < 64)
        snprintf(code, cap, " %.*s", (int)(b - a - 6), a + 6);
}

/* The verdict on an error status: V_RETRY or V_FAIL (rc and message set). */
static int judge_status(xfer *x)
{
    const long s = x->status;
    stoker__http_req *r = x->r;
    if (s == 408 || s == 429 || s >= 500) {
        snprintf(x->cause, sizeof x->cause, "last status %ld", s);
        x->timed_out = false;
        return V_RETRY;
    }
    char code[80];
    s3_error_code(x, code, sizeof code);
    if (s == 404)
        x->fail_rc = req_fail(r, -ENOENT, "not found (404%s)", code);
    else if (s == 401 || s == 403)
        x->fail_rc = req_fail(r, -EACCES, "access denied (%ld%s): check the credentials", s, code);
    else if (s == 412)
        x->fail_rc = req_fail(r, -ESTALE, "the object changed (412: its ETag is no longer %s)",
                              r->if_match ? r->if_match : "the one asked for");
    else if (s == 416)
        x->fail_rc = req_fail(r, -EIO, "past the end of the object (416%s)", code);
    else
        x->fail_rc = req_fail(r, -EIO, "status %ld%s", s, code);
    return V_FAIL;
}

/* A 2xx that completed: are all the bytes due in? */
static int judge_body(xfer *x)
{
    stoker__http_req *r = x->r;
    if (r->head)
        return V_DONE;
    const uint64_t due = x->keep_to == UINT64_MAX ? x->got : x->keep_to - x->keep_from;
    if (x->got == due)
        return V_DONE;
    if (x->ranged && x->status == 200 && !x->have_clen && x->pos <= r->offset + r->length - 1) {
        x->fail_rc = req_fail(r, -EIO, "past the end of the object (%llu bytes)",
                              (unsigned long long)x->pos);
        return V_FAIL;
    }
    snprintf(x->cause, sizeof x->cause, "the body was cut short at %llu of %llu bytes",
             (unsigned long long)x->got, (unsigned long long)due);
    x->timed_out = false;
    return V_RETRY;
}

static int judge(xfer *x, CURLcode res)
{
    stoker__http_req *r = x->r;
    r->status = x->status;
    if (x->verdict == V_FAIL || x->verdict == V_RETRY)
        return x->verdict;
    if (res != CURLE_OK && x->verdict != V_DONE) {
        copy_value(x->cause, sizeof x->cause, x->errbuf[0] ? x->errbuf : curl_easy_strerror(res));
        x->timed_out = res == CURLE_OPERATION_TIMEDOUT;
        if (curl_retryable(res))
            return V_RETRY;
        x->fail_rc = req_fail(r, -EIO, "%s", x->cause);
        return V_FAIL;
    }
    if (x->status < 200 || x->status >= 300)
        return judge_status(x);
    return judge_body(x);
}

/* The delay before attempt n + 1 (n >= 1): exponential with jitter in [1/2, 1] of it, and
 * not shorter than the server's Retry-After. */
static double backoff(stoker__http *h, const xfer *x)
{
    double d = BACKOFF_FIRST;
    for (uint32_t i = 1; i < x->r->attempts && d < BACKOFF_MAX; i++)
        d *= 2.0;
    d = d < BACKOFF_MAX ? d : BACKOFF_MAX;
    h->jitter = stoker__mix64(h->jitter + 0x9E3779B97F4A7C15ull);
    d *= 0.5 + 0.5 * (double)(h->jitter >> 11) * 0x1.0p-53;
    if (x->retry_after >= 0.0) {
        const double ra = x->retry_after < RETRY_AFTER_MAX ? x->retry_after : RETRY_AFTER_MAX;
        d = d > ra ? d : ra;
    }
    return d;
}

static void retry_or_fail(stoker__http *h, xfer *x)
{
    stoker__http_req *r = x->r;
    const double now = stoker__now();
    const double delay = backoff(h, x);
    if (r->attempts <= h->retries && now + delay - x->started <= h->retry_seconds) {
        x->due = now + delay;
        timer_insert(h, x);
        count(&h->n_retries, 1);
        return;
    }
    const int rc = x->timed_out ? -ETIMEDOUT : -EIO;
    req_fail(r, rc, "%s after %u attempts", x->cause, r->attempts);
    settle(h, x, rc);
}

/* Whether URLs a and b have one origin: scheme, host and port (a default port spelt out or
 * not). Any doubt (a URL curl cannot parse) is another origin. */
static bool same_origin(const char *a, const char *b)
{
    static const CURLUPart parts[3] = {CURLUPART_SCHEME, CURLUPART_HOST, CURLUPART_PORT};
    CURLU *ua = curl_url(), *ub = curl_url();
    bool same = ua && ub && curl_url_set(ua, CURLUPART_URL, a, 0) == CURLUE_OK &&
                curl_url_set(ub, CURLUPART_URL, b, 0) == CURLUE_OK;
    for (int i = 0; same && i < 3; i++) {
        char *pa = NULL, *pb = NULL;
        same = curl_url_get(ua, parts[i], &pa, CURLU_DEFAULT_PORT) == CURLUE_OK &&
               curl_url_get(ub, parts[i], &pb, CURLU_DEFAULT_PORT) == CURLUE_OK &&
               strcasecmp(pa, pb) == 0;
        curl_free(pa);
        curl_free(pb);
    }
    curl_url_cleanup(ua);
    curl_url_cleanup(ub);
    return same;
}

static bool is_redirect(long status)
{
    return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

/* Follows a redirect to `to` (owned: freed or kept) within the same attempt. A hop to
 * another origin than the request's drops the user's header for the rest of the attempt. */
static void follow_hop(stoker__http *h, xfer *x, char *to)
{
    stoker__http_req *r = x->r;
    fill_drop(h, x);
    int rc = 0;
    if (x->hops >= MAX_HOPS) {
        rc = req_fail(r, -EIO, "more than %d redirects", MAX_HOPS);
    } else if (strncasecmp(to, "http://", 7) != 0 && strncasecmp(to, "https://", 8) != 0) {
        rc =
            req_fail(r, -EIO, "a redirect (status %ld) to a URL that is not http(s)://", x->status);
    } else if (!x->foreign && !same_origin(x->url, to)) {
        curl_slist_free_all(x->bare);
        x->bare = NULL;
        if (r->if_match && !header_add(&x->bare, "If-Match", r->if_match))
            rc = req_fail(r, -ENOMEM, "out of memory for the request's headers");
        x->foreign = true;
    }
    if (rc < 0) {
        stoker__free(to);
        settle(h, x, rc);
        return;
    }
    stoker__free(x->hop);
    x->hop = to;
    x->hops++;
    x->hopping = true;
    list_push(&h->ready, x);
}

/* The target of a redirect the attempt on e received (a copy), or NULL. */
static char *redirect_target(const xfer *x, CURL *e, CURLcode res)
{
    if (x->s3 || res != CURLE_OK || x->verdict != V_NONE || !is_redirect(x->status))
        return NULL;
    char *loc = NULL;
    if (curl_easy_getinfo(e, CURLINFO_REDIRECT_URL, &loc) != CURLE_OK || !loc)
        return NULL;
    return stoker__strdup(loc);
}

static void attempt_done(stoker__http *h, CURL *e, CURLcode res)
{
    xfer *x = NULL;
    curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&x);
    char *hop = redirect_target(x, e, res);
    curl_multi_remove_handle(h->multi, e);
    easy_give(h, e);
    list_remove(&h->active, x);
    h->nactive--;
    x->easy = NULL;
    if (hop) {
        x->r->status = x->status;
        follow_hop(h, x, hop);
        return;
    }
    const int v = judge(x, res);
    if (v == V_RETRY) {
        fill_drop(h, x);
        retry_or_fail(h, x);
    } else if (v == V_FAIL) {
        settle(h, x, x->fail_rc);
    } else {
        fill_flush(h, x); /* its last bytes (a write's failure is finish's to report) */
        x->r->got = x->got;
        x->r->msg[0] = '\0';
        settle(h, x, 0);
    }
}

/* ---- the client's thread ---- */

/* Moves what was submitted to the ready list; true when the client is stopping. */
static bool take_queue(stoker__http *h)
{
    pthread_mutex_lock(&h->lock);
    const bool stopping = h->stopping;
    if (h->queue.head) {
        if (h->ready.tail)
            h->ready.tail->next = h->queue.head;
        else
            h->ready.head = h->queue.head;
        h->ready.tail = h->queue.tail;
        h->queue.head = h->queue.tail = NULL;
    }
    pthread_mutex_unlock(&h->lock);
    return stopping;
}

/* Retries that are due go first, ahead of new requests. */
static void timers_due(stoker__http *h, double now)
{
    xlist due = {0};
    while (h->timers && h->timers->due <= now) {
        xfer *x = h->timers;
        h->timers = x->next;
        list_push(&due, x);
    }
    if (due.head) {
        due.tail->next = h->ready.head;
        h->ready.head = due.head;
        if (!h->ready.tail)
            h->ready.tail = due.tail;
    }
}

/* How long curl_multi_poll may wait (curl shortens it for its own timeouts): none when a
 * ready request has a free slot, else until the next retry is due. */
static int poll_wait_ms(const stoker__http *h)
{
    if (h->ready.head && h->nactive < h->max_transfers)
        return 0;
    if (!h->timers)
        return POLL_MAX_MS;
    const double ms = (h->timers->due - stoker__now()) * 1000.0 + 1.0;
    return ms < 0 ? 0 : ms > POLL_MAX_MS ? POLL_MAX_MS : (int)ms;
}

static void cancel_all(stoker__http *h)
{
    for (xfer *x; (x = list_pop(&h->active));) {
        curl_multi_remove_handle(h->multi, x->easy);
        curl_easy_cleanup(x->easy);
        cancel(h, x);
    }
    h->nactive = 0;
    for (xfer *x; (x = list_pop(&h->ready));)
        cancel(h, x);
    while (h->timers) {
        xfer *x = h->timers;
        h->timers = x->next;
        cancel(h, x);
    }
    pthread_mutex_lock(&h->lock);
    xlist q = h->queue;
    h->queue.head = h->queue.tail = NULL;
    pthread_mutex_unlock(&h->lock);
    for (xfer *x; (x = list_pop(&q));)
        cancel(h, x);
}

static void *client_main(void *arg)
{
    stoker__http *h = arg;
    stoker__thread_name("stoker-http");
    uint64_t mark = stoker__now_ns();
    bool busy = false;
    while (!take_queue(h)) {
        timers_due(h, stoker__now());
        while (h->nactive < h->max_transfers && h->ready.head)
            attempt_start(h, list_pop(&h->ready));
        int running = 0;
        curl_multi_perform(h->multi, &running);
        int left = 0;
        for (CURLMsg *m; (m = curl_multi_info_read(h->multi, &left));)
            if (m->msg == CURLMSG_DONE)
                attempt_done(h, m->easy_handle, m->data.result);
        const uint64_t now = stoker__now_ns();
        if (busy)
            count(&h->busy_ns, now - mark);
        mark = now;
        busy = h->nactive > 0;
        const int wait = poll_wait_ms(h);
        if (wait > 0)
            curl_multi_poll(h->multi, NULL, 0, wait, NULL);
    }
    if (busy)
        count(&h->busy_ns, stoker__now_ns() - mark);
    cancel_all(h);
    return NULL;
}

/* ---- the API ---- */

static int dup_opt(char **dst, const char *src, stoker__err *err)
{
    if (!src)
        return 0;
    *dst = stoker__strdup(src);
    STOKER_RETURN_IF(!*dst, err, -ENOMEM, "out of memory");
    return 0;
}

/* S3's settings: the options, else the environment (http.h). A session token from the
 * environment goes with the environment's keys only, never with keys given as options. */
static int s3_settings(stoker__http *h, const stoker__http_opts *o, stoker__err *err)
{
    int rc;
    const bool env_keys = !o->access_key && !o->secret_key;
    const char *region = env_or(o->s3_region, "AWS_REGION");
    region = region ? region : env_or(NULL, "AWS_DEFAULT_REGION");
    const char *endpoint = env_or(o->s3_endpoint, "AWS_ENDPOINT_URL_S3");
    endpoint = endpoint ? endpoint : env_or(NULL, "AWS_ENDPOINT_URL");
    STOKER_FORWARD(dup_opt(&h->region, region ? region : "us-east-1", err));
    STOKER_FORWARD(dup_opt(&h->access_key, env_or(o->access_key, "AWS_ACCESS_KEY_ID"), err));
    STOKER_FORWARD(dup_opt(&h->secret_key, env_or(o->secret_key, "AWS_SECRET_ACCESS_KEY"), err));
    STOKER_FORWARD(dup_opt(&h->session_token,
                           o->session_token ? o->session_token
                           : env_keys       ? env_or(NULL, "AWS_SESSION_TOKEN")
                                            : NULL,
                           err));
    if (endpoint) {
        const size_t n = strlen(endpoint) + 9;
        h->endpoint = stoker__malloc(n);
        STOKER_FAIL_IF(!h->endpoint, err, -ENOMEM, "out of memory");
        snprintf(h->endpoint, n, "%s%s", strstr(endpoint, "://") ? "" : "https://", endpoint);
        for (size_t len = strlen(h->endpoint); len > 0 && h->endpoint[len - 1] == '/';)
            h->endpoint[--len] = '\0';
    }
    const size_t n = strlen(h->region) + 16;
    h->sigv4 = stoker__malloc(n);
    STOKER_FAIL_IF(!h->sigv4, err, -ENOMEM, "out of memory");
    snprintf(h->sigv4, n, "aws:amz:%s:s3", h->region);
    return 0;
fail:
    return rc;
}

static int check_opts(const stoker__http_opts *o, stoker__err *err)
{
    STOKER_RETURN_IF(!(o->retry_seconds >= 0) || !(o->connect_timeout > 0) ||
                         !(o->stall_timeout > 0),
                     err, STOKER_E_INVALID, "http client: a time that is not positive");
    STOKER_RETURN_IF(o->max_transfers < 1 || o->max_transfers > 4096, err, STOKER_E_INVALID,
                     "http client: max_transfers %u is not in 1..4096", o->max_transfers);
    /* the message shows the header's name only (none without a colon): its value, or the
     * whole text, is often a secret */
    const char *colon = o->header ? strchr(o->header, ':') : NULL;
    STOKER_RETURN_IF(o->header && !colon, err, STOKER_E_INVALID,
                     "http client: the header (%zu bytes, not shown) is not \"Name: value\" "
                     "(it has no ':')",
                     strlen(o->header));
    STOKER_RETURN_IF(o->header && strpbrk(o->header, "\r\n"), err, STOKER_E_INVALID,
                     "http client: the header \"%.*s: ***\" is not \"Name: value\" on one line "
                     "(it holds a line break)",
                     (int)strcspn(o->header, ":\r\n"), o->header);
    return 0;
}

void stoker__http_opts_default(stoker__http_opts *o)
{
    const double timeout = (double)stoker__cfg_int(NULL, STOKER_OPT_FETCH_TIMEOUT_MS) / 1000.0;
    *o = (stoker__http_opts){
        .max_transfers = (uint32_t)stoker__cfg_int(NULL, STOKER_OPT_FETCH_TRANSFERS),
        .retries = (uint32_t)stoker__cfg_int(NULL, STOKER_OPT_FETCH_RETRIES),
        .retry_seconds = (double)stoker__cfg_int(NULL, STOKER_OPT_FETCH_RETRY_MS) / 1000.0,
        .connect_timeout = timeout,
        .stall_timeout = timeout,
    };
}

int stoker__http_create(stoker__http **out, const stoker__http_opts *o, stoker__err *err)
{
    stoker__http_opts defaults;
    stoker__http *h = NULL;
    int rc = 0;
    *out = NULL;
    if (!o) {
        stoker__http_opts_default(&defaults);
        o = &defaults;
    }
    rc = check_opts(o, err);
    if (rc < 0)
        return rc;
    pthread_once(&curl_once, curl_init);
    STOKER_RETURN_IF(curl_init_rc != CURLE_OK, err, -EIO, "libcurl's initialisation failed: %s",
                     curl_easy_strerror(curl_init_rc));
    h = stoker__calloc(1, sizeof *h);
    STOKER_RETURN_IF(!h, err, -ENOMEM, "out of memory");
    pthread_mutex_init(&h->lock, NULL);
    pthread_mutex_init(&h->wlock, NULL);
    pthread_cond_init(&h->wcond, NULL);
    h->max_transfers = o->max_transfers;
    h->max_chunks = o->write_chunks ? o->write_chunks : WRITE_CHUNKS;
    h->retries = o->retries;
    h->retry_seconds = o->retry_seconds;
    h->connect_timeout = o->connect_timeout;
    h->stall_timeout = o->stall_timeout;
    /* curl counts whole seconds */
    h->stall_seconds = o->stall_timeout < 1.0 ? 1 : (long)(o->stall_timeout + 0.999);
    h->jitter = stoker__now_ns() ^ (uint64_t)(uintptr_t)h;
    STOKER_FORWARD(dup_opt(&h->ca_bundle, o->ca_bundle, err));
    STOKER_FORWARD(dup_opt(&h->header, o->header, err));
    STOKER_FORWARD(s3_settings(h, o, err));
    h->idle = stoker__calloc(h->max_transfers, sizeof *h->idle);
    STOKER_FAIL_IF(!h->idle, err, -ENOMEM, "out of memory");
    h->multi = curl_multi_init();
    STOKER_FAIL_IF(!h->multi, err, -ENOMEM, "out of memory for libcurl's multi handle");
    curl_multi_setopt(h->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    for (; h->nwriters < WRITERS; h->nwriters++) {
        rc = stoker__thread_start(&h->writers[h->nwriters], writer_main, h);
        STOKER_FAIL_IF(rc != 0, err, -rc, "cannot start the http client's writer thread: %s",
                       stoker_strerror(-rc));
    }
    rc = stoker__thread_start(&h->thread, client_main, h);
    STOKER_FAIL_IF(rc != 0, err, -rc, "cannot start the http client's thread: %s",
                   stoker_strerror(-rc));
    h->has_thread = true;
    *out = h;
    return 0;
fail:
    stoker__http_destroy(h);
    return rc;
}

void stoker__http_destroy(stoker__http *h)
{
    if (!h)
        return;
    if (h->has_thread) {
        pthread_mutex_lock(&h->lock);
        h->stopping = true;
        pthread_mutex_unlock(&h->lock);
        curl_multi_wakeup(h->multi);
        pthread_join(h->thread, NULL);
    }
    pthread_mutex_lock(&h->wlock); /* the writers finish what is queued, then stop */
    h->wstop = true;
    pthread_cond_broadcast(&h->wcond);
    pthread_mutex_unlock(&h->wlock);
    for (uint32_t i = 0; i < h->nwriters; i++)
        pthread_join(h->writers[i], NULL);
    while (h->wfree) {
        wchunk *c = h->wfree;
        h->wfree = c->next;
        stoker__free(c);
    }
    for (uint32_t i = 0; i < h->nidle; i++)
        curl_easy_cleanup(h->idle[i]);
    if (h->multi)
        curl_multi_cleanup(h->multi);
    stoker__free(h->idle);
    stoker__free(h->ca_bundle);
    stoker__free(h->header);
    stoker__free(h->region);
    stoker__free(h->endpoint);
    stoker__free(h->access_key);
    stoker__free(h->secret_key);
    stoker__free(h->session_token);
    stoker__free(h->sigv4);
    pthread_mutex_destroy(&h->lock);
    pthread_cond_destroy(&h->wcond);
    pthread_mutex_destroy(&h->wlock);
    stoker__free(h);
}

static int check_req(stoker__http_req *r)
{
    if (!r->url || !r->done)
        return req_fail(r, STOKER_E_INVALID, "a request without a URL or a done callback");
    if (!stoker__http_is_url(r->url))
        return req_fail(r, STOKER_E_INVALID, "not an http://, https:// or s3:// URL");
    uint64_t end;
    if (!r->head && r->length > 0 && stoker__add_ovf(r->offset, r->length, &end))
        return req_fail(r, STOKER_E_INVALID, "the range overflows");
    if (!r->head && r->fd < 0 && !r->buf)
        return req_fail(r, STOKER_E_INVALID, "no fd and no buffer for the body");
    if (!r->head && r->fd < 0 && r->length > r->cap)
        return req_fail(r, STOKER_E_INVALID, "the range is longer than the buffer of %zu", r->cap);
    return 0;
}

int stoker__http_submit(stoker__http *h, stoker__http_req *r)
{
    r->rc = 0;
    r->status = 0;
    r->size = UINT64_MAX;
    r->got = 0;
    r->attempts = 0;
    r->etag[0] = r->last_modified[0] = r->msg[0] = '\0';
    r->internal_ = NULL;
    int rc = check_req(r);
    if (rc < 0)
        return rc;
    xfer *x = stoker__calloc(1, sizeof *x);
    if (!x)
        return req_fail(r, -ENOMEM, "out of memory");
    rc = xfer_build(h, x, r);
    if (rc < 0) {
        xfer_free(x);
        return rc;
    }
    r->internal_ = x;
    pthread_mutex_lock(&h->lock);
    const bool stopping = h->stopping;
    if (!stopping)
        list_push(&h->queue, x);
    pthread_mutex_unlock(&h->lock);
    if (stopping) {
        r->internal_ = NULL;
        xfer_free(x);
        return req_fail(r, STOKER_E_STATE, "the client is being destroyed");
    }
    curl_multi_wakeup(h->multi);
    return 0;
}

typedef struct waiter {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
} waiter;

static void run_done(stoker__http_req *r, void *ctx)
{
    (void)r;
    waiter *w = ctx;
    pthread_mutex_lock(&w->lock);
    w->done = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

int stoker__http_run(stoker__http *h, stoker__http_req *r)
{
    waiter w = {.done = false};
    pthread_mutex_init(&w.lock, NULL);
    pthread_cond_init(&w.cond, NULL);
    r->done = run_done;
    r->ctx = &w;
    int rc = stoker__http_submit(h, r);
    if (rc == 0) {
        pthread_mutex_lock(&w.lock);
        while (!w.done)
            pthread_cond_wait(&w.cond, &w.lock);
        pthread_mutex_unlock(&w.lock);
        rc = r->rc;
    }
    pthread_cond_destroy(&w.cond);
    pthread_mutex_destroy(&w.lock);
    return rc;
}

void stoker__http_stats_get(stoker__http *h, stoker__http_stats *s)
{
    s->requests = atomic_load_explicit(&h->n_requests, memory_order_relaxed);
    s->bytes = atomic_load_explicit(&h->n_bytes, memory_order_relaxed);
    s->retries = atomic_load_explicit(&h->n_retries, memory_order_relaxed);
    s->failures = atomic_load_explicit(&h->n_failures, memory_order_relaxed);
    s->busy_ns = atomic_load_explicit(&h->busy_ns, memory_order_relaxed);
}
