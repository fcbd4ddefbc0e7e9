/* SPDX-License-Identifier: Apache-2.0 */
/* The remote client (src/remote/http.c) against the test servers of tests/remote, one
 * scenario per run. tests/python/test_remote_http.py starts a server (with the scenario's
 * fault rules) and runs this program with:
 *
 *   STOKER_TEST_HTTP_URL     the server's URL (the S3 endpoint for the s3 scenarios)
 *   STOKER_TEST_HTTP_DIR     the directory it serves (for S3: the bucket's directory)
 *   STOKER_TEST_HTTP_MODE    basic | many | get | fail | stale | cancel | s3 | s3_opts
 *   STOKER_TEST_HTTP_BUCKET  the bucket, for the s3 scenarios
 *   STOKER_TEST_HTTP_FILE, _OFFSET, _LENGTH, _TARGET (buf or fd): the request of get / fail
 *   STOKER_TEST_HTTP_EXPECT, _EXPECT_MSG: fail's code (EIO, ENOENT, EACCES, ESTALE,
 *                            ETIMEDOUT, EFBIG) and a part of its message
 *   STOKER_TEST_HTTP_RETRIES, _RETRY_SECONDS, _STALL, _MAX_TRANSFERS, _WRITE_CHUNKS: the
 *                            client's options
 *   STOKER_TEST_HTTP_FSIZE   get / fail: the process's file size limit (RLIMIT_FSIZE)
 *
 * Each scenario checks its own outcome and prints one line, "rc=... attempts=... msg=...",
 * from which the driver checks the rest against the server's counters. Without libcurl, or
 * without STOKER_TEST_HTTP_URL (a plain ctest run), it skips. */
#include "testutil.h"

#ifdef STOKER_HAVE_CURL
#include "remote/http.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdatomic.h>
#include <time.h>

static const char *env(const char *name, const char *def)
{
    const char *v = getenv(name);
    return v && *v ? v : def;
}

