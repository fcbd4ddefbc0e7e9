/* SPDX-License-Identifier: Apache-2.0 */
/* Several datasets of one HDF5 file, all of one length along axis 0, as the fields of one
 * sample (STOKER_OPT_H5_FIELDS, docs/HDF5.md "Several datasets as the fields of a sample").
 * A mask's size against its image, a PNG's or JPEG's bytes, boxes (finite, within their
 * image) and the rows tied to them (one a box) are checked by the loader as it reads them (a
 * corrupt sample under on_corrupt), as for any data set.
 *
 * Each dataset is mapped at open as the one-dataset source maps its dataset (hdf5.c), and
 * record i is the sample of every dataset's row i, handed to the loader as one payload in the
 * layout of a data set with a schema (docs/FORMAT.md "Samples with several fields"): the
 * fetch reads each field's row (a contiguous extent, whole chunks through the thread's chunk
 * cache, or libhdf5 for the serialised layouts) and encodes them with stoker__schema_encode,
 * so the loader splits it as it splits a packed record. Every variable field's max is the
 * largest value of the file's, from the lengths read at open: a true bound. A remote file's
 * datasets share one transport (and block cache), that of the first field. */
#include "source/hdf5.h"
#include "common/config.h"
#include "format/schema.h"
#include "format/signature.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>

typedef struct h5_fields {
    int32_t n;
    stoker__h5 *h[STOKER_MAX_FIELDS]; /* field i's dataset; h[0] owns a remote transport */
    const stoker__h5 *label;          /* the "label" field's (its labels read), or NULL */
    stoker__schema schema;
} h5_fields;

/* ---- a thread's buffers: the fields' values, and the payload when the caller gives none */

typedef struct fields_buf {
    uint8_t *vals, *out;
    size_t vals_cap, out_cap;
} fields_buf;

static void buf_destroy(void *p)
{
    fields_buf *b = p;
    stoker__free(b->vals);
    stoker__free(b->out);
    stoker__free(b);
}

static stoker__thread_key buf_key = STOKER__THREAD_KEY(fields_buf, buf_destroy);

/* ---- the source's operations ---- */

/* The fields' values of record id: their lengths (v[i].size) and, when `base` is given,
 * their places in it, one after another. Returns the sum of the lengths. */
static uint64_t field_sizes(const h5_fields *F, int64_t id, uint8_t *base, stoker_field_value *v)
{
    uint64_t at = 0;
    for (int32_t i = 0; i < F->n; i++) {
        const uint64_t len = stoker__h5_length(F->h[i], id);
        v[i] = (stoker_field_value){base ? base + at : NULL, len};
        at += len;
    }
    return at;
}

static int fields_locate(const stoker_dataset *ds, int64_t id, stoker__recloc *loc)
{
    const h5_fields *F = ds->state;
    if (id < 0 || (uint64_t)id >= ds->info.records)
        return STOKER_E_INVALID;
    stoker_field_value v[STOKER_MAX_FIELDS];
    field_sizes(F, id, NULL, v);
    *loc = (stoker__recloc){
        .fd = F->h[0]->fd,
        .shard = 0,
        .offset = 0,
        .length = stoker__schema_payload_size(&F->schema, v),
        .label = F->label ? F->label->labels[id] : -1,
        .fetch = 1, /* assembled from several datasets */
    };
    return 0;
}

static int fields_fetch(stoker_dataset *ds, int64_t id, const stoker__recloc *loc, uint8_t *dst,
                        const uint8_t **out, const atomic_int *cancel, stoker__err *err)
{
    const h5_fields *F = ds->state;
    fields_buf *b = stoker__thread_object(&buf_key);
    stoker_field_value v[STOKER_MAX_FIELDS];
    const uint64_t total = field_sizes(F, id, NULL, v);
    STOKER_RETURN_IF(!b || stoker__scratch_grow(&b->vals, &b->vals_cap, total) < 0 ||
                         (!dst && stoker__scratch_grow(&b->out, &b->out_cap, loc->length) < 0),
                     err, -ENOMEM, "%s: record %lld: out of memory", F->h[0]->file, (long long)id);
    field_sizes(F, id, b->vals, v);
    for (int32_t i = 0; i < F->n; i++) {
        const int rc =
            stoker__h5_read_record(F->h[i], id, v[i].size, (uint8_t *)v[i].data, cancel, err);
        if (rc < 0)
            return rc;
    }
    uint8_t *buf = dst ? dst : b->out;
    stoker__schema_encode(&F->schema, v, buf);
    *out = buf;
    return 0;
}

