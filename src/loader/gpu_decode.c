/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU decode stage (gpu_decode.h). */
#include "loader/gpu_decode.h"

#include "cuda/image_kernels.h"
#include "cuda/nvjpeg.h"
#include "cuda/nvtx.h"
#include "decode/jpeg_info.h"
#include "loader/split.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ARENA_ALIGN 256u
#define STAGE_MIN (UINT64_C(64) << 10) /* staging bytes per record at least */
/* The image size nvJPEG's hardware decoder sets its memory aside for, per image of a batch
 * (stoker__nvjpeg_reserve): 640 x 480, above the median photograph of ImageNet-like data
 * (about 500 x 375). On the H200, beside a training step's kernels, it cut the decoder's
 * device-synchronising frees from about 11 to about 3 a batch (docs/BENCHMARKS.md). */
#define RESERVE_W 640
#define RESERVE_H 480

/* The GPU's records per batch are a multiple of QUANTUM: each change of a batch's image count
 * makes nvJPEG initialise its batched decode again, and its hardware decoder frees and
 * allocates device memory then (each free waits for the whole device), so the count changes
 * only when the share moves by a step. */
#define QUANTUM 8
/* Deliveries per decision of the split (stoker__split_consumed). */
#define PERIOD 8
/* Candidates picked per record of the quota, so that records the hardware cannot take (and
 * the spread of the eligible ones over a batch) rarely leave the quota short. */
#define OVERPICK 1.25

enum { ROUTE_CPU = 0, ROUTE_GPU = 1 };

/* A record routed to the GPU: its staged bytes, its sample's geometry (scale 1) and the
 * region of the image that geometry reads, which is all the decoder decodes. */
typedef struct grec {
    uint64_t zoff;
    uint32_t zlen;
    uint8_t route; /* written by the record's worker, read after the batch's last piece */
    stoker__geom g;
    stoker__nvjpeg_roi roi;
} grec;

typedef struct gslot {
    /* set in prepare */
    double share;   /* of the eligible records: the GPU's, for this batch */
    double pick;    /* of all records: the candidates for the GPU, spread over the batch */
    uint32_t quota; /* records the GPU takes at most (QUANTUM steps: see prepare) */
    int32_t count;
    bool closed; /* the owner of the slot's contents routes nothing more */
    atomic_uint ngpu, neligible, claimed;
    atomic_uint_fast64_t zused, cpu_ns, cpu_records;
    uint32_t ndone; /* samples the GPU made (hpos/dpos), set by run before READY */
    /* memory */
    uint8_t *z; /* staged bytes: pinned (nvJPEG reads them while it decodes) */
    size_t zcap;
    bool zpinned;
    grec *rec;
    uint8_t *dsamples; /* device: ndone finished samples side by side */
    int32_t *dpos;     /* device: their places in the batch */
    int32_t *hpos;     /* host (pinned when it could be): the same */
    bool hpos_pinned;
    /* the run's outcome */
    uint32_t *retry; /* records left for the CPU */
    uint32_t nretry;
    uint64_t gpu_ns;
    bool failed;
} gslot;

/* A batch's run in flight: its own nvJPEG decoder (state), stream and scratch, so that the
 * host's part of the next batch (parsing its JPEGs, queueing them) overlaps the GPU's work
 * on this one. The GPU worker alone uses the lanes. */
typedef struct lane {
    stoker__gdec *gd;
    stoker__nvjpeg *nj;
    stoker__stream stream;
    stoker__event done; /* blocking: the GPU worker sleeps while the GPU works */
    bool has_stream, has_event;
    uint8_t *arena; /* device: the decoded regions */
    size_t arena_cap;
    stoker__gpu_image *hdesc, *ddesc;
    bool hdesc_pinned;
    const uint8_t **data;
    size_t *sizes, *pitch;
    uint8_t **dst, *taken;
    stoker__nvjpeg_roi *rois;
    uint32_t *which;
    /* the run in flight */
    stoker__slot *slot;
    uint32_t n, m; /* records routed; samples queued */
    bool failed;
    bool notify; /* the run's end is signalled (lane_finished): no need to wait for it */
    uint64_t begun, finished; /* runs; finished under the stage's mutex, by the callback */
    uint64_t t0;
} lane;

/* Runs in flight: while one lane's run is on the GPU, the GPU worker queues the next on the
 * other (more lanes measured no better: nvJPEG's hardware decode returns when it is done). */
#define LANES 2

/* Slots waiting, first in first out; at most the ring's depth of them. */
typedef struct fifo {
    stoker__slot **s;
    uint32_t head, len, cap;
} fifo;

static void fifo_push(fifo *f, stoker__slot *s)
{
    f->s[(f->head + f->len++) % f->cap] = s;
}

static stoker__slot *fifo_pop(fifo *f)
{
    if (f->len == 0)
        return NULL;
    stoker__slot *s = f->s[f->head];
    f->head = (f->head + 1) % f->cap;
    f->len--;
    return s;
}

/* What the GPU worker does next (next). */
enum { STEP_IDLE, STEP_BEGIN, STEP_END, STEP_RETRY };

