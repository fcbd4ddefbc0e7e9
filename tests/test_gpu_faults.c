/* SPDX-License-Identifier: Apache-2.0 */
/* CUDA resources that cannot be had, on a real GPU: the Nth CUDA resource request of
 * loader create (copy stream, events, device batch buffers, the normalisation staging
 * buffer, pinned batch slots) fails with cudaErrorMemoryAllocation, injected, for
 * N = 1, 2, ... until create makes no more requests than N. Then:
 *   - a pinned slot that cannot be had falls back to pageable memory, with a warning in
 *     the log, and the loader delivers every byte to the device all the same;
 *   - any other failure makes create return STOKER_E_CUDA with CUDA's message and what
 *     was being done, and leaves no device memory behind.
 * Then the copy thread fails to start: create returns -EAGAIN with a message. Runs with
 * and without GPU normalisation. Needs a usable GPU: exits 77 without one. */
#include "test_loader_util.h"

#include "common/common.h"

#if defined(__has_include)
#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
#define HAVE_CUDA_RUNTIME 1
#endif
#endif

#define NREC 200
#define H 16
#define W 20
#define RS (H * W * 3)
#define BATCH 32

#ifdef HAVE_CUDA_RUNTIME

#define CK(x) T_CUDA_OK(x)

typedef struct logged {
    int warnings;
    char last[512];
} logged;

static void on_log(void *user, int32_t level, const char *msg)
{
    logged *g = user;
    if (level == STOKER_LOG_WARN) {
        g->warnings++;
        snprintf(g->last, sizeof g->last, "%s", msg);
    }
}

/* One epoch on the device: every byte (raw) or every value's sign and order of magnitude
 * (normalised float32: v/255 - 0.5 over 0.25, so byte v maps to 4 v/255 - 2). */
static void check_epoch(stoker_loader *l, int norm)
{
    int64_t seen = 0;
    for (;;) {
        stoker_batch *b = NULL;
        const int rc = stoker_loader_next(l, &b);
        if (rc == STOKER_END)
            break;
        if (rc != 0)
            T_FAIL("next: %s", stoker_loader_errmsg(l));
        stoker_batch_view v;
        v.struct_size = sizeof v;
        T_OK(stoker_batch_get_view(b, &v));
        T_EQ_INT(v.device, 0);
        uint8_t *host = malloc(v.nbytes);
        T_OK(stoker_batch_wait_stream(b, NULL));
        CK(cudaMemcpy(host, v.data, v.nbytes, cudaMemcpyDeviceToHost));
        for (int64_t j = 0; j < v.count; j++)
            for (size_t k = 0; k < RS; k++) {
                const uint8_t want = tl_byte(v.ids[j], k);
                if (!norm && host[(size_t)j * RS + k] != want)
                    T_FAIL("record %" PRId64 " byte %zu: %u != %u", v.ids[j], k,
                           host[(size_t)j * RS + k], want);
                if (norm) { /* NHWC float32: element k of the record is byte k */
                    float f;
                    memcpy(&f, host + ((size_t)j * RS + k) * 4, 4);
                    const float expect = (float)want / 255.0f * 4.0f - 2.0f;
                    if (f < expect - 1e-4f || f > expect + 1e-4f)
                        T_FAIL("record %" PRId64 " value %zu: %g != %g", v.ids[j], k, (double)f,
                               (double)expect);
                }
            }
        seen += v.count;
        free(host);
        T_OK(stoker_batch_release(b));
    }
    T_EQ_INT(seen, NREC);
}

static size_t device_free(void)
{
    size_t free_b = 0, total = 0;
    CK(cudaMemGetInfo(&free_b, &total));
    return free_b;
}

