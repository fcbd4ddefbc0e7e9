/* SPDX-License-Identifier: Apache-2.0 */
/* The remote source's block cache (src/remote/cache.c): blocks fetched once and read back,
 * the byte limit held by evicting the least recently used blocks, pins (in this process and
 * in others) never evicted, a commit waiting when pins alone fill the limit, one fetch per
 * block among processes and threads, a fetcher killed mid-block, files the cache did not
 * write left alone, the directory rules (CACHEDIR.TAG, the default directory), and a new
 * validator naming a new object. */
#include "testutil.h"

#ifndef STOKER_HAVE_CURL
int main(void)
{
    fprintf(stderr, "skip: built without libcurl, so without src/remote\n");
    return T_SKIP;
}
#else

#include "remote/cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

/* snprintf into a char array, failing the test on truncation */
#define T_PRINT(buf, ...)                                                                          \
    do {                                                                                           \
        if (snprintf((buf), sizeof(buf), __VA_ARGS__) >= (int)sizeof(buf))                         \
            T_FAIL("path too long");                                                               \
    } while (0)

#define BS 4096u
#define URL "https://example.invalid/data/shard-0000.stk"

static char *root; /* this run's scratch directory */

static void sleep_ms(int ms)
{
    const struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* Access times come from the kernel's coarse clock (a tick, up to 10 ms): steps whose LRU
 * order a test checks sleep longer than that between them. */
static void tick(void)
{
    sleep_ms(12);
}

static void fill(uint8_t *buf, size_t n, uint64_t block, uint64_t tag)
{
    uint64_t s = block * 1000003u + tag;
    for (size_t i = 0; i < n; i++)
        buf[i] = (uint8_t)t_rand(&s);
}

static stoker__cache *cache_open(const char *dir, uint64_t limit)
{
    stoker__cache *c = NULL;
    stoker__err err = {0};
    const int rc = stoker__cache_open(&c, dir, limit, &err);
    if (rc != 0)
        T_FAIL("open %s: %s (%s)", dir, stoker_strerror(rc), err.msg);
    return c;
}

static stoker__cache_obj *object(stoker__cache *c, const char *validator, uint64_t size)
{
    stoker__cache_obj *o = NULL;
    stoker__err err = {0};
    const int rc = stoker__cache_object(c, URL, validator, size, BS, &o, &err);
    if (rc != 0)
        T_FAIL("object: %s (%s)", stoker_strerror(rc), err.msg);
    return o;
}

/* Checks that fd holds block `block` written with `tag`. */
static void check_fd(const stoker__cache_obj *o, int fd, uint64_t block, uint64_t tag)
{
    const size_t n = (size_t)stoker__cache_block_bytes(o, block);
    uint8_t want[BS], got[BS + 1];
    fill(want, n, block, tag);
    const ssize_t r = pread(fd, got, sizeof got, 0);
    T_EQ_INT(r, (ssize_t)n);
    if (memcmp(got, want, n) != 0)
        T_FAIL("block %" PRIu64 ": other bytes than those committed", block);
}

/* Writes block `block` into a FETCH's temporary file. */
static void write_block(const stoker__cache_obj *o, int fd, uint64_t block, uint64_t tag)
{
    const size_t n = (size_t)stoker__cache_block_bytes(o, block);
    uint8_t buf[BS];
    fill(buf, n, block, tag);
    T_EQ_INT(pwrite(fd, buf, n, 0), (ssize_t)n);
}

/* Fetches and commits a block that must be absent; returns the pinned READY descriptor. */
static int put(stoker__cache_obj *o, uint64_t block, uint64_t tag)
{
    stoker__err err = {0};
    int tmp = -1, fd = -1;
    T_EQ_RC(stoker__cache_acquire(o, block, &tmp, &err), STOKER__BLOCK_FETCH);
    T_ASSERT(tmp >= 0);
    write_block(o, tmp, block, tag);
    const int rc = stoker__cache_commit(o, block, tmp, &fd, &err);
    if (rc != STOKER__BLOCK_READY)
        T_FAIL("commit block %" PRIu64 ": %s (%s)", block, stoker_strerror(rc), err.msg);
    check_fd(o, fd, block, tag);
    return fd;
}

/* The object directory whose `object` file names (URL, validator); "" when none. */
static void object_dir(const char *cache, const char *validator, char *out, size_t cap)
{
    char want[512], path[4200];
    T_PRINT(want, "url %s\nvalidator %s\n", URL, validator);
    out[0] = '\0';
    DIR *d = opendir(cache);
    T_ASSERT(d);
    const struct dirent *e;
    while ((e = readdir(d))) {
        T_PRINT(path, "%s/%s/object", cache, e->d_name);
        size_t n = 0;
        char *text = t_read_file(path, &n);
        if (text && n >= strlen(want) && memcmp(text, want, strlen(want)) == 0)
            snprintf(out, cap, "%s/%s", cache, e->d_name);
        free(text);
    }
    closedir(d);
    T_ASSERT(out[0]);
}

static bool has_block(const char *odir, uint64_t block)
{
    char path[4300];
    T_PRINT(path, "%s/b%010" PRIu64, odir, block);
    return t_exists(path);
}

/* Names in odir that contain `part`. */
static int count_names(const char *odir, const char *part)
{
    int n = 0;
    DIR *d = opendir(odir);
    T_ASSERT(d);
    const struct dirent *e;
    while ((e = readdir(d)))
        n += strstr(e->d_name, part) != NULL;
    closedir(d);
    return n;
}

/* Bytes of the block files (regular files named bNNNNNNNNNN) in the cache's object
 * directories (directories, not links, that hold an `object` file). */
static uint64_t block_bytes(const char *cache)
{
    uint64_t total = 0;
    DIR *d = opendir(cache);
    T_ASSERT(d);
    const struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char sub[4200], obj[4300];
        struct stat st;
        T_PRINT(sub, "%s/%s", cache, e->d_name);
        T_PRINT(obj, "%s/object", sub);
        DIR *s = NULL;
        if (lstat(sub, &st) != 0 || !S_ISDIR(st.st_mode) || !t_exists(obj) || !(s = opendir(sub)))
            continue;
        const struct dirent *f;
        while ((f = readdir(s))) {
            struct stat st;
            char path[4500];
            T_PRINT(path, "%s/%s", sub, f->d_name);
            if (f->d_name[0] == 'b' && strlen(f->d_name) == 11 && lstat(path, &st) == 0 &&
                S_ISREG(st.st_mode))
                total += (uint64_t)st.st_size;
        }
        closedir(s);
    }
    closedir(d);
    return total;
}

