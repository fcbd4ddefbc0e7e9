/* stoker-bench: runs the loader over a data set and reports its throughput, the library's
 * version, read back-end, SIMD level, every effective option, per-stage times and the
 * stage that limits it. Uses the public API (stoker.h) only. This file: options and the
 * order of things. */
#include "bench.h"
#include "cli.h"

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

/* Options in the order of the tables below: each kind a run of values from 256 up. */
enum {
    OPT_BACKEND = 256, /* named values, as `choices` */
    OPT_ON_CORRUPT,
    OPT_TRANSFORM,
    OPT_DCT,
    OPT_ANTIALIAS,
    OPT_RESAMPLER,
    OPT_DCT_SCALE,
    OPT_DTYPE,
    OPT_LAYOUT,
    OPT_SIMD,
    OPT_ORDER,
    OPT_EPOCHS, /* integers, as `ints` */
    OPT_BATCH_SIZE,
    OPT_THREADS,
    OPT_DEPTH,
    OPT_SEED,
    OPT_RANK,
    OPT_WORLD_SIZE,
    OPT_WARMUP,
    OPT_SIZE,
    OPT_RESIZE,
    OPT_NO_SHUFFLE, /* flags, as `flags` */
    OPT_DROP_LAST,
    OPT_DIRECT,
    OPT_JSON,
    OPT_IO,
    OPT_COMPUTE_SLEEP,
    OPT_GPU_NORMALIZE,
    OPT_DEVICE, /* the rest */
    OPT_COMPUTE_MS,
    OPT_DUMP_INDICES,
    OPT_PLOT,
    OPT_HELP = 'h', /* -h too */
};

static const struct option long_opts[] = {
    {"backend", required_argument, NULL, OPT_BACKEND},
    {"on-corrupt", required_argument, NULL, OPT_ON_CORRUPT},
    {"transform", required_argument, NULL, OPT_TRANSFORM},
    {"dct", required_argument, NULL, OPT_DCT},
    {"antialias", required_argument, NULL, OPT_ANTIALIAS},
    {"resampler", required_argument, NULL, OPT_RESAMPLER},
    {"dct-scale", required_argument, NULL, OPT_DCT_SCALE},
    {"dtype", required_argument, NULL, OPT_DTYPE},
    {"layout", required_argument, NULL, OPT_LAYOUT},
    {"simd", required_argument, NULL, OPT_SIMD},
    {"order", required_argument, NULL, OPT_ORDER},
    {"epochs", required_argument, NULL, OPT_EPOCHS},
    {"batch-size", required_argument, NULL, OPT_BATCH_SIZE},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"depth", required_argument, NULL, OPT_DEPTH},
    {"seed", required_argument, NULL, OPT_SEED},
    {"rank", required_argument, NULL, OPT_RANK},
    {"world-size", required_argument, NULL, OPT_WORLD_SIZE},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"size", required_argument, NULL, OPT_SIZE},
    {"resize", required_argument, NULL, OPT_RESIZE},
    {"no-shuffle", no_argument, NULL, OPT_NO_SHUFFLE},
    {"drop-last", no_argument, NULL, OPT_DROP_LAST},
    {"direct", no_argument, NULL, OPT_DIRECT},
    {"json", no_argument, NULL, OPT_JSON},
    {"io", no_argument, NULL, OPT_IO},
    {"compute-sleep", no_argument, NULL, OPT_COMPUTE_SLEEP},
    {"gpu-normalize", no_argument, NULL, OPT_GPU_NORMALIZE},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"compute-ms", required_argument, NULL, OPT_COMPUTE_MS},
    {"dump-indices", required_argument, NULL, OPT_DUMP_INDICES},
    {"plot", required_argument, NULL, OPT_PLOT},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

/* An option that takes a named value: the names and what each sets its field to. */
typedef struct choice {
    const char *const *names;
    const int32_t *values;
    size_t off; /* of an int32_t in opts */
} choice;

#define NAMES(...)                                                                                 \
    (const char *const[])                                                                          \
    {                                                                                              \
        __VA_ARGS__, NULL                                                                          \
    }
#define VALUES(...)                                                                                \
    (const int32_t[])                                                                              \
    {                                                                                              \
        __VA_ARGS__                                                                                \
    }

