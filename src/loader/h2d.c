/* SPDX-License-Identifier: Apache-2.0 */
/* The H2D stage (h2d.h): a ring of device buffers filled by a copy thread on the stage's
 * own stream. Issuing a copy costs the caller time that grows with its size, so it is kept
 * off the consumer; pieces are copied while the batch is still being made, which also lets
 * the DMA read bytes just written, possibly still in the CPU's last-level cache (both
 * measured in docs/BENCHMARKS.md, "Why the defaults are what they are"). Host functions
 * run on a second stream that waits on each copy's event: on the copy stream, waking CUDA's
 * callback thread after every copy would hold back the copy queued behind it. Ids, labels and
 * offsets are copied into the device batch's own host arrays, since the slot is refilled once its
 * copy is done. */
#include "loader/h2d.h"

#include "loader/fields.h"
#include "loader/memory.h"

#include "cuda/cuda.h"
#include "cuda/nvtx.h"

#include <string.h>

#define PAGE 4096u

enum { DBUF_FREE = 0, DBUF_COPIED, DBUF_OUT, DBUF_RELEASING, DBUF_RELEASED };

typedef struct stoker__dbuf {
    stoker_batch batch; /* what the consumer sees: data on the device, own host arrays */
    stoker__h2d *g;
    uint8_t *dev; /* device memory, cap bytes */
    size_t cap;
    uint8_t *dev_extra;  /* the fields region on the device, extra_cap bytes */
    size_t extra_cap;    /* grows as the slots' regions do (ragged fields, fields.h) */
    stoker__event ready; /* recorded on the copy stream after the copy */
    stoker__event done;  /* recorded on the consumer's stream by release_stream */
    bool has_events;
    int state;    /* under g->mu */
    bool pending; /* under g->mu: `done` recorded, not yet seen complete */
    /* stoker_batch_detach gave dev and dev_extra away (under g->mu, while OUT): the buffer's
     * memory from release on is fresh_dev and fresh_extra (same sizes). */
    bool detached;
    uint8_t *fresh_dev, *fresh_extra;
    stoker__err err; /* a failed batch or copy (code 0: none), written by the copy thread
                      * before COPIED is published under g->mu; next hands it out */
} stoker__dbuf;

struct stoker__h2d {
    const stoker__plan *plan;
    stoker__ring *ring;
    stoker__gdec *gd; /* the GPU decode stage, or NULL */
    stoker_loader *owner;
    int device;
    pthread_mutex_t mu; /* buffer states and the copy thread's progress; a leaf lock */
    pthread_cond_t cv;  /* under mu: any of them changed */
    pthread_t thread;   /* the copy thread */
    bool has_cv, has_thread;
    bool stopped;             /* stop ran: only the slot allocator's state is left */
    stoker__stream stream;    /* the copies (never ordered with the legacy default stream) */
    stoker__stream cb_stream; /* the slot-done host functions, each after its copy's event */
    bool has_stream, has_cb_stream;
    stoker__dbuf *bufs;
    uint32_t nbuf;
    /* Batch seq's buffer is (seq + first) % nbuf; a restart starts after the buffer handed
     * out last (`taken`), so that a buffer still held then is needed last. Under mu. */
    uint32_t first, taken;
    bool stream_pieces; /* copy finished pieces before the batch is whole */
    /* under mu */
    uint64_t issued;   /* copies issued (or failures recorded) for every seq < issued */
    uint64_t consumed; /* batches handed out by next: every seq < consumed */
    bool stop, hold;   /* asked of the copy thread: exit; stand still (quiesce) */
    bool held;         /* the copy thread stands still (or has exited) */
    atomic_bool halt;  /* stop || hold, read without mu while waiting for a slot */
    /* GPU normalisation: uint8 batches are copied to `staging` (one buffer: the copy
     * stream orders copy N, kernel N, copy N+1), then the kernel writes batch N's buffer. */
    uint8_t *staging;
    size_t staging_cap;
    atomic_int_fast64_t pinned_bytes;
    /* Busy time (stats' h2d_seconds): per ring slot, when its batch's first copy was queued,
     * read by the slot-done host function, which adds the time to the copy's completion not
     * yet counted. Host functions run one at a time, in the copies' order. */
    struct copy_mark {
        stoker__h2d *g;
        stoker__slot *s;
        uint64_t t0_ns;
    } * marks;
    uint64_t last_done_ns; /* the host functions' own */
    atomic_uint_fast64_t busy_ns;
};

