/* SPDX-License-Identifier: Apache-2.0 */
/* The record path of a packed data set behind a URL (http://, https://, s3://BUCKET/PREFIX;
 * docs/REMOTE.md). shards.c opens it as it opens a local one (the manifest, every shard's
 * header, footer and index, read through the remote transport and checked there); this
 * file only turns records into byte ranges of the shards' remote objects (remote/object.h).
 *
 * A record is a fetched record (dataset.h) read through the workers' reader: the worker's
 * plan holds the cached blocks covering it (lock-free once they are in the cache and
 * pinned) and lists the reads of those block files into a buffer of the thread (one per
 * block the record touches); the worker's io_uring or pread reader makes them with the
 * round's other reads; each landing read is handed back (landed), and once a record's
 * reads are all in, its blocks are let go; the fetch then hands the bytes over. A record
 * whose blocks are not all in the cache yet is planned as PLAN_NONE:
 * the fetch waits for them and reads it synchronously (stoker__robj_read).
 *
 * Reading ahead: given the loader's future order (stoker__dataset_follow), the transport's
 * thread walks the batches to come, each record turned into its byte extent here, and
 * starts every block they need in the order they need them (object.h). */
#include "common/config.h"
#include "cuda/nvtx.h"
#include "remote/http.h"
#include "remote/object.h"
#include "source/shard_rec.h"
#include "source/shards.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define PLANS_MAX 256                    /* records one thread plans in a round */
#define ARENA_BYTES (UINT64_C(32) << 20) /* a thread's buffer for a round's records */

/* One record planned in the calling thread's round. */
typedef struct rplan {
    int64_t id;
    int32_t shard;
    uint64_t off, len;
    uint8_t *buf;     /* the record's destination, else in the thread's arena */
    uint32_t pending; /* reads not landed yet */
    int err;          /* a read failed (-errno) or came short */
    bool held;        /* its blocks are held (until its reads land) */
    bool used;        /* fetched */
} rplan;

/* A worker thread's round (one per thread and data set, freed at close). */
typedef struct rthread {
    struct rthread *next;
    uint64_t round;
    rplan plans[PLANS_MAX];
    uint32_t nplans, next_fetch;
    uint8_t *arena;
    uint64_t used;
    _Atomic uint64_t records; /* fetched as planned (cache_records); written by this thread
                                 only, so its count needs no shared cache line per record */
} rthread;

struct stoker__shards_remote {
    /* not a stoker__thread_key: a data set's rounds, listed and freed with it, never by
     * the threads (the key is deleted at its end) */
    pthread_key_t key;
    bool key_ok;
    pthread_mutex_t mu; /* threads' list; the future order (fut, ids), which the
                           transport's read-ahead thread reads through extents() */
    rthread *threads;
    stoker__future fut;
    int64_t *ids;
    uint64_t ids_cap;
    uint64_t bytes;               /* of the shard files */
    atomic_uint_fast64_t records; /* fetched after waiting for their blocks (cache_records,
                                     with the threads' own counts of planned records) */
};

/* ---- the read-ahead: records to byte extents ---- */

static uint64_t extents(void *ctx, uint64_t seq, stoker__rextent *out)
{
    stoker__shards *S = ctx;
    stoker__shards_remote *R = S->rem;
    pthread_mutex_lock(&R->mu);
    uint64_t k = 0;
    if (R->fut.batch) {
        const uint64_t n = R->fut.batch(R->fut.ctx, seq, R->ids);
        for (uint64_t j = 0; j < n; j++) {
            const uint64_t id = (uint64_t)R->ids[j];
            if (id >= S->first[S->n])
                continue;
            const int32_t i = stoker__shard_find(S->first, S->n, id);
            const stoker__shard_rec e = stoker__shard_entry(S->files[i].index, id - S->first[i]);
            out[k++] = (stoker__rextent){S->files[i].obj, e.offset, e.length};
        }
        /* n == 0 (no such batch) answers 0; a batch whose ids all fell outside answers one
         * empty extent, so that the walk goes on */
        if (n > 0 && k == 0)
            out[k++] = (stoker__rextent){NULL, 0, 0};
    }
    pthread_mutex_unlock(&R->mu);
    return k;
}

