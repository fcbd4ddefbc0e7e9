/* SPDX-License-Identifier: Apache-2.0 */
/* The H2D stage: device batches hold the data set's bytes; a device buffer is not refilled
 * before the consumer's stream is done with it; restarts, destroy with copies in flight and
 * two loaders on one device. The host-only checks (no GPU: host batches, device -1, pinned
 * bytes 0, an explicit device request fails at create) run everywhere; the rest needs a
 * usable GPU and the test exits 77 (skip) without one. */
#include "test_loader_util.h"

#include <pthread.h>
#include <time.h>

#if defined(__has_include)
#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
#define HAVE_CUDA_RUNTIME 1
#endif
#endif

#define NREC 3000
#define RS 4096u /* raw record bytes */
#define BATCH 64

static char g_tmp[4096], g_raw[4200], g_var[4200];

static stoker_config *cfg_dev(int64_t device, int64_t bufs)
{
    stoker_config *cfg = tl_cfg(BATCH, 4);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DEVICE, device));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DEVICE_BUFFERS, bufs));
    return cfg;
}

/* Without a usable device: the default gives host batches and says so; asking for GPU 0
 * fails at create with a message. */
static void test_host_fallback(void)
{
    stoker_config *cfg = cfg_dev(0, 0);
    stoker_loader *l = tl_open(g_raw, cfg);
    stoker_batch *b = NULL;
    T_OK(stoker_loader_next(l, &b));
    tl_check_batch(b, RS);
    T_EQ_INT(stoker_batch_device(b), -1);
    T_ASSERT(stoker_batch_cuda_event(b) == NULL);
    T_OK(stoker_batch_wait_stream(b, NULL));
    T_OK(stoker_batch_release_stream(b, NULL));
    T_EQ_RC(stoker_batch_release_stream(b, NULL), STOKER_E_STATE);
    stoker_stats st;
    st.struct_size = sizeof st;
    T_OK(stoker_loader_get_stats(l, &st));
    T_EQ_INT(st.device, -1);
    T_EQ_INT(st.pinned_bytes, 0);
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);

    cfg = cfg_dev(1, 0); /* GPU 0, explicitly */
    l = NULL;
    const int rc = stoker_loader_create(&l, g_raw, cfg);
    T_ASSERT(rc == STOKER_E_CUDA || rc == STOKER_E_UNSUPPORTED);
    T_ASSERT(strlen(stoker_loader_errmsg(l)) > 0);
    printf("explicit GPU request without a GPU: %s\n", stoker_loader_errmsg(l));
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
}

#ifdef HAVE_CUDA_RUNTIME

#define CK(x) T_CUDA_OK(x)

/* Checks a device batch's bytes by copying them back; host arrays are read directly. */
static void check_device_batch(const stoker_batch *b, uint64_t rec_size, int device)
{
    stoker_batch_view v;
    v.struct_size = sizeof v;
    T_OK(stoker_batch_get_view(b, &v));
    T_EQ_INT(v.device, device);
    T_EQ_INT(stoker_batch_device(b), device);
    T_ASSERT(stoker_batch_cuda_event(b) != NULL);
    struct cudaPointerAttributes attr;
    CK(cudaPointerGetAttributes(&attr, v.data));
    T_EQ_INT(attr.type, cudaMemoryTypeDevice);
    T_EQ_INT(attr.device, device);
    uint8_t *host = malloc(v.nbytes ? v.nbytes : 1);
    /* The legacy stream waits for the copy; cudaMemcpy then runs on it, after. */
    T_OK(stoker_batch_wait_stream(b, NULL));
    CK(cudaMemcpy(host, v.data, v.nbytes, cudaMemcpyDeviceToHost));
    for (int64_t j = 0; j < v.count; j++) {
        const int64_t id = v.ids[j];
        T_EQ_INT(v.labels[j], tl_label(id));
        const uint8_t *p = host + (rec_size ? (uint64_t)j * rec_size : (uint64_t)v.offsets[j]);
        const size_t size = rec_size ? rec_size : (size_t)(v.offsets[j + 1] - v.offsets[j]);
        if (!rec_size)
            T_EQ_INT(size, tl_var_size(id));
        for (size_t k = 0; k < size; k++)
            if (p[k] != tl_byte(id, k))
                T_FAIL("device batch: record %" PRId64 " byte %zu: %u != %u", id, k, p[k],
                       tl_byte(id, k));
    }
    free(host);
}

