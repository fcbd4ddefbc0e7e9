/* SPDX-License-Identifier: Apache-2.0 */
/* The geometry of tied fields (src/transform/fields.h): nearest indices, masks and boxes on
 * hand-computed cases, dropped boxes and their tied rows, and the agreement of a sample's
 * geometry with what the image pipeline delivers for the same (seed, epoch, id). */
#include "testutil.h"

#include "transform/fields.h"

#include <math.h>

static stoker__fgeom hand_geom(stoker__faxis x, stoker__faxis y, int flip, int vflip, int32_t w,
                               int32_t h)
{
    stoker__fgeom g = {.src_w = w,
                       .src_h = h,
                       .x = x,
                       .y = y,
                       .flip = flip,
                       .vflip = vflip,
                       .out_w = x.count,
                       .out_h = y.count};
    return g;
}

static void test_nearest_index(void)
{
    /* in 3 -> out 5: scale 0.6f, floor(0, 0.6, 1.2, 1.8, 2.4) */
    const int32_t up[5] = {0, 0, 1, 1, 2};
    for (int32_t k = 0; k < 5; k++)
        T_EQ_INT(stoker__nearest_index(k, 3, 5), up[k]);
    /* in 5 -> out 3: scale 5/3, floor(0, 1.67, 3.33) */
    const int32_t down[3] = {0, 1, 3};
    for (int32_t k = 0; k < 3; k++)
        T_EQ_INT(stoker__nearest_index(k, 5, 3), down[k]);
    for (int32_t k = 0; k < 7; k++) {
        T_EQ_INT(stoker__nearest_index(k, 7, 7), k);
        T_EQ_INT(stoker__nearest_index(k, 1, 7), 0);
    }
    /* float32, as PyTorch: 201 * 56 / 402 is 28 exactly, but (float)56 / 402 rounds down and
     * the product floors to 27 */
    T_EQ_INT(stoker__nearest_index(201, 56, 402), 27);
    /* 2x: k >> 1, PyTorch's special case, which the float formula gives too */
    for (int32_t k = 0; k < 4096; k++)
        T_EQ_INT(stoker__nearest_index(k, 2048, 4096), k >> 1);
}

/* A w x h mask whose value is 16 y + x (w, h <= 16). */
static void coord_mask(uint8_t *m, int32_t w, int32_t h)
{
    for (int32_t y = 0; y < h; y++)
        for (int32_t x = 0; x < w; x++)
            m[y * w + x] = (uint8_t)(16 * y + x);
}

static void test_mask_identity(void)
{
    stoker__xform_params p = {.transform = STOKER_TRANSFORM_RESIZE, .size = 6};
    p.std[0] = p.std[1] = p.std[2] = 1.0f;
    stoker__err err;
    T_OK(stoker__xform_params_prepare(&p, STOKER_SIMD_SCALAR, &err));
    stoker__fgeom g;
    stoker__sample_geometry(&p, 6, 6, 1, 2, 3, &g);
    T_EQ_INT(g.x.count, 6);
    T_EQ_INT(g.flip + g.vflip, 0);
    T_ASSERT(g.x0 == 0.0 && g.y0 == 0.0 && g.x1 == 6.0 && g.y1 == 6.0);
    uint8_t src[36], dst[36];
    coord_mask(src, 6, 6);
    T_OK(stoker__mask_geom(src, 6, 6, 6, &g, dst, &err));
    T_ASSERT(memcmp(src, dst, sizeof src) == 0);
    float b[4] = {0.5f, 1.0f, 6.0f, 5.25f};
    uint8_t keep;
    T_EQ_INT(stoker__boxes_geom(b, 1, &g, 0.0, 0.0, &keep), 1);
    T_ASSERT(b[0] == 0.5f && b[1] == 1.0f && b[2] == 6.0f && b[3] == 5.25f);
}

