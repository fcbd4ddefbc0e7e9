/* SPDX-License-Identifier: Apache-2.0 */
/* Every SIMD variant against the scalar reference, on odd sizes and unaligned buffers.
 * Resampling is integer arithmetic and normalisation one fused multiply-add followed by
 * round-to-nearest-even in every variant, so the expected tolerance is zero: outputs must
 * be equal byte for byte, for every dtype and layout, with either resampler. Variants this CPU
 * lacks are skipped (reported), not failed. */
#include "testutil.h"

#include "transform/transform.h"

#include <immintrin.h>
#include <math.h>

static const int32_t SIZES[] = {1,  2,  3,  4,  5,  7,  8,  9,  15, 16,  17, 31,
                                33, 47, 48, 49, 63, 64, 65, 66, 67, 224, 255};
#define NSIZES (int)(sizeof SIZES / sizeof SIZES[0])

static uint64_t rng = 12345;

static void fill(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)t_rand(&rng);
}

static void expect_same(const uint8_t *a, const uint8_t *b, size_t n, const char *what,
                        const char *isa, int32_t size)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            T_FAIL("%s %s size %d: byte %zu differs: scalar %u, %s %u", isa, what, (int)size, i,
                   a[i], isa, b[i]);
}

/* Horizontal pass: a random resample of four W-pixel rows to n outputs, through the
 * interleaving kernel of the variant. */
static void check_hpass(const stoker__simd_ops *k, int32_t w, int32_t n, int flip, int plain)
{
    const stoker__axis a = {0, w, n, 0, n, plain, 0, 0};
    const int32_t ks = stoker__resample_ksize(&a);
    int32_t *first = malloc((size_t)n * 4), *taps = malloc((size_t)n * 4);
    int32_t *coef = malloc((size_t)n * ks * 4);
    double *tmp = malloc((size_t)ks * sizeof(double));
    int32_t lo, hi;
    stoker__resample_coeffs(&a, 0, flip, ks, 1, first, taps, coef, tmp, &lo, &hi);
    T_ASSERT(lo == 0 && hi == w);
    uint8_t *src = malloc((size_t)w * 16 + 3);
    fill(src, (size_t)w * 16 + 3);
    const uint8_t *rows[4];
    for (int r = 0; r < 4; r++)
        rows[r] = src + 3 + (size_t)r * w * 4;
    int32_t kmax = 1;
    for (int32_t j = 0; j < n; j++)
        kmax = taps[j] > kmax ? taps[j] : kmax;
    /* hpass4 may read kmax pixels past the last one (weighted by zero): random bytes there */
    uint8_t *qa = malloc((size_t)(w + kmax) * 16), *qb = malloc((size_t)w * 16 + 5);
    fill(qa + (size_t)w * 16, (size_t)kmax * 16);
    stoker__simd_scalar.interleave4(rows, (size_t)w, qa);
    k->interleave4(rows, (size_t)w, qb + 5);
    expect_same(qa, qb + 5, (size_t)w * 16, "interleave4", k->name, w);
    uint8_t *want = malloc((size_t)n * 16), *got = malloc((size_t)n * 16 + 1);
    uint8_t *const wo[4] = {want, want + n * 4, want + n * 8, want + n * 12};
    uint8_t *const go[4] = {got + 1, got + 1 + n * 4, got + 1 + n * 8, got + 1 + n * 12};
    stoker__simd_scalar.hpass4(qa, n, first, taps, coef, ks, kmax, wo);
    k->hpass4(qa, n, first, taps, coef, ks, kmax, go);
    expect_same(want, got + 1, (size_t)n * 16, "hpass4", k->name, w * 1000 + n);
    free(first), free(taps), free(coef), free(tmp), free(src), free(qa), free(qb);
    free(want), free(got);
}

/* The fast resampler's horizontal pass: the same resample in 16-bit pairs of weights, through
 * the variant's pairing and pass, to uint16 values. */
