/* SPDX-License-Identifier: Apache-2.0 */
/* --info (human or JSON) and --verify. */
#include "pack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A data set behind a URL (http://, https://, s3://; docs/REMOTE.md): its files are not
 * on this machine, so there is no size on disk to measure. */
static bool is_remote(const char *path)
{
    return strncmp(path, "http://", 7) == 0 || strncmp(path, "https://", 8) == 0 ||
           strncmp(path, "s3://", 5) == 0;
}

/* The payload alignment the manifest states, local or remote; 0 for an HDF5 file, which
 * has no manifest and whose records are not aligned. */
static long align_of(const char *path, const stoker_dataset *ds)
{
    return pack_is_h5(path) ? 0 : (long)stoker_dataset_align(ds);
}

/* What the data set takes on disk: its files' bytes (the shards and the manifest), and of
 * those the zeros that align the records (docs/FORMAT.md: a shard is its 4096-byte header
 * region, the payloads with their padding, 32 bytes of index per record and a 64-byte
 * footer). False for an HDF5 file (no manifest), a remote data set or a file that cannot be
 * read. */
typedef struct disk_use {
    int64_t bytes, padding;
} disk_use;

static bool disk_use_of(const char *path, stoker_dataset *ds, disk_use *u)
{
    char name[4096];
    struct stat st;
    snprintf(name, sizeof name, "%s/manifest.stk", path);
    if (is_remote(path) || stat(name, &st) != 0)
        return false;
    const int32_t shards = stoker_dataset_num_shards(ds);
    int64_t shard_bytes = 0;
    for (int32_t i = 0; i < shards; i++) {
        const char *shard = stoker_dataset_shard_path(ds, i);
        struct stat sst;
        if (!shard || stat(shard, &sst) != 0)
            return false;
        shard_bytes += (int64_t)sst.st_size;
    }
    u->bytes = shard_bytes + (int64_t)st.st_size;
    u->padding = shard_bytes - (int64_t)shards * (4096 + 64) - 32 * stoker_dataset_num_records(ds) -
                 stoker_dataset_payload_bytes(ds);
    return true;
}

static double share(int64_t part, int64_t whole)
{
    return whole > 0 ? (double)part / (double)whole : 0.0;
}

static const char *field_name(int32_t kind)
{
    const char *name = stoker_enum_name(STOKER_ENUM_FIELD, kind);
    return name ? name : "unknown";
}

/* A data set's fields as stoker_dataset_field_desc gives them. `declared`: the data set has a
 * schema of its own (manifest version 3, docs/FORMAT.md "Samples with several fields"), whose
 * records stoker_dataset_field calls bytes: the fields are listed instead of "field". A data
 * set written before schemas reads as its one field and label, and says "field" as before. */
typedef struct fields_of {
    int32_t n;
    stoker_field_desc f[STOKER_MAX_FIELDS];
    bool declared, images; /* images: a JPEG or PNG field among them */
} fields_of;

static void read_fields(stoker_dataset *ds, int32_t kind, fields_of *fs)
{
    const int32_t n = stoker_dataset_num_fields(ds);
    fs->n = 0;
    for (int32_t i = 0; i < n && i < STOKER_MAX_FIELDS; i++) {
        fs->f[fs->n] = (stoker_field_desc){.struct_size = sizeof(stoker_field_desc)};
        if (stoker_dataset_field_desc(ds, i, &fs->f[fs->n]) == 0)
            fs->n++;
    }
    /* The legacy pair: the one field (of the kind stoker_dataset_field answers) and label. */
    const bool legacy = fs->n == 2 && fs->f[0].kind == kind &&
                        fs->f[1].kind == STOKER_FIELD_INT64 && strcmp(fs->f[1].name, "label") == 0;
    fs->declared = stoker_dataset_format_version(ds) >= 3 || !legacy;
    fs->images = false;
    for (int32_t i = 0; i < fs->n; i++)
        fs->images |= fs->f[i].kind == STOKER_FIELD_JPEG || fs->f[i].kind == STOKER_FIELD_PNG;
}