static int cuda_fail(stoker__err *err, int device, int e, const char *what)
{
    return stoker__fail(err, STOKER_E_CUDA, "%s (device %d): %s", what, device,
                        stoker__cuda_error_string(e));
}

static stoker__dbuf *dbuf_of(stoker__h2d *g, uint64_t seq)
{
    return &g->bufs[(seq + g->first) % g->nbuf];
}

/* ---- pinned slot memory ---- */

/* With a device, slots are pinned so that the copy is a true DMA that overlaps compute; when
 * pinning fails (ulimit, no memory) pageable memory still works, only slower: a warning. */
static void *pinned_alloc(void *ctx, size_t size, bool *pinned)
{
    stoker__h2d *g = ctx;
    const size_t n = stoker__align_up(size ? size : 1, PAGE);
    char msg[160];
    void *h = stoker__cuda_host_alloc(g->device, n, msg, sizeof msg);
    *pinned = h != NULL;
    if (h) {
        atomic_fetch_add(&g->pinned_bytes, (int_fast64_t)n);
    } else {
        stoker__logf(&g->plan->log, STOKER_LOG_WARN,
                     "cannot pin %zu bytes of batch slot (%s); using pageable memory", n, msg);
        h = stoker__aligned_alloc(PAGE, n);
    }
    if (h) /* every page touched now: first-touch faults at create, not in the first batches */
        memset(h, 0, n);
    return h;
}

static void pinned_free(void *ctx, void *p, size_t size, bool pinned)
{
    stoker__h2d *g = ctx;
    if (!pinned) {
        stoker__free(p);
        return;
    }
    stoker__cuda_host_free(p);
    atomic_fetch_sub(&g->pinned_bytes, (int_fast64_t)stoker__align_up(size ? size : 1, PAGE));
}

/* Pinned memory that left the ring (a detached batch's) is no longer counted. */
static void pinned_disown(void *ctx, size_t size, bool pinned)
{
    stoker__h2d *g = ctx;
    if (pinned)
        atomic_fetch_sub(&g->pinned_bytes, (int_fast64_t)stoker__align_up(size ? size : 1, PAGE));
}

stoker__slot_mem stoker__h2d_slot_mem(stoker__h2d *g)
{
    return (stoker__slot_mem){pinned_alloc, pinned_free, pinned_disown, g};
}

int64_t stoker__h2d_pinned_bytes(const stoker__h2d *g)
{
    return g ? (int64_t)atomic_load(&g->pinned_bytes) : 0;
}

/* ---- create and destroy ---- */

int stoker__h2d_create(stoker__h2d **out, const stoker__plan *plan, stoker__err *err)
{
    stoker__h2d *g = stoker__calloc(1, sizeof *g);
    *out = g;
    STOKER_RETURN_IF(!g, err, -ENOMEM, "out of memory for the GPU stage");
    g->plan = plan;
    g->device = plan->device;
    g->nbuf = plan->device_buffers;
    g->held = true; /* no copy thread yet */
    if (pthread_mutex_init(&g->mu, NULL) != 0) {
        stoker__free(g);
        *out = NULL;
        return stoker__fail(err, -ENOMEM, "cannot create the GPU stage's lock");
    }
    STOKER_RETURN_IF(pthread_cond_init(&g->cv, NULL) != 0, err, -ENOMEM,
                     "cannot create the GPU stage's condition variable");
    g->has_cv = true;
    return 0;
}

static int dbuf_init(stoker__h2d *g, stoker__dbuf *d, size_t cap, stoker__err *err)
{
    const uint64_t b = g->plan->batch;
    d->g = g;
    d->batch.loader = g->owner;
    d->batch.dbuf = d;
    d->batch.device = g->device;
    d->batch.fixed = g->plan->rec_size != 0;
    const stoker__pfields *pf = &g->plan->fields;
    d->batch.pf = pf;
    d->batch.ids = stoker__calloc(b, sizeof(int64_t));
    d->batch.labels = stoker__calloc(b, sizeof(int64_t));
    d->batch.offsets = stoker__calloc(b + 1, sizeof(int64_t));
    d->batch.host_offsets = stoker__calloc((size_t)pf->n * (b + 1), sizeof(int64_t));
    STOKER_RETURN_IF(!d->batch.ids || !d->batch.labels || !d->batch.offsets ||
                         (pf->n > 0 && !d->batch.host_offsets),
                     err, -ENOMEM, "out of memory for a device batch");
    int e = stoker__cuda_event_create(&d->ready, false);
    if (e != 0)
        return cuda_fail(err, g->device, e, "cudaEventCreateWithFlags");
    e = stoker__cuda_event_create(&d->done, true);
    if (e != 0) {
        stoker__cuda_event_destroy(d->ready);
        return cuda_fail(err, g->device, e, "cudaEventCreateWithFlags");
    }
    d->has_events = true;
    e = stoker__cuda_malloc((void **)&d->dev, cap);
    if (e != 0)
        return cuda_fail(err, g->device, e, "cudaMalloc of a device batch buffer");
    d->cap = cap;
    d->batch.data = d->dev;
    if (pf->first > 0 && (e = stoker__cuda_malloc((void **)&d->dev_extra, pf->first)) != 0)
        return cuda_fail(err, g->device, e, "cudaMalloc of a device batch's fields");
    d->extra_cap = pf->first;
    d->batch.extra = d->dev_extra;
    return 0;
}

