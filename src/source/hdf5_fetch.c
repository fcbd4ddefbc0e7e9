/* SPDX-License-Identifier: Apache-2.0 */
/* HDF5 records that are not one extent on disk: assembled from whole chunks (inflated and
 * unshuffled here, in the calling worker), or, for what cannot be mapped, read with H5Dread
 * under the global lock.
 *
 * A loader worker reads the chunks through its own reader: it plans a round of records
 * (stoker__h5_plan lists the stored chunks they lack and reserves cache entries for them),
 * submits those reads with the round's others, hands each completion back
 * (stoker__h5_landed), and then fetches the records, which find every chunk in the cache.
 * Any other caller (stoker_dataset_read, stoker-pack), and a record that needs more chunks
 * than the cache holds, reads the chunks it misses with pread inside the fetch.
 *
 * Each thread keeps a small cache of decoded chunks (keyed by data set serial and chunk
 * number), so neighbouring records of one chunk, or the many records of a large chunk,
 * read and inflate it once, whether the caller is a loader worker or stoker_dataset_read.
 * A chunk is always decoded whole, so that a deflated chunk's checksum (at its end) is
 * checked before any of its records goes out.
 * The cache lives in thread-specific data and is freed when the thread exits. */
#include "source/hdf5.h"

#include <stdio.h>
#include <string.h>
#include <zlib.h>

#define CACHE_MAX 16                     /* chunks per thread at most */
#define CACHE_BYTES (UINT64_C(64) << 20) /* and about this many bytes */

typedef struct h5_entry {
    uint64_t serial, index, tick;
    uint64_t pin; /* the plan round that needs it: not evicted while that round lasts */
    uint8_t *data;
    size_t cap;
    uint64_t valid; /* decoded bytes at the front of data */
    bool landing;   /* a planned read of its stored bytes has not landed yet */
    bool stored;    /* its stored bytes are in raw, not decoded yet (filtered chunks) */
    int rerr;       /* the planned read failed: the fetch reports this */
    uint8_t *raw;
    size_t raw_cap;
} h5_entry;

typedef struct h5_cache {
    h5_entry e[CACHE_MAX];
    uint64_t tick;
    uint64_t round; /* the round of the latest plan */
    uint8_t *tmp, *rec;
    size_t tmp_cap, rec_cap;
    const atomic_int *cancel; /* the current fetch's: what a remote read gives up on */
    stoker__err rerr;         /* a remote read's failure in the current fetch */
} h5_cache;

static void entry_end(h5_entry *e)
{
    e->serial = 0;
    e->valid = 0;
    e->landing = false;
    e->stored = false;
    e->rerr = 0;
}

static void cache_free(h5_cache *c)
{
    for (int i = 0; i < CACHE_MAX; i++) {
        entry_end(&c->e[i]);
        stoker__free(c->e[i].data);
        stoker__free(c->e[i].raw);
    }
    stoker__free(c->tmp);
    stoker__free(c->rec);
}

static void cache_destroy(void *p)
{
    cache_free(p);
    stoker__free(p);
}

static stoker__thread_key cache_key = STOKER__THREAD_KEY(h5_cache, cache_destroy);

static h5_cache *thread_cache(void)
{
    return stoker__thread_object(&cache_key);
}

/* ---- filters ---- */

static void unshuffle(const uint8_t *in, uint8_t *out, uint64_t len, size_t es)
{
    const uint64_t n = len / es;
    for (size_t b = 0; b < es; b++) {
        const uint8_t *src = in + b * n;
        for (uint64_t k = 0; k < n; k++)
            out[k * es + b] = src[k];
    }
    memcpy(out + n * es, in + n * es, (size_t)(len - n * es)); /* the tail is not shuffled */
}

