/* The worker stage: prepare a batch's layout, read its records through the worker's own
 * reader, verify each record's CRC32C in the thread that read it, run the per-record
 * process step, and publish the batch when its last piece is done. */
#include "loader.h"

#include <stdio.h>
#include <string.h>

#define DIRECT_ALIGN 4096u
#define MAX_COALESCE (UINT64_C(64) << 20) /* bytes one coalesced read may cover */
#define CHUNK_READ UINT32_MAX /* req_first of a read a fetched record's plan asked for */

/* Adds to a per-worker counter. Single writer (the worker), so a relaxed load and store
 * suffice and no locked instruction is spent; stats read it with relaxed loads. */
static inline void bump(atomic_uint_fast64_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

/* Stage clock (vDSO, ~20 ns): read per round, per completed read and per processed record,
 * never per raw record. */
static inline uint64_t clock_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void stoker__seq_position(const stoker_loader *l, uint64_t seq, uint64_t *epoch, uint64_t *pos)
{
    const uint64_t nb = l->smp.nbatches;
    const uint64_t abs = l->base_pos + seq;
    *epoch = l->base_epoch + abs / nb;
    *pos = abs % nb;
}

/* Records the batch's first failure (the message is in w->err). */
static void slot_fail(stoker__slot *s, const stoker__err *e)
{
    pthread_mutex_lock(&s->mu);
    if (s->err_code == 0) {
        s->err_code = e->code;
        memcpy(s->err_msg, e->msg, sizeof s->err_msg);
    }
    pthread_mutex_unlock(&s->mu);
}

static int slot_error(const stoker__slot *s)
{
    pthread_mutex_lock((pthread_mutex_t *)&s->mu);
    const int rc = s->err_code;
    pthread_mutex_unlock((pthread_mutex_t *)&s->mu);
    return rc;
}

/* Byte offsets of every record of the batch in the slot, growing the slot if needed. Only
 * called while the caller owns the slot's contents (prepare, or the last piece's repair). */
static int layout(stoker_loader *l, stoker__worker *w, stoker__slot *s)
{
    stoker_batch *b = &s->batch;
    const uint64_t count = (uint64_t)b->count;
    uint64_t total = 0;
    b->offsets[0] = 0;
    for (uint64_t j = 0; j < count; j++) {
        const uint64_t len = l->rec_size ? l->rec_size : s->locs[j].length;
        if (stoker__add_ovf(total, len, &total) || total > INT64_MAX)
            return stoker__fail(&w->err, STOKER_E_LIMIT,
                                "%s: batch of %" PRIu64 " records is too large",
                                stoker__dataset_path(l->ds), count);
        b->offsets[j + 1] = (int64_t)total;
    }
    b->nbytes = total;
    if (stoker__slot_reserve(s, total) < 0)
        return stoker__fail(&w->err, -ENOMEM,
                            "%s: out of memory growing a batch slot to %" PRIu64 " bytes",
                            stoker__dataset_path(l->ds), total);
    b->shape[0] = l->rec_size ? b->count : (int64_t)total;
    return 0;
}

static int locate(stoker_loader *l, stoker__worker *w, stoker__slot *s, uint64_t j)
{
    const int rc = stoker__dataset_locate(l->ds, s->batch.ids[j], &s->locs[j]);
    if (rc < 0)
        return stoker__fail(&w->err, rc, "%s: record %" PRId64 ": cannot be located",
                            stoker__dataset_path(l->ds), s->batch.ids[j]);
    s->batch.labels[j] = s->locs[j].label;
    return 0;
}

/* Fills the slot's ids, locations and layout for batch `seq`. Under the slot's mutex; the
 * slot is FREE, so nobody else touches its contents. */
static void prepare(stoker_loader *l, stoker__worker *w, stoker__slot *s, uint64_t seq)
{
    stoker_batch *b = &s->batch;
    uint64_t epoch, pos;
    stoker__seq_position(l, seq, &epoch, &pos);
    b->epoch = (int64_t)epoch;
    b->position = (int64_t)pos;
    b->count = (int64_t)stoker__sampler_batch_count(&l->smp, pos);
    stoker__sampler_batch(&l->smp, epoch, pos, b->ids);
    memset(s->bad, 0, (size_t)b->count);
    b->replaced = 0;
    for (uint32_t p = 0; p < l->ppb; p++) /* published by the mutex with PREPARED */
        atomic_store_explicit(&s->piece_ok[p], 0, memory_order_relaxed);
    s->repaired = false;
    s->err_code = 0;
    s->err_msg[0] = '\0';
    int rc = 0;
    for (int64_t j = 0; j < b->count && rc == 0; j++)
        rc = locate(l, w, s, (uint64_t)j);
    if (rc == 0)
        rc = layout(l, w, s);
    if (rc < 0) {
        s->err_code = rc;
        memcpy(s->err_msg, w->err.msg, sizeof s->err_msg);
    }
    atomic_store_explicit(&s->pending, l->ppb, memory_order_relaxed);
    s->state = SLOT_PREPARED;
    pthread_cond_broadcast(&s->cond);
}

/* A record failed its check (its message is in w->err): SKIP marks it for replacement,
 * ERROR fails the batch. Every way a record can fail, on every fetch path, ends here, and a
 * mark is cleared only where the record is read again (read_range). */
static void corrupt(stoker_loader *l, stoker__worker *w, stoker__slot *s, uint64_t j)
{
    if (l->on_corrupt == STOKER_ON_CORRUPT_SKIP)
        s->bad[j] |= REC_BAD;
    else
        slot_fail(s, &w->err);
}

/* Checks record j, whose bytes are at src (all of them read), and for staged reads runs
 * the process step into its place in the slot. */
static void check_record(stoker_loader *l, stoker__worker *w, stoker__slot *s, uint32_t j,
                         const uint8_t *src, const char *shard)
{
    const stoker__recloc *loc = &s->locs[j];
    const int64_t id = s->batch.ids[j];
    const uint32_t crc = loc->has_crc ? stoker_crc32c(0, src, loc->length) : 0;
    if (loc->has_crc && crc != loc->crc) {
        stoker__fail(&w->err, STOKER_E_CORRUPT,
                     "%s: record %" PRId64 ": CRC32C mismatch "
                     "(stored %08x, computed %08x)",
                     shard, id, loc->crc, crc);
        corrupt(l, w, s, j);
        return;
    }
    if (l->staged) {
        uint8_t *dst = s->batch.data + s->batch.offsets[j];
        const uint64_t cap = (uint64_t)(s->batch.offsets[j + 1] - s->batch.offsets[j]);
        w->err.msg[0] = '\0';
        const uint64_t t0 = l->process ? clock_ns() : 0;
        const int rc = l->process ? l->process(w, id, src, loc->length, dst, cap)
                                  : (memcpy(dst, src, loc->length), 0);
        if (l->process)
            bump(&w->stats.process_ns, clock_ns() - t0);
        if (rc < 0) {
            char why[STOKER_ERRMSG_CAP]; /* the step's own message, if it left one */
            snprintf(why, sizeof why, "%s", w->err.msg[0] ? w->err.msg : stoker_strerror(rc));
            stoker__fail(&w->err, rc, "%s: record %" PRId64 ": %s", shard, id, why);
            corrupt(l, w, s, j);
            return;
        }
    }
    bump(&w->stats.records, 1);
    bump(&w->stats.bytes, loc->length);
}

/* Checks the records [first, last) of one completed read. */
static void check_read(stoker_loader *l, stoker__worker *w, stoker__slot *s,
                       const stoker__read_done *d)
{
    if (w->req_first[d->tag] == CHUNK_READ) { /* req_last holds the plan's cookie */
        stoker__dataset_fetch_landed(l->ds, w->req_last[d->tag], w->reqs[d->tag].length, d->res);
        return;
    }
    const uint32_t first = w->req_first[d->tag], last = w->req_last[d->tag];
    const stoker__recloc *loc0 = &s->locs[first];
    const char *shard = stoker__dataset_shard_path(l->ds, loc0->shard);
    if (d->res < 0) {
        stoker__fail(&w->err, (int)d->res,
                     "%s: record %" PRId64 ": read of %" PRIu64 " bytes at offset %" PRIu64
                     " failed: %s",
                     shard, s->batch.ids[first], w->reqs[d->tag].length, loc0->offset,
                     stoker_strerror((int)d->res));
        slot_fail(s, &w->err);
        return;
    }
    const uint8_t *src = w->reqs[d->tag].dst;
    uint64_t at = 0;
    /* CRC time: the whole check less the process step's share */
    const uint64_t t0 = clock_ns();
    const uint64_t p0 = atomic_load_explicit(&w->stats.process_ns, memory_order_relaxed);
    for (uint32_t j = first; j < last; j++) {
        const stoker__recloc *loc = &s->locs[j];
        if ((uint64_t)d->res < at + loc->length) {
            /* The file ends within this record: it and every record after it in this read
             * are cut short. */
            stoker__fail(&w->err, STOKER_E_CORRUPT,
                         "%s: record %" PRId64 ": short file: %" PRIu64 " of %" PRIu64
                         " bytes at offset %" PRIu64,
                         shard, s->batch.ids[j], (uint64_t)d->res > at ? (uint64_t)d->res - at : 0,
                         loc->length, loc->offset);
            corrupt(l, w, s, j);
        } else {
            check_record(l, w, s, j, src + at, shard);
        }
        at += loc->length;
    }
    const uint64_t p1 = atomic_load_explicit(&w->stats.process_ns, memory_order_relaxed);
    bump(&w->stats.crc_ns, clock_ns() - t0 - (p1 - p0));
}

/* A record that is not one extent on disk (chunked or compressed HDF5): the source reads
 * and assembles it here, synchronously; then the usual check and process step. */
static void fetch_record(stoker_loader *l, stoker__worker *w, stoker__slot *s, uint32_t j)
{
    const stoker__recloc *loc = &s->locs[j];
    const char *shard = stoker__dataset_shard_path(l->ds, loc->shard);
    uint8_t *dst = l->staged ? NULL : s->batch.data + s->batch.offsets[j];
    const uint8_t *src = NULL;
    const int rc = stoker__dataset_fetch(l->ds, s->batch.ids[j], loc, dst, &src, &w->err);
    if (rc < 0) {
        corrupt(l, w, s, j);
        return;
    }
    check_record(l, w, s, j, src, shard);
}

/* A fetched record joins the round: the reads its plan lists (its chunks missing from the
 * worker's chunk cache) go out with the round's others, and the record is assembled once
 * they are done (read_range). A record the source reads itself (the serialised fallback),
 * or one too big for an empty round, is fetched at once. Returns false when the round is
 * full. */
static bool add_fetched(stoker_loader *l, stoker__worker *w, stoker__slot *s, uint32_t j,
                        uint32_t *nreq)
{
    if (w->nfetch == STOKER__PIECE)
        return false;
    stoker__fetch_read fr[STOKER__FETCH_READS];
    const uint32_t room = w->reader->depth - *nreq;
    const uint32_t cap = room < STOKER__FETCH_READS ? room : STOKER__FETCH_READS;
    uint32_t n = 0;
    const int rc =
        stoker__dataset_fetch_plan(l->ds, s->batch.ids[j], &s->locs[j], w->round, fr, cap, &n);
    if (rc == STOKER__PLAN_FULL && (*nreq > 0 || w->nfetch > 0))
        return false;
    if (rc != STOKER__PLAN_OK) {
        fetch_record(l, w, s, j);
        return true;
    }
    for (uint32_t i = 0; i < n; i++, (*nreq)++) {
        w->reqs[*nreq] = (stoker__read_req){.fd = fr[i].fd,
                                            .offset = fr[i].offset,
                                            .length = fr[i].length,
                                            .dst = fr[i].dst,
                                            .tag = *nreq};
        w->req_first[*nreq] = CHUNK_READ;
        w->req_last[*nreq] = fr[i].cookie;
    }
    w->fetch_j[w->nfetch++] = j;
    return true;
}

/* Adds record j to the round: extends the previous read when the record follows it on
 * disk and in the slot (buffered reads only), else starts a new one. Returns false when
 * the round is full (reader depth or staging space). */
static bool add_record(stoker_loader *l, stoker__worker *w, stoker__slot *s, uint32_t j,
                       uint32_t *nreq, size_t *staged, uint64_t *bytes)
{
    const stoker__recloc *loc = &s->locs[j];
    if (loc->fetch)
        return add_fetched(l, w, s, j, nreq);
    uint8_t *dst = s->batch.data + s->batch.offsets[j];
    uint64_t len = loc->length;
    int fd = loc->fd;
    if (*nreq > 0 && (*bytes >= l->round_bytes || len > l->round_bytes - *bytes))
        return false; /* the round's bytes are checked while still in cache */
    *bytes += len;
    if (l->staged) {
        if (l->direct)
            len = stoker__align_up(len ? len : 1, DIRECT_ALIGN);
        if (*nreq > 0 && *staged + len > w->staging_cap)
            return false;
        if (l->direct)
            fd = stoker__dataset_direct_fd(l->ds, loc->shard);
        dst = w->staging + *staged;
        *staged += stoker__align_up(len ? len : 1, DIRECT_ALIGN);
    } else if (*nreq > 0) {
        stoker__read_req *prev = &w->reqs[*nreq - 1];
        const stoker__recloc *pl = &s->locs[j - 1];
        if (w->req_first[*nreq - 1] != CHUNK_READ && w->req_last[*nreq - 1] == j &&
            pl->fd == loc->fd && pl->offset + pl->length == loc->offset &&
            (uint8_t *)prev->dst + prev->length == dst && prev->length + len <= MAX_COALESCE) {
            prev->length += len;
            w->req_last[*nreq - 1] = j + 1;
            return true;
        }
    }
    if (*nreq == w->reader->depth)
        return false;
    w->reqs[*nreq] = (stoker__read_req){
        .fd = fd, .offset = loc->offset, .length = len, .dst = dst, .tag = *nreq};
    w->req_first[*nreq] = j;
    w->req_last[*nreq] = j + 1;
    (*nreq)++;
    return true;
}

/* Submits the round's reads at once and checks each as it completes. */
static int run_round(stoker_loader *l, stoker__worker *w, stoker__slot *s, uint32_t nreq)
{
    for (uint32_t i = 0; i < nreq; i++) {
        if (w->reqs[i].fd < 0) { /* an O_DIRECT open that was refused */
            const stoker__recloc *loc = &s->locs[w->req_first[i]];
            stoker__fail(&w->err, w->reqs[i].fd,
                         "%s: record %" PRId64 ": cannot open for direct I/O: %s",
                         stoker__dataset_shard_path(l->ds, loc->shard),
                         s->batch.ids[w->req_first[i]], stoker_strerror(w->reqs[i].fd));
            slot_fail(s, &w->err);
            return w->reqs[i].fd;
        }
    }
    stoker__reader *r = w->reader;
    uint64_t t0 = clock_ns();
    int rc = r->ops->submit(r, w->reqs, nreq);
    if (rc < 0) {
        stoker__fail(&w->err, rc, "%s: cannot submit reads: %s", stoker__dataset_path(l->ds),
                     stoker_strerror(rc));
        slot_fail(s, &w->err);
        return rc;
    }
    bump(&w->stats.inflight_sum, r->inflight);
    bump(&w->stats.inflight_n, 1);
    while (r->inflight > 0) {
        uint32_t got = 0;
        rc = r->ops->reap(r, w->done, r->depth, &got);
        const uint64_t t1 = clock_ns();
        bump(&w->stats.read_ns, t1 - t0); /* submit + reap: time in the reader */
        if (rc < 0) {
            /* The ring itself failed; its reads may still land in the slot, so this worker
             * cannot go on safely: fail the batch (the loader reports it). */
            stoker__fail(&w->err, rc, "%s: waiting for reads failed: %s",
                         stoker__dataset_path(l->ds), stoker_strerror(rc));
            slot_fail(s, &w->err);
            return rc;
        }
        for (uint32_t i = 0; i < got; i++)
            check_read(l, w, s, &w->done[i]);
        t0 = clock_ns();
    }
    return 0;
}

/* The hot loop: reads records [j0, j1) of the slot's batch (only those marked bad when
 * only_bad) in rounds of up to the reader's depth, each submitted with one call; then
 * assembles the round's fetched records from the chunks it read. */
static int read_range(stoker_loader *l, stoker__worker *w, stoker__slot *s, uint32_t j0,
                      uint32_t j1, bool only_bad)
{
    uint32_t j = j0;
    while (j < j1) {
        w->round++;
        w->nfetch = 0;
        uint32_t nreq = 0;
        size_t staged = 0;
        uint64_t bytes = 0;
        while (j < j1) {
            if (only_bad && !(s->bad[j] & REC_BAD)) {
                j++;
                continue;
            }
            /* This read decides the record afresh: its mark is cleared before add_record,
             * which may fetch and check the record at once and mark it again. */
            const uint8_t mark = s->bad[j];
            s->bad[j] &= (uint8_t)~REC_BAD;
            if (!add_record(l, w, s, j, &nreq, &staged, &bytes)) {
                s->bad[j] = mark; /* not in this round: the next one reads it */
                break;
            }
            j++;
        }
        if (nreq == 0 && w->nfetch == 0)
            break;
        const int rc = nreq > 0 ? run_round(l, w, s, nreq) : 0;
        if (rc < 0)
            return rc;
        for (uint32_t i = 0; i < w->nfetch; i++)
            fetch_record(l, w, s, w->fetch_j[i]);
    }
    return 0;
}

/* SKIP policy: a corrupt record is replaced by a record drawn from (seed, epoch, its id,
 * attempt), so the same batch comes out whatever thread or run reads it. */
static int64_t replacement(const stoker_loader *l, uint64_t epoch, int64_t id, uint32_t attempt)
{
    uint64_t st =
        stoker__sample_rng(l->smp.seed ^ UINT64_C(0x5245504C41434531), epoch, (uint64_t)id);
    uint64_t r = 0;
    for (uint32_t i = 0; i < attempt; i++)
        r = stoker__rng_next(&st);
    return (int64_t)(r % l->smp.n);
}

/* Records of the batch whose marks include `flag`. */
static uint32_t count_marked(const stoker__slot *s, uint8_t flag)
{
    uint32_t n = 0;
    for (int64_t j = 0; j < s->batch.count; j++)
        n += (s->bad[j] & flag) != 0;
    return n;
}

/* Replaces the batch's corrupt records until it is whole or a record ran out of tries. Run
 * by the worker that finished the batch's last piece, which owns the slot's contents. */
static void repair(stoker_loader *l, stoker__worker *w, stoker__slot *s)
{
    stoker_batch *b = &s->batch;
    for (uint32_t attempt = 1;; attempt++) {
        const uint32_t nbad = count_marked(s, REC_BAD);
        if (nbad == 0 || slot_error(s) != 0)
            return;
        if (attempt > STOKER__REPLACE_TRIES) {
            char last[STOKER_ERRMSG_CAP];
            snprintf(last, sizeof last, "%s", w->err.msg);
            stoker__fail(&w->err, STOKER_E_CORRUPT,
                         "%s: %u corrupt record(s) without an "
                         "intact replacement after %u tries; last: %s",
                         stoker__dataset_path(l->ds), nbad, STOKER__REPLACE_TRIES, last);
            slot_fail(s, &w->err);
            return;
        }
        s->repaired = true; /* copies of finished pieces are stale */
        for (int64_t j = 0; j < b->count; j++) {
            if (!(s->bad[j] & REC_BAD))
                continue;
            s->bad[j] |= REC_REPLACED;
            b->ids[j] = replacement(l, (uint64_t)b->epoch, b->ids[j], attempt);
            if (locate(l, w, s, (uint64_t)j) < 0) {
                slot_fail(s, &w->err);
                return;
            }
        }
        if (!l->rec_size) {
            /* Sizes changed: lay the batch out again and read all of it. */
            if (layout(l, w, s) < 0) {
                slot_fail(s, &w->err);
                return;
            }
            for (int64_t j = 0; j < b->count; j++)
                s->bad[j] |= REC_BAD;
        }
        read_range(l, w, s, 0, (uint32_t)b->count, true);
    }
}

/* Called by every piece's worker; the last one publishes the batch. acq_rel: the last
 * decrement sees every other piece's writes, and the slot mutex passes them to the
 * consumer. Each piece is also flagged (release) for the copy thread, which copies
 * finished pieces while the rest of the batch is still being made. */
static void piece_done(stoker_loader *l, stoker__worker *w, stoker__slot *s, uint64_t piece)
{
    atomic_store_explicit(&s->piece_ok[piece], 1, memory_order_release);
    if (atomic_fetch_sub_explicit(&s->pending, 1, memory_order_acq_rel) != 1) {
        if (l->stream_pieces) /* the copy thread may copy this piece now */
            stoker__slot_wake(s);
        return;
    }
    if (l->on_corrupt == STOKER_ON_CORRUPT_SKIP && count_marked(s, REC_BAD)) {
        repair(l, w, s);
        /* Counted as skipped only if this batch is delivered (stoker__count_delivery). */
        s->batch.replaced = count_marked(s, REC_REPLACED);
    }
    pthread_mutex_lock(&s->mu);
    s->state = SLOT_READY;
    atomic_fetch_add_explicit(&l->ready, 1, memory_order_relaxed);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
}

void stoker__deadline(struct timespec *ts)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_nsec += STOKER__WAIT_NS;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static bool halted(const stoker_loader *l)
{
    return atomic_load_explicit(&l->stop, memory_order_acquire) ||
           atomic_load_explicit(&l->paused, memory_order_acquire);
}

/* Waits until the slot can take batch seq, preparing it if this worker is first. Returns
 * 0 to go on, 1 when the batch already failed (nothing to read), -1 to drop the ticket
 * (stop or pause). */
static int acquire(stoker_loader *l, stoker__worker *w, stoker__slot *s, uint64_t seq)
{
    pthread_mutex_lock(&s->mu);
    while (!halted(l) && !(s->seq == seq && (s->state == SLOT_FREE || s->state == SLOT_PREPARED))) {
        struct timespec ts;
        stoker__deadline(&ts);
        pthread_cond_timedwait(&s->cond, &s->mu, &ts);
    }
    int rc = -1;
    if (!halted(l)) {
        if (s->state == SLOT_FREE)
            prepare(l, w, s, seq);
        rc = s->err_code != 0;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* Parks the worker while a restart is in progress (loader.c's pause protocol), or while an
 * epoch has no batches at all. */
static void park(stoker_loader *l)
{
    pthread_mutex_lock(&l->ctl_mu);
    l->parked++;
    pthread_cond_broadcast(&l->ctl_cond);
    while ((atomic_load(&l->paused) || l->smp.nbatches == 0) && !atomic_load(&l->stop)) {
        struct timespec ts;
        stoker__deadline(&ts);
        pthread_cond_timedwait(&l->ctl_cond, &l->ctl_mu, &ts);
    }
    l->parked--;
    pthread_mutex_unlock(&l->ctl_mu);
}

void *stoker__worker_main(void *arg)
{
    stoker__worker *w = arg;
    stoker_loader *l = w->loader;
    char name[16];
    snprintf(name, sizeof name, "stoker-w%u", w->index);
    stoker__thread_name(name);
    while (!atomic_load_explicit(&l->stop, memory_order_acquire)) {
        if (atomic_load_explicit(&l->paused, memory_order_acquire) || l->smp.nbatches == 0) {
            park(l);
            continue;
        }
        const uint64_t t = atomic_fetch_add_explicit(&l->ticket, 1, memory_order_relaxed);
        const uint64_t seq = t / l->ppb, piece = t % l->ppb;
        stoker__slot *s = &l->slots[seq % l->depth];
        const int rc = acquire(l, w, s, seq);
        if (rc < 0)
            continue;
        w->epoch = s->batch.epoch; /* written in prepare, under the slot's mutex */
        const uint64_t j0 = piece * STOKER__PIECE;
        const uint64_t count = (uint64_t)s->batch.count;
        if (rc == 0 && j0 < count) {
            const uint64_t j1 = j0 + STOKER__PIECE < count ? j0 + STOKER__PIECE : count;
            read_range(l, w, s, (uint32_t)j0, (uint32_t)j1, false);
        }
        piece_done(l, w, s, piece);
    }
    return NULL;
}

/* Per-worker resources: reader, request arrays and, for staged reads, the staging buffer
 * (room for a piece of largest records, at least one, at most 64 MiB beyond that). */
static int worker_init(stoker_loader *l, stoker__worker *w, uint32_t i)
{
    w->loader = l;
    w->index = i;
    int rc = stoker__reader_open(&w->reader, l->backend, l->read_ahead);
    if (rc < 0)
        return stoker__fail(&l->err, rc, "%s: cannot set up the %s reader of worker %u: %s",
                            stoker__dataset_path(l->ds),
                            l->backend == STOKER_BACKEND_IO_URING ? "io_uring" : "pread", i,
                            stoker_strerror(rc));
    const uint32_t d = w->reader->depth;
    w->reqs = stoker__calloc(d, sizeof *w->reqs);
    w->done = stoker__calloc(d, sizeof *w->done);
    w->req_first = stoker__calloc(d, sizeof *w->req_first);
    w->req_last = stoker__calloc(d, sizeof *w->req_last);
    if (!w->reqs || !w->done || !w->req_first || !w->req_last)
        return stoker__fail(&l->err, -ENOMEM, "out of memory for worker %u", i);
    if (l->staged) {
        const uint64_t one = stoker__align_up(l->max_record ? l->max_record : 1, DIRECT_ALIGN);
        uint64_t cap = one * STOKER__PIECE;
        if (cap / STOKER__PIECE != one || cap > (UINT64_C(64) << 20))
            cap = one > (UINT64_C(64) << 20) ? one : UINT64_C(64) << 20;
        w->staging = stoker__aligned_alloc(DIRECT_ALIGN, (size_t)cap);
        if (!w->staging)
            return stoker__fail(&l->err, -ENOMEM,
                                "out of memory for worker %u's %" PRIu64 "-byte staging buffer", i,
                                cap);
        w->staging_cap = (size_t)cap;
    }
    return stoker__xform_worker_init(l, w);
}

int stoker__workers_create(stoker_loader *l)
{
    l->workers = stoker__aligned_alloc(64, sizeof(stoker__worker) * l->nthreads);
    if (!l->workers)
        return stoker__fail(&l->err, -ENOMEM, "out of memory for %u workers", l->nthreads);
    memset(l->workers, 0, sizeof(stoker__worker) * l->nthreads);
    for (uint32_t i = 0; i < l->nthreads; i++) {
        l->nworkers = i + 1;
        const int rc = worker_init(l, &l->workers[i], i);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int stoker__workers_start(stoker_loader *l)
{
    for (uint32_t i = 0; i < l->nthreads; i++) {
        stoker__worker *w = &l->workers[i];
        const int rc = stoker__thread_start(&w->thread, stoker__worker_main, w);
        if (rc != 0)
            return stoker__fail(&l->err, -rc, "cannot start worker thread %u: %s", i,
                                stoker_strerror(-rc));
        w->started = true;
    }
    return 0;
}

void stoker__workers_destroy(stoker_loader *l)
{
    if (!l->workers)
        return;
    atomic_store_explicit(&l->stop, true, memory_order_release);
    for (uint32_t i = 0; i < l->nworkers; i++)
        if (l->workers[i].started)
            pthread_join(l->workers[i].thread, NULL);
    for (uint32_t i = 0; i < l->nworkers; i++) {
        stoker__worker *w = &l->workers[i];
        stoker__reader_close(w->reader);
        stoker__free(w->reqs);
        stoker__free(w->done);
        stoker__free(w->req_first);
        stoker__free(w->req_last);
        stoker__free(w->staging);
        stoker__xform_worker_fini(w);
    }
    stoker__free(l->workers);
    l->workers = NULL;
}
