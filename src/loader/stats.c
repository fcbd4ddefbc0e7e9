/* SPDX-License-Identifier: Apache-2.0 */
/* Batch views and getters, loader statistics. */
#include "loader/loader.h"

#include "loader/fields.h"
#include "loader/stats_table.h"

#include <stdarg.h>
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

/* ---- a batch's fields ---- */

int32_t stoker_batch_num_fields(const stoker_batch *b)
{
    return b && b->pf ? b->pf->n : 0;
}

/* Field i of batch b: the data field is the batch's data as the view describes it; the
 * others live in the fields region (fields.h). */
static void fill_field(const stoker_batch *b, int32_t i, stoker_field_view *v)
{
    const stoker__pfield *f = &b->pf->f[i];
    memset(v, 0, sizeof *v);
    v->struct_size = sizeof *v;
    v->kind = f->kind;
    v->name = f->name;
    v->tie = f->tie;
    v->device = b->device;
    if (f->role == STOKER__PF_DATA) {
        v->dtype = b->dtype;
        v->ndim = b->ndim;
        memcpy(v->shape, b->shape, sizeof v->shape);
        v->data = b->data;
        v->nbytes = b->nbytes;
        /* a data set without a schema keeps its varying records' offsets on the host */
        v->offsets = v->host_offsets = b->fixed ? NULL : b->offsets;
        return;
    }
    v->dtype = f->dtype;
    v->data = b->extra + (f->role == STOKER__PF_RAGGED ? b->vals_off[i] : f->off);
    if (f->role == STOKER__PF_RAGGED) {
        v->ndim = 1 + f->ndim;
        v->shape[0] = b->totals[i];
        memcpy(v->shape + 1, f->shape, (size_t)f->ndim * sizeof *f->shape);
        v->nbytes = (uint64_t)b->totals[i] * f->item;
        v->offsets = (const int64_t *)(b->extra + f->offsets_off);
        v->host_offsets =
            b->host_offsets ? b->host_offsets + (size_t)i * (b->pf->batch + 1) : v->offsets;
        return;
    }
    v->ndim = 1 + f->ndim;
    v->shape[0] = b->count;
    memcpy(v->shape + 1, f->shape, (size_t)f->ndim * sizeof *f->shape);
    v->nbytes = (uint64_t)b->count * f->item;
}

int32_t stoker_loader_num_fields(const stoker_loader *l)
{
    return l ? l->plan.fields.n : 0;
}

int stoker_loader_field(const stoker_loader *l, int32_t index, stoker_field_view *out)
{
    if (!l || !out || out->struct_size < sizeof(uint32_t) || index < 0 || index >= l->plan.fields.n)
        return STOKER_E_INVALID;
    const stoker__plan *p = &l->plan;
    /* a batch of batch_size records as the plan lays it out, without memory */
    stoker_batch b;
    memset(&b, 0, sizeof b);
    b.pf = &p->fields;
    b.count = (int64_t)p->batch;
    b.device = p->device;
    b.dtype = p->out_dtype;
    b.fixed = p->rec_size != 0;
    b.ndim = p->rec_size ? 1 + p->ndim : 1;
    b.shape[0] = p->rec_size ? b.count : -1;
    for (int32_t d = 0; p->rec_size && d < p->ndim; d++)
        b.shape[1 + d] = p->shape[d];
    if (p->gpu_normalize) {
        const stoker__norm *nm = &p->norm;
        b.ndim = 4;
        b.shape[1] = nm->nchw ? 3 : nm->h;
        b.shape[2] = nm->nchw ? nm->h : nm->w;
        b.shape[3] = nm->nchw ? nm->w : 3;
    }
    for (int32_t i = 0; i < p->fields.n; i++)
        b.totals[i] = -1;
    stoker_field_view full;
    fill_field(&b, index, &full);
    full.data = NULL;
    full.nbytes = 0;
    full.offsets = full.host_offsets = NULL;
    const uint32_t n = out->struct_size < sizeof full ? out->struct_size : sizeof full;
    const uint32_t keep = out->struct_size;
    memcpy(out, &full, n);
    out->struct_size = keep;
    return 0;
}

int stoker_batch_field(const stoker_batch *b, int32_t index, const char *name,
                       stoker_field_view *out)
{
    if (!b || !b->pf || !out || out->struct_size < sizeof(uint32_t))
        return STOKER_E_INVALID;
    const int32_t i = index >= 0 ? index : stoker__pfields_find(b->pf, name);
    if (i < 0 || i >= b->pf->n)
        return STOKER_E_INVALID;
    stoker_field_view full;
    fill_field(b, i, &full);
    const uint32_t n = out->struct_size < sizeof full ? out->struct_size : sizeof full;
    const uint32_t keep = out->struct_size;
    memcpy(out, &full, n);
    out->struct_size = keep;
    return 0;
}

