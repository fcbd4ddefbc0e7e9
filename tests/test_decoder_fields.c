/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU decode stage's host side for samples of several fields, where there is no GPU (the
 * stage's test hook standing in for nvJPEG, as in test_decoder_route): a sample's image field
 * is routed once the worker has made its other fields (a mask, boxes and their class ids
 * through the image's geometry, a label), and is decoded by the CPU when the decoder refuses
 * or fails it. Every batch, every field of it, must equal the batch of a loader that decodes
 * on the CPU alone; a damaged image is replaced or fails as there; a sample that fails in its
 * other fields (an HDF5 file's box outside its image) is never routed and is replaced or
 * fails as there too; a decoder that takes every image (nothing left for the CPU) leaves
 * the GPU worker to finish and repair batches, whose samples must follow their own batch's
 * epoch; the counts say what went where, each image decoded once; and the plan says when the
 * stage cannot take a batch's images. The real decoder's pixels are checked on the GPU
 * machine (test_gpu_decode_fields). */
#include "fields_util.h"
#include "jpegutil.h"
#include "test_loader_util.h"

#include "loader/plan.h"

#include <time.h>

#define N_RECORDS 40
#define W 56
#define H 44
#define CROP 24
#define BATCH 4
#define NF T_DETECTION_FIELDS /* image, mask, boxes, classes, label */
#define MAX_BOXES 3

static const t_jpeg_kind KINDS[] = {
    {"420", 3, 2, 2, 0, 0, 0},  {"444", 3, 1, 1, 0, 0, 0},  {"gray", 1, 1, 1, 0, 0, 0},
    {"prog", 3, 2, 2, 1, 0, 0}, {"cmyk", 4, 1, 1, 0, 0, 1},
};
#define N_KINDS 5
#define N_ELIGIBLE_KINDS 3 /* the first three: the hardware decoder's kinds */

/* Sample id's image, W x H, of kind id % 5 (eligible kinds only: id % 3); `bad`: its first
 * half and an EOI, so that its header and end look whole (it is routed) and the CPU finds the
 * data cut short. free() the result. */
static uint8_t *image_of(int64_t id, bool eligible, bool bad, size_t *n)
{
    const size_t k = (size_t)id % (eligible ? N_ELIGIBLE_KINDS : N_KINDS);
    uint8_t *j = t_make_jpeg(&KINDS[k], W, H, 85, (uint64_t)id + 1, n);
    if (bad) {
        *n /= 2;
        j[*n - 2] = 0xFF, j[*n - 1] = 0xD9;
    }
    return j;
}

/* Sample id's id % 4 boxes (0 .. 3), within the image, some small enough that a crop leaves
 * them without area (then dropped with their class ids); returns their number. */
static int boxes_of(int64_t id, float b[MAX_BOXES][4], int64_t cls[MAX_BOXES])
{
    const int n = (int)(id % 4);
    for (int k = 0; k < n; k++) {
        b[k][0] = (float)((id * 7 + k * 13) % (W - 8));
        b[k][1] = (float)((id * 5 + k * 11) % (H - 8));
        b[k][2] = b[k][0] + 4.0f + (float)(k * 3 % 5);
        b[k][3] = b[k][1] + 4.0f + (float)(k % 4);
        cls[k] = id * 10 + k;
    }
    return n;
}

static void mask_of(int64_t id, uint8_t m[H][W])
{
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            m[y][x] = (uint8_t)((x / 4 * 3 + y / 4 * 5 + id) % 7);
}

/* A packed data set of N_RECORDS samples: image, mask, boxes, classes, label (checked, as a
 * pack's are; `bad` >= 0 vouches falsely for a damaged image). */
static void make_packed(const char *path, bool eligible, int64_t bad)
{
    stoker_writer *w = t_detection_writer(path, H, W);
    static uint8_t mask[H][W];
    for (int64_t id = 0; id < N_RECORDS; id++) {
        size_t n = 0;
        uint8_t *img = image_of(id, eligible, id == bad, &n);
        float boxes[MAX_BOXES][4];
        int64_t cls[MAX_BOXES], label = id % 3;
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
                                  const char *h5_fields, const char *fields)
{
    stoker_config *cfg = NULL;
    T_OK(stoker_config_create(&cfg));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_TRANSFORM, STOKER_TRANSFORM_TRAIN));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SIZE, CROP));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_BATCH_SIZE, BATCH));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_THREADS, 2));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DEVICE, -1));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SEED, 11));
    /* other crop ranges than the defaults, and torchvision's box rule: both sides take them */
    T_OK(stoker_config_set_float(cfg, STOKER_OPT_SCALE_MIN, 0.25));
    T_OK(stoker_config_set_float(cfg, STOKER_OPT_RATIO_MIN, 0.5));
    T_OK(stoker_config_set_float(cfg, STOKER_OPT_RATIO_MAX, 2.0));
    T_OK(stoker_config_set_float(cfg, STOKER_OPT_MIN_BOX_SIZE, 1.0));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DECODER, decoder));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_ON_CORRUPT, on_corrupt));
    if (h5_fields)
        T_OK(stoker_config_set_string(cfg, STOKER_OPT_H5_FIELDS, h5_fields));
    if (fields)
        T_OK(stoker_config_set_string(cfg, STOKER_OPT_FIELDS, fields));
    stoker_loader *l = NULL;
    if (stoker_loader_create(&l, path, cfg) < 0)
        T_FAIL("%s: %s", path, l ? stoker_loader_errmsg(l) : "no loader");
    stoker_config_destroy(cfg);
    return l;
}

