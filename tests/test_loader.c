/* SPDX-License-Identifier: Apache-2.0 */
/* The loader end to end on real data sets (written with the public writer) and real
 * io_uring: every record exactly once per epoch with the right bytes, labels and ids;
 * records that vary in size; back-ends and thread counts agree batch for batch; resume
 * mid-epoch and across an epoch boundary; ranks; drop_last; O_DIRECT; argument and state
 * errors. */
#include "test_loader_util.h"

static char g_raw[4096], g_var[4096], g_dense[4096];
#define NRAW 500
#define RAWSIZE 200
#define NVAR 301

static tl_run g_a, g_b;

/* Every record once per epoch, ordered batches, shuffled differently per epoch. */
static void test_once_per_epoch(void)
{
    stoker_config *cfg = tl_cfg(16, 2);
    tl_run_with(g_raw, cfg, &g_a, 2, RAWSIZE);
    const int64_t nb = (NRAW + 15) / 16;
    T_EQ_INT(g_a.nbatches, 2 * nb);
    static uint8_t seen[2][NRAW];
    for (int64_t k = 0; k < g_a.nbatches; k++) {
        T_EQ_INT(g_a.epoch[k], k / nb);
        T_EQ_INT(g_a.position[k], k % nb);
        T_EQ_INT(g_a.count[k], k % nb == nb - 1 ? NRAW - 16 * (nb - 1) : 16);
        for (int64_t j = 0; j < g_a.count[k]; j++)
            seen[k / nb][g_a.ids[g_a.start[k] + j]]++;
    }
    int64_t same = 0;
    for (int i = 0; i < NRAW; i++) {
        T_EQ_INT(seen[0][i], 1);
        T_EQ_INT(seen[1][i], 1);
        same += g_a.ids[i] == g_a.ids[NRAW + i];
    }
    T_ASSERT(same < NRAW / 10);

    /* shuffle off: ids in order */
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SHUFFLE, 0));
    tl_run_with(g_raw, cfg, &g_b, 1, RAWSIZE);
    for (int64_t i = 0; i < NRAW; i++)
        T_EQ_INT(g_b.ids[i], i);
    stoker_config_destroy(cfg);
}

/* The same batches whatever the back-end and thread count. */
static void test_backends_threads(void)
{
    stoker_config *cfg = tl_cfg(16, 1);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_BACKEND, STOKER_BACKEND_PREAD));
    tl_run_with(g_raw, cfg, &g_a, 2, RAWSIZE);
    if (stoker_capability_get(STOKER_CAP_IO_URING)) {
        T_OK(stoker_config_set_int(cfg, STOKER_OPT_BACKEND, STOKER_BACKEND_IO_URING));
        T_OK(stoker_config_set_int(cfg, STOKER_OPT_THREADS, 3));
        tl_run_with(g_raw, cfg, &g_b, 2, RAWSIZE);
        tl_same(&g_a, 0, &g_b);
        stoker_loader *l = tl_open(g_raw, cfg);
        stoker_stats st = {.struct_size = sizeof st};
        T_OK(stoker_loader_get_stats(l, &st));
        T_EQ_STR(stoker_backend_name(st.backend), "io_uring");
        T_EQ_INT(st.threads, 3);
        stoker_loader_destroy(l);
    }
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_BACKEND, STOKER_BACKEND_PREAD));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_THREADS, 3));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DEPTH, 2));
    tl_run_with(g_raw, cfg, &g_b, 2, RAWSIZE);
    tl_same(&g_a, 0, &g_b);
    /* Dense data set (align 1, shuffle off): reads of neighbours coalesce; same bytes. */
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SHUFFLE, 0));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_BACKEND, STOKER_BACKEND_AUTO));
    tl_run_with(g_dense, cfg, &g_b, 1, RAWSIZE);
    for (int64_t i = 0; i < NRAW; i++)
        T_EQ_INT(g_b.ids[i], i);
    stoker_config_destroy(cfg);
}