static void remote_follow(stoker_dataset *ds, const stoker__future *f)
{
    stoker__shards *S = ds->state;
    stoker__shards_remote *R = S->rem;
    bool ok = f != NULL;
    pthread_mutex_lock(&R->mu);
    R->fut = (stoker__future){0};
    if (f && (!R->ids || R->ids_cap < f->batch_cap)) {
        int64_t *ids = stoker__realloc(R->ids, (f->batch_cap ? f->batch_cap : 1) * sizeof *ids);
        if (ids) {
            R->ids = ids;
            R->ids_cap = f->batch_cap;
        } else {
            ok = false; /* no read-ahead: workers fetch on demand */
        }
    }
    if (ok)
        R->fut = *f;
    pthread_mutex_unlock(&R->mu);
    const stoker__rahead ra = {extents, S, ok ? f->first : 0, ok ? f->batch_cap : 0};
    stoker__robjs_follow(S->rs, ok ? &ra : NULL);
}

static void remote_progress(stoker_dataset *ds, uint64_t seq)
{
    stoker__shards *S = ds->state;
    stoker__robjs_progress(S->rs, seq);
}

static void remote_interrupt(stoker_dataset *ds, bool on)
{
    stoker__shards *S = ds->state;
    stoker__robjs_interrupt(S->rs, on);
}

/* ---- records ---- */

static int remote_locate(const stoker_dataset *ds, int64_t id, stoker__recloc *loc)
{
    const stoker__shards *S = ds->state;
    if (id < 0 || (uint64_t)id >= S->first[S->n])
        return STOKER_E_INVALID;
    const int32_t i = stoker__shard_find(S->first, S->n, (uint64_t)id);
    stoker__shard_locate(S->files[i].index, (uint64_t)id - S->first[i], loc);
    loc->fd = -1;
    loc->shard = i;
    loc->fetch = 1; /* planned and fetched below */
    return 0;
}

/* The calling thread's round for this data set (NULL: none can be made). */
static rthread *thread_round(stoker__shards_remote *R, bool make)
{
    if (!R->key_ok)
        return NULL;
    rthread *t = pthread_getspecific(R->key);
    if (t || !make)
        return t;
    t = stoker__calloc(1, sizeof *t);
    if (!t)
        return NULL;
    if (pthread_setspecific(R->key, t) != 0) {
        stoker__free(t);
        return NULL;
    }
    pthread_mutex_lock(&R->mu);
    t->next = R->threads;
    R->threads = t;
    pthread_mutex_unlock(&R->mu);
    return t;
}

/* Ends the thread's round: holds of records whose reads never all landed (a round given
 * up) are let go. */
static void round_end(stoker__shards *S, rthread *t)
{
    for (uint32_t k = 0; k < t->nplans; k++) {
        rplan *p = &t->plans[k];
        if (p->held)
            stoker__robj_release(S->files[p->shard].obj, p->off, p->len);
        p->held = false;
    }
    t->nplans = t->next_fetch = 0;
    t->used = 0;
}

static int remote_plan(stoker_dataset *ds, int64_t id, const stoker__recloc *loc, uint64_t round,
                       uint8_t *dst, stoker__fetch_read *out, uint32_t cap, uint32_t *n)
{
    stoker__shards *S = ds->state;
    *n = 0;
    rthread *t = thread_round(S->rem, true);
    if (!t)
        return STOKER__PLAN_NONE;
    if (t->round != round) {
        round_end(S, t);
        t->round = round;
    }
    /* A record fetched at once waits for its blocks, which may need room in the cache that
     * this round's holds keep: with records planned, the round goes first (PLAN_FULL),
     * and the record is fetched as the next round's first, holding nothing. */
    const int later = t->nplans > 0 ? STOKER__PLAN_FULL : STOKER__PLAN_NONE;
    if (loc->length == 0 || loc->length > ARENA_BYTES)
        return later;
    /* a record with a destination is read straight into it; one without, into the arena */
    if (t->nplans == PLANS_MAX || (!dst && t->used + loc->length > ARENA_BYTES))
        return STOKER__PLAN_FULL;
    if (!dst && !t->arena && !(t->arena = stoker__malloc((size_t)ARENA_BYTES)))
        return later;
    stoker__robj *o = S->files[loc->shard].obj;
    stoker__rspan sp[STOKER__HOLD_MAX];
    uint32_t ns = 0;
    const int rc = stoker__robj_hold(o, loc->offset, loc->length, sp,
                                     cap < STOKER__HOLD_MAX ? cap : STOKER__HOLD_MAX, &ns);
    if (rc == STOKER_E_LIMIT)
        return STOKER__PLAN_FULL; /* more blocks than this round has room for */
    if (rc < 0)
        return later; /* not all in the cache (-EAGAIN): the fetch waits */
    const uint32_t k = t->nplans++;
    rplan *p = &t->plans[k];
    *p = (rplan){.id = id,
                 .shard = loc->shard,
                 .off = loc->offset,
                 .len = loc->length,
                 .buf = dst ? dst : t->arena + t->used,
                 .pending = ns,
                 .held = true};
    if (!dst)
        t->used += stoker__align_up(loc->length, 64);
    uint64_t at = 0;
    for (uint32_t s = 0; s < ns; s++) {
        out[s] = (stoker__fetch_read){.fd = sp[s].fd,
                                      .offset = sp[s].offset,
                                      .length = sp[s].length,
                                      .dst = p->buf + at,
                                      .cookie = k,
                                      .transient = true};
        at += sp[s].length;
    }
    *n = ns;
    return STOKER__PLAN_OK;
}