/* Every byte of two epochs, fixed-size and variable-size records; stats; the ring's STATE
 * error when every device buffer is held. */
static void test_bytes(const char *path, uint64_t rec_size)
{
    stoker_config *cfg = cfg_dev(1, 2);
    stoker_loader *l = tl_open(path, cfg);
    int64_t nb = 0, seen = 0;
    T_OK(stoker_loader_num_batches(l, &nb));
    for (int ends = 0; ends < 2;) {
        stoker_batch *b = NULL;
        const int rc = stoker_loader_next(l, &b);
        if (rc == STOKER_END) {
            ends++;
            continue;
        }
        if (rc != 0)
            T_FAIL("next: %s", stoker_loader_errmsg(l));
        check_device_batch(b, rec_size, 0);
        seen++;
        T_OK(stoker_batch_release(b));
    }
    T_EQ_INT(seen, 2 * nb);
    stoker_stats st;
    st.struct_size = sizeof st;
    T_OK(stoker_loader_get_stats(l, &st));
    T_EQ_INT(st.device, 0);
    T_ASSERT(st.pinned_bytes > 0);
    printf("bytes ok (%s records): %" PRId64 " batches, %" PRId64 " pinned bytes\n",
           rec_size ? "fixed" : "variable", seen, st.pinned_bytes);
    /* Two buffers: holding two, a third next is refused, and works after a release. */
    stoker_batch *b1 = NULL, *b2 = NULL, *b3 = NULL;
    T_OK(stoker_loader_next(l, &b1));
    T_OK(stoker_loader_next(l, &b2));
    T_EQ_RC(stoker_loader_next(l, &b3), STOKER_E_STATE);
    T_OK(stoker_batch_release(b1));
    T_OK(stoker_loader_next(l, &b3));
    check_device_batch(b3, rec_size, 0);
    T_OK(stoker_batch_release(b2));
    T_OK(stoker_batch_release(b3));
    T_EQ_RC(stoker_batch_release(b3), STOKER_E_STATE);
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
}

/* Corrupt records with pieces copied as they finish (batches of 256: 8 pieces): ERROR fails
 * only the batches that hold one; SKIP's replacements, made after the other pieces were
 * copied (and, for records that vary, laid out again), are what reaches the device. */
static void test_corrupt(const char *name, uint64_t rec_size)
{
    char path[4200], shard[4200];
    snprintf(path, sizeof path, "%s/%s", g_tmp, name);
    tl_make(path, NREC, rec_size, 0, 1 << 20);
    static const int64_t bad[] = {5, 301, 1201, 2999}; /* none of size 0 */
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        tl_flip_byte(path, bad[i], shard, sizeof shard);
    stoker_config *cfg = tl_cfg(256, 4);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DEVICE, 1));
    for (int policy = STOKER_ON_CORRUPT_ERROR; policy <= STOKER_ON_CORRUPT_SKIP; policy++) {
        T_OK(stoker_config_set_int(cfg, STOKER_OPT_ON_CORRUPT, policy));
        stoker_loader *l = tl_open(path, cfg);
        int failed = 0, good = 0, rc;
        stoker_batch *b = NULL;
        while ((rc = stoker_loader_next(l, &b)) != STOKER_END) {
            if (rc != 0) {
                T_EQ_RC(rc, STOKER_E_CORRUPT);
                T_CONTAINS(stoker_loader_errmsg(l), "CRC32C mismatch");
                failed++;
                continue;
            }
            for (int64_t j = 0; j < stoker_batch_count(b); j++)
                for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
                    T_ASSERT(stoker_batch_ids(b)[j] != bad[i]);
            check_device_batch(b, rec_size, 0);
            good++;
            T_OK(stoker_batch_release(b));
        }
        const int batches = (NREC + 255) / 256;
        T_ASSERT(policy == STOKER_ON_CORRUPT_SKIP
                     ? failed == 0 && good == batches
                     : failed >= 1 && failed <= 4 && good == batches - failed);
        stoker_loader_destroy(l);
    }
    stoker_config_destroy(cfg);
    printf("corrupt records on the device ok (%s records)\n", rec_size ? "fixed" : "variable");
}

