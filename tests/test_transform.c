/* SPDX-License-Identifier: Apache-2.0 */
/* Geometry of the transforms: RandomResizedCrop boxes (inside the image, scale and ratio
 * bounds, determinism in (seed, epoch, id), the centre-crop fallback), eval boxes against
 * hand-computed torchvision results, resampling ranges, output sizes, flip, and parameter
 * validation. */
#include "testutil.h"

#include "common/rng.h"
#include "transform/transform.h"

#include <math.h>
#include <string.h>

/* torchvision's defaults, which the options table's are */
static const double SCALE[2] = {0.08, 1.0}, RATIO[2] = {3.0 / 4.0, 4.0 / 3.0};

/* max_s_min: the largest scale the image's aspect lets a box reach, roughly */
static void check_rrc_statistics(int32_t w, int32_t h, double max_s_min, double mean_lo,
                                 int max_fallbacks)
{
    const double area = (double)w * h;
    int fallbacks = 0, flips = 0, vflips = 0, same = 0;
    double min_s = 1, max_s = 0, min_r = 10, max_r = 0, sum_s = 0;
    const int n = 20000;
    for (int64_t id = 0; id < n; id++) {
        stoker__box b, again;
        fallbacks += stoker__rrc_box(w, h, SCALE, RATIO, 42, 3, id, &b);
        T_ASSERT(b.x >= 0 && b.y >= 0 && b.w >= 1 && b.h >= 1);
        T_ASSERT(b.x + b.w <= w && b.y + b.h <= h);
        stoker__rrc_box(w, h, SCALE, RATIO, 42, 3, id, &again);
        T_ASSERT(memcmp(&b, &again, sizeof b) == 0);
        const double s = b.w * (double)b.h / area, r = (double)b.w / b.h;
        /* w and h are rounded: allow their rounding in the bounds */
        T_ASSERT(s >= 0.08 * (1 - 2.0 / b.h - 2.0 / b.w) - 1e-9 && s <= 1.0);
        T_ASSERT(r >= 0.75 * (1 - 1.0 / b.w) / (1 + 1.0 / b.h) - 1e-9);
        T_ASSERT(r <= (4.0 / 3) * (1 + 1.0 / b.w) / (1 - 1.0 / b.h) + 1e-9);
        min_s = fmin(min_s, s), max_s = fmax(max_s, s), sum_s += s;
        min_r = fmin(min_r, r), max_r = fmax(max_r, r);
        flips += stoker__rrc_flip(0.5, 42, 3, id);
        vflips += stoker__rrc_vflip(0.25, 42, 3, id);
        /* a probability of 0 never flips, 1 always; the draw is not the horizontal one's */
        T_EQ_INT(stoker__rrc_vflip(0.0, 42, 3, id), 0);
        T_EQ_INT(stoker__rrc_vflip(1.0, 42, 3, id), 1);
        same += stoker__rrc_vflip(0.5, 42, 3, id) == stoker__rrc_flip(0.5, 42, 3, id);
    }
    /* vertical flips at 0.25: 5000 +- 5 sigma (sigma = 61); independent of the horizontal */
    T_ASSERT(vflips > n / 4 - 306 && vflips < n / 4 + 306);
    T_ASSERT(same > n / 2 - 355 && same < n / 2 + 355);
    printf("%dx%d: scale [%.3f, %.3f] mean %.3f, ratio [%.3f, %.3f], fallbacks %d, flips %d\n",
           (int)w, (int)h, min_s, max_s, sum_s / n, min_r, max_r, fallbacks, flips);
    /* the whole ranges are reached */
    T_ASSERT(min_s < 0.09 && max_s > max_s_min && min_r < 0.77 && max_r > 1.3);
    /* flips are fair: 10000 +- 5 sigma (sigma = 71) */
    T_ASSERT(flips > n / 2 - 355 && flips < n / 2 + 355);
    /* most tries fit; the mean scale of accepted boxes is below the uniform 0.54 */
    T_ASSERT(fallbacks <= max_fallbacks);
    T_ASSERT(sum_s / n > mean_lo && sum_s / n < 0.56);
}

/* The horizontal flip's probability: 0 (or below: the parameters' never) never flips, 1
 * always, 0.5 is the draw's top bit (the rule before the probability was an option), 0.25
 * flips about a quarter, each a subset of the flips of a higher probability. */
