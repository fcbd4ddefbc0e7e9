/* SPDX-License-Identifier: Apache-2.0 */
/* Single-thread speed of the per-sample pipeline: a benchmark, not a test (it prints
 * figures and cannot fail, so ctest does not run it). Built with the tests, whose helpers
 * it shares (tests/testutil.h, tests/jpegutil.h):
 *
 *   cmake --build BUILD --target bench_transform_speed
 *   BUILD/bench_transform_speed [JPEG...]
 *
 * Compares, on the same files: a full decode with plain libjpeg (accurate IDCT, the
 * ceiling of a full-decode pipeline), the region decode alone (RandomResizedCrop's box,
 * nothing else), and the whole train pipeline (decode + resize + normalise to float16
 * NCHW at 224, the default options) per SIMD level, with its stage breakdown, and the best
 * level again antialiasing every shrink (STOKER_ANTIALIAS_ALWAYS), and with that and
 * Pillow's exact weights (STOKER_RESAMPLER_PILLOW). Then the best level's train and eval
 * pipelines as a record of an unchecked data set takes them on its first use, decoded to
 * the end of the data past the crop (stoker__xform_jpeg_whole), beside the same pipelines
 * as every later use (and every record of a checked data set) takes them. Without
 * arguments it makes a few JPEGs of its own and runs briefly. */
#include "testutil.h"

#include "jpegutil.h"

#include "decode/jpeg.h"
#include "transform/transform.h"

#include <time.h>

typedef struct blob {
    uint8_t *data;
    size_t size;
} blob;

/* CPU time of this thread: the machines these run on are shared, and wall time would count
 * other processes' turns. */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The contenders, each timed on the same image back to back, so that a shared machine's
 * slow moments hit them all alike. */
/* scalar, AVX2, AVX-512 (the defaults), then the best with ALWAYS and the best with
 * ALWAYS and Pillow's resampler */
#define NPIPE 5
#define ALWAYS (NPIPE - 2)
#define PILLOW (NPIPE - 1)

typedef struct bench {
    struct jpeg_decompress_struct full;
    t_jerr je;
    uint8_t *row;
    stoker__jpeg_dec *crop;
    stoker__xform_params p[NPIPE];
    stoker__xform_scratch *s[NPIPE];
    uint8_t *out;
    int have[NPIPE];
    double t_full, t_crop, t_pipe[NPIPE];
    /* the best level's train and eval, each as is and decoded to the end (whole) */
    stoker__xform_params pw[2];
    stoker__xform_scratch *sw[2][2];
    double t_w[2][2];
} bench;

static void full_decode(bench *b, const blob *img)
{
    j_decompress_ptr c = &b->full;
    jpeg_mem_src(c, img->data, (unsigned long)img->size);
    jpeg_read_header(c, TRUE);
    c->out_color_space = c->num_components == 4 ? JCS_CMYK : JCS_EXT_RGBX;
    c->dct_method = JDCT_ISLOW;
    jpeg_start_decompress(c);
    while (c->output_scanline < c->output_height)
        jpeg_read_scanlines(c, &b->row, 1);
    jpeg_finish_decompress(c);
}

/* Region decode of each record's RandomResizedCrop box, rows dropped. */
typedef struct crop_ctx {
    int64_t id;
} crop_ctx;

static int crop_region(void *ctx, int32_t w, int32_t h, stoker__jpeg_region *r)
{
    static const double scale[2] = {0.08, 1.0}, ratio[2] = {3.0 / 4.0, 4.0 / 3.0}; /* defaults */
    const crop_ctx *c = ctx;
    stoker__box b;
    stoker__rrc_box(w, h, scale, ratio, 1, 0, c->id, &b);
    *r = (stoker__jpeg_region){b.x, b.y, b.x + b.w, b.y + b.h, 0, 1};
    return 0;
}

static int crop_row(void *ctx, int32_t y, const uint8_t *rgbx, int32_t x, int32_t n)
{
    (void)ctx, (void)y, (void)rgbx, (void)x, (void)n;
    return 0;
}

static void bench_init(bench *b)
{
    memset(b, 0, sizeof *b);
    b->full.err = jpeg_std_error(&b->je.pub);
    b->je.pub.error_exit = t_jerr_exit;
    jpeg_create_decompress(&b->full);
    b->row = malloc(65536 * 4);
    T_OK(stoker__jpeg_dec_create(&b->crop));
    for (int l = 0; l < NPIPE; l++) {
        const int best = l >= ALWAYS;
        b->p[l] = (stoker__xform_params){
            .transform = STOKER_TRANSFORM_TRAIN,
            .size = 224,
            .dtype = STOKER_DTYPE_FLOAT16,
            .layout = STOKER_LAYOUT_NCHW,
            .antialias = best ? STOKER_ANTIALIAS_ALWAYS : STOKER_ANTIALIAS_OVER_2X,
            .resampler = l == PILLOW ? STOKER_RESAMPLER_PILLOW : STOKER_RESAMPLER_FAST,
            .mean = {0.485f, 0.456f, 0.406f},
            .std = {0.229f, 0.224f, 0.225f}};
        stoker__err err;
        const int32_t level = best ? STOKER_SIMD_AUTO : STOKER_SIMD_SCALAR + l;
        b->have[l] = stoker__xform_params_prepare(&b->p[l], level, &err) == 0;
        T_OK(stoker__xform_scratch_create(&b->s[l]));
    }
    b->out = malloc(224 * 224 * 3 * 2);
    for (int t = 0; t < 2; t++) {
        b->pw[t] = b->p[STOKER_SIMD_AVX512 - STOKER_SIMD_SCALAR];
        b->pw[t].transform = t ? STOKER_TRANSFORM_EVAL : STOKER_TRANSFORM_TRAIN;
        stoker__err err;
        T_OK(stoker__xform_params_prepare(&b->pw[t], STOKER_SIMD_AUTO, &err));
        for (int w = 0; w < 2; w++)
            T_OK(stoker__xform_scratch_create(&b->sw[t][w]));
    }
}

