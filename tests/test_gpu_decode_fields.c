/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU decode stage on a real GPU, for samples of several fields: a loader whose hardware
 * decoder takes the samples' images delivers the CPU-only loader's batches, the images within
 * the decoders' rounding and every other field (a mask and boxes through the image's
 * geometry, their class ids, a label, the ragged offsets) exactly, on the device. An HDF5
 * file's sample whose boxes fail their check is replaced whole under SKIP, and its
 * replacement's image is the replacement's own: a GPU image of the failed sample written over
 * it would differ by whole pixels. Exits 77 (skip) without a GPU with a hardware JPEG decoder,
 * unless STOKER_TEST_REQUIRE_NVJPEG=1. */
#include "fields_util.h"
#include "jpegutil.h"
#include "loader/plan.h"

#include "test_loader_util.h"

#include <math.h>

#if defined(__has_include)
#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
#define HAVE_CUDA_RUNTIME 1
#endif
#endif

#ifdef HAVE_CUDA_RUNTIME /* all of it: main skips without the runtime's header */

#define N_RECORDS 64
#define BATCH 16
#define SIZE 160
#define W 320
#define H 240
#define NF T_DETECTION_FIELDS /* image, mask, boxes, classes, label */
#define MAX_BOXES 4

static const t_jpeg_kind KINDS[] = {
    {"420", 3, 2, 2, 0, 0, 0},  {"422", 3, 2, 1, 0, 0, 0},  {"444", 3, 1, 1, 0, 0, 0},
    {"gray", 1, 1, 1, 0, 0, 0}, {"prog", 3, 2, 2, 1, 0, 0},
};

static uint8_t *image_of(int64_t id, size_t *n)
{
    return t_make_jpeg(&KINDS[id % 5], W, H, 88, (uint64_t)id + 3, n);
}

/* Sample id's id % 5 boxes, some small enough that a crop leaves them without area. */
static int boxes_of(int64_t id, float b[MAX_BOXES + 1][4], int64_t cls[MAX_BOXES + 1])
{
    const int n = (int)(id % 5);
    for (int k = 0; k < n; k++) {
        b[k][0] = (float)((id * 37 + k * 71) % (W - 60));
        b[k][1] = (float)((id * 23 + k * 53) % (H - 60));
        b[k][2] = b[k][0] + 3.0f + (float)((id + k) % 4) * 18.5f;
        b[k][3] = b[k][1] + 2.5f + (float)((id + 2 * k) % 3) * 19.0f;
        cls[k] = id * 10 + k;
    }
    return n;
}

static void mask_of(int64_t id, uint8_t m[H][W])
{
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            m[y][x] = (uint8_t)((x / 16 + y / 16 * 3 + id) % 21);
}

static void make_packed(const char *path)
{
    stoker_writer *w = t_detection_writer(path, H, W);
    static uint8_t mask[H][W];
    for (int64_t id = 0; id < N_RECORDS; id++) {
        size_t n = 0;
        uint8_t *img = image_of(id, &n);
        float boxes[MAX_BOXES + 1][4];
        int64_t cls[MAX_BOXES + 1], label = id % 10;
        const int nb = boxes_of(id, boxes, cls);
        mask_of(id, mask);
        const stoker_field_value v[NF] = {
            {img, n},
            {mask, sizeof mask},
            {boxes, (uint64_t)nb * sizeof boxes[0]},
            {cls, (uint64_t)nb * sizeof cls[0]},
            {&label, sizeof label},
        };
        if (stoker_writer_add_sample(w, v, NF, NULL))
            T_FAIL("add_sample %" PRId64 ": %s", id, stoker_writer_errmsg(w));
        free(img);
    }
    T_OK(stoker_writer_finish(w));
    stoker_writer_destroy(w);
}

static stoker_loader *open_loader(const char *path, int32_t decoder, int32_t on_corrupt,
                                  const char *h5_fields)
{
    stoker_config *cfg = NULL;
    T_OK(stoker_config_create(&cfg));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_TRANSFORM, STOKER_TRANSFORM_TRAIN));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SIZE, SIZE));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DTYPE, STOKER_DTYPE_UINT8));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_LAYOUT, STOKER_LAYOUT_NHWC));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DCT_SCALE, STOKER_DCT_SCALE_NEVER));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_BATCH_SIZE, BATCH));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_THREADS, 4));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DEVICE, 1));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SEED, 5));
    /* other crop ranges than the defaults, and torchvision's box rule: both sides take them */
    T_OK(stoker_config_set_float(cfg, STOKER_OPT_SCALE_MIN, 0.25));
    T_OK(stoker_config_set_float(cfg, STOKER_OPT_RATIO_MIN, 0.5));
    T_OK(stoker_config_set_float(cfg, STOKER_OPT_RATIO_MAX, 2.0));
    T_OK(stoker_config_set_float(cfg, STOKER_OPT_MIN_BOX_SIZE, 1.0));
    T_OK(stoker_config_set_float(cfg, STOKER_OPT_VFLIP, 0.5));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DECODER, decoder));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_ON_CORRUPT, on_corrupt));
    if (h5_fields)
        T_OK(stoker_config_set_string(cfg, STOKER_OPT_H5_FIELDS, h5_fields));
    stoker_loader *l = NULL;
    if (stoker_loader_create(&l, path, cfg) < 0)
        T_FAIL("%s: %s", path, l ? stoker_loader_errmsg(l) : "no loader");
    stoker_config_destroy(cfg);
    return l;
}

