/* SPDX-License-Identifier: Apache-2.0 */
/* The loader under faults: failed and short reads through the fault-injecting back-end,
 * io_uring setup failure, corrupt payloads with both policies, failed allocations during
 * create, no allocation in steady state, destroy at any moment. Run it under ASan and TSan
 * too: no leak, no race, no hang. */
#include "source/dataset.h"
#include "io/reader.h"
#include "test_loader_util.h"

#ifdef STOKER_HAVE_HDF5
#include <hdf5.h>
#endif

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#define N 200
#define RS 300

static char g_tmp[4096];
static tl_run g_a, g_b;

/* Reads l's epoch with one read made to fail: exactly one batch fails with -EIO, its message
 * naming `where` (the file), the record and the error; every other batch holds its records.
 * `what` says which run, in a failure's message. */
static void drain_one_eio(stoker_loader *l, const char *where, const char *what)
{
    int failures = 0, ok = 0, rc;
    stoker_batch *b = NULL;
    while ((rc = stoker_loader_next(l, &b)) != STOKER_END) {
        if (rc == 0) {
            tl_check_batch(b, RS);
            T_OK(stoker_batch_release(b));
            ok++;
            continue;
        }
        if (rc != -EIO)
            T_FAIL("%s: next: %s (%d): %s", what, stoker_strerror(rc), rc, stoker_loader_errmsg(l));
        T_CONTAINS(stoker_loader_errmsg(l), where);
        T_CONTAINS(stoker_loader_errmsg(l), ": record ");
        T_CONTAINS(stoker_loader_errmsg(l), "input/output error");
        failures++;
    }
    /* one read failed: one batch lost, the loader went on with the following ones */
    T_EQ_INT(failures, 1);
    T_EQ_INT(ok, (N + 15) / 16 - 1);
}

static void test_eio(void)
{
    stoker_config *cfg = tl_cfg(16, 2);
    for (uint64_t nth = 1; nth <= 15; nth += 7) {
        stoker__io_fault f = {.fail_read_at = nth};
        stoker__io_fault_set(&f);
        char path[4200];
        snprintf(path, sizeof path, "%s/raw", g_tmp);
        stoker_loader *l = tl_open(path, cfg);
        stoker_stats st = {.struct_size = sizeof st};
        T_OK(stoker_loader_get_stats(l, &st));
        T_EQ_STR(stoker_backend_name(st.backend), "pread");
        char what[64];
        snprintf(what, sizeof what, "read %d fails", (int)nth);
        drain_one_eio(l, "/raw/", what);
        stoker_loader_destroy(l);
        stoker__io_fault_set(NULL);
    }
    stoker_config_destroy(cfg);
}

/* A bad sector under the bytes of record 23 of `path`, whose records lie end to end (packed
 * with alignment 1, or a contiguous HDF5 dataset): read in order by one pread worker,
 * batches of 16 records are read with one call each, and the one of records 16 to 31 fails
 * where record 23's bytes begin to fail. The batch fails naming record 23, its own length
 * and offset, not record 16, the first of the read; `bad` bytes from 100 into record 23 on
 * (600: into record 25) name every record whose bytes failed, those after the first read
 * again alone to find them. */
static void test_eio_in_merged_read(const char *path, uint64_t bad, const char *also)
{
    stoker_dataset *ds = NULL;
    T_OK(stoker_dataset_open(&ds, path, NULL));
    stoker__recloc loc;
    T_OK(stoker__dataset_locate(ds, 23, &loc));
    stoker_dataset_close(ds);
    stoker__io_fault f = {.bad_offset = loc.offset + 100, .bad_length = bad};
    stoker__io_fault_set(&f);
    stoker_config *cfg = tl_cfg(16, 1);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SHUFFLE, 0));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_BACKEND, STOKER_BACKEND_PREAD));
    stoker_loader *l = tl_open(path, cfg);
    char want[256];
    snprintf(want, sizeof want,
             ": record 23: read of %d bytes at offset %" PRIu64 " failed: input/output error%s", RS,
             loc.offset, also);
    drain_one_eio(l, want, path);
    stoker_loader_destroy(l);
    stoker__io_fault_set(NULL);
    stoker_config_destroy(cfg);
}

