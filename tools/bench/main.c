/* SPDX-License-Identifier: Apache-2.0 */
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

/* usage() is below the option tables, which it lists. */

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
    OPT_DECODER,
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
    OPT_DEVICE, /* the rest: the library's first, with their bit in `given` */
    OPT_MAX_CACHE,
    OPT_COMPUTE_MS,
    OPT_MIN_SECONDS,
    OPT_DUMP_INDICES,
    OPT_PLOT,
    OPT_REMOTE, /* remote data sets' options, as `remote_opts`: OPT_REMOTE + row */
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
    {"decoder", required_argument, NULL, OPT_DECODER},
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
    {"max-cache", required_argument, NULL, OPT_MAX_CACHE},
    {"compute-ms", required_argument, NULL, OPT_COMPUTE_MS},
    {"min-seconds", required_argument, NULL, OPT_MIN_SECONDS},
    {"dump-indices", required_argument, NULL, OPT_DUMP_INDICES},
    {"plot", required_argument, NULL, OPT_PLOT},
    {"cache-dir", required_argument, NULL, OPT_REMOTE + 0},
    {"ca-bundle", required_argument, NULL, OPT_REMOTE + 1},
    {"http-header", required_argument, NULL, OPT_REMOTE + 2},
    {"s3-region", required_argument, NULL, OPT_REMOTE + 3},
    {"s3-endpoint", required_argument, NULL, OPT_REMOTE + 4},
    {"cache-limit", required_argument, NULL, OPT_REMOTE + 5},
    {"block-size", required_argument, NULL, OPT_REMOTE + 6},
    {"fetch-window", required_argument, NULL, OPT_REMOTE + 7},
    {"fetch-transfers", required_argument, NULL, OPT_REMOTE + 8},
    {"fetch-retries", required_argument, NULL, OPT_REMOTE + 9},
    {"fetch-retry-ms", required_argument, NULL, OPT_REMOTE + 10},
    {"fetch-timeout-ms", required_argument, NULL, OPT_REMOTE + 11},
    {"fetch-clients", required_argument, NULL, OPT_REMOTE + 12},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

/* Remote data sets' options (docs/REMOTE.md), in long_opts' order from OPT_REMOTE: strings
 * first, then sizes and counts (K, M, G suffixes taken as for --max-cache). */
static const stoker_option remote_opts[] = {
    STOKER_OPT_CACHE_DIR,     STOKER_OPT_CA_BUNDLE,     STOKER_OPT_HTTP_HEADER,
    STOKER_OPT_S3_REGION,     STOKER_OPT_S3_ENDPOINT,   STOKER_OPT_CACHE_LIMIT,
    STOKER_OPT_BLOCK_SIZE,    STOKER_OPT_FETCH_WINDOW,  STOKER_OPT_FETCH_TRANSFERS,
    STOKER_OPT_FETCH_RETRIES, STOKER_OPT_FETCH_RETRY_MS, STOKER_OPT_FETCH_TIMEOUT_MS,
    STOKER_OPT_FETCH_CLIENTS,
};
#define REMOTE_STRINGS 5

/* An option that takes a value of one of the library's enums, named as the library's table
 * names it (any case, or an alias), and the library option it sets. */
typedef struct choice {
    stoker_enum e;
    stoker_option opt;
    size_t off; /* of an int32_t in opts */
} choice;

static const choice choices[] = {
    {STOKER_ENUM_BACKEND, STOKER_OPT_BACKEND, offsetof(opts, backend)},
    {STOKER_ENUM_ON_CORRUPT, STOKER_OPT_ON_CORRUPT, offsetof(opts, on_corrupt)},
    {STOKER_ENUM_TRANSFORM, STOKER_OPT_TRANSFORM, offsetof(opts, transform)},
    {STOKER_ENUM_DCT, STOKER_OPT_DCT, offsetof(opts, dct)},
    {STOKER_ENUM_ANTIALIAS, STOKER_OPT_ANTIALIAS, offsetof(opts, antialias)},
    {STOKER_ENUM_RESAMPLER, STOKER_OPT_RESAMPLER, offsetof(opts, resampler)},
    {STOKER_ENUM_DCT_SCALE, STOKER_OPT_DCT_SCALE, offsetof(opts, dct_scale)},
    {STOKER_ENUM_DTYPE, STOKER_OPT_DTYPE, offsetof(opts, dtype)},
    {STOKER_ENUM_LAYOUT, STOKER_OPT_LAYOUT, offsetof(opts, layout)},
    {STOKER_ENUM_SIMD, STOKER_OPT_SIMD, offsetof(opts, simd)},
    {STOKER_ENUM_ORDER, STOKER_OPT_ORDER, offsetof(opts, order)},
    {STOKER_ENUM_DECODER, STOKER_OPT_DECODER, offsetof(opts, decoder)},
};

