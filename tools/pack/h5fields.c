/* SPDX-License-Identifier: Apache-2.0 */
/* FILE.h5 --h5-field NAME=DATASET[:KIND[:TIE=FIELD]] ... OUT: samples whose fields are an HDF5
 * file's datasets, one --h5-field each, in the order given; sample i holds row i (along axis
 * 0) of every dataset, which must all have the same number of rows. The file is opened once
 * through the library's HDF5 source with STOKER_OPT_H5_FIELDS naming these datasets (no
 * other dataset of the file is read: a "labels" dataset beside them is data like any other),
 * and each sample is read as that source reads it and split into its fields. The field's kind:
 *   - a numeric dataset (fixed-shape rows): raw of its dtype and row shape, or int64 or
 *     float32 when its rows are scalars of that dtype; KIND may say raw, int64 or float32
 *     (which the rows must then be);
 *   - a dataset of encoded rows (variable-length rows, opaque blobs): bytes, or jpeg when its
 *     first row is a JPEG; KIND may say bytes, jpeg or png (checked by decoding like any
 *     image field).
 * TIE is mask_of, boxes_of or rows_of, naming a field before it. The key of sample i is i. */
#include "fields.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[] = {"bytes", "jpeg", "raw", "png", "int64", "float32"};
static const int32_t kind_values[] = {STOKER_FIELD_BYTES, STOKER_FIELD_JPEG,  STOKER_FIELD_RAW,
                                      STOKER_FIELD_PNG,   STOKER_FIELD_INT64, STOKER_FIELD_FLOAT32};

/* One --h5-field, split: name, dataset, kind (0: from the dataset), tie. */
typedef struct h5_spec {
    char buf[1024];
    const char *name, *dataset, *tie_to;
    int32_t kind, tie;
} h5_spec;

static int parse_spec(const char *arg, h5_spec *sp)
{
    memset(sp, 0, sizeof *sp);
    snprintf(sp->buf, sizeof sp->buf, "%s", arg);
    char *eq = strchr(sp->buf, '=');
    if (!eq || eq == sp->buf || !eq[1] || strlen(arg) >= sizeof sp->buf) {
        cli_err("--h5-field %s: expected NAME=DATASET[:KIND[:TIE=FIELD]]", arg);
        return -1;
    }
    *eq = '\0';
    sp->name = sp->buf;
    sp->dataset = eq + 1;
    char *kind = strchr(eq + 1, ':');
    char *tie = kind ? strchr(kind + 1, ':') : NULL;
    if (kind)
        *kind++ = '\0';
    if (tie)
        *tie++ = '\0';
    for (size_t i = 0; kind && i < sizeof kind_names / sizeof *kind_names; i++)
        if (strcmp(kind, kind_names[i]) == 0)
            sp->kind = kind_values[i];
    if (kind && !sp->kind) {
        cli_err("--h5-field %s: KIND '%s' is none of bytes, jpeg, png, raw, int64, float32", arg,
                kind);
        return -1;
    }
    char *to = tie ? strchr(tie, '=') : NULL;
    if (tie) {
        if (to)
            *to++ = '\0';
        if (!to || !*to || stoker_enum_parse(STOKER_ENUM_FIELD_TIE, tie, &sp->tie) < 0 ||
            sp->tie == 0) {
            cli_err("--h5-field %s: expected a tie mask_of=FIELD, boxes_of=FIELD or rows_of=FIELD",
                    arg);
            return -1;
        }
        sp->tie_to = to;
    }
    if (!*sp->dataset) {
        cli_err("--h5-field %s: no dataset named", arg);
        return -1;
    }
    return 0;
}

