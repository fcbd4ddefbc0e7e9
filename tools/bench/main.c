/* stoker-bench: runs the loader over a data set and reports its throughput, the library's
 * version, read back-end, SIMD level, every effective option, per-stage times and the
 * stage that limits it. Uses the public API (stoker.h) only. This file: options and the
 * order of things. */
#include "bench.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: stoker-bench DATA [--epochs N] [--batch-size B] [--threads T] [--depth D]\n"
            "                   [--seed S] [--no-shuffle] [--drop-last] [--rank R --world-size W]\n"
            "                   [--transform train|eval|resize|none] [--size N] [--resize S]\n"
            "                   [--dct accurate|fast] [--antialias always|over2x]\n"
            "                   [--resampler fast|pillow] [--dct-scale never|train|always]\n"
            "                   [--dtype float32|float16|bfloat16|uint8]\n"
            "                   [--layout NCHW|NHWC] [--simd auto|scalar|avx2|avx512]\n"
            "                   [--device cpu|cuda|N] [--backend auto|io_uring|pread] [--direct]\n"
            "                   [--on-corrupt error|skip] [--warmup N] [--compute-ms X]\n"
            "                   [--compute-sleep] [--io] [--json] [--plot FILE.svg]\n"
            "                   [--dump-indices FILE] [--order records|blocks]\n"
            "                   [--gpu-normalize]\n"
            "Defaults come from the library: a JPEG data set is read with transform train,\n"
            "size 224, float16, NCHW. --warmup batches (default 1) are taken untimed first;\n"
            "they are part of the delivered order. --compute-ms simulates a consumer that\n"
            "works X ms per batch (spinning; --compute-sleep sleeps instead). --io first\n"
            "measures the shards' raw sequential read bandwidth. --gpu-normalize moves\n"
            "(x/255 - mean)/std to the GPU (--device cuda): only uint8 crosses PCIe. SIGINT\n"
            "stops at the next batch and reports what was measured (exit status 130).\n");
}

double bench_now(void)
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

