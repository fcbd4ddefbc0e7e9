/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU share's image transform (src/cuda/image_kernels.cu) against the CPU pipeline
 * (stoker__xform_rgb) on the same decoded pixels: JPEGs of several kinds and sizes decoded
 * by libjpeg on the CPU, uploaded whole or as the region the sample reads (as nvJPEG's
 * region decode leaves it), and transformed in one launch per batch of many samples, for
 * the train, eval and resize transforms, both antialias rules, output sizes 224, 64 and 1,
 * and both CPU resamplers. Reports the max and mean absolute difference in uint8 and fails
 * past a mean of 1.0 or a max of 8 (with identical pixels, only the resamplers' rounding
 * differs). Float16, bfloat16 and float32 outputs in NCHW and NHWC must be the CPU's
 * conversion of the kernel's own uint8 values, bit for bit. Without a usable GPU and the
 * kernels (nvcc): exit 77. */
#include "testutil.h"

#include "jpegutil.h"

#include "cuda/cuda.h"
#include "cuda/image_kernels.h"
#include "transform/transform.h"

#include <math.h>
#include <time.h>

#if defined(__has_include)
#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
#define HAVE_CUDA_RUNTIME 1
#endif
#endif

#ifdef HAVE_CUDA_RUNTIME

typedef struct image {
    uint8_t *rgb; /* host, w * h * 3 */
    int32_t w, h;
    uint8_t *dev; /* device copy */
} image;

static image make_image(const t_jpeg_kind *k, int w, int h, uint64_t seed)
{
    size_t size;
    uint8_t *jpg = t_make_jpeg(k, w, h, 90, seed, &size);
    image im = {0};
    im.rgb = t_decode_rgb(jpg, size, &im.w, &im.h);
    free(jpg);
    const size_t bytes = (size_t)im.w * im.h * 3;
    T_CUDA_OK(cudaMalloc((void **)&im.dev, bytes));
    T_CUDA_OK(cudaMemcpy(im.dev, im.rgb, bytes, cudaMemcpyHostToDevice));
    return im;
}

typedef struct stats {
    int max;
    double sum;
    uint64_t n;
} stats;

/* A batch: sample i is image i % nimg, record id i; odd samples read a region copy. */
typedef struct batch {
    int32_t n;
    stoker__gpu_image *desc; /* host */
    stoker__gpu_image *ddesc;
    uint8_t **regions; /* device copies of regions, to free */
} batch;

/* The region of `im` that geometry g reads, as its own device buffer; *x0, *y0: its origin. */
static uint8_t *upload_region(const image *im, const stoker__geom *g, int32_t *x0, int32_t *y0,
                              int64_t *pitch)
{
    int32_t x1, y1;
    stoker__resample_range(&g->x, x0, &x1);
    stoker__resample_range(&g->y, y0, &y1);
    T_ASSERT(*x0 >= 0 && x1 <= im->w && *y0 >= 0 && y1 <= im->h);
    *pitch = (int64_t)(x1 - *x0) * 3 + 5; /* a pitch that is not the width: it is honoured */
    uint8_t *dev = NULL;
    T_CUDA_OK(cudaMalloc((void **)&dev, (size_t)*pitch * (size_t)(y1 - *y0)));
    T_CUDA_OK(cudaMemcpy2D(dev, (size_t)*pitch, im->rgb + ((size_t)*y0 * im->w + *x0) * 3,
                           (size_t)im->w * 3, (size_t)(x1 - *x0) * 3, (size_t)(y1 - *y0),
                           cudaMemcpyHostToDevice));
    return dev;
}

static batch make_batch(const stoker__xform_params *p, const image *imgs, int nimg, int32_t n,
                        uint8_t *dout, size_t sample_bytes)
{
    batch b = {n, calloc((size_t)n, sizeof(stoker__gpu_image)), NULL,
               calloc((size_t)n, sizeof(uint8_t *))};
    for (int32_t i = 0; i < n; i++) {
        const image *im = &imgs[i % nimg];
        stoker__geom g;
        stoker__xform_geometry(p, im->w, im->h, 5, 1, i, &g);
        void *dst = dout + (size_t)i * sample_bytes;
        if (i % 2 == 0) {
            b.desc[i] = stoker__gpu_image_of(&g, im->dev, (int64_t)im->w * 3, 0, 0, dst);
            continue;
        }
        int32_t x0, y0;
        int64_t pitch;
        b.regions[i] = upload_region(im, &g, &x0, &y0, &pitch);
        b.desc[i] = stoker__gpu_image_of(&g, b.regions[i], pitch, x0, y0, dst);
    }
    T_CUDA_OK(cudaMalloc((void **)&b.ddesc, sizeof(stoker__gpu_image) * (size_t)n));
    T_CUDA_OK(
        cudaMemcpy(b.ddesc, b.desc, sizeof(stoker__gpu_image) * (size_t)n, cudaMemcpyHostToDevice));
    return b;
}