int stoker__h5_decode(const stoker__h5 *h, uint32_t mask, uint8_t *raw, uint64_t size, uint8_t *out,
                      uint8_t *tmp)
{
    const uint8_t *cur = raw;
    uint64_t len = size;
    for (int i = h->nfilters - 1; i >= 0; i--) {
        if (mask & (1u << i))
            continue; /* the writer skipped this filter for this chunk */
        uint8_t *dst = cur == tmp ? out : tmp;
        if (h->filters[i] == H5Z_FILTER_DEFLATE) {
            uLongf got = (uLongf)h->chunk_bytes;
            if (uncompress(dst, &got, cur, (uLong)len) != Z_OK)
                return STOKER_E_CORRUPT;
            len = got;
        } else {
            if (len > h->chunk_bytes)
                return STOKER_E_CORRUPT;
            unshuffle(cur, dst, len, h->esize);
        }
        cur = dst;
    }
    if (len != h->chunk_bytes)
        return STOKER_E_CORRUPT;
    if (cur != out)
        memcpy(out, cur, (size_t)len);
    return 0;
}

/* ---- chunks ---- */

int stoker__h5_read_at(const stoker__h5 *h, uint8_t *dst, uint64_t len, uint64_t off,
                       const atomic_int *cancel, stoker__err *err)
{
    if (h->remote)
        return h->remote->read(h->remote->ctx, dst, len, off, cancel, err);
    return stoker__pread_full(h->fd, dst, (size_t)len, off);
}

static void fill_chunk(const stoker__h5 *h, uint8_t *p)
{
    if (h->fill_zero) {
        memset(p, 0, (size_t)h->chunk_bytes);
        return;
    }
    for (uint64_t i = 0; i + h->esize <= h->chunk_bytes; i += h->esize)
        memcpy(p + i, h->fill, h->esize);
}

/* Where a chunk's stored bytes go: straight into data without filters, else into raw
 * (both grown first). NULL when out of memory. */
static uint8_t *stored_dst(const stoker__h5 *h, h5_entry *e, const stoker__h5_chunk *k)
{
    if (stoker__scratch_grow(&e->data, &e->cap, h->chunk_bytes) < 0)
        return NULL;
    if (h->nfilters == 0)
        return e->data;
    return stoker__scratch_grow(&e->raw, &e->raw_cap, k->size) < 0 ? NULL : e->raw;
}

/* Decodes an entry whose stored bytes are in place (stored_dst), whole: a deflated chunk's
 * checksum covers all of it and is at its end, so no record of a chunk goes out before the
 * whole chunk has been checked. */
static int entry_decode(const stoker__h5 *h, h5_cache *c, h5_entry *e, const stoker__h5_chunk *k)
{
    if (h->nfilters == 0) {
        e->valid = h->chunk_bytes;
        return 0;
    }
    if (stoker__scratch_grow(&c->tmp, &c->tmp_cap, h->chunk_bytes) < 0)
        return -ENOMEM;
    const int rc = stoker__h5_decode(h, k->mask, e->raw, k->size, e->data, c->tmp);
    if (rc == 0)
        e->valid = h->chunk_bytes;
    return rc;
}

/* Fills a fresh entry with chunk `index`, read now with pread (or the fill value), decoded. */
static int entry_load(const stoker__h5 *h, h5_cache *c, h5_entry *e, uint64_t index)
{
    const stoker__h5_chunk *k = &h->chunks[index];
    if (k->addr == UINT64_MAX) {
        if (stoker__scratch_grow(&e->data, &e->cap, h->chunk_bytes) < 0)
            return -ENOMEM;
        fill_chunk(h, e->data);
        e->valid = h->chunk_bytes;
        return 0;
    }
    uint8_t *dst = stored_dst(h, e, k);
    if (!dst)
        return -ENOMEM;
    const uint64_t size = h->nfilters ? k->size : h->chunk_bytes;
    const int rc = stoker__h5_read_at(h, dst, size, k->addr, c->cancel, &c->rerr);
    return rc < 0 ? rc : entry_decode(h, c, e, k);
}

/* How many entries a data set's chunks may use: about CACHE_BYTES, 2 to CACHE_MAX. */
static int cache_room(const stoker__h5 *h)
{
    const uint64_t room = CACHE_BYTES / (h->chunk_bytes ? h->chunk_bytes : 1);
    return room < 2 ? 2 : room > CACHE_MAX ? CACHE_MAX : (int)room;
}

static h5_entry *cache_find(h5_cache *c, int n, uint64_t serial, uint64_t index)
{
    for (int i = 0; i < n; i++)
        if (c->e[i].serial == serial && c->e[i].index == index && c->e[i].data)
            return &c->e[i];
    return NULL;
}