static void *copy_main(void *arg);

/* Streams, device buffers (the normalised dtype when the stage normalises, and a staging
 * buffer for the uint8 batch), then the copy thread. The device is current (the caller's
 * kept around this). */
static int start_on_device(stoker__h2d *g, stoker__err *err)
{
    /* urgent: the copies, normalisation and moves into place are few and short, and start
     * as soon as blocks of the consumer's kernels finish, rather than behind its queue */
    int e = stoker__cuda_stream_create(&g->stream, true);
    if (e != 0)
        return cuda_fail(err, g->device, e, "cudaStreamCreateWithFlags");
    g->has_stream = true;
    e = stoker__cuda_stream_create(&g->cb_stream, true);
    if (e != 0)
        return cuda_fail(err, g->device, e, "cudaStreamCreateWithFlags");
    g->has_cb_stream = true;
    g->bufs = stoker__calloc(g->nbuf, sizeof *g->bufs);
    STOKER_RETURN_IF(!g->bufs, err, -ENOMEM, "out of memory for the device buffers");
    size_t cap = g->ring->slots[0].cap;
    if (g->plan->gpu_normalize) {
        e = stoker__cuda_malloc((void **)&g->staging, cap);
        if (e != 0)
            return cuda_fail(err, g->device, e, "cudaMalloc of the normalisation staging buffer");
        g->staging_cap = cap;
        cap *= stoker_dtype_size(g->plan->norm.dtype);
    }
    for (uint32_t i = 0; i < g->nbuf; i++) {
        const int rc = dbuf_init(g, &g->bufs[i], cap, err);
        if (rc < 0)
            return rc;
    }
    const int rc = stoker__thread_start(&g->thread, copy_main, g);
    STOKER_RETURN_IF(rc != 0, err, -rc, "cannot start the copy thread: %s", stoker_strerror(-rc));
    g->has_thread = true;
    g->held = false;
    stoker__logf(&g->plan->log, STOKER_LOG_INFO,
                 "device %d: %u device buffers of %zu bytes, %lld pinned bytes", g->device, g->nbuf,
                 cap, (long long)atomic_load(&g->pinned_bytes));
    return 0;
}

int stoker__h2d_start(stoker__h2d *g, stoker__ring *ring, stoker__gdec *gd, stoker_loader *owner,
                      stoker__err *err)
{
    g->ring = ring;
    g->gd = gd;
    g->owner = owner;
    /* Plain copies of fixed-size records stream piece by piece (set before any worker or the
     * copy thread starts); normalised batches go through the staging buffer whole. */
    g->stream_pieces = !g->plan->gpu_normalize && g->plan->rec_size != 0;
    ring->watch_pieces = g->stream_pieces;
    g->marks = stoker__calloc(ring->depth, sizeof *g->marks);
    STOKER_RETURN_IF(!g->marks, err, -ENOMEM, "out of memory for the copy stage's marks");
    for (uint32_t i = 0; i < ring->depth; i++)
        g->marks[i].g = g;
    const int prev = stoker__cuda_use_device(g->device);
    const int rc = start_on_device(g, err);
    stoker__cuda_restore_device(g->device, prev);
    return rc;
}

/* Sets what the copy thread is asked (stop; hold still) and `halt`, which mirrors them for
 * its waits on slots, then wakes it wherever it waits. */
static void ask_copy_thread(stoker__h2d *g, bool stop, bool hold)
{
    pthread_mutex_lock(&g->mu);
    g->stop = stop;
    g->hold = hold;
    atomic_store_explicit(&g->halt, stop || hold, memory_order_release);
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    if ((stop || hold) && g->ring)
        stoker__ring_wake_all(g->ring);
}

