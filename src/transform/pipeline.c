/* SPDX-License-Identifier: Apache-2.0 */
/* The per-sample pipeline: geometry -> region decode -> horizontal pass per decoded row ->
 * vertical pass per output row -> unpack + normalise straight into the sample's place.
 *
 * Decoded rows are resampled horizontally as they arrive, so the decoded crop is never
 * stored whole. Pillow's resampler keeps (rows used) x C RGBX pixels and resamples each
 * output row vertically at the end. The fast one keeps 16-bit values (for its pairwise
 * multiply-adds) in a ring of a few rows, and makes each output row as soon as the rows it
 * reads are in: its working set stays in the core's caches, where the whole set of rows,
 * written once and read back later, would not. Each output row is resampled into one
 * L1-sized row, unpacked and converted from there into its place in the sample. */
#include "transform/transform.h"

#include "common/config.h"

#include "decode/color.h"
#include "decode/jpeg.h"

#include <math.h>
#include <string.h>
#include <xmmintrin.h>

#define MAX_SIZE 16384 /* largest output side accepted */
/* Decoded rows may start before the region (iMCU alignment, at most 32 pixels, plus the
 * decoder's edge margin): staged rows have this much room beyond the region's width. */
#define STAGE_SLACK 64
/* Reading the clock is not free (docs/BENCHMARKS.md): stages inside a sample are timed one
 * time in this many and scaled, so that the shares stay right while the clock costs little. */
#define SAMPLE_EVERY 8

struct stoker__xform_scratch {
    stoker__jpeg_dec *dec;
    stoker__xform_stats stats;
    /* the sample being made */
    const stoker__xform_params *p;
    stoker__geom g;
    int32_t hk, vk;       /* filter lengths (coefficient strides) */
    int32_t hkmax;        /* the most taps of any output column (hpass4's kmax) */
    int32_t hbits, vbits; /* its weights' precision per axis */
    int32_t ring;         /* its rows of horizontal results (a power of two) */
    int32_t next_out;     /* its next output row */
    void *dst;            /* the sample being written */
    uint64_t norm_sampled_ns, norm_sampled_rows;
    int32_t x0, x1, y0, y1; /* source pixels the outputs read */
    int rebased;            /* hfirst made relative to the first decoded column */
    size_t stage_px;        /* pixels per staged row */
    uint64_t flush_ns;      /* time of the flushes timed (see row_staged) */
    uint32_t flushes, flushes_timed;
    uint64_t seed; /* the record being made, for the header callback */
    int64_t epoch, id;
    stoker__err *err;
    /* grown on demand, reused */
    int32_t *hfirst, *htaps, *hcoef, *vfirst, *vtaps, *vcoef, *hpair, *vpair;
    const uint16_t **vrows; /* the rows one fast vertical output reads */
    /* capacities in bytes (a buffer may hold bytes for one sample, words for the next) */
    size_t vrows_cap;
    size_t hfirst_cap, htaps_cap, hcoef_cap, vfirst_cap, vtaps_cap, vcoef_cap;
    size_t hpair_cap, vpair_cap;
    int16_t *pq; /* the fast resampler's pairs of interleaved pixels */
    size_t pq_cap;
    double *tmp;
    size_t tmp_cap;
    uint8_t *hbuf, *vrow, *urow, *stage, *quad; /* stage: 4 source rows; quad: interleaved */
    size_t hbuf_cap, vrow_cap, urow_cap, stage_cap, quad_cap;
    uint8_t *zero; /* a row of black RGBX pixels: a letterbox's padding */
    size_t zero_cap;
};

/* ---- parameters ---------------------------------------------------------------------------- */

static size_t dtype_bytes(int32_t dtype)
{
    return dtype == STOKER_DTYPE_UINT8 ? 1 : dtype == STOKER_DTYPE_FLOAT32 ? 4 : 2;
}

/* A field left 0 takes the options table's default (src/common/config.c), the one home of
 * defaults, as a loader's config gives it; the rules the table's doc lines name for 0 stay
 * here: the transform of a JPEG data set (train), resize (round(C * 256 / 224)) and the
 * dtype of images on a GPU (float16). */