#ifdef STOKER_HAVE_HDF5
/* An HDF5 file of N records of RS bytes (tl_byte) and their labels: `images` chunked by
 * four rows, unfiltered, so the loader's workers read its chunks with their own reader, or
 * contiguous (the bytes of each record one extent, read by the loader's reader). */
static void make_h5(const char *path, bool chunked)
{
    uint8_t *img = malloc((size_t)N * RS);
    int64_t labels[N];
    T_ASSERT(img != NULL);
    for (int64_t id = 0; id < N; id++) {
        for (uint64_t k = 0; k < RS; k++)
            img[(uint64_t)id * RS + k] = tl_byte(id, k);
        labels[id] = tl_label(id);
    }
    const hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    T_ASSERT(f >= 0);
    const hsize_t dims[2] = {N, RS}, chunk[2] = {4, RS}, n = N;
    const hid_t sp = H5Screate_simple(2, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    T_ASSERT(sp >= 0 && dcpl >= 0 && (!chunked || H5Pset_chunk(dcpl, 2, chunk) >= 0));
    const hid_t d = H5Dcreate2(f, "images", H5T_STD_U8LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    T_ASSERT(d >= 0);
    T_ASSERT(H5Dwrite(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, img) >= 0);
    const hid_t lsp = H5Screate_simple(1, &n, NULL);
    const hid_t ld =
        H5Dcreate2(f, "labels", H5T_STD_I64LE, lsp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    T_ASSERT(ld >= 0);
    T_ASSERT(H5Dwrite(ld, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels) >= 0);
    H5Dclose(ld);
    H5Sclose(lsp);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(sp);
    T_ASSERT(H5Fclose(f) >= 0);
    free(img);
}

/* A failed read (EIO) of an HDF5 chunk, planned by a worker and read through its own
 * reader: under either policy the batch that needed it fails with -EIO and a message
 * naming the file, the record and the cause, and the loader goes on. It is a read error,
 * not a corrupt record: `skip` must not replace it (nor count it as skipped). */
static void test_hdf5_chunk_eio(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/chunked.h5", g_tmp);
    make_h5(path, true);
    const int32_t policies[2] = {STOKER_ON_CORRUPT_ERROR, STOKER_ON_CORRUPT_SKIP};
    for (int pi = 0; pi < 2; pi++) {
        stoker_config *cfg = tl_cfg(16, 2);
        T_OK(stoker_config_set_int(cfg, STOKER_OPT_ON_CORRUPT, policies[pi]));
        for (uint64_t nth = 1; nth <= 15; nth += 7) {
            stoker__io_fault f = {.fail_read_at = nth};
            stoker__io_fault_set(&f);
            stoker_loader *l = tl_open(path, cfg);
            char what[64];
            snprintf(what, sizeof what, "on_corrupt %d, read %d fails", (int)policies[pi],
                     (int)nth);
            drain_one_eio(l, path, what);
            T_ASSERT(stoker__io_fault_reads() >= nth); /* the chunks went through the hook */
            stoker_stats st = {.struct_size = sizeof st};
            T_OK(stoker_loader_get_stats(l, &st));
            T_EQ_INT(st.skipped, 0);
            stoker_loader_destroy(l);
            stoker__io_fault_set(NULL);
        }
        stoker_config_destroy(cfg);
    }
}
#endif

static void test_short_reads(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/raw", g_tmp);
    stoker_config *cfg = tl_cfg(16, 3);
    tl_run_with(path, cfg, &g_a, 1, RS);
    stoker__io_fault f = {.short_reads = true, .eintr = true};
    stoker__io_fault_set(&f);
    tl_run_with(path, cfg, &g_b, 1, RS); /* every batch's bytes are checked */
    T_ASSERT(stoker__io_fault_reads() > (uint64_t)N * 4);
    tl_same(&g_a, 0, &g_b);
    snprintf(path, sizeof path, "%s/var", g_tmp);
    tl_run_with(path, cfg, &g_b, 1, 0);
    T_EQ_INT(g_b.nids, N);
    stoker__io_fault_set(NULL);
    stoker_config_destroy(cfg);
}

static void test_uring_setup_failure(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/raw", g_tmp);
    stoker__io_fault f = {0};
    stoker__io_fault_set(&f);
    stoker_config *cfg = tl_cfg(16, 2);
    stoker_loader *l = tl_open(path, cfg);
    stoker_stats st = {.struct_size = sizeof st};
    T_OK(stoker_loader_get_stats(l, &st));
    T_EQ_INT(st.backend, STOKER_BACKEND_PREAD);
    stoker_batch *b = NULL;
    T_OK(stoker_loader_next(l, &b));
    tl_check_batch(b, RS);
    T_OK(stoker_batch_release(b));
    stoker_loader_destroy(l);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_BACKEND, STOKER_BACKEND_IO_URING));
    T_EQ_RC(stoker_loader_create(&l, path, cfg), STOKER_E_UNSUPPORTED);
    T_CONTAINS(stoker_loader_errmsg(l), "io_uring");
    stoker_loader_destroy(l);
    stoker__io_fault_set(NULL);
    stoker_config_destroy(cfg);
}

/* A flipped byte: ERROR names shard and record and goes on; SKIP replaces it
 * deterministically, keeps batches full and counts it. */
static void test_corrupt(const char *name, uint64_t rs)
{
    char path[4200], shard[4200];
    snprintf(path, sizeof path, "%s/%s", g_tmp, name);
    tl_make(path, N, rs, 0, 32 << 10);
    const int64_t bad = 77;
    tl_flip_byte(path, bad, shard, sizeof shard);
    char want[4400];
    snprintf(want, sizeof want, "%s: record %d: CRC32C mismatch", shard, (int)bad);

    stoker_config *cfg = tl_cfg(16, 2);
    stoker_loader *l = tl_open(path, cfg);
    int failures = 0, ok = 0, rc;
    stoker_batch *b = NULL;
    while ((rc = stoker_loader_next(l, &b)) != STOKER_END) {
        if (rc == 0) {
            for (int64_t j = 0; j < stoker_batch_count(b); j++)
                T_ASSERT(stoker_batch_ids(b)[j] != bad);
            tl_check_batch(b, rs);
            T_OK(stoker_batch_release(b));
            ok++;
            continue;
        }
        T_EQ_RC(rc, STOKER_E_CORRUPT);
        T_CONTAINS(stoker_loader_errmsg(l), want);
        failures++;
    }
    T_EQ_INT(failures, 1);
    T_EQ_INT(ok, (N + 15) / 16 - 1);
    stoker_loader_destroy(l);

    T_OK(stoker_config_set_int(cfg, STOKER_OPT_ON_CORRUPT, STOKER_ON_CORRUPT_SKIP));
    tl_run_with(path, cfg, &g_a, 2, rs);
    T_EQ_INT(g_a.nids, 2 * N);
    for (int64_t i = 0; i < g_a.nids; i++)
        T_ASSERT(g_a.ids[i] != bad);
    for (int64_t k = 0; k < g_a.nbatches; k++)
        T_EQ_INT(g_a.count[k], k % 13 == 12 ? N - 12 * 16 : 16);
    l = tl_open(path, cfg);
    memset(&g_b, 0, sizeof g_b);
    tl_collect(l, &g_b, 1, INT64_MAX, rs);
    stoker_stats st = {.struct_size = sizeof st};
    T_OK(stoker_loader_get_stats(l, &st));
    T_EQ_INT(st.skipped, 1);
    stoker_loader_destroy(l);
    /* the same replacement whatever the thread count and back-end */
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_THREADS, 1));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_BACKEND, STOKER_BACKEND_PREAD));
    tl_run_with(path, cfg, &g_b, 2, rs);
    tl_same(&g_a, 0, &g_b);
    stoker_config_destroy(cfg);
}

