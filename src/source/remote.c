/* SPDX-License-Identifier: Apache-2.0 */
/* The remote source: a packed data set (manifest.stk and its shards, as stoker-pack wrote
 * them) behind http://, https:// or s3://BUCKET/PREFIX (docs/REMOTE.md).
 *
 * Open fetches the manifest, asks each shard's size and validator (HEAD) and reads its
 * header, footer and index with small ranged GETs, all checked as a local shard's are
 * (format/shard.h) and pinned to the validator (If-Match), so that every later read is of
 * the same object. Records are then read from blocks of `block_size` bytes: the block cache
 * (remote/cache.h) keeps them as files on local disk, shared by every process of the node,
 * and a block missing there is fetched whole by the client (remote/http.h). A record is a
 * fetched record (dataset.h): the worker that needs it waits for its blocks, then preads
 * its bytes from the block files; the pool checks its CRC32C as for any shard.
 *
 * Reading ahead: given the loader's future order (stoker__dataset_follow), a thread walks
 * the batches to come and starts every block they need, in the order they need them, while
 * the bytes of blocks pinned stay within `fetch_window`; the oldest batch not yet read may
 * pin up to half the cache's limit (its blocks are needed now: in a shuffled epoch over
 * more data than the window, the first batch needs nearly every block, and the transfers
 * would otherwise run only as many at once as workers wait). A started block is pinned (never
 * evicted, by any process) until no batch the workers may still read needs it.
 *
 * Locking: one mutex (mu) guards the blocks' states, the window and the pins; a client's
 * thread (or one of its writers) takes it to publish a finished block, never while the
 * clients' own locks are held by this side (requests are submitted after mu is released).
 * A reader holds a ready block without it (hold_block, try_unpin): records read from the
 * cache would otherwise all pass through that one lock, twice each. */
#include "common/config.h"
#include "cuda/nvtx.h"
#include "format/manifest.h"
#include "source/shard_rec.h"
#include "source/shards.h"
#include "remote/cache.h"
#include "remote/http.h"
#include "source/source.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define LOOK 4096u        /* batches the read-ahead may run before the workers */
#define OPEN_PARALLEL 64u /* requests queued at once while opening */
#define FAIL_HOLD_NS 1000000000ull /* a failed block fails its readers this long */
#define MAX_CLIENTS 16u   /* HTTP clients (a thread each) at most: fetch_clients' range */
#define ROOM_WAIT_NS 60000000000ull /* a fetched block waits this long for room in the cache
                                       while readers (of any process) pin the rest */

/* B_DROPPING: being unpinned (try_unpin), seen only by readers without the lock */
enum { B_NONE = 0, B_FETCHING, B_BUSY, B_READY, B_FAILED, B_DROPPING };

typedef struct rblock {
    int fd;          /* the block file, pinned (B_READY) */
    _Atomic uint8_t st;     /* changed under mu; read by readers without it (hold_block) */
    bool listed;     /* in r->pinned */
    _Atomic uint32_t users; /* readers between their hold and their pread */
    _Atomic uint64_t need; /* the last batch seq the read-ahead found needing it, + 1 */
    int rc;          /* B_FAILED */
    uint64_t failed_at; /* when it failed: readers get the failure for FAIL_HOLD_NS, then
                           a reader asks again */
    uint8_t nospc_tries; /* fetched again after the disk was full, since its last success:
                            other transfers may take the room an eviction made */
    char *msg;
} rblock;

typedef struct rshard {
    char *url;
    char *shown; /* url as shown (stoker_redact): the shard's path (file_path) */
    uint64_t size, nblocks;
    char validator[200]; /* the ETag, or Last-Modified and size */
    char etag[128];      /* sent as If-Match; "" when the server gives none */
    stoker__cache_obj *obj;
    rblock *blocks;
    uint8_t *index;
    uint64_t records;
} rshard;

typedef struct pending {
    stoker__http_req req;
    struct remote *r;
    int32_t shard;
    uint64_t block;
    int tmp_fd;
    char range_msg[64];
    uint64_t nvtx; /* the block's "fetch" range, from submit to fetched */
    uint64_t room_by; /* waiting for room in the cache (r->waiting) until this time */
} pending;

typedef struct remote {
    char *base; /* the data set's URL, no trailing '/' */
    stoker__http *http[MAX_CLIENTS]; /* blocks go to each in turn; the open's requests to
                                        the first */
    uint32_t nhttp;
    _Atomic uint32_t next_http;
    stoker__cache *cache;
    stoker__manifest m;
    int32_t n;
    rshard *shards;
    uint64_t *first;
    uint32_t block_size;
    uint64_t bytes; /* of the shard files, records with their alignment's padding */
    uint64_t window;
    uint64_t now_max; /* the oldest batch's blocks may pin this much, beyond the window:
                         half the cache's limit (the rest for the workers' own asks and
                         for other processes sharing the cache) */

    pthread_mutex_t key_lock;
    int keys_state; /* as stoker__shards' (under key_lock) */
    pthread_mutex_t mu;
    pthread_cond_t cond;   /* a block changed state; the window or the order changed */
    pthread_t thread;
    bool thread_started, stop;
    bool following;
    bool interrupted;      /* readers give up instead of waiting (a stopping loader) */
    stoker__future fut;
    uint64_t scan;         /* the batch seq the read-ahead looks at */
    uint64_t scan_j;       /* ... and the record within it */
    uint64_t scan_n;       /* that batch's records (0: not drawn yet) */
    _Atomic uint64_t done; /* the workers began batch `done` (need and done are written
                              under mu, read by drop_block without it) */
    uint64_t pinned_bytes; /* of blocks started and not yet unpinned (window's measure) */
    int64_t *ids;
    uint64_t busy_blocks;  /* blocks in B_BUSY (the read-ahead polls them) */
    struct { int32_t shard; uint64_t block; } *pinned;
    size_t npinned, cap_pinned;

    uint64_t nospc_want;   /* bytes a full disk is freed to: what must be in flight */
    pending **waiting;     /* fetched blocks waiting for room in the cache (mu) */
    size_t nwaiting, cap_waiting;

    atomic_uint_fast64_t wait_ns;
    atomic_uint_fast64_t fetched; /* blocks this process fetched */
} remote;