static void check_hflip(void)
{
    int quarter = 0;
    for (int64_t id = 0; id < 20000; id++) {
        T_EQ_INT(stoker__rrc_flip(0.0, 42, 3, id), 0);
        T_EQ_INT(stoker__rrc_flip(-1.0, 42, 3, id), 0);
        T_EQ_INT(stoker__rrc_flip(1.0, 42, 3, id), 1);
        const int half = stoker__rrc_flip(0.5, 42, 3, id);
        T_EQ_INT(half, (int)(stoker__rng_u64(42, 3, id, 64) >> 63));
        const int q = stoker__rrc_flip(0.25, 42, 3, id);
        T_ASSERT(!q || half);
        quarter += q;
    }
    /* 5000 +- 5 sigma (sigma = 61) */
    T_ASSERT(quarter > 5000 - 306 && quarter < 5000 + 306);
    /* the parameters: 0 is the table's 0.5, below 0 is never */
    stoker__xform_params p = {.mean = {0.5f, 0.5f, 0.5f}, .std = {0.25f, 0.25f, 0.25f}};
    stoker__err err;
    T_OK(stoker__xform_params_prepare(&p, STOKER_SIMD_AUTO, &err));
    T_ASSERT(p.hflip == 0.5);
    stoker__xform_params never = p;
    never.hflip = -1.0;
    T_OK(stoker__xform_params_prepare(&never, STOKER_SIMD_AUTO, &err));
    int flipped = 0;
    for (int64_t id = 0; id < 64; id++) {
        stoker__geom g, h;
        stoker__xform_geometry(&p, 40, 30, 5, 0, id, &g);
        stoker__xform_geometry(&never, 40, 30, 5, 0, id, &h);
        flipped += g.flip;
        T_EQ_INT(h.flip, 0);
        T_ASSERT(g.x.offset == h.x.offset && g.x.in_size == h.x.in_size); /* the same box */
    }
    T_ASSERT(flipped > 0);
}

static void check_rrc_keys(void)
{
    stoker__box a, b;
    int diff_id = 0, diff_epoch = 0, diff_seed = 0;
    for (int64_t id = 0; id < 1000; id++) {
        stoker__rrc_box(500, 375, SCALE, RATIO, 1, 0, id, &a);
        stoker__rrc_box(500, 375, SCALE, RATIO, 1, 0, id + 1, &b);
        diff_id += memcmp(&a, &b, sizeof a) != 0;
        stoker__rrc_box(500, 375, SCALE, RATIO, 1, 1, id, &b);
        diff_epoch += memcmp(&a, &b, sizeof a) != 0;
        stoker__rrc_box(500, 375, SCALE, RATIO, 2, 0, id, &b);
        diff_seed += memcmp(&a, &b, sizeof a) != 0;
    }
    T_ASSERT(diff_id > 990 && diff_epoch > 990 && diff_seed > 990);
    /* the generator is a pure function of its key */
    T_EQ_INT(stoker__rng_u64(5, 6, 7, 8), stoker__rng_u64(5, 6, 7, 8));
    T_ASSERT(stoker__rng_u64(5, 6, 7, 8) != stoker__rng_u64(5, 6, 7, 9));
    const double u = stoker__rng_unit(0, 0, 0, 0);
    T_ASSERT(u >= 0 && u < 1);
}

static void check_rrc_fallback(void)
{
    stoker__box b;
    /* 1x1: every try is too big except a 1x1 box at area 1 (round(sqrt(<=1.33)) = 1) */
    stoker__rrc_box(1, 1, SCALE, RATIO, 0, 0, 0, &b);
    T_ASSERT(b.x == 0 && b.y == 0 && b.w == 1 && b.h == 1);
    /* extreme aspect: tries fail, the fallback clamps the ratio to 4/3 and centres */
    int fb = 0;
    for (int64_t id = 0; id < 200; id++) {
        fb += stoker__rrc_box(1000, 10, SCALE, RATIO, 9, 0, id, &b);
        T_ASSERT(b.x + b.w <= 1000 && b.y + b.h <= 10);
    }
    T_EQ_INT(fb, 200);
    stoker__rrc_box(1000, 10, SCALE, RATIO, 9, 0, 0, &b);
    /* h = 10, w = round(10 * 4/3) = 13, x = (1000 - 13) // 2 = 493 */
    T_EQ_INT(b.h, 10);
    T_EQ_INT(b.w, 13);
    T_EQ_INT(b.x, 493);
    T_EQ_INT(b.y, 0);
    stoker__rrc_box(10, 1000, SCALE, RATIO, 9, 0, 0, &b);
    /* w = 10, h = round(10 / (3/4)) = 13, y = (1000 - 13) // 2 = 493 */
    T_ASSERT(b.w == 10 && b.h == 13 && b.x == 0 && b.y == 493);
    /* a tiny image that tries can fit: never outside, never empty */
    for (int64_t id = 0; id < 2000; id++) {
        stoker__rrc_box(3, 4, SCALE, RATIO, 1, 0, id, &b);
        T_ASSERT(b.w >= 1 && b.h >= 1 && b.x + b.w <= 3 && b.y + b.h <= 4);
    }
}