/* Everything corrupt: SKIP gives up after bounded tries instead of looping. */
static void test_all_corrupt(void)
{
    char path[4200], shard[4200];
    snprintf(path, sizeof path, "%s/allbad", g_tmp);
    tl_make(path, 5, RS, 0, 0);
    for (int64_t id = 0; id < 5; id++)
        tl_flip_byte(path, id, shard, sizeof shard);
    stoker_config *cfg = tl_cfg(4, 2);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_ON_CORRUPT, STOKER_ON_CORRUPT_SKIP));
    stoker_loader *l = tl_open(path, cfg);
    stoker_batch *b = NULL;
    T_EQ_RC(stoker_loader_next(l, &b), STOKER_E_CORRUPT);
    T_CONTAINS(stoker_loader_errmsg(l), "without an intact replacement");
    T_EQ_RC(stoker_loader_next(l, &b), STOKER_E_CORRUPT);
    T_EQ_RC(stoker_loader_next(l, &b), STOKER_END);
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
}

/* Fail the nth allocation of create for n = 1, 2, ... until create succeeds. */
static void test_alloc_failures(const char *name, int64_t threads)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", g_tmp, name);
    stoker_config *cfg = tl_cfg(16, threads);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DIRECT_IO, threads == 3));
    int failed = 0;
    for (uint64_t n = 1; n < 10000; n++) {
        stoker_loader *l = NULL;
        stoker__alloc_fail_at(n);
        const int rc = stoker_loader_create(&l, path, cfg);
        stoker__alloc_fail_at(0);
        if (rc == 0) {
            stoker_batch *b = NULL;
            T_OK(stoker_loader_next(l, &b));
            T_OK(stoker_batch_release(b));
            stoker_loader_destroy(l);
            break;
        }
        failed++;
        T_EQ_RC(rc, -ENOMEM);
        T_ASSERT(l == NULL || strlen(stoker_loader_errmsg(l)) > 0);
        stoker_loader_destroy(l);
    }
    T_ASSERT(failed > 5);
    stoker_config_destroy(cfg);
}

