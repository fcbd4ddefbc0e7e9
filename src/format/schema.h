/* SPDX-License-Identifier: Apache-2.0 */
/* A data set's schema: its named fields, their kinds and ties, and the layout of a record's
 * payload (docs/FORMAT.md "Samples with several fields"). The writer encodes a sample with
 * it; readers split a payload into its fields' spans with it. Pure functions over a schema
 * that no call changes once it is validated (stoker__schema_finish), so any thread may use
 * one concurrently; no allocation, no I/O. */
#ifndef STOKER_FORMAT_SCHEMA_H
#define STOKER_FORMAT_SCHEMA_H

#include "common/buf.h"
#include "common/common.h"

/* One field. The layout members are set by stoker__schema_finish. */
typedef struct stoker__field {
    char name[STOKER_FIELD_NAME_MAX + 1];
    int32_t kind; /* stoker_field_kind */
    int32_t dtype, ndim;
    int64_t shape[STOKER_MAX_DIMS];
    int32_t tie;    /* stoker_field_tie */
    int32_t target; /* the field it is tied to (an earlier one), or -1 */
    uint64_t max;   /* variable fields: the largest value in bytes (rows for ARRAY) */
    /* layout */
    bool variable;   /* JPEG, PNG, BYTES, ARRAY: its length is in the payload's header */
    int32_t var;     /* variable: its position among the lengths; fixed: -1 */
    uint64_t size;   /* fixed: the value's bytes; ARRAY: one row's bytes; else 0 */
    uint64_t offset; /* fixed: its offset in every payload; variable: 0 */
} stoker__field;

typedef struct stoker__schema {
    int32_t n;         /* fields, 1 .. STOKER_MAX_FIELDS */
    int32_t nvar;      /* V: variable fields */
    int32_t label;     /* the INT64 field named "label", or -1 */
    bool legacy;       /* a data set written before schemas: field 0 is the whole payload,
                          field 1 ("label") the index entry's label */
    uint64_t var_base; /* where the variable fields start: past the header and fixed fields */
    stoker__field f[STOKER_MAX_FIELDS];
} stoker__schema;

/* A field's bytes within a payload. */
typedef struct stoker__span {
    uint64_t off, len;
} stoker__span;

/* "jpeg", "png", "bytes", "raw", "array", "int64", "float32"; NULL for another value. */
const char *stoker__field_kind_name(int32_t kind);
/* The kind named `s`, or 0. */
int32_t stoker__field_kind_parse(const char *s);
/* "mask_of", "boxes_of", "rows_of"; NULL for another value (STOKER_TIE_NONE included). */
const char *stoker__field_tie_name(int32_t tie);
int32_t stoker__field_tie_parse(const char *s);
/* Whether a field of `kind` is variable (its length in the payload's header). */
bool stoker__field_kind_variable(int32_t kind);

/* Checks a schema whose fields' name, kind, dtype, ndim, shape, tie and target are filled
 * (max too, for a schema read from a manifest), and sets n's dependents: the layout, nvar,
 * label. The rules: names (1 to STOKER_FIELD_NAME_MAX bytes of [A-Za-z0-9_], not starting
 * with a digit, unique); a kind's arguments (RAW: a valid dtype and shape; ARRAY: a row of
 * at least one byte; INT64, FLOAT32: their own dtype; others: none); ties (mask_of: a PNG or
 * RAW uint8 [H, W] field, boxes_of: an ARRAY float32 [4] field, both tied to an earlier
 * untied JPEG or PNG field; rows_of: an ARRAY tied to an earlier boxes field). `err` names
 * the field and the rule, without a prefix (the caller adds the file). */
int stoker__schema_finish(stoker__schema *s, stoker__err *err);

/* Fills and checks a schema from the public descriptors (max ignored, set to 0). */
int stoker__schema_from_desc(stoker__schema *s, const stoker_field_desc *d, int32_t n,
                             stoker__err *err);

/* The schema a data set written before schemas reads as: "image" (JPEG) or "data" (RAW with
 * its dtype and shape, or BYTES), then "label" (INT64). `max`: the largest record. */
void stoker__schema_legacy(stoker__schema *s, int32_t kind, int32_t dtype, int32_t ndim,
                           const int64_t *shape, uint64_t max);