/* Other ranges (scale=, ratio=): every box that is not the fallback keeps to them, both
 * ends are reached, a box of the same draws is the same whatever the range, and the fallback
 * clamps to the range's ratio. */
static void check_rrc_ranges(void)
{
    const double scale[2] = {0.25, 0.5}, ratio[2] = {1.0, 2.0};
    const int32_t w = 640, h = 480;
    double min_s = 1, max_s = 0, min_r = 10, max_r = 0;
    int fallbacks = 0;
    for (int64_t id = 0; id < 20000; id++) {
        stoker__box b;
        if (stoker__rrc_box(w, h, scale, ratio, 7, 1, id, &b)) {
            fallbacks++;
            continue;
        }
        T_ASSERT(b.x >= 0 && b.y >= 0 && b.x + b.w <= w && b.y + b.h <= h);
        const double s = b.w * (double)b.h / ((double)w * h), r = (double)b.w / b.h;
        T_ASSERT(s >= 0.25 * (1 - 1.0 / b.h - 1.0 / b.w) && s <= 0.5 * (1 + 1.0 / b.h + 1.0 / b.w));
        T_ASSERT(r >= (1 - 1.0 / b.w) / (1 + 1.0 / b.h) &&
                 r <= 2 * (1 + 1.0 / b.w) / (1 - 1.0 / b.h));
        min_s = fmin(min_s, s), max_s = fmax(max_s, s), min_r = fmin(min_r, r),
        max_r = fmax(max_r, r);
    }
    T_ASSERT(fallbacks < 20 && min_s < 0.26 && max_s > 0.49 && min_r < 1.01 && max_r > 1.98);
    /* a fixed scale and ratio: the whole image, wherever the draws fall */
    const double one[2] = {1.0, 1.0}, own[2] = {4.0 / 3.0, 4.0 / 3.0};
    for (int64_t id = 0; id < 100; id++) {
        stoker__box b;
        T_EQ_INT(stoker__rrc_box(w, h, one, own, 3, 0, id, &b), 0);
        T_ASSERT(b.x == 0 && b.y == 0 && b.w == w && b.h == h);
    }
    /* the fallback of a 1000x10 image under ratio 1..2: w = round(10 * 2) = 20, centred */
    stoker__box b;
    T_EQ_INT(stoker__rrc_box(1000, 10, scale, ratio, 9, 0, 0, &b), 1);
    T_ASSERT(b.w == 20 && b.h == 10 && b.x == 490 && b.y == 0);
}

static void check_eval(void)
{
    int32_t rw, rh, left, top;
    /* 500x375, Resize(256): h short -> 256, w = int(256 * 500 / 375) = 341;
     * CenterCrop(224): top = round(16.0) = 16, left = round(58.5) = 58 (half to even) */
    stoker__eval_geometry(500, 375, 256, 224, &rw, &rh, &left, &top);
    T_ASSERT(rw == 341 && rh == 256 && left == 58 && top == 16);
    /* 375x500 mirrored */
    stoker__eval_geometry(375, 500, 256, 224, &rw, &rh, &left, &top);
    T_ASSERT(rw == 256 && rh == 341 && left == 16 && top == 58);
    /* 333x257, S = 73, C = 64: w = int(73 * 333 / 257) = 94, left = round(15.0) = 15,
     * top = round(4.5) = 4 */
    stoker__eval_geometry(333, 257, 73, 64, &rw, &rh, &left, &top);
    T_ASSERT(rw == 94 && rh == 73 && left == 15 && top == 4);
    /* square: no offset */
    stoker__eval_geometry(256, 256, 256, 224, &rw, &rh, &left, &top);
    T_ASSERT(rw == 256 && rh == 256 && left == 16 && top == 16);

    /* the source rows the eval crop reads: only the middle of the image */
    stoker__xform_params p = {
        .transform = STOKER_TRANSFORM_EVAL, .size = 224, .mean = {0, 0, 0}, .std = {1, 1, 1}};
    stoker__err err;
    T_OK(stoker__xform_params_prepare(&p, STOKER_SIMD_SCALAR, &err));
    T_EQ_INT(p.resize, 256);
    stoker__geom g;
    stoker__xform_geometry(&p, 1000, 750, 0, 0, 0, &g);
    int32_t lo, hi;
    stoker__resample_range(&g.x, &lo, &hi);
    /* scale 1000/341 = 2.93: outputs 58..281 centre at (58.5)*2.93 = 171.6 -> lo = 169 */
    T_ASSERT(lo > 160 && lo < 175 && hi > 825 && hi < 840);
    stoker__resample_range(&g.y, &lo, &hi);
    T_ASSERT(lo > 40 && lo < 50 && hi > 700 && hi < 710);
    T_EQ_INT(g.flip, 0);
}

