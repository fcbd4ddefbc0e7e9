/* SPDX-License-Identifier: Apache-2.0 */
/* A batch's fields through the public C API, on host batches: a data set of five fields
 * (int64 "label", float32, raw float32 [3], an int64 array of 0 .. 4 rows, bytes of 0 .. 22)
 * written with stoker_writer_set_fields and loaded with STOKER_TRANSFORM_NONE. Checks the
 * fields the loader describes before its first batch, every delivered value against what
 * was written for the record id the batch names (by index and by name alike), the ragged
 * offsets, a name that does not exist, a view struct of an older caller, STOKER_OPT_FIELDS
 * keeping a subset, and a data set written without a schema ("data" and "label"); and
 * stoker_loader_take and stoker_batch_state_save on both. */
#include "fields_util.h"
#include "test_loader_util.h"

#include <stddef.h>

#define NREC 37 /* not a multiple of the batch: the last batch is short */
#define BATCH 8
#define NFIELDS 5 /* label, score, vec, tokens, blob */

static int64_t label_of(int64_t id)
{
    return id * 3 - 7;
}

static float score_of(int64_t id)
{
    return (float)id * 0.5f - 1.0f;
}

static void vec_of(int64_t id, float v[3])
{
    v[0] = (float)id;
    v[1] = -(float)id;
    v[2] = (float)id + 0.25f;
}

static int64_t ntokens_of(int64_t id)
{
    return id % 5; /* 0 .. 4, none included */
}

static int64_t token_of(int64_t id, int64_t k)
{
    return id * 100 + k;
}

static size_t blob_size_of(int64_t id)
{
    return (size_t)((id * 7) % 23); /* 0 .. 22, empty included */
}

static void make_fields_dataset(const char *path)
{
    stoker_writer *w = t_writer_open(path, 0, 0, 0);
    const stoker_field_desc d[NFIELDS] = {
        t_field("label", STOKER_FIELD_INT64, 0, 0, 0, 0, STOKER_TIE_NONE, NULL),
        t_field("score", STOKER_FIELD_FLOAT32, 0, 0, 0, 0, STOKER_TIE_NONE, NULL),
        t_field("vec", STOKER_FIELD_RAW, STOKER_DTYPE_FLOAT32, 1, 3, 0, STOKER_TIE_NONE, NULL),
        t_field("tokens", STOKER_FIELD_ARRAY, STOKER_DTYPE_INT64, 0, 0, 0, STOKER_TIE_NONE, NULL),
        t_field("blob", STOKER_FIELD_BYTES, 0, 0, 0, 0, STOKER_TIE_NONE, NULL),
    };
    if (stoker_writer_set_fields(w, d, NFIELDS))
        T_FAIL("set_fields: %s", stoker_writer_errmsg(w));
    for (int64_t id = 0; id < NREC; id++) {
        const int64_t label = label_of(id);
        const float score = score_of(id);
        float vec[3];
        vec_of(id, vec);
        int64_t tokens[5];
        for (int64_t k = 0; k < ntokens_of(id); k++)
            tokens[k] = token_of(id, k);
        uint8_t blob[23];
        for (size_t k = 0; k < blob_size_of(id); k++)
            blob[k] = tl_byte(id, k);
        const stoker_field_value v[NFIELDS] = {
            {&label, sizeof label},   {&score, sizeof score},
            {vec, sizeof vec},        {tokens, (uint64_t)ntokens_of(id) * sizeof(int64_t)},
            {blob, blob_size_of(id)},
        };
        char key[32];
        snprintf(key, sizeof key, "s%03" PRId64, id);
        if (stoker_writer_add_sample(w, v, NFIELDS, key))
            T_FAIL("add_sample %s: %s", key, stoker_writer_errmsg(w));
    }
    T_OK(stoker_writer_finish(w));
    stoker_writer_destroy(w);
}