/* Whether row 0 of field i of ds starts as a JPEG does. */
static bool first_is_jpeg(stoker_dataset *ds, int32_t i)
{
    uint64_t size = 0;
    size_t got = 0;
    stoker_field_value v[STOKER_MAX_FIELDS];
    uint8_t *buf = NULL;
    const bool yes = stoker_dataset_num_records(ds) > 0 &&
                     stoker_dataset_record_info(ds, 0, &size, NULL, NULL) == 0 &&
                     (buf = malloc(size ? size : 1)) != NULL &&
                     stoker_dataset_read(ds, 0, buf, size, &got) == 0 &&
                     stoker_dataset_split_record(ds, 0, buf, got, v) == 0 && v[i].size >= 2 &&
                     ((const uint8_t *)v[i].data)[0] == 0xFF &&
                     ((const uint8_t *)v[i].data)[1] == 0xD8;
    free(buf);
    return yes;
}

/* Field i of ds (its dataset named by sp) as sp asks for it, appended to the schema; 0 or -1
 * after printing. */
static int add_field(const pack_opts *o, const h5_spec *sp, stoker_dataset *ds, int32_t i,
                     pack_schema *sc)
{
    stoker_field_desc d = {.struct_size = sizeof d};
    stoker_dataset_field_desc(ds, i, &d);
    /* the source's kinds as the one-dataset source gives them: numbers (raw) or encoded rows */
    int32_t kind = d.kind, dtype = d.dtype, ndim = d.ndim;
    int64_t shape[STOKER_MAX_DIMS] = {0};
    memcpy(shape, d.shape, sizeof shape);
    if (kind == STOKER_FIELD_INT64 || kind == STOKER_FIELD_FLOAT32) {
        dtype = kind == STOKER_FIELD_INT64 ? STOKER_DTYPE_INT64 : STOKER_DTYPE_FLOAT32;
        kind = STOKER_FIELD_RAW;
        ndim = 0;
    } else if (kind != STOKER_FIELD_RAW) {
        kind = !sp->kind && first_is_jpeg(ds, i) ? STOKER_FIELD_JPEG : STOKER_FIELD_BYTES;
        dtype = ndim = 0;
    }
    const bool numeric = kind == STOKER_FIELD_RAW;
    int32_t want = sp->kind;
    if (!want)
        want = !numeric                                     ? kind
               : ndim == 0 && dtype == STOKER_DTYPE_INT64   ? STOKER_FIELD_INT64
               : ndim == 0 && dtype == STOKER_DTYPE_FLOAT32 ? STOKER_FIELD_FLOAT32
                                                            : STOKER_FIELD_RAW;
    const bool wants_numeric =
        want == STOKER_FIELD_RAW || want == STOKER_FIELD_INT64 || want == STOKER_FIELD_FLOAT32;
    const int32_t need = want == STOKER_FIELD_INT64     ? STOKER_DTYPE_INT64
                         : want == STOKER_FIELD_FLOAT32 ? STOKER_DTYPE_FLOAT32
                                                        : dtype;
    char bad[160] = "";
    if (wants_numeric != numeric)
        snprintf(bad, sizeof bad, "%s",
                 numeric ? "holds numbers (fixed-shape rows): its kind is raw, int64 or float32"
                         : "holds encoded rows (variable-length bytes): its kind is bytes, jpeg "
                           "or png");
    else if (want != STOKER_FIELD_RAW && numeric && (ndim != 0 || dtype != need))
        snprintf(bad, sizeof bad, "rows are not scalars of %s, the dtype of %s",
                 stoker_dtype_name(need), want == STOKER_FIELD_INT64 ? "int64" : "float32");
    if (bad[0]) {
        cli_err("%s: --h5-field %s: dataset %s: %s (found %s%s)", o->src, sp->name, sp->dataset,
                bad, numeric ? stoker_dtype_name(dtype) : "encoded rows",
                numeric && ndim ? ", rows of several values" : "");
        return -1;
    }
    pack_schema_add(sc, sp->name, want, need, want == STOKER_FIELD_RAW ? ndim : 0, shape, sp->tie,
                    sp->tie_to);
    return 0;
}

/* Opens the file with STOKER_OPT_H5_FIELDS naming every field's dataset; NULL after printing
 * why. The kinds and ties are the tool's (add_field, the writer), not the source's. */
