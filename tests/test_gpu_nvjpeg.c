/* SPDX-License-Identifier: Apache-2.0 */
/* nvJPEG's hardware decoder (src/cuda/nvjpeg.c) on a GPU with JPEG decoder engines:
 * - the header rule (stoker__jpeg_hw_eligible) against nvJPEG's own verdict on every kind
 *   of JPEG: an image the rule calls eligible must be taken;
 * - whole images decoded in one batch against libjpeg's decode (the CPU decoder's settings),
 *   max and mean absolute difference reported;
 * - regions decoded against the same pixels of the whole decode;
 * - a batch mixing eligible images with progressive, CMYK, garbage and truncated records:
 *   exactly the eligible ones are taken, the others' buffers untouched;
 * - damaged entropy data: what the decoder reports (no crash either way);
 * - the GPU share's whole path (region decode, then the image kernel) against the CPU
 *   pipeline (stoker__xform_jpeg) on the same JPEGs;
 * - the decoder's throughput on a batch of 256 photos-sized images, for the record.
 * Without a GPU, or where nvJPEG is unavailable, exit 77 (STOKER_TEST_REQUIRE_NVJPEG=1 makes
 * an unavailable nvJPEG a failure, for the machine that has one). */
#include "testutil.h"

#include "jpeg_kinds.h"

#include "cuda/cuda.h"
#include "cuda/image_kernels.h"
#include "cuda/nvjpeg.h"
#include "decode/jpeg.h"
#include "decode/jpeg_info.h"
#include "transform/transform.h"

#include <math.h>

#if defined(__has_include)
#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
#define HAVE_CUDA_RUNTIME 1
#endif
#endif

#ifdef HAVE_CUDA_RUNTIME

typedef struct jpeg {
    uint8_t *data;
    size_t size;
    int32_t w, h;
} jpeg;

typedef struct diff {
    int max;
    double sum;
    uint64_t n;
} diff;

static void add(diff *d, const uint8_t *a, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const int v = abs((int)a[i] - (int)b[i]);
        d->max = v > d->max ? v : d->max;
        d->sum += v;
    }
    d->n += n;
}

static double mean(const diff *d)
{
    return d->n ? d->sum / (double)d->n : 0;
}

/* Decodes n JPEGs (whole, or rois) in one batch into pitched device buffers and copies them
 * back tightly packed (w * 3 per row); out[i] NULL where not taken. */
static void decode_batch(stoker__nvjpeg *nj, int32_t n, const jpeg *j,
                         const stoker__nvjpeg_roi *rois, uint8_t **out, uint8_t *taken)
{
    const uint8_t **data = malloc(sizeof *data * (size_t)n);
    size_t *sizes = malloc(sizeof *sizes * (size_t)n), *pitch = malloc(sizeof *pitch * (size_t)n);
    uint8_t **dst = malloc(sizeof *dst * (size_t)n);
    for (int32_t i = 0; i < n; i++) {
        const int32_t w = rois && rois[i].w ? rois[i].w : j[i].w;
        const int32_t h = rois && rois[i].w ? rois[i].h : j[i].h;
        data[i] = j[i].data;
        sizes[i] = j[i].size;
        pitch[i] = ((size_t)w * 3 + 127) / 128 * 128 + 64; /* wider than a row */
        T_CUDA_OK(cudaMalloc((void **)&dst[i], pitch[i] * (size_t)h));
        T_CUDA_OK(cudaMemset(dst[i], 0xAB, pitch[i] * (size_t)h));
    }
    stoker__err err = {0};
    cudaStream_t s;
    T_CUDA_OK(cudaStreamCreate(&s));
    const int rc =
        stoker__nvjpeg_decode_batch(nj, n, data, sizes, rois, dst, pitch, s, taken, &err);
    if (rc != 0)
        T_FAIL("decode_batch: %s", err.msg);
    T_CUDA_OK(cudaStreamSynchronize(s));
    T_CUDA_OK(cudaStreamDestroy(s));
    for (int32_t i = 0; i < n; i++) {
        const int32_t w = rois && rois[i].w ? rois[i].w : j[i].w;
        const int32_t h = rois && rois[i].w ? rois[i].h : j[i].h;
        out[i] = malloc((size_t)w * h * 3);
        T_CUDA_OK(cudaMemcpy2D(out[i], (size_t)w * 3, dst[i], pitch[i], (size_t)w * 3, (size_t)h,
                               cudaMemcpyDeviceToHost));
        cudaFree(dst[i]);
    }
    free(data), free(sizes), free(pitch), free(dst);
}

