/* SPDX-License-Identifier: Apache-2.0 */
/* The block cache (cache.h): files under one directory, shared between processes through
 * flock(2) alone, so that a process that dies leaves nothing to clean up but, at most, a
 * temporary file that the lock file names.
 *
 * Locks. A handle's mutex guards the handle (its objects, its table of held descriptors,
 * its counters); file locks are taken while holding it, and always non-blocking, so no
 * process ever waits on another and no cycle of waits can form.
 *   - block file `bN`: LOCK_SH by every reader (a pin); LOCK_EX by an evictor, only to
 *     unlink it. flock locks belong to open file descriptions, so an evictor's LOCK_EX also
 *     fails on a block pinned by another descriptor of its own process.
 *   - `bN.lock`: LOCK_EX by the one fetcher of block N. Only a holder of that lock unlinks
 *     the path (on commit, abort, or by an evictor that took it), and every taker checks
 *     after locking that the path still names the inode it locked, so a lock taken on a
 *     file just unlinked is never mistaken for the block's lock.
 *   - the lock file's content names the fetcher's temporary file, written before that file
 *     is created: the next holder removes it when the fetcher died, without listing the
 *     directory.
 *
 * Counting. The handle keeps a running count of the block files' bytes: the last count of
 * the tree, plus its own commits, less its own evictions. Other processes' commits do not
 * show in it, so a handle also counts again once it has committed limit/64 bytes since its
 * last count: with P processes sharing a cache, the bytes may pass the limit by about
 * P * limit / 64 between counts. Eviction frees room for the block and for as many more
 * blocks of its size as fit in limit/64 bytes, so that a full cache is not counted again
 * at every commit (a small limit, under 64 blocks, frees just the block's room).
 *
 * Waiting in turn. A handle whose commit finds no room (STOKER__BLOCK_WAIT) files a claim:
 * a file `waits/wT.N.PID.S` (T its time in ns, twenty digits, so that names sort by age; N
 * the bytes it waits for), LOCK_EX while the handle waits. Every commit leaves room for
 * the claims older than its handle's own (all of them, for a handle that files none), so
 * room that readers let go goes to the handle that has waited longest, not to whichever
 * process commits first: without this, a process whose fetches complete at once takes
 * every block of room as it appears, and one that only retries now and then waits until
 * it gives up. A handle that commits and still waits files its claim again, at the back.
 * A claim is written under a `t` name and renamed once locked, so an unlocked `w` file is
 * one whose handle died: the next commit that finds it removes it. */
#include "remote/cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define TAG_NAME "CACHEDIR.TAG"
#define TAG_TMP "CACHEDIR.TAG.tmp." /* its temporary files, ignored when testing emptiness */
#define TAG_TEXT                                                                                   \
    "Signature: 8a477f597d28d172789f06886806bc55\n"                                                \
    "# This directory is stoker's cache of remote objects' blocks; its files may be deleted.\n"
#define TAG_SIGNATURE_LEN 43 /* "Signature: " and 32 hex digits */
#define OBJECT_NAME "object"
#define WAITS_NAME "waits"        /* the claims of handles waiting for room */
#define NAME_CAP 64               /* any file name of the cache, NUL included */
#define MAX_BLOCKS 10000000000ull /* block names have ten digits */

struct stoker__cache_obj {
    stoker__cache *c;
    stoker__cache_obj *next;
    int dirfd;
    char name[17]; /* 16 hex digits */
    char *url, *validator;
    uint64_t size, nblocks;
    uint32_t block_size;
};

/* A descriptor the handle holds for a caller: a pin (READY) or a fetch (FETCH). */
typedef struct held {
    stoker__cache_obj *o;
    uint64_t block;
    int fd;             /* pin: the block file, LOCK_SH; fetch: the temporary file */
    int lock_fd;        /* fetch: the `.lock` file, LOCK_EX; pin: -1 */
    char tmp[NAME_CAP]; /* fetch: the temporary file's name */
    bool waiting;       /* fetch: its last commit answered STOKER__BLOCK_WAIT */
} held;

struct stoker__cache {
    pthread_mutex_t mu; /* guards every field below, and the objects' lists */
    char *dir;
    int dirfd;
    uint64_t limit;
    uint64_t bytes;       /* see "Counting" above; also st.bytes */
    uint64_t since_count; /* bytes this handle committed since the last count */
    stoker__cache_stats st;
    stoker__cache_obj *objs;
    held *held;
    size_t nheld, cap_held;
    size_t nwaiting;      /* fetches whose last commit answered STOKER__BLOCK_WAIT */
    int claim_fd;         /* this handle's claim (see "Waiting in turn"), LOCK_EX; or -1 */
    char claim[NAME_CAP]; /* its name in waits/ */
};

/* Temporary files' names end in PID.N, N from this counter: unique across the handles of
 * a process, and across processes by the PID. */
static atomic_uint_fast64_t tmp_serial = 1;

/* ---- small helpers ---- */

static void block_name(char *buf, uint64_t block, const char *suffix)
{
    snprintf(buf, NAME_CAP, "b%010" PRIu64 "%s", block, suffix);
}

