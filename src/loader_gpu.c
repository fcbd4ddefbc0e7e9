/* The H2D stage: finished host slots are copied to a ring of device buffers on the loader's
 * own stream, and handed out as device batches.
 *
 * Who copies: the loader's copy thread. Once N's device buffer is free it copies each piece
 * of batch N (STOKER__PIECE records) as soon as a worker has finished it (cudaMemcpyAsync
 * from the pinned slot, so that the DMA reads bytes just written, which may still be in the
 * CPU's last-level cache: 4% more raw-record throughput on average on an H200 host), takes
 * the slot when the batch is whole, copies what is left and records N's ready event. A
 * batch whose records SKIP replaced after their pieces were copied is copied again whole;
 * GPU normalisation copies whole batches. Issuing a copy costs the caller time that grows
 * with its size (about 1 us per MB measured on an H200: 70 us for a 77 MB float16 batch),
 * so it is kept off the consumer: next only waits until batch N's copy has been issued (not
 * completed; the consumer's stream waits on the event, never the host) and hands it out,
 * with no CUDA call. Copy N+1 runs while the consumer computes on N.
 *
 * Per device buffer (the ring has nbuf >= 2, STOKER_OPT_DEVICE_BUFFERS, batch seq uses
 * buffer seq % nbuf):
 *   FREE --copy issued--> COPIED --next--> OUT --release(_stream)--> RELEASING (the event is
 *   being recorded, no lock held) --> RELEASED --reuse--> ...
 * A RELEASED buffer whose release recorded an event (release_stream) is refilled only after
 * that event completed: the copy thread waits for it (a blocking-sync event, so the wait
 * does not spin on a core the workers need). The copy thread runs at most nbuf batches
 * ahead of next.
 *
 * Host slots are decoupled from device batches: after the copy, a host function gives the
 * slot back to the workers (OUT -> FREE), so the CPU side runs ahead while the consumer
 * still holds the device batch. Host functions run on a second stream that waits on each
 * copy's event: on the copy stream, the wake-up of CUDA's callback thread after every copy
 * would hold back the copy queued behind it, a gap between copies on every batch. That function
 * only takes the slot's mutex (no CUDA call, as CUDA requires). Ids, labels and offsets are copied
 * into the device buffer's own host arrays for the same reason: the slot is refilled.
 *
 * Threads: next, quiesce (restarts) and destroy run on the consumer thread; release may run
 * on any thread; copies are issued by the copy thread; the slot-done host function runs on
 * CUDA's callback thread. Every CUDA call runs with the loader's device current; calls on
 * the caller's threads restore the caller's current device. Quiesce holds the copy thread
 * (it acknowledges between batches), resume lets it go; destroy stops and joins it.
 *
 * Lock order: gpu->mu is a leaf: taken alone, never with a slot mutex or ctl_mu, and no
 * CUDA call is made under it. The copy thread waits for a
 * slot under the slot's mutex and checks `halt` there, so stop and hold wake it by setting
 * halt, then broadcasting every slot's condition under its mutex. */
#include "common/config.h"
#include "loader.h"

#include <stdlib.h>
#include <string.h>

#ifdef STOKER_HAVE_CUDA
#include "cuda/device.h"
#ifdef STOKER_HAVE_NVCC
#include "cuda/normalize.h"
#endif

#include <cuda_runtime_api.h>

/* A CUDA resource request, or the injected failure tests ask for (common.h). */
#define INJECT(call) (stoker__cuda_injected() ? cudaErrorMemoryAllocation : (call))

/* Device buffers by default. Three suffice to overlap (one in use, one queued, one being
 * filled), but every buffer is also slack: the copy thread drains host slots into free
 * buffers, so the workers keep going while the consumer is briefly slow, and a loader
 * barely faster than its consumer blocks it less. H200, raw 150 KB records, consumer step
 * 1.1x the loader's batch time, 6 runs each: GPU idle <= 1% and p99 next <= 100 us in 3
 * of 6 runs with 6 buffers, 1 of 6 with 3. Costs 6 batches of device memory. */
#define DEFAULT_BUFFERS 6u

enum { DBUF_FREE = 0, DBUF_COPIED, DBUF_OUT, DBUF_RELEASING, DBUF_RELEASED };

typedef struct stoker__gpu stoker__gpu;

typedef struct stoker__dbuf {
    stoker_batch batch; /* what the consumer sees: data on the device, own host arrays */
    uint8_t *dev;       /* device memory, cap bytes */
    size_t cap;
    cudaEvent_t ready; /* recorded on the copy stream after the copy */
    cudaEvent_t done;  /* recorded on the consumer's stream by release_stream */
    bool has_events;
    int state;       /* under gpu->mu */
    bool pending;    /* under gpu->mu: `done` recorded, not yet seen complete */
    stoker__err err; /* a failed batch or copy (code 0: none), written by the copy thread
                      * before COPIED is published under gpu->mu; next hands it out */
} stoker__dbuf;

