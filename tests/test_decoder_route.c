/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU decode stage's host side, where there is no GPU: the routing of records (and of
 * records no checksum vouches for, HDF5's), the GPU worker, the CPU retry of what the GPU
 * decoder refuses or fails, the split's fallback, on_corrupt and restarts, with the stage's
 * test hook standing in for nvJPEG (a decoder that refuses every image, or fails every
 * batch). Every batch must equal, byte for byte, the batch of a loader that decodes on the
 * CPU alone; the counts must say what went where. The real decoder's pixels are checked on
 * the GPU machine (test_gpu_decode_loader). */
#include "jpegutil.h"
#include "fields_util.h"
#include "test_loader_util.h"

#include "loader/plan.h"

#include <time.h>

#ifdef STOKER_HAVE_HDF5
#include <hdf5.h>
#endif

#define N_RECORDS 40
#define CROP 24
#define BATCH 4

static const t_jpeg_kind KINDS[] = {
    {"420", 3, 2, 2, 0, 0, 0},  {"444", 3, 1, 1, 0, 0, 0},  {"gray", 1, 1, 1, 0, 0, 0},
    {"prog", 3, 2, 2, 1, 0, 0}, {"cmyk", 4, 1, 1, 0, 0, 1},
};
#define N_ELIGIBLE_KINDS 3 /* the first three: the hardware decoder's kinds */

enum { SET_MIXED, SET_ELIGIBLE, SET_INELIGIBLE };

/* Record id as kind k; *n receives its length. free() the result. */
static uint8_t *record_jpeg(int64_t id, size_t k, size_t *n)
{
    return t_make_jpeg(&KINDS[k], 40 + (int)(id % 7) * 9, 30 + (int)(id % 5) * 11, 85,
                       (uint64_t)id + 1, n);
}

/* Record `bad` (or -1) holds its first half and an EOI: its header and end look whole,
 * so it is routed, and the CPU decoder finds the data cut short. */
static void make_set(const char *path, int which, int64_t bad)
{
    stoker_writer *w = t_jpeg_writer(path, 0);
    for (int64_t id = 0; id < N_RECORDS; id++) {
        size_t k = (size_t)id % 5;
        if (which == SET_ELIGIBLE)
            k = (size_t)id % N_ELIGIBLE_KINDS;
        else if (which == SET_INELIGIBLE)
            k = N_ELIGIBLE_KINDS + (size_t)id % 2;
        size_t n = 0;
        uint8_t *j = record_jpeg(id, k, &n);
        if (id == bad) {
            n /= 2;
            j[n - 2] = 0xFF, j[n - 1] = 0xD9;
        }
        T_OK(stoker_writer_add(w, j, n, id % 3, NULL));
        free(j);
    }
    T_OK(stoker_writer_finish(w));
    stoker_writer_destroy(w);
}

static stoker_loader *open_loader(const char *path, int32_t decoder, int32_t on_corrupt)
{
    stoker_config *cfg = NULL;
    T_OK(stoker_config_create(&cfg));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_TRANSFORM, STOKER_TRANSFORM_TRAIN));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SIZE, CROP));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_BATCH_SIZE, BATCH));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_THREADS, 2));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DEVICE, -1));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SEED, 11));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DECODER, decoder));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_ON_CORRUPT, on_corrupt));
    stoker_loader *l = NULL;
    T_OK(stoker_loader_create(&l, path, cfg));
    stoker_config_destroy(cfg);
    return l;
}

/* The statistics once read-ahead has stopped (the ring is full while nothing is taken):
 * records read and records decoded no longer differ by those in flight. */
static stoker_stats settled_stats(const stoker_loader *l)
{
    stoker_stats st = tl_stats(l);
    for (int i = 0; i < 500 && st.cpu_decoded != st.records_read; i++) {
        const struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
        st = tl_stats(l);
    }
    return st;
}