void stoker__h2d_stop(stoker__h2d *g)
{
    if (!g || g->stopped)
        return;
    g->stopped = true;
    if (g->has_thread) {
        ask_copy_thread(g, true, false);
        pthread_join(g->thread, NULL);
    }
    const int prev = stoker__cuda_use_device(g->device);
    /* Copies in flight read slots, and their host functions touch slots: both end here,
     * before the workers and slots go. */
    if (g->has_stream)
        stoker__cuda_stream_sync(g->stream);
    if (g->has_cb_stream)
        stoker__cuda_stream_sync(g->cb_stream);
    for (uint32_t i = 0; g->bufs && i < g->nbuf; i++) {
        stoker__dbuf *d = &g->bufs[i];
        if (d->has_events) {
            stoker__cuda_event_destroy(d->ready);
            stoker__cuda_event_destroy(d->done);
        }
        /* a detached batch's dev and dev_extra are a stoker_memory's */
        stoker__cuda_free(d->detached ? d->fresh_dev : d->dev);
        stoker__cuda_free(d->detached ? d->fresh_extra : d->dev_extra);
        stoker__free(d->batch.ids);
        stoker__free(d->batch.labels);
        stoker__free(d->batch.offsets);
        stoker__free(d->batch.host_offsets);
    }
    stoker__cuda_free(g->staging);
    if (g->has_stream)
        stoker__cuda_stream_destroy(g->stream);
    if (g->has_cb_stream)
        stoker__cuda_stream_destroy(g->cb_stream);
    stoker__cuda_restore_device(g->device, prev);
    stoker__free(g->bufs);
    g->bufs = NULL;
}

void stoker__h2d_destroy(stoker__h2d *g)
{
    if (!g)
        return;
    stoker__h2d_stop(g);
    stoker__free(g->marks);
    if (g->has_cv)
        pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    stoker__free(g);
}

/* ---- the copy thread ---- */

/* Host function after a slot's copy: the slot goes back to the ring. Runs on CUDA's callback
 * thread; makes no CUDA call. */
static void slot_copied(void *arg)
{
    struct copy_mark *m = arg;
    stoker__h2d *g = m->g;
    const uint64_t now = stoker__now_ns();
    const uint64_t from = m->t0_ns > g->last_done_ns ? m->t0_ns : g->last_done_ns;
    if (now > from)
        atomic_fetch_add_explicit(&g->busy_ns, now - from, memory_order_relaxed);
    g->last_done_ns = now;
    stoker__ring_give_back(m->s->ring, m->s);
}

double stoker__h2d_busy_seconds(const stoker__h2d *g)
{
    return g ? (double)atomic_load_explicit(&g->busy_ns, memory_order_relaxed) * 1e-9 : 0;
}

/* Bytes [*lo, *hi) of the batch that pieces [p0, p1) hold. */
static void piece_bytes(const stoker_batch *b, uint32_t p0, uint32_t p1, uint64_t *lo, uint64_t *hi)
{
    const int64_t j0 = (int64_t)p0 * STOKER__PIECE, j1 = (int64_t)p1 * STOKER__PIECE;
    *lo = (uint64_t)b->offsets[j0 < b->count ? j0 : b->count];
    *hi = (uint64_t)b->offsets[j1 < b->count ? j1 : b->count];
}

/* A batch's copy in progress: the buffer, pieces already queued, the first failure. */
typedef struct copy_job {
    stoker__h2d *g;
    stoker__dbuf *d;
    uint32_t sent;
    int e;
    uint64_t t0_ns; /* the first copy queued (0: none yet) */
} copy_job;

/* The ring's progress callback while batch seq is being made: queues the copies of the
 * finished pieces from job->sent on, in order. */
static bool stream_pieces(void *ctx, stoker__slot *s)
{
    copy_job *job = ctx;
    const stoker_batch *hb = &s->batch;
    if (hb->nbytes > job->d->cap || job->e != 0)
        return false; /* the buffer grows first, or streaming failed: copied whole at READY */
    uint32_t p = job->sent;
    while (p < job->g->plan->pieces && atomic_load_explicit(&s->piece_ok[p], memory_order_acquire))
        p++;
    if (p == job->sent)
        return false;
    uint64_t lo, hi;
    piece_bytes(hb, job->sent, p, &lo, &hi);
    if (job->t0_ns == 0)
        job->t0_ns = stoker__now_ns();
    if (hi > lo)
        job->e =
            stoker__cuda_copy_to_device(job->d->dev + lo, hb->data + lo, hi - lo, job->g->stream);
    job->sent = p;
    return true;
}

