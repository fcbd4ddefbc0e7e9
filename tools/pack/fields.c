/* SPDX-License-Identifier: Apache-2.0 */
/* Samples of several named fields (fields.h): the schema's dict form, values from JSON, and
 * the pass that reads, checks and adds the samples.
 *
 * The pass works in chunks of samples in storage order: worker threads read and check the
 * samples of a chunk (any order), then the main thread adds them in order, so that the output
 * is the same whatever --jobs is. A chunk's buffers are freed before the next one is read. */
#include "fields.h"
#include "image.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_VALUE_BYTES (1ull << 30) /* the writer's default record limit */

/* ---- the schema ---- */

void pack_schema_add(pack_schema *s, const char *name, int32_t kind, int32_t dtype, int32_t ndim,
                     const int64_t *shape, int32_t tie, const char *tie_to)
{
    const int32_t i = s->n++;
    snprintf(s->names[i], sizeof s->names[i], "%s", name);
    snprintf(s->ties[i], sizeof s->ties[i], "%s", tie_to ? tie_to : "");
    stoker_field_desc *f = &s->f[i];
    *f = (stoker_field_desc){.struct_size = sizeof *f,
                             .kind = kind,
                             .name = s->names[i],
                             .dtype = dtype,
                             .ndim = ndim,
                             .tie = tie,
                             .tie_to = tie_to ? s->ties[i] : NULL};
    for (int32_t d = 0; d < ndim && d < STOKER_MAX_DIMS; d++)
        f->shape[d] = shape[d];
}

int32_t pack_schema_find(const pack_schema *s, const char *name)
{
    for (int32_t i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0)
            return i;
    return -1;
}

static const struct {
    const char *name;
    int32_t kind;
} kinds[] = {
    {"jpeg", STOKER_FIELD_JPEG},       {"png", STOKER_FIELD_PNG},     {"bytes", STOKER_FIELD_BYTES},
    {"raw", STOKER_FIELD_RAW},         {"array", STOKER_FIELD_ARRAY}, {"int64", STOKER_FIELD_INT64},
    {"float32", STOKER_FIELD_FLOAT32},
};
static const char *const tie_names[] = {NULL, "mask_of", "boxes_of", "rows_of"};

static int32_t kind_parse(const char *s)
{
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(kinds[i].name, s) == 0)
            return kinds[i].kind;
    return 0;
}

/* The shape of a raw or array field: a list of non-negative integers, an array's first
 * element null (its rows' count varies). */
static int parse_shape(const json_value *sh, int32_t kind, const char *where, const char *name,
                       int32_t *ndim, int64_t *shape)
{
    const bool array = kind == STOKER_FIELD_ARRAY;
    if (!sh || sh->type != JSON_ARRAY || (array && sh->n == 0) ||
        sh->n - (array ? 1 : 0) > STOKER_MAX_DIMS || (array && sh->items[0].type != JSON_NULL)) {
        cli_err("%s: field \"%s\": \"shape\" must be a list of at most %d sizes%s", where, name,
                STOKER_MAX_DIMS, array ? ", the first null (the rows' count varies)" : "");
        return -1;
    }
    *ndim = (int32_t)sh->n - (array ? 1 : 0);
    for (int32_t d = 0; d < *ndim; d++) {
        const json_value *e = &sh->items[d + (array ? 1 : 0)];
        if (e->type != JSON_NUMBER || !e->is_int || e->integer < 0) {
            cli_err("%s: field \"%s\": shape[%d] must be a size (an integer >= 0)", where, name,
                    d + (array ? 1 : 0));
            return -1;
        }
        shape[d] = e->integer;
    }
    return 0;
}