/* The least recently used entry that the current round does not hold (any, if all are). */
static h5_entry *cache_victim(h5_cache *c, int n)
{
    h5_entry *v = NULL, *any = &c->e[0];
    for (int i = 0; i < n; i++) {
        h5_entry *e = &c->e[i];
        any = e->tick < any->tick ? e : any;
        if ((e->serial == 0 || e->pin != c->round) && (!v || e->tick < v->tick))
            v = e;
    }
    return v ? v : any;
}

/* Chunk `index` decoded, from the cache or read now (the least recently used entry
 * evicted). A planned read that failed is reported here. */
static const uint8_t *get_chunk(const stoker__h5 *h, h5_cache *c, uint64_t index, int *rc)
{
    h5_entry *e = cache_find(c, cache_room(h), h->serial, index);
    const stoker__h5_chunk *k = &h->chunks[index];
    if (e && e->landing)
        entry_end(e); /* planned in a round that was given up: its read never landed */
    if (!e || !e->serial) {
        e = e ? e : cache_victim(c, cache_room(h));
        entry_end(e);
        *rc = entry_load(h, c, e, index);
    } else if (e->rerr) {
        *rc = e->rerr;
    } else if (e->stored) {
        e->stored = false;
        *rc = entry_decode(h, c, e, k);
    } else {
        *rc = e->valid == h->chunk_bytes ? 0 : STOKER_E_CORRUPT;
    }
    if (*rc < 0) {
        entry_end(e);
        return NULL;
    }
    e->serial = h->serial;
    e->index = index;
    e->tick = ++c->tick;
    return e->data;
}

/* Copies the part of chunk `cc` (chunk coordinates) that lies in rows [r0, r1) to dst,
 * which holds those rows densely. Runs along the last axis are contiguous on both sides. */
static void copy_part(const stoker__h5 *h, const uint8_t *chunk, const uint64_t *cc, uint64_t r0,
                      uint64_t r1, uint8_t *dst)
{
    const int R = h->rank;
    uint64_t lo[STOKER__H5_MAX_RANK], hi[STOKER__H5_MAX_RANK], ds[STOKER__H5_MAX_RANK],
        cs[STOKER__H5_MAX_RANK], at[STOKER__H5_MAX_RANK];
    for (int d = 0; d < R; d++) {
        const uint64_t a = cc[d] * h->cdims[d], b = a + h->cdims[d];
        const uint64_t rlo = d == 0 ? r0 : 0, rhi = d == 0 ? r1 : h->dims[d];
        lo[d] = at[d] = a > rlo ? a : rlo;
        hi[d] = b < rhi ? b : rhi;
    }
    ds[R - 1] = cs[R - 1] = h->esize;
    for (int d = R - 2; d >= 0; d--) {
        ds[d] = ds[d + 1] * h->dims[d + 1]; /* dst holds whole rows */
        cs[d] = cs[d + 1] * h->cdims[d + 1];
    }
    const size_t run = (size_t)((hi[R - 1] - lo[R - 1]) * h->esize);
    for (;;) {
        uint64_t so = 0, dof = 0;
        for (int d = 0; d < R; d++) {
            so += (at[d] - cc[d] * h->cdims[d]) * cs[d];
            dof += (at[d] - (d == 0 ? r0 : 0)) * ds[d];
        }
        memcpy(dst + dof, chunk + so, run);
        int d = R - 2;
        while (d >= 0 && ++at[d] == hi[d]) {
            at[d] = lo[d];
            d--;
        }
        if (d < 0)
            return;
    }
}

/* The chunks that rows [r0, r1) touch (r0 < r1), in grid order: walk_first sets the
 * walk's bounds and its first chunk cc; walk_next steps cc, false after the last. */
static void walk_first(const stoker__h5 *h, uint64_t r0, uint64_t r1, uint64_t *lo, uint64_t *hi,
                       uint64_t *cc)
{
    for (int d = 0; d < h->rank; d++) {
        lo[d] = cc[d] = d == 0 ? r0 / h->cdims[0] : 0;
        hi[d] = d == 0 ? (r1 - 1) / h->cdims[0] + 1 : h->grid[d];
    }
}

static bool walk_next(const stoker__h5 *h, const uint64_t *lo, const uint64_t *hi, uint64_t *cc)
{
    int d = h->rank - 1;
    while (d >= 0 && ++cc[d] == hi[d]) {
        cc[d] = lo[d];
        d--;
    }
    return d >= 0;
}