static stoker_config *fields_cfg(const char *fields)
{
    stoker_config *cfg = tl_cfg(BATCH, 2);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_TRANSFORM, STOKER_TRANSFORM_NONE));
    if (fields)
        T_OK(stoker_config_set_string(cfg, STOKER_OPT_FIELDS, fields));
    return cfg;
}

static stoker_field_view loader_field(const stoker_loader *l, int32_t i)
{
    stoker_field_view v;
    memset(&v, 0xAB, sizeof v);
    v.struct_size = sizeof v;
    T_OK(stoker_loader_field(l, i, &v));
    T_EQ_INT(v.struct_size, sizeof v);
    T_ASSERT(v.data == NULL);
    T_EQ_INT(v.nbytes, 0);
    T_ASSERT(v.offsets == NULL && v.host_offsets == NULL);
    T_EQ_INT(v.device, -1);
    return v;
}

/* Field `name` of batch b, by name and by index `i` alike. */
static stoker_field_view batch_field(const stoker_batch *b, int32_t i, const char *name)
{
    stoker_field_view by_name, by_index;
    memset(&by_name, 0xAB, sizeof by_name);
    memset(&by_index, 0xCD, sizeof by_index);
    by_name.struct_size = by_index.struct_size = sizeof by_name;
    T_OK(stoker_batch_field(b, -1, name, &by_name));
    T_OK(stoker_batch_field(b, i, NULL, &by_index));
    T_EQ_STR(by_name.name, name);
    T_EQ_STR(by_index.name, name);
    T_ASSERT(memcmp(&by_name, &by_index, sizeof by_name) == 0);
    T_EQ_INT(by_name.device, -1);
    T_EQ_INT(by_name.tie, STOKER_TIE_NONE);
    return by_name;
}

/* A ragged field's offsets: count + 1, from 0, never falling, ending at its rows; the
 * device's copy (here the host's memory) the same. */
static void check_offsets(const stoker_field_view *v, int64_t count)
{
    T_ASSERT(v->offsets != NULL && v->host_offsets != NULL);
    T_EQ_INT(v->host_offsets[0], 0);
    for (int64_t j = 0; j < count; j++)
        T_ASSERT(v->host_offsets[j] <= v->host_offsets[j + 1]);
    T_EQ_INT(v->host_offsets[count], v->shape[0]);
    T_ASSERT(memcmp(v->offsets, v->host_offsets, (size_t)(count + 1) * sizeof(int64_t)) == 0);
}

static void check_label(const stoker_batch *b, int32_t i, const int64_t *ids, int64_t n)
{
    const stoker_field_view v = batch_field(b, i, "label");
    T_EQ_INT(v.kind, STOKER_FIELD_INT64);
    T_EQ_INT(v.dtype, STOKER_DTYPE_INT64);
    T_EQ_INT(v.ndim, 1);
    T_EQ_INT(v.shape[0], n);
    T_EQ_INT(v.nbytes, (uint64_t)n * 8);
    T_ASSERT(v.offsets == NULL && v.host_offsets == NULL);
    const int64_t *labels = stoker_batch_labels(b);
    for (int64_t j = 0; j < n; j++) {
        T_EQ_INT(((const int64_t *)v.data)[j], label_of(ids[j]));
        T_EQ_INT(labels[j], label_of(ids[j]));
    }
}

static void check_tokens(const stoker_batch *b, int32_t i, const int64_t *ids, int64_t n)
{
    const stoker_field_view v = batch_field(b, i, "tokens");
    T_EQ_INT(v.kind, STOKER_FIELD_ARRAY);
    T_EQ_INT(v.dtype, STOKER_DTYPE_INT64);
    T_EQ_INT(v.ndim, 1);
    T_EQ_INT(v.nbytes, (uint64_t)v.shape[0] * 8);
    check_offsets(&v, n);
    const int64_t *t = v.data;
    for (int64_t j = 0; j < n; j++) {
        const int64_t at = v.host_offsets[j];
        T_EQ_INT(v.host_offsets[j + 1] - at, ntokens_of(ids[j]));
        for (int64_t k = 0; k < ntokens_of(ids[j]); k++)
            if (t[at + k] != token_of(ids[j], k))
                T_FAIL("record %" PRId64 " token %" PRId64 ": %" PRId64 " != %" PRId64, ids[j], k,
                       t[at + k], token_of(ids[j], k));
    }
}