int pack_schema_parse_field(const char *name, const json_value *v, const char *where,
                            pack_schema *s)
{
    int32_t kind = 0, dtype = 0, ndim = 0, tie = 0;
    int64_t shape[STOKER_MAX_DIMS] = {0};
    const char *tie_to = NULL;
    const json_value *k = v->type == JSON_OBJECT ? json_get(v, "kind") : v;
    if (!k || k->type != JSON_STRING || !(kind = kind_parse(k->string))) {
        cli_err("%s: field \"%s\": the kind must be one of jpeg, png, bytes, raw, array, int64, "
                "float32 (a name, or an object's \"kind\")",
                where, name);
        return -1;
    }
    for (size_t i = 0; v->type == JSON_OBJECT && i < v->n; i++) {
        const char *key = v->keys[i];
        const json_value *m = &v->items[i];
        if (strcmp(key, "kind") == 0)
            continue;
        int32_t t = 0;
        for (int32_t j = 1; j < 4; j++)
            if (strcmp(key, tie_names[j]) == 0)
                t = j;
        if (t) {
            if (tie || m->type != JSON_STRING) {
                cli_err("%s: field \"%s\": one tie (mask_of, boxes_of or rows_of), naming a field",
                        where, name);
                return -1;
            }
            tie = t;
            tie_to = m->string;
        } else if (strcmp(key, "dtype") == 0 &&
                   (kind == STOKER_FIELD_RAW || kind == STOKER_FIELD_ARRAY)) {
            if (m->type != JSON_STRING ||
                stoker_enum_parse(STOKER_ENUM_DTYPE, m->string, &dtype) < 0) {
                cli_err("%s: field \"%s\": \"dtype\" must be a NumPy dtype name (uint8 .. bool)",
                        where, name);
                return -1;
            }
        } else if (strcmp(key, "shape") == 0 &&
                   (kind == STOKER_FIELD_RAW || kind == STOKER_FIELD_ARRAY)) {
            if (parse_shape(m, kind, where, name, &ndim, shape) < 0)
                return -1;
        } else {
            cli_err("%s: field \"%s\": unknown member \"%s\" for a %s field", where, name, key,
                    k->string);
            return -1;
        }
    }
    if ((kind == STOKER_FIELD_RAW || kind == STOKER_FIELD_ARRAY) &&
        (!json_get(v, "dtype") || !json_get(v, "shape"))) {
        cli_err("%s: field \"%s\": a %s field needs \"dtype\" and \"shape\"", where, name,
                k->string);
        return -1;
    }
    if (kind == STOKER_FIELD_INT64)
        dtype = STOKER_DTYPE_INT64;
    if (kind == STOKER_FIELD_FLOAT32)
        dtype = STOKER_DTYPE_FLOAT32;
    if (tie_to && pack_schema_find(s, tie_to) < 0) {
        cli_err("%s: field \"%s\": %s names \"%s\", which is not a field before it", where, name,
                tie_names[tie], tie_to);
        return -1;
    }
    if (strlen(name) > STOKER_FIELD_NAME_MAX ||
        (tie_to && strlen(tie_to) > STOKER_FIELD_NAME_MAX)) {
        cli_err("%s: field \"%s\": a name is at most %d bytes", where, name, STOKER_FIELD_NAME_MAX);
        return -1;
    }
    pack_schema_add(s, name, kind, dtype, ndim, shape, tie, tie_to);
    return 0;
}

int pack_schema_parse(const json_value *v, const char *where, pack_schema *s)
{
    memset(s, 0, sizeof *s);
    if (v->type != JSON_OBJECT || v->n == 0 || v->n > STOKER_MAX_FIELDS) {
        cli_err("%s: a schema is an object of 1 to %d fields ({\"image\": \"jpeg\", ...}), not "
                "%s",
                where, STOKER_MAX_FIELDS,
                v->type == JSON_OBJECT ? "this many" : json_type_name(v->type));
        return -1;
    }
    for (size_t i = 0; i < v->n; i++)
        if (pack_schema_parse_field(v->keys[i], &v->items[i], where, s) < 0)
            return -1;
    return 0;
}

/* ---- values ---- */

int pack_value_bytes(pack_value *out, const void *data, size_t size)
{
    out->data = malloc(size ? size : 1);
    if (!out->data)
        return -1;
    if (size)
        memcpy(out->data, data, size);
    out->size = size;
    out->offset = -1;
    out->set = true;
    return 0;
}