static const kind *kind_named(const char *name)
{
    for (int k = 0; k < NJPEG_KINDS; k++)
        if (strcmp(JPEG_KINDS[k].name, name) == 0)
            return &JPEG_KINDS[k];
    T_FAIL("no kind %s", name);
}

static jpeg make_jpeg(const kind *k, int w, int h, uint64_t seed)
{
    jpeg j = {.w = w, .h = h};
    j.data = t_make_kind(k, w, h, seed, &j.size);
    return j;
}

/* ---- the rule against nvJPEG ---------------------------------------------------------------- */

static void check_rule(stoker__nvjpeg *nj)
{
    static const int sizes[][2] = {{64, 48}, {333, 77}, {17, 9}, {1, 1}, {2000, 1500}};
    int refused = 0, extra = 0;
    for (int k = 0; k < NJPEG_KINDS; k++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            jpeg j = make_jpeg(&JPEG_KINDS[k], sizes[s][0], sizes[s][1], (uint64_t)k);
            stoker__jpeg_info info;
            stoker__err err = {0};
            T_OK(stoker__jpeg_info_read(j.data, j.size, &info, &err));
            const char *why = NULL;
            const bool eligible = stoker__jpeg_hw_eligible(&info, &why);
            bool ok = false;
            T_OK(stoker__nvjpeg_supported(nj, j.data, j.size, NULL, &ok, &err));
            if (s == 0 || eligible != ok)
                printf("%-24s %4dx%-4d rule: %-22s nvJPEG: %s\n", JPEG_KINDS[k].name, sizes[s][0],
                       sizes[s][1], eligible ? "eligible" : why, ok ? "takes it" : "refuses it");
            refused += eligible && !ok;
            extra += !eligible && ok;
            free(j.data);
        }
    printf("rule vs nvJPEG: %d eligible refused, %d ineligible taken\n", refused, extra);
    T_EQ_INT(refused, 0); /* an eligible record is sent to the GPU: it must be taken */
}

/* ---- decoding -------------------------------------------------------------------------------- */

/* For the record: how nvJPEG decodes the kinds the rule refuses but nvJPEG takes. */
static void report_refused_taken(stoker__nvjpeg *nj)
{
    for (int k = 0; k < NJPEG_KINDS; k++) {
        jpeg j = make_jpeg(&JPEG_KINDS[k], 333, 250, (uint64_t)k);
        bool ok = false;
        stoker__err err = {0};
        T_OK(stoker__nvjpeg_supported(nj, j.data, j.size, NULL, &ok, &err));
        if (ok && JPEG_KINDS[k].why) {
            uint8_t *out = NULL, took = 0;
            decode_batch(nj, 1, &j, NULL, &out, &took);
            int32_t w, h;
            uint8_t *ref = t_decode_rgb(j.data, j.size, &w, &h);
            diff d = {0};
            add(&d, out, ref, (size_t)w * h * 3);
            printf("not eligible, yet taken: %-24s decoded with max %d, mean %.4f against "
                   "libjpeg\n",
                   JPEG_KINDS[k].name, d.max, mean(&d));
            free(out), free(ref);
        }
        free(j.data);
    }
}