static double env_num(const char *name, double def)
{
    const char *v = getenv(name);
    return v && *v ? strtod(v, NULL) : def;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- the served files ---- */

static const char *base_url, *dir;

typedef struct file {
    uint8_t *data;
    size_t size;
} file;

/* The file served as `name`; an empty one when there is none (a 404's). */
static file load(const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    file f = {NULL, 0};
    if (t_exists(path) && !(f.data = t_read_file(path, &f.size)))
        T_FAIL("cannot read %s", path);
    return f;
}

static void url_of(char *out, size_t cap, const char *name)
{
    const char *bucket = getenv("STOKER_TEST_HTTP_BUCKET");
    if (bucket)
        snprintf(out, cap, "s3://%s/%s", bucket, name);
    else
        snprintf(out, cap, "%s/%s", base_url, name);
}

static stoker__http *client(uint32_t max_transfers)
{
    stoker__http_opts o;
    stoker__http_opts_default(&o);
    o.max_transfers = (uint32_t)env_num("STOKER_TEST_HTTP_MAX_TRANSFERS",
                                        max_transfers ? max_transfers : o.max_transfers);
    o.write_chunks = (uint32_t)env_num("STOKER_TEST_HTTP_WRITE_CHUNKS", 0);
    o.retries = (uint32_t)env_num("STOKER_TEST_HTTP_RETRIES", o.retries);
    o.retry_seconds = env_num("STOKER_TEST_HTTP_RETRY_SECONDS", o.retry_seconds);
    o.stall_timeout = env_num("STOKER_TEST_HTTP_STALL", o.stall_timeout);
    o.connect_timeout = 5;
    stoker__http *h = NULL;
    stoker__err err = {0};
    const int rc = stoker__http_create(&h, &o, &err);
    if (rc != 0)
        T_FAIL("stoker__http_create: %d %s", rc, err.msg);
    return h;
}

static void print_result(stoker__http *h, const stoker__http_req *r)
{
    stoker__http_stats s;
    stoker__http_stats_get(h, &s);
    printf("rc=%d attempts=%u status=%ld got=%llu size=%llu requests=%llu retries=%llu "
           "failures=%llu etag=%s msg=%s\n",
           r->rc, r->attempts, r->status, (unsigned long long)r->got, (unsigned long long)r->size,
           (unsigned long long)s.requests, (unsigned long long)s.retries,
           (unsigned long long)s.failures, r->etag[0] ? r->etag : "-", r->msg);
    fflush(stdout);
}

/* ---- one request, to a buffer or a file ---- */

typedef struct target {
    uint8_t *buf;
    int fd;
    char path[4096];
} target;

static void target_open(target *t, stoker__http_req *r, bool to_fd, size_t cap)
{
    memset(t, 0, sizeof *t);
    t->fd = -1;
    if (to_fd) {
        snprintf(t->path, sizeof t->path, "%s/body-XXXXXX", env("STOKER_TEST_TMP", "/tmp"));
        mkdir(env("STOKER_TEST_TMP", "/tmp"), 0755);
        t->fd = mkstemp(t->path);
        T_ASSERT(t->fd >= 0);
        /* bytes a retry or a reply longer than the range must not leave behind */
        static const char junk[] = "junk junk junk junk";
        T_EQ_INT(pwrite(t->fd, junk, sizeof junk, 0), (long long)sizeof junk);
    } else {
        t->buf = malloc(cap ? cap : 1);
        T_ASSERT(t->buf);
    }
    r->fd = t->fd;
    r->buf = t->buf;
    r->cap = cap;
}

/* The body delivered (malloc'd copy for a file target). */
static uint8_t *target_bytes(target *t, size_t n)
{
    if (t->fd < 0)
        return t->buf;
    uint8_t *b = malloc(n ? n : 1);
    T_EQ_INT(pread(t->fd, b, n, 0), (long long)n);
    return b;
}

static void target_close(target *t, uint8_t *bytes)
{
    if (t->fd >= 0) {
        free(bytes);
        close(t->fd);
        unlink(t->path);
    }
    free(t->buf);
}

static void check_bytes(const uint8_t *got, const file *f, uint64_t off, uint64_t len,
                        const char *what)
{
    for (uint64_t i = 0; i < len; i++)
        if (got[i] != f->data[off + i])
            T_FAIL("%s: byte %llu of the range at %llu: %u != %u", what, (unsigned long long)i,
                   (unsigned long long)off, got[i], f->data[off + i]);
}

/* GET [off, off + len) (len 0: the whole) of name; checks the bytes on success. */
static int get(stoker__http *h, const char *name, uint64_t off, uint64_t len, bool to_fd,
               size_t cap, stoker__http_req *r, bool print)
{
    char url[4096];
    url_of(url, sizeof url, name);
    const file f = load(name);
    memset(r, 0, sizeof *r);
    r->url = url;
    r->offset = off;
    r->length = len;
    target t;
    target_open(&t, r, to_fd, cap ? cap : (len ? len : f.size));
    const int rc = stoker__http_run(h, r);
    if (print)
        print_result(h, r);
    if (rc == 0) {
        const uint64_t n = len ? len : f.size;
        T_EQ_INT(r->got, n);
        T_EQ_INT(r->size, f.size);
        if (r->status != 200 && !(len && r->status == 206)) /* a 200 may answer a range */
            T_FAIL("%s: status %ld", url, r->status);
        uint8_t *b = target_bytes(&t, n);
        check_bytes(b, &f, len ? off : 0, n, url); /* length 0: the whole, offset unused */
        target_close(&t, b);
    } else {
        T_CONTAINS(r->msg, url);
        target_close(&t, NULL);
    }
    r->url = NULL; /* the URL was on this stack */
    free(f.data);
    return rc;
}

static int head(stoker__http *h, const char *name, stoker__http_req *r)
{
    static char url[4096];
    url_of(url, sizeof url, name);
    memset(r, 0, sizeof *r);
    r->url = url;
    r->head = true;
    r->fd = -1;
    return stoker__http_run(h, r);
}

static int code_of(const char *name)
{
    static const struct {
        const char *name;
        int code;
    } codes[] = {{"EIO", -EIO},       {"ENOENT", -ENOENT},       {"EACCES", -EACCES},
                 {"ESTALE", -ESTALE}, {"ETIMEDOUT", -ETIMEDOUT}, {"EFBIG", -EFBIG}};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (strcmp(codes[i].name, name) == 0)
            return codes[i].code;
    T_FAIL("unknown expected code %s", name);
}

/* ---- scenarios ---- */

static void never_done(stoker__http_req *r, void *ctx)
{
    (void)r;
    (void)ctx;
    T_FAIL("done called for a request that submit refused");
}

static void check_refusals(stoker__http *h, const file *obj)
{
    stoker__http_req r = {0};
    uint8_t small[16];
    r.done = never_done;
    r.url = "ftp://127.0.0.1/obj.bin";
    r.fd = -1;
    r.buf = small;
    r.cap = sizeof small;
    T_EQ_RC(stoker__http_submit(h, &r), STOKER_E_INVALID);
    T_CONTAINS(r.msg, "ftp://");
    char url[4096];
    url_of(url, sizeof url, "obj.bin");
    r.url = url;
    r.length = sizeof small + 1; /* a range longer than the buffer */
    T_EQ_RC(stoker__http_submit(h, &r), STOKER_E_INVALID);
    r.length = 0;
    r.buf = NULL; /* no target at all */
    T_EQ_RC(stoker__http_submit(h, &r), STOKER_E_INVALID);
    /* the whole object into too small a buffer: found out from the reply */
    r.buf = small;
    T_EQ_RC(stoker__http_run(h, &r), STOKER_E_LIMIT);
    T_EQ_INT(r.attempts, 1);
    T_CONTAINS(r.msg, url);
    /* an s3:// URL without credentials */
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    stoker__http *bare = client(0);
    r.url = "s3://bucket/obj.bin";
    r.done = never_done;
    T_EQ_RC(stoker__http_submit(bare, &r), STOKER_E_INVALID);
    T_CONTAINS(r.msg, "AWS_ACCESS_KEY_ID");
    T_CONTAINS(r.msg, "AWS_SECRET_ACCESS_KEY");
    stoker__http_destroy(bare);
    (void)obj;
}

static void check_bad_options(void)
{
    stoker__http *h = (stoker__http *)1;
    stoker__err err = {0};
    stoker__http_opts o;
    stoker__http_opts_default(&o);
    o.header = "no colon here";
    T_EQ_RC(stoker__http_create(&h, &o, &err), STOKER_E_INVALID);
    T_ASSERT(h == NULL);
    T_CONTAINS(err.msg, "has no ':'");
    T_ASSERT(strstr(err.msg, "no colon here") == NULL); /* the text may be a token */
    o.header = "X-Test: a\r\nX-Injected: b";
    T_EQ_RC(stoker__http_create(&h, &o, &err), STOKER_E_INVALID);
    T_CONTAINS(err.msg, "\"X-Test: ***\"");
    T_ASSERT(strstr(err.msg, "X-Injected") == NULL);
    stoker__http_destroy(NULL);
}

static int mode_basic(void)
{
    T_ASSERT(stoker__http_is_url("http://a/b") && stoker__http_is_url("HTTPS://a/b"));
    T_ASSERT(stoker__http_is_url("s3://bucket/key"));
    T_ASSERT(!stoker__http_is_url("/data/ds") && !stoker__http_is_url("file:///x"));
    T_ASSERT(!stoker__http_is_url("s3:/x") && !stoker__http_is_url(NULL));
    check_bad_options();

    stoker__http_opts o;
    stoker__http_opts_default(&o);
    o.header = "Authorization: Bearer not-checked-by-the-range-server";
    stoker__http *h = NULL;
    stoker__err err = {0};
    T_OK(stoker__http_create(&h, &o, &err));
    const file obj = load("obj.bin");
    stoker__http_req r;
    uint32_t attempts = 0, failed = 0;

    T_OK(head(h, "obj.bin", &r));
    attempts += r.attempts;
    T_EQ_INT(r.size, obj.size);
    T_EQ_INT(r.status, 200);
    T_EQ_INT(r.got, 0);
    T_ASSERT(r.etag[0] == '"');
    T_ASSERT(r.last_modified[0] != '\0');
    char etag[128];
    snprintf(etag, sizeof etag, "%s", r.etag);

    for (int to_fd = 0; to_fd < 2; to_fd++) {
        T_OK(get(h, "obj.bin", 0, 0, to_fd, 0, &r, false)); /* the whole object */
        attempts += r.attempts;
        T_EQ_STR(r.etag, etag);
        const uint64_t ranges[][2] = {
            {0, 1}, {obj.size - 1, 1}, {12345, 100000}, {obj.size - 4096, 4096}, {0, obj.size}};
        for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
            T_OK(get(h, "obj.bin", ranges[i][0], ranges[i][1], to_fd, 0, &r, false));
            attempts += r.attempts;
        }
    }
    T_OK(get(h, "empty.bin", 0, 0, false, 0, &r, false)); /* an empty object */
    attempts += r.attempts;
    T_EQ_INT(r.got, 0);

    /* If-Match with the object's own ETag: served */
    char url[4096];
    url_of(url, sizeof url, "obj.bin");
    uint8_t buf[100];
    memset(&r, 0, sizeof r);
    r.url = url;
    r.offset = 7;
    r.length = sizeof buf;
    r.if_match = etag;
    r.fd = -1;
    r.buf = buf;
    r.cap = sizeof buf;
    T_OK(stoker__http_run(h, &r));
    attempts += r.attempts;
    check_bytes(buf, &obj, 7, sizeof buf, "if-match");

    /* failures that no retry cures: one attempt each */
    T_EQ_RC(get(h, "missing.bin", 0, 10, false, 0, &r, false), -ENOENT);
    T_CONTAINS(r.msg, "not found (404)");
    T_CONTAINS(r.msg, "(bytes 0-9)");
    T_EQ_INT(r.attempts, 1);
    attempts += r.attempts, failed++;
    T_EQ_RC(get(h, "obj.bin", obj.size - 10, 100, false, 0, &r, false), -EIO);
    T_CONTAINS(r.msg, "past the end of the object");
    T_EQ_INT(r.attempts, 1);
    attempts += r.attempts, failed++;
    T_EQ_RC(get(h, "obj.bin", obj.size, 10, false, 0, &r, false), -EIO); /* a 416 */
    T_CONTAINS(r.msg, "416");
    T_EQ_INT(r.attempts, 1);
    attempts += r.attempts, failed++;

    check_refusals(h, &obj);
    attempts += 1, failed++; /* the STOKER_E_LIMIT one */

    stoker__http_stats s;
    stoker__http_stats_get(h, &s);
    T_EQ_INT(s.requests, attempts);
    T_EQ_INT(s.retries, 0);
    T_EQ_INT(s.failures, failed);
    T_ASSERT(s.bytes >= 4 * obj.size);
    T_ASSERT(s.busy_ns > 0);
    printf("requests=%llu bytes=%llu busy_ns=%llu\n", (unsigned long long)s.requests,
           (unsigned long long)s.bytes, (unsigned long long)s.busy_ns);
    stoker__http_destroy(h);
    free(obj.data);
    return 0;
}