/* Records of 0 .. 299 bytes, packed with offsets; stats count bytes. */
static void test_variable(void)
{
    stoker_config *cfg = tl_cfg(7, 3);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_READ_AHEAD, 3));
    tl_run_with(g_var, cfg, &g_a, 2, 0);
    static uint8_t seen[NVAR];
    for (int64_t i = 0; i < g_a.nids; i++)
        seen[g_a.ids[i]]++;
    for (int i = 0; i < NVAR; i++)
        T_EQ_INT(seen[i], 2);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_BACKEND, STOKER_BACKEND_PREAD));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_THREADS, 1));
    tl_run_with(g_var, cfg, &g_b, 2, 0);
    tl_same(&g_a, 0, &g_b);

    stoker_loader *l = tl_open(g_var, cfg);
    stoker_batch *b = NULL;
    T_OK(stoker_loader_next(l, &b));
    T_ASSERT(stoker_batch_offsets(b) != NULL);
    /* a view struct from an older caller: only the fields that fit are written */
    struct {
        uint32_t struct_size;
        int32_t dtype;
        int32_t ndim;
        uint32_t canary;
    } old;
    old.struct_size = 12;
    old.canary = 0xC0FFEE;
    T_OK(stoker_batch_get_view(b, (stoker_batch_view *)&old));
    T_EQ_INT(old.struct_size, 12);
    T_EQ_INT(old.dtype, STOKER_DTYPE_UINT8);
    T_EQ_INT(old.canary, 0xC0FFEE);
    T_OK(stoker_batch_release(b));
    T_EQ_RC(stoker_batch_release(b), STOKER_E_STATE);
    stoker_stats st = {.struct_size = sizeof st};
    T_OK(stoker_loader_get_stats(l, &st));
    T_EQ_INT(st.batches, 1);
    T_EQ_INT(st.records, 7);
    char json[2048];
    size_t need = 0;
    T_OK(stoker_loader_stats_json(l, json, sizeof json, &need));
    T_CONTAINS(json, "\"batches\":1");
    T_EQ_INT(need, strlen(json) + 1);
    T_EQ_RC(stoker_loader_stats_json(l, json, 10, &need), STOKER_E_LIMIT);
    T_EQ_INT(strlen(json), 9);
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
}

/* Save after k batches, restore into a new loader with other threads / back-end: the rest
 * equals the uninterrupted run (mid-epoch, at the epoch's end, across the boundary). */
static void test_resume(void)
{
    stoker_config *cfg = tl_cfg(16, 2);
    tl_run_with(g_raw, cfg, &g_a, 3, RAWSIZE);
    const int64_t nb = (NRAW + 15) / 16;
    const int64_t ks[] = {0, 1, 5, nb - 1, nb, nb + 3};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        stoker_loader *l = tl_open(g_raw, cfg);
        memset(&g_b, 0, sizeof g_b);
        tl_collect(l, &g_b, 3, ks[i], RAWSIZE);
        uint8_t state[STOKER_STATE_SIZE];
        size_t size = 0;
        T_EQ_RC(stoker_loader_state_save(l, state, 10, &size), STOKER_E_LIMIT);
        T_OK(stoker_loader_state_save(l, state, sizeof state, &size));
        T_EQ_INT(size, STOKER_STATE_SIZE);
        stoker_loader_destroy(l);

        stoker_config *cfg2 = tl_cfg(16, 1 + (int64_t)i % 3);
        T_OK(stoker_config_set_int(cfg2, STOKER_OPT_SEED, 999)); /* the state's seed wins */
        T_OK(stoker_config_set_int(cfg2, STOKER_OPT_BACKEND,
                                   i % 2 ? STOKER_BACKEND_PREAD : STOKER_BACKEND_AUTO));
        l = tl_open(g_raw, cfg2);
        T_OK(stoker_loader_state_restore(l, state, sizeof state));
        memset(&g_b, 0, sizeof g_b);
        /* ends left: 3 minus the ENDs seen before the save (none yet for the epoch whose
         * last batch was the last one taken) */
        tl_collect(l, &g_b, 3 - (ks[i] ? (int)((ks[i] - 1) / nb) : 0), INT64_MAX, RAWSIZE);
        tl_same(&g_a, ks[i], &g_b);
        stoker_loader_destroy(l);
        stoker_config_destroy(cfg2);
    }
    stoker_config_destroy(cfg);
}

