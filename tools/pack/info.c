/* --info (human or JSON) and --verify. */
#include "pack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The payload alignment, read from the manifest's "align N" line (docs/FORMAT.md); the
 * public API has no getter for it. 0 when not found. */
static long manifest_align(const char *path)
{
    char name[4096], head[4096];
    snprintf(name, sizeof name, "%s/manifest.stk", path);
    FILE *f = fopen(name, "r");
    if (!f)
        return 0;
    const size_t n = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    head[n] = '\0';
    const char *line = strstr(head, "\nalign ");
    return line ? strtol(line + 7, NULL, 10) : 0;
}

/* Writes s as a JSON string: quotes, backslashes and control bytes escaped; bytes that are
 * not valid UTF-8 become U+FFFD so the output is always valid JSON. */
static void json_string(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', f);
    while (*p) {
        const unsigned c = *p;
        if (c == '"' || c == '\\') {
            fprintf(f, "\\%c", c);
            p++;
        } else if (c < 0x20) {
            fprintf(f, "\\u%04x", c);
            p++;
        } else if (c < 0x80) {
            fputc((int)c, f);
            p++;
        } else {
            const int len = c >= 0xF0 && c < 0xF5 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
            int ok = len > 0 && !(len == 3 && c > 0xEF);
            for (int i = 1; ok && i < len; i++)
                ok = (p[i] & 0xC0) == 0x80;
            if (ok) {
                fwrite(p, 1, (size_t)len, f);
                p += len;
            } else {
                fputs("\\ufffd", f);
                p++;
            }
        }
    }
    fputc('"', f);
}

static const char *field_name(int32_t kind)
{
    switch (kind) {
    case STOKER_FIELD_BYTES: return "bytes";
    case STOKER_FIELD_JPEG: return "jpeg";
    case STOKER_FIELD_RAW: return "raw";
    default: return "unknown";
    }
}

static void print_json(const char *path, stoker_dataset *ds, int32_t kind, int32_t dtype,
                       int32_t ndim, const int64_t *shape)
{
    printf("{\"path\": ");
    json_string(stdout, path);
    printf(", \"format_version\": %d, \"records\": %lld, \"shards\": %d, \"classes\": %d, "
           "\"bytes\": %lld, \"align\": %ld, \"field\": \"%s\"",
           stoker_dataset_format_version(ds), (long long)stoker_dataset_num_records(ds),
           stoker_dataset_num_shards(ds), stoker_dataset_num_classes(ds),
           (long long)stoker_dataset_payload_bytes(ds), manifest_align(path), field_name(kind));
    if (kind == STOKER_FIELD_RAW) {
        printf(", \"dtype\": \"%s\", \"shape\": [", stoker_dtype_name(dtype));
        for (int32_t i = 0; i < ndim; i++)
            printf("%s%lld", i ? ", " : "", (long long)shape[i]);
        printf("]");
    }
    printf(", \"class_names\": [");
    for (int32_t i = 0; i < stoker_dataset_num_classes(ds); i++) {
        fputs(i ? ", " : "", stdout);
        json_string(stdout, stoker_dataset_class_name(ds, i));
    }
    printf("]}\n");
}

static void print_human(const char *path, stoker_dataset *ds, int32_t kind, int32_t dtype,
                        int32_t ndim, const int64_t *shape)
{
    const int64_t bytes = stoker_dataset_payload_bytes(ds);
    printf("data set        %s\n", path);
    printf("format version  %d\n", stoker_dataset_format_version(ds));
    printf("records         %lld\n", (long long)stoker_dataset_num_records(ds));
    printf("shards          %d\n", stoker_dataset_num_shards(ds));
    printf("payload bytes   %lld (%.1f MB)\n", (long long)bytes, (double)bytes / 1e6);
    printf("alignment       %ld\n", manifest_align(path));
    printf("field           %s", field_name(kind));
    if (kind == STOKER_FIELD_RAW) {
        printf(" %s [", stoker_dtype_name(dtype));
        for (int32_t i = 0; i < ndim; i++)
            printf("%s%lld", i ? ", " : "", (long long)shape[i]);
        printf("]");
    }
    const int32_t nc = stoker_dataset_num_classes(ds);
    printf("\nclasses         %d", nc);
    for (int32_t i = 0; i < nc && i < 10; i++)
        printf("%s%s", i ? ", " : ": ", stoker_dataset_class_name(ds, i));
    printf("%s\n", nc > 10 ? ", ..." : "");
}

int pack_info(const char *path, bool json)
{
    stoker_dataset *ds = NULL;
    const int rc = stoker_dataset_open(&ds, path, NULL);
    if (rc < 0) {
        /* The library's message names the file already. */
        if (ds && *stoker_dataset_errmsg(ds))
            pack_err("%s", stoker_dataset_errmsg(ds));
        else
            pack_err("%s: %s", path, stoker_strerror(rc));
        stoker_dataset_close(ds);
        return PACK_FAIL;
    }
    int32_t kind = 0, dtype = 0, ndim = 0;
    int64_t shape[STOKER_MAX_DIMS] = {0};
    stoker_dataset_field(ds, &kind, &dtype, &ndim, shape);
    if (json)
        print_json(path, ds, kind, dtype, ndim, shape);
    else
        print_human(path, ds, kind, dtype, ndim, shape);
    stoker_dataset_close(ds);
    return PACK_OK;
}

static void on_problem(void *user, int32_t shard, int64_t record, int32_t code, const char *msg)
{
    (void)user;
    char where[64] = "";
    if (shard >= 0 && record >= 0)
        snprintf(where, sizeof where, "shard %d, record %lld: ", shard, (long long)record);
    else if (shard >= 0)
        snprintf(where, sizeof where, "shard %d: ", shard);
    else if (record >= 0)
        snprintf(where, sizeof where, "record %lld: ", (long long)record);
    printf("%s%s (%s)\n", where, msg, stoker_strerror(code));
}

int pack_verify(const char *path)
{
    int64_t problems = 0;
    const int rc = stoker_dataset_verify(path, NULL, on_problem, NULL, &problems);
    if (rc == 0) {
        printf("%s: intact\n", path);
        return PACK_OK;
    }
    if (problems == 0)
        printf("%s: %s\n", path, stoker_strerror(rc));
    printf("%s: %lld problem%s found\n", path, (long long)problems, problems == 1 ? "" : "s");
    return PACK_FAIL;
}
