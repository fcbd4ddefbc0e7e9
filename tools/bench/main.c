/* SPDX-License-Identifier: Apache-2.0 */
/* stoker-bench: runs the loader over a data set and reports its throughput, the library's
 * version, read back-end, SIMD level, every effective option, per-stage times and the
 * stage that limits it. Uses the public API (stoker.h) only. This file: options and the
 * order of things. */
#include "bench.h"
#include "cli.h"

#include <errno.h>
#include <float.h>
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

/* The tool's own options; a library option's value is OPT_LIBRARY + its key. */
enum {
    OPT_EPOCHS = 256,
    OPT_WARMUP,
    OPT_MIN_SECONDS,
    OPT_COMPUTE_MS,
    OPT_COMPUTE_SLEEP,
    OPT_JSON,
    OPT_IO,
    OPT_DUMP_INDICES,
    OPT_PLOT,
    OPT_LIBRARY = 1024,
    OPT_HELP = 'h', /* -h too */
};

static const struct option own_opts[] = {
    {"epochs", required_argument, NULL, OPT_EPOCHS},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"min-seconds", required_argument, NULL, OPT_MIN_SECONDS},
    {"compute-ms", required_argument, NULL, OPT_COMPUTE_MS},
    {"compute-sleep", no_argument, NULL, OPT_COMPUTE_SLEEP},
    {"json", no_argument, NULL, OPT_JSON},
    {"io", no_argument, NULL, OPT_IO},
    {"dump-indices", required_argument, NULL, OPT_DUMP_INDICES},
    {"plot", required_argument, NULL, OPT_PLOT},
    {"help", no_argument, NULL, OPT_HELP},
};

/* Every loader option of the library's table has a flag (its name, - for _), but these,
 * each with why. */
static const stoker_option no_flag[] = {
    STOKER_OPT_DIST_ENV, /* one process: --rank and --world-size give a rank's share */
    STOKER_OPT_EPOCH,    /* a run starts at epoch 0 and runs --epochs */
    /* the limits on untrusted input: their defaults */
    STOKER_OPT_MAX_RECORD_SIZE,
    STOKER_OPT_MAX_RECORDS,
    STOKER_OPT_MAX_PIXELS,
    STOKER_OPT_MAX_SHARDS,
    /* the library's defaults are what is measured */
    STOKER_OPT_READ_AHEAD,
    STOKER_OPT_DEVICE_BUFFERS,
    /* normalisation's constants do not change its cost */
    STOKER_OPT_MEAN_R,
    STOKER_OPT_MEAN_G,
    STOKER_OPT_MEAN_B,
    STOKER_OPT_STD_R,
    STOKER_OPT_STD_G,
    STOKER_OPT_STD_B,
    /* HDF5 files are benchmarked with their default names */
    STOKER_OPT_H5_IMAGES,
    STOKER_OPT_H5_LABELS,
};

/* Flags spelt otherwise than their option, or said otherwise than its doc line (which
 * speaks of the C value): shuffling is on by default, so its flag turns it off. */