struct stoker__gpu {
    pthread_mutex_t mu; /* buffer states and the copy thread's progress; a leaf lock */
    pthread_cond_t cv;  /* under mu: any of them changed */
    pthread_t thread;   /* the copy thread */
    bool has_cv, has_thread;
    cudaStream_t stream;    /* non-blocking: never orders with the legacy default stream */
    cudaStream_t cb_stream; /* the slot-done host functions, each after its copy's event */
    bool has_stream, has_cb_stream;
    stoker__dbuf *bufs;
    uint32_t nbuf;
    /* under mu */
    uint64_t issued;   /* copies issued (or failures recorded) for every seq < issued */
    uint64_t consumed; /* batches handed out by next: every seq < consumed */
    bool stop, hold;   /* asked of the copy thread: exit; stand still (quiesce) */
    bool held;         /* the copy thread stands still (or has exited) */
    atomic_bool halt;  /* stop || hold, read without mu while waiting for a slot */
    /* GPU normalisation (STOKER_OPT_GPU_NORMALIZE): uint8 [h, w, 3] records are copied to
     * `staging` (one buffer: the copy stream orders copy N, kernel N, copy N+1), then the
     * kernel writes out_dtype in the buffer of batch N. */
    bool norm, nchw;
    int32_t out_dtype;
    int64_t h, w;
    float scale[3], bias[3];
    uint8_t *staging;
    size_t staging_cap;
};

static void *copy_main(void *arg);
static void ask_copy_thread(stoker_loader *l, bool stop, bool hold);

static int cuda_fail_to(stoker__err *err, int device, cudaError_t e, const char *what)
{
    cudaGetLastError(); /* clear the sticky last error: it is reported here */
    return stoker__fail(err, STOKER_E_CUDA, "%s (device %d): %s", what, device,
                        cudaGetErrorString(e));
}

static int cuda_fail(stoker_loader *l, cudaError_t e, const char *what)
{
    return cuda_fail_to(&l->err, l->device, e, what);
}

/* Makes the loader's device current; returns the caller's, for leave(). */
static int enter(const stoker_loader *l)
{
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess)
        prev = -1;
    if (prev != l->device)
        cudaSetDevice(l->device);
    return prev;
}

static void leave(const stoker_loader *l, int prev)
{
    if (prev >= 0 && prev != l->device)
        cudaSetDevice(prev);
}

/* LOCAL_RANK from the environment, or -1 (unset or not a number). */
static int64_t env_local_rank(void)
{
    const char *s = getenv("LOCAL_RANK");
    if (!s || !*s)
        return -1;
    char *end = NULL;
    const long long v = strtoll(s, &end, 10);
    return (*end || v < 0 || v > 1 << 20) ? -1 : v;
}

/* The device: an explicit ordinal must exist; the default takes LOCAL_RANK (or GPU 0) when
 * a device is usable and falls back to host batches otherwise. */
static int pick_device(stoker_loader *l, const stoker_config *cfg)
{
    const int64_t opt = stoker__cfg_int(cfg, STOKER_OPT_DEVICE);
    char why[160] = "";
    if (opt < 0)
        return 0;
    const int n = stoker__cuda_device_query(why, sizeof why);
    if (opt > 0) {
        STOKER_RETURN_IF(n == 0, &l->err, STOKER_E_CUDA,
                         "CUDA device %lld was requested but no device is usable: %s",
                         (long long)(opt - 1), why);
        STOKER_RETURN_IF(opt - 1 >= n, &l->err, STOKER_E_CUDA,
                         "CUDA device %lld was requested but there are %d device(s)",
                         (long long)(opt - 1), n);
        l->device = (int32_t)(opt - 1);
        return 0;
    }
    const int64_t rank = l->local_rank >= 0 ? l->local_rank : env_local_rank();
    const int64_t want = rank >= 0 ? rank : 0;
    if (n == 0) {
        stoker__logf(&l->log, STOKER_LOG_INFO, "no usable CUDA device (%s): host batches", why);
        return 0;
    }
    if (want >= n) {
        stoker__logf(&l->log, STOKER_LOG_WARN,
                     "LOCAL_RANK %lld but %d CUDA device(s): host batches", (long long)want, n);
        return 0;
    }
    l->device = (int32_t)want;
    return 0;
}