static void free_batch(batch *b)
{
    for (int32_t i = 0; i < b->n; i++)
        cudaFree(b->regions[i]);
    cudaFree(b->ddesc);
    free(b->regions);
    free(b->desc);
}

static void run(const batch *b, const stoker__gpu_output *out)
{
    const int rc = stoker__gpu_images(b->ddesc, b->n, out, NULL);
    if (rc != 0)
        T_FAIL("stoker__gpu_images: %s", stoker__cuda_error_string(rc));
    T_CUDA_OK(cudaDeviceSynchronize());
}

/* The output's value (of `dtype`, layout nchw) for pixel p, channel c, as float bits. */
static uint32_t value_bits(const uint8_t *s, int32_t dtype, bool nchw, int32_t size, size_t p,
                           int c)
{
    const size_t i = nchw ? (size_t)c * size * size + p : p * 3 + (size_t)c;
    if (dtype == STOKER_DTYPE_FLOAT32) {
        uint32_t u;
        memcpy(&u, s + i * 4, 4);
        return u;
    }
    uint16_t u;
    memcpy(&u, s + i * 2, 2);
    return u;
}

/* The CPU's conversion of v to `dtype`, as the value_bits of it. */
static uint32_t cpu_bits(int32_t dtype, uint8_t v, float scale, float bias)
{
    const float f = fmaf((float)v, scale, bias);
    if (dtype == STOKER_DTYPE_FLOAT16)
        return stoker__f32_to_f16(f);
    if (dtype == STOKER_DTYPE_BFLOAT16)
        return stoker__f32_to_bf16(f);
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Float outputs of both layouts against the conversion of the kernel's uint8 NHWC values. */
static void check_dtypes(const stoker__xform_params *p, const batch *b, const uint8_t *gpu_u8,
                         uint8_t *dout)
{
    static const int32_t dtypes[] = {STOKER_DTYPE_FLOAT32, STOKER_DTYPE_FLOAT16,
                                     STOKER_DTYPE_BFLOAT16};
    const size_t plane = (size_t)p->size * p->size;
    for (int nchw = 0; nchw < 2; nchw++)
        for (int d = 0; d < 3; d++) {
            stoker__gpu_output out = {p->size, dtypes[d], nchw, {0}, {0}};
            for (int c = 0; c < 3; c++)
                out.scale[c] = p->scale[c][0], out.bias[c] = p->bias[c][0];
            const size_t esize = dtypes[d] == STOKER_DTYPE_FLOAT32 ? 4 : 2;
            const size_t bytes = plane * 3 * esize;
            batch fb = *b; /* the same samples, each written at its place in a float batch */
            fb.desc = malloc(sizeof(stoker__gpu_image) * (size_t)b->n);
            for (int32_t i = 0; i < b->n; i++) {
                fb.desc[i] = b->desc[i];
                fb.desc[i].dst = dout + (size_t)i * bytes;
            }
            T_CUDA_OK(cudaMemcpy(b->ddesc, fb.desc, sizeof(stoker__gpu_image) * (size_t)b->n,
                                 cudaMemcpyHostToDevice));
            run(&fb, &out);
            uint8_t *host = malloc(bytes * (size_t)b->n);
            T_CUDA_OK(cudaMemcpy(host, dout, bytes * (size_t)b->n, cudaMemcpyDeviceToHost));
            for (int32_t i = 0; i < b->n; i++)
                for (size_t px = 0; px < plane; px++)
                    for (int c = 0; c < 3; c++) {
                        const uint8_t v = gpu_u8[(size_t)i * plane * 3 + px * 3 + (size_t)c];
                        const uint32_t want = cpu_bits(dtypes[d], v, out.scale[c], out.bias[c]);
                        const uint32_t got =
                            value_bits(host + (size_t)i * bytes, dtypes[d], nchw, p->size, px, c);
                        if (got != want)
                            T_FAIL("dtype %d nchw %d sample %d pixel %zu ch %d: 0x%x, want 0x%x",
                                   (int)dtypes[d], nchw, (int)i, px, c, got, want);
                    }
            free(host);
            free(fb.desc);
            T_CUDA_OK(cudaMemcpy(b->ddesc, b->desc, sizeof(stoker__gpu_image) * (size_t)b->n,
                                 cudaMemcpyHostToDevice));
        }
}

/* One configuration: n samples through the kernel (uint8, NHWC) and through the CPU. */
static void check_config(int32_t transform, int32_t size, int32_t antialias, int32_t resampler,
                         const image *imgs, int nimg, int32_t n, bool dtypes, stats *total)
{
    stoker__xform_params p = {.transform = transform,
                              .size = size,
                              .dtype = STOKER_DTYPE_UINT8,
                              .layout = STOKER_LAYOUT_NHWC,
                              .antialias = antialias,
                              .resampler = resampler,
                              .vflip = 0.5, /* train: both flips, each on about half */
                              .mean = {0.485f, 0.456f, 0.406f},
                              .std = {0.229f, 0.224f, 0.225f}};
    stoker__err err;
    T_OK(stoker__xform_params_prepare(&p, STOKER_SIMD_AUTO, &err));
    const size_t sb = stoker__xform_sample_bytes(&p);
    uint8_t *dout = NULL;
    T_CUDA_OK(cudaMalloc((void **)&dout, sb * (size_t)n * 4)); /* room for float32 too */
    batch b = make_batch(&p, imgs, nimg, n, dout, sb);
    const stoker__gpu_output out = {size, STOKER_DTYPE_UINT8, 0, {0}, {0}};
    run(&b, &out);
    uint8_t *gpu = malloc(sb * (size_t)n), *cpu = malloc(sb);
    T_CUDA_OK(cudaMemcpy(gpu, dout, sb * (size_t)n, cudaMemcpyDeviceToHost));
    stoker__xform_scratch *s = NULL;
    T_OK(stoker__xform_scratch_create(&s));
    stats st = {0};
    for (int32_t i = 0; i < n; i++) {
        const image *im = &imgs[i % nimg];
        T_OK(
            stoker__xform_rgb(s, &p, 5, 1, i, im->rgb, im->w, im->h, (size_t)im->w * 3, cpu, &err));
        for (size_t k = 0; k < sb; k++) {
            const int d = abs((int)gpu[(size_t)i * sb + k] - (int)cpu[k]);
            st.max = d > st.max ? d : st.max;
            st.sum += d;
        }
        st.n += sb;
    }
    printf("transform %d size %3d antialias %d resampler %d, %d samples: max %d, mean %.4f\n",
           (int)transform, (int)size, (int)antialias, (int)resampler, (int)n, st.max,
           st.sum / (double)st.n);
    if (st.max > 8 || st.sum / (double)st.n > 1.0)
        T_FAIL("the GPU transform differs from the CPU's: max %d, mean %.4f", st.max,
               st.sum / (double)st.n);
    if (dtypes)
        check_dtypes(&p, &b, gpu, dout);
    total->max = st.max > total->max ? st.max : total->max;
    total->sum += st.sum;
    total->n += st.n;
    stoker__xform_scratch_destroy(s);
    free(gpu);
    free(cpu);
    free_batch(&b);
    cudaFree(dout);
}

/* The kernel's time for a batch of 256 samples of 224 from 500x375 images, for the record. */
static void report_speed(const image *imgs, int nimg)
{
    stoker__xform_params p = {.transform = STOKER_TRANSFORM_TRAIN,
                              .size = 224,
                              .dtype = STOKER_DTYPE_FLOAT16,
                              .mean = {0.5f, 0.5f, 0.5f},
                              .std = {0.25f, 0.25f, 0.25f}};
    stoker__err err;
    T_OK(stoker__xform_params_prepare(&p, STOKER_SIMD_AUTO, &err));
    const int32_t n = 256;
    const size_t sb = stoker__xform_sample_bytes(&p);
    uint8_t *dout = NULL;
    T_CUDA_OK(cudaMalloc((void **)&dout, sb * n));
    batch b = make_batch(&p, imgs, nimg, n, dout, sb);
    stoker__gpu_output out = {224, STOKER_DTYPE_FLOAT16, 1, {0}, {0}};
    for (int c = 0; c < 3; c++)
        out.scale[c] = p.scale[c][0], out.bias[c] = p.bias[c][0];
    run(&b, &out); /* warm */
    cudaEvent_t e0, e1;
    T_CUDA_OK(cudaEventCreate(&e0));
    T_CUDA_OK(cudaEventCreate(&e1));
    T_CUDA_OK(cudaEventRecord(e0, NULL));
    for (int r = 0; r < 20; r++)
        T_ASSERT(stoker__gpu_images(b.ddesc, n, &out, NULL) == 0);
    T_CUDA_OK(cudaEventRecord(e1, NULL));
    T_CUDA_OK(cudaEventSynchronize(e1));
    float ms = 0;
    T_CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
    printf("speed: %.3f ms per batch of 256 (train, 224, float16 NCHW): %.0f samples/s\n", ms / 20,
           256 * 20 / (ms / 1000));
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    free_batch(&b);
    cudaFree(dout);
}

static void check_invalid(void)
{
    stoker__gpu_output out = {0, STOKER_DTYPE_UINT8, 0, {0}, {0}};
    T_ASSERT(stoker__gpu_images(NULL, 1, &out, NULL) == (int)cudaErrorInvalidValue);
    out.size = 8;
    out.dtype = STOKER_DTYPE_INT32;
    T_ASSERT(stoker__gpu_images(NULL, 1, &out, NULL) == (int)cudaErrorInvalidValue);
    out.dtype = STOKER_DTYPE_UINT8;
    T_ASSERT(stoker__gpu_images(NULL, 0, &out, NULL) == 0);
}

int main(void)
{
    char msg[256];
    if (!stoker__cuda_built() || stoker__cuda_device_query(msg, sizeof msg) == 0) {
        printf("skip: no usable CUDA device (%s)\n", stoker__cuda_built() ? msg : "no CUDA");
        return T_SKIP;
    }
    if (!stoker__cuda_has_kernels()) {
        printf("skip: this build has no GPU kernels (no nvcc)\n");
        return T_SKIP;
    }
    T_CUDA_OK(cudaSetDevice(0));
    static const t_jpeg_kind k420 = {"4:2:0", 3, 2, 2, 0, 0, 0}, k444 = {"4:4:4", 3, 1, 1, 0, 0, 0};
    static const t_jpeg_kind k422 = {"4:2:2", 3, 2, 1, 0, 0, 0}, gray = {"gray", 1, 1, 1, 0, 0, 0};
    const image imgs[] = {make_image(&k420, 500, 375, 1),  make_image(&k444, 375, 500, 2),
                          make_image(&k422, 1000, 751, 3), make_image(&gray, 333, 250, 4),
                          make_image(&k420, 64, 48, 5),    make_image(&k420, 2999, 2001, 6),
                          make_image(&k444, 17, 900, 7)};
    const int nimg = (int)(sizeof imgs / sizeof imgs[0]);
    check_invalid();
    static const int32_t transforms[] = {STOKER_TRANSFORM_TRAIN, STOKER_TRANSFORM_EVAL,
                                         STOKER_TRANSFORM_RESIZE};
    static const int32_t antialias[] = {STOKER_ANTIALIAS_OVER_2X, STOKER_ANTIALIAS_ALWAYS};
    static const int32_t resamplers[] = {STOKER_RESAMPLER_FAST, STOKER_RESAMPLER_PILLOW};
    stats total = {0};
    for (int t = 0; t < 3; t++)
        for (int a = 0; a < 2; a++)
            for (int r = 0; r < 2; r++) {
                const bool dtypes = r == 0 && a == 0;
                check_config(transforms[t], 224, antialias[a], resamplers[r], imgs, nimg, 70,
                             dtypes, &total);
            }
    check_config(STOKER_TRANSFORM_TRAIN, 64, STOKER_ANTIALIAS_OVER_2X, STOKER_RESAMPLER_FAST, imgs,
                 nimg, 140, true, &total);
    check_config(STOKER_TRANSFORM_EVAL, 1, STOKER_ANTIALIAS_OVER_2X, STOKER_RESAMPLER_FAST, imgs,
                 nimg, 14, true, &total);
    printf("all: max %d, mean %.4f over %llu values\n", total.max, total.sum / (double)total.n,
           (unsigned long long)total.n);
    report_speed(imgs, nimg);
    for (int i = 0; i < nimg; i++) {
        cudaFree(imgs[i].dev);
        free(imgs[i].rgb);
    }
    return 0;
}

#else

int main(void)
{
    printf("skip: built without the CUDA runtime\n");
    return T_SKIP;
}

#endif
