/* SPDX-License-Identifier: Apache-2.0 */
/* The ring of batch slots (ring.h). Memory is allocated once at create; a slot grows only
 * when a batch of records that vary in size needs more than it holds (rare). */
#include "loader/ring.h"

#include "loader/fields.h"
#include "loader/memory.h"

#include <string.h>

#define PAGE 4096u
#define FIRST_CAP_MAX (UINT64_C(64) << 20)

static void timed_wait(stoker__slot *s)
{
    stoker__timed_wait(&s->cond, &s->mu);
}

static bool halted(const atomic_bool *halt)
{
    return halt && atomic_load_explicit(halt, memory_order_acquire);
}

/* ---- memory ---- */

/* Plain slot memory: page-aligned, every page touched now, so that first-touch faults
 * happen at create and not while the first batches are timed. */
static void *plain_alloc(void *ctx, size_t size, bool *pinned)
{
    (void)ctx;
    *pinned = false;
    const size_t n = stoker__align_up(size ? size : 1, PAGE);
    uint8_t *p = stoker__aligned_alloc(PAGE, n);
    if (p)
        memset(p, 0, n);
    return p;
}

static void plain_free(void *ctx, void *p, size_t size, bool pinned)
{
    (void)ctx;
    (void)size;
    (void)pinned;
    stoker__free(p);
}

int stoker__ring_reserve(stoker__ring *r, stoker__slot *s, size_t size)
{
    if (size <= s->cap && s->batch.data)
        return 0;
    bool pinned = false;
    uint8_t *p = r->mem.alloc(r->mem.ctx, size, &pinned);
    if (!p)
        return -ENOMEM;
    if (s->batch.data)
        r->mem.free(r->mem.ctx, s->batch.data, s->cap, s->pinned);
    s->batch.data = p;
    s->cap = size;
    s->pinned = pinned;
    return 0;
}

int stoker__ring_reserve_extra(stoker__ring *r, stoker__slot *s, size_t size)
{
    if (size <= s->extra_cap)
        return 0;
    const stoker__pfields *pf = s->batch.pf;
    bool pinned = false;
    uint8_t *p = r->mem.alloc(r->mem.ctx, size, &pinned);
    if (!p)
        return -ENOMEM;
    /* the fixed part holds what prepare wrote already (the labels); values come later */
    memcpy(p, s->batch.extra, pf->cap);
    r->mem.free(r->mem.ctx, s->batch.extra, s->extra_cap, s->extra_pinned);
    s->batch.extra = p;
    s->extra_cap = size;
    s->extra_pinned = pinned;
    if (pf->label >= 0)
        s->batch.labels = (int64_t *)(p + pf->f[pf->label].off);
    return 0;
}

/* First capacity of a slot: a full batch of fixed-size records; for records that vary, a
 * full batch of the largest record up to 64 MiB (or a single largest record when that
 * alone is more). */
static size_t first_capacity(const stoker__ring_shape *sh)
{
    uint64_t full;
    if (sh->rec_size)
        return stoker__mul_ovf(sh->rec_size, sh->batch, &full) ? SIZE_MAX : (size_t)full;
    if (stoker__mul_ovf(sh->max_record, sh->batch, &full) || full > FIRST_CAP_MAX)
        full = sh->max_record > FIRST_CAP_MAX ? sh->max_record : FIRST_CAP_MAX;
    return (size_t)full;
}