/* Takes the next batch of both loaders: the same outcome, the same ids and bytes. Returns
 * the outcome. */
static int same_next(stoker_loader *a, stoker_loader *b)
{
    stoker_batch *x = NULL, *y = NULL;
    const int ra = stoker_loader_next(a, &x), rb = stoker_loader_next(b, &y);
    T_EQ_RC(rb, ra);
    if (ra != 0) {
        if (ra != STOKER_END) /* the same cause, naming the same record */
            T_EQ_STR(stoker_loader_errmsg(b), stoker_loader_errmsg(a));
        return ra;
    }
    T_EQ_INT(stoker_batch_count(y), stoker_batch_count(x));
    T_EQ_INT(stoker_batch_nbytes(y), stoker_batch_nbytes(x));
    T_ASSERT(memcmp(stoker_batch_ids(y), stoker_batch_ids(x), 8 * (size_t)stoker_batch_count(x)) ==
             0);
    T_ASSERT(memcmp(stoker_batch_data(y), stoker_batch_data(x), stoker_batch_nbytes(x)) == 0);
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

/* The refusing decoder: every routed record comes back and is decoded by the CPU, and the
 * batches are the CPU's. */
static void check_refused(const char *mixed)
{
    stoker__plan_emulate_gdec(STOKER__GDEC_REFUSE);
    stoker__plan_pin_gpu_share(0.5); /* tiny images keep no worker busy: auto would not route */
    stoker_loader *cpu = open_loader(mixed, STOKER_DECODER_CPU, STOKER_ON_CORRUPT_ERROR);
    stoker_loader *gpu = open_loader(mixed, STOKER_DECODER_AUTO, STOKER_ON_CORRUPT_ERROR);
    stoker__plan_pin_gpu_share(0);
    int64_t v = 0;
    T_OK(stoker_loader_get_int(cpu, STOKER_OPT_DECODER, &v));
    T_EQ_INT(v, STOKER_DECODER_CPU);
    T_OK(stoker_loader_get_int(gpu, STOKER_OPT_DECODER, &v));
    T_EQ_INT(v, STOKER_DECODER_AUTO);
    T_EQ_INT(compare_epochs(cpu, gpu, 3), 0);
    const stoker_stats st = settled_stats(gpu);
    printf("refused: read %lld, cpu %lld, retried %lld, share %.3f\n", (long long)st.records_read,
           (long long)st.cpu_decoded, (long long)st.gpu_retried, st.gpu_share);
    T_EQ_INT(st.decoder, STOKER_DECODER_AUTO);
    T_EQ_STR(st.decoder_note, "a share pinned by a test hook");
    T_ASSERT(st.gpu_retried > 0);
    T_EQ_INT(st.gpu_decoded, 0);
    T_EQ_INT(st.cpu_decoded, st.records_read); /* the retries are the CPU's decodes */
    T_ASSERT(st.gpu_share > 0 && st.gpu_share < 1);
    const stoker_stats sc = tl_stats(cpu);
    T_EQ_INT(sc.decoder, STOKER_DECODER_CPU);
    T_EQ_STR(sc.decoder_note, "STOKER_OPT_DECODER is cpu");
    T_EQ_INT(sc.gpu_retried, 0);
    stoker_loader_destroy(cpu);
    stoker_loader_destroy(gpu);
    stoker__plan_emulate_gdec(STOKER__GDEC_REAL);
}

/* STOKER_GPU_SHARE fixes auto's share as the test hook does (the note says which), and a
 * value out of (0, 1] is ignored: the split decides again. */
static void check_share_env(const char *mixed)
{
    stoker__plan_emulate_gdec(STOKER__GDEC_REFUSE);
    setenv("STOKER_GPU_SHARE", "0.5", 1);
    stoker_loader *l = open_loader(mixed, STOKER_DECODER_AUTO, STOKER_ON_CORRUPT_ERROR);
    setenv("STOKER_GPU_SHARE", "1.5", 1);
    stoker_loader *n = open_loader(mixed, STOKER_DECODER_AUTO, STOKER_ON_CORRUPT_ERROR);
    unsetenv("STOKER_GPU_SHARE");
    stoker_batch *b = NULL;
    for (int i = 0; i < N_RECORDS / BATCH; i++) {
        T_OK(stoker_loader_next(l, &b));
        T_OK(stoker_batch_release(b));
    }
    const stoker_stats st = tl_stats(l), sn = tl_stats(n);
    printf("STOKER_GPU_SHARE=0.5: share %.3f, retried %lld; 1.5: %s\n", st.gpu_share,
           (long long)st.gpu_retried, sn.decoder_note);
    T_EQ_STR(st.decoder_note, "a share fixed by STOKER_GPU_SHARE");
    T_ASSERT(st.gpu_share == 0.5);
    T_ASSERT(st.gpu_retried > 0);
    T_ASSERT(strstr(sn.decoder_note, "STOKER_GPU_SHARE") == NULL);
    T_ASSERT(sn.gpu_share == 0);
    stoker_loader_destroy(l);
    stoker_loader_destroy(n);
    stoker__plan_emulate_gdec(STOKER__GDEC_REAL);
}

/* Auto left to its split, beside a consumer slower than the workers (it sleeps 20 ms a
 * batch): batches are ready ahead of every call, so the CPU decodes alone, and the note says
 * why. */
static void check_auto_slow_consumer(const char *mixed)
{
    stoker__plan_emulate_gdec(STOKER__GDEC_REFUSE);
    stoker_loader *l = open_loader(mixed, STOKER_DECODER_AUTO, STOKER_ON_CORRUPT_ERROR);
    stoker_batch *b = NULL;
    for (int i = 0; i < 40; i++) {
        const int rc = stoker_loader_next(l, &b);
        if (rc == STOKER_END)
            continue;
        T_OK(rc);
        const struct timespec nap = {0, 20000000};
        nanosleep(&nap, NULL);
        T_OK(stoker_batch_release(b));
    }
    const stoker_stats st = tl_stats(l);
    printf("auto, slow consumer: share %.3f, retried %lld; %s\n", st.gpu_share,
           (long long)st.gpu_retried, st.decoder_note);
    T_ASSERT(st.gpu_share == 0);
    T_EQ_INT(st.gpu_retried, 0); /* nothing was ever routed */
    T_CONTAINS(st.decoder_note, "ready at the consumer's calls");
    T_CONTAINS(st.decoder_note, "the CPU decodes alone");
    stoker_loader_destroy(l);
    stoker__plan_emulate_gdec(STOKER__GDEC_REAL);
}

/* Which records are routed: with decoder gpu, every record the hardware takes and nothing
 * else, exactly. */
/* Auto beside a consumer that never pauses: it waits for the workers, and the loader's
 * periods carry their rates (records delivered, and those the workers decoded), so the
 * split's first rise is to what the rates ask for, up to 0.3 at once, not a step of at most
 * 0.05 (split.h). */
static void check_auto_hungry_consumer(const char *mixed)
{
    stoker__plan_emulate_gdec(STOKER__GDEC_REFUSE);
    stoker_loader *l = open_loader(mixed, STOKER_DECODER_AUTO, STOKER_ON_CORRUPT_ERROR);
    stoker_batch *b = NULL;
    double first = 0;
    for (int i = 0; i < 400 && first == 0; i++) {
        const int rc = stoker_loader_next(l, &b);
        if (rc == STOKER_END)
            continue;
        T_OK(rc);
        T_OK(stoker_batch_release(b));
        first = tl_stats(l).gpu_share;
    }
    const stoker_stats st = tl_stats(l);
    printf("auto, hungry consumer: first share %.3f; %s\n", first, st.decoder_note);
    T_ASSERT(first > 0.1);
    stoker_loader_destroy(l);
    stoker__plan_emulate_gdec(STOKER__GDEC_REAL);
}

static void check_routing(const char *eligible, const char *ineligible)
{
    stoker__plan_emulate_gdec(STOKER__GDEC_REFUSE);
    stoker_loader *l = open_loader(eligible, STOKER_DECODER_GPU, STOKER_ON_CORRUPT_ERROR);
    stoker_batch *b = NULL;
    for (int i = 0; i < N_RECORDS / BATCH; i++) {
        T_OK(stoker_loader_next(l, &b));
        T_OK(stoker_batch_release(b));
    }
    stoker_stats st = tl_stats(l);
    stoker_loader_destroy(l);
    /* a whole epoch was routed (stats may trail the reads of the next one in flight) */
    T_ASSERT(st.gpu_retried >= N_RECORDS && st.gpu_retried <= st.records_read);
    T_ASSERT(st.gpu_share == 1.0);

    l = open_loader(ineligible, STOKER_DECODER_GPU, STOKER_ON_CORRUPT_ERROR);
    for (int i = 0; i < N_RECORDS / BATCH; i++) {
        T_OK(stoker_loader_next(l, &b));
        T_OK(stoker_batch_release(b));
    }
    st = tl_stats(l);
    T_EQ_INT(st.gpu_retried, 0); /* progressive and CMYK stay on the CPU */
    T_ASSERT(st.cpu_decoded >= N_RECORDS);
    stoker_loader_destroy(l);
    stoker__plan_emulate_gdec(STOKER__GDEC_REAL);
}

/* A decoder whose every batch fails: retried on the CPU, then after three failures in a row
 * the CPU takes everything (the fallback), batches still the CPU's. */
static void check_fallback(const char *mixed)
{
    stoker__plan_emulate_gdec(STOKER__GDEC_FAIL);
    stoker_loader *cpu = open_loader(mixed, STOKER_DECODER_CPU, STOKER_ON_CORRUPT_ERROR);
    stoker_loader *gpu = open_loader(mixed, STOKER_DECODER_GPU, STOKER_ON_CORRUPT_ERROR);
    T_EQ_INT(compare_epochs(cpu, gpu, 3), 0);
    const stoker_stats st = tl_stats(gpu);
    printf("failing: retried %lld, fallbacks %lld, share %.3f\n", (long long)st.gpu_retried,
           (long long)st.gpu_fallbacks, st.gpu_share);
    T_EQ_INT(st.gpu_fallbacks, 1);
    T_ASSERT(st.gpu_share == 0);
    T_ASSERT(st.gpu_retried > 0);
    stoker_loader_destroy(cpu);
    stoker_loader_destroy(gpu);
    stoker__plan_emulate_gdec(STOKER__GDEC_REAL);
}

/* A damaged record the GPU side takes by its header: corrupt on the CPU retry, so ERROR fails
 * its batch with the CPU's message and SKIP replaces it, as on the CPU alone. */
static void check_corrupt(const char *bad)
{
    stoker__plan_emulate_gdec(STOKER__GDEC_REFUSE);
    for (int policy = 0; policy < 2; policy++) {
        const int32_t oc = policy ? STOKER_ON_CORRUPT_SKIP : STOKER_ON_CORRUPT_ERROR;
        stoker_loader *cpu = open_loader(bad, STOKER_DECODER_CPU, oc);
        stoker_loader *gpu = open_loader(bad, STOKER_DECODER_GPU, oc);
        const int failed = compare_epochs(cpu, gpu, 2);
        T_EQ_INT(failed, policy ? 0 : 2);
        const stoker_stats a = tl_stats(cpu), b = tl_stats(gpu);
        T_EQ_INT(b.skipped, a.skipped);
        T_EQ_INT(b.skipped, policy ? 2 : 0);
        stoker_loader_destroy(cpu);
        stoker_loader_destroy(gpu);
    }
    stoker__plan_emulate_gdec(STOKER__GDEC_REAL);
}

/* Running out of memory while the CPU retries what the GPU side refused is not a corrupt
 * record: under SKIP too, the batch fails with -ENOMEM and a message naming the shard, the
 * record and the cause, and nothing is replaced or counted as skipped. Every record is
 * routed (decoder gpu, one large record at most per batch, so each fits the staging) and
 * refused, so every decode is a retry; records 40, 44, ... are large, so the first of them
 * grows a worker's scratch, which is made to fail, if nothing after the first batch did. */
static void check_oom_retry(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/oom", dir);
    stoker_writer *w = t_jpeg_writer(path, 0);
    const int64_t n = 64;
    for (int64_t id = 0; id < n; id++) {
        const bool big = id >= 40 && id % BATCH == 0;
        size_t size = 0;
        uint8_t *j =
            t_make_jpeg(&KINDS[0], big ? 640 : 64, big ? 480 : 48, 85, (uint64_t)id + 1, &size);
        T_OK(stoker_writer_add(w, j, size, id % 3, NULL));
        free(j);
    }
    T_OK(stoker_writer_finish(w));
    stoker_writer_destroy(w);

    stoker__plan_emulate_gdec(STOKER__GDEC_REFUSE);
    stoker_config *cfg = NULL;
    T_OK(stoker_config_create(&cfg));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_TRANSFORM, STOKER_TRANSFORM_EVAL));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SIZE, CROP));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_BATCH_SIZE, BATCH));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_THREADS, 1));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DEPTH, 4));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SHUFFLE, 0));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DEVICE, -1));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DECODER, STOKER_DECODER_GPU));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_ON_CORRUPT, STOKER_ON_CORRUPT_SKIP));
    stoker_loader *l = NULL;
    T_OK(stoker_loader_create(&l, path, cfg));
    stoker_config_destroy(cfg);
    stoker_batch *b = NULL;
    T_OK(stoker_loader_next(l, &b));
    stoker__alloc_fail_at(1);
    T_OK(stoker_batch_release(b));
    int failures = 0;
    const int ok = 1 + tl_drain_oom(l, BATCH, ": record ", &failures);
    T_ASSERT(stoker__alloc_fail_at(0) >= 1);
    const stoker_stats st = tl_stats(l);
    T_EQ_INT(failures, 1);
    T_EQ_INT(ok, n / BATCH - 1);
    T_EQ_INT(st.skipped, 0);
    T_ASSERT(st.gpu_retried > 0);
    T_EQ_INT(st.gpu_decoded, 0);
    stoker_loader_destroy(l);
    stoker__plan_emulate_gdec(STOKER__GDEC_REAL);
}

