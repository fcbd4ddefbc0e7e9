/* stoker-bench: runs the loader over a data set and reports its throughput, the library's
 * version, read back-end, SIMD level, every effective option and the loader's stats. Uses
 * the public API (stoker.h) only. */
#include "stoker.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct opts {
    const char *data;
    int64_t epochs, batch, threads, depth, rank, world, seed;
    int shuffle, drop_last, direct, json;
    int32_t backend, on_corrupt, transform;
    const char *dump;
} opts;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: stoker-bench DATA [--epochs N] [--batch-size B] [--threads T] [--depth D]\n"
            "                   [--seed S] [--no-shuffle] [--drop-last] [--rank R --world-size W]\n"
            "                   [--transform none] [--backend auto|io_uring|pread] [--direct]\n"
            "                   [--on-corrupt error|skip] [--json] [--dump-indices FILE]\n"
            "One untimed warm-up batch is taken first; it is part of the delivered order.\n");
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int parse_int(const char *flag, const char *s, int64_t min, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    const long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || errno || !*s || *end || v < min) {
        fprintf(stderr, "stoker-bench: %s needs an integer >= %lld\n", flag, (long long)min);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_choice(const char *flag, const char *s, const char *const *names,
                        const int32_t *values, int32_t *out)
{
    for (int i = 0; s && names[i]; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = values[i];
            return 0;
        }
    fprintf(stderr, "stoker-bench: bad value for %s: %s\n", flag, s ? s : "(none)");
    return -1;
}

/* Parses argv; returns 0, 1 for --help, -1 on error. */
static int parse(int argc, char **argv, opts *o)
{
    static const char *const backends[] = {"auto", "io_uring", "pread", NULL};
    static const int32_t backend_v[] = {STOKER_BACKEND_AUTO, STOKER_BACKEND_IO_URING,
                                        STOKER_BACKEND_PREAD};
    static const char *const corrupt[] = {"error", "skip", NULL};
    static const int32_t corrupt_v[] = {STOKER_ON_CORRUPT_ERROR, STOKER_ON_CORRUPT_SKIP};
    static const char *const transforms[] = {"none", NULL};
    static const int32_t transform_v[] = {STOKER_TRANSFORM_NONE};
    *o = (opts){.epochs = 1, .batch = 256, .shuffle = 1, .world = 1,
                .backend = STOKER_BACKEND_AUTO, .on_corrupt = STOKER_ON_CORRUPT_ERROR,
                .transform = STOKER_TRANSFORM_NONE};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0, used = 1;
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return 1;
        else if (!strcmp(a, "--epochs"))
            rc = parse_int(a, v, 1, &o->epochs);
        else if (!strcmp(a, "--batch-size"))
            rc = parse_int(a, v, 1, &o->batch);
        else if (!strcmp(a, "--threads"))
            rc = parse_int(a, v, 0, &o->threads);
        else if (!strcmp(a, "--depth"))
            rc = parse_int(a, v, 0, &o->depth);
        else if (!strcmp(a, "--seed"))
            rc = parse_int(a, v, INT64_MIN, &o->seed);
        else if (!strcmp(a, "--rank"))
            rc = parse_int(a, v, 0, &o->rank);
        else if (!strcmp(a, "--world-size"))
            rc = parse_int(a, v, 1, &o->world);
        else if (!strcmp(a, "--backend"))
            rc = parse_choice(a, v, backends, backend_v, &o->backend);
        else if (!strcmp(a, "--on-corrupt"))
            rc = parse_choice(a, v, corrupt, corrupt_v, &o->on_corrupt);
        else if (!strcmp(a, "--transform"))
            rc = parse_choice(a, v, transforms, transform_v, &o->transform);
        else if (!strcmp(a, "--dump-indices"))
            rc = (o->dump = v) ? 0 : -1;
        else {
            used = 0;
            if (!strcmp(a, "--no-shuffle"))
                o->shuffle = 0;
            else if (!strcmp(a, "--drop-last"))
                o->drop_last = 1;
            else if (!strcmp(a, "--direct"))
                o->direct = 1;
            else if (!strcmp(a, "--json"))
                o->json = 1;
            else if (a[0] != '-' && !o->data)
                o->data = a;
            else {
                fprintf(stderr, "stoker-bench: unknown argument %s\n", a);
                return -1;
            }
        }
        if (rc < 0)
            return -1;
        i += used;
    }
    if (!o->data) {
        fprintf(stderr, "stoker-bench: no data set given\n");
        return -1;
    }
    return 0;
}