static void CUDART_CB sleep_50ms(void *arg)
{
    (void)arg;
    const struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* No reuse before release: per batch, the consumer's stream first sleeps 50 ms (a slow
 * training step), then reads the batch (copies it out); the batch is released with
 * release_stream before any of that ran. With two device buffers, the loader would
 * overwrite a buffer long before the read if it did not wait for the release event. */
static void test_no_reuse_before_release(void)
{
    enum { STEPS = 16 };
    stoker_config *cfg = cfg_dev(1, 2);
    stoker_loader *l = tl_open(g_raw, cfg);
    cudaStream_t my;
    CK(cudaStreamCreateWithFlags(&my, cudaStreamNonBlocking));
    uint8_t *out[STEPS];
    int64_t ids[STEPS][BATCH], counts[STEPS];
    for (int k = 0; k < STEPS; k++) {
        stoker_batch *b = NULL;
        T_OK(stoker_loader_next(l, &b));
        const uint64_t n = stoker_batch_nbytes(b);
        counts[k] = stoker_batch_count(b);
        memcpy(ids[k], stoker_batch_ids(b), (size_t)counts[k] * sizeof(int64_t));
        CK(cudaMallocHost((void **)&out[k], n));
        T_OK(stoker_batch_wait_stream(b, my));
        CK(cudaLaunchHostFunc(my, sleep_50ms, NULL));
        CK(cudaMemcpyAsync(out[k], stoker_batch_data(b), n, cudaMemcpyDeviceToHost, my));
        T_OK(stoker_batch_release_stream(b, my));
    }
    CK(cudaStreamSynchronize(my));
    for (int k = 0; k < STEPS; k++) {
        for (int64_t j = 0; j < counts[k]; j++)
            for (uint64_t x = 0; x < RS; x++)
                if (out[k][(uint64_t)j * RS + x] != tl_byte(ids[k][j], x))
                    T_FAIL("step %d record %" PRId64 " byte %" PRIu64 " was overwritten "
                           "before the consumer's stream read it",
                           k, ids[k][j], x);
        CK(cudaFreeHost(out[k]));
    }
    CK(cudaStreamDestroy(my));
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
    printf("no reuse before release ok (%d slow steps)\n", STEPS);
}

/* Restarts drop prefetched copies: epoch 1 after set_epoch equals a host loader's. */
static void test_set_epoch(void)
{
    stoker_config *hc = cfg_dev(-1, 0), *gc = cfg_dev(1, 4);
    stoker_loader *h = tl_open(g_raw, hc), *g = tl_open(g_raw, gc);
    for (int k = 0; k < 5; k++) { /* leave prefetched copies behind */
        stoker_batch *b = NULL;
        T_OK(stoker_loader_next(g, &b));
        T_OK(stoker_batch_release(b));
    }
    T_OK(stoker_loader_set_epoch(h, 1));
    T_OK(stoker_loader_set_epoch(g, 1));
    stoker_batch *hb = NULL, *gb = NULL;
    int64_t n = 0;
    while (stoker_loader_next(h, &hb) == 0) {
        T_OK(stoker_loader_next(g, &gb));
        T_EQ_INT(stoker_batch_epoch(gb), 1);
        T_EQ_INT(stoker_batch_position(gb), stoker_batch_position(hb));
        T_EQ_INT(stoker_batch_count(gb), stoker_batch_count(hb));
        for (int64_t j = 0; j < stoker_batch_count(hb); j++)
            T_EQ_INT(stoker_batch_ids(gb)[j], stoker_batch_ids(hb)[j]);
        if (n++ % 7 == 0)
            check_device_batch(gb, RS, 0);
        T_OK(stoker_batch_release(hb));
        T_OK(stoker_batch_release(gb));
    }
    T_EQ_RC(stoker_loader_next(g, &gb), STOKER_END);
    stoker_loader_destroy(h);
    stoker_loader_destroy(g);
    stoker_config_destroy(hc);
    stoker_config_destroy(gc);
    printf("set_epoch ok (%" PRId64 " batches)\n", n);
}

