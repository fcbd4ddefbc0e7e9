/* SPDX-License-Identifier: Apache-2.0 */
/* JPEG records through the loader: a data set of JPEGs of several sizes and kinds
 * (baseline 4:2:0 and 4:4:4, grayscale, progressive, CMYK) written with the public writer,
 * loaded with every transform, dtype and layout. Every delivered sample must equal the
 * image pipeline run directly on the record (seed, epoch, id), whatever the thread count;
 * damaged and oversized JPEGs follow the corrupt-record policy. */
#include "jpegutil.h"
#include "test_loader_util.h"

#include "loader/plan.h"

#include <math.h>
#include "transform/transform.h"

#define N_RECORDS 40
#define CROP 32

typedef struct jset {
    uint8_t *jpeg[N_RECORDS];
    size_t size[N_RECORDS];
} jset;

static const t_jpeg_kind KINDS[] = {
    {"420", 3, 2, 2, 0, 0, 0},  {"444", 3, 1, 1, 0, 0, 0},  {"gray", 1, 1, 1, 0, 0, 0},
    {"prog", 3, 2, 2, 1, 0, 0}, {"cmyk", 4, 1, 1, 0, 0, 1},
};
static const int SIZES[][2] = {{64, 48}, {120, 90}, {45, 101}, {33, 33}, {160, 70}, {17, 40}};

/* Bad records: a JPEG cut in half, or one whose frame header declares 60000 x 60000. */
enum { BAD_NONE, BAD_TRUNCATED, BAD_HUGE };

static void make_huge(uint8_t *j, size_t n)
{
    for (size_t i = 0; i + 9 < n; i++)
        if (j[i] == 0xFF && (j[i + 1] == 0xC0 || j[i + 1] == 0xC2)) {
            j[i + 5] = 0xEA, j[i + 6] = 0x60; /* height 60000 */
            j[i + 7] = 0xEA, j[i + 8] = 0x60; /* width 60000 */
            return;
        }
    T_FAIL("no frame header found");
}

/* Writes the data set and keeps its records; record `bad_id` is damaged as `bad`. */
static void make_set(const char *path, jset *js, int bad, int64_t bad_id)
{
    stoker_writer *w = t_jpeg_writer(path, 40000); /* several shards */
    const size_t nk = sizeof KINDS / sizeof KINDS[0], ns = sizeof SIZES / sizeof SIZES[0];
    for (int64_t id = 0; id < N_RECORDS; id++) {
        const int *wh = SIZES[(size_t)id % ns];
        js->jpeg[id] =
            t_make_jpeg(&KINDS[(size_t)id % nk], wh[0], wh[1], 85, (uint64_t)id + 1, &js->size[id]);
        if (id == bad_id && bad == BAD_TRUNCATED)
            js->size[id] /= 2;
        else if (id == bad_id && bad == BAD_HUGE)
            make_huge(js->jpeg[id], js->size[id]);
        T_OK(stoker_writer_add(w, js->jpeg[id], js->size[id], id % 7, NULL));
    }
    T_OK(stoker_writer_finish(w));
    stoker_writer_destroy(w);
}

static void free_set(jset *js)
{
    for (int i = 0; i < N_RECORDS; i++)
        free(js->jpeg[i]);
}

static stoker_config *config(int32_t transform, int32_t dtype, int32_t layout, int threads)
{
    stoker_config *cfg = NULL;
    T_OK(stoker_config_create(&cfg));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_TRANSFORM, transform));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DTYPE, dtype));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_LAYOUT, layout));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SIZE, CROP));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_THREADS, threads));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_BATCH_SIZE, 16));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DEVICE, -1)); /* host batches: read here */
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SEED, 7));
    return cfg;
}

static size_t elem_size(int32_t dtype)
{
    return dtype == STOKER_DTYPE_UINT8 ? 1 : dtype == STOKER_DTYPE_FLOAT32 ? 4 : 2;
}

