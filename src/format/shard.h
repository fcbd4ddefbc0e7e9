/* SPDX-License-Identifier: Apache-2.0 */
/* A shard file's header, footer and index, checked from their bytes: every source of packed
 * data sets (local files, remote objects) reads the bytes its own way and checks them here,
 * against the manifest, before any record is used. */
#ifndef STOKER_FORMAT_SHARD_H
#define STOKER_FORMAT_SHARD_H

#include "common/common.h"
#include "format/format.h"
#include "format/manifest.h"

/* What a shard's checks need besides its bytes. */
typedef struct stoker__shard_ctx {
    const stoker__manifest *m;
    int32_t shard;            /* its number in the manifest */
    const char *path;         /* for messages */
    uint64_t first;           /* the data set id of its first record */
    uint64_t max_records;     /* STOKER_OPT_MAX_RECORDS */
    uint64_t max_record_size; /* STOKER_OPT_MAX_RECORD_SIZE */
} stoker__shard_ctx;

/* The fixed header (STK_HEADER_SIZE bytes at offset 0). */
int stoker__shard_check_header(const stoker__shard_ctx *c, const uint8_t *h, stoker__err *err);
/* The fixed footer (the file's last STK_FOOTER_SIZE bytes) against the file's size (the
 * manifest's) and the manifest; then *index_off and *index_size say where the index lies. */
int stoker__shard_check_footer(const stoker__shard_ctx *c, const uint8_t *f, uint64_t *index_off,
                               uint64_t *index_size, stoker__err *err);
/* The index (index_size bytes read from index_off) against the footer's CRC and payload
 * count, and every entry; adds the payload's bytes to *payload and raises *max_record. */
int stoker__shard_check_index(const stoker__shard_ctx *c, const uint8_t *f, const uint8_t *index,
                              uint64_t *payload, uint64_t *max_record, stoker__err *err);

/* The shard holding record id, from first[] (first[i]: shard i's first id; first[n]: the
 * total). id must be < first[n]. */
int32_t stoker__shard_find(const uint64_t *first, int32_t n, uint64_t id);
/* Entry r of an index. */
typedef struct stoker__shard_rec {
    uint64_t offset, length;
    int64_t label;
    uint32_t crc;
} stoker__shard_rec;
stoker__shard_rec stoker__shard_entry(const uint8_t *index, uint64_t r);

#endif