static const struct {
    stoker_option opt;
    const char *flag, *doc; /* NULL: the option's name, its doc line */
} spelt[] = {
    {STOKER_OPT_SHUFFLE, "no-shuffle", "the order of the data set, not shuffled"},
    {STOKER_OPT_DIRECT_IO, "direct", NULL},
    {STOKER_OPT_DEVICE, NULL,
     "cpu, cuda (GPU 0) or a CUDA device number; default GPU 0 (or LOCAL_RANK) when usable, "
     "else the CPU"},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define MAX_FLAGS 256

/* The flags: the tool's own, then the library's (build_flags). */
static struct option long_opts[MAX_FLAGS + 1];
static char flag_names[MAX_FLAGS][48];

/* What the library's table says of option `opt`. */
typedef struct row {
    int32_t type, applies, values;
    int64_t min, max;
} row;

static bool describe(stoker_option opt, row *r)
{
    *r = (row){0};
    return stoker_option_describe(opt, &r->type, &r->applies, &r->values, &r->min, &r->max) == 0;
}

/* A flag that takes no value: an integer option of 0 and 1 only. */
static bool is_switch(const row *r)
{
    return r->type == STOKER_OPTION_INT && !r->values && r->min == 0 && r->max == 1;
}

static bool has_flag(stoker_option opt, const row *r)
{
    if (!(r->applies & STOKER_FOR_LOADER) || (int)opt < 0 || (int)opt >= BENCH_OPTIONS)
        return false;
    for (size_t i = 0; i < COUNT(no_flag); i++)
        if (no_flag[i] == opt)
            return false;
    return true;
}

/* long_opts: the tool's own options, then a flag for each loader option of the library's
 * table, in the table's order. */
static void build_flags(void)
{
    size_t n = 0;
    for (size_t i = 0; i < COUNT(own_opts); i++)
        long_opts[n++] = own_opts[i];
    int32_t key = 0;
    for (int32_t i = 0; stoker_enum_at(STOKER_ENUM_OPTION, i, &key) == 0 && n < MAX_FLAGS; i++) {
        row r;
        if (!describe((stoker_option)key, &r) || !has_flag((stoker_option)key, &r))
            continue;
        const char *name = stoker_option_name((stoker_option)key);
        for (size_t k = 0; k < COUNT(spelt); k++)
            if (spelt[k].opt == (stoker_option)key && spelt[k].flag)
                name = spelt[k].flag;
        char *f = flag_names[n];
        snprintf(f, sizeof flag_names[n], "%s", name);
        for (char *c = f; *c; c++)
            *c = *c == '_' ? '-' : *c;
        long_opts[n++] = (struct option){f, is_switch(&r) ? no_argument : required_argument, NULL,
                                         OPT_LIBRARY + key};
    }
    long_opts[n] = (struct option){NULL, 0, NULL, 0};
}

/* Whether `opt` takes `value`: the tables also name values that are only ever reported
 * (the "hdf5" back-end), which a config refuses. */
static bool option_takes(stoker_option opt, int32_t value)
{
    stoker_config *cfg = NULL;
    const bool ok = stoker_config_create(&cfg) == 0 && stoker_config_set_int(cfg, opt, value) == 0;
    stoker_config_destroy(cfg);
    return ok;
}

/* The names of enum `e` that `opt` takes, joined by `sep`, into buf. */
static void choice_names(stoker_enum e, stoker_option opt, const char *sep, char *buf, size_t cap)
{
    size_t used = 0;
    int32_t v = 0;
    buf[0] = '\0';
    for (int32_t i = 0, n = 0; stoker_enum_at(e, i, &v) == 0 && used < cap; i++)
        if (option_takes(opt, v))
            used += (size_t)snprintf(buf + used, cap - used, "%s%s", n++ ? sep : "",
                                     stoker_enum_name(e, v));
}

static int take_choice(const char *name, const char *arg, stoker_enum e, stoker_option opt,
                       int64_t *v)
{
    int32_t x = 0;
    if (stoker_enum_parse(e, arg, &x) == 0 && option_takes(opt, x)) {
        *v = x;
        return 0;
    }
    char expected[256] = "one of ";
    choice_names(e, opt, ", ", expected + strlen(expected), sizeof expected - strlen(expected));
    return cli_bad_value(name, arg, expected);
}

/* cpu, cuda (GPU 0) or a CUDA ordinal N (also cuda:N), as STOKER_OPT_DEVICE's value. */
static int take_device(const char *name, const char *arg, int64_t *v)
{
    int64_t n = 0;
    if (!strcmp(arg, "cpu"))
        *v = -1;
    else if (!strcmp(arg, "cuda"))
        *v = 1;
    else if (cli_parse_int(strncmp(arg, "cuda:", 5) ? arg : arg + 5, &n) && n >= 0 && n < INT64_MAX)
        *v = n + 1;
    else
        return cli_bad_value(name, arg, "cpu, cuda, cuda:N or N (a CUDA device number >= 0)");
    return 0;
}

/* A library option's value, as its row of the table says: a string as given; a number; a
 * name of its enum; nothing for a switch (--no-shuffle clears); the seed, 64 bits, as an
 * unsigned number (stored as the same bits); a number of bytes with a K, M, G or T suffix;
 * else an integer in the table's range. */
static int take_library(stoker_option key, const char *name, const char *arg, opts *o)
{
    row r;
    if (!describe(key, &r))
        return cli_usage("--%s: not an option of this library", name);
    int64_t *v = &o->ival[key];
    o->given[key] = 1;
    if (r.type == STOKER_OPTION_STRING) {
        o->sval[key] = arg;
        return 0;
    }
    if (r.type == STOKER_OPTION_FLOAT) /* the library checks the range */
        return cli_double(name, arg, -DBL_MAX, DBL_MAX, &o->fval[key]);
    if (r.values)
        return take_choice(name, arg, (stoker_enum)r.values, key, v);
    if (key == STOKER_OPT_DEVICE)
        return take_device(name, arg, v);
    if (is_switch(&r)) {
        *v = key != STOKER_OPT_SHUFFLE;
        return 0;
    }
    if (key == STOKER_OPT_SEED) {
        uint64_t u;
        if (cli_u64(name, arg, &u) < 0)
            return -1;
        memcpy(v, &u, sizeof *v);
        return 0;
    }
    if (stoker_option_unit(key) == STOKER_UNIT_BYTES) {
        if (cli_size(name, arg, v) < 0)
            return -1;
        if (*v >= r.min && *v <= r.max)
            return 0;
        char expected[96];
        snprintf(expected, sizeof expected, "a size from %lld to %lld bytes", (long long)r.min,
                 (long long)r.max);
        return cli_bad_value(name, arg, expected);
    }
    return cli_int(name, arg, r.min, r.max, v);
}

/* One option; 0, or -1 after a usage error. */
static int take_option(int c, const char *name, const char *arg, opts *o)
{
    if (c >= OPT_LIBRARY)
        return take_library((stoker_option)(c - OPT_LIBRARY), name, arg, o);
    switch (c) {
    case OPT_EPOCHS: o->epochs_exact = 1; return cli_int(name, arg, 1, INT64_MAX, &o->epochs);
    case OPT_WARMUP: o->warmup_given = 1; return cli_int(name, arg, 0, INT64_MAX, &o->warmup);
    case OPT_MIN_SECONDS: return cli_double(name, arg, 0, 1e6, &o->min_seconds);
    case OPT_COMPUTE_MS: return cli_double(name, arg, 0, 1e6, &o->compute_ms);
    case OPT_COMPUTE_SLEEP: o->compute_sleep = 1; return 0;
    case OPT_JSON: o->json = 1; return 0;
    case OPT_IO: o->io = 1; return 0;
    case OPT_DUMP_INDICES: o->dump = arg; return 0;
    case OPT_PLOT: o->plot = arg; return 0;
    default: return -1; /* CLI_ERROR: reported */
    }
}

static const char *flag_of(stoker_option opt)
{
    for (const struct option *p = long_opts; p->name; p++)
        if (p->val == OPT_LIBRARY + (int)opt)
            return p->name;
    return "?";
}

/* What a library flag's value is, for --help. */
static void metavar(stoker_option opt, const row *r, char *buf, size_t cap)
{
    const int32_t unit = stoker_option_unit(opt);
    if (is_switch(r))
        buf[0] = '\0';
    else if (r->values)
        choice_names((stoker_enum)r->values, opt, "|", buf, cap);
    else if (opt == STOKER_OPT_DEVICE)
        snprintf(buf, cap, "cpu|cuda|N");
    else
        snprintf(buf, cap, "%s",
                 r->type == STOKER_OPTION_STRING  ? "TEXT"
                 : r->type == STOKER_OPTION_FLOAT ? "X"
                 : unit == STOKER_UNIT_BYTES      ? "SIZE"
                 : unit == STOKER_UNIT_MS         ? "MS"
                                                  : "N");
}

/* A doc line from column DOC_AT, wrapped before column 88. */
#define DOC_AT 32
static void put_doc(FILE *f, int col, const char *doc)
{
    if (col >= DOC_AT) {
        fputc('\n', f);
        col = 0;
    }
    fprintf(f, "%*s", DOC_AT - col, "");
    col = DOC_AT;
    while (*doc) {
        const size_t word = strcspn(doc, " ");
        if (col > DOC_AT && col + 1 + (int)word > 88) {
            fprintf(f, "\n%*s", DOC_AT, "");
            col = DOC_AT;
        } else if (col > DOC_AT) {
            fputc(' ', f);
            col++;
        }
        col += fprintf(f, "%.*s", (int)word, doc);
        doc += word;
        doc += strspn(doc, " ");
    }
    fputc('\n', f);
}

static void usage(FILE *f)
{
    fputs("usage: stoker-bench DATA [--epochs N] [--min-seconds SEC] [--warmup N]\n"
          "                   [--compute-ms X] [--compute-sleep] [--io] [--json]\n"
          "                   [--plot FILE.svg] [--dump-indices FILE] [LIBRARY OPTIONS]\n"
          "Library options (from the library's table of options; one not given takes the\n"
          "library's default, and the report prints the values the loader runs with; names\n"
          "in any case; SIZE takes K, M, G suffixes):\n",
          f);
    for (const struct option *p = long_opts; p->name; p++) {
        if (p->val < OPT_LIBRARY)
            continue;
        const stoker_option opt = (stoker_option)(p->val - OPT_LIBRARY);
        row r;
        char meta[256];
        describe(opt, &r);
        metavar(opt, &r, meta, sizeof meta);
        const char *doc = stoker_option_doc(opt);
        for (size_t k = 0; k < COUNT(spelt); k++)
            if (spelt[k].opt == opt && spelt[k].doc)
                doc = spelt[k].doc;
        const int w = fprintf(f, "  --%s%s%s", p->name, meta[0] ? " " : "", meta);
        put_doc(f, w, doc);
    }
    fprintf(f,
            "Without --epochs the run goes on, epoch by epoch, until at least %d epochs and\n"
            "--min-seconds SEC (default %g; 0 drops the rule) of timed delivery have passed;\n"
            "--epochs N runs exactly N epochs, however long they take (give it for a data set\n"
            "whose epoch lasts minutes). A figure from a run shorter than SEC is marked too\n"
            "short.\n",
            BENCH_MIN_EPOCHS, BENCH_MIN_SECONDS);
    fputs("--warmup batches (default 1) are taken untimed first; they are part of the\n"
          "delivered order and of the epochs counted, and must leave a batch of --epochs N\n"
          "to time (without --epochs the run goes on past them).\n"
          "--max-cache SIZE: page cache the data set may fill (default half the memory\n"
          "available); a larger one is read dropping its pages behind the reader.\n"
          "--compute-ms simulates a consumer that works X ms per batch (spinning;\n"
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
    memset(o, 0, sizeof *o);
    o->epochs = BENCH_MIN_EPOCHS;
    o->warmup = 1;
    o->min_seconds = BENCH_MIN_SECONDS;
    build_flags();
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

/* The library options given, into a config. */
static int make_config(const opts *o, stoker_config **out)
{
    stoker_config *c = NULL;
    int rc = stoker_config_create(&c);
    if (rc == 0)
        rc = stoker_config_set_log(c, log_warning, NULL, STOKER_LOG_WARN);
    for (int key = 0; rc == 0 && key < BENCH_OPTIONS; key++) {
        row r;
        const stoker_option opt = (stoker_option)key;
        if (!o->given[key] || !describe(opt, &r))
            continue;
        if (r.type == STOKER_OPTION_STRING) {
            rc = stoker_config_set_string(c, opt, o->sval[key]);
            if (rc) /* no value: http_header's is often a secret */
                cli_err("option %s: %s", stoker_option_name(opt), stoker_strerror(rc));
        } else if (r.type == STOKER_OPTION_FLOAT) {
            rc = stoker_config_set_float(c, opt, o->fval[key]);
            if (rc)
                cli_err("option %s = %g: %s", stoker_option_name(opt), o->fval[key],
                        stoker_strerror(rc));
        } else {
            rc = set_option(c, opt, o->ival[key]);
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
        if (opt >= 0 && opt < BENCH_OPTIONS) {
            eff->has[opt] = stoker_loader_get_int(l, (stoker_option)opt, &eff->v[opt]) == 0;
            eff->has_f[opt] = stoker_loader_get_float(l, (stoker_option)opt, &eff->f[opt]) == 0;
        }
}

static int say_unused(const opts *o, stoker_option opt, int32_t kind)
{
    cli_err("--%s applies to the JPEG image pipeline, which does not run on %s (%s)", flag_of(opt),
            o->shown, kind == STOKER_FIELD_JPEG ? "--transform none" : "its records are not JPEG");
    return -1;
}

/* The image pipeline's options do nothing where it does not run (records that are not
 * JPEG, or --transform none), which the loader says by not reporting them
 * (STOKER_E_UNSUPPORTED): refused before the run rather than ignored. */
static int refuse_unused(const opts *o, const stoker_loader *l, const result *r)
{
    for (int key = 0; key < BENCH_OPTIONS; key++) {
        int64_t v = 0;
        double x = 0;
        if (o->given[key] &&
            (stoker_loader_get_int(l, (stoker_option)key, &v) == STOKER_E_UNSUPPORTED ||
             stoker_loader_get_float(l, (stoker_option)key, &x) == STOKER_E_UNSUPPORTED))
            return say_unused(o, (stoker_option)key, r->kind);
    }
    return 0;
}

/* --decoder on records that are not JPEG, refused as above but before create, which fails
 * for "gpu" there with another message (kind 0: the data set did not open, which create
 * reports). */
static int refuse_decoder(const opts *o, int32_t kind)
{
    if (o->given[STOKER_OPT_DECODER] && kind != 0 && kind != STOKER_FIELD_JPEG)
        return say_unused(o, STOKER_OPT_DECODER, kind);
    return 0;
}

/* --epochs N with a warm-up that takes all of their batches would time nothing, and report
 * a figure of nothing: a --warmup given so is refused before the run, as an option that
 * does nothing; the default one batch is left out, saying so (a run of one batch). Without
 * --epochs, the run goes on past the warm-up to time a batch. */
static int refuse_warmup(opts *o, const stoker_loader *l)
{
    int64_t nb = 0;
    if (!o->epochs_exact || o->warmup == 0 || stoker_loader_num_batches(l, &nb) != 0 || nb <= 0 ||
        (o->epochs <= INT64_MAX / nb && o->warmup < nb * o->epochs))
        return 0;
    if (!o->warmup_given) {
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
    return refuse_unused(o, *l, r) < 0 || refuse_warmup(o, *l) < 0 ? 2 : 0;
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