/* Every field of one batch of the five-field data set against what was written. */
static void check_full_batch(const stoker_batch *b)
{
    const int64_t n = stoker_batch_count(b);
    const int64_t *ids = stoker_batch_ids(b);
    T_ASSERT(n > 0 && n <= BATCH);
    T_EQ_INT(stoker_batch_num_fields(b), NFIELDS);
    check_label(b, 0, ids, n);

    stoker_field_view v = batch_field(b, 1, "score");
    T_EQ_INT(v.kind, STOKER_FIELD_FLOAT32);
    T_EQ_INT(v.dtype, STOKER_DTYPE_FLOAT32);
    T_EQ_INT(v.ndim, 1);
    T_EQ_INT(v.shape[0], n);
    T_EQ_INT(v.nbytes, (uint64_t)n * 4);
    for (int64_t j = 0; j < n; j++)
        T_ASSERT(((const float *)v.data)[j] == score_of(ids[j]));

    v = batch_field(b, 2, "vec");
    T_EQ_INT(v.kind, STOKER_FIELD_RAW);
    T_EQ_INT(v.dtype, STOKER_DTYPE_FLOAT32);
    T_EQ_INT(v.ndim, 2);
    T_EQ_INT(v.shape[0], n);
    T_EQ_INT(v.shape[1], 3);
    T_EQ_INT(v.nbytes, (uint64_t)n * 12);
    T_ASSERT(v.offsets == NULL && v.host_offsets == NULL);
    for (int64_t j = 0; j < n; j++) {
        float want[3];
        vec_of(ids[j], want);
        if (memcmp((const float *)v.data + j * 3, want, sizeof want) != 0)
            T_FAIL("record %" PRId64 ": vec differs", ids[j]);
    }

    check_tokens(b, 3, ids, n);

    v = batch_field(b, 4, "blob");
    T_EQ_INT(v.kind, STOKER_FIELD_BYTES);
    T_EQ_INT(v.dtype, STOKER_DTYPE_UINT8);
    T_EQ_INT(v.ndim, 1);
    T_EQ_INT(v.nbytes, (uint64_t)v.shape[0]);
    check_offsets(&v, n);
    const uint8_t *p = v.data;
    for (int64_t j = 0; j < n; j++) {
        const int64_t at = v.host_offsets[j];
        T_EQ_INT(v.host_offsets[j + 1] - at, blob_size_of(ids[j]));
        for (size_t k = 0; k < blob_size_of(ids[j]); k++)
            if (p[at + (int64_t)k] != tl_byte(ids[j], k))
                T_FAIL("record %" PRId64 " blob byte %zu differs", ids[j], k);
    }
}

/* The loader's description of the five fields, before any batch. */
static void test_described_before_the_first_batch(const char *path)
{
    stoker_config *cfg = fields_cfg(NULL);
    stoker_loader *l = tl_open(path, cfg);
    T_EQ_INT(stoker_loader_num_fields(l), NFIELDS);
    static const char *names[NFIELDS] = {"label", "score", "vec", "tokens", "blob"};
    static const int32_t kinds[NFIELDS] = {STOKER_FIELD_INT64, STOKER_FIELD_FLOAT32,
                                           STOKER_FIELD_RAW, STOKER_FIELD_ARRAY,
                                           STOKER_FIELD_BYTES};
    static const int32_t dtypes[NFIELDS] = {STOKER_DTYPE_INT64, STOKER_DTYPE_FLOAT32,
                                            STOKER_DTYPE_FLOAT32, STOKER_DTYPE_INT64,
                                            STOKER_DTYPE_UINT8};
    static const int32_t ndims[NFIELDS] = {1, 1, 2, 1, 1};
    static const int64_t dim0[NFIELDS] = {BATCH, BATCH, BATCH, -1, -1};
    for (int32_t i = 0; i < NFIELDS; i++) {
        const stoker_field_view v = loader_field(l, i);
        T_EQ_STR(v.name, names[i]);
        T_EQ_INT(v.kind, kinds[i]);
        T_EQ_INT(v.dtype, dtypes[i]);
        T_EQ_INT(v.ndim, ndims[i]);
        T_EQ_INT(v.shape[0], dim0[i]);
        T_EQ_INT(v.tie, STOKER_TIE_NONE);
    }
    T_EQ_INT(loader_field(l, 2).shape[1], 3);
    stoker_field_view v = {.struct_size = sizeof v};
    T_EQ_RC(stoker_loader_field(l, NFIELDS, &v), STOKER_E_INVALID);
    T_EQ_RC(stoker_loader_field(l, -1, &v), STOKER_E_INVALID);
    T_EQ_RC(stoker_loader_field(l, 0, NULL), STOKER_E_INVALID);
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
}