static int parse_ms(const char *flag, const char *s, double *out)
{
    char *end = NULL;
    errno = 0;
    const double v = s ? strtod(s, &end) : 0;
    if (!s || errno || !*s || *end || !(v >= 0) || v > 1e6) {
        fprintf(stderr, "stoker-bench: %s needs a number of milliseconds >= 0\n", flag);
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

/* cpu, cuda (GPU 0) or a CUDA ordinal N, as STOKER_OPT_DEVICE's value. */
static int parse_device(const char *s, opts *o)
{
    int64_t n = 0;
    if (s && !strcmp(s, "cpu"))
        o->device = -1;
    else if (s && !strcmp(s, "cuda"))
        o->device = 1;
    else if (s && !strncmp(s, "cuda:", 5) && parse_int("--device", s + 5, 0, &n) == 0)
        o->device = n + 1;
    else if (parse_int("--device", s, 0, &n) == 0)
        o->device = n + 1;
    else
        return -1;
    o->device_set = 1;
    return 0;
}

/* --order: STOKER_OPT_ORDER's value, set only when given (0 leaves the library's default). */
static int32_t order_opt;

/* The options that take a named value. Returns 1 when `a` is not one of them. */
static int parse_named(const char *a, const char *v, opts *o)
{
    static const char *const backends[] = {"auto", "io_uring", "pread", NULL};
    static const int32_t backend_v[] = {STOKER_BACKEND_AUTO, STOKER_BACKEND_IO_URING,
                                        STOKER_BACKEND_PREAD};
    static const char *const corrupt[] = {"error", "skip", NULL};
    static const int32_t corrupt_v[] = {STOKER_ON_CORRUPT_ERROR, STOKER_ON_CORRUPT_SKIP};
    static const char *const transforms[] = {"train", "eval", "resize", "none", NULL};
    static const int32_t transform_v[] = {STOKER_TRANSFORM_TRAIN, STOKER_TRANSFORM_EVAL,
                                          STOKER_TRANSFORM_RESIZE, STOKER_TRANSFORM_NONE};
    static const char *const dcts[] = {"accurate", "fast", NULL};
    static const int32_t dct_v[] = {STOKER_DCT_ISLOW, STOKER_DCT_IFAST};
    static const char *const antialiases[] = {"always", "over2x", NULL};
    static const int32_t antialias_v[] = {STOKER_ANTIALIAS_ALWAYS, STOKER_ANTIALIAS_OVER_2X};
    static const char *const resamplers[] = {"fast", "pillow", NULL};
    static const int32_t resampler_v[] = {STOKER_RESAMPLER_FAST, STOKER_RESAMPLER_PILLOW};
    static const char *const dct_scales[] = {"never", "train", "always", NULL};
    static const int32_t dct_scale_v[] = {STOKER_DCT_SCALE_NEVER, STOKER_DCT_SCALE_TRAIN,
                                          STOKER_DCT_SCALE_ALWAYS};
    static const char *const dtypes[] = {"float32", "float16", "bfloat16", "uint8", NULL};
    static const int32_t dtype_v[] = {STOKER_DTYPE_FLOAT32, STOKER_DTYPE_FLOAT16,
                                      STOKER_DTYPE_BFLOAT16, STOKER_DTYPE_UINT8};
    static const char *const layouts[] = {"NCHW", "NHWC", "nchw", "nhwc", NULL};
    static const int32_t layout_v[] = {STOKER_LAYOUT_NCHW, STOKER_LAYOUT_NHWC, STOKER_LAYOUT_NCHW,
                                       STOKER_LAYOUT_NHWC};
    static const char *const orders[] = {"records", "blocks", NULL};
    static const int32_t order_v[] = {STOKER_ORDER_RECORDS, STOKER_ORDER_BLOCKS};
    static const char *const simds[] = {"auto", "scalar", "avx2", "avx512", NULL};
    static const int32_t simd_v[] = {STOKER_SIMD_AUTO, STOKER_SIMD_SCALAR, STOKER_SIMD_AVX2,
                                     STOKER_SIMD_AVX512};
    if (!strcmp(a, "--backend"))
        return parse_choice(a, v, backends, backend_v, &o->backend);
    if (!strcmp(a, "--on-corrupt"))
        return parse_choice(a, v, corrupt, corrupt_v, &o->on_corrupt);
    if (!strcmp(a, "--transform"))
        return parse_choice(a, v, transforms, transform_v, &o->transform);
    if (!strcmp(a, "--dct"))
        return parse_choice(a, v, dcts, dct_v, &o->dct);
    if (!strcmp(a, "--antialias"))
        return parse_choice(a, v, antialiases, antialias_v, &o->antialias);
    if (!strcmp(a, "--resampler"))
        return parse_choice(a, v, resamplers, resampler_v, &o->resampler);
    if (!strcmp(a, "--dct-scale"))
        return parse_choice(a, v, dct_scales, dct_scale_v, &o->dct_scale);
    if (!strcmp(a, "--dtype"))
        return parse_choice(a, v, dtypes, dtype_v, &o->dtype);
    if (!strcmp(a, "--layout"))
        return parse_choice(a, v, layouts, layout_v, &o->layout);
    if (!strcmp(a, "--simd"))
        return parse_choice(a, v, simds, simd_v, &o->simd);
    if (!strcmp(a, "--order"))
        return parse_choice(a, v, orders, order_v, &order_opt);
    if (!strcmp(a, "--device"))
        return parse_device(v, o);
    if (!strcmp(a, "--compute-ms"))
        return parse_ms(a, v, &o->compute_ms);
    if (!strcmp(a, "--dump-indices"))
        return (o->dump = v) ? 0 : -1;
    if (!strcmp(a, "--plot"))
        return (o->plot = v) ? 0 : -1;
    return 1;
}

/* The options that take an integer. Returns 1 when `a` is not one of them. */
static int parse_number(const char *a, const char *v, opts *o)
{
    static const struct {
        const char *flag;
        int64_t min;
        size_t off;
    } ints[] = {
        {"--epochs", 1, offsetof(opts, epochs)},     {"--batch-size", 1, offsetof(opts, batch)},
        {"--threads", 0, offsetof(opts, threads)},   {"--depth", 0, offsetof(opts, depth)},
        {"--seed", INT64_MIN, offsetof(opts, seed)}, {"--rank", 0, offsetof(opts, rank)},
        {"--world-size", 1, offsetof(opts, world)},  {"--warmup", 0, offsetof(opts, warmup)},
        {"--size", 1, offsetof(opts, size)},         {"--resize", 1, offsetof(opts, resize)},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (!strcmp(a, ints[i].flag))
            return parse_int(a, v, ints[i].min, (int64_t *)(void *)((char *)o + ints[i].off));
    return 1;
}

static int parse_flag(const char *a, opts *o)
{
    int *const flags[] = {&o->shuffle, &o->drop_last,     &o->direct,       &o->json,
                          &o->io,      &o->compute_sleep, &o->gpu_normalize};
    static const char *const names[] = {"--no-shuffle",   "--drop-last", "--direct",
                                        "--json",         "--io",        "--compute-sleep",
                                        "--gpu-normalize"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(a, names[i])) {
            *flags[i] = i != 0; /* --no-shuffle clears */
            return 0;
        }
    return 1;
}

/* Parses argv; returns 0, 1 for --help, -1 on error. */
static int parse(int argc, char **argv, opts *o)
{
    *o = (opts){.epochs = 1,
                .batch = 256,
                .shuffle = 1,
                .world = 1,
                .warmup = 1,
                .backend = STOKER_BACKEND_AUTO,
                .on_corrupt = STOKER_ON_CORRUPT_ERROR};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return 1;
        int rc = parse_named(a, v, o);
        if (rc == 1)
            rc = parse_number(a, v, o);
        if (rc < 0)
            return -1;
        if (rc == 0) {
            i++;
            continue;
        }
        if (parse_flag(a, o) == 0)
            continue;
        if (a[0] != '-' && !o->data) {
            o->data = a;
            continue;
        }
        fprintf(stderr, "stoker-bench: unknown argument %s\n", a);
        return -1;
    }
    if (!o->data) {
        fprintf(stderr, "stoker-bench: no data set given\n");
        return -1;
    }
    if (o->compute_sleep && o->compute_ms <= 0) {
        fprintf(stderr, "stoker-bench: --compute-sleep sleeps instead of spinning for "
                        "--compute-ms X per batch: give --compute-ms with it\n");
        return -1;
    }
    return 0;
}

static int make_config(const opts *o, stoker_config **out)
{
    stoker_config *c = NULL;
    int rc = stoker_config_create(&c);
    const struct {
        stoker_option k;
        int64_t v;
    } set[] = {
        {STOKER_OPT_BATCH_SIZE, o->batch},
        {STOKER_OPT_THREADS, o->threads},
        {STOKER_OPT_DEPTH, o->depth},
        {STOKER_OPT_SEED, o->seed},
        {STOKER_OPT_SHUFFLE, o->shuffle},
        {STOKER_OPT_DROP_LAST, o->drop_last},
        {STOKER_OPT_RANK, o->rank},
        {STOKER_OPT_WORLD_SIZE, o->world},
        {STOKER_OPT_BACKEND, o->backend},
        {STOKER_OPT_DIRECT_IO, o->direct},
        {STOKER_OPT_ON_CORRUPT, o->on_corrupt},
        {STOKER_OPT_TRANSFORM, o->transform},
        {STOKER_OPT_SIZE, o->size},
        {STOKER_OPT_RESIZE, o->resize},
        {STOKER_OPT_DCT, o->dct},
        {STOKER_OPT_ANTIALIAS, o->antialias},
        {STOKER_OPT_RESAMPLER, o->resampler},
        {STOKER_OPT_DCT_SCALE, o->dct_scale},
        {STOKER_OPT_DTYPE, o->dtype},
        {STOKER_OPT_LAYOUT, o->layout},
        {STOKER_OPT_SIMD, o->simd},
        {STOKER_OPT_DEVICE, o->device_set ? o->device : 0},
        {STOKER_OPT_ORDER, order_opt},
        {STOKER_OPT_GPU_NORMALIZE, o->gpu_normalize},
    };
    for (size_t i = 0; rc == 0 && i < sizeof set / sizeof set[0]; i++) {
        if (set[i].k == STOKER_OPT_DEVICE && !o->device_set)
            continue; /* the library's default */
        rc = stoker_config_set_int(c, set[i].k, set[i].v);
        if (rc)
            fprintf(stderr, "stoker-bench: option %s = %lld: %s\n", stoker_option_name(set[i].k),
                    (long long)set[i].v, stoker_strerror(rc));
    }
    *out = c;
    return rc;
}

volatile sig_atomic_t bench_interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    bench_interrupted = 1;
}

/* The data set's field kind (JPEG data sets get the image pipeline by default). */
static int32_t field_kind(const char *path, const stoker_config *cfg)
{
    stoker_dataset *ds = NULL;
    int32_t kind = 0;
    if (stoker_dataset_open(&ds, path, cfg) == 0)
        stoker_dataset_field(ds, &kind, NULL, NULL, NULL);
    stoker_dataset_close(ds);
    return kind;
}

/* Runs the loader and reports. Returns the exit status. */
/* The image pipeline's options do nothing where it does not run (records that are not
 * JPEG, or --transform none): refused before the run rather than ignored. */
static int refuse_unused(const opts *o, int32_t kind)
{
    const int32_t t = o->transform                ? o->transform
                      : kind == STOKER_FIELD_JPEG ? STOKER_TRANSFORM_TRAIN
                                                  : STOKER_TRANSFORM_NONE;
    if (kind == 0 || (kind == STOKER_FIELD_JPEG && t != STOKER_TRANSFORM_NONE))
        return 0; /* an unreadable data set is reported by the loader */
    const struct {
        const char *flag;
        int given;
    } image[] = {
        {"--size", o->size != 0},           {"--resize", o->resize != 0},
        {"--layout", o->layout != 0},       {"--dct", o->dct != 0},
        {"--antialias", o->antialias != 0}, {"--resampler", o->resampler != 0},
        {"--dct-scale", o->dct_scale != 0},
    };
    for (size_t i = 0; i < sizeof image / sizeof image[0]; i++)
        if (image[i].given) {
            fprintf(stderr,
                    "stoker-bench: %s applies to the JPEG image pipeline, which does not run "
                    "on %s (%s)\n",
                    image[i].flag, o->data,
                    kind == STOKER_FIELD_JPEG ? "--transform none" : "its records are not JPEG");
            return -1;
        }
    return 0;
}

/* Runs the loader and reports. Returns the exit status. */
static int bench(const opts *o, stoker_config *cfg, result *r)
{
    stoker_loader *l = NULL;
    FILE *dump = NULL;
    char *dump_tmp = NULL;
    int status = 1;
    r->kind = field_kind(o->data, cfg);
    if (refuse_unused(o, r->kind) < 0)
        return 2;
    if (o->io)
        bench_io(o->data, &r->io);
    int rc = stoker_loader_create(&l, o->data, cfg);
    if (rc != 0) {
        fprintf(stderr, "stoker-bench: %s: %s\n", stoker_strerror(rc), stoker_loader_errmsg(l));
        goto out;
    }
    if (o->dump && !(dump = bench_out_open(o->dump, &dump_tmp))) {
        fprintf(stderr, "stoker-bench: %s: %s\n", o->dump, strerror(errno));
        goto out;
    }
    if (bench_run(l, o, dump, r) < 0)
        goto out;
    rc = bench_out_close(dump, dump_tmp, o->dump, 1);
    dump = NULL;
    if (rc < 0) {
        fprintf(stderr, "stoker-bench: %s: %s\n", o->dump, strerror(-rc));
        goto out;
    }
    if (o->json)
        bench_report_json(o, r);
    else
        bench_report_text(o, r);
    if (o->plot && r->ntimeline < 2) {
        /* one point or none draws no line: an empty plot would look like a broken run */
        fprintf(stderr,
                "stoker-bench: --plot %s: the timed run lasted %.2f s, too short for a "
                "timeline (a point every 0.25 s, two at least); no plot written (give more "
                "--epochs)\n",
                o->plot, r->seconds);
        goto out;
    }
    if (o->plot && (rc = bench_plot(o->plot, r)) < 0) {
        fprintf(stderr, "stoker-bench: %s: %s\n", o->plot, strerror(-rc));
        goto out;
    }
    status = r->interrupted ? 130 : 0;
out:
    bench_out_close(dump, dump_tmp, o->dump, 0); /* a failed run's dump is not kept */
    stoker_loader_destroy(l);
    return status;
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
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    if (bench_check_outputs(&o) < 0)
        return 2;
    stoker_config *cfg = NULL;
    result r;
    memset(&r, 0, sizeof r);
    int status = 1;
    if (make_config(&o, &cfg) == 0)
        status = bench(&o, cfg, &r);
    free(r.timeline);
    stoker_config_destroy(cfg);
    return status;
}