static void test_mask_crop_flips(void)
{
    /* a 10 x 8 mask; x: source columns [2, 6) enlarged to 8 (2x); y: rows [1, 7) shrunk to
     * 4 (scale 1.5f: floor(0, 1.5, 3, 4.5) = 0, 1, 3, 4) */
    uint8_t src[10 * 8], dst[8 * 4];
    for (int32_t y = 0; y < 8; y++)
        for (int32_t x = 0; x < 10; x++)
            src[y * 10 + x] = (uint8_t)(16 * y + x);
    const stoker__faxis ax = {2, 4, 8, 0, 8}, ay = {1, 6, 4, 0, 4};
    const int32_t rows[4] = {1, 2, 4, 5};
    stoker__err err;
    for (int flip = 0; flip < 2; flip++) {
        for (int vflip = 0; vflip < 2; vflip++) {
            const stoker__fgeom g = hand_geom(ax, ay, flip, vflip, 10, 8);
            T_OK(stoker__mask_geom(src, 10, 8, 10, &g, dst, &err));
            for (int32_t i = 0; i < 4; i++) {
                for (int32_t j = 0; j < 8; j++) {
                    const int32_t u = flip ? 7 - j : j, v = vflip ? 3 - i : i;
                    T_EQ_INT(dst[i * 8 + j], 16 * rows[v] + 2 + u / 2);
                }
            }
        }
    }
    /* a centre crop of a resize (EVAL): 10 -> 5 (scale 2: 0, 2, 4, 6, 8), crop [1, 4) */
    const stoker__faxis ex = {0, 10, 5, 1, 3}, ey = {0, 8, 4, 1, 2};
    const stoker__fgeom g = hand_geom(ex, ey, 0, 0, 10, 8);
    uint8_t small[3 * 2];
    T_OK(stoker__mask_geom(src, 10, 8, 10, &g, small, &err));
    const uint8_t want[6] = {16 * 2 + 2, 16 * 2 + 4, 16 * 2 + 6,
                             16 * 4 + 2, 16 * 4 + 4, 16 * 4 + 6};
    T_ASSERT(memcmp(small, want, sizeof want) == 0);
    /* a mask of another size than its image is refused, dst untouched */
    memset(small, 0xee, sizeof small);
    T_EQ_RC(stoker__mask_geom(src, 10, 7, 10, &g, small, &err), STOKER_E_INVALID);
    T_CONTAINS(err.msg, "mask of 10x7 pixels for an image of 10x8");
    T_EQ_RC(stoker__mask_geom(src, 10, 8, 9, &g, small, &err), STOKER_E_INVALID);
    T_EQ_INT(small[0], 0xee);
}

static void test_boxes(void)
{
    /* source [10, 30) shrunk to 10 pixels on both axes: v' = (v - 10) / 2 */
    const stoker__faxis a = {10, 20, 10, 0, 10};
    const float b[][4] = {
        {5, 12, 20, 40},   /* partly outside: x1 and y2 clipped -> [0, 1, 5, 10] */
        {12, 14, 16, 18},  /* inside -> [1, 2, 3, 4] */
        {0, 0, 8, 8},      /* wholly left of and above the crop: dropped */
        {30, 12, 40, 20},  /* right of the crop: zero width after clipping, dropped */
        {12, 12, 12, 20},  /* given with zero width: dropped */
        {NAN, 12, 20, 20}, /* NaN: dropped */
        {10, 10, 30, 30},  /* the whole crop -> [0, 0, 10, 10] */
    };
    const int64_t n = (int64_t)(sizeof b / sizeof b[0]);
    const float want[][4] = {{0, 1, 5, 10}, {1, 2, 3, 4}, {0, 0, 10, 10}};
    const float want_flip[][4] = {{5, 0, 10, 9}, {7, 6, 9, 8}, {0, 0, 10, 10}};
    const uint8_t want_keep[] = {1, 1, 0, 0, 0, 0, 1};
    for (int flips = 0; flips < 2; flips++) {
        float m[sizeof b / sizeof(float)];
        memcpy(m, b, sizeof b);
        uint8_t keep[sizeof want_keep];
        const stoker__fgeom g = hand_geom(a, a, flips, flips, 40, 40);
        T_EQ_INT(stoker__boxes_geom(m, n, &g, 0.0, 0.0, keep), 3);
        for (int64_t i = 0; i < n; i++)
            T_EQ_INT(keep[i], want_keep[i]);
        /* the boxes and a tied array of class ids lose the same rows */
        int64_t ids[] = {100, 101, 102, 103, 104, 105, 106};
        T_EQ_INT(stoker__rows_compact(m, n, 4 * sizeof(float), keep), 3);
        T_EQ_INT(stoker__rows_compact(ids, n, sizeof ids[0], keep), 3);
        T_EQ_INT(ids[0], 100);
        T_EQ_INT(ids[1], 101);
        T_EQ_INT(ids[2], 106);
        for (int i = 0; i < 3; i++) {
            for (int c = 0; c < 4; c++) {
                const float w = flips ? want_flip[i][c] : want[i][c];
                if (fabsf(m[4 * i + c] - w) > 1e-6f)
                    T_FAIL("flips %d box %d coord %d: %g, want %g", flips, i, c,
                           (double)m[4 * i + c], (double)w);
            }
        }
    }
    /* enlarged and centre-cropped: source [0, 10) to 40 pixels, crop [5, 25) */
    const stoker__faxis e = {0, 10, 40, 5, 20};
    const stoker__fgeom g = hand_geom(e, e, 0, 0, 10, 10);
    float c[4] = {2, 3, 5.5f, 9};
    uint8_t keep;
    T_EQ_INT(stoker__boxes_geom(c, 1, &g, 0.0, 0.0, &keep), 1);
    T_ASSERT(c[0] == 3.0f && c[1] == 7.0f && c[2] == 17.0f && c[3] == 20.0f);
}