static void test_faults(const char *path, int norm)
{
    stoker_config *cfg = tl_cfg(BATCH, 2);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DEVICE, 1)); /* GPU 0 */
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DEVICE_BUFFERS, 2));
    if (norm) {
        T_OK(stoker_config_set_int(cfg, STOKER_OPT_GPU_NORMALIZE, 1));
        T_OK(stoker_config_set_int(cfg, STOKER_OPT_DTYPE, STOKER_DTYPE_FLOAT32));
        T_OK(stoker_config_set_int(cfg, STOKER_OPT_LAYOUT, STOKER_LAYOUT_NHWC));
        for (int c = 0; c < 3; c++) {
            T_OK(stoker_config_set_float(cfg, (stoker_option)(STOKER_OPT_MEAN_R + c), 0.5));
            T_OK(stoker_config_set_float(cfg, (stoker_option)(STOKER_OPT_STD_R + c), 0.25));
        }
    }
    logged lg = {0};
    T_OK(stoker_config_set_log(cfg, on_log, &lg, STOKER_LOG_WARN));
    /* a first loader makes the CUDA context and whatever the runtime keeps for good */
    stoker_loader *l = tl_open(path, cfg);
    stoker_loader_destroy(l);
    const size_t free0 = device_free();
    int failed = 0, fell_back = 0;
    uint64_t n = 1;
    for (;; n++) {
        memset(&lg, 0, sizeof lg);
        l = NULL;
        stoker__cuda_fail_at(n);
        const int rc = stoker_loader_create(&l, path, cfg);
        const uint64_t made = stoker__cuda_fail_at(0);
        if (rc != 0) {
            T_EQ_RC(rc, STOKER_E_CUDA);
            T_CONTAINS(stoker_loader_errmsg(l), "out of memory");
            T_CONTAINS(stoker_loader_errmsg(l), "cuda");
            failed++;
            stoker_loader_destroy(l);
        } else {
            stoker_stats st;
            st.struct_size = sizeof st;
            T_OK(stoker_loader_get_stats(l, &st));
            T_EQ_INT(st.device, 0);
            if (lg.warnings > 0) { /* the injected failure hit a pinned slot */
                T_CONTAINS(lg.last, "pageable");
                fell_back++;
            }
            check_epoch(l, norm);
            stoker_loader_destroy(l);
            if (made < n)
                break; /* nothing was injected: every request has had its turn */
        }
        /* no device memory left behind (the allocator's granularity is 2 MiB) */
        const size_t now = device_free();
        if (now + (4u << 20) < free0)
            T_FAIL("after failing CUDA request %" PRIu64 ": %zu bytes of device memory lost", n,
                   free0 - now);
    }
    /* the copy thread cannot start (it is the first thread create starts) */
    l = NULL;
    stoker__thread_fail_at(1);
    T_EQ_RC(stoker_loader_create(&l, path, cfg), -EAGAIN);
    T_EQ_INT(stoker__thread_fail_at(0), 1);
    T_CONTAINS(stoker_loader_errmsg(l), "copy thread");
    stoker_loader_destroy(l);
    T_ASSERT(failed >= 4);    /* stream, two events, a device buffer at least */
    T_ASSERT(fell_back >= 2); /* the two pinned slots */
    printf("cuda faults ok (%s): %" PRIu64 " requests, %d failed create, %d fell back to "
           "pageable slots\n",
           norm ? "GPU normalisation" : "raw", n - 1, failed, fell_back);
    stoker_config_destroy(cfg);
}

static int run(const char *path)
{
    if (stoker_capability_get(STOKER_CAP_CUDA_DEVICES) <= 0)
        return T_SKIP;
    test_faults(path, 0);
    test_faults(path, 1);
    return 0;
}

#else

static int run(const char *path)
{
    (void)path;
    return T_SKIP;
}

#endif

int main(void)
{
    char *tmp = t_mkdtemp("gpu_faults");
    char path[4200];
    snprintf(path, sizeof path, "%s/img", tmp);
#ifdef HAVE_CUDA_RUNTIME
    tl_make_images(path, NREC, H, W);
#endif
    const int rc = run(path);
    t_rmrf(tmp);
    free(tmp);
    if (rc == T_SKIP)
        printf("gpu faults: no usable GPU, skipped\n");
    return rc;
}
