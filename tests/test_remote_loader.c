/* SPDX-License-Identifier: Apache-2.0 */
/* A loader on a remote data set against the same loader on the local copy: every batch of
 * two epochs equal, byte for byte, with a restart in the middle of the first and the loader
 * destroyed with blocks in flight; several workers, the read-ahead thread and the client's
 * thread all at work (this program is also run under ThreadSanitizer). Run by
 * tests/python/test_remote.py, which serves the data set (with faults) and sets:
 *
 *   STOKER_TEST_REMOTE_URL    the data set's URL
 *   STOKER_TEST_REMOTE_LOCAL  the same data set's local directory
 *   STOKER_TEST_REMOTE_CACHE  an empty directory for the block cache
 *
 * Without them (a plain ctest run), or without libcurl, it skips. */
#include "testutil.h"

#include <stdbool.h>

#define BLOCK 16384

static stoker_loader *make(const char *path, const char *cache)
{
    stoker_config *cfg = NULL;
    T_OK(stoker_config_create(&cfg));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_BATCH_SIZE, 24));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SEED, 7));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_THREADS, 3));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DEVICE, -1));
    T_OK(stoker_config_set_string(cfg, STOKER_OPT_CACHE_DIR, cache));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_BLOCK_SIZE, BLOCK));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_FETCH_WINDOW, 6 * BLOCK));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_FETCH_TRANSFERS, 5)); /* two clients: 3 and 2 */
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_CACHE_LIMIT, 64 * BLOCK));
    stoker_loader *l = NULL;
    const int rc = stoker_loader_create(&l, path, cfg);
    if (rc != 0)
        T_FAIL("%s: %s", path, l ? stoker_loader_errmsg(l) : stoker_strerror(rc));
    stoker_config_destroy(cfg);
    return l;
}

/* The next batch of both loaders, compared; false at the end of the epoch. */
static bool same_next(stoker_loader *a, stoker_loader *b)
{
    stoker_batch *x = NULL, *y = NULL;
    const int ra = stoker_loader_next(a, &x);
    if (ra < 0)
        T_FAIL("local: %s", stoker_loader_errmsg(a));
    const int rb = stoker_loader_next(b, &y);
    if (rb < 0)
        T_FAIL("remote: %s", stoker_loader_errmsg(b));
    T_EQ_INT(ra, rb);
    if (ra == STOKER_END)
        return false;
    const int64_t n = stoker_batch_count(x);
    T_EQ_INT(n, stoker_batch_count(y));
    T_EQ_INT(stoker_batch_nbytes(x), stoker_batch_nbytes(y));
    T_ASSERT(memcmp(stoker_batch_ids(x), stoker_batch_ids(y), (size_t)n * 8) == 0);
    T_ASSERT(memcmp(stoker_batch_labels(x), stoker_batch_labels(y), (size_t)n * 8) == 0);
    T_ASSERT(memcmp(stoker_batch_data(x), stoker_batch_data(y), stoker_batch_nbytes(x)) == 0);
    T_OK(stoker_batch_release(x));
    T_OK(stoker_batch_release(y));
    return true;
}

int main(void)
{
    const char *url = getenv("STOKER_TEST_REMOTE_URL");
    const char *local = getenv("STOKER_TEST_REMOTE_LOCAL");
    const char *cache = getenv("STOKER_TEST_REMOTE_CACHE");
    if (!url || !local || !cache) {
        printf("skip: run by tests/python/test_remote.py (STOKER_TEST_REMOTE_URL unset)\n");
        return T_SKIP;
    }
    stoker_loader *a = make(local, cache), *b = make(url, cache);
    int64_t batches = 0;
    T_OK(stoker_loader_num_batches(a, &batches));
    T_ASSERT(batches >= 6);
    /* half an epoch, then a restart at epoch 1 while blocks of epoch 0 are on their way */
    for (int64_t i = 0; i < batches / 2; i++)
        T_ASSERT(same_next(a, b));
    T_OK(stoker_loader_set_epoch(a, 1));
    T_OK(stoker_loader_set_epoch(b, 1));
    int64_t seen = 0;
    while (same_next(a, b))
        seen++;
    T_EQ_INT(seen, batches);
    T_OK(stoker_loader_set_epoch(a, 2));
    T_OK(stoker_loader_set_epoch(b, 2));
    for (int64_t i = 0; i < 2; i++)
        T_ASSERT(same_next(a, b));
    stoker_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    T_OK(stoker_loader_get_stats(b, &st));
    printf("batches=%lld requests=%llu retries=%llu hits=%llu misses=%llu\n", (long long)batches,
           (unsigned long long)st.remote_requests, (unsigned long long)st.remote_retries,
           (unsigned long long)st.cache_hits, (unsigned long long)st.cache_misses);
    T_ASSERT(st.remote_requests > 0);
    /* destroyed mid-epoch, with the read-ahead's blocks in flight */
    stoker_loader_destroy(b);
    stoker_loader_destroy(a);
    return 0;
}
