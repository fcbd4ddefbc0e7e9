/* SPDX-License-Identifier: Apache-2.0 */
/* The remote transport (object.h): objects read by byte range through the block cache.
 *
 * Locking: one mutex (mu) guards the blocks' states, the window and the pins; a client's
 * thread (or one of its writers) takes it to publish a finished block, never while the
 * clients' own locks are held by this side (requests are submitted after mu is released).
 * A reader holds a ready block without it (hold_now, try_unpin): records read from the
 * cache would otherwise all pass through that one lock, twice each. */
#include "remote/object.h"

#include "common/config.h"
#include "remote/cache.h"
#include "remote/http.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define LOOK 4096u                 /* batches the read-ahead may run before the readers */
#define OPEN_PARALLEL 64u          /* requests queued at once while opening */
#define FAIL_HOLD_NS 1000000000ull /* a failed block fails its readers this long */
#define MAX_CLIENTS 16u            /* HTTP clients (a thread each) at most: fetch_clients' range */
#define ROOM_WAIT_NS                                                                               \
    60000000000ull /* a fetched block waits this long for room in the cache                        \
                      while readers (of any process) pin the rest */
/* Times a block is fetched again after a full disk made room by eviction, before it fails */
#define NOSPC_TRIES 4
#define HIT_PINS                                                                                   \
    256u /* blocks found in the cache that the read-ahead may pin ahead: a                         \
            descriptor each */

/* B_DROPPING: being unpinned (try_unpin), seen only by readers without the lock */
enum { B_NONE = 0, B_FETCHING, B_BUSY, B_READY, B_FAILED, B_DROPPING };

typedef struct rblock {
    int fd;                 /* the block file, pinned (B_READY) */
    _Atomic uint8_t st;     /* changed under mu; read by readers without it (hold_now) */
    bool listed;            /* in s->pinned */
    _Atomic uint32_t users; /* readers between their hold and their release */
    _Atomic uint64_t need;  /* the last batch seq the read-ahead found needing it, + 1 */
    int rc;                 /* B_FAILED */
    uint64_t failed_at;     /* when it failed: readers get the failure for FAIL_HOLD_NS,
                               then a reader asks again */
    uint8_t nospc_tries;    /* fetched again after the disk was full, since its last
                               success: other transfers may take the room an eviction made */
    bool hit;               /* pinned ready from the cache: counted in hit_bytes */
    char *msg;
} rblock;

struct stoker__robj {
    stoker__robjs *s;
    char *url;
    char *shown; /* url as shown (stoker_redact) */
    uint64_t size, nblocks;
    char validator[200];    /* the ETag, or Last-Modified and size */
    char etag[128];         /* sent as If-Match; "" when the server gives none */
    stoker__cache_obj *obj; /* NULL: read only by stoker__robj_get_all */
    rblock *blocks;
};

typedef struct pending {
    stoker__http_req req;
    stoker__robjs *r;
    stoker__robj *o;
    uint64_t block;
    int tmp_fd;
    uint64_t trace;   /* the block's fetch mark, from submit to fetched */
    uint64_t room_by; /* waiting for room in the cache (r->waiting) until this time */
} pending;

struct stoker__robjs {
    char *path;                      /* the data set's URL, for messages */
    stoker__http *http[MAX_CLIENTS]; /* blocks go to each in turn; metadata to the first */
    uint32_t nhttp;
    _Atomic uint32_t next_http;
    stoker__cache *cache;
    uint32_t block_size;
    uint64_t window;
    uint64_t now_max; /* the oldest batch's blocks may pin this much, beyond the window:
                         half the cache's limit (the rest for the readers' own asks and
                         for other processes sharing the cache); so may blocks found in
                         the cache, up to HIT_PINS blocks (a descriptor each) */
    uint64_t hit_max; /* now_max, or HIT_PINS blocks if fewer */
    uint64_t (*trace_start)(void);
    void (*trace_end)(uint64_t);

    pthread_mutex_t mu;
    pthread_cond_t cond; /* a block changed state; the window or the order changed */
    pthread_t thread;
    bool thread_started, stop;
    bool following;
    bool interrupted;    /* readers give up instead of waiting (a stopping loader) */
    stoker__robj **objs; /* every object (mu) */
    size_t nobjs, cap_objs;
    stoker__rahead fut;
    stoker__rextent *ext;  /* the batch the read-ahead looks at */
    uint64_t scan;         /* the batch seq the read-ahead looks at */
    uint64_t scan_j;       /* ... and the extent within it */
    uint64_t scan_n;       /* that batch's extents (0: not drawn yet) */
    _Atomic uint64_t done; /* the readers began batch `done` (need and done are written
                              under mu, read by drop_block without it) */
    uint64_t pinned_bytes; /* of blocks started and not yet unpinned, hits aside (the
                              window's measure: bytes fetched ahead) */
    uint64_t hit_bytes;    /* of blocks pinned ready from the cache: they cost no transfer,
                              so they take no room in the window, only in now_max */
    uint64_t busy_blocks;  /* blocks in B_BUSY (the read-ahead polls them) */
    struct pinned {
        stoker__robj *o;
        uint64_t block;
    } * pinned;
    size_t npinned, cap_pinned;

    uint64_t nospc_want; /* bytes a full disk is freed to: what must be in flight */
    pending **waiting;   /* fetched blocks waiting for room in the cache (mu) */
    size_t nwaiting, cap_waiting;

    atomic_uint_fast64_t wait_ns;
    atomic_uint_fast64_t fetched; /* blocks this process fetched */
};

/* ---- blocks ---- */

static uint64_t block_bytes(const stoker__robjs *r, const stoker__robj *sh, uint64_t b)
{
    const uint64_t start = b * r->block_size;
    return sh->size - start < r->block_size ? sh->size - start : r->block_size;
}

static void fail_block(rblock *k, int rc, const char *msg)
{
    k->failed_at = stoker__now_ns();
    k->st = B_FAILED;
    k->rc = rc;
    stoker__free(k->msg);
    k->msg = stoker__strdup(msg);
}

static void pin_list(stoker__robjs *r, stoker__robj *sh, uint64_t b)
{
    rblock *k = &sh->blocks[b];
    if (k->listed)
        return;
    if (r->npinned == r->cap_pinned) {
        const size_t cap = r->cap_pinned ? r->cap_pinned * 2 : 64;
        void *p = stoker__realloc(r->pinned, cap * sizeof *r->pinned);
        if (!p)
            return; /* unlisted: released when the set closes */
        r->pinned = p;
        r->cap_pinned = cap;
    }
    r->pinned[r->npinned].o = sh;
    r->pinned[r->npinned].block = b;
    r->npinned++;
    k->listed = true;
}