static void resolve_defaults(stoker__xform_params *p)
{
    if (p->transform == STOKER_TRANSFORM_DEFAULT)
        p->transform = STOKER_TRANSFORM_TRAIN;
    if (p->size == 0)
        p->size = (int32_t)stoker__cfg_int(NULL, STOKER_OPT_SIZE);
    if (p->resize == 0) /* torchvision's habit: 256 for 224 */
        p->resize = (int32_t)floor(p->size * 256.0 / 224.0 + 0.5);
    if (p->dtype == STOKER_DTYPE_DEFAULT)
        p->dtype = STOKER_DTYPE_FLOAT16;
    const struct {
        int32_t *field;
        stoker_option opt;
    } enums[] = {
        {&p->layout, STOKER_OPT_LAYOUT},       {&p->dct, STOKER_OPT_DCT},
        {&p->antialias, STOKER_OPT_ANTIALIAS}, {&p->resampler, STOKER_OPT_RESAMPLER},
        {&p->dct_scale, STOKER_OPT_DCT_SCALE},
    };
    for (size_t i = 0; i < sizeof enums / sizeof enums[0]; i++)
        if (*enums[i].field == 0) /* each enum's DEFAULT */
            *enums[i].field = (int32_t)stoker__cfg_int(NULL, enums[i].opt);
    if (p->max_pixels == 0)
        p->max_pixels = (uint64_t)stoker__cfg_int(NULL, STOKER_OPT_MAX_PIXELS);
    if (p->hflip == 0.0) /* "never" is below 0 here, so that 0 stays the default */
        p->hflip = stoker__cfg_float(NULL, STOKER_OPT_HFLIP);
    const stoker_option crop[4] = {STOKER_OPT_SCALE_MIN, STOKER_OPT_SCALE_MAX, STOKER_OPT_RATIO_MIN,
                                   STOKER_OPT_RATIO_MAX};
    for (int i = 0; i < 4; i++) {
        double *v = i < 2 ? &p->crop_scale[i] : &p->crop_ratio[i - 2];
        if (*v == 0.0)
            *v = stoker__cfg_float(NULL, crop[i]);
    }
}

int stoker__xform_check_mean_std(const float mean[3], const float std[3], stoker__err *err)
{
    for (int c = 0; c < 3; c++)
        STOKER_RETURN_IF(!isfinite(mean[c]) || !isfinite(std[c]) || std[c] == 0.0f ||
                             !isfinite(1.0 / (255.0 * std[c])),
                         err, STOKER_E_INVALID, "mean/std of channel %d unusable (%g, %g)", c,
                         (double)mean[c], (double)std[c]);
    return 0;
}

