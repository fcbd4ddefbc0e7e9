/* Batch views and getters, loader statistics. */
#include "loader/loader.h"

#include <stdio.h>
#include <string.h>

static void fill_view(const stoker_batch *b, stoker_batch_view *v)
{
    memset(v, 0, sizeof *v);
    v->struct_size = sizeof *v;
    v->dtype = b->dtype;
    v->device = b->device;
    v->count = b->count;
    v->data = b->data;
    v->nbytes = b->nbytes;
    v->offsets = b->fixed ? NULL : b->offsets;
    v->labels = b->labels;
    v->ids = b->ids;
    v->epoch = b->epoch;
    v->position = b->position;
    v->ndim = b->ndim;
    memcpy(v->shape, b->shape, sizeof v->shape);
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
    return b ? b->dtype : 0;
}

int32_t stoker_batch_ndim(const stoker_batch *b)
{
    return b ? b->ndim : 0;
}

const int64_t *stoker_batch_shape(const stoker_batch *b)
{
    return b ? b->shape : NULL;
}

const int64_t *stoker_batch_offsets(const stoker_batch *b)
{
    return b && !b->fixed ? b->offsets : NULL;
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
    return b ? b->device : -1;
}

/* ---- statistics ---- */

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

/* Who decoded what, and how busy each side was (the workers: their time in the reader, the
 * checks and the process step over their share of the loader's life). */
static void fill_decoder(const stoker_loader *l, const stoker__pool_stats *ps,
                         const stoker__gdec_stats *gs, stoker_stats *s)
{
    const stoker__plan *p = &l->plan;
    s->decoder = p->image && l->gdec ? p->decoder : STOKER_DECODER_CPU;
    s->cpu_decoded = p->image ? (int64_t)ps->decoded : 0;
    if (s->seconds > 0 && p->threads > 0)
        s->cpu_busy = (ps->read_s + ps->crc_s + ps->process_s) / (s->seconds * p->threads);
    snprintf(s->decoder_note, sizeof s->decoder_note, "%s", p->decoder_note);
    if (!l->gdec)
        return;
    s->gpu_decoded = (int64_t)gs->decoded;
    s->gpu_retried = (int64_t)gs->retried;
    s->gpu_fallbacks = (int64_t)gs->fallbacks;
    s->gpu_share = gs->share;
    s->gpu_busy = s->seconds > 0 ? gs->busy_s / s->seconds : 0;
    if (!p->decoder_note[0]) /* the split's last decision and why */
        snprintf(s->decoder_note, sizeof s->decoder_note, "%s", gs->reason);
}

/* A note as the inside of a JSON string: quotes, backslashes and control characters
 * escaped. */
static void json_text(const char *in, char *out, size_t cap)
{
    size_t k = 0;
    for (const unsigned char *c = (const unsigned char *)in; *c && k + 7 < cap; c++) {
        if (*c == '"' || *c == '\\')
            k += (size_t)snprintf(out + k, cap - k, "\\%c", *c);
        else if (*c < 0x20)
            k += (size_t)snprintf(out + k, cap - k, "\\u%04x", *c);
        else
            out[k++] = (char)*c;
    }
    out[k] = '\0';
}