static void remote_landed(stoker_dataset *ds, uint32_t cookie, uint64_t length, int64_t res)
{
    stoker__shards *S = ds->state;
    rthread *t = thread_round(S->rem, false);
    if (!t || cookie >= t->nplans)
        return;
    rplan *p = &t->plans[cookie];
    if (res < 0 && p->err == 0)
        p->err = (int)res;
    else if (res >= 0 && (uint64_t)res < length && p->err == 0)
        p->err = STOKER_E_CORRUPT; /* a block file shorter than the block */
    if (p->pending > 0 && --p->pending == 0 && p->held) {
        /* its bytes are in the arena: the blocks may go (a refetch may drop them) */
        stoker__robj_release(S->files[p->shard].obj, p->off, p->len);
        p->held = false;
    }
}

/* The calling thread's buffer for records fetched without a destination. */
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

static stoker__thread_key tbuf_key = STOKER__THREAD_KEY(tbuf, tbuf_free);

/* Its contents are not kept from one call to the next. */
static uint8_t *thread_buffer(size_t n)
{
    tbuf *t = stoker__thread_object(&tbuf_key);
    return t && stoker__scratch_grow(&t->p, &t->cap, n) == 0 ? t->p : NULL;
}

/* The record planned in this thread's round, its reads all landed whole; NULL if none. */
static rplan *planned(stoker__shards *S, int64_t id, const stoker__recloc *loc)
{
    rthread *t = thread_round(S->rem, false);
    if (!t)
        return NULL;
    for (uint32_t k = t->next_fetch; k < t->nplans; k++) {
        rplan *p = &t->plans[k];
        if (p->id != id || p->off != loc->offset || p->len != loc->length || p->used)
            continue;
        p->used = true;
        t->next_fetch = k + 1;
        /* a read that failed or never landed: read again below, which says why it fails */
        if (p->pending != 0 || p->err != 0)
            return NULL;
        atomic_store_explicit(&t->records,
                              atomic_load_explicit(&t->records, memory_order_relaxed) + 1,
                              memory_order_relaxed);
        return p;
    }
    return NULL;
}

static int remote_fetch(stoker_dataset *ds, int64_t id, const stoker__recloc *loc, uint8_t *dst,
                        const uint8_t **out, const atomic_int *cancel, stoker__err *err)
{
    stoker__shards *S = ds->state;
    const rplan *p = planned(S, id, loc);
    if (p) {
        /* The record was read from the block cache by the worker's reader: the one place
         * the record path knows a record came from the cache without waiting. */
        if (dst && dst != p->buf)
            memcpy(dst, p->buf, (size_t)p->len);
        *out = dst ? dst : p->buf;
        return 0;
    }
    if (!dst)
        dst = thread_buffer(loc->length ? (size_t)loc->length : 1);
    STOKER_RETURN_IF(!dst, err, -ENOMEM, "%s: record %lld: out of memory",
                     S->files[loc->shard].path, (long long)id);
    const int rc =
        stoker__robj_read(S->files[loc->shard].obj, dst, loc->length, loc->offset, cancel, err);
    if (rc < 0) {
        char was[STOKER_ERRMSG_CAP];
        snprintf(was, sizeof was, "%s", err->msg);
        return stoker__fail(err, rc, "record %lld: %s", (long long)id, was);
    }
    atomic_fetch_add_explicit(&S->rem->records, 1, memory_order_relaxed);
    *out = dst;
    return 0;
}

