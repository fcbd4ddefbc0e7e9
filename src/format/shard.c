/* SPDX-License-Identifier: Apache-2.0 */
/* Checks of a shard's header, footer and index from their bytes (shard.h). */
#include "format/shard.h"

#include <string.h>

int stoker__shard_check_header(const stoker__shard_ctx *c, const uint8_t *h, stoker__err *err)
{
    const char *p = c->path;
    const int32_t i = c->shard;
    STOKER_RETURN_IF(memcmp(h + STK_H_MAGIC, STK_HEADER_MAGIC, 8) != 0, err, STOKER_E_FORMAT,
                     "%s: not a stoker shard (bad header magic)", p);
    const uint32_t crc = stoker_crc32c(0, h, STK_H_CRC);
    STOKER_RETURN_IF(stoker__get_u32(h + STK_H_CRC) != crc, err, STOKER_E_CORRUPT,
                     "%s: header CRC32C mismatch (stored %08x, computed %08x)", p,
                     stoker__get_u32(h + STK_H_CRC), crc);
    STOKER_RETURN_IF(stoker__get_u32(h + STK_H_VERSION) != STOKER_FORMAT_VERSION, err,
                     STOKER_E_FORMAT, "%s: unsupported shard format version %u", p,
                     stoker__get_u32(h + STK_H_VERSION));
    STOKER_RETURN_IF(stoker__get_u32(h + STK_H_ALIGN) != c->m->align ||
                         stoker__get_u32(h + STK_H_SHARD) != (uint32_t)i ||
                         stoker__get_u32(h + STK_H_REGION) != STK_HEADER_REGION,
                     err, STOKER_E_CORRUPT,
                     "%s: header says shard %u, alignment %u, header region %u; the manifest "
                     "says shard %d, alignment %u",
                     p, stoker__get_u32(h + STK_H_SHARD), stoker__get_u32(h + STK_H_ALIGN),
                     stoker__get_u32(h + STK_H_REGION), (int)i, c->m->align);
    return 0;
}

int stoker__shard_check_footer(const stoker__shard_ctx *c, const uint8_t *f, uint64_t *index_off,
                               uint64_t *index_size, stoker__err *err)
{
    const char *p = c->path;
    const int32_t i = c->shard;
    const uint64_t size = c->m->shards[i].bytes;
    STOKER_RETURN_IF(memcmp(f + STK_F_MAGIC, STK_FOOTER_MAGIC, 8) != 0, err, STOKER_E_CORRUPT,
                     "%s: bad footer magic (truncated or damaged shard)", p);
    const uint32_t crc = stoker_crc32c(0, f, STK_F_CRC);
    STOKER_RETURN_IF(stoker__get_u32(f + STK_F_CRC) != crc, err, STOKER_E_CORRUPT,
                     "%s: footer CRC32C mismatch (stored %08x, computed %08x)", p,
                     stoker__get_u32(f + STK_F_CRC), crc);
    STOKER_RETURN_IF(stoker__get_u32(f + STK_F_VERSION) != STOKER_FORMAT_VERSION, err,
                     STOKER_E_FORMAT, "%s: unsupported footer version %u", p,
                     stoker__get_u32(f + STK_F_VERSION));
    const uint64_t count = stoker__get_u64(f + STK_F_COUNT);
    const uint64_t off = stoker__get_u64(f + STK_F_INDEX_OFF);
    const uint64_t isize = stoker__get_u64(f + STK_F_INDEX_SIZE);
    STOKER_RETURN_IF(count > c->max_records, err, STOKER_E_LIMIT,
                     "%s: %llu records exceed the limit of %llu (STOKER_OPT_MAX_RECORDS)", p,
                     (unsigned long long)count, (unsigned long long)c->max_records);
    STOKER_RETURN_IF(stoker__get_u32(f + STK_F_SHARD) != (uint32_t)i ||
                         stoker__get_u32(f + STK_F_ALIGN) != c->m->align ||
                         count != c->m->shards[i].records,
                     err, STOKER_E_CORRUPT,
                     "%s: footer says shard %u, alignment %u, %llu records; the manifest says "
                     "shard %d, alignment %u, %llu records",
                     p, stoker__get_u32(f + STK_F_SHARD), stoker__get_u32(f + STK_F_ALIGN),
                     (unsigned long long)count, (int)i, c->m->align,
                     (unsigned long long)c->m->shards[i].records);
    uint64_t end = 0;
    const bool ovf = count > UINT64_MAX / STK_ENTRY_SIZE || stoker__add_ovf(off, isize, &end) ||
                     stoker__add_ovf(end, STK_FOOTER_SIZE, &end);
    STOKER_RETURN_IF(ovf || isize != count * STK_ENTRY_SIZE || end != size ||
                         off < STK_HEADER_REGION || off % c->m->align != 0,
                     err, STOKER_E_CORRUPT,
                     "%s: index at %llu of %llu bytes for %llu records does not fit a file of "
                     "%llu bytes",
                     p, (unsigned long long)off, (unsigned long long)isize,
                     (unsigned long long)count, (unsigned long long)size);
    *index_off = off;
    *index_size = isize;
    return 0;
}