static void check_coeffs(void)
{
    /* identity: each output reads one pixel with weight 1.0 */
    const stoker__axis same = {0, 10, 10, 0, 10, 0, 0, 0};
    int32_t first[10], taps[10], coef[10 * 4], lo, hi;
    double tmp[4];
    T_EQ_INT(stoker__resample_ksize(&same), 3);
    stoker__resample_coeffs(&same, 0, 0, 4, 1, first, taps, coef, tmp, &lo, &hi);
    for (int j = 0; j < 10; j++) {
        T_EQ_INT(first[j], j);
        T_EQ_INT(coef[j * 4], 1 << STOKER__PRECISION_BITS);
        T_EQ_INT(coef[j * 4 + 1], 0);
    }
    T_ASSERT(lo == 0 && hi == 10);
    /* halving: output j averages pixels 2j-1..2j+2 with weights 1/8 3/8 3/8 1/8 */
    const stoker__axis half = {5, 16, 8, 0, 8, 0, 0, 0};
    int32_t coef2[8 * 8];
    double tmp2[8];
    T_EQ_INT(stoker__resample_ksize(&half), 5);
    stoker__resample_coeffs(&half, 5, 1, 8, 1, first, taps, coef2, tmp2, &lo, &hi);
    T_ASSERT(lo == 5 && hi == 21);
    /* flipped: table entry 0 is output 7, which reads 13..15 (clamped at the right) */
    T_EQ_INT(first[0], 13);
    T_EQ_INT(taps[0], 3);
    T_EQ_INT(first[4], 5); /* output 3 reads 5..8 */
    T_EQ_INT(taps[4], 4);
    T_EQ_INT(coef2[4 * 8 + 0], 1 << (STOKER__PRECISION_BITS - 3));
    T_EQ_INT(coef2[4 * 8 + 1], 3 << (STOKER__PRECISION_BITS - 3));
}

/* A fractional box (Pillow's resize box) and the DCT reduction that makes one. */
static void check_reduce(void)
{
    const int32_t one = 1 << STOKER__PRECISION_BITS;
    int32_t first[2], taps[2], coef[2 * 8], lo, hi;
    double tmp[8];
    /* [0.5, 2.5) of 3 pixels to 1: centre 1.5, support 2, weights 1/4 1/2 1/4 */
    const stoker__axis box = {0, 3, 1, 0, 1, 0, 0.5, 2.5};
    stoker__resample_coeffs(&box, 0, 0, 8, 1, first, taps, coef, tmp, &lo, &hi);
    T_EQ_INT(first[0], 0);
    T_EQ_INT(taps[0], 3);
    T_EQ_INT(coef[0], one / 4);
    T_EQ_INT(coef[1], one / 2);
    T_EQ_INT(coef[2], one / 4);
    T_ASSERT(lo == 0 && hi == 3);

    /* a 500 x 460 box at (101, 7) to 224: 1/2 leaves it shrinking, 1/4 would not */
    const stoker__geom full = {
        .x = {101, 500, 224, 0, 224, 1, 0, 0}, .y = {7, 460, 224, 0, 224, 1, 0, 0}, .scale = 1};
    stoker__geom g = full;
    T_EQ_INT(stoker__geom_reduce(&g, 8), 2);
    T_EQ_INT(g.scale, 2);
    /* pixels [50, 301) hold the box [50.5, 300.5) */
    T_ASSERT(g.x.offset == 50 && g.x.in_size == 251 && g.x.in0 == 0.5 && g.x.in1 == 250.5);
    T_ASSERT(g.y.offset == 3 && g.y.in_size == 231 && g.y.in0 == 0.5 && g.y.in1 == 230.5);
    T_ASSERT(g.x.out_size == 224 && g.x.count == 224 && g.x.plain_to_2x == 1);
    g = full;
    T_EQ_INT(stoker__geom_reduce(&g, 1), 1); /* not allowed: unchanged */
    T_ASSERT(memcmp(&g, &full, sizeof g) == 0);
    g = full;
    g.y.in_size = 447; /* under 2x along one axis: no reduction */
    T_EQ_INT(stoker__geom_reduce(&g, 8), 1);
    T_EQ_INT(g.x.in_size, 500);
    /* 1/8 at most; a whole 4000-pixel row to 224 */
    g = (stoker__geom){.x = {0, 4000, 224, 0, 224, 0, 0, 0}, .y = {0, 3999, 224, 0, 224, 0, 0, 0}};
    T_EQ_INT(stoker__geom_reduce(&g, 8), 8);
    T_ASSERT(g.x.offset == 0 && g.x.in_size == 500 && g.x.in0 == 0 && g.x.in1 == 500);
    T_ASSERT(g.y.in_size == 500 && g.y.in1 == 3999 / 8.0);

    /* the parameters pick which transforms may reduce */
    stoker__xform_params p = {.transform = STOKER_TRANSFORM_TRAIN};
    stoker__err err;
    p.mean[0] = p.mean[1] = p.mean[2] = 0.5f;
    p.std[0] = p.std[1] = p.std[2] = 0.5f;
    T_OK(stoker__xform_params_prepare(&p, STOKER_SIMD_SCALAR, &err));
    T_EQ_INT(p.dct_scale, STOKER_DCT_SCALE_TRAIN);
    T_EQ_INT(stoker__xform_max_scale(&p), 8);
    p.transform = STOKER_TRANSFORM_EVAL;
    T_EQ_INT(stoker__xform_max_scale(&p), 1);
    p.dct_scale = STOKER_DCT_SCALE_ALWAYS;
    T_EQ_INT(stoker__xform_max_scale(&p), 8);
    p.transform = STOKER_TRANSFORM_TRAIN;
    p.dct_scale = STOKER_DCT_SCALE_NEVER;
    T_EQ_INT(stoker__xform_max_scale(&p), 1);
    p.dct_scale = 4;
    T_EQ_RC(stoker__xform_params_prepare(&p, STOKER_SIMD_SCALAR, &err), STOKER_E_INVALID);
    T_CONTAINS(err.msg, "dct_scale");
}

