/* SPDX-License-Identifier: Apache-2.0 */
/* The worker pool (pool.h): prepare a batch's layout, read its records through the
 * worker's own reader, verify each record's CRC32C in the thread that read it, run the
 * per-record process step, replace corrupt records (SKIP), and publish the batch when its
 * last piece is done. */
#include "loader/pool.h"

#include "loader/fields.h"

#include "common/crc32c.h"
#include "cuda/nvtx.h"
#include "loader/process.h"

#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define DIRECT_ALIGN 4096u
#define MAX_COALESCE (UINT64_C(64) << 20) /* bytes one coalesced read may cover */
#define STAGING_MAX (UINT64_C(64) << 20)  /* staging beyond one largest record */
#define CHUNK_READ UINT32_MAX /* req_first of a read a fetched record's plan asked for */
#define REPLACE_TRIES 16u     /* SKIP: replacements tried per corrupt record */

struct stoker__worker {
    alignas(64) stoker__pool *pool;
    uint32_t index;
    pthread_t thread;
    bool started;
    stoker__reader *reader;
    uint8_t *staging; /* aligned; direct I/O and the process step read here */
    size_t staging_cap;
    stoker__read_req *reqs; /* reader depth entries */
    stoker__read_done *done;
    uint32_t *req_first, *req_last; /* per request: records [first, last) it covers */
    stoker__err err;                /* messages of this worker's failures */
    stoker__process *proc;          /* the process step's state (image pipeline), or NULL */
    bool gpu;                       /* the GPU worker's: the GPU decode stage's thread uses it */
    /* Records of the round whose chunks the round reads (dataset.h's planned fetches):
     * assembled once its reads are done. round numbers the worker's rounds. */
    uint64_t round;
    uint32_t nfetch;
    uint32_t fetch_j[STOKER__PIECE];
    stoker__wstats stats;
};

/* Adds to a per-worker counter. Single writer (the worker), so a relaxed load and store
 * suffice and no locked instruction is spent; stats read it with relaxed loads. The stage
 * clock (stoker__now_ns) is read per round, per completed read and per processed record,
 * never per raw record. */