/* Copies what the consumer reads besides data: the slot is refilled after the copy. With
 * GPU normalisation, the device batch has the output dtype, layout and size. */
static void copy_meta(const stoker__h2d *g, stoker__dbuf *d, const stoker_batch *hb)
{
    stoker_batch *b = &d->batch;
    const size_t n = (size_t)hb->count;
    b->count = hb->count;
    b->epoch = hb->epoch;
    b->position = hb->position;
    b->replaced = hb->replaced;
    b->nbytes = hb->nbytes;
    b->dtype = hb->dtype;
    b->ndim = hb->ndim;
    memcpy(b->shape, hb->shape, sizeof b->shape);
    memcpy(b->ids, hb->ids, n * sizeof *b->ids);
    memcpy(b->labels, hb->labels, n * sizeof *b->labels);
    memcpy(b->offsets, hb->offsets, (n + 1) * sizeof *b->offsets);
    const stoker__pfields *pf = &g->plan->fields;
    memcpy(b->totals, hb->totals, sizeof b->totals);
    memcpy(b->vals_off, hb->vals_off, sizeof b->vals_off);
    b->extra_used = hb->extra_used;
    for (int32_t i = 0; i < pf->n; i++)
        if (pf->f[i].role == STOKER__PF_RAGGED)
            memcpy(b->host_offsets + (size_t)i * (g->plan->batch + 1),
                   hb->extra + pf->f[i].offsets_off, (n + 1) * sizeof(int64_t));
    if (!g->plan->gpu_normalize)
        return;
    const stoker__norm *nm = &g->plan->norm;
    b->dtype = nm->dtype;
    b->nbytes = hb->nbytes * stoker_dtype_size(nm->dtype);
    b->ndim = 4;
    b->shape[0] = hb->count;
    b->shape[1] = nm->nchw ? 3 : nm->h;
    b->shape[2] = nm->nchw ? nm->h : nm->w;
    b->shape[3] = nm->nchw ? nm->w : 3;
}

/* Queues the host batch's bytes to the device batch: one copy of the bytes from `from` on
 * (those before were streamed piece by piece), or a copy to the staging buffer and the
 * normalisation kernel. */
static int queue_data(stoker__h2d *g, stoker__dbuf *d, const stoker_batch *hb, uint64_t from)
{
    if (hb->nbytes == 0)
        return 0;
    if (!g->plan->gpu_normalize)
        return from >= hb->nbytes ? 0
                                  : stoker__cuda_copy_to_device(d->dev + from, hb->data + from,
                                                                hb->nbytes - from, g->stream);
    const stoker__norm *nm = &g->plan->norm;
    int e = stoker__cuda_copy_to_device(g->staging, hb->data, hb->nbytes, g->stream);
    if (e == 0)
        e = stoker__cuda_normalize(g->staging, d->dev, hb->count, nm->h, nm->w, nm->dtype, nm->nchw,
                                   nm->scale, nm->bias, g->stream);
    return e;
}

/* Queues the copy of the batch's fields region: each field's part in use (a dense field's
 * count values; a ragged field's offsets and packed values). */
static int queue_fields(stoker__h2d *g, stoker__dbuf *d, const stoker_batch *hb)
{
    const stoker__pfields *pf = &g->plan->fields;
    const uint64_t n = (uint64_t)hb->count;
    int e = 0;
    for (int32_t i = 0; i < pf->n && e == 0; i++) {
        const stoker__pfield *f = &pf->f[i];
        if (f->role == STOKER__PF_DATA)
            continue;
        uint64_t bytes = f->item * n, off = f->off;
        if (f->role == STOKER__PF_RAGGED) {
            e = stoker__cuda_copy_to_device(d->dev_extra + f->offsets_off,
                                            hb->extra + f->offsets_off, (n + 1) * sizeof(int64_t),
                                            g->stream);
            bytes = f->item * (uint64_t)hb->totals[i];
            off = hb->vals_off[i];
        }
        if (e == 0 && bytes > 0)
            e = stoker__cuda_copy_to_device(d->dev_extra + off, hb->extra + off, bytes, g->stream);
    }
    return e;
}

/* Issues the copy of host slot s into device buffer d (what streamed pieces did not already
 * queue, or all of it when SKIP repaired records since, or when streaming failed), then its
 * ready event and the slot-done host function; a failure is kept in d->err for next. The
 * slot always goes back to the ring: after the copy, or once nothing queued reads it. */
