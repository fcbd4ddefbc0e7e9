/* SPDX-License-Identifier: Apache-2.0 */
/* The JPEG image pipeline as the workers' process step (process.h). */
#include "loader/process.h"

#include "decode/png.h"
#include "format/schema.h"
#include "transform/fields.h"

#include <stdio.h>
#include <string.h>

struct stoker__process {
    const stoker__plan *plan;
    stoker__xform_scratch *xs;
    stoker__wstats *stats;
    /* samples with several fields: decoded PNG pixels (an image, then a mask) and the boxes
     * kept, grown as needed */
    uint8_t *pix;
    size_t pix_cap;
    uint8_t *keep;
    size_t keep_cap;
    uint8_t *conv; /* a converted field's values as they come in, before conversion */
    size_t conv_cap;
};

int stoker__process_create(stoker__process **out, const stoker__plan *plan, stoker__wstats *stats)
{
    stoker__process *pr = stoker__calloc(1, sizeof *pr);
    *out = pr;
    if (!pr)
        return -ENOMEM;
    pr->plan = plan;
    pr->stats = stats;
    return stoker__xform_scratch_create(&pr->xs) < 0 ? -ENOMEM : 0;
}

void stoker__process_destroy(stoker__process *pr)
{
    if (!pr)
        return;
    stoker__xform_scratch_destroy(pr->xs);
    stoker__free(pr->pix);
    stoker__free(pr->keep);
    stoker__free(pr->conv);
    stoker__free(pr);
}

/* Single writer (the worker): a relaxed store, read by stats with relaxed loads. */
static inline void counter_set(atomic_uint_fast64_t *c, uint64_t v)
{
    atomic_store_explicit(c, v, memory_order_relaxed);
}

/* Publishes the scratch's stage times, which only the worker may read, as its counters. */
static void publish_stats(const stoker__process *pr)
{
    const stoker__xform_stats *st = stoker__xform_scratch_stats(pr->xs);
    counter_set(&pr->stats->decode_ns, st->decode_ns);
    counter_set(&pr->stats->resize_ns, st->resize_ns);
    counter_set(&pr->stats->normalize_ns, st->normalize_ns);
    counter_set(&pr->stats->reduced, st->reduced);
}

int stoker__process_record(stoker__process *pr, uint64_t seed, int64_t epoch, int64_t id,
                           const uint8_t *src, uint64_t n, bool whole, uint8_t *dst, uint64_t cap,
                           stoker__err *err)
{
    const stoker__plan *p = pr->plan;
    if (cap < p->rec_size)
        return stoker__fail(err, STOKER_E_LIMIT,
                            "output slot of %" PRIu64 " bytes is smaller than a sample (%" PRIu64
                            ")",
                            cap, p->rec_size);
    int rc =
        whole
            ? stoker__xform_jpeg_whole(pr->xs, &p->xform, seed, epoch, id, src, (size_t)n, dst, err)
            : stoker__xform_jpeg(pr->xs, &p->xform, seed, epoch, id, src, (size_t)n, dst, err);
    publish_stats(pr);
    if (rc == STOKER_E_LIMIT) {
        char why[STOKER_ERRMSG_CAP];
        memcpy(why, err->msg, sizeof why);
        rc = stoker__fail(err, STOKER_E_CORRUPT, "image over the size limit (STOKER_E_LIMIT): %s",
                          why);
    }
    return rc;
}

/* ---- samples with several fields ---- */

/* n samples or rows of field f, as they come in at src, into dst in the delivered dtype. */
static void put_values(const stoker__pfield *f, uint8_t *dst, const uint8_t *src, uint64_t n)
{
    if (!f->from) {
        memcpy(dst, src, n * f->item);
        return;
    }
    stoker__dtype_convert(dst, f->dtype, src, f->from,
                          n * (f->stored / stoker_dtype_size(f->from)));
}