/* Restarts with batches queued for the GPU worker: the new epoch's batches are the CPU's. */
static void check_restart(const char *mixed)
{
    stoker__plan_emulate_gdec(STOKER__GDEC_REFUSE);
    stoker__plan_pin_gpu_share(0.5);
    stoker_loader *cpu = open_loader(mixed, STOKER_DECODER_CPU, STOKER_ON_CORRUPT_ERROR);
    stoker_loader *gpu = open_loader(mixed, STOKER_DECODER_AUTO, STOKER_ON_CORRUPT_ERROR);
    stoker__plan_pin_gpu_share(0);
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < round % 3; i++)
            T_OK(same_next(cpu, gpu));
        T_OK(stoker_loader_set_epoch(cpu, (uint64_t)round + 7));
        T_OK(stoker_loader_set_epoch(gpu, (uint64_t)round + 7));
        T_OK(same_next(cpu, gpu));
    }
    stoker_loader_destroy(cpu);
    stoker_loader_destroy(gpu);
    stoker__plan_emulate_gdec(STOKER__GDEC_REAL);
}

#ifdef STOKER_HAVE_HDF5
/* The eligible kinds' records and their labels in an HDF5 file, laid out as h5py writes
 * them: `images` of variable-length uint8 (libhdf5 reads each record), or a contiguous uint8
 * blob with `images_offsets` (the loader's reader reads them). */