/* GPU normalisation: uint8 [h, w, 3] samples (raw records, or the JPEG pipeline's output,
 * which it then leaves as uint8 HWC) to a float dtype, NCHW or NHWC, with the CPU
 * pipeline's arithmetic. The workers' batches stay uint8 (a quarter of float32's bytes
 * cross PCIe); only the device batch has the requested dtype and shape. */
static int norm_options(stoker_loader *l, const stoker_config *cfg)
{
    stoker__gpu *g = l->gpu;
    if (!stoker__cfg_int(cfg, STOKER_OPT_GPU_NORMALIZE))
        return 0;
#ifndef STOKER_HAVE_NVCC
    return stoker__fail(&l->err, STOKER_E_UNSUPPORTED,
                        "GPU normalisation needs a build with nvcc (this one has the CUDA "
                        "runtime only)");
#else
    const char *path = stoker__dataset_path(l->ds);
    STOKER_RETURN_IF(!l->rec_size || l->dtype != STOKER_DTYPE_UINT8 || l->ndim != 3 ||
                         l->shape[2] != 3,
                     &l->err, STOKER_E_UNSUPPORTED,
                     "%s: GPU normalisation takes uint8 records of shape [H, W, 3] or JPEG "
                     "images with a transform",
                     path);
    const int64_t dt = stoker__cfg_int(cfg, STOKER_OPT_DTYPE);
    g->out_dtype = dt == STOKER_DTYPE_DEFAULT ? STOKER_DTYPE_FLOAT16 : (int32_t)dt;
    STOKER_RETURN_IF(g->out_dtype != STOKER_DTYPE_FLOAT16 && g->out_dtype != STOKER_DTYPE_FLOAT32 &&
                         g->out_dtype != STOKER_DTYPE_BFLOAT16,
                     &l->err, STOKER_E_UNSUPPORTED,
                     "GPU normalisation produces float16, bfloat16 or float32, not %s",
                     stoker_dtype_name(g->out_dtype));
    g->nchw = stoker__cfg_int(cfg, STOKER_OPT_LAYOUT) != STOKER_LAYOUT_NHWC;
    g->h = l->shape[0];
    g->w = l->shape[1];
    for (int c = 0; c < 3; c++) {
        const double mean = stoker__cfg_float(cfg, (stoker_option)(STOKER_OPT_MEAN_R + c));
        const double sd = stoker__cfg_float(cfg, (stoker_option)(STOKER_OPT_STD_R + c));
        STOKER_RETURN_IF(!(sd > 0), &l->err, STOKER_E_INVALID, "std must be positive");
        g->scale[c] = (float)(1.0 / (255.0 * sd));
        g->bias[c] = (float)(-mean / sd);
    }
    g->norm = true;
    return 0;
#endif
}

int stoker__gpu_configure(stoker_loader *l, const stoker_config *cfg)
{
    l->device = -1;
    const int rc = pick_device(l, cfg);
    STOKER_RETURN_IF(rc == 0 && l->device < 0 && stoker__cfg_int(cfg, STOKER_OPT_GPU_NORMALIZE),
                     &l->err, STOKER_E_UNSUPPORTED,
                     "GPU normalisation needs a usable CUDA device (this loader would "
                     "deliver host batches)");
    if (rc < 0 || l->device < 0)
        return rc;
    stoker__gpu *g = stoker__calloc(1, sizeof *g);
    STOKER_RETURN_IF(!g, &l->err, -ENOMEM, "out of memory for the GPU stage");
    if (pthread_mutex_init(&g->mu, NULL) != 0) {
        stoker__free(g);
        return stoker__fail(&l->err, -ENOMEM, "cannot create the GPU stage's lock");
    }
    l->gpu = g; /* destroy frees it from here on */
    STOKER_RETURN_IF(pthread_cond_init(&g->cv, NULL) != 0, &l->err, -ENOMEM,
                     "cannot create the GPU stage's condition variable");
    g->has_cv = true;
    const int64_t nb = stoker__cfg_int(cfg, STOKER_OPT_DEVICE_BUFFERS);
    g->nbuf = nb <= 0 ? DEFAULT_BUFFERS : nb < 2 ? 2u : (uint32_t)nb;
    return norm_options(l, cfg);
}