static int validate(const stoker__xform_params *p, stoker__err *err)
{
    const int32_t t = p->transform, d = p->dtype;
    STOKER_RETURN_IF(t != STOKER_TRANSFORM_TRAIN && t != STOKER_TRANSFORM_EVAL &&
                         t != STOKER_TRANSFORM_RESIZE && t != STOKER_TRANSFORM_LETTERBOX,
                     err, STOKER_E_INVALID, "transform %d has no image pipeline", (int)t);
    STOKER_RETURN_IF(p->size < 1 || p->size > MAX_SIZE, err, STOKER_E_INVALID,
                     "size %d outside 1..%d", (int)p->size, MAX_SIZE);
    STOKER_RETURN_IF(t == STOKER_TRANSFORM_EVAL && (p->resize < p->size || p->resize > 65535), err,
                     STOKER_E_INVALID, "resize %d must be in size (%d)..65535", (int)p->resize,
                     (int)p->size);
    STOKER_RETURN_IF(d != STOKER_DTYPE_UINT8 && d != STOKER_DTYPE_FLOAT16 &&
                         d != STOKER_DTYPE_BFLOAT16 && d != STOKER_DTYPE_FLOAT32,
                     err, STOKER_E_INVALID,
                     "dtype %s is not an image output type (uint8, float16, bfloat16, float32)",
                     stoker_dtype_name(d));
    STOKER_RETURN_IF(p->layout != STOKER_LAYOUT_NCHW && p->layout != STOKER_LAYOUT_NHWC, err,
                     STOKER_E_INVALID, "layout %d unknown", (int)p->layout);
    STOKER_RETURN_IF(p->dct != STOKER_DCT_ISLOW && p->dct != STOKER_DCT_IFAST, err,
                     STOKER_E_INVALID, "dct %d unknown", (int)p->dct);
    STOKER_RETURN_IF(p->antialias != STOKER_ANTIALIAS_ALWAYS &&
                         p->antialias != STOKER_ANTIALIAS_OVER_2X,
                     err, STOKER_E_INVALID, "antialias %d unknown", (int)p->antialias);
    STOKER_RETURN_IF(p->resampler != STOKER_RESAMPLER_FAST &&
                         p->resampler != STOKER_RESAMPLER_PILLOW,
                     err, STOKER_E_INVALID, "resampler %d unknown", (int)p->resampler);
    STOKER_RETURN_IF(p->dct_scale != STOKER_DCT_SCALE_NEVER &&
                         p->dct_scale != STOKER_DCT_SCALE_TRAIN &&
                         p->dct_scale != STOKER_DCT_SCALE_ALWAYS,
                     err, STOKER_E_INVALID, "dct_scale %d unknown", (int)p->dct_scale);
    /* the table bounds each; NaN and an inverted range are this check's */
    STOKER_RETURN_IF(!(p->crop_scale[0] > 0.0 && p->crop_scale[0] <= p->crop_scale[1] &&
                       p->crop_scale[1] <= 1.0),
                     err, STOKER_E_INVALID,
                     "the crop's scale %g to %g (scale_min to scale_max) must be within (0, 1], "
                     "the first at most the second",
                     p->crop_scale[0], p->crop_scale[1]);
    STOKER_RETURN_IF(!(p->crop_ratio[0] > 0.0 && p->crop_ratio[0] <= p->crop_ratio[1] &&
                       isfinite(p->crop_ratio[1])),
                     err, STOKER_E_INVALID,
                     "the crop's ratio %g to %g (ratio_min to ratio_max) must be finite and "
                     "above 0, the first at most the second",
                     p->crop_ratio[0], p->crop_ratio[1]);
    return stoker__xform_check_mean_std(p->mean, p->std, err);
}

/* (v/255 - mean)/std = v * scale + bias, per element position of a 48-element period. */
static void derive_patterns(stoker__xform_params *p)
{
    for (int i = 0; i < STOKER__PATTERN; i++) {
        for (int c = 0; c < 4; c++) {
            const int ch = c < 3 ? c : i % 3; /* planes 0..2, then packed RGB */
            p->scale[c][i] = (float)(1.0 / (255.0 * (double)p->std[ch]));
            p->bias[c][i] = (float)(-(double)p->mean[ch] / (double)p->std[ch]);
        }
    }
}

int stoker__xform_params_prepare(stoker__xform_params *p, int32_t simd_level, stoker__err *err)
{
    resolve_defaults(p);
    int rc = validate(p, err);
    if (rc < 0)
        return rc;
    rc = stoker__simd_ops_get(simd_level, &p->simd, err);
    if (rc < 0)
        return rc;
    derive_patterns(p);
    return 0;
}

size_t stoker__xform_sample_bytes(const stoker__xform_params *p)
{
    return (size_t)p->size * (size_t)p->size * 3 * dtype_bytes(p->dtype);
}

/* ---- scratch ------------------------------------------------------------------------------- */

int stoker__xform_scratch_create(stoker__xform_scratch **out)
{
    stoker__xform_scratch *s = stoker__calloc(1, sizeof *s);
    *out = s;
    if (!s)
        return -ENOMEM;
    if (stoker__jpeg_dec_create(&s->dec) < 0) {
        stoker__free(s);
        *out = NULL;
        return -ENOMEM;
    }
    return 0;
}