#define NO_OPTION ((stoker_option)0) /* the tool's own, not the library's */

/* An option that takes an integer: the library option it sets (its range is the library's
 * table's, stoker_option_describe, as for the Python binding) or, for the tool's own, the
 * least it may be; and its int64_t field. */
static const struct {
    int64_t min;
    stoker_option opt;
    size_t off;
} ints[] = {
    {1, NO_OPTION, offsetof(opts, epochs)},
    {0, STOKER_OPT_BATCH_SIZE, offsetof(opts, batch)},
    {0, STOKER_OPT_THREADS, offsetof(opts, threads)},
    {0, STOKER_OPT_DEPTH, offsetof(opts, depth)},
    {0, STOKER_OPT_SEED, offsetof(opts, seed)},
    {0, STOKER_OPT_RANK, offsetof(opts, rank)},
    {0, STOKER_OPT_WORLD_SIZE, offsetof(opts, world)},
    {0, NO_OPTION, offsetof(opts, warmup)},
    {0, STOKER_OPT_SIZE, offsetof(opts, size)},
    {0, STOKER_OPT_RESIZE, offsetof(opts, resize)},
};

/* A flag: the library option it sets and its int field, set to 1 (--no-shuffle clears). */
static const struct {
    stoker_option opt;
    size_t off;
} flags[] = {
    {STOKER_OPT_SHUFFLE, offsetof(opts, shuffle)},
    {STOKER_OPT_DROP_LAST, offsetof(opts, drop_last)},
    {STOKER_OPT_DIRECT_IO, offsetof(opts, direct)},
    {NO_OPTION, offsetof(opts, json)},
    {NO_OPTION, offsetof(opts, io)},
    {NO_OPTION, offsetof(opts, compute_sleep)},
    {STOKER_OPT_GPU_NORMALIZE, offsetof(opts, gpu_normalize)},
};

#define FIELD(o, type, off) ((type *)(void *)((char *)(o) + (off)))
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define GIVEN(o, c) (((o)->given >> ((c)-OPT_BACKEND)) & 1u)

/* The tables are indexed by an option's offset in its run of the enum: a row for each. */
_Static_assert(COUNT(choices) == OPT_DECODER - OPT_BACKEND + 1, "a row of choices per option");
_Static_assert(COUNT(ints) == OPT_RESIZE - OPT_EPOCHS + 1, "a row of ints per option");
_Static_assert(COUNT(flags) == OPT_GPU_NORMALIZE - OPT_NO_SHUFFLE + 1, "a row of flags per option");
_Static_assert(OPT_MAX_CACHE - OPT_BACKEND < 64, "a bit of `given` per option");
_Static_assert(COUNT(remote_opts) == sizeof ((opts *)0)->remote / sizeof(char *),
               "a string of `remote` per remote option");

/* Whether `opt` takes `value`: the tables also name values that are only ever reported
 * (the "hdf5" back-end), which a config refuses. */
static bool option_takes(stoker_option opt, int32_t value)
{
    stoker_config *cfg = NULL;
    const bool ok = stoker_config_create(&cfg) == 0 && stoker_config_set_int(cfg, opt, value) == 0;
    stoker_config_destroy(cfg);
    return ok;
}