static void check_whole(stoker__nvjpeg *nj)
{
    static const int sizes[][2] = {{500, 375}, {64, 48}, {333, 77}, {17, 9}, {1, 1}, {31, 1025}};
    const int ns = (int)(sizeof sizes / sizeof sizes[0]);
    jpeg *js = malloc(sizeof(jpeg) * (size_t)NJPEG_KINDS * ns);
    const char **names = malloc(sizeof(char *) * (size_t)NJPEG_KINDS * ns);
    int32_t n = 0;
    for (int k = 0; k < NJPEG_KINDS; k++)
        for (int s = 0; s < ns && !JPEG_KINDS[k].why; s++) {
            names[n] = JPEG_KINDS[k].name;
            js[n++] = make_jpeg(&JPEG_KINDS[k], sizes[s][0], sizes[s][1], (uint64_t)(k + s));
        }
    uint8_t **out = malloc(sizeof *out * (size_t)n), *taken = malloc((size_t)n);
    decode_batch(nj, n, js, NULL, out, taken);
    diff all = {0};
    for (int32_t i = 0; i < n; i++) {
        T_ASSERT(taken[i]);
        int32_t w, h;
        uint8_t *ref = t_decode_rgb(js[i].data, js[i].size, &w, &h);
        diff d = {0};
        add(&d, out[i], ref, (size_t)w * h * 3);
        add(&all, out[i], ref, (size_t)w * h * 3);
        if (i % ns == 0)
            printf("whole %-24s %dx%d: max %3d, mean %.4f against libjpeg\n", names[i], (int)w,
                   (int)h, d.max, mean(&d));
        free(ref);
        free(out[i]);
        free(js[i].data);
    }
    printf("whole images (%d): max %d, mean %.4f against libjpeg\n", (int)n, all.max, mean(&all));
    report_refused_taken(nj);
    T_ASSERT(mean(&all) < 2.0); /* two decoders of the same data, not two images */
    free(out), free(taken), free(js), free(names);
}

static void check_regions(stoker__nvjpeg *nj)
{
    static const char *const kinds[] = {"4:2:0", "4:2:2", "4:4:4", "gray", "restart 4:2:0"};
    uint64_t seed = 77;
    int worst = 0;
    for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) {
        const kind *k = kind_named(kinds[ki]);
        T_ASSERT(k->why == NULL);
        jpeg whole = make_jpeg(k, 641, 479, ki);
        uint8_t *full = NULL, took = 0;
        decode_batch(nj, 1, &whole, NULL, &full, &took);
        T_ASSERT(took);
        enum { N = 24 };
        jpeg js[N];
        stoker__nvjpeg_roi rois[N];
        for (int i = 0; i < N; i++) {
            js[i] = whole;
            const int32_t x0 = (int32_t)(t_rand(&seed) % 640), y0 = (int32_t)(t_rand(&seed) % 478);
            rois[i] =
                (stoker__nvjpeg_roi){x0, y0, 1 + (int32_t)(t_rand(&seed) % (uint64_t)(641 - x0)),
                                     1 + (int32_t)(t_rand(&seed) % (uint64_t)(479 - y0))};
        }
        uint8_t *out[N], taken[N];
        decode_batch(nj, N, js, rois, out, taken);
        diff d = {0};
        for (int i = 0; i < N; i++) {
            T_ASSERT(taken[i]);
            for (int32_t y = 0; y < rois[i].h; y++)
                add(&d, out[i] + (size_t)y * rois[i].w * 3,
                    full + ((size_t)(rois[i].y + y) * 641 + rois[i].x) * 3, (size_t)rois[i].w * 3);
            free(out[i]);
        }
        printf("regions %-24s: max %d, mean %.4f against the whole decode\n", k->name, d.max,
               mean(&d));
        worst = d.max > worst ? d.max : worst;
        free(full);
        free(whole.data);
    }
    T_ASSERT(worst <= 2); /* the region's pixels are the image's (edges may upsample apart) */
}

/* Eligible images among records the decoder cannot take: only the eligible are taken, and the
 * others' buffers keep what they held. */
static void check_taken(stoker__nvjpeg *nj)
{
    jpeg js[7];
    js[0] = make_jpeg(kind_named("4:2:0"), 100, 80, 1);
    js[1] = make_jpeg(kind_named("progressive 4:2:0"), 100, 80, 2);
    js[2] = make_jpeg(kind_named("CMYK Adobe"), 100, 80, 3);
    js[3] = (jpeg){malloc(500), 500, 100, 80};
    for (int i = 0; i < 500; i++)
        js[3].data[i] = (uint8_t)(i * 37);
    js[4] = make_jpeg(kind_named("4:2:0"), 100, 80, 4);
    js[4].size = 40; /* the header cut short */
    js[5] = make_jpeg(kind_named("gray"), 100, 80, 5);
    js[6] = make_jpeg(kind_named("4:1:1"), 100, 80, 6);
    const uint8_t want[7] = {1, 0, 0, 0, 0, 1, 0};
    uint8_t *out[7], taken[7];
    decode_batch(nj, 7, js, NULL, out, taken);
    for (int i = 0; i < 7; i++) {
        T_EQ_INT(taken[i], want[i]);
        if (!taken[i])
            for (size_t b = 0; b < (size_t)100 * 80 * 3; b++)
                if (out[i][b] != 0xAB)
                    T_FAIL("record %d was not taken, but its buffer changed at %zu", i, b);
        free(out[i]);
        free(js[i].data);
    }
}