static const char *tie_name(int32_t tie)
{
    return tie ? stoker_enum_name(STOKER_ENUM_FIELD_TIE, tie) : NULL;
}

/* Field f's dtype and shape in brackets ("float32 [N, 4]": an array's rows vary), for the
 * kinds that have them. */
static void put_shape(FILE *out, const stoker_field_desc *f, bool json)
{
    const bool array = f->kind == STOKER_FIELD_ARRAY;
    fputs(json ? "[" : " [", out);
    if (array)
        fputs(json ? "null" : "N", out);
    for (int32_t d = 0; d < f->ndim; d++)
        fprintf(out, "%s%lld", d || array ? ", " : "", (long long)f->shape[d]);
    fputs("]", out);
}

static void print_fields_json(const fields_of *fs)
{
    printf(", \"fields\": [");
    for (int32_t i = 0; i < fs->n; i++) {
        const stoker_field_desc *f = &fs->f[i];
        const bool shaped = f->kind == STOKER_FIELD_RAW || f->kind == STOKER_FIELD_ARRAY;
        const bool typed =
            shaped || f->kind == STOKER_FIELD_INT64 || f->kind == STOKER_FIELD_FLOAT32;
        printf("%s{\"name\": ", i ? ", " : "");
        cli_put_json_string(stdout, f->name);
        printf(", \"kind\": \"%s\", \"dtype\": ", field_name(f->kind));
        if (typed)
            printf("\"%s\"", stoker_dtype_name(f->dtype));
        else
            fputs("null", stdout);
        fputs(", \"shape\": ", stdout);
        if (shaped)
            put_shape(stdout, f, true);
        else
            fputs(typed ? "[]" : "null", stdout);
        if (f->tie) {
            printf(", \"tie\": \"%s\", \"tie_to\": ", tie_name(f->tie));
            cli_put_json_string(stdout, f->tie_to ? f->tie_to : "");
        } else {
            fputs(", \"tie\": null, \"tie_to\": null", stdout);
        }
        printf(", \"max\": %lld}", (long long)f->max);
    }
    putchar(']');
}

/* One line per field: "  boxes          array float32 [N, 4], boxes_of image, max 3 rows". */
static void print_fields_human(const fields_of *fs)
{
    printf("fields          %d\n", fs->n);
    for (int32_t i = 0; i < fs->n; i++) {
        const stoker_field_desc *f = &fs->f[i];
        fputs("  ", stdout);
        cli_put_escaped(stdout, f->name);
        printf("%*s%s", (int)(strlen(f->name) < 13 ? 14 - strlen(f->name) : 1), "",
               field_name(f->kind));
        if (f->kind == STOKER_FIELD_RAW || f->kind == STOKER_FIELD_ARRAY) {
            printf(" %s", stoker_dtype_name(f->dtype));
            put_shape(stdout, f, false);
        }
        if (f->tie) {
            printf(", %s ", tie_name(f->tie));
            cli_put_escaped(stdout, f->tie_to ? f->tie_to : "");
        }
        if (f->max > 0 || f->kind == STOKER_FIELD_ARRAY || f->kind == STOKER_FIELD_BYTES ||
            f->kind == STOKER_FIELD_JPEG || f->kind == STOKER_FIELD_PNG)
            printf(", max %lld %s", (long long)f->max,
                   f->kind == STOKER_FIELD_ARRAY ? "rows" : "bytes");
        putchar('\n');
    }
}