static void make_h5(const char *path, bool blob)
{
    hvl_t recs[N_RECORDS];
    int64_t labels[N_RECORDS], offsets[N_RECORDS + 1];
    offsets[0] = 0;
    for (int64_t id = 0; id < N_RECORDS; id++) {
        size_t n = 0;
        recs[id].p = record_jpeg(id, (size_t)id % N_ELIGIBLE_KINDS, &n);
        recs[id].len = n;
        labels[id] = id % 3;
        offsets[id + 1] = offsets[id] + (int64_t)n;
    }
    const hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    T_ASSERT(f >= 0);
    if (blob) {
        uint8_t *all = malloc((size_t)offsets[N_RECORDS]);
        T_ASSERT(all != NULL);
        for (int i = 0; i < N_RECORDS; i++)
            memcpy(all + offsets[i], recs[i].p, recs[i].len);
        t_h5_write(f, "images", H5T_STD_U8LE, H5T_NATIVE_UINT8, (hsize_t)offsets[N_RECORDS], all);
        t_h5_write(f, "images_offsets", H5T_STD_I64LE, H5T_NATIVE_INT64, N_RECORDS + 1, offsets);
        free(all);
    } else {
        t_h5_vlen(f, "images", H5T_STD_U8LE, H5T_NATIVE_UINT8, N_RECORDS, recs);
    }
    t_h5_write(f, "labels", H5T_STD_I64LE, H5T_NATIVE_INT64, N_RECORDS, labels);
    T_ASSERT(H5Fclose(f) >= 0);
    for (int i = 0; i < N_RECORDS; i++)
        free(recs[i].p);
}
#endif