/* Two epochs: every record once per epoch, each batch's every field as written. */
static void test_every_field_as_written(const char *path)
{
    stoker_config *cfg = fields_cfg(NULL);
    stoker_loader *l = tl_open(path, cfg);
    for (int epoch = 0; epoch < 2; epoch++) {
        uint8_t seen[NREC] = {0};
        int64_t batches = 0;
        for (;;) {
            stoker_batch *b = NULL;
            const int rc = stoker_loader_next(l, &b);
            if (rc == STOKER_END)
                break;
            if (rc)
                T_FAIL("next: %s: %s", stoker_strerror(rc), stoker_loader_errmsg(l));
            check_full_batch(b);
            for (int64_t j = 0; j < stoker_batch_count(b); j++) {
                const int64_t id = stoker_batch_ids(b)[j];
                T_ASSERT(id >= 0 && id < NREC);
                seen[id]++;
            }
            batches++;
            T_OK(stoker_batch_release(b));
        }
        T_EQ_INT(batches, (NREC + BATCH - 1) / BATCH);
        for (int i = 0; i < NREC; i++)
            T_EQ_INT(seen[i], 1);
    }
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
}

/* No such field; an older caller's shorter view struct gets only what fits. */
static void test_bad_names_and_old_callers(const char *path)
{
    stoker_config *cfg = fields_cfg(NULL);
    stoker_loader *l = tl_open(path, cfg);
    stoker_batch *b = NULL;
    T_OK(stoker_loader_next(l, &b));
    stoker_field_view v = {.struct_size = sizeof v};
    T_EQ_RC(stoker_batch_field(b, -1, "nosuch", &v), STOKER_E_INVALID);
    T_EQ_RC(stoker_batch_field(b, -1, "", &v), STOKER_E_INVALID);
    T_EQ_RC(stoker_batch_field(b, -1, NULL, &v), STOKER_E_INVALID);
    T_EQ_RC(stoker_batch_field(b, NFIELDS, NULL, &v), STOKER_E_INVALID);
    T_EQ_RC(stoker_batch_field(b, 0, NULL, NULL), STOKER_E_INVALID);
    T_EQ_RC(stoker_batch_field(NULL, 0, NULL, &v), STOKER_E_INVALID);
    v.struct_size = 2; /* not even struct_size fits */
    T_EQ_RC(stoker_batch_field(b, 0, NULL, &v), STOKER_E_INVALID);

    /* a caller whose struct ends after `name`: kind and name written, nothing past them */
    const uint32_t old = (uint32_t)(offsetof(stoker_field_view, name) + sizeof(const char *));
    unsigned char buf[sizeof(stoker_field_view) + 16];
    for (int pass = 0; pass < 2; pass++) {
        memset(buf, 0xAB, sizeof buf);
        stoker_field_view *o = (stoker_field_view *)(void *)buf;
        o->struct_size = old;
        if (pass == 0)
            T_OK(stoker_batch_field(b, -1, "tokens", o));
        else
            T_OK(stoker_loader_field(l, 3, o));
        T_EQ_INT(o->struct_size, old);
        T_EQ_INT(o->kind, STOKER_FIELD_ARRAY);
        T_EQ_STR(o->name, "tokens");
        for (size_t k = old; k < sizeof buf; k++)
            if (buf[k] != 0xAB)
                T_FAIL("pass %d: byte %zu past the caller's struct_size %u was written", pass, k,
                       old);
    }
    T_OK(stoker_batch_release(b));
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
}

