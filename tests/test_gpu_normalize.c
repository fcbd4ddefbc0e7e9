/* SPDX-License-Identifier: Apache-2.0 */
/* GPU normalisation (STOKER_OPT_GPU_NORMALIZE): raw uint8 [H, W, 3] records cross PCIe as
 * uint8 and a kernel writes (v/255 - mean)/std as float32 / float16 / bfloat16, NCHW or
 * NHWC. Every value is compared with the CPU formula (float32 v * scale + bias, as the
 * CPU pipeline computes it): float32 within 1e-6, float16 within 1 ulp, bfloat16 within
 * 1 ulp. Without a usable GPU: asking for it fails at create, and the test exits 77. */
#include "jpegutil.h"
#include "test_loader_util.h"

#include <math.h>

#if defined(__has_include)
#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
#define HAVE_CUDA_RUNTIME 1
#endif
#endif

#define NREC 300
#define H 24
#define W 40
#define BATCH 32

static const double MEAN[3] = {0.485, 0.456, 0.406}, STD[3] = {0.229, 0.224, 0.225};

static stoker_config *norm_cfg(int64_t device, int64_t dtype, int64_t layout)
{
    stoker_config *cfg = tl_cfg(BATCH, 2);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DEVICE, device));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_GPU_NORMALIZE, 1));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DTYPE, dtype));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_LAYOUT, layout));
    return cfg;
}

static float half_to_float(uint16_t h)
{
    const int e = (h >> 10) & 31, m = h & 1023;
    const float s = (h & 0x8000) ? -1.0f : 1.0f;
    if (e == 0)
        return s * ldexpf((float)m, -24);
    if (e == 31)
        return s * INFINITY;
    return s * ldexpf((float)(m | 1024), e - 25);
}

