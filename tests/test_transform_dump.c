/* SPDX-License-Identifier: Apache-2.0 */
/* Runs the per-sample pipeline on one JPEG file and writes the sample, for the Python
 * reference tests (tests/python/test_transform_reference.py):
 *
 *   test_transform_dump JPEG MODE SIZE RESIZE DTYPE LAYOUT OUT [SEED EPOCH ID [ANTIALIAS
 *                       [RESAMPLER [DCT_SCALE]]]]
 *     MODE train|eval|resize|letterbox, DTYPE uint8|float16|bfloat16|float32, LAYOUT nchw|nhwc,
 *     ANTIALIAS always|over2x, RESAMPLER fast|pillow, DCT_SCALE never|train|always (the
 *     library's default when left out)
 *
 * It prints the geometry as "geometry W H X0 W0 Y0 H0 FLIP SCALE" (for train: the crop box,
 * in full-size pixels; SCALE: the DCT reduction the decoder applied, 1 for none).
 * Without arguments (as ctest runs it) it checks itself on a JPEG it makes. */
#include "testutil.h"

#include "jpegutil.h"

#include "transform/transform.h"

static int32_t parse_mode(const char *s)
{
    return !strcmp(s, "train")       ? STOKER_TRANSFORM_TRAIN
           : !strcmp(s, "eval")      ? STOKER_TRANSFORM_EVAL
           : !strcmp(s, "resize")    ? STOKER_TRANSFORM_RESIZE
           : !strcmp(s, "letterbox") ? STOKER_TRANSFORM_LETTERBOX
                                     : -1;
}

static int32_t parse_dtype(const char *s)
{
    return !strcmp(s, "uint8")      ? STOKER_DTYPE_UINT8
           : !strcmp(s, "float16")  ? STOKER_DTYPE_FLOAT16
           : !strcmp(s, "bfloat16") ? STOKER_DTYPE_BFLOAT16
           : !strcmp(s, "float32")  ? STOKER_DTYPE_FLOAT32
                                    : -1;
}

/* Reads the JPEG's size from its header through the pipeline's own geometry. */
static void header_size(const uint8_t *jpg, size_t size, int32_t *w, int32_t *h)
{
    struct jpeg_decompress_struct c;
    t_jerr je;
    t_jpeg_read_header(&c, &je, jpg, size);
    *w = (int32_t)c.image_width;
    *h = (int32_t)c.image_height;
    jpeg_destroy_decompress(&c);
}

static int run(const uint8_t *jpg, size_t size, stoker__xform_params *p, uint64_t seed,
               int64_t epoch, int64_t id, const char *out_path)
{
    stoker__err err;
    if (stoker__xform_params_prepare(p, STOKER_SIMD_AUTO, &err) < 0)
        T_FAIL("params: %s", err.msg);
    int32_t w, h;
    header_size(jpg, size, &w, &h);
    stoker__geom g;
    stoker__xform_geometry(p, w, h, seed, epoch, id, &g);
    stoker__geom reduced = g;
    stoker__geom_reduce(&reduced, stoker__xform_max_scale(p));
    printf("geometry %d %d %d %d %d %d %d %d\n", (int)w, (int)h, (int)g.x.offset, (int)g.x.in_size,
           (int)g.y.offset, (int)g.y.in_size, g.flip, (int)reduced.scale);
    stoker__xform_scratch *s;
    T_OK(stoker__xform_scratch_create(&s));
    const size_t bytes = stoker__xform_sample_bytes(p);
    uint8_t *out = malloc(bytes);
    const int rc = stoker__xform_jpeg(s, p, seed, epoch, id, jpg, size, out, &err);
    if (rc < 0)
        T_FAIL("xform: %s", err.msg);
    t_write_file(out_path, out, bytes);
    free(out);
    stoker__xform_scratch_destroy(s);
    return 0;
}

static int self_test(void)
{
    static const t_jpeg_kind k = {"4:2:0", 3, 2, 2, 0, 0, 0};
    size_t size;
    uint8_t *jpg = t_make_jpeg(&k, 120, 90, 90, 1, &size);
    char *dir = t_mkdtemp("xform-dump");
    char path[4200];
    snprintf(path, sizeof path, "%s/out.bin", dir);
    stoker__xform_params p = {.transform = STOKER_TRANSFORM_EVAL,
                              .size = 32,
                              .resize = 40,
                              .dtype = STOKER_DTYPE_FLOAT32,
                              .mean = {0.5f, 0.5f, 0.5f},
                              .std = {0.5f, 0.5f, 0.5f}};
    run(jpg, size, &p, 0, 0, 0, path);
    size_t got;
    float *v = t_read_file(path, &got);
    T_ASSERT(v != NULL);
    T_EQ_INT(got, 32 * 32 * 3 * 4);
    for (size_t i = 0; i < got / 4; i++) /* (x/255 - 0.5)/0.5 lies in [-1, 1] */
        T_ASSERT(v[i] >= -1.0f && v[i] <= 1.0f);
    free(v);
    t_rmrf(dir);
    free(dir);
    free(jpg);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 1)
        return self_test();
    if (argc != 8 && (argc < 11 || argc > 14)) {
        fprintf(stderr,
                "usage: %s JPEG MODE SIZE RESIZE DTYPE LAYOUT OUT [SEED EPOCH ID [ANTIALIAS "
                "[RESAMPLER [DCT_SCALE]]]]\n",
                argv[0]);
        return 2;
    }
    size_t size;
    uint8_t *jpg = t_read_file(argv[1], &size);
    if (!jpg)
        T_FAIL("cannot read %s", argv[1]);
    stoker__xform_params p = {
        .transform = parse_mode(argv[2]),
        .size = atoi(argv[3]),
        .resize = atoi(argv[4]),
        .dtype = parse_dtype(argv[5]),
        .layout = !strcmp(argv[6], "nhwc") ? STOKER_LAYOUT_NHWC : STOKER_LAYOUT_NCHW,
        .antialias = argc >= 12 && !strcmp(argv[11], "over2x") ? STOKER_ANTIALIAS_OVER_2X
                                                               : STOKER_ANTIALIAS_ALWAYS,
        .resampler = argc >= 13 && !strcmp(argv[12], "pillow") ? STOKER_RESAMPLER_PILLOW
                                                               : STOKER_RESAMPLER_FAST,
        .dct_scale = argc < 14                    ? STOKER_DCT_SCALE_DEFAULT
                     : !strcmp(argv[13], "never") ? STOKER_DCT_SCALE_NEVER
                     : !strcmp(argv[13], "train") ? STOKER_DCT_SCALE_TRAIN
                                                  : STOKER_DCT_SCALE_ALWAYS,
        .mean = {0.485f, 0.456f, 0.406f},
        .std = {0.229f, 0.224f, 0.225f}};
    const uint64_t seed = argc >= 11 ? strtoull(argv[8], NULL, 0) : 0;
    const int64_t epoch = argc >= 11 ? strtoll(argv[9], NULL, 0) : 0;
    const int64_t id = argc >= 11 ? strtoll(argv[10], NULL, 0) : 0;
    const int rc = run(jpg, size, &p, seed, epoch, id, argv[7]);
    free(jpg);
    return rc;
}