/* ---- many at once, submitted from several threads ---- */

#define MANY 200
#define SUBMITTERS 4

typedef struct many {
    stoker__http *h;
    char url[4096];
    stoker__http_req req[MANY];
    target targets[MANY];
    atomic_int calls[MANY];
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int n, left; /* requests; not yet done */
} many;

static void many_done(stoker__http_req *r, void *ctx)
{
    many *m = ctx;
    atomic_fetch_add(&m->calls[r - m->req], 1);
    pthread_mutex_lock(&m->lock);
    m->left--;
    pthread_cond_signal(&m->cond);
    pthread_mutex_unlock(&m->lock);
}

typedef struct submitter {
    many *m;
    int first;
} submitter;

static void *submit_main(void *arg)
{
    const submitter *s = arg;
    for (int i = s->first; i < s->m->n; i += SUBMITTERS)
        T_OK(stoker__http_submit(s->m->h, &s->m->req[i]));
    return NULL;
}

/* MANY ranges at once from SUBMITTERS threads, to buffers or (STOKER_TEST_HTTP_TARGET=fd)
 * to files: there MANY / 4, of up to the whole object, so that bodies span the writers'
 * chunks. */
static int mode_many(void)
{
    static many m;
    const file obj = load("obj.bin");
    const bool to_fd = strcmp(env("STOKER_TEST_HTTP_TARGET", "buf"), "fd") == 0;
    m.h = client(8);
    url_of(m.url, sizeof m.url, "obj.bin");
    pthread_mutex_init(&m.lock, NULL);
    pthread_cond_init(&m.cond, NULL);
    m.n = to_fd ? MANY / 4 : MANY;
    m.left = m.n;
    uint64_t seed = 11;
    for (int i = 0; i < m.n; i++) {
        stoker__http_req *r = &m.req[i];
        r->url = m.url;
        r->length = 1 + t_rand(&seed) % (to_fd ? obj.size : 65536);
        r->offset = t_rand(&seed) % (obj.size - r->length + 1);
        target_open(&m.targets[i], r, to_fd, r->length);
        r->done = many_done;
        r->ctx = &m;
    }
    const double t0 = now();
    pthread_t threads[SUBMITTERS];
    submitter subs[SUBMITTERS];
    for (int i = 0; i < SUBMITTERS; i++) {
        subs[i] = (submitter){&m, i};
        T_OK(pthread_create(&threads[i], NULL, submit_main, &subs[i]));
    }
    for (int i = 0; i < SUBMITTERS; i++)
        pthread_join(threads[i], NULL);
    pthread_mutex_lock(&m.lock);
    while (m.left > 0)
        pthread_cond_wait(&m.cond, &m.lock);
    pthread_mutex_unlock(&m.lock);
    const double elapsed = now() - t0;
    uint64_t attempts = 0;
    for (int i = 0; i < m.n; i++) {
        const stoker__http_req *r = &m.req[i];
        T_EQ_INT(atomic_load(&m.calls[i]), 1);
        if (r->rc != 0)
            T_FAIL("request %d: %d %s", i, r->rc, r->msg);
        T_EQ_INT(r->got, r->length);
        uint8_t *b = target_bytes(&m.targets[i], r->length);
        check_bytes(b, &obj, r->offset, r->length, "many");
        target_close(&m.targets[i], b);
        attempts += r->attempts;
    }
    stoker__http_stats s;
    stoker__http_stats_get(m.h, &s);
    T_EQ_INT(s.requests, attempts);
    T_EQ_INT(s.failures, 0);
    printf("requests=%llu retries=%llu elapsed=%.3f busy_ns=%llu\n", (unsigned long long)s.requests,
           (unsigned long long)s.retries, elapsed, (unsigned long long)s.busy_ns);
    stoker__http_destroy(m.h);
    pthread_cond_destroy(&m.cond);
    pthread_mutex_destroy(&m.lock);
    free(obj.data);
    return 0;
}

