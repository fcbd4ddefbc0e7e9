/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU decode stage on a real GPU: a loader that decodes a share of its JPEGs with the
 * hardware decoder delivers the samples of the CPU-only loader within the decoders'
 * rounding (same ids, same crop boxes and flips), in every dtype and layout; a damaged image
 * the GPU side takes is judged as on the CPU alone (ERROR fails its batch naming it, SKIP
 * replaces it with the sample the CPU alone delivers). Prints the pixel differences that
 * docs/SEMANTICS.md quotes. Exits 77 (skip) without a GPU with a hardware JPEG decoder, unless
 * STOKER_TEST_REQUIRE_NVJPEG=1. */
#include "jpegutil.h"
#include "loader/plan.h"

#include "test_loader_util.h"
#include "transform/transform.h"

#include <math.h>

#if defined(__has_include)
#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
#define HAVE_CUDA_RUNTIME 1
#endif
#endif

#ifdef HAVE_CUDA_RUNTIME /* all of it: main skips without the runtime's header */

#define N_RECORDS 96
#define BATCH 32
#define SIZE 224

static const t_jpeg_kind KINDS[] = {
    {"420", 3, 2, 2, 0, 0, 0},  {"422", 3, 2, 1, 0, 0, 0},  {"444", 3, 1, 1, 0, 0, 0},
    {"gray", 1, 1, 1, 0, 0, 0}, {"prog", 3, 2, 2, 1, 0, 0}, {"cmyk", 4, 1, 1, 0, 0, 1},
};

/* How record `bad` is damaged: cut to half its bytes; cut and closed with an EOI marker (its
 * header and end look whole); or flipped bytes in the shard after packing (its CRC32C). */
enum { CUT, CUT_CLOSED, FLIPPED };

static void make_set(const char *path, int64_t bad, int how)
{
    stoker_writer *w = t_jpeg_writer(path, 0);
    for (int64_t id = 0; id < N_RECORDS; id++) {
        size_t n = 0;
        uint8_t *j = t_make_jpeg(&KINDS[id % 6], 250 + (int)(id % 9) * 43, 190 + (int)(id % 7) * 41,
                                 88, (uint64_t)id + 3, &n);
        if (id == bad && how != FLIPPED) {
            n /= 2;
            if (how == CUT_CLOSED)
                j[n - 2] = 0xFF, j[n - 1] = 0xD9;
        }
        T_OK(stoker_writer_add(w, j, n, id % 10, NULL));
        free(j);
    }
    T_OK(stoker_writer_finish(w));
    stoker_writer_destroy(w);
    if (how == FLIPPED) {
        char shard[4096];
        tl_flip_byte(path, bad, shard, sizeof shard);
    }
}

/* The library's log lines about the GPU decode (where its time went). */
static void print_log(void *user, int32_t level, const char *msg)
{
    (void)user, (void)level;
    if (strstr(msg, "GPU decode"))
        printf("log: %s\n", msg);
}

static stoker_loader *open_loader(const char *path, int32_t decoder, int32_t dtype, int32_t layout,
                                  int32_t dct_scale, int32_t on_corrupt)
{
    stoker_config *cfg = NULL;
    T_OK(stoker_config_create(&cfg));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_TRANSFORM, STOKER_TRANSFORM_TRAIN));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DTYPE, dtype));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_LAYOUT, layout));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DCT_SCALE, dct_scale));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_BATCH_SIZE, BATCH));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_THREADS, 4));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DEVICE, 1));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SEED, 5));
    T_OK(stoker_config_set_float(cfg, STOKER_OPT_VFLIP, 0.5)); /* the GPU's flips too */
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DECODER, decoder));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_ON_CORRUPT, on_corrupt));
    T_OK(stoker_config_set_log(cfg, print_log, NULL, STOKER_LOG_INFO));
    stoker_loader *l = NULL;
    T_OK(stoker_loader_create(&l, path, cfg));
    stoker_config_destroy(cfg);
    return l;
}

typedef struct diff {
    double max, sum;
    uint64_t n;
} diff;

static double value(const uint8_t *p, size_t i, int32_t dtype)
{
    switch (dtype) {
    case STOKER_DTYPE_UINT8: return p[i];
    case STOKER_DTYPE_FLOAT32: return ((const float *)(const void *)p)[i];
    case STOKER_DTYPE_FLOAT16: return stoker__f16_to_f32(((const uint16_t *)(const void *)p)[i]);
    default: T_FAIL("dtype %d", (int)dtype);
    }
    return 0;
}