static int dbuf_init(stoker_loader *l, stoker__dbuf *d, size_t cap)
{
    const uint64_t b = l->smp.batch;
    d->batch.loader = l;
    d->batch.dbuf = d;
    d->batch.dtype = l->dtype;
    d->batch.ids = stoker__calloc(b, sizeof(int64_t));
    d->batch.labels = stoker__calloc(b, sizeof(int64_t));
    d->batch.offsets = stoker__calloc(b + 1, sizeof(int64_t));
    STOKER_RETURN_IF(!d->batch.ids || !d->batch.labels || !d->batch.offsets, &l->err, -ENOMEM,
                     "out of memory for a device batch");
    cudaError_t e = INJECT(cudaEventCreateWithFlags(&d->ready, cudaEventDisableTiming));
    if (e != cudaSuccess)
        return cuda_fail(l, e, "cudaEventCreateWithFlags");
    e = INJECT(cudaEventCreateWithFlags(&d->done, cudaEventDisableTiming | cudaEventBlockingSync));
    if (e != cudaSuccess) {
        cudaEventDestroy(d->ready);
        return cuda_fail(l, e, "cudaEventCreateWithFlags");
    }
    d->has_events = true;
    e = INJECT(cudaMalloc((void **)&d->dev, cap));
    if (e != cudaSuccess)
        return cuda_fail(l, e, "cudaMalloc of a device batch buffer");
    d->cap = cap;
    d->batch.data = d->dev;
    return 0;
}