/* Shape, dtype and size of a batch of the image pipeline. */
static void check_view(const stoker_batch *b, int32_t dtype, int32_t layout)
{
    stoker_batch_view v;
    v.struct_size = sizeof v;
    T_OK(stoker_batch_get_view(b, &v));
    const int32_t want = dtype ? dtype : STOKER_DTYPE_FLOAT32; /* host batches' default */
    T_EQ_INT(v.dtype, want);
    T_EQ_INT(stoker_batch_dtype(b), want);
    T_EQ_INT(v.ndim, 4);
    T_ASSERT(v.offsets == NULL);
    const bool nhwc = layout == STOKER_LAYOUT_NHWC;
    T_EQ_INT(v.shape[0], v.count);
    T_EQ_INT(v.shape[1], nhwc ? CROP : 3);
    T_EQ_INT(v.shape[2], CROP);
    T_EQ_INT(v.shape[3], nhwc ? 3 : CROP);
    T_EQ_INT(v.nbytes, (uint64_t)v.count * CROP * CROP * 3 * elem_size(want));
    const int64_t *shape = stoker_batch_shape(b);
    for (int i = 0; i < 4; i++)
        T_EQ_INT(shape[i], v.shape[i]);
}

/* One epoch (epoch 1, so that the epoch enters the randomness) of the given options;
 * every sample is compared with the pipeline run directly. */
static void check_combo(const char *path, const jset *js, int32_t transform, int32_t dtype,
                        int32_t layout)
{
    stoker_config *cfg = config(transform, dtype, layout, 2);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_EPOCH, 1));
    /* the loader's own parameters, as its plan resolves them */
    stoker__err err = {0};
    stoker_dataset *ds = NULL;
    T_OK(stoker_dataset_open(&ds, path, cfg));
    stoker__plan plan;
    T_OK(stoker__plan_make(&plan, cfg, ds, &err));
    const stoker__xform_params p = plan.xform;
    stoker_dataset_close(ds);
    stoker__xform_scratch *xs = NULL;
    T_OK(stoker__xform_scratch_create(&xs));
    const size_t sb = stoker__xform_sample_bytes(&p);
    uint8_t *want = malloc(sb);
    stoker_loader *l = NULL;
    const int rc = stoker_loader_create(&l, path, cfg);
    if (rc)
        T_FAIL("create: %s", stoker_loader_errmsg(l));
    int64_t seen = 0;
    stoker_batch *b = NULL;
    while (stoker_loader_next(l, &b) == 0) {
        check_view(b, dtype, layout);
        T_EQ_INT(stoker_batch_epoch(b), 1);
        const uint8_t *data = stoker_batch_data(b);
        for (int64_t j = 0; j < stoker_batch_count(b); j++) {
            const int64_t id = stoker_batch_ids(b)[j];
            T_EQ_INT(stoker_batch_labels(b)[j], id % 7);
            T_OK(stoker__xform_jpeg(xs, &p, 7, 1, id, js->jpeg[id], js->size[id], want, &err));
            if (memcmp(data + (size_t)j * sb, want, sb) != 0)
                T_FAIL("transform %d dtype %d layout %d: record %" PRId64 " differs",
                       (int)transform, (int)dtype, (int)layout, id);
        }
        seen += stoker_batch_count(b);
        T_OK(stoker_batch_release(b));
    }
    T_EQ_INT(seen, N_RECORDS);
    stoker_stats st;
    st.struct_size = sizeof st;
    T_OK(stoker_loader_get_stats(l, &st));
    T_EQ_INT(st.simd, stoker__simd_best());
    T_ASSERT(st.decode_seconds > 0 && st.resize_seconds > 0 && st.normalize_seconds > 0);
    T_ASSERT(st.process_seconds >= st.decode_seconds);
    T_ASSERT(st.read_seconds > 0 && st.crc_seconds >= 0);
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
    stoker__xform_scratch_destroy(xs);
    free(want);
}