static inline void count_add(atomic_uint_fast64_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

void stoker__pool_position(const stoker__pool *p, uint64_t seq, uint64_t *epoch, uint64_t *pos)
{
    const uint64_t nb = p->smp->nbatches;
    const uint64_t abs = p->base_pos + seq;
    *epoch = p->base_epoch + abs / nb;
    *pos = abs % nb;
}

/* ---- preparing a batch ---- */

/* Byte offsets of every record of the batch in the slot, growing the slot if needed. Only
 * called while the caller owns the slot's contents (prepare, or the last piece's repair). */
static int layout(stoker__pool *p, stoker__worker *w, stoker__slot *s)
{
    stoker_batch *b = &s->batch;
    const uint64_t count = (uint64_t)b->count, rec_size = p->plan->rec_size;
    uint64_t total = 0;
    b->offsets[0] = 0;
    for (uint64_t j = 0; j < count; j++) {
        /* a data set with a schema: the image's sample, or nothing (its fields are apart) */
        const uint64_t len = rec_size || p->plan->fields.split ? rec_size : s->locs[j].length;
        if (stoker__add_ovf(total, len, &total) || total > INT64_MAX)
            return stoker__fail(&w->err, STOKER_E_LIMIT,
                                "%s: batch of %" PRIu64 " records is too large",
                                stoker__dataset_path(p->ds), count);
        b->offsets[j + 1] = (int64_t)total;
    }
    b->nbytes = total;
    if (stoker__ring_reserve(p->ring, s, total) < 0)
        return stoker__fail(&w->err, -ENOMEM,
                            "%s: out of memory growing a batch slot to %" PRIu64 " bytes",
                            stoker__dataset_path(p->ds), total);
    b->shape[0] = rec_size ? b->count : (int64_t)total;
    const stoker__pfields *pf = &p->plan->fields;
    b->extra_used = pf->cap;
    if (pf->raggeds == 0)
        return 0;
    /* the ragged fields' values: the room this batch's records can fill */
    if (stoker__pfields_place(pf, b, s->locs, s->place, &w->err) < 0) {
        char why[STOKER_ERRMSG_CAP];
        snprintf(why, sizeof why, "%s", w->err.msg);
        return stoker__fail(&w->err, STOKER_E_LIMIT, "%s: %s", stoker__dataset_path(p->ds), why);
    }
    if (b->extra_used > SIZE_MAX || stoker__ring_reserve_extra(p->ring, s, b->extra_used) < 0)
        return stoker__fail(&w->err, -ENOMEM,
                            "%s: out of memory growing a batch slot's fields to %" PRIu64 " bytes",
                            stoker__dataset_path(p->ds), b->extra_used);
    return 0;
}

static int locate(stoker__pool *p, stoker__worker *w, stoker__slot *s, uint64_t j)
{
    const int rc = stoker__dataset_locate(p->ds, s->batch.ids[j], &s->locs[j]);
    if (rc < 0)
        return stoker__fail(&w->err, rc, "%s: record %" PRId64 ": cannot be located",
                            stoker__dataset_path(p->ds), s->batch.ids[j]);
    s->batch.labels[j] = s->locs[j].label;
    return 0;
}

/* The ring's prepare step (slot mutex held; the slot is FREE, nobody else touches it):
 * batch seq's ids, locations and layout. */
static void prepare(void *ctx, stoker__slot *s, uint64_t seq)
{
    stoker__worker *w = ctx;
    stoker__pool *p = w->pool;
    stoker_batch *b = &s->batch;
    uint64_t epoch, pos;
    stoker__pool_position(p, seq, &epoch, &pos);
    b->epoch = (int64_t)epoch;
    b->position = (int64_t)pos;
    b->count = (int64_t)stoker__sampler_batch_count(p->smp, pos);
    b->replaced = 0;
    stoker__sampler_batch(p->smp, epoch, pos, b->ids);
    stoker__dataset_progress(p->ds, seq); /* what batches before it needed may go */
    memset(s->marks, 0, (size_t)b->count);
    stoker__gdec_prepare(p->gd, s);
    int rc = 0;
    for (int64_t j = 0; j < b->count && rc == 0; j++)
        rc = locate(p, w, s, (uint64_t)j);
    if (rc == 0)
        rc = layout(p, w, s);
    if (rc < 0) {
        s->err_code = rc;
        memcpy(s->err_msg, w->err.msg, sizeof s->err_msg);
        atomic_store_explicit(&s->failed, 1, memory_order_release);
    }
}

/* ---- checking records ---- */

/* Record j failed with rc (its message is in w->err). Only a corrupt record (rc
 * STOKER_E_CORRUPT: a CRC mismatch, a file cut short, a chunk or image that does not
 * decode, an image over max_pixels, which the image step reports so) is SKIP's to replace;
 * any other error (a read error such as -EIO, -ENOMEM) says nothing about the record and
 * fails the batch under either policy, as a failed read of a shard does (check_read).
 * Every way a record can fail, on every fetch path, ends here, and a mark is cleared only
 * where the record is read again (read_range). */
static void record_failed(stoker__pool *p, stoker__worker *w, stoker__slot *s, uint64_t j, int rc)
{
    if (rc == STOKER_E_CORRUPT && p->plan->on_corrupt == STOKER_ON_CORRUPT_SKIP)
        s->marks[j] |= REC_BAD;
    else
        stoker__ring_fail(s, &w->err);
}

/* Whether record id, of a data set nobody checked, is to be decoded to its end: until it has
 * once come out clean. Any worker may set a bit while others read: relaxed suffices, as a
 * bit read stale only costs one more full decode. */
static bool needs_whole(const stoker__pool *p, int64_t id)
{
    if (!p->clean)
        return false;
    if (id < 0 || (uint64_t)id >= p->plan->records)
        return true;
    const uint64_t bit = UINT64_C(1) << ((uint64_t)id % 64);
    return !(atomic_load_explicit(&p->clean[(uint64_t)id / 64], memory_order_relaxed) & bit);
}

/* What of a record process_into makes: all of it; a sample's fields but its image, which
 * the GPU decode stage took; or that image alone, from its bytes, which the stage gave
 * back. */
enum { PART_ALL, PART_FIELDS, PART_IMAGE };

/* Record j's n bytes at src into its place in the slot: the process step (a staged copy
 * without one), `part` of it. Returns false when it failed (record_failed decided, message in
 * w->err). */
static bool process_into(stoker__pool *p, stoker__worker *w, stoker__slot *s, uint32_t j,
                         const uint8_t *src, uint64_t n, int part, const char *shard)
{
    const int64_t id = s->batch.ids[j];
    uint8_t *dst = s->batch.data + s->batch.offsets[j];
    const uint64_t cap = (uint64_t)(s->batch.offsets[j + 1] - s->batch.offsets[j]);
    const bool split = p->plan->fields.split;
    if (!w->proc && !split) {
        memcpy(dst, src, n);
        return true;
    }
    w->err.msg[0] = '\0';
    /* an image decoded elsewhere is not the CPU's decode: neither counted nor measured */
    const bool decodes = part != PART_FIELDS;
    const bool whole = decodes && needs_whole(p, id);
    const uint64_t t0 = stoker__now_ns();
    int rc;
    if (!split)
        rc = stoker__process_record(w->proc, p->smp->seed, s->batch.epoch, id, src, n, whole, dst,
                                    cap, &w->err);
    else if (part == PART_IMAGE)
        rc = stoker__process_sample_image(w->proc, p->smp->seed, s->batch.epoch, id, src, n, whole,
                                          dst, cap, &w->err);
    else
        rc = stoker__process_sample(
            w->proc, p->smp->seed, s->batch.epoch, id, src, n, whole && p->plan->image,
            part == PART_FIELDS ? STOKER__IMAGE_ELSEWHERE : STOKER__IMAGE_HERE, dst, cap, &s->batch,
            s->rows, s->place, j, &w->err);
    const uint64_t ns = stoker__now_ns() - t0;
    count_add(&w->stats.process_ns, ns);
    if (whole)
        count_add(&w->stats.whole, 1);
    if (decodes)
        stoker__gdec_cpu_time(p->gd, s, ns);
    if (rc < 0) {
        char why[STOKER_ERRMSG_CAP]; /* the step's own message, if it left one */
        snprintf(why, sizeof why, "%s", w->err.msg[0] ? w->err.msg : stoker_strerror(rc));
        stoker__fail(&w->err, rc, "%s: record %" PRId64 ": %s", shard, id, why);
        record_failed(p, w, s, j, rc);
        return false;
    }
    if (decodes)
        count_add(&w->stats.decoded, 1);
    if (whole && (uint64_t)id < p->plan->records)
        atomic_fetch_or_explicit(&p->clean[(uint64_t)id / 64], UINT64_C(1) << ((uint64_t)id % 64),
                                 memory_order_relaxed);
    return true;
}

/* A fetched record j failed its CRC32C: the source drops the copy it may hold damaged (a
 * remote block in the cache) and the record is fetched once more before it counts as
 * corrupt. 1: fetched again (*src: its bytes; `again` says what was dropped, for a
 * message); 0: the source had nothing to drop; < 0: the fetch failed (record_failed
 * decided). */
static int refetch_record(stoker__pool *p, stoker__worker *w, stoker__slot *s, uint32_t j,
                          const uint8_t **src, const char *shard, char *again, size_t cap)
{
    const stoker__recloc *loc = &s->locs[j];
    const int64_t id = s->batch.ids[j];
    char what[STOKER_ERRMSG_CAP / 2];
    if (stoker__dataset_refetch(p->ds, id, loc, what, sizeof what) <= 0)
        return 0;
    uint8_t *dst = p->plan->staged ? NULL : s->batch.data + s->batch.offsets[j];
    const int rc = stoker__dataset_fetch(p->ds, id, loc, dst, src, &s->failed, &w->err);
    if (rc < 0) {
        char was[STOKER_ERRMSG_CAP];
        snprintf(was, sizeof was, "%s", w->err.msg);
        stoker__fail(&w->err, rc,
                     "%s: record %" PRId64 ": CRC32C mismatch, read from %s, dropped; "
                     "fetching it again failed: %s",
                     shard, id, what, was);
        record_failed(p, w, s, j, rc);
        return rc;
    }
    snprintf(again, cap, ", also when fetched again after dropping %s", what);
    return 1;
}

/* Checks record j, whose bytes are at src (all of them read), and for staged reads runs
 * the process step into its place in the slot, or routes the record to the GPU decode
 * stage, which then owns its decoding. */
static void check_record(stoker__pool *p, stoker__worker *w, stoker__slot *s, uint32_t j,
                         const uint8_t *src, const char *shard)
{
    const stoker__recloc *loc = &s->locs[j];
    const int64_t id = s->batch.ids[j];
    uint32_t crc = loc->has_crc ? stoker_crc32c(0, src, loc->length) : 0;
    char again[STOKER_ERRMSG_CAP] = "";
    if (loc->has_crc && crc != loc->crc && loc->fetch) {
        const int rc = refetch_record(p, w, s, j, &src, shard, again, sizeof again);
        if (rc < 0)
            return;
        if (rc > 0)
            crc = stoker_crc32c(0, src, loc->length);
    }
    if (loc->has_crc && crc != loc->crc) {
        stoker__fail(&w->err, STOKER_E_CORRUPT,
                     "%s: record %" PRId64 ": CRC32C mismatch (stored %08x, computed %08x)%s",
                     shard, id, loc->crc, crc, again);
        record_failed(p, w, s, j, STOKER_E_CORRUPT);
        return;
    }
    /* the GPU decode stage takes an image: the record's, or a sample's image field once the
     * worker has made the sample's other fields, so that a sample failing in them is never
     * routed (its replacement's image is the CPU's, never overwritten by the GPU's) */
    const bool split = p->plan->fields.split;
    const uint8_t *img = src;
    uint64_t len = loc->length;
    const bool candidate =
        w->proc && p->gd && (!split || stoker__process_image_bytes(w->proc, src, len, &img, &len));
    const bool apart = candidate && split; /* the image after the other fields */
    if (apart && !process_into(p, w, s, j, src, loc->length, PART_FIELDS, shard))
        return;
    const bool routed = candidate && stoker__gdec_route(p->gd, s, j, p->smp->seed, s->batch.epoch,
                                                        img, len, loc->has_crc);
    if (p->plan->staged && !routed &&
        !process_into(p, w, s, j, img, len, apart ? PART_IMAGE : PART_ALL, shard))
        return;
    count_add(&w->stats.records, 1);
    count_add(&w->stats.bytes, loc->length);
}

/* A data set larger than the page cache it may fill (the plan's drop_behind): the pages a
 * buffered read brought in are dropped once its bytes are in the worker's hands, so the
 * cache keeps what is still to come. Whole pages inside the range go; a page shared with a
 * neighbouring record stays until the neighbour's read drops it. */
static void drop_behind(const stoker__pool *p, stoker__worker *w, const stoker__read_req *r)
{
    if (!p->plan->drop_behind || r->length == 0)
        return;
    if (posix_fadvise(r->fd, (off_t)r->offset, (off_t)r->length, POSIX_FADV_DONTNEED) == 0)
        count_add(&w->stats.dropped, r->length);
}

/* A read of records [first, last) failed (an I/O error fails the batch under either policy).
 * Adjacent records are read with one call, so the message names the record holding the
 * byte where the read failed, with its own length and offset, not the first of the read;
 * the records after it were never read, so each is read again alone, and any whose bytes
 * fail too is named as well. */
static void read_failed(stoker__worker *w, stoker__slot *s, const stoker__read_done *d,
                        const char *shard)
{
    const stoker__read_req *r = &w->reqs[d->tag];
    const uint32_t last = w->req_last[d->tag];
    /* the record whose bytes hold the failing offset (by file offsets: the read may begin
     * below its first record, aligned for O_DIRECT, and pass padding between records) */
    const uint64_t bad = r->offset + d->got;
    uint32_t k = w->req_first[d->tag];
    while (k + 1 < last && s->locs[k + 1].offset <= bad)
        k++;
    char ids[128] = "", one[32], rest[40] = "", also[224] = "";
    size_t used = 0;
    uint32_t more = 0, listed = 0;
    for (uint32_t j = k + 1; j < last; j++) {
        const stoker__recloc *loc = &s->locs[j];
        uint8_t *dst = (uint8_t *)r->dst + (loc->offset - r->offset); /* its place in the read */
        if (stoker__reader_pread(w->reader, r->fd, dst, loc->length, loc->offset) >= 0)
            continue;
        more++;
        const int n = snprintf(one, sizeof one, "%s%" PRId64, listed ? ", " : "", s->batch.ids[j]);
        if (n > 0 && used + (size_t)n < sizeof ids) {
            memcpy(ids + used, one, (size_t)n + 1);
            used += (size_t)n;
            listed++;
        }
    }
    if (more > listed)
        snprintf(rest, sizeof rest, " and %u more", more - listed);
    if (more > 0)
        snprintf(also, sizeof also, "; so did record%s %s%s (each read again alone)",
                 more > 1 ? "s" : "", ids, rest);
    stoker__fail(&w->err, (int)d->res,
                 "%s: record %" PRId64 ": read of %" PRIu64 " bytes at offset %" PRIu64
                 " failed: %s%s",
                 shard, s->batch.ids[k], s->locs[k].length, s->locs[k].offset,
                 stoker_strerror((int)d->res), also);
    stoker__ring_fail(s, &w->err);
}

/* Checks the records [first, last) of one completed read. */
static void check_read(stoker__pool *p, stoker__worker *w, stoker__slot *s,
                       const stoker__read_done *d)
{
    drop_behind(p, w, &w->reqs[d->tag]);
    if (w->req_first[d->tag] == CHUNK_READ) { /* req_last holds the plan's cookie */
        stoker__dataset_fetch_landed(p->ds, w->req_last[d->tag], w->reqs[d->tag].length, d->res);
        return;
    }
    const uint32_t first = w->req_first[d->tag], last = w->req_last[d->tag];
    const stoker__recloc *loc0 = &s->locs[first];
    const char *shard = stoker__dataset_shard_path(p->ds, loc0->shard);
    if (d->res < 0) {
        read_failed(w, s, d, shard);
        return;
    }
    const uint8_t *src = w->reqs[d->tag].dst;
    uint64_t at = 0;
    /* CRC time: the whole check less the process step's share */
    const uint64_t t0 = stoker__now_ns();
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
            record_failed(p, w, s, j, STOKER_E_CORRUPT);
        } else {
            check_record(p, w, s, j, src + at, shard);
        }
        at += loc->length;
    }
    const uint64_t p1 = atomic_load_explicit(&w->stats.process_ns, memory_order_relaxed);
    count_add(&w->stats.crc_ns, stoker__now_ns() - t0 - (p1 - p0));
}

