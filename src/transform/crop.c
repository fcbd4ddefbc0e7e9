/* SPDX-License-Identifier: Apache-2.0 */
/* Crop-box geometry (torchvision's RandomResizedCrop and Resize + CenterCrop) and Pillow's
 * bilinear resampling coefficients. */
#include "transform/transform.h"

#include "common/rng.h"

#include <math.h>

#define RRC_TRIES 10
#define RRC_DRAWS_PER_TRY 4
#define RRC_FLIP_DRAW 64 /* past every draw the tries can use */
#define RRC_VFLIP_DRAW 65

/* Python's int(round(v)): round half to even (rint in the default rounding mode). */
static int64_t round_even(double v)
{
    return (int64_t)rint(v);
}

/* torch.randint(0, n): a uniform integer in [0, n). */
static int32_t draw_below(int32_t n, uint64_t seed, int64_t epoch, int64_t id, uint64_t draw)
{
    const int64_t v = (int64_t)(stoker__rng_unit(seed, epoch, id, draw) * n);
    return (int32_t)(v < n ? v : n - 1);
}

/* The fallback when no try fits: the whole image with its ratio clamped into the range,
 * centred. */
static void rrc_fallback(int32_t width, int32_t height, const double ratio[2], stoker__box *box)
{
    const double in_ratio = (double)width / (double)height;
    int64_t w = width, h = height;
    if (in_ratio < ratio[0])
        h = round_even((double)w / ratio[0]);
    else if (in_ratio > ratio[1])
        w = round_even((double)h * ratio[1]);
    h = h < 1 ? 1 : h > height ? height : h;
    w = w < 1 ? 1 : w > width ? width : w;
    box->w = (int32_t)w;
    box->h = (int32_t)h;
    box->x = (int32_t)((width - w) / 2);
    box->y = (int32_t)((height - h) / 2);
}

int stoker__rrc_box(int32_t width, int32_t height, const double scale[2], const double ratio[2],
                    uint64_t seed, int64_t epoch, int64_t id, stoker__box *box)
{
    const double area = (double)width * (double)height;
    const double log_lo = log(ratio[0]), log_hi = log(ratio[1]);
    for (uint64_t t = 0; t < RRC_TRIES; t++) {
        const uint64_t d = t * RRC_DRAWS_PER_TRY;
        const double u_area = stoker__rng_unit(seed, epoch, id, d);
        const double u_ratio = stoker__rng_unit(seed, epoch, id, d + 1);
        const double target = area * (scale[0] + (scale[1] - scale[0]) * u_area);
        const double ratio = exp(log_lo + (log_hi - log_lo) * u_ratio);
        const int64_t w = round_even(sqrt(target * ratio));
        const int64_t h = round_even(sqrt(target / ratio));
        if (w > 0 && w <= width && h > 0 && h <= height) {
            box->w = (int32_t)w;
            box->h = (int32_t)h;
            box->y = draw_below((int32_t)(height - h + 1), seed, epoch, id, d + 2);
            box->x = draw_below((int32_t)(width - w + 1), seed, epoch, id, d + 3);
            return 0;
        }
    }
    rrc_fallback(width, height, ratio, box);
    return 1;
}

int stoker__rrc_flip(double p, uint64_t seed, int64_t epoch, int64_t id)
{
    /* u >= 1 - p: at p = 0.5 exactly the draw's top bit, the rule before p was an option */
    return p > 0.0 && stoker__rng_unit(seed, epoch, id, RRC_FLIP_DRAW) >= 1.0 - p;
}

int stoker__rrc_vflip(double p, uint64_t seed, int64_t epoch, int64_t id)
{
    return stoker__rng_unit(seed, epoch, id, RRC_VFLIP_DRAW) < p; /* in [0, 1) */
}

void stoker__eval_geometry(int32_t width, int32_t height, int32_t short_side, int32_t crop,
                           int32_t *rw, int32_t *rh, int32_t *left, int32_t *top)
{
    /* torchvision: new_long = int(new_short * long / short), computed in double */
    if (width <= height) {
        *rw = short_side;
        *rh = (int32_t)((double)((int64_t)short_side * height) / width);
    } else {
        *rh = short_side;
        *rw = (int32_t)((double)((int64_t)short_side * width) / height);
    }
    *left = (int32_t)round_even((*rw - crop) / 2.0);
    *top = (int32_t)round_even((*rh - crop) / 2.0);
}