void stoker__xform_scratch_destroy(stoker__xform_scratch *s)
{
    if (!s)
        return;
    stoker__jpeg_dec_destroy(s->dec);
    void *bufs[] = {s->hfirst, s->htaps, s->hcoef, s->vfirst, s->vtaps, s->vcoef,
                    s->hpair,  s->vpair, s->vrows, s->pq,     s->tmp,   s->hbuf,
                    s->vrow,   s->urow,  s->stage, s->quad,   s->zero};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        stoker__free(bufs[i]);
    stoker__free(s);
}

const stoker__xform_stats *stoker__xform_scratch_stats(const stoker__xform_scratch *s)
{
    return &s->stats;
}

/* Makes *buf hold n elements of `size` bytes (contents not kept); *cap counts bytes. */
static int grow(void *buf, size_t *cap, uint64_t n, size_t size)
{
    void **b = buf;
    uint64_t bytes;
    if (stoker__mul_ovf(n, size, &bytes) || bytes > SIZE_MAX)
        return -ENOMEM;
    if (bytes <= *cap)
        return 0;
    void *p = stoker__malloc((size_t)bytes);
    if (!p)
        return -ENOMEM;
    memset(p, 0, (size_t)bytes); /* padding may be read (and weighted by zero) */
    stoker__free(*b);
    *b = p;
    *cap = (size_t)bytes;
    return 0;
}

/* Whether the sample uses the fast resampler (16-bit weights in pairs). */
static bool fast(const stoker__xform_scratch *s)
{
    return s->p->resampler == STOKER_RESAMPLER_FAST;
}

/* ---- one sample ---------------------------------------------------------------------------- */

/* Grows every table and buffer the sample needs; sizes are bounded by the validated image
 * size and output size, and every product is overflow-checked. */
static int grow_tables(stoker__xform_scratch *s, int32_t c, stoker__err *err)
{
    const uint64_t hk = (uint64_t)s->hk, vk = (uint64_t)s->vk, n = (uint64_t)c;
    const uint64_t rows = (uint64_t)(s->y1 - s->y0), px = s->stage_px;
    /* the fast resampler: a ring of 16-bit values */
    const uint64_t hrows = fast(s) ? (uint64_t)s->ring : rows, vsize = fast(s) ? 2 : 1;
    const int bad =
        grow(&s->hfirst, &s->hfirst_cap, n, 4) < 0 || grow(&s->htaps, &s->htaps_cap, n, 4) < 0 ||
        grow(&s->hcoef, &s->hcoef_cap, n * hk, 4) < 0 ||
        grow(&s->stage, &s->stage_cap, px * 16, 1) < 0 ||
        grow(&s->quad, &s->quad_cap, (px + hk) * 16, 1) < 0 || /* hpass4 reads kmax past */
        grow(&s->vfirst, &s->vfirst_cap, n, 4) < 0 || grow(&s->vtaps, &s->vtaps_cap, n, 4) < 0 ||
        grow(&s->vcoef, &s->vcoef_cap, n * vk, 4) < 0 ||
        grow(&s->hbuf, &s->hbuf_cap, hrows * n * 4, vsize) < 0 ||
        grow(&s->vrow, &s->vrow_cap, n * 4, vsize) < 0 ||
        grow(&s->urow, &s->urow_cap, n * 3, 1) < 0 ||
        (fast(s) && (grow(&s->pq, &s->pq_cap, (px + hk) * 32, 2) < 0 ||
                     grow(&s->hpair, &s->hpair_cap, n * ((hk + 1) / 2), 4) < 0 ||
                     grow(&s->vpair, &s->vpair_cap, n * ((vk + 1) / 2), 4) < 0 ||
                     grow(&s->vrows, &s->vrows_cap, vk + 1, sizeof *s->vrows) < 0));
    STOKER_RETURN_IF(bad, err, -ENOMEM, "no memory for a %dx%d sample from %d source rows", (int)c,
                     (int)c, (int)rows);
    return 0;
}

/* Geometry and coefficient tables for a width x height source, which the decoder may
 * shrink by up to max_scale (1: it is used as it is). */