static int ignore_row(void *ctx, int32_t y, const uint8_t *rgbx, int32_t x, int32_t n)
{
    (void)ctx, (void)y, (void)rgbx, (void)x, (void)n;
    return 0;
}

static int whole_region(void *ctx, int32_t w, int32_t h, stoker__jpeg_region *r)
{
    (void)ctx;
    *r = (stoker__jpeg_region){0, 0, w, h, 0, 1};
    return 0;
}

/* Whether the CPU decoder rejects the image (damage warnings count). */
static int cpu_decode_fails(stoker__jpeg_dec *dec, const jpeg *j)
{
    const stoker__jpeg_sink sink = {whole_region, ignore_row, NULL, NULL, 0};
    stoker__err err = {0};
    return stoker__jpeg_decode(dec, j->data, j->size, STOKER_DCT_ISLOW, UINT64_C(1) << 28, &sink,
                               &err) != 0;
}

/* Damaged entropy data in an eligible header: what the hardware decoder says. */
static void check_damaged(stoker__nvjpeg *nj)
{
    jpeg j = make_jpeg(kind_named("4:2:0"), 256, 192, 9);
    stoker__jpeg_info info;
    stoker__err err = {0};
    T_OK(stoker__jpeg_info_read(j.data, j.size, &info, &err));
    const size_t cuts[] = {info.header_size + 10, j.size / 2, j.size - 2};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        jpeg t = j;
        t.size = cuts[c];
        uint8_t took = 0;
        const uint8_t *data[1] = {t.data};
        size_t sizes[1] = {t.size}, pitch[1] = {256 * 3};
        uint8_t *dst[1];
        T_CUDA_OK(cudaMalloc((void **)&dst[0], 256 * 3 * 192));
        const int rc =
            stoker__nvjpeg_decode_batch(nj, 1, data, sizes, NULL, dst, pitch, NULL, &took, &err);
        const cudaError_t sync = cudaDeviceSynchronize();
        printf("truncated to %zu of %zu bytes: taken %d, decode %s%s, stream %s\n", cuts[c], j.size,
               took, rc == 0 ? "ok" : "failed: ", rc == 0 ? "" : err.msg, cudaGetErrorString(sync));
        T_ASSERT(rc == 0 || rc == STOKER_E_CUDA);
        T_ASSERT(sync == cudaSuccess); /* the device stays usable */
        cudaFree(dst[0]);
    }
    /* flipped bits in the entropy data (no marker made): the CPU decoder's verdict beside */
    uint64_t seed = 3;
    int gpu_failed = 0, cpu_failed = 0;
    stoker__jpeg_dec *dec = NULL;
    T_OK(stoker__jpeg_dec_create(&dec));
    for (int t = 0; t < 20; t++) {
        jpeg m = {malloc(j.size), j.size, j.w, j.h};
        memcpy(m.data, j.data, j.size);
        for (int f = 0; f < 4; f++) {
            const size_t at =
                info.header_size + (size_t)(t_rand(&seed) % (j.size - info.header_size - 2));
            if (m.data[at] != 0xFF && m.data[at] != 0xFE && m.data[at - 1] != 0xFF)
                m.data[at] ^= 0x01;
        }
        uint8_t took = 0;
        const uint8_t *data[1] = {m.data};
        size_t sizes[1] = {m.size}, pitch[1] = {256 * 3};
        uint8_t *dst[1];
        T_CUDA_OK(cudaMalloc((void **)&dst[0], 256 * 3 * 192));
        gpu_failed += stoker__nvjpeg_decode_batch(nj, 1, data, sizes, NULL, dst, pitch, NULL, &took,
                                                  &err) != 0;
        T_ASSERT(cudaDeviceSynchronize() == cudaSuccess);
        cudaFree(dst[0]);
        cpu_failed += cpu_decode_fails(dec, &m);
        free(m.data);
    }
    stoker__jpeg_dec_destroy(dec);
    printf("flipped entropy bits, 20 images: the GPU failed %d, the CPU decoder failed %d\n",
           gpu_failed, cpu_failed);
    free(j.data);
}