int pack_value_file(pack_value *out, const char *dir, const char *rel)
{
    const bool join = dir && *dir && rel[0] != '/';
    const size_t n = (join ? strlen(dir) + 1 : 0) + strlen(rel) + 1;
    out->file = malloc(n);
    if (!out->file)
        return -1;
    snprintf(out->file, n, "%s%s%s", join ? dir : "", join ? "/" : "", rel);
    struct stat st;
    out->size = stat(out->file, &st) == 0 && S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
    out->offset = -1;
    out->set = true;
    return 0;
}

/* IEEE half and bfloat16 from float, rounded to nearest even. */
static uint16_t to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
    uint32_t mant = x & 0x7fffffu;
    if (exp >= 31)
        return (uint16_t)(sign | 0x7c00u); /* overflow (checked before) */
    if (exp <= 0) {
        if (exp < -10)
            return (uint16_t)sign;
        mant |= 0x800000u;
        const uint32_t shift = (uint32_t)(14 - exp);
        uint32_t h = mant >> shift;
        const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)exp << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
        h++; /* may carry into the exponent: still right */
    return (uint16_t)(sign | h);
}

static uint16_t to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* Stores the JSON number (or boolean) e as one element of dtype at p; NULL, or why not. */
static const char *store(int32_t dtype, const json_value *e, uint8_t *p)
{
    if (dtype == STOKER_DTYPE_BOOL) {
        if (e->type != JSON_BOOL)
            return "expected true or false";
        *p = e->boolean;
        return NULL;
    }
    if (e->type != JSON_NUMBER)
        return "expected a number";
    const double d = e->number;
    const int64_t i = e->integer;
    switch (dtype) {
#define INT_CASE(DT, T, LO, HI)                                                                    \
    case DT: {                                                                                     \
        if (!e->is_int)                                                                            \
            return "expected an integer";                                                          \
        if (i < (int64_t)(LO) || (uint64_t)i > (uint64_t)(HI))                                     \
            return "out of the dtype's range";                                                     \
        const T t = (T)i;                                                                          \
        memcpy(p, &t, sizeof t);                                                                   \
        return NULL;                                                                               \
    }
        INT_CASE(STOKER_DTYPE_UINT8, uint8_t, 0, UINT8_MAX)
        INT_CASE(STOKER_DTYPE_INT8, int8_t, INT8_MIN, INT8_MAX)
        INT_CASE(STOKER_DTYPE_UINT16, uint16_t, 0, UINT16_MAX)
        INT_CASE(STOKER_DTYPE_INT16, int16_t, INT16_MIN, INT16_MAX)
        INT_CASE(STOKER_DTYPE_UINT32, uint32_t, 0, UINT32_MAX)
        INT_CASE(STOKER_DTYPE_INT32, int32_t, INT32_MIN, INT32_MAX)
        INT_CASE(STOKER_DTYPE_UINT64, uint64_t, 0, INT64_MAX)
#undef INT_CASE
    case STOKER_DTYPE_INT64:
        if (!e->is_int)
            return "expected an integer";
        memcpy(p, &i, 8);
        return NULL;
    case STOKER_DTYPE_FLOAT64: memcpy(p, &d, 8); return NULL;
    case STOKER_DTYPE_FLOAT32:
    case STOKER_DTYPE_FLOAT16:
    case STOKER_DTYPE_BFLOAT16: {
        const double max = dtype == STOKER_DTYPE_FLOAT16 ? 65504.0 : FLT_MAX;
        if (fabs(d) > max)
            return "out of the dtype's range";
        const float f = (float)d;
        const uint16_t h = dtype == STOKER_DTYPE_FLOAT16 ? to_half(f) : to_bf16(f);
        if (dtype == STOKER_DTYPE_FLOAT32)
            memcpy(p, &f, 4);
        else
            memcpy(p, &h, 2);
        return NULL;
    }
    default: return "an unknown dtype";
    }
}