static int check_entry(const stoker__shard_ctx *c, const uint8_t *index, uint64_t index_off,
                       uint64_t r, uint64_t *prev_end, stoker__err *err)
{
    const char *path = c->path;
    const uint8_t *e = index + r * STK_ENTRY_SIZE;
    const uint64_t off = stoker__get_u64(e + STK_E_OFFSET);
    const uint64_t len = stoker__get_u64(e + STK_E_LENGTH);
    const unsigned long long id = (unsigned long long)(c->first + r);
    const unsigned long long sr = (unsigned long long)r;
    uint64_t end = 0, raw = 0;
    STOKER_RETURN_IF(len > c->max_record_size, err, STOKER_E_LIMIT,
                     "%s: record %llu (shard record %llu): %llu bytes exceed the limit of %llu "
                     "(STOKER_OPT_MAX_RECORD_SIZE)",
                     path, id, sr, (unsigned long long)len, (unsigned long long)c->max_record_size);
    STOKER_RETURN_IF(stoker__get_u32(e + STK_E_FLAGS) != 0, err, STOKER_E_CORRUPT,
                     "%s: record %llu (shard record %llu): unknown flags %08x", path, id, sr,
                     stoker__get_u32(e + STK_E_FLAGS));
    STOKER_RETURN_IF(off % c->m->align != 0, err, STOKER_E_CORRUPT,
                     "%s: record %llu (shard record %llu): offset %llu not aligned to %u", path, id,
                     sr, (unsigned long long)off, c->m->align);
    STOKER_RETURN_IF(off < *prev_end, err, STOKER_E_CORRUPT,
                     "%s: record %llu (shard record %llu): offset %llu overlaps the header or "
                     "the previous record (which ends at %llu)",
                     path, id, sr, (unsigned long long)off, (unsigned long long)*prev_end);
    STOKER_RETURN_IF(stoker__add_ovf(off, len, &end) || end > index_off, err, STOKER_E_CORRUPT,
                     "%s: record %llu (shard record %llu): %llu bytes at %llu extend past the "
                     "payload area (which ends at %llu)",
                     path, id, sr, (unsigned long long)len, (unsigned long long)off,
                     (unsigned long long)index_off);
    STOKER_RETURN_IF(c->m->kind == STOKER_FIELD_RAW &&
                         stoker__raw_size(c->m->dtype, c->m->ndim, c->m->shape, &raw) && len != raw,
                     err, STOKER_E_CORRUPT,
                     "%s: record %llu (shard record %llu): %llu bytes, but raw records are "
                     "%llu bytes",
                     path, id, sr, (unsigned long long)len, (unsigned long long)raw);
    *prev_end = end;
    return 0;
}

int stoker__shard_check_index(const stoker__shard_ctx *c, const uint8_t *f, const uint8_t *index,
                              uint64_t *payload_out, uint64_t *max_record, stoker__err *err)
{
    const char *path = c->path;
    const uint64_t index_off = stoker__get_u64(f + STK_F_INDEX_OFF);
    const uint64_t records = stoker__get_u64(f + STK_F_COUNT);
    const uint64_t isize = records * STK_ENTRY_SIZE;
    const uint32_t crc = stoker_crc32c(0, index, (size_t)isize);
    STOKER_RETURN_IF(crc != stoker__get_u32(f + STK_F_INDEX_CRC), err, STOKER_E_CORRUPT,
                     "%s: index CRC32C mismatch (stored %08x, computed %08x)", path,
                     stoker__get_u32(f + STK_F_INDEX_CRC), crc);
    uint64_t prev_end = STK_HEADER_REGION, payload = 0, max = 0;
    for (uint64_t r = 0; r < records; r++) {
        const int rc = check_entry(c, index, index_off, r, &prev_end, err);
        if (rc < 0)
            return rc;
        const uint64_t len = stoker__get_u64(index + r * STK_ENTRY_SIZE + STK_E_LENGTH);
        payload += len; /* cannot overflow: records do not overlap within the file */
        max = len > max ? len : max;
    }
    STOKER_RETURN_IF(payload != stoker__get_u64(f + STK_F_PAYLOAD), err, STOKER_E_CORRUPT,
                     "%s: footer says %llu payload bytes, the index %llu", path,
                     (unsigned long long)stoker__get_u64(f + STK_F_PAYLOAD),
                     (unsigned long long)payload);
    *payload_out += payload;
    *max_record = max > *max_record ? max : *max_record;
    return 0;
}

int32_t stoker__shard_find(const uint64_t *first, int32_t n, uint64_t id)
{
    /* the last shard whose first record is <= id (empty shards share a first id) */
    int32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        const int32_t mid = lo + (hi - lo + 1) / 2;
        if (first[mid] <= id)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

stoker__shard_rec stoker__shard_entry(const uint8_t *index, uint64_t r)
{
    const uint8_t *e = index + r * STK_ENTRY_SIZE;
    return (stoker__shard_rec){stoker__get_u64(e + STK_E_OFFSET), stoker__get_u64(e + STK_E_LENGTH),
                               (int64_t)stoker__get_u64(e + STK_E_LABEL),
                               stoker__get_u32(e + STK_E_CRC)};
}