/* Records no one checked (an HDF5 file, a data set packed without checking its JPEGs):
 * the hardware decoder reports no damage inside the compressed data, so auto leaves them to
 * the CPU and says why, and decoder gpu routes them (the user asked for it). Both deliver
 * the CPU's batches. */
static void check_unchecked_set(const char *path, const char *note)
{
    static const int32_t decoders[] = {STOKER_DECODER_AUTO, STOKER_DECODER_GPU};
    stoker__plan_emulate_gdec(STOKER__GDEC_REFUSE);
    for (size_t i = 0; i < sizeof decoders / sizeof decoders[0]; i++) {
        const bool gpu = decoders[i] == STOKER_DECODER_GPU;
        stoker_loader *cpu = open_loader(path, STOKER_DECODER_CPU, STOKER_ON_CORRUPT_ERROR);
        stoker_loader *l = open_loader(path, decoders[i], STOKER_ON_CORRUPT_ERROR);
        int64_t v = 0;
        T_OK(stoker_loader_get_int(l, STOKER_OPT_DECODER, &v));
        T_EQ_INT(v, gpu ? STOKER_DECODER_GPU : STOKER_DECODER_CPU);
        T_EQ_INT(compare_epochs(cpu, l, 2), 0);
        const stoker_stats st = settled_stats(l);
        printf("unchecked (decoder %s): records %lld, cpu %lld, retried %lld, note \"%s\"\n",
               gpu ? "gpu" : "auto", (long long)st.records, (long long)st.cpu_decoded,
               (long long)st.gpu_retried, st.decoder_note);
        T_EQ_INT(st.decoder, gpu ? STOKER_DECODER_GPU : STOKER_DECODER_CPU);
        T_EQ_STR(st.decoder_note, gpu ? "" : note);
        T_EQ_INT(st.records, 2 * N_RECORDS);
        if (gpu) /* every record delivered went to the GPU first */
            T_ASSERT(st.gpu_retried >= st.records && st.gpu_retried <= st.records_read);
        else
            T_EQ_INT(st.gpu_retried, 0);
        stoker_loader_destroy(cpu);
        stoker_loader_destroy(l);
    }
    stoker__plan_emulate_gdec(STOKER__GDEC_REAL);
}