static void fetched(stoker__http_req *req, void *ctx);

/* Lists p among the fetched blocks waiting for room (mu held); false when out of memory. */
static bool wait_add(stoker__robjs *r, pending *p)
{
    if (r->nwaiting == r->cap_waiting) {
        const size_t cap = r->cap_waiting ? r->cap_waiting * 2 : 16;
        pending **w = stoker__realloc(r->waiting, cap * sizeof *w);
        if (!w)
            return false;
        r->waiting = w;
        r->cap_waiting = cap;
    }
    r->waiting[r->nwaiting++] = p;
    return true;
}

/* The message of a block that a full file system kept out of the cache. */
static void full_message(stoker__robjs *r, int rc, uint64_t bytes, char *msg, size_t cap)
{
    snprintf(msg, cap,
             "the block cache %s: its file system is full (%s): %llu bytes free after "
             "evicting every block no reader pins, and a block takes %llu: free space "
             "there, or give cache_dir on a larger disk or a smaller cache_limit",
             stoker__cache_dir(r->cache), stoker_strerror(rc),
             (unsigned long long)stoker__cache_free_bytes(r->cache), (unsigned long long)bytes);
}

/* Moves block b of sh on from B_NONE or B_BUSY (mu held): to B_READY from the cache, to
 * B_FETCHING (*out: the request to submit once mu is released), B_BUSY, or B_FAILED. */
static void start_block(stoker__robjs *r, stoker__robj *sh, uint64_t b, pending **out)
{
    rblock *k = &sh->blocks[b];
    *out = NULL;
    if (k->st != B_NONE && k->st != B_BUSY)
        return;
    const bool was_busy = k->st == B_BUSY;
    if (!was_busy)
        r->pinned_bytes += block_bytes(r, sh, b); /* until unpinned, or failed */
    stoker__err err = {0};
    int fd = -1;
    const int rc = stoker__cache_acquire(sh->obj, b, &fd, &err);
    if (was_busy && rc != STOKER__BLOCK_BUSY)
        r->busy_blocks--;
    if (rc == STOKER__BLOCK_READY) {
        k->fd = fd;
        k->st = B_READY;
        pin_list(r, sh, b);
        if (!was_busy) { /* no transfer: a hit, outside the window */
            k->hit = true;
            r->pinned_bytes -= block_bytes(r, sh, b);
            r->hit_bytes += block_bytes(r, sh, b);
        }
    } else if (rc == STOKER__BLOCK_BUSY) {
        if (!was_busy)
            r->busy_blocks++;
        k->st = B_BUSY;
    } else if (rc == STOKER__BLOCK_FETCH) {
        pending *p = stoker__calloc(1, sizeof *p);
        if (!p) {
            stoker__cache_abort(sh->obj, b, fd);
            fail_block(k, -ENOMEM, "out of memory");
            r->pinned_bytes -= block_bytes(r, sh, b);
            return;
        }
        p->r = r;
        p->o = sh;
        p->block = b;
        p->tmp_fd = fd;
        p->req.url = sh->url;
        p->req.offset = b * r->block_size;
        p->req.length = block_bytes(r, sh, b);
        p->req.if_match = sh->etag[0] ? sh->etag : NULL;
        p->req.fd = fd;
        p->req.done = fetched;
        p->req.ctx = p;
        k->st = B_FETCHING;
        *out = p;
    } else if ((rc == -ENOSPC || rc == -EDQUOT) && k->nospc_tries < NOSPC_TRIES &&
               stoker__cache_reclaim(r->cache, r->nospc_want) >= block_bytes(r, sh, b)) {
        /* the disk filled before the fetch could begin (its temporary file): evicting what
         * no reader pins made room, so the block is started once more */
        k->nospc_tries++;
        r->pinned_bytes -= block_bytes(r, sh, b);
        k->st = B_NONE;
        start_block(r, sh, b, out);
    } else if (rc == -ENOSPC || rc == -EDQUOT) {
        char msg[STOKER_ERRMSG_CAP];
        full_message(r, rc, block_bytes(r, sh, b), msg, sizeof msg);
        fail_block(k, rc, msg);
        r->pinned_bytes -= block_bytes(r, sh, b);
    } else {
        fail_block(k, rc, err.msg);
        r->pinned_bytes -= block_bytes(r, sh, b);
    }
}

static void submit(stoker__robjs *r, pending *p)
{
    if (!p)
        return;
    const uint32_t c = atomic_fetch_add_explicit(&r->next_http, 1, memory_order_relaxed);
    p->trace = r->trace_start ? r->trace_start() : 0;
    if (stoker__http_submit(r->http[c % r->nhttp], &p->req) < 0) {
        p->req.rc = STOKER_E_INVALID;
        fetched(&p->req, p);
    }
}

/* The client finished a block's transfer (its thread, or a writer's). */
static void fetched(stoker__http_req *req, void *ctx)
{
    pending *p = ctx;
    stoker__robjs *r = p->r;
    if (r->trace_end)
        r->trace_end(p->trace);
    stoker__robj *sh = p->o;
    stoker__err err = {0};
    int fd = -1, rc = req->rc;
    if (rc == 0)
        rc = stoker__cache_commit(sh->obj, p->block, p->tmp_fd, &fd, &err);
    else
        stoker__cache_abort(sh->obj, p->block, p->tmp_fd);
    if (rc == STOKER__BLOCK_WAIT) { /* committed later by the read-ahead (commit_waiting) */
        pthread_mutex_lock(&r->mu);
        p->room_by = stoker__now_ns() + ROOM_WAIT_NS;
        if (wait_add(r, p)) {
            pthread_cond_broadcast(&r->cond);
            pthread_mutex_unlock(&r->mu);
            return;
        }
        pthread_mutex_unlock(&r->mu);
        stoker__cache_abort(sh->obj, p->block, p->tmp_fd);
        rc = -ENOMEM;
        snprintf(err.msg, sizeof err.msg, "out of memory");
    }
    const bool full = rc == -ENOSPC || rc == -EDQUOT;
    const uint64_t bytes = block_bytes(r, sh, p->block);
    /* the disk is full: evict what no reader pins, then fetch the block once more */
    const uint64_t avail = full ? stoker__cache_reclaim(r->cache, r->nospc_want) : 0;
    pending *again = NULL;
    pthread_mutex_lock(&r->mu);
    rblock *k = &sh->blocks[p->block];
    if (rc == 0) {
        k->fd = fd;
        k->st = B_READY;
        k->nospc_tries = 0;
        pin_list(r, sh, p->block);
        atomic_fetch_add_explicit(&r->fetched, 1, memory_order_relaxed);
    } else if (full && k->nospc_tries < NOSPC_TRIES && avail >= bytes && !r->stop) {
        k->nospc_tries++;
        k->st = B_NONE;
        r->pinned_bytes -= bytes;
        start_block(r, sh, p->block, &again);
    } else {
        char msg[STOKER_ERRMSG_CAP];
        if (full)
            full_message(r, rc, bytes, msg, sizeof msg);
        else
            snprintf(msg, sizeof msg, "%s", req->rc < 0 ? req->msg : err.msg);
        fail_block(k, rc, msg);
        r->pinned_bytes -= bytes;
    }
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->mu);
    stoker__free(p);
    submit(r, again);
}