/* A device batch's bytes on the host, once its copy is done. */
static uint8_t *fetch(const stoker_batch *b)
{
    uint8_t *h = malloc(stoker_batch_nbytes(b));
    T_ASSERT(h && stoker_batch_device(b) >= 0);
    T_ASSERT(cudaEventSynchronize((cudaEvent_t)stoker_batch_cuda_event(b)) == cudaSuccess);
    T_ASSERT(cudaMemcpy(h, stoker_batch_data(b), stoker_batch_nbytes(b), cudaMemcpyDeviceToHost) ==
             cudaSuccess);
    return h;
}

/* Next batch of both: the same outcome and ids; the values' differences added to d. */
static bool lenient; /* report a different outcome instead of failing (CUT_CLOSED) */

static int next_both(stoker_loader *cpu, stoker_loader *gpu, int32_t dtype, diff *d)
{
    stoker_batch *x = NULL, *y = NULL;
    const int ra = stoker_loader_next(cpu, &x), rb = stoker_loader_next(gpu, &y);
    if (lenient && ra != rb) {
        printf("outcomes differ: CPU alone %s, with the GPU %s\n", stoker_strerror(ra),
               stoker_strerror(rb));
        if (ra == 0)
            T_OK(stoker_batch_release(x));
        if (rb == 0)
            T_OK(stoker_batch_release(y));
        return ra;
    }
    T_EQ_RC(rb, ra);
    if (ra != 0) {
        if (ra != STOKER_END && !lenient)
            T_EQ_STR(stoker_loader_errmsg(gpu), stoker_loader_errmsg(cpu));
        return ra;
    }
    if (lenient) { /* a replacement on one side only: nothing more to compare */
        T_OK(stoker_batch_release(x));
        T_OK(stoker_batch_release(y));
        return 0;
    }
    const int64_t count = stoker_batch_count(x);
    T_EQ_INT(stoker_batch_count(y), count);
    T_ASSERT(memcmp(stoker_batch_ids(y), stoker_batch_ids(x), 8 * (size_t)count) == 0);
    T_EQ_INT(stoker_batch_nbytes(y), stoker_batch_nbytes(x));
    uint8_t *a = fetch(x), *b = fetch(y);
    const size_t n = stoker_batch_nbytes(x) / stoker_dtype_size(dtype);
    for (size_t i = 0; i < n; i++) {
        const double e = fabs(value(a, i, dtype) - value(b, i, dtype));
        T_ASSERT(e == e); /* no NaN */
        d->max = e > d->max ? e : d->max;
        d->sum += e;
    }
    d->n += n;
    free(a), free(b);
    T_OK(stoker_batch_release(x));
    T_OK(stoker_batch_release(y));
    return 0;
}

/* Two epochs of both loaders: returns the failed batches, adds to d. */
static int run_both(stoker_loader *cpu, stoker_loader *gpu, int32_t dtype, diff *d)
{
    int failed = 0;
    for (int e = 0; e < 2; e++) {
        int rc;
        while ((rc = next_both(cpu, gpu, dtype, d)) != STOKER_END)
            failed += rc != 0;
    }
    return failed;
}

static void check_pixels(const char *path, int32_t decoder, int32_t dtype, int32_t layout,
                         int32_t dct_scale, double max_bound, double mean_bound)
{
    stoker_loader *cpu = open_loader(path, STOKER_DECODER_CPU, dtype, layout, dct_scale, 0);
    stoker_loader *gpu = open_loader(path, decoder, dtype, layout, dct_scale, 0);
    diff d = {0};
    T_EQ_INT(run_both(cpu, gpu, dtype, &d), 0);
    const stoker_stats st = tl_stats(gpu);
    const double mean = d.sum / (double)d.n;
    printf("decoder %s, %s %s, dct_scale %s: GPU-decoded %lld of %lld read (retried %lld), "
           "difference to the CPU: max %.4f, mean %.5f\n",
           stoker_enum_name(STOKER_ENUM_DECODER, decoder), stoker_dtype_name(dtype),
           stoker_enum_name(STOKER_ENUM_LAYOUT, layout),
           stoker_enum_name(STOKER_ENUM_DCT_SCALE, dct_scale), (long long)st.gpu_decoded,
           (long long)st.records_read, (long long)st.gpu_retried, d.max, mean);
    T_ASSERT(st.gpu_decoded > 0);
    T_ASSERT(st.gpu_busy > 0);
    T_ASSERT(d.max <= max_bound);
    T_ASSERT(mean <= mean_bound);
    stoker_loader_destroy(cpu);
    stoker_loader_destroy(gpu);
}

/* Damage the GPU side does not see goes to the CPU first (a cut-short image, whose EOI is
 * missing; bytes changed after packing, which their CRC32C catches): the same outcome as on
 * the CPU alone. A cut-short image closed with an EOI reaches the hardware decoder, which
 * reports nothing: printed, as docs/SEMANTICS.md states it. */