static const char *fields_file_path(const stoker_dataset *ds, int32_t file)
{
    const h5_fields *F = ds->state;
    return file == 0 && F ? stoker__h5_bytes_file(F->h[0]) : NULL;
}

static void fields_advise(const stoker_dataset *ds, int advice)
{
    const h5_fields *F = ds->state;
    for (int32_t i = 0; i < F->n; i++)
        if (F->h[i]->fd >= 0)
            posix_fadvise(F->h[i]->fd, 0, 0, advice);
}

static bool fields_serialised(const stoker_dataset *ds)
{
    const h5_fields *F = ds->state;
    bool any = false;
    for (int32_t i = 0; F && i < F->n; i++)
        any = any || stoker__h5_mode_slow(F->h[i]) != NULL;
    return any;
}

/* The first field's dataset owns the transport the others read: freed last. */
static void fields_close(stoker_dataset *ds)
{
    h5_fields *F = ds->state;
    if (!F)
        return;
    for (int32_t i = F->n - 1; i >= 0; i--)
        stoker__h5_free(F->h[i]);
    stoker__free(F);
    ds->state = NULL;
}

#define FIELDS_COMMON_OPS                                                                          \
    .name = "hdf5", .locate = fields_locate, .file_path = fields_file_path, .close = fields_close, \
    .fetch = fields_fetch, .serialised = fields_serialised

static const stoker__source_ops FIELDS_OPS = {
    FIELDS_COMMON_OPS,
    .advise = fields_advise,
};

#ifdef STOKER_HAVE_CURL
static void fields_interrupt(stoker_dataset *ds, bool on)
{
    const h5_fields *F = ds->state;
    stoker__h5_remote_interrupt(F->h[0], on);
}

static void fields_remote_stats(stoker_dataset *ds, stoker__remote_stats *s)
{
    const h5_fields *F = ds->state;
    stoker__h5_remote_stats(F->h[0], s);
}
#endif

static const stoker__source_ops FIELDS_REMOTE_OPS = {
    FIELDS_COMMON_OPS,
    .backend = STOKER_BACKEND_REMOTE,
#ifdef STOKER_HAVE_CURL
    .interrupt = fields_interrupt,
    .remote_stats = fields_remote_stats,
#endif
};

/* ---- open ---- */

/* One entry of the spec, "NAME=DATASET[:KIND][:TIE=FIELD]" (TIE one of mask_of, boxes_of,
 * rows_of), spaces around its parts ignored. */
typedef struct field_spec {
    char name[STOKER_FIELD_NAME_MAX + 1];
    char dset[1024];
    int32_t kind;                           /* 0: from the dataset's type */
    int32_t tie;                            /* stoker_field_tie; STOKER_TIE_NONE: untied */
    char tie_to[STOKER_FIELD_NAME_MAX + 1]; /* the field it is tied to */
} field_spec;