/* The names `ch` takes, joined by `sep`, into buf. */
static void choice_names(const choice *ch, const char *sep, char *buf, size_t cap)
{
    size_t used = 0;
    int32_t v = 0;
    buf[0] = '\0';
    for (int32_t i = 0, n = 0; stoker_enum_at(ch->e, i, &v) == 0 && used < cap; i++)
        if (option_takes(ch->opt, v))
            used += (size_t)snprintf(buf + used, cap - used, "%s%s", n++ ? sep : "",
                                     stoker_enum_name(ch->e, v));
}

static int take_choice(const char *name, const char *arg, const choice *ch, int32_t *v)
{
    int32_t x = 0;
    if (stoker_enum_parse(ch->e, arg, &x) == 0 && option_takes(ch->opt, x)) {
        *v = x;
        return 0;
    }
    char expected[256] = "one of ";
    choice_names(ch, ", ", expected + strlen(expected), sizeof expected - strlen(expected));
    return cli_bad_value(name, arg, expected);
}

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
    return 0;
}

/* Integer option `i` of `ints`: a library option within the range of the library's table;
 * the seed, 64 bits, as an unsigned number (0 to 2^64 - 1, stored as the same bits). */
static int take_int(const char *name, const char *arg, size_t i, opts *o)
{
    int64_t *v = FIELD(o, int64_t, ints[i].off);
    if (ints[i].opt == STOKER_OPT_SEED) {
        uint64_t u;
        if (cli_u64(name, arg, &u) < 0)
            return -1;
        memcpy(v, &u, sizeof *v);
        return 0;
    }
    int64_t lo = ints[i].min, hi = INT64_MAX;
    if (ints[i].opt != NO_OPTION &&
        stoker_option_describe(ints[i].opt, NULL, NULL, NULL, &lo, &hi) < 0)
        return cli_usage("%s: not an option of this library", name);
    return cli_int(name, arg, lo, hi, v);
}

/* One option; 0, or -1 after a usage error. */
static int take_option(int c, const char *name, const char *arg, opts *o)
{
    if (c >= OPT_BACKEND && c <= OPT_MAX_CACHE)
        o->given |= UINT64_C(1) << (c - OPT_BACKEND);
    if (c >= OPT_BACKEND && c <= OPT_DECODER) {
        const choice *ch = &choices[c - OPT_BACKEND];
        return take_choice(name, arg, ch, FIELD(o, int32_t, ch->off));
    }
    if (c >= OPT_EPOCHS && c <= OPT_RESIZE)
        return take_int(name, arg, c - OPT_EPOCHS, o);
    if (c >= OPT_NO_SHUFFLE && c <= OPT_GPU_NORMALIZE) {
        *FIELD(o, int, flags[c - OPT_NO_SHUFFLE].off) = c != OPT_NO_SHUFFLE;
        return 0;
    }
    switch (c) {
    case OPT_DEVICE: return take_device(name, arg, o);
    case OPT_MAX_CACHE: return cli_size(name, arg, &o->max_cache);
    case OPT_COMPUTE_MS: return cli_double(name, arg, 0, 1e6, &o->compute_ms);
    case OPT_MIN_SECONDS: return cli_double(name, arg, 0, 1e6, &o->min_seconds);
    case OPT_DUMP_INDICES: o->dump = arg; return 0;
    case OPT_PLOT: o->plot = arg; return 0;
    default:
        if (c >= OPT_REMOTE && c < OPT_REMOTE + (int)COUNT(remote_opts)) {
            int64_t v = 0;
            if (c - OPT_REMOTE >= REMOTE_STRINGS && cli_size(name, arg, &v) < 0)
                return -1;
            o->remote[c - OPT_REMOTE] = arg;
            return 0;
        }
        return -1; /* CLI_ERROR: reported */
    }
}

/* The library option that command-line option `c` sets. */
static stoker_option library_option(int c)
{
    return c >= OPT_BACKEND && c <= OPT_DECODER ? choices[c - OPT_BACKEND].opt
           : c >= OPT_EPOCHS && c <= OPT_RESIZE ? ints[c - OPT_EPOCHS].opt
                                                : NO_OPTION;
}