static bool try_unpin(stoker__robjs *r, stoker__robj *sh, uint64_t b);

/* Commits the fetched blocks waiting for room, now that readers may have unpinned some
 * (mu held); those past their ROOM_WAIT_NS, or all of them when the source stops, are given
 * up and fail. */
static void commit_waiting(stoker__robjs *r)
{
    const uint64_t now = stoker__now_ns();
    size_t kept = 0;
    for (size_t i = 0; i < r->nwaiting; i++) {
        pending *p = r->waiting[i];
        stoker__robj *sh = p->o;
        rblock *k = &sh->blocks[p->block];
        stoker__err err = {0};
        int fd = -1;
        int rc = stoker__cache_commit(sh->obj, p->block, p->tmp_fd, &fd, &err);
        if (rc == STOKER__BLOCK_WAIT && now < p->room_by && !r->stop) {
            r->waiting[kept++] = p;
            continue;
        }
        if (rc == 0) {
            k->fd = fd;
            k->st = B_READY;
            pin_list(r, sh, p->block);
            atomic_fetch_add_explicit(&r->fetched, 1, memory_order_relaxed);
        } else {
            char msg[STOKER_ERRMSG_CAP];
            if (rc == STOKER__BLOCK_WAIT) {
                stoker__cache_abort(sh->obj, p->block, p->tmp_fd);
                snprintf(msg, sizeof msg,
                         "%.300s; no room came within %llu s: give a larger "
                         "cache_limit, or a smaller fetch_window to each process sharing the "
                         "cache",
                         err.msg, (unsigned long long)(ROOM_WAIT_NS / 1000000000ull));
                rc = STOKER_E_LIMIT;
            } else {
                snprintf(msg, sizeof msg, "%s", err.msg);
            }
            fail_block(k, rc, msg);
            r->pinned_bytes -= block_bytes(r, sh, p->block);
        }
        stoker__free(p);
    }
    if (kept != r->nwaiting)
        pthread_cond_broadcast(&r->cond);
    r->nwaiting = kept;
    if (kept == 0)
        return;
    /* Still no room: pins of this process that no reader holds go (the blocks stay cached
     * until evicted, and a reader pins them again), so that processes sharing the cache,
     * each pinning blocks read ahead, never wait on each other's read-ahead. */
    size_t left = 0;
    for (size_t i = 0; i < r->npinned; i++) {
        stoker__robj *sh = r->pinned[i].o;
        const uint64_t b = r->pinned[i].block;
        if (!sh->blocks[b].listed || try_unpin(r, sh, b))
            continue;
        r->pinned[left++] = r->pinned[i];
    }
    r->npinned = left;
}

/* Block b's bytes leave the measure that counted them when it was pinned (mu held). */
static void unpinned_bytes(stoker__robjs *r, stoker__robj *sh, uint64_t b)
{
    rblock *k = &sh->blocks[b];
    if (k->hit)
        r->hit_bytes -= block_bytes(r, sh, b);
    else
        r->pinned_bytes -= block_bytes(r, sh, b);
    k->hit = false;
}

static void unpin(stoker__robjs *r, stoker__robj *sh, uint64_t b)
{
    rblock *k = &sh->blocks[b];
    stoker__cache_release(sh->obj, b, k->fd);
    stoker__fds_closed(); /* readers may have kept the number (remote/object.h) */
    k->fd = -1;
    k->st = B_NONE;
    k->listed = false;
    unpinned_bytes(r, sh, b);
}

/* Unpins block b when it is ready and no reader holds it (mu held). Readers hold a ready
 * block without mu: a reader adds itself to `users`, then reads the state; this sets the
 * state, then reads `users` (both sequentially consistent), so one of the two sees the
 * other: either the reader sees B_DROPPING and takes the slow way, or this sees the reader
 * and leaves the block pinned. */
static bool try_unpin(stoker__robjs *r, stoker__robj *sh, uint64_t b)
{
    rblock *k = &sh->blocks[b];
    if (k->st != B_READY || k->users != 0)
        return false;
    k->st = B_DROPPING;
    if (k->users != 0) {
        k->st = B_READY;
        return false;
    }
    unpin(r, sh, b);
    return true;
}

/* Unpins every block no batch from `done` on needs and no reader holds (mu held). */
static void unpin_passed(stoker__robjs *r)
{
    size_t kept = 0;
    for (size_t i = 0; i < r->npinned; i++) {
        stoker__robj *sh = r->pinned[i].o;
        const uint64_t b = r->pinned[i].block;
        rblock *k = &sh->blocks[b];
        if (!k->listed)
            continue; /* unpinned since (a stale entry) */
        if (k->need <= r->done && try_unpin(r, sh, b))
            continue;
        r->pinned[kept++] = r->pinned[i];
    }
    r->npinned = kept;
}

/* ---- reading ahead ---- */

/* Whether the read-ahead may start more blocks: within the window (blocks it finds in the
 * cache take none of it, up to hit_max beyond it: pinning them costs no transfer, and a
 * data set the cache holds then stays pinned instead of being unpinned and pinned again
 * for every shuffled batch), or for the oldest batch not yet read, whatever the window,
 * up to now_max (mu held). */
static bool window_room(const stoker__robjs *r)
{
    if (r->nwaiting > 0) /* the cache is full of pins: the readers fetch what they read */
        return false;
    const uint64_t all = r->pinned_bytes + r->hit_bytes;
    if (r->scan <= r->done)
        return all < r->now_max;
    return r->pinned_bytes < r->window && all < r->window + r->hit_max;
}

enum { SCAN_ON, SCAN_FULL, SCAN_END };