static int make_config(const opts *o, stoker_config **out)
{
    stoker_config *c = NULL;
    int rc = stoker_config_create(&c);
    const struct { stoker_option k; int64_t v; } set[] = {
        {STOKER_OPT_BATCH_SIZE, o->batch},     {STOKER_OPT_THREADS, o->threads},
        {STOKER_OPT_DEPTH, o->depth},          {STOKER_OPT_SEED, o->seed},
        {STOKER_OPT_SHUFFLE, o->shuffle},      {STOKER_OPT_DROP_LAST, o->drop_last},
        {STOKER_OPT_RANK, o->rank},            {STOKER_OPT_WORLD_SIZE, o->world},
        {STOKER_OPT_BACKEND, o->backend},      {STOKER_OPT_DIRECT_IO, o->direct},
        {STOKER_OPT_ON_CORRUPT, o->on_corrupt}, {STOKER_OPT_TRANSFORM, o->transform},
    };
    for (size_t i = 0; rc == 0 && i < sizeof set / sizeof set[0]; i++) {
        rc = stoker_config_set_int(c, set[i].k, set[i].v);
        if (rc)
            fprintf(stderr, "stoker-bench: option %s = %lld: %s\n", stoker_option_name(set[i].k),
                    (long long)set[i].v, stoker_strerror(rc));
    }
    *out = c;
    return rc;
}

typedef struct result {
    int64_t batches, records, bytes, warm_records;
    double seconds, wait;
    int error;
} result;

static void dump_batch(FILE *f, const stoker_batch *b)
{
    const int64_t *ids = stoker_batch_ids(b);
    for (int64_t j = 0; j < stoker_batch_count(b); j++)
        fprintf(f, j ? " %" PRId64 : "%" PRId64, ids[j]);
    fputc('\n', f);
}

/* Takes the next batch; 1 at the end of an epoch, 0 with *out, or the error. */
static int take(stoker_loader *l, stoker_batch **out)
{
    const int rc = stoker_loader_next(l, out);
    if (rc < 0)
        fprintf(stderr, "stoker-bench: %s: %s\n", stoker_strerror(rc), stoker_loader_errmsg(l));
    return rc;
}

/* The timed run: one warm-up batch, then `epochs` epochs. */
static int run(stoker_loader *l, const opts *o, FILE *dump, result *r)
{
    stoker_stats st = {.struct_size = sizeof st};
    stoker_batch *b = NULL;
    int64_t ends = 0;
    int rc = take(l, &b);
    if (rc < 0)
        return rc;
    if (rc == 0) {
        r->warm_records = stoker_batch_count(b);
        if (dump)
            dump_batch(dump, b);
        stoker_batch_release(b);
    } else {
        ends++;
    }
    stoker_loader_get_stats(l, &st);
    const double wait0 = st.wait_seconds, t0 = now();
    while (ends < o->epochs) {
        rc = take(l, &b);
        if (rc < 0)
            return rc;
        if (rc == STOKER_END) {
            ends++;
            continue;
        }
        r->batches++;
        r->records += stoker_batch_count(b);
        r->bytes += (int64_t)stoker_batch_nbytes(b);
        if (dump)
            dump_batch(dump, b);
        stoker_batch_release(b);
    }
    r->seconds = now() - t0;
    stoker_loader_get_stats(l, &st);
    r->wait = st.wait_seconds - wait0;
    return 0;
}

static const char *corrupt_name(int32_t v)
{
    return v == STOKER_ON_CORRUPT_SKIP ? "skip" : "error";
}

static void report_text(const opts *o, const stoker_stats *st, const result *r, int64_t nb,
                        int64_t nrec)
{
    const double s = r->seconds > 0 ? r->seconds : 1e-9;
    printf("stoker-bench %s\n", stoker_version_string());
    printf("data set     %s (%" PRId64 " records, %" PRId64 " batches per epoch on this "
           "rank)\n", o->data, nrec, nb);
    printf("back-end     %s\nsimd         %s\ndevice       cpu\n", stoker_backend_name(st->backend),
           stoker_simd_name(st->simd));
    printf("options      epochs=%" PRId64 " batch_size=%" PRId64 " threads=%d depth=%d seed=%"
           PRId64 " shuffle=%d drop_last=%d rank=%" PRId64 " world_size=%" PRId64
           " transform=none backend=%s direct=%d on_corrupt=%s\n",
           o->epochs, o->batch, st->threads, st->depth, o->seed, o->shuffle, o->drop_last,
           o->rank, o->world, stoker_backend_name(o->backend), o->direct,
           corrupt_name(o->on_corrupt));
    printf("warm-up      1 batch, %" PRId64 " records (not timed)\n", r->warm_records);
    printf("result       %" PRId64 " batches, %" PRId64 " records, %.1f MB in %.3f s\n",
           r->batches, r->records, (double)r->bytes / 1e6, r->seconds);
    printf("throughput   %.0f records/s, %.3f GB/s\n", (double)r->records / s,
           (double)r->bytes / s / 1e9);
    printf("consumer     waited %.3f s (%.1f%% of the run)\n", r->wait, 100.0 * r->wait / s);
    printf("stats        skipped=%" PRId64 " records_read=%" PRId64 " ready_slots=%.2f "
           "reads_in_flight=%.2f\n", st->skipped, st->records_read, st->ready_slots,
           st->reads_in_flight);
}