static uint64_t walk_index(const stoker__h5 *h, const uint64_t *cc)
{
    uint64_t index = 0;
    for (int d = 0; d < h->rank; d++)
        index = index * h->grid[d] + cc[d];
    return index;
}

/* Assembles rows [r0, r1) from every chunk they touch. */
static int assemble(const stoker__h5 *h, h5_cache *c, uint64_t r0, uint64_t r1, uint8_t *dst)
{
    if (r1 <= r0 || h->row_bytes == 0)
        return 0; /* an empty record (some axis has length 0): no chunk to visit */
    uint64_t lo[STOKER__H5_MAX_RANK], hi[STOKER__H5_MAX_RANK], cc[STOKER__H5_MAX_RANK];
    walk_first(h, r0, r1, lo, hi, cc);
    do {
        int rc = 0;
        const uint8_t *chunk = get_chunk(h, c, walk_index(h, cc), &rc);
        if (!chunk)
            return rc;
        copy_part(h, chunk, cc, r0, r1, dst);
    } while (walk_next(h, lo, hi, cc));
    return 0;
}

/* ---- planned reads: the worker's reader reads the chunks ---- */

/* An entry that serves the round as it is: decoded whole, or stored bytes not decoded
 * yet. Not one whose read failed or never landed. */
static bool entry_usable(const h5_entry *e)
{
    return e && e->serial && !e->landing && !e->rerr;
}

/* Three walks over the record's chunks: the first decides whether it fits the round (every
 * chunk the round needs must be held at once, within the cache's room, and its reads
 * within cap), so that a record that does not fit changes nothing; the second holds the
 * cached chunks, so that the third, which reserves entries for the missing ones and lists
 * their reads, never evicts one of them (which would take a read beyond cap). */
int stoker__h5_plan(stoker_dataset *ds, int64_t id, const stoker__recloc *loc, uint64_t round,
                    uint8_t *dst, stoker__fetch_read *out, uint32_t cap, uint32_t *n)
{
    (void)loc;
    (void)dst; /* chunks are read whole into the cache: a record is assembled from them */
    const stoker__h5 *h = ds->state;
    /* a remote file's chunks come through the transport inside the fetch */
    h5_cache *c = h->mode == H5M_CHUNKS && !h->remote ? thread_cache() : NULL;
    *n = 0;
    if (!c)
        return STOKER__PLAN_NONE;
    c->round = round;
    uint64_t r0, r1;
    stoker__h5_rows(h, id, &r0, &r1);
    if (r1 <= r0 || h->row_bytes == 0)
        return STOKER__PLAN_OK;
    const int room = cache_room(h);
    int held = 0, more = 0;
    uint32_t reads = 0;
    for (int i = 0; i < room; i++)
        held += c->e[i].serial != 0 && c->e[i].pin == round;
    uint64_t lo[STOKER__H5_MAX_RANK], hi[STOKER__H5_MAX_RANK], cc[STOKER__H5_MAX_RANK];
    walk_first(h, r0, r1, lo, hi, cc);
    do {
        const uint64_t index = walk_index(h, cc);
        const h5_entry *e = cache_find(c, room, h->serial, index);
        if (e && e->pin == round)
            continue; /* held already (cached, or its read is in this round) */
        more++;
        reads += !entry_usable(e) && h->chunks[index].addr != UINT64_MAX;
        if (held + more > room || reads > cap)
            return STOKER__PLAN_FULL;
    } while (walk_next(h, lo, hi, cc));
    walk_first(h, r0, r1, lo, hi, cc);
    do {
        h5_entry *e = cache_find(c, room, h->serial, walk_index(h, cc));
        if (e && (e->pin == round || entry_usable(e))) {
            e->pin = round;
            e->tick = ++c->tick;
        }
    } while (walk_next(h, lo, hi, cc));
    walk_first(h, r0, r1, lo, hi, cc);
    do {
        const uint64_t index = walk_index(h, cc);
        const stoker__h5_chunk *k = &h->chunks[index];
        h5_entry *e = cache_find(c, room, h->serial, index);
        if (e && e->pin == round)
            continue; /* held */
        e = e ? e : cache_victim(c, room);
        entry_end(e);
        uint8_t *dst = k->addr == UINT64_MAX ? NULL : stored_dst(h, e, k);
        if (k->addr == UINT64_MAX && stoker__scratch_grow(&e->data, &e->cap, h->chunk_bytes) == 0) {
            fill_chunk(h, e->data); /* never written: nothing to read */
            e->valid = h->chunk_bytes;
        } else if (!dst || *n == cap) {
            /* out of memory (or, never expected, more reads than counted): the fetch reads
             * what is missing, and reports any failure; entries left landing are reloaded */
            *n = 0;
            return STOKER__PLAN_NONE;
        }
        e->serial = h->serial;
        e->index = index;
        e->pin = round;
        e->tick = ++c->tick;
        if (!dst)
            continue;
        e->landing = true;
        out[(*n)++] = (stoker__fetch_read){
            .fd = h->fd,
            .offset = k->addr,
            .length = h->nfilters ? k->size : h->chunk_bytes,
            .dst = dst,
            .cookie = (uint32_t)(e - c->e),
        };
    } while (walk_next(h, lo, hi, cc));
    return STOKER__PLAN_OK;
}