struct stoker__gdec {
    int emulated; /* a test hook's mode: no device, no nvJPEG */
    const stoker__plan *plan;
    stoker__ring *ring;
    int device;
    stoker__gpu_output out;
    size_t sample_bytes; /* of a delivered sample */
    gslot *slots;
    uint32_t nslots;
    lane lanes[LANES];
    uint32_t next_lane, in_flight; /* lanes are begun and ended in turn */
    uint64_t last_end;             /* when the last run ended: busy time is counted once */
    /* the queue and the split, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool has_locks;
    fifo queue;           /* batches for the GPU worker */
    fifo retries;         /* batches with records left for the CPU */
    atomic_uint rpending; /* retries.len, read without mu by workers looking for work */
    atomic_uint qpending; /* queue.len, read without mu by the consumer (the split's measure) */
    stoker__split split;
    _Atomic double share; /* for the batches prepared next (read without mu in prepare,
                             under a slot's mutex, which is a leaf) */
    _Atomic double epart; /* the split's eligible / records, likewise */
    double pinned;        /* above 0: auto's share, fixed (the plan's gpu_share) */
    bool pinned_by_env;   /* ... by STOKER_GPU_SHARE */
    bool fallen;
    /* the consumer's deliveries of the current period: its thread's alone */
    struct {
        uint64_t t0_ns;      /* the delivery before the period */
        double busy0;        /* the workers' busy seconds then */
        uint64_t cpu0, gpu0; /* the records each side had decoded then */
        double waited, ready, queued, records;
        uint32_t n;
    } period;
    /* counters */
    atomic_uint_fast64_t decoded, retried, fallbacks, busy_ns;
    uint64_t wait_ns; /* the GPU worker's, waiting for runs to end */
    /* the GPU worker */
    stoker__gdec_host host;
    void *host_ctx;
    pthread_t thread;
    bool started;
};

static gslot *slot_of(const stoker__gdec *gd, const stoker__slot *s)
{
    return &gd->slots[s - gd->ring->slots];
}

/* ---- create and destroy ---- */

int stoker__gdec_create(stoker__gdec **out, const stoker__plan *plan, char *why, size_t cap,
                        stoker__err *err)
{
    *out = NULL;
    stoker__nvjpeg *nj[LANES] = {NULL};
    const int emulated = plan->gdec_emulate;
    int rc = 0;
    for (uint32_t i = 0; i < LANES && rc == 0 && !emulated; i++)
        rc = stoker__nvjpeg_open(&nj[i], plan->device, why, cap);
    stoker__gdec *gd = rc == 0 ? stoker__calloc(1, sizeof *gd) : NULL;
    if (!gd) {
        for (uint32_t i = 0; i < LANES; i++)
            stoker__nvjpeg_close(nj[i]);
        if (rc == STOKER_E_UNSUPPORTED)
            return rc;
        if (rc < 0)
            return stoker__fail(err, rc, "loading nvJPEG on device %d: %s", plan->device,
                                stoker_strerror(rc));
        return stoker__fail(err, -ENOMEM, "out of memory for the GPU decode stage");
    }
    *out = gd;
    gd->emulated = emulated;
    gd->plan = plan;
    for (uint32_t i = 0; i < LANES; i++) {
        gd->lanes[i].nj = nj[i];
        gd->lanes[i].gd = gd;
    }
    gd->device = plan->device;
    STOKER_RETURN_IF(pthread_mutex_init(&gd->mu, NULL) != 0, err, -ENOMEM,
                     "cannot create the GPU decode stage's lock");
    if (pthread_cond_init(&gd->cv, NULL) != 0) {
        pthread_mutex_destroy(&gd->mu);
        return stoker__fail(err, -ENOMEM, "cannot create the GPU decode stage's condition");
    }
    gd->has_locks = true;
    gd->pinned = plan->gpu_share;
    gd->pinned_by_env = plan->gpu_share_by_env;
    /* auto starts with the CPU alone (the split starts at 0; made in start, with the ring) */
    gd->share = plan->decoder == STOKER_DECODER_GPU ? 1.0 : gd->pinned;
    gd->epart = 1.0;
    stoker__gpu_output *o = &gd->out;
    o->size = plan->xform.size;
    o->dtype = plan->out_dtype;
    o->nchw = plan->layout != STOKER_LAYOUT_NHWC;
    for (int c = 0; c < 3; c++) { /* the workers' arithmetic (transform.h) */
        o->scale[c] = (float)(1.0 / (255.0 * (double)plan->xform.std[c]));
        o->bias[c] = (float)(-(double)plan->xform.mean[c] / (double)plan->xform.std[c]);
    }
    gd->sample_bytes = (size_t)o->size * (size_t)o->size * 3 * stoker_dtype_size(o->dtype);
    return 0;
}

const char *stoker__gdec_describe(const stoker__gdec *gd)
{
    if (gd->emulated)
        return "an emulated decoder (test hook)";
    return stoker__nvjpeg_describe(gd->lanes[0].nj);
}

static int cuda_fail(stoker__err *err, int device, int e, const char *what)
{
    return stoker__fail(err, STOKER_E_CUDA, "%s (device %d): %s", what, device,
                        stoker__cuda_error_string(e));
}

/* Pinned host memory when it can be had (async copies, nvJPEG's reads), else plain. */
static void *host_alloc(const stoker__gdec *gd, size_t size, bool *pinned)
{
    char msg[128];
    void *p = stoker__cuda_host_alloc(gd->device, size ? size : 1, msg, sizeof msg);
    *pinned = p != NULL;
    return p ? p : stoker__aligned_alloc(4096, stoker__align_up(size ? size : 1, 4096));
}

static void host_free(void *p, bool pinned)
{
    if (pinned)
        stoker__cuda_host_free(p);
    else
        stoker__free(p);
}

static int slot_init(stoker__gdec *gd, gslot *g, uint64_t batch, stoker__err *err)
{
    const stoker__plan *p = gd->plan;
    uint64_t per = p->mean_record + p->mean_record / 4;
    per = per < STAGE_MIN ? STAGE_MIN : per;
    per = p->max_record && per > p->max_record ? p->max_record : per;
    g->zcap = (size_t)(batch * per);
    g->z = host_alloc(gd, g->zcap, &g->zpinned);
    g->rec = stoker__calloc(batch, sizeof *g->rec);
    g->retry = stoker__calloc(batch, sizeof *g->retry);
    g->hpos = host_alloc(gd, batch * sizeof *g->hpos, &g->hpos_pinned);
    STOKER_RETURN_IF(!g->z || !g->rec || !g->retry || !g->hpos, err, -ENOMEM,
                     "out of memory for the GPU decode stage's staging (%zu bytes a batch)",
                     g->zcap);
    if (gd->emulated)
        return 0;
    int e = stoker__cuda_malloc((void **)&g->dsamples, batch * gd->sample_bytes);
    if (e == 0)
        e = stoker__cuda_malloc((void **)&g->dpos, batch * sizeof *g->dpos);
    return e == 0 ? 0 : cuda_fail(err, gd->device, e, "cudaMalloc of the GPU decode's samples");
}