/* Antialiasing only past 2x: a shrink by at most 2x interpolates between the two pixels
 * around the sample point (torchvision's antialias=False); a larger one is unchanged. */
static void check_coeffs_plain(void)
{
    const int32_t one = 1 << STOKER__PRECISION_BITS;
    int32_t first[8], taps[8], coef[8 * 8], lo, hi;
    double tmp[8];
    /* 2x: output j samples 2j + 0.5, half of pixels 2j and 2j + 1 */
    const stoker__axis half = {0, 16, 8, 0, 8, 1, 0, 0};
    T_EQ_INT(stoker__resample_ksize(&half), 3);
    stoker__resample_coeffs(&half, 0, 0, 3, 1, first, taps, coef, tmp, &lo, &hi);
    for (int j = 0; j < 8; j++) {
        T_EQ_INT(first[j], 2 * j);
        T_EQ_INT(taps[j], 2);
        T_EQ_INT(coef[j * 3], one / 2);
        T_EQ_INT(coef[j * 3 + 1], one / 2);
        T_EQ_INT(coef[j * 3 + 2], 0);
    }
    T_ASSERT(lo == 0 && hi == 16);
    /* 1.5x: output 1 samples 1.75: 1/4 of pixel 1, 3/4 of pixel 2 */
    const stoker__axis third = {0, 12, 8, 0, 8, 1, 0, 0};
    stoker__resample_coeffs(&third, 0, 0, 3, 1, first, taps, coef, tmp, &lo, &hi);
    T_EQ_INT(first[1], 1);
    T_EQ_INT(taps[1], 2);
    T_EQ_INT(coef[3], one / 4);
    T_EQ_INT(coef[4], 3 * (one / 4));
    /* 3x: antialiased as without the flag (7-tap table, weights 1/9 2/9 3/9 2/9 1/9) */
    const stoker__axis wide = {0, 24, 8, 0, 8, 1, 0, 0}, wide_aa = {0, 24, 8, 0, 8, 0, 0, 0};
    int32_t coef_aa[8 * 8];
    T_EQ_INT(stoker__resample_ksize(&wide), 7);
    stoker__resample_coeffs(&wide, 0, 0, 8, 1, first, taps, coef, tmp, &lo, &hi);
    stoker__resample_coeffs(&wide_aa, 0, 0, 8, 1, first, taps, coef_aa, tmp, &lo, &hi);
    T_ASSERT(memcmp(coef, coef_aa, sizeof coef) == 0);
    T_EQ_INT(taps[3], 6);
}

/* The fast resampler's weights: Pillow's, rounded to as many bits as fit an int16, in
 * pairs, the high half zero past the filter. */
static void check_coeffs_pairs(void)
{
    const int32_t one = 1 << STOKER__PRECISION_BITS;
    /* weight 1.0 allows 14 bits: 16384 */
    const int32_t identity[2 * 3] = {one, 0, 0, one, 0, 0};
    int32_t pairs[2 * 2];
    T_EQ_INT(stoker__coeffs_to_pairs(identity, 2, 3, pairs), 14);
    T_EQ_INT(pairs[0], 16384);
    T_EQ_INT(pairs[1], 0);
    T_EQ_INT(pairs[2], 16384);
    /* 1/8 and 3/8: 3/8 allows 16 bits (24576); the pair holds both, low half first */
    const int32_t halving[5] = {one / 8, 3 * (one / 8), 3 * (one / 8), one / 8, 0};
    int32_t hp[3];
    T_EQ_INT(stoker__coeffs_to_pairs(halving, 1, 5, hp), 16);
    T_EQ_INT(hp[0], 8192 | 24576 << 16);
    T_EQ_INT(hp[1], 24576 | 8192 << 16);
    T_EQ_INT(hp[2], 0);
    /* 0.75 + 2^-16 leaves 15 bits (a 7-bit shift); each weight rounds half up */
    const int32_t odd[2] = {one / 3, 3 * (one / 4) + (one >> 16)};
    int32_t op[1];
    T_EQ_INT(stoker__coeffs_to_pairs(odd, 1, 2, op), 15);
    T_EQ_INT(op[0] & 0xFFFF, (one / 3 + 64) >> 7);
    T_EQ_INT((uint32_t)op[0] >> 16, (3 * (one / 4) + (one >> 16) + 64) >> 7);
}