/* Two epochs of train batches with `threads` workers, concatenated. */
static uint8_t *run_train(const char *path, int threads, size_t *size)
{
    stoker_config *cfg = config(STOKER_TRANSFORM_TRAIN, 0, 0, threads);
    stoker_loader *l = NULL;
    T_OK(stoker_loader_create(&l, path, cfg));
    const size_t sb = CROP * CROP * 3 * 4; /* float32: host batches' default */
    uint8_t *all = malloc(2 * N_RECORDS * (sb + 8));
    size_t at = 0;
    for (int epoch = 0; epoch < 2; epoch++) {
        stoker_batch *b = NULL;
        while (stoker_loader_next(l, &b) == 0) {
            memcpy(all + at, stoker_batch_data(b), stoker_batch_nbytes(b));
            at += stoker_batch_nbytes(b);
            memcpy(all + at, stoker_batch_ids(b), 8 * (size_t)stoker_batch_count(b));
            at += 8 * (size_t)stoker_batch_count(b);
            T_OK(stoker_batch_release(b));
        }
    }
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
    *size = at;
    return all;
}

static void check_threads(const char *path)
{
    size_t n1, n2, n7;
    uint8_t *a = run_train(path, 1, &n1), *b = run_train(path, 2, &n2);
    uint8_t *c = run_train(path, 7, &n7);
    T_EQ_INT(n1, 2 * N_RECORDS * (CROP * CROP * 3 * 4 + 8));
    T_EQ_INT(n2, n1);
    T_EQ_INT(n7, n1);
    T_ASSERT(memcmp(a, b, n1) == 0);
    T_ASSERT(memcmp(a, c, n1) == 0);
    free(a), free(b), free(c);
}

/* ERROR policy: the batch holding the bad record fails naming it and `cause`; SKIP: one
 * whole batch, the record replaced and counted. */
static void check_bad(const char *path, int64_t bad_id, const char *cause)
{
    stoker_config *cfg = config(STOKER_TRANSFORM_EVAL, 0, 0, 2);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SHUFFLE, 0));
    stoker_loader *l = NULL;
    T_OK(stoker_loader_create(&l, path, cfg));
    int failures = 0;
    int64_t seen = 0;
    char want[64];
    snprintf(want, sizeof want, "record %" PRId64 ":", bad_id);
    for (;;) {
        stoker_batch *b = NULL;
        const int rc = stoker_loader_next(l, &b);
        if (rc == STOKER_END)
            break;
        if (rc == STOKER_E_CORRUPT) {
            failures++;
            printf("expected failure: %s\n", stoker_loader_errmsg(l));
            T_CONTAINS(stoker_loader_errmsg(l), want);
            T_CONTAINS(stoker_loader_errmsg(l), cause);
            T_CONTAINS(stoker_loader_errmsg(l), ".stk");
            continue;
        }
        T_OK(rc);
        seen += stoker_batch_count(b);
        T_OK(stoker_batch_release(b));
    }
    T_EQ_INT(failures, 1);
    T_EQ_INT(seen, N_RECORDS - 16); /* the failed batch of 16 counts as consumed */
    stoker_loader_destroy(l);

    T_OK(stoker_config_set_int(cfg, STOKER_OPT_ON_CORRUPT, STOKER_ON_CORRUPT_SKIP));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_BATCH_SIZE, N_RECORDS));
    /* one slot: nothing of the next epoch is read (and counted) before the release */
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DEPTH, 1));
    T_OK(stoker_loader_create(&l, path, cfg));
    stoker_batch *b = NULL;
    T_OK(stoker_loader_next(l, &b));
    T_EQ_INT(stoker_batch_count(b), N_RECORDS);
    int replaced = 1;
    for (int64_t j = 0; j < N_RECORDS; j++)
        replaced &= stoker_batch_ids(b)[j] != bad_id;
    T_ASSERT(replaced);
    stoker_stats st;
    st.struct_size = sizeof st;
    T_OK(stoker_loader_get_stats(l, &st));
    T_EQ_INT(st.skipped, 1);
    T_OK(stoker_batch_release(b));
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
}

/* Running out of memory in the image step is not a corrupt record: under SKIP too, the
 * batch fails with -ENOMEM and a message naming the shard, the record and the cause, and
 * nothing is replaced or counted as skipped. Records 0..39 are small, 40..63 large: the
 * first large one grows the worker's scratch, the allocation that is made to fail. One
 * worker, four slots, unshuffled: when the first batch has arrived, the worker's scratch
 * has grown for the small images and it cannot have reached record 40 yet. */
