/* SPDX-License-Identifier: Apache-2.0 */
/* The record map's arithmetic: chunk grids, chunk extents, blob offsets. These take
 * libhdf5's answers (which a damaged or malicious file can make anything) and decide whether
 * they describe records inside the file; no libhdf5 call here, so that tests can drive
 * them, and the chunk assembly after them, with arbitrary values. */
#include "source/hdf5.h"

bool stoker__h5_grid(stoker__h5 *h)
{
    h->nchunks = h->chunk_bytes = 1;
    bool ovf = stoker__mul_ovf(h->chunk_bytes, h->esize, &h->chunk_bytes);
    for (int d = 0; d < h->rank; d++) {
        h->cdims[d] = h->cdims[d] ? h->cdims[d] : 1;
        h->grid[d] = h->dims[d] / h->cdims[d] + (h->dims[d] % h->cdims[d] != 0);
        ovf = ovf || stoker__mul_ovf(h->nchunks, h->grid[d], &h->nchunks) ||
              stoker__mul_ovf(h->chunk_bytes, h->cdims[d], &h->chunk_bytes);
    }
    return !ovf && h->nchunks <= (UINT64_C(1) << 32) && h->chunk_bytes <= (UINT64_C(1) << 31);
}

uint64_t stoker__h5_chunk_coord(const stoker__h5 *h, uint64_t i, int d)
{
    uint64_t stride = 1;
    for (int k = d + 1; k < h->rank; k++)
        stride *= h->grid[k]; /* bounded by nchunks: no overflow after stoker__h5_grid */
    return (i / stride) % h->grid[d];
}

bool stoker__h5_chunk_fits(const stoker__h5 *h, const stoker__h5_chunk *c, uint64_t file_size)
{
    uint64_t end = 0;
    if (c->addr == UINT64_MAX)
        return true; /* not allocated: the fill value */
    /* stored sizes: exact without filters; deflate may grow incompressible data a little */
    const uint64_t most =
        h->nfilters ? h->chunk_bytes + (h->chunk_bytes >> 3) + 4096 : h->chunk_bytes;
    return !stoker__add_ovf(c->addr, c->size, &end) && end <= file_size && c->size <= most &&
           (h->nfilters > 0 || c->size == h->chunk_bytes);
}

int64_t stoker__h5_bad_offset(stoker__h5 *h, uint64_t n, uint64_t max_size)
{
    const bool has_end = n >= 2 && h->offs[n - 1] == h->dims[0];
    h->records = has_end ? n - 1 : n;
    h->offs[h->records] = h->dims[0];
    for (uint64_t i = 0; i < h->records; i++)
        if (h->offs[i] > h->offs[i + 1] || h->offs[i + 1] - h->offs[i] > max_size)
            return (int64_t)i;
    return -1;
}
