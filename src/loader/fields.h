/* SPDX-License-Identifier: Apache-2.0 */
/* A batch's fields: which of the data set's fields a batch delivers, where each lives in a
 * batch slot, and how a record's fields reach their places.
 *
 * A batch is the data (batch.data: the transformed images, or a data set's one field without
 * a schema, as before) and a fields region (batch.extra), one block of the slot's pinned
 * memory that the H2D stage copies to the device with the data, so that labels, masks,
 * boxes and token ids arrive on the device in the batch's copy. The region's fixed part is
 * laid out at create from the plan (the batch size):
 *
 *   DENSE  [batch, *shape] values (INT64, FLOAT32, RAW; a legacy data set's labels)
 *   MASK   uint8 [batch, C, C]: a mask tied to the image, with the image's geometry
 *   RAGGED batch + 1 int64 offsets (rows)
 *
 * A RAGGED field's values follow the fixed part, laid out per batch when it is prepared
 * (stoker__pfield_bound): sample j gets the rows its record can hold at most (the manifest's
 * largest value, or fewer where the record's length cannot hold that many), so a batch
 * takes the room its own records can fill, not batch x the largest value; the slot grows
 * when a batch needs more. The sample writes its rows at its place; the batch's last worker
 * packs them back to back (stoker__pfields_pack) once every record, replacements included,
 * is in place.
 *
 * Values are in the field's delivered dtype: STOKER_OPT_FIELD_DTYPES may convert a DENSE, MASK or
 * numeric RAGGED field, which the worker does as it writes the field (after a mask's or
 * boxes' geometry, which runs on uint8 and float32); `item` is then the converted size.
 *
 * The data field (role DATA) is the batch's data and takes no room in the region. */
#ifndef STOKER_LOADER_FIELDS_H
#define STOKER_LOADER_FIELDS_H

#include "common/common.h"

struct stoker__recloc;

enum {
    STOKER__PF_DATA = 1,   /* batch.data */
    STOKER__PF_LABEL = 2,  /* a data set without a schema: the index's labels, DENSE int64 */
    STOKER__PF_DENSE = 3,  /* a fixed-size value per sample */
    STOKER__PF_MASK = 4,   /* a mask with its image's geometry */
    STOKER__PF_RAGGED = 5, /* values and offsets */
};

/* A field that no record holds: the worker makes it (stoker__pfield.src). */
#define STOKER__SRC_IMAGE_SIZE (-2) /* IMAGE.size: the image's stored [height, width], int64 */

typedef struct stoker__pfield {
    char name[STOKER_FIELD_NAME_MAX + 1 + 8]; /* room for a schema name and ".size" */
    int32_t src;  /* the schema's field index (-1: the index's labels; STOKER__SRC_*) */
    int32_t kind; /* stoker_field_kind */
    int32_t tie;  /* stoker_field_tie */
    int32_t role; /* STOKER__PF_* */
    int32_t tied; /* the delivered field this one follows (boxes for rows), or -1 */
    int32_t dtype, ndim;
    int64_t shape[STOKER_MAX_DIMS]; /* one sample's (DENSE, MASK), one row's (RAGGED) */
    uint64_t item;                  /* bytes per sample (DENSE, MASK), per row (RAGGED) */
    int32_t from;         /* a converted field (STOKER_OPT_FIELD_DTYPES): the dtype the values come
                             in (as stored; a MASK's uint8), else 0 */
    uint64_t stored;      /* `item` as the values come in: before any conversion */
    uint64_t max_rows;    /* RAGGED: rows one sample holds at most */
    uint64_t off;         /* in the region: the values (DENSE, MASK; RAGGED: batch.vals_off) */
    uint64_t offsets_off; /* RAGGED: the batch + 1 offsets */
} stoker__pfield;

typedef struct stoker__pfields {
    int32_t n; /* delivered fields, in schema order */
    stoker__pfield f[STOKER_MAX_FIELDS + 1];
    int32_t data;    /* the DATA field's index, or -1 */
    int32_t label;   /* the int64 field "label" (DENSE or LABEL) whose values are the
                        batch's labels, or -1 */
    uint64_t cap;    /* bytes of the region's fixed part: RAGGED values start after it */
    uint64_t first;  /* a slot's first capacity: the fixed part and room for RAGGED values */
    uint64_t batch;  /* records per batch at most */
    bool split;      /* records hold several fields (a schema): the workers split them */
    bool any_ragged; /* some field is RAGGED: a batch is packed before it is published */
    int32_t raggeds; /* RAGGED fields */
    const struct stoker__schema *schema; /* split: the data set's (format/schema.h) */
} stoker__pfields;

/* The fields of a data set without a schema: its one field as the DATA (named "image" for
 * JPEG, else "data", described by the plan's dtype/shape: filled in by the caller) and the
 * index's labels as "label". */
void stoker__pfields_legacy(stoker__pfields *pf, int32_t kind);

/* Lays out the region's fixed part for `batch` records per batch: each field's offsets
 * (64-byte aligned), pf->cap, and pf->first: the fixed part and room for a full batch of
 * every RAGGED field's largest values, up to 8 MiB of it. -ENOMEM-free; STOKER_E_LIMIT when
 * a batch of a field's largest values overflows. */
int stoker__pfields_layout(stoker__pfields *pf, uint64_t batch, const char *path, stoker__err *err);

/* The index of the delivered field named `name`, or -1. */
int32_t stoker__pfields_find(const stoker__pfields *pf, const char *name);

/* The rows RAGGED field f's sample can hold at most, from its record's payload length
 * (0: unknown): the manifest's largest value, or fewer where the record cannot hold that
 * many of the field's stored rows (a field's values are a part of the record). */
uint64_t stoker__pfield_bound(const stoker__pfield *f, uint64_t record_length);

/* Lays out batch b's RAGGED values after the fixed part: field by field (64-byte aligned),
 * sample j at place[i * (batch + 1) + j] rows of field i's area, its room
 * stoker__pfield_bound of its record's length (locs[j].length); sets b->vals_off and
 * b->extra_used. STOKER_E_LIMIT when the batch's room overflows. */
int stoker__pfields_place(const stoker__pfields *pf, stoker_batch *b,
                          const struct stoker__recloc *locs, uint64_t *place, stoker__err *err);

/* Packs a batch's RAGGED fields: sample j's rows[f][j] rows, written at its place, become
 * values back to back from b->vals_off[f], and count + 1 offsets; b->totals[f] receives the
 * batch's rows. `rows` is the slot's per-sample row counts (pf->n x batch). */
void stoker__pfields_pack(const stoker__pfields *pf, stoker_batch *b, const uint64_t *rows,
                          const uint64_t *place);

/* A stoker_dtype that stoker__dtype_convert takes (uint8 .. bool). */
bool stoker__dtype_convertible(int32_t dtype);

/* n values of dtype `from` at src as dtype `to` at dst (the buffers do not overlap; any
 * alignment). Integers to integers: the low bits, two's complement (values out of range
 * wrap, as NumPy's astype and C's casts to unsigned types). Floats to integers: truncated
 * toward zero; NaN gives 0, values out of range (and infinities) the type's least or
 * greatest. To bool: nonzero (NaN too) gives 1. To float16 and bfloat16: rounded once to
 * nearest even (overflow gives infinity; an integer beyond 2^53 is first rounded to a
 * float64); to float32 and float64 as C's casts. */
void stoker__dtype_convert(void *dst, int32_t to, const void *src, int32_t from, uint64_t n);

#endif