/* A record that is not one extent on disk (chunked or compressed HDF5): the source reads
 * and assembles it here, synchronously; then the usual check and process step. */
static void fetch_record(stoker__pool *p, stoker__worker *w, stoker__slot *s, uint32_t j)
{
    /* A batch fails as a whole: once one of its records failed for good, fetching the
     * others (a remote one may wait out its block's retries) would only delay the error */
    if (stoker__ring_failing(s))
        return;
    const stoker__recloc *loc = &s->locs[j];
    const char *shard = stoker__dataset_shard_path(p->ds, loc->shard);
    uint8_t *dst = p->plan->staged ? NULL : s->batch.data + s->batch.offsets[j];
    const uint8_t *src = NULL;
    const int rc =
        stoker__dataset_fetch(p->ds, s->batch.ids[j], loc, dst, &src, &s->failed, &w->err);
    if (rc < 0) {
        record_failed(p, w, s, j, rc);
        return;
    }
    check_record(p, w, s, j, src, shard);
}

/* ---- reading a piece ---- */

/* A fetched record joins the round: the reads its plan lists (its chunks missing from the
 * worker's chunk cache) go out with the round's others, and the record is assembled once
 * they are done (read_range). A record the source reads itself (the serialised fallback),
 * or one too big for an empty round, is fetched at once. Returns false when the round is
 * full. */