/* ---- the GPU share's path against the CPU pipeline --------------------------------------- */

static void check_pipeline(stoker__nvjpeg *nj, int32_t dct_scale)
{
    stoker__xform_params p = {.transform = STOKER_TRANSFORM_TRAIN,
                              .size = 224,
                              .dtype = STOKER_DTYPE_UINT8,
                              .layout = STOKER_LAYOUT_NHWC,
                              .dct_scale = dct_scale,
                              .mean = {0.485f, 0.456f, 0.406f},
                              .std = {0.229f, 0.224f, 0.225f}};
    stoker__err err = {0};
    T_OK(stoker__xform_params_prepare(&p, STOKER_SIMD_AUTO, &err));
    enum { N = 64 };
    jpeg js[N];
    stoker__nvjpeg_roi rois[N];
    stoker__geom g[N];
    static const char *const kinds[] = {"4:2:0", "4:2:2", "4:4:4", "gray"};
    for (int i = 0; i < N; i++) {
        js[i] = make_jpeg(kind_named(kinds[i % 4]), 500 + 37 * (i % 5), 375 + 23 * (i % 3), i);
        stoker__xform_geometry(&p, js[i].w, js[i].h, 3, 0, i, &g[i]);
        int32_t x0, x1, y0, y1;
        stoker__resample_range(&g[i].x, &x0, &x1);
        stoker__resample_range(&g[i].y, &y0, &y1);
        rois[i] = (stoker__nvjpeg_roi){x0, y0, x1 - x0, y1 - y0};
    }
    /* decode the regions on the device, keep them there, transform in one launch */
    const uint8_t *data[N];
    size_t sizes[N], pitch[N];
    uint8_t *dst[N], taken[N];
    for (int i = 0; i < N; i++) {
        data[i] = js[i].data, sizes[i] = js[i].size, pitch[i] = (size_t)rois[i].w * 3;
        T_CUDA_OK(cudaMalloc((void **)&dst[i], pitch[i] * (size_t)rois[i].h));
    }
    const size_t sb = stoker__xform_sample_bytes(&p);
    uint8_t *dout;
    T_CUDA_OK(cudaMalloc((void **)&dout, sb * N));
    T_OK(stoker__nvjpeg_decode_batch(nj, N, data, sizes, rois, dst, pitch, NULL, taken, &err));
    stoker__gpu_image desc[N], *ddesc;
    for (int i = 0; i < N; i++) {
        T_ASSERT(taken[i]);
        desc[i] = stoker__gpu_image_of(&g[i], dst[i], (int64_t)pitch[i], rois[i].x, rois[i].y,
                                       dout + (size_t)i * sb);
    }
    T_CUDA_OK(cudaMalloc((void **)&ddesc, sizeof desc));
    T_CUDA_OK(cudaMemcpy(ddesc, desc, sizeof desc, cudaMemcpyHostToDevice));
    const stoker__gpu_output out = {224, STOKER_DTYPE_UINT8, 0, {0}, {0}};
    T_ASSERT(stoker__gpu_images(ddesc, N, &out, NULL) == 0);
    uint8_t *gpu = malloc(sb * N), *cpu = malloc(sb);
    T_CUDA_OK(cudaMemcpy(gpu, dout, sb * N, cudaMemcpyDeviceToHost));
    stoker__xform_scratch *s = NULL;
    T_OK(stoker__xform_scratch_create(&s));
    diff d = {0};
    for (int i = 0; i < N; i++) {
        T_OK(stoker__xform_jpeg(s, &p, 3, 0, i, js[i].data, js[i].size, cpu, &err));
        add(&d, gpu + (size_t)i * sb, cpu, sb);
    }
    printf("GPU share (nvJPEG region + kernel) vs CPU pipeline, dct_scale %d: max %d, mean %.4f\n",
           (int)dct_scale, d.max, mean(&d));
    if (dct_scale == STOKER_DCT_SCALE_NEVER)
        T_ASSERT(mean(&d) < 2.0); /* the decoders' difference, through the same resampling */
    stoker__xform_scratch_destroy(s);
    for (int i = 0; i < N; i++) {
        cudaFree(dst[i]);
        free(js[i].data);
    }
    cudaFree(ddesc);
    cudaFree(dout);
    free(gpu), free(cpu);
}