static void test_state_errors(void)
{
    stoker_config *cfg = tl_cfg(16, 1);
    stoker_loader *l = tl_open(g_raw, cfg);
    uint8_t st[STOKER_STATE_SIZE];
    T_OK(stoker_loader_state_save(l, st, sizeof st, NULL));
    T_EQ_RC(stoker_loader_state_restore(l, st, 10), STOKER_E_INVALID);
    uint8_t bad[STOKER_STATE_SIZE];
    memcpy(bad, st, sizeof st);
    bad[0] ^= 1;
    T_EQ_RC(stoker_loader_state_restore(l, bad, sizeof bad), STOKER_E_INVALID);
    memcpy(bad, st, sizeof st);
    bad[33] ^= 1;
    T_EQ_RC(stoker_loader_state_restore(l, bad, sizeof bad), STOKER_E_CORRUPT);
    memcpy(bad, st, sizeof st);
    bad[8] = 9;
    T_EQ_RC(stoker_loader_state_restore(l, bad, sizeof bad), STOKER_E_FORMAT);
    /* another batch size */
    stoker_config *cfg2 = tl_cfg(8, 1);
    stoker_loader *l2 = tl_open(g_raw, cfg2);
    T_EQ_RC(stoker_loader_state_restore(l2, st, sizeof st), STOKER_E_STATE);
    T_CONTAINS(stoker_loader_errmsg(l2), "batch size");
    stoker_loader_destroy(l2);
    /* another data set */
    l2 = tl_open(g_var, cfg);
    T_EQ_RC(stoker_loader_state_restore(l2, st, sizeof st), STOKER_E_STATE);
    stoker_loader_destroy(l2);
    stoker_config_destroy(cfg2);
    /* a batch held across set_epoch and restore stays valid; its slot waits for it */
    stoker_batch *b = NULL, *c = NULL;
    T_OK(stoker_loader_next(l, &b));
    tl_check_batch(b, RAWSIZE);
    T_OK(stoker_loader_state_restore(l, st, sizeof st));
    T_OK(stoker_loader_set_epoch(l, 3));
    tl_check_batch(b, RAWSIZE);
    T_EQ_INT(stoker_batch_epoch(b), 0);
    T_OK(stoker_batch_release(b));
    T_OK(stoker_loader_next(l, &b));
    T_EQ_INT(stoker_batch_epoch(b), 3);
    T_EQ_INT(stoker_batch_position(b), 0);
    /* held across a restart, then the slot is needed: the ring rule, until released */
    T_OK(stoker_loader_set_epoch(l, 4));
    int64_t got = 0;
    int rc = 0;
    while ((rc = stoker_loader_next(l, &c)) == 0) {
        T_EQ_INT(stoker_batch_position(c), got);
        got++;
        T_OK(stoker_batch_release(c));
    }
    T_EQ_RC(rc, STOKER_E_STATE); /* batch 0 of the restart takes b's slot */
    T_OK(stoker_batch_release(b));
    T_OK(stoker_loader_next(l, &c));
    T_EQ_INT(stoker_batch_position(c), got);
    T_OK(stoker_batch_release(c));
    T_EQ_RC(stoker_loader_set_epoch(l, -1), STOKER_E_INVALID);
    T_EQ_RC(stoker_loader_next(l, NULL), STOKER_E_INVALID);
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
}

/* set_epoch equals an uninterrupted run's epoch; all slots held gives STOKER_E_STATE. */
/* set_epoch(e) right after restoring a state of epoch e continues it (the resumed loop
 * calls set_epoch before each epoch); any other set_epoch restarts. */
static void test_restore_then_set_epoch(void)
{
    stoker_config *cfg = tl_cfg(16, 2);
    tl_run_with(g_raw, cfg, &g_a, 2, RAWSIZE);
    const int64_t nb = (NRAW + 15) / 16;
    stoker_loader *l = tl_open(g_raw, cfg);
    memset(&g_b, 0, sizeof g_b);
    tl_collect(l, &g_b, 2, nb + 5, RAWSIZE); /* epoch 1, 5 batches in */
    uint8_t st[STOKER_STATE_SIZE];
    T_OK(stoker_loader_state_save(l, st, sizeof st, NULL));
    stoker_loader_destroy(l);

    l = tl_open(g_raw, cfg);
    T_OK(stoker_loader_state_restore(l, st, sizeof st));
    T_OK(stoker_loader_set_epoch(l, 1));
    int64_t epoch = -1, pos = -1;
    T_OK(stoker_loader_position(l, &epoch, &pos));
    T_EQ_INT(epoch, 1);
    T_EQ_INT(pos, 5);
    memset(&g_b, 0, sizeof g_b);
    tl_collect(l, &g_b, 1, INT64_MAX, RAWSIZE);
    tl_same(&g_a, nb + 5, &g_b);
    /* once a batch was taken, set_epoch restarts, the restored epoch too */
    T_OK(stoker_loader_state_restore(l, st, sizeof st));
    stoker_batch *b = NULL;
    T_OK(stoker_loader_next(l, &b));
    T_EQ_INT(stoker_batch_position(b), 5);
    T_OK(stoker_batch_release(b));
    T_OK(stoker_loader_set_epoch(l, 1));
    T_OK(stoker_loader_position(l, &epoch, &pos));
    T_EQ_INT(pos, 0);
    /* and another epoch than the restored one restarts at once */
    T_OK(stoker_loader_state_restore(l, st, sizeof st));
    T_OK(stoker_loader_set_epoch(l, 0));
    T_OK(stoker_loader_position(l, &epoch, &pos));
    T_EQ_INT(epoch, 0);
    T_EQ_INT(pos, 0);
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
}