static void check_hpass_fast(const stoker__simd_ops *k, int32_t w, int32_t n, int flip, int plain)
{
    const stoker__axis a = {0, w, n, 0, n, plain, 0, 0};
    const int32_t ks = stoker__resample_ksize(&a), per = (ks + 1) / 2;
    int32_t *first = malloc((size_t)n * 4), *taps = malloc((size_t)n * 4);
    int32_t *coef = malloc((size_t)n * ks * 4), *pairs = malloc((size_t)n * per * 4);
    double *tmp = malloc((size_t)ks * sizeof(double));
    int32_t lo, hi;
    stoker__resample_coeffs(&a, 0, flip, ks, 1, first, taps, coef, tmp, &lo, &hi);
    const int32_t bits = stoker__coeffs_to_pairs(coef, n, ks, pairs);
    T_ASSERT(bits >= 14 && bits <= STOKER__PRECISION_BITS);
    int32_t kmax = 1;
    for (int32_t j = 0; j < n; j++)
        kmax = taps[j] > kmax ? taps[j] : kmax;
    const int32_t np = (kmax + 1) / 2;
    /* random pixels, and random bytes past the last (read, weighted by zero) */
    uint8_t *quad = malloc((size_t)(w + ks + 1) * 16);
    fill(quad, (size_t)(w + ks + 1) * 16);
    int16_t *pa = malloc((size_t)(w + ks) * 64), *pb = malloc((size_t)w * 64 + 2);
    for (size_t i = 0; i < (size_t)(w + ks) * 32; i++)
        pa[i] = (int16_t)(t_rand(&rng) & 0xFF);
    stoker__simd_scalar.pairs(quad, (size_t)w, pa);
    k->pairs(quad, (size_t)w, pb + 1);
    expect_same((const uint8_t *)pa, (const uint8_t *)(pb + 1), (size_t)w * 64, "pairs", k->name,
                w);
    uint16_t *want = malloc((size_t)n * 32), *got = malloc((size_t)n * 32 + 2);
    uint16_t *const wo[4] = {want, want + n * 4, want + n * 8, want + n * 12};
    uint16_t *const go[4] = {got + 1, got + 1 + n * 4, got + 1 + n * 8, got + 1 + n * 12};
    stoker__simd_scalar.hpass4_fast(pa, n, first, pairs, per, np, bits, wo);
    k->hpass4_fast(pa, n, first, pairs, per, np, bits, go);
    expect_same((const uint8_t *)want, (const uint8_t *)(got + 1), (size_t)n * 32, "hpass4_fast",
                k->name, w * 1000 + n);
    for (size_t i = 0; i < (size_t)n * 16; i++)
        T_ASSERT(want[i] <= 255);
    free(first), free(taps), free(coef), free(pairs), free(tmp), free(quad), free(pa), free(pb);
    free(want), free(got);
}

/* The fast vertical pass (np <= 16): 2 np rows of n values (at most 255) anywhere in memory, random
 * pairs of weights (some negative, to test clipping) at every precision. */
static void check_vpass_fast(const stoker__simd_ops *k, size_t n, int32_t np)
{
    uint16_t *buf = malloc((n + 3) * 2 * (size_t)np * 2);
    const uint16_t *rows[32];
    for (int32_t r = 0; r < 2 * np; r++) {
        uint16_t *row = buf + (size_t)r * (n + 3) + (size_t)(r % 3); /* odd alignments */
        for (size_t i = 0; i < n; i++)
            row[i] = (uint16_t)(t_rand(&rng) & 0xFF);
        rows[2 * np - 1 - r] = row; /* any order: the kernel takes pointers */
    }
    int32_t coef[16];
    for (int32_t m = 0; m < np; m++)
        coef[m] = (int32_t)(uint32_t)t_rand(&rng); /* two random int16 weights */
    uint8_t *want = malloc(n), *got = malloc(n + 3);
    for (int32_t bits = 14; bits <= STOKER__PRECISION_BITS; bits += 4) {
        memset(got, 0x77, n + 3);
        stoker__simd_scalar.vpass_fast(rows, np, coef, bits, want, n);
        k->vpass_fast(rows, np, coef, bits, got + 1, n);
        expect_same(want, got + 1, n, "vpass_fast", k->name, (int32_t)n * 100 + bits);
        T_EQ_INT(got[0], 0x77);
        T_EQ_INT(got[n + 1], 0x77);
    }
    free(buf), free(want), free(got);
}