/* The fast resampler against Pillow's: the same filter in 16-bit weights, so within 2 of it
 * everywhere and almost always equal, whatever the geometry: shrinks of 20x along either
 * axis (hundreds of source rows pass through the fast resampler's ring of rows), growth
 * from a few pixels, and train crops. */
static void check_fast_near_pillow(void)
{
    static const int32_t dims[][3] = {{4000, 300, 224}, {300, 4000, 224}, {5, 3, 64},
                                      {500, 375, 224},  {333, 257, 96},   {97, 61, 33}};
    stoker__xform_scratch *s;
    T_OK(stoker__xform_scratch_create(&s));
    uint64_t r = 7;
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++) {
        const int32_t w = dims[d][0], h = dims[d][1], cs = dims[d][2];
        uint8_t *img = malloc((size_t)w * h * 3);
        for (int32_t y = 0; y < h; y++) /* gradients, an edge and noise */
            for (int32_t x = 0; x < w; x++)
                for (int c = 0; c < 3; c++)
                    img[((size_t)y * w + x) * 3 + c] =
                        (uint8_t)((x * 255 / w + y * 97 / h + (x > w / 3 ? 60 : 0) +
                                   (int)(t_rand(&r) % 48) + 40 * c) %
                                  256);
        const size_t n = (size_t)cs * cs * 3;
        uint8_t *a = malloc(n), *b = malloc(n);
        for (int t = STOKER_TRANSFORM_TRAIN; t <= STOKER_TRANSFORM_RESIZE; t++) {
            stoker__xform_params pf = {.transform = t,
                                       .size = cs,
                                       .resize = t == STOKER_TRANSFORM_EVAL ? cs + cs / 7 : 0,
                                       .dtype = STOKER_DTYPE_UINT8,
                                       .layout = STOKER_LAYOUT_NHWC,
                                       .resampler = STOKER_RESAMPLER_FAST,
                                       .mean = {0, 0, 0},
                                       .std = {1, 1, 1}};
            stoker__xform_params pp = pf;
            pp.resampler = STOKER_RESAMPLER_PILLOW;
            stoker__err err;
            T_OK(stoker__xform_params_prepare(&pf, STOKER_SIMD_AUTO, &err));
            T_OK(stoker__xform_params_prepare(&pp, STOKER_SIMD_AUTO, &err));
            for (int64_t id = 0; id < (t == STOKER_TRANSFORM_TRAIN ? 6 : 1); id++) {
                T_OK(stoker__xform_rgb(s, &pf, 3, 0, id, img, w, h, (size_t)w * 3, a, &err));
                T_OK(stoker__xform_rgb(s, &pp, 3, 0, id, img, w, h, (size_t)w * 3, b, &err));
                int maxd = 0;
                size_t sum = 0;
                for (size_t i = 0; i < n; i++) {
                    const int dd = abs(a[i] - b[i]);
                    maxd = dd > maxd ? dd : maxd;
                    sum += (size_t)dd;
                }
                printf("fast vs pillow %dx%d -> %d, transform %d, id %d: max %d, mean %.4f\n",
                       (int)w, (int)h, (int)cs, t, (int)id, maxd, (double)sum / (double)n);
                T_ASSERT(maxd <= 2);
                T_ASSERT((double)sum / (double)n <= 0.05);
            }
        }
        free(img), free(a), free(b);
    }
    stoker__xform_scratch_destroy(s);
}