static void test_set_epoch_depth(void)
{
    stoker_config *cfg = tl_cfg(16, 2);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DEPTH, 3));
    tl_run_with(g_raw, cfg, &g_a, 3, RAWSIZE);
    stoker_loader *l = tl_open(g_raw, cfg);
    stoker_batch *held[3];
    for (int i = 0; i < 3; i++)
        T_OK(stoker_loader_next(l, &held[i]));
    stoker_batch *b = NULL;
    T_EQ_RC(stoker_loader_next(l, &b), STOKER_E_STATE);
    for (int i = 0; i < 3; i++)
        T_OK(stoker_batch_release(held[i]));
    T_OK(stoker_loader_set_epoch(l, 2));
    memset(&g_b, 0, sizeof g_b);
    tl_collect(l, &g_b, 1, INT64_MAX, RAWSIZE);
    const int64_t nb = (NRAW + 15) / 16;
    tl_same(&g_a, 2 * nb, &g_b);
    int64_t n = 0;
    T_OK(stoker_loader_num_batches(l, &n));
    T_EQ_INT(n, nb);
    T_OK(stoker_loader_num_records(l, &n));
    T_EQ_INT(n, NRAW);
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
}

/* Ranks through the loader: disjoint apart from padding, complete, equal batch counts. */
static void test_ranks(int use_env)
{
    static int64_t count[NVAR];
    memset(count, 0, sizeof count);
    const int world = 3;
    int64_t nb0 = -1;
    for (int r = 0; r < world; r++) {
        stoker_config *cfg = tl_cfg(8, 2);
        if (use_env) {
            char v[16];
            snprintf(v, sizeof v, "%d", r);
            setenv("RANK", v, 1);
            setenv("WORLD_SIZE", "3", 1);
            T_OK(stoker_config_set_int(cfg, STOKER_OPT_DIST_ENV, 1));
        } else {
            T_OK(stoker_config_set_int(cfg, STOKER_OPT_RANK, r));
            T_OK(stoker_config_set_int(cfg, STOKER_OPT_WORLD_SIZE, world));
        }
        tl_run_with(g_var, cfg, &g_a, 1, 0);
        if (nb0 < 0)
            nb0 = g_a.nbatches;
        T_EQ_INT(g_a.nbatches, nb0);
        for (int64_t i = 0; i < g_a.nids; i++)
            count[g_a.ids[i]]++;
        stoker_config_destroy(cfg);
    }
    int64_t total = 0;
    for (int i = 0; i < NVAR; i++) {
        T_ASSERT(count[i] >= 1 && count[i] <= 2);
        total += count[i];
    }
    T_EQ_INT(total, (NVAR + world - 1) / world * world);
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
}

static void test_drop_last(void)
{
    stoker_config *cfg = tl_cfg(16, 2);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DROP_LAST, 1));
    tl_run_with(g_raw, cfg, &g_a, 2, RAWSIZE);
    T_EQ_INT(g_a.nbatches, 2 * (NRAW / 16));
    for (int64_t k = 0; k < g_a.nbatches; k++)
        T_EQ_INT(g_a.count[k], 16);
    /* more ranks than a global batch can feed: no batch, END at once, every time */
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_BATCH_SIZE, 400));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_WORLD_SIZE, 2));
    stoker_loader *l = tl_open(g_raw, cfg);
    stoker_batch *b = NULL;
    T_EQ_RC(stoker_loader_next(l, &b), STOKER_END);
    T_EQ_RC(stoker_loader_next(l, &b), STOKER_END);
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
}