static const choice choices[] = {
    {NAMES("auto", "io_uring", "pread"),
     VALUES(STOKER_BACKEND_AUTO, STOKER_BACKEND_IO_URING, STOKER_BACKEND_PREAD),
     offsetof(opts, backend)},
    {NAMES("error", "skip"), VALUES(STOKER_ON_CORRUPT_ERROR, STOKER_ON_CORRUPT_SKIP),
     offsetof(opts, on_corrupt)},
    {NAMES("train", "eval", "resize", "none"),
     VALUES(STOKER_TRANSFORM_TRAIN, STOKER_TRANSFORM_EVAL, STOKER_TRANSFORM_RESIZE,
            STOKER_TRANSFORM_NONE),
     offsetof(opts, transform)},
    {NAMES("accurate", "fast"), VALUES(STOKER_DCT_ISLOW, STOKER_DCT_IFAST), offsetof(opts, dct)},
    {NAMES("always", "over2x"), VALUES(STOKER_ANTIALIAS_ALWAYS, STOKER_ANTIALIAS_OVER_2X),
     offsetof(opts, antialias)},
    {NAMES("fast", "pillow"), VALUES(STOKER_RESAMPLER_FAST, STOKER_RESAMPLER_PILLOW),
     offsetof(opts, resampler)},
    {NAMES("never", "train", "always"),
     VALUES(STOKER_DCT_SCALE_NEVER, STOKER_DCT_SCALE_TRAIN, STOKER_DCT_SCALE_ALWAYS),
     offsetof(opts, dct_scale)},
    {NAMES("float32", "float16", "bfloat16", "uint8"),
     VALUES(STOKER_DTYPE_FLOAT32, STOKER_DTYPE_FLOAT16, STOKER_DTYPE_BFLOAT16, STOKER_DTYPE_UINT8),
     offsetof(opts, dtype)},
    {NAMES("NCHW", "NHWC", "nchw", "nhwc"),
     VALUES(STOKER_LAYOUT_NCHW, STOKER_LAYOUT_NHWC, STOKER_LAYOUT_NCHW, STOKER_LAYOUT_NHWC),
     offsetof(opts, layout)},
    {NAMES("auto", "scalar", "avx2", "avx512"),
     VALUES(STOKER_SIMD_AUTO, STOKER_SIMD_SCALAR, STOKER_SIMD_AVX2, STOKER_SIMD_AVX512),
     offsetof(opts, simd)},
    {NAMES("records", "blocks"), VALUES(STOKER_ORDER_RECORDS, STOKER_ORDER_BLOCKS),
     offsetof(opts, order)},
};

/* An option that takes an integer: the least it may be, and its int64_t field. */
static const struct {
    int64_t min;
    size_t off;
} ints[] = {
    {1, offsetof(opts, epochs)}, {1, offsetof(opts, batch)},        {0, offsetof(opts, threads)},
    {0, offsetof(opts, depth)},  {INT64_MIN, offsetof(opts, seed)}, {0, offsetof(opts, rank)},
    {1, offsetof(opts, world)},  {0, offsetof(opts, warmup)},       {1, offsetof(opts, size)},
    {1, offsetof(opts, resize)},
};

/* A flag: its int field, set to 1 (--no-shuffle clears). */
static const size_t flags[] = {
    offsetof(opts, shuffle),       offsetof(opts, drop_last), offsetof(opts, direct),
    offsetof(opts, json),          offsetof(opts, io),        offsetof(opts, compute_sleep),
    offsetof(opts, gpu_normalize),
};

#define FIELD(o, type, off) ((type *)(void *)((char *)(o) + (off)))

/* cpu, cuda (GPU 0) or a CUDA ordinal N (also cuda:N), as STOKER_OPT_DEVICE's value. */
static int take_device(const char *name, const char *arg, opts *o)
{
    int64_t n = 0;
    if (!strcmp(arg, "cpu"))
        o->device = -1;
    else if (!strcmp(arg, "cuda"))
        o->device = 1;
    else if (cli_parse_int(strncmp(arg, "cuda:", 5) ? arg : arg + 5, &n) && n >= 0 && n < INT64_MAX)
        o->device = n + 1;
    else
        return cli_bad_value(name, arg, "cpu, cuda, cuda:N or N (a CUDA device number >= 0)");
    o->device_set = 1;
    return 0;
}

