/* SPDX-License-Identifier: Apache-2.0 */
/* The geometry of fields tied to an image: masks (nearest neighbour), boxes, tied rows. */
#include "transform/fields.h"

#include <math.h>
#include <string.h>

/* Columns of a mask whose source indices are computed at once: the table stays on the
 * stack (4 KiB), and wider outputs go through it in blocks. */
#define MASK_BLOCK 1024

static stoker__faxis faxis_of(const stoker__axis *a)
{
    return (stoker__faxis){a->offset, a->in_size, a->out_size, a->first, a->count};
}

static stoker__faxis identity(int32_t n)
{
    return (stoker__faxis){0, n, n, 0, n};
}

/* The source span [lo, hi) the axis's outputs show. */
static void shown(const stoker__faxis *a, double *lo, double *hi)
{
    const double step = (double)a->in / a->out;
    *lo = a->offset + a->first * step;
    *hi = a->offset + (double)(a->first + a->count) * step;
}

void stoker__sample_geometry(const stoker__xform_params *p, int32_t width, int32_t height,
                             uint64_t seed, int64_t epoch, int64_t id, stoker__fgeom *g)
{
    g->src_w = width;
    g->src_h = height;
    if (p->transform == STOKER_TRANSFORM_NONE) {
        g->x = identity(width);
        g->y = identity(height);
        g->flip = g->vflip = 0;
    } else {
        /* the image path's own decisions, before any decoding reduction */
        stoker__geom ig;
        stoker__xform_geometry(p, width, height, seed, epoch, id, &ig);
        g->x = faxis_of(&ig.x);
        g->y = faxis_of(&ig.y);
        g->flip = ig.flip;
        g->vflip = ig.vflip;
    }
    const bool framed = p->transform == STOKER_TRANSFORM_LETTERBOX;
    g->out_w = framed ? p->size : g->x.count;
    g->out_h = framed ? p->size : g->y.count;
    g->fill = (uint8_t)p->mask_fill;
    shown(&g->x, &g->x0, &g->x1);
    shown(&g->y, &g->y0, &g->y1);
}

int32_t stoker__nearest_index(int32_t k, int32_t in, int32_t out)
{
    /* float32 throughout, as PyTorch: (float)in / out, then k * scale, floored */
    const float scale = (float)in / (float)out;
    const int64_t s = (int64_t)floorf((float)k * scale);
    return (int32_t)(s < in - 1 ? s : in - 1);
}

/* Source index (absolute) of the output pixel k of axis a, mirrored when `flip`. */
static int32_t source_of(const stoker__faxis *a, int flip, int32_t k)
{
    const int32_t u = flip ? a->count - 1 - k : k;
    return a->offset + stoker__nearest_index(a->first + u, a->in, a->out);
}

int stoker__mask_geom(const uint8_t *src, int32_t width, int32_t height, size_t src_stride,
                      const stoker__fgeom *g, uint8_t *dst, stoker__err *err)
{
    STOKER_RETURN_IF(width != g->src_w || height != g->src_h, err, STOKER_E_INVALID,
                     "mask of %dx%d pixels for an image of %dx%d", (int)width, (int)height,
                     (int)g->src_w, (int)g->src_h);
    STOKER_RETURN_IF(src_stride < (size_t)width, err, STOKER_E_INVALID,
                     "mask rows %zu bytes apart for a width of %d", src_stride, (int)width);
    const size_t ow = (size_t)g->out_w;
    int32_t col[MASK_BLOCK];
    for (int32_t j0 = 0; j0 < g->x.count; j0 += MASK_BLOCK) {
        const int32_t nb = g->x.count - j0 < MASK_BLOCK ? g->x.count - j0 : MASK_BLOCK;
        for (int32_t j = 0; j < nb; j++)
            col[j] = source_of(&g->x, g->flip, j0 + j);
        int32_t prev = -1;
        for (int32_t i = 0; i < g->y.count; i++) {
            const int32_t r = source_of(&g->y, g->vflip, i);
            uint8_t *out = dst + (size_t)i * ow + (size_t)j0;
            if (r == prev) { /* an enlarged axis repeats source rows: copy the row made */
                memcpy(out, out - ow, (size_t)nb);
                continue;
            }
            const uint8_t *row = src + (size_t)r * src_stride;
            for (int32_t j = 0; j < nb; j++)
                out[j] = row[col[j]];
            prev = r;
        }
    }
    /* the padding of a sample larger than the image it shows */
    if (g->out_w > g->x.count)
        for (int32_t i = 0; i < g->y.count; i++)
            memset(dst + (size_t)i * ow + (size_t)g->x.count, g->fill,
                   (size_t)(g->out_w - g->x.count));
    if (g->out_h > g->y.count)
        memset(dst + (size_t)g->y.count * ow, g->fill, (size_t)(g->out_h - g->y.count) * ow);
    return 0;
}

/* One coordinate mapped to the output's pixels along a. NaN stays NaN (and its box is
 * dropped). */
static double map(double v, const stoker__faxis *a)
{
    return (v - a->offset) * a->out / a->in - a->first;
}

/* m clipped to [0, count] */
static double clip(double m, const stoker__faxis *a)
{
    return m < 0.0 ? 0.0 : m > a->count ? (double)a->count : m;
}

int64_t stoker__boxes_geom(float *xyxy, int64_t n, const stoker__fgeom *g, double min_size,
                           double min_visibility, uint8_t *keep)
{
    int64_t kept = 0;
    for (int64_t i = 0; i < n; i++) {
        float *b = xyxy + 4 * i;
        const double u1 = map(b[0], &g->x), v1 = map(b[1], &g->y);
        const double u2 = map(b[2], &g->x), v2 = map(b[3], &g->y);
        double x1 = clip(u1, &g->x), y1 = clip(v1, &g->y);
        double x2 = clip(u2, &g->x), y2 = clip(v2, &g->y);
        /* the share shown: flips move a box, never change its area */
        const double shown = (x2 - x1) * (y2 - y1), whole = (u2 - u1) * (v2 - v1);
        if (g->flip) {
            const double t = x1;
            x1 = g->x.count - x2;
            x2 = g->x.count - t;
        }
        if (g->vflip) {
            const double t = y1;
            y1 = g->y.count - y2;
            y2 = g->y.count - t;
        }
        b[0] = (float)x1;
        b[1] = (float)y1;
        b[2] = (float)x2;
        b[3] = (float)y2;
        /* written so that NaN drops the box; compared as stored */
        keep[i] = b[2] > b[0] && b[3] > b[1] && (double)b[2] - b[0] >= min_size &&
                  (double)b[3] - b[1] >= min_size &&
                  (min_visibility <= 0.0 || shown >= min_visibility * whole);
        kept += keep[i];
    }
    return kept;
}

int64_t stoker__rows_compact(void *rows, int64_t n, size_t row_bytes, const uint8_t *keep)
{
    uint8_t *r = rows;
    int64_t kept = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!keep[i])
            continue;
        if (kept != i)
            memmove(r + (size_t)kept * row_bytes, r + (size_t)i * row_bytes, row_bytes);
        kept++;
    }
    return kept;
}