/* ---- one request, as the driver asks ---- */

static int mode_get(bool expect_ok)
{
    stoker__http *h = client(0);
    const char *name = env("STOKER_TEST_HTTP_FILE", "obj.bin");
    const uint64_t off = (uint64_t)env_num("STOKER_TEST_HTTP_OFFSET", 0);
    const uint64_t len = (uint64_t)env_num("STOKER_TEST_HTTP_LENGTH", 0);
    const bool to_fd = strcmp(env("STOKER_TEST_HTTP_TARGET", "buf"), "fd") == 0;
    const double fsize = env_num("STOKER_TEST_HTTP_FSIZE", 0); /* files' size limit: a write
                                                                   past it fails (EFBIG) */
    if (fsize > 0) {
        signal(SIGXFSZ, SIG_IGN);
        const struct rlimit lim = {(rlim_t)fsize, (rlim_t)fsize};
        T_OK(setrlimit(RLIMIT_FSIZE, &lim));
    }
    stoker__http_req r;
    const int rc = get(h, name, off, len, to_fd, 0, &r, true);
    if (expect_ok) {
        if (rc != 0)
            T_FAIL("get: %d %s", rc, r.msg);
    } else {
        T_EQ_RC(rc, code_of(env("STOKER_TEST_HTTP_EXPECT", "EIO")));
        T_CONTAINS(r.msg, env("STOKER_TEST_HTTP_EXPECT_MSG", ""));
        if (len > 0) {
            char range[64];
            snprintf(range, sizeof range, "(bytes %llu-%llu)", (unsigned long long)off,
                     (unsigned long long)(off + len - 1));
            T_CONTAINS(r.msg, range);
        }
    }
    stoker__http_destroy(h);
    return 0;
}