static void check_oom_not_skipped(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/oom", dir);
    stoker_writer *w = t_jpeg_writer(path, 0);
    for (int64_t id = 0; id < 64; id++) {
        size_t size = 0;
        const bool big = id >= 40;
        uint8_t *j =
            t_make_jpeg(&KINDS[0], big ? 1024 : 64, big ? 768 : 48, 85, (uint64_t)id + 1, &size);
        T_OK(stoker_writer_add(w, j, size, id % 7, NULL));
        free(j);
    }
    T_OK(stoker_writer_finish(w));
    stoker_writer_destroy(w);

    stoker_config *cfg = config(STOKER_TRANSFORM_EVAL, 0, 0, 1);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SHUFFLE, 0));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_BATCH_SIZE, 4));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DEPTH, 4));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_ON_CORRUPT, STOKER_ON_CORRUPT_SKIP));
    stoker_loader *l = NULL;
    T_OK(stoker_loader_create(&l, path, cfg));
    stoker_batch *b = NULL;
    T_OK(stoker_loader_next(l, &b));
    stoker__alloc_fail_at(1);
    T_OK(stoker_batch_release(b));
    int failures = 0;
    const int ok = 1 + tl_drain_oom(l, 4, ": record 40: ", &failures);
    T_ASSERT(stoker__alloc_fail_at(0) >= 1);
    const stoker_stats st = tl_stats(l);
    T_EQ_INT(failures, 1);
    T_EQ_INT(ok, 64 / 4 - 1);
    T_EQ_INT(st.skipped, 0);
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
}

/* Options the pipeline refuses, and transforms on data sets that are not JPEG. */
static void check_options(const char *path, const char *raw)
{
    stoker_config *cfg = config(STOKER_TRANSFORM_TRAIN, STOKER_DTYPE_INT32, 0, 1);
    stoker_loader *l = NULL;
    T_EQ_RC(stoker_loader_create(&l, path, cfg), STOKER_E_INVALID);
    T_CONTAINS(stoker_loader_errmsg(l), "dtype int32 is not an image output type");
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
    if (stoker__simd_best() < STOKER_SIMD_AVX512) {
        cfg = config(0, 0, 0, 1);
        T_OK(stoker_config_set_int(cfg, STOKER_OPT_SIMD, STOKER_SIMD_AVX512));
        T_EQ_RC(stoker_loader_create(&l, path, cfg), STOKER_E_UNSUPPORTED);
        stoker_loader_destroy(l);
        stoker_config_destroy(cfg);
    }
    cfg = config(STOKER_TRANSFORM_EVAL, 0, 0, 1);
    T_EQ_RC(stoker_loader_create(&l, raw, cfg), STOKER_E_INVALID);
    T_CONTAINS(stoker_loader_errmsg(l), "raw records take no image transform (eval)");
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
    /* transform NONE: the encoded bytes, as before */
    cfg = config(STOKER_TRANSFORM_NONE, 0, 0, 1);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DTYPE, 0));
    T_OK(stoker_loader_create(&l, path, cfg));
    stoker_batch *b = NULL;
    T_OK(stoker_loader_next(l, &b));
    T_EQ_INT(stoker_batch_dtype(b), STOKER_DTYPE_UINT8);
    T_ASSERT(stoker_batch_offsets(b) != NULL);
    T_OK(stoker_batch_release(b));
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
}

static int64_t get(const stoker_loader *l, stoker_option opt)
{
    int64_t v = -12345;
    T_OK(stoker_loader_get_int(l, opt, &v));
    return v;
}

/* What the loader resolved, as it reports it: every default (a JPEG and a raw data set),
 * the rules between options, and what does not apply. */