static void print_json(const char *path, stoker_dataset *ds, int32_t kind, int32_t dtype,
                       int32_t ndim, const int64_t *shape, const fields_of *fs)
{
    printf("{\"path\": ");
    cli_put_json_string(stdout, path);
    printf(", \"format_version\": %d, \"records\": %lld, \"shards\": %d, \"classes\": %d, "
           "\"bytes\": %lld, \"align\": %ld, \"field\": %s%s%s, \"jpeg_checked\": %s",
           stoker_dataset_format_version(ds), (long long)stoker_dataset_num_records(ds),
           stoker_dataset_num_shards(ds), stoker_dataset_num_classes(ds),
           (long long)stoker_dataset_payload_bytes(ds), align_of(path, ds),
           fs->declared ? "" : "\"", fs->declared ? "null" : field_name(kind),
           fs->declared ? "" : "\"", stoker_dataset_jpeg_checked(ds) ? "true" : "false");
    disk_use u;
    if (disk_use_of(path, ds, &u))
        printf(", \"disk_bytes\": %lld, \"padding_bytes\": %lld, \"padding_share\": %.4f",
               (long long)u.bytes, (long long)u.padding, share(u.padding, u.bytes));
    else
        printf(", \"disk_bytes\": null, \"padding_bytes\": null, \"padding_share\": null");
    if (kind == STOKER_FIELD_RAW && !fs->declared) {
        printf(", \"dtype\": \"%s\", \"shape\": [", stoker_dtype_name(dtype));
        for (int32_t i = 0; i < ndim; i++)
            printf("%s%lld", i ? ", " : "", (long long)shape[i]);
        printf("]");
    }
    print_fields_json(fs);
    printf(", \"class_names\": [");
    for (int32_t i = 0; i < stoker_dataset_num_classes(ds); i++) {
        fputs(i ? ", " : "", stdout);
        cli_put_json_string(stdout, stoker_dataset_class_name(ds, i));
    }
    printf("]}\n");
}

static void print_human(const char *path, stoker_dataset *ds, int32_t kind, int32_t dtype,
                        int32_t ndim, const int64_t *shape, const fields_of *fs)
{
    const int64_t bytes = stoker_dataset_payload_bytes(ds);
    fputs("data set        ", stdout);
    cli_put_escaped(stdout, path);
    putchar('\n');
    printf("format version  %d\n", stoker_dataset_format_version(ds));
    printf("records         %lld\n", (long long)stoker_dataset_num_records(ds));
    printf("shards          %d\n", stoker_dataset_num_shards(ds));
    printf("payload bytes   %lld (%.1f MB)\n", (long long)bytes, (double)bytes / 1e6);
    disk_use u;
    if (disk_use_of(path, ds, &u))
        printf("size on disk    %lld (%.1f MB: %.1f%% payload, %.1f%% alignment padding, "
               "%.1f%% index, headers and manifest)\n",
               (long long)u.bytes, (double)u.bytes / 1e6, 100 * share(bytes, u.bytes),
               100 * share(u.padding, u.bytes), 100 * share(u.bytes - bytes - u.padding, u.bytes));
    else if (is_remote(path))
        printf("size on server  n/a (a remote data set: its files are not measured)\n");
    else
        printf("size on disk    n/a (not a stoker data set: an HDF5 file)\n");
    const long align = align_of(path, ds);
    if (align > 0)
        printf("alignment       %ld\n", align);
    else
        printf("alignment       n/a (no manifest: an HDF5 file)\n");
    if (fs->declared)
        print_fields_human(fs);
    else
        printf("field           %s", field_name(kind));
    if (kind == STOKER_FIELD_RAW && !fs->declared) {
        printf(" %s [", stoker_dtype_name(dtype));
        for (int32_t i = 0; i < ndim; i++)
            printf("%s%lld", i ? ", " : "", (long long)shape[i]);
        printf("]");
    }
    /* Whether the loader's decoder auto may send the JPEGs to the GPU's hardware decoder,
     * which does not report damage inside the compressed data. A data set of several fields
     * is marked checked when every JPEG and PNG field was decoded when packed. */
    if (fs->declared && !fs->images)
        printf("checked         n/a (no JPEG or PNG field)");
    else if (fs->declared && stoker_dataset_jpeg_checked(ds))
        printf("checked         yes (every JPEG and PNG field was decoded without damage when "
               "packed)");
    else if (fs->declared)
        printf("checked         no (not decoded when written: decoder auto keeps the JPEGs on "
               "the CPU)");
    else if (kind != STOKER_FIELD_JPEG)
        printf("\nchecked         n/a (not JPEG records)");
    else if (stoker_dataset_jpeg_checked(ds))
        printf("\nchecked         yes (every JPEG was decoded without damage when packed)");
    else
        printf("\nchecked         no (not decoded when written: decoder auto keeps them on "
               "the CPU)");
    const int32_t nc = stoker_dataset_num_classes(ds);
    printf("\nclasses         %d", nc);
    for (int32_t i = 0; i < nc && i < 10; i++) {
        fputs(i ? ", " : ": ", stdout);
        cli_put_escaped(stdout, stoker_dataset_class_name(ds, i));
    }
    printf("%s\n", nc > 10 ? ", ..." : "");
}