/* Vertical pass: taps rows of n bytes, random weights (some negative, to test clipping). */
static void check_vpass(const stoker__simd_ops *k, size_t n, int32_t taps)
{
    const size_t stride = n + 5;
    uint8_t *src = malloc(stride * (size_t)taps + 1);
    fill(src, stride * (size_t)taps + 1);
    int32_t coef[16];
    for (int32_t t = 0; t < taps; t++)
        coef[t] = (int32_t)(t_rand(&rng) % (4u << 18)) - (1 << 18); /* no int overflow */
    uint8_t *want = malloc(n), *got = malloc(n + 3);
    stoker__simd_scalar.vpass(src + 1, stride, taps, coef, want, n);
    k->vpass(src + 1, stride, taps, coef, got + 3, n);
    expect_same(want, got + 3, n, "vpass", k->name, (int32_t)n);
    free(src), free(want), free(got);
}

static void check_unpack(const stoker__simd_ops *k, size_t n)
{
    uint8_t *src = malloc(n * 4 + 1);
    fill(src, n * 4 + 1);
    uint8_t *want = malloc(n * 3), *got = malloc(n * 3 + 7);
    stoker__simd_scalar.unpack_planar(src + 1, n, want, want + n, want + 2 * n);
    k->unpack_planar(src + 1, n, got + 1, got + 1 + n, got + 1 + 2 * n);
    expect_same(want, got + 1, n * 3, "unpack_planar", k->name, (int32_t)n);
    memset(got, 0xAA, n * 3 + 7);
    stoker__simd_scalar.unpack_packed(src + 1, n, want);
    k->unpack_packed(src + 1, n, got + 2);
    expect_same(want, got + 2, n * 3, "unpack_packed", k->name, (int32_t)n);
    /* nothing written past the end */
    for (int i = 0; i < 5; i++)
        T_EQ_INT(got[2 + n * 3 + i], 0xAA);
    free(src), free(want), free(got);
}

/* One NCHW row in one pass: equal to unpack_planar and convert, with planes aligned to 64
 * bytes (streaming stores) and not. */
static void check_emit(const stoker__simd_ops *k, size_t n, int32_t dtype)
{
    const size_t es = dtype == STOKER_DTYPE_FLOAT32 ? 4 : 2, plane = (n * es + 63) / 64 * 64;
    float scale[STOKER__PATTERN], bias[STOKER__PATTERN], s3[3], b3[3];
    for (int c = 0; c < 3; c++) {
        s3[c] = (float)(1.0 / (255.0 * (0.1 + (double)(t_rand(&rng) % 1000) / 1000.0)));
        b3[c] = (float)(-2.0 + (double)(t_rand(&rng) % 4000) / 1000.0);
    }
    uint8_t *rgbx = malloc(n * 4 + 1), *u = malloc(n + 1);
    fill(rgbx, n * 4 + 1);
    uint8_t *want = aligned_alloc(64, plane * 3), *got = aligned_alloc(64, plane * 3 + 64);
    for (int c = 0; c < 3; c++) { /* the reference: unpack one plane, convert it */
        for (size_t i = 0; i < STOKER__PATTERN; i++)
            scale[i] = s3[c], bias[i] = b3[c];
        for (size_t i = 0; i < n; i++)
            u[i] = rgbx[1 + 4 * i + (size_t)c];
        stoker__simd_scalar.convert(u, n, dtype, scale, bias, want + (size_t)c * plane);
    }
    for (size_t off = 0; off <= 64; off += 62) { /* aligned, then not */
        memset(got, 0x5A, plane * 3 + 64);
        void *const planes[3] = {got + off, got + off + plane, got + off + 2 * plane};
        k->emit_planar(rgbx + 1, n, dtype, s3, b3, planes);
        _mm_sfence();
        for (int c = 0; c < 3; c++) {
            expect_same(want + (size_t)c * plane, got + off + (size_t)c * plane, n * es,
                        "emit_planar", k->name, (int32_t)(n * 10 + off));
            if (n * es < plane)
                T_EQ_INT(got[off + (size_t)c * plane + n * es], 0x5A); /* nothing past */
        }
    }
    free(rgbx), free(u), free(want), free(got);
}

