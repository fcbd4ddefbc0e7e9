/* SPDX-License-Identifier: Apache-2.0 */
/* A shard index entry as a record's location (the sources of packed data sets). */
#ifndef STOKER_SOURCE_SHARD_REC_H
#define STOKER_SOURCE_SHARD_REC_H

#include "format/shard.h"
#include "source/dataset.h"

/* Entry r of `index` into loc (offset, length, label, crc; fd, shard and fetch untouched). */
static inline void stoker__shard_locate(const uint8_t *index, uint64_t r, stoker__recloc *loc)
{
    const stoker__shard_rec e = stoker__shard_entry(index, r);
    loc->offset = e.offset;
    loc->length = e.length;
    loc->label = e.label;
    loc->crc = e.crc;
    loc->has_crc = 1;
}

#endif