static int lane_init(stoker__gdec *gd, lane *ln, uint64_t batch, stoker__err *err)
{
    ln->data = stoker__calloc(batch, sizeof *ln->data);
    ln->sizes = stoker__calloc(batch, sizeof *ln->sizes);
    ln->pitch = stoker__calloc(batch, sizeof *ln->pitch);
    ln->dst = stoker__calloc(batch, sizeof *ln->dst);
    ln->taken = stoker__calloc(batch, 1);
    ln->rois = stoker__calloc(batch, sizeof *ln->rois);
    ln->which = stoker__calloc(batch, sizeof *ln->which);
    ln->hdesc = host_alloc(gd, batch * sizeof *ln->hdesc, &ln->hdesc_pinned);
    STOKER_RETURN_IF(!ln->data || !ln->sizes || !ln->pitch || !ln->dst || !ln->taken || !ln->rois ||
                         !ln->which || !ln->hdesc,
                     err, -ENOMEM, "out of memory for the GPU decode stage");
    if (gd->emulated)
        return 0;
    /* the device's least priority: the lanes' kernels (the colour conversion, the crop's
     * resampling) yield to the consumer's, which a training step is made of; the plan's
     * measuring switch gives them the greatest */
    int e = stoker__cuda_stream_create(&ln->stream, gd->plan->gpu_decode_urgent);
    if (e != 0)
        return cuda_fail(err, gd->device, e, "cudaStreamCreateWithFlags");
    ln->has_stream = true;
    e = stoker__cuda_event_create(&ln->done, true);
    if (e != 0)
        return cuda_fail(err, gd->device, e, "cudaEventCreateWithFlags");
    ln->has_event = true;
    if (!stoker__nvjpeg_reserve(ln->nj, (int32_t)batch, RESERVE_W, RESERVE_H))
        stoker__logf(&gd->plan->log, STOKER_LOG_INFO,
                     "GPU decode: nvJPEG set no memory aside for its hardware decoder; it "
                     "allocates as batches come");
    e = stoker__cuda_malloc((void **)&ln->ddesc, batch * sizeof *ln->ddesc);
    return e == 0 ? 0 : cuda_fail(err, gd->device, e, "cudaMalloc of the GPU decode's descriptors");
}

static void lane_free(lane *ln)
{
    if (ln->has_stream)
        stoker__cuda_stream_sync(ln->stream);
    stoker__cuda_free(ln->arena);
    stoker__cuda_free(ln->ddesc);
    if (ln->hdesc)
        host_free(ln->hdesc, ln->hdesc_pinned);
    if (ln->has_event)
        stoker__cuda_event_destroy(ln->done);
    if (ln->has_stream)
        stoker__cuda_stream_destroy(ln->stream);
    stoker__nvjpeg_close(ln->nj);
    stoker__free(ln->data);
    stoker__free(ln->sizes);
    stoker__free(ln->pitch);
    stoker__free(ln->dst);
    stoker__free(ln->taken);
    stoker__free(ln->rois);
    stoker__free(ln->which);
}