/* ---- statistics ---- */

#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

static void fill_stats(const stoker_loader *l, stoker_stats *s);

/* ---- the window's snapshots ---- */

static void snap_of(const stoker_stats *st, stoker__snap *s)
{
    *s = (stoker__snap){.t = st->seconds,
                        .wait = st->wait_seconds,
                        .read = st->read_seconds,
                        .crc = st->crc_seconds,
                        .process = st->process_seconds,
                        .decode = st->decode_seconds,
                        .resize = st->resize_seconds,
                        .normalize = st->normalize_seconds,
                        .h2d = st->h2d_seconds,
                        .gdec = st->gpu_decode_seconds,
                        .fetch = st->fetch_wait_seconds,
                        .batches = (uint64_t)st->batches,
                        .records = (uint64_t)st->records,
                        .bytes = (uint64_t)st->bytes,
                        .next_calls = (uint64_t)st->next_calls,
                        .ready_sum = (uint64_t)st->ready_sum};
}

void stoker__window_init(stoker_loader *l)
{
    l->has_win_mu = pthread_mutex_init(&l->win_mu, NULL) == 0;
    memset(&l->win[0], 0, sizeof l->win[0]); /* at create: t 0, nothing counted */
    l->win_n = 1;
    l->win_head = 1;
    l->win_next = STOKER__WIN_EVERY;
}

/* Consumer thread, once every STOKER__WIN_EVERY at most: the counters now, into the ring. */
static void window_snap(stoker_loader *l)
{
    stoker_stats st;
    fill_stats(l, &st);
    stoker__snap s;
    snap_of(&st, &s);
    l->win_next = s.t + STOKER__WIN_EVERY;
    if (!l->has_win_mu)
        return;
    pthread_mutex_lock(&l->win_mu);
    l->win[l->win_head] = s;
    l->win_head = (l->win_head + 1) % STOKER__WIN_SNAPS;
    if (l->win_n < STOKER__WIN_SNAPS)
        l->win_n++;
    pthread_mutex_unlock(&l->win_mu);
}

/* The snapshot a window of `seconds` ending at `now` starts from: the newest one taken at or
 * before now - seconds, else the oldest held. */
static stoker__snap window_start(stoker_loader *l, double now, double seconds)
{
    stoker__snap out = {0};
    if (!l->has_win_mu)
        return out;
    pthread_mutex_lock(&l->win_mu);
    const uint32_t oldest = (l->win_head + STOKER__WIN_SNAPS - l->win_n) % STOKER__WIN_SNAPS;
    out = l->win[oldest];
    for (uint32_t i = 1; i < l->win_n; i++) {
        const stoker__snap *s = &l->win[(oldest + i) % STOKER__WIN_SNAPS];
        if (s->t > now - seconds)
            break;
        out = *s;
    }
    pthread_mutex_unlock(&l->win_mu);
    return out;
}

#define CONSUMER_BOUND 0.05 /* below this wait share the loader is ahead of its consumer */

/* The verdict: the consumer when it hardly waited, else the stage with the most seconds. */
static void verdict(stoker_window *w)
{
    if (w->records == 0) {
        snprintf(w->verdict, sizeof w->verdict, "none");
        snprintf(w->verdict_reason, sizeof w->verdict_reason, "nothing was delivered");
        return;
    }
    if (w->wait_share < CONSUMER_BOUND) {
        snprintf(w->verdict, sizeof w->verdict, "consumer");
        snprintf(w->verdict_reason, sizeof w->verdict_reason,
                 "the loader is ahead: the consumer waited %.1f%% of the time, "
                 "%.1f batches ready on average",
                 100 * w->wait_share, w->ready_slots);
        return;
    }
    const struct {
        const char *name, *what;
        double v;
    } st[] = {
        {"storage", "reading", w->read_seconds},
        {"crc", "CRC checks", w->crc_seconds},
        {"decode", "JPEG decoding", w->decode_seconds},
        {"transform", "resize + normalise", w->transform_seconds},
        {"host-to-device copy", "host-to-device copies", w->h2d_seconds},
        {"network", "waiting for remote blocks", w->fetch_wait_seconds},
    };
    size_t best = 0;
    double total = 0;
    for (size_t i = 0; i < sizeof st / sizeof st[0]; i++) {
        total += st[i].v;
        if (st[i].v > st[best].v)
            best = i;
    }
    snprintf(w->verdict, sizeof w->verdict, "%s", st[best].name);
    snprintf(w->verdict_reason, sizeof w->verdict_reason,
             "%s takes %.0f%% of the stages' time (%.2f s over %d threads in %.2f s) while the "
             "consumer waited %.0f%% of the time",
             st[best].what, total > 0 ? 100 * st[best].v / total : 0, st[best].v, w->threads,
             w->seconds, 100 * w->wait_share);
}