static void issue_copy(stoker__h2d *g, stoker__slot *s, copy_job *job)
{
    stoker__dbuf *d = job->d;
    const stoker_batch *hb = &s->batch;
    int rc = 0, e = job->e;
    uint64_t from = 0, lo;
    const uint64_t t_issue = stoker__now_ns();
    if (job->sent > 0 && !s->repaired)
        piece_bytes(hb, 0, job->sent, &lo, &from);
    copy_meta(g, d, hb);
    if (d->batch.nbytes > d->cap) {          /* records that vary: a larger batch than any before */
        stoker__cuda_stream_sync(g->stream); /* no queued copy still writes the old buffer */
        stoker__cuda_free(d->dev);
        d->dev = NULL;
        d->cap = 0;
        e = stoker__cuda_malloc((void **)&d->dev, d->batch.nbytes);
        if (e != 0)
            rc = cuda_fail(&d->err, g->device, e, "cudaMalloc growing a device batch buffer");
        else
            d->cap = d->batch.nbytes;
        d->batch.data = d->dev;
        from = 0;
    }
    if (rc == 0 && d->batch.extra_used > d->extra_cap) { /* ragged fields: more room than before */
        stoker__cuda_stream_sync(g->stream);
        stoker__cuda_free(d->dev_extra);
        d->dev_extra = NULL;
        d->extra_cap = 0;
        const int em = stoker__cuda_malloc((void **)&d->dev_extra, d->batch.extra_used);
        if (em != 0)
            rc = cuda_fail(&d->err, g->device, em, "cudaMalloc growing a device batch's fields");
        else
            d->extra_cap = d->batch.extra_used;
        d->batch.extra = d->dev_extra;
    }
    if (rc == 0 && e == 0)
        e = queue_data(g, d, hb, from);
    if (rc == 0 && e == 0)
        e = queue_fields(g, d, hb);
    if (rc == 0 && e == 0 && g->gd) /* the GPU's samples over their places */
        e = stoker__gdec_gather(g->gd, s, d->dev, g->stream);
    if (rc == 0 && e == 0)
        e = stoker__cuda_event_record(d->ready, g->stream);
    if (rc == 0 && e == 0)
        e = stoker__cuda_stream_wait(g->cb_stream, d->ready);
    struct copy_mark *m = &g->marks[s - g->ring->slots];
    m->s = s;
    m->t0_ns = job->t0_ns ? job->t0_ns : t_issue;
    if (rc == 0 && e == 0)
        e = stoker__cuda_host_func(g->cb_stream, slot_copied, m);
    if (rc == 0 && e != 0) {
        rc = cuda_fail(&d->err, g->device, e, "queueing a batch copy");
        stoker__cuda_stream_sync(g->stream); /* a queued copy may still read the slot */
    }
    if (rc < 0)
        stoker__ring_give_back(g->ring, s);
}

/* Copy thread: takes batch seq's slot (copying its pieces meanwhile) and issues its copy
 * into d. Returns 1 when halted first. */
static int copy_batch(stoker__h2d *g, uint64_t seq, stoker__dbuf *d)
{
    copy_job job = {g, d, 0, 0, 0};
    stoker__slot *s = NULL;
    const int rc = stoker__ring_take(g->ring, seq, &g->halt, false, 0,
                                     g->stream_pieces ? stream_pieces : NULL, &job, &s, NULL, NULL);
    if (rc == 1) {
        if (job.sent > 0) /* pieces queued from a slot this thread never took */
            stoker__cuda_stream_sync(g->stream);
        return 1;
    }
    const int failed = stoker__ring_failed(s);
    if (failed == 0) {
        stoker__nvtx_push(STOKER__NVTX_H2D);
        issue_copy(g, s, &job);
        stoker__nvtx_pop();
        return 0;
    }
    if (job.sent > 0) /* queued copies still read the slot */
        stoker__cuda_stream_sync(g->stream);
    pthread_mutex_lock(&s->mu);
    stoker__fail(&d->err, failed, "%s", s->err_msg);
    pthread_mutex_unlock(&s->mu);
    stoker__ring_give_back(g->ring, s);
    return 0;
}

/* Copy thread, mu held: whether batch seq's device buffer may be filled now. Waits (mu
 * released) for the consumer's work on a released buffer; false when it must wait for the
 * consumer instead (the buffer held, or nbuf batches already ahead). */