int stoker__gpu_create(stoker_loader *l)
{
    stoker__gpu *g = l->gpu;
    if (!g)
        return 0;
    const int prev = enter(l);
    int rc = 0;
    cudaError_t e = INJECT(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
    if (e != cudaSuccess) {
        rc = cuda_fail(l, e, "cudaStreamCreateWithFlags");
        goto out;
    }
    g->has_stream = true;
    e = INJECT(cudaStreamCreateWithFlags(&g->cb_stream, cudaStreamNonBlocking));
    if (e != cudaSuccess) {
        rc = cuda_fail(l, e, "cudaStreamCreateWithFlags");
        goto out;
    }
    g->has_cb_stream = true;
    g->bufs = stoker__calloc(g->nbuf, sizeof *g->bufs);
    if (!g->bufs) {
        rc = stoker__fail(&l->err, -ENOMEM, "out of memory for the device buffers");
        goto out;
    }
    size_t cap = l->slots[0].cap;
    if (g->norm) { /* device batches hold the normalised dtype; staging the uint8 batch */
        e = INJECT(cudaMalloc((void **)&g->staging, cap));
        if (e != cudaSuccess) {
            rc = cuda_fail(l, e, "cudaMalloc of the normalisation staging buffer");
            goto out;
        }
        g->staging_cap = cap;
        cap *= stoker_dtype_size(g->out_dtype);
    }
    for (uint32_t i = 0; i < g->nbuf && rc == 0; i++)
        rc = dbuf_init(l, &g->bufs[i], cap);
    /* Plain copies stream piece by piece (set before any worker or copy thread starts);
     * normalised batches go through the staging buffer whole. */
    l->stream_pieces = !g->norm;
    if (rc == 0) {
        const int err = stoker__thread_start(&g->thread, copy_main, l);
        if (err != 0)
            rc = stoker__fail(&l->err, -err, "cannot start the copy thread: %s",
                              stoker_strerror(-err));
        g->has_thread = err == 0;
    }
    if (rc == 0)
        stoker__logf(&l->log, STOKER_LOG_INFO,
                     "device %d: %u device buffers of %zu bytes, "
                     "%lld pinned bytes",
                     l->device, g->nbuf, l->slots[0].cap, (long long)atomic_load(&l->pinned_bytes));
out:
    leave(l, prev);
    return rc;
}

void stoker__gpu_destroy(stoker_loader *l)
{
    stoker__gpu *g = l->gpu;
    if (!g)
        return;
    if (g->has_thread) {
        ask_copy_thread(l, true, false);
        pthread_join(g->thread, NULL);
    }
    const int prev = enter(l);
    /* Copies in flight read slots, and their host functions touch slots: both end here,
     * before the workers and slots go. */
    if (g->has_stream)
        cudaStreamSynchronize(g->stream);
    if (g->has_cb_stream)
        cudaStreamSynchronize(g->cb_stream);
    for (uint32_t i = 0; g->bufs && i < g->nbuf; i++) {
        stoker__dbuf *d = &g->bufs[i];
        if (d->has_events) {
            cudaEventDestroy(d->ready);
            cudaEventDestroy(d->done);
        }
        cudaFree(d->dev);
        stoker__free(d->batch.ids);
        stoker__free(d->batch.labels);
        stoker__free(d->batch.offsets);
    }
    cudaFree(g->staging);
    if (g->has_stream)
        cudaStreamDestroy(g->stream);
    if (g->has_cb_stream)
        cudaStreamDestroy(g->cb_stream);
    cudaGetLastError();
    leave(l, prev);
    stoker__free(g->bufs);
    if (g->has_cv)
        pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    stoker__free(g);
    l->gpu = NULL;
}

/* Host function after a slot's copy: the slot goes back to the workers. Runs on CUDA's
 * callback thread; makes no CUDA call. */
static void slot_copied(void *arg)
{
    stoker__slot *s = arg;
    const stoker_loader *l = s->batch.loader;
    pthread_mutex_lock(&s->mu);
    s->state = SLOT_FREE;
    s->seq += l->depth;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
}

/* Sets what the copy thread is asked (stop; hold still) and `halt`, which mirrors them for
 * its waits on slots, then wakes it wherever it waits. */
static void ask_copy_thread(stoker_loader *l, bool stop, bool hold)
{
    stoker__gpu *g = l->gpu;
    pthread_mutex_lock(&g->mu);
    g->stop = stop;
    g->hold = hold;
    atomic_store_explicit(&g->halt, stop || hold, memory_order_release);
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    if (stop || hold)
        stoker__slots_wake(l);
}

/* Bytes [*lo, *hi) of the slot's batch that pieces [p0, p1) hold. */
static void piece_bytes(const stoker_batch *b, uint32_t p0, uint32_t p1, uint64_t *lo, uint64_t *hi)
{
    const int64_t j0 = (int64_t)p0 * STOKER__PIECE, j1 = (int64_t)p1 * STOKER__PIECE;
    *lo = (uint64_t)b->offsets[j0 < b->count ? j0 : b->count];
    *hi = (uint64_t)b->offsets[j1 < b->count ? j1 : b->count];
}

/* Copy thread, s->mu held, batch seq PREPARED in s: queues the copies of the finished
 * pieces from *sent on, in order (mu released around the CUDA call). */
static void stream_pieces(stoker_loader *l, stoker__slot *s, stoker__dbuf *d, uint32_t *sent,
                          cudaError_t *e)
{
    const stoker_batch *hb = &s->batch;
    if (s->err_code != 0 || hb->nbytes > d->cap || *e != cudaSuccess)
        return; /* the batch fails, or the buffer grows first: copied whole at READY */
    uint32_t p = *sent;
    while (p < l->ppb && atomic_load_explicit(&s->piece_ok[p], memory_order_acquire))
        p++;
    if (p == *sent)
        return;
    uint64_t lo, hi;
    piece_bytes(hb, *sent, p, &lo, &hi);
    pthread_mutex_unlock(&s->mu);
    if (hi > lo)
        *e = cudaMemcpyAsync(d->dev + lo, hb->data + lo, hi - lo, cudaMemcpyHostToDevice,
                             l->gpu->stream);
    pthread_mutex_lock(&s->mu);
    *sent = p;
}

/* Copy thread: waits for host slot seq to be READY and takes it (OUT), copying its pieces
 * into d meanwhile (when the loader streams them; *sent counts the pieces queued, *e the
 * first failure). Returns 0 with *out, 1 when halted first, or a failed batch's code with
 * its message in *err (the slot freed once no copy reads it). */
static int take_slot(stoker_loader *l, uint64_t seq, stoker__dbuf *d, stoker__slot **out,
                     uint32_t *sent, cudaError_t *e, stoker__err *err)
{
    stoker__slot *s = &l->slots[seq % l->depth];
    pthread_mutex_lock(&s->mu);
    while (!(s->seq == seq && s->state == SLOT_READY)) {
        if (atomic_load_explicit(&l->gpu->halt, memory_order_acquire)) {
            pthread_mutex_unlock(&s->mu);
            return 1;
        }
        if (l->stream_pieces && s->seq == seq && s->state == SLOT_PREPARED) {
            const uint32_t before = *sent;
            stream_pieces(l, s, d, sent, e);
            if (*sent != before)
                continue; /* more may be done meanwhile */
        }
        struct timespec ts;
        stoker__deadline(&ts);
        pthread_cond_timedwait(&s->cond, &s->mu, &ts);
    }
    atomic_fetch_sub_explicit(&l->ready, 1, memory_order_relaxed);
    if (s->err_code != 0) {
        if (*sent > 0) { /* queued copies still read the slot */
            pthread_mutex_unlock(&s->mu);
            if (cudaStreamSynchronize(l->gpu->stream) != cudaSuccess)
                cudaGetLastError();
            pthread_mutex_lock(&s->mu);
        }
        const int rc = stoker__fail(err, s->err_code, "%s", s->err_msg);
        s->state = SLOT_FREE;
        s->seq += l->depth;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->mu);
        return rc;
    }
    s->state = SLOT_OUT;
    pthread_mutex_unlock(&s->mu);
    *out = s;
    return 0;
}