typedef struct diff {
    double max, sum;
    uint64_t n;
} diff;

/* Field i of batch b, its values copied to the host (*nbytes of them). free() the result. */
static uint8_t *fetch_field(const stoker_batch *b, int32_t i, stoker_field_view *v)
{
    memset(v, 0, sizeof *v);
    v->struct_size = sizeof *v;
    T_OK(stoker_batch_field(b, i, NULL, v));
    T_EQ_INT(v->device, 0);
    uint8_t *h = malloc(v->nbytes ? v->nbytes : 1);
    T_ASSERT(h);
    T_ASSERT(cudaEventSynchronize((cudaEvent_t)stoker_batch_cuda_event(b)) == cudaSuccess);
    if (v->nbytes)
        T_ASSERT(cudaMemcpy(h, v->data, v->nbytes, cudaMemcpyDeviceToHost) == cudaSuccess);
    return h;
}

/* Next batch of both: the same outcome and ids; every field but the image equal, the image's
 * differences added to d. */
static int next_both(stoker_loader *cpu, stoker_loader *gpu, diff *d)
{
    stoker_batch *x = NULL, *y = NULL;
    const int ra = stoker_loader_next(cpu, &x), rb = stoker_loader_next(gpu, &y);
    T_EQ_RC(rb, ra);
    if (ra != 0) {
        if (ra != STOKER_END)
            T_EQ_STR(stoker_loader_errmsg(gpu), stoker_loader_errmsg(cpu));
        return ra;
    }
    const int64_t count = stoker_batch_count(x);
    T_EQ_INT(stoker_batch_count(y), count);
    T_ASSERT(memcmp(stoker_batch_ids(y), stoker_batch_ids(x), 8 * (size_t)count) == 0);
    const int32_t nf = stoker_batch_num_fields(x);
    T_EQ_INT(stoker_batch_num_fields(y), nf);
    for (int32_t i = 0; i < nf; i++) {
        stoker_field_view u, v;
        uint8_t *a = fetch_field(x, i, &u), *b = fetch_field(y, i, &v);
        T_EQ_STR(v.name, u.name);
        T_EQ_INT(v.nbytes, u.nbytes);
        if (strcmp(u.name, "image") == 0) {
            for (uint64_t k = 0; k < u.nbytes; k++) {
                const double e = fabs((double)a[k] - (double)b[k]);
                d->max = e > d->max ? e : d->max;
                d->sum += e;
            }
            d->n += u.nbytes;
        } else if (u.nbytes && memcmp(a, b, u.nbytes) != 0) {
            T_FAIL("field \"%s\" of the batch of ids %" PRId64 "..: differs", u.name,
                   stoker_batch_ids(x)[0]);
        }
        if (u.host_offsets)
            T_ASSERT(memcmp(v.host_offsets, u.host_offsets, (size_t)(count + 1) * 8) == 0);
        free(a), free(b);
    }
    T_OK(stoker_batch_release(x));
    T_OK(stoker_batch_release(y));
    return 0;
}

static int run_both(stoker_loader *cpu, stoker_loader *gpu, diff *d)
{
    int failed = 0;
    for (int e = 0; e < 2; e++) {
        int rc;
        while ((rc = next_both(cpu, gpu, d)) != STOKER_END)
            failed += rc != 0;
    }
    return failed;
}

static void check_samples(const char *path, int32_t decoder, int32_t on_corrupt,
                          const char *h5_fields, int expect_failed, int64_t expect_skipped)
{
    stoker_loader *cpu = open_loader(path, STOKER_DECODER_CPU, on_corrupt, h5_fields);
    stoker_loader *gpu = open_loader(path, decoder, on_corrupt, h5_fields);
    diff d = {0};
    T_EQ_INT(run_both(cpu, gpu, &d), expect_failed);
    const stoker_stats a = tl_stats(cpu), st = tl_stats(gpu);
    const double mean = d.n ? d.sum / (double)d.n : 0;
    printf("%s, decoder %s: GPU-decoded %lld of %lld read (retried %lld), skipped %lld; image "
           "difference to the CPU: max %.1f, mean %.4f; other fields equal\n",
           h5_fields ? "HDF5 samples" : "packed samples",
           stoker_enum_name(STOKER_ENUM_DECODER, decoder), (long long)st.gpu_decoded,
           (long long)st.records_read, (long long)st.gpu_retried, (long long)st.skipped, d.max,
           mean);
    T_ASSERT(st.gpu_decoded > 0);
    T_EQ_INT(st.skipped, a.skipped);
    T_EQ_INT(st.skipped, expect_skipped);
    T_ASSERT(d.max <= 48);
    T_ASSERT(mean <= 0.1);
    stoker_loader_destroy(cpu);
    stoker_loader_destroy(gpu);
}

