/* SPDX-License-Identifier: Apache-2.0 */
/* A batch as the consumer sees it (the public stoker_batch): the ring's host slots and the
 * H2D stage's device buffers each hold one, which next hands out. A batch describes itself
 * (dtype, shape, where its data is), so its getters need nothing else. */
#ifndef STOKER_LOADER_BATCH_H
#define STOKER_LOADER_BATCH_H

#include "common/common.h"

struct stoker_batch {
    stoker_loader *loader;     /* the owner: release goes back to it */
    struct stoker__slot *slot; /* a host batch's slot (ring.h), else NULL */
    struct stoker__dbuf *dbuf; /* a device batch's buffer (h2d.h), else NULL */
    int64_t count, epoch, position;
    int64_t replaced; /* positions holding a replacement (SKIP), set before READY */
    int64_t *ids, *labels;
    int64_t *offsets; /* count + 1 byte offsets into data (kept for every batch) */
    bool fixed;       /* fixed-size records: offsets are not public, shape is [count, ...] */
    uint8_t *data;    /* host slot memory, or device memory */
    uint64_t nbytes;
    int32_t device; /* -1: host memory */
    int32_t dtype, ndim;
    int64_t shape[STOKER_MAX_DIMS + 1];
    /* The fields (loader/fields.h): the region, host slot or device memory like data, with
     * the rows of each RAGGED field, and a device batch's host copy of their offsets. */
    const struct stoker__pfields *pf;
    uint8_t *extra;
    int64_t totals[STOKER_MAX_FIELDS + 1];
    /* A RAGGED field's values in extra, this batch's: they follow the fixed part, each field
     * the room its samples' records can fill (fields.h); extra_used ends the last. */
    uint64_t vals_off[STOKER_MAX_FIELDS + 1];
    uint64_t extra_used;
    int64_t *host_offsets; /* a device batch's: field i's at i * (batch + 1); else NULL */
};

#endif