static bool buffer_free(stoker__h2d *g, uint64_t seq)
{
    stoker__dbuf *d = dbuf_of(g, seq);
    if (seq - g->consumed >= g->nbuf || d->state == DBUF_OUT || d->state == DBUF_RELEASING ||
        d->state == DBUF_COPIED)
        return false;
    if (d->state == DBUF_RELEASED && d->pending) {
        /* Only this thread moves a RELEASED buffer on, so `done` is stable here. */
        pthread_mutex_unlock(&g->mu);
        stoker__cuda_event_sync(d->done); /* a failure of the consumer's stream is its own */
        pthread_mutex_lock(&g->mu);
        d->pending = false;
    }
    return true;
}

static void *copy_main(void *arg)
{
    stoker__h2d *g = arg;
    stoker__thread_name("stoker-h2d");
    stoker__cuda_set_device(g->device); /* checked at create; a failure shows in the copies */
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        g->held = g->hold;
        if (g->hold)
            pthread_cond_broadcast(&g->cv); /* quiesce waits for held */
        if (g->hold || !buffer_free(g, g->issued)) {
            stoker__timed_wait(&g->cv, &g->mu);
            continue;
        }
        if (g->hold || g->stop) /* asked while buffer_free waited */
            continue;
        const uint64_t seq = g->issued;
        stoker__dbuf *d = dbuf_of(g, seq);
        pthread_mutex_unlock(&g->mu);
        stoker__err_clear(&d->err); /* d is not visible to next until COPIED below */
        const int rc = copy_batch(g, seq, d);
        pthread_mutex_lock(&g->mu);
        if (rc == 1)
            continue; /* halted while waiting for the slot */
        d->state = DBUF_COPIED;
        g->issued = seq + 1;
        pthread_cond_broadcast(&g->cv);
    }
    g->held = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

/* ---- restarts ---- */

void stoker__h2d_quiesce(stoker__h2d *g)
{
    ask_copy_thread(g, false, true);
    pthread_mutex_lock(&g->mu);
    while (g->has_thread && !g->held)
        stoker__timed_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    const int prev = stoker__cuda_use_device(g->device);
    stoker__cuda_stream_sync(g->stream);
    stoker__cuda_stream_sync(g->cb_stream);
    stoker__cuda_restore_device(g->device, prev);
    pthread_mutex_lock(&g->mu);
    for (uint32_t i = 0; i < g->nbuf; i++) {
        if (g->bufs[i].state == DBUF_COPIED)
            g->bufs[i].state = DBUF_FREE;
        stoker__err_clear(&g->bufs[i].err);
    }
    g->issued = g->consumed = 0; /* the restart numbers batches from 0 again */
    g->first = (g->taken + 1) % g->nbuf;
    pthread_mutex_unlock(&g->mu);
}

void stoker__h2d_resume(stoker__h2d *g)
{
    ask_copy_thread(g, false, false);
}

/* ---- the consumer's side ---- */

int stoker__h2d_next(stoker__h2d *g, uint64_t seq, double until, stoker_batch **out, double *waited,
                     uint64_t *queued, stoker__err *err)
{
    stoker__dbuf *d = dbuf_of(g, seq);
    *waited = 0;
    pthread_mutex_lock(&g->mu);
    if (g->issued <= seq && (d->state == DBUF_OUT || d->state == DBUF_RELEASING)) {
        pthread_mutex_unlock(&g->mu);
        return stoker__fail(err, STOKER_E_STATE,
                            "the device batch handed out %u batches before this one is still "
                            "held: release it first (the %u device buffers form a ring)",
                            g->nbuf, g->nbuf);
    }
    if (g->issued <= seq) {
        const double t0 = stoker__now();
        while (g->issued <= seq) {
            if (until > 0 && stoker__now() >= until) {
                *waited = stoker__now() - t0;
                pthread_mutex_unlock(&g->mu);
                return STOKER_AGAIN;
            }
            stoker__timed_wait(&g->cv, &g->mu);
        }
        *waited = stoker__now() - t0;
    }
    const int rc = d->err.code;
    if (rc < 0)
        stoker__fail(err, rc, "%s", d->err.msg); /* d may be refilled once consumed */
    d->state = rc < 0 ? DBUF_FREE : DBUF_OUT;
    d->pending = false;
    g->taken = (uint32_t)(d - g->bufs);
    g->consumed = seq + 1;
    *queued = g->issued - g->consumed;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    if (rc < 0)
        return rc;
    *out = &d->batch;
    return 0;
}