static const char *long_name(int c)
{
    for (const struct option *p = long_opts; p->name; p++)
        if (p->val == c)
            return p->name;
    return "?";
}

static void usage(FILE *f)
{
    fputs("usage: stoker-bench DATA [--epochs N] [--min-seconds SEC] [--batch-size B]\n"
          "                   [--threads T] [--depth D] [--seed S] [--no-shuffle] [--drop-last]\n"
          "                   [--rank R --world-size W] [--size N] [--resize S]\n"
          "                   [--device cpu|cuda|N] [--direct] [--max-cache SIZE] [--warmup N]\n"
          "                   [--compute-ms X] [--compute-sleep] [--io] [--json]\n"
          "                   [--plot FILE.svg] [--dump-indices FILE] [--gpu-normalize]\n"
          "                   [--cache-dir DIR] [--cache-limit SIZE] [--block-size SIZE]\n"
          "                   [--fetch-window SIZE] [--fetch-transfers N] [--fetch-retries N]\n"
          "                   [--fetch-retry-ms MS] [--fetch-timeout-ms MS] [--fetch-clients N]\n"
          "                   [--ca-bundle FILE] [--http-header 'NAME: VALUE'] [--s3-region R]\n"
          "                   [--s3-endpoint URL]\n",
          f);
    int col = 0;
    for (size_t i = 0; i < COUNT(choices); i++) { /* the names the library's tables give */
        char names[256];
        choice_names(&choices[i], "|", names, sizeof names);
        const int len = (int)(strlen(long_name(OPT_BACKEND + (int)i)) + strlen(names)) + 6;
        if (col == 0 || col + len > 88)
            col = fprintf(f, "%s                  ", col ? "\n" : "") - (col ? 1 : 0);
        col += fprintf(f, " [--%s %s]", long_name(OPT_BACKEND + (int)i), names);
    }
    fputc('\n', f);
    fprintf(f,
            "Options not given take the library's defaults; the report prints the values the\n"
            "loader runs with (names in any case). Without --epochs the run goes on, epoch by\n"
            "epoch, until at least %d epochs and --min-seconds SEC (default %g; 0 drops the\n"
            "rule) of timed delivery have passed; --epochs N runs exactly N epochs, however\n"
            "long they take (give it for a data set whose epoch lasts minutes). A figure from\n"
            "a run shorter than SEC is marked too short.\n",
            BENCH_MIN_EPOCHS, BENCH_MIN_SECONDS);
    fputs("--warmup batches (default 1) are taken untimed first; they are part of the\n"
          "delivered order and of the epochs counted, and must leave a batch of --epochs N\n"
          "to time (without --epochs the run goes on past them).\n"
          "--max-cache SIZE (K, M, G suffixes): page cache the data set may fill (default\n"
          "half the memory available); a larger one is read dropping its pages behind the\n"
          "reader. --compute-ms simulates a consumer that works X ms per batch (spinning;\n"
          "--compute-sleep sleeps instead). --io first measures the shards' raw sequential\n"
          "read bandwidth. --gpu-normalize moves (x/255 - mean)/std to the GPU (--device\n"
          "cuda): only uint8 crosses PCIe.\n"
          "--decoder: who decodes JPEGs (default auto: the GPU's hardware JPEG decoder beside\n"
          "the workers when batches go to a GPU that has one, else the workers); the report\n"
          "gives the decoder in effect, the images each side decoded and why the GPU\n"
          "decoded none.\n"
          "DATA may be a URL (http://, https://, s3://BUCKET/PREFIX) of a packed data set:\n"
          "blocks are fetched ahead into the block cache (--cache-dir, --cache-limit) and the\n"
          "report gives what was fetched (docs/REMOTE.md).\n"
          "SIGINT stops at the next batch and reports what was measured (exit status 130).\n",
          f);
}