static int plan(stoker__xform_scratch *s, const stoker__xform_params *p, int32_t width,
                int32_t height, int32_t max_scale, uint64_t seed, int64_t epoch, int64_t id,
                stoker__err *err)
{
    stoker__xform_geometry(p, width, height, seed, epoch, id, &s->g);
    stoker__geom_reduce(&s->g, max_scale);
    s->hk = stoker__resample_ksize(&s->g.x);
    s->vk = stoker__resample_ksize(&s->g.y);
    /* The ring holds the rows a pending output row may read (fewer than vk before the
     * newest), the next four, and the row past a window that its last pair of taps reads
     * with weight zero. */
    s->ring = 8;
    while (s->ring < s->vk + 5)
        s->ring *= 2;
    s->next_out = 0;
    const int32_t kmax = s->hk > s->vk ? s->hk : s->vk;
    STOKER_RETURN_IF(grow(&s->tmp, &s->tmp_cap, (uint64_t)kmax, sizeof(double)) < 0, err, -ENOMEM,
                     "no memory for %d filter taps", (int)kmax);
    stoker__resample_range(&s->g.y, &s->y0, &s->y1); /* sizes hbuf */
    stoker__resample_range(&s->g.x, &s->x0, &s->x1); /* sizes the staged rows */
    s->stage_px = (size_t)(s->x1 - s->x0) + STAGE_SLACK;
    int rc = grow_tables(s, p->size, err);
    if (rc < 0)
        return rc;
    /* a letterbox's padding: zeroed when made, never written */
    STOKER_RETURN_IF((s->g.x.count < p->size || s->g.y.count < p->size) &&
                         grow(&s->zero, &s->zero_cap, (uint64_t)p->size * 4, 1) < 0,
                     err, -ENOMEM, "no memory for a row of %d pixels", (int)p->size);
    int32_t lo, hi;
    stoker__resample_coeffs(&s->g.y, s->y0, 0, s->vk, 1, s->vfirst, s->vtaps, s->vcoef, s->tmp, &lo,
                            &hi);
    stoker__resample_coeffs(&s->g.x, 0, s->g.flip, s->hk, 1, s->hfirst, s->htaps, s->hcoef, s->tmp,
                            &s->x0, &s->x1);
    s->hkmax = 1;
    for (int32_t j = 0; j < s->g.x.count; j++)
        s->hkmax = s->htaps[j] > s->hkmax ? s->htaps[j] : s->hkmax;
    if (fast(s)) {
        s->hbits = stoker__coeffs_to_pairs(s->hcoef, s->g.x.count, s->hk, s->hpair);
        s->vbits = stoker__coeffs_to_pairs(s->vcoef, s->g.y.count, s->vk, s->vpair);
    }
    s->rebased = 0;
    return 0;
}

/* After the JPEG header: plans the sample and asks for just the source pixels it reads, at
 * the DCT reduction the options allow. */
static int on_header(void *ctx, int32_t width, int32_t height, stoker__jpeg_region *r)
{
    stoker__xform_scratch *s = ctx;
    const int rc = plan(s, s->p, width, height, stoker__xform_max_scale(s->p), s->seed, s->epoch,
                        s->id, s->err);
    if (rc < 0)
        return rc;
    *r = (stoker__jpeg_region){s->x0, s->y0, s->x1, s->y1, 0, s->g.scale};
    return 0;
}

/* Makes the horizontal table relative to the first pixel the rows start at. */
static void rebase(stoker__xform_scratch *s, int32_t x)
{
    for (int32_t j = 0; j < s->g.x.count; j++)
        s->hfirst[j] -= x;
    s->rebased = 1;
}

/* The fast resampler's row of horizontal results for source row y0 + i. */
static uint16_t *ring_row(const stoker__xform_scratch *s, int32_t i)
{
    return (uint16_t *)s->hbuf + (size_t)(i & (s->ring - 1)) * (size_t)s->p->size * 4;
}