static float bf16_to_float(uint16_t b)
{
    const uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* One unit in the last place of `dtype` at the magnitude of x. */
static double ulp(int64_t dtype, double x)
{
    const int bits = dtype == STOKER_DTYPE_FLOAT16 ? 10 : 7;
    int e = 0;
    frexp(fabs(x) > 6.2e-5 ? x : 6.2e-5, &e);
    return ldexp(1.0, e - 1 - bits);
}

#ifdef HAVE_CUDA_RUNTIME

static void check_one(int64_t dtype, int64_t layout, const char *path)
{
    stoker_config *cfg = norm_cfg(1, dtype, layout);
    stoker_loader *l = tl_open(path, cfg);
    float scale[3], bias[3];
    for (int c = 0; c < 3; c++) {
        scale[c] = (float)(1.0 / (255.0 * STD[c]));
        bias[c] = (float)(-MEAN[c] / STD[c]);
    }
    const size_t esize = dtype == STOKER_DTYPE_FLOAT32 ? 4 : 2;
    double worst = 0;
    stoker_batch *b = NULL;
    int rc;
    while ((rc = stoker_loader_next(l, &b)) == 0) {
        stoker_batch_view v;
        v.struct_size = sizeof v;
        T_OK(stoker_batch_get_view(b, &v));
        T_EQ_INT(v.device, 0);
        T_EQ_INT(v.dtype, dtype);
        T_EQ_INT(stoker_batch_dtype(b), dtype);
        T_EQ_INT(v.ndim, 4);
        const int64_t want[4] = {v.count, layout == STOKER_LAYOUT_NHWC ? H : 3,
                                 layout == STOKER_LAYOUT_NHWC ? W : H,
                                 layout == STOKER_LAYOUT_NHWC ? 3 : W};
        for (int i = 0; i < 4; i++)
            T_EQ_INT(v.shape[i], want[i]);
        T_EQ_INT(v.nbytes, (uint64_t)v.count * H * W * 3 * esize);
        uint8_t *host = malloc(v.nbytes);
        T_OK(stoker_batch_wait_stream(b, NULL));
        T_ASSERT(cudaMemcpy(host, v.data, v.nbytes, cudaMemcpyDeviceToHost) == cudaSuccess);
        for (int64_t j = 0; j < v.count; j++)
            for (uint64_t y = 0; y < H; y++)
                for (uint64_t x = 0; x < W; x++)
                    for (int c = 0; c < 3; c++) {
                        const uint64_t k = (y * W + x) * 3 + (uint64_t)c;
                        const float ref = fmaf((float)tl_byte(v.ids[j], k), scale[c], bias[c]);
                        const uint64_t at = layout == STOKER_LAYOUT_NHWC
                                                ? (uint64_t)j * H * W * 3 + k
                                                : (((uint64_t)j * 3 + (uint64_t)c) * H + y) * W + x;
                        float got;
                        uint16_t u;
                        double tol;
                        if (esize == 4) {
                            memcpy(&got, host + at * 4, 4);
                            tol = 1e-6 * (1 + fabs(ref));
                        } else {
                            memcpy(&u, host + at * 2, 2);
                            got =
                                dtype == STOKER_DTYPE_FLOAT16 ? half_to_float(u) : bf16_to_float(u);
                            tol = ulp(dtype, ref);
                        }
                        const double err = fabs((double)got - (double)ref);
                        if (err > tol)
                            T_FAIL("%s %s: record %" PRId64 " (y %" PRIu64 ", x %" PRIu64
                                   ", c %d): %.8g, want %.8g",
                                   stoker_dtype_name((int32_t)dtype),
                                   layout == STOKER_LAYOUT_NHWC ? "NHWC" : "NCHW", v.ids[j], y, x,
                                   c, got, ref);
                        if (err / tol > worst)
                            worst = err / tol;
                    }
        free(host);
        T_OK(stoker_batch_release(b));
    }
    T_EQ_RC(rc, STOKER_END);
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
    printf("gpu normalise %s %s ok (worst error %.2f of the tolerance)\n",
           stoker_dtype_name((int32_t)dtype), layout == STOKER_LAYOUT_NHWC ? "NHWC" : "NCHW",
           worst);
}

/* JPEG records of several kinds and sizes, for the image pipeline. */
static void make_jpegs(const char *path)
{
    static const t_jpeg_kind kinds[] = {{"420", 3, 2, 2, 0, 0, 0},
                                        {"gray", 1, 1, 1, 0, 0, 0},
                                        {"prog", 3, 2, 2, 1, 0, 0},
                                        {"cmyk", 4, 1, 1, 0, 0, 1}};
    const t_jpeg_set spec = {kinds, 4, {50, 13, 7}, {40, 10, 7}, 3, 0};
    t_write_jpeg_set(path, 70, &spec);
}

static float value_at(const uint8_t *p, int64_t dtype, uint64_t i)
{
    if (dtype == STOKER_DTYPE_FLOAT32) {
        float f;
        memcpy(&f, p + i * 4, 4);
        return f;
    }
    uint16_t u;
    memcpy(&u, p + i * 2, 2);
    return dtype == STOKER_DTYPE_FLOAT16 ? half_to_float(u) : bf16_to_float(u);
}

/* The JPEG pipeline with GPU normalisation: the workers stop at uint8 HWC and the device
 * batch holds what the CPU pipeline alone delivers (same crops and flips: same seed),
 * within 1 ulp of the output type, in the requested dtype and layout. */
static void check_jpeg(const char *path, int64_t dtype, int64_t layout)
{
    const int64_t size = 40;
    stoker_config *cfg[2];
    stoker_loader *l[2];
    for (int g = 0; g < 2; g++) {
        cfg[g] = tl_cfg(16, 3);
        T_OK(stoker_config_set_int(cfg[g], STOKER_OPT_SIZE, size));
        T_OK(stoker_config_set_int(cfg[g], STOKER_OPT_DTYPE, dtype));
        T_OK(stoker_config_set_int(cfg[g], STOKER_OPT_LAYOUT, layout));
        T_OK(stoker_config_set_int(cfg[g], STOKER_OPT_DEVICE, g ? 1 : -1));
        T_OK(stoker_config_set_int(cfg[g], STOKER_OPT_GPU_NORMALIZE, g));
        /* the normalisation is compared bit for bit: both decode on the CPU */
        T_OK(stoker_config_set_int(cfg[g], STOKER_OPT_DECODER, STOKER_DECODER_CPU));
        l[g] = tl_open(path, cfg[g]);
    }
    const uint64_t per = (uint64_t)(size * size * 3);
    int64_t records = 0;
    for (;;) {
        stoker_batch *b[2];
        const int rc = stoker_loader_next(l[0], &b[0]);
        T_EQ_RC(stoker_loader_next(l[1], &b[1]), rc);
        if (rc == STOKER_END)
            break;
        T_OK(rc);
        stoker_batch_view v[2];
        for (int g = 0; g < 2; g++) {
            v[g].struct_size = sizeof v[g];
            T_OK(stoker_batch_get_view(b[g], &v[g]));
        }
        T_EQ_INT(v[1].device, 0);
        T_EQ_INT(v[1].dtype, dtype);
        T_EQ_INT(v[1].nbytes, v[0].nbytes);
        T_EQ_INT(v[1].count, v[0].count);
        for (int i = 0; i < 4; i++)
            T_EQ_INT(v[1].shape[i], v[0].shape[i]);
        uint8_t *dev = malloc(v[1].nbytes);
        T_OK(stoker_batch_wait_stream(b[1], NULL));
        T_ASSERT(cudaMemcpy(dev, v[1].data, v[1].nbytes, cudaMemcpyDeviceToHost) == cudaSuccess);
        for (uint64_t i = 0; i < (uint64_t)v[0].count * per; i++) {
            const float want = value_at(v[0].data, dtype, i), got = value_at(dev, dtype, i);
            const double tol =
                dtype == STOKER_DTYPE_FLOAT32 ? 1e-6 * (1 + fabs(want)) : ulp(dtype, want);
            if (fabs((double)got - (double)want) > tol)
                T_FAIL("JPEG %s %s: record %" PRId64 " element %" PRIu64 ": GPU %.8g, CPU %.8g",
                       stoker_dtype_name((int32_t)dtype),
                       layout == STOKER_LAYOUT_NHWC ? "NHWC" : "NCHW", v[0].ids[i / per], i % per,
                       (double)got, (double)want);
        }
        for (int64_t j = 0; j < v[0].count; j++)
            T_EQ_INT(v[1].ids[j], v[0].ids[j]);
        records += v[0].count;
        free(dev);
        T_OK(stoker_batch_release(b[0]));
        T_OK(stoker_batch_release(b[1]));
    }
    T_EQ_INT(records, 70);
    for (int g = 0; g < 2; g++) {
        stoker_loader_destroy(l[g]);
        stoker_config_destroy(cfg[g]);
    }
    printf("gpu normalise of the JPEG pipeline %s %s ok\n", stoker_dtype_name((int32_t)dtype),
           layout == STOKER_LAYOUT_NHWC ? "NHWC" : "NCHW");
}

static int run_gpu(const char *path)
{
    if (stoker_capability_get(STOKER_CAP_CUDA_DEVICES) <= 0)
        return T_SKIP;
    char jpath[4300];
    snprintf(jpath, sizeof jpath, "%s-jpeg", path);
    make_jpegs(jpath);
    check_jpeg(jpath, STOKER_DTYPE_FLOAT16, STOKER_LAYOUT_NCHW);
    check_jpeg(jpath, STOKER_DTYPE_BFLOAT16, STOKER_LAYOUT_NHWC);
    check_jpeg(jpath, STOKER_DTYPE_FLOAT32, STOKER_LAYOUT_NCHW);
    const int64_t dtypes[3] = {STOKER_DTYPE_FLOAT16, STOKER_DTYPE_FLOAT32, STOKER_DTYPE_BFLOAT16};
    for (int d = 0; d < 3; d++) {
        check_one(dtypes[d], STOKER_LAYOUT_NCHW, path);
        check_one(dtypes[d], STOKER_LAYOUT_NHWC, path);
    }
    /* uint8 out is not a normalisation */
    stoker_config *cfg = norm_cfg(1, STOKER_DTYPE_UINT8, STOKER_LAYOUT_NCHW);
    stoker_loader *l = NULL;
    T_EQ_RC(stoker_loader_create(&l, path, cfg), STOKER_E_UNSUPPORTED);
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
    return 0;
}

#else

static int run_gpu(const char *path)
{
    (void)path;
    return T_SKIP;
}

#endif

int main(void)
{
    char *tmp = t_mkdtemp("gpu_norm");
    char path[4200];
    snprintf(path, sizeof path, "%s/img", tmp);
    tl_make_images(path, NREC, H, W);
    (void)ulp;
    (void)MEAN;
    (void)STD;
    (void)half_to_float;
    (void)bf16_to_float;
    if (stoker_capability_get(STOKER_CAP_CUDA_DEVICES) <= 0) {
        /* Host batches cannot be normalised on a GPU: create says so. */
        stoker_config *cfg = norm_cfg(0, STOKER_DTYPE_FLOAT16, STOKER_LAYOUT_NCHW);
        stoker_loader *l = NULL;
        T_EQ_RC(stoker_loader_create(&l, path, cfg), STOKER_E_UNSUPPORTED);
        printf("without a GPU: %s\n", stoker_loader_errmsg(l));
        stoker_loader_destroy(l);
        stoker_config_destroy(cfg);
    }
    const int rc = run_gpu(path);
    t_rmrf(tmp);
    free(tmp);
    if (rc == T_SKIP) {
        printf("gpu normalise: no usable GPU, skipped\n");
        return T_SKIP;
    }
    printf("gpu normalise ok\n");
    return 0;
}
