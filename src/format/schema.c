/* SPDX-License-Identifier: Apache-2.0 */
/* A data set's schema and a record's payload layout (docs/FORMAT.md "Samples with several
 * fields"): the rules a schema follows, a sample's checks, its encoding, and the split that
 * every reader makes of a payload. */
#include "format/schema.h"

#include "format/manifest.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const KIND_NAMES[] = {
    [STOKER_FIELD_BYTES] = "bytes",     [STOKER_FIELD_JPEG] = "jpeg",
    [STOKER_FIELD_RAW] = "raw",         [STOKER_FIELD_PNG] = "png",
    [STOKER_FIELD_ARRAY] = "array",     [STOKER_FIELD_INT64] = "int64",
    [STOKER_FIELD_FLOAT32] = "float32",
};
#define NKINDS ((int32_t)(sizeof KIND_NAMES / sizeof *KIND_NAMES))

static const char *const TIE_NAMES[] = {
    [STOKER_TIE_MASK] = "mask_of",
    [STOKER_TIE_BOXES] = "boxes_of",
    [STOKER_TIE_ROWS] = "rows_of",
};
#define NTIES ((int32_t)(sizeof TIE_NAMES / sizeof *TIE_NAMES))

const char *stoker__field_kind_name(int32_t kind)
{
    return kind > 0 && kind < NKINDS ? KIND_NAMES[kind] : NULL;
}

int32_t stoker__field_kind_parse(const char *s)
{
    for (int32_t k = 1; k < NKINDS; k++)
        if (KIND_NAMES[k] && strcmp(KIND_NAMES[k], s) == 0)
            return k;
    return 0;
}

const char *stoker__field_tie_name(int32_t tie)
{
    return tie > 0 && tie < NTIES ? TIE_NAMES[tie] : NULL;
}

int32_t stoker__field_tie_parse(const char *s)
{
    for (int32_t t = 1; t < NTIES; t++)
        if (strcmp(TIE_NAMES[t], s) == 0)
            return t;
    return 0;
}

bool stoker__field_kind_variable(int32_t kind)
{
    return kind == STOKER_FIELD_JPEG || kind == STOKER_FIELD_PNG || kind == STOKER_FIELD_BYTES ||
           kind == STOKER_FIELD_ARRAY;
}

static bool is_image(int32_t kind)
{
    return kind == STOKER_FIELD_JPEG || kind == STOKER_FIELD_PNG;
}