static void check_convert(const stoker__simd_ops *k, size_t n, int32_t dtype)
{
    float scale[STOKER__PATTERN], bias[STOKER__PATTERN];
    for (int i = 0; i < STOKER__PATTERN; i++) {
        scale[i] = (float)(1.0 / (255.0 * (0.1 + (double)(t_rand(&rng) % 1000) / 1000.0)));
        bias[i] = (float)(-2.0 + (double)(t_rand(&rng) % 4000) / 1000.0);
    }
    const size_t es = dtype == STOKER_DTYPE_FLOAT32 ? 4 : 2;
    uint8_t *src = malloc(n + 1), *want = malloc(n * es);
    uint8_t *got = aligned_alloc(64, (n * es + 8 + 63) / 64 * 64);
    fill(src, n + 1);
    stoker__simd_scalar.convert(src + 1, n, dtype, scale, bias, want);
    for (size_t off = 0; off <= 1; off++) { /* line-aligned (streaming stores), then not */
        memset(got, 0x55, n * es + 8);
        k->convert(src + 1, n, dtype, scale, bias, got + off);
        _mm_sfence();
        expect_same(want, got + off, n * es, stoker_dtype_name(dtype), k->name, (int32_t)n);
        for (size_t i = 0; i < 7; i++)
            T_EQ_INT(got[off + n * es + i], 0x55);
    }
    free(src), free(want), free(got);
}

/* Rounding ties and near-ties: scale 0 makes every output exactly its bias, so crafted bias
 * bit patterns (halfway cases of float16 and bfloat16, both parities, subnormal float16)
 * reach each variant's conversion; results must equal the scalar ones and known values. */
static void check_rounding(const stoker__simd_ops *k)
{
    static const uint32_t bits[] = {0x3F808000u, 0x3F818000u, 0x3F807FFFu, 0x3F808001u,
                                    0xBF818000u, 0x3F801000u, 0x3F803000u, 0x3F802000u,
                                    0x3F800FFFu, 0x33000000u, 0x33C00000u, 0x38000000u,
                                    0x387FE000u, 0x477FF000u, 0x477FEFFFu, 0xC0490FDBu};
    float scale[STOKER__PATTERN], bias[STOKER__PATTERN];
    for (int i = 0; i < STOKER__PATTERN; i++) {
        scale[i] = 0.0f;
        memcpy(&bias[i], &bits[i % 16], 4);
    }
    uint8_t src[100];
    fill(src, sizeof src);
    for (int32_t d = STOKER_DTYPE_FLOAT16; d <= STOKER_DTYPE_BFLOAT16; d++) {
        uint16_t want[100], got[100];
        stoker__simd_scalar.convert(src, 100, d, scale, bias, want);
        k->convert(src, 100, d, scale, bias, got);
        expect_same((const uint8_t *)want, (const uint8_t *)got, sizeof want, "rounding", k->name,
                    (int32_t)d);
    }
    /* known answers of the reference: bfloat16 ties go to even, float16 too */
    T_EQ_INT(stoker__f32_to_bf16(bias[0]), 0x3F80); /* 1.0 + half an ulp: tie, to even */
    T_EQ_INT(stoker__f32_to_bf16(bias[1]), 0x3F82); /* odd + tie: up */
    T_EQ_INT(stoker__f32_to_bf16(bias[2]), 0x3F80);
    T_EQ_INT(stoker__f32_to_bf16(bias[3]), 0x3F81);
    T_EQ_INT(stoker__f32_to_f16(bias[5]), 0x3C00);  /* 1 + 2^-11: tie, to even */
    T_EQ_INT(stoker__f32_to_f16(bias[6]), 0x3C02);  /* 1 + 3 * 2^-11: tie, up to even */
    T_EQ_INT(stoker__f32_to_f16(bias[9]), 0x0000);  /* 2^-25, half the least subnormal: 0 */
    T_EQ_INT(stoker__f32_to_f16(bias[10]), 0x0002); /* 1.5 * 2^-24: tie, to even */
    T_EQ_INT(stoker__f32_to_f16(bias[11]), 0x0200); /* 2^-15, subnormal */
    T_EQ_INT(stoker__f32_to_f16(bias[13]), 0x7C00); /* 65520: overflow to infinity */
    T_EQ_INT(stoker__f32_to_f16(bias[14]), 0x7BFF); /* just below: 65504 */
}