/* The nth worker thread fails to start (EAGAIN, as when the process is out of threads):
 * create fails with that error and a message, the workers already running are stopped and
 * joined (destroy does not hang, sanitizers see no leak or race), and the next create,
 * with nothing injected, works. */
static void test_thread_failures(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/raw", g_tmp);
    stoker_config *cfg = tl_cfg(16, 4);
    for (uint64_t n = 1; n <= 4; n++) {
        stoker_loader *l = NULL;
        stoker__thread_fail_at(n);
        const int rc = stoker_loader_create(&l, path, cfg);
        T_EQ_INT(stoker__thread_fail_at(0), n);
        T_EQ_RC(rc, -EAGAIN);
        T_ASSERT(l != NULL);
        T_CONTAINS(stoker_loader_errmsg(l), "cannot start worker thread");
        stoker_loader_destroy(l);
    }
    memset(&g_a, 0, sizeof g_a);
    stoker_loader *l = tl_open(path, cfg);
    tl_collect(l, &g_a, 1, INT64_MAX, RS);
    T_EQ_INT(g_a.nids, N);
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
}

/* Steady state allocates nothing: every allocation from here on would fail. */
static void test_no_steady_alloc(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/raw", g_tmp);
    stoker_config *cfg = tl_cfg(16, 3);
    stoker_loader *l = tl_open(path, cfg);
    stoker__alloc_fail_at(1);
    memset(&g_a, 0, sizeof g_a);
    tl_collect(l, &g_a, 3, INT64_MAX, RS);
    T_OK(stoker_loader_set_epoch(l, 7));
    tl_collect(l, &g_a, 1, INT64_MAX, RS);
    T_EQ_INT(stoker__alloc_fail_at(0), 0);
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
}

/* Destroy at any moment: right after create (workers mid-read), after k batches, with
 * batches outstanding, with slow (short) reads in flight. */
static void test_destroy_anytime(void)
{
    char path[4200];
    uint64_t seed = 11;
    for (int round = 0; round < 24; round++) {
        snprintf(path, sizeof path, "%s/%s", g_tmp, round % 2 ? "raw" : "var");
        const uint64_t rs = round % 2 ? RS : 0;
        stoker__io_fault f = {.short_reads = true};
        if (round % 3 == 0)
            stoker__io_fault_set(&f);
        stoker_config *cfg = tl_cfg(1 + (int64_t)(t_rand(&seed) % 20), 1 + round % 4);
        T_OK(stoker_config_set_int(cfg, STOKER_OPT_DEPTH, 1 + round % 5));
        stoker_loader *l = tl_open(path, cfg);
        const uint64_t k = t_rand(&seed) % 12;
        stoker_batch *held = NULL;
        for (uint64_t i = 0; i < k; i++) {
            stoker_batch *b = NULL;
            const int rc = stoker_loader_next(l, &b);
            if (rc == STOKER_END)
                continue;
            if (rc == STOKER_E_STATE && held) {
                T_CONTAINS(stoker_loader_errmsg(l), "still held");
                break; /* the held batch's slot is the next one's */
            }
            T_OK(rc);
            tl_check_batch(b, rs);
            if (!held && (t_rand(&seed) & 1))
                held = b; /* outstanding at destroy */
            else
                T_OK(stoker_batch_release(b));
        }
        if (t_rand(&seed) & 1)
            usleep((useconds_t)(t_rand(&seed) % 3000));
        stoker_loader_destroy(l);
        stoker__io_fault_set(NULL);
        stoker_config_destroy(cfg);
    }
}