static void test_direct(void)
{
    stoker_config *cfg = tl_cfg(16, 2);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DIRECT_IO, 1));
    stoker_loader *l = NULL;
    /* a data set aligned to 1 cannot be read with O_DIRECT */
    T_EQ_RC(stoker_loader_create(&l, g_dense, cfg), STOKER_E_INVALID);
    T_CONTAINS(stoker_loader_errmsg(l), "4096");
    stoker_loader_destroy(l);
    /* does this file system take O_DIRECT at all? */
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/manifest.stk", g_raw);
    const int fd = open(probe, O_RDONLY | O_DIRECT);
    if (fd < 0) {
        printf("O_DIRECT refused here (%s): direct I/O part skipped\n", strerror(errno));
        stoker_config_destroy(cfg);
        return;
    }
    close(fd);
    tl_run_with(g_raw, cfg, &g_a, 1, RAWSIZE);
    T_EQ_INT(g_a.nids, NRAW);
    char var4k[4200];
    snprintf(var4k, sizeof var4k, "%s4k", g_var);
    tl_make(var4k, NVAR, 0, 4096, 64 << 10);
    tl_run_with(var4k, cfg, &g_b, 1, 0);
    T_EQ_INT(g_b.nids, NVAR);
    stoker_config_destroy(cfg);
}

static void test_create_errors(void)
{
    stoker_config *cfg = tl_cfg(16, 1);
    stoker_loader *l = NULL;
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_RANK, 2));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_WORLD_SIZE, 2));
    T_EQ_RC(stoker_loader_create(&l, g_raw, cfg), STOKER_E_INVALID);
    T_CONTAINS(stoker_loader_errmsg(l), "rank 2");
    stoker_batch *b = NULL;
    T_EQ_RC(stoker_loader_next(l, &b), STOKER_E_STATE);
    stoker_loader_destroy(l);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_RANK, 0));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DIST_ENV, 1));
    setenv("WORLD_SIZE", "two", 1);
    unsetenv("RANK");
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_WORLD_SIZE, 1));
    stoker_config *cfg2 = tl_cfg(16, 1);
    T_OK(stoker_config_set_int(cfg2, STOKER_OPT_DIST_ENV, 1));
    T_EQ_RC(stoker_loader_create(&l, g_raw, cfg2), STOKER_E_INVALID);
    T_CONTAINS(stoker_loader_errmsg(l), "WORLD_SIZE");
    stoker_loader_destroy(l);
    unsetenv("WORLD_SIZE");
    stoker_config_destroy(cfg2);
    char missing[4200];
    snprintf(missing, sizeof missing, "%s/nope", g_raw);
    T_EQ_RC(stoker_loader_create(&l, missing, NULL), -ENOENT);
    T_ASSERT(strlen(stoker_loader_errmsg(l)) > 0);
    stoker_loader_destroy(l);
    T_EQ_RC(stoker_loader_create(NULL, g_raw, NULL), STOKER_E_INVALID);
    /* image transforms on raw records */
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DIST_ENV, 0));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_TRANSFORM, STOKER_TRANSFORM_TRAIN));
    T_EQ_RC(stoker_loader_create(&l, g_raw, cfg), STOKER_E_INVALID);
    T_CONTAINS(stoker_loader_errmsg(l), "raw records take no image transform (train)");
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
    /* defaults (NULL config) work */
    l = tl_open(g_raw, NULL);
    stoker_stats st = {.struct_size = sizeof st};
    T_OK(stoker_loader_get_stats(l, &st));
    T_EQ_INT(st.depth, 4);
    T_ASSERT(st.threads >= 1);
    stoker_loader_destroy(l);
}

int main(void)
{
    char *tmp = t_mkdtemp("loader");
    snprintf(g_raw, sizeof g_raw, "%s/raw", tmp);
    snprintf(g_var, sizeof g_var, "%s/var", tmp);
    snprintf(g_dense, sizeof g_dense, "%s/dense", tmp);
    tl_make(g_raw, NRAW, RAWSIZE, 0, 64 << 10); /* 4096-aligned, ~15 records a shard */
    tl_make(g_var, NVAR, 0, 512, 16 << 10);
    tl_make(g_dense, NRAW, RAWSIZE, 1, 0);
    test_once_per_epoch();
    test_backends_threads();
    test_variable();
    test_resume();
    test_state_errors();
    test_set_epoch_depth();
    test_restore_then_set_epoch();
    test_ranks(0);
    test_ranks(1);
    test_drop_last();
    test_direct();
    test_create_errors();
    t_rmrf(tmp);
    free(tmp);
    printf("loader ok\n");
    return 0;
}