/* 'b' and ten digits: a block file's name. */
static bool parse_block(const char *s, uint64_t *block)
{
    if (s[0] != 'b')
        return false;
    uint64_t v = 0;
    for (int i = 1; i <= 10; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *block = v;
    return s[11] == '\0';
}

static bool is_object_name(const char *s)
{
    for (int i = 0; i < 16; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return s[16] == '\0';
}

/* Whether `name` in dirfd is the very file open as fd (never following a link). */
static bool same_file(int fd, int dirfd, const char *name)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 && fstatat(dirfd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
           a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

static int write_full(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        const ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads at most cap - 1 bytes from offset 0 and terminates them; -errno on failure. */
static ssize_t read_text(int fd, char *buf, size_t cap)
{
    size_t got = 0;
    while (got < cap - 1) {
        const ssize_t n = pread(fd, buf + got, cap - 1 - got, (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    return (ssize_t)got;
}

/* Writes `len` bytes to a fresh temporary file beside `name` in dirfd, then renames it over
 * `name`: readers see the whole file or none. */
static int write_atomic(int dirfd, const char *name, const void *data, size_t len)
{
    char tmp[NAME_CAP];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%" PRIuFAST64, name, (long)getpid(),
             atomic_fetch_add(&tmp_serial, 1));
    const int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -errno;
    int rc = write_full(fd, data, len);
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && renameat(dirfd, tmp, dirfd, name) != 0)
        rc = -errno;
    if (rc < 0)
        unlinkat(dirfd, tmp, 0);
    return rc;
}

/* 64-bit FNV-1a, finished with splitmix64's mixer so that every input bit reaches every
 * bit of the directory's name. */
static uint64_t fnv1a(uint64_t h, const void *data, size_t len)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t object_hash(const char *url, const char *validator, uint64_t size,
                            uint32_t block_size)
{
    uint8_t tail[12];
    stoker__put_u64(tail, size);
    stoker__put_u32(tail + 8, block_size);
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv1a(h, url, strlen(url) + 1); /* the NULs keep ("ab", "c") apart from ("a", "bc") */
    h = fnv1a(h, validator, strlen(validator) + 1);
    h = fnv1a(h, tail, sizeof tail);
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

/* ---- the table of held descriptors (under the mutex) ---- */

static held *held_add(stoker__cache *c)
{
    if (c->nheld == c->cap_held) {
        const size_t cap = c->cap_held ? c->cap_held * 2 : 16;
        held *h = stoker__realloc(c->held, cap * sizeof *h);
        if (!h)
            return NULL;
        c->held = h;
        c->cap_held = cap;
    }
    held *h = &c->held[c->nheld++];
    memset(h, 0, sizeof *h);
    h->fd = h->lock_fd = -1;
    return h;
}

static void held_remove(stoker__cache *c, held *h)
{
    *h = c->held[--c->nheld];
}

/* The entry of (o, block) whose descriptor is fd; fd < 0 matches any. fetch: a fetch's
 * entry, else a pin's. */
static held *held_find(stoker__cache *c, const stoker__cache_obj *o, uint64_t block, int fd,
                       bool fetch)
{
    for (size_t i = 0; i < c->nheld; i++) {
        held *h = &c->held[i];
        if (h->o == o && h->block == block && (fd < 0 || h->fd == fd) && (h->lock_fd >= 0) == fetch)
            return h;
    }
    return NULL;
}

/* ---- fetch locks ---- */

/* Removes the temporary file that a lock file names: its fetcher died (the caller holds
 * the lock, so no fetcher of that block lives). Only a name of the block's temporary files
 * is ever removed, whatever the lock file holds. */
static void drop_stale_tmp(int dirfd, int lock_fd, uint64_t block)
{
    char name[NAME_CAP], prefix[NAME_CAP];
    if (read_text(lock_fd, name, sizeof name) <= 0)
        return;
    name[strcspn(name, "\n")] = '\0';
    block_name(prefix, block, ".tmp.");
    const size_t n = strlen(prefix);
    if (strncmp(name, prefix, n) != 0 || name[n] == '\0' || strchr(name, '/'))
        return;
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
        unlinkat(dirfd, name, 0);
}

/* Gives a fetch lock up: the path first (its holder alone may unlink it), then the lock. */
static void lock_release(int dirfd, uint64_t block, int lock_fd)
{
    char name[NAME_CAP];
    block_name(name, block, ".lock");
    unlinkat(dirfd, name, 0);
    close(lock_fd);
}

/* Takes block's fetch lock: 0 (*lock_fd held, its path checked), STOKER__BLOCK_BUSY when
 * another descriptor holds it, or -errno. */
static int lock_take(const stoker__cache_obj *o, uint64_t block, int *lock_fd)
{
    char name[NAME_CAP];
    block_name(name, block, ".lock");
    for (int tries = 0; tries < 100; tries++) {
        const int fd = openat(o->dirfd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
            return -errno;
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            const int e = errno;
            close(fd);
            return e == EWOULDBLOCK ? STOKER__BLOCK_BUSY : -e;
        }
        if (same_file(fd, o->dirfd, name)) {
            *lock_fd = fd;
            return 0;
        }
        close(fd); /* a lock just released and unlinked by its holder: take the new one */
    }
    return STOKER__BLOCK_BUSY;
}

/* ---- blocks ---- */

/* Marks a block used now, for eviction's order. Best effort: a file of another owner may
 * refuse it, and its order then only suffers. */
static void touch(int fd)
{
    const struct timespec t[2] = {{.tv_nsec = UTIME_NOW}, {.tv_nsec = UTIME_OMIT}};
    futimens(fd, t);
}

/* Opens and pins block `block` if its file exists: 0 (*fd), -ENOENT when absent (or
 * unlinked while it was opened), STOKER__BLOCK_BUSY while an evictor holds it, or an
 * error with its message. */
static int block_open(stoker__cache_obj *o, uint64_t block, int *fd, stoker__err *err)
{
    stoker__cache *c = o->c;
    char name[NAME_CAP];
    block_name(name, block, "");
    const int bfd = openat(o->dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    const int e = bfd < 0 ? errno : 0;
    if (e == ENOENT)
        return -ENOENT;
    STOKER_RETURN_IF(e == ELOOP, err, STOKER_E_CORRUPT,
                     "cache %s/%s/%s: a symbolic link, not a block the cache wrote", c->dir,
                     o->name, name);
    STOKER_RETURN_IF(e != 0, err, -e, "cache %s/%s/%s: %s", c->dir, o->name, name,
                     stoker_strerror(-e));
    int rc = 0;
    struct stat st = {0};
    if (flock(bfd, LOCK_SH | LOCK_NB) != 0) {
        rc = errno == EWOULDBLOCK ? STOKER__BLOCK_BUSY
                                  : stoker__fail(err, -errno, "cache %s/%s/%s: flock: %s", c->dir,
                                                 o->name, name, stoker_strerror(-errno));
    } else if (!same_file(bfd, o->dirfd, name)) {
        rc = -ENOENT; /* evicted between the open and the lock */
    } else if (fstat(bfd, &st) == 0 && S_ISREG(st.st_mode) &&
               (uint64_t)st.st_size != stoker__cache_block_bytes(o, block) &&
               flock(bfd, LOCK_EX | LOCK_NB) == 0 && unlinkat(o->dirfd, name, 0) == 0) {
        rc = -ENOENT; /* a file of the wrong size (cut short on disk) nobody pins: fetched
                         again, as a block the cache never had */
    } else if (fstat(bfd, &st) != 0 || !S_ISREG(st.st_mode) ||
               (uint64_t)st.st_size != stoker__cache_block_bytes(o, block)) {
        rc = stoker__fail(
            err, STOKER_E_CORRUPT,
            "cache %s/%s/%s: %lld bytes, not the block's %" PRIu64 "; remove the file", c->dir,
            o->name, name, (long long)st.st_size, stoker__cache_block_bytes(o, block));
    }
    if (rc != 0) {
        close(bfd);
        return rc;
    }
    touch(bfd);
    *fd = bfd;
    return 0;
}

/* With the fetch lock held and the block absent: a fresh temporary file, named in the lock
 * file before it exists, so that a fetcher that dies leaves no file nobody knows of. */
static int fetch_start(stoker__cache_obj *o, uint64_t block, int lock_fd, int *fd, stoker__err *err)
{
    stoker__cache *c = o->c;
    drop_stale_tmp(o->dirfd, lock_fd, block);
    held *h = held_add(c);
    STOKER_RETURN_IF(!h, err, -ENOMEM, "cache %s: out of memory", c->dir);
    char suffix[40]; /* ".tmp.", a PID (11 characters at most), ".", 20 digits at most */
    snprintf(suffix, sizeof suffix, ".tmp.%ld.%" PRIuFAST64, (long)getpid(),
             atomic_fetch_add(&tmp_serial, 1));
    block_name(h->tmp, block, suffix);
    char line[NAME_CAP + 1];
    const int len = snprintf(line, sizeof line, "%s\n", h->tmp);
    int rc = ftruncate(lock_fd, 0) == 0 ? 0 : -errno;
    if (rc == 0)
        rc = write_full(lock_fd, line, (size_t)len);
    const int tfd =
        rc < 0 ? -1
               : openat(o->dirfd, h->tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (rc == 0 && tfd < 0)
        rc = -errno;
    if (rc < 0) {
        stoker__fail(err, rc, "cache %s/%s/%s: %s", c->dir, o->name, h->tmp, stoker_strerror(rc));
        held_remove(c, h);
        return rc;
    }
    h->o = o;
    h->block = block;
    h->fd = tfd;
    h->lock_fd = lock_fd;
    *fd = tfd;
    return 0;
}

static void wait_end(stoker__cache *c, held *h);

/* Ends a fetch without publishing: the temporary file, then the lock. */
static void fetch_drop(stoker__cache *c, held *h)
{
    wait_end(c, h);
    unlinkat(h->o->dirfd, h->tmp, 0);
    close(h->fd);
    lock_release(h->o->dirfd, h->block, h->lock_fd);
    held_remove(c, h);
}

/* ---- counting and eviction ---- */

typedef struct victim {
    struct timespec atime;
    uint64_t block, size;
    size_t dir; /* index into the count's directory names */
} victim;

typedef struct tree {
    char (*dirs)[17];
    size_t ndirs, cap_dirs;
    victim *v;
    size_t nv, cap_v;
    uint64_t total; /* bytes of the block files */
} tree;

static void tree_free(tree *t)
{
    stoker__free(t->dirs);
    stoker__free(t->v);
}

/* Makes room for one more element in an array of `cap`, holding n: the array, NULL when
 * out of memory (the old one stays valid). */
static void *grow(void *p, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return p;
    const size_t ncap = *cap ? *cap * 2 : 64;
    void *q = stoker__realloc(p, ncap * size);
    if (q)
        *cap = ncap;
    return q;
}

/* Adds the block files of object directory `name` to t. A directory without an `object`
 * file, a link, or anything the cache does not name is not the cache's, and is skipped. */
static int count_dir(stoker__cache *c, tree *t, const char *name)
{
    const int dfd = openat(c->dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return errno == EMFILE || errno == ENFILE || errno == ENOMEM ? -errno : 0;
    struct stat st;
    DIR *d = NULL;
    if (fstatat(dfd, OBJECT_NAME, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
        !(d = fdopendir(dfd))) {
        close(dfd);
        return 0;
    }
    int rc = 0;
    char(*dirs)[17] = grow(t->dirs, &t->cap_dirs, t->ndirs, sizeof *t->dirs);
    const size_t di = t->ndirs;
    if (dirs) {
        t->dirs = dirs;
        memcpy(t->dirs[t->ndirs++], name, 17);
    } else {
        rc = -ENOMEM;
    }
    const struct dirent *e;
    uint64_t block;
    while (rc == 0 && (e = readdir(d))) {
        if (!parse_block(e->d_name, &block) ||
            fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        victim *v = grow(t->v, &t->cap_v, t->nv, sizeof *t->v);
        if (!v) {
            rc = -ENOMEM;
            break;
        }
        t->v = v;
        t->v[t->nv++] = (victim){st.st_atim, block, (uint64_t)st.st_size, di};
        t->total += (uint64_t)st.st_size;
    }
    closedir(d);
    return rc;
}

/* Counts every block file of the cache (cache.h's layout, nothing else). */
static int count_tree(stoker__cache *c, tree *t, stoker__err *err)
{
    const int fd = openat(c->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        const int rc = -errno;
        if (fd >= 0)
            close(fd);
        return stoker__fail(err, rc, "cache %s: %s", c->dir, stoker_strerror(rc));
    }
    int rc = 0;
    const struct dirent *e;
    while (rc == 0 && (e = readdir(d)))
        if (is_object_name(e->d_name))
            rc = count_dir(c, t, e->d_name);
    closedir(d);
    STOKER_RETURN_IF(rc < 0, err, rc, "cache %s: counting the blocks: %s", c->dir,
                     stoker_strerror(rc));
    return 0;
}

static int victim_cmp(const void *pa, const void *pb)
{
    const victim *a = pa, *b = pb;
    if (a->atime.tv_sec != b->atime.tv_sec)
        return a->atime.tv_sec < b->atime.tv_sec ? -1 : 1;
    if (a->atime.tv_nsec != b->atime.tv_nsec)
        return a->atime.tv_nsec < b->atime.tv_nsec ? -1 : 1;
    return a->block < b->block ? -1 : a->block > b->block;
}

/* Frees the lock file of a block just evicted, if nobody fetches that block now. */
static void evict_lock(int dfd, uint64_t block)
{
    char name[NAME_CAP];
    block_name(name, block, ".lock");
    const int fd = openat(dfd, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0 && same_file(fd, dfd, name)) {
        drop_stale_tmp(dfd, fd, block);
        unlinkat(dfd, name, 0);
    }
    close(fd);
}

enum { EVICTED, PINNED, GONE };

/* Evicts one block file unless a reader pins it. dfd: its object directory. */
static int evict(int dfd, const victim *v)
{
    char name[NAME_CAP];
    block_name(name, v->block, "");
    const int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return errno == ENOENT ? GONE : PINNED; /* not removable: it stays counted */
    int rc = PINNED;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
        /* the path may name a newer file already: that one is not the one counted */
        if (!same_file(fd, dfd, name))
            rc = GONE;
        else if (unlinkat(dfd, name, 0) == 0)
            rc = EVICTED;
    }
    if (rc == EVICTED)
        evict_lock(dfd, v->block);
    close(fd);
    return rc;
}

/* Evicts the least recently used unpinned blocks of t, oldest first, until its bytes are
 * at or under `target`. */
static void evict_until(stoker__cache *c, tree *t, uint64_t target)
{
    qsort(t->v, t->nv, sizeof *t->v, victim_cmp);
    int dfd = -1;
    size_t dir = SIZE_MAX;
    for (size_t i = 0; i < t->nv && t->total > target; i++) {
        const victim *v = &t->v[i];
        if (v->dir != dir) {
            if (dfd >= 0)
                close(dfd);
            dir = v->dir;
            dfd = openat(c->dirfd, t->dirs[dir], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        const int r = dfd < 0 ? PINNED : evict(dfd, v);
        if (r != PINNED)
            t->total -= v->size;
        if (r == EVICTED)
            c->st.evicted++;
    }
    if (dfd >= 0)
        close(dfd);
}

static bool fits(uint64_t bytes, uint64_t need, uint64_t limit)
{
    return bytes <= limit && need <= limit - bytes;
}

/* ---- waiting in turn (see "Waiting in turn" above; all under the mutex) ---- */

/* The waits directory, opened; -1 when there is none (a cache written before it). */
static int waits_open(const stoker__cache *c)
{
    return openat(c->dirfd, WAITS_NAME, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

static void claim_drop(stoker__cache *c)
{
    if (c->claim_fd < 0)
        return;
    const int wfd = waits_open(c);
    if (wfd >= 0) { /* the path first, while the lock says it is ours */
        unlinkat(wfd, c->claim, 0);
        close(wfd);
    }
    close(c->claim_fd);
    c->claim_fd = -1;
    c->claim[0] = '\0';
}

/* Files this handle's claim for `need` bytes, at the back of the queue. Best effort: a
 * handle without one still commits, only without its turn. */
static void claim_file(stoker__cache *c, uint64_t need)
{
    claim_drop(c);
    const int wfd = waits_open(c);
    if (wfd < 0)
        return;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    const uint64_t ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
    char name[NAME_CAP], tmp[NAME_CAP];
    snprintf(name, sizeof name, "w%020" PRIu64 ".%" PRIu64 ".%ld.%" PRIuFAST64, ns, need,
             (long)getpid(), atomic_fetch_add(&tmp_serial, 1));
    snprintf(tmp, sizeof tmp, "t%s", name + 1);
    const int fd = openat(wfd, tmp, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0 && renameat(wfd, tmp, wfd, name) == 0) {
        c->claim_fd = fd;
        snprintf(c->claim, sizeof c->claim, "%s", name);
    } else if (fd >= 0) { /* another commit took the `t` file for a dead one's: it removes it */
        close(fd);
    }
    close(wfd);
}

/* The bytes that live claims older than this handle's (all, when it has none) wait for.
 * Claims whose handle died, and `t` files left by one that died while filing, go. */
static uint64_t claimed_before(stoker__cache *c)
{
    const int wfd = waits_open(c);
    DIR *d = wfd < 0 ? NULL : fdopendir(wfd); /* wfd is d's from here, as in count_dir */
    if (!d) {
        if (wfd >= 0)
            close(wfd);
        return 0;
    }
    uint64_t bytes = 0, ns, need;
    const struct dirent *e;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        char rest[NAME_CAP];
        if ((n[0] != 'w' && n[0] != 't') || strlen(n) >= NAME_CAP ||
            sscanf(n + 1, "%20" SCNu64 ".%" SCNu64 ".%63s", &ns, &need, rest) != 3 ||
            strcmp(n, c->claim) == 0 || (n[0] == 'w' && c->claim[0] && strcmp(n, c->claim) > 0))
            continue;
        const int fd = openat(wfd, n, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
            continue;
        if (flock(fd, (n[0] == 'w' ? LOCK_SH : LOCK_EX) | LOCK_NB) == 0)
            unlinkat(wfd, n, 0); /* nobody holds it: its handle died */
        else if (n[0] == 'w')
            bytes += need < c->limit - bytes ? need : c->limit - bytes;
        close(fd);
    }
    closedir(d);
    return bytes;
}

/* Fetch h's commit found no room: it waits, and its handle with it. */
static void wait_begin(stoker__cache *c, held *h, uint64_t need)
{
    if (!h->waiting) {
        h->waiting = true;
        c->nwaiting++;
    }
    if (c->claim_fd < 0)
        claim_file(c, need);
}

/* Fetch h no longer waits (committed or dropped); its handle's claim goes with its last
 * waiting fetch, and goes to the back when others wait still. */
static void wait_end(stoker__cache *c, held *h)
{
    if (!h->waiting)
        return;
    h->waiting = false;
    if (--c->nwaiting == 0)
        claim_drop(c);
    else if (c->claim_fd >= 0)
        claim_file(c, stoker__cache_block_bytes(h->o, h->block));
}

/* Makes room for `need` more bytes of block files (see "Counting" above), and for what
 * older claims wait for. */
static int make_room(stoker__cache *c, uint64_t need, stoker__err *err)
{
    STOKER_RETURN_IF(need > c->limit, err, STOKER_E_LIMIT,
                     "cache %s: a block of %" PRIu64 " bytes is over the limit of %" PRIu64, c->dir,
                     need, c->limit);
    const uint64_t before = claimed_before(c);
    const uint64_t slack = c->limit / 64;
    if (before == 0 && fits(c->bytes, need, c->limit) && c->since_count < slack)
        return 0;
    const uint64_t want = need + before > c->limit ? c->limit : need + before;
    tree t = {0};
    int rc = count_tree(c, &t, err);
    if (rc == 0 && !fits(t.total, want, c->limit)) {
        const uint64_t room = c->limit - want, extra = need ? slack / need * need : 0;
        evict_until(c, &t, room - (extra < room ? extra : room));
    }
    if (rc == 0) {
        c->bytes = t.total;
        c->since_count = 0;
        c->st.bytes = c->bytes;
    }
    if (rc == 0 && (need + before > c->limit || !fits(t.total, want, c->limit))) {
        char older[120] = "";
        if (before > 0)
            snprintf(older, sizeof older,
                     "; %" PRIu64 " bytes are kept for commits (of any process) waiting longer",
                     before);
        rc = stoker__fail(err, STOKER__BLOCK_WAIT,
                          "cache %s: limit %" PRIu64 " bytes, %" PRIu64
                          " of them in blocks that readers pin (this process or others)%s; no "
                          "room for a block of %" PRIu64,
                          c->dir, c->limit, t.total, older, need);
    }
    tree_free(&t);
    return rc;
}

uint64_t stoker__cache_free_bytes(const stoker__cache *c)
{
    struct statvfs v;
    return fstatvfs(c->dirfd, &v) == 0 ? (uint64_t)v.f_bavail * v.f_frsize : 0;
}

uint64_t stoker__cache_reclaim(stoker__cache *c, uint64_t want)
{
    pthread_mutex_lock(&c->mu);
    uint64_t got = stoker__cache_free_bytes(c);
    tree t = {0};
    stoker__err err = {0};
    if (got < want && count_tree(c, &t, &err) == 0) {
        qsort(t.v, t.nv, sizeof *t.v, victim_cmp);
        int dfd = -1;
        size_t dir = SIZE_MAX;
        for (size_t i = 0; i < t.nv && got < want; i++) {
            const victim *v = &t.v[i];
            if (v->dir != dir) {
                if (dfd >= 0)
                    close(dfd);
                dir = v->dir;
                dfd =
                    openat(c->dirfd, t.dirs[dir], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            }
            const int r = dfd < 0 ? PINNED : evict(dfd, v);
            if (r != PINNED)
                t.total -= v->size;
            if (r == EVICTED) {
                c->st.evicted++;
                got = stoker__cache_free_bytes(c);
            }
        }
        if (dfd >= 0)
            close(dfd);
        c->bytes = c->st.bytes = t.total;
        c->since_count = 0;
    }
    tree_free(&t);
    pthread_mutex_unlock(&c->mu);
    return got;
}

/* ---- opening ---- */

static int default_dir(char **out, stoker__err *err)
{
    const char *env = getenv("STOKER_CACHE_DIR");
    if (env && *env) {
        *out = stoker__strdup(env);
        STOKER_RETURN_IF(!*out, err, -ENOMEM, "cache: out of memory");
        return 0;
    }
    /* the XDG base directory rules ignore a relative XDG_CACHE_HOME */
    const char *base = getenv("XDG_CACHE_HOME"), *tail = "/stoker";
    if (!base || base[0] != '/') {
        base = getenv("HOME");
        tail = "/.cache/stoker";
    }
    STOKER_RETURN_IF(!base || !*base, err, STOKER_E_INVALID,
                     "cache: no directory (set STOKER_CACHE_DIR, XDG_CACHE_HOME or HOME)");
    const size_t n = strlen(base) + strlen(tail) + 1;
    *out = stoker__malloc(n);
    STOKER_RETURN_IF(!*out, err, -ENOMEM, "cache: out of memory");
    snprintf(*out, n, "%s%s", base, tail);
    return 0;
}

/* mkdir -p, mode 0700 (less the umask): the cache is its user's alone. */
static int mkdir_p(const char *path)
{
    char *p = stoker__strdup(path);
    if (!p)
        return -ENOMEM;
    int rc = 0;
    for (char *s = p + 1; rc == 0; s++) {
        const char ch = *s;
        if (ch != '/' && ch != '\0')
            continue;
        *s = '\0';
        if (mkdir(p, 0700) != 0 && errno != EEXIST)
            rc = -errno;
        *s = ch;
        if (ch == '\0')
            break;
    }
    stoker__free(p);
    return rc;
}

/* 1: the directory holds nothing (but the tag's temporary files); 0: it holds something. */
static int dir_empty(int dirfd)
{
    const int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        const int rc = -errno;
        if (fd >= 0)
            close(fd);
        return rc;
    }
    int empty = 1;
    const struct dirent *e;
    while (empty && (e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
            strncmp(e->d_name, TAG_TMP, strlen(TAG_TMP)) != 0)
            empty = 0;
    closedir(d);
    return empty;
}

/* Reads the directory's CACHEDIR.TAG: 0 when it is a cache directory tag, -ENOENT when
 * there is none, STOKER_E_EXISTS (a file of another kind there) or -errno, with messages. */
static int tag_read(stoker__cache *c, stoker__err *err)
{
    char got[TAG_SIGNATURE_LEN + 1];
    const int fd = openat(c->dirfd, TAG_NAME, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT)
        return -ENOENT;
    STOKER_RETURN_IF(fd < 0 && errno != ELOOP, err, -errno, "cache %s/" TAG_NAME ": %s", c->dir,
                     stoker_strerror(-errno));
    const ssize_t n = fd < 0 ? 0 : read_text(fd, got, sizeof got);
    if (fd >= 0)
        close(fd);
    STOKER_RETURN_IF(n != TAG_SIGNATURE_LEN || memcmp(got, TAG_TEXT, TAG_SIGNATURE_LEN), err,
                     STOKER_E_EXISTS,
                     "cache %s: its " TAG_NAME " is not a cache directory tag; the cache does "
                     "not adopt a directory holding other files",
                     c->dir);
    return 0;
}

/* Checks the directory's CACHEDIR.TAG, writing it into an empty directory. Processes that
 * open a new cache at once race here: the first to write the tag goes on to fill the
 * directory, so the others, finding it no longer empty, read the tag again. */
static int tag_check(stoker__cache *c, stoker__err *err)
{
    int rc = tag_read(c, err);
    if (rc != -ENOENT)
        return rc;
    const int empty = dir_empty(c->dirfd);
    STOKER_RETURN_IF(empty < 0, err, empty, "cache %s: %s", c->dir, stoker_strerror(empty));
    if (!empty) {
        rc = tag_read(c, err);
        STOKER_RETURN_IF(rc == -ENOENT, err, STOKER_E_EXISTS,
                         "cache %s: not empty and has no " TAG_NAME ", so it is not a stoker "
                         "cache; the cache never adopts a directory holding other files: name a "
                         "new or empty one",
                         c->dir);
        return rc;
    }
    rc = write_atomic(c->dirfd, TAG_NAME, TAG_TEXT, strlen(TAG_TEXT));
    STOKER_RETURN_IF(rc < 0, err, rc, "cache %s/" TAG_NAME ": %s", c->dir, stoker_strerror(rc));
    return 0;
}

int stoker__cache_open(stoker__cache **out, const char *dir, uint64_t limit, stoker__err *err)
{
    *out = NULL;
    STOKER_RETURN_IF(limit == 0, err, STOKER_E_INVALID, "cache: a limit of 0 bytes holds nothing");
    stoker__cache *c = stoker__calloc(1, sizeof *c);
    STOKER_RETURN_IF(!c, err, -ENOMEM, "cache: out of memory");
    pthread_mutex_init(&c->mu, NULL);
    c->dirfd = c->claim_fd = -1;
    c->limit = limit;
    int rc;
    tree t = {0};
    if (dir && *dir)
        c->dir = stoker__strdup(dir);
    else
        STOKER_FORWARD(default_dir(&c->dir, err));
    STOKER_FAIL_IF(!c->dir, err, -ENOMEM, "cache: out of memory");
    rc = mkdir_p(c->dir);
    STOKER_FAIL_IF(rc < 0, err, rc, "cache %s: cannot create it: %s", c->dir, stoker_strerror(rc));
    c->dirfd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    STOKER_FAIL_IF(c->dirfd < 0, err, -errno, "cache %s: %s", c->dir, stoker_strerror(-errno));
    struct stat st;
    /* a directory an older version left open to others is closed to them */
    if (fstat(c->dirfd, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 077) != 0)
        (void)fchmod(c->dirfd, st.st_mode & 0700);
    STOKER_FORWARD(tag_check(c, err));
    STOKER_FAIL_IF(mkdirat(c->dirfd, WAITS_NAME, 0700) != 0 && errno != EEXIST, err, -errno,
                   "cache %s/" WAITS_NAME ": %s", c->dir, stoker_strerror(-errno));
    STOKER_FORWARD(count_tree(c, &t, err));
    c->bytes = c->st.bytes = t.total;
    tree_free(&t);
    *out = c;
    return 0;
fail:
    tree_free(&t);
    stoker__cache_close(c);
    return rc;
}

void stoker__cache_close(stoker__cache *c)
{
    if (!c)
        return;
    claim_drop(c);
    while (c->nheld > 0) {
        held *h = &c->held[c->nheld - 1];
        if (h->lock_fd >= 0) {
            fetch_drop(c, h);
        } else {
            close(h->fd);
            held_remove(c, h);
        }
    }
    stoker__free(c->held);
    for (stoker__cache_obj *o = c->objs, *next; o; o = next) {
        next = o->next;
        close(o->dirfd);
        stoker__free(o->url);
        stoker__free(o->validator);
        stoker__free(o);
    }
    if (c->dirfd >= 0)
        close(c->dirfd);
    pthread_mutex_destroy(&c->mu);
    stoker__free(c->dir);
    stoker__free(c);
}

const char *stoker__cache_dir(const stoker__cache *c)
{
    return c->dir;
}

uint64_t stoker__cache_limit(const stoker__cache *c)
{
    return c->limit;
}

/* ---- objects ---- */

/* The `object` file's text: what the directory holds, for people and for the check that
 * two objects never share a directory. */
static char *object_text(const stoker__cache_obj *o)
{
    const size_t n = strlen(o->url) + strlen(o->validator) + 96;
    char *s = stoker__malloc(n);
    if (s)
        snprintf(s, n, "url %s\nvalidator %s\nsize %" PRIu64 "\nblock_size %" PRIu32 "\n", o->url,
                 o->validator, o->size, o->block_size);
    return s;
}

/* Writes the object's `object` file, or checks the one there names the same object. */
static int object_file(stoker__cache_obj *o, stoker__err *err)
{
    stoker__cache *c = o->c;
    char *want = object_text(o), *got = NULL;
    int rc = 0;
    STOKER_FAIL_IF(!want, err, -ENOMEM, "cache: out of memory");
    const size_t n = strlen(want);
    const int fd = openat(o->dirfd, OBJECT_NAME, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT) {
        rc = write_atomic(o->dirfd, OBJECT_NAME, want, n);
        STOKER_FAIL_IF(rc < 0, err, rc, "cache %s/%s/" OBJECT_NAME ": %s", c->dir, o->name,
                       stoker_strerror(rc));
        goto fail;
    }
    STOKER_FAIL_IF(fd < 0, err, -errno, "cache %s/%s/" OBJECT_NAME ": %s", c->dir, o->name,
                   stoker_strerror(-errno));
    got = stoker__malloc(n + 2);
    const ssize_t r = got ? read_text(fd, got, n + 2) : -ENOMEM;
    close(fd);
    STOKER_FAIL_IF(r < 0, err, (int)r, "cache %s/%s/" OBJECT_NAME ": %s", c->dir, o->name,
                   stoker_strerror((int)r));
    STOKER_FAIL_IF((size_t)r != n || memcmp(got, want, n) != 0, err, STOKER_E_CORRUPT,
                   "cache %s/%s: holds another object than %s (validator %s); remove the "
                   "directory",
                   c->dir, o->name, o->url, o->validator);
fail:
    stoker__free(want);
    stoker__free(got);
    return rc;
}

static bool printable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return false;
    return true;
}

static int cache_object(stoker__cache *c, const char *url, const char *validator, uint64_t size,
                        uint32_t block_size, stoker__cache_obj **out, stoker__err *err)
{
    *out = NULL;
    validator = validator ? validator : "";
    STOKER_RETURN_IF(!url || !*url || !printable(url) || !printable(validator), err,
                     STOKER_E_INVALID, "cache: a URL and a validator must be printable text");
    STOKER_RETURN_IF(block_size == 0, err, STOKER_E_INVALID, "cache %s: a block size of 0", url);
    const uint64_t nblocks = size / block_size + (size % block_size != 0);
    STOKER_RETURN_IF(nblocks > MAX_BLOCKS, err, STOKER_E_LIMIT,
                     "cache %s: %" PRIu64 " blocks of %" PRIu32 " bytes, more than ten digits name",
                     url, nblocks, block_size);
    char name[17];
    snprintf(name, sizeof name, "%016" PRIx64, object_hash(url, validator, size, block_size));

    pthread_mutex_lock(&c->mu);
    int rc = 0;
    stoker__cache_obj *o;
    for (o = c->objs; o; o = o->next)
        if (strcmp(o->name, name) == 0 && strcmp(o->url, url) == 0 &&
            strcmp(o->validator, validator) == 0 && o->size == size && o->block_size == block_size)
            goto done;
    o = stoker__calloc(1, sizeof *o);
    STOKER_FAIL_IF(!o, err, -ENOMEM, "cache: out of memory");
    o->c = c;
    o->dirfd = -1;
    memcpy(o->name, name, sizeof name);
    o->url = stoker__strdup(url);
    o->validator = stoker__strdup(validator);
    o->size = size;
    o->nblocks = nblocks;
    o->block_size = block_size;
    STOKER_FAIL_IF(!o->url || !o->validator, err, -ENOMEM, "cache: out of memory");
    STOKER_FAIL_IF(mkdirat(c->dirfd, name, 0700) != 0 && errno != EEXIST, err, -errno,
                   "cache %s/%s: %s", c->dir, name, stoker_strerror(-errno));
    o->dirfd = openat(c->dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    STOKER_FAIL_IF(o->dirfd < 0, err, -errno, "cache %s/%s: %s", c->dir, name,
                   stoker_strerror(-errno));
    STOKER_FORWARD(object_file(o, err));
    o->next = c->objs;
    c->objs = o;
done:
    pthread_mutex_unlock(&c->mu);
    *out = o;
    return 0;
fail:
    pthread_mutex_unlock(&c->mu);
    if (o) {
        if (o->dirfd >= 0)
            close(o->dirfd);
        stoker__free(o->url);
        stoker__free(o->validator);
        stoker__free(o);
    }
    return rc;
}

/* The object is named, hashed and written by its URL as shown (stoker_redact): no
 * credential reaches the cache, and none changes what the URL and the validator name. */
int stoker__cache_object(stoker__cache *c, const char *url, const char *validator, uint64_t size,
                         uint32_t block_size, stoker__cache_obj **out, stoker__err *err)
{
    *out = NULL;
    const size_t cap = url ? 2 * strlen(url) + 8 : 1; /* room for every "***" */
    char *shown = stoker__malloc(cap);
    STOKER_RETURN_IF(!shown, err, -ENOMEM, "cache: out of memory");
    const int rc = cache_object(c, url ? stoker_redact(url, shown, cap) : NULL, validator, size,
                                block_size, out, err);
    stoker__free(shown);
    return rc;
}

uint64_t stoker__cache_block_bytes(const stoker__cache_obj *o, uint64_t block)
{
    if (block >= o->nblocks)
        return 0;
    const uint64_t start = block * o->block_size;
    return o->size - start < o->block_size ? o->size - start : o->block_size;
}

/* ---- acquire, commit, abort, release ---- */

/* acquire under the mutex. A block can come and go between the steps (another process
 * commits, an evictor unlinks), so the steps repeat a few times before answering BUSY. */
static int acquire_locked(stoker__cache_obj *o, uint64_t block, int *fd, stoker__err *err)
{
    stoker__cache *c = o->c;
    if (held_find(c, o, block, -1, true))
        return STOKER__BLOCK_BUSY; /* this handle fetches it */
    for (int tries = 0; tries < 8; tries++) {
        int rc = block_open(o, block, fd, err);
        if (rc == 0) {
            held *h = held_add(c);
            if (!h) {
                close(*fd);
                return stoker__fail(err, -ENOMEM, "cache %s: out of memory", c->dir);
            }
            h->o = o;
            h->block = block;
            h->fd = *fd;
            return STOKER__BLOCK_READY;
        }
        if (rc != -ENOENT)
            return rc;
        int lock_fd = -1;
        rc = lock_take(o, block, &lock_fd);
        STOKER_RETURN_IF(rc < 0, err, rc, "cache %s/%s: block %" PRIu64 "'s lock: %s", c->dir,
                         o->name, block, stoker_strerror(rc));
        if (rc == STOKER__BLOCK_BUSY)
            return rc;
        char name[NAME_CAP];
        struct stat st;
        block_name(name, block, "");
        if (fstatat(o->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            rc = fetch_start(o, block, lock_fd, fd, err);
            if (rc < 0)
                lock_release(o->dirfd, block, lock_fd);
            return rc < 0 ? rc : STOKER__BLOCK_FETCH;
        }
        lock_release(o->dirfd, block, lock_fd); /* committed meanwhile: read it */
    }
    return STOKER__BLOCK_BUSY;
}

int stoker__cache_acquire(stoker__cache_obj *o, uint64_t block, int *fd, stoker__err *err)
{
    *fd = -1;
    STOKER_RETURN_IF(block >= o->nblocks, err, STOKER_E_INVALID,
                     "cache: block %" PRIu64 " of %s, which has %" PRIu64, block, o->url,
                     o->nblocks);
    stoker__cache *c = o->c;
    pthread_mutex_lock(&c->mu);
    const int rc = acquire_locked(o, block, fd, err);
    if (rc == STOKER__BLOCK_READY)
        c->st.hits++;
    else if (rc == STOKER__BLOCK_FETCH)
        c->st.misses++;
    else if (rc == STOKER__BLOCK_BUSY)
        c->st.busy++;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* commit under the mutex; h is this fetch. The block is pinned (a read-only descriptor
 * with LOCK_SH, taken on the temporary file) before the rename publishes it, so no evictor
 * can take it between the two. */
static int commit_locked(held *h, int *fd, stoker__err *err)
{
    stoker__cache_obj *o = h->o;
    stoker__cache *c = o->c;
    const uint64_t need = stoker__cache_block_bytes(o, h->block);
    char name[NAME_CAP];
    block_name(name, h->block, "");
    int rc = 0, pin = -1;
    struct stat st;
    STOKER_FAIL_IF(fstat(h->fd, &st) != 0, err, -errno, "cache %s/%s/%s: %s", c->dir, o->name,
                   h->tmp, stoker_strerror(-errno));
    STOKER_FAIL_IF((uint64_t)st.st_size != need, err, STOKER_E_CORRUPT,
                   "cache %s/%s: block %" PRIu64 " of %s has %lld bytes written, not %" PRIu64,
                   c->dir, o->name, h->block, o->url, (long long)st.st_size, need);
    rc = make_room(c, need, err);
    if (rc == STOKER__BLOCK_WAIT) {
        wait_begin(c, h, need);
        return rc; /* the fetch stays: commit again once readers unpin */
    }
    STOKER_FORWARD(rc);
    pin = openat(o->dirfd, h->tmp, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    STOKER_FAIL_IF(pin < 0 || flock(pin, LOCK_SH | LOCK_NB) != 0, err, -errno, "cache %s/%s/%s: %s",
                   c->dir, o->name, h->tmp, stoker_strerror(-errno));
    touch(pin);
    STOKER_FAIL_IF(renameat(o->dirfd, h->tmp, o->dirfd, name) != 0, err, -errno,
                   "cache %s/%s/%s: %s", c->dir, o->name, name, stoker_strerror(-errno));
    c->bytes += need;
    c->since_count += need;
    c->st.bytes = c->bytes;
    close(h->fd);
    lock_release(o->dirfd, h->block, h->lock_fd);
    wait_end(c, h);
    h->fd = pin; /* the fetch's entry becomes the pin's */
    h->lock_fd = -1;
    h->tmp[0] = '\0';
    *fd = pin;
    return STOKER__BLOCK_READY;
fail:
    if (pin >= 0)
        close(pin);
    fetch_drop(c, h);
    return rc;
}

int stoker__cache_commit(stoker__cache_obj *o, uint64_t block, int tmp_fd, int *fd,
                         stoker__err *err)
{
    *fd = -1;
    stoker__cache *c = o->c;
    pthread_mutex_lock(&c->mu);
    held *h = held_find(c, o, block, tmp_fd, true);
    const int rc = h ? commit_locked(h, fd, err)
                     : stoker__fail(err, STOKER_E_INVALID,
                                    "cache: block %" PRIu64 " of %s is not being fetched with "
                                    "descriptor %d",
                                    block, o->url, tmp_fd);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void stoker__cache_abort(stoker__cache_obj *o, uint64_t block, int tmp_fd)
{
    stoker__cache *c = o->c;
    pthread_mutex_lock(&c->mu);
    held *h = held_find(c, o, block, tmp_fd, true);
    if (h)
        fetch_drop(c, h);
    pthread_mutex_unlock(&c->mu);
}

void stoker__cache_release(stoker__cache_obj *o, uint64_t block, int fd)
{
    stoker__cache *c = o->c;
    pthread_mutex_lock(&c->mu);
    held *h = held_find(c, o, block, fd, false);
    if (h) {
        close(h->fd);
        held_remove(c, h);
    }
    pthread_mutex_unlock(&c->mu);
}

void stoker__cache_discard(stoker__cache_obj *o, uint64_t block, int fd)
{
    stoker__cache *c = o->c;
    pthread_mutex_lock(&c->mu);
    held *h = held_find(c, o, block, fd, false);
    if (h) {
        char name[NAME_CAP];
        block_name(name, block, "");
        /* not a newer copy another process committed since this one was pinned */
        if (same_file(h->fd, o->dirfd, name) && unlinkat(o->dirfd, name, 0) == 0) {
            const uint64_t n = stoker__cache_block_bytes(o, block);
            c->bytes -= n < c->bytes ? n : c->bytes;
            c->st.bytes = c->bytes;
            evict_lock(o->dirfd, block);
        }
        close(h->fd);
        held_remove(c, h);
    }
    pthread_mutex_unlock(&c->mu);
}

void stoker__cache_block_path(const stoker__cache_obj *o, uint64_t block, char *buf, size_t cap)
{
    char name[NAME_CAP];
    block_name(name, block, "");
    snprintf(buf, cap, "%s/%s/%s", o->c->dir, o->name, name);
}

void stoker__cache_stats_get(stoker__cache *c, stoker__cache_stats *s)
{
    pthread_mutex_lock(&c->mu);
    *s = c->st;
    pthread_mutex_unlock(&c->mu);
}
