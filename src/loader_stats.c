/* Batch views and getters, loader statistics. */
#include "loader.h"

#include <stdio.h>
#include <string.h>

static void fill_view(const stoker_batch *b, stoker_batch_view *v)
{
    const stoker_loader *l = b->loader;
    memset(v, 0, sizeof *v);
    v->struct_size = sizeof *v;
    v->dtype = l->dtype;
    v->device = b->dbuf ? l->device : -1; /* device batch: data is device memory */
    v->count = b->count;
    v->data = b->data;
    v->nbytes = b->nbytes;
    v->offsets = l->rec_size ? NULL : b->offsets;
    v->labels = b->labels;
    v->ids = b->ids;
    v->epoch = b->epoch;
    v->position = b->position;
    if (l->rec_size) {
        v->ndim = 1 + l->ndim;
        v->shape[0] = b->count;
        for (int32_t i = 0; i < l->ndim; i++)
            v->shape[1 + i] = l->shape[i];
    } else {
        v->ndim = 1;
        v->shape[0] = (int64_t)b->nbytes;
    }
    if (b->dbuf && l->rec_size) { /* GPU normalisation: the device batch's dtype and shape */
        v->dtype = b->dtype;
        v->ndim = b->ndim;
        memcpy(v->shape, b->shape, sizeof v->shape);
    }
}

int stoker_batch_get_view(const stoker_batch *b, stoker_batch_view *view)
{
    if (!b || !view || view->struct_size < sizeof(uint32_t))
        return STOKER_E_INVALID;
    stoker_batch_view full;
    fill_view(b, &full);
    const uint32_t n = view->struct_size < sizeof full ? view->struct_size : sizeof full;
    const uint32_t keep = view->struct_size;
    memcpy(view, &full, n);
    view->struct_size = keep;
    return 0;
}

int64_t stoker_batch_count(const stoker_batch *b)
{
    return b ? b->count : 0;
}

void *stoker_batch_data(const stoker_batch *b)
{
    return b ? b->data : NULL;
}

uint64_t stoker_batch_nbytes(const stoker_batch *b)
{
    return b ? b->nbytes : 0;
}

int32_t stoker_batch_dtype(const stoker_batch *b)
{
    if (!b)
        return 0;
    return b->dbuf ? b->dtype : b->loader->dtype; /* GPU normalisation changes it */
}

int32_t stoker_batch_ndim(const stoker_batch *b)
{
    if (!b)
        return 0;
    if (b->dbuf)
        return b->ndim; /* a device batch carries its own (GPU normalisation) */
    return b->loader->rec_size ? 1 + b->loader->ndim : 1;
}

const int64_t *stoker_batch_shape(const stoker_batch *b)
{
    if (!b)
        return NULL;
    /* shape[0] is kept current by the worker that lays the batch out; the rest is the
     * record shape, copied at create time. */
    return b->shape;
}

const int64_t *stoker_batch_offsets(const stoker_batch *b)
{
    return b && !b->loader->rec_size ? b->offsets : NULL;
}

const int64_t *stoker_batch_labels(const stoker_batch *b)
{
    return b ? b->labels : NULL;
}

const int64_t *stoker_batch_ids(const stoker_batch *b)
{
    return b ? b->ids : NULL;
}

int64_t stoker_batch_epoch(const stoker_batch *b)
{
    return b ? b->epoch : 0;
}

int64_t stoker_batch_position(const stoker_batch *b)
{
    return b ? b->position : 0;
}

int32_t stoker_batch_device(const stoker_batch *b)
{
    return b && b->dbuf ? b->loader->device : -1;
}

const char *stoker_backend_name(int32_t backend)
{
    switch (backend) {
    case STOKER_BACKEND_AUTO: return "auto";
    case STOKER_BACKEND_IO_URING: return "io_uring";
    case STOKER_BACKEND_PREAD: return "pread";
    case STOKER_BACKEND_HDF5: return "hdf5";
    default: return "unknown";
    }
}

#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

void stoker__count_delivery(stoker_loader *l, const stoker_batch *b, double waited, uint64_t ready)
{
    /* One writer (the consumer thread), relaxed stores, read by stats. */
    atomic_store_explicit(&l->c_wait, LOAD(l->c_wait) + waited, memory_order_relaxed);
    atomic_fetch_add_explicit(&l->c_next_calls, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&l->c_ready_sum, ready, memory_order_relaxed);
    atomic_fetch_add_explicit(&l->c_batches, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&l->c_records, (uint64_t)b->count, memory_order_relaxed);
    atomic_fetch_add_explicit(&l->c_bytes, b->nbytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&l->c_skipped, (uint64_t)b->replaced, memory_order_relaxed);
}