/* The whole pipeline from an RGB image: every dtype and layout, every transform, with both
 * resamplers; outputs 64-byte aligned (so rows of 32 float16 values and more take streaming
 * stores) when `aligned`, else at an odd address. */
static void check_pipeline(const stoker__simd_ops *k, int32_t w, int32_t h, int32_t size,
                           int aligned)
{
    uint8_t *img = malloc((size_t)w * h * 3 + 1);
    fill(img, (size_t)w * h * 3 + 1);
    stoker__xform_scratch *s1, *s2;
    T_OK(stoker__xform_scratch_create(&s1));
    T_OK(stoker__xform_scratch_create(&s2));
    static const int32_t dtypes[] = {STOKER_DTYPE_UINT8, STOKER_DTYPE_FLOAT16,
                                     STOKER_DTYPE_BFLOAT16, STOKER_DTYPE_FLOAT32};
    for (int t = STOKER_TRANSFORM_TRAIN; t <= STOKER_TRANSFORM_RESIZE; t++)
        for (int d = 0; d < 4; d++)
            for (int l = STOKER_LAYOUT_NCHW; l <= STOKER_LAYOUT_NHWC; l++) {
                stoker__xform_params a = {.transform = t,
                                          .size = size,
                                          .dtype = dtypes[d],
                                          .layout = l,
                                          .resampler = (t + d + l) % 2 ? STOKER_RESAMPLER_PILLOW
                                                                       : STOKER_RESAMPLER_FAST,
                                          .mean = {0.485f, 0.456f, 0.406f},
                                          .std = {0.229f, 0.224f, 0.225f}};
                stoker__xform_params b = a;
                stoker__err err;
                T_OK(stoker__xform_params_prepare(&a, STOKER_SIMD_SCALAR, &err));
                T_OK(stoker__xform_params_prepare(&b, k->level, &err));
                const size_t bytes = stoker__xform_sample_bytes(&a);
                uint8_t *want = malloc(bytes), *got = aligned_alloc(64, (bytes + 64) / 64 * 64);
                uint8_t *out = got + (aligned ? 0 : 1);
                for (int64_t id = 0; id < 3; id++) {
                    T_OK(stoker__xform_rgb(s1, &a, 7, 1, id, img + 1, w, h, (size_t)w * 3, want,
                                           &err));
                    T_OK(stoker__xform_rgb(s2, &b, 7, 1, id, img + 1, w, h, (size_t)w * 3, out,
                                           &err));
                    expect_same(want, out, bytes, "pipeline", k->name, size);
                }
                free(want), free(got);
            }
    stoker__xform_scratch_destroy(s1);
    stoker__xform_scratch_destroy(s2);
    free(img);
}

/* The scalar float16 rounding against the F16C instruction, on every float class. */
__attribute__((target("f16c"))) static uint16_t hw_f16(float f)
{
    return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}