/* Walks the read-ahead's next extents: each block they need is marked needed by their
 * batch, and started when it is not, until the window is full. A block already pinned
 * takes no room, so the walk goes on past a full window over pinned blocks, and they stay
 * pinned while a batch ahead needs them, instead of being unpinned and pinned again batch
 * after batch (a shuffled batch needs most blocks of a data set); but not once the blocks
 * pinned pass what the oldest batch may pin (now_max) and the window: the readers' own asks
 * pin blocks beyond both, which must go once read. SCAN_ON: it moved on; SCAN_FULL: a
 * block must wait for room; SCAN_END: the order has no batch `scan`. mu held; it is
 * released around the submissions. */
static int scan_some(stoker__robjs *r)
{
    if (r->scan < r->done) { /* batches read already: their blocks are needed no more */
        r->scan = r->done;
        r->scan_j = r->scan_n = 0;
    }
    if (r->scan_n == 0 && (r->scan_n = r->fut.batch(r->fut.ctx, r->scan, r->ext)) == 0)
        return SCAN_END;
    pending *todo[64];
    uint32_t ntodo = 0;
    const uint64_t j0 = r->scan_j;
    const uint64_t pass_max = (r->now_max > r->window ? r->now_max : r->window) + r->hit_max;
    bool full = false;
    for (; r->scan_j < r->scan_n; r->scan_j++) {
        if (r->pinned_bytes + r->hit_bytes > pass_max) { /* readers' own asks pinned the rest */
            full = true;
            break;
        }
        const stoker__rextent *e = &r->ext[r->scan_j];
        stoker__robj *sh = e->o;
        if (!sh || !sh->obj || e->off >= sh->size)
            continue;
        const uint64_t b0 = e->off / r->block_size;
        const uint64_t b1 = e->len ? (e->off + e->len - 1) / r->block_size : b0;
        for (uint64_t b = b0; b <= b1 && b < sh->nblocks; b++) {
            rblock *k = &sh->blocks[b];
            k->need = r->scan + 1 > k->need ? r->scan + 1 : k->need;
            if (k->st != B_NONE)
                continue;
            if (!window_room(r)) {
                full = true; /* this extent again, once there is room */
                break;
            }
            pending *p = NULL;
            start_block(r, sh, b, &p);
            if (p)
                todo[ntodo++] = p;
            if (ntodo == sizeof todo / sizeof todo[0]) {
                pthread_mutex_unlock(&r->mu);
                for (uint32_t t = 0; t < ntodo; t++)
                    submit(r, todo[t]);
                ntodo = 0;
                pthread_mutex_lock(&r->mu);
            }
        }
        if (full)
            break;
    }
    const bool moved = r->scan_j > j0 || r->scan_j == r->scan_n;
    if (r->scan_j == r->scan_n) {
        r->scan++;
        r->scan_j = r->scan_n = 0;
    }
    pthread_mutex_unlock(&r->mu);
    for (uint32_t t = 0; t < ntodo; t++)
        submit(r, todo[t]);
    pthread_mutex_lock(&r->mu);
    return moved ? SCAN_ON : SCAN_FULL;
}

/* Starts block b of sh (mu held) and submits its request, if it needs one, with mu released
 * meanwhile. */
static void start_now(stoker__robjs *r, stoker__robj *sh, uint64_t b)
{
    pending *p = NULL;
    start_block(r, sh, b, &p);
    if (p) {
        pthread_mutex_unlock(&r->mu);
        submit(r, p);
        pthread_mutex_lock(&r->mu);
    }
}

/* Looks again at blocks another process was fetching (mu held). */
static void poll_busy(stoker__robjs *r)
{
    for (size_t i = 0; i < r->nobjs && r->busy_blocks > 0; i++) {
        stoker__robj *sh = r->objs[i];
        for (uint64_t b = 0; sh->obj && b < sh->nblocks; b++)
            if (sh->blocks[b].st == B_BUSY)
                start_now(r, sh, b);
    }
}

static void *ahead_main(void *arg)
{
    stoker__robjs *r = arg;
    stoker__thread_name("stoker-fetch");
    pthread_mutex_lock(&r->mu);
    while (!r->stop) {
        if (r->nwaiting > 0)
            commit_waiting(r);
        if (r->busy_blocks > 0)
            poll_busy(r);
        const int s = r->following && r->scan < r->done + LOOK ? scan_some(r) : SCAN_FULL;
        if (s == SCAN_ON)
            continue;
        if (s == SCAN_END) /* the order has no more batches */
            r->following = false;
        stoker__timed_wait(&r->cond, &r->mu); /* B_BUSY blocks are looked at again */
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

void stoker__robjs_follow(stoker__robjs *r, const stoker__rahead *f)
{
    pthread_mutex_lock(&r->mu);
    r->following = f != NULL;
    if (f) {
        stoker__rextent *ext = r->ext;
        if (!ext || r->fut.batch_cap < f->batch_cap)
            ext = stoker__realloc(r->ext, (f->batch_cap ? f->batch_cap : 1) * sizeof *ext);
        if (ext) {
            r->ext = ext;
            r->fut = *f;
        } else {
            r->following = false; /* no read-ahead: readers fetch on demand */
        }
    }
    /* a new order: what the old one pinned goes once no reader holds it, and no block keeps
     * the old order's need (its batch numbers mean nothing in the new one: a block the
     * readers fetch before the read-ahead reaches it would stay pinned until the new order
     * passed the old batch number) */
    r->done = r->scan = f ? f->first : 0;
    r->scan_j = r->scan_n = 0;
    for (size_t i = 0; i < r->nobjs; i++)
        for (uint64_t b = 0; r->objs[i]->obj && b < r->objs[i]->nblocks; b++)
            r->objs[i]->blocks[b].need = 0;
    unpin_passed(r);
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->mu);
}

void stoker__robjs_progress(stoker__robjs *r, uint64_t seq)
{
    pthread_mutex_lock(&r->mu);
    if (seq > r->done) {
        r->done = seq;
        unpin_passed(r);
        pthread_cond_broadcast(&r->cond);
    }
    pthread_mutex_unlock(&r->mu);
}

void stoker__robjs_interrupt(stoker__robjs *r, bool on)
{
    pthread_mutex_lock(&r->mu);
    r->interrupted = on;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->mu);
}

/* ---- holding blocks ---- */

/* Holds block b when it is ready, without mu (users + 1): true. */
static bool hold_now(rblock *k)
{
    k->users++; /* a ready block: held without mu (try_unpin) */
    if (k->st == B_READY)
        return true;
    k->users--;
    return false;
}

/* Waits until block b of sh is ready and holds it for a read (users + 1). Bounded: a
 * fetch ends within the client's deadlines and fails its readers; a block another process
 * fetches is looked at again every STOKER__WAIT_NS, and that process's fetch is bounded
 * likewise (a process that dies drops its flock); interrupt and cancel end it at once. */