/* The minimum size and visibility: source [10, 30) shrunk to 10 pixels (v' = (v - 10) / 2). */
static void test_box_minimums(void)
{
    const stoker__faxis a = {10, 20, 10, 0, 10};
    const float b[][4] = {
        {12, 12, 13, 20}, /* 0.5 wide, 4 high, inside */
        {12, 12, 14, 20}, /* 1 wide, inside */
        {0, 12, 20, 20},  /* [0, 1, 5, 5] of [-5, 1, 5, 5]: half shown */
        {4, 12, 14, 20},  /* [0, 1, 2, 5] of [-3, 1, 2, 5]: 2/5 shown */
        {20, 20, 40, 40}, /* [5, 5, 10, 10] of [5, 5, 15, 15]: a quarter shown */
        {12, 12, 12, 20}, /* no area: dropped whatever the minimums */
    };
    const int64_t n = (int64_t)(sizeof b / sizeof b[0]);
    const struct {
        double size, vis;
        uint8_t keep[6];
    } c[] = {
        {0.0, 0.0, {1, 1, 1, 1, 1, 0}},  /* any area */
        {1.0, 0.0, {0, 1, 1, 1, 1, 0}},  /* torchvision's min_size */
        {2.5, 0.0, {0, 0, 1, 0, 1, 0}},  /* widths 0.5, 1, 5, 2, 5 */
        {0.0, 0.5, {1, 1, 1, 0, 0, 0}},  /* a half shown is kept, 2/5 and 1/4 not */
        {0.0, 0.25, {1, 1, 1, 1, 1, 0}}, /* exactly a quarter is kept */
        {0.0, 1.0, {1, 1, 0, 0, 0, 0}},  /* wholly shown only */
        {1.0, 0.4, {0, 1, 1, 1, 0, 0}},  /* both */
    };
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        for (int flips = 0; flips < 2; flips++) { /* flips move boxes, not their share */
            float m[sizeof b / sizeof(float)];
            memcpy(m, b, sizeof b);
            uint8_t keep[6];
            const stoker__fgeom g = hand_geom(a, a, flips, !flips, 40, 40);
            int64_t want = 0;
            for (int64_t i = 0; i < n; i++)
                want += c[k].keep[i];
            T_EQ_INT(stoker__boxes_geom(m, n, &g, c[k].size, c[k].vis, keep), want);
            for (int64_t i = 0; i < n; i++)
                if (keep[i] != c[k].keep[i])
                    T_FAIL("min size %g, visibility %g: box %d kept %d", c[k].size, c[k].vis,
                           (int)i, keep[i]);
        }
    }
}

/* ---- agreement with the image pipeline ------------------------------------------------------ */

/* Runs the image path (Pillow's exact weights, antialias always) on a w x h image whose red
 * value is x and green value y, and checks that every output pixel whose filter lies inside
 * the pixels the image path reads shows the source point the geometry says: the centre of
 * the (flipped) output pixel in the shown region [x0, x1) x [y0, y1). A bilinear resize of a
 * linear ramp gives that point's value within a fraction of a pixel; a box, resize or flip
 * that differs from the image path's is off by pixels. Returns the pixels checked. */