/* One option; 0, or -1 after a usage error. */
static int take_option(int c, const char *name, const char *arg, opts *o)
{
    if (c >= OPT_BACKEND && c <= OPT_ORDER) {
        const choice *ch = &choices[c - OPT_BACKEND];
        return cli_choice(name, arg, ch->names, ch->values, FIELD(o, int32_t, ch->off));
    }
    if (c >= OPT_EPOCHS && c <= OPT_RESIZE) {
        const int64_t min = ints[c - OPT_EPOCHS].min;
        return cli_int(name, arg, min, INT64_MAX, FIELD(o, int64_t, ints[c - OPT_EPOCHS].off));
    }
    if (c >= OPT_NO_SHUFFLE && c <= OPT_GPU_NORMALIZE) {
        *FIELD(o, int, flags[c - OPT_NO_SHUFFLE]) = c != OPT_NO_SHUFFLE;
        return 0;
    }
    switch (c) {
    case OPT_DEVICE: return take_device(name, arg, o);
    case OPT_COMPUTE_MS: return cli_double(name, arg, 0, 1e6, &o->compute_ms);
    case OPT_DUMP_INDICES: o->dump = arg; return 0;
    case OPT_PLOT: o->plot = arg; return 0;
    default: return -1; /* CLI_ERROR: reported */
    }
}

/* Parses argv; returns 0, 1 for --help, -1 after a usage error. */
static int parse(int argc, char **argv, opts *o)
{
    *o = (opts){.epochs = 1,
                .batch = 256,
                .shuffle = 1,
                .world = 1,
                .warmup = 1,
                .backend = STOKER_BACKEND_AUTO,
                .on_corrupt = STOKER_ON_CORRUPT_ERROR};
    int c;
    const char *name, *arg;
    while ((c = cli_next(argc, argv, long_opts, &name, &arg)) != CLI_END) {
        if (c == OPT_HELP)
            return 1;
        if (take_option(c, name, arg, o) < 0)
            return -1;
    }
    if (optind == argc)
        return cli_usage("no data set given (stoker-bench DATA [options])");
    if (optind + 1 < argc)
        return cli_usage("unexpected argument '%s' (expected one data set)", argv[optind + 1]);
    o->data = argv[optind];
    if (o->compute_sleep && o->compute_ms <= 0)
        return cli_usage("--compute-sleep sleeps instead of spinning for --compute-ms X per "
                         "batch: give --compute-ms with it");
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
        {STOKER_OPT_ORDER, o->order},
        {STOKER_OPT_GPU_NORMALIZE, o->gpu_normalize},
    };
    for (size_t i = 0; rc == 0 && i < sizeof set / sizeof set[0]; i++) {
        if (set[i].k == STOKER_OPT_DEVICE && !o->device_set)
            continue; /* the library's default */
        rc = stoker_config_set_int(c, set[i].k, set[i].v);
        if (rc)
            cli_err("option %s = %lld: %s", stoker_option_name(set[i].k), (long long)set[i].v,
                    stoker_strerror(rc));
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
            cli_err("%s applies to the JPEG image pipeline, which does not run on %s (%s)",
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
        cli_err("%s: %s", stoker_strerror(rc), stoker_loader_errmsg(l));
        goto out;
    }
    if (o->dump && !(dump = bench_out_open(o->dump, &dump_tmp))) {
        cli_err("%s: %s", o->dump, strerror(errno));
        goto out;
    }
    if (bench_run(l, o, dump, r) < 0)
        goto out;
    rc = bench_out_close(dump, dump_tmp, o->dump, 1);
    dump = NULL;
    if (rc < 0) {
        cli_err("%s: %s", o->dump, strerror(-rc));
        goto out;
    }
    if (o->json)
        bench_report_json(o, r);
    else
        bench_report_text(o, r);
    if (o->plot && r->ntimeline < 2) {
        /* one point or none draws no line: an empty plot would look like a broken run */
        cli_err("--plot %s: the timed run lasted %.2f s, too short for a timeline (a point "
                "every 0.25 s, two at least); no plot written (give more --epochs)",
                o->plot, r->seconds);
        goto out;
    }
    if (o->plot && (rc = bench_plot(o->plot, r)) < 0) {
        cli_err("%s: %s", o->plot, strerror(-rc));
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
    cli_init("stoker-bench");
    opts o;
    const int prc = parse(argc, argv, &o);
    if (prc > 0)
        usage(stdout);
    if (prc != 0)
        return prc > 0 ? 0 : CLI_USAGE;
    if (stoker_version() != STOKER_VERSION_NUMBER)
        cli_err("warning: built against %d, running %u", STOKER_VERSION_NUMBER, stoker_version());
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