/* The statistics once read-ahead has stopped (the ring is full while nothing is taken). */
static stoker_stats settled_stats(const stoker_loader *l)
{
    stoker_stats st = tl_stats(l), was;
    do {
        was = st;
        const struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
        st = tl_stats(l);
    } while (st.records_read != was.records_read || st.cpu_decoded != was.cpu_decoded);
    return st;
}

static stoker_field_view field(const stoker_batch *b, int32_t i)
{
    stoker_field_view v;
    memset(&v, 0, sizeof v);
    v.struct_size = sizeof v;
    T_OK(stoker_batch_field(b, i, NULL, &v));
    return v;
}

/* Whether same_next leaves the image out: the test hook's taking decoder writes none. */
static bool but_image;

/* Takes the next batch of both loaders: the same outcome (the same message), the same ids,
 * and every field the same, byte for byte (a ragged field's offsets too). Returns the
 * outcome. */
static int same_next(stoker_loader *a, stoker_loader *b)
{
    stoker_batch *x = NULL, *y = NULL;
    const int ra = stoker_loader_next(a, &x), rb = stoker_loader_next(b, &y);
    T_EQ_RC(rb, ra);
    if (ra != 0) {
        if (ra != STOKER_END)
            T_EQ_STR(stoker_loader_errmsg(b), stoker_loader_errmsg(a));
        return ra;
    }
    const int64_t count = stoker_batch_count(x);
    T_EQ_INT(stoker_batch_count(y), count);
    T_ASSERT(memcmp(stoker_batch_ids(y), stoker_batch_ids(x), 8 * (size_t)count) == 0);
    const int32_t nf = stoker_batch_num_fields(x);
    T_ASSERT(nf >= 4);
    T_EQ_INT(stoker_batch_num_fields(y), nf);
    for (int32_t i = 0; i < nf; i++) {
        const stoker_field_view u = field(x, i), v = field(y, i);
        T_EQ_STR(v.name, u.name);
        T_EQ_INT(v.nbytes, u.nbytes);
        T_ASSERT(memcmp(v.shape, u.shape, sizeof u.shape) == 0);
        if (but_image && strcmp(u.name, "image") == 0)
            continue;
        if (strcmp(u.name, "image.size") == 0) /* every image is W x H: a replacement's too */
            for (int64_t j = 0; j < count; j++)
                T_ASSERT(((const int64_t *)u.data)[2 * j] == H &&
                         ((const int64_t *)u.data)[2 * j + 1] == W);
        if (u.nbytes && memcmp(v.data, u.data, u.nbytes) != 0)
            T_FAIL("field \"%s\" of the batch of ids %" PRId64 "..: differs", u.name,
                   stoker_batch_ids(x)[0]);
        T_ASSERT((u.host_offsets == NULL) == (v.host_offsets == NULL));
        if (u.host_offsets)
            T_ASSERT(memcmp(v.host_offsets, u.host_offsets, (size_t)(count + 1) * 8) == 0);
    }
    T_OK(stoker_batch_release(x));
    T_OK(stoker_batch_release(y));
    return 0;
}

/* `epochs` whole epochs from both; returns the failed batches. */
static int compare_epochs(stoker_loader *cpu, stoker_loader *gpu, int epochs)
{
    int failed = 0;
    for (int e = 0; e < epochs; e++) {
        int rc;
        while ((rc = same_next(cpu, gpu)) != STOKER_END)
            failed += rc != 0;
    }
    return failed;
}