static int64_t check_agreement(stoker__xform_scratch *s, const stoker__xform_params *p, int32_t w,
                               int32_t h, int64_t id, int *flips)
{
    uint8_t *rgb = malloc((size_t)w * h * 3);
    for (int32_t y = 0; y < h; y++) {
        for (int32_t x = 0; x < w; x++) {
            uint8_t *px = rgb + ((size_t)y * w + x) * 3;
            px[0] = (uint8_t)x;
            px[1] = (uint8_t)y;
            px[2] = 0;
        }
    }
    const int32_t c = p->size;
    uint8_t *out = malloc((size_t)c * c * 3);
    stoker__err err;
    T_OK(stoker__xform_rgb(s, p, 9, 4, id, rgb, w, h, (size_t)w * 3, out, &err));
    stoker__fgeom g;
    stoker__sample_geometry(p, w, h, 9, 4, id, &g);
    T_EQ_INT(g.x.count, c);
    T_EQ_INT(g.y.count, c);
    flips[0] += g.flip;
    flips[1] += g.vflip;
    int64_t checked = 0;
    const stoker__faxis *axes[2] = {&g.x, &g.y};
    const double lo[2] = {g.x0, g.y0}, hi[2] = {g.x1, g.y1};
    for (int32_t i = 0; i < c; i++) {
        for (int32_t j = 0; j < c; j++) {
            const int32_t k[2] = {g.flip ? c - 1 - j : j, g.vflip ? c - 1 - i : i};
            int inside = 1;
            double want[2];
            for (int a = 0; a < 2; a++) {
                const double step = (hi[a] - lo[a]) / c, support = step > 1.0 ? step : 1.0;
                const double centre = lo[a] + (k[a] + 0.5) * step;
                want[a] = centre - 0.5; /* pixel v covers [v, v + 1): its value is v */
                inside &= centre - support >= axes[a]->offset &&
                          centre + support <= axes[a]->offset + axes[a]->in;
            }
            if (!inside)
                continue;
            const uint8_t *px = out + ((size_t)i * c + j) * 3;
            for (int a = 0; a < 2; a++)
                if (fabs(px[a] - want[a]) > 0.75)
                    T_FAIL("transform %d %dx%d id %" PRId64 " flip %d vflip %d: output (%d, %d) "
                           "channel %d is %d, the geometry says %.2f (within 0.75)",
                           (int)p->transform, (int)w, (int)h, id, g.flip, g.vflip, (int)i, (int)j,
                           a, px[a], want[a]);
            checked++;
        }
    }
    free(out);
    free(rgb);
    return checked;
}

static void test_agreement(void)
{
    const struct {
        int32_t transform, size, resize;
    } modes[] = {
        {STOKER_TRANSFORM_TRAIN, 48, 0},
        {STOKER_TRANSFORM_EVAL, 40, 53},
        {STOKER_TRANSFORM_RESIZE, 56, 0},
    };
    const int32_t sizes[][2] = {{200, 150}, {97, 203}, {256, 64}, {31, 45}};
    stoker__xform_scratch *s;
    T_OK(stoker__xform_scratch_create(&s));
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        stoker__xform_params p = {.transform = modes[m].transform,
                                  .size = modes[m].size,
                                  .resize = modes[m].resize,
                                  .dtype = STOKER_DTYPE_UINT8,
                                  .layout = STOKER_LAYOUT_NHWC,
                                  .antialias = STOKER_ANTIALIAS_ALWAYS,
                                  .resampler = STOKER_RESAMPLER_PILLOW,
                                  .vflip = 0.5};
        p.std[0] = p.std[1] = p.std[2] = 1.0f;
        stoker__err err;
        T_OK(stoker__xform_params_prepare(&p, STOKER_SIMD_AUTO, &err));
        int flips[2] = {0, 0};
        int64_t checked = 0, samples = 0;
        for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
            for (int64_t id = 0; id < 24; id++, samples++)
                checked += check_agreement(s, &p, sizes[z][0], sizes[z][1], id, flips);
        }
        /* most pixels are away from the edges; train flips about half its samples */
        T_ASSERT(checked > samples * p.size * p.size / 2);
        if (p.transform == STOKER_TRANSFORM_TRAIN) {
            T_ASSERT(flips[0] > samples / 4 && flips[0] < samples * 3 / 4);
            T_ASSERT(flips[1] > samples / 4 && flips[1] < samples * 3 / 4);
        } else {
            T_EQ_INT(flips[0] + flips[1], 0);
        }
    }
    stoker__xform_scratch_destroy(s);
}

int main(void)
{
    test_nearest_index();
    test_mask_identity();
    test_mask_crop_flips();
    test_boxes();
    test_box_minimums();
    test_agreement();
    printf("ok\n");
    return 0;
}