#ifdef STOKER_HAVE_HDF5
/* images, boxes, classes and labels as h5py writes them; sample `outside` has a box past its
 * image's right edge, so it fails in its boxes. */
static void make_h5(const char *path, int64_t outside)
{
    hvl_t imgs[N_RECORDS], boxes[N_RECORDS], classes[N_RECORDS];
    int64_t labels[N_RECORDS];
    for (int64_t id = 0; id < N_RECORDS; id++) {
        size_t n = 0;
        imgs[id].p = image_of(id, &n);
        imgs[id].len = n;
        float(*b)[4] = calloc(MAX_BOXES + 1, sizeof *b);
        int64_t *c = calloc(MAX_BOXES + 1, sizeof *c);
        T_ASSERT(b && c);
        int nb = boxes_of(id, b, c);
        if (id == outside) {
            const float past[4] = {W - 30.0f, 10.0f, W + 4.0f, 60.0f};
            memcpy(b[nb], past, sizeof past);
            c[nb++] = 99;
        }
        boxes[id] = (hvl_t){(size_t)nb * 4, b};
        classes[id] = (hvl_t){(size_t)nb, c};
        labels[id] = id % 10;
    }
    const hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    T_ASSERT(f >= 0);
    t_h5_vlen(f, "images", H5T_STD_U8LE, H5T_NATIVE_UINT8, N_RECORDS, imgs);
    t_h5_vlen(f, "boxes", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, N_RECORDS, boxes);
    t_h5_vlen(f, "classes", H5T_STD_I64LE, H5T_NATIVE_INT64, N_RECORDS, classes);
    t_h5_write(f, "labels", H5T_STD_I64LE, H5T_NATIVE_INT64, N_RECORDS, labels);
    T_ASSERT(H5Fclose(f) >= 0);
    for (int i = 0; i < N_RECORDS; i++) {
        free(imgs[i].p);
        free(boxes[i].p);
        free(classes[i].p);
    }
}

static void check_hdf5(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/fields.h5", dir);
    make_h5(path, 21);
    const char *h5 = "image=images:jpeg, boxes=boxes:boxes_of=image, "
                     "classes=classes:rows_of=boxes, label=labels";
    check_samples(path, STOKER_DECODER_GPU, STOKER_ON_CORRUPT_SKIP, h5, 0, 2);
    check_samples(path, STOKER_DECODER_GPU, STOKER_ON_CORRUPT_ERROR, h5, 2, 0);
}
#else
static void check_hdf5(const char *dir)
{
    (void)dir;
    printf("HDF5 samples: skipped (built without HDF5)\n");
}
#endif

#endif /* HAVE_CUDA_RUNTIME */

int main(void)
{
#ifndef HAVE_CUDA_RUNTIME
    printf("skip: built without the CUDA runtime\n");
    return T_SKIP;
#else
    const char *req = getenv("STOKER_TEST_REQUIRE_NVJPEG");
    const bool required = req && strcmp(req, "1") == 0;
    char *dir = t_mkdtemp("gpu_decode_fields");
    char packed[512];
    snprintf(packed, sizeof packed, "%s/packed", dir);
    make_packed(packed);
    stoker_config *cfg = NULL;
    T_OK(stoker_config_create(&cfg));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DEVICE, 0));
    stoker_loader *l = NULL;
    T_OK(stoker_loader_create(&l, packed, cfg));
    stoker_config_destroy(cfg);
    const stoker_stats st = tl_stats(l);
    stoker_loader_destroy(l);
    if (st.decoder == STOKER_DECODER_CPU) {
        printf("%s: %s\n", required ? "FAIL" : "skip", st.decoder_note);
        t_rmrf(dir);
        return required ? 1 : T_SKIP;
    }
    check_samples(packed, STOKER_DECODER_GPU, STOKER_ON_CORRUPT_ERROR, NULL, 0, 0);
    stoker__plan_pin_gpu_share(0.5); /* auto's mixed batches, which the split would not make */
    check_samples(packed, STOKER_DECODER_AUTO, STOKER_ON_CORRUPT_ERROR, NULL, 0, 0);
    stoker__plan_pin_gpu_share(0);
    check_hdf5(dir);
    t_rmrf(dir);
    free(dir);
    printf("ok\n");
    return 0;
#endif
}
