/* SPDX-License-Identifier: Apache-2.0 */
/* FILE.h5 --h5-field NAME=DATASET[:KIND[:TIE=FIELD]] ... OUT: samples whose fields are an HDF5
 * file's datasets, one --h5-field each, in the order given; sample i holds row i (along axis
 * 0) of every dataset, which must all have the same number of rows. Each dataset is opened
 * through the library's HDF5 source ("FILE.h5:/DATASET"), as the single-dataset source is
 * (h5.c), and its rows are read as that source reads records. The field's kind:
 *   - a numeric dataset (fixed-shape rows): raw of its dtype and row shape, or int64 or
 *     float32 when its rows are scalars of that dtype; KIND may say raw, int64 or float32
 *     (which the rows must then be);
 *   - a dataset of encoded rows (variable-length uint8, opaque blobs): bytes, or jpeg when
 *     the source finds JPEGs in it; KIND may say bytes, jpeg or png (checked by decoding
 *     like any image field).
 * TIE is mask_of, boxes_of or rows_of, naming a field before it. The key of sample i is i.
 * The HDF5 source reads the dataset "labels" beside each dataset it opens when there is one:
 * such a dataset must then hold one integer per row of every field's dataset. */
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

/* The field of dataset ds as sp asks for it, appended to the schema; 0 or -1 after printing. */
static int add_field(const pack_opts *o, const h5_spec *sp, stoker_dataset *ds, pack_schema *sc)
{
    int32_t kind = 0, dtype = 0, ndim = 0;
    int64_t shape[STOKER_MAX_DIMS] = {0};
    stoker_dataset_field(ds, &kind, &dtype, &ndim, shape);
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
    if (strlen(sp->name) > STOKER_FIELD_NAME_MAX || pack_schema_find(sc, sp->name) >= 0) {
        cli_err("--h5-field %s: a field name is unique and at most %d bytes", sp->name,
                STOKER_FIELD_NAME_MAX);
        return -1;
    }
    pack_schema_add(sc, sp->name, want, need, want == STOKER_FIELD_RAW ? ndim : 0, shape, sp->tie,
                    sp->tie_to);
    return 0;
}

/* Opens FILE:DATASET as a data set of its own; NULL after printing why. */
static stoker_dataset *open_dataset(const pack_opts *o, const h5_spec *sp)
{
    char path[4200];
    snprintf(path, sizeof path, "%s:%s%s", o->src, sp->dataset[0] == '/' ? "" : "/", sp->dataset);
    stoker_dataset *ds = NULL;
    const int rc = stoker_dataset_open(&ds, path, NULL);
    if (rc == STOKER_E_UNSUPPORTED && !stoker_capability_get(STOKER_CAP_HDF5))
        cli_err("%s: this build of the library has no HDF5 support", o->src);
    else if (rc < 0)
        cli_err("%s: --h5-field %s: %s", o->src, sp->name,
                ds ? stoker_dataset_errmsg(ds) : "out of memory");
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
    int64_t rows = -1;
    char first[1024] = "";
    for (int i = 0; i < o->n_h5_fields; i++) {
        h5_spec sp;
        if (parse_spec(o->h5_fields[i], &sp) < 0)
            return PACK_USAGE;
        stoker_dataset *ds = open_dataset(o, &sp);
        if (!ds)
            return PACK_FAIL;
        ss->sources[i] = ds;
        if (add_field(o, &sp, ds, &ss->schema) < 0)
            return PACK_FAIL;
        const int64_t n = stoker_dataset_num_records(ds);
        if (rows >= 0 && n != rows) {
            cli_err("%s: dataset %s has %lld rows, %s has %lld: the fields of a sample are rows "
                    "of the same index",
                    o->src, sp.dataset, (long long)n, first, (long long)rows);
            return PACK_FAIL;
        }
        rows = n;
        if (!first[0])
            snprintf(first, sizeof first, "%s", sp.dataset);
    }
    for (int64_t r = 0; r < rows; r++) {
        char where[4200], key[32];
        snprintf(where, sizeof where, "%s: record %lld", o->src, (long long)r);
        snprintf(key, sizeof key, "%lld", (long long)r);
        pack_sample *s = pack_samples_add(ss, where, key);
        if (!s) {
            cli_err("out of memory for %lld samples", (long long)rows);
            return PACK_FAIL;
        }
        for (int32_t f = 0; f < ss->schema.n; f++) {
            uint64_t size = 0;
            stoker_dataset_record_info(ss->sources[f], r, &size, NULL, NULL);
            s->v[f] = (pack_value){
                .ds = ss->sources[f], .record = r, .size = size, .set = true, .offset = -1};
        }
    }
    return 0;
}