static bool add_fetched(stoker__pool *p, stoker__worker *w, stoker__slot *s, uint32_t j,
                        uint32_t *nreq)
{
    if (w->nfetch == STOKER__PIECE)
        return false;
    stoker__fetch_read fr[STOKER__FETCH_READS];
    const uint32_t room = w->reader->depth - *nreq;
    const uint32_t cap = room < STOKER__FETCH_READS ? room : STOKER__FETCH_READS;
    uint32_t n = 0;
    uint8_t *dst = p->plan->staged ? NULL : s->batch.data + s->batch.offsets[j];
    const int rc =
        stoker__dataset_fetch_plan(p->ds, s->batch.ids[j], &s->locs[j], w->round, dst, fr, cap, &n);
    if (rc == STOKER__PLAN_FULL && (*nreq > 0 || w->nfetch > 0))
        return false;
    if (rc != STOKER__PLAN_OK) {
        fetch_record(p, w, s, j);
        return true;
    }
    for (uint32_t i = 0; i < n; i++, (*nreq)++) {
        w->reqs[*nreq] = (stoker__read_req){.fd = fr[i].fd,
                                            .offset = fr[i].offset,
                                            .length = fr[i].length,
                                            .dst = fr[i].dst,
                                            .tag = *nreq,
                                            .transient = fr[i].transient};
        w->req_first[*nreq] = CHUNK_READ;
        w->req_last[*nreq] = fr[i].cookie;
    }
    w->fetch_j[w->nfetch++] = j;
    return true;
}

/* Adds record j to the round: extends the previous read when the record follows it on
 * disk and in the slot (buffered reads only), else starts a new one. Returns false when
 * the round is full (reader depth or staging space). */