static void fill_stats(const stoker_loader *l, stoker_stats *s)
{
    memset(s, 0, sizeof *s);
    s->struct_size = sizeof *s;
    /* Records that libhdf5 or the remote source reads never go through the workers'
     * readers: say so (only of a loader that was created: a failed create may hold a
     * half-open data set). */
    const int32_t own = l->running ? stoker__dataset_backend(l->ds) : 0;
    s->backend = own ? own : l->plan.backend;
    s->simd = l->plan.simd;
    s->threads = (int32_t)l->plan.threads;
    s->depth = (int32_t)l->plan.depth;
    s->device = l->h2d ? l->plan.device : -1;
    s->pinned_bytes = stoker__h2d_pinned_bytes(l->h2d);
    s->batches = (int64_t)LOAD(l->c_batches);
    s->records = (int64_t)LOAD(l->c_records);
    s->bytes = (int64_t)LOAD(l->c_bytes);
    s->skipped = (int64_t)LOAD(l->c_skipped);
    /* The GPU stage's counters before the workers': a record reaches the GPU stage only
     * once its batch's pieces are read and counted, so that a snapshot never shows more
     * records retried or decoded on the GPU than read */
    stoker__gdec_stats gs = {0};
    if (l->gdec)
        stoker__gdec_stats_get(l->gdec, &gs);
    stoker__pool_stats ps;
    stoker__pool_stats_get(&l->pool, &ps);
    s->records_read = (int64_t)ps.records;
    s->bytes_read = (int64_t)ps.bytes;
    s->reduced = (int64_t)ps.reduced;
    s->full_checks = (int64_t)ps.whole;
    s->dropped_bytes = (int64_t)ps.dropped;
    s->reads_in_flight = ps.reads_in_flight;
    s->read_seconds = ps.read_s;
    s->crc_seconds = ps.crc_s;
    s->process_seconds = ps.process_s;
    s->decode_seconds = ps.decode_s;
    s->resize_seconds = ps.resize_s;
    s->normalize_seconds = ps.normalize_s;
    s->seconds = stoker__now() - l->t_create;
    if (s->seconds > 0) {
        s->records_per_sec = (double)s->records / s->seconds;
        s->bytes_per_sec = (double)s->bytes / s->seconds;
    }
    s->wait_seconds = LOAD(l->c_wait);
    stoker__remote_stats rs;
    if (stoker__dataset_remote_stats(l->ds, &rs)) {
        s->remote_bytes = (int64_t)rs.bytes_fetched;
        s->remote_requests = (int64_t)rs.requests;
        s->remote_retries = (int64_t)rs.retries;
        s->cache_hits = (int64_t)rs.cache_hits;
        s->cache_misses = (int64_t)rs.cache_misses;
        s->cache_bytes = (int64_t)rs.cache_bytes;
        s->cache_limit = (int64_t)rs.cache_limit;
        s->fetch_wait_seconds = (double)rs.wait_ns * 1e-9;
    }
    const uint64_t calls = LOAD(l->c_next_calls);
    s->ready_slots = calls ? (double)LOAD(l->c_ready_sum) / (double)calls : 0;
    fill_decoder(l, &ps, &gs, s);
    snprintf(s->threads_note, sizeof s->threads_note, "%s", l->plan.threads_note);
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
    char note[6 * sizeof s.decoder_note + 1], tnote[6 * sizeof s.threads_note + 1];
    json_text(s.decoder_note, note, sizeof note);
    json_text(s.threads_note, tnote, sizeof tnote);
    const int n =
        snprintf(buf, cap,
                 "{\"backend\":\"%s\",\"simd\":\"%s\",\"threads\":%d,\"depth\":%d,\"device\":%d,"
                 "\"batches\":%" PRId64 ",\"records\":%" PRId64 ",\"bytes\":%" PRId64
                 ",\"skipped\":%" PRId64 ",\"records_read\":%" PRId64 ",\"bytes_read\":%" PRId64
                 ",\"pinned_bytes\":%" PRId64 ",\"seconds\":%.6f,\"records_per_sec\":%.3f,"
                 "\"bytes_per_sec\":%.3f,\"wait_seconds\":%.6f,\"ready_slots\":%.3f,"
                 "\"reads_in_flight\":%.3f,\"read_seconds\":%.6f,\"crc_seconds\":%.6f,"
                 "\"process_seconds\":%.6f,\"decode_seconds\":%.6f,\"resize_seconds\":%.6f,"
                 "\"normalize_seconds\":%.6f,\"reduced\":%" PRId64 ",\"dropped_bytes\":%" PRId64
                 ",\"decoder\":\"%s\",\"cpu_decoded\":%" PRId64 ",\"gpu_decoded\":%" PRId64
                 ",\"gpu_retried\":%" PRId64 ",\"gpu_fallbacks\":%" PRId64
                 ",\"gpu_share\":%.4f,\"cpu_busy\":%.4f,\"gpu_busy\":%.4f,\"decoder_note\":\"%s\","
                 "\"full_checks\":%" PRId64 ",\"remote_bytes\":%" PRId64
                 ",\"remote_requests\":%" PRId64 ",\"remote_retries\":%" PRId64
                 ",\"cache_hits\":%" PRId64 ",\"cache_misses\":%" PRId64
                 ",\"cache_bytes\":%" PRId64 ",\"cache_limit\":%" PRId64
                 ",\"fetch_wait_seconds\":%.6f,\"threads_note\":\"%s\"}",
                 stoker_backend_name(s.backend), stoker_simd_name(s.simd), s.threads, s.depth,
                 s.device, s.batches, s.records, s.bytes, s.skipped, s.records_read, s.bytes_read,
                 s.pinned_bytes, s.seconds, s.records_per_sec, s.bytes_per_sec, s.wait_seconds,
                 s.ready_slots, s.reads_in_flight, s.read_seconds, s.crc_seconds, s.process_seconds,
                 s.decode_seconds, s.resize_seconds, s.normalize_seconds, s.reduced,
                 s.dropped_bytes, stoker_enum_name(STOKER_ENUM_DECODER, s.decoder), s.cpu_decoded,
                 s.gpu_decoded, s.gpu_retried, s.gpu_fallbacks, s.gpu_share, s.cpu_busy, s.gpu_busy,
                 note, s.full_checks, s.remote_bytes, s.remote_requests, s.remote_retries,
                 s.cache_hits, s.cache_misses, s.cache_bytes, s.cache_limit,
                 s.fetch_wait_seconds, tnote);
    if (n < 0)
        return STOKER_E_INVALID;
    if (needed)
        *needed = (size_t)n + 1;
    return (size_t)n < cap ? 0 : STOKER_E_LIMIT;
}