/* Destroy while copies are in flight and batches are held, many times. */
static void test_destroy_in_flight(void)
{
    stoker_config *cfg = cfg_dev(1, 4);
    for (int round = 0; round < 20; round++) {
        stoker_loader *l = tl_open(g_raw, cfg);
        stoker_batch *b = NULL;
        for (int k = 0; k < round % 4; k++)
            T_OK(stoker_loader_next(l, &b)); /* held at destroy, copies prefetched */
        stoker_loader_destroy(l);
    }
    stoker_config_destroy(cfg);
    printf("destroy in flight ok\n");
}

typedef struct {
    const char *path;
    int64_t batches;
    int failed;
} two_arg;

/* A consumer with its own stream, checking every batch. */
static void *two_consumer(void *arg)
{
    two_arg *a = arg;
    stoker_config *cfg = cfg_dev(1, 3);
    stoker_loader *l = tl_open(a->path, cfg);
    stoker_batch *b = NULL;
    int rc;
    while ((rc = stoker_loader_next(l, &b)) == 0) {
        check_device_batch(b, RS, 0);
        T_OK(stoker_batch_release_stream(b, NULL));
        a->batches++;
    }
    a->failed = rc != STOKER_END;
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
    return NULL;
}

static void test_two_loaders(void)
{
    two_arg a = {g_raw, 0, 0}, b = {g_raw, 0, 0};
    pthread_t ta, tb;
    T_ASSERT(pthread_create(&ta, NULL, two_consumer, &a) == 0);
    T_ASSERT(pthread_create(&tb, NULL, two_consumer, &b) == 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    T_ASSERT(!a.failed && !b.failed);
    T_EQ_INT(a.batches, (NREC + BATCH - 1) / BATCH);
    T_EQ_INT(b.batches, a.batches);
    printf("two loaders on one device ok\n");
}

/* The consumer's current device is left as it was (only with two or more GPUs). */
static void test_current_device_kept(int ndev)
{
    if (ndev < 2)
        return;
    CK(cudaSetDevice(ndev - 1));
    stoker_config *cfg = cfg_dev(1, 0);
    stoker_loader *l = tl_open(g_raw, cfg);
    stoker_batch *b = NULL;
    T_OK(stoker_loader_next(l, &b));
    int cur = -1;
    CK(cudaGetDevice(&cur));
    T_EQ_INT(cur, ndev - 1);
    check_device_batch(b, RS, 0);
    T_OK(stoker_batch_release(b));
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
    CK(cudaSetDevice(0));
    printf("current device kept ok\n");
}

static int run_gpu_tests(void)
{
    const int ndev = (int)stoker_capability_get(STOKER_CAP_CUDA_DEVICES);
    if (ndev <= 0)
        return T_SKIP;
    test_bytes(g_raw, RS);
    test_bytes(g_var, 0);
    test_corrupt("badraw", RS);
    test_corrupt("badvar", 0);
    test_no_reuse_before_release();
    test_set_epoch();
    test_destroy_in_flight();
    test_two_loaders();
    test_current_device_kept(ndev);
    return 0;
}

#else

static int run_gpu_tests(void)
{
    return T_SKIP;
}

#endif

int main(void)
{
    char *tmp = t_mkdtemp("gpu_h2d");
    snprintf(g_tmp, sizeof g_tmp, "%s", tmp);
    snprintf(g_raw, sizeof g_raw, "%s/raw", tmp);
    snprintf(g_var, sizeof g_var, "%s/var", tmp);
    tl_make(g_raw, NREC, RS, 0, 4 << 20);
    tl_make(g_var, NREC, 0, 512, 64 << 10);
    const int gpus = (int)stoker_capability_get(STOKER_CAP_CUDA_DEVICES);
    if (gpus <= 0)
        test_host_fallback();
    const int rc = run_gpu_tests();
    t_rmrf(tmp);
    free(tmp);
    if (rc == T_SKIP) {
        printf("gpu h2d: host checks ok; no usable GPU, GPU checks skipped\n");
        return T_SKIP;
    }
    printf("gpu h2d ok\n");
    return 0;
}