void stoker__letterbox_size(int32_t width, int32_t height, int32_t size, int32_t *rw, int32_t *rh)
{
    /* the long side becomes size, the short one its share rounded half to even (as Python's
     * round), at least 1 */
    const int32_t lng = width >= height ? width : height, shrt = width >= height ? height : width;
    int64_t s = round_even((double)shrt * size / lng);
    s = s < 1 ? 1 : s > size ? size : s;
    *rw = width >= height ? size : (int32_t)s;
    *rh = width >= height ? (int32_t)s : size;
}

/* Where the resized box starts and how long it is, in source pixels (see stoker__axis). */
static double box_start(const stoker__axis *a)
{
    return a->in1 > a->in0 ? a->in0 : 0.0;
}

static double box_span(const stoker__axis *a)
{
    return a->in1 > a->in0 ? a->in1 - a->in0 : (double)a->in_size;
}

/* How much the filter's support is widened: by the shrink factor (antialiasing), except
 * for an axis shrunk by at most 2x when plain interpolation is asked for. */
static double filter_scale(const stoker__axis *a)
{
    const double scale = box_span(a) / a->out_size;
    return scale < 1.0 || (a->plain_to_2x && scale <= 2.0) ? 1.0 : scale;
}

int32_t stoker__resample_ksize(const stoker__axis *a)
{
    return (int32_t)ceil(filter_scale(a)) * 2 + 1; /* bilinear support is 1 */
}