/* A field's failure: the field's name before the cause (the caller adds file and record). */
static int field_fail(stoker__err *err, int rc, const stoker__pfield *f, const char *why)
{
    char was[STOKER_ERRMSG_CAP];
    snprintf(was, sizeof was, "%s", why && *why ? why : stoker_strerror(rc));
    return stoker__fail(err, rc, "field \"%s\": %s", f->name, was);
}

/* The transformed image v (len bytes) of field f into dst, and its size; `image`
 * STOKER__IMAGE_ELSEWHERE: a JPEG's size alone (the GPU decode stage decodes it). */
static int sample_image(stoker__process *pr, const stoker__pfield *f, uint64_t seed, int64_t epoch,
                        int64_t id, const uint8_t *v, uint64_t len, bool whole, int image,
                        uint8_t *dst, int32_t *w, int32_t *h, stoker__err *err)
{
    const stoker__plan *p = pr->plan;
    int rc;
    if (f->kind == STOKER_FIELD_JPEG) {
        uint32_t jw = 0, jh = 0;
        if (!stoker__jpeg_size(v, len, &jw, &jh) || jw == 0 || jh == 0)
            return field_fail(err, STOKER_E_CORRUPT, f, "not a JPEG with a readable size");
        *w = (int32_t)jw;
        *h = (int32_t)jh;
        if (image == STOKER__IMAGE_ELSEWHERE)
            return 0;
        rc = whole
                 ? stoker__xform_jpeg_whole(pr->xs, &p->xform, seed, epoch, id, v, (size_t)len, dst,
                                            err)
                 : stoker__xform_jpeg(pr->xs, &p->xform, seed, epoch, id, v, (size_t)len, dst, err);
    } else {
        stoker__png_info info;
        if ((rc = stoker__png_info_read(v, (size_t)len, &info, err)) < 0)
            return field_fail(err, rc, f, err->msg);
        const uint64_t need = stoker__png_out_size(&info, STOKER__PNG_RGB);
        if (stoker__scratch_grow(&pr->pix, &pr->pix_cap, need) < 0)
            return -ENOMEM;
        rc = stoker__png_decode(v, (size_t)len, STOKER__PNG_RGB, p->max_pixels, pr->pix,
                                pr->pix_cap, &info, err);
        if (rc == 0)
            rc = stoker__xform_rgb(pr->xs, &p->xform, seed, epoch, id, pr->pix, info.width,
                                   info.height, (size_t)info.width * 3, dst, err);
        *w = info.width;
        *h = info.height;
    }
    publish_stats(pr);
    if (rc == STOKER_E_LIMIT)
        return field_fail(err, STOKER_E_CORRUPT, f, err->msg);
    return rc < 0 ? field_fail(err, rc, f, err->msg) : 0;
}

/* A mask (PNG, or raw uint8 [H, W]) through the image's geometry g into dst. */
static int sample_mask(stoker__process *pr, const stoker__pfield *f, const stoker__schema *sc,
                       const uint8_t *v, uint64_t len, const stoker__fgeom *g, uint8_t *dst,
                       stoker__err *err)
{
    const stoker__field *sf = &sc->f[f->src];
    int32_t w, h;
    const uint8_t *px = v;
    if (sf->kind == STOKER_FIELD_PNG) {
        stoker__png_info info;
        int rc = stoker__png_info_read(v, (size_t)len, &info, err);
        if (rc == 0 && stoker__scratch_grow(&pr->pix, &pr->pix_cap,
                                            stoker__png_out_size(&info, STOKER__PNG_MASK)) < 0)
            return -ENOMEM;
        if (rc == 0)
            rc = stoker__png_decode(v, (size_t)len, STOKER__PNG_MASK, pr->plan->max_pixels, pr->pix,
                                    pr->pix_cap, &info, err);
        if (rc < 0)
            return field_fail(err, rc == STOKER_E_CORRUPT ? rc : STOKER_E_CORRUPT, f, err->msg);
        w = info.width;
        h = info.height;
        px = pr->pix;
    } else { /* raw uint8 [H, W] */
        h = (int32_t)sf->shape[0];
        w = (int32_t)sf->shape[1];
    }
    if (w != g->src_w || h != g->src_h) {
        char why[128];
        snprintf(why, sizeof why, "a mask of %dx%d for an image of %dx%d", w, h, g->src_w,
                 g->src_h);
        return field_fail(err, STOKER_E_CORRUPT, f, why);
    }
    const int rc = stoker__mask_geom(px, w, h, (size_t)w, g, dst, err);
    return rc < 0 ? field_fail(err, STOKER_E_CORRUPT, f, err->msg) : 0;
}

