/* SPDX-License-Identifier: Apache-2.0 */
/* Stress of the whole pipeline with many threads, meant to run under ThreadSanitizer too
 * (scripts/test.sh does): a loader over a small JPEG data set with the train transform,
 * 4 worker threads and depth 2, many short epochs, every batch handed to another thread
 * that releases it (so releases race with the workers refilling slots and with
 * stoker_loader_next), set_epoch, state save and restore into loaders of other thread
 * counts and depths, and loaders destroyed mid-epoch with reads and decodes in flight.
 * Every batch's samples are hashed per (epoch, position), and every repeat of a batch (after
 * set_epoch, after a restore, in another loader) must hash the same. */
#include "jpegutil.h"
#include "test_loader_util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define RECORDS 44
#define BATCH 4
#define NBATCH (RECORDS / BATCH)
#define CROP 16
#define EPOCHS (SANITIZED ? 40 : 100)
#define DESTROY_CYCLES (SANITIZED ? 30 : 60)

/* ---- the releasing thread ---- */

#define QCAP 64

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    stoker_batch *q[QCAP];
    int head, count, stop;
} g_rel = {.mu = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
static atomic_long g_released, g_state_busy;

static void *releaser_main(void *arg)
{
    (void)arg;
    uint64_t rng = 77;
    pthread_mutex_lock(&g_rel.mu);
    for (;;) {
        while (g_rel.count == 0 && !g_rel.stop)
            pthread_cond_wait(&g_rel.cond, &g_rel.mu);
        if (g_rel.count == 0 && g_rel.stop)
            break;
        stoker_batch *b = g_rel.q[g_rel.head];
        pthread_mutex_unlock(&g_rel.mu);
        if (t_rand(&rng) % 4 == 0) { /* sometimes late, so that next() finds its slot held */
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
        const int rc = stoker_batch_release(b);
        if (rc != 0)
            T_FAIL("release from another thread: %s", stoker_strerror(rc));
        atomic_fetch_add(&g_released, 1);
        pthread_mutex_lock(&g_rel.mu);
        g_rel.head = (g_rel.head + 1) % QCAP;
        g_rel.count--;
        pthread_cond_broadcast(&g_rel.cond);
    }
    pthread_mutex_unlock(&g_rel.mu);
    return NULL;
}

static void hand_off(stoker_batch *b)
{
    pthread_mutex_lock(&g_rel.mu);
    T_ASSERT(g_rel.count < QCAP);
    g_rel.q[(g_rel.head + g_rel.count) % QCAP] = b;
    g_rel.count++;
    pthread_cond_broadcast(&g_rel.cond);
    pthread_mutex_unlock(&g_rel.mu);
}

/* Waits until the releasing thread has given back every batch handed to it. */
static void drain(void)
{
    pthread_mutex_lock(&g_rel.mu);
    while (g_rel.count > 0)
        pthread_cond_wait(&g_rel.cond, &g_rel.mu);
    pthread_mutex_unlock(&g_rel.mu);
}

/* ---- batches ---- */

static uint64_t g_hash[EPOCHS + 8][NBATCH];
static int g_seen[EPOCHS + 8][NBATCH];

static uint64_t hash_batch(const stoker_batch *b)
{
    uint64_t h = 1469598103934665603ull;
    const uint8_t *d = stoker_batch_data(b);
    for (uint64_t i = 0; i < stoker_batch_nbytes(b); i++)
        h = (h ^ d[i]) * 1099511628211ull;
    const int64_t *ids = stoker_batch_ids(b);
    for (int64_t j = 0; j < stoker_batch_count(b); j++)
        h = (h ^ (uint64_t)ids[j]) * 1099511628211ull;
    return h;
}

/* Checks one batch against the expected (epoch, position) and against the hash recorded for
 * it by any earlier delivery. */
static void check(const stoker_batch *b, int64_t epoch, int64_t pos)
{
    T_EQ_INT(stoker_batch_epoch(b), epoch);
    T_EQ_INT(stoker_batch_position(b), pos);
    T_EQ_INT(stoker_batch_count(b), BATCH);
    T_EQ_INT(stoker_batch_nbytes(b), BATCH * CROP * CROP * 3 * 2);
    const int64_t *ids = stoker_batch_ids(b), *labels = stoker_batch_labels(b);
    for (int j = 0; j < BATCH; j++) {
        T_ASSERT(ids[j] >= 0 && ids[j] < RECORDS);
        T_EQ_INT(labels[j], ids[j] % 7);
    }
    T_ASSERT(epoch < EPOCHS + 8);
    const uint64_t h = hash_batch(b);
    if (g_seen[epoch][pos] && g_hash[epoch][pos] != h)
        T_FAIL("epoch %lld batch %lld differs from its first delivery", (long long)epoch,
               (long long)pos);
    g_hash[epoch][pos] = h;
    g_seen[epoch][pos] = 1;
}

/* stoker_loader_next that waits for the releasing thread when the ring slot is held. */
static int next_batch(stoker_loader *l, stoker_batch **b)
{
    for (;;) {
        const int rc = stoker_loader_next(l, b);
        if (rc != STOKER_E_STATE)
            return rc;
        atomic_fetch_add(&g_state_busy, 1);
        drain();
    }
}

/* Takes the batches of `epoch` from position `pos` to its end (and the STOKER_END), each
 * released by the other thread (every fifth by this one). */
static void run_epoch(stoker_loader *l, int64_t epoch, int64_t pos, uint64_t *rng)
{
    for (;; pos++) {
        stoker_batch *b = NULL;
        const int rc = next_batch(l, &b);
        if (rc == STOKER_END) {
            T_EQ_INT(pos, NBATCH);
            return;
        }
        if (rc != 0)
            T_FAIL("next: %s: %s", stoker_strerror(rc), stoker_loader_errmsg(l));
        check(b, epoch, pos);
        if (t_rand(rng) % 5 == 0)
            T_OK(stoker_batch_release(b));
        else
            hand_off(b);
    }
}

static void make_set(const char *path)
{
    static const t_jpeg_kind kinds[] = {
        {"420", 3, 2, 2, 0, 0, 0},
        {"444", 3, 1, 1, 0, 0, 0},
        {"gray", 1, 1, 1, 0, 0, 0},
        {"prog", 3, 2, 2, 1, 0, 0},
    };
    const t_jpeg_set spec = {kinds, 4, {24, 5, 7}, {20, 3, 9}, 7, 12000}; /* several shards */
    t_write_jpeg_set(path, RECORDS, &spec);
}

static stoker_config *config(int threads, int depth)
{
    stoker_config *cfg = tl_cfg(BATCH, threads);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DEPTH, depth));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_TRANSFORM, STOKER_TRANSFORM_TRAIN));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SIZE, CROP));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DTYPE, STOKER_DTYPE_FLOAT16));
    return cfg;
}

