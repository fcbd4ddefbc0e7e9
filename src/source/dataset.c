/* SPDX-License-Identifier: Apache-2.0 */
/* An open data set's public face: stoker_dataset_open chooses the source from the list
 * (sources.c), and every call after it goes through the source's operations (source.h). */
#include "source/source.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* The calling thread's last failure on an open data set: stoker_dataset_errmsg promises
 * each thread its own, so concurrent readers never share (or tear) one message. `serial`
 * names the handle, so a handle freed and another allocated at its address do not match. */
static _Thread_local struct {
    uint64_t serial;
    stoker__err err;
} thread_fail;

static atomic_uint_fast64_t next_serial = 1;

static stoker_dataset *dataset_alloc(void)
{
    stoker_dataset *ds = stoker__calloc(1, sizeof *ds);
    if (!ds)
        return NULL;
    ds->serial = atomic_fetch_add_explicit(&next_serial, 1, memory_order_relaxed);
    return ds;
}

/* A failure of a call on an open data set (any thread): kept for the calling thread. */
int stoker__dataset_fail(stoker_dataset *ds, int code, const char *fmt, ...)
{
    char raw[sizeof thread_fail.err.msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    stoker_redact(raw, thread_fail.err.msg, sizeof thread_fail.err.msg);
    thread_fail.err.code = code;
    thread_fail.serial = ds->serial;
    return code;
}

int stoker_dataset_open(stoker_dataset **out, const char *path, const stoker_config *cfg)
{
    if (!out)
        return STOKER_E_INVALID;
    stoker_dataset *ds = *out = dataset_alloc();
    if (!ds)
        return -ENOMEM;
    STOKER_RETURN_IF(!path || !*path, &ds->err, STOKER_E_INVALID, "no data set path given");
    ds->path = stoker__strdup(path);
    STOKER_RETURN_IF(!ds->path, &ds->err, -ENOMEM, "%s: out of memory", path);
    int rc = 0;
    const stoker__source *src = stoker__source_for(path, &rc);
    if (rc < 0)
        return stoker__fail(&ds->err, rc, "%s: a read of the file failed: %s", path, strerror(-rc));
    if (!src->open)
        return stoker__fail(&ds->err, STOKER_E_UNSUPPORTED, "%s: %s", path, src->refusal);
    rc = src->open(ds, path, cfg);
    if (rc == 0 && !ds->info.schema) {
        stoker__schema_legacy(&ds->legacy, ds->info.kind, ds->info.dtype, ds->info.ndim,
                              ds->info.shape, ds->info.max_record);
        ds->info.schema = &ds->legacy;
    }
    if (rc == 0)
        stoker__err_clear(&ds->err);
    ds->ready = rc == 0;
    return rc;
}

int stoker_dataset_verify(const char *path, const stoker_config *cfg, stoker_verify_fn fn,
                          void *user, int64_t *problems)
{
    int64_t found = 0;
    stoker_dataset *ds = dataset_alloc();
    int rc = ds ? 0 : -ENOMEM;
    if (ds && (!path || !*path))
        rc = stoker__fail(&ds->err, STOKER_E_INVALID, "no data set path given");
    else if (ds && !(ds->path = stoker__strdup(path)))
        rc = stoker__fail(&ds->err, -ENOMEM, "%s: out of memory", path);
    const stoker__source *src = rc == 0 ? stoker__source_for(path, &rc) : NULL;
    if (ds && src && rc < 0)
        stoker__fail(&ds->err, rc, "%s: a read of the file failed: %s", path, strerror(-rc));
    else if (src && !src->verify)
        rc = stoker__fail(&ds->err, STOKER_E_UNSUPPORTED, "%s: %s", path, src->refusal);
    else if (src)
        rc = src->verify(ds, cfg, fn, user, &found);
    if (rc < 0 && found == 0) { /* the source reported nothing: one problem, the failure */
        found = 1;
        if (fn)
            fn(user, -1, -1, rc, ds ? ds->err.msg : "out of memory");
    }
    stoker_dataset_close(ds);
    if (problems)
        *problems = found;
    return rc;
}

void stoker_dataset_close(stoker_dataset *ds)
{
    if (!ds)
        return;
    if (ds->ops)
        ds->ops->close(ds);
    stoker__free(ds->path);
    stoker__free(ds);
}

const char *stoker_dataset_errmsg(const stoker_dataset *ds)
{
    if (!ds)
        return "no data set";
    return thread_fail.serial == ds->serial ? thread_fail.err.msg : ds->err.msg;
}

int64_t stoker_dataset_num_records(const stoker_dataset *ds)
{
    return ds && ds->ready ? (int64_t)ds->info.records : 0;
}

int32_t stoker_dataset_num_shards(const stoker_dataset *ds)
{
    return ds && ds->ready ? ds->info.files : 0;
}

int32_t stoker_dataset_num_classes(const stoker_dataset *ds)
{
    return ds && ds->ready ? (int32_t)ds->info.nclasses : 0;
}

const char *stoker_dataset_class_name(const stoker_dataset *ds, int32_t i)
{
    return ds && ds->ready && i >= 0 && (uint32_t)i < ds->info.nclasses ? ds->info.classes[i]
                                                                        : NULL;
}

int64_t stoker_dataset_payload_bytes(const stoker_dataset *ds)
{
    return ds && ds->ready ? (int64_t)ds->info.payload_bytes : 0;
}

int32_t stoker_dataset_format_version(const stoker_dataset *ds)
{
    return ds && ds->ready ? (int32_t)ds->info.version : 0;
}

int32_t stoker_dataset_align(const stoker_dataset *ds)
{
    return ds && ds->ready ? (int32_t)ds->info.align : 0;
}

const char *stoker__dataset_source(const stoker_dataset *ds)
{
    return ds && ds->ops ? ds->ops->name : "none";
}

int stoker_dataset_jpeg_checked(const stoker_dataset *ds)
{
    return ds && ds->ready && ds->info.jpeg_checked ? 1 : 0;
}

int stoker_dataset_field(const stoker_dataset *ds, int32_t *kind, int32_t *dtype, int32_t *ndim,
                         int64_t *shape)
{
    if (!ds || !ds->ready)
        return STOKER_E_INVALID;
    if (kind)
        *kind = ds->info.kind;
    if (dtype)
        *dtype = ds->info.dtype;
    if (ndim)
        *ndim = ds->info.ndim;
    if (shape)
        memcpy(shape, ds->info.shape, sizeof ds->info.shape);
    return 0;
}

int32_t stoker_dataset_num_fields(const stoker_dataset *ds)
{
    return ds && ds->ready ? ds->info.schema->n : 0;
}

int stoker_dataset_field_desc(const stoker_dataset *ds, int32_t i, stoker_field_desc *out)
{
    if (!ds || !ds->ready || !out || out->struct_size < sizeof *out)
        return STOKER_E_INVALID;
    if (i < 0 || i >= ds->info.schema->n)
        return stoker__dataset_fail((stoker_dataset *)ds, STOKER_E_INVALID,
                                    "%s: field %d out of range (%d fields)", ds->path, (int)i,
                                    (int)ds->info.schema->n);
    stoker__schema_desc(ds->info.schema, i, out);
    return 0;
}

int32_t stoker_dataset_field_index(const stoker_dataset *ds, const char *name)
{
    return ds && ds->ready ? stoker__schema_find(ds->info.schema, name) : -1;
}

int stoker_dataset_split_record(stoker_dataset *ds, int64_t id, const void *payload, size_t size,
                                stoker_field_value *out)
{
    if (!ds || !ds->ready || !out || (!payload && size > 0))
        return STOKER_E_INVALID;
    stoker__recloc loc;
    if (stoker__dataset_locate(ds, id, &loc) < 0)
        return stoker__dataset_fail(ds, STOKER_E_INVALID,
                                    "%s: record %lld out of range (%lld "
                                    "records)",
                                    ds->path, (long long)id,
                                    (long long)stoker_dataset_num_records(ds));
    const stoker__schema *s = ds->info.schema;
    stoker__span sp[STOKER_MAX_FIELDS];
    stoker__err err = {0};
    const int rc = stoker__schema_split(s, payload, size, sp, &err);
    if (rc < 0)
        return stoker__dataset_fail(ds, rc, "%s: record %lld: %s", ds->path, (long long)id,
                                    err.msg);
    const uint8_t *p = payload;
    for (int32_t i = 0; i < s->n; i++)
        out[i] = (stoker_field_value){p ? p + sp[i].off : NULL, sp[i].len};
    /* boxes and their rows as the loader checks them as it reads them: an HDF5 file's
     * promise nothing */
    if (stoker__schema_check_boxes(s, out, &err) < 0)
        return stoker__dataset_fail(ds, STOKER_E_CORRUPT, "%s: record %lld: %s", ds->path,
                                    (long long)id, err.msg);
    if (s->legacy) {
        const void *label = ds->ops->label_at ? ds->ops->label_at(ds, id) : NULL;
        if (!label)
            return stoker__dataset_fail(ds, STOKER_E_UNSUPPORTED,
                                        "%s: this source keeps no labels to point to", ds->path);
        out[s->label] = (stoker_field_value){label, 8};
    }
    return 0;
}

void stoker__dataset_advise(const stoker_dataset *ds, int advice)
{
    if (ds && ds->ready && ds->ops->advise)
        ds->ops->advise(ds, advice);
}

int stoker__dataset_locate(const stoker_dataset *ds, int64_t id, stoker__recloc *loc)
{
    if (!ds || !ds->ready || !loc)
        return STOKER_E_INVALID;
    return ds->ops->locate(ds, id, loc);
}

int stoker_dataset_record_info(const stoker_dataset *ds, int64_t id, uint64_t *size, int64_t *label,
                               int32_t *shard)
{
    stoker__recloc loc;
    const int rc = stoker__dataset_locate(ds, id, &loc);
    if (rc < 0)
        return rc;
    if (size)
        *size = loc.length;
    if (label)
        *label = loc.label;
    if (shard)
        *shard = loc.shard;
    return 0;
}

const char *stoker_dataset_record_key(stoker_dataset *ds, int64_t id)
{
    return ds && ds->ready && ds->ops->key ? ds->ops->key(ds, id) : NULL;
}

int stoker_dataset_read(stoker_dataset *ds, int64_t id, void *buf, size_t cap, size_t *size)
{
    if (!ds)
        return STOKER_E_INVALID;
    stoker__recloc loc;
    if (stoker__dataset_locate(ds, id, &loc) < 0)
        return stoker__dataset_fail(ds, STOKER_E_INVALID,
                                    "%s: record %lld out of range (%lld "
                                    "records)",
                                    ds->path, (long long)id,
                                    (long long)stoker_dataset_num_records(ds));
    if (size)
        *size = (size_t)loc.length;
    const char *p = stoker__dataset_shard_path(ds, loc.shard);
    int64_t first = id;
    for (stoker__recloc at;
         first > 0 && stoker__dataset_locate(ds, first - 1, &at) == 0 && at.shard == loc.shard;)
        first--; /* only messages use it, and only a failed read gets here */
    const unsigned long long sr = (unsigned long long)(id - first);
    if (loc.length > cap)
        return stoker__dataset_fail(ds, STOKER_E_LIMIT,
                                    "%s: record %lld (shard record %llu): %llu bytes do not fit "
                                    "a buffer of %zu",
                                    p, (long long)id, sr, (unsigned long long)loc.length, cap);
    if (loc.length > 0 && !buf)
        return stoker__dataset_fail(ds, STOKER_E_INVALID, "%s: NULL buffer", ds->path);
    if (loc.fetch) {
        stoker__err err = {0};
        const uint8_t *got = NULL;
        const int frc = stoker__dataset_fetch(ds, id, &loc, buf, &got, NULL, &err);
        if (frc < 0)
            return stoker__dataset_fail(ds, frc, "%s", err.msg);
    } else {
        const int rc = stoker__pread_full(loc.fd, buf, (size_t)loc.length, loc.offset);
        if (rc < 0)
            return stoker__dataset_fail(
                ds, rc, "%s: record %lld (shard record %llu): read: %s", p, (long long)id, sr,
                rc == STOKER_E_CORRUPT ? "file ends early" : stoker_strerror(rc));
    }
    uint32_t crc = loc.has_crc ? stoker_crc32c(0, buf, (size_t)loc.length) : 0;
    char what[STOKER_ERRMSG_CAP / 2], again[STOKER_ERRMSG_CAP] = "";
    if (loc.has_crc && crc != loc.crc && loc.fetch &&
        stoker__dataset_refetch(ds, id, &loc, what, sizeof what) > 0) {
        /* the copy read may be what is damaged: fetched once more (dataset.h) */
        stoker__err err = {0};
        const uint8_t *got = NULL;
        const int frc = stoker__dataset_fetch(ds, id, &loc, buf, &got, NULL, &err);
        if (frc < 0)
            return stoker__dataset_fail(ds, frc,
                                        "%s: record %lld: CRC32C mismatch, read from %s, "
                                        "dropped; fetching it again failed: %s",
                                        p, (long long)id, what, err.msg);
        crc = stoker_crc32c(0, buf, (size_t)loc.length);
        snprintf(again, sizeof again, ", also when fetched again after dropping %s", what);
    }
    if (loc.has_crc && crc != loc.crc)
        return stoker__dataset_fail(ds, STOKER_E_CORRUPT,
                                    "%s: record %lld (shard record %llu): CRC32C mismatch "
                                    "(stored %08x, computed %08x)%s",
                                    p, (long long)id, sr, loc.crc, crc, again);
    return 0;
}

/* ---- internal getters ---- */

const char *stoker__dataset_path(const stoker_dataset *ds)
{
    return ds->path;
}

uint32_t stoker__dataset_align(const stoker_dataset *ds)
{
    return ds->info.align;
}

const char *stoker__dataset_shard_path(const stoker_dataset *ds, int32_t shard)
{
    const char *p = ds->ops ? ds->ops->file_path(ds, shard) : NULL;
    return p ? p : "(no such shard)";
}

int stoker__dataset_direct_fd(stoker_dataset *ds, int32_t shard)
{
    return ds->ops->direct_fd ? ds->ops->direct_fd(ds, shard) : -EOPNOTSUPP;
}

int stoker__dataset_fetch(stoker_dataset *ds, int64_t id, const stoker__recloc *loc, uint8_t *dst,
                          const uint8_t **out, const atomic_int *cancel, stoker__err *err)
{
    STOKER_RETURN_IF(!ds->ops->fetch, err, STOKER_E_INVALID,
                     "%s: record %lld: this source has no fetched records", ds->path,
                     (long long)id);
    return ds->ops->fetch(ds, id, loc, dst, out, cancel, err);
}

int stoker__dataset_refetch(stoker_dataset *ds, int64_t id, const stoker__recloc *loc, char *what,
                            size_t cap)
{
    return ds->ops->refetch ? ds->ops->refetch(ds, id, loc, what, cap) : 0;
}

int stoker__dataset_fetch_plan(stoker_dataset *ds, int64_t id, const stoker__recloc *loc,
                               uint64_t round, uint8_t *dst, stoker__fetch_read *out, uint32_t cap,
                               uint32_t *n)
{
    *n = 0;
    return ds->ops->plan ? ds->ops->plan(ds, id, loc, round, dst, out, cap, n) : STOKER__PLAN_NONE;
}

void stoker__dataset_fetch_landed(stoker_dataset *ds, uint32_t cookie, uint64_t length, int64_t res)
{
    if (ds->ops->landed)
        ds->ops->landed(ds, cookie, length, res);
}

bool stoker__dataset_serialised(const stoker_dataset *ds)
{
    return ds && ds->ops && ds->ops->serialised && ds->ops->serialised(ds);
}

int32_t stoker__dataset_backend(const stoker_dataset *ds)
{
    if (stoker__dataset_serialised(ds))
        return STOKER_BACKEND_HDF5;
    return ds && ds->ops ? ds->ops->backend : 0;
}

const stoker__schema *stoker__dataset_schema(const stoker_dataset *ds)
{
    return ds->info.schema;
}

uint64_t stoker__dataset_max_record(const stoker_dataset *ds)
{
    return ds->info.max_record;
}

uint64_t stoker__dataset_block_records(const stoker_dataset *ds)
{
    return ds->ops->block_records ? ds->ops->block_records(ds) : 0;
}

void stoker__dataset_follow(stoker_dataset *ds, const stoker__future *f)
{
    if (ds && ds->ready && ds->ops->follow)
        ds->ops->follow(ds, f);
}

void stoker__dataset_progress(stoker_dataset *ds, uint64_t seq)
{
    if (ds && ds->ready && ds->ops->progress)
        ds->ops->progress(ds, seq);
}

void stoker__dataset_interrupt(stoker_dataset *ds, bool on)
{
    if (ds && ds->ready && ds->ops->interrupt)
        ds->ops->interrupt(ds, on);
}

bool stoker__dataset_remote_stats(stoker_dataset *ds, stoker__remote_stats *s)
{
    memset(s, 0, sizeof *s);
    if (!ds || !ds->ready || !ds->ops->remote_stats)
        return false;
    ds->ops->remote_stats(ds, s);
    return true;
}

/* ---- small public getters tools need (stoker-bench reads every shard file directly) ---- */

const char *stoker_dataset_shard_path(const stoker_dataset *ds, int32_t i)
{
    if (!ds || i < 0 || i >= stoker_dataset_num_shards(ds))
        return NULL;
    return ds->ops->file_path(ds, i);
}