static int hold_block(stoker__robjs *r, stoker__robj *sh, uint64_t b, const atomic_int *cancel,
                      stoker__err *err)
{
    rblock *k = &sh->blocks[b];
    if (hold_now(k))
        return 0;
    uint64_t t0 = 0;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        if (k->st == B_READY)
            break;
        if (r->interrupted) {
            stoker__fail(err, STOKER_E_CANCELED,
                         "%s: bytes %llu-%llu: the read was interrupted "
                         "(the loader is stopping)",
                         sh->url, (unsigned long long)(b * r->block_size),
                         (unsigned long long)(b * r->block_size + block_bytes(r, sh, b) - 1));
            pthread_mutex_unlock(&r->mu);
            return STOKER_E_CANCELED;
        }
        if (cancel && atomic_load_explicit(cancel, memory_order_acquire)) {
            /* the caller's batch failed: its error is already said; the block goes on */
            stoker__fail(err, STOKER_E_CANCELED, "%s: block %llu: the batch already failed",
                         sh->url, (unsigned long long)b);
            pthread_mutex_unlock(&r->mu);
            return STOKER_E_CANCELED;
        }
        if (k->st == B_FAILED && stoker__now_ns() - k->failed_at < FAIL_HOLD_NS) {
            const int rc = k->rc;
            stoker__fail(err, rc, "%s", k->msg ? k->msg : "fetch failed");
            pthread_mutex_unlock(&r->mu);
            return rc;
        }
        if (k->st == B_FAILED) { /* asked again later: the fault may be gone */
            k->st = B_NONE;
            k->nospc_tries = 0;
        }
        if (k->st == B_NONE || k->st == B_BUSY) {
            start_now(r, sh, b);
            if (k->st == B_READY || k->st == B_FAILED)
                continue;
        }
        if (!t0)
            t0 = stoker__now_ns();
        stoker__timed_wait(&r->cond, &r->mu); /* B_BUSY blocks are looked at again */
    }
    k->users++;
    pthread_mutex_unlock(&r->mu);
    if (t0)
        atomic_fetch_add_explicit(&r->wait_ns, stoker__now_ns() - t0, memory_order_relaxed);
    return 0;
}

/* A read of the block is over: the block goes at once when no batch still to read needs
 * it (reads outside a reader's order, a batch's last record in it). One a batch ahead
 * needs stays, without mu taken here (every read from the cache passes): the order's
 * progress unpins it once no batch needs it. */
static void drop_block(stoker__robjs *r, stoker__robj *sh, uint64_t b)
{
    rblock *k = &sh->blocks[b];
    if (--k->users > 0 || k->need > r->done)
        return;
    pthread_mutex_lock(&r->mu);
    if (k->need <= r->done)
        try_unpin(r, sh, b);
    pthread_mutex_unlock(&r->mu);
}

static void range_blocks(const stoker__robj *o, uint64_t off, uint64_t len, uint64_t *b0,
                         uint64_t *b1)
{
    const uint32_t bs = o->s->block_size;
    *b0 = off / bs;
    *b1 = len ? (off + len - 1) / bs : *b0;
}

int stoker__robj_hold(stoker__robj *o, uint64_t off, uint64_t len, stoker__rspan *spans,
                      uint32_t cap, uint32_t *n)
{
    stoker__robjs *r = o->s;
    *n = 0;
    if (!o->obj || off > o->size || len > o->size - off)
        return STOKER_E_INVALID;
    uint64_t b0, b1;
    range_blocks(o, off, len, &b0, &b1);
    if (len == 0)
        return 0;
    if (b1 - b0 + 1 > cap)
        return STOKER_E_LIMIT;
    uint64_t b = b0;
    for (; b <= b1; b++)
        if (!hold_now(&o->blocks[b]))
            break;
    if (b > b1) {
        uint64_t at = off, left = len;
        for (b = b0; b <= b1; b++) {
            const uint64_t in = at - b * r->block_size;
            const uint64_t k = r->block_size - in < left ? r->block_size - in : left;
            spans[(*n)++] = (stoker__rspan){.fd = o->blocks[b].fd, .offset = in, .length = k};
            at += k;
            left -= k;
        }
        return 0;
    }
    for (uint64_t h = b0; h < b; h++) /* not all ready: none held */
        drop_block(r, o, h);
    return -EAGAIN;
}

void stoker__robj_release(stoker__robj *o, uint64_t off, uint64_t len)
{
    if (len == 0)
        return;
    uint64_t b0, b1;
    range_blocks(o, off, len, &b0, &b1);
    for (uint64_t b = b0; b <= b1; b++)
        drop_block(o->s, o, b);
}

int stoker__robj_read(stoker__robj *o, uint8_t *dst, uint64_t len, uint64_t off,
                      const atomic_int *cancel, stoker__err *err)
{
    stoker__robjs *r = o->s;
    STOKER_RETURN_IF(!o->obj || off > o->size || len > o->size - off, err, STOKER_E_INVALID,
                     "%s: bytes %llu-%llu: outside the object's %llu bytes", o->shown,
                     (unsigned long long)off, (unsigned long long)(off + len - 1),
                     (unsigned long long)o->size);
    uint64_t at = off, left = len;
    uint8_t *to = dst;
    while (left > 0) {
        const uint64_t b = at / r->block_size, in = at - b * r->block_size;
        const uint64_t n = r->block_size - in < left ? r->block_size - in : left;
        int rc = hold_block(r, o, b, cancel, err);
        if (rc < 0)
            return rc;
        rc = stoker__pread_full(o->blocks[b].fd, to, (size_t)n, in);
        drop_block(r, o, b);
        if (rc < 0) {
            char path[STOKER_ERRMSG_CAP / 2];
            stoker__cache_block_path(o->obj, b, path, sizeof path);
            return stoker__fail(err, rc,
                                "%s: bytes %llu-%llu: reading block %llu from the "
                                "cache (%s): %s",
                                o->shown, (unsigned long long)at, (unsigned long long)(at + n - 1),
                                (unsigned long long)b, path,
                                rc == STOKER_E_CORRUPT ? "file shorter than the block"
                                                       : stoker_strerror(rc));
        }
        at += n;
        left -= n;
        to += n;
    }
    return 0;
}

/* Drops block b of sh from this process and from the cache, its file removed, so that the
 * next reader fetches it (mu held; released meanwhile). Readers that hold it finish their
 * read first (a pread each, or a reader's round: bounded by local I/O): B_DROPPING sends
 * new ones the slow way, to wait for the fetch. */