/* The refusing decoder under auto (a share pinned: tiny images keep no worker busy): every
 * routed image comes back and the CPU decodes it; the batches, all fields, are the CPU's;
 * each image is decoded, and counted, once (a routed sample's other fields are no decode). */
static void check_refused(const char *mixed)
{
    stoker__plan_emulate_gdec(STOKER__GDEC_REFUSE);
    stoker__plan_pin_gpu_share(0.5);
    stoker_loader *cpu =
        open_loader(mixed, STOKER_DECODER_CPU, STOKER_ON_CORRUPT_ERROR, NULL, NULL);
    stoker_loader *gpu =
        open_loader(mixed, STOKER_DECODER_AUTO, STOKER_ON_CORRUPT_ERROR, NULL, NULL);
    stoker__plan_pin_gpu_share(0);
    int64_t v = 0;
    T_OK(stoker_loader_get_int(gpu, STOKER_OPT_DECODER, &v));
    T_EQ_INT(v, STOKER_DECODER_AUTO);
    T_EQ_INT(compare_epochs(cpu, gpu, 3), 0);
    const stoker_stats st = settled_stats(gpu);
    printf("fields, refused: read %lld, cpu %lld, retried %lld, share %.3f\n",
           (long long)st.records_read, (long long)st.cpu_decoded, (long long)st.gpu_retried,
           st.gpu_share);
    T_ASSERT(st.gpu_retried > 0);
    T_EQ_INT(st.gpu_decoded, 0);
    T_EQ_INT(st.cpu_decoded, st.records_read);
    stoker_loader_destroy(cpu);
    stoker_loader_destroy(gpu);
    stoker__plan_emulate_gdec(STOKER__GDEC_REAL);
}

/* Decoder gpu: every image the hardware decoder takes is routed, and only those (the
 * progressive and CMYK ones stay on the CPU). */
static void check_routing(const char *mixed)
{
    stoker__plan_emulate_gdec(STOKER__GDEC_REFUSE);
    stoker_loader *l = open_loader(mixed, STOKER_DECODER_GPU, STOKER_ON_CORRUPT_ERROR, NULL, NULL);
    stoker_batch *b = NULL;
    for (int i = 0; i < N_RECORDS / BATCH; i++) {
        T_OK(stoker_loader_next(l, &b));
        T_OK(stoker_batch_release(b));
    }
    const stoker_stats st = settled_stats(l);
    printf("fields, decoder gpu: read %lld, cpu %lld, retried %lld\n", (long long)st.records_read,
           (long long)st.cpu_decoded, (long long)st.gpu_retried);
    const int64_t eligible = N_RECORDS * N_ELIGIBLE_KINDS / N_KINDS; /* per epoch */
    T_EQ_INT(st.decoder, STOKER_DECODER_GPU);
    T_ASSERT(st.gpu_retried >= eligible);
    /* of the records read, those of the ineligible kinds were never routed */
    T_ASSERT(st.gpu_retried <= st.records_read - (st.records_read / N_KINDS) * 2);
    T_EQ_INT(st.cpu_decoded, st.records_read);
    stoker_loader_destroy(l);
    stoker__plan_emulate_gdec(STOKER__GDEC_REAL);
}

/* A decoder whose every batch fails: retried on the CPU, then the fallback; the CPU's batches
 * throughout. */
static void check_fallback(const char *mixed)
{
    stoker__plan_emulate_gdec(STOKER__GDEC_FAIL);
    stoker_loader *cpu =
        open_loader(mixed, STOKER_DECODER_CPU, STOKER_ON_CORRUPT_ERROR, NULL, NULL);
    stoker_loader *gpu =
        open_loader(mixed, STOKER_DECODER_GPU, STOKER_ON_CORRUPT_ERROR, NULL, NULL);
    T_EQ_INT(compare_epochs(cpu, gpu, 3), 0);
    const stoker_stats st = tl_stats(gpu);
    printf("fields, failing: retried %lld, fallbacks %lld\n", (long long)st.gpu_retried,
           (long long)st.gpu_fallbacks);
    T_EQ_INT(st.gpu_fallbacks, 1);
    T_ASSERT(st.gpu_retried > 0);
    stoker_loader_destroy(cpu);
    stoker_loader_destroy(gpu);
    stoker__plan_emulate_gdec(STOKER__GDEC_REAL);
}