static void check_corrupt(const char *bad, int how)
{
    lenient = how == CUT_CLOSED;
    for (int policy = 0; policy < 2; policy++) {
        const int32_t oc = policy ? STOKER_ON_CORRUPT_SKIP : STOKER_ON_CORRUPT_ERROR;
        stoker_loader *cpu = open_loader(bad, STOKER_DECODER_CPU, STOKER_DTYPE_UINT8,
                                         STOKER_LAYOUT_NHWC, STOKER_DCT_SCALE_NEVER, oc);
        stoker_loader *gpu = open_loader(bad, STOKER_DECODER_GPU, STOKER_DTYPE_UINT8,
                                         STOKER_LAYOUT_NHWC, STOKER_DCT_SCALE_NEVER, oc);
        diff d = {0};
        const int failed = run_both(cpu, gpu, STOKER_DTYPE_UINT8, &d);
        const stoker_stats a = tl_stats(cpu), b = tl_stats(gpu);
        static const char *const hows[] = {"cut short", "cut short and closed", "flipped bytes"};
        printf("damaged image (%s), on_corrupt %s: %d failed batches, skipped %lld (CPU alone: "
               "%lld), GPU decoded %lld, retried %lld\n",
               hows[how], policy ? "skip" : "error", failed, (long long)b.skipped,
               (long long)a.skipped, (long long)b.gpu_decoded, (long long)b.gpu_retried);
        T_ASSERT(b.gpu_decoded > 0);
        if (!lenient) {
            T_EQ_INT(failed, policy ? 0 : 2);
            T_EQ_INT(b.skipped, a.skipped);
            /* a replacement is made from (seed, epoch, its id) whoever finishes its batch
             * (the GPU worker too): its crop is the CPU-alone loader's */
            T_ASSERT(d.max <= 48);
            T_ASSERT(d.sum / (double)d.n <= 0.1);
        }
        stoker_loader_destroy(cpu);
        stoker_loader_destroy(gpu);
    }
}

#endif /* HAVE_CUDA_RUNTIME */

int main(void)
{
#ifndef HAVE_CUDA_RUNTIME
    printf("skip: built without the CUDA runtime\n");
    return T_SKIP;
#else
    const char *req = getenv("STOKER_TEST_REQUIRE_NVJPEG");
    const bool required = req && strcmp(req, "1") == 0;
    char *dir = t_mkdtemp("gpu_decode_loader");
    char good[512], bad[3][512];
    snprintf(good, sizeof good, "%s/good", dir);
    make_set(good, -1, CUT);
    for (int how = 0; how < 3; how++) {
        snprintf(bad[how], sizeof bad[how], "%s/bad%d", dir, how);
        make_set(bad[how], 42, how); /* a 4:2:0 image: the GPU's kind */
    }
    stoker_config *cfg = NULL;
    T_OK(stoker_config_create(&cfg));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DEVICE, 0));
    stoker_loader *l = NULL;
    T_OK(stoker_loader_create(&l, good, cfg));
    stoker_config_destroy(cfg);
    const stoker_stats st = tl_stats(l);
    stoker_loader_destroy(l);
    if (st.decoder == STOKER_DECODER_CPU) {
        printf("%s: %s\n", required ? "FAIL" : "skip", st.decoder_note);
        t_rmrf(dir);
        return required ? 1 : T_SKIP;
    }
    const int32_t U8 = STOKER_DTYPE_UINT8, NHWC = STOKER_LAYOUT_NHWC, NCHW = STOKER_LAYOUT_NCHW;
    check_pixels(good, STOKER_DECODER_GPU, U8, NHWC, STOKER_DCT_SCALE_NEVER, 48, 0.1);
    /* auto's pixels with half of each batch on the GPU: this test's consumer need not wait
     * for busy workers, so left to itself the split would keep the CPU alone */
    stoker__plan_pin_gpu_share(0.5);
    check_pixels(good, STOKER_DECODER_AUTO, U8, NHWC, STOKER_DCT_SCALE_NEVER, 48, 0.1);
    check_pixels(good, STOKER_DECODER_GPU, U8, NHWC, STOKER_DCT_SCALE_TRAIN, 255, 3.0);
    check_pixels(good, STOKER_DECODER_GPU, STOKER_DTYPE_FLOAT16, NCHW, STOKER_DCT_SCALE_NEVER,
                 48 / (255 * 0.224), 0.1 / (255 * 0.224));
    check_pixels(good, STOKER_DECODER_AUTO, STOKER_DTYPE_FLOAT32, NHWC, STOKER_DCT_SCALE_TRAIN,
                 255 / (255 * 0.224), 3.0 / (255 * 0.224));
    stoker__plan_pin_gpu_share(0);
    for (int how = 0; how < 3; how++)
        check_corrupt(bad[how], how);
    t_rmrf(dir);
    free(dir);
    printf("ok\n");
    return 0;
#endif
}