/* The index of the field named `name`, or -1. */
int32_t stoker__schema_find(const stoker__schema *s, const char *name);

/* Field i's public descriptor (its strings point into the schema). */
void stoker__schema_desc(const stoker__schema *s, int32_t i, stoker_field_desc *out);

/* Appends the manifest's "fields F" line and one "field ..." line per field. */
int stoker__schema_format(const stoker__schema *s, stoker__buf *b);

/* Checks one sample's values (v[i] for field i) against the schema, as the writer must
 * before writing it: each size against its kind, dtype and shape (a variable field below
 * 4 GiB); each image's header (a JPEG's SOF, a PNG's IHDR: its width and height; a mask PNG
 * 8-bit gray or palette); a mask the size of its image; boxes finite and within their image
 * (0 <= x1 <= x2 <= width, 0 <= y1 <= y2 <= height); rows as many as their boxes. `err`
 * says `field "NAME": what` (the caller adds the file and the sample). */
int stoker__schema_check(const stoker__schema *s, const stoker_field_value *v, stoker__err *err);

/* The boxes rule, the one every check of boxes applies (the writer's, the loader's, a split
 * record's): n boxes of 4 float32 (x1, y1, x2, y2) at v, each value finite and
 * 0 <= x1 <= x2 <= w, 0 <= y1 <= y2 <= h in the stored pixels of a w x h image. `code` and
 * `err` (`field "FIELD": box R ...`) for the first box that breaks it. */
int stoker__boxes_check(const char *field, const uint8_t *v, uint64_t n, uint32_t w, uint32_t h,
                        int code, stoker__err *err);

/* Field i of a split sample (v[k] for field k) by the rule below, if it is tied: boxes by the
 * boxes rule against a w x h image (0 x 0: its image's stored size, read from its header),
 * rows tied to boxes one a box. STOKER_E_CORRUPT, `err` saying `field "NAME": what`. */
int stoker__schema_check_tied(const stoker__schema *s, int32_t i, const stoker_field_value *v,
                              uint32_t w, uint32_t h, stoker__err *err);

/* Checks a split sample's boxes (v[i] for field i) as the loader does as it reads them: each
 * boxes field by the boxes rule against its image's stored size (its JPEG's SOF, its PNG's
 * IHDR), and rows tied to boxes one a box. STOKER_E_CORRUPT with `err` saying
 * `field "NAME": what` (the caller adds the file and the record). */
int stoker__schema_check_boxes(const stoker__schema *s, const stoker_field_value *v,
                               stoker__err *err);

/* The payload's size for values v (checked by stoker__schema_check). */
uint64_t stoker__schema_payload_size(const stoker__schema *s, const stoker_field_value *v);

/* Writes the payload of values v into dst (stoker__schema_payload_size bytes): the lengths,
 * the zeros, the fixed fields at their offsets, the variable ones in order. */
void stoker__schema_encode(const stoker__schema *s, const stoker_field_value *v, uint8_t *dst);

/* Splits payload p (n bytes) into out[i], field i's span (room for s->n). Checks that the
 * payload follows the layout: the header's lengths fit, the padding is zeros, the payload's
 * length is exactly what the schema and the lengths give, every variable field within its
 * max, an ARRAY's length a multiple of its row's bytes. A legacy schema: out[0] is the whole
 * payload (a RAW one exactly its size), out[1] (the label, which is not in the payload)
 * {0, 0}. STOKER_E_CORRUPT with `err` saying `field "NAME": what` (the caller adds the file
 * and the record). No allocation; O(fields). The loader's workers call it on every record. */
int stoker__schema_split(const stoker__schema *s, const uint8_t *p, uint64_t n, stoker__span *out,
                         stoker__err *err);

/* A JPEG's width and height from its first SOF marker; false when there is none readable. */
bool stoker__jpeg_size(const uint8_t *p, uint64_t n, uint32_t *w, uint32_t *h);
/* A PNG's width, height, bit depth and colour type from its IHDR chunk; false when `p` is
 * not a PNG. */
bool stoker__png_size(const uint8_t *p, uint64_t n, uint32_t *w, uint32_t *h, uint8_t *depth,
                      uint8_t *color);

#endif
