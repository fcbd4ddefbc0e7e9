/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the loader tests: data sets written with the public writer whose
 * payload bytes encode the record id, so every delivered byte can be checked, and a
 * collector of whole loader runs. */
#ifndef STOKER_TEST_LOADER_UTIL_H
#define STOKER_TEST_LOADER_UTIL_H

#include "testutil.h"

#include "source/dataset.h"

#include <fcntl.h>
#include <unistd.h>

/* Byte k of record `id`. */
static inline uint8_t tl_byte(int64_t id, uint64_t k)
{
    return (uint8_t)((uint64_t)id * 131u + k * 7u + (k >> 8) + 1u);
}

static inline int64_t tl_label(int64_t id)
{
    return id % 10 - 3;
}

/* Size of variable-size record id: 0 .. 299, zero included. */
static inline size_t tl_var_size(int64_t id)
{
    return (size_t)((id * 37) % 300);
}

/* Writes a data set at path: n records; rec_size > 0: RAW uint8 [rec_size]; 0: BYTES of
 * tl_var_size. align 0 = default; shard_size 0 = default. */
static inline void tl_make(const char *path, int64_t n, uint64_t rec_size, int64_t align,
                           int64_t shard_size)
{
    stoker_writer *w = t_writer_open(path, shard_size, align, 0);
    if (rec_size) {
        const int64_t shape[1] = {(int64_t)rec_size};
        T_OK(stoker_writer_set_field(w, STOKER_FIELD_RAW, STOKER_DTYPE_UINT8, 1, shape));
    }
    uint8_t *buf = malloc(rec_size ? rec_size : 300);
    for (int64_t id = 0; id < n; id++) {
        const size_t size = rec_size ? rec_size : tl_var_size(id);
        for (size_t k = 0; k < size; k++)
            buf[k] = tl_byte(id, k);
        T_OK(stoker_writer_add(w, buf, size, tl_label(id), NULL));
    }
    T_OK(stoker_writer_finish(w));
    stoker_writer_destroy(w);
    free(buf);
}

/* Checks one delivered batch's bytes, labels and shape against the record ids it names.
 * rec_size 0: variable-size records with offsets. */
static inline void tl_check_batch(const stoker_batch *b, uint64_t rec_size)
{
    stoker_batch_view v;
    v.struct_size = sizeof v;
    T_OK(stoker_batch_get_view(b, &v));
    T_EQ_INT(v.count, stoker_batch_count(b));
    T_ASSERT(v.data == stoker_batch_data(b));
    T_EQ_INT(v.device, -1);
    const uint8_t *data = v.data;
    for (int64_t j = 0; j < v.count; j++) {
        const int64_t id = v.ids[j];
        T_EQ_INT(v.labels[j], tl_label(id));
        const uint8_t *p;
        size_t size;
        if (rec_size) {
            T_ASSERT(v.offsets == NULL);
            p = data + (uint64_t)j * rec_size;
            size = rec_size;
        } else {
            T_ASSERT(v.offsets != NULL);
            p = data + v.offsets[j];
            size = (size_t)(v.offsets[j + 1] - v.offsets[j]);
            T_EQ_INT(size, tl_var_size(id));
        }
        for (size_t k = 0; k < size; k++)
            if (p[k] != tl_byte(id, k))
                T_FAIL("record %" PRId64 " byte %zu: %u != %u", id, k, p[k], tl_byte(id, k));
    }
    if (rec_size) {
        T_EQ_INT(v.ndim, 2);
        T_EQ_INT(v.shape[0], v.count);
        T_EQ_INT(v.shape[1], rec_size);
        T_EQ_INT(v.nbytes, (uint64_t)v.count * rec_size);
        T_EQ_INT(v.dtype, STOKER_DTYPE_UINT8);
    } else {
        T_EQ_INT(v.ndim, 1);
        T_EQ_INT(v.offsets[0], 0);
        T_EQ_INT(v.offsets[v.count], v.nbytes);
        T_EQ_INT(v.shape[0], v.nbytes);
    }
}

/* A run's record: per batch its epoch, position, count and ids (flattened). */
typedef struct tl_run {
    int64_t nbatches;
    int64_t epoch[4096], position[4096], count[4096], start[4096];
    int64_t ids[1 << 17];
    int64_t nids;
} tl_run;

/* Appends batches from l until `epochs` STOKER_END were seen or max batches taken. */
static inline void tl_collect(stoker_loader *l, tl_run *run, int epochs, int64_t max,
                              uint64_t rec_size)
{
    int ends = 0;
    while (ends < epochs && max-- > 0) {
        stoker_batch *b = NULL;
        const int rc = stoker_loader_next(l, &b);
        if (rc == STOKER_END) {
            ends++;
            max++;
            continue;
        }
        if (rc != 0)
            T_FAIL("next: %s: %s", stoker_strerror(rc), stoker_loader_errmsg(l));
        tl_check_batch(b, rec_size);
        const int64_t k = run->nbatches++;
        T_ASSERT(k < 4096);
        run->epoch[k] = stoker_batch_epoch(b);
        run->position[k] = stoker_batch_position(b);
        run->count[k] = stoker_batch_count(b);
        run->start[k] = run->nids;
        T_ASSERT(run->nids + run->count[k] <= (1 << 17));
        memcpy(run->ids + run->nids, stoker_batch_ids(b), (size_t)run->count[k] * 8);
        run->nids += run->count[k];
        T_OK(stoker_batch_release(b));
    }
}

