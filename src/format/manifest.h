/* SPDX-License-Identifier: Apache-2.0 */
/* The manifest of a packed data set: its parsed form, escaping, loading and parsing
 * (docs/FORMAT.md). */
#ifndef STOKER_FORMAT_MANIFEST_H
#define STOKER_FORMAT_MANIFEST_H

#include "common/buf.h"
#include "common/common.h"
#include "format/format.h"
#include "format/schema.h"

/* Appends `s` escaped for a manifest line: '\\' "\\\\", '\n' "\\n", '\t' "\\t", other bytes
 * below 0x20 and 0x7F as "\\xHH"; every other byte (UTF-8 included) as is. */
int stoker__manifest_escape(stoker__buf *b, const char *s);

/* A manifest's shard line. `name` points into the manifest text. */
typedef struct stoker__mshard {
    const char *name;
    uint64_t records;
    uint64_t bytes;
    uint32_t crc; /* CRC32C of the whole shard file */
} stoker__mshard;

/* A parsed manifest. Names and class names point into `text`, which parsing edits in place
 * (NUL terminators, unescaping); keys are decoded lazily (stoker__manifest_keys). */
typedef struct stoker__manifest {
    char *text;
    size_t size;
    uint32_t version;
    uint32_t align;
    bool jpeg_checked;         /* version 2: "checked jpeg", every JPEG decoded without damage */
    int32_t kind, dtype, ndim; /* version 3: BYTES (the payload of several fields) */
    int64_t shape[STOKER_MAX_DIMS];
    uint64_t records;
    uint32_t nclasses;
    const char **classes;
    uint32_t nshards;
    stoker__mshard *shards;
    uint64_t nkeys;         /* 0 (no record has a key) or records */
    size_t keys_begin;      /* the first key line's offset in text */
    size_t keys_end;        /* one past the last key line */
    uint64_t *key_offs;     /* after decoding: per record, offset of its key or UINT64_MAX */
    stoker__schema *schema; /* version 3: the fields (validated); else NULL */
} stoker__manifest;

/* Parses manifest text (ownership of `text`, stoker__malloc'd, passes to `m`, even on
 * failure). `what` names the file in messages. Counts are checked against the limits before
 * anything is allocated. */
int stoker__manifest_parse(stoker__manifest *m, char *text, size_t size, const char *what,
                           uint64_t max_shards, uint64_t max_records, stoker__err *err);
/* Decodes every key line in place and fills key_offs. */
int stoker__manifest_keys(stoker__manifest *m, const char *what, stoker__err *err);
void stoker__manifest_free(stoker__manifest *m);
/* Reads a whole manifest file from an open descriptor (size-limited). */
int stoker__manifest_load(int fd, const char *what, char **text, size_t *size, stoker__err *err);

/* Size in bytes of each record of a raw field (overflow-checked); false on overflow. */
bool stoker__raw_size(int32_t dtype, int32_t ndim, const int64_t *shape, uint64_t *size);

#endif