/* The object's ETag read by a HEAD, then a GET that must still see it: the server changes
 * it from its second request on (etag:after=1), so the GET fails at once with -ESTALE. */
static int mode_stale(void)
{
    stoker__http *h = client(0);
    stoker__http_req r;
    T_OK(head(h, "obj.bin", &r));
    char etag[128];
    snprintf(etag, sizeof etag, "%s", r.etag);
    char url[4096];
    url_of(url, sizeof url, "obj.bin");
    uint8_t buf[64];
    memset(&r, 0, sizeof r);
    r.url = url;
    r.offset = 100;
    r.length = sizeof buf;
    r.if_match = etag;
    r.fd = -1;
    r.buf = buf;
    r.cap = sizeof buf;
    T_EQ_RC(stoker__http_run(h, &r), -ESTALE);
    print_result(h, &r);
    T_EQ_INT(r.attempts, 1);
    T_CONTAINS(r.msg, "the object changed");
    T_CONTAINS(r.msg, url);
    stoker__http_destroy(h);
    return 0;
}

/* ---- destroy with requests in flight, queued and waiting to retry ---- */

#define CANCELS 16

static atomic_int cancel_calls[CANCELS];
static stoker__http_req cancel_req[CANCELS];

static void cancel_done(stoker__http_req *r, void *ctx)
{
    (void)ctx;
    atomic_fetch_add(&cancel_calls[r - cancel_req], 1);
}