/* Walks nested lists of `shape[0..ndim)` and stores their elements in order. */
static int fill(const json_value *v, int32_t dtype, size_t item, int32_t ndim, const int64_t *shape,
                uint8_t **p, char *where, size_t wcap, char *why, size_t cap)
{
    if (ndim == 0) {
        const char *bad = store(dtype, v, *p);
        if (bad) {
            snprintf(why, cap, "%s%s%s (%s)", where[0] ? "element " : "", where,
                     where[0] ? ":" : "", bad);
            return -1;
        }
        *p += item;
        return 0;
    }
    if (v->type != JSON_ARRAY || (int64_t)v->n != shape[0]) {
        snprintf(why, cap, "%s%s expected a list of %lld, found %s", where[0] ? "at " : "", where,
                 (long long)shape[0],
                 v->type == JSON_ARRAY ? "a list of another length" : json_type_name(v->type));
        return -1;
    }
    const size_t len = strlen(where);
    for (size_t i = 0; i < v->n; i++) {
        snprintf(where + len, wcap - len, "[%zu]", i);
        if (fill(&v->items[i], dtype, item, ndim - 1, shape + 1, p, where, wcap, why, cap) < 0)
            return -1;
    }
    where[len] = '\0';
    return 0;
}

int pack_value_from_json(const stoker_field_desc *f, const json_value *v, pack_value *out,
                         char *why, size_t cap)
{
    const size_t item = f->kind == STOKER_FIELD_INT64     ? 8
                        : f->kind == STOKER_FIELD_FLOAT32 ? 4
                                                          : stoker_dtype_size(f->dtype);
    if (f->kind == STOKER_FIELD_BYTES) {
        if (v->type != JSON_STRING) {
            snprintf(why, cap, "expected a string (or {\"path\": FILE}), found %s",
                     json_type_name(v->type));
            return -1;
        }
        return pack_value_bytes(out, v->string, strlen(v->string)) < 0
                   ? (snprintf(why, cap, "out of memory"), -1)
                   : 0;
    }
    int32_t ndim = 0;
    int64_t shape[STOKER_MAX_DIMS + 1] = {0};
    uint64_t count = 1;
    if (f->kind == STOKER_FIELD_RAW || f->kind == STOKER_FIELD_ARRAY) {
        const bool array = f->kind == STOKER_FIELD_ARRAY;
        if (array && v->type != JSON_ARRAY) {
            snprintf(why, cap, "expected a list of rows, found %s", json_type_name(v->type));
            return -1;
        }
        if (array)
            shape[ndim++] = (int64_t)v->n;
        for (int32_t d = 0; d < f->ndim; d++)
            shape[ndim++] = f->shape[d];
        for (int32_t d = 0; d < ndim; d++)
            count *= (uint64_t)shape[d];
    }
    if (count * item > MAX_VALUE_BYTES) {
        snprintf(why, cap, "larger than 1 GiB");
        return -1;
    }
    const uint64_t bytes = count * item;
    uint8_t *buf = malloc(bytes ? bytes : 1), *p = buf;
    char where[256] = "";
    if (!buf) {
        snprintf(why, cap, "out of memory");
        return -1;
    }
    const int32_t dtype = f->kind == STOKER_FIELD_INT64     ? STOKER_DTYPE_INT64
                          : f->kind == STOKER_FIELD_FLOAT32 ? STOKER_DTYPE_FLOAT32
                                                            : f->dtype;
    if (fill(v, dtype, item, ndim, shape, &p, where, sizeof where, why, cap) < 0) {
        free(buf);
        return -1;
    }
    out->data = buf;
    out->size = count * item;
    out->offset = -1;
    out->set = true;
    return 0;
}

char *pack_read_text(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t n = 0, cap = 0;
    if (!f)
        return NULL;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 1 << 16;
            char *b = realloc(buf, cap + 1);
            if (!b) {
                free(buf);
                fclose(f);
                errno = ENOMEM;
                return NULL;
            }
            buf = b;
        }
        const size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0)
            break;
    }
    const int err = ferror(f) ? errno : 0;
    fclose(f);
    if (err) {
        free(buf);
        errno = err;
        return NULL;
    }
    buf[n] = '\0';
    *size = n;
    return buf;
}