/* A record failed its CRC32C: the blocks it was read from go, their files too (a reply
 * with wrong bytes was committed, or a file was damaged on disk), and the next fetch reads
 * them from the server. */
static int remote_refetch(stoker_dataset *ds, int64_t id, const stoker__recloc *loc, char *what,
                          size_t cap)
{
    stoker__shards *S = ds->state;
    (void)id; /* the blocks are the record's, found by loc */
    stoker__robj_discard(S->files[loc->shard].obj, loc->offset, loc->length, what, cap);
    return 1;
}

static const char *remote_file_path(const stoker_dataset *ds, int32_t i)
{
    const stoker__shards *S = ds->state;
    return S && i >= 0 && i < S->n && S->files[i].obj ? stoker__robj_shown(S->files[i].obj) : NULL;
}

static const char *remote_key(stoker_dataset *ds, int64_t id)
{
    stoker__shards *S = ds->state;
    return stoker__manifest_record_key(ds, &S->m, &S->key_lock, &S->keys_state, id);
}

/* A remote source's counters from its transport's; `records`: those it read from the
 * cache. The HDF5 source's remote files share it (source.h). */
void stoker__source_remote_stats(struct stoker__robjs *set, uint64_t records,
                                 stoker__remote_stats *s)
{
    stoker__robjs_stats st = {0};
    if (set)
        stoker__robjs_stats_get(set, &st);
    *s = (stoker__remote_stats){.bytes_fetched = st.bytes_fetched,
                                .requests = st.requests,
                                .retries = st.retries,
                                .cache_hits = st.cache_hits,
                                .cache_misses = st.cache_misses,
                                .cache_bytes = st.cache_bytes,
                                .cache_limit = st.cache_limit,
                                .wait_ns = st.wait_ns,
                                .block_size = st.block_size,
                                .window = st.window,
                                .records = records};
}

static void remote_stats(stoker_dataset *ds, stoker__remote_stats *s)
{
    stoker__shards *S = ds->state;
    stoker__shards_remote *R = S->rem;
    uint64_t records = atomic_load_explicit(&R->records, memory_order_relaxed);
    pthread_mutex_lock(&R->mu);
    for (const rthread *t = R->threads; t; t = t->next)
        records += atomic_load_explicit(&t->records, memory_order_relaxed);
    pthread_mutex_unlock(&R->mu);
    stoker__source_remote_stats(S->rs, records, s);
}

/* The block order's run of consecutive ids: the records of RUN_BLOCKS fetched blocks, on
 * average. A run rarely begins on a block's edge, so the blocks at its two ends are shared
 * with other runs, visited at other times of the epoch: with runs of one block's records
 * every block would be fetched twice an epoch once the data set outgrows the cache; with
 * four, about 1.25 times. */
#define RUN_BLOCKS 4
static uint64_t remote_block_records(const stoker_dataset *ds)
{
    const stoker__shards *S = ds->state;
    const uint64_t n = S->first[S->n];
    if (n == 0 || !S->rem || S->rem->bytes == 0)
        return 0;
    const double k =
        RUN_BLOCKS * (double)stoker__robjs_block_size(S->rs) * (double)n / (double)S->rem->bytes;
    return k < 1 ? 1 : k > (double)n ? n : (uint64_t)k;
}

const stoker__source_ops stoker__remote_shard_ops = {
    .name = "remote",
    .locate = remote_locate,
    .file_path = remote_file_path,
    .key = remote_key,
    .close = stoker__shards_close,
    .fetch = remote_fetch,
    .plan = remote_plan,
    .landed = remote_landed,
    .refetch = remote_refetch,
    .follow = remote_follow,
    .progress = remote_progress,
    .interrupt = remote_interrupt,
    .block_records = remote_block_records,
    .remote_stats = remote_stats,
    .label_at = stoker__shards_label_at,
    .backend = STOKER_BACKEND_REMOTE,
};