/* STOKER_OPT_FIELDS: the fields named, in schema order; the others absent; a name the data
 * set lacks refused at create, named. */
static void test_subset(const char *path)
{
    stoker_config *cfg = fields_cfg("tokens,label");
    stoker_loader *l = tl_open(path, cfg);
    T_EQ_INT(stoker_loader_num_fields(l), 2);
    T_EQ_STR(loader_field(l, 0).name, "label");
    T_EQ_STR(loader_field(l, 1).name, "tokens");
    int64_t total = 0;
    for (;;) {
        stoker_batch *b = NULL;
        const int rc = stoker_loader_next(l, &b);
        if (rc == STOKER_END)
            break;
        if (rc)
            T_FAIL("next: %s: %s", stoker_strerror(rc), stoker_loader_errmsg(l));
        const int64_t n = stoker_batch_count(b);
        T_EQ_INT(stoker_batch_num_fields(b), 2);
        check_label(b, 0, stoker_batch_ids(b), n);
        check_tokens(b, 1, stoker_batch_ids(b), n);
        stoker_field_view v = {.struct_size = sizeof v};
        T_EQ_RC(stoker_batch_field(b, -1, "score", &v), STOKER_E_INVALID);
        T_EQ_RC(stoker_batch_field(b, -1, "blob", &v), STOKER_E_INVALID);
        T_EQ_RC(stoker_batch_field(b, 2, NULL, &v), STOKER_E_INVALID);
        total += n;
        T_OK(stoker_batch_release(b));
    }
    T_EQ_INT(total, NREC);
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);

    cfg = fields_cfg("label,nosuch");
    l = NULL;
    T_EQ_RC(stoker_loader_create(&l, path, cfg), STOKER_E_INVALID);
    T_CONTAINS(stoker_loader_errmsg(l), "\"nosuch\"");
    T_CONTAINS(stoker_loader_errmsg(l), path);
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
}

/* A data set written without a schema: the fields "data" (its records, with offsets) and
 * "label", the label field equal to stoker_batch_labels. */
static void test_without_a_schema(const char *path)
{
    tl_make(path, NREC, 0, 0, 0);
    stoker_config *cfg = tl_cfg(BATCH, 2);
    stoker_loader *l = tl_open(path, cfg);
    T_EQ_INT(stoker_loader_num_fields(l), 2);
    stoker_field_view d = loader_field(l, 0), lab = loader_field(l, 1);
    T_EQ_STR(d.name, "data");
    T_EQ_INT(d.kind, STOKER_FIELD_BYTES);
    T_EQ_INT(d.shape[0], -1);
    T_EQ_STR(lab.name, "label");
    T_EQ_INT(lab.kind, STOKER_FIELD_INT64);
    T_EQ_INT(lab.dtype, STOKER_DTYPE_INT64);
    T_EQ_INT(lab.ndim, 1);
    T_EQ_INT(lab.shape[0], BATCH);
    int64_t total = 0;
    for (;;) {
        stoker_batch *b = NULL;
        const int rc = stoker_loader_next(l, &b);
        if (rc == STOKER_END)
            break;
        if (rc)
            T_FAIL("next: %s: %s", stoker_strerror(rc), stoker_loader_errmsg(l));
        tl_check_batch(b, 0);
        const int64_t n = stoker_batch_count(b);
        const int64_t *ids = stoker_batch_ids(b);
        T_EQ_INT(stoker_batch_num_fields(b), 2);
        d = batch_field(b, 0, "data");
        T_ASSERT(d.data == stoker_batch_data(b));
        T_EQ_INT(d.nbytes, stoker_batch_nbytes(b));
        T_ASSERT(d.host_offsets == stoker_batch_offsets(b));
        check_offsets(&d, n);
        lab = batch_field(b, 1, "label");
        T_EQ_INT(lab.shape[0], n);
        T_EQ_INT(lab.nbytes, (uint64_t)n * 8);
        for (int64_t j = 0; j < n; j++) {
            T_EQ_INT(((const int64_t *)lab.data)[j], tl_label(ids[j]));
            T_EQ_INT(((const int64_t *)lab.data)[j], stoker_batch_labels(b)[j]);
        }
        total += n;
        T_OK(stoker_batch_release(b));
    }
    T_EQ_INT(total, NREC);
    stoker_loader_destroy(l);

    /* such a data set always delivers its data field */
    T_OK(stoker_config_set_string(cfg, STOKER_OPT_FIELDS, "label"));
    l = NULL;
    T_EQ_RC(stoker_loader_create(&l, path, cfg), STOKER_E_INVALID);
    T_CONTAINS(stoker_loader_errmsg(l), "\"data\"");
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
}