static void check_params_and_flip(void)
{
    stoker__xform_params p = {.mean = {0.485f, 0.456f, 0.406f}, .std = {0.229f, 0.224f, 0.225f}};
    stoker__err err;
    T_OK(stoker__xform_params_prepare(&p, STOKER_SIMD_AUTO, &err));
    T_EQ_INT(p.transform, STOKER_TRANSFORM_TRAIN);
    T_EQ_INT(p.size, 224);
    T_EQ_INT(p.dtype, STOKER_DTYPE_FLOAT16);
    T_EQ_INT(p.layout, STOKER_LAYOUT_NCHW);
    T_EQ_INT(p.antialias, STOKER_ANTIALIAS_OVER_2X);
    T_EQ_INT(p.resampler, STOKER_RESAMPLER_FAST);
    stoker__xform_params bad = p;
    bad.antialias = 3;
    T_EQ_RC(stoker__xform_params_prepare(&bad, STOKER_SIMD_AUTO, &err), STOKER_E_INVALID);
    bad = p;
    bad.resampler = 3;
    T_EQ_RC(stoker__xform_params_prepare(&bad, STOKER_SIMD_AUTO, &err), STOKER_E_INVALID);
    T_CONTAINS(err.msg, "resampler");
    T_EQ_INT(stoker__xform_sample_bytes(&p), 224 * 224 * 3 * 2);
    T_ASSERT(p.simd != NULL);
    stoker__xform_params q = p;
    q.std[1] = 0;
    T_EQ_RC(stoker__xform_params_prepare(&q, STOKER_SIMD_AUTO, &err), STOKER_E_INVALID);
    q = p;
    q.dtype = STOKER_DTYPE_INT16;
    T_EQ_RC(stoker__xform_params_prepare(&q, STOKER_SIMD_AUTO, &err), STOKER_E_INVALID);
    q = p;
    q.transform = STOKER_TRANSFORM_EVAL;
    q.resize = 100;
    T_EQ_RC(stoker__xform_params_prepare(&q, STOKER_SIMD_AUTO, &err), STOKER_E_INVALID);
    T_CONTAINS(err.msg, "resize");
    q = p;
    T_EQ_RC(stoker__xform_params_prepare(&q, 9, &err), STOKER_E_INVALID);
    /* the crop's ranges: each lo <= hi, the scale within (0, 1], the ratio finite */
    const double bad_ranges[][4] = {{0.6, 0.5, 0.75, 1.5}, {0.1, 1.5, 0.75, 1.5},
                                    {0.1, 0.5, 2.0, 1.0},  {0.1, 0.5, 0.5, INFINITY},
                                    {-0.1, 0.5, 0.5, 1.0}, {NAN, 0.5, 0.5, 1.0}};
    for (size_t i = 0; i < sizeof bad_ranges / sizeof bad_ranges[0]; i++) {
        q = p;
        memcpy(q.crop_scale, bad_ranges[i], sizeof q.crop_scale);
        memcpy(q.crop_ratio, bad_ranges[i] + 2, sizeof q.crop_ratio);
        T_EQ_RC(stoker__xform_params_prepare(&q, STOKER_SIMD_AUTO, &err), STOKER_E_INVALID);
        T_CONTAINS(err.msg, i == 2 || i == 3 ? "ratio_min to ratio_max" : "scale_min to scale_max");
    }
    q = p;
    q.crop_scale[0] = q.crop_scale[1] = 1.0; /* a single value is a range */
    q.crop_ratio[0] = q.crop_ratio[1] = 0.5;
    T_OK(stoker__xform_params_prepare(&q, STOKER_SIMD_AUTO, &err));

    /* flip: the output of a flipped sample is the mirror of the unflipped one. Find ids
     * with equal boxes is impossible; instead compare RESIZE (no flip) of an image and of
     * its mirror through the TRAIN geometry's flip path on the same box. */
    const int32_t w = 40, h = 30, cs = 16;
    uint8_t *img = malloc((size_t)w * h * 3), *mir = malloc((size_t)w * h * 3);
    uint64_t r = 1;
    for (int i = 0; i < w * h * 3; i++)
        img[i] = (uint8_t)t_rand(&r);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            memcpy(mir + ((size_t)y * w + x) * 3, img + ((size_t)y * w + (w - 1 - x)) * 3, 3);
    stoker__xform_params u = {.transform = STOKER_TRANSFORM_RESIZE,
                              .size = cs,
                              .dtype = STOKER_DTYPE_UINT8,
                              .layout = STOKER_LAYOUT_NHWC,
                              .mean = {0, 0, 0},
                              .std = {1, 1, 1}};
    T_OK(stoker__xform_params_prepare(&u, STOKER_SIMD_AUTO, &err));
    stoker__xform_scratch *s;
    T_OK(stoker__xform_scratch_create(&s));
    uint8_t a[16 * 16 * 3], b[16 * 16 * 3];
    T_OK(stoker__xform_rgb(s, &u, 0, 0, 0, img, w, h, (size_t)w * 3, a, &err));
    T_OK(stoker__xform_rgb(s, &u, 0, 0, 0, mir, w, h, (size_t)w * 3, b, &err));
    /* resampling a mirrored image mirrors the result up to rounding of the weights */
    int maxd = 0;
    for (int y = 0; y < cs; y++)
        for (int x = 0; x < cs; x++)
            for (int c = 0; c < 3; c++) {
                const int d = abs(a[(y * cs + x) * 3 + c] - b[(y * cs + (cs - 1 - x)) * 3 + c]);
                maxd = d > maxd ? d : maxd;
            }
    T_ASSERT(maxd <= 1);
    /* TRAIN: for a flipped id, the output equals the unflipped geometry mirrored exactly */
    stoker__xform_params t = u;
    t.transform = STOKER_TRANSFORM_TRAIN;
    T_OK(stoker__xform_params_prepare(&t, STOKER_SIMD_AUTO, &err));
    int seen_flip = 0;
    for (int64_t id = 0; id < 16; id++) {
        stoker__geom g;
        stoker__xform_geometry(&t, w, h, 5, 0, id, &g);
        T_EQ_INT(g.flip, stoker__rrc_flip(0.5, 5, 0, id));
        if (!g.flip)
            continue;
        seen_flip = 1;
        /* the same box unflipped: crop it out and resize it with RESIZE */
        const int32_t bw = g.x.in_size, bh = g.y.in_size;
        uint8_t *crop = malloc((size_t)bw * bh * 3);
        for (int y = 0; y < bh; y++)
            memcpy(crop + (size_t)y * bw * 3, img + ((size_t)(g.y.offset + y) * w + g.x.offset) * 3,
                   (size_t)bw * 3);
        T_OK(stoker__xform_rgb(s, &t, 5, 0, id, img, w, h, (size_t)w * 3, a, &err));
        T_OK(stoker__xform_rgb(s, &u, 0, 0, 0, crop, bw, bh, (size_t)bw * 3, b, &err));
        for (int y = 0; y < cs; y++)
            for (int x = 0; x < cs; x++)
                T_ASSERT(memcmp(a + (y * cs + x) * 3, b + (y * cs + cs - 1 - x) * 3, 3) == 0);
        free(crop);
    }
    T_ASSERT(seen_flip);
    stoker__xform_scratch_destroy(s);
    free(img), free(mir);
}