/* Parses argv; returns 0, 1 for --help, -1 after a usage error. */
static int parse(int argc, char **argv, opts *o)
{
    *o = (opts){.epochs = BENCH_MIN_EPOCHS, .warmup = 1, .min_seconds = BENCH_MIN_SECONDS};
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
    static char shown[8192]; /* the run's one data set as reported (a longer one is cut) */
    o->shown = stoker_redact(o->data, shown, sizeof shown);
    o->epochs_exact = GIVEN(o, OPT_EPOCHS);
    if (o->io && strstr(o->data, "://"))
        return cli_usage("--io measures the read bandwidth of the disk a local data set lies "
                         "on; %s is a URL (the report's remote line gives what was fetched)",
                         o->shown);
    if (o->compute_sleep && o->compute_ms <= 0)
        return cli_usage("--compute-sleep sleeps instead of spinning for --compute-ms X per "
                         "batch: give --compute-ms with it");
    return 0;
}

/* One option given on the command line, into the config. */
static int set_option(stoker_config *c, stoker_option opt, int64_t v)
{
    const int rc = stoker_config_set_int(c, opt, v);
    if (rc)
        cli_err("option %s = %lld: %s", stoker_option_name(opt), (long long)v, stoker_strerror(rc));
    return rc;
}

/* The library's warnings (a remote data set larger than its cache, ...) on stderr. */
static void log_warning(void *user, int32_t level, const char *msg)
{
    (void)user;
    (void)level;
    fprintf(stderr, "stoker-bench: warning: %s\n", msg);
}