/* The workers' per-stage nanoseconds, as seconds. */
static void stage_stats(const stoker_loader *l, stoker_stats *s)
{
    uint64_t ns[6] = {0};
    for (uint32_t i = 0; l->workers && i < l->nworkers; i++) {
        const stoker__wstats *w = &l->workers[i].stats;
        ns[0] += LOAD(w->read_ns);
        ns[1] += LOAD(w->crc_ns);
        ns[2] += LOAD(w->process_ns);
        ns[3] += LOAD(w->decode_ns);
        ns[4] += LOAD(w->resize_ns);
        ns[5] += LOAD(w->normalize_ns);
    }
    s->read_seconds = (double)ns[0] * 1e-9;
    s->crc_seconds = (double)ns[1] * 1e-9;
    s->process_seconds = (double)ns[2] * 1e-9;
    s->decode_seconds = (double)ns[3] * 1e-9;
    s->resize_seconds = (double)ns[4] * 1e-9;
    s->normalize_seconds = (double)ns[5] * 1e-9;
}

static void fill_stats(const stoker_loader *l, stoker_stats *s)
{
    memset(s, 0, sizeof *s);
    s->struct_size = sizeof *s;
    /* Records that libhdf5 reads never go through the workers' readers: say so (only of a
     * loader that was created: a failed create may hold a half-open data set). */
    s->backend = l->threads_started && stoker__dataset_serialised(l->ds) ? STOKER_BACKEND_HDF5
                                                                         : l->backend;
    s->simd = l->simd;
    s->threads = (int32_t)l->nthreads;
    s->depth = (int32_t)l->depth;
    s->device = l->gpu ? l->device : -1;
    s->pinned_bytes = (int64_t)LOAD(l->pinned_bytes);
    s->batches = (int64_t)LOAD(l->c_batches);
    s->records = (int64_t)LOAD(l->c_records);
    s->bytes = (int64_t)LOAD(l->c_bytes);
    s->skipped = (int64_t)LOAD(l->c_skipped);
    uint64_t inflight = 0, samples = 0;
    for (uint32_t i = 0; l->workers && i < l->nworkers; i++) {
        const stoker__wstats *w = &l->workers[i].stats;
        s->records_read += (int64_t)LOAD(w->records);
        s->bytes_read += (int64_t)LOAD(w->bytes);
        s->reduced += (int64_t)LOAD(w->reduced);
        inflight += LOAD(w->inflight_sum);
        samples += LOAD(w->inflight_n);
    }
    s->seconds = stoker__now() - l->t_create;
    if (s->seconds > 0) {
        s->records_per_sec = (double)s->records / s->seconds;
        s->bytes_per_sec = (double)s->bytes / s->seconds;
    }
    s->wait_seconds = LOAD(l->c_wait);
    const uint64_t calls = LOAD(l->c_next_calls);
    s->ready_slots = calls ? (double)LOAD(l->c_ready_sum) / (double)calls : 0;
    s->reads_in_flight = samples ? (double)inflight / (double)samples : 0;
    stage_stats(l, s);
}

int stoker_loader_get_stats(const stoker_loader *l, stoker_stats *stats)
{
    if (!l || !stats || stats->struct_size < sizeof(uint32_t))
        return STOKER_E_INVALID;
    stoker_stats full;
    fill_stats(l, &full);
    const uint32_t keep = stats->struct_size;
    memcpy(stats, &full, keep < sizeof full ? keep : sizeof full);
    stats->struct_size = keep;
    return 0;
}

int stoker_loader_stats_json(const stoker_loader *l, char *buf, size_t cap, size_t *needed)
{
    if (!l || (!buf && cap))
        return STOKER_E_INVALID;
    stoker_stats s;
    fill_stats(l, &s);
    const int n =
        snprintf(buf, cap,
                 "{\"backend\":\"%s\",\"simd\":\"%s\",\"threads\":%d,\"depth\":%d,\"device\":%d,"
                 "\"batches\":%" PRId64 ",\"records\":%" PRId64 ",\"bytes\":%" PRId64
                 ",\"skipped\":%" PRId64 ",\"records_read\":%" PRId64 ",\"bytes_read\":%" PRId64
                 ",\"pinned_bytes\":%" PRId64 ",\"seconds\":%.6f,\"records_per_sec\":%.3f,"
                 "\"bytes_per_sec\":%.3f,\"wait_seconds\":%.6f,\"ready_slots\":%.3f,"
                 "\"reads_in_flight\":%.3f,\"read_seconds\":%.6f,\"crc_seconds\":%.6f,"
                 "\"process_seconds\":%.6f,\"decode_seconds\":%.6f,\"resize_seconds\":%.6f,"
                 "\"normalize_seconds\":%.6f,\"reduced\":%" PRId64 "}",
                 stoker_backend_name(s.backend), stoker_simd_name(s.simd), s.threads, s.depth,
                 s.device, s.batches, s.records, s.bytes, s.skipped, s.records_read, s.bytes_read,
                 s.pinned_bytes, s.seconds, s.records_per_sec, s.bytes_per_sec, s.wait_seconds,
                 s.ready_slots, s.reads_in_flight, s.read_seconds, s.crc_seconds, s.process_seconds,
                 s.decode_seconds, s.resize_seconds, s.normalize_seconds, s.reduced);
    if (n < 0)
        return STOKER_E_INVALID;
    if (needed)
        *needed = (size_t)n + 1;
    return (size_t)n < cap ? 0 : STOKER_E_LIMIT;
}
