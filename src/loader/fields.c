/* SPDX-License-Identifier: Apache-2.0 */
/* A batch's fields: the region's layout and the packing of ragged fields (fields.h). */
#include "loader/fields.h"

#include "loader/batch.h"
#include "source/dataset.h"
#include "transform/transform.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define REGION_ALIGN 64u /* each field's area: a cache line, and any dtype's alignment */
/* A slot's first room for RAGGED values: a full batch of the largest values where that is
 * less; beyond it a slot grows to what its batches need (a data set's largest value may be
 * far above what a batch of its records holds). */
#define FIRST_RAGGED_MAX (UINT64_C(8) << 20)

void stoker__pfields_legacy(stoker__pfields *pf, int32_t kind)
{
    memset(pf, 0, sizeof *pf);
    pf->n = 2;
    pf->data = 0;
    pf->label = 1;
    stoker__pfield *d = &pf->f[0], *l = &pf->f[1];
    snprintf(d->name, sizeof d->name, "%s", kind == STOKER_FIELD_JPEG ? "image" : "data");
    d->src = 0;
    d->kind = kind;
    d->role = STOKER__PF_DATA;
    d->tied = -1;
    snprintf(l->name, sizeof l->name, "label");
    l->src = -1;
    l->kind = STOKER_FIELD_INT64;
    l->role = STOKER__PF_LABEL;
    l->tied = -1;
    l->dtype = STOKER_DTYPE_INT64;
    l->item = sizeof(int64_t);
}

static int grow(uint64_t *at, uint64_t n, const char *path, stoker__err *err)
{
    uint64_t end;
    if (stoker__add_ovf(stoker__align_up(*at, REGION_ALIGN), n, &end) || end > INT64_MAX)
        return stoker__fail(err, STOKER_E_LIMIT, "%s: a batch's fields take more than 2^63 bytes",
                            path);
    *at = end;
    return 0;
}

int stoker__pfields_layout(stoker__pfields *pf, uint64_t batch, const char *path, stoker__err *err)
{
    uint64_t at = 0, n, ragged = 0;
    pf->batch = batch;
    pf->any_ragged = false;
    pf->raggeds = 0;
    for (int32_t i = 0; i < pf->n; i++) {
        stoker__pfield *f = &pf->f[i];
        if (f->role == STOKER__PF_DATA)
            continue;
        if (f->role == STOKER__PF_RAGGED) {
            pf->any_ragged = true;
            pf->raggeds++;
            if (grow(&at, (batch + 1) * sizeof(int64_t), path, err) < 0)
                return STOKER_E_LIMIT;
            f->offsets_off = at - (batch + 1) * sizeof(int64_t);
            f->off = 0; /* the values' place is the batch's (vals_off) */
            if (stoker__mul_ovf(f->item, f->max_rows, &n) || stoker__mul_ovf(n, batch, &n) ||
                grow(&ragged, n, path, err) < 0)
                return stoker__fail(err, STOKER_E_LIMIT,
                                    "%s: field %s: a batch of its largest values overflows", path,
                                    f->name);
            continue;
        }
        if (stoker__mul_ovf(f->item, batch, &n))
            return stoker__fail(err, STOKER_E_LIMIT, "%s: field %s: a batch overflows", path,
                                f->name);
        if (grow(&at, n, path, err) < 0)
            return STOKER_E_LIMIT;
        f->off = at - n;
    }
    pf->cap = stoker__align_up(at, REGION_ALIGN);
    ragged = stoker__align_up(ragged, REGION_ALIGN);
    pf->first = pf->cap + (ragged < FIRST_RAGGED_MAX ? ragged : FIRST_RAGGED_MAX);
    return 0;
}

uint64_t stoker__pfield_bound(const stoker__pfield *f, uint64_t record_length)
{
    if (record_length == 0 || f->stored == 0)
        return f->max_rows;
    const uint64_t fit = record_length / f->stored;
    return fit < f->max_rows ? fit : f->max_rows;
}