/* ---- open and close ---- */

static uint64_t fetch_mark(void)
{
    return stoker__nvtx_start(STOKER__NVTX_FETCH);
}

int stoker__shards_remote_begin(stoker_dataset *ds, const stoker_config *cfg)
{
    stoker__shards *S = ds->state;
    stoker__shards_remote *R = S->rem = stoker__calloc(1, sizeof *R);
    STOKER_RETURN_IF(!R, &ds->err, -ENOMEM, "%s: out of memory", ds->path);
    pthread_mutex_init(&R->mu, NULL);
    R->key_ok = pthread_key_create(&R->key, NULL) == 0; /* else every record is fetched */
    stoker__robjs_trace(S->rs, fetch_mark, stoker__nvtx_end);
    for (int32_t i = 0; i < S->n; i++)
        R->bytes += S->m.shards[i].bytes;
    const uint64_t limit = stoker__robjs_cache_limit(S->rs);
    if (R->bytes > limit) {
        const stoker__log log = stoker__cfg_log(cfg);
        stoker__logf(&log, STOKER_LOG_WARN,
                     "%s: the data set's %llu bytes exceed the block cache's limit of %llu: "
                     "every epoch fetches again what was evicted, and in the record order each "
                     "record may cost a block; the block order (order=blocks) fetches each "
                     "block about once an epoch",
                     ds->path, (unsigned long long)R->bytes, (unsigned long long)limit);
    }
    return 0;
}

/* After the loader's workers are gone (a data set outlives its loaders): the threads'
 * rounds are freed here, never by the threads. */
void stoker__shards_remote_end(stoker__shards *S)
{
    stoker__shards_remote *R = S->rem;
    if (!R)
        return;
    stoker__robjs_follow(S->rs, NULL);
    if (R->key_ok)
        pthread_key_delete(R->key);
    for (rthread *t = R->threads, *next; t; t = next) {
        next = t->next;
        round_end(S, t);
        stoker__free(t->arena);
        stoker__free(t);
    }
    stoker__free(R->ids);
    pthread_mutex_destroy(&R->mu);
    stoker__free(R);
    S->rem = NULL;
}

static int remote_claims(const char *path)
{
    return stoker__http_is_url(path);
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
    int rc = stoker__shards_open(ds, ds->path, cfg);
    if (rc < 0)
        return rc;
    ds->ready = true;
    stoker__shards *S = ds->state;
    const uint32_t bs = stoker__robjs_block_size(S->rs);
    for (int32_t i = 0; i < S->n; i++) {
        stoker__shard_file *sh = &S->files[i];
        const uint64_t size = S->m.shards[i].bytes;
        uint32_t crc = 0, rcrc = 0; /* the file's; the record k's so far */
        uint64_t k = 0;
        bool whole = true;
        for (uint64_t at = 0; at < size; at += bs) {
            stoker__err err = {0};
            const uint64_t n = size - at < bs ? size - at : bs;
            uint8_t *buf = thread_buffer((size_t)n);
            const int brc = buf ? stoker__robj_read(sh->obj, buf, n, at, NULL, &err)
                                : stoker__fail(&err, -ENOMEM, "%s: out of memory", sh->path);
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
                    const int64_t id = (int64_t)(S->first[i] + k);
                    snprintf(msg, sizeof msg,
                             "%s: record %lld (shard record %llu): CRC32C mismatch (stored %08x, "
                             "computed %08x)",
                             sh->path, (long long)id, (unsigned long long)k, e.crc, rcrc);
                    verify_problem(problems, fn, user, i, id, STOKER_E_CORRUPT, msg);
                }
                rcrc = 0;
            }
        }
        if (whole && crc != S->m.shards[i].crc) {
            char msg[STOKER_ERRMSG_CAP];
            snprintf(msg, sizeof msg,
                     "%s: whole-file CRC32C mismatch (manifest %08x, computed %08x)", sh->path,
                     S->m.shards[i].crc, crc);
            verify_problem(problems, fn, user, i, -1, STOKER_E_CORRUPT, msg);
        }
    }
    return *problems > 0 ? STOKER_E_CORRUPT : 0;
}

const stoker__source stoker__remote_source = {
    .name = "remote",
    .claims = remote_claims,
    .open = stoker__shards_open,
    .verify = remote_verify,
};