static int start_on_device(stoker__gdec *gd, stoker__err *err)
{
    const uint64_t batch = gd->plan->batch;
    const uint32_t depth = gd->ring->depth;
    gd->slots = stoker__calloc(depth, sizeof *gd->slots);
    gd->queue = (fifo){.s = stoker__calloc(depth, sizeof(stoker__slot *)), .cap = depth};
    gd->retries = (fifo){.s = stoker__calloc(depth, sizeof(stoker__slot *)), .cap = depth};
    STOKER_RETURN_IF(!gd->slots || !gd->queue.s || !gd->retries.s, err, -ENOMEM,
                     "out of memory for the GPU decode stage");
    for (uint32_t i = 0; i < LANES; i++) {
        const int rc = lane_init(gd, &gd->lanes[i], batch, err);
        if (rc < 0)
            return rc;
    }
    for (uint32_t i = 0; i < gd->ring->depth; i++) {
        gd->nslots = i + 1;
        const int rc = slot_init(gd, &gd->slots[i], batch, err);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int stoker__gdec_start(stoker__gdec *gd, stoker__ring *ring, stoker__err *err)
{
    gd->ring = ring;
    /* ahead of the consumer: the ring three-quarters full at its calls, where producers are
     * held back by it; half of it with idle workers; running dry: about a third of it, and
     * falling (split.h) */
    const stoker__split_config cfg = {
        .ahead = 0.75 * ring->depth, .low = 0.35 * ring->depth, .slack = 0.5 * ring->depth};
    stoker__split_init(&gd->split, &cfg, true);
    if (gd->emulated)
        return start_on_device(gd, err);
    const int prev = stoker__cuda_use_device(gd->device);
    const int rc = start_on_device(gd, err);
    stoker__cuda_restore_device(gd->device, prev);
    return rc;
}

/* Where the GPU worker's time went, for the log. */
static void log_timing(const stoker__gdec *gd)
{
    for (uint32_t i = 0; i < LANES && !gd->emulated; i++) {
        char t[256];
        stoker__nvjpeg_timing(gd->lanes[i].nj, t, sizeof t);
        stoker__logf(&gd->plan->log, STOKER_LOG_INFO, "GPU decode lane %u: %s", i, t);
    }
    stoker__logf(&gd->plan->log, STOKER_LOG_INFO,
                 "GPU decode: %llu images, busy %.3f s, waiting for the GPU %.3f s",
                 (unsigned long long)atomic_load(&gd->decoded),
                 (double)atomic_load(&gd->busy_ns) * 1e-9, (double)gd->wait_ns * 1e-9);
}

void stoker__gdec_destroy(stoker__gdec *gd)
{
    if (!gd)
        return;
    log_timing(gd);
    const int prev = gd->emulated ? -1 : stoker__cuda_use_device(gd->device);
    for (uint32_t i = 0; i < LANES; i++)
        lane_free(&gd->lanes[i]);
    for (uint32_t i = 0; i < gd->nslots; i++) {
        gslot *g = &gd->slots[i];
        host_free(g->z, g->zpinned);
        host_free(g->hpos, g->hpos_pinned);
        stoker__free(g->rec);
        stoker__free(g->retry);
        stoker__cuda_free(g->dsamples);
        stoker__cuda_free(g->dpos);
    }
    if (!gd->emulated)
        stoker__cuda_restore_device(gd->device, prev);
    stoker__free(gd->slots);
    stoker__free(gd->queue.s);
    stoker__free(gd->retries.s);
    if (gd->has_locks) {
        pthread_mutex_destroy(&gd->mu);
        pthread_cond_destroy(&gd->cv);
    }
    stoker__free(gd);
}

/* ---- workers ---- */

void stoker__gdec_prepare(stoker__gdec *gd, stoker__slot *s)
{
    if (!gd)
        return;
    gslot *g = slot_of(gd, s);
    g->share = atomic_load(&gd->share);
    g->count = (int32_t)s->batch.count;
    if (g->share >= 1) {
        g->quota = (uint32_t)g->count;
        g->pick = 1;
    } else if (g->share > 0) {
        /* the share's records, in whole steps of QUANTUM (at least one step), picked from a
         * few more candidates: the batch's image count stays put while the share does */
        const double want = g->share * atomic_load(&gd->epart) * g->count;
        uint32_t q = (uint32_t)floor(want / QUANTUM + 0.5) * QUANTUM;
        q = q < QUANTUM ? QUANTUM : q;
        g->quota = q > (uint32_t)g->count ? (uint32_t)g->count : q;
        g->pick = g->count > 0 ? fmin(1.0, OVERPICK * g->quota / g->count + 0.01) : 0;
    } else {
        g->quota = 0;
        g->pick = 0;
    }
    g->closed = false;
    g->ndone = 0;
    g->nretry = 0;
    g->gpu_ns = 0;
    g->failed = false;
    atomic_store(&g->ngpu, 0);
    atomic_store(&g->neligible, 0);
    atomic_store(&g->claimed, 0);
    atomic_store(&g->zused, 0);
    atomic_store(&g->cpu_ns, 0);
    atomic_store(&g->cpu_records, 0);
    for (int32_t j = 0; j < g->count; j++)
        g->rec[j].route = ROUTE_CPU;
}

/* Whether the hardware decoder may take the image by what the CPU can tell cheaply: its
 * header (jpeg_info.h's rule), its size within the pixel limit (the CPU reports a larger one
 * as corrupt), and an EOI marker closing the data (a cut-short image is the CPU's to judge:
 * its decoder reports damage the hardware decoder may not). */
static bool eligible(const stoker__gdec *gd, const uint8_t *src, uint64_t n,
                     stoker__jpeg_info *info)
{
    stoker__err e = {0};
    if (n < 4 || src[n - 2] != 0xFF || src[n - 1] != 0xD9)
        return false;
    if (stoker__jpeg_info_read(src, (size_t)n, info, &e) < 0 ||
        !stoker__jpeg_hw_eligible(info, NULL))
        return false;
    const uint64_t limit = gd->plan->xform.max_pixels;
    return !limit || (uint64_t)info->width * (uint64_t)info->height <= limit;
}

bool stoker__gdec_route(stoker__gdec *gd, stoker__slot *s, uint32_t j, uint64_t seed, int64_t epoch,
                        const uint8_t *src, uint64_t n, bool checked)
{
    if (!gd)
        return false;
    gslot *g = slot_of(gd, s);
    if (g->closed || g->quota == 0 || n > UINT32_MAX)
        return false;
    /* auto: only bytes a checksum vouches for (the hardware decoder reports no damage
     * inside the compressed data, which libjpeg often does), of a data set whose JPEGs were
     * checked when packed (plan.c runs no stage under auto otherwise) */
    if (!checked && gd->plan->decoder != STOKER_DECODER_GPU)
        return false;
    stoker__jpeg_info info;
    if (!eligible(gd, src, n, &info))
        return false;
    atomic_fetch_add_explicit(&g->neligible, 1, memory_order_relaxed);
    if (!stoker__split_to_gpu(g->pick, g->count, (int32_t)j) ||
        atomic_fetch_add_explicit(&g->claimed, 1, memory_order_relaxed) >= g->quota)
        return false;
    const uint64_t at = atomic_fetch_add_explicit(&g->zused, n, memory_order_relaxed);
    if (at + n > g->zcap)
        return false; /* the staging area is full: the CPU decodes it */
    grec *r = &g->rec[j];
    memcpy(g->z + at, src, (size_t)n);
    r->zoff = at;
    r->zlen = (uint32_t)n;
    stoker__xform_geometry(&gd->plan->xform, info.width, info.height, seed, epoch, s->batch.ids[j],
                           &r->g);
    int32_t x0, x1, y0, y1;
    stoker__resample_range(&r->g.x, &x0, &x1);
    stoker__resample_range(&r->g.y, &y0, &y1);
    r->roi = (stoker__nvjpeg_roi){x0, y0, x1 - x0, y1 - y0};
    r->route = ROUTE_GPU;
    atomic_fetch_add_explicit(&g->ngpu, 1, memory_order_relaxed);
    return true;
}

void stoker__gdec_cpu_time(stoker__gdec *gd, stoker__slot *s, uint64_t ns)
{
    if (!gd)
        return;
    gslot *g = slot_of(gd, s);
    atomic_fetch_add_explicit(&g->cpu_ns, ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&g->cpu_records, 1, memory_order_relaxed);
}

static void submit(stoker__gdec *gd, stoker__slot *s);

bool stoker__gdec_hand_over(stoker__gdec *gd, stoker__slot *s)
{
    if (!gd)
        return false;
    gslot *g = slot_of(gd, s);
    if (atomic_load(&g->ngpu) > 0 && stoker__ring_failed(s) == 0) {
        submit(gd, s);
        return true;
    }
    g->closed = true; /* replacements are decoded by the finishing worker, on the CPU */
    return false;
}

/* The split's measures: the GPU's are those of the batch's run (end), or none (prepare). */
void stoker__gdec_batch_done(stoker__gdec *gd, stoker__slot *s)
{
    if (!gd)
        return;
    gslot *g = slot_of(gd, s);
    const bool measured = g->share > 0;
    const stoker__split_batch b = {.cpu_ns = atomic_load(&g->cpu_ns) / gd->plan->threads,
                                   .gpu_ns = g->gpu_ns,
                                   .cpu_records = (int64_t)atomic_load(&g->cpu_records),
                                   .gpu_records = g->ndone,
                                   .records = measured ? g->count : 0,
                                   .eligible = measured ? (int64_t)atomic_load(&g->neligible) : -1,
                                   .gpu_failed = g->failed};
    pthread_mutex_lock(&gd->mu);
    const double share = stoker__split_update(&gd->split, &b);
    const bool fallen = stoker__split_fallen_back(&gd->split);
    if (fallen && !gd->fallen)
        atomic_fetch_add(&gd->fallbacks, 1);
    gd->fallen = fallen;
    /* GPU: every eligible record, unless failures sent the GPU's share to the CPU */
    const double fixed = gd->plan->decoder == STOKER_DECODER_GPU ? 1.0 : gd->pinned;
    atomic_store(&gd->share, fixed > 0 ? (fallen ? 0.0 : fixed) : share);
    atomic_store(&gd->epart, stoker__split_eligible_part(&gd->split));
    pthread_mutex_unlock(&gd->mu);
}

void stoker__gdec_consumed(stoker__gdec *gd, uint64_t records, double waited, double ready,
                           double (*busy)(void *ctx, uint64_t *decoded), void *ctx)
{
    if (gd->plan->decoder == STOKER_DECODER_GPU || gd->pinned > 0)
        return; /* a share the split does not decide */
    const uint64_t now = stoker__now_ns();
    if (gd->period.t0_ns == 0) {
        gd->period.t0_ns = now; /* the first delivery starts the first period */
        gd->period.busy0 = busy(ctx, &gd->period.cpu0);
        gd->period.gpu0 = atomic_load(&gd->decoded);
        return;
    }
    gd->period.records += (double)records;
    gd->period.waited += waited;
    gd->period.ready += ready;
    gd->period.queued += atomic_load_explicit(&gd->qpending, memory_order_relaxed);
    if (++gd->period.n < PERIOD)
        return;
    /* each side's records as it decodes them (the CPU's by the workers' counters, the GPU's
     * as its runs end), not as batches are finished: a batch waiting for its GPU part would
     * hide the CPU's work on it */
    uint64_t made_cpu = 0;
    const double seconds = (double)(now - gd->period.t0_ns) * 1e-9, busy_s = busy(ctx, &made_cpu);
    const uint64_t made_gpu = atomic_load(&gd->decoded);
    const stoker__split_period p = {
        .seconds = seconds,
        .waited = gd->period.waited,
        .ahead = gd->period.ready / gd->period.n,
        .busy = seconds > 0 ? (busy_s - gd->period.busy0) / (seconds * gd->plan->threads) : 0,
        .gpu_queued = gd->period.queued / gd->period.n,
        .records = gd->period.records,
        .cpu_records = (double)(made_cpu - gd->period.cpu0),
        .gpu_records = (double)(made_gpu - gd->period.gpu0)};
    pthread_mutex_lock(&gd->mu);
    atomic_store(&gd->share, stoker__split_consumed(&gd->split, &p));
    pthread_mutex_unlock(&gd->mu);
    gd->period.t0_ns = now;
    gd->period.busy0 = busy_s;
    gd->period.cpu0 = made_cpu;
    gd->period.gpu0 = made_gpu;
    gd->period.waited = gd->period.ready = gd->period.queued = gd->period.records = 0;
    gd->period.n = 0;
}

/* ---- the GPU worker ---- */

/* Queues slot s (all pieces done, records routed) for the GPU worker. */
static void submit(stoker__gdec *gd, stoker__slot *s)
{
    pthread_mutex_lock(&gd->mu);
    fifo_push(&gd->queue, s);
    atomic_store_explicit(&gd->qpending, gd->queue.len, memory_order_relaxed);
    pthread_cond_signal(&gd->cv);
    pthread_mutex_unlock(&gd->mu);
}

/* The oldest batch with records for the CPU, or NULL (mu held). */
static stoker__slot *pop_retry(stoker__gdec *gd)
{
    stoker__slot *s = fifo_pop(&gd->retries);
    atomic_store(&gd->rpending, gd->retries.len);
    return s;
}

/* What the GPU worker does next, under mu; STEP_IDLE when there is nothing. */
static int next_step(stoker__gdec *gd, stoker__slot **s)
{
    const lane *old = gd->in_flight ? &gd->lanes[gd->next_lane] : NULL;
    if (old && old->finished == old->begun)
        return STEP_END; /* publishes a batch: cheap, and first */
    if (gd->in_flight < LANES && (*s = fifo_pop(&gd->queue))) {
        atomic_store_explicit(&gd->qpending, gd->queue.len, memory_order_relaxed);
        return STEP_BEGIN;
    }
    /* nothing to begin: wait for the oldest run when its end will not be signalled, or when
     * every lane is in flight */
    if (old && (!old->notify || gd->in_flight == LANES))
        return STEP_END;
    if (!old && (*s = pop_retry(gd)))
        return STEP_RETRY;
    return STEP_IDLE;
}

/* What the GPU worker does next: BEGIN a run of *s (a lane is free and a slot queued), END
 * the oldest run (it has finished, or must be waited for: every lane in flight, its end is
 * not signalled, or no signal came within a bounded wait), RETRY *s on the CPU (nothing in
 * flight: the workers may all be waiting for slots), or IDLE: nothing after a bounded wait,
 * or `halt` was set. The GPU worker sleeps while runs are on the GPU, and a batch queued
 * meanwhile is begun at once. */
static int next(stoker__gdec *gd, const atomic_bool *halt, stoker__slot **s)
{
    *s = NULL;
    int step = STEP_IDLE;
    pthread_mutex_lock(&gd->mu);
    for (int tries = 0; tries < 2 && !atomic_load(halt); tries++) {
        if ((step = next_step(gd, s)) != STEP_IDLE)
            break;
        if (tries == 0)
            stoker__timed_wait(&gd->cv, &gd->mu);
        else if (gd->in_flight > 0) /* no word from the run (a failed stream runs no host */
            step = STEP_END;        /* function): its event says how it ended */
    }
    pthread_mutex_unlock(&gd->mu);
    return atomic_load(halt) && step == STEP_BEGIN ? STEP_IDLE : step;
}

void stoker__gdec_drop_queue(stoker__gdec *gd)
{
    if (!gd)
        return;
    pthread_mutex_lock(&gd->mu);
    gd->queue.head = gd->queue.len = 0;
    atomic_store(&gd->qpending, 0);
    gd->retries.head = gd->retries.len = 0;
    atomic_store(&gd->rpending, 0);
    pthread_mutex_unlock(&gd->mu);
}

/* Queues slot s, whose run left records for the CPU, for the workers, who decode them in
 * parallel with the GPU's next batch (stoker__gdec_retry). */
static void submit_retry(stoker__gdec *gd, stoker__slot *s)
{
    pthread_mutex_lock(&gd->mu);
    fifo_push(&gd->retries, s);
    atomic_store(&gd->rpending, gd->retries.len);
    pthread_cond_signal(&gd->cv); /* the GPU worker takes it when it has nothing else */
    pthread_mutex_unlock(&gd->mu);
}

/* Slot s's run left records for the CPU: host.decode (with ctx) decodes each from its
 * staged bytes (a record corrupt there too is corrupt as always), then host.finish repairs
 * and publishes the batch. */
static void retry_batch(stoker__gdec *gd, void *ctx, stoker__slot *s)
{
    const gslot *g = slot_of(gd, s);
    s->repaired = true; /* host samples written after their pieces may have been copied */
    for (uint32_t i = 0; i < g->nretry; i++) {
        const grec *r = &g->rec[g->retry[i]];
        gd->host.decode(ctx, s, g->retry[i], g->z + r->zoff, r->zlen);
    }
    gd->host.finish(ctx, s);
}

bool stoker__gdec_retry(stoker__gdec *gd, void *ctx)
{
    if (!gd || atomic_load_explicit(&gd->rpending, memory_order_relaxed) == 0)
        return false;
    pthread_mutex_lock(&gd->mu);
    stoker__slot *s = pop_retry(gd);
    pthread_mutex_unlock(&gd->mu);
    if (!s)
        return false;
    retry_batch(gd, ctx, s);
    return true;
}

/* Room for `need` bytes of decoded regions (the lane's arena is not in use between runs). */
static int arena_reserve(lane *ln, size_t need)
{
    if (need <= ln->arena_cap)
        return 0;
    stoker__cuda_free(ln->arena);
    ln->arena = NULL;
    ln->arena_cap = 0;
    const size_t want = need + need / 4;
    const int e = stoker__cuda_malloc((void **)&ln->arena, want);
    if (e == 0)
        ln->arena_cap = want;
    return e;
}

/* Lays out the routed records' regions in the arena and queues their decode in one batch;
 * taken[k] marks those the decoder took. Returns 0, or a failure logged (nothing usable). */
static int decode_regions(stoker__gdec *gd, lane *ln, gslot *g)
{
    size_t need = 0;
    for (uint32_t k = 0; k < ln->n; k++) {
        const grec *r = &g->rec[ln->which[k]];
        ln->pitch[k] = (size_t)r->roi.w * 3;
        need += stoker__align_up(ln->pitch[k] * (size_t)r->roi.h, ARENA_ALIGN);
    }
    const int e = arena_reserve(ln, need);
    if (e != 0) {
        stoker__logf(&gd->plan->log, STOKER_LOG_ERROR,
                     "GPU decode (device %d): cudaMalloc of %zu bytes for decoded regions: %s; "
                     "the CPU decodes the batch",
                     gd->device, need, stoker__cuda_error_string(e));
        return STOKER_E_CUDA;
    }
    size_t at = 0;
    for (uint32_t k = 0; k < ln->n; k++) {
        const grec *r = &g->rec[ln->which[k]];
        ln->data[k] = g->z + r->zoff;
        ln->sizes[k] = r->zlen;
        ln->rois[k] = r->roi;
        ln->dst[k] = ln->arena + at;
        at += stoker__align_up(ln->pitch[k] * (size_t)r->roi.h, ARENA_ALIGN);
    }
    stoker__err err = {0};
    const int rc =
        stoker__nvjpeg_decode_batch(ln->nj, (int32_t)ln->n, ln->data, ln->sizes, ln->rois, ln->dst,
                                    ln->pitch, ln->stream, ln->taken, &err);
    if (rc < 0)
        stoker__logf(&gd->plan->log, STOKER_LOG_WARN,
                     "GPU decode (device %d) of %u images failed: %s; the CPU decodes them",
                     gd->device, ln->n, err.msg);
    return rc;
}

/* Queues the transform of the lane's m decoded samples into the slot's device samples. */
static int transform(stoker__gdec *gd, lane *ln, gslot *g)
{
    const size_t db = (size_t)ln->m * sizeof *ln->ddesc, pb = (size_t)ln->m * sizeof *g->dpos;
    int e = stoker__cuda_copy_to_device(ln->ddesc, ln->hdesc, db, ln->stream);
    if (e == 0)
        e = stoker__cuda_copy_to_device(g->dpos, g->hpos, pb, ln->stream);
    if (e == 0)
        e = stoker__gpu_images(ln->ddesc, (int32_t)ln->m, &gd->out, ln->stream);
    return e;
}

/* Queued after a run's work on its stream: the GPU worker, waiting on the stage's
 * condition, learns that the run can be ended without blocking in the meantime. */
static void lane_finished(void *arg)
{
    lane *ln = arg;
    stoker__gdec *gd = ln->gd;
    pthread_mutex_lock(&gd->mu);
    if (ln->finished < ln->begun) /* never ahead of the runs begun (see end) */
        ln->finished++;
    pthread_cond_signal(&gd->cv);
    pthread_mutex_unlock(&gd->mu);
}

/* The host's part of a run: decode and transform queued, the lane's event recorded. */
static void begin_on_device(stoker__gdec *gd, lane *ln, gslot *g)
{
    ln->failed = decode_regions(gd, ln, g) < 0;
    for (uint32_t k = 0; k < ln->n && !ln->failed; k++) {
        if (!ln->taken[k])
            continue;
        const grec *r = &g->rec[ln->which[k]];
        ln->hdesc[ln->m] =
            stoker__gpu_image_of(&r->g, ln->dst[k], (int64_t)ln->pitch[k], r->roi.x, r->roi.y,
                                 g->dsamples + (size_t)ln->m * gd->sample_bytes);
        g->hpos[ln->m++] = (int32_t)ln->which[k];
    }
    int e = ln->failed || ln->m == 0 ? 0 : transform(gd, ln, g);
    /* whatever was queued is waited for in end: the arena, descriptors and staging are
     * reused by the lane's next run */
    const int e2 = stoker__cuda_event_record(ln->done, ln->stream);
    if (e2 != 0)
        stoker__cuda_stream_sync(ln->stream);
    e = e != 0 ? e : e2;
    ln->notify = e == 0 && stoker__cuda_host_func(ln->stream, lane_finished, ln) == 0;
    if (e != 0) {
        stoker__logf(&gd->plan->log, STOKER_LOG_ERROR,
                     "GPU decode (device %d): %s; the CPU decodes the batch's %u images",
                     gd->device, stoker__cuda_error_string(e), ln->n);
        ln->failed = true;
    }
}

/* A run decodes slot s's routed records on the GPU into its device samples. Runs are begun
 * and ended in order, a few in flight (each in its own lane: decoder state, stream,
 * scratch), so that the host's part of one (parsing, queueing) overlaps the GPU's work on
 * the others. begin needs a free lane (next said BEGIN). A lane is begun only after its
 * previous run was waited for (end): nvJPEG's hardware decoder writes its outputs when the
 * call is made, not in the order of the stream's queued work, so the arena must not be in
 * use by anything queued. */
static void begin(stoker__gdec *gd, stoker__slot *s)
{
    lane *ln = &gd->lanes[(gd->next_lane + gd->in_flight) % LANES];
    gd->in_flight++;
    gslot *g = slot_of(gd, s);
    ln->slot = s;
    ln->t0 = stoker__now_ns();
    ln->n = ln->m = 0;
    ln->failed = false;
    ln->notify = false;
    pthread_mutex_lock(&gd->mu);
    ln->begun++;
    if (gd->emulated) /* nothing to wait for */
        ln->finished = ln->begun;
    pthread_mutex_unlock(&gd->mu);
    for (int32_t j = 0; j < g->count; j++)
        if (g->rec[j].route == ROUTE_GPU)
            ln->which[ln->n++] = (uint32_t)j;
    if (gd->emulated) {
        ln->failed = gd->emulated == STOKER__GDEC_FAIL;
        for (uint32_t k = 0; k < ln->n && gd->emulated == STOKER__GDEC_TAKE; k++)
            g->hpos[ln->m++] = (int32_t)ln->which[k]; /* "decoded": nothing written */
        return;
    }
    const int prev = stoker__cuda_use_device(gd->device);
    begin_on_device(gd, ln, g);
    stoker__cuda_restore_device(gd->device, prev);
}

/* Waits for the oldest run and keeps its outcome with its slot (the records left for the
 * CPU, its time, whether the GPU failed as a whole: a CUDA or nvJPEG failure leaves every
 * routed record, the cause logged); returns its slot. */
static stoker__slot *end(stoker__gdec *gd)
{
    lane *ln = &gd->lanes[gd->next_lane];
    gd->next_lane = (gd->next_lane + 1) % LANES;
    gd->in_flight--;
    gslot *g = slot_of(gd, ln->slot);
    if (!gd->emulated) {
        const int prev = stoker__cuda_use_device(gd->device);
        const uint64_t w0 = stoker__now_ns();
        const int e = stoker__cuda_event_sync(ln->done);
        gd->wait_ns += stoker__now_ns() - w0;
        stoker__cuda_restore_device(gd->device, prev);
        /* counted here when lane_finished was not queued, or when the stream failed: a
         * failed stream may never run it, and a lane whose count lagged would be ended only
         * by the bounded waits from then on */
        if (!ln->notify || e != 0) {
            pthread_mutex_lock(&gd->mu);
            ln->finished = ln->begun;
            pthread_mutex_unlock(&gd->mu);
        }
        if (e != 0 && !ln->failed) {
            stoker__logf(&gd->plan->log, STOKER_LOG_ERROR,
                         "GPU decode (device %d): %s; the CPU decodes the batch's %u images",
                         gd->device, stoker__cuda_error_string(e), ln->n);
            ln->failed = true;
        }
    }
    const uint32_t m = ln->failed ? 0 : ln->m;
    /* what the GPU did not make goes back to the CPU */
    g->nretry = 0;
    for (uint32_t k = 0, done = 0; k < ln->n; k++) {
        const uint32_t j = ln->which[k];
        if (done < m && g->hpos[done] == (int32_t)j) {
            done++;
            continue;
        }
        g->rec[j].route = ROUTE_CPU;
        g->retry[g->nretry++] = j;
    }
    g->ndone = m;
    g->failed = ln->failed;
    /* the GPU's time for this batch: from its start, or from the end of the run before it
     * when the two overlapped, so that overlapping runs are not counted twice */
    const uint64_t t1 = stoker__now_ns();
    const uint64_t from = ln->t0 > gd->last_end ? ln->t0 : gd->last_end;
    g->gpu_ns = t1 - from;
    gd->last_end = t1;
    atomic_fetch_add(&gd->busy_ns, g->gpu_ns);
    atomic_fetch_add(&gd->decoded, m);
    atomic_fetch_add(&gd->retried, g->nretry);
    stoker__slot *s = ln->slot;
    ln->slot = NULL;
    return s;
}

/* ---- the GPU worker ---- */

/* Ends the oldest run: what the GPU left goes to the workers, so that the GPU worker moves
 * on at once; a batch the GPU made whole is finished here. */
static void end_run(stoker__gdec *gd)
{
    stoker__slot *s = end(gd);
    gslot *g = slot_of(gd, s);
    g->closed = true;
    if (g->nretry > 0)
        submit_retry(gd, s);
    else
        gd->host.finish(gd->host_ctx, s);
}

static void *gpu_main(void *arg)
{
    stoker__gdec *gd = arg;
    const stoker__gdec_host *h = &gd->host;
    stoker__thread_name("stoker-gpu");
    while (!atomic_load_explicit(h->stop, memory_order_acquire)) {
        if (h->held(gd->host_ctx)) {
            while (gd->in_flight > 0) /* runs read slots: they end first */
                end_run(gd);
            h->park(gd->host_ctx);
            continue;
        }
        stoker__slot *s = NULL;
        switch (next(gd, h->halt, &s)) {
        case STEP_BEGIN:
            stoker__nvtx_push(STOKER__NVTX_GPU_DECODE);
            begin(gd, s); /* while the runs before it are on the GPU */
            stoker__nvtx_pop();
            break;
        case STEP_END:
            stoker__nvtx_push(STOKER__NVTX_GPU_DECODE);
            end_run(gd);
            stoker__nvtx_pop();
            break;
        case STEP_RETRY: retry_batch(gd, gd->host_ctx, s); break;
        default: break;
        }
    }
    while (gd->in_flight > 0)
        end_run(gd);
    return NULL;
}

int stoker__gdec_run(stoker__gdec *gd, const stoker__gdec_host *host, void *ctx, stoker__err *err)
{
    gd->host = *host;
    gd->host_ctx = ctx;
    const int rc = stoker__thread_start(&gd->thread, gpu_main, gd);
    if (rc != 0)
        return stoker__fail(err, -rc, "cannot start the GPU decode stage's thread: %s",
                            stoker_strerror(-rc));
    gd->started = true;
    return 0;
}

void stoker__gdec_stop(stoker__gdec *gd)
{
    if (!gd || !gd->started)
        return;
    pthread_join(gd->thread, NULL);
    gd->started = false;
}

/* ---- the H2D stage ---- */

int stoker__gdec_gather(stoker__gdec *gd, const stoker__slot *s, uint8_t *dst,
                        stoker__stream stream)
{
    const gslot *g = slot_of(gd, s);
    if (g->ndone == 0 || gd->emulated) /* the test hook's decoder makes no samples */
        return 0;
    return stoker__gpu_scatter(g->dsamples, dst, g->dpos, (int32_t)g->ndone, gd->sample_bytes,
                               stream);
}

void stoker__gdec_stats_get(stoker__gdec *gd, stoker__gdec_stats *st)
{
    st->decoded = atomic_load(&gd->decoded);
    st->retried = atomic_load(&gd->retried);
    st->fallbacks = atomic_load(&gd->fallbacks);
    st->busy_s = (double)atomic_load(&gd->busy_ns) * 1e-9;
    st->share = atomic_load(&gd->share);
    pthread_mutex_lock(&gd->mu);
    if (gd->plan->decoder == STOKER_DECODER_GPU || gd->pinned > 0)
        snprintf(st->reason, sizeof st->reason, "%s",
                 gd->fallen          ? "the GPU failed; the CPU decodes alone for a while"
                 : gd->pinned_by_env ? "a share fixed by STOKER_GPU_SHARE"
                 : gd->pinned > 0    ? "a share pinned by a test hook"
                                     : "");
    else
        stoker__split_describe(&gd->split, st->reason, sizeof st->reason);
    pthread_mutex_unlock(&gd->mu);
}