/* Copies what the consumer reads besides data: the slot is refilled after the copy. With
 * GPU normalisation, the device batch has the output dtype, layout and size. */
static void copy_meta(const stoker__gpu *g, stoker__dbuf *d, const stoker_batch *hb)
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
    if (!g->norm)
        return;
    b->dtype = g->out_dtype;
    b->nbytes = hb->nbytes * stoker_dtype_size(g->out_dtype);
    b->ndim = 4;
    b->shape[0] = hb->count;
    b->shape[1] = g->nchw ? 3 : g->h;
    b->shape[2] = g->nchw ? g->h : g->w;
    b->shape[3] = g->nchw ? g->w : 3;
}

/* Queues the host batch's bytes to the device batch: one copy of the bytes from `from` on
 * (those before were streamed piece by piece), or a copy to the staging buffer and the
 * normalisation kernel. */
static cudaError_t queue_data(stoker__gpu *g, stoker__dbuf *d, const stoker_batch *hb,
                              uint64_t from)
{
    if (hb->nbytes == 0)
        return cudaSuccess;
    if (!g->norm)
        return from >= hb->nbytes
                   ? cudaSuccess
                   : cudaMemcpyAsync(d->dev + from, hb->data + from, hb->nbytes - from,
                                     cudaMemcpyHostToDevice, g->stream);
#ifdef STOKER_HAVE_NVCC
    if (hb->nbytes > g->staging_cap) /* fixed-size records: never (a full batch fits) */
        return cudaErrorInvalidValue;
    cudaError_t e =
        cudaMemcpyAsync(g->staging, hb->data, hb->nbytes, cudaMemcpyHostToDevice, g->stream);
    if (e == cudaSuccess)
        e = (cudaError_t)stoker__cuda_normalize(g->staging, d->dev, hb->count, g->h, g->w,
                                                g->out_dtype, g->nchw, g->scale, g->bias,
                                                g->stream);
    return e;
#else
    return cudaErrorNotSupported;
#endif
}

/* Copy thread: issues the copy of host slot s into device buffer d (what `sent` streamed
 * pieces did not already queue, or all of it when SKIP repaired records since, or when
 * streaming failed: `e`), then its ready event and the slot-done host function; a failure
 * is kept in d->err for next to hand out. The slot always goes back to the workers: after
 * the copy, or once nothing queued reads it. */
static void issue_copy(stoker_loader *l, stoker__slot *s, stoker__dbuf *d, uint32_t sent,
                       cudaError_t e)
{
    stoker__gpu *g = l->gpu;
    const stoker_batch *hb = &s->batch;
    int rc = 0;
    uint64_t from = 0, lo;
    if (sent > 0 && !s->repaired)
        piece_bytes(hb, 0, sent, &lo, &from);
    copy_meta(g, d, hb);
    if (d->batch.nbytes > d->cap) { /* records that vary: a larger batch than any before (rare) */
        cudaFree(d->dev);
        d->dev = NULL;
        d->cap = 0;
        e = INJECT(cudaMalloc((void **)&d->dev, d->batch.nbytes));
        if (e != cudaSuccess)
            rc = cuda_fail_to(&d->err, l->device, e, "cudaMalloc growing a device batch buffer");
        else
            d->cap = d->batch.nbytes;
        d->batch.data = d->dev;
    }
    if (rc == 0 && e == cudaSuccess)
        e = queue_data(g, d, hb, from);
    if (rc == 0 && e == cudaSuccess)
        e = cudaEventRecord(d->ready, g->stream);
    if (rc == 0 && e == cudaSuccess)
        e = cudaStreamWaitEvent(g->cb_stream, d->ready, 0);
    if (rc == 0 && e == cudaSuccess)
        e = cudaLaunchHostFunc(g->cb_stream, slot_copied, s);
    if (rc == 0 && e != cudaSuccess) {
        rc = cuda_fail_to(&d->err, l->device, e, "queueing a batch copy");
        cudaStreamSynchronize(g->stream); /* a queued copy may still read the slot */
        cudaGetLastError();
    }
    if (rc < 0)
        slot_copied(s);
}

/* Copy thread, gpu->mu held: whether batch seq's device buffer may be filled now. Waits
 * (mu released) for the consumer's work on a released buffer; returns false when it must
 * wait for the consumer instead (the buffer held, or nbuf batches already ahead). */