/* Parameters left 0 are the options table's defaults, as a fresh config reads them: the
 * transform keeps no defaults of its own. */
static void check_defaults_are_the_tables(void)
{
    stoker__xform_params p = {.transform = STOKER_TRANSFORM_TRAIN,
                              .dtype = STOKER_DTYPE_UINT8,
                              .mean = {0.5f, 0.5f, 0.5f},
                              .std = {0.25f, 0.25f, 0.25f}};
    stoker__err err;
    T_OK(stoker__xform_params_prepare(&p, STOKER_SIMD_AUTO, &err));
    stoker_config *cfg = NULL;
    T_OK(stoker_config_create(&cfg));
    const struct {
        int64_t got;
        stoker_option opt;
    } f[] = {{p.size, STOKER_OPT_SIZE},
             {p.layout, STOKER_OPT_LAYOUT},
             {p.dct, STOKER_OPT_DCT},
             {p.antialias, STOKER_OPT_ANTIALIAS},
             {p.resampler, STOKER_OPT_RESAMPLER},
             {p.dct_scale, STOKER_OPT_DCT_SCALE},
             {(int64_t)p.max_pixels, STOKER_OPT_MAX_PIXELS}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        int64_t want = 0;
        T_OK(stoker_config_get_int(cfg, f[i].opt, &want));
        if (f[i].got != want)
            T_FAIL("%s: the transform takes %lld, the table %lld", stoker_option_name(f[i].opt),
                   (long long)f[i].got, (long long)want);
    }
    const struct {
        double got;
        stoker_option opt;
    } d[] = {{p.crop_scale[0], STOKER_OPT_SCALE_MIN},
             {p.crop_scale[1], STOKER_OPT_SCALE_MAX},
             {p.crop_ratio[0], STOKER_OPT_RATIO_MIN},
             {p.crop_ratio[1], STOKER_OPT_RATIO_MAX}};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
        double want = 0;
        T_OK(stoker_config_get_float(cfg, d[i].opt, &want));
        T_ASSERT(d[i].got == want && want == (i == 0   ? 0.08
                                              : i == 1 ? 1.0
                                              : i == 2 ? 0.75
                                                       : 4.0 / 3.0));
    }
    stoker_config_destroy(cfg);
}

int main(void)
{
    check_defaults_are_the_tables();
    check_rrc_statistics(500, 500, 0.95, 0.45, 20);
    check_rrc_statistics(640, 427, 0.85, 0.35, 20);
    check_rrc_statistics(97, 301, 0.3, 0.15, 2000); /* thin: some fall back */
    check_rrc_keys();
    check_hflip();
    check_rrc_fallback();
    check_rrc_ranges();
    check_eval();
    check_coeffs();
    check_coeffs_plain();
    check_reduce();
    check_coeffs_pairs();
    check_fast_near_pillow();
    check_params_and_flip();
    return 0;
}