/* A data set written without STOKER_OPT_JPEG_CHECKED: manifest version 1, not checked. */
static void check_unchecked_pack(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/unchecked", dir);
    stoker_writer *w = t_jpeg_writer_checked(path, 0, 0);
    for (int64_t id = 0; id < N_RECORDS; id++) {
        size_t n = 0;
        uint8_t *j = record_jpeg(id, (size_t)id % N_ELIGIBLE_KINDS, &n);
        T_OK(stoker_writer_add(w, j, n, id % 3, NULL));
        free(j);
    }
    T_OK(stoker_writer_finish(w));
    stoker_writer_destroy(w);
    check_unchecked_set(path, "the data set's JPEGs were not checked when packed (stoker-pack "
                              "checks them unless --no-validate): pack it again, or ask for "
                              "decoder gpu");
}

#ifdef STOKER_HAVE_HDF5
/* HDF5 keeps no per-record checksum and says nothing of checking: as unchecked. by_hdf5:
 * libhdf5 reads the records (the variable-length layout) rather than the loader's reader. */
static void check_unchecked_records(const char *h5, bool by_hdf5)
{
    stoker_loader *l = open_loader(h5, STOKER_DECODER_CPU, STOKER_ON_CORRUPT_ERROR);
    T_EQ_INT(tl_stats(l).backend == STOKER_BACKEND_HDF5, by_hdf5);
    stoker_loader_destroy(l);
    check_unchecked_set(h5, "HDF5 records were not checked when written: decoder gpu sends them "
                            "to the GPU");
}