/* The figures between snapshots a and b of a loader of `threads` workers. */
static void window_of(const stoker__snap *a, const stoker__snap *b, int32_t threads,
                      stoker_window *w)
{
    memset(w, 0, sizeof *w);
    w->struct_size = sizeof *w;
    w->threads = threads;
    const double secs = b->t - a->t;
    w->seconds = secs > 0 ? secs : 0;
    w->batches = (int64_t)(b->batches - a->batches);
    w->records = (int64_t)(b->records - a->records);
    w->bytes = (int64_t)(b->bytes - a->bytes);
    w->wait_seconds = b->wait - a->wait;
    w->read_seconds = b->read - a->read;
    w->crc_seconds = b->crc - a->crc;
    w->decode_seconds = b->decode - a->decode;
    w->transform_seconds = (b->resize - a->resize) + (b->normalize - a->normalize);
    w->h2d_seconds = b->h2d - a->h2d;
    w->fetch_wait_seconds = b->fetch - a->fetch;
    const uint64_t calls = b->next_calls - a->next_calls;
    w->ready_slots = calls ? (double)(b->ready_sum - a->ready_sum) / (double)calls : 0;
    if (secs > 0) {
        const double worker_s = secs * (threads > 0 ? threads : 1);
        w->batches_per_sec = (double)w->batches / secs;
        w->records_per_sec = (double)w->records / secs;
        w->bytes_per_sec = (double)w->bytes / secs;
        w->wait_share = w->wait_seconds / secs;
        w->workers_busy =
            ((b->read - a->read) + (b->crc - a->crc) + (b->process - a->process)) / worker_s;
        w->gpu_decode_busy = (b->gdec - a->gdec) / secs;
        w->h2d_busy = w->h2d_seconds / secs;
        w->fetch_wait_share = w->fetch_wait_seconds / worker_s;
    }
    verdict(w);
}

/* Copies `full` into the caller's struct of `struct_size` bytes (older callers' smaller). */
static void copy_out(stoker_window *w, const stoker_window *full)
{
    const uint32_t keep = w->struct_size;
    memcpy(w, full, keep < sizeof *full ? keep : sizeof *full);
    w->struct_size = keep;
}

int stoker_loader_window(const stoker_loader *l, double seconds, stoker_window *w)
{
    if (!l || !w || w->struct_size < sizeof(uint32_t) || seconds != seconds)
        return STOKER_E_INVALID;
    stoker_stats st;
    fill_stats(l, &st);
    stoker__snap now, from = {0};
    snap_of(&st, &now);
    if (seconds > 0) /* the ring is written by the consumer under its lock */
        from = window_start((stoker_loader *)l, now.t, seconds);
    stoker_window full;
    window_of(&from, &now, st.threads, &full);
    copy_out(w, &full);
    return 0;
}

int stoker_stats_window(const stoker_stats *from, const stoker_stats *to, stoker_window *w)
{
    if (!from || !to || !w || w->struct_size < sizeof(uint32_t) ||
        from->struct_size < sizeof *from || to->struct_size < sizeof *to)
        return STOKER_E_INVALID;
    stoker__snap a, b;
    snap_of(from, &a);
    snap_of(to, &b);
    stoker_window full;
    window_of(&a, &b, to->threads, &full);
    copy_out(w, &full);
    return 0;
}

void stoker__count_wait(stoker_loader *l, double seconds)
{
    atomic_store_explicit(&l->c_wait, LOAD(l->c_wait) + seconds, memory_order_relaxed);
}

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
    if (stoker__now() - l->t_create >= l->win_next)
        window_snap(l);
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
    s->gpu_decode_seconds = gs->busy_s;
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
        s->cache_records = (int64_t)rs.records;
    }
    const uint64_t calls = LOAD(l->c_next_calls);
    s->next_calls = (int64_t)calls;
    s->ready_sum = (int64_t)LOAD(l->c_ready_sum);
    s->ready_slots = calls ? (double)s->ready_sum / (double)calls : 0;
    s->h2d_seconds = stoker__h2d_busy_seconds(l->h2d);
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