static bool add_record(stoker__pool *p, stoker__worker *w, stoker__slot *s, uint32_t j,
                       uint32_t *nreq, size_t *staged, uint64_t *bytes)
{
    const stoker__plan *pl = p->plan;
    const stoker__recloc *loc = &s->locs[j];
    if (loc->fetch)
        return add_fetched(p, w, s, j, nreq);
    uint8_t *dst = s->batch.data + s->batch.offsets[j];
    uint64_t len = loc->length;
    int fd = loc->fd;
    if (*nreq > 0 && (*bytes >= pl->round_bytes || len > pl->round_bytes - *bytes))
        return false; /* the round's bytes are checked while still in cache */
    *bytes += len;
    if (pl->staged) {
        if (pl->direct)
            len = stoker__align_up(len ? len : 1, DIRECT_ALIGN);
        if (*nreq > 0 && *staged + len > w->staging_cap)
            return false;
        if (pl->direct)
            fd = stoker__dataset_direct_fd(p->ds, loc->shard);
        dst = w->staging + *staged;
        *staged += stoker__align_up(len ? len : 1, DIRECT_ALIGN);
    } else if (*nreq > 0) {
        stoker__read_req *prev = &w->reqs[*nreq - 1];
        const stoker__recloc *pl0 = &s->locs[j - 1];
        if (w->req_first[*nreq - 1] != CHUNK_READ && w->req_last[*nreq - 1] == j &&
            pl0->fd == loc->fd && pl0->offset + pl0->length == loc->offset &&
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
static int run_round(stoker__pool *p, stoker__worker *w, stoker__slot *s, uint32_t nreq)
{
    for (uint32_t i = 0; i < nreq; i++) {
        if (w->reqs[i].fd < 0) { /* an O_DIRECT open that was refused */
            const stoker__recloc *loc = &s->locs[w->req_first[i]];
            stoker__fail(&w->err, w->reqs[i].fd,
                         "%s: record %" PRId64 ": cannot open for direct I/O: %s",
                         stoker__dataset_shard_path(p->ds, loc->shard),
                         s->batch.ids[w->req_first[i]], stoker_strerror(w->reqs[i].fd));
            stoker__ring_fail(s, &w->err);
            return w->reqs[i].fd;
        }
    }
    stoker__reader *r = w->reader;
    uint64_t t0 = stoker__now_ns();
    int rc = r->ops->submit(r, w->reqs, nreq);
    if (rc < 0) {
        stoker__fail(&w->err, rc, "%s: cannot submit reads: %s", stoker__dataset_path(p->ds),
                     stoker_strerror(rc));
        stoker__ring_fail(s, &w->err);
        return rc;
    }
    count_add(&w->stats.inflight_sum, r->inflight);
    count_add(&w->stats.inflight_n, 1);
    while (r->inflight > 0) {
        uint32_t got = 0;
        rc = r->ops->reap(r, w->done, r->depth, &got);
        const uint64_t t1 = stoker__now_ns();
        count_add(&w->stats.read_ns, t1 - t0); /* submit + reap: time in the reader */
        if (rc < 0) {
            /* The ring itself failed; its reads may still land in the slot, so this worker
             * cannot go on safely: fail the batch (the loader reports it). */
            stoker__fail(&w->err, rc, "%s: waiting for reads failed: %s",
                         stoker__dataset_path(p->ds), stoker_strerror(rc));
            stoker__ring_fail(s, &w->err);
            return rc;
        }
        for (uint32_t i = 0; i < got; i++)
            check_read(p, w, s, &w->done[i]);
        t0 = stoker__now_ns();
    }
    return 0;
}

/* The hot loop: reads records [j0, j1) of the slot's batch (only those marked bad when
 * only_bad) in rounds of up to the reader's depth, each submitted with one call; then
 * assembles the round's fetched records from the chunks it read. */
static int read_range(stoker__pool *p, stoker__worker *w, stoker__slot *s, uint32_t j0, uint32_t j1,
                      bool only_bad)
{
    uint32_t j = j0;
    while (j < j1) {
        w->round++;
        w->nfetch = 0;
        uint32_t nreq = 0;
        size_t staged = 0;
        uint64_t bytes = 0;
        while (j < j1) {
            if (only_bad && !(s->marks[j] & REC_BAD)) {
                j++;
                continue;
            }
            /* This read decides the record afresh: its mark is cleared before add_record,
             * which may fetch and check the record at once and mark it again. */
            const uint8_t mark = s->marks[j];
            s->marks[j] &= (uint8_t)~REC_BAD;
            if (!add_record(p, w, s, j, &nreq, &staged, &bytes)) {
                s->marks[j] = mark; /* not in this round: the next one reads it */
                break;
            }
            j++;
        }
        if (nreq == 0 && w->nfetch == 0)
            break;
        const int rc = nreq > 0 ? run_round(p, w, s, nreq) : 0;
        if (rc < 0)
            return rc;
        for (uint32_t i = 0; i < w->nfetch; i++)
            fetch_record(p, w, s, w->fetch_j[i]);
    }
    return 0;
}

/* ---- SKIP: replacing corrupt records ---- */

/* A corrupt record is replaced by a record drawn from (seed, epoch, its id, attempt), so
 * the same batch comes out whatever thread or run reads it. */
static int64_t replacement(const stoker__pool *p, uint64_t epoch, int64_t id, uint32_t attempt)
{
    uint64_t st =
        stoker__sample_rng(p->smp->seed ^ UINT64_C(0x5245504C41434531), epoch, (uint64_t)id);
    uint64_t r = 0;
    for (uint32_t i = 0; i < attempt; i++)
        r = stoker__rng_next(&st);
    return (int64_t)(r % p->smp->n);
}

/* Records of the batch whose marks include `flag`. */
static uint32_t count_marked(const stoker__slot *s, uint8_t flag)
{
    uint32_t n = 0;
    for (int64_t j = 0; j < s->batch.count; j++)
        n += (s->marks[j] & flag) != 0;
    return n;
}

/* Replaces the batch's corrupt records until it is whole or a record ran out of tries. Run
 * by the worker that finished the batch's last piece, which owns the slot's contents. */
static void repair(stoker__pool *p, stoker__worker *w, stoker__slot *s)
{
    stoker_batch *b = &s->batch;
    for (uint32_t attempt = 1;; attempt++) {
        const uint32_t nbad = count_marked(s, REC_BAD);
        if (nbad == 0 || stoker__ring_failed(s) != 0)
            return;
        if (attempt > REPLACE_TRIES) {
            char last[STOKER_ERRMSG_CAP];
            snprintf(last, sizeof last, "%s", w->err.msg);
            stoker__fail(&w->err, STOKER_E_CORRUPT,
                         "%s: %u corrupt record(s) without an "
                         "intact replacement after %u tries; last: %s",
                         stoker__dataset_path(p->ds), nbad, REPLACE_TRIES, last);
            stoker__ring_fail(s, &w->err);
            return;
        }
        s->repaired = true; /* copies of finished pieces are stale */
        for (int64_t j = 0; j < b->count; j++) {
            if (!(s->marks[j] & REC_BAD))
                continue;
            s->marks[j] |= REC_REPLACED;
            b->ids[j] = replacement(p, (uint64_t)b->epoch, b->ids[j], attempt);
            if (locate(p, w, s, (uint64_t)j) < 0) {
                stoker__ring_fail(s, &w->err);
                return;
            }
        }
        if (!p->plan->rec_size || p->plan->fields.raggeds > 0) {
            /* Sizes changed (the records', or the room for their ragged fields): lay the
             * batch out again and read all of it. */
            if (layout(p, w, s) < 0) {
                stoker__ring_fail(s, &w->err);
                return;
            }
            for (int64_t j = 0; j < b->count; j++)
                s->marks[j] |= REC_BAD;
        }
        read_range(p, w, s, 0, (uint32_t)b->count, true);
    }
}

/* The batch's records are all decided (the GPU's share included): replaces the corrupt
 * ones, tells the GPU decode stage's split what the batch measured and publishes it. By the
 * worker that owns the slot's contents. */
static void finish(stoker__pool *p, stoker__worker *w, stoker__slot *s)
{
    if (p->plan->on_corrupt == STOKER_ON_CORRUPT_SKIP && count_marked(s, REC_BAD)) {
        repair(p, w, s);
        /* Counted as skipped only if this batch is delivered. */
        s->batch.replaced = count_marked(s, REC_REPLACED);
    }
    stoker__gdec_batch_done(p->gd, s);
    const stoker__pfields *pf = &p->plan->fields;
    if (pf->any_ragged && stoker__ring_failed(s) == 0)
        stoker__pfields_pack(pf, &s->batch, s->rows, s->place);
    stoker__ring_publish(p->ring, s);
}

/* Called by every piece's worker; the last one finishes the batch, or hands it to the GPU
 * decode stage when records of it were routed to the GPU. */
static void piece_done(stoker__pool *p, stoker__worker *w, stoker__slot *s, uint32_t piece)
{
    if (stoker__ring_piece_done(p->ring, s, piece) && !stoker__gdec_hand_over(p->gd, s))
        finish(p, w, s);
}

/* ---- the GPU decode stage's side (gpu_stage.h's host), with a worker's context ---- */

/* A record the GPU left, from its staged bytes (a record corrupt there too is corrupt as
 * always): a sample's image alone, its other fields being in place already. */
static void host_decode(void *ctx, stoker__slot *s, uint32_t j, const uint8_t *src, uint64_t n)
{
    stoker__worker *w = ctx;
    stoker__pool *p = w->pool;
    process_into(p, w, s, j, src, n, p->plan->fields.split ? PART_IMAGE : PART_ALL,
                 stoker__dataset_shard_path(p->ds, s->locs[j].shard));
}

static void host_finish(void *ctx, stoker__slot *s)
{
    stoker__worker *w = ctx;
    finish(w->pool, w, s);
}

/* ---- the workers ---- */

/* Whether the workers park: a restart is in progress (the pause protocol), or an epoch has
 * no batches at all. */
static bool held(const stoker__pool *p)
{
    return atomic_load_explicit(&p->halt, memory_order_acquire) || p->smp->nbatches == 0;
}

static void park(stoker__pool *p)
{
    pthread_mutex_lock(&p->mu);
    p->parked++;
    pthread_cond_broadcast(&p->cond);
    while ((p->paused || p->smp->nbatches == 0) && !atomic_load(&p->stop))
        stoker__timed_wait(&p->cond, &p->mu);
    p->parked--;
    pthread_mutex_unlock(&p->mu);
}

static bool host_held(void *ctx)
{
    const stoker__worker *w = ctx;
    return held(w->pool);
}

static void host_park(void *ctx)
{
    const stoker__worker *w = ctx;
    park(w->pool);
}

/* The plan's worker_nice (a measuring switch, docs/GPU.md) lowers the CPU workers'
 * scheduling priority, so that the consumer's threads (a training step's Python and autograd
 * threads, which launch its kernels) take a core before them when the cores are all busy.
 * Linux gives each thread its own nice value. */
static void lower_priority(const stoker__plan *pl)
{
    if (pl->worker_nice > 0)
        (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), pl->worker_nice);
}

static void *worker_main(void *arg)
{
    stoker__worker *w = arg;
    stoker__pool *p = w->pool;
    char name[16];
    snprintf(name, sizeof name, "stoker-w%u", w->index);
    stoker__thread_name(name);
    lower_priority(p->plan);
    while (!atomic_load_explicit(&p->stop, memory_order_acquire)) {
        if (held(p)) {
            park(p);
            continue;
        }
        if (stoker__gdec_retry(p->gd, w))
            continue;
        const uint64_t t = atomic_fetch_add_explicit(&p->ticket, 1, memory_order_relaxed);
        const uint64_t seq = t / p->plan->pieces;
        const uint32_t piece = (uint32_t)(t % p->plan->pieces);
        const int rc = stoker__ring_claim(p->ring, seq, &p->halt, prepare, w);
        if (rc < 0)
            continue;
        stoker__slot *s = stoker__ring_slot(p->ring, seq);
        const uint64_t j0 = (uint64_t)piece * STOKER__PIECE;
        const uint64_t count = (uint64_t)s->batch.count;
        if (rc == 0 && j0 < count) {
            const uint64_t j1 = j0 + STOKER__PIECE < count ? j0 + STOKER__PIECE : count;
            stoker__nvtx_push(STOKER__NVTX_PIECE);
            read_range(p, w, s, (uint32_t)j0, (uint32_t)j1, false);
            stoker__nvtx_pop();
        }
        piece_done(p, w, s, piece);
    }
    return NULL;
}

/* Per-worker resources: reader, request arrays and, for staged reads, the staging buffer
 * (room for a piece of largest records, at least one, at most 64 MiB beyond that). */
static int worker_init(stoker__pool *p, stoker__worker *w, uint32_t i, stoker__err *err)
{
    const stoker__plan *pl = p->plan;
    w->pool = p;
    w->index = i;
    int rc = stoker__reader_open(&w->reader, pl->backend, pl->read_ahead);
    if (rc < 0)
        return stoker__fail(err, rc, "%s: cannot set up the %s reader of worker %u: %s",
                            stoker__dataset_path(p->ds),
                            pl->backend == STOKER_BACKEND_IO_URING ? "io_uring" : "pread", i,
                            stoker_strerror(rc));
    const uint32_t d = w->reader->depth;
    w->reqs = stoker__calloc(d, sizeof *w->reqs);
    w->done = stoker__calloc(d, sizeof *w->done);
    w->req_first = stoker__calloc(d, sizeof *w->req_first);
    w->req_last = stoker__calloc(d, sizeof *w->req_last);
    if (!w->reqs || !w->done || !w->req_first || !w->req_last)
        return stoker__fail(err, -ENOMEM, "out of memory for worker %u", i);
    if (pl->staged) {
        const uint64_t one = stoker__align_up(pl->max_record ? pl->max_record : 1, DIRECT_ALIGN);
        uint64_t cap = one * STOKER__PIECE;
        if (cap / STOKER__PIECE != one || cap > STAGING_MAX)
            cap = one > STAGING_MAX ? one : STAGING_MAX;
        w->staging = stoker__aligned_alloc(DIRECT_ALIGN, (size_t)cap);
        if (!w->staging)
            return stoker__fail(err, -ENOMEM,
                                "out of memory for worker %u's %" PRIu64 "-byte staging buffer", i,
                                cap);
        w->staging_cap = (size_t)cap;
    }
    if ((pl->image || pl->fields.split) &&
        (rc = stoker__process_create(&w->proc, pl, &w->stats)) < 0)
        return stoker__fail(err, rc, "out of memory for worker %u's image scratch", i);
    w->gpu = p->gd && i == pl->threads;
    return 0;
}

int stoker__pool_create(stoker__pool *p, const stoker__plan *plan, stoker_dataset *ds,
                        stoker__ring *ring, const stoker__sampler *smp, stoker__gdec *gd,
                        stoker__err *err)
{
    memset(p, 0, sizeof *p);
    p->gd = gd;
    p->plan = plan;
    p->ds = ds;
    p->ring = ring;
    p->smp = smp;
    p->base_epoch = plan->epoch;
    if (plan->drop_behind) /* the reads' own read-ahead follows the order; the kernel's
                              would bring in pages no read asks for, never dropped */
        stoker__dataset_advise(ds, POSIX_FADV_RANDOM);
    if (pthread_mutex_init(&p->mu, NULL) != 0)
        return stoker__fail(err, -ENOMEM, "cannot create the worker pool's lock");
    if (pthread_cond_init(&p->cond, NULL) != 0) {
        pthread_mutex_destroy(&p->mu);
        return stoker__fail(err, -ENOMEM, "cannot create the worker pool's condition");
    }
    p->has_locks = true;
    if (plan->image && !stoker_dataset_jpeg_checked(ds)) {
        const uint64_t words = plan->records / 64 + 1;
        p->clean = stoker__calloc((size_t)words, sizeof *p->clean);
        if (!p->clean)
            return stoker__fail(err, -ENOMEM,
                                "out of memory for the %" PRIu64
                                " records' marks of a data set not checked when packed",
                                plan->records);
    }
    const uint32_t n = plan->threads + (gd ? 1u : 0u);
    p->workers = stoker__aligned_alloc(64, sizeof(stoker__worker) * n);
    if (!p->workers)
        return stoker__fail(err, -ENOMEM, "out of memory for %u workers", n);
    memset(p->workers, 0, sizeof(stoker__worker) * n);
    for (uint32_t i = 0; i < n; i++) {
        p->nworkers = i + 1;
        const int rc = worker_init(p, &p->workers[i], i, err);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* The order to come, for a source that reads ahead (remote shards): batch seq's ids. */
static uint64_t future_batch(void *ctx, uint64_t seq, int64_t *ids)
{
    const stoker__pool *p = ctx;
    if (p->smp->nbatches == 0)
        return 0;
    uint64_t epoch, pos;
    stoker__pool_position(p, seq, &epoch, &pos);
    stoker__sampler_batch(p->smp, epoch, pos, ids);
    return stoker__sampler_batch_count(p->smp, pos);
}

static void follow(stoker__pool *p)
{
    const stoker__future f = {future_batch, p, 0, p->smp->batch};
    stoker__dataset_follow(p->ds, &f);
}

int stoker__pool_start(stoker__pool *p, stoker__err *err)
{
    follow(p);
    for (uint32_t i = 0; i < p->nworkers; i++) {
        stoker__worker *w = &p->workers[i];
        if (w->gpu) {
            const stoker__gdec_host host = {host_decode, host_finish, host_held,
                                            host_park,   &p->stop,    &p->halt};
            const int rc = stoker__gdec_run(p->gd, &host, w, err);
            if (rc < 0)
                return rc;
            continue;
        }
        const int rc = stoker__thread_start(&w->thread, worker_main, w);
        if (rc != 0)
            return stoker__fail(err, -rc, "cannot start worker thread %u: %s", i,
                                stoker_strerror(-rc));
        w->started = true;
    }
    return 0;
}

void stoker__pool_destroy(stoker__pool *p)
{
    if (p->ds) {
        stoker__dataset_follow(p->ds, NULL);
        stoker__dataset_interrupt(p->ds, true); /* no worker waits on the network */
    }
    atomic_store_explicit(&p->stop, true, memory_order_release);
    atomic_store_explicit(&p->halt, true, memory_order_release);
    for (uint32_t i = 0; p->workers && i < p->nworkers; i++)
        if (p->workers[i].started)
            pthread_join(p->workers[i].thread, NULL);
    stoker__gdec_stop(p->gd); /* the GPU worker, which uses the last worker's resources */
    if (p->ds)                /* the data set may outlive the loader */
        stoker__dataset_interrupt(p->ds, false);
    for (uint32_t i = 0; p->workers && i < p->nworkers; i++) {
        stoker__worker *w = &p->workers[i];
        stoker__reader_close(w->reader);
        stoker__free(w->reqs);
        stoker__free(w->done);
        stoker__free(w->req_first);
        stoker__free(w->req_last);
        stoker__free(w->staging);
        stoker__process_destroy(w->proc);
    }
    stoker__free(p->workers);
    p->workers = NULL;
    stoker__free((void *)p->clean);
    p->clean = NULL;
    if (p->has_locks) {
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cond);
        p->has_locks = false;
    }
}

/* ---- control ---- */

void stoker__pool_pause(stoker__pool *p)
{
    pthread_mutex_lock(&p->mu);
    p->paused = true;
    atomic_store_explicit(&p->halt, true, memory_order_release);
    pthread_mutex_unlock(&p->mu);
    stoker__ring_wake_all(p->ring);
    /* a batch a worker gives up on fails in its slot, which the restart resets */
    stoker__dataset_interrupt(p->ds, true);
    pthread_mutex_lock(&p->mu);
    while (p->parked < p->nworkers)
        stoker__timed_wait(&p->cond, &p->mu);
    pthread_mutex_unlock(&p->mu);
    stoker__dataset_follow(p->ds, NULL); /* the order may change now */
    stoker__dataset_interrupt(p->ds, false);
}

void stoker__pool_resume(stoker__pool *p, uint64_t epoch, uint64_t pos)
{
    pthread_mutex_lock(&p->mu);
    stoker__gdec_drop_queue(p->gd); /* slots queued before the pause were reset with the ring */
    atomic_store(&p->ticket, 0);
    p->base_epoch = epoch;
    p->base_pos = pos;
    p->paused = false;
    follow(p); /* before any worker prepares a batch of the new order */
    atomic_store_explicit(&p->halt, false, memory_order_release);
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->mu);
}

#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

void stoker__pool_stats_get(const stoker__pool *p, stoker__pool_stats *s)
{
    memset(s, 0, sizeof *s);
    uint64_t ns[6] = {0}, inflight = 0, samples = 0;
    for (uint32_t i = 0; p->workers && i < p->nworkers; i++) {
        const stoker__wstats *w = &p->workers[i].stats;
        s->records += LOAD(w->records);
        s->bytes += LOAD(w->bytes);
        s->reduced += LOAD(w->reduced);
        s->dropped += LOAD(w->dropped);
        s->decoded += LOAD(w->decoded);
        s->whole += LOAD(w->whole);
        inflight += LOAD(w->inflight_sum);
        samples += LOAD(w->inflight_n);
        ns[0] += LOAD(w->read_ns);
        ns[1] += LOAD(w->crc_ns);
        ns[2] += LOAD(w->process_ns);
        ns[3] += LOAD(w->decode_ns);
        ns[4] += LOAD(w->resize_ns);
        ns[5] += LOAD(w->normalize_ns);
    }
    s->reads_in_flight = samples ? (double)inflight / (double)samples : 0;
    s->read_s = (double)ns[0] * 1e-9;
    s->crc_s = (double)ns[1] * 1e-9;
    s->process_s = (double)ns[2] * 1e-9;
    s->decode_s = (double)ns[3] * 1e-9;
    s->resize_s = (double)ns[4] * 1e-9;
    s->normalize_s = (double)ns[5] * 1e-9;
}