int stoker__process_sample(stoker__process *pr, uint64_t seed, int64_t epoch, int64_t id,
                           const uint8_t *src, uint64_t n, bool whole, int image, uint8_t *dst,
                           uint64_t cap, stoker_batch *b, uint64_t *rows, const uint64_t *place,
                           uint64_t j, stoker__err *err)
{
    uint8_t *extra = b->extra;
    const stoker__plan *p = pr->plan;
    const stoker__pfields *pf = &p->fields;
    const stoker__schema *sc = pf->schema;
    stoker__span sp[STOKER_MAX_FIELDS];
    int rc = stoker__schema_split(sc, src, n, sp, err);
    if (rc < 0)
        return rc;
    stoker__fgeom g;
    bool geom = false;
    int32_t kept_of = -1; /* the boxes field whose keep marks pr->keep holds */
    for (int32_t i = 0; i < pf->n; i++) {
        const stoker__pfield *f = &pf->f[i];
        if (f->src == STOKER__SRC_IMAGE_SIZE) { /* after its image, whose size g holds */
            if (!geom)
                return field_fail(err, STOKER_E_INVALID, f, "its image was not transformed");
            const int64_t hw[2] = {g.src_h, g.src_w};
            put_values(f, extra + f->off + j * f->item, (const uint8_t *)hw, 1);
            continue;
        }
        const uint8_t *v = src + sp[f->src].off;
        const uint64_t len = sp[f->src].len;
        if (f->role == STOKER__PF_DATA) {
            if (cap < p->rec_size)
                return stoker__fail(err, STOKER_E_LIMIT,
                                    "output slot of %" PRIu64 " bytes is smaller than a sample",
                                    cap);
            int32_t w = 0, h = 0;
            if ((rc = sample_image(pr, f, seed, epoch, id, v, len, whole, image, dst, &w, &h,
                                   err)) < 0)
                return rc;
            stoker__sample_geometry(&p->xform, w, h, seed, epoch, id, &g);
            geom = true;
            continue;
        }
        uint8_t *at = extra + (f->role == STOKER__PF_RAGGED ? b->vals_off[i] : f->off);
        if (f->role == STOKER__PF_MASK) {
            if (!geom)
                return field_fail(err, STOKER_E_INVALID, f, "its image was not transformed");
            /* the geometry writes uint8, widened after where asked */
            if (f->from && stoker__scratch_grow(&pr->conv, &pr->conv_cap, f->stored) < 0)
                return -ENOMEM;
            uint8_t *m = f->from ? pr->conv : at + j * f->item;
            if ((rc = sample_mask(pr, f, sc, v, len, &g, m, err)) < 0)
                return rc;
            if (f->from)
                put_values(f, at + j * f->item, m, 1);
            continue;
        }
        if (f->role == STOKER__PF_DENSE) {
            put_values(f, at + j * f->item, v, 1);
            continue;
        }
        /* RAGGED: the rows at the sample's own place; boxes through the geometry (on the
         * values as they come in: float32), then converted where asked */
        const uint64_t nrows = f->stored ? len / f->stored : 0;
        if (nrows > f->max_rows) {
            char why[128];
            snprintf(why, sizeof why, "%" PRIu64 " rows, more than the manifest's max %" PRIu64,
                     nrows, f->max_rows);
            return field_fail(err, STOKER_E_CORRUPT, f, why);
        }
        const uint64_t *pl = place + (uint64_t)i * (pf->batch + 1);
        if (nrows > pl[j + 1] - pl[j]) { /* its record's length bounds them: a record's part */
            char why[160];
            snprintf(why, sizeof why,
                     "%" PRIu64 " rows, more than its record of %" PRIu64 " bytes can hold", nrows,
                     n);
            return field_fail(err, STOKER_E_CORRUPT, f, why);
        }
        uint8_t *out = at + pl[j] * f->item;
        if (f->from && stoker__scratch_grow(&pr->conv, &pr->conv_cap, len ? len : 1) < 0)
            return -ENOMEM;
        uint8_t *d = f->from ? pr->conv : out;
        memcpy(d, v, len);
        int64_t kept = (int64_t)nrows;
        if (f->tie == STOKER_TIE_BOXES || f->tie == STOKER_TIE_ROWS) {
            /* as they come in, before the geometry, by the rule every check of boxes applies
             * (a packed data set's pass by construction; another source's, HDF5's, promise
             * nothing): boxes within their image (its decoded size, where it was transformed),
             * rows one a box whether the boxes are delivered or not */
            const int32_t target = sc->f[f->src].target;
            const bool sized = f->tie == STOKER_TIE_BOXES && geom && pf->data >= 0 &&
                               pf->f[pf->data].src == target;
            stoker_field_value vals[STOKER_MAX_FIELDS];
            for (int32_t k = 0; k < sc->n; k++)
                vals[k] = (stoker_field_value){src + sp[k].off, sp[k].len};
            if ((rc = stoker__schema_check_tied(sc, f->src, vals, sized ? (uint32_t)g.src_w : 0,
                                                sized ? (uint32_t)g.src_h : 0, err)) < 0)
                return rc;
        }
        if (f->tie == STOKER_TIE_BOXES && geom) {
            if (stoker__scratch_grow(&pr->keep, &pr->keep_cap, nrows ? nrows : 1) < 0)
                return -ENOMEM;
            stoker__boxes_geom((float *)(void *)d, (int64_t)nrows, &g, p->xform.min_box_size,
                               p->xform.min_box_vis, pr->keep);
            kept = stoker__rows_compact(d, (int64_t)nrows, (size_t)f->stored, pr->keep);
            kept_of = i;
        } else if (f->tie == STOKER_TIE_ROWS && f->tied >= 0 && f->tied == kept_of) {
            kept = stoker__rows_compact(d, (int64_t)nrows, (size_t)f->stored, pr->keep);
        }
        if (f->from)
            put_values(f, out, d, (uint64_t)kept);
        rows[(uint64_t)i * pf->batch + j] = (uint64_t)kept;
    }
    return 0;
}