void stoker__h5_landed(stoker_dataset *ds, uint32_t cookie, uint64_t length, int64_t res)
{
    (void)ds;
    h5_cache *c = thread_cache();
    if (!c || cookie >= CACHE_MAX || !c->e[cookie].landing)
        return;
    h5_entry *e = &c->e[cookie];
    e->landing = false;
    if (res < 0)
        e->rerr = (int)res;
    else if ((uint64_t)res < length)
        e->rerr = STOKER_E_CORRUPT; /* the file ends inside the chunk */
    else
        e->stored = true; /* decoded by the first fetch that needs it */
}

/* ---- the serialised reads ---- */

/* Both readers take the reason off libhdf5's error stack at once: the next API call,
 * even a successful close, clears it. */
static int read_rows(const stoker__h5 *h, uint64_t r0, uint64_t r1, uint8_t *dst, char *why,
                     size_t cap)
{
    hsize_t start[STOKER__H5_MAX_RANK] = {0}, count[STOKER__H5_MAX_RANK];
    for (int d = 0; d < h->rank; d++)
        count[d] = d == 0 ? r1 - r0 : h->dims[d];
    start[0] = r0;
    if (r1 == r0)
        return 0;
    const hid_t fs = H5Dget_space(h->did);
    const hid_t ms = H5Screate_simple(h->rank, count, NULL);
    herr_t r =
        fs < 0 || ms < 0 ? -1 : H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
    if (r >= 0)
        r = H5Dread(h->did, h->mtype, ms, fs, H5P_DEFAULT, dst);
    const int rc = r < 0 ? stoker__h5_read_failure(why, cap) : 0;
    H5Sclose(ms);
    H5Sclose(fs);
    return rc;
}

static int read_vlen(const stoker__h5 *h, uint64_t row, uint64_t len, uint8_t *dst, char *why,
                     size_t cap)
{
    const hsize_t start = row, one = 1;
    const hid_t fs = H5Dget_space(h->did);
    const hid_t ms = H5Screate_simple(1, &one, NULL);
    hvl_t v = {0, NULL};
    herr_t r =
        fs < 0 || ms < 0 ? -1 : H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &one, NULL);
    if (r >= 0)
        r = H5Dread(h->did, h->mtype, ms, fs, H5P_DEFAULT, &v);
    const int failed = r < 0 ? stoker__h5_read_failure(why, cap) : 0;
    const uint64_t got = (uint64_t)v.len * h->esize;
    if (r >= 0 && got != len)
        snprintf(why, cap, "%llu bytes, %llu at open (file changed?)", (unsigned long long)got,
                 (unsigned long long)len);
    const bool ok = r >= 0 && got == len;
    if (ok && len)
        memcpy(dst, v.p, (size_t)len);
    if (r >= 0)
        H5Dvlen_reclaim(h->mtype, ms, H5P_DEFAULT, &v);
    H5Sclose(ms);
    H5Sclose(fs);
    return ok ? 0 : failed < 0 ? failed : STOKER_E_CORRUPT;
}