int stoker__pfields_place(const stoker__pfields *pf, stoker_batch *b,
                          const struct stoker__recloc *locs, uint64_t *place, stoker__err *err)
{
    const uint64_t count = (uint64_t)b->count, batch = pf->batch;
    uint64_t at = pf->cap;
    for (int32_t i = 0; i < pf->n; i++) {
        const stoker__pfield *f = &pf->f[i];
        if (f->role != STOKER__PF_RAGGED)
            continue;
        uint64_t *pl = place + (size_t)i * (batch + 1), rows = 0, bytes;
        for (uint64_t j = 0; j < count; j++) {
            pl[j] = rows;
            rows += stoker__pfield_bound(f, locs[j].length); /* <= batch x max_rows */
        }
        pl[count] = rows;
        at = stoker__align_up(at, REGION_ALIGN);
        b->vals_off[i] = at;
        if (stoker__mul_ovf(rows, f->item, &bytes) || stoker__add_ovf(at, bytes, &at) ||
            at > INT64_MAX - REGION_ALIGN)
            return stoker__fail(err, STOKER_E_LIMIT, "field %s: a batch's values overflow",
                                f->name);
    }
    b->extra_used = stoker__align_up(at, REGION_ALIGN);
    return 0;
}

int32_t stoker__pfields_find(const stoker__pfields *pf, const char *name)
{
    for (int32_t i = 0; name && i < pf->n; i++)
        if (strcmp(pf->f[i].name, name) == 0)
            return i;
    return -1;
}

void stoker__pfields_pack(const stoker__pfields *pf, stoker_batch *b, const uint64_t *rows,
                          const uint64_t *place)
{
    const uint64_t batch = pf->batch;
    for (int32_t i = 0; i < pf->n; i++) {
        const stoker__pfield *f = &pf->f[i];
        if (f->role != STOKER__PF_RAGGED)
            continue;
        int64_t *offs = (int64_t *)(b->extra + f->offsets_off);
        uint8_t *vals = b->extra + b->vals_off[i];
        const uint64_t *r = rows + (uint64_t)i * batch, *pl = place + (uint64_t)i * (batch + 1);
        uint64_t at = 0; /* rows packed so far; never past sample j's own place */
        offs[0] = 0;
        for (int64_t j = 0; j < b->count; j++) {
            if (pl[j] != at && r[j] > 0)
                memmove(vals + at * f->item, vals + pl[j] * f->item, r[j] * f->item);
            at += r[j];
            offs[j + 1] = (int64_t)at;
        }
        b->totals[i] = (int64_t)at;
    }
}

/* ---- dtype conversion ---- */

static bool dtype_float(int32_t t)
{
    return t == STOKER_DTYPE_FLOAT16 || t == STOKER_DTYPE_BFLOAT16 || t == STOKER_DTYPE_FLOAT32 ||
           t == STOKER_DTYPE_FLOAT64;
}

bool stoker__dtype_convertible(int32_t t)
{
    return t >= STOKER_DTYPE_UINT8 && t <= STOKER_DTYPE_BOOL;
}