bool stoker__process_image_bytes(const stoker__process *pr, const uint8_t *src, uint64_t n,
                                 const uint8_t **img, uint64_t *len)
{
    const stoker__pfields *pf = &pr->plan->fields;
    if (!pf->split || pf->data < 0)
        return false;
    stoker__span sp[STOKER_MAX_FIELDS];
    stoker__err err = {0};
    if (stoker__schema_split(pf->schema, src, n, sp, &err) < 0)
        return false;
    const int32_t k = pf->f[pf->data].src;
    *img = src + sp[k].off;
    *len = sp[k].len;
    return true;
}

int stoker__process_sample_image(stoker__process *pr, uint64_t seed, int64_t epoch, int64_t id,
                                 const uint8_t *img, uint64_t len, bool whole, uint8_t *dst,
                                 uint64_t cap, stoker__err *err)
{
    const stoker__plan *p = pr->plan;
    const stoker__pfields *pf = &p->fields;
    if (pf->data < 0)
        return stoker__fail(err, STOKER_E_INVALID, "the batch delivers no image");
    if (cap < p->rec_size)
        return stoker__fail(err, STOKER_E_LIMIT,
                            "output slot of %" PRIu64 " bytes is smaller than a sample", cap);
    int32_t w = 0, h = 0;
    return sample_image(pr, &pf->f[pf->data], seed, epoch, id, img, len, whole, STOKER__IMAGE_HERE,
                        dst, &w, &h, err);
}
