/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for a remote data set's index parsing, without a network: what the shard
 * source (src/source/shards.c, open_files) does with the bytes the remote transport's ranged
 * GETs bring (the same steps as for a local file's). The
 * manifest is parsed, then each shard's header (its first STK_HEADER_SIZE bytes) and footer
 * (its last STK_FOOTER_SIZE bytes, by the manifest's size) are checked, and the index is
 * taken from where the footer says into a buffer of exactly its size (as a GET fills one:
 * unlike a local shard's mapping, nothing lies beyond it, so an overread is seen), checked,
 * and every record located in it must lie inside the shard.
 *
 * Input: byte 0 chooses the mode (modulo 3), the rest is the payload.
 *   0: the payload is the shard; a manifest agreeing with its size, CRC and record count is
 *      generated, so that the shard's own checks are reached.
 *   1: as 0, with the shard's header, footer and index CRCs fixed up first, so that
 *      mutations reach the structural checks behind them.
 *   2: two bytes of manifest length (little-endian), the manifest, then the shard. */
#include "common/common.h"
#include "format/manifest.h"
#include "format/shard.h"
#include "source/shard_rec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_RECORDS 4096
#define MAX_RECORD_SIZE (1u << 20)

/* A manifest that agrees with an arbitrary shard's size, CRC and footer (stoker__malloc'd,
 * as stoker__manifest_parse takes it). */
static char *manifest_for(const uint8_t *shard, size_t n, size_t *len)
{
    uint64_t count = 0;
    uint32_t align = 4096;
    if (n >= STK_FOOTER_SIZE)
        count = stoker__get_u64(shard + n - STK_FOOTER_SIZE + 16);
    if (count > MAX_RECORDS)
        count = 0;
    if (n >= 16) {
        const uint32_t a = stoker__get_u32(shard + 12);
        align = a == 1 || a == 512 ? a : 4096;
    }
    char *text = stoker__malloc(512);
    if (!text)
        abort();
    int k = snprintf(text, 512,
                     "stoker-manifest 1\nalign %u\nfield bytes\nrecords %llu\nclasses 0\n"
                     "shards 1\nshard shard-00000.stk %llu %zu %08x\nkeys 0\n",
                     align, (unsigned long long)count, (unsigned long long)count, n,
                     stoker_crc32c(0, shard, n));
    k += snprintf(text + k, 512 - (size_t)k, "crc32c %08x\n", stoker_crc32c(0, text, (size_t)k));
    *len = (size_t)k;
    return text;
}

/* Recomputes the header, index and footer CRCs of a shard image, where they fit. */
static void fix_shard_crcs(uint8_t *d, size_t n)
{
    if (n >= STK_HEADER_SIZE)
        stoker__put_u32(d + 60, stoker_crc32c(0, d, 60));
    if (n < STK_HEADER_SIZE + STK_FOOTER_SIZE)
        return;
    uint8_t *f = d + n - STK_FOOTER_SIZE;
    const uint64_t off = stoker__get_u64(f + 24), count = stoker__get_u64(f + 16);
    if (count <= n / STK_ENTRY_SIZE && off <= n - STK_FOOTER_SIZE &&
        count * STK_ENTRY_SIZE <= n - STK_FOOTER_SIZE - off)
        stoker__put_u32(f + 48, stoker_crc32c(0, d + off, count * STK_ENTRY_SIZE));
    stoker__put_u32(f + 60, stoker_crc32c(0, f, 60));
}

/* The remote source's steps over one shard of `size` bytes (the manifest's), d its bytes. */
static void check_shard(const stoker__manifest *m, const uint8_t *d, size_t size)
{
    stoker__err err = {0};
    const stoker__shard_ctx c = {m, 0,           "http://127.0.0.1/ds/shard-00000.stk",
                                 0, MAX_RECORDS, MAX_RECORD_SIZE};
    uint8_t h[STK_HEADER_SIZE], f[STK_FOOTER_SIZE];
    if (m->nshards != 1 || m->shards[0].bytes != size || size < STK_HEADER_SIZE + STK_FOOTER_SIZE)
        return; /* the remote source refuses a size the manifest does not state (HEAD) */
    memcpy(h, d, sizeof h);
    memcpy(f, d + size - STK_FOOTER_SIZE, sizeof f);
    uint64_t ioff = 0, isize = 0;
    if (stoker__shard_check_header(&c, h, &err) < 0 ||
        stoker__shard_check_footer(&c, f, &ioff, &isize, &err) < 0) {
        if (!err.msg[0])
            abort(); /* every failure says why */
        return;
    }
    if (ioff > size || isize > size - ioff || isize % STK_ENTRY_SIZE)
        abort(); /* the footer's check let through an index outside the shard */
    uint8_t *index = malloc(isize ? (size_t)isize : 1);
    if (!index)
        abort();
    memcpy(index, d + ioff, (size_t)isize);
    uint64_t payload = 0, max_record = 0;
    if (stoker__shard_check_index(&c, f, index, &payload, &max_record, &err) == 0) {
        const uint64_t records = isize / STK_ENTRY_SIZE;
        for (uint64_t r = 0; r < records; r++) {
            stoker__recloc loc = {0};
            stoker__shard_locate(index, r, &loc);
            if (loc.offset > size || loc.length > size - loc.offset || loc.length > max_record)
                abort(); /* a record outside the shard, after the index was accepted */
        }
    } else if (!err.msg[0]) {
        abort();
    }
    free(index);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t mode = data[0] % 3;
    data++;
    size--;
    char *text = NULL;
    size_t tlen = 0;
    const uint8_t *shard = data;
    size_t n = size;
    uint8_t *copy = NULL;
    if (mode == 2) {
        if (size < 2)
            return 0;
        tlen = (size_t)data[0] | (size_t)data[1] << 8;
        if (tlen > size - 2)
            tlen = size - 2;
        text = stoker__malloc(tlen + 1);
        if (!text)
            abort();
        memcpy(text, data + 2, tlen);
        text[tlen] = '\0';
        shard = data + 2 + tlen;
        n = size - 2 - tlen;
    } else {
        if (mode == 1) {
            copy = malloc(n ? n : 1);
            if (!copy)
                abort();
            memcpy(copy, data, n);
            fix_shard_crcs(copy, n);
            shard = copy;
        }
        text = manifest_for(shard, n, &tlen);
    }
    stoker__manifest m;
    memset(&m, 0, sizeof m);
    stoker__err err = {0};
    if (stoker__manifest_parse(&m, text, tlen, "http://127.0.0.1/ds/manifest.stk", 16, MAX_RECORDS,
                               &err) == 0)
        check_shard(&m, shard, n);
    else if (!err.msg[0])
        abort();
    stoker__manifest_free(&m);
    free(copy);
    return 0;
}