int stoker__h2d_release(stoker_batch *b, bool record, void *stream)
{
    stoker__dbuf *d = b->dbuf;
    stoker__h2d *g = d->g;
    pthread_mutex_lock(&g->mu);
    if (d->state != DBUF_OUT) {
        pthread_mutex_unlock(&g->mu);
        return STOKER_E_STATE;
    }
    d->state = DBUF_RELEASING;
    pthread_mutex_unlock(&g->mu);
    int e = 0;
    if (record) {
        const int prev = stoker__cuda_use_device(g->device);
        e = stoker__cuda_event_record(d->done, stream);
        if (e != 0) {
            /* Without the event, the only safe release is after the stream's work. */
            stoker__logf(&g->plan->log, STOKER_LOG_ERROR,
                         "cudaEventRecord on the consumer's stream (device %d): %s; releasing "
                         "the batch once the stream's work is done",
                         g->device, stoker__cuda_error_string(e));
            stoker__cuda_stream_sync(stream);
        }
        stoker__cuda_restore_device(g->device, prev);
    }
    pthread_mutex_lock(&g->mu);
    if (d->detached) { /* the batch's memory is a stoker_memory's now: the fresh one */
        d->detached = false;
        d->dev = d->fresh_dev;
        d->dev_extra = d->fresh_extra;
        d->fresh_dev = d->fresh_extra = NULL;
        d->batch.data = d->dev;
        d->batch.extra = d->dev_extra;
    }
    d->pending = record && e == 0;
    d->state = DBUF_RELEASED;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    return e == 0 ? 0 : STOKER_E_CUDA;
}

int stoker__h2d_detach(stoker_batch *b, stoker_memory *m, stoker__err *err)
{
    stoker__dbuf *d = b->dbuf;
    stoker__h2d *g = d->g;
    pthread_mutex_lock(&g->mu);
    const bool out = d->state == DBUF_OUT && !d->detached;
    pthread_mutex_unlock(&g->mu);
    STOKER_RETURN_IF(!out, err, STOKER_E_STATE,
                     "stoker_batch_detach: the batch was released or detached already");
    /* While OUT only the consumer touches d: cap and the pointers stay as read. */
    const size_t cap = d->cap, extra_cap = d->extra_cap;
    uint8_t *dev = NULL, *extra = NULL;
    const int prev = stoker__cuda_use_device(g->device);
    /* The loader's last write into the batch (its copy, normalisation, GPU decode's gather)
     * is ordered before the ready event: once it completed, only the caller's work reads
     * the memory. */
    const char *what = "cudaEventSynchronize on the batch's copy";
    int e = stoker__cuda_event_sync(d->ready);
    if (e == 0) {
        what = "cudaMalloc of a device batch buffer (detach)";
        e = stoker__cuda_malloc((void **)&dev, cap);
    }
    if (e == 0 && d->dev_extra) {
        what = "cudaMalloc of a device batch's fields (detach)";
        e = stoker__cuda_malloc((void **)&extra, extra_cap);
    }
    if (e != 0) {
        stoker__cuda_free(dev);
        stoker__cuda_free(extra);
    }
    stoker__cuda_restore_device(g->device, prev);
    if (e != 0)
        return cuda_fail(err, g->device, e, what);
    pthread_mutex_lock(&g->mu);
    const bool still = d->state == DBUF_OUT && !d->detached; /* not released meanwhile */
    if (still) {
        m->device = g->device;
        m->part[0] = (stoker__mem_part){d->dev, cap, false};
        m->part[1] = (stoker__mem_part){d->dev_extra, extra_cap, false};
        d->detached = true;
        d->fresh_dev = dev;
        d->fresh_extra = extra;
    }
    pthread_mutex_unlock(&g->mu);
    if (still)
        return 0;
    const int prev2 = stoker__cuda_use_device(g->device);
    stoker__cuda_free(dev);
    stoker__cuda_free(extra);
    stoker__cuda_restore_device(g->device, prev2);
    return stoker__fail(err, STOKER_E_STATE, "stoker_batch_detach: the batch was released");
}

int stoker__h2d_wait_stream(const stoker_batch *b, void *stream, stoker__err *err)
{
    const stoker__h2d *g = b->dbuf->g;
    const int prev = stoker__cuda_use_device(g->device);
    const int e = stoker__cuda_stream_wait(stream, b->dbuf->ready);
    stoker__cuda_restore_device(g->device, prev);
    return e == 0 ? 0 : cuda_fail(err, g->device, e, "cudaStreamWaitEvent on the batch's event");
}

void *stoker__h2d_event(const stoker_batch *b)
{
    return b->dbuf->ready;
}