static bool buffer_free(stoker__gpu *g, uint64_t seq)
{
    stoker__dbuf *d = &g->bufs[seq % g->nbuf];
    if (seq - g->consumed >= g->nbuf || d->state == DBUF_OUT || d->state == DBUF_RELEASING ||
        d->state == DBUF_COPIED)
        return false;
    if (d->state == DBUF_RELEASED && d->pending) {
        /* Only this thread moves a RELEASED buffer on, so `done` is stable here. */
        pthread_mutex_unlock(&g->mu);
        if (cudaEventSynchronize(d->done) != cudaSuccess)
            cudaGetLastError(); /* the consumer's stream failed: its own calls report it */
        pthread_mutex_lock(&g->mu);
        d->pending = false;
    }
    return true;
}

static void *copy_main(void *arg)
{
    stoker_loader *l = arg;
    stoker__gpu *g = l->gpu;
    stoker__thread_name("stoker-h2d");
    cudaSetDevice(l->device); /* checked at create; a failure shows in the first copy */
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        g->held = g->hold;
        if (g->hold)
            pthread_cond_broadcast(&g->cv); /* quiesce waits for held */
        if (g->hold || !buffer_free(g, g->issued)) {
            struct timespec ts;
            stoker__deadline(&ts);
            pthread_cond_timedwait(&g->cv, &g->mu, &ts);
            continue;
        }
        if (g->hold || g->stop) /* asked while buffer_free waited */
            continue;
        const uint64_t seq = g->issued;
        stoker__dbuf *d = &g->bufs[seq % g->nbuf];
        pthread_mutex_unlock(&g->mu);
        /* d is not visible to next until COPIED is published below */
        stoker__err_clear(&d->err);
        stoker__slot *s = NULL;
        uint32_t sent = 0;
        cudaError_t e = cudaSuccess;
        const int rc = take_slot(l, seq, d, &s, &sent, &e, &d->err);
        if (rc == 0)
            issue_copy(l, s, d, sent, e);
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

void stoker__gpu_quiesce(stoker_loader *l)
{
    stoker__gpu *g = l->gpu;
    if (!g)
        return;
    ask_copy_thread(l, false, true);
    pthread_mutex_lock(&g->mu);
    while (g->has_thread && !g->held) {
        struct timespec ts;
        stoker__deadline(&ts);
        pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    }
    pthread_mutex_unlock(&g->mu);
    const int prev = enter(l);
    const cudaError_t e = cudaStreamSynchronize(g->stream);
    if ((cudaStreamSynchronize(g->cb_stream) != cudaSuccess) | (e != cudaSuccess))
        cudaGetLastError();
    leave(l, prev);
    pthread_mutex_lock(&g->mu);
    for (uint32_t i = 0; i < g->nbuf; i++) {
        if (g->bufs[i].state == DBUF_COPIED)
            g->bufs[i].state = DBUF_FREE;
        stoker__err_clear(&g->bufs[i].err);
    }
    g->issued = g->consumed = 0; /* the restart numbers batches from 0 again */
    pthread_mutex_unlock(&g->mu);
}

void stoker__gpu_resume(stoker_loader *l)
{
    if (l->gpu)
        ask_copy_thread(l, false, false);
}

/* Hands out batch cons_seq once the copy thread has issued its copy: no CUDA call here. A
 * failed batch is consumed and its error returned; STOKER_E_STATE (nothing consumed) when
 * its device buffer still holds a batch the consumer has not released. */
int stoker__gpu_next(stoker_loader *l, stoker_batch **out)
{
    stoker__gpu *g = l->gpu;
    const uint64_t seq = l->cons_seq;
    stoker__dbuf *d = &g->bufs[seq % g->nbuf];
    double waited = 0;
    pthread_mutex_lock(&g->mu);
    if (g->issued <= seq && (d->state == DBUF_OUT || d->state == DBUF_RELEASING)) {
        pthread_mutex_unlock(&g->mu);
        return stoker__fail(&l->err, STOKER_E_STATE,
                            "the device batch handed out %u batches before this one is still "
                            "held: release it first (the %u device buffers form a ring)",
                            g->nbuf, g->nbuf);
    }
    if (g->issued <= seq) {
        const double t0 = stoker__now();
        while (g->issued <= seq) {
            struct timespec ts;
            stoker__deadline(&ts);
            pthread_cond_timedwait(&g->cv, &g->mu, &ts);
        }
        waited = stoker__now() - t0;
    }
    int rc = d->err.code;
    if (rc < 0)
        stoker__fail(&l->err, rc, "%s", d->err.msg); /* d may be refilled once consumed */
    d->state = rc < 0 ? DBUF_FREE : DBUF_OUT;
    d->pending = false;
    g->consumed = seq + 1;
    const uint64_t queued = g->issued - g->consumed;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    l->cons_seq++;
    l->cons_pos++;
    if (rc < 0)
        return rc;
    atomic_fetch_add(&l->outstanding, 1);
    stoker__count_delivery(l, &d->batch, waited,
                           (uint64_t)atomic_load_explicit(&l->ready, memory_order_relaxed) +
                               queued);
    *out = &d->batch;
    return 0;
}

/* Any thread. The event is recorded with no lock held (RELEASING keeps the buffer from the
 * copy thread and from a second release meanwhile), and a failure is logged and returned,
 * never written to the loader's error state, which belongs to the consumer thread. */
int stoker__gpu_release(stoker_batch *b, bool record, void *stream)
{
    stoker__dbuf *d = b->dbuf;
    stoker_loader *l = b->loader;
    stoker__gpu *g = l->gpu;
    pthread_mutex_lock(&g->mu);
    if (d->state != DBUF_OUT) {
        pthread_mutex_unlock(&g->mu);
        return STOKER_E_STATE;
    }
    d->state = DBUF_RELEASING;
    pthread_mutex_unlock(&g->mu);
    cudaError_t e = cudaSuccess;
    if (record) {
        const int prev = enter(l);
        e = cudaEventRecord(d->done, (cudaStream_t)stream);
        if (e != cudaSuccess) {
            /* Without the event, the only safe release is after the stream's work. */
            stoker__logf(&l->log, STOKER_LOG_ERROR,
                         "cudaEventRecord on the consumer's stream (device %d): %s; releasing "
                         "the batch once the stream's work is done",
                         l->device, cudaGetErrorString(e));
            cudaGetLastError();
            cudaStreamSynchronize((cudaStream_t)stream);
            cudaGetLastError();
        }
        leave(l, prev);
    }
    pthread_mutex_lock(&g->mu);
    d->pending = record && e == cudaSuccess;
    d->state = DBUF_RELEASED;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    atomic_fetch_sub(&l->outstanding, 1);
    return e == cudaSuccess ? 0 : STOKER_E_CUDA;
}

int stoker_batch_wait_stream(const stoker_batch *b, void *cuda_stream)
{
    if (!b)
        return STOKER_E_INVALID;
    if (!b->dbuf)
        return 0;
    stoker_loader *l = b->loader;
    const int prev = enter(l);
    const cudaError_t e = cudaStreamWaitEvent((cudaStream_t)cuda_stream, b->dbuf->ready, 0);
    leave(l, prev);
    return e == cudaSuccess ? 0 : cuda_fail(l, e, "cudaStreamWaitEvent on the batch's event");
}

void *stoker_batch_cuda_event(const stoker_batch *b)
{
    return b && b->dbuf ? (void *)b->dbuf->ready : NULL;
}

int stoker_batch_release_stream(stoker_batch *b, void *cuda_stream)
{
    if (!b)
        return STOKER_E_INVALID;
    return b->dbuf ? stoker__gpu_release(b, true, cuda_stream) : stoker_batch_release(b);
}

#else /* no CUDA in this build: host batches only */

int stoker__gpu_configure(stoker_loader *l, const stoker_config *cfg)
{
    l->device = -1;
    STOKER_RETURN_IF(stoker__cfg_int(cfg, STOKER_OPT_DEVICE) > 0, &l->err, STOKER_E_UNSUPPORTED,
                     "a CUDA device was requested but this build has no CUDA support");
    STOKER_RETURN_IF(stoker__cfg_int(cfg, STOKER_OPT_GPU_NORMALIZE), &l->err, STOKER_E_UNSUPPORTED,
                     "GPU normalisation needs a build with CUDA");
    return 0;
}

int stoker__gpu_create(stoker_loader *l)
{
    (void)l;
    return 0;
}

void stoker__gpu_destroy(stoker_loader *l)
{
    (void)l;
}

void stoker__gpu_quiesce(stoker_loader *l)
{
    (void)l;
}

void stoker__gpu_resume(stoker_loader *l)
{
    (void)l;
}

int stoker__gpu_next(stoker_loader *l, stoker_batch **out)
{
    (void)out;
    return stoker__fail(&l->err, STOKER_E_STATE, "no GPU stage");
}

int stoker__gpu_release(stoker_batch *b, bool record, void *stream)
{
    (void)b;
    (void)record;
    (void)stream;
    return STOKER_E_STATE;
}

int stoker_batch_wait_stream(const stoker_batch *b, void *cuda_stream)
{
    (void)cuda_stream;
    return b ? 0 : STOKER_E_INVALID;
}

void *stoker_batch_cuda_event(const stoker_batch *b)
{
    (void)b;
    return NULL;
}

int stoker_batch_release_stream(stoker_batch *b, void *cuda_stream)
{
    (void)cuda_stream;
    return stoker_batch_release(b);
}

#endif