static stoker_dataset *open_fields(const pack_opts *o, const h5_spec *sp, int n)
{
    char spec[STOKER_MAX_FIELDS * 1100] = "";
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        if (strpbrk(sp[i].name, ",:") || strchr(sp[i].dataset, ',')) {
            cli_err("--h5-field %s=%s: a field name holds no ',' or ':', a dataset no ','",
                    sp[i].name, sp[i].dataset);
            return NULL;
        }
        at += (size_t)snprintf(spec + at, sizeof spec - at, "%s%s=%s%s", i ? "," : "", sp[i].name,
                               sp[i].dataset[0] == '/' ? "" : "/", sp[i].dataset);
    }
    stoker_config *cfg = NULL;
    stoker_dataset *ds = NULL;
    int rc = stoker_config_create(&cfg);
    if (rc == 0)
        rc = stoker_config_set_string(cfg, STOKER_OPT_H5_FIELDS, spec);
    if (rc == 0)
        rc = stoker_dataset_open(&ds, o->src, cfg);
    stoker_config_destroy(cfg);
    if (rc == STOKER_E_UNSUPPORTED && !stoker_capability_get(STOKER_CAP_HDF5)) {
        cli_err("%s: this build of the library has no HDF5 support", o->src);
    } else if (rc < 0) {
        /* the library's message as it is: it names the file, and the field and its dataset
         * where one is at fault */
        const char *msg = ds ? stoker_dataset_errmsg(ds) : "";
        if (*msg)
            cli_err("%s", msg);
        else
            cli_err("%s: %s", o->src, stoker_strerror(rc));
    }
    if (rc < 0) {
        stoker_dataset_close(ds);
        return NULL;
    }
    return ds;
}

int pack_h5_fields_load(const pack_opts *o, pack_samples *ss)
{
    ss->source = "HDF5 file, a dataset per field";
    ss->schema_from = o->src;
    if (strchr(o->src, ':')) {
        cli_err("%s: with --h5-field, name the file alone (each field names its dataset)", o->src);
        return PACK_USAGE;
    }
    h5_spec sp[STOKER_MAX_FIELDS];
    for (int i = 0; i < o->n_h5_fields; i++) {
        if (parse_spec(o->h5_fields[i], &sp[i]) < 0)
            return PACK_USAGE;
        bool again = false;
        for (int j = 0; j < i; j++)
            again = again || strcmp(sp[j].name, sp[i].name) == 0;
        if (again || strlen(sp[i].name) > STOKER_FIELD_NAME_MAX) {
            cli_err("--h5-field %s: a field name is unique and at most %d bytes", sp[i].name,
                    STOKER_FIELD_NAME_MAX);
            return PACK_FAIL;
        }
    }
    stoker_dataset *ds = ss->sources[0] = open_fields(o, sp, o->n_h5_fields);
    if (!ds)
        return PACK_FAIL;
    for (int i = 0; i < o->n_h5_fields; i++)
        if (add_field(o, &sp[i], ds, i, &ss->schema) < 0)
            return PACK_FAIL;
    const int64_t rows = stoker_dataset_num_records(ds);
    for (int64_t r = 0; r < rows; r++) {
        char where[4200], key[32];
        snprintf(where, sizeof where, "%s: record %lld", o->src, (long long)r);
        snprintf(key, sizeof key, "%lld", (long long)r);
        pack_sample *s = pack_samples_add(ss, where, key);
        if (!s) {
            cli_err("out of memory for %lld samples", (long long)rows);
            return PACK_FAIL;
        }
        uint64_t size = 0; /* the sample's payload, counted once (for the alignment) */
        stoker_dataset_record_info(ds, r, &size, NULL, NULL);
        for (int32_t f = 0; f < ss->schema.n; f++)
            s->v[f] = (pack_value){.ds = ds,
                                   .record = r,
                                   .field = f,
                                   .size = f == 0 ? size : 0,
                                   .set = true,
                                   .offset = -1};
    }
    return 0;
}