/* Resamples the staged rows [y - r, y] (r + 1 of them, 1..4) horizontally into hbuf. */
static void flush_rows(stoker__xform_scratch *s, int32_t y, int32_t r, int32_t n)
{
    const size_t c = (size_t)s->p->size;
    const uint8_t *rows[4];
    for (int32_t i = 0; i < 4; i++) /* missing rows repeat the last one */
        rows[i] = s->stage + (size_t)(i <= r ? i : r) * s->stage_px * 4;
    const stoker__simd_ops *k = s->p->simd;
    k->interleave4(rows, (size_t)n, s->quad);
    /* the results of missing rows go to a spare row */
    if (!fast(s)) {
        uint8_t *out[4];
        for (int32_t i = 0; i < 4; i++)
            out[i] = i <= r ? s->hbuf + (size_t)(y - r + i - s->y0) * c * 4 : s->vrow;
        k->hpass4(s->quad, s->g.x.count, s->hfirst, s->htaps, s->hcoef, s->hk, s->hkmax, out);
        return;
    }
    uint16_t *out16[4];
    for (int32_t i = 0; i < 4; i++)
        out16[i] = i <= r ? ring_row(s, y - r + i - s->y0) : (uint16_t *)s->vrow;
    k->pairs(s->quad, (size_t)n, s->pq);
    k->hpass4_fast(s->pq, s->g.x.count, s->hfirst, s->hpair, (s->hk + 1) / 2, (s->hkmax + 1) / 2,
                   s->hbits, out16);
}

/* One resampled row of n RGBX pixels to pixels [x, x + n) of output row j of dst, in the
 * sample's dtype and layout. */
static void emit_row(const stoker__xform_params *p, const uint8_t *rgbx, uint8_t *urow, int32_t j,
                     size_t x, size_t n, uint8_t *dst)
{
    const stoker__simd_ops *k = p->simd;
    const size_t c = (size_t)p->size, es = dtype_bytes(p->dtype);
    if (p->layout == STOKER_LAYOUT_NHWC) {
        uint8_t *o = dst + ((size_t)j * c + x) * 3 * es;
        if (p->dtype == STOKER_DTYPE_UINT8)
            k->unpack_packed(rgbx, n, o);
        else {
            k->unpack_packed(rgbx, n, urow);
            k->convert(urow, 3 * n, p->dtype, p->scale[3], p->bias[3], o);
        }
        return;
    }
    const size_t plane = c * c * es;
    uint8_t *o = dst + ((size_t)j * c + x) * es;
    if (p->dtype == STOKER_DTYPE_UINT8) {
        k->unpack_planar(rgbx, n, o, o + plane, o + 2 * plane);
        return;
    }
    void *const planes[3] = {o, o + plane, o + 2 * plane};
    const float scale[3] = {p->scale[0][0], p->scale[1][0], p->scale[2][0]};
    const float bias[3] = {p->bias[0][0], p->bias[1][0], p->bias[2][0]};
    k->emit_planar(rgbx, n, p->dtype, scale, bias, planes);
}

/* The sample outside its ow x oh image (LETTERBOX): black, pixels of value 0 through the
 * same normalisation as the image's (so the padding is the same whoever normalises: the
 * workers, or the GPU stage from uint8). Each row's columns past ow, then the rows past
 * oh. */
static void pad_sample(stoker__xform_scratch *s)
{
    const stoker__xform_params *p = s->p;
    const size_t c = (size_t)p->size, w = (size_t)s->g.x.count;
    if (w == c && s->g.y.count == p->size)
        return;
    for (int32_t y = 0; y < p->size; y++) {
        const size_t x = y < s->g.y.count ? w : 0;
        if (x < c)
            emit_row(p, s->zero, s->urow, y, x, c - x, s->dst);
    }
}

/* Output row j: the vertical pass into one row, then unpack/normalise into the sample
 * (timed on every SAMPLE_EVERY-th row). */