static void check_f16_rounding(void)
{
    for (int i = 0; i < 2000000; i++) {
        uint32_t x = (uint32_t)t_rand(&rng);
        if (i % 2) /* concentrate on the float16 range, subnormals included */
            x = (x & 0x807FFFFFu) | ((uint32_t)(96 + (x >> 23) % 48) << 23);
        float f;
        memcpy(&f, &x, 4);
        if (isnan(f))
            continue;
        const uint16_t want = hw_f16(f), got = stoker__f32_to_f16(f);
        if (want != got)
            T_FAIL("f16 of %a (0x%08x): F16C 0x%04x, scalar 0x%04x", (double)f, x, want, got);
        if (!isinf(f) && (want & 0x7C00u) != 0x7C00u && stoker__f16_to_f32(got) != 0.0f) {
            const float back = stoker__f16_to_f32(got);
            T_ASSERT(fabsf(back - f) <= fabsf(f) * (1.0f / 1024.0f) + 1e-7f);
        }
    }
}

int main(void)
{
    const stoker__simd_ops *variants[3] = {NULL, NULL, NULL};
    stoker__err err;
    int n = 0;
    for (int32_t level = STOKER_SIMD_SCALAR; level <= STOKER_SIMD_AVX512; level++) {
        const stoker__simd_ops *k;
        const int rc = stoker__simd_ops_get(level, &k, &err);
        if (rc == STOKER_E_UNSUPPORTED) {
            printf("skip %s: %s\n", stoker_simd_name(level), err.msg);
            continue;
        }
        T_OK(rc);
        T_EQ_INT(k->level, level);
        variants[n++] = k;
    }
    const stoker__simd_ops *best;
    T_OK(stoker__simd_ops_get(STOKER_SIMD_AUTO, &best, &err));
    T_EQ_INT(best->level, stoker__simd_best());
    T_EQ_RC(stoker__simd_ops_get(7, &best, &err), STOKER_E_INVALID);
    if (stoker__simd_best() >= STOKER_SIMD_AVX2)
        check_f16_rounding();
    for (int v = 0; v < n; v++) {
        const stoker__simd_ops *k = variants[v];
        for (int i = 0; i < NSIZES; i++) {
            const int32_t s = SIZES[i];
            for (int j = 0; j < NSIZES; j += 3) {
                check_hpass(k, s, SIZES[j], j & 1, 0);
                check_hpass(k, SIZES[j] * 5 + 1, s, (j >> 1) & 1, 0);
                check_hpass(k, s + s / 2, s, j & 1, 1); /* two-tap bilinear */
            }
            for (int j = 0; j < NSIZES; j += 4) {
                check_hpass_fast(k, s, SIZES[j], j & 1, 0);
                check_hpass_fast(k, SIZES[j] * 5 + 1, s, (j >> 1) & 1, 0);
                check_hpass_fast(k, s + s / 2, s, j & 1, 1);
            }
            for (int32_t taps = 1; taps <= 9; taps += 2) {
                check_vpass(k, (size_t)s, taps);
                check_vpass(k, (size_t)s * 4, taps);
                check_vpass_fast(k, (size_t)s, (taps + 1) / 2);
                check_vpass_fast(k, (size_t)s * 4, taps);
            }
            check_unpack(k, (size_t)s);
            for (int32_t d = STOKER_DTYPE_FLOAT16; d <= STOKER_DTYPE_FLOAT32; d++) {
                check_convert(k, (size_t)s, d);
                check_convert(k, (size_t)s * 3, d);
                check_emit(k, (size_t)s, d);
            }
        }
        check_rounding(k);
        check_pipeline(k, 97, 61, 33, 0);
        check_pipeline(k, 300, 451, 67, 1);
        check_pipeline(k, 40, 30, 224, 0);
        check_pipeline(k, 600, 350, 64, 1);
        printf("%s: equal to scalar\n", k->name);
    }
    return 0;
}