/* stoker_loader_take against the calls it stands for, over two epochs of data set `path`:
 * the position before each call, the view, every field, the copies of labels, ids and (for
 * records of varying size) offsets, which leave the buffers' rest untouched; the END call's
 * position; the state at each batch equal to the loader's just before the call, and a
 * loader restored from it delivering that batch's records; bad arguments taking nothing. */
static void test_take(const char *path, bool varying)
{
    stoker_config *cfg = fields_cfg(NULL);
    stoker_loader *l = tl_open(path, cfg);
    enum { CAP = BATCH + 3 };
    int64_t labels[CAP + 1], ids[CAP + 1], offsets[CAP + 2];
    stoker_take t;
    memset(&t, 0, sizeof t);
    t.struct_size = sizeof t;
    stoker_batch *b = NULL;
    t.cap = BATCH - 1; /* below the batch size */
    t.labels = labels;
    T_EQ_RC(stoker_loader_take(l, &b, 100, &t), STOKER_E_INVALID);
    t.struct_size = sizeof t - 8;
    t.cap = CAP;
    T_EQ_RC(stoker_loader_take(l, &b, 100, &t), STOKER_E_INVALID);
    T_EQ_RC(stoker_loader_take(l, &b, 100, NULL), STOKER_E_INVALID);
    T_EQ_RC(stoker_loader_take(l, NULL, 100, &t), STOKER_E_INVALID);
    t.struct_size = sizeof t;
    t.ids = ids;
    t.offsets = offsets;
    bool varied = false;
    for (int epoch = 0; epoch < 2; epoch++) {
        T_OK(stoker_loader_set_epoch(l, epoch));
        int64_t total = 0;
        for (;;) {
            int64_t e = -1, pos = -1;
            T_OK(stoker_loader_position(l, &e, &pos));
            uint8_t before[STOKER_STATE_SIZE], at[STOKER_STATE_SIZE];
            T_OK(stoker_loader_state_save(l, before, sizeof before, NULL));
            memset(labels, 0xAB, sizeof labels);
            memset(ids, 0xAB, sizeof ids);
            memset(offsets, 0xAB, sizeof offsets);
            t.epoch = t.position = -5;
            const int rc = stoker_loader_take(l, &b, -1, &t);
            T_EQ_INT(t.epoch, e);
            T_EQ_INT(t.position, pos);
            if (rc == STOKER_END)
                break;
            if (rc)
                T_FAIL("take: %s: %s", stoker_strerror(rc), stoker_loader_errmsg(l));
            const int64_t n = stoker_batch_count(b);
            total += n;
            stoker_batch_view v = {.struct_size = sizeof v};
            T_OK(stoker_batch_get_view(b, &v));
            T_EQ_INT(t.view.struct_size, sizeof t.view);
            T_ASSERT(memcmp(&t.view, &v, sizeof v) == 0);
            T_EQ_INT(t.view.epoch, e);
            T_EQ_INT(t.view.position, pos);
            T_EQ_INT(t.num_fields, stoker_batch_num_fields(b));
            for (int32_t i = 0; i < t.num_fields; i++) {
                stoker_field_view f = {.struct_size = sizeof f};
                T_OK(stoker_batch_field(b, i, NULL, &f));
                T_ASSERT(memcmp(&t.fields[i], &f, sizeof f) == 0);
            }
            T_ASSERT(memcmp(labels, stoker_batch_labels(b), (size_t)n * 8) == 0);
            T_ASSERT(memcmp(ids, stoker_batch_ids(b), (size_t)n * 8) == 0);
            T_EQ_INT(labels[n], (int64_t)0xABABABABABABABABull);
            T_EQ_INT(ids[n], (int64_t)0xABABABABABABABABull);
            if (stoker_batch_offsets(b)) {
                T_ASSERT(memcmp(offsets, stoker_batch_offsets(b), (size_t)(n + 1) * 8) == 0);
                T_EQ_INT(offsets[n + 1], (int64_t)0xABABABABABABABABull);
                varied = true;
            } else {
                T_EQ_INT(offsets[0], (int64_t)0xABABABABABABABABull);
            }
            size_t size = 0;
            T_OK(stoker_batch_state_save(b, at, sizeof at, &size));
            T_EQ_INT(size, STOKER_STATE_SIZE);
            T_ASSERT(memcmp(at, before, sizeof at) == 0);
            T_EQ_RC(stoker_batch_state_save(b, at, sizeof at - 1, &size), STOKER_E_LIMIT);
            if (pos == 1) { /* restored from it, a loader delivers this batch again */
                stoker_loader *r = tl_open(path, cfg);
                T_OK(stoker_loader_state_restore(r, at, sizeof at));
                stoker_batch *again = NULL;
                T_OK(stoker_loader_next(r, &again));
                T_EQ_INT(stoker_batch_epoch(again), e);
                T_EQ_INT(stoker_batch_position(again), pos);
                T_EQ_INT(stoker_batch_count(again), n);
                T_ASSERT(memcmp(stoker_batch_ids(again), ids, (size_t)n * 8) == 0);
                T_OK(stoker_batch_release(again));
                stoker_loader_destroy(r);
            }
            T_OK(stoker_batch_release(b));
        }
        T_EQ_INT(total, NREC);
    }
    T_EQ_INT(varied, varying);
    /* no buffers: nothing copied, the rest filled */
    T_OK(stoker_loader_set_epoch(l, 2));
    t.labels = t.ids = t.offsets = NULL;
    t.cap = 0;
    T_OK(stoker_loader_take(l, &b, -1, &t));
    T_EQ_INT(t.position, 0);
    T_ASSERT(t.view.data == stoker_batch_data(b));
    T_EQ_RC(stoker_batch_state_save(NULL, NULL, 0, NULL), STOKER_E_INVALID);
    T_OK(stoker_batch_release(b));
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
}

int main(void)
{
    char *tmp = t_mkdtemp("batch_fields");
    char fields[4200], legacy[4200], fixed[4200];
    snprintf(fields, sizeof fields, "%s/fields", tmp);
    snprintf(legacy, sizeof legacy, "%s/legacy", tmp);
    snprintf(fixed, sizeof fixed, "%s/fixed", tmp);
    make_fields_dataset(fields);
    test_described_before_the_first_batch(fields);
    test_every_field_as_written(fields);
    test_bad_names_and_old_callers(fields);
    test_subset(fields);
    test_without_a_schema(legacy);
    test_take(fields, true);
    test_take(legacy, true);
    tl_make(fixed, NREC, 24, 0, 0);
    test_take(fixed, false);
    t_rmrf(tmp);
    free(tmp);
    printf("test_batch_fields: ok\n");
    return 0;
}