static int mode_cancel(void)
{
    stoker__http *h = client(2);
    static char slow[4096], failing[4096];
    static uint8_t bufs[CANCELS][32];
    url_of(slow, sizeof slow, "obj.bin");         /* the server answers it late */
    url_of(failing, sizeof failing, "small.bin"); /* a 503 asking to retry in 5 s */
    for (int i = 0; i < CANCELS; i++) {
        stoker__http_req *r = &cancel_req[i];
        r->url = i < 4 ? failing : slow;
        r->length = sizeof bufs[i];
        r->fd = -1;
        r->buf = bufs[i];
        r->cap = sizeof bufs[i];
        r->done = cancel_done;
        T_OK(stoker__http_submit(h, r));
    }
    usleep(500 * 1000);
    for (int i = 0; i < CANCELS; i++)
        T_EQ_INT(atomic_load(&cancel_calls[i]), 0);
    const double t0 = now();
    stoker__http_destroy(h);
    const double took = now() - t0;
    for (int i = 0; i < CANCELS; i++) {
        T_EQ_INT(atomic_load(&cancel_calls[i]), 1);
        T_EQ_RC(cancel_req[i].rc, -ECANCELED);
        T_CONTAINS(cancel_req[i].msg, "canceled");
    }
    /* the four failing ones had their first answer and were waiting for their retry */
    for (int i = 0; i < 4; i++) {
        T_EQ_INT(cancel_req[i].attempts, 1);
        T_EQ_INT(cancel_req[i].status, 503);
    }
    printf("destroy=%.3f\n", took);
    T_ASSERT(took < 2.0);
    return 0;
}