/* Batches released from another thread while the consumer keeps asking. */
typedef struct rel_queue {
    pthread_mutex_t mu;
    stoker_batch *q[64];
    int head, tail;
    bool done;
} rel_queue;

static void *releaser(void *arg)
{
    rel_queue *r = arg;
    for (;;) {
        pthread_mutex_lock(&r->mu);
        const unsigned k = r->head;
        stoker_batch *b = r->head != r->tail ? r->q[r->head++ % 64] : NULL;
        const bool done = r->done && !b;
        pthread_mutex_unlock(&r->mu);
        if (b) /* both releases are documented callable from any thread */
            T_OK(k % 2 ? stoker_batch_release_stream(b, NULL) : stoker_batch_release(b));
        else if (done)
            return NULL;
        else
            usleep(100);
    }
}

static void test_release_elsewhere(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/raw", g_tmp);
    stoker_config *cfg = tl_cfg(8, 3);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DEPTH, 3));
    stoker_loader *l = tl_open(path, cfg);
    rel_queue r = {.mu = PTHREAD_MUTEX_INITIALIZER};
    pthread_t t;
    T_ASSERT(pthread_create(&t, NULL, releaser, &r) == 0);
    int got = 0, ends = 0;
    while (ends < 3) {
        stoker_batch *b = NULL;
        const int rc = stoker_loader_next(l, &b);
        if (rc == STOKER_END) {
            ends++;
            continue;
        }
        if (rc == STOKER_E_STATE) { /* all slots held until the other thread catches up */
            usleep(200);
            continue;
        }
        T_OK(rc);
        tl_check_batch(b, RS);
        got++;
        pthread_mutex_lock(&r.mu);
        r.q[r.tail++ % 64] = b;
        pthread_mutex_unlock(&r.mu);
    }
    pthread_mutex_lock(&r.mu);
    r.done = true;
    pthread_mutex_unlock(&r.mu);
    pthread_join(t, NULL);
    T_EQ_INT(got, 3 * ((N + 7) / 8));
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
}

/* stoker_dataset_errmsg is each thread's own: readers failing on different records, at the
 * same time, each read their own message, and a thread that never failed reads the open's
 * (none). */
typedef struct errmsg_reader {
    stoker_dataset *ds;
    int64_t id; /* the record this thread reads */
    bool bad;   /* whether it is corrupt */
    char want[64];
} errmsg_reader;

static void *errmsg_main(void *arg)
{
    const errmsg_reader *r = arg;
    uint8_t buf[RS];
    for (int k = 0; k < 2000; k++) {
        size_t got = 0;
        const int rc = stoker_dataset_read(r->ds, r->id, buf, sizeof buf, &got);
        T_EQ_RC(rc, r->bad ? STOKER_E_CORRUPT : 0);
        if (r->bad)
            T_CONTAINS(stoker_dataset_errmsg(r->ds), r->want);
        else
            T_EQ_STR(stoker_dataset_errmsg(r->ds), "");
    }
    return NULL;
}

static void test_dataset_errmsg_per_thread(void)
{
    char path[4200], shard[4200];
    snprintf(path, sizeof path, "%s/errmsg", g_tmp);
    tl_make(path, 40, RS, 0, 0);
    tl_flip_byte(path, 7, shard, sizeof shard);
    tl_flip_byte(path, 23, shard, sizeof shard);
    stoker_dataset *ds = NULL;
    T_OK(stoker_dataset_open(&ds, path, NULL));
    errmsg_reader r[3] = {{ds, 7, true, ""}, {ds, 23, true, ""}, {ds, 3, false, ""}};
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        snprintf(r[i].want, sizeof r[i].want, "record %d (shard record %d): CRC32C mismatch",
                 (int)r[i].id, (int)r[i].id);
        T_ASSERT(pthread_create(&t[i], NULL, errmsg_main, &r[i]) == 0);
    }
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    T_EQ_STR(stoker_dataset_errmsg(ds), ""); /* this thread failed nothing either */
    stoker_dataset_close(ds);
}