int pack_read_json(const char *path, const char *what, json_value *v)
{
    size_t size = 0;
    char *text = pack_read_text(path, &size);
    if (!text) {
        cli_err("%s: cannot read the %s: %s", path, what, strerror(errno));
        return -1;
    }
    char msg[256];
    const int rc = json_parse(text, size, v, msg, sizeof msg);
    free(text);
    if (rc < 0)
        cli_err("%s: the %s is not JSON: %s", path, what, msg);
    return rc;
}

/* ---- the list of samples ---- */

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

pack_sample *pack_samples_add(pack_samples *ss, const char *where, const char *key)
{
    if (ss->n == ss->cap) {
        const size_t cap = ss->cap ? ss->cap * 2 : 256;
        pack_sample *s = realloc(ss->s, cap * sizeof *s);
        if (!s)
            return NULL;
        ss->s = s;
        ss->cap = cap;
    }
    pack_sample *s = &ss->s[ss->n];
    memset(s, 0, sizeof *s);
    s->where = dup_or_null(where);
    s->key = dup_or_null(key);
    if (!s->where || (key && !s->key)) {
        free(s->where);
        free(s->key);
        return NULL;
    }
    ss->n++;
    return s;
}

static void sample_free(pack_sample *s)
{
    for (int32_t i = 0; i < STOKER_MAX_FIELDS; i++) {
        free(s->v[i].data);
        free(s->v[i].file);
        free(s->v[i].member);
    }
    free(s->where);
    free(s->key);
}

void pack_samples_free(pack_samples *ss)
{
    for (size_t i = 0; i < ss->n; i++)
        sample_free(&ss->s[i]);
    free(ss->s);
    free(ss->schema_from_owned);
    for (int32_t i = 0; i < STOKER_MAX_FIELDS; i++)
        stoker_dataset_close(ss->sources[i]);
    pack_skips_free(&ss->bad);
    memset(ss, 0, sizeof *ss);
}

int pack_samples_bad(const pack_opts *o, pack_samples *ss, const char *where, const char *why)
{
    if (ss->n > 0 && strcmp(ss->s[ss->n - 1].where, where) == 0)
        sample_free(&ss->s[--ss->n]);
    if (!o->skip_bad) {
        cli_err("%s: %s (no output written; --skip-bad leaves such samples out)", where, why);
        return PACK_FAIL;
    }
    pack_skips_add(&ss->bad, where, why);
    return 0;
}

/* ---- reading and checking ---- */

typedef struct loaded {
    uint8_t *buf[STOKER_MAX_FIELDS]; /* values read from files (owned) */
    uint8_t *rec;                    /* the data set record the values of v->ds split (owned) */
    stoker_field_value split[STOKER_MAX_FIELDS];
    stoker_field_value val[STOKER_MAX_FIELDS];
    bool bad;
    char reason[1024];
} loaded;