static void report_json(const opts *o, const stoker_stats *st, const result *r, int64_t nb)
{
    const double s = r->seconds > 0 ? r->seconds : 1e-9;
    printf("{\"version\":\"%s\",\"data\":\"", stoker_version_string());
    for (const char *p = o->data; *p; p++) /* JSON string escape */
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if ((unsigned char)*p < 0x20)
            printf("\\u%04x", *p);
        else
            putchar(*p);
    printf("\",\"backend\":\"%s\",\"simd\":\"%s\",\"device\":\"cpu\",\"threads\":%d,"
           "\"depth\":%d,\"epochs\":%" PRId64 ",\"batch_size\":%" PRId64 ",\"seed\":%" PRId64
           ",\"shuffle\":%s,\"drop_last\":%s,\"rank\":%" PRId64 ",\"world_size\":%" PRId64
           ",\"transform\":\"none\",\"direct\":%s,\"on_corrupt\":\"%s\","
           "\"batches_per_epoch\":%" PRId64 ",\"warmup_batches\":1,\"warmup_records\":%" PRId64
           ",\"batches\":%" PRId64 ",\"records\":%" PRId64 ",\"bytes\":%" PRId64
           ",\"seconds\":%.6f,\"records_per_sec\":%.3f,\"bytes_per_sec\":%.3f,"
           "\"wait_seconds\":%.6f,\"wait_fraction\":%.6f,\"skipped\":%" PRId64
           ",\"records_read\":%" PRId64 ",\"ready_slots\":%.3f,\"reads_in_flight\":%.3f}\n",
           stoker_backend_name(st->backend), stoker_simd_name(st->simd), st->threads, st->depth,
           o->epochs, o->batch, o->seed, o->shuffle ? "true" : "false",
           o->drop_last ? "true" : "false", o->rank, o->world, o->direct ? "true" : "false",
           corrupt_name(o->on_corrupt), nb, r->warm_records, r->batches, r->records, r->bytes,
           r->seconds, (double)r->records / s, (double)r->bytes / s, r->wait, r->wait / s,
           st->skipped, st->records_read, st->ready_slots, st->reads_in_flight);
}

int main(int argc, char **argv)
{
    opts o;
    const int prc = parse(argc, argv, &o);
    if (prc != 0) {
        usage(prc > 0 ? stdout : stderr);
        return prc > 0 ? 0 : 2;
    }
    if (stoker_version() != STOKER_VERSION_NUMBER)
        fprintf(stderr, "stoker-bench: warning: built against %d, running %u\n",
                STOKER_VERSION_NUMBER, stoker_version());
    stoker_config *cfg = NULL;
    stoker_loader *l = NULL;
    FILE *dump = NULL;
    int status = 1;
    if (make_config(&o, &cfg) != 0)
        goto out;
    int rc = stoker_loader_create(&l, o.data, cfg);
    if (rc != 0) {
        fprintf(stderr, "stoker-bench: %s: %s\n", stoker_strerror(rc), stoker_loader_errmsg(l));
        goto out;
    }
    if (o.dump && !(dump = fopen(o.dump, "w"))) {
        fprintf(stderr, "stoker-bench: %s: %s\n", o.dump, strerror(errno));
        goto out;
    }
    result r = {0};
    if (run(l, &o, dump, &r) < 0)
        goto out;
    if (dump && fclose(dump) != 0) {
        dump = NULL;
        fprintf(stderr, "stoker-bench: %s: %s\n", o.dump, strerror(errno));
        goto out;
    }
    dump = NULL;
    stoker_stats st = {.struct_size = sizeof st};
    int64_t nb = 0, nrec = 0;
    stoker_loader_get_stats(l, &st);
    stoker_loader_num_batches(l, &nb);
    stoker_loader_num_records(l, &nrec);
    if (o.json)
        report_json(&o, &st, &r, nb);
    else
        report_text(&o, &st, &r, nb, nrec);
    status = 0;
out:
    if (dump)
        fclose(dump);
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
    return status;
}