static void check_resolved(const char *path, const char *raw)
{
    stoker_config *cfg = NULL;
    T_OK(stoker_config_create(&cfg));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DEVICE, -1));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_THREADS, 3));
    stoker_loader *l = NULL;
    T_OK(stoker_loader_create(&l, path, cfg));
    T_EQ_INT(get(l, STOKER_OPT_TRANSFORM), STOKER_TRANSFORM_TRAIN);
    T_EQ_INT(get(l, STOKER_OPT_SIZE), 224);
    T_EQ_INT(get(l, STOKER_OPT_RESIZE), 256);
    T_EQ_INT(get(l, STOKER_OPT_DTYPE), STOKER_DTYPE_FLOAT32); /* host batches */
    T_EQ_INT(get(l, STOKER_OPT_LAYOUT), STOKER_LAYOUT_NCHW);
    T_EQ_INT(get(l, STOKER_OPT_DCT), STOKER_DCT_ISLOW);
    T_EQ_INT(get(l, STOKER_OPT_ANTIALIAS), STOKER_ANTIALIAS_OVER_2X);
    T_EQ_INT(get(l, STOKER_OPT_RESAMPLER), STOKER_RESAMPLER_FAST);
    T_EQ_INT(get(l, STOKER_OPT_DCT_SCALE), STOKER_DCT_SCALE_TRAIN);
    T_EQ_INT(get(l, STOKER_OPT_BATCH_SIZE), 256);
    T_EQ_INT(get(l, STOKER_OPT_SHUFFLE), 1);
    T_EQ_INT(get(l, STOKER_OPT_ON_CORRUPT), STOKER_ON_CORRUPT_ERROR);
    T_EQ_INT(get(l, STOKER_OPT_THREADS), 3);
    T_EQ_INT(get(l, STOKER_OPT_DEPTH), 4); /* 2 + ceil(3 x 3 threads / 8 pieces), at least 4 */
    T_EQ_INT(get(l, STOKER_OPT_DEVICE), -1);
    T_EQ_INT(get(l, STOKER_OPT_SIMD), stoker_capability_get(STOKER_CAP_SIMD));
    stoker_stats st = {.struct_size = sizeof st};
    T_OK(stoker_loader_get_stats(l, &st));
    T_EQ_INT(get(l, STOKER_OPT_BACKEND), st.backend);
    T_EQ_INT(get(l, STOKER_OPT_DEPTH), st.depth);
    double m = 0, sd = 0;
    T_OK(stoker_loader_get_float(l, STOKER_OPT_MEAN_R, &m));
    T_OK(stoker_loader_get_float(l, STOKER_OPT_STD_B, &sd));
    T_ASSERT(fabs(m - 0.485) < 1e-6 && fabs(sd - 0.225) < 1e-6);
    int64_t v = 0;
    T_EQ_RC(stoker_loader_get_int(l, STOKER_OPT_SHARD_SIZE, &v), STOKER_E_INVALID);
    T_EQ_RC(stoker_loader_get_float(l, STOKER_OPT_BATCH_SIZE, &m), STOKER_E_INVALID);
    int64_t epoch = -1, pos = -1;
    T_OK(stoker_loader_position(l, &epoch, &pos));
    T_ASSERT(epoch == 0 && pos == 0);
    stoker_batch *b = NULL;
    T_OK(stoker_loader_next(l, &b));
    T_OK(stoker_batch_release(b));
    T_OK(stoker_loader_position(l, &epoch, &pos));
    T_ASSERT(epoch == 0 && pos == 1);
    stoker_loader_destroy(l);

    /* GPU normalisation is refused without a device, so the workers keep the dtype asked */
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DTYPE, STOKER_DTYPE_UINT8));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_BATCH_SIZE, 4));
    T_OK(stoker_loader_create(&l, path, cfg));
    T_EQ_INT(get(l, STOKER_OPT_DTYPE), STOKER_DTYPE_UINT8);
    T_EQ_INT(get(l, STOKER_OPT_DEPTH), 11); /* 2 + ceil(9 / 1 piece) */
    stoker_loader_destroy(l);

    T_OK(stoker_loader_create(&l, raw, cfg)); /* uint8 records: the stored dtype */
    T_EQ_INT(get(l, STOKER_OPT_TRANSFORM), STOKER_TRANSFORM_NONE);
    T_EQ_INT(get(l, STOKER_OPT_DTYPE), STOKER_DTYPE_UINT8);
    T_EQ_INT(get(l, STOKER_OPT_DEPTH), 4);
    T_EQ_RC(stoker_loader_get_int(l, STOKER_OPT_SIZE, &v), STOKER_E_UNSUPPORTED);
    T_EQ_RC(stoker_loader_get_float(l, STOKER_OPT_MEAN_R, &m), STOKER_E_UNSUPPORTED);
    stoker_loader_destroy(l);

    /* after a restore, the order's options are the state's */
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SEED, 5));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SHUFFLE, 0));
    T_OK(stoker_loader_create(&l, raw, cfg));
    uint8_t state[STOKER_STATE_SIZE];
    T_OK(stoker_loader_state_save(l, state, sizeof state, NULL));
    stoker_loader_destroy(l);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SEED, 9));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SHUFFLE, 1));
    T_OK(stoker_loader_create(&l, raw, cfg));
    T_EQ_INT(get(l, STOKER_OPT_SEED), 9);
    T_EQ_INT(get(l, STOKER_OPT_SHUFFLE), 1);
    T_OK(stoker_loader_state_restore(l, state, sizeof state));
    T_EQ_INT(get(l, STOKER_OPT_SEED), 5);
    T_EQ_INT(get(l, STOKER_OPT_SHUFFLE), 0);
    T_EQ_INT(get(l, STOKER_OPT_ORDER), STOKER_ORDER_RECORDS);
    stoker_loader_destroy(l);

    T_OK(stoker_config_set_int(cfg, STOKER_OPT_RANK, 3)); /* a create that fails */
    T_EQ_RC(stoker_loader_create(&l, raw, cfg), STOKER_E_INVALID);
    T_EQ_RC(stoker_loader_get_int(l, STOKER_OPT_DEPTH, &v), STOKER_E_STATE);
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
}

