/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the HDF5 source's own code: the input describes what libhdf5 would have
 * answered at open (rank, shape, chunk shape, element size, filter pipeline, and each
 * chunk's address, stored size and filter mask) and also serves as the file those chunks
 * point into. The record map is built from it with the checks of hdf5_map.c, then every
 * record is assembled by hdf5_fetch.c: chunk reads, inflation, unshuffling and the copies
 * into place, once inside the fetch and again through planned reads. libhdf5 itself is not
 * exercised (it is not robust against malicious files; see docs/HDF5.md).
 *
 * Input layout (little-endian; missing bytes read as 0):
 *   rank-1 (mod 4), log2 element size (mod 3), filters (count mod 3; bit 2: first is
 *   shuffle, bit 3: second is shuffle, else deflate), then per axis dim (mod 24) and chunk
 *   dim (mod 9, 0 taken as 1), then per chunk a 2-byte address (0xFFFF: not allocated), a
 *   2-byte stored size and a 1-byte filter mask.
 *
 * Built without HDF5, there is no HDF5 source: every input is accepted as is. */
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifdef STOKER_HAVE_HDF5
#include "format/format.h"
#include "source/hdf5.h"

#include <sys/mman.h>
#include <unistd.h>

typedef struct fuzz_in {
    const uint8_t *p;
    size_t n;
} fuzz_in;

static uint64_t take(fuzz_in *in, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes && in->n > 0; i++, in->p++, in->n--)
        v |= (uint64_t)in->p[0] << (8 * i);
    return v;
}

/* Shape, filters and chunk table from the input; the rest of the input is the "file". */
static bool fuzz_map(stoker__h5 *h, fuzz_in *in, uint64_t file_size)
{
    h->rank = 1 + (int)(take(in, 1) % 4);
    h->esize = (size_t)1 << (take(in, 1) % 3);
    const uint64_t f = take(in, 1);
    h->nfilters = (int)(f % 3);
    h->filters[0] = f & 4 ? H5Z_FILTER_SHUFFLE : H5Z_FILTER_DEFLATE;
    h->filters[1] = f & 8 ? H5Z_FILTER_SHUFFLE : H5Z_FILTER_DEFLATE;
    uint64_t elems = 1;
    for (int d = 0; d < h->rank; d++) {
        h->dims[d] = take(in, 1) % 24;
        h->cdims[d] = take(in, 1) % 9;
        elems *= h->dims[d] ? h->dims[d] : 1;
    }
    if (!stoker__h5_grid(h) || h->nchunks > 4096 || elems > 65536)
        return false;
    h->chunks = stoker__calloc(h->nchunks, sizeof *h->chunks);
    if (!h->chunks)
        return false;
    for (uint64_t i = 0; i < h->nchunks; i++) {
        stoker__h5_chunk *c = &h->chunks[i];
        const uint64_t a = take(in, 2);
        c->addr = a == 0xFFFF ? UINT64_MAX : a;
        c->size = take(in, 2);
        c->mask = (uint32_t)take(in, 1);
        if (!stoker__h5_chunk_fits(h, c, file_size))
            return false;
    }
    h->row_bytes = h->esize;
    for (int d = 1; d < h->rank; d++)
        h->row_bytes *= h->dims[d];
    h->records = h->dims[0];
    h->fill_zero = true;
    h->mode = H5M_CHUNKS;
    return true;
}

/* Fetches records id and id + 1 as a loader worker does: planned in one round, the
 * planned reads made (with pread here) and handed back, then both assembled. */
static void fuzz_planned(stoker_dataset *ds, int64_t id, uint64_t round, uint8_t *buf)
{
    const stoker__h5 *h = ds->state;
    const int64_t last = id + 1 < (int64_t)h->records ? id + 1 : id;
    stoker__recloc loc = {.length = h->row_bytes, .fetch = 1};
    for (int64_t i = id; i <= last; i++) {
        stoker__fetch_read fr[STOKER__FETCH_READS];
        uint32_t n = 0;
        stoker__h5_plan(ds, i, &loc, round, NULL, fr, STOKER__FETCH_READS, &n);
        for (uint32_t k = 0; k < n; k++) {
            const ssize_t got =
                pread(fr[k].fd, fr[k].dst, (size_t)fr[k].length, (off_t)fr[k].offset);
            stoker__h5_landed(ds, fr[k].cookie, fr[k].length, got < 0 ? -errno : got);
        }
    }
    for (int64_t i = id; i <= last; i++) {
        stoker__err err;
        const uint8_t *out = NULL;
        stoker__h5_fetch(ds, i, &loc, buf, &out, NULL, &err);
    }
}

/* Every record fetched in one go, then again in pairs through planned reads. */
static void fuzz_records(stoker_dataset *ds, const stoker__h5 *h)
{
    uint8_t *buf = stoker__malloc(h->row_bytes ? h->row_bytes : 1);
    for (int64_t id = 0; buf && id < (int64_t)h->records; id++) {
        stoker__recloc loc = {.length = h->row_bytes, .fetch = 1};
        stoker__err err;
        const uint8_t *out = NULL;
        stoker__h5_fetch(ds, id, &loc, buf, &out, NULL, &err);
    }
    static uint64_t rounds; /* a worker's rounds only grow */
    for (int64_t id = 0; buf && id < (int64_t)h->records; id += 2)
        fuzz_planned(ds, id, ++rounds, buf);
    stoker__free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in in = {data, size};
    const int fd = memfd_create("fuzz_hdf5_map", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    stoker_dataset *ds = stoker__calloc(1, sizeof *ds); /* the source alone: no open */
    stoker__h5 *h = stoker__calloc(1, sizeof *h);
    if (ds && h && write(fd, data, size) == (ssize_t)size && fuzz_map(h, &in, size)) {
        h->fd = fd;
        /* apart from real data sets' serials, and from earlier inputs' chunks still in this
         * thread's cache */
        static uint64_t runs;
        h->serial = UINT64_MAX - 1 - runs++;
        ds->state = h;
        fuzz_records(ds, h);
    }
    close(fd);
    if (h)
        stoker__free(h->chunks);
    stoker__free(h);
    stoker__free(ds);
    return 0;
}

#else

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    (void)data;
    (void)size;
    return 0;
}

#endif