int main(void)
{
    char *tmp = t_mkdtemp("stress");
    char path[4200];
    snprintf(path, sizeof path, "%s/jpeg", tmp);
    make_set(path);
    pthread_t releaser;
    T_EQ_INT(pthread_create(&releaser, NULL, releaser_main, NULL), 0);
    uint64_t rng = 5;

    /* Many short epochs with 4 threads and depth 2; a state saved mid-epoch now and then is
     * restored into a loader with other threads and depth, which must continue alike. */
    stoker_config *cfg = config(4, 2);
    stoker_loader *l = tl_open(path, cfg);
    int restores = 0;
    for (int64_t e = 0; e < EPOCHS; e++) {
        const int64_t cut = (int64_t)(t_rand(&rng) % NBATCH);
        for (int64_t pos = 0; pos < cut; pos++) {
            stoker_batch *b = NULL;
            T_OK(next_batch(l, &b));
            check(b, e, pos);
            hand_off(b);
        }
        if (e % 3 == 1) {
            uint8_t state[STOKER_STATE_SIZE];
            size_t n = 0;
            T_OK(stoker_loader_state_save(l, state, sizeof state, &n));
            T_EQ_INT(n, STOKER_STATE_SIZE);
            stoker_config *c2 = config(1 + (int)(t_rand(&rng) % 3), 2 + (int)(t_rand(&rng) % 3));
            stoker_loader *l2 = tl_open(path, c2);
            T_OK(stoker_loader_state_restore(l2, state, n));
            run_epoch(l2, e, cut, &rng);
            drain();
            if (restores++ % 2 == 0) {
                /* restoring into the running loader, once its batches are back */
                T_OK(stoker_loader_state_restore(l, state, n));
            }
            stoker_loader_destroy(l2);
            stoker_config_destroy(c2);
        }
        run_epoch(l, e, cut, &rng);
    }
    /* set_epoch back to earlier epochs: the same batches again */
    for (int64_t e = EPOCHS - 1; e >= 0; e -= 5) {
        drain();
        T_OK(stoker_loader_set_epoch(l, e));
        run_epoch(l, e, 0, &rng);
    }
    drain();
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);

    /* Destroyed mid-epoch, at a random point, with batches held and read-ahead in flight. */
    for (int c = 0; c < DESTROY_CYCLES; c++) {
        cfg = config(4, 2 + c % 3);
        l = tl_open(path, cfg);
        const int64_t e = (int64_t)(t_rand(&rng) % EPOCHS);
        T_OK(stoker_loader_set_epoch(l, e));
        const int64_t take = (int64_t)(t_rand(&rng) % NBATCH);
        stoker_batch *held = NULL;
        for (int64_t pos = 0; pos < take; pos++) {
            stoker_batch *b = NULL;
            T_OK(next_batch(l, &b));
            check(b, e, pos);
            if (held)
                hand_off(held);
            held = b;
        }
        drain();          /* destroy is not concurrent with releases; `held` stays held */
        if (c % 4 == 0) { /* sometimes with the workers still busy decoding */
            struct timespec ts = {0, (long)(t_rand(&rng) % 2000000)};
            nanosleep(&ts, NULL);
        }
        stoker_loader_destroy(l);
        stoker_config_destroy(cfg);
    }

    pthread_mutex_lock(&g_rel.mu);
    g_rel.stop = 1;
    pthread_cond_broadcast(&g_rel.cond);
    pthread_mutex_unlock(&g_rel.mu);
    T_EQ_INT(pthread_join(releaser, NULL), 0);
    printf("%d epochs, %d restores, %d destroy cycles; %ld batches released by another thread, "
           "%ld calls found their slot still held\n",
           EPOCHS, restores, DESTROY_CYCLES, (long)atomic_load(&g_released),
           (long)atomic_load(&g_state_busy));
    t_rmrf(tmp);
    free(tmp);
    return 0;
}