/* Reads `size` bytes at `offset` of `path` (the whole file when offset < 0). */
static uint8_t *read_value(const char *path, int64_t offset, uint64_t size, uint64_t *got,
                           char *why, size_t cap)
{
    struct stat st;
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(why, cap, "%s: cannot read: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    const uint64_t n = offset < 0 ? (uint64_t)st.st_size : size;
    const char *bad = !S_ISREG(st.st_mode)   ? "not a regular file"
                      : n > MAX_VALUE_BYTES  ? "larger than 1 GiB"
                      : offset < 0 && n == 0 ? "empty file (0 bytes)"
                                             : NULL;
    uint8_t *buf = bad ? NULL : malloc(n ? n : 1);
    if (!bad && !buf)
        bad = "out of memory";
    uint64_t done = 0;
    while (!bad && done < n) {
        const ssize_t r = pread(fd, buf + done, n - done, (offset < 0 ? 0 : offset) + (off_t)done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            bad = r < 0 ? strerror(errno) : "file shrank while being read";
        else
            done += (uint64_t)r;
    }
    close(fd);
    if (bad) {
        snprintf(why, cap, "%s: %s", path, bad);
        free(buf);
        return NULL;
    }
    *got = n;
    return buf;
}

/* Reads record `id` of a data set (an HDF5 dataset's row); NULL with why on failure. */
static uint8_t *read_record(stoker_dataset *ds, int64_t id, uint64_t *got, char *why, size_t cap)
{
    uint64_t size = 0;
    size_t n = 0;
    uint8_t *buf = NULL;
    if (stoker_dataset_record_info(ds, id, &size, NULL, NULL) < 0 || size > MAX_VALUE_BYTES ||
        !(buf = malloc(size ? size : 1)) || stoker_dataset_read(ds, id, buf, size, &n) < 0) {
        snprintf(why, cap, "%s",
                 size > MAX_VALUE_BYTES ? "larger than 1 GiB"
                 : buf || size == 0     ? stoker_dataset_errmsg(ds)
                                        : "out of memory");
        free(buf);
        return NULL;
    }
    *got = n;
    return buf;
}

/* Checks an image field's bytes as stoker-pack checks JPEG files: decoded whole unless
 * --no-validate (then the writer reads the header). NULL, or why not into why. */
static bool check_image(const pack_opts *o, const stoker_field_desc *f, const uint8_t *data,
                        size_t size, char *why, size_t cap)
{
    char msg[512];
    if (f->kind == STOKER_FIELD_JPEG) {
        int32_t kind = 0;
        const int rc = pack_image_inspect(data, size, o->validate ? PACK_IMAGE_DECODE : 0, 0, &kind,
                                          NULL, NULL, NULL, msg, sizeof msg);
        if (rc == 0)
            return true;
        if (rc == STOKER_E_FORMAT && kind == PACK_IMAGE_PNG)
            snprintf(why, cap, "a PNG, not a JPEG (the field is jpeg)");
        else
            snprintf(why, cap, "%s%s", rc == STOKER_E_FORMAT ? "not a JPEG: " : "", msg);
        return false;
    }
    if (!o->validate)
        return true;
    if (pack_png_check(data, size, f->tie == STOKER_TIE_MASK, 0, NULL, NULL, msg, sizeof msg) == 0)
        return true;
    snprintf(why, cap, "%s", msg);
    return false;
}

static void load(const pack_opts *o, const pack_schema *sc, const pack_sample *s, loaded *l)
{
    char why[768];
    for (int32_t i = 0; i < sc->n && !l->bad; i++) {
        const stoker_field_desc *f = &sc->f[i];
        const pack_value *v = &s->v[i];
        why[0] = '\0';
        if (!v->set) {
            snprintf(why, sizeof why, "missing");
        } else if (v->ds) {
            uint64_t got = 0;
            if (!l->rec &&
                (l->rec = read_record(v->ds, v->record, &got, why, sizeof why)) != NULL &&
                stoker_dataset_split_record(v->ds, v->record, l->rec, got, l->split) < 0)
                snprintf(why, sizeof why, "%s", stoker_dataset_errmsg(v->ds));
            if (!why[0])
                l->val[i] = l->split[v->field];
        } else if (v->file) {
            uint64_t got = 0;
            l->buf[i] = read_value(v->file, v->offset, v->size, &got, why, sizeof why);
            l->val[i] = (stoker_field_value){l->buf[i], got};
        } else {
            l->val[i] = (stoker_field_value){v->data, v->size};
        }
        const bool image = f->kind == STOKER_FIELD_JPEG || f->kind == STOKER_FIELD_PNG;
        if (!why[0] && image) {
            char msg[640];
            if (!check_image(o, f, l->val[i].data, (size_t)l->val[i].size, msg, sizeof msg)) {
                const char *what = v->member ? v->member : v->file;
                snprintf(why, sizeof why, "%s%s%s%s%s", v->member ? "member '" : "",
                         what ? what : "", v->member ? "'" : "", what ? ": " : "", msg);
            }
        }
        if (why[0]) {
            l->bad = true;
            snprintf(l->reason, sizeof l->reason, "field \"%s\": %s", f->name, why);
        }
    }
}

static void unload(loaded *l)
{
    for (int32_t i = 0; i < STOKER_MAX_FIELDS; i++)
        free(l->buf[i]);
    free(l->rec);
    memset(l, 0, sizeof *l);
}

typedef struct chunk {
    const pack_opts *o;
    const pack_samples *ss;
    const size_t *order;
    size_t first, count;
    loaded *l;
    atomic_size_t next;
} chunk;

static void *chunk_worker(void *arg)
{
    chunk *c = arg;
    for (size_t i; !pack_interrupted && (i = atomic_fetch_add(&c->next, 1)) < c->count;)
        load(c->o, &c->ss->schema, &c->ss->s[c->order[c->first + i]], &c->l[i]);
    return NULL;
}

/* Reads and checks the chunk's samples on `jobs` threads (SIGINT/SIGTERM blocked in them, so
 * only the main thread takes them). */
static void load_chunk(chunk *c, int jobs)
{
    pthread_t t[64];
    const int n = jobs < 64 ? jobs : 64;
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int started = 0;
    while (started < n && pthread_create(&t[started], NULL, chunk_worker, c) == 0)
        started++;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    chunk_worker(c); /* the main thread too; and alone if no thread started */
    for (int i = 0; i < started; i++)
        pthread_join(t[i], NULL);
}

/* Adds (or leaves out, with --skip-bad) one loaded sample; 0 or an exit code. */
static int add_one(const pack_opts *o, const pack_samples *ss, const pack_sample *s,
                   const loaded *l, stoker_writer *w, pack_result *res)
{
    char why[1200];
    if (!l->bad) {
        const int rc = stoker_writer_add_sample(w, l->val, ss->schema.n, s->key);
        if (rc == STOKER_E_CANCELED || pack_interrupted)
            return PACK_INTERRUPTED;
        if (rc == 0) {
            res->records++;
            for (int32_t i = 0; i < ss->schema.n; i++)
                res->bytes += (int64_t)l->val[i].size;
            return 0;
        }
        if (rc != STOKER_E_INVALID) {
            cli_err("%s: %s", s->where, stoker_writer_errmsg(w));
            return PACK_FAIL;
        }
        snprintf(why, sizeof why, "%s", stoker_writer_errmsg(w));
    } else {
        snprintf(why, sizeof why, "%s", l->reason);
    }
    if (!o->skip_bad) {
        cli_err("%s: %s (no output written; --skip-bad leaves such samples out)", s->where, why);
        return PACK_FAIL;
    }
    pack_skips_add(&res->skips, s->where, why);
    return 0;
}

int pack_samples_write(const pack_opts *o, const pack_samples *ss, const size_t *order,
                       stoker_writer *w, pack_result *res)
{
    for (size_t i = 0; i < ss->bad.n; i++) { /* left out while listing: the line as it is */
        pack_skips_add(&res->skips, ss->bad.lines[i], "");
        char *line = res->skips.lines[res->skips.n - 1];
        line[strlen(line) - 2] = '\0'; /* the ": " of an empty reason */
    }
    const size_t per = (size_t)o->jobs * 8 + 8;
    chunk *c = calloc(1, sizeof *c);
    loaded *l = calloc(per, sizeof *l);
    if (!c || !l) {
        free(c);
        free(l);
        cli_err("out of memory");
        return PACK_FAIL;
    }
    pack_progress prog;
    pack_progress_init(&prog, (int64_t)ss->n, o->quiet, "samples");
    int rc = 0;
    for (size_t first = 0; rc == 0 && first < ss->n; first += per) {
        c->o = o;
        c->ss = ss;
        c->order = order;
        c->first = first;
        c->count = ss->n - first < per ? ss->n - first : per;
        c->l = l;
        atomic_store(&c->next, 0);
        load_chunk(c, o->jobs - 1);
        for (size_t i = 0; i < c->count; i++) {
            if (rc == 0)
                rc = pack_interrupted ? PACK_INTERRUPTED
                                      : add_one(o, ss, &ss->s[order[first + i]], &l[i], w, res);
            unload(&l[i]);
        }
        pack_progress_update(&prog, (int64_t)(first + c->count), res->records, res->bytes);
    }
    pack_progress_end(&prog);
    free(l);
    free(c);
    return rc;
}