/* A damaged image, routed by its header: corrupt on the CPU's retry, so ERROR fails its batch
 * with the CPU's message (naming the field) and SKIP replaces the sample whole, every field
 * (the image's stored size too), as on the CPU alone. */
static void check_corrupt(const char *bad)
{
    static const char *const every = "label,classes,boxes,mask,image.size,image";
    stoker__plan_emulate_gdec(STOKER__GDEC_REFUSE);
    for (int policy = 0; policy < 2; policy++) {
        const int32_t oc = policy ? STOKER_ON_CORRUPT_SKIP : STOKER_ON_CORRUPT_ERROR;
        stoker_loader *cpu = open_loader(bad, STOKER_DECODER_CPU, oc, NULL, every);
        stoker_loader *gpu = open_loader(bad, STOKER_DECODER_GPU, oc, NULL, every);
        T_EQ_INT(stoker_loader_num_fields(gpu), NF + 1);
        T_EQ_INT(compare_epochs(cpu, gpu, 2), policy ? 0 : 2);
        if (!policy)
            T_CONTAINS(stoker_loader_errmsg(gpu), "field \"image\"");
        const stoker_stats a = tl_stats(cpu), b = tl_stats(gpu);
        T_EQ_INT(b.skipped, a.skipped);
        T_EQ_INT(b.skipped, policy ? 2 : 0);
        T_ASSERT(b.gpu_retried > 0);
        stoker_loader_destroy(cpu);
        stoker_loader_destroy(gpu);
    }
    stoker__plan_emulate_gdec(STOKER__GDEC_REAL);
}

/* Where the stage cannot take the batch's images: decoder gpu is refused, naming the cause;
 * auto decodes on the CPU and says why. */
static void check_no_image(const char *mixed)
{
    stoker__plan_emulate_gdec(STOKER__GDEC_REFUSE);
    stoker_config *cfg = NULL;
    T_OK(stoker_config_create(&cfg));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SIZE, CROP));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DEVICE, -1));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DECODER, STOKER_DECODER_GPU));
    T_OK(stoker_config_set_string(cfg, STOKER_OPT_FIELDS, "label"));
    stoker_loader *l = NULL;
    T_EQ_RC(stoker_loader_create(&l, mixed, cfg), STOKER_E_UNSUPPORTED);
    T_CONTAINS(stoker_loader_errmsg(l), mixed);
    T_CONTAINS(stoker_loader_errmsg(l), "the batch delivers no image");
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
    l = open_loader(mixed, STOKER_DECODER_AUTO, STOKER_ON_CORRUPT_ERROR, NULL, "label");
    const stoker_stats st = tl_stats(l);
    T_EQ_INT(st.decoder, STOKER_DECODER_CPU);
    T_CONTAINS(st.decoder_note, "the batch delivers no image");
    stoker_loader_destroy(l);
    stoker__plan_emulate_gdec(STOKER__GDEC_REAL);
}

#ifdef STOKER_HAVE_HDF5
/* images (eligible kinds), boxes, classes and labels as h5py writes them; sample `outside`
 * has a box reaching past its image's right edge: corrupt when its boxes are checked. */