static double triangle(double x)
{
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* Pillow's normalize_coeffs_8bpc: to fixed point, rounding half away from zero. */
static int32_t to_fixed(double w)
{
    const double v = w * (double)(1 << STOKER__PRECISION_BITS);
    return (int32_t)(w < 0 ? v - 0.5 : v + 0.5);
}

/* Pillow's bounds of output xx: [xmin, xmin + size) within [0, in_size). */
static void output_bounds(const stoker__axis *a, int32_t xx, int32_t *xmin, int32_t *size)
{
    const double scale = box_span(a) / a->out_size, support = filter_scale(a);
    const double center = box_start(a) + (xx + 0.5) * scale;
    int32_t lo = (int32_t)(center - support + 0.5);
    int32_t hi = (int32_t)(center + support + 0.5);
    lo = lo < 0 ? 0 : lo;
    *xmin = lo;
    *size = (hi > a->in_size ? a->in_size : hi) - lo;
}

void stoker__resample_range(const stoker__axis *a, int32_t *lo, int32_t *hi)
{
    /* bounds never decrease along the outputs: the first and last span the range */
    int32_t xmin, size;
    output_bounds(a, a->first, &xmin, &size);
    *lo = a->offset + xmin;
    output_bounds(a, a->first + a->count - 1, &xmin, &size);
    *hi = a->offset + xmin + size;
}

void stoker__resample_coeffs(const stoker__axis *a, int32_t origin, int flip, int32_t kpad,
                             int32_t rep, int32_t *first, int32_t *taps, int32_t *coef, double *tmp,
                             int32_t *lo, int32_t *hi)
{
    /* Pillow's precompute_coeffs, term for term, so that the weights match bit for bit */
    const double scale = box_span(a) / a->out_size;
    const double ss = 1.0 / filter_scale(a);
    int32_t range_lo = INT32_MAX, range_hi = INT32_MIN;
    for (int32_t j = 0; j < a->count; j++) {
        const int32_t xx = a->first + (flip ? a->count - 1 - j : j);
        const double center = box_start(a) + (xx + 0.5) * scale;
        int32_t xmin, xmax; /* xmax: the count, as Pillow reuses the name */
        output_bounds(a, xx, &xmin, &xmax);
        double ww = 0.0;
        for (int32_t x = 0; x < xmax; x++) {
            tmp[x] = triangle((x + xmin - center + 0.5) * ss);
            ww += tmp[x];
        }
        int32_t *const c = coef + (size_t)j * kpad * rep;
        for (int32_t x = 0; x < kpad; x++) {
            const int32_t v = x < xmax ? to_fixed(ww != 0.0 ? tmp[x] / ww : tmp[x]) : 0;
            for (int32_t r = 0; r < rep; r++)
                c[(size_t)x * rep + r] = v;
        }
        first[j] = a->offset + xmin - origin;
        if (taps)
            taps[j] = xmax;
        range_lo = a->offset + xmin < range_lo ? a->offset + xmin : range_lo;
        range_hi = a->offset + xmin + xmax > range_hi ? a->offset + xmin + xmax : range_hi;
    }
    *lo = range_lo;
    *hi = range_hi;
}

int32_t stoker__coeffs_to_pairs(const int32_t *coef, int32_t n, int32_t kpad, int32_t *pairs)
{
    int32_t top = 0;
    for (size_t i = 0; i < (size_t)n * (size_t)kpad; i++)
        top = coef[i] > top ? coef[i] : coef[i] < -top ? -coef[i] : top;
    int32_t shift = 0; /* the fewest bits to drop so that every weight fits an int16 */
    while (shift < STOKER__PRECISION_BITS &&
           (top + (shift ? 1 << (shift - 1) : 0)) >> shift > INT16_MAX)
        shift++;
    const int32_t per = (kpad + 1) / 2;
    for (int32_t j = 0; j < n; j++) {
        const int32_t *c = coef + (size_t)j * kpad;
        for (int32_t m = 0; m < per; m++) {
            uint32_t w[2];
            for (int i = 0; i < 2; i++) {
                const int32_t k = 2 * m + i < kpad ? c[2 * m + i] : 0;
                /* round half up, in integers (an arithmetic shift floors) */
                w[i] = (uint16_t)(int16_t)(shift ? (k + (1 << (shift - 1))) >> shift : k);
            }
            pairs[(size_t)j * per + m] = (int32_t)(w[0] | w[1] << 16);
        }
    }
    return STOKER__PRECISION_BITS - shift;
}

/* Rewrites one axis in the pixels of its source shrunk by f: pixel i then covers source
 * pixels [f i, f (i + 1)), so the box scales by 1/f exactly (f is a power of two). */
static void reduce_axis(stoker__axis *a, int32_t f)
{
    const double b0 = a->offset + box_start(a), b1 = b0 + box_span(a);
    const int32_t lo = a->offset / f, hi = (a->offset + a->in_size + f - 1) / f;
    a->in0 = b0 / f - lo;
    a->in1 = b1 / f - lo;
    a->offset = lo;
    a->in_size = hi - lo;
}

int32_t stoker__geom_reduce(stoker__geom *g, int32_t max_scale)
{
    int32_t f = 1;
    while (f < max_scale && f < 8 && box_span(&g->x) >= 2.0 * f * g->x.out_size &&
           box_span(&g->y) >= 2.0 * f * g->y.out_size)
        f *= 2;
    if (f > 1) {
        reduce_axis(&g->x, f);
        reduce_axis(&g->y, f);
    }
    g->scale = f;
    return f;
}

int32_t stoker__xform_max_scale(const stoker__xform_params *p)
{
    const int any = p->dct_scale == STOKER_DCT_SCALE_ALWAYS,
              train = p->dct_scale == STOKER_DCT_SCALE_TRAIN;
    return any || (train && p->transform == STOKER_TRANSFORM_TRAIN) ? 8 : 1;
}

/* An axis resizing whole source pixels [offset, offset + in_size) (box left unset). */
static stoker__axis whole(int32_t offset, int32_t in_size, int32_t out_size, int32_t first,
                          int32_t count, int32_t plain)
{
    return (stoker__axis){.offset = offset,
                          .in_size = in_size,
                          .out_size = out_size,
                          .first = first,
                          .count = count,
                          .plain_to_2x = plain};
}

void stoker__xform_geometry(const stoker__xform_params *p, int32_t width, int32_t height,
                            uint64_t seed, int64_t epoch, int64_t id, stoker__geom *g)
{
    const int32_t plain = p->antialias == STOKER_ANTIALIAS_OVER_2X;
    const int32_t c = p->size;
    g->flip = g->vflip = 0;
    g->scale = 1;
    if (p->transform == STOKER_TRANSFORM_TRAIN) {
        stoker__box b;
        stoker__rrc_box(width, height, p->crop_scale, p->crop_ratio, seed, epoch, id, &b);
        g->x = whole(b.x, b.w, c, 0, c, plain);
        g->y = whole(b.y, b.h, c, 0, c, plain);
        g->flip = stoker__rrc_flip(p->hflip, seed, epoch, id);
        g->vflip = stoker__rrc_vflip(p->vflip, seed, epoch, id);
    } else if (p->transform == STOKER_TRANSFORM_EVAL) {
        int32_t rw, rh, left, top;
        stoker__eval_geometry(width, height, p->resize, c, &rw, &rh, &left, &top);
        g->x = whole(0, width, rw, left, c, plain);
        g->y = whole(0, height, rh, top, c, plain);
    } else if (p->transform == STOKER_TRANSFORM_LETTERBOX) {
        int32_t rw, rh;
        stoker__letterbox_size(width, height, c, &rw, &rh);
        g->x = whole(0, width, rw, 0, rw, plain);
        g->y = whole(0, height, rh, 0, rh, plain);
    } else {
        g->x = whole(0, width, c, 0, c, plain);
        g->y = whole(0, height, c, 0, c, plain);
    }
}