/* ---- S3 ---- */

static int s3_checks(stoker__http *h)
{
    static const char *names[] = {"obj.bin", "sub dir/odd name+=,~;%$&@!'().bin"};
    stoker__http_req r;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const file f = load(names[i]);
        T_OK(head(h, names[i], &r));
        T_EQ_INT(r.size, f.size);
        T_ASSERT(r.etag[0] == '"');
        for (int to_fd = 0; to_fd < 2; to_fd++) {
            T_OK(get(h, names[i], 0, 0, to_fd, 0, &r, false));
            T_OK(get(h, names[i], 3, f.size - 7, to_fd, 0, &r, false));
        }
        free(f.data);
    }
    T_EQ_RC(get(h, "no such key", 0, 0, false, 16, &r, false), -ENOENT);
    T_CONTAINS(r.msg, "NoSuchKey");
    return 0;
}

static int mode_s3(bool via_opts)
{
    stoker__http *h;
    if (!via_opts) {
        h = client(4); /* keys, region and endpoint from the environment */
    } else {
        /* the same from the options, with nothing in the environment */
        static char key[256], secret[256], token[1024], region[64];
        snprintf(key, sizeof key, "%s", env("AWS_ACCESS_KEY_ID", ""));
        snprintf(secret, sizeof secret, "%s", env("AWS_SECRET_ACCESS_KEY", ""));
        snprintf(token, sizeof token, "%s", env("AWS_SESSION_TOKEN", ""));
        snprintf(region, sizeof region, "%s", env("AWS_REGION", "us-east-1"));
        static const char *vars[] = {
            "AWS_ACCESS_KEY_ID",  "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
            "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL_S3",   "AWS_ENDPOINT_URL"};
        for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
            unsetenv(vars[i]);
        stoker__http_opts o;
        stoker__http_opts_default(&o);
        o.access_key = key;
        o.secret_key = secret;
        o.session_token = token[0] ? token : NULL;
        o.s3_region = region;
        o.s3_endpoint = base_url;
        stoker__err err = {0};
        T_OK(stoker__http_create(&h, &o, &err));
    }
    const int rc = s3_checks(h);
    stoker__http_stats s;
    stoker__http_stats_get(h, &s);
    printf("requests=%llu failures=%llu\n", (unsigned long long)s.requests,
           (unsigned long long)s.failures);
    stoker__http_destroy(h);
    return rc;
}

int main(void)
{
    base_url = getenv("STOKER_TEST_HTTP_URL");
    dir = getenv("STOKER_TEST_HTTP_DIR");
    if (!base_url || !dir) {
        printf("skip: run by tests/python/test_remote_http.py (STOKER_TEST_HTTP_URL unset)\n");
        return T_SKIP;
    }
    const char *mode = env("STOKER_TEST_HTTP_MODE", "basic");
    if (strcmp(mode, "basic") == 0)
        return mode_basic();
    if (strcmp(mode, "many") == 0)
        return mode_many();
    if (strcmp(mode, "get") == 0)
        return mode_get(true);
    if (strcmp(mode, "fail") == 0)
        return mode_get(false);
    if (strcmp(mode, "stale") == 0)
        return mode_stale();
    if (strcmp(mode, "cancel") == 0)
        return mode_cancel();
    if (strcmp(mode, "s3") == 0 || strcmp(mode, "s3_opts") == 0)
        return mode_s3(strcmp(mode, "s3_opts") == 0);
    T_FAIL("unknown STOKER_TEST_HTTP_MODE %s", mode);
}

#else

int main(void)
{
    printf("skip: built without libcurl\n");
    return T_SKIP;
}

#endif