static void trim(const char **s, size_t *n)
{
    while (*n > 0 && (**s == ' ' || **s == '\t')) {
        (*s)++;
        (*n)--;
    }
    while (*n > 0 && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t'))
        (*n)--;
}

/* One ":"-separated part after the dataset: a kind, or a tie TIE=FIELD. */
static int parse_option(stoker_dataset *ds, const char *file, const char *k, size_t kl,
                        field_spec *out)
{
    trim(&k, &kl);
    const char *eq = memchr(k, '=', kl);
    if (eq) {
        const char *t = eq + 1;
        size_t tl = (size_t)(k + kl - t), nl = (size_t)(eq - k);
        trim(&t, &tl);
        trim(&k, &nl);
        char key[16] = "";
        if (nl < sizeof key)
            memcpy(key, k, nl);
        const int32_t tie = stoker__field_tie_parse(key);
        STOKER_RETURN_IF(tie == STOKER_TIE_NONE, &ds->err, STOKER_E_INVALID,
                         "%s: STOKER_OPT_H5_FIELDS: field \"%s\": \"%.*s\" is not a tie: "
                         "mask_of=FIELD, boxes_of=FIELD or rows_of=FIELD",
                         file, out->name, (int)kl, k);
        STOKER_RETURN_IF(out->tie != STOKER_TIE_NONE, &ds->err, STOKER_E_INVALID,
                         "%s: STOKER_OPT_H5_FIELDS: field \"%s\": a field takes one tie", file,
                         out->name);
        STOKER_RETURN_IF(tl == 0 || tl > STOKER_FIELD_NAME_MAX, &ds->err, STOKER_E_INVALID,
                         "%s: STOKER_OPT_H5_FIELDS: field \"%s\": %s names a field", file,
                         out->name, stoker__field_tie_name(tie));
        out->tie = tie;
        memcpy(out->tie_to, t, tl);
        out->tie_to[tl] = '\0';
        return 0;
    }
    char kind[16] = "";
    if (kl < sizeof kind)
        memcpy(kind, k, kl);
    kind[kl < sizeof kind ? kl : 0] = '\0';
    out->kind = stoker__field_kind_parse(kind);
    STOKER_RETURN_IF(out->kind == 0, &ds->err, STOKER_E_INVALID,
                     "%s: STOKER_OPT_H5_FIELDS: field \"%s\": kind \"%.*s\" is not one of "
                     "jpeg, png, bytes, raw, array, int64, float32",
                     file, out->name, (int)kl, k);
    return 0;
}

static int parse_entry(stoker_dataset *ds, const char *file, const char *e, size_t n,
                       field_spec *out)
{
    trim(&e, &n);
    const char *eq = memchr(e, '=', n);
    size_t nl = eq ? (size_t)(eq - e) : 0;
    const char *nm = e;
    trim(&nm, &nl);
    STOKER_RETURN_IF(!eq || nl == 0 || nl > STOKER_FIELD_NAME_MAX, &ds->err, STOKER_E_INVALID,
                     "%s: STOKER_OPT_H5_FIELDS: \"%.*s\" is not NAME=DATASET[:KIND] with a name "
                     "of 1 to %d bytes",
                     file, (int)n, e, STOKER_FIELD_NAME_MAX);
    memset(out, 0, sizeof *out);
    memcpy(out->name, nm, nl);
    const char *d = eq + 1, *end = e + n;
    size_t dl = strcspn(d, ":");
    dl = d + dl < end ? dl : (size_t)(end - d);
    for (const char *p = d + dl; p < end;) {
        const char *q = p + 1;
        const size_t ql = strcspn(q, ":");
        const size_t kl = q + ql < end ? ql : (size_t)(end - q);
        const int rc = parse_option(ds, file, q, kl, out);
        if (rc < 0)
            return rc;
        p = q + kl;
    }
    trim(&d, &dl);
    STOKER_RETURN_IF(dl == 0 || dl >= sizeof out->dset, &ds->err, STOKER_E_INVALID,
                     "%s: STOKER_OPT_H5_FIELDS: field \"%s\": a dataset path of 1 to %zu bytes "
                     "is needed",
                     file, out->name, sizeof out->dset - 1);
    memcpy(out->dset, d, dl);
    out->dset[dl] = '\0';
    return 0;
}

static int parse_spec(stoker_dataset *ds, const char *file, const char *spec, field_spec *out,
                      int32_t *n)
{
    *n = 0;
    const char *p = spec;
    for (;;) {
        const size_t len = strcspn(p, ",");
        STOKER_RETURN_IF(*n == STOKER_MAX_FIELDS, &ds->err, STOKER_E_INVALID,
                         "%s: STOKER_OPT_H5_FIELDS: more than %d fields", file, STOKER_MAX_FIELDS);
        const int rc = parse_entry(ds, file, p, len, &out[*n]);
        if (rc < 0)
            return rc;
        (*n)++;
        if (!p[len])
            return 0;
        p += len + 1;
    }
}

/* What the dataset's type is, in words, for a message. */
static void describe(const stoker__h5 *h, char *buf, size_t cap)
{
    const char *dt = stoker_dtype_name(h->dtype);
    if (h->vlen || h->offs) {
        snprintf(buf, cap, "variable-length %s", dt);
        return;
    }
    int w = snprintf(buf, cap, "fixed-shape %s [", dt);
    for (int d = 1; d < h->rank && w > 0 && (size_t)w < cap; d++)
        w += snprintf(buf + w, cap - (size_t)w, "%s%llu", d > 1 ? ", " : "",
                      (unsigned long long)h->dims[d]);
    if (w > 0 && (size_t)w < cap)
        snprintf(buf + w, cap - (size_t)w, "] rows");
}

/* Field f of the schema from its dataset h: the kind asked, or the one its type gives. */
static int field_from(stoker_dataset *ds, const stoker__h5 *h, const field_spec *sp,
                      stoker__field *f)
{
    const bool var = h->vlen || h->offs;
    const bool bytes = var && stoker_dtype_size(h->dtype) == 1;
    const bool scalar = !var && h->rank == 1;
    int32_t kind = sp->kind;
    if (!kind)
        kind = bytes                                        ? STOKER_FIELD_BYTES
               : var                                        ? STOKER_FIELD_ARRAY
               : scalar && h->dtype == STOKER_DTYPE_INT64   ? STOKER_FIELD_INT64
               : scalar && h->dtype == STOKER_DTYPE_FLOAT32 ? STOKER_FIELD_FLOAT32
                                                            : STOKER_FIELD_RAW;
    const bool fits =
        kind == STOKER_FIELD_JPEG || kind == STOKER_FIELD_PNG || kind == STOKER_FIELD_BYTES ? bytes
        : kind == STOKER_FIELD_ARRAY                                                        ? var
        : kind == STOKER_FIELD_RAW                                                          ? !var
        : kind == STOKER_FIELD_INT64 ? scalar && h->dtype == STOKER_DTYPE_INT64
                                     : scalar && h->dtype == STOKER_DTYPE_FLOAT32;
    char what[128];
    describe(h, what, sizeof what);
    /* a box is a row of 4 float32 (x1, y1, x2, y2): its values come as one variable-length
     * float32 row per sample, 4 a box; a length that is not a whole number of boxes is a
     * corrupt record (the loader's split) */
    STOKER_RETURN_IF(sp->tie == STOKER_TIE_BOXES &&
                         (kind != STOKER_FIELD_ARRAY || !var || h->dtype != STOKER_DTYPE_FLOAT32),
                     &ds->err, STOKER_E_INVALID,
                     "%s: dataset %s (field \"%s\"): boxes_of needs variable-length float32 "
                     "rows, 4 values (x1, y1, x2, y2) a box; the dataset is %s%s%s",
                     h->file, h->name, sp->name, what, sp->kind ? " as kind " : "",
                     sp->kind ? stoker__field_kind_name(kind) : "");
    STOKER_RETURN_IF(!fits, &ds->err, STOKER_E_INVALID,
                     "%s: dataset %s (field \"%s\"): kind %s does not fit its %s; %s", h->file,
                     h->name, sp->name, stoker__field_kind_name(kind), what,
                     kind == STOKER_FIELD_JPEG || kind == STOKER_FIELD_PNG ||
                             kind == STOKER_FIELD_BYTES
                         ? "encoded values are variable-length uint8 rows"
                     : kind == STOKER_FIELD_ARRAY ? "an array's values are variable-length rows"
                     : kind == STOKER_FIELD_RAW   ? "raw values are fixed-shape rows"
                                                  : "a scalar field is a 1-D dataset of its dtype");
    memcpy(f->name, sp->name, sizeof f->name);
    f->kind = kind;
    f->target = -1;
    f->tie = sp->tie;
    f->dtype = kind == STOKER_FIELD_ARRAY || kind == STOKER_FIELD_RAW ? h->dtype : 0;
    f->ndim = kind == STOKER_FIELD_RAW ? h->rank - 1 : 0;
    for (int32_t d = 0; d < f->ndim; d++)
        f->shape[d] = (int64_t)h->dims[d + 1];
    if (sp->tie == STOKER_TIE_BOXES) {
        f->ndim = 1;
        f->shape[0] = 4;
    }
    return 0;
}

/* The variable fields' max from every record's lengths, the payloads' sizes and their sum;
 * each value within the 4 GiB a payload's header holds and the payload within the limit. */
static int fields_sizes(stoker_dataset *ds, h5_fields *F, uint64_t max_size)
{
    stoker__schema *s = &F->schema;
    stoker__dsinfo *m = &ds->info;
    stoker_field_value v[STOKER_MAX_FIELDS];
    for (uint64_t id = 0; id < m->records; id++) {
        field_sizes(F, (int64_t)id, NULL, v);
        for (int32_t i = 0; i < s->n; i++) {
            stoker__field *f = &s->f[i];
            if (!f->variable)
                continue;
            STOKER_RETURN_IF(v[i].size > UINT32_MAX, &ds->err, STOKER_E_LIMIT,
                             "%s: dataset %s (field \"%s\"): record %llu: %llu bytes (a field's "
                             "value is at most 4 GiB)",
                             F->h[i]->file, F->h[i]->name, f->name, (unsigned long long)id,
                             (unsigned long long)v[i].size);
            const uint64_t val = f->kind == STOKER_FIELD_ARRAY ? v[i].size / f->size : v[i].size;
            f->max = val > f->max ? val : f->max;
        }
        const uint64_t len = stoker__schema_payload_size(s, v);
        STOKER_RETURN_IF(len > max_size, &ds->err, STOKER_E_LIMIT,
                         "%s: record %llu: its fields take %llu bytes, above the limit of %llu "
                         "(STOKER_OPT_MAX_RECORD_SIZE)",
                         F->h[0]->file, (unsigned long long)id, (unsigned long long)len,
                         (unsigned long long)max_size);
        m->payload_bytes += len;
        m->max_record = len > m->max_record ? len : m->max_record;
    }
    return 0;
}

/* Opens field i's dataset into F->h[i] and adds it to the schema. */
static int open_field(stoker_dataset *ds, h5_fields *F, int32_t i, const char *path,
                      const stoker_config *cfg, const field_spec *sp)
{
    stoker__h5 *h = F->h[i] = stoker__calloc(1, sizeof *h);
    STOKER_RETURN_IF(!h, &ds->err, -ENOMEM, "%s: out of memory", path);
    char *dset = NULL;
    int rc = stoker__h5_start(ds, h, path, cfg, i > 0 ? F->h[0] : NULL, &dset);
    STOKER_RETURN_IF(rc == 0 && dset, &ds->err, STOKER_E_INVALID,
                     "%s: a dataset in the path (%s) and STOKER_OPT_H5_FIELDS both say what to "
                     "read; name the file alone",
                     h->file, dset);
    stoker__free(dset);
    if (rc < 0)
        return rc;
    h->name = stoker__strdup(sp->dset);
    const size_t shown = strlen(sp->dset) + strlen(sp->name) + sizeof " (field \"\")";
    if (h->name && (h->shown = stoker__malloc(shown)) != NULL)
        snprintf(h->shown, shown, "%s (field \"%s\")", sp->dset, sp->name);
    STOKER_RETURN_IF(!h->shown, &ds->err, -ENOMEM, "%s: out of memory", path);
    /* an int64 "label" field's values are read once: the labels the loader hands over */
    const bool label =
        strcmp(sp->name, "label") == 0 && (sp->kind == 0 || sp->kind == STOKER_FIELD_INT64);
    rc = stoker__h5_open_map(ds, h, cfg, label ? "" : NULL, false, true);
    if (rc < 0)
        return rc;
    STOKER_RETURN_IF(i > 0 && h->records != F->h[0]->records, &ds->err, STOKER_E_FORMAT,
                     "%s: dataset %s (field \"%s\") has %llu rows, dataset %s (field \"%s\") "
                     "%llu; the fields' datasets must be of one length",
                     h->file, h->name, sp->name, (unsigned long long)h->records, F->h[0]->name,
                     F->schema.f[0].name, (unsigned long long)F->h[0]->records);
    if ((rc = field_from(ds, h, sp, &F->schema.f[i])) < 0)
        return rc;
    if (h->labels && F->schema.f[i].kind == STOKER_FIELD_INT64)
        F->label = h;
    if (stoker__h5_mode_slow(h)) {
        const stoker__log log = stoker__cfg_log(cfg);
        stoker__logf(&log, STOKER_LOG_WARN,
                     "%s: dataset %s (field \"%s\") is %s, one record at a time; convert the "
                     "file with `stoker-pack` for full speed",
                     h->file, h->name, sp->name, stoker__h5_mode_slow(h));
    }
    return 0;
}

int stoker__h5_fields_open(stoker_dataset *ds, const char *path, const stoker_config *cfg,
                           const char *spec)
{
    ds->ops = stoker__hdf5_url(path) > 0 ? &FIELDS_REMOTE_OPS : &FIELDS_OPS;
    h5_fields *F = ds->state = stoker__calloc(1, sizeof *F);
    STOKER_RETURN_IF(!F, &ds->err, -ENOMEM, "%s: out of memory", path);
    field_spec specs[STOKER_MAX_FIELDS];
    int32_t n = 0;
    int rc = parse_spec(ds, path, spec, specs, &n);
    for (int32_t i = 0; rc == 0 && i < n; i++) {
        rc = open_field(ds, F, i, path, cfg, &specs[i]);
        F->n = F->h[i] ? i + 1 : i; /* what close frees */
    }
    if (rc < 0)
        return rc;
    F->schema.n = n;
    for (int32_t i = 0; i < n; i++)
        for (int32_t j = 0; j < i && specs[i].tie != STOKER_TIE_NONE; j++)
            if (strcmp(specs[j].name, specs[i].tie_to) == 0)
                F->schema.f[i].target = j;
    for (int32_t i = 0; i < n; i++)
        STOKER_RETURN_IF(specs[i].tie != STOKER_TIE_NONE && F->schema.f[i].target < 0, &ds->err,
                         STOKER_E_INVALID,
                         "%s: STOKER_OPT_H5_FIELDS: field \"%s\": %s \"%s\", which is not an "
                         "earlier field",
                         F->h[0]->file, specs[i].name, stoker__field_tie_name(specs[i].tie),
                         specs[i].tie_to);
    /* the kinds the ties ask for (a mask's, boxes', rows'), as a packed schema's */
    stoker__err e = {0};
    STOKER_RETURN_IF(stoker__schema_finish(&F->schema, &e) < 0, &ds->err, STOKER_E_INVALID,
                     "%s: STOKER_OPT_H5_FIELDS: %s", F->h[0]->file, e.msg);
    stoker__dsinfo *m = &ds->info;
    m->records = F->h[0]->records;
    m->files = 1;
    m->align = 1;
    m->kind = STOKER_FIELD_BYTES; /* the payload as a whole */
    if ((rc = fields_sizes(ds, F, (uint64_t)stoker__cfg_int(cfg, STOKER_OPT_MAX_RECORD_SIZE))) < 0)
        return rc;
    m->schema = &F->schema;
    return 0;
}