/* ---- blocks ---- */

static uint64_t block_bytes(const remote *r, const rshard *sh, uint64_t b)
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

static void pin_list(remote *r, int32_t shard, uint64_t b)
{
    rblock *k = &r->shards[shard].blocks[b];
    if (k->listed)
        return;
    if (r->npinned == r->cap_pinned) {
        const size_t cap = r->cap_pinned ? r->cap_pinned * 2 : 64;
        void *p = stoker__realloc(r->pinned, cap * sizeof *r->pinned);
        if (!p)
            return; /* unlisted: released when the source closes */
        r->pinned = p;
        r->cap_pinned = cap;
    }
    r->pinned[r->npinned].shard = shard;
    r->pinned[r->npinned].block = b;
    r->npinned++;
    k->listed = true;
}

static void fetched(stoker__http_req *req, void *ctx);

/* Lists p among the fetched blocks waiting for room (mu held); false when out of memory. */
static bool wait_add(remote *r, pending *p)
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

/* Moves block b of shard i on from B_NONE or B_BUSY (mu held): to B_READY from the cache,
 * to B_FETCHING (*out: the request to submit once mu is released), B_BUSY, or B_FAILED. */
/* The message of a block that a full file system kept out of the cache. */
static void full_message(remote *r, int rc, uint64_t bytes, char *msg, size_t cap)
{
    snprintf(msg, cap,
             "the block cache %s: its file system is full (%s): %llu bytes free after "
             "evicting every block no reader pins, and a block takes %llu: free space "
             "there, or give cache_dir on a larger disk or a smaller cache_limit",
             stoker__cache_dir(r->cache), stoker_strerror(rc),
             (unsigned long long)stoker__cache_free_bytes(r->cache), (unsigned long long)bytes);
}

/* Times a block is fetched again after a full disk made room by eviction, before it fails */
#define NOSPC_TRIES 4