static void out_row(stoker__xform_scratch *s, int32_t j)
{
    const stoker__xform_params *p = s->p;
    const size_t n = (size_t)s->g.x.count * 4, stride = (size_t)p->size * 4; /* hbuf's rows */
    if (fast(s)) {
        const int32_t pairs = (s->vtaps[j] + 1) / 2;
        for (int32_t i = 0; i < 2 * pairs; i++)
            s->vrows[i] = ring_row(s, s->vfirst[j] + i);
        p->simd->vpass_fast(s->vrows, pairs, s->vpair + (size_t)j * ((s->vk + 1) / 2), s->vbits,
                            s->vrow, n);
    } else {
        p->simd->vpass(s->hbuf + (size_t)s->vfirst[j] * stride, stride, s->vtaps[j],
                       s->vcoef + (size_t)j * s->vk, s->vrow, n);
    }
    const int32_t at = s->g.vflip ? s->g.y.count - 1 - j : j; /* a vertical flip: bottom up */
    if (j % SAMPLE_EVERY == 0) {
        const uint64_t t0 = stoker__now_ns();
        emit_row(p, s->vrow, s->urow, at, 0, (size_t)s->g.x.count, s->dst);
        s->norm_sampled_ns += stoker__now_ns() - t0;
        s->norm_sampled_rows++;
    } else {
        emit_row(p, s->vrow, s->urow, at, 0, (size_t)s->g.x.count, s->dst);
    }
}

/* The fast resampler: makes every output row whose source rows are all in (the first
 * `rows` of the region). */
static void out_rows_ready(stoker__xform_scratch *s, int32_t rows)
{
    while (s->next_out < s->g.y.count && s->vfirst[s->next_out] + s->vtaps[s->next_out] <= rows)
        out_row(s, s->next_out++);
}

/* Row y of n pixels from image column x is staged; every fourth row (and the last) the
 * staged rows are resampled together. */
static int row_staged(stoker__xform_scratch *s, int32_t y, int32_t x, int32_t n)
{
    if (!s->rebased)
        rebase(s, x);
    const int32_t r = (y - s->y0) & 3;
    if (r != 3 && y != s->y1 - 1)
        return 0;
    /* one flush in SAMPLE_EVERY is timed, and the time of all estimated from those */
    const int timed = s->flushes++ % SAMPLE_EVERY == 0;
    const uint64_t t0 = timed ? stoker__now_ns() : 0;
    flush_rows(s, y, r, n);
    if (fast(s))
        out_rows_ready(s, y + 1 - s->y0);
    if (timed) {
        s->flush_ns += stoker__now_ns() - t0;
        s->flushes_timed++;
    }
    return 0;
}

/* The time of all the sample's flushes, from those timed; at most `limit`. */
static uint64_t flush_time(const stoker__xform_scratch *s, uint64_t limit)
{
    const uint64_t t = s->flushes_timed ? s->flush_ns * s->flushes / s->flushes_timed : 0;
    return t < limit ? t : limit;
}

/* Rows are decoded straight into the staging rows (no copy). */
static uint8_t *on_buffer(void *ctx, int32_t y, int32_t n)
{
    stoker__xform_scratch *s = ctx;
    if ((size_t)n > s->stage_px) {
        stoker__fail(s->err, STOKER_E_LIMIT, "JPEG row of %d pixels, at most %zu expected", (int)n,
                     s->stage_px);
        return NULL;
    }
    return s->stage + (size_t)((y - s->y0) & 3) * s->stage_px * 4;
}

static int on_row(void *ctx, int32_t y, const uint8_t *rgbx, int32_t x, int32_t n)
{
    (void)rgbx; /* it is the staging row that on_buffer gave */
    stoker__xform_scratch *s = ctx;
    return row_staged(s, y, x, n);
}

/* Starts a sample for dst: its parameters, and its stage timers at zero. */
static void begin(stoker__xform_scratch *s, const stoker__xform_params *p, void *dst)
{
    s->p = p;
    s->dst = dst;
    s->flush_ns = 0;
    s->flushes = s->flushes_timed = 0;
    s->norm_sampled_ns = s->norm_sampled_rows = 0;
}

/* The output rows not made yet (all of them, with Pillow's resampler), and the stage
 * times of the sample, whose row flushes took flushed_ns. */
