/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU transform's filter (src/cuda/image_kernels.h), on the host, against the CPU
 * resampler's tables (stoker__resample_coeffs in src/transform/crop.c) for the geometries
 * the pipeline makes: train, eval and resize transforms, both antialias rules, output sizes
 * from 1 to 224, images from 1x1 to 4000x3000 (and thin ones), flipped or not, decoded
 * whole or as the region the outputs read, and boxes made fractional by a DCT reduction.
 * For every output: the same first tap and tap count (exactly), weights summing to 1, each
 * within a fixed-point step of Pillow's 22-bit weight, and no tap outside the decoded
 * region. The kernel itself runs in test_gpu_image_kernels. */
#include "testutil.h"

#include "cuda/image_kernels.h"
#include "transform/transform.h"

#include <math.h>

typedef struct worst {
    double step; /* largest |w * 2^22 - Pillow's weight| */
    double sum;  /* largest |sum of weights - 1| */
    long outputs;
} worst;

/* One axis decoded from `origin` (a region's first pixel, or 0), read up to `end`. */
static void check_axis(const char *what, const stoker__axis *a, int flip, int32_t origin,
                       int32_t end, worst *wr)
{
    const int32_t kpad = stoker__resample_ksize(a);
    int32_t *first = malloc(sizeof(int32_t) * (size_t)a->count);
    int32_t *taps = malloc(sizeof(int32_t) * (size_t)a->count);
    int32_t *coef = malloc(sizeof(int32_t) * (size_t)a->count * (size_t)kpad);
    double *tmp = malloc(sizeof(double) * (size_t)kpad);
    int32_t lo, hi;
    stoker__resample_coeffs(a, origin, flip, kpad, 1, first, taps, coef, tmp, &lo, &hi);
    const stoker__gpu_axis g = stoker__gpu_axis_of(a, origin);
    for (int32_t j = 0; j < a->count; j++) {
        const int32_t xx = a->first + (flip ? a->count - 1 - j : j);
        const stoker__gpu_filter f = stoker__gpu_filter_of(&g, xx);
        if (g.lo + f.xmin != first[j] || f.n != taps[j])
            T_FAIL("%s output %d: taps [%d, +%d), the CPU's [%d, +%d)", what, (int)j,
                   (int)(g.lo + f.xmin), (int)f.n, (int)first[j], (int)taps[j]);
        if (g.lo + f.xmin < 0 || g.lo + f.xmin + f.n > end - origin)
            T_FAIL("%s output %d: taps [%d, +%d) outside the decoded %d pixels", what, (int)j,
                   (int)(g.lo + f.xmin), (int)f.n, (int)(end - origin));
        double sum = 0;
        for (int32_t k = 0; k < f.n; k++) {
            const double w = stoker__gpu_weight(&f, k);
            sum += w;
            const double step = fabs(w * (1 << STOKER__PRECISION_BITS) - coef[j * kpad + k]);
            wr->step = fmax(wr->step, step);
        }
        wr->sum = fmax(wr->sum, fabs(sum - 1));
        wr->outputs++;
    }
    free(first), free(taps), free(coef), free(tmp);
}

static void check_geometry(const stoker__xform_params *p, int32_t w, int32_t h, int64_t id,
                           int32_t reduce, worst *wr)
{
    stoker__geom g;
    stoker__xform_geometry(p, w, h, 11, 2, id, &g);
    if (reduce > 1)
        stoker__geom_reduce(&g, reduce);
    T_EQ_INT(g.x.count, p->size); /* the kernel mirrors across the output size */
    char what[160];
    snprintf(what, sizeof what, "transform %d size %d antialias %d %dx%d id %lld reduced %d",
             (int)p->transform, (int)p->size, (int)p->antialias, (int)w, (int)h, (long long)id,
             (int)g.scale);
    const stoker__axis *axes[2] = {&g.x, &g.y};
    for (int i = 0; i < 2; i++) {
        int32_t lo, hi;
        stoker__resample_range(axes[i], &lo, &hi);
        /* the image as decoded at the reduction: ceil(size / scale) pixels */
        const int32_t whole = ((i ? h : w) + g.scale - 1) / g.scale;
        const int flip = i == 0 && g.flip;
        check_axis(what, axes[i], flip, 0, whole, wr); /* the whole image decoded */
        check_axis(what, axes[i], flip, lo, hi, wr);   /* the region the outputs read */
    }
}

int main(void)
{
    static const int32_t transforms[] = {STOKER_TRANSFORM_TRAIN, STOKER_TRANSFORM_EVAL,
                                         STOKER_TRANSFORM_RESIZE};
    static const int32_t sizes[] = {1, 7, 64, 224};
    static const int32_t antialias[] = {STOKER_ANTIALIAS_OVER_2X, STOKER_ANTIALIAS_ALWAYS};
    static const int32_t images[][2] = {{1, 1},       {5, 3},    {500, 375}, {375, 500},
                                        {4000, 3000}, {17, 900}, {224, 224}, {640, 427}};
    worst wr = {0};
    for (size_t t = 0; t < 3; t++)
        for (size_t s = 0; s < 4; s++)
            for (size_t a = 0; a < 2; a++) {
                stoker__xform_params p = {.transform = transforms[t],
                                          .size = sizes[s],
                                          .antialias = antialias[a],
                                          .mean = {0.5f, 0.5f, 0.5f},
                                          .std = {0.25f, 0.25f, 0.25f}};
                stoker__err err;
                T_OK(stoker__xform_params_prepare(&p, STOKER_SIMD_AUTO, &err));
                for (size_t i = 0; i < sizeof images / sizeof images[0]; i++)
                    for (int64_t id = 0; id < 12; id++)
                        for (int32_t reduce = 1; reduce <= 8; reduce *= 8)
                            check_geometry(&p, images[i][0], images[i][1], id, reduce, &wr);
            }
    printf("%ld outputs: weights within %.3f of Pillow's 22-bit ones, sums within %.2e of 1\n",
           wr.outputs, wr.step, wr.sum);
    T_ASSERT(wr.outputs > 100000);
    /* Pillow rounds each weight to a step of 2^-22 (half a step away at most); a float weight
     * near 1 has steps of 2^-24, and the normalisation rounds a few times: 1.5 steps at most
     * (a relative 4e-7, far below a pixel value's rounding) */
    T_ASSERT(wr.step <= 1.5);
    T_ASSERT(wr.sum < 1e-5);
    return 0;
}
