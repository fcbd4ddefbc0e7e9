/* SPDX-License-Identifier: Apache-2.0 */
/* stoker_batch_detach on host batches: a batch's memory taken out of the loader stays
 * intact while the loader goes on far past its depth and after the loader is destroyed;
 * what detach refuses; a failed allocation changes nothing. Run it under ASan too: the
 * memory of a detached batch is freed by stoker_memory_free alone, none leaks. */
#include "test_loader_util.h"

#define N 200
#define RS 300
#define BATCH 16
#define DEPTH 3
#define KEEP (4 * DEPTH) /* batches kept detached at once: several times the depth */

static char g_tmp[4096];

/* A batch's data as it was handed out, to compare its detached memory with later. */
typedef struct kept {
    stoker_memory *m;
    const uint8_t *data;
    const int64_t *field; /* the "label" field's values (the fields region), or NULL */
    int64_t count;
    int64_t ids[BATCH];
    uint64_t nbytes;
} kept;

static void keep(kept *k, stoker_batch *b, stoker_memory *m, int32_t label_field)
{
    k->m = m;
    k->data = stoker_batch_data(b);
    k->count = stoker_batch_count(b);
    k->nbytes = stoker_batch_nbytes(b);
    memcpy(k->ids, stoker_batch_ids(b), (size_t)k->count * sizeof *k->ids);
    k->field = NULL;
    if (label_field >= 0) { /* "x" (field 0) and "label": where the batch's fields put them */
        stoker_field_view fv = {.struct_size = sizeof fv};
        T_OK(stoker_batch_field(b, 0, NULL, &fv));
        k->data = fv.data;
        k->nbytes = fv.nbytes;
        T_OK(stoker_batch_field(b, label_field, NULL, &fv));
        k->field = fv.data;
    }
}

/* The detached memory still holds the batch's records (tl_byte of its ids, RS each). */
static void check_kept(const kept *k)
{
    T_EQ_INT(k->nbytes, (uint64_t)k->count * RS);
    for (int64_t j = 0; j < k->count; j++)
        for (uint64_t b = 0; b < RS; b++)
            if (k->data[(uint64_t)j * RS + b] != tl_byte(k->ids[j], b))
                T_FAIL("detached record %" PRId64 " byte %" PRIu64 ": %u != %u", k->ids[j], b,
                       k->data[(uint64_t)j * RS + b], tl_byte(k->ids[j], b));
    for (int64_t j = 0; k->field && j < k->count; j++)
        T_EQ_INT(k->field[j], tl_label(k->ids[j]));
}

static stoker_loader *open_loader(const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", g_tmp, name);
    stoker_config *cfg = tl_cfg(BATCH, 2);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DEPTH, DEPTH));
    stoker_loader *l = tl_open(path, cfg);
    stoker_config_destroy(cfg);
    stoker_stats st = tl_stats(l);
    T_EQ_INT(st.depth, DEPTH);
    return l;
}

/* One detached batch: after its release the next DEPTH + 2 batches come (its slot refilled
 * with fresh memory), and its memory still holds its records. */
static void test_detach_then_go_on(void)
{
    stoker_loader *l = open_loader("raw");
    stoker_batch *b = NULL;
    T_OK(stoker_loader_next(l, &b));
    tl_check_batch(b, RS);
    stoker_memory *m = NULL;
    T_OK(stoker_batch_detach(b, &m));
    T_ASSERT(m != NULL);
    kept k;
    keep(&k, b, m, -1);
    T_ASSERT(stoker_batch_data(b) == k.data); /* b's pointers do not change */
    tl_check_batch(b, RS);
    /* detached already: refused, the batch still the caller's */
    stoker_memory *m2 = NULL;
    T_EQ_RC(stoker_batch_detach(b, &m2), STOKER_E_STATE);
    T_ASSERT(m2 == NULL);
    T_CONTAINS(stoker_loader_errmsg(l), "detached already");
    T_OK(stoker_batch_release(b));
    /* released: refused */
    T_EQ_RC(stoker_batch_detach(b, &m2), STOKER_E_STATE);
    T_EQ_RC(stoker_batch_detach(NULL, &m2), STOKER_E_INVALID);
    T_EQ_RC(stoker_batch_detach(b, NULL), STOKER_E_INVALID);
    for (int i = 0; i < DEPTH + 2; i++) {
        T_OK(stoker_loader_next(l, &b));
        tl_check_batch(b, RS);
        T_ASSERT(stoker_batch_data(b) != k.data);
        T_OK(stoker_batch_release(b));
    }
    check_kept(&k);
    stoker_loader_destroy(l);
    check_kept(&k); /* the loader is gone, the memory is not */
    stoker_memory_free(k.m);
    stoker_memory_free(NULL);
}