/* libhdf5 reads a remote file through the transport (hdf5_vfd.c): a failed read there is
 * the cause, with its own message (the URL, the status), whatever libhdf5 made of it. */
static int serial_read(const stoker__h5 *h, int64_t id, uint64_t len, uint8_t *dst,
                       const atomic_int *cancel, char *why, size_t cap)
{
    uint64_t r0, r1;
    stoker__h5_rows(h, id, &r0, &r1);
    stoker__h5_lock();
    if (h->remote) {
        h->remote->rc = 0;
        h->remote->cancel = cancel;
    }
    int rc = h->mode == H5M_VLEN ? read_vlen(h, (uint64_t)id, len, dst, why, cap)
                                 : read_rows(h, r0, r1, dst, why, cap);
    if (h->remote && h->remote->rc < 0) {
        rc = h->remote->rc;
        snprintf(why, cap, "%s", h->remote->err.msg);
    }
    if (h->remote)
        h->remote->cancel = NULL;
    stoker__h5_unlock();
    return rc;
}

/* A contiguous record of a remote file, read through the transport. */
static int extent_read(const stoker__h5 *h, int64_t id, uint64_t length, uint8_t *dst, h5_cache *c)
{
    uint64_t r0, r1;
    stoker__h5_rows(h, id, &r0, &r1);
    return stoker__h5_read_at(h, dst, length, h->base + r0 * h->row_bytes, c->cancel, &c->rerr);
}

/* Record id (length bytes) into buf, through the thread's chunk cache c. */
static int read_record(const stoker__h5 *h, h5_cache *c, int64_t id, uint64_t length, uint8_t *buf,
                       const atomic_int *cancel, stoker__err *err)
{
    char why[STOKER_ERRMSG_CAP] = "";
    int rc = 0;
    c->cancel = cancel;
    c->rerr.msg[0] = '\0';
    if (h->mode == H5M_CHUNKS || h->mode == H5M_EXTENT) {
        uint64_t r0, r1;
        stoker__h5_rows(h, id, &r0, &r1);
        rc = h->mode == H5M_CHUNKS ? assemble(h, c, r0, r1, buf)
                                   : extent_read(h, id, length, buf, c);
        snprintf(why, sizeof why, "%s",
                 c->rerr.msg[0]           ? c->rerr.msg
                 : rc == STOKER_E_CORRUPT ? "a chunk is cut short or does not decode to its size "
                                            "(truncated or damaged file)"
                                          : stoker_strerror(rc));
    } else {
        rc = serial_read(h, id, length, buf, cancel, why, sizeof why);
    }
    c->cancel = NULL;
    STOKER_RETURN_IF(rc < 0, err, rc, "%s: dataset %s%s%s: record %lld: %s", h->file,
                     stoker__h5_shown(h), h->data_file ? ", bytes in " : "",
                     h->data_file ? h->data_file : "", (long long)id, why);
    return 0;
}

int stoker__h5_read_record(const stoker__h5 *h, int64_t id, uint64_t length, uint8_t *dst,
                           const atomic_int *cancel, stoker__err *err)
{
    h5_cache local;
    memset(&local, 0, sizeof local);
    h5_cache *c = thread_cache();
    c = c ? c : &local; /* no thread-specific data: this call decodes without a cache */
    const int rc = read_record(h, c, id, length, dst, cancel, err);
    if (c == &local)
        cache_free(&local);
    return rc;
}

/* ---- the source's fetch ---- */

int stoker__h5_fetch(stoker_dataset *ds, int64_t id, const stoker__recloc *loc, uint8_t *dst,
                     const uint8_t **out, const atomic_int *cancel, stoker__err *err)
{
    const stoker__h5 *h = ds->state;
    h5_cache local;
    memset(&local, 0, sizeof local);
    h5_cache *c = thread_cache();
    c = c ? c : &local; /* no thread-specific data: this call decodes without a cache */
    STOKER_RETURN_IF(!dst && stoker__scratch_grow(&c->rec, &c->rec_cap, loc->length) < 0, err,
                     -ENOMEM, "%s: record %lld: out of memory", h->file, (long long)id);
    uint8_t *buf = dst ? dst : c->rec;
    const int rc = read_record(h, c, id, loc->length, buf, cancel, err);
    if (c == &local)
        cache_free(&local);
    *out = buf;
    return rc;
}