/* Both layouts of encoded images, each with its own read path. */
static void check_hdf5(const char *dir)
{
    for (int blob = 0; blob < 2; blob++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s.h5", dir, blob ? "blob" : "vlen");
        make_h5(path, blob);
        check_unchecked_records(path, !blob);
    }
}
#else
static void check_hdf5(const char *dir)
{
    (void)dir;
    printf("unchecked records: skipped (built without HDF5)\n");
}
#endif

/* Without the hook and without a GPU: the CPU decodes and the note says why. */
static void check_no_gpu(const char *mixed)
{
    stoker_loader *l = open_loader(mixed, STOKER_DECODER_GPU, STOKER_ON_CORRUPT_ERROR);
    int64_t v = 0;
    T_OK(stoker_loader_get_int(l, STOKER_OPT_DECODER, &v));
    T_EQ_INT(v, STOKER_DECODER_CPU);
    const stoker_stats st = tl_stats(l);
    T_EQ_STR(st.decoder_note, "batches stay in host memory");
    stoker_loader_destroy(l);
}

int main(void)
{
    char *dir = t_mkdtemp("decoder_route");
    char mixed[512], elig[512], inel[512], bad[512];
    snprintf(mixed, sizeof mixed, "%s/mixed", dir);
    snprintf(elig, sizeof elig, "%s/eligible", dir);
    snprintf(inel, sizeof inel, "%s/ineligible", dir);
    snprintf(bad, sizeof bad, "%s/bad", dir);
    make_set(mixed, SET_MIXED, -1);
    make_set(elig, SET_ELIGIBLE, -1);
    make_set(inel, SET_INELIGIBLE, -1);
    make_set(bad, SET_ELIGIBLE, 13);
    check_no_gpu(mixed);
    check_auto_slow_consumer(mixed);
    check_auto_hungry_consumer(mixed);
    check_refused(mixed);
    check_share_env(mixed);
    check_routing(elig, inel);
    check_fallback(mixed);
    check_corrupt(bad);
    check_oom_retry(dir);
    check_restart(mixed);
    check_unchecked_pack(dir);
    check_hdf5(dir);
    t_rmrf(dir);
    free(dir);
    printf("ok\n");
    return 0;
}