/* ---- the table of statistics ---- */

typedef struct stat_desc {
    const char *name;
    int32_t type, values;
    uint32_t offset, size;
    int decimals; /* of a double in the JSON */
    const char *doc;
} stat_desc;

#define I32 STOKER_STAT_INT32
#define I64 STOKER_STAT_INT64
#define F64 STOKER_STAT_DOUBLE
#define TEXT STOKER_STAT_TEXT
#define CTYPE_I32 int32_t
#define CTYPE_I64 int64_t
#define CTYPE_F64 double
#define CTYPE_TEXT char *

/* Each row's field exists in stoker_stats with the row's type (a char array for TEXT). */
#define CHECK(name, type, values, decimals, doc)                                                   \
    _Static_assert(_Generic(((stoker_stats *)0)->name, CTYPE_##type : 1, default : 0),             \
                   "stoker_stats." #name " is not of its row's type");
STOKER__STATS_FIELDS(CHECK)

#define ROW(name, type, values, decimals, doc)                                                     \
    {#name,                                                                                        \
     type,                                                                                         \
     values,                                                                                       \
     (uint32_t)offsetof(stoker_stats, name),                                                       \
     (uint32_t)sizeof(((stoker_stats *)0)->name),                                                  \
     decimals,                                                                                     \
     doc},
static const stat_desc STATS[] = {STOKER__STATS_FIELDS(ROW)};
#define NSTATS (sizeof STATS / sizeof STATS[0])

int stoker_stats_field(int32_t index, const char **name, int32_t *type, int32_t *values,
                       uint32_t *offset, uint32_t *size, const char **doc)
{
    if (index < 0 || (size_t)index >= NSTATS)
        return STOKER_E_INVALID;
    const stat_desc *d = &STATS[index];
    if (name)
        *name = d->name;
    if (type)
        *type = d->type;
    if (values)
        *values = d->values;
    if (offset)
        *offset = d->offset;
    if (size)
        *size = d->size;
    if (doc)
        *doc = d->doc;
    return 0;
}

/* Appends to buf (capacity cap) at *n, counting what does not fit. */
static void put(char *buf, size_t cap, size_t *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t cap, size_t *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const int k = *n < cap ? vsnprintf(buf + *n, cap - *n, fmt, ap) : vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (k > 0)
        *n += (size_t)k;
}

int stoker_stats_json(const stoker_stats *s, char *buf, size_t cap, size_t *needed)
{
    if (!s || (!buf && cap) || s->struct_size < sizeof *s)
        return STOKER_E_INVALID;
    size_t n = 0;
    for (size_t i = 0; i < NSTATS; i++) {
        const stat_desc *d = &STATS[i];
        const char *at = (const char *)s + d->offset;
        put(buf, cap, &n, "%s\"%s\":", i ? "," : "{", d->name);
        if (d->type == I32) {
            int32_t v;
            memcpy(&v, at, sizeof v);
            const char *named = d->values ? stoker_enum_name((stoker_enum)d->values, v) : NULL;
            if (d->values)
                put(buf, cap, &n, "\"%s\"", named ? named : "unknown");
            else
                put(buf, cap, &n, "%" PRId32, v);
        } else if (d->type == I64) {
            int64_t v;
            memcpy(&v, at, sizeof v);
            put(buf, cap, &n, "%" PRId64, v);
        } else if (d->type == F64) {
            double v;
            memcpy(&v, at, sizeof v);
            put(buf, cap, &n, "%.*f", d->decimals, v);
        } else {
            char text[6 * 256 + 1], field[256];
            const size_t len = d->size < sizeof field ? d->size : sizeof field;
            memcpy(field, at, len);
            field[len - 1] = '\0';
            json_text(field, text, sizeof text);
            put(buf, cap, &n, "\"%s\"", text);
        }
    }
    put(buf, cap, &n, "}");
    if (needed)
        *needed = n + 1;
    return n < cap ? 0 : STOKER_E_LIMIT;
}

int stoker_loader_stats_json(const stoker_loader *l, char *buf, size_t cap, size_t *needed)
{
    if (!l || (!buf && cap))
        return STOKER_E_INVALID;
    stoker_stats s;
    fill_stats(l, &s);
    return stoker_stats_json(&s, buf, cap, needed);
}