static int make_config(const opts *o, stoker_config **out)
{
    stoker_config *c = NULL;
    int rc = stoker_config_create(&c);
    if (rc == 0)
        rc = stoker_config_set_log(c, log_warning, NULL, STOKER_LOG_WARN);
    for (size_t i = 0; rc == 0 && i < COUNT(choices); i++)
        if (GIVEN(o, OPT_BACKEND + (int)i))
            rc = set_option(c, choices[i].opt, *FIELD(o, const int32_t, choices[i].off));
    for (size_t i = 0; rc == 0 && i < COUNT(ints); i++)
        if (ints[i].opt != NO_OPTION && GIVEN(o, OPT_EPOCHS + (int)i))
            rc = set_option(c, ints[i].opt, *FIELD(o, const int64_t, ints[i].off));
    for (size_t i = 0; rc == 0 && i < COUNT(flags); i++)
        if (flags[i].opt != NO_OPTION && GIVEN(o, OPT_NO_SHUFFLE + (int)i))
            rc = set_option(c, flags[i].opt, *FIELD(o, const int, flags[i].off));
    if (rc == 0 && GIVEN(o, OPT_DEVICE))
        rc = set_option(c, STOKER_OPT_DEVICE, o->device);
    if (rc == 0 && GIVEN(o, OPT_MAX_CACHE))
        rc = set_option(c, STOKER_OPT_MAX_CACHE, o->max_cache);
    for (size_t i = 0; rc == 0 && i < COUNT(remote_opts); i++) {
        int64_t v = 0;
        if (!o->remote[i])
            continue;
        if (i < REMOTE_STRINGS) {
            rc = stoker_config_set_string(c, remote_opts[i], o->remote[i]);
            if (rc)
                cli_err("option %s: %s", stoker_option_name(remote_opts[i]), /* no value: */
                        stoker_strerror(rc)); /* http_header's is often a secret */
        } else if (cli_size(stoker_option_name(remote_opts[i]), o->remote[i], &v) == 0) {
            rc = set_option(c, remote_opts[i], v);
        }
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

/* What the loader runs with, for the report. */
static void resolve(stoker_loader *l, resolved *eff)
{
    int32_t opt = 0;
    for (int32_t i = 0; stoker_enum_at(STOKER_ENUM_OPTION, i, &opt) == 0; i++)
        if (opt >= 0 && opt < BENCH_OPTIONS)
            eff->has[opt] = stoker_loader_get_int(l, (stoker_option)opt, &eff->v[opt]) == 0;
}

static int say_unused(const opts *o, int c, int32_t kind)
{
    cli_err("--%s applies to the JPEG image pipeline, which does not run on %s (%s)", long_name(c),
            o->shown, kind == STOKER_FIELD_JPEG ? "--transform none" : "its records are not JPEG");
    return -1;
}

/* The image pipeline's options do nothing where it does not run (records that are not
 * JPEG, or --transform none): refused before the run rather than ignored. */
static int refuse_unused(const opts *o, const result *r)
{
    static const int image[] = {OPT_SIZE,      OPT_RESIZE,    OPT_LAYOUT,    OPT_DCT,
                                OPT_ANTIALIAS, OPT_RESAMPLER, OPT_DCT_SCALE, OPT_DECODER};
    for (size_t i = 0; i < COUNT(image); i++)
        if (GIVEN(o, image[i]) && !r->eff.has[library_option(image[i])])
            return say_unused(o, image[i], r->kind);
    return 0;
}

/* --decoder on records that are not JPEG, refused as above but before create, which fails
 * for "gpu" there with another message (kind 0: the data set did not open, which create
 * reports). */
static int refuse_decoder(const opts *o, int32_t kind)
{
    if (GIVEN(o, OPT_DECODER) && kind != 0 && kind != STOKER_FIELD_JPEG)
        return say_unused(o, OPT_DECODER, kind);
    return 0;
}

/* --epochs N with a warm-up that takes all of their batches would time nothing, and report
 * a figure of nothing: a --warmup given so is refused before the run, as an option that
 * does nothing; the default one batch is left out, saying so (a run of one batch). Without
 * --epochs, the run goes on past the warm-up to time a batch. */
static int refuse_warmup(opts *o, const stoker_loader *l)
{
    int64_t nb = 0;
    if (!o->epochs_exact || o->warmup == 0 || stoker_loader_num_batches(l, &nb) != 0 ||
        nb <= 0 || (o->epochs <= INT64_MAX / nb && o->warmup < nb * o->epochs))
        return 0;
    if (!GIVEN(o, OPT_WARMUP)) {
        cli_err("note: no warm-up batch: the run's one batch (--epochs %" PRId64 ") is timed",
                o->epochs);
        o->warmup = 0;
        return 0;
    }
    cli_err("--warmup %" PRId64 " takes every batch of --epochs %" PRId64 " (%" PRId64
            " batch%s an epoch): nothing would be timed; give --warmup below %" PRId64
            ", or more --epochs",
            o->warmup, o->epochs, nb, nb == 1 ? "" : "es", nb * o->epochs);
    return -1;
}

/* Creates the loader and reads back what it runs with. 0, 1 (reported) or 2 (an option
 * that does nothing, or a warm-up that leaves nothing to time, reported). */
static int open_loader(opts *o, const stoker_config *cfg, stoker_loader **l, result *r)
{
    if (refuse_decoder(o, r->kind) < 0)
        return 2;
    const int rc = stoker_loader_create(l, o->data, cfg);
    if (rc != 0) {
        cli_err("%s: %s", stoker_strerror(rc), stoker_loader_errmsg(*l));
        return 1;
    }
    resolve(*l, &r->eff);
    return refuse_unused(o, r) < 0 || refuse_warmup(o, *l) < 0 ? 2 : 0;
}

/* Runs the loader and reports. Returns the exit status. */
static int bench(opts *o, stoker_config *cfg, result *r)
{
    stoker_loader *l = NULL;
    FILE *dump = NULL;
    char *dump_tmp = NULL;
    r->kind = field_kind(o->data, cfg);
    int status = open_loader(o, cfg, &l, r);
    if (status == 0 && o->io) { /* measured while no loader reads */
        stoker_loader_destroy(l);
        l = NULL;
        bench_io(o->data, &r->io);
        status = open_loader(o, cfg, &l, r);
    }
    if (status != 0)
        goto out;
    status = 1;
    if (o->dump && !(dump = bench_out_open(o->dump, &dump_tmp))) {
        cli_err("%s: %s", o->dump, strerror(errno));
        goto out;
    }
    if (bench_run(l, o, dump, r) < 0)
        goto out;
    int rc = bench_out_close(dump, dump_tmp, o->dump, 1);
    dump = NULL;
    if (rc < 0) {
        cli_err("%s: %s", o->dump, strerror(-rc));
        goto out;
    }
    if (o->json)
        bench_report_json(o, r);
    else
        bench_report_text(o, r);
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