static void make_h5(const char *path, int64_t outside)
{
    hvl_t imgs[N_RECORDS], boxes[N_RECORDS], classes[N_RECORDS];
    int64_t labels[N_RECORDS];
    for (int64_t id = 0; id < N_RECORDS; id++) {
        size_t n = 0;
        imgs[id].p = image_of(id, true, false, &n);
        imgs[id].len = n;
        float *b = calloc(MAX_BOXES * 4 + 4, sizeof *b);
        int64_t *c = calloc(MAX_BOXES + 1, sizeof *c);
        T_ASSERT(b && c);
        int nb = boxes_of(id, (float(*)[4])b, c);
        if (id == outside) {
            const float past[4] = {W - 10.0f, 2.0f, W + 3.0f, 12.0f};
            memcpy(b + 4 * nb, past, sizeof past);
            c[nb++] = 99;
        }
        boxes[id] = (hvl_t){(size_t)nb * 4, b};
        classes[id] = (hvl_t){(size_t)nb, c};
        labels[id] = id % 3;
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

/* A decoder that takes every routed image, as a real one that leaves nothing for the CPU:
 * the GPU worker finishes those batches itself, and under SKIP repairs the one holding the
 * sample that failed in its boxes, laying the batch out again and making every sample anew
 * (its ragged fields changed size). Those samples' fields must follow (seed, epoch, id) of
 * their own batch, in every epoch, as the CPU-only loader's do; the images, which the hook
 * does not write, are left out of the comparison. */
static void check_taken(const char *path, const char *h5)
{
    stoker__plan_emulate_gdec(STOKER__GDEC_TAKE);
    but_image = true;
    stoker_loader *cpu = open_loader(path, STOKER_DECODER_CPU, STOKER_ON_CORRUPT_SKIP, h5, NULL);
    stoker_loader *gpu = open_loader(path, STOKER_DECODER_GPU, STOKER_ON_CORRUPT_SKIP, h5, NULL);
    T_EQ_INT(compare_epochs(cpu, gpu, 3), 0);
    const stoker_stats a = tl_stats(cpu), b = tl_stats(gpu);
    printf("HDF5 fields, every image taken: GPU %lld, retried %lld, skipped %lld\n",
           (long long)b.gpu_decoded, (long long)b.gpu_retried, (long long)b.skipped);
    T_ASSERT(b.gpu_decoded > 0);
    T_EQ_INT(b.gpu_retried, 0);
    T_EQ_INT(b.skipped, a.skipped);
    T_EQ_INT(b.skipped, 3);
    stoker_loader_destroy(cpu);
    stoker_loader_destroy(gpu);
    but_image = false;
    stoker__plan_emulate_gdec(STOKER__GDEC_REAL);
}

/* An HDF5 file's samples (no checksum: decoder gpu routes them, auto would not): one whose
 * box lies outside its image fails in its boxes, before its image could be routed, and is
 * replaced (SKIP) or fails its batch (ERROR) as on the CPU, with the same message; every
 * batch, all fields, the CPU's. */
static void check_hdf5(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/fields.h5", dir);
    make_h5(path, 13);
    const char *h5 = "image=images:jpeg, boxes=boxes:boxes_of=image, "
                     "classes=classes:rows_of=boxes, label=labels";
    stoker__plan_emulate_gdec(STOKER__GDEC_REFUSE);
    for (int policy = 0; policy < 2; policy++) {
        const int32_t oc = policy ? STOKER_ON_CORRUPT_SKIP : STOKER_ON_CORRUPT_ERROR;
        stoker_loader *cpu = open_loader(path, STOKER_DECODER_CPU, oc, h5, NULL);
        stoker_loader *gpu = open_loader(path, STOKER_DECODER_GPU, oc, h5, NULL);
        int64_t v = 0;
        T_OK(stoker_loader_get_int(gpu, STOKER_OPT_DECODER, &v));
        T_EQ_INT(v, STOKER_DECODER_GPU);
        T_EQ_INT(compare_epochs(cpu, gpu, 2), policy ? 0 : 2);
        if (!policy) {
            T_CONTAINS(stoker_loader_errmsg(gpu), "record 13");
            T_CONTAINS(stoker_loader_errmsg(gpu), "field \"boxes\"");
        }
        const stoker_stats a = tl_stats(cpu), b = settled_stats(gpu);
        printf("HDF5 fields (%s): read %lld, cpu %lld, retried %lld, skipped %lld\n",
               policy ? "skip" : "error", (long long)b.records_read, (long long)b.cpu_decoded,
               (long long)b.gpu_retried, (long long)b.skipped);
        T_EQ_INT(b.skipped, a.skipped);
        T_EQ_INT(b.skipped, policy ? 2 : 0);
        T_ASSERT(b.gpu_retried > 0);
        T_ASSERT(b.gpu_retried <= b.cpu_decoded); /* each retry is one of the CPU's decodes */
        stoker_loader_destroy(cpu);
        stoker_loader_destroy(gpu);
    }
    stoker__plan_emulate_gdec(STOKER__GDEC_REAL);
    check_taken(path, h5);
}

#else
static void check_hdf5(const char *dir)
{
    (void)dir;
    printf("HDF5 samples: skipped (built without HDF5)\n");
}
#endif

int main(void)
{
    char *dir = t_mkdtemp("decoder_fields");
    char mixed[512], bad[512];
    snprintf(mixed, sizeof mixed, "%s/mixed", dir);
    snprintf(bad, sizeof bad, "%s/bad", dir);
    make_packed(mixed, false, -1);
    make_packed(bad, true, 13);
    check_no_image(mixed);
    check_refused(mixed);
    check_routing(mixed);
    check_fallback(mixed);
    check_corrupt(bad);
    check_hdf5(dir);
    t_rmrf(dir);
    free(dir);
    printf("ok\n");
    return 0;
}