/* Consumer calls from two threads at once: the second is refused with STOKER_E_STATE, so
 * neither waits on the other's restart; no call hangs (the alarm fails the test if one
 * does). */
typedef struct restarter {
    stoker_loader *l;
    uint8_t state[STOKER_STATE_SIZE]; /* saved before the thread starts */
    atomic_bool stop;
    int calls, refused;
} restarter;

static void *restart_main(void *arg)
{
    restarter *r = arg;
    while (!atomic_load(&r->stop)) {
        const int rc = r->calls % 2 ? stoker_loader_set_epoch(r->l, 1)
                                    : stoker_loader_state_restore(r->l, r->state, sizeof r->state);
        if (rc != 0 && rc != STOKER_E_STATE)
            T_FAIL("restart from another thread: %d", rc);
        r->refused += rc == STOKER_E_STATE;
        r->calls++;
        usleep(50);
    }
    return NULL;
}

static void test_consumer_calls_from_two_threads(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/raw", g_tmp);
    stoker_config *cfg = tl_cfg(8, 2);
    stoker_loader *l = tl_open(path, cfg);
    restarter r = {.l = l};
    T_OK(stoker_loader_state_save(l, r.state, sizeof r.state, NULL));
    pthread_t t;
    alarm(60);
    T_ASSERT(pthread_create(&t, NULL, restart_main, &r) == 0);
    const double t0 = stoker__now();
    int delivered = 0;
    while (stoker__now() - t0 < 1.0) {
        stoker_batch *b = NULL;
        const int rc = stoker_loader_next(l, &b);
        if (rc == 0) {
            tl_check_batch(b, RS);
            T_OK(stoker_batch_release(b));
            delivered++;
        } else if (rc != STOKER_END && rc != STOKER_E_STATE) {
            T_FAIL("next: %d %s", rc, stoker_loader_errmsg(l));
        }
    }
    atomic_store(&r.stop, true);
    pthread_join(t, NULL);
    alarm(0);
    T_ASSERT(delivered > 0 && r.calls > 0);
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
}

int main(void)
{
    char *tmp = t_mkdtemp("loader-faults");
    snprintf(g_tmp, sizeof g_tmp, "%s", tmp);
    char path[4200];
    snprintf(path, sizeof path, "%s/raw", g_tmp);
    tl_make(path, N, RS, 0, 32 << 10);
    snprintf(path, sizeof path, "%s/var", g_tmp);
    tl_make(path, N, 0, 512, 8 << 10);
    test_eio();
#ifdef STOKER_HAVE_HDF5
    test_hdf5_chunk_eio();
    snprintf(path, sizeof path, "%s/contiguous.h5", g_tmp);
    make_h5(path, false);
    test_eio_in_merged_read(path, 1, "");
    test_eio_in_merged_read(path, 600, "; so did records 24, 25 (each read again alone)");
#endif
    snprintf(path, sizeof path, "%s/end_to_end", g_tmp);
    tl_make(path, N, RS, 1, 0);
    test_eio_in_merged_read(path, 1, "");
    test_eio_in_merged_read(path, 600, "; so did records 24, 25 (each read again alone)");
    test_short_reads();
    test_uring_setup_failure();
    test_corrupt("badraw", RS);
    test_corrupt("badvar", 0);
    test_all_corrupt();
    test_alloc_failures("raw", 2);
    test_alloc_failures("raw", 3); /* direct I/O: staging buffers */
    test_alloc_failures("var", 1);
    test_no_steady_alloc();
    test_thread_failures();
    test_destroy_anytime();
    test_release_elsewhere();
    test_dataset_errmsg_per_thread();
    test_consumer_calls_from_two_threads();
    t_rmrf(tmp);
    free(tmp);
    printf("loader faults ok\n");
    return 0;
}