static bool valid_name(const char *s)
{
    const size_t n = strnlen(s, STOKER_FIELD_NAME_MAX + 1);
    if (n == 0 || n > STOKER_FIELD_NAME_MAX || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (size_t i = 0; i < n; i++) {
        const char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return false;
    }
    return true;
}

/* A field's kind arguments; sets its size. */
static int check_kind(stoker__field *f, stoker__err *err)
{
    const char *nm = f->name;
    switch (f->kind) {
    case STOKER_FIELD_JPEG:
    case STOKER_FIELD_PNG:
    case STOKER_FIELD_BYTES: f->size = 0; return 0;
    case STOKER_FIELD_INT64:
    case STOKER_FIELD_FLOAT32: {
        const int32_t dt =
            f->kind == STOKER_FIELD_INT64 ? STOKER_DTYPE_INT64 : STOKER_DTYPE_FLOAT32;
        STOKER_RETURN_IF(f->dtype != 0 && f->dtype != dt, err, STOKER_E_INVALID,
                         "field \"%s\": an %s field's dtype is %s, not %s", nm, KIND_NAMES[f->kind],
                         stoker_dtype_name(dt), stoker_dtype_name(f->dtype));
        f->dtype = dt;
        f->ndim = 0;
        f->size = stoker_dtype_size(dt);
        return 0;
    }
    case STOKER_FIELD_RAW:
    case STOKER_FIELD_ARRAY: {
        uint64_t size = 0;
        STOKER_RETURN_IF(!stoker__raw_size(f->dtype, f->ndim, f->shape, &size), err,
                         STOKER_E_INVALID, "field \"%s\": %s: bad dtype %d, ndim %d or shape", nm,
                         KIND_NAMES[f->kind], (int)f->dtype, (int)f->ndim);
        STOKER_RETURN_IF(f->kind == STOKER_FIELD_ARRAY && size == 0, err, STOKER_E_INVALID,
                         "field \"%s\": an array's rows must have at least one element", nm);
        STOKER_RETURN_IF(f->kind == STOKER_FIELD_RAW && size > UINT32_MAX, err, STOKER_E_LIMIT,
                         "field \"%s\": raw values of %llu bytes (at most 4 GiB)", nm,
                         (unsigned long long)size);
        f->size = size;
        return 0;
    }
    default:
        return stoker__fail(err, STOKER_E_INVALID, "field \"%s\": unknown kind %d", nm,
                            (int)f->kind);
    }
}

static int check_tie(const stoker__schema *s, int32_t i, stoker__err *err)
{
    const stoker__field *f = &s->f[i];
    const char *nm = f->name;
    if (f->tie == STOKER_TIE_NONE) {
        STOKER_RETURN_IF(f->target >= 0, err, STOKER_E_INVALID,
                         "field \"%s\": a target without a tie", nm);
        return 0;
    }
    STOKER_RETURN_IF(f->tie < 0 || f->tie >= NTIES, err, STOKER_E_INVALID,
                     "field \"%s\": unknown tie %d", nm, (int)f->tie);
    const char *tn = TIE_NAMES[f->tie];
    STOKER_RETURN_IF(f->target < 0 || f->target >= i, err, STOKER_E_INVALID,
                     "field \"%s\": %s needs an earlier field as its target", nm, tn);
    const stoker__field *t = &s->f[f->target];
    if (f->tie == STOKER_TIE_ROWS) {
        STOKER_RETURN_IF(t->tie != STOKER_TIE_BOXES, err, STOKER_E_INVALID,
                         "field \"%s\": rows_of \"%s\", which is not a boxes field", nm, t->name);
        STOKER_RETURN_IF(f->kind != STOKER_FIELD_ARRAY, err, STOKER_E_INVALID,
                         "field \"%s\": rows_of is for an array field, not %s", nm,
                         KIND_NAMES[f->kind]);
        return 0;
    }
    STOKER_RETURN_IF(!is_image(t->kind) || t->tie != STOKER_TIE_NONE, err, STOKER_E_INVALID,
                     "field \"%s\": %s \"%s\", which is not a jpeg or png image field", nm, tn,
                     t->name);
    if (f->tie == STOKER_TIE_MASK) {
        const bool raw_mask =
            f->kind == STOKER_FIELD_RAW && f->dtype == STOKER_DTYPE_UINT8 && f->ndim == 2;
        STOKER_RETURN_IF(f->kind != STOKER_FIELD_PNG && !raw_mask, err, STOKER_E_INVALID,
                         "field \"%s\": a mask is a png or a raw uint8 [H, W] field", nm);
        return 0;
    }
    STOKER_RETURN_IF(f->kind != STOKER_FIELD_ARRAY || f->dtype != STOKER_DTYPE_FLOAT32 ||
                         f->ndim != 1 || f->shape[0] != 4,
                     err, STOKER_E_INVALID,
                     "field \"%s\": boxes are an array float32 of rows of 4 (x1, y1, x2, y2)", nm);
    return 0;
}

int stoker__schema_finish(stoker__schema *s, stoker__err *err)
{
    STOKER_RETURN_IF(s->n < 1 || s->n > STOKER_MAX_FIELDS, err, STOKER_E_INVALID,
                     "%d fields (a schema has 1 to %d)", (int)s->n, STOKER_MAX_FIELDS);
    s->nvar = 0;
    s->label = -1;
    s->legacy = false;
    for (int32_t i = 0; i < s->n; i++) {
        stoker__field *f = &s->f[i];
        f->name[STOKER_FIELD_NAME_MAX] = '\0';
        STOKER_RETURN_IF(!valid_name(f->name), err, STOKER_E_INVALID,
                         "field %d: name \"%s\" is not 1 to %d bytes of [A-Za-z0-9_] not "
                         "starting with a digit",
                         (int)i, f->name, STOKER_FIELD_NAME_MAX);
        for (int32_t j = 0; j < i; j++)
            STOKER_RETURN_IF(strcmp(s->f[j].name, f->name) == 0, err, STOKER_E_INVALID,
                             "field \"%s\": the name is used twice", f->name);
        int rc = check_kind(f, err);
        if (rc < 0 || (rc = check_tie(s, i, err)) < 0)
            return rc;
        f->variable = stoker__field_kind_variable(f->kind);
        f->var = f->variable ? s->nvar++ : -1;
        if (!f->variable)
            f->max = 0;
        if (f->kind == STOKER_FIELD_INT64 && strcmp(f->name, "label") == 0)
            s->label = i;
    }
    uint64_t pos = 4 * (uint64_t)s->nvar;
    for (int32_t i = 0; i < s->n; i++) {
        stoker__field *f = &s->f[i];
        f->offset = 0;
        if (f->variable)
            continue;
        f->offset = stoker__align_up(pos, 8);
        pos = f->offset + f->size; /* <= 32 fields of < 4 GiB: no overflow */
    }
    s->var_base = pos;
    return 0;
}

int stoker__schema_from_desc(stoker__schema *s, const stoker_field_desc *d, int32_t n,
                             stoker__err *err)
{
    memset(s, 0, sizeof *s);
    STOKER_RETURN_IF(!d || n < 1 || n > STOKER_MAX_FIELDS, err, STOKER_E_INVALID,
                     "%d fields (a schema has 1 to %d)", (int)n, STOKER_MAX_FIELDS);
    s->n = n;
    for (int32_t i = 0; i < n; i++) {
        stoker__field *f = &s->f[i];
        STOKER_RETURN_IF(d[i].struct_size < sizeof *d, err, STOKER_E_INVALID,
                         "field %d: struct_size %u, expected %zu", (int)i,
                         (unsigned)d[i].struct_size, sizeof *d);
        STOKER_RETURN_IF(!d[i].name || strlen(d[i].name) > STOKER_FIELD_NAME_MAX, err,
                         STOKER_E_INVALID, "field %d: a name of 1 to %d bytes is needed", (int)i,
                         STOKER_FIELD_NAME_MAX);
        snprintf(f->name, sizeof f->name, "%s", d[i].name);
        f->kind = d[i].kind;
        f->dtype = d[i].dtype;
        f->ndim = d[i].ndim;
        STOKER_RETURN_IF(f->ndim < 0 || f->ndim > STOKER_MAX_DIMS, err, STOKER_E_INVALID,
                         "field \"%s\": ndim %d (0 to %d)", f->name, (int)f->ndim, STOKER_MAX_DIMS);
        memcpy(f->shape, d[i].shape, (size_t)f->ndim * sizeof *f->shape);
        f->tie = d[i].tie;
        f->target = -1;
        if (d[i].tie_to) {
            for (int32_t j = 0; j < i && f->target < 0; j++)
                if (strcmp(d[j].name, d[i].tie_to) == 0)
                    f->target = j;
            STOKER_RETURN_IF(f->target < 0, err, STOKER_E_INVALID,
                             "field \"%s\": tied to \"%s\", which is not an earlier field", f->name,
                             d[i].tie_to);
        }
        STOKER_RETURN_IF(f->tie != STOKER_TIE_NONE && f->target < 0, err, STOKER_E_INVALID,
                         "field \"%s\": %s needs the name of an earlier field (tie_to)", f->name,
                         stoker__field_tie_name(f->tie) ? stoker__field_tie_name(f->tie) : "tie");
    }
    return stoker__schema_finish(s, err);
}

void stoker__schema_legacy(stoker__schema *s, int32_t kind, int32_t dtype, int32_t ndim,
                           const int64_t *shape, uint64_t max)
{
    memset(s, 0, sizeof *s);
    s->n = 2;
    stoker__field *f = &s->f[0];
    snprintf(f->name, sizeof f->name, "%s", kind == STOKER_FIELD_JPEG ? "image" : "data");
    f->kind = kind;
    f->target = -1;
    f->var = -1;
    if (kind == STOKER_FIELD_RAW) {
        f->dtype = dtype;
        f->ndim = ndim;
        memcpy(f->shape, shape, (size_t)ndim * sizeof *shape);
        stoker__raw_size(dtype, ndim, shape, &f->size);
    } else {
        f->variable = true;
        f->var = 0;
        f->max = max;
        s->nvar = 1;
    }
    f = &s->f[1];
    snprintf(f->name, sizeof f->name, "label");
    f->kind = STOKER_FIELD_INT64;
    f->dtype = STOKER_DTYPE_INT64;
    f->size = 8;
    f->target = -1;
    f->var = -1;
    s->label = 1;
    s->legacy = true;
}

int32_t stoker__schema_find(const stoker__schema *s, const char *name)
{
    if (!name)
        return -1;
    for (int32_t i = 0; i < s->n; i++)
        if (strcmp(s->f[i].name, name) == 0)
            return i;
    return -1;
}

void stoker__schema_desc(const stoker__schema *s, int32_t i, stoker_field_desc *out)
{
    const stoker__field *f = &s->f[i];
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
    out->kind = f->kind;
    out->name = f->name;
    out->dtype = f->dtype;
    out->ndim = f->ndim;
    memcpy(out->shape, f->shape, sizeof out->shape);
    out->tie = f->tie;
    out->tie_to = f->target >= 0 ? s->f[f->target].name : NULL;
    out->max = f->variable ? (int64_t)f->max : 0;
}

int stoker__schema_format(const stoker__schema *s, stoker__buf *b)
{
    int rc = stoker__buf_printf(b, "fields %d\n", (int)s->n);
    for (int32_t i = 0; i < s->n && rc == 0; i++) {
        const stoker__field *f = &s->f[i];
        rc = stoker__buf_printf(b, "field %s %s", f->name, KIND_NAMES[f->kind]);
        if (rc == 0 && (f->kind == STOKER_FIELD_RAW || f->kind == STOKER_FIELD_ARRAY)) {
            rc = stoker__buf_printf(b, " %s %d", stoker_dtype_name(f->dtype), (int)f->ndim);
            for (int32_t d = 0; d < f->ndim && rc == 0; d++)
                rc = stoker__buf_printf(b, " %lld", (long long)f->shape[d]);
        }
        if (rc == 0 && f->tie != STOKER_TIE_NONE)
            rc = stoker__buf_printf(b, " %s %s", TIE_NAMES[f->tie], s->f[f->target].name);
        if (rc == 0 && f->variable)
            rc = stoker__buf_printf(b, " max %llu", (unsigned long long)f->max);
        if (rc == 0)
            rc = stoker__buf_append(b, "\n", 1);
    }
    return rc;
}

/* ---- image headers ---- */

static uint32_t be16(const uint8_t *p)
{
    return (uint32_t)p[0] << 8 | p[1];
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

bool stoker__jpeg_size(const uint8_t *p, uint64_t n, uint32_t *w, uint32_t *h)
{
    if (n < 4 || p[0] != 0xFF || p[1] != 0xD8)
        return false;
    uint64_t i = 2;
    while (i + 4 <= n) {
        if (p[i] != 0xFF)
            return false;
        const uint8_t m = p[i + 1];
        if (m == 0xFF) { /* fill byte */
            i++;
            continue;
        }
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) { /* TEM, RSTn: no length */
            i += 2;
            continue;
        }
        if (m == 0xD8 || m == 0xD9 || m == 0xDA) /* SOI again, EOI, SOS: no frame before */
            return false;
        const uint32_t len = be16(p + i + 2);
        if (len < 2 || i + 2 + len > n)
            return false;
        const bool sof = m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
        if (sof) {
            if (len < 8)
                return false;
            *h = be16(p + i + 5);
            *w = be16(p + i + 7);
            return *w > 0 && *h > 0;
        }
        i += 2 + len;
    }
    return false;
}

bool stoker__png_size(const uint8_t *p, uint64_t n, uint32_t *w, uint32_t *h, uint8_t *depth,
                      uint8_t *color)
{
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    if (n < 33 || memcmp(p, sig, 8) != 0 || be32(p + 8) != 13 || memcmp(p + 12, "IHDR", 4) != 0)
        return false;
    *w = be32(p + 16);
    *h = be32(p + 20);
    *depth = p[24];
    *color = p[25];
    return *w > 0 && *h > 0 && *w <= INT32_MAX && *h <= INT32_MAX;
}

/* ---- a sample's values ---- */

typedef struct dims {
    uint32_t w, h;
} dims;

static int check_image(const stoker__field *f, const stoker_field_value *v, dims *d,
                       stoker__err *err)
{
    const uint8_t *p = v->data;
    uint8_t depth = 0, color = 0;
    if (f->kind == STOKER_FIELD_JPEG) {
        STOKER_RETURN_IF(!stoker__jpeg_size(p, v->size, &d->w, &d->h), err, STOKER_E_INVALID,
                         "field \"%s\": not a readable JPEG (no frame header with a size)",
                         f->name);
        return 0;
    }
    STOKER_RETURN_IF(!stoker__png_size(p, v->size, &d->w, &d->h, &depth, &color), err,
                     STOKER_E_INVALID, "field \"%s\": not a readable PNG (no IHDR with a size)",
                     f->name);
    STOKER_RETURN_IF(f->tie == STOKER_TIE_MASK && (depth != 8 || (color != 0 && color != 3)), err,
                     STOKER_E_INVALID,
                     "field \"%s\": a mask PNG is 8-bit gray or palette, not bit depth %u colour "
                     "type %u",
                     f->name, depth, color);
    return 0;
}

static int check_size(const stoker__field *f, const stoker_field_value *v, stoker__err *err)
{
    STOKER_RETURN_IF(!v->data && v->size > 0, err, STOKER_E_INVALID,
                     "field \"%s\": NULL data of %llu bytes", f->name, (unsigned long long)v->size);
    if (!f->variable) {
        STOKER_RETURN_IF(v->size != f->size, err, STOKER_E_INVALID,
                         "field \"%s\": %llu bytes, but a %s%s%s value is %llu", f->name,
                         (unsigned long long)v->size, KIND_NAMES[f->kind],
                         f->kind == STOKER_FIELD_RAW ? " " : "",
                         f->kind == STOKER_FIELD_RAW ? stoker_dtype_name(f->dtype) : "",
                         (unsigned long long)f->size);
        return 0;
    }
    STOKER_RETURN_IF(v->size > UINT32_MAX, err, STOKER_E_LIMIT,
                     "field \"%s\": %llu bytes (a variable field holds less than 4 GiB)", f->name,
                     (unsigned long long)v->size);
    STOKER_RETURN_IF(f->kind == STOKER_FIELD_ARRAY && v->size % f->size != 0, err, STOKER_E_INVALID,
                     "field \"%s\": %llu bytes, not a whole number of rows of %llu bytes (%s)",
                     f->name, (unsigned long long)v->size, (unsigned long long)f->size,
                     stoker_dtype_name(f->dtype));
    return 0;
}

int stoker__boxes_check(const char *field, const uint8_t *v, uint64_t n, uint32_t w, uint32_t h,
                        int code, stoker__err *err)
{
    for (uint64_t r = 0; r < n; r++) {
        float b[4];
        memcpy(b, v + 16 * r, sizeof b);
        for (int k = 0; k < 4; k++)
            STOKER_RETURN_IF(!isfinite(b[k]), err, code,
                             "field \"%s\": box %llu has a value that is not finite (%g)", field,
                             (unsigned long long)r, (double)b[k]);
        STOKER_RETURN_IF(!(0 <= b[0] && b[0] <= b[2] && b[2] <= (float)w && 0 <= b[1] &&
                           b[1] <= b[3] && b[3] <= (float)h),
                         err, code,
                         "field \"%s\": box %llu [%g, %g, %g, %g] is not within its image of "
                         "%ux%u with x1 <= x2, y1 <= y2",
                         field, (unsigned long long)r, (double)b[0], (double)b[1], (double)b[2],
                         (double)b[3], w, h);
    }
    return 0;
}

static int check_boxes(const stoker__field *f, const stoker_field_value *v, dims d,
                       stoker__err *err)
{
    return stoker__boxes_check(f->name, v->data, v->size / 16, d.w, d.h, STOKER_E_INVALID, err);
}

static int check_rows(const stoker__schema *s, const stoker__field *f, const stoker_field_value *v,
                      int code, stoker__err *err)
{
    const stoker__field *t = &s->f[f->target];
    const uint64_t rows = v[f - s->f].size / f->size, boxes = v[f->target].size / t->size;
    STOKER_RETURN_IF(rows != boxes, err, code,
                     "field \"%s\": %llu rows, but its boxes \"%s\" have %llu", f->name,
                     (unsigned long long)rows, t->name, (unsigned long long)boxes);
    return 0;
}

int stoker__schema_check_tied(const stoker__schema *s, int32_t i, const stoker_field_value *v,
                              uint32_t w, uint32_t h, stoker__err *err)
{
    const stoker__field *f = &s->f[i];
    if (f->tie == STOKER_TIE_ROWS)
        return check_rows(s, f, v, STOKER_E_CORRUPT, err);
    if (f->tie != STOKER_TIE_BOXES)
        return 0;
    if (!w || !h) {
        const stoker__field *t = &s->f[f->target];
        const stoker_field_value *im = &v[f->target];
        uint8_t depth, color;
        const bool sized = t->kind == STOKER_FIELD_JPEG
                               ? stoker__jpeg_size(im->data, im->size, &w, &h)
                               : stoker__png_size(im->data, im->size, &w, &h, &depth, &color);
        STOKER_RETURN_IF(!sized || !w || !h, err, STOKER_E_CORRUPT,
                         "field \"%s\": its image \"%s\" has no readable size to check the "
                         "boxes by",
                         f->name, t->name);
    }
    return stoker__boxes_check(f->name, v[i].data, v[i].size / 16, w, h, STOKER_E_CORRUPT, err);
}

int stoker__schema_check_boxes(const stoker__schema *s, const stoker_field_value *v,
                               stoker__err *err)
{
    for (int32_t i = 0; i < s->n; i++) {
        const int rc = stoker__schema_check_tied(s, i, v, 0, 0, err);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int stoker__schema_check(const stoker__schema *s, const stoker_field_value *v, stoker__err *err)
{
    dims d[STOKER_MAX_FIELDS] = {{0, 0}};
    for (int32_t i = 0; i < s->n; i++) {
        const stoker__field *f = &s->f[i];
        int rc = check_size(f, &v[i], err);
        if (rc < 0)
            return rc;
        if (is_image(f->kind) && (rc = check_image(f, &v[i], &d[i], err)) < 0)
            return rc;
        if (f->tie == STOKER_TIE_MASK) {
            const stoker__field *t = &s->f[f->target];
            dims m = d[i];
            if (f->kind == STOKER_FIELD_RAW)
                m = (dims){(uint32_t)f->shape[1], (uint32_t)f->shape[0]};
            const dims im = d[f->target];
            STOKER_RETURN_IF(m.w != im.w || m.h != im.h, err, STOKER_E_INVALID,
                             "field \"%s\": a mask of %ux%u, but its image \"%s\" is %ux%u",
                             f->name, m.w, m.h, t->name, im.w, im.h);
        } else if (f->tie == STOKER_TIE_BOXES) {
            if ((rc = check_boxes(f, &v[i], d[f->target], err)) < 0)
                return rc;
        } else if (f->tie == STOKER_TIE_ROWS) {
            if ((rc = check_rows(s, f, v, STOKER_E_INVALID, err)) < 0)
                return rc;
        }
    }
    return 0;
}

uint64_t stoker__schema_payload_size(const stoker__schema *s, const stoker_field_value *v)
{
    uint64_t pos = s->var_base;
    for (int32_t i = 0; i < s->n; i++)
        if (s->f[i].variable)
            pos = stoker__align_up(pos, 8) + v[i].size;
    return pos;
}

void stoker__schema_encode(const stoker__schema *s, const stoker_field_value *v, uint8_t *dst)
{
    uint64_t pos = s->var_base;
    memset(dst, 0, s->var_base);
    for (int32_t i = 0; i < s->n; i++) {
        const stoker__field *f = &s->f[i];
        if (!f->variable) {
            if (f->size > 0)
                memcpy(dst + f->offset, v[i].data, f->size);
            continue;
        }
        stoker__put_u32(dst + 4 * (uint64_t)f->var, (uint32_t)v[i].size);
        const uint64_t at = stoker__align_up(pos, 8);
        memset(dst + pos, 0, at - pos);
        if (v[i].size > 0)
            memcpy(dst + at, v[i].data, v[i].size);
        pos = at + v[i].size;
    }
}

static bool zeros(const uint8_t *p, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

static int split_legacy(const stoker__schema *s, uint64_t n, stoker__span *out, stoker__err *err)
{
    const stoker__field *f = &s->f[0];
    STOKER_RETURN_IF(!f->variable && n != f->size, err, STOKER_E_CORRUPT,
                     "field \"%s\": %llu bytes, but its raw records are %llu", f->name,
                     (unsigned long long)n, (unsigned long long)f->size);
    out[0] = (stoker__span){0, n};
    out[1] = (stoker__span){0, 0};
    return 0;
}

int stoker__schema_split(const stoker__schema *s, const uint8_t *p, uint64_t n, stoker__span *out,
                         stoker__err *err)
{
    if (s->legacy)
        return split_legacy(s, n, out, err);
    const uint64_t head = 4 * (uint64_t)s->nvar;
    STOKER_RETURN_IF(n < s->var_base, err, STOKER_E_CORRUPT,
                     "%llu bytes, shorter than the %llu of the header and the fixed fields",
                     (unsigned long long)n, (unsigned long long)s->var_base);
    uint64_t pos = head;
    for (int32_t i = 0; i < s->n; i++) {
        const stoker__field *f = &s->f[i];
        if (f->variable)
            continue;
        STOKER_RETURN_IF(!zeros(p + pos, f->offset - pos), err, STOKER_E_CORRUPT,
                         "field \"%s\": the padding before it is not zeros", f->name);
        out[i] = (stoker__span){f->offset, f->size};
        pos = f->offset + f->size;
    }
    for (int32_t i = 0; i < s->n; i++) {
        const stoker__field *f = &s->f[i];
        if (!f->variable)
            continue;
        const uint64_t len = stoker__get_u32(p + 4 * (uint64_t)f->var);
        const uint64_t at = stoker__align_up(pos, 8);
        STOKER_RETURN_IF(at > n || len > n - at, err, STOKER_E_CORRUPT,
                         "field \"%s\": a length of %llu bytes at %llu runs past the payload's "
                         "%llu",
                         f->name, (unsigned long long)len, (unsigned long long)at,
                         (unsigned long long)n);
        STOKER_RETURN_IF(!zeros(p + pos, at - pos), err, STOKER_E_CORRUPT,
                         "field \"%s\": the padding before it is not zeros", f->name);
        if (f->kind == STOKER_FIELD_ARRAY) {
            STOKER_RETURN_IF(len % f->size != 0, err, STOKER_E_CORRUPT,
                             "field \"%s\": %llu bytes, not a whole number of rows of %llu",
                             f->name, (unsigned long long)len, (unsigned long long)f->size);
            STOKER_RETURN_IF(len / f->size > f->max, err, STOKER_E_CORRUPT,
                             "field \"%s\": %llu rows, over the data set's max of %llu", f->name,
                             (unsigned long long)(len / f->size), (unsigned long long)f->max);
        } else {
            STOKER_RETURN_IF(len > f->max, err, STOKER_E_CORRUPT,
                             "field \"%s\": %llu bytes, over the data set's max of %llu", f->name,
                             (unsigned long long)len, (unsigned long long)f->max);
        }
        out[i] = (stoker__span){at, len};
        pos = at + len;
    }
    STOKER_RETURN_IF(pos != n, err, STOKER_E_CORRUPT,
                     "%llu bytes, but its fields' lengths make %llu", (unsigned long long)n,
                     (unsigned long long)pos);
    return 0;
}