static int slot_init(stoker__ring *r, const stoker__ring_shape *sh, stoker__slot *s, uint64_t i,
                     size_t cap)
{
    const uint64_t b = sh->batch;
    s->ring = r;
    s->seq = i;
    s->state = SLOT_FREE;
    atomic_init(&s->pending, 0);
    s->batch.slot = s;
    s->batch.device = -1;
    s->batch.fixed = sh->rec_size != 0;
    s->batch.dtype = sh->dtype;
    s->batch.ndim = sh->rec_size ? 1 + sh->ndim : 1;
    for (int32_t d = 0; sh->rec_size && d < sh->ndim; d++)
        s->batch.shape[1 + d] = sh->shape[d];
    const stoker__pfields *pf = sh->fields;
    s->batch.pf = pf;
    s->batch.ids = stoker__calloc(b, sizeof(int64_t));
    s->batch.offsets = stoker__calloc(b + 1, sizeof(int64_t));
    s->locs = stoker__calloc(b, sizeof *s->locs);
    s->marks = stoker__calloc(b, 1);
    s->piece_ok = stoker__calloc(sh->pieces, sizeof *s->piece_ok);
    if (!s->batch.ids || !s->batch.offsets || !s->locs || !s->marks || !s->piece_ok)
        return -ENOMEM;
    if (pf && pf->first > 0) {
        /* the fields region: pinned like data, copied with it */
        s->batch.extra = r->mem.alloc(r->mem.ctx, pf->first, &s->extra_pinned);
        if (!s->batch.extra)
            return -ENOMEM;
        s->extra_cap = pf->first;
        memset(s->batch.extra, 0, pf->first);
    }
    if (pf && pf->raggeds > 0 &&
        (!(s->rows = stoker__calloc((size_t)pf->n * b, sizeof *s->rows)) ||
         !(s->place = stoker__calloc((size_t)pf->n * (b + 1), sizeof *s->place))))
        return -ENOMEM;
    /* the batch's labels: the label field's values in the region when it is delivered (so
     * they reach the device with the batch), else host memory of their own */
    const int32_t li = pf ? pf->label : -1;
    s->batch.labels =
        li >= 0 ? (int64_t *)(s->batch.extra + pf->f[li].off) : stoker__calloc(b, sizeof(int64_t));
    if (!s->batch.labels)
        return -ENOMEM;
    if (cap == SIZE_MAX || stoker__ring_reserve(r, s, cap) < 0)
        return -ENOMEM;
    return 0;
}

int stoker__ring_create(stoker__ring *r, const stoker__ring_shape *sh, const stoker__slot_mem *mem,
                        const char *path, stoker__err *err)
{
    memset(r, 0, sizeof *r);
    r->depth = sh->depth;
    r->pieces = sh->pieces;
    r->mem = mem ? *mem : (stoker__slot_mem){plain_alloc, plain_free, NULL, NULL};
    r->slots = stoker__calloc(sh->depth, sizeof *r->slots);
    STOKER_RETURN_IF(!r->slots, err, -ENOMEM, "%s: out of memory for %u batch slots", path,
                     sh->depth);
    const size_t cap = first_capacity(sh);
    for (uint32_t i = 0; i < sh->depth; i++) {
        stoker__slot *s = &r->slots[i];
        /* Mutexes first, so that destroy can always tear down every slot. */
        STOKER_RETURN_IF(pthread_mutex_init(&s->mu, NULL) != 0, err, -ENOMEM,
                         "cannot create a slot lock");
        if (pthread_cond_init(&s->cond, NULL) != 0) {
            pthread_mutex_destroy(&s->mu);
            return stoker__fail(err, -ENOMEM, "cannot create a slot condition");
        }
        r->nslots = i + 1;
        STOKER_RETURN_IF(slot_init(r, sh, s, i, cap) < 0, err, -ENOMEM,
                         "%s: out of memory for batch slot %u (%zu bytes)", path, i, cap);
    }
    return 0;
}

void stoker__ring_destroy(stoker__ring *r)
{
    if (!r->slots)
        return;
    for (uint32_t i = 0; i < r->nslots; i++) {
        stoker__slot *s = &r->slots[i];
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cond);
        if (s->detached) { /* batch.data and batch.extra are a stoker_memory's */
            s->batch.data = s->fresh_data;
            s->batch.extra = s->fresh_extra;
            s->pinned = s->fresh_pinned;
            s->extra_pinned = s->fresh_extra_pinned;
        }
        stoker__free(s->batch.ids);
        if (!s->batch.pf || s->batch.pf->label < 0)
            stoker__free(s->batch.labels);
        if (s->batch.extra)
            r->mem.free(r->mem.ctx, s->batch.extra, s->extra_cap, s->extra_pinned);
        stoker__free(s->rows);
        stoker__free(s->place);
        stoker__free(s->batch.offsets);
        stoker__free(s->locs);
        stoker__free(s->marks);
        stoker__free((void *)s->piece_ok);
        if (s->batch.data)
            r->mem.free(r->mem.ctx, s->batch.data, s->cap, s->pinned);
    }
    stoker__free(r->slots);
    r->slots = NULL;
}

/* ---- workers ---- */