int pack_info(const char *path, bool json)
{
    stoker_dataset *ds = NULL;
    const int rc = stoker_dataset_open(&ds, path, NULL);
    if (rc < 0) {
        /* The library's message names the file already. */
        if (ds && *stoker_dataset_errmsg(ds))
            cli_err("%s", stoker_dataset_errmsg(ds));
        else
            cli_err("%s: %s", path, stoker_strerror(rc));
        stoker_dataset_close(ds);
        return PACK_FAIL;
    }
    int32_t kind = 0, dtype = 0, ndim = 0;
    int64_t shape[STOKER_MAX_DIMS] = {0};
    stoker_dataset_field(ds, &kind, &dtype, &ndim, shape);
    fields_of *fs = calloc(1, sizeof *fs);
    if (!fs) {
        cli_err("out of memory");
        stoker_dataset_close(ds);
        return PACK_FAIL;
    }
    read_fields(ds, kind, fs);
    if (json)
        print_json(path, ds, kind, dtype, ndim, shape, fs);
    else
        print_human(path, ds, kind, dtype, ndim, shape, fs);
    free(fs);
    stoker_dataset_close(ds);
    return PACK_OK;
}

/* A problem with the data set as a whole (it could not be opened), kept for the end. */
typedef struct whole_problem {
    int32_t code;
    char msg[1024];
} whole_problem;

static void on_problem(void *user, int32_t shard, int64_t record, int32_t code, const char *msg)
{
    whole_problem *whole = user;
    if (shard < 0 && record < 0) {
        whole->code = code;
        snprintf(whole->msg, sizeof whole->msg, "%s", msg);
        return;
    }
    if (record >= 0)
        printf("shard %d, record %lld: ", shard, (long long)record);
    else
        printf("shard %d: ", shard);
    cli_put_escaped(stdout, msg);
    printf(" (%s)\n", stoker_strerror(code));
}

int pack_verify(const char *path, bool quiet)
{
    if (pack_is_h5(path))
        return pack_h5_verify(path, quiet);
    int64_t problems = 0;
    whole_problem whole = {0, ""};
    const int rc = stoker_dataset_verify(path, NULL, on_problem, &whole, &problems);
    if (rc == 0 && !quiet) {
        cli_put_escaped(stdout, path);
        printf(": intact\n");
    }
    if (rc == 0)
        return PACK_OK;
    /* Not a data set at all (or not there) is no problem found in one: say what it is. */
    if (whole.msg[0] && rc != STOKER_E_CORRUPT) {
        cli_put_escaped(stdout, whole.msg); /* names the path */
        if (rc == STOKER_E_FORMAT && !strstr(whole.msg, "not a stoker data set"))
            fputs(": not a stoker data set", stdout);
        if (rc == STOKER_E_FORMAT)
            fputs(" (--verify checks a data set written by stoker-pack, or reads every record "
                  "of an HDF5 file)",
                  stdout);
        else if (!strstr(whole.msg, stoker_strerror(whole.code)))
            printf(" (%s)", stoker_strerror(whole.code));
        putchar('\n');
        return PACK_FAIL;
    }
    if (whole.msg[0]) {
        cli_put_escaped(stdout, whole.msg);
        printf(" (%s)\n", stoker_strerror(whole.code));
    }
    cli_put_escaped(stdout, path);
    printf(": %lld problem%s found\n", (long long)problems, problems == 1 ? "" : "s");
    return PACK_FAIL;
}