static void discard_block(stoker__robjs *r, stoker__robj *sh, uint64_t b)
{
    rblock *k = &sh->blocks[b];
    k->st = B_DROPPING;
    while (k->users != 0) {
        pthread_mutex_unlock(&r->mu);
        sched_yield();
        pthread_mutex_lock(&r->mu);
    }
    stoker__cache_discard(sh->obj, b, k->fd);
    stoker__fds_closed();
    k->fd = -1;
    k->st = B_NONE;
    k->listed = false;
    unpinned_bytes(r, sh, b);
    pthread_cond_broadcast(&r->cond);
}

/* A block unpinned since the read is pinned again to be dropped; one being fetched, or
 * dropped by another reader, already counts as dropped. */
void stoker__robj_discard(stoker__robj *o, uint64_t off, uint64_t len, char *what, size_t cap)
{
    stoker__robjs *r = o->s;
    uint64_t b0, b1;
    range_blocks(o, off, len, &b0, &b1);
    char path[STOKER_ERRMSG_CAP / 2];
    stoker__cache_block_path(o->obj, b0, path, sizeof path);
    snprintf(what, cap, "the cache's block file %s%s", path,
             b1 > b0 ? " (and the next block's)" : "");
    pthread_mutex_lock(&r->mu);
    for (uint64_t b = b0; b <= b1 && b < o->nblocks; b++) {
        if (o->blocks[b].st == B_NONE) {
            pending *p = NULL;
            start_block(r, o, b, &p);
            if (p) { /* not in the cache any more: fetched afresh */
                pthread_mutex_unlock(&r->mu);
                submit(r, p);
                pthread_mutex_lock(&r->mu);
                continue;
            }
        }
        if (o->blocks[b].st == B_READY)
            discard_block(r, o, b);
    }
    pthread_mutex_unlock(&r->mu);
}

/* ---- opening ---- */

/* Runs n requests, OPEN_PARALLEL at a time on the first client; the first failure's rc.
 * The wait has no timeout of its own: every request submitted ends (done is called) within
 * the client's deadlines (remote/http.h). */
typedef struct batch_wait {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    uint32_t left;
} batch_wait;

static void batch_done(stoker__http_req *req, void *ctx)
{
    (void)req;
    batch_wait *w = ctx;
    pthread_mutex_lock(&w->mu);
    w->left--;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->mu);
}

static int run_all(stoker__robjs *r, stoker__http_req *reqs, uint32_t n, stoker__err *err)
{
    batch_wait w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    int rc = 0;
    for (uint32_t at = 0; at < n && rc == 0; at += OPEN_PARALLEL) {
        const uint32_t end = at + OPEN_PARALLEL < n ? at + OPEN_PARALLEL : n;
        for (uint32_t i = at; i < end; i++) {
            reqs[i].done = batch_done;
            reqs[i].ctx = &w;
            pthread_mutex_lock(&w.mu);
            w.left++;
            pthread_mutex_unlock(&w.mu);
            if (stoker__http_submit(r->http[0], &reqs[i]) < 0) {
                pthread_mutex_lock(&w.mu);
                w.left--;
                pthread_mutex_unlock(&w.mu);
                reqs[i].rc = STOKER_E_INVALID;
            }
        }
        pthread_mutex_lock(&w.mu);
        while (w.left > 0)
            pthread_cond_wait(&w.cond, &w.mu);
        pthread_mutex_unlock(&w.mu);
        for (uint32_t i = at; i < end && rc == 0; i++)
            if (reqs[i].rc < 0)
                rc = stoker__fail(err, reqs[i].rc, "%s", reqs[i].msg);
    }
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cond);
    return rc;
}

static void obj_free(stoker__robj *o)
{
    if (!o)
        return;
    for (uint64_t b = 0; o->blocks && b < o->nblocks; b++) {
        if (o->blocks[b].st == B_READY) {
            stoker__cache_release(o->obj, b, o->blocks[b].fd);
            stoker__fds_closed();
        }
        stoker__free(o->blocks[b].msg);
    }
    stoker__free(o->blocks);
    stoker__free(o->url);
    stoker__free(o->shown);
    stoker__free(o);
}

/* Adds o to the set's objects (mu). */
static int obj_add(stoker__robjs *r, stoker__robj *o)
{
    pthread_mutex_lock(&r->mu);
    int rc = 0;
    if (r->nobjs == r->cap_objs) {
        const size_t cap = r->cap_objs ? 2 * r->cap_objs : 16;
        stoker__robj **p = stoker__realloc(r->objs, cap * sizeof *p);
        if (p) {
            r->objs = p;
            r->cap_objs = cap;
        } else {
            rc = -ENOMEM;
        }
    }
    if (rc == 0)
        r->objs[r->nobjs++] = o;
    pthread_mutex_unlock(&r->mu);
    return rc;
}

/* An object from its HEAD's reply; cached: with blocks in the cache. */
static int obj_make(stoker__robjs *r, const char *url, const stoker__http_req *h, bool cached,
                    stoker__robj **out, stoker__err *err)
{
    *out = NULL;
    stoker__robj *o = stoker__calloc(1, sizeof *o);
    STOKER_RETURN_IF(!o, err, -ENOMEM, "%s: out of memory", r->path);
    o->s = r;
    o->url = stoker__strdup(url);
    const size_t ulen = strlen(url) + 1;
    o->shown = stoker__malloc(2 * ulen + 8); /* room for every "***" */
    if (!o->url || !o->shown) {
        obj_free(o);
        return stoker__fail(err, -ENOMEM, "%s: out of memory", r->path);
    }
    stoker_redact(url, o->shown, 2 * ulen + 8);
    if (h->size == UINT64_MAX) {
        const int rc = stoker__fail(err, STOKER_E_FORMAT,
                                    "%s: the reply to HEAD has no "
                                    "Content-Length: the object's length is missing",
                                    o->shown);
        obj_free(o);
        return rc;
    }
    o->size = h->size;
    snprintf(o->etag, sizeof o->etag, "%s", h->etag);
    if (h->etag[0])
        snprintf(o->validator, sizeof o->validator, "etag %s", h->etag);
    else
        snprintf(o->validator, sizeof o->validator, "modified %s size %llu", h->last_modified,
                 (unsigned long long)o->size);
    if (cached) {
        o->nblocks = (o->size + r->block_size - 1) / r->block_size;
        o->blocks = stoker__calloc(o->nblocks ? o->nblocks : 1, sizeof *o->blocks);
        if (!o->blocks) {
            obj_free(o);
            return stoker__fail(err, -ENOMEM, "%s: out of memory", r->path);
        }
        for (uint64_t b = 0; b < o->nblocks; b++)
            o->blocks[b].fd = -1;
        stoker__err cerr = {0};
        const int rc = stoker__cache_object(r->cache, o->url, o->validator, o->size, r->block_size,
                                            &o->obj, &cerr);
        if (rc < 0) {
            stoker__fail(err, rc, "%s: the block cache: %s", o->shown, cerr.msg);
            obj_free(o);
            return rc;
        }
    }
    if (obj_add(r, o) < 0) {
        obj_free(o);
        return stoker__fail(err, -ENOMEM, "%s: out of memory", r->path);
    }
    *out = o;
    return 0;
}