/* A path under this run's directory, freed at the end (scratch_free). */
static char *scratches[32];
static int nscratch;

static char *scratch(const char *name)
{
    T_ASSERT(nscratch < 32);
    char *p = malloc(4200);
    snprintf(p, 4200, "%s/%s", root, name);
    return scratches[nscratch++] = p;
}

static void scratch_free(void)
{
    while (nscratch > 0)
        free(scratches[--nscratch]);
    free(root);
}

static void wait_ok(pid_t pid)
{
    int status = 0;
    T_ASSERT(waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        T_FAIL("child %d %s %d", (int)pid, WIFSIGNALED(status) ? "died of signal" : "exited with",
               WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

/* ---- the tests ---- */

/* fetch, commit, read back; a second handle reads what the first wrote; a commit of the
 * wrong size is refused and leaves the block fetchable; bad arguments. */
static void test_roundtrip(void)
{
    char *dir = scratch("roundtrip");
    stoker__cache *c = cache_open(dir, 1 << 20);
    T_EQ_STR(stoker__cache_dir(c), dir);
    T_EQ_INT(stoker__cache_limit(c), 1 << 20);
    stoker__cache_obj *o = object(c, "\"etag-1\"", 2 * BS + 1808);
    T_ASSERT(object(c, "\"etag-1\"", 2 * BS + 1808) == o); /* the same key, the same object */
    T_EQ_INT(stoker__cache_block_bytes(o, 0), BS);
    T_EQ_INT(stoker__cache_block_bytes(o, 2), 1808);
    T_EQ_INT(stoker__cache_block_bytes(o, 3), 0);

    stoker__err err = {0};
    int fd = -1, tmp = -1;
    T_EQ_RC(stoker__cache_acquire(o, 3, &fd, &err), STOKER_E_INVALID);

    /* a short write is not published, and the fetch is given up */
    T_EQ_RC(stoker__cache_acquire(o, 0, &tmp, &err), STOKER__BLOCK_FETCH);
    T_EQ_INT(pwrite(tmp, "short", 5, 0), 5);
    T_EQ_RC(stoker__cache_commit(o, 0, tmp, &fd, &err), STOKER_E_CORRUPT);
    T_CONTAINS(err.msg, "5 bytes written");
    char odir[4300];
    object_dir(dir, "\"etag-1\"", odir, sizeof odir);
    T_ASSERT(!has_block(odir, 0));
    T_EQ_INT(count_names(odir, ".tmp."), 0);
    T_EQ_INT(count_names(odir, ".lock"), 0);

    /* a commit of a block this handle does not fetch */
    T_EQ_RC(stoker__cache_commit(o, 1, 0, &fd, &err), STOKER_E_INVALID);

    /* this handle fetches block 2: a second acquire waits for it */
    T_EQ_RC(stoker__cache_acquire(o, 2, &tmp, &err), STOKER__BLOCK_FETCH);
    int tmp2 = -1;
    T_EQ_RC(stoker__cache_acquire(o, 2, &tmp2, &err), STOKER__BLOCK_BUSY);
    stoker__cache_abort(o, 2, tmp);
    T_EQ_INT(count_names(odir, ".tmp."), 0);

    for (uint64_t b = 0; b < 3; b++)
        stoker__cache_release(o, b, put(o, b, 7));
    T_EQ_INT(count_names(odir, ".lock"), 0);
    T_EQ_INT(count_names(odir, ".tmp."), 0);
    for (uint64_t b = 0; b < 3; b++) {
        T_EQ_RC(stoker__cache_acquire(o, b, &fd, &err), STOKER__BLOCK_READY);
        check_fd(o, fd, b, 7);
        stoker__cache_release(o, b, fd);
    }
    stoker__cache_stats st;
    stoker__cache_stats_get(c, &st);
    T_EQ_INT(st.misses, 5);
    T_EQ_INT(st.hits, 3);
    T_EQ_INT(st.busy, 1);
    T_EQ_INT(st.bytes, 2 * BS + 1808);
    T_EQ_INT(st.evicted, 0);

    /* the object file says what the directory holds */
    char path[4400];
    T_PRINT(path, "%s/object", odir);
    size_t n = 0;
    char *text = t_read_file(path, &n);
    T_CONTAINS(text, "url " URL "\n");
    T_CONTAINS(text, "size 10000\n");
    T_CONTAINS(text, "block_size 4096\n");
    free(text);

    /* another handle (as another process would) finds the blocks, and counts them */
    stoker__cache *c2 = cache_open(dir, 1 << 20);
    stoker__cache_stats_get(c2, &st);
    T_EQ_INT(st.bytes, 2 * BS + 1808);
    stoker__cache_obj *o2 = object(c2, "\"etag-1\"", 2 * BS + 1808);
    T_EQ_RC(stoker__cache_acquire(o2, 1, &fd, &err), STOKER__BLOCK_READY);
    check_fd(o2, fd, 1, 7);
    stoker__cache_close(c2); /* closes the pin it still holds */

    /* arguments */
    stoker__cache *bad = NULL;
    T_EQ_RC(stoker__cache_open(&bad, dir, 0, &err), STOKER_E_INVALID);
    T_ASSERT(!bad);
    stoker__cache_obj *ob = NULL;
    T_EQ_RC(stoker__cache_object(c, URL, "x", 10, 0, &ob, &err), STOKER_E_INVALID);
    T_EQ_RC(stoker__cache_object(c, URL, "x\r\ny", 10, BS, &ob, &err), STOKER_E_INVALID);
    T_EQ_RC(stoker__cache_object(c, URL, "x", UINT64_MAX, 1, &ob, &err), STOKER_E_LIMIT);
    stoker__cache_close(c);
    stoker__cache_close(NULL);
}

/* A new validator is a new object: the old blocks are never read for it. */
static void test_validator(void)
{
    char *dir = scratch("validator");
    stoker__cache *c = cache_open(dir, 1 << 20);
    stoker__cache_obj *o1 = object(c, "\"v1\"", 4 * BS);
    stoker__cache_release(o1, 0, put(o1, 0, 1));
    stoker__cache_obj *o2 = object(c, "\"v2\"", 4 * BS);
    T_ASSERT(o1 != o2);
    stoker__err err = {0};
    int fd = -1;
    stoker__cache_release(o2, 0, put(o2, 0, 2)); /* put asserts FETCH, not READY */
    T_EQ_RC(stoker__cache_acquire(o1, 0, &fd, &err), STOKER__BLOCK_READY);
    check_fd(o1, fd, 0, 1);
    stoker__cache_release(o1, 0, fd);
    T_EQ_RC(stoker__cache_acquire(o2, 0, &fd, &err), STOKER__BLOCK_READY);
    check_fd(o2, fd, 0, 2);
    stoker__cache_release(o2, 0, fd);
    char d1[4300], d2[4300];
    object_dir(dir, "\"v1\"", d1, sizeof d1);
    object_dir(dir, "\"v2\"", d2, sizeof d2);
    T_ASSERT(strcmp(d1, d2) != 0);
    /* so is another size or block size */
    stoker__cache_obj *o3 = NULL;
    T_OK(stoker__cache_object(c, URL, "\"v1\"", 4 * BS, BS / 2, &o3, &err));
    T_EQ_RC(stoker__cache_acquire(o3, 0, &fd, &err), STOKER__BLOCK_FETCH);
    stoker__cache_abort(o3, 0, fd);
    stoker__cache_close(c);
}

/* Many blocks through a limit of 8: the bytes never pass it, and the least recently used
 * block goes first (an acquire makes a block recent). */
static void test_limit_lru(void)
{
    char *dir = scratch("lru");
    const uint64_t limit = 8 * BS;
    stoker__cache *c = cache_open(dir, limit);
    stoker__cache_obj *o = object(c, "\"lru\"", 64 * BS);
    char odir[4300];
    object_dir(dir, "\"lru\"", odir, sizeof odir);
    stoker__err err = {0};
    uint64_t order[64]; /* blocks present, least recently used first */
    int n = 0;
    for (uint64_t b = 0; b < 40; b++) {
        if (b == 20) { /* use the oldest block again: it becomes the newest */
            int fd = -1;
            const uint64_t first = order[0];
            T_EQ_RC(stoker__cache_acquire(o, first, &fd, &err), STOKER__BLOCK_READY);
            stoker__cache_release(o, first, fd);
            memmove(order, order + 1, (size_t)(n - 1) * sizeof *order);
            order[n - 1] = first;
            tick();
        }
        if (b == 20)
            continue;
        stoker__cache_release(o, b, put(o, b, 3));
        if (n == 8) {
            T_ASSERT(!has_block(odir, order[0])); /* the oldest went */
            memmove(order, order + 1, 7 * sizeof *order);
            n--;
        }
        order[n++] = b;
        for (int i = 0; i < n; i++)
            if (!has_block(odir, order[i]))
                T_FAIL("after block %" PRIu64 ": block %" PRIu64 " was evicted", b, order[i]);
        const uint64_t bytes = block_bytes(dir);
        if (bytes > limit)
            T_FAIL("after block %" PRIu64 ": %" PRIu64 " bytes, limit %" PRIu64, b, bytes, limit);
        tick();
    }
    stoker__cache_stats st;
    stoker__cache_stats_get(c, &st);
    T_EQ_INT(st.evicted, 39 - 8);
    T_EQ_INT(st.bytes, limit);
    T_EQ_INT(count_names(odir, ".lock"), 0);
    stoker__cache_close(c);
}

/* Pins of this process survive eviction; pins alone filling the limit make a commit wait
 * (STOKER__BLOCK_WAIT), publishing nothing and keeping the fetch, which commits once a pin
 * is released. */
static void test_pinned_here(void)
{
    char *dir = scratch("pinned");
    const uint64_t limit = 4 * BS;
    stoker__cache *c = cache_open(dir, limit);
    stoker__cache_obj *o = object(c, "\"p\"", 64 * BS);
    char odir[4300];
    object_dir(dir, "\"p\"", odir, sizeof odir);
    const int pin0 = put(o, 0, 5); /* kept: the oldest block, pinned */
    tick();
    for (uint64_t b = 1; b < 12; b++) {
        stoker__cache_release(o, b, put(o, b, 5));
        T_ASSERT(has_block(odir, 0));
        T_ASSERT(block_bytes(dir) <= limit);
        tick();
    }
    check_fd(o, pin0, 0, 5);

    /* pin every block present: 0, 9, 10, 11 */
    stoker__err err = {0};
    int pins[3];
    for (int i = 0; i < 3; i++)
        T_EQ_RC(stoker__cache_acquire(o, (uint64_t)(9 + i), &pins[i], &err), STOKER__BLOCK_READY);
    int tmp = -1, fd = -1;
    T_EQ_RC(stoker__cache_acquire(o, 20, &tmp, &err), STOKER__BLOCK_FETCH);
    write_block(o, tmp, 20, 5);
    T_EQ_RC(stoker__cache_commit(o, 20, tmp, &fd, &err), STOKER__BLOCK_WAIT);
    T_CONTAINS(err.msg, "limit 16384 bytes");
    T_CONTAINS(err.msg, "16384 of them in blocks that readers pin");
    T_ASSERT(fd < 0);
    T_ASSERT(!has_block(odir, 20));
    T_EQ_INT(count_names(odir, ".tmp."), 1); /* the fetch stays */
    T_EQ_INT(block_bytes(dir), limit);
    for (int i = 0; i < 3; i++)
        T_ASSERT(has_block(odir, (uint64_t)(9 + i)));
    int again = -1;
    T_EQ_RC(stoker__cache_acquire(o, 20, &again, &err), STOKER__BLOCK_BUSY);

    /* one pin released: the waiting block commits in its place */
    stoker__cache_release(o, 9, pins[0]);
    T_EQ_RC(stoker__cache_commit(o, 20, tmp, &fd, &err), STOKER__BLOCK_READY);
    check_fd(o, fd, 20, 5);
    stoker__cache_release(o, 20, fd);
    T_EQ_INT(count_names(odir, ".tmp."), 0);
    T_ASSERT(!has_block(odir, 9));
    T_ASSERT(has_block(odir, 0));

    /* a block larger than the whole limit */
    stoker__cache *small = cache_open(dir, BS / 2);
    stoker__cache_obj *os = object(small, "\"p\"", 64 * BS);
    T_EQ_RC(stoker__cache_acquire(os, 30, &tmp, &err), STOKER__BLOCK_FETCH);
    write_block(os, tmp, 30, 5);
    T_EQ_RC(stoker__cache_commit(os, 30, tmp, &fd, &err), STOKER_E_LIMIT);
    T_CONTAINS(err.msg, "over the limit");
    stoker__cache_close(small);
    T_ASSERT(has_block(odir, 0)); /* nothing was evicted for it */
    stoker__cache_close(c);
}

/* A fetch of handle o whose commit must wait; returns its temporary descriptor. */
static int fetch_waiting(stoker__cache_obj *o, uint64_t block)
{
    stoker__err err = {0};
    int tmp = -1, fd = -1;
    T_EQ_RC(stoker__cache_acquire(o, block, &tmp, &err), STOKER__BLOCK_FETCH);
    write_block(o, tmp, block, 7);
    T_EQ_RC(stoker__cache_commit(o, block, tmp, &fd, &err), STOKER__BLOCK_WAIT);
    T_ASSERT(fd < 0);
    return tmp;
}

/* Commits a waiting fetch: the answer, and the pin released when READY. */
static int commit_now(stoker__cache_obj *o, uint64_t block, int tmp, stoker__err *err)
{
    int fd = -1;
    const int rc = stoker__cache_commit(o, block, tmp, &fd, err);
    if (rc == STOKER__BLOCK_READY) {
        check_fd(o, fd, block, 7);
        stoker__cache_release(o, block, fd);
    }
    return rc;
}

/* Commits waiting for room take turns by age, across handles (as across processes): room
 * that readers let go goes to the handle that has waited longest, not to whichever commits
 * first; a handle that commits and waits still goes to the back; a claim whose process
 * died holds nothing back. */
static void test_turns(void)
{
    char *dir = scratch("turns");
    const uint64_t limit = 4 * BS;
    stoker__cache *cb = cache_open(dir, limit);
    stoker__cache_obj *b = object(cb, "\"t\"", 64 * BS);
    char waits[4300];
    T_PRINT(waits, "%s/waits", dir);
    stoker__err err = {0};
    int pins[4];
    for (int i = 0; i < 4; i++) /* b's readers pin the whole limit */
        pins[i] = put(b, (uint64_t)i, 5);
    /* opened now, a's count of the bytes is current (see cache.c, "Counting") */
    stoker__cache *ca = cache_open(dir, limit);
    stoker__cache_obj *a = object(ca, "\"t\"", 64 * BS);

    /* a waits first; room let go by b's reader goes to a, though b commits first */
    const int ta = fetch_waiting(a, 10);
    T_EQ_INT(count_names(waits, "w"), 1);
    stoker__cache_release(b, 0, pins[0]);
    const int tb = fetch_waiting(b, 11);
    int fd = -1;
    T_EQ_RC(stoker__cache_commit(b, 11, tb, &fd, &err), STOKER__BLOCK_WAIT);
    T_CONTAINS(err.msg, "4096 bytes are kept for commits (of any process) waiting longer");
    T_EQ_INT(count_names(waits, "w"), 2);
    T_EQ_RC(commit_now(a, 10, ta, &err), STOKER__BLOCK_READY);
    T_EQ_INT(count_names(waits, "w"), 1); /* a's claim went with its last waiting fetch */
    stoker__cache_release(b, 1, pins[1]);
    T_EQ_RC(commit_now(b, 11, tb, &err), STOKER__BLOCK_READY);
    T_EQ_INT(count_names(waits, "w"), 0);

    /* a handle that commits one fetch and still waits goes behind those that waited since */
    const int pin12 = put(b, 12, 5); /* b pins 2, 3, 12; 10 and 11 are unpinned */
    const int pin13 = put(b, 13, 5); /* evicts one */
    T_EQ_INT(block_bytes(dir), limit);
    const int t20 = fetch_waiting(a, 20), t21 = fetch_waiting(a, 21);
    const int t22 = fetch_waiting(b, 22);
    T_EQ_INT(count_names(waits, "w"), 2);
    stoker__cache_release(b, 2, pins[2]);
    int pin20 = -1; /* a's reader keeps it */
    T_EQ_RC(stoker__cache_commit(a, 20, t20, &pin20, &err), STOKER__BLOCK_READY); /* evicts 2 */
    stoker__cache_release(b, 3, pins[3]);
    T_EQ_RC(commit_now(a, 21, t21, &err), STOKER__BLOCK_WAIT); /* b waited longer now */
    T_CONTAINS(err.msg, "kept for commits (of any process) waiting longer");
    T_EQ_RC(commit_now(b, 22, t22, &err), STOKER__BLOCK_READY);
    stoker__cache_release(b, 12, pin12);
    stoker__cache_release(a, 20, pin20);
    T_EQ_RC(commit_now(a, 21, t21, &err), STOKER__BLOCK_READY);
    T_EQ_INT(count_names(waits, "w"), 0);

    /* a process that dies waiting leaves a claim nobody holds: the next commit removes it */
    stoker__cache_release(b, 13, pin13);
    int pinned[4];
    for (int i = 0; i < 4; i++)
        pinned[i] = put(b, (uint64_t)(30 + i), 5);
    const pid_t pid = fork();
    T_ASSERT(pid >= 0);
    if (pid == 0) {
        alarm(30);
        stoker__cache *cc = cache_open(dir, limit);
        stoker__cache_obj *co = object(cc, "\"t\"", 64 * BS);
        (void)fetch_waiting(co, 40);
        _exit(count_names(waits, "w") == 1 ? 0 : 3); /* dies waiting: no close */
    }
    wait_ok(pid);
    T_EQ_INT(count_names(waits, "w"), 1);
    stoker__cache_release(b, 30, pinned[0]);
    stoker__cache_release(a, 41, put(a, 41, 5));
    T_EQ_INT(count_names(waits, "w"), 0);
    T_EQ_INT(count_names(waits, "t"), 0);
    for (int i = 1; i < 4; i++)
        stoker__cache_release(b, (uint64_t)(30 + i), pinned[i]);
    stoker__cache_close(ca);
    stoker__cache_close(cb);
}

/* A block pinned by another process is not evicted while the parent commits; released,
 * it is the first to go. */
static void test_pinned_child(void)
{
    char *dir = scratch("pinned-child");
    const uint64_t limit = 4 * BS;
    int ready[2], done[2];
    T_ASSERT(pipe(ready) == 0 && pipe(done) == 0);
    stoker__cache *c = cache_open(dir, limit);
    stoker__cache_obj *o = object(c, "\"pc\"", 64 * BS);
    char odir[4300];
    object_dir(dir, "\"pc\"", odir, sizeof odir);
    for (uint64_t b = 0; b < 4; b++) {
        stoker__cache_release(o, b, put(o, b, 6));
        tick();
    }
    const pid_t pid = fork();
    T_ASSERT(pid >= 0);
    if (pid == 0) { /* a handle of its own, as another rank would have */
        alarm(30);
        stoker__cache *cc = cache_open(dir, limit);
        stoker__cache_obj *co = object(cc, "\"pc\"", 64 * BS);
        stoker__err err = {0};
        int fd = -1;
        char ch = 0;
        if (stoker__cache_acquire(co, 0, &fd, &err) != STOKER__BLOCK_READY ||
            write(ready[1], "p", 1) != 1 || read(done[0], &ch, 1) != 1)
            _exit(2);
        stoker__cache_release(co, 0, fd);
        stoker__cache_close(cc);
        _exit(0);
    }
    char ch = 0;
    T_EQ_INT(read(ready[0], &ch, 1), 1);
    tick();
    for (uint64_t b = 4; b < 10; b++) {
        stoker__cache_release(o, b, put(o, b, 6));
        T_ASSERT(has_block(odir, 0));
        T_ASSERT(block_bytes(dir) <= limit);
        tick();
    }
    T_EQ_INT(write(done[1], "d", 1), 1);
    wait_ok(pid);
    /* block 0's access time is older than every other block's now */
    stoker__cache_release(o, 10, put(o, 10, 6));
    T_ASSERT(!has_block(odir, 0));
    T_ASSERT(has_block(odir, 9));
    stoker__cache_close(c);
    close(ready[0]);
    close(ready[1]);
    close(done[0]);
    close(done[1]);
}

/* One process's (or thread's) pass over every block of the object, in its own order:
 * FETCH is answered by fetching (with a pause that widens the window), BUSY by asking
 * again shortly. Returns in fetched[] which blocks it fetched. */
#define SHARED_BLOCKS 240
static void pass(stoker__cache_obj *o, uint64_t seed, bool *fetched)
{
    uint64_t order[SHARED_BLOCKS];
    for (uint64_t i = 0; i < SHARED_BLOCKS; i++)
        order[i] = i;
    for (uint64_t i = SHARED_BLOCKS - 1; i > 0; i--) {
        const uint64_t j = t_rand(&seed) % (i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    stoker__err err = {0};
    for (int i = 0; i < SHARED_BLOCKS; i++) {
        const uint64_t b = order[i];
        for (;;) {
            int fd = -1;
            int rc = stoker__cache_acquire(o, b, &fd, &err);
            if (rc == STOKER__BLOCK_BUSY) {
                const struct timespec t = {0, 20000}; /* short, to ask often while it commits */
                nanosleep(&t, NULL);
                continue;
            }
            if (rc == STOKER__BLOCK_FETCH) {
                fetched[b] = true;
                write_block(o, fd, b, 9);
                sleep_ms(1);
                const int tmp = fd;
                rc = stoker__cache_commit(o, b, tmp, &fd, &err);
            }
            if (rc != STOKER__BLOCK_READY)
                T_FAIL("block %" PRIu64 ": %s (%s)", b, stoker_strerror(rc), err.msg);
            check_fd(o, fd, b, 9);
            stoker__cache_release(o, b, fd);
            break;
        }
    }
}

/* Four processes take the same blocks at once: each block is fetched exactly once. */
static void test_processes(void)
{
    char *dir = scratch("processes");
    enum { P = 4 };
    int fds[2];
    T_ASSERT(pipe(fds) == 0);
    pid_t pids[P];
    for (int p = 0; p < P; p++) {
        pids[p] = fork();
        T_ASSERT(pids[p] >= 0);
        if (pids[p] == 0) {
            alarm(60);
            stoker__cache *c = cache_open(dir, 1 << 30);
            stoker__cache_obj *o = object(c, "\"shared\"", SHARED_BLOCKS * BS - 100);
            bool fetched[SHARED_BLOCKS] = {0};
            pass(o, (uint64_t)p / 2 + 1, fetched); /* two by two in the same order */
            for (uint8_t b = 0; b < SHARED_BLOCKS; b++)
                if (fetched[b] && write(fds[1], &b, 1) != 1)
                    _exit(3);
            stoker__cache_close(c);
            _exit(0);
        }
    }
    close(fds[1]);
    int count[SHARED_BLOCKS] = {0};
    uint8_t b;
    while (read(fds[0], &b, 1) == 1)
        count[b]++;
    close(fds[0]);
    for (int p = 0; p < P; p++)
        wait_ok(pids[p]);
    for (int i = 0; i < SHARED_BLOCKS; i++)
        if (count[i] != 1)
            T_FAIL("block %d fetched %d times", i, count[i]);
}

typedef struct thread_arg {
    stoker__cache_obj *o;
    uint64_t seed;
    bool fetched[SHARED_BLOCKS];
} thread_arg;

static void *thread_pass(void *p)
{
    thread_arg *a = p;
    pass(a->o, a->seed, a->fetched);
    return NULL;
}

/* The same with four threads of one handle. */
static void test_threads(void)
{
    char *dir = scratch("threads");
    stoker__cache *c = cache_open(dir, 1 << 30);
    stoker__cache_obj *o = object(c, "\"threads\"", SHARED_BLOCKS * BS);
    enum { T = 4 };
    thread_arg args[T];
    pthread_t th[T];
    for (int i = 0; i < T; i++) {
        memset(&args[i], 0, sizeof args[i]);
        args[i].o = o;
        args[i].seed = (uint64_t)i + 100;
        T_ASSERT(pthread_create(&th[i], NULL, thread_pass, &args[i]) == 0);
    }
    for (int i = 0; i < T; i++)
        pthread_join(th[i], NULL);
    for (int b = 0; b < SHARED_BLOCKS; b++) {
        int n = 0;
        for (int i = 0; i < T; i++)
            n += args[i].fetched[b];
        if (n != 1)
            T_FAIL("block %d fetched %d times", b, n);
    }
    stoker__cache_stats st;
    stoker__cache_stats_get(c, &st);
    T_EQ_INT(st.misses, SHARED_BLOCKS);
    T_EQ_INT(st.hits, (T - 1) * SHARED_BLOCKS);
    stoker__cache_close(c);
}

/* A fetcher killed half-way through a block: the next acquire fetches it (the lock died
 * with the process) and the dead fetcher's temporary file is gone. */
static void test_killed(void)
{
    char *dir = scratch("killed");
    int ready[2];
    T_ASSERT(pipe(ready) == 0);
    const pid_t pid = fork();
    T_ASSERT(pid >= 0);
    if (pid == 0) {
        alarm(30);
        stoker__cache *c = cache_open(dir, 1 << 20);
        stoker__cache_obj *o = object(c, "\"k\"", 4 * BS);
        stoker__err err = {0};
        int tmp = -1;
        if (stoker__cache_acquire(o, 1, &tmp, &err) != STOKER__BLOCK_FETCH ||
            pwrite(tmp, "half a block", 12, 0) != 12 || write(ready[1], "f", 1) != 1)
            _exit(2);
        pause();
        _exit(3);
    }
    char ch = 0;
    T_EQ_INT(read(ready[0], &ch, 1), 1);
    T_ASSERT(kill(pid, SIGKILL) == 0);
    int status = 0;
    T_ASSERT(waitpid(pid, &status, 0) == pid);
    T_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    close(ready[0]);
    close(ready[1]);

    char odir[4300];
    object_dir(dir, "\"k\"", odir, sizeof odir);
    T_EQ_INT(count_names(odir, "b0000000001.tmp."), 1); /* what the child left */
    stoker__cache *c = cache_open(dir, 1 << 20);
    stoker__cache_obj *o = object(c, "\"k\"", 4 * BS);
    stoker__err err = {0};
    int tmp = -1, fd = -1;
    T_EQ_RC(stoker__cache_acquire(o, 1, &tmp, &err), STOKER__BLOCK_FETCH);
    T_EQ_INT(count_names(odir, "b0000000001.tmp."), 1); /* ours alone */
    char name[64];
    T_PRINT(name, "b0000000001.tmp.%d.", (int)getpid());
    T_EQ_INT(count_names(odir, name), 1);
    write_block(o, tmp, 1, 4);
    T_EQ_RC(stoker__cache_commit(o, 1, tmp, &fd, &err), STOKER__BLOCK_READY);
    check_fd(o, fd, 1, 4);
    stoker__cache_release(o, 1, fd);
    T_EQ_INT(count_names(odir, ".tmp."), 0);
    T_EQ_INT(count_names(odir, ".lock"), 0);
    stoker__cache_close(c);
}

static void old_times(const char *path)
{
    const struct timespec t[2] = {{1, 0}, {1, 0}}; /* 1970: first in line, if ever a victim */
    T_ASSERT(utimensat(AT_FDCWD, path, t, AT_SYMLINK_NOFOLLOW) == 0);
}

static void must_hold(const char *path, const char *text)
{
    size_t n = 0;
    char *got = t_read_file(path, &n);
    if (!got || n != strlen(text) || memcmp(got, text, n) != 0)
        T_FAIL("%s was changed or removed", path);
    free(got);
}

/* Files the cache did not write, in and around it, survive every eviction: a file at its
 * root, a file of another name in an object directory, a link named like a block (to a file
 * outside), a directory named like an object but without an `object` file, and a link named
 * like an object directory to a directory outside that looks like one. */
static void test_foreign(void)
{
    char *dir = scratch("foreign");
    char *out = scratch("outside");
    T_ASSERT(mkdir(out, 0755) == 0);
    const uint64_t limit = 2 * BS;
    stoker__cache *c = cache_open(dir, limit);
    stoker__cache_obj *o = object(c, "\"f\"", 64 * BS);
    char odir[4300], path[4500], target[4500];
    object_dir(dir, "\"f\"", odir, sizeof odir);

    uint8_t page[BS];
    memset(page, 'o', sizeof page);
    T_PRINT(target, "%s/b0000000000", out); /* outside, named like a block */
    t_write_file(target, page, sizeof page);
    old_times(target);
    T_PRINT(path, "%s/object", out);
    t_write_file(path, "url x\n", 6);

    T_PRINT(path, "%s/notes.txt", dir);
    t_write_file(path, "notes", 5);
    old_times(path);
    T_PRINT(path, "%s/x", odir);
    t_write_file(path, "x", 1);
    old_times(path);
    T_PRINT(path, "%s/b0000000099", odir);
    T_ASSERT(symlink(target, path) == 0);
    T_PRINT(path, "%s/00000000000000aa", dir);
    T_ASSERT(mkdir(path, 0755) == 0);
    T_PRINT(path, "%s/00000000000000aa/b0000000000", dir);
    t_write_file(path, "no object file here", 19);
    old_times(path);
    T_PRINT(path, "%s/00000000000000bb", dir);
    T_ASSERT(symlink(out, path) == 0);

    for (uint64_t b = 0; b < 12; b++) {
        stoker__cache_release(o, b, put(o, b, 8));
        T_ASSERT(block_bytes(dir) <= limit);
    }
    stoker__cache_stats st;
    stoker__cache_stats_get(c, &st);
    T_EQ_INT(st.evicted, 10);
    stoker__cache_close(c);

    T_PRINT(path, "%s/notes.txt", dir);
    must_hold(path, "notes");
    T_PRINT(path, "%s/x", odir);
    must_hold(path, "x");
    T_PRINT(path, "%s/00000000000000aa/b0000000000", dir);
    must_hold(path, "no object file here");
    struct stat st_link;
    T_PRINT(path, "%s/b0000000099", odir);
    T_ASSERT(lstat(path, &st_link) == 0 && S_ISLNK(st_link.st_mode));
    T_PRINT(path, "%s/00000000000000bb", dir);
    T_ASSERT(lstat(path, &st_link) == 0 && S_ISLNK(st_link.st_mode));
    size_t n = 0;
    uint8_t *got = t_read_file(target, &n);
    T_ASSERT(got && n == sizeof page && memcmp(got, page, n) == 0);
    free(got);
}

/* A directory with someone's files and no tag is refused; an empty one is adopted (tagged);
 * a missing one is created with its parents; a tag without the signature is refused. */
static void test_tag(void)
{
    char *dir = scratch("untagged");
    T_ASSERT(mkdir(dir, 0755) == 0);
    char path[4300];
    T_PRINT(path, "%s/thesis.tex", dir);
    t_write_file(path, "precious", 8);
    stoker__cache *c = NULL;
    stoker__err err = {0};
    T_EQ_RC(stoker__cache_open(&c, dir, 1 << 20, &err), STOKER_E_EXISTS);
    T_ASSERT(!c);
    T_CONTAINS(err.msg, "CACHEDIR.TAG");
    T_CONTAINS(err.msg, dir);
    must_hold(path, "precious");
    T_PRINT(path, "%s/CACHEDIR.TAG", dir);
    T_ASSERT(!t_exists(path));

    char *fresh = scratch("new/deeper/cache");
    c = cache_open(fresh, 1 << 20);
    stoker__cache_close(c);
    T_PRINT(path, "%s/CACHEDIR.TAG", fresh);
    size_t n = 0;
    char *tag = t_read_file(path, &n);
    T_ASSERT(tag && n > 44 &&
             memcmp(tag, "Signature: 8a477f597d28d172789f06886806bc55\n", 44) == 0);
    free(tag);
    c = cache_open(fresh, 1 << 20); /* tagged: opens again */
    stoker__cache_close(c);

    char *empty = scratch("empty");
    T_ASSERT(mkdir(empty, 0755) == 0);
    c = cache_open(empty, 1 << 20);
    stoker__cache_close(c);

    char *faked = scratch("faked");
    T_ASSERT(mkdir(faked, 0755) == 0);
    T_PRINT(path, "%s/CACHEDIR.TAG", faked);
    t_write_file(path, "Signature: not this one", 23);
    T_EQ_RC(stoker__cache_open(&c, faked, 1 << 20, &err), STOKER_E_EXISTS);
    T_CONTAINS(err.msg, "not a cache directory tag");
}

static void expect_default(const char *want)
{
    stoker__cache *c = cache_open(NULL, 1 << 20);
    T_EQ_STR(stoker__cache_dir(c), want);
    stoker__cache_close(c);
    c = cache_open("", 1 << 20);
    T_EQ_STR(stoker__cache_dir(c), want);
    stoker__cache_close(c);
    char path[4300];
    T_PRINT(path, "%s/CACHEDIR.TAG", want);
    T_ASSERT(t_exists(path));
}

/* $STOKER_CACHE_DIR, else $XDG_CACHE_HOME/stoker (absolute only), else
 * $HOME/.cache/stoker; an empty variable counts as unset. */
static void test_default_dir(void)
{
    char *env = scratch("env-dir"), *xdg = scratch("xdg"), *home = scratch("home");
    char want[4300];
    setenv("STOKER_CACHE_DIR", env, 1);
    setenv("XDG_CACHE_HOME", xdg, 1);
    setenv("HOME", home, 1);
    expect_default(env);
    setenv("STOKER_CACHE_DIR", "", 1);
    T_PRINT(want, "%s/stoker", xdg);
    expect_default(want);
    unsetenv("STOKER_CACHE_DIR");
    expect_default(want);
    setenv("XDG_CACHE_HOME", "relative/cache", 1);
    T_PRINT(want, "%s/.cache/stoker", home);
    expect_default(want);
    unsetenv("XDG_CACHE_HOME");
    expect_default(want);
    unsetenv("HOME");
    stoker__cache *c = NULL;
    stoker__err err = {0};
    T_EQ_RC(stoker__cache_open(&c, NULL, 1 << 20, &err), STOKER_E_INVALID);
    T_CONTAINS(err.msg, "STOKER_CACHE_DIR");
}

int main(void)
{
    root = t_mkdtemp("remote-cache");
    test_roundtrip();
    test_validator();
    test_limit_lru();
    test_pinned_here();
    test_pinned_child();
    test_turns();
    test_processes();
    test_threads();
    test_killed();
    test_foreign();
    test_tag();
    test_default_dir();
    t_rmrf(root);
    scratch_free();
    printf("ok\n");
    return 0;
}

#endif