static void bench_free(bench *b)
{
    jpeg_destroy_decompress(&b->full);
    free(b->row);
    stoker__jpeg_dec_destroy(b->crop);
    for (int l = 0; l < NPIPE; l++)
        stoker__xform_scratch_destroy(b->s[l]);
    for (int t = 0; t < 2; t++)
        for (int w = 0; w < 2; w++)
            stoker__xform_scratch_destroy(b->sw[t][w]);
    free(b->out);
}

static void bench_one(bench *b, const blob *img, int64_t id)
{
    stoker__err err;
    double t0 = now();
    full_decode(b, img);
    double t1 = now();
    b->t_full += t1 - t0;
    crop_ctx ctx = {id};
    const stoker__jpeg_sink sink = {crop_region, crop_row, &ctx, NULL, 0};
    T_OK(stoker__jpeg_decode(b->crop, img->data, img->size, STOKER_DCT_ISLOW, UINT64_C(1) << 28,
                             &sink, &err));
    t0 = now();
    b->t_crop += t0 - t1;
    for (int l = 0; l < NPIPE; l++) {
        if (!b->have[l])
            continue;
        t1 = now();
        T_OK(stoker__xform_jpeg(b->s[l], &b->p[l], 1, 0, id, img->data, img->size, b->out, &err));
        b->t_pipe[l] += now() - t1;
    }
    for (int t = 0; t < 2; t++) {
        t1 = now();
        T_OK(stoker__xform_jpeg(b->sw[t][0], &b->pw[t], 1, 0, id, img->data, img->size, b->out,
                                &err));
        t0 = now();
        T_OK(stoker__xform_jpeg_whole(b->sw[t][1], &b->pw[t], 1, 0, id, img->data, img->size,
                                      b->out, &err));
        b->t_w[t][0] += t0 - t1;
        b->t_w[t][1] += now() - t0;
    }
}

static void report(const bench *b, int count)
{
    const double full = count / b->t_full, crop = count / b->t_crop;
    printf("%d samples, one thread, train 224 float16 NCHW, each contender on the same image in "
           "turn:\n",
           count);
    printf("  full decode only  %7.1f img/s\n  crop decode only  %7.1f img/s (%.2fx full)\n", full,
           crop, crop / full);
    for (int l = 0; l < NPIPE; l++) {
        if (!b->have[l]) {
            printf("  %-14s skipped: not supported here\n",
                   stoker_simd_name(STOKER_SIMD_SCALAR + l));
            continue;
        }
        const double ips = count / b->t_pipe[l];
        const stoker__xform_stats *st = stoker__xform_scratch_stats(b->s[l]);
        const double tot = (double)(st->decode_ns + st->resize_ns + st->normalize_ns);
        char name[32];
        snprintf(name, sizeof name, "%s%s", b->p[l].simd->name,
                 l == ALWAYS   ? " always"
                 : l == PILLOW ? " pillow"
                               : "");
        printf("  %-14s %7.1f img/s (%.2fx crop-decode-only): decode %.1f%%, resize %.1f%%, "
               "normalise %.1f%%\n",
               name, ips, ips / crop, 100.0 * st->decode_ns / tot, 100.0 * st->resize_ns / tot,
               100.0 * st->normalize_ns / tot);
    }
    printf("best level, as a checked record (crop only) and as an unchecked record's first use "
           "(decoded to the end):\n");
    for (int t = 0; t < 2; t++) {
        const double a = b->t_w[t][0] / count * 1e3, w = b->t_w[t][1] / count * 1e3;
        printf("  %-5s %.3f ms/img, to the end %.3f ms/img (+%.3f ms, +%.0f%%)\n",
               t ? "eval" : "train", a, w, w - a, 100.0 * (w - a) / a);
    }
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? argc - 1 : 8;
    blob *b = calloc((size_t)n, sizeof *b);
    static const t_jpeg_kind k = {"4:2:0", 3, 2, 2, 0, 0, 0};
    for (int i = 0; i < n; i++) {
        if (argc > 1) {
            b[i].data = t_read_file(argv[i + 1], &b[i].size);
            if (!b[i].data)
                T_FAIL("cannot read %s", argv[i + 1]);
        } else {
            b[i].data = t_make_jpeg(&k, 500, 375, 90, (uint64_t)i, &b[i].size);
        }
    }
    const int reps = argc > 1 ? 3 : 1;
    bench *bb = malloc(sizeof *bb);
    bench_init(bb);
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < n; i++)
            bench_one(bb, &b[i], i);
    report(bb, n * reps);
    bench_free(bb);
    free(bb);
    for (int i = 0; i < n; i++)
        free(b[i].data);
    free(b);
    return 0;
}