static int open_all(stoker__robjs *r, const char *const *urls, uint32_t n, bool cached,
                    stoker__robj **out, stoker__err *err)
{
    stoker__http_req *q = stoker__calloc(n ? n : 1, sizeof *q);
    STOKER_RETURN_IF(!q, err, -ENOMEM, "%s: out of memory", r->path);
    for (uint32_t i = 0; i < n; i++) {
        out[i] = NULL;
        q[i] = (stoker__http_req){.url = urls[i], .head = true, .fd = -1};
    }
    int rc = run_all(r, q, n, err);
    for (uint32_t i = 0; rc == 0 && i < n; i++)
        rc = obj_make(r, urls[i], &q[i], cached, &out[i], err);
    stoker__free(q);
    return rc;
}

int stoker__robj_open_all(stoker__robjs *s, const char *const *urls, uint32_t n, stoker__robj **out,
                          stoker__err *err)
{
    return open_all(s, urls, n, true, out, err);
}

int stoker__robj_open(stoker__robjs *s, const char *url, stoker__robj **out, stoker__err *err)
{
    return open_all(s, &url, 1, true, out, err);
}

int stoker__robj_open_meta(stoker__robjs *s, const char *url, stoker__robj **out, stoker__err *err)
{
    return open_all(s, &url, 1, false, out, err);
}

uint64_t stoker__robj_size(const stoker__robj *o)
{
    return o->size;
}

const char *stoker__robj_url(const stoker__robj *o)
{
    return o->url;
}

const char *stoker__robj_shown(const stoker__robj *o)
{
    return o->shown;
}

const char *stoker__robj_etag(const stoker__robj *o)
{
    return o->etag;
}

int stoker__robj_get_all(stoker__robjs *s, const stoker__rget *g, uint32_t n, stoker__err *err)
{
    stoker__http_req *q = stoker__calloc(n ? n : 1, sizeof *q);
    STOKER_RETURN_IF(!q, err, -ENOMEM, "%s: out of memory", s->path);
    int rc = 0;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        const stoker__robj *o = g[i].o;
        if (g[i].off > o->size || g[i].len > o->size - g[i].off || (g[i].len == 0 && g[i].off))
            rc = stoker__fail(err, STOKER_E_INVALID,
                              "%s: bytes %llu-%llu: outside the "
                              "object's %llu bytes",
                              o->shown, (unsigned long long)g[i].off,
                              (unsigned long long)(g[i].off + g[i].len - 1),
                              (unsigned long long)o->size);
        const uint64_t len = g[i].len ? g[i].len : o->size; /* 0: the whole object */
        q[i] = (stoker__http_req){.url = o->url,
                                  .offset = g[i].len ? g[i].off : 0,
                                  .length = g[i].len,
                                  .if_match = o->etag[0] ? o->etag : NULL,
                                  .fd = -1,
                                  .buf = g[i].dst,
                                  .cap = (size_t)len};
    }
    if (rc == 0)
        rc = run_all(s, q, n, err);
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        const uint64_t len = g[i].len ? g[i].len : g[i].o->size;
        if (q[i].got != len)
            rc = stoker__fail(err, STOKER_E_CORRUPT, "%s: %llu bytes came, %llu were due",
                              g[i].o->shown, (unsigned long long)q[i].got, (unsigned long long)len);
    }
    stoker__free(q);
    return rc;
}

/* HTTP clients, each a thread with its share of the transfers: `asked`, else two from 4
 * transfers on, since one thread receiving every body was the limit of a fast link
 * (docs/REMOTE.md); never more than the transfers. */
static uint32_t clients(uint32_t transfers, uint32_t asked)
{
    const uint32_t n = asked ? asked : transfers >= 4 ? 2u : 1u;
    return n < transfers ? n : transfers ? transfers : 1u;
}

/* The default cache limit: a quarter of the cache's file system, at least `floor`, and no
 * more than `room` (what the cache can take there: its free bytes and the cache's own). */
static uint64_t default_limit(const char *dir, uint64_t floor, uint64_t room)
{
    struct statvfs v;
    uint64_t limit = UINT64_C(64) << 30;
    if (dir && statvfs(dir, &v) == 0)
        limit = (uint64_t)v.f_blocks * v.f_frsize / 4;
    limit = limit > floor ? limit : floor;
    return limit < room ? limit : room;
}

static double mib(uint64_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0);
}

/* A string option: NULL when not given (the default is ""). */
static const char *given(const stoker_config *cfg, stoker_option opt)
{
    const char *s = stoker__cfg_string(cfg, opt);
    return s && *s ? s : NULL;
}