static void start_block(remote *r, int32_t i, uint64_t b, pending **out)
{
    rshard *sh = &r->shards[i];
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
        pin_list(r, i, b);
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
        p->shard = i;
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
        start_block(r, i, b, out);
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

static void submit(remote *r, pending *p)
{
    if (!p)
        return;
    const uint32_t c = atomic_fetch_add_explicit(&r->next_http, 1, memory_order_relaxed);
    p->nvtx = stoker__nvtx_start(STOKER__NVTX_FETCH);
    if (stoker__http_submit(r->http[c % r->nhttp], &p->req) < 0) {
        p->req.rc = STOKER_E_INVALID;
        fetched(&p->req, p);
    }
}

/* The client finished a block's transfer (its thread, or a writer's). */
static void fetched(stoker__http_req *req, void *ctx)
{
    pending *p = ctx;
    stoker__nvtx_end(p->nvtx);
    remote *r = p->r;
    rshard *sh = &r->shards[p->shard];
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
        pin_list(r, p->shard, p->block);
        atomic_fetch_add_explicit(&r->fetched, 1, memory_order_relaxed);
    } else if (full && k->nospc_tries < NOSPC_TRIES && avail >= bytes && !r->stop) {
        k->nospc_tries++;
        k->st = B_NONE;
        r->pinned_bytes -= bytes;
        start_block(r, p->shard, p->block, &again);
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

static bool try_unpin(remote *r, rshard *sh, uint64_t b);

/* Commits the fetched blocks waiting for room, now that readers may have unpinned some
 * (mu held); those past their ROOM_WAIT_NS, or all of them when the source stops, are given
 * up and fail. */
static void commit_waiting(remote *r)
{
    const uint64_t now = stoker__now_ns();
    size_t kept = 0;
    for (size_t i = 0; i < r->nwaiting; i++) {
        pending *p = r->waiting[i];
        rshard *sh = &r->shards[p->shard];
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
            pin_list(r, p->shard, p->block);
            atomic_fetch_add_explicit(&r->fetched, 1, memory_order_relaxed);
        } else {
            char msg[STOKER_ERRMSG_CAP];
            if (rc == STOKER__BLOCK_WAIT) {
                stoker__cache_abort(sh->obj, p->block, p->tmp_fd);
                snprintf(msg, sizeof msg, "%.300s; no room came within %llu s: give a larger "
                         "cache_limit, or a smaller fetch_window to each process sharing the "
                         "cache", err.msg, (unsigned long long)(ROOM_WAIT_NS / 1000000000ull));
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
        rshard *sh = &r->shards[r->pinned[i].shard];
        const uint64_t b = r->pinned[i].block;
        if (!sh->blocks[b].listed || try_unpin(r, sh, b))
            continue;
        r->pinned[left++] = r->pinned[i];
    }
    r->npinned = left;
}

static void unpin(remote *r, rshard *sh, uint64_t b)
{
    rblock *k = &sh->blocks[b];
    stoker__cache_release(sh->obj, b, k->fd);
    k->fd = -1;
    k->st = B_NONE;
    k->listed = false;
    r->pinned_bytes -= block_bytes(r, sh, b);
}

/* Unpins block b when it is ready and no reader holds it (mu held). Readers hold a ready
 * block without mu: a reader adds itself to `users`, then reads the state; this sets the
 * state, then reads `users` (both sequentially consistent), so one of the two sees the
 * other: either the reader sees B_DROPPING and takes the slow way, or this sees the reader
 * and leaves the block pinned. */
static bool try_unpin(remote *r, rshard *sh, uint64_t b)
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
static void unpin_passed(remote *r)
{
    size_t kept = 0;
    for (size_t i = 0; i < r->npinned; i++) {
        rshard *sh = &r->shards[r->pinned[i].shard];
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

/* Whether the read-ahead may start more blocks: within the window, or for the oldest batch
 * not yet read, whatever the window (mu held). */
static bool window_room(const remote *r)
{
    if (r->nwaiting > 0) /* the cache is full of pins: the workers fetch what they read */
        return false;
    return r->pinned_bytes < r->window || (r->scan <= r->done && r->pinned_bytes < r->now_max);
}

enum { SCAN_ON, SCAN_FULL, SCAN_END };

/* Walks the read-ahead's next records: each block they need is marked needed by their
 * batch, and started when it is not, until the window is full. A block already pinned
 * takes no room, so the walk goes on past a full window over pinned blocks, and they stay
 * pinned while a batch ahead needs them, instead of being unpinned and pinned again batch
 * after batch (a shuffled batch needs most blocks of a data set); but not once the blocks
 * pinned pass what the oldest batch may pin (now_max) and the window: the workers' own asks
 * pin blocks beyond both, which must go once read. SCAN_ON: it moved on; SCAN_FULL: a
 * block must wait for room; SCAN_END: the order has no batch `scan`. mu held; it is
 * released around the submissions. */
static int scan_some(remote *r)
{
    if (r->scan < r->done) { /* batches read already: their blocks are needed no more */
        r->scan = r->done;
        r->scan_j = r->scan_n = 0;
    }
    if (r->scan_n == 0 && (r->scan_n = r->fut.batch(r->fut.ctx, r->scan, r->ids)) == 0)
        return SCAN_END;
    pending *todo[64];
    uint32_t ntodo = 0;
    const uint64_t j0 = r->scan_j;
    const uint64_t pass_max = r->now_max > r->window ? r->now_max : r->window;
    bool full = false;
    for (; r->scan_j < r->scan_n; r->scan_j++) {
        if (r->pinned_bytes > pass_max) { /* workers' own asks pinned the rest */
            full = true;
            break;
        }
        const uint64_t id = (uint64_t)r->ids[r->scan_j];
        if (id >= r->first[r->n])
            continue;
        const int32_t i = stoker__shard_find(r->first, r->n, id);
        rshard *sh = &r->shards[i];
        stoker__recloc loc;
        stoker__shard_locate(sh->index, id - r->first[i], &loc);
        const uint64_t b0 = loc.offset / r->block_size;
        const uint64_t b1 = loc.length ? (loc.offset + loc.length - 1) / r->block_size : b0;
        for (uint64_t b = b0; b <= b1 && b < sh->nblocks; b++) {
            rblock *k = &sh->blocks[b];
            k->need = r->scan + 1 > k->need ? r->scan + 1 : k->need;
            if (k->st != B_NONE)
                continue;
            if (!window_room(r)) {
                full = true; /* this record again, once there is room */
                break;
            }
            pending *p = NULL;
            start_block(r, i, b, &p);
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

/* Looks again at blocks another process was fetching (mu held). */
static void poll_busy(remote *r)
{
    for (int32_t i = 0; i < r->n && r->busy_blocks > 0; i++)
        for (uint64_t b = 0; b < r->shards[i].nblocks; b++)
            if (r->shards[i].blocks[b].st == B_BUSY) {
                pending *p = NULL;
                start_block(r, i, b, &p);
                if (p) {
                    pthread_mutex_unlock(&r->mu);
                    submit(r, p);
                    pthread_mutex_lock(&r->mu);
                }
            }
}

static void *ahead_main(void *arg)
{
    remote *r = arg;
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

static void remote_follow(stoker_dataset *ds, const stoker__future *f)
{
    remote *r = ds->state;
    pthread_mutex_lock(&r->mu);
    r->following = f != NULL;
    if (f) {
        int64_t *ids = r->ids;
        if (!ids || r->fut.batch_cap < f->batch_cap)
            ids = stoker__realloc(r->ids, (f->batch_cap ? f->batch_cap : 1) * sizeof *ids);
        if (ids) {
            r->ids = ids;
            r->fut = *f;
        } else {
            r->following = false; /* no read-ahead: workers fetch on demand */
        }
    }
    /* a new order: what the old one pinned goes once no reader holds it, and no block keeps
     * the old order's need (its batch numbers mean nothing in the new one: a block the
     * workers fetch before the read-ahead reaches it would stay pinned until the new order
     * passed the old batch number) */
    r->done = r->scan = f ? f->first : 0;
    r->scan_j = r->scan_n = 0;
    for (int32_t i = 0; i < r->n; i++)
        for (uint64_t b = 0; b < r->shards[i].nblocks; b++)
            r->shards[i].blocks[b].need = 0;
    unpin_passed(r);
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->mu);
}

static void remote_progress(stoker_dataset *ds, uint64_t seq)
{
    remote *r = ds->state;
    pthread_mutex_lock(&r->mu);
    if (seq > r->done) {
        r->done = seq;
        unpin_passed(r);
        pthread_cond_broadcast(&r->cond);
    }
    pthread_mutex_unlock(&r->mu);
}

static void remote_interrupt(stoker_dataset *ds, bool on)
{
    remote *r = ds->state;
    pthread_mutex_lock(&r->mu);
    r->interrupted = on;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->mu);
}

/* ---- records ---- */

static int remote_locate(const stoker_dataset *ds, int64_t id, stoker__recloc *loc)
{
    const remote *r = ds->state;
    if (id < 0 || (uint64_t)id >= r->first[r->n])
        return STOKER_E_INVALID;
    const int32_t i = stoker__shard_find(r->first, r->n, (uint64_t)id);
    stoker__shard_locate(r->shards[i].index, (uint64_t)id - r->first[i], loc);
    loc->fd = -1;
    loc->shard = i;
    loc->fetch = 1; /* read from the block files by remote_fetch */
    return 0;
}

/* Waits until block b of shard i is ready and holds it for a read (users + 1). */
static int hold_block(remote *r, int32_t i, uint64_t b, const atomic_int *cancel,
                      stoker__err *err)
{
    rblock *k = &r->shards[i].blocks[b];
    k->users++; /* a ready block: held without mu (try_unpin) */
    if (k->st == B_READY)
        return 0;
    k->users--;
    uint64_t t0 = 0;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        if (k->st == B_READY)
            break;
        if (r->interrupted) {
            stoker__fail(err, STOKER_E_CANCELED, "%s: bytes %llu-%llu: the read was interrupted "
                         "(the loader is stopping)", r->shards[i].url,
                         (unsigned long long)(b * r->block_size),
                         (unsigned long long)(b * r->block_size +
                                              block_bytes(r, &r->shards[i], b) - 1));
            pthread_mutex_unlock(&r->mu);
            return STOKER_E_CANCELED;
        }
        if (cancel && atomic_load_explicit(cancel, memory_order_acquire)) {
            /* the caller's batch failed: its error is already said; the block goes on */
            stoker__fail(err, STOKER_E_CANCELED, "%s: block %llu: the batch already failed",
                         r->shards[i].url, (unsigned long long)b);
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
            pending *p = NULL;
            start_block(r, i, b, &p);
            if (p) {
                pthread_mutex_unlock(&r->mu);
                submit(r, p);
                pthread_mutex_lock(&r->mu);
            }
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
 * it (reads outside a loader's order, a batch's last record in it). One a batch ahead
 * needs stays, without mu taken here (every record read from the cache passes): the
 * loader's progress unpins it once no batch needs it. */
static void drop_block(remote *r, int32_t i, uint64_t b)
{
    rblock *k = &r->shards[i].blocks[b];
    if (--k->users > 0 || k->need > r->done)
        return;
    pthread_mutex_lock(&r->mu);
    if (k->need <= r->done)
        try_unpin(r, &r->shards[i], b);
    pthread_mutex_unlock(&r->mu);
}

/* The calling thread's buffer for records fetched without a destination. */
static pthread_key_t tbuf_key;
static pthread_once_t tbuf_once = PTHREAD_ONCE_INIT;
typedef struct tbuf {
    uint8_t *p;
    size_t cap;
} tbuf;

static void tbuf_free(void *v)
{
    tbuf *t = v;
    stoker__free(t->p);
    stoker__free(t);
}

static void tbuf_init(void)
{
    pthread_key_create(&tbuf_key, tbuf_free);
}

static uint8_t *thread_buffer(size_t n)
{
    pthread_once(&tbuf_once, tbuf_init);
    tbuf *t = pthread_getspecific(tbuf_key);
    if (!t && (t = stoker__calloc(1, sizeof *t)) != NULL && pthread_setspecific(tbuf_key, t) != 0) {
        stoker__free(t);
        t = NULL;
    }
    if (!t)
        return NULL;
    if (t->cap < n) {
        uint8_t *p = stoker__realloc(t->p, n);
        if (!p)
            return NULL;
        t->p = p;
        t->cap = n;
    }
    return t->p;
}

static int remote_fetch(stoker_dataset *ds, int64_t id, const stoker__recloc *loc, uint8_t *dst,
                        const uint8_t **out, const atomic_int *cancel, stoker__err *err)
{
    remote *r = ds->state;
    const int32_t i = loc->shard;
    rshard *sh = &r->shards[i];
    if (!dst)
        dst = thread_buffer(loc->length ? (size_t)loc->length : 1);
    STOKER_RETURN_IF(!dst, err, -ENOMEM, "%s: record %lld: out of memory", sh->url,
                     (long long)id);
    uint64_t at = loc->offset, left = loc->length;
    uint8_t *to = dst;
    while (left > 0) {
        const uint64_t b = at / r->block_size, in = at - b * r->block_size;
        const uint64_t n = r->block_size - in < left ? r->block_size - in : left;
        int rc = hold_block(r, i, b, cancel, err);
        if (rc < 0) {
            char was[STOKER_ERRMSG_CAP];
            snprintf(was, sizeof was, "%s", err->msg);
            return stoker__fail(err, rc, "record %lld: %s", (long long)id, was);
        }
        rc = stoker__pread_full(sh->blocks[b].fd, to, (size_t)n, in);
        drop_block(r, i, b);
        STOKER_RETURN_IF(rc < 0, err, rc,
                         "%s: record %lld: reading block %llu from the cache (%s): %s", sh->url,
                         (long long)id, (unsigned long long)b, stoker__cache_dir(r->cache),
                         rc == STOKER_E_CORRUPT ? "file shorter than the block"
                                                : stoker_strerror(rc));
        at += n;
        left -= n;
        to += n;
    }
    *out = dst;
    return 0;
}

/* Drops block b of shard i from this process and from the cache, its file removed, so that
 * the next reader fetches it (mu held; released meanwhile). Readers that hold it finish
 * their pread first: B_DROPPING sends new ones the slow way, to wait for the fetch. */
static void discard_block(remote *r, int32_t i, uint64_t b)
{
    rshard *sh = &r->shards[i];
    rblock *k = &sh->blocks[b];
    k->st = B_DROPPING;
    while (k->users != 0) { /* a pread each: short */
        pthread_mutex_unlock(&r->mu);
        sched_yield();
        pthread_mutex_lock(&r->mu);
    }
    stoker__cache_discard(sh->obj, b, k->fd);
    k->fd = -1;
    k->st = B_NONE;
    k->listed = false;
    r->pinned_bytes -= block_bytes(r, sh, b);
    pthread_cond_broadcast(&r->cond);
}

/* A record failed its CRC32C: the blocks it was read from go, their files too (a reply
 * with wrong bytes was committed, or a file was damaged on disk), and the next fetch reads
 * them from the server. A block unpinned since the read is pinned again to be dropped; one
 * being fetched, or dropped by another reader, already counts as dropped. */
static int remote_refetch(stoker_dataset *ds, int64_t id, const stoker__recloc *loc, char *what,
                          size_t cap)
{
    remote *r = ds->state;
    const int32_t i = loc->shard;
    rshard *sh = &r->shards[i];
    const uint64_t b0 = loc->offset / r->block_size;
    const uint64_t b1 = loc->length ? (loc->offset + loc->length - 1) / r->block_size : b0;
    char path[STOKER_ERRMSG_CAP / 2];
    stoker__cache_block_path(sh->obj, b0, path, sizeof path);
    snprintf(what, cap, "the cache's block file %s%s", path,
             b1 > b0 ? " (and the next block's)" : "");
    (void)id; /* the blocks are the record's, found by loc */
    pthread_mutex_lock(&r->mu);
    for (uint64_t b = b0; b <= b1 && b < sh->nblocks; b++) {
        if (sh->blocks[b].st == B_NONE) {
            pending *p = NULL;
            start_block(r, i, b, &p);
            if (p) { /* not in the cache any more: fetched afresh */
                pthread_mutex_unlock(&r->mu);
                submit(r, p);
                pthread_mutex_lock(&r->mu);
                continue;
            }
        }
        if (sh->blocks[b].st == B_READY)
            discard_block(r, i, b);
    }
    pthread_mutex_unlock(&r->mu);
    return 1;
}

static const char *remote_file_path(const stoker_dataset *ds, int32_t i)
{
    const remote *r = ds->state;
    return r && i >= 0 && i < r->n ? r->shards[i].shown : NULL;
}

static const char *remote_key(stoker_dataset *ds, int64_t id)
{
    remote *r = ds->state;
    return stoker__manifest_record_key(ds, &r->m, &r->key_lock, &r->keys_state, id);
}

static void remote_stats(stoker_dataset *ds, stoker__remote_stats *s)
{
    remote *r = ds->state;
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

static void remote_close(stoker_dataset *ds)
{
    remote *r = ds->state;
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
        stoker__cache_abort(r->shards[p->shard].obj, p->block, p->tmp_fd);
        stoker__free(p);
    }
    stoker__free(r->waiting);
    for (int32_t i = 0; r->shards && i < r->n; i++) {
        rshard *sh = &r->shards[i];
        for (uint64_t b = 0; sh->blocks && b < sh->nblocks; b++) {
            if (sh->blocks[b].st == B_READY)
                stoker__cache_release(sh->obj, b, sh->blocks[b].fd);
            stoker__free(sh->blocks[b].msg);
        }
        stoker__free(sh->blocks);
        stoker__free(sh->index);
        stoker__free(sh->url);
        stoker__free(sh->shown);
    }
    stoker__cache_close(r->cache);
    stoker__free(r->shards);
    stoker__free(r->first);
    stoker__free(r->pinned);
    stoker__free(r->ids);
    stoker__manifest_free(&r->m);
    stoker__free(r->base);
    pthread_mutex_destroy(&r->mu);
    pthread_mutex_destroy(&r->key_lock);
    pthread_cond_destroy(&r->cond);
    stoker__free(r);
    ds->state = NULL;
}

/* The block order's run of consecutive ids: the records of RUN_BLOCKS fetched blocks, on
 * average. A run rarely begins on a block's edge, so the blocks at its two ends are shared
 * with other runs, visited at other times of the epoch: with runs of one block's records
 * every block would be fetched twice an epoch once the data set outgrows the cache; with
 * four, about 1.25 times. */
#define RUN_BLOCKS 4
static uint64_t remote_block_records(const stoker_dataset *ds)
{
    const remote *r = ds->state;
    const uint64_t n = r->first[r->n];
    if (n == 0 || r->bytes == 0)
        return 0;
    const double k = RUN_BLOCKS * (double)r->block_size * (double)n / (double)r->bytes;
    return k < 1 ? 1 : k > (double)n ? n : (uint64_t)k;
}

static const stoker__source_ops REMOTE_OPS = {
    .name = "remote",
    .locate = remote_locate,
    .file_path = remote_file_path,
    .key = remote_key,
    .close = remote_close,
    .fetch = remote_fetch,
    .refetch = remote_refetch,
    .follow = remote_follow,
    .progress = remote_progress,
    .interrupt = remote_interrupt,
    .block_records = remote_block_records,
    .remote_stats = remote_stats,
    .backend = STOKER_BACKEND_REMOTE,
};

/* ---- opening ---- */

static int remote_claims(const char *path)
{
    return stoker__http_is_url(path);
}

static bool ends_with(const char *s, const char *tail)
{
    const size_t n = strlen(s), m = strlen(tail);
    return n >= m && strcmp(s + n - m, tail) == 0;
}

/* Runs n requests, OPEN_PARALLEL at a time in the client; the first failure's rc. */
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

static int run_all(remote *r, stoker__http_req *reqs, uint32_t n, stoker__err *err)
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

/* The manifest: HEAD for its size (bounded), then GET. */
static int load_manifest(stoker_dataset *ds, remote *r, uint64_t max_shards, uint64_t max_records)
{
    char url[4200];
    snprintf(url, sizeof url, "%s/%s", r->base, STK_MANIFEST_NAME);
    stoker__http_req h = {.url = url, .head = true, .fd = -1};
    int rc = stoker__http_run(r->http[0], &h);
    if (rc == -ENOENT) {
        const bool h5 = ends_with(ds->path, ".h5") || ends_with(ds->path, ".hdf5") ||
                        ends_with(ds->path, ".hdf") || strstr(ds->path, ".h5:") != NULL;
        return stoker__fail(&ds->err, h5 ? STOKER_E_UNSUPPORTED : STOKER_E_FORMAT,
                            h5 ? "%s: HDF5 files are read from local files only; pack it with "
                                 "`stoker-pack FILE.h5 OUT`, upload OUT and open its URL"
                               : "%s: not a stoker data set (no %s there: %s)",
                            ds->path, STK_MANIFEST_NAME, h.msg);
    }
    STOKER_RETURN_IF(rc < 0, &ds->err, rc, "%s", h.msg);
    STOKER_RETURN_IF(h.size == UINT64_MAX, &ds->err, STOKER_E_FORMAT,
                     "%s: the reply to HEAD has no Content-Length: the manifest's length is "
                     "missing", url);
    STOKER_RETURN_IF(h.size > STK_MANIFEST_MAX, &ds->err, STOKER_E_LIMIT,
                     "%s: manifest of %llu bytes exceeds the limit of %llu", url,
                     (unsigned long long)h.size, (unsigned long long)STK_MANIFEST_MAX);
    char *text = stoker__malloc((size_t)h.size + 1);
    STOKER_RETURN_IF(!text, &ds->err, -ENOMEM, "%s: out of memory", url);
    stoker__http_req g = {.url = url, .fd = -1, .buf = (uint8_t *)text, .cap = (size_t)h.size,
                          .if_match = h.etag[0] ? h.etag : NULL};
    rc = stoker__http_run(r->http[0], &g);
    if (rc == 0 && g.got != h.size)
        rc = stoker__fail(&ds->err, STOKER_E_CORRUPT, "%s: %llu bytes came, %llu were due", url,
                          (unsigned long long)g.got, (unsigned long long)h.size);
    else if (rc < 0)
        stoker__fail(&ds->err, rc, "%s", g.msg);
    if (rc < 0) {
        stoker__free(text);
        return rc;
    }
    text[h.size] = '\0';
    return stoker__manifest_parse(&r->m, text, (size_t)h.size, url, max_shards, max_records,
                                  &ds->err);
}

/* Each shard's size and validator (HEAD, all at once). */
static int head_shards(stoker_dataset *ds, remote *r)
{
    stoker__http_req *q = stoker__calloc((size_t)r->n ? (size_t)r->n : 1, sizeof *q);
    STOKER_RETURN_IF(!q, &ds->err, -ENOMEM, "%s: out of memory", ds->path);
    for (int32_t i = 0; i < r->n; i++)
        q[i] = (stoker__http_req){.url = r->shards[i].url, .head = true, .fd = -1};
    int rc = run_all(r, q, (uint32_t)r->n, &ds->err);
    for (int32_t i = 0; rc == 0 && i < r->n; i++) {
        rshard *sh = &r->shards[i];
        const uint64_t want = r->m.shards[i].bytes;
        if (q[i].size == UINT64_MAX) {
            rc = stoker__fail(&ds->err, STOKER_E_FORMAT,
                              "%s: the reply to HEAD has no Content-Length: the shard's length "
                              "is missing (the manifest says %llu bytes)",
                              sh->url, (unsigned long long)want);
            break;
        }
        if (q[i].size != want) {
            rc = stoker__fail(&ds->err, STOKER_E_CORRUPT,
                              "%s: %llu bytes, but the manifest says %llu (truncated or replaced)",
                              sh->url, (unsigned long long)q[i].size, (unsigned long long)want);
            break;
        }
        sh->size = want;
        snprintf(sh->etag, sizeof sh->etag, "%s", q[i].etag);
        if (q[i].etag[0])
            snprintf(sh->validator, sizeof sh->validator, "etag %s", q[i].etag);
        else
            snprintf(sh->validator, sizeof sh->validator, "modified %s size %llu",
                     q[i].last_modified, (unsigned long long)want);
    }
    stoker__free(q);
    return rc;
}

/* Header, footer, then index of every shard, each checked. */
static int read_indexes(stoker_dataset *ds, remote *r, uint64_t max_records, uint64_t max_size)
{
    const size_t n = (size_t)r->n ? (size_t)r->n : 1;
    stoker__http_req *q = stoker__calloc(2 * n, sizeof *q);
    uint8_t *hf = stoker__malloc(n * (STK_HEADER_SIZE + STK_FOOTER_SIZE));
    int rc = q && hf ? 0 : stoker__fail(&ds->err, -ENOMEM, "%s: out of memory", ds->path);
    for (int32_t i = 0; rc == 0 && i < r->n; i++) {
        rshard *sh = &r->shards[i];
        uint8_t *h = hf + (size_t)i * (STK_HEADER_SIZE + STK_FOOTER_SIZE);
        const char *etag = sh->etag[0] ? sh->etag : NULL;
        q[2 * i] = (stoker__http_req){.url = sh->url, .offset = 0, .length = STK_HEADER_SIZE,
                                      .if_match = etag, .fd = -1, .buf = h,
                                      .cap = STK_HEADER_SIZE};
        q[2 * i + 1] = (stoker__http_req){.url = sh->url, .offset = sh->size - STK_FOOTER_SIZE,
                                          .length = STK_FOOTER_SIZE, .if_match = etag, .fd = -1,
                                          .buf = h + STK_HEADER_SIZE, .cap = STK_FOOTER_SIZE};
    }
    if (rc == 0)
        rc = run_all(r, q, 2 * (uint32_t)r->n, &ds->err);
    for (int32_t i = 0; rc == 0 && i < r->n; i++) {
        rshard *sh = &r->shards[i];
        const uint8_t *h = hf + (size_t)i * (STK_HEADER_SIZE + STK_FOOTER_SIZE);
        const stoker__shard_ctx c = {&r->m, i, sh->url, r->first[i], max_records, max_size};
        uint64_t ioff = 0, isize = 0;
        if ((rc = stoker__shard_check_header(&c, h, &ds->err)) < 0 ||
            (rc = stoker__shard_check_footer(&c, h + STK_HEADER_SIZE, &ioff, &isize,
                                             &ds->err)) < 0)
            break;
        sh->records = isize / STK_ENTRY_SIZE;
        sh->index = stoker__malloc(isize ? (size_t)isize : 1);
        if (!sh->index) {
            rc = stoker__fail(&ds->err, -ENOMEM, "%s: out of memory for an index of %llu bytes",
                              sh->url, (unsigned long long)isize);
            break;
        }
        q[i] = (stoker__http_req){.url = sh->url, .offset = ioff, .length = isize,
                                  .if_match = sh->etag[0] ? sh->etag : NULL, .fd = -1,
                                  .buf = sh->index, .cap = (size_t)isize};
    }
    if (rc == 0)
        rc = run_all(r, q, (uint32_t)r->n, &ds->err);
    for (int32_t i = 0; rc == 0 && i < r->n; i++) {
        rshard *sh = &r->shards[i];
        const uint8_t *f = hf + (size_t)i * (STK_HEADER_SIZE + STK_FOOTER_SIZE) + STK_HEADER_SIZE;
        const stoker__shard_ctx c = {&r->m, i, sh->url, r->first[i], max_records, max_size};
        rc = stoker__shard_check_index(&c, f, sh->index, &ds->info.payload_bytes,
                                       &ds->info.max_record, &ds->err);
    }
    stoker__free(q);
    stoker__free(hf);
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

static int remote_open(stoker_dataset *ds, const char *path, const stoker_config *cfg)
{
    remote *r = ds->state = stoker__calloc(1, sizeof *r);
    STOKER_RETURN_IF(!r, &ds->err, -ENOMEM, "%s: out of memory", path);
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->key_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_cond_init(&r->cond, &ca);
    pthread_condattr_destroy(&ca);
    ds->ops = &REMOTE_OPS;

    size_t len = strlen(path);
    if (ends_with(path, "/" STK_MANIFEST_NAME))
        len -= strlen("/" STK_MANIFEST_NAME);
    while (len > 0 && path[len - 1] == '/')
        len--;
    r->base = stoker__malloc(len + 1);
    STOKER_RETURN_IF(!r->base, &ds->err, -ENOMEM, "%s: out of memory", path);
    memcpy(r->base, path, len);
    r->base[len] = '\0';

    const int64_t transfers = stoker__cfg_int(cfg, STOKER_OPT_FETCH_TRANSFERS);
    r->block_size = (uint32_t)stoker__cfg_int(cfg, STOKER_OPT_BLOCK_SIZE);
    r->window = (uint64_t)stoker__cfg_int(cfg, STOKER_OPT_FETCH_WINDOW);
    r->nhttp = clients((uint32_t)transfers,
                       (uint32_t)stoker__cfg_int(cfg, STOKER_OPT_FETCH_CLIENTS));
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
    STOKER_RETURN_IF(rc < 0, &ds->err, rc, "%s: %s", path, herr.msg);

    /* a limit smaller than what must be in flight could never make progress: the window,
     * and blocks the workers ask for beyond it (as many again as transfers) */
    const uint64_t in_flight = r->window + 2 * (uint64_t)transfers * r->block_size;
    const uint64_t asked = (uint64_t)stoker__cfg_int(cfg, STOKER_OPT_CACHE_LIMIT);
    const char *dir = given(cfg, STOKER_OPT_CACHE_DIR);
    STOKER_RETURN_IF(asked && asked < in_flight, &ds->err, STOKER_E_LIMIT,
                     "%s: cache_limit %llu is smaller than what must be in flight: fetch_window "
                     "%llu + 2 x fetch_transfers %lld x block_size %u = %llu bytes",
                     path, (unsigned long long)asked, (unsigned long long)r->window,
                     (long long)transfers, r->block_size, (unsigned long long)in_flight);
    stoker__err cerr = {0};
    rc = stoker__cache_open(&r->cache, dir, asked ? asked : in_flight, &cerr);
    STOKER_RETURN_IF(rc < 0, &ds->err, rc, "%s: the block cache: %s", path, cerr.msg);
    if (!asked) { /* now that the directory exists, size the default on its file system */
        stoker__cache_stats cs;
        stoker__cache_stats_get(r->cache, &cs);
        const uint64_t avail = stoker__cache_free_bytes(r->cache);
        const uint64_t limit =
            default_limit(stoker__cache_dir(r->cache), 4 * in_flight, avail + cs.bytes);
        STOKER_RETURN_IF(limit < in_flight, &ds->err, STOKER_E_LIMIT,
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
        STOKER_RETURN_IF(rc < 0, &ds->err, rc, "%s: the block cache: %s", path, cerr.msg);
    }
    r->now_max = stoker__cache_limit(r->cache) / 2;
    r->nospc_want = in_flight;

    const uint64_t max_records = (uint64_t)stoker__cfg_int(cfg, STOKER_OPT_MAX_RECORDS);
    const uint64_t max_size = (uint64_t)stoker__cfg_int(cfg, STOKER_OPT_MAX_RECORD_SIZE);
    rc = load_manifest(ds, r, (uint64_t)stoker__cfg_int(cfg, STOKER_OPT_MAX_SHARDS), max_records);
    if (rc < 0)
        return rc;
    const uint32_t n = r->m.nshards;
    r->shards = stoker__calloc(n ? n : 1, sizeof *r->shards);
    r->first = stoker__calloc((size_t)n + 1, sizeof *r->first);
    STOKER_RETURN_IF(!r->shards || !r->first, &ds->err, -ENOMEM, "%s: out of memory", path);
    r->n = (int32_t)n;
    for (uint32_t i = 0; i < n; i++) {
        rshard *sh = &r->shards[i];
        sh->url = stoker__http_join(r->base, r->m.shards[i].name);
        STOKER_RETURN_IF(!sh->url, &ds->err, -ENOMEM, "%s: out of memory", path);
        const size_t ulen = strlen(sh->url) + 1;
        sh->shown = stoker__malloc(ulen + 3);
        STOKER_RETURN_IF(!sh->shown, &ds->err, -ENOMEM, "%s: out of memory", path);
        stoker_redact(sh->url, sh->shown, ulen + 3);
        r->first[i + 1] = r->first[i] + r->m.shards[i].records;
    }
    if ((rc = head_shards(ds, r)) < 0 || (rc = read_indexes(ds, r, max_records, max_size)) < 0)
        return rc;
    for (int32_t i = 0; i < r->n; i++) {
        rshard *sh = &r->shards[i];
        sh->nblocks = (sh->size + r->block_size - 1) / r->block_size;
        sh->blocks = stoker__calloc(sh->nblocks ? sh->nblocks : 1, sizeof *sh->blocks);
        STOKER_RETURN_IF(!sh->blocks, &ds->err, -ENOMEM, "%s: out of memory", path);
        for (uint64_t b = 0; b < sh->nblocks; b++)
            sh->blocks[b].fd = -1;
        rc = stoker__cache_object(r->cache, sh->url, sh->validator, sh->size, r->block_size,
                                  &sh->obj, &cerr);
        STOKER_RETURN_IF(rc < 0, &ds->err, rc, "%s: the block cache: %s", sh->url, cerr.msg);
    }
    rc = stoker__thread_start(&r->thread, ahead_main, r);
    STOKER_RETURN_IF(rc != 0, &ds->err, -rc, "%s: cannot start the fetch thread: %s", path,
                     stoker_strerror(-rc));
    r->thread_started = true;

    stoker__dsinfo *in = &ds->info;
    in->records = r->first[r->n];
    in->files = r->n;
    in->version = r->m.version;
    in->align = r->m.align;
    in->jpeg_checked = r->m.jpeg_checked;
    in->kind = r->m.kind;
    in->dtype = r->m.dtype;
    in->ndim = r->m.ndim;
    memcpy(in->shape, r->m.shape, sizeof in->shape);
    in->nclasses = r->m.nclasses;
    in->classes = r->m.classes;

    for (int32_t i = 0; i < r->n; i++)
        r->bytes += r->shards[i].size;
    const uint64_t limit = stoker__cache_limit(r->cache);
    if (r->bytes > limit) {
        const stoker__log log = stoker__cfg_log(cfg);
        stoker__logf(&log, STOKER_LOG_WARN,
                     "%s: the data set's %llu bytes exceed the block cache's limit of %llu: "
                     "every epoch fetches again what was evicted, and in the record order each "
                     "record may cost a block; the block order (order=blocks) fetches each "
                     "block about once an epoch",
                     path, (unsigned long long)r->bytes, (unsigned long long)limit);
    }
    return 0;
}

/* ---- verify: every record's CRC32C and every shard's, through the blocks ---- */

static void verify_problem(int64_t *problems, stoker_verify_fn fn, void *user, int32_t shard,
                           int64_t id, int rc, const char *msg)
{
    (*problems)++;
    char shown[STOKER_ERRMSG_CAP];
    if (fn)
        fn(user, shard, id, rc, stoker_redact(msg, shown, sizeof shown));
}

/* Streams each shard's blocks once: the whole file's CRC32C and, as the bytes pass (records
 * lie in ascending, non-overlapping order: the open checked the index), every record's. */
static int remote_verify(stoker_dataset *ds, const stoker_config *cfg, stoker_verify_fn fn,
                         void *user, int64_t *problems)
{
    int rc = remote_open(ds, ds->path, cfg);
    if (rc < 0)
        return rc;
    ds->ready = true;
    remote *r = ds->state;
    for (int32_t i = 0; i < r->n; i++) {
        rshard *sh = &r->shards[i];
        uint32_t crc = 0, rcrc = 0; /* the file's; the record k's so far */
        uint64_t k = 0;
        bool whole = true;
        for (uint64_t b = 0; b < sh->nblocks; b++) {
            stoker__err err = {0};
            const uint64_t n = block_bytes(r, sh, b), at = b * r->block_size;
            uint8_t *buf = thread_buffer((size_t)n);
            int brc = buf ? hold_block(r, i, b, NULL, &err)
                          : stoker__fail(&err, -ENOMEM, "%s: out of memory", sh->url);
            if (brc == 0) {
                brc = stoker__pread_full(sh->blocks[b].fd, buf, (size_t)n, 0);
                drop_block(r, i, b);
                if (brc < 0)
                    stoker__fail(&err, brc, "%s: block %llu: read from the cache: %s", sh->url,
                                 (unsigned long long)b, stoker_strerror(brc));
            }
            if (brc < 0) {
                verify_problem(problems, fn, user, i, -1, brc, err.msg);
                whole = false;
                break;
            }
            crc = stoker_crc32c(crc, buf, (size_t)n);
            for (; k < sh->records; k++) {
                const stoker__shard_rec e = stoker__shard_entry(sh->index, k);
                const uint64_t lo = e.offset > at ? e.offset : at;
                const uint64_t hi = e.offset + e.length < at + n ? e.offset + e.length : at + n;
                if (lo < hi)
                    rcrc = stoker_crc32c(rcrc, buf + (lo - at), (size_t)(hi - lo));
                if (e.offset + e.length > at + n)
                    break; /* goes on in the next block */
                if (rcrc != e.crc) {
                    char msg[STOKER_ERRMSG_CAP];
                    const int64_t id = (int64_t)(r->first[i] + k);
                    snprintf(msg, sizeof msg,
                             "%s: record %lld (shard record %llu): CRC32C mismatch (stored %08x, "
                             "computed %08x)",
                             sh->url, (long long)id, (unsigned long long)k, e.crc, rcrc);
                    verify_problem(problems, fn, user, i, id, STOKER_E_CORRUPT, msg);
                }
                rcrc = 0;
            }
        }
        if (whole && crc != r->m.shards[i].crc) {
            char msg[STOKER_ERRMSG_CAP];
            snprintf(msg, sizeof msg,
                     "%s: whole-file CRC32C mismatch (manifest %08x, computed %08x)", sh->url,
                     r->m.shards[i].crc, crc);
            verify_problem(problems, fn, user, i, -1, STOKER_E_CORRUPT, msg);
        }
    }
    return *problems > 0 ? STOKER_E_CORRUPT : 0;
}

const stoker__source stoker__remote_source = {
    .name = "remote",
    .claims = remote_claims,
    .open = remote_open,
    .verify = remote_verify,
};
