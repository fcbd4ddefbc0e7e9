/* SPDX-License-Identifier: Apache-2.0 */
/* A batch's fields: the region's layout and the packing of ragged fields (fields.h). */
#include "loader/fields.h"

#include <stdio.h>
#include <string.h>

#define REGION_ALIGN 64u /* each field's area: a cache line, and any dtype's alignment */

void stoker__pfields_legacy(stoker__pfields *pf, int32_t kind, uint64_t batch)
{
    (void)batch;
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
    uint64_t at = 0, n;
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
            if (stoker__mul_ovf(f->item, f->max_rows, &n) || stoker__mul_ovf(n, batch, &n))
                return stoker__fail(err, STOKER_E_LIMIT,
                                    "%s: field %s: a batch of its largest values overflows", path,
                                    f->name);
        } else if (stoker__mul_ovf(f->item, batch, &n)) {
            return stoker__fail(err, STOKER_E_LIMIT, "%s: field %s: a batch overflows", path,
                                f->name);
        }
        if (grow(&at, n, path, err) < 0)
            return STOKER_E_LIMIT;
        f->off = at - n;
    }
    pf->cap = stoker__align_up(at, REGION_ALIGN);
    return 0;
}

int32_t stoker__pfields_find(const stoker__pfields *pf, const char *name)
{
    for (int32_t i = 0; name && i < pf->n; i++)
        if (strcmp(pf->f[i].name, name) == 0)
            return i;
    return -1;
}

void stoker__pfields_pack(const stoker__pfields *pf, uint8_t *region, const uint64_t *rows,
                          uint64_t batch, int64_t count, int64_t *totals)
{
    for (int32_t i = 0; i < pf->n; i++) {
        const stoker__pfield *f = &pf->f[i];
        if (f->role != STOKER__PF_RAGGED)
            continue;
        int64_t *offs = (int64_t *)(region + f->offsets_off);
        uint8_t *vals = region + f->off;
        const uint64_t *r = rows + (uint64_t)i * batch;
        uint64_t at = 0; /* rows packed so far; never past sample j's own place j * max_rows */
        offs[0] = 0;
        for (int64_t j = 0; j < count; j++) {
            const uint64_t from = (uint64_t)j * f->max_rows;
            if (from != at && r[j] > 0)
                memmove(vals + at * f->item, vals + from * f->item, r[j] * f->item);
            at += r[j];
            offs[j + 1] = (int64_t)at;
        }
        totals[i] = (int64_t)at;
    }
}