static int robjs_open(stoker__robjs *r, const char *path, const stoker_config *cfg,
                      stoker__err *err)
{
    const int64_t transfers = stoker__cfg_int(cfg, STOKER_OPT_FETCH_TRANSFERS);
    r->block_size = (uint32_t)stoker__cfg_int(cfg, STOKER_OPT_BLOCK_SIZE);
    r->window = (uint64_t)stoker__cfg_int(cfg, STOKER_OPT_FETCH_WINDOW);
    r->nhttp =
        clients((uint32_t)transfers, (uint32_t)stoker__cfg_int(cfg, STOKER_OPT_FETCH_CLIENTS));
    stoker__http_opts ho = {
        .retries = (uint32_t)stoker__cfg_int(cfg, STOKER_OPT_FETCH_RETRIES),
        .retry_seconds = (double)stoker__cfg_int(cfg, STOKER_OPT_FETCH_RETRY_MS) / 1000.0,
        .connect_timeout = (double)stoker__cfg_int(cfg, STOKER_OPT_FETCH_TIMEOUT_MS) / 1000.0,
        .stall_timeout = (double)stoker__cfg_int(cfg, STOKER_OPT_FETCH_TIMEOUT_MS) / 1000.0,
        .ca_bundle = given(cfg, STOKER_OPT_CA_BUNDLE),
        .header = given(cfg, STOKER_OPT_HTTP_HEADER),
        .s3_region = given(cfg, STOKER_OPT_S3_REGION),
        .s3_endpoint = given(cfg, STOKER_OPT_S3_ENDPOINT),
    };
    stoker__err herr = {0};
    int rc = 0;
    for (uint32_t c = 0; c < r->nhttp && rc == 0; c++) { /* the transfers shared out */
        ho.max_transfers = (uint32_t)transfers / r->nhttp + (c < (uint32_t)transfers % r->nhttp);
        rc = stoker__http_create(&r->http[c], &ho, &herr);
    }
    STOKER_RETURN_IF(rc < 0, err, rc, "%s: %s", path, herr.msg);

    /* a limit smaller than what must be in flight could never make progress: the window,
     * and blocks the readers ask for beyond it (as many again as transfers) */
    const uint64_t in_flight = r->window + 2 * (uint64_t)transfers * r->block_size;
    const uint64_t asked = (uint64_t)stoker__cfg_int(cfg, STOKER_OPT_CACHE_LIMIT);
    const char *dir = given(cfg, STOKER_OPT_CACHE_DIR);
    STOKER_RETURN_IF(asked && asked < in_flight, err, STOKER_E_LIMIT,
                     "%s: cache_limit %llu is smaller than what must be in flight: fetch_window "
                     "%llu + 2 x fetch_transfers %lld x block_size %u = %llu bytes",
                     path, (unsigned long long)asked, (unsigned long long)r->window,
                     (long long)transfers, r->block_size, (unsigned long long)in_flight);
    stoker__err cerr = {0};
    rc = stoker__cache_open(&r->cache, dir, asked ? asked : in_flight, &cerr);
    STOKER_RETURN_IF(rc < 0, err, rc, "%s: the block cache: %s", path, cerr.msg);
    if (!asked) { /* now that the directory exists, size the default on its file system */
        stoker__cache_stats cs;
        stoker__cache_stats_get(r->cache, &cs);
        const uint64_t avail = stoker__cache_free_bytes(r->cache);
        const uint64_t limit =
            default_limit(stoker__cache_dir(r->cache), 4 * in_flight, avail + cs.bytes);
        STOKER_RETURN_IF(limit < in_flight, err, STOKER_E_LIMIT,
                         "%s: the block cache %s: %.1f MiB needed for the blocks in flight "
                         "(fetch_window %llu + 2 x fetch_transfers %lld x block_size %u bytes) "
                         "but its file system has %.1f MiB free (and the cache holds %.1f MiB): "
                         "give cache_dir on a larger disk or a smaller fetch_window or "
                         "block_size",
                         path, stoker__cache_dir(r->cache), mib(in_flight),
                         (unsigned long long)r->window, (long long)transfers, r->block_size,
                         mib(avail), mib(cs.bytes));
        stoker__cache_close(r->cache);
        r->cache = NULL;
        rc = stoker__cache_open(&r->cache, dir, limit, &cerr);
        STOKER_RETURN_IF(rc < 0, err, rc, "%s: the block cache: %s", path, cerr.msg);
    }
    r->now_max = stoker__cache_limit(r->cache) / 2;
    r->hit_max = (uint64_t)HIT_PINS * r->block_size < r->now_max
                     ? (uint64_t)HIT_PINS * r->block_size
                     : r->now_max;
    r->nospc_want = in_flight;
    rc = stoker__thread_start(&r->thread, ahead_main, r);
    STOKER_RETURN_IF(rc != 0, err, -rc, "%s: cannot start the fetch thread: %s", path,
                     stoker_strerror(-rc));
    r->thread_started = true;
    return 0;
}

int stoker__robjs_open(stoker__robjs **out, const char *url, const stoker_config *cfg,
                       stoker__err *err)
{
    *out = NULL;
    stoker__robjs *r = stoker__calloc(1, sizeof *r);
    STOKER_RETURN_IF(!r, err, -ENOMEM, "%s: out of memory", url);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cond, NULL);
    r->path = stoker__strdup(url);
    int rc = r->path ? robjs_open(r, url, cfg, err)
                     : stoker__fail(err, -ENOMEM, "%s: out of memory", url);
    if (rc < 0) {
        stoker__robjs_close(r);
        return rc;
    }
    *out = r;
    return 0;
}

void stoker__robjs_trace(stoker__robjs *s, uint64_t (*start)(void), void (*end)(uint64_t id))
{
    s->trace_start = start;
    s->trace_end = end;
}

uint32_t stoker__robjs_block_size(const stoker__robjs *s)
{
    return s->block_size;
}

uint64_t stoker__robjs_cache_limit(const stoker__robjs *s)
{
    return stoker__cache_limit(s->cache);
}

void stoker__robjs_stats_get(stoker__robjs *r, stoker__robjs_stats *s)
{
    stoker__http_stats hs = {0};
    for (uint32_t c = 0; c < r->nhttp; c++) {
        stoker__http_stats one;
        stoker__http_stats_get(r->http[c], &one);
        hs.bytes += one.bytes;
        hs.requests += one.requests;
        hs.retries += one.retries;
    }
    stoker__cache_stats cs;
    stoker__cache_stats_get(r->cache, &cs);
    s->bytes_fetched = hs.bytes;
    s->requests = hs.requests;
    s->retries = hs.retries;
    s->cache_hits = cs.hits;
    s->cache_misses = cs.misses;
    s->cache_bytes = cs.bytes;
    s->cache_limit = stoker__cache_limit(r->cache);
    s->wait_ns = atomic_load_explicit(&r->wait_ns, memory_order_relaxed);
    s->block_size = r->block_size;
    s->window = r->window;
}

void stoker__robjs_close(stoker__robjs *r)
{
    if (!r)
        return;
    if (r->thread_started) {
        pthread_mutex_lock(&r->mu);
        r->stop = true;
        pthread_cond_broadcast(&r->cond);
        pthread_mutex_unlock(&r->mu);
        pthread_join(r->thread, NULL);
    }
    for (uint32_t c = 0; c < r->nhttp; c++)
        stoker__http_destroy(r->http[c]); /* every transfer's callback has run after this */
    for (size_t i = 0; i < r->nwaiting; i++) {
        pending *p = r->waiting[i];
        stoker__cache_abort(p->o->obj, p->block, p->tmp_fd);
        stoker__free(p);
    }
    stoker__free(r->waiting);
    for (size_t i = 0; i < r->nobjs; i++)
        obj_free(r->objs[i]);
    stoker__free(r->objs);
    stoker__cache_close(r->cache);
    stoker__free(r->pinned);
    stoker__free(r->ext);
    stoker__free(r->path);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cond);
    stoker__free(r);
}