static void finish(stoker__xform_scratch *s, uint64_t flushed_ns)
{
    const uint64_t start = stoker__now_ns();
    while (s->next_out < s->g.y.count)
        out_row(s, s->next_out++);
    pad_sample(s);
    const uint64_t total = stoker__now_ns() - start + flushed_ns;
    uint64_t norm = s->norm_sampled_rows
                        ? s->norm_sampled_ns * (uint64_t)s->g.y.count / s->norm_sampled_rows
                        : 0;
    norm = norm < total ? norm : total;
    s->stats.resize_ns += total - norm;
    s->stats.normalize_ns += norm;
    s->stats.samples++;
    s->stats.reduced += s->g.scale > 1;
    _mm_sfence(); /* the sample's streaming stores are done before anyone is told */
}

static int xform_jpeg(stoker__xform_scratch *s, const stoker__xform_params *p, uint64_t seed,
                      int64_t epoch, int64_t id, const uint8_t *jpeg, size_t size, bool whole,
                      void *dst, stoker__err *err)
{
    /* the geometry needs the image size: on_header plans the sample from the header,
     * before anything is decoded */
    const uint64_t t0 = stoker__now_ns();
    begin(s, p, dst);
    s->seed = seed;
    s->epoch = epoch;
    s->id = id;
    s->err = err;
    const stoker__jpeg_sink sink = {on_header, on_row, s, on_buffer, 4}; /* 4 staged rows */
    const int rc =
        whole ? stoker__jpeg_decode_whole(s->dec, jpeg, size, p->dct, p->max_pixels, &sink, err)
              : stoker__jpeg_decode(s->dec, jpeg, size, p->dct, p->max_pixels, &sink, err);
    /* the flushes' time is an estimate: never more than the whole call */
    const uint64_t spent = stoker__now_ns() - t0;
    const uint64_t flushed = flush_time(s, spent);
    s->stats.decode_ns += spent - flushed;
    if (rc < 0) {
        _mm_sfence(); /* rows made before the failure, too */
        return rc;
    }
    finish(s, flushed);
    return 0;
}

int stoker__xform_jpeg(stoker__xform_scratch *s, const stoker__xform_params *p, uint64_t seed,
                       int64_t epoch, int64_t id, const uint8_t *jpeg, size_t size, void *dst,
                       stoker__err *err)
{
    return xform_jpeg(s, p, seed, epoch, id, jpeg, size, false, dst, err);
}

int stoker__xform_jpeg_whole(stoker__xform_scratch *s, const stoker__xform_params *p, uint64_t seed,
                             int64_t epoch, int64_t id, const uint8_t *jpeg, size_t size, void *dst,
                             stoker__err *err)
{
    return xform_jpeg(s, p, seed, epoch, id, jpeg, size, true, dst, err);
}

int stoker__xform_rgb(stoker__xform_scratch *s, const stoker__xform_params *p, uint64_t seed,
                      int64_t epoch, int64_t id, const uint8_t *rgb, int32_t width, int32_t height,
                      size_t stride, void *dst, stoker__err *err)
{
    STOKER_RETURN_IF(width < 1 || height < 1 || stride < (size_t)width * 3, err, STOKER_E_INVALID,
                     "RGB image %dx%d with stride %zu", (int)width, (int)height, stride);
    STOKER_RETURN_IF((uint64_t)width * (uint64_t)height > p->max_pixels, err, STOKER_E_LIMIT,
                     "image of %dx%d pixels exceeds the limit of %llu pixels", (int)width,
                     (int)height, (unsigned long long)p->max_pixels);
    begin(s, p, dst);
    int rc = plan(s, p, width, height, 1, seed, epoch, id, err);
    if (rc < 0)
        return rc;
    const int32_t n = s->x1 - s->x0;
    for (int32_t y = s->y0; y < s->y1; y++) {
        uint8_t *row = s->stage + (size_t)((y - s->y0) & 3) * s->stage_px * 4;
        stoker__rgb_to_rgbx(rgb + (size_t)y * stride + (size_t)s->x0 * 3, row, (size_t)n);
        row_staged(s, y, s->x0, n);
    }
    finish(s, flush_time(s, UINT64_MAX));
    return 0;
}