/* KEEP batches held at once, each detached and released as it comes: the loader never
 * answers STOKER_E_STATE, and every kept batch holds its records, before and after the
 * loader is destroyed; freed in another order than taken. `label_field`: the index of the
 * data set's "label" field (its fields region is detached too), or -1. */
static void test_keep_many(const char *name, int32_t label_field)
{
    stoker_loader *l = open_loader(name);
    kept k[KEEP];
    for (int i = 0; i < KEEP; i++) {
        stoker_batch *b = NULL;
        const int rc = stoker_loader_next(l, &b);
        if (rc != 0)
            T_FAIL("%s: batch %d: %s: %s", name, i, stoker_strerror(rc), stoker_loader_errmsg(l));
        stoker_memory *m = NULL;
        T_OK(stoker_batch_detach(b, &m));
        keep(&k[i], b, m, label_field);
        T_OK(stoker_batch_release(b));
        for (int j = 0; j <= i; j++)
            check_kept(&k[j]);
        for (int j = 0; j < i; j++) /* each batch in memory of its own, its fields too */
            T_ASSERT(k[j].data != k[i].data && (!k[i].field || k[j].field != k[i].field));
    }
    stoker_loader_destroy(l);
    for (int i = KEEP - 1; i >= 0; i -= 2) {
        check_kept(&k[i]);
        stoker_memory_free(k[i].m);
    }
    for (int i = KEEP - 2; i >= 0; i -= 2) {
        check_kept(&k[i]);
        stoker_memory_free(k[i].m);
    }
}

/* A detach that cannot allocate changes nothing: the batch is the loader's as before,
 * released as usual; the next detach works. Memory detached and never released before the
 * loader's destruction is still the caller's. */
static void test_detach_no_memory(void)
{
    stoker_loader *l = open_loader("raw");
    stoker_batch *b = NULL;
    T_OK(stoker_loader_next(l, &b));
    const void *data = stoker_batch_data(b);
    for (uint64_t nth = 1; nth <= 2; nth++) { /* the stoker_memory, then the fresh slot */
        stoker_memory *m = NULL;
        stoker__alloc_fail_at(nth);
        const int rc = stoker_batch_detach(b, &m);
        stoker__alloc_fail_at(0);
        T_EQ_RC(rc, -ENOMEM);
        T_ASSERT(m == NULL);
        T_CONTAINS(stoker_loader_errmsg(l), "memory");
        T_ASSERT(stoker_batch_data(b) == data);
        tl_check_batch(b, RS);
    }
    T_OK(stoker_batch_release(b));
    for (int i = 0; i < DEPTH + 1; i++) {
        T_OK(stoker_loader_next(l, &b));
        tl_check_batch(b, RS);
        T_OK(stoker_batch_release(b));
    }
    /* detached, then the loader destroyed while the batch is still out */
    T_OK(stoker_loader_next(l, &b));
    stoker_memory *m = NULL;
    T_OK(stoker_batch_detach(b, &m));
    kept k;
    keep(&k, b, m, -1);
    stoker_loader_destroy(l);
    check_kept(&k);
    stoker_memory_free(m);
}

/* A data set with a schema: "x" RAW uint8 [RS] (tl_byte of the id), "label" INT64. */
static void make_fields(const char *path)
{
    stoker_writer *w = t_writer_open(path, 0, 0, 0);
    stoker_field_desc d[2];
    memset(d, 0, sizeof d);
    d[0].struct_size = d[1].struct_size = sizeof d[0];
    d[0].name = "x";
    d[0].kind = STOKER_FIELD_RAW;
    d[0].dtype = STOKER_DTYPE_UINT8;
    d[0].ndim = 1;
    d[0].shape[0] = RS;
    d[1].name = "label";
    d[1].kind = STOKER_FIELD_INT64;
    T_OK(stoker_writer_set_fields(w, d, 2));
    uint8_t buf[RS];
    for (int64_t id = 0; id < N; id++) {
        for (uint64_t k = 0; k < RS; k++)
            buf[k] = tl_byte(id, k);
        const int64_t label = tl_label(id);
        const stoker_field_value v[2] = {{buf, RS}, {&label, 8}};
        T_OK(stoker_writer_add_sample(w, v, 2, NULL));
    }
    T_OK(stoker_writer_finish(w));
    stoker_writer_destroy(w);
}

int main(void)
{
    char *tmp = t_mkdtemp("batch-detach");
    snprintf(g_tmp, sizeof g_tmp, "%s", tmp);
    char path[4200];
    snprintf(path, sizeof path, "%s/raw", g_tmp);
    tl_make(path, N, RS, 0, 32 << 10);
    snprintf(path, sizeof path, "%s/fields", g_tmp);
    make_fields(path);
    test_detach_then_go_on();
    test_keep_many("raw", -1);
    test_keep_many("fields", 1);
    test_detach_no_memory();
    t_rmrf(tmp);
    free(tmp);
    printf("batch detach ok\n");
    return 0;
}