int stoker__ring_claim(stoker__ring *r, uint64_t seq, const atomic_bool *halt,
                       void (*prepare)(void *ctx, stoker__slot *s, uint64_t seq), void *ctx)
{
    stoker__slot *s = stoker__ring_slot(r, seq);
    pthread_mutex_lock(&s->mu);
    while (!halted(halt) &&
           !(s->seq == seq && (s->state == SLOT_FREE || s->state == SLOT_PREPARED)))
        timed_wait(s);
    int rc = -1;
    if (!halted(halt)) {
        if (s->state == SLOT_FREE) {
            for (uint32_t p = 0; p < r->pieces; p++) /* published by the mutex */
                atomic_store_explicit(&s->piece_ok[p], 0, memory_order_relaxed);
            s->repaired = false;
            s->err_code = 0;
            atomic_store_explicit(&s->failed, 0, memory_order_relaxed);
            s->err_msg[0] = '\0';
            prepare(ctx, s, seq);
            atomic_store_explicit(&s->pending, r->pieces, memory_order_relaxed);
            s->state = SLOT_PREPARED;
            pthread_cond_broadcast(&s->cond);
        }
        rc = s->err_code != 0;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void stoker__ring_fail(stoker__slot *s, const stoker__err *e)
{
    pthread_mutex_lock(&s->mu);
    if (s->err_code == 0) {
        s->err_code = e->code;
        memcpy(s->err_msg, e->msg, sizeof s->err_msg);
        atomic_store_explicit(&s->failed, 1, memory_order_release);
    }
    pthread_mutex_unlock(&s->mu);
}

int stoker__ring_failed(stoker__slot *s)
{
    pthread_mutex_lock(&s->mu);
    const int rc = s->err_code;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* Broadcasts under the mutex, so that a thread about to wait sees what was set before the
 * call and never sleeps through it. */
static void wake(stoker__slot *s)
{
    pthread_mutex_lock(&s->mu);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
}

bool stoker__ring_piece_done(stoker__ring *r, stoker__slot *s, uint32_t piece)
{
    atomic_store_explicit(&s->piece_ok[piece], 1, memory_order_release);
    if (atomic_fetch_sub_explicit(&s->pending, 1, memory_order_acq_rel) != 1) {
        if (r->watch_pieces) /* a taker may copy this piece now */
            wake(s);
        return false;
    }
    return true;
}

void stoker__ring_publish(stoker__ring *r, stoker__slot *s)
{
    pthread_mutex_lock(&s->mu);
    s->state = SLOT_READY;
    atomic_fetch_add_explicit(&r->ready, 1, memory_order_relaxed);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
}

/* ---- takers ---- */

int stoker__ring_take(stoker__ring *r, uint64_t seq, const atomic_bool *halt, bool held_fails,
                      double until, bool (*progress)(void *ctx, stoker__slot *s), void *ctx,
                      stoker__slot **out, double *waited, int *found)
{
    stoker__slot *s = stoker__ring_slot(r, seq);
    const double t0 = stoker__now();
    pthread_mutex_lock(&s->mu);
    if (held_fails && s->state == SLOT_OUT) {
        pthread_mutex_unlock(&s->mu);
        return STOKER_E_STATE;
    }
    bool blocked = false; /* a batch found ready was not waited for, whatever the lock cost */
    while (!(s->seq == seq && s->state == SLOT_READY)) {
        blocked = true;
        if (halted(halt)) {
            pthread_mutex_unlock(&s->mu);
            return 1;
        }
        if (until > 0 && stoker__now() >= until) {
            pthread_mutex_unlock(&s->mu);
            return 2;
        }
        if (progress && s->seq == seq && s->state == SLOT_PREPARED && s->err_code == 0) {
            /* PREPARED for seq stays so until this taker takes it: the layout is stable */
            pthread_mutex_unlock(&s->mu);
            const bool moved = progress(ctx, s);
            pthread_mutex_lock(&s->mu);
            if (moved)
                continue; /* more may be done meanwhile */
        }
        timed_wait(s);
    }
    const int ready = atomic_fetch_sub_explicit(&r->ready, 1, memory_order_relaxed);
    s->state = SLOT_OUT;
    atomic_store_explicit(&r->taken, (unsigned)(s - r->slots), memory_order_relaxed);
    pthread_mutex_unlock(&s->mu);
    if (waited)
        *waited = blocked ? stoker__now() - t0 : 0;
    if (found)
        *found = ready;
    *out = s;
    return 0;
}

int stoker__ring_give_back(stoker__ring *r, stoker__slot *s)
{
    pthread_mutex_lock(&s->mu);
    if (s->state != SLOT_OUT) {
        pthread_mutex_unlock(&s->mu);
        return STOKER_E_STATE;
    }
    if (s->detached) { /* the batch's memory is a stoker_memory's now: the fresh one */
        s->detached = false;
        s->batch.data = s->fresh_data;
        s->pinned = s->fresh_pinned;
        s->batch.extra = s->fresh_extra;
        s->extra_pinned = s->fresh_extra_pinned;
        s->fresh_data = s->fresh_extra = NULL;
        const stoker__pfields *pf = s->batch.pf;
        if (pf && pf->label >= 0)
            s->batch.labels = (int64_t *)(s->batch.extra + pf->f[pf->label].off);
    }
    s->state = SLOT_FREE;
    s->seq += r->depth;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

int stoker__ring_detach(stoker__ring *r, stoker__slot *s, stoker_memory *m)
{
    pthread_mutex_lock(&s->mu);
    const uint64_t seq = s->seq;
    const bool out = s->state == SLOT_OUT && !s->detached;
    pthread_mutex_unlock(&s->mu);
    if (!out)
        return STOKER_E_STATE;
    /* While OUT the slot's contents are the consumer's: cap and extra_cap stay as read. The
     * memory is allocated without the slot's lock (the pinned allocator may log). */
    const size_t cap = s->cap, extra_cap = s->extra_cap;
    const bool has_extra = s->batch.extra != NULL;
    bool data_pinned = false, extra_pinned = false;
    uint8_t *data = r->mem.alloc(r->mem.ctx, cap, &data_pinned), *extra = NULL;
    if (data && has_extra)
        extra = r->mem.alloc(r->mem.ctx, extra_cap, &extra_pinned);
    if (!data || (has_extra && !extra)) {
        if (data)
            r->mem.free(r->mem.ctx, data, cap, data_pinned);
        return -ENOMEM;
    }
    pthread_mutex_lock(&s->mu);
    const bool same = s->state == SLOT_OUT && !s->detached && s->seq == seq;
    if (same) {
        m->device = -1;
        m->part[0] = (stoker__mem_part){s->batch.data, cap, s->pinned};
        m->part[1] = (stoker__mem_part){s->batch.extra, extra_cap, s->extra_pinned};
        s->detached = true;
        s->fresh_data = data;
        s->fresh_pinned = data_pinned;
        s->fresh_extra = extra;
        s->fresh_extra_pinned = extra_pinned;
    }
    pthread_mutex_unlock(&s->mu);
    if (!same) { /* given back meanwhile (from another thread) */
        r->mem.free(r->mem.ctx, data, cap, data_pinned);
        if (extra)
            r->mem.free(r->mem.ctx, extra, extra_cap, extra_pinned);
        return STOKER_E_STATE;
    }
    for (int i = 0; r->mem.disown && i < 2; i++)
        if (m->part[i].p)
            r->mem.disown(r->mem.ctx, m->part[i].size, m->part[i].pinned);
    return 0;
}

/* ---- control ---- */

void stoker__ring_wake_all(stoker__ring *r)
{
    for (uint32_t i = 0; i < r->depth; i++)
        wake(&r->slots[i]);
}

void stoker__ring_reset(stoker__ring *r)
{
    r->first = (atomic_load_explicit(&r->taken, memory_order_relaxed) + 1) % r->depth;
    for (uint32_t i = 0; i < r->depth; i++) {
        stoker__slot *s = &r->slots[i];
        const uint64_t seq = (i + r->depth - r->first) % r->depth; /* its batch from now */
        pthread_mutex_lock(&s->mu);
        /* A batch still held stays OUT, its memory intact: give_back then frees the slot
         * for batch seq (seq - depth + depth, modulo 2^64), which waits for it meanwhile. */
        s->seq = s->state == SLOT_OUT ? seq - r->depth : seq;
        if (s->state != SLOT_OUT)
            s->state = SLOT_FREE;
        s->err_code = 0;
        atomic_store(&s->failed, 0);
        atomic_store(&s->pending, 0);
        pthread_mutex_unlock(&s->mu);
    }
    atomic_store(&r->ready, 0);
}