static float bf16_to_f32(uint16_t h)
{
    const uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* d as a float rounded to odd (truncated, the last bit set when inexact): rounding that to
 * float16 or bfloat16 (<= 11 bits, float has 24) to nearest even then equals rounding d
 * itself once, as NumPy's float64 to float16 does. */
static float f32_odd(double d)
{
    float f = (float)d;
    if (isnan(d) || (double)f == d)
        return f;
    if (fabs((double)f) > fabs(d))
        f = nextafterf(f, 0.0f);
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    x |= 1u;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* Element i of a float array as a double. */
static double load_float(const uint8_t *p, int32_t t)
{
    switch (t) {
    case STOKER_DTYPE_FLOAT16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return stoker__f16_to_f32(h);
    }
    case STOKER_DTYPE_BFLOAT16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return bf16_to_f32(h);
    }
    case STOKER_DTYPE_FLOAT32: {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    default: {
        double d;
        memcpy(&d, p, 8);
        return d;
    }
    }
}

/* An integer (or bool) element, sign-extended from a signed type, as 64 bits. */
static uint64_t load_int(const uint8_t *p, int32_t t)
{
    switch (t) {
    case STOKER_DTYPE_INT8: return (uint64_t)(int64_t)(int8_t)p[0];
    case STOKER_DTYPE_UINT16: {
        uint16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    case STOKER_DTYPE_INT16: {
        int16_t v;
        memcpy(&v, p, 2);
        return (uint64_t)(int64_t)v;
    }
    case STOKER_DTYPE_UINT32: {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    case STOKER_DTYPE_INT32: {
        int32_t v;
        memcpy(&v, p, 4);
        return (uint64_t)(int64_t)v;
    }
    case STOKER_DTYPE_UINT64:
    case STOKER_DTYPE_INT64: {
        uint64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    case STOKER_DTYPE_BOOL: return p[0] != 0;
    default: return p[0]; /* UINT8 */
    }
}

/* The low bytes of v: an integer of the target's width, wrapped as two's complement. */
static void store_bits(uint8_t *p, uint64_t v, size_t size)
{
    switch (size) {
    case 1: p[0] = (uint8_t)v; break;
    case 2: {
        const uint16_t b = (uint16_t)v;
        memcpy(p, &b, 2);
        break;
    }
    case 4: {
        const uint32_t b = (uint32_t)v;
        memcpy(p, &b, 4);
        break;
    }
    default: memcpy(p, &v, 8);
    }
}

static void store_float(uint8_t *p, double d, int32_t t)
{
    if (t == STOKER_DTYPE_FLOAT64) {
        memcpy(p, &d, 8);
    } else if (t == STOKER_DTYPE_FLOAT32) {
        const float f = (float)d;
        memcpy(p, &f, 4);
    } else {
        const float f = f32_odd(d);
        const uint16_t h =
            t == STOKER_DTYPE_FLOAT16 ? stoker__f32_to_f16(f) : stoker__f32_to_bf16(f);
        memcpy(p, &h, 2);
    }
}

/* A float truncated toward zero into integer type t: NaN gives 0, values beyond t's range
 * (infinities too) its least or greatest value. */
static uint64_t float_to_int(double d, int32_t t)
{
    if (isnan(d))
        return 0;
    const double x = trunc(d);
    const unsigned bits = 8u * (unsigned)stoker_dtype_size(t);
    const bool sign = t == STOKER_DTYPE_INT8 || t == STOKER_DTYPE_INT16 ||
                      t == STOKER_DTYPE_INT32 || t == STOKER_DTYPE_INT64;
    const double hi = ldexp(1.0, (int)bits - (sign ? 1 : 0)); /* one past the greatest */
    const double lo = sign ? -hi : 0.0;
    if (x < lo)
        return sign ? (uint64_t)1 << (bits - 1) : 0; /* the least: its bits */
    if (x >= hi)
        return sign         ? ((uint64_t)1 << (bits - 1)) - 1
               : bits == 64 ? UINT64_MAX
                            : ((uint64_t)1 << bits) - 1;
    return sign ? (uint64_t)(int64_t)x : (uint64_t)x;
}

void stoker__dtype_convert(void *dst, int32_t to, const void *src, int32_t from, uint64_t n)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    const size_t ds = stoker_dtype_size(to), ss = stoker_dtype_size(from);
    const bool ffrom = dtype_float(from), fto = dtype_float(to);
    const bool sfrom = from == STOKER_DTYPE_INT8 || from == STOKER_DTYPE_INT16 ||
                       from == STOKER_DTYPE_INT32 || from == STOKER_DTYPE_INT64;
    for (uint64_t i = 0; i < n; i++, d += ds, s += ss) {
        if (ffrom) {
            const double v = load_float(s, from);
            if (fto)
                store_float(d, v, to);
            else if (to == STOKER_DTYPE_BOOL)
                d[0] = v != 0.0; /* NaN is true, as C's and NumPy's */
            else
                store_bits(d, float_to_int(v, to), ds);
            continue;
        }
        const uint64_t v = load_int(s, from);
        if (to == STOKER_DTYPE_BOOL)
            d[0] = v != 0;
        else if (!fto)
            store_bits(d, v, ds);
        else if (to == STOKER_DTYPE_FLOAT32) {
            const float f = sfrom ? (float)(int64_t)v : (float)v;
            memcpy(d, &f, 4);
        } else
            store_float(d, sfrom ? (double)(int64_t)v : (double)v, to);
    }
}