static void report_speed(stoker__nvjpeg *nj)
{
    enum { N = 256 };
    jpeg js[N];
    for (int i = 0; i < N; i++)
        js[i] = make_jpeg(kind_named("4:2:0"), 500, 375, (uint64_t)i);
    const uint8_t *data[N];
    size_t sizes[N], pitch[N];
    uint8_t *dst[N], taken[N];
    uint8_t *pool;
    T_CUDA_OK(cudaMalloc((void **)&pool, (size_t)N * 500 * 3 * 375));
    for (int i = 0; i < N; i++)
        data[i] = js[i].data, sizes[i] = js[i].size, pitch[i] = 500 * 3,
        dst[i] = pool + (size_t)i * 500 * 3 * 375;
    stoker__err err = {0};
    T_OK(stoker__nvjpeg_decode_batch(nj, N, data, sizes, NULL, dst, pitch, NULL, taken, &err));
    T_CUDA_OK(cudaDeviceSynchronize());
    const double t0 = stoker__now();
    const int rounds = 10;
    for (int r = 0; r < rounds; r++)
        T_OK(stoker__nvjpeg_decode_batch(nj, N, data, sizes, NULL, dst, pitch, NULL, taken, &err));
    T_CUDA_OK(cudaDeviceSynchronize());
    const double s = stoker__now() - t0;
    printf("speed: %.2f ms per batch of 256 500x375 4:2:0 (%zu bytes each): %.0f images/s\n",
           s * 1000 / rounds, js[0].size, N * rounds / s);
    /* batches whose size changes each time: the decoder is initialised again before each */
    const double t1 = stoker__now();
    int64_t images = 0;
    for (int r = 0; r < rounds; r++) {
        const int32_t n = N - 1 - (r % 2) * 7;
        T_OK(stoker__nvjpeg_decode_batch(nj, n, data, sizes, NULL, dst, pitch, NULL, taken, &err));
        images += n;
    }
    T_CUDA_OK(cudaDeviceSynchronize());
    const double s2 = stoker__now() - t1;
    char t[256];
    stoker__nvjpeg_timing(nj, t, sizeof t);
    printf("speed, batch sizes changing: %.2f ms per batch: %.0f images/s (%s)\n",
           s2 * 1000 / rounds, (double)images / s2, t);
    for (int i = 0; i < N; i++)
        free(js[i].data);
    cudaFree(pool);
}

int main(void)
{
    char msg[256];
    if (!stoker__cuda_built() || stoker__cuda_device_query(msg, sizeof msg) == 0) {
        printf("skip: no usable CUDA device (%s)\n", stoker__cuda_built() ? msg : "no CUDA");
        return T_SKIP;
    }
    stoker__nvjpeg *nj = NULL;
    char why[512];
    const int rc = stoker__nvjpeg_open(&nj, 0, why, sizeof why);
    if (rc != 0) {
        const char *req = getenv("STOKER_TEST_REQUIRE_NVJPEG");
        if (req && strcmp(req, "1") == 0)
            T_FAIL("nvJPEG unavailable: %s", why);
        printf("skip: nvJPEG unavailable: %s\n", why);
        return T_SKIP;
    }
    printf("%s\n", stoker__nvjpeg_describe(nj));
    stoker__nvjpeg *none = NULL;
    T_EQ_RC(stoker__nvjpeg_open(&none, 99, why, sizeof why), STOKER_E_UNSUPPORTED);
    T_CONTAINS(why, "device 99 does not exist");
    /* what the loader does before its first batch; every check below decodes after it, some
     * images larger than the memory set aside (31 x 1025) */
    T_ASSERT(stoker__nvjpeg_reserve(nj, 64, 640, 480));
    check_rule(nj);
    check_whole(nj);
    check_regions(nj);
    check_taken(nj);
    check_damaged(nj);
    check_pipeline(nj, STOKER_DCT_SCALE_NEVER);
    check_pipeline(nj, STOKER_DCT_SCALE_TRAIN);
    report_speed(nj);
    T_CUDA_OK(cudaDeviceSynchronize());
    stoker__nvjpeg_close(nj);
    return 0;
}

#else

int main(void)
{
    printf("skip: built without the CUDA runtime\n");
    return T_SKIP;
}

#endif