static void make_raw(const char *path)
{
    stoker_writer *w = NULL;
    T_OK(stoker_writer_create(&w, path, NULL));
    const int64_t shape[1] = {4};
    T_OK(stoker_writer_set_field(w, STOKER_FIELD_RAW, STOKER_DTYPE_UINT8, 1, shape));
    T_OK(stoker_writer_add(w, "abcd", 4, 0, NULL));
    T_OK(stoker_writer_finish(w));
    stoker_writer_destroy(w);
}

int main(void)
{
    char *dir = t_mkdtemp("loader_jpeg");
    char good[512], trunc[512], huge[512], raw[512];
    snprintf(good, sizeof good, "%s/good", dir);
    snprintf(trunc, sizeof trunc, "%s/trunc", dir);
    snprintf(huge, sizeof huge, "%s/huge", dir);
    snprintf(raw, sizeof raw, "%s/raw", dir);
    jset js, jt, jh;
    make_set(good, &js, BAD_NONE, -1);
    make_set(trunc, &jt, BAD_TRUNCATED, 21);
    make_set(huge, &jh, BAD_HUGE, 10);
    make_raw(raw);

    static const int32_t transforms[] = {STOKER_TRANSFORM_TRAIN, STOKER_TRANSFORM_EVAL,
                                         STOKER_TRANSFORM_RESIZE};
    static const int32_t dtypes[] = {STOKER_DTYPE_FLOAT32, STOKER_DTYPE_FLOAT16,
                                     STOKER_DTYPE_BFLOAT16, STOKER_DTYPE_UINT8, 0};
    static const int32_t layouts[] = {STOKER_LAYOUT_NCHW, STOKER_LAYOUT_NHWC};
    for (size_t t = 0; t < 3; t++)
        for (size_t d = 0; d < 5; d++)
            for (size_t k = 0; k < 2; k++)
                check_combo(good, &js, transforms[t], dtypes[d], layouts[k]);
    /* the defaults of host batches: train, float32, NCHW */
    check_combo(good, &js, 0, 0, 0);
    check_threads(good);
    check_bad(trunc, 21, "JPEG");
    check_bad(huge, 10, "STOKER_E_LIMIT");
    check_oom_not_skipped(dir);
    check_options(good, raw);
    check_resolved(good, raw);

    free_set(&js), free_set(&jt), free_set(&jh);
    t_rmrf(dir);
    free(dir);
    printf("ok\n");
    return 0;
}