/* Asserts run a's batches from `from` on equal b's batches. */
static inline void tl_same(const tl_run *a, int64_t from, const tl_run *b)
{
    T_EQ_INT(a->nbatches - from, b->nbatches);
    for (int64_t k = 0; k < b->nbatches; k++) {
        T_EQ_INT(a->epoch[from + k], b->epoch[k]);
        T_EQ_INT(a->position[from + k], b->position[k]);
        T_EQ_INT(a->count[from + k], b->count[k]);
        for (int64_t j = 0; j < b->count[k]; j++)
            T_EQ_INT(a->ids[a->start[from + k] + j], b->ids[b->start[k] + j]);
    }
}

static inline stoker_config *tl_cfg(int64_t batch, int64_t threads)
{
    stoker_config *cfg = NULL;
    T_OK(stoker_config_create(&cfg));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_BATCH_SIZE, batch));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_THREADS, threads));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SEED, 1234));
    /* host batches even where a GPU is usable: these tests read the data on the host */
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DEVICE, -1));
    return cfg;
}

static inline stoker_loader *tl_open(const char *path, const stoker_config *cfg)
{
    stoker_loader *l = NULL;
    const int rc = stoker_loader_create(&l, path, cfg);
    if (rc)
        T_FAIL("loader_create %s: %s: %s", path, stoker_strerror(rc), stoker_loader_errmsg(l));
    return l;
}

/* A fresh loader over path run for `epochs` epochs into *run (cleared first), destroyed. */
static inline void tl_run_with(const char *path, stoker_config *cfg, tl_run *run, int epochs,
                               uint64_t rec_size)
{
    memset(run, 0, sizeof *run);
    stoker_loader *l = tl_open(path, cfg);
    tl_collect(l, run, epochs, INT64_MAX, rec_size);
    stoker_loader_destroy(l);
}

/* n raw uint8 records of shape [h, w, 3] (images, as GPU normalisation takes them); byte k
 * of record id is tl_byte(id, k), its label tl_label(id). */
static inline void tl_make_images(const char *path, int64_t n, int64_t h, int64_t w)
{
    stoker_writer *wr = t_writer_open(path, 0, 0, 0);
    const int64_t shape[3] = {h, w, 3};
    T_OK(stoker_writer_set_field(wr, STOKER_FIELD_RAW, STOKER_DTYPE_UINT8, 3, shape));
    const size_t size = (size_t)(h * w * 3);
    uint8_t *buf = malloc(size);
    for (int64_t id = 0; id < n; id++) {
        for (size_t k = 0; k < size; k++)
            buf[k] = tl_byte(id, k);
        T_OK(stoker_writer_add(wr, buf, size, tl_label(id), NULL));
    }
    free(buf);
    T_OK(stoker_writer_finish(wr));
    stoker_writer_destroy(wr);
}

/* The loader's statistics now. */
static inline stoker_stats tl_stats(const stoker_loader *l)
{
    stoker_stats st;
    st.struct_size = sizeof st;
    T_OK(stoker_loader_get_stats(l, &st));
    return st;
}

/* Reads the rest of the epoch after an allocation was made to fail: every batch delivered
 * holds its own ids in order (nothing replaced), and one fails with -ENOMEM naming a shard
 * (".stk"), `record` (as ": record N" or ": record ") and the lack of memory. Returns the
 * batches delivered; *failures gets the failed ones. */
static inline int tl_drain_oom(stoker_loader *l, int64_t batch, const char *record, int *failures)
{
    stoker_batch *b = NULL;
    int ok = 0, rc;
    *failures = 0;
    while ((rc = stoker_loader_next(l, &b)) != STOKER_END) {
        if (rc == 0) {
            for (int64_t j = 0; j < stoker_batch_count(b); j++)
                T_EQ_INT(stoker_batch_ids(b)[j], stoker_batch_position(b) * batch + j);
            T_OK(stoker_batch_release(b));
            ok++;
            continue;
        }
        printf("expected failure: %s\n", stoker_loader_errmsg(l));
        T_EQ_RC(rc, -ENOMEM);
        T_CONTAINS(stoker_loader_errmsg(l), ".stk");
        T_CONTAINS(stoker_loader_errmsg(l), record);
        T_CONTAINS(stoker_loader_errmsg(l), "memory");
        (*failures)++;
    }
    return ok;
}

/* Flips one payload byte of record id in its shard file; returns the shard's path. */
static inline void tl_flip_byte(const char *path, int64_t id, char *shard_path, size_t cap)
{
    stoker_dataset *ds = NULL;
    T_OK(stoker_dataset_open(&ds, path, NULL));
    stoker__recloc loc;
    T_OK(stoker__dataset_locate(ds, id, &loc));
    T_ASSERT(loc.length > 0);
    snprintf(shard_path, cap, "%s", stoker__dataset_shard_path(ds, loc.shard));
    stoker_dataset_close(ds);
    const int fd = open(shard_path, O_RDWR);
    T_ASSERT(fd >= 0);
    uint8_t c;
    const off_t at = (off_t)(loc.offset + loc.length / 2);
    T_EQ_INT(pread(fd, &c, 1, at), 1);
    c ^= 0x10;
    T_EQ_INT(pwrite(fd, &c, 1, at), 1);
    close(fd);
}

#endif
