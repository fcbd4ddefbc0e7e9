/* stoker-pack: packs an ImageFolder tree, a list file or a .npy array into a stoker data
 * set; --verify and --info inspect one. Exit codes: 0 ok, 1 failure or corruption, 2 usage,
 * 130 interrupted. */
#include "pack.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define XSTR(x) #x
#define STR(x) XSTR(x)
/* The version this tool was built against; the library's own is printed beside it. */
#define STOKER_VERSION_STRING_TOOL                                                                 \
    STR(STOKER_VERSION_MAJOR) "." STR(STOKER_VERSION_MINOR) "." STR(STOKER_VERSION_PATCH)

volatile sig_atomic_t pack_interrupted;
static stoker_writer *volatile live_writer;
/* 1 while nothing has been written yet (scanning the source): a signal may end the process
 * on the spot. 0 once the writer may exist: the signal cancels it instead, and the main
 * thread removes its temporary output before exiting. */
static volatile sig_atomic_t exit_at_once = 1;

static void on_signal(int sig)
{
    (void)sig;
    if (exit_at_once) {
        static const char msg[] = "stoker-pack: interrupted; nothing written\n";
        const ssize_t r = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)r;
        _exit(PACK_INTERRUPTED);
    }
    pack_interrupted = 1;
    stoker_writer *w = live_writer;
    if (w)
        stoker_writer_cancel(w); /* async-signal-safe by contract */
}

static void usage(FILE *f)
{
    fprintf(f, "usage: stoker-pack [options] SRC OUT     pack SRC into the data set OUT\n"
               "       stoker-pack --verify OUT          check every byte of a data set\n"
               "       stoker-pack --info [--json] OUT   describe a data set\n"
               "       stoker-pack --version | --help\n"
               "\n"
               "SRC is an ImageFolder tree (one folder per class), a list file of\n"
               "'path<TAB>label' lines, a NumPy .npy array (one record per row), or an\n"
               "HDF5 file FILE.h5[:/DATASET] (one record per index along axis 0).\n"
               "\n"
               "options:\n"
               "  --shard-size SIZE  target shard size, with K/M/G suffixes (default 256M)\n"
               "  --align N          payload alignment 1, 512 or 4096 (default 4096)\n"
               "  --jobs N           worker threads (default: online cores)\n"
               "  --validate         decode every JPEG; leave out damaged files\n"
               "  --strict           fail (no output) when any file would be left out\n"
               "  --rgb              convert CMYK/grey JPEG and PNG to RGB JPEG\n"
               "  --max-side N       re-encode images whose longer side exceeds N\n"
               "  --quality Q        JPEG quality of re-encoded images (default 90)\n"
               "  --seed S           seed of the storage order's shuffle (default 0)\n"
               "  --no-shuffle       store records in source order\n"
               "  --labels FILE      labels of a .npy source: an (N,) integer .npy;\n"
               "                     of an HDF5 source: the labels dataset's name\n"
               "  --force            replace an existing OUT\n"
               "  --no-fsync         do not fsync the output before publishing it\n"
               "  --quiet            print errors only\n");
}

static bool parse_u64(const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    const unsigned long long x = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-')
        return false;
    *v = x;
    return true;
}

static bool parse_int(const char *s, int lo, int hi, int *v)
{
    uint64_t x;
    if (!parse_u64(s, &x) || x < (uint64_t)lo || x > (uint64_t)hi)
        return false;
    *v = (int)x;
    return true;
}

/* "256M", "1G", "4096", "64k": bytes (powers of 1024). */
static bool parse_size(const char *s, int64_t *v)
{
    char *end;
    errno = 0;
    const unsigned long long x = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-')
        return false;
    unsigned shift = 0;
    if (*end) {
        const char *units = "KMGT";
        const char *u = strchr(units, end[0] >= 'a' ? end[0] - 32 : end[0]);
        if (!u || !*u)
            return false;
        shift = 10 * (unsigned)(u - units + 1);
        end++;
        if (*end == 'i' && end[1] == 'B')
            end += 2;
        else if (*end == 'B')
            end++;
        if (*end)
            return false;
    }
    if (x == 0 || x > (unsigned long long)INT64_MAX >> shift)
        return false;
    *v = (int64_t)(x << shift);
    return true;
}

enum {
    OPT_SHARD_SIZE = 256,
    OPT_ALIGN,
    OPT_JOBS,
    OPT_VALIDATE,
    OPT_STRICT,
    OPT_MAX_SIDE,
    OPT_QUALITY,
    OPT_RGB,
    OPT_SEED,
    OPT_NO_SHUFFLE,
    OPT_FORCE,
    OPT_QUIET,
    OPT_LABELS,
    OPT_NO_FSYNC,
    OPT_VERIFY,
    OPT_INFO,
    OPT_JSON,
    OPT_VERSION,
    OPT_HELP,
};

static const struct option long_opts[] = {
    {"shard-size", required_argument, NULL, OPT_SHARD_SIZE},
    {"align", required_argument, NULL, OPT_ALIGN},
    {"jobs", required_argument, NULL, OPT_JOBS},
    {"validate", no_argument, NULL, OPT_VALIDATE},
    {"strict", no_argument, NULL, OPT_STRICT},
    {"max-side", required_argument, NULL, OPT_MAX_SIDE},
    {"quality", required_argument, NULL, OPT_QUALITY},
    {"rgb", no_argument, NULL, OPT_RGB},
    {"seed", required_argument, NULL, OPT_SEED},
    {"no-shuffle", no_argument, NULL, OPT_NO_SHUFFLE},
    {"force", no_argument, NULL, OPT_FORCE},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"labels", required_argument, NULL, OPT_LABELS},
    {"no-fsync", no_argument, NULL, OPT_NO_FSYNC},
    {"verify", no_argument, NULL, OPT_VERIFY},
    {"info", no_argument, NULL, OPT_INFO},
    {"json", no_argument, NULL, OPT_JSON},
    {"version", no_argument, NULL, OPT_VERSION},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

static int bad_value(const char *opt, const char *value)
{
    pack_err("invalid value '%s' for --%s (see --help)", value, opt);
    return PACK_USAGE;
}

/* One option; returns -1 to go on, else an exit code. */
static int take_option(int c, const char *arg, pack_opts *o)
{
    uint64_t u;
    switch (c) {
    case OPT_SHARD_SIZE: return parse_size(arg, &o->shard_size) ? -1 : bad_value("shard-size", arg);
    case OPT_ALIGN:
        if (!parse_int(arg, 1, 4096, &o->align) ||
            (o->align != 1 && o->align != 512 && o->align != 4096))
            return bad_value("align", arg);
        return -1;
    case OPT_JOBS: return parse_int(arg, 1, 1024, &o->jobs) ? -1 : bad_value("jobs", arg);
    case OPT_VALIDATE: o->validate = true; return -1;
    case OPT_STRICT: o->strict = true; return -1;
    case OPT_MAX_SIDE:
        return parse_int(arg, 1, 65535, &o->max_side) ? -1 : bad_value("max-side", arg);
    case OPT_QUALITY: return parse_int(arg, 1, 100, &o->quality) ? -1 : bad_value("quality", arg);
    case OPT_RGB: o->rgb = true; return -1;
    case OPT_SEED:
        if (!parse_u64(arg, &u))
            return bad_value("seed", arg);
        o->seed = u;
        return -1;
    case OPT_NO_SHUFFLE: o->shuffle = false; return -1;
    case OPT_FORCE: o->force = true; return -1;
    case OPT_QUIET: o->quiet = true; return -1;
    case OPT_LABELS: o->labels = arg; return -1;
    case OPT_NO_FSYNC: o->fsync = false; return -1;
    case OPT_VERIFY: o->mode = MODE_VERIFY; return -1;
    case OPT_INFO: o->mode = MODE_INFO; return -1;
    case OPT_JSON: o->json = true; return -1;
    case OPT_VERSION:
        printf("stoker-pack %s (library %s, format version %d)\n", STOKER_VERSION_STRING_TOOL,
               stoker_version_string(), STOKER_FORMAT_VERSION);
        return PACK_OK;
    case OPT_HELP: usage(stdout); return PACK_OK;
    default: usage(stderr); return PACK_USAGE;
    }
}

static int parse_args(int argc, char **argv, pack_opts *o)
{
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    *o = (pack_opts){.mode = MODE_PACK,
                     .shard_size = 256ll << 20,
                     .align = 4096,
                     .jobs = cpus > 0 ? (int)cpus : 1,
                     .quality = 90,
                     .shuffle = true,
                     .fsync = true};
    int c;
    opterr = 1;
    while ((c = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
        const int rc = take_option(c, optarg, o);
        if (rc >= 0)
            return rc;
    }
    const int rest = argc - optind;
    if (o->mode != MODE_PACK && rest == 1) {
        o->out = argv[optind];
        return -1;
    }
    if (o->mode == MODE_PACK && rest == 2 && !o->json) {
        o->src = argv[optind];
        o->out = argv[optind + 1];
        return -1;
    }
    usage(stderr);
    return PACK_USAGE;
}

/* Refuses OUT inside SRC (the pack would read its own output), comparing real paths: OUT
 * need not exist yet, so its parent is resolved and its last component appended. */
static bool out_inside_src(const char *src, const char *out)
{
    char rsrc[PATH_MAX], rparent[PATH_MAX], full[2 * PATH_MAX + 2];
    char *parent = strdup(out);
    if (!parent)
        return false;
    size_t n = strlen(parent);
    while (n > 1 && parent[n - 1] == '/')
        parent[--n] = '\0';
    char *slash = strrchr(parent, '/');
    const char *base = slash ? slash + 1 : parent;
    if (slash == parent)
        base = parent + 1;
    if (slash)
        *slash = '\0';
    const bool ok = realpath(src, rsrc) && realpath(!slash            ? "."
                                                    : slash == parent ? "/"
                                                                      : parent,
                                                    rparent);
    if (ok)
        snprintf(full, sizeof full, "%s/%s", strcmp(rparent, "/") ? rparent : "", base);
    free(parent);
    if (!ok)
        return false;
    const size_t ns = strlen(rsrc);
    return strncmp(full, rsrc, ns) == 0 && (full[ns] == '/' || full[ns] == '\0');
}

static void print_options(const pack_opts *o, const char *kind)
{
    fprintf(stderr, "stoker-pack %s (library %s, format version %d)\n", STOKER_VERSION_STRING_TOOL,
            stoker_version_string(), STOKER_FORMAT_VERSION);
    fprintf(stderr, "  source       %s (%s)\n  output       %s\n", o->src, kind, o->out);
    fprintf(stderr, "  shard-size   %lld bytes\n  align        %d\n  jobs         %d\n",
            (long long)o->shard_size, o->align, o->jobs);
    fprintf(stderr, "  validate     %s\n  strict       %s\n  rgb          %s\n",
            o->validate ? "yes" : "no", o->strict ? "yes" : "no", o->rgb ? "yes" : "no");
    fprintf(stderr, "  max-side     %d%s\n  quality      %d\n", o->max_side,
            o->max_side ? "" : " (no resizing)", o->quality);
    fprintf(stderr, "  order        %s (seed %llu)\n  force        %s\n  fsync        %s\n",
            o->shuffle ? "shuffled" : "source order", (unsigned long long)o->seed,
            o->force ? "yes" : "no", o->fsync ? "yes" : "no");
    if (o->labels)
        fprintf(stderr, "  labels       %s\n", o->labels);
}

static void print_summary(const pack_opts *o, const pack_result *r, double secs)
{
    int32_t shards = -1;
    stoker_dataset *ds = NULL;
    if (stoker_dataset_open(&ds, o->out, NULL) == 0)
        shards = stoker_dataset_num_shards(ds);
    stoker_dataset_close(ds);
    const double dt = secs > 1e-6 ? secs : 1e-6;
    fprintf(stderr,
            "stoker-pack: wrote %s: %lld records, %lld bytes, %d shard%s, %zu skipped, "
            "%.2f s, %.0f records/s, %.1f MB/s\n",
            o->out, (long long)r->records, (long long)r->bytes, shards, shards == 1 ? "" : "s",
            r->skips.n, secs, (double)r->records / dt, (double)r->bytes / dt / 1e6);
}

static void print_skips(const pack_skips *s)
{
    if (s->n == 0)
        return;
    fprintf(stderr, "stoker-pack: %zu file%s left out:\n", s->n, s->n == 1 ? "" : "s");
    for (size_t i = 0; i < s->n && i < 20; i++)
        fprintf(stderr, "  %s\n", s->lines[i]);
    if (s->n > 20)
        fprintf(stderr, "  ... and %zu more\n", s->n - 20);
}

static stoker_writer *open_writer(const pack_opts *o, int *exit_code)
{
    stoker_config *cfg = NULL;
    stoker_writer *w = NULL;
    if (stoker_config_create(&cfg) < 0) {
        pack_err("out of memory");
        *exit_code = PACK_FAIL;
        return NULL;
    }
    stoker_config_set_int(cfg, STOKER_OPT_SHARD_SIZE, o->shard_size);
    stoker_config_set_int(cfg, STOKER_OPT_ALIGN, o->align);
    stoker_config_set_int(cfg, STOKER_OPT_OVERWRITE, o->force);
    stoker_config_set_int(cfg, STOKER_OPT_FSYNC, o->fsync);
    const int rc = stoker_writer_create(&w, o->out, cfg);
    stoker_config_destroy(cfg);
    if (rc < 0) {
        if (w && *stoker_writer_errmsg(w))
            pack_err("%s", stoker_writer_errmsg(w)); /* names the file already */
        else
            pack_err("%s: %s", o->out, stoker_strerror(rc));
        if (rc == STOKER_E_EXISTS)
            pack_err("%s exists; use --force to replace it", o->out);
        stoker_writer_destroy(w);
        *exit_code = rc == STOKER_E_EXISTS || rc == STOKER_E_INVALID ? PACK_USAGE : PACK_FAIL;
        return NULL;
    }
    return w;
}

/* Ends the writer's life with signals held off, so the handler never sees a freed writer. */
static void drop_writer(stoker_writer *w)
{
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigprocmask(SIG_BLOCK, &block, &old);
    live_writer = NULL;
    sigprocmask(SIG_SETMASK, &old, NULL);
    stoker_writer_destroy(w);
}

typedef struct npy_pair {
    pack_npy data, labels;
    bool has_labels;
    stoker_dataset *h5; /* an HDF5 source instead (h5.c) */
} npy_pair;

static int open_npy(const pack_opts *o, npy_pair *np)
{
    if (pack_npy_open(o->src, &np->data) < 0)
        return PACK_FAIL;
    if (!o->labels)
        return 0;
    if (pack_npy_open(o->labels, &np->labels) < 0)
        return PACK_FAIL;
    np->has_labels = true;
    if (np->labels.ndim != 0 || (np->labels.kind != 'i' && np->labels.kind != 'u')) {
        pack_err("%s: labels must be a 1-d integer array", o->labels);
        return PACK_FAIL;
    }
    if (np->labels.rows != np->data.rows) {
        pack_err("%s: %llu labels for %llu rows of %s", o->labels,
                 (unsigned long long)np->labels.rows, (unsigned long long)np->data.rows, o->src);
        return PACK_FAIL;
    }
    return 0;
}

/* Scans the source; returns 0 or an exit code. */
static int load_source(const pack_opts *o, bool *is_npy, pack_source *src, npy_pair *np)
{
    struct stat st;
    if (pack_is_h5(o->src))
        return pack_h5_open(o, &np->h5);
    if (stat(o->src, &st) != 0) {
        pack_err("%s: %s", o->src, strerror(errno));
        return PACK_FAIL;
    }
    *is_npy = !S_ISDIR(st.st_mode) && pack_is_npy(o->src);
    if (o->labels && !*is_npy) {
        pack_err("--labels is only for a .npy source");
        return PACK_USAGE;
    }
    if (*is_npy)
        return open_npy(o, np);
    const int rc =
        S_ISDIR(st.st_mode) ? pack_scan_folder(o->src, o->quiet, src) : pack_scan_list(o->src, src);
    return rc < 0 ? PACK_FAIL : 0;
}

static int declare_field(stoker_writer *w, bool is_npy, const npy_pair *np, const pack_source *src)
{
    if (np->h5)
        return pack_h5_field(w, np->h5);
    int rc = is_npy ? stoker_writer_set_field(w, STOKER_FIELD_RAW, np->data.dtype, np->data.ndim,
                                              np->data.shape)
                    : stoker_writer_set_field(w, STOKER_FIELD_JPEG, 0, 0, NULL);
    for (size_t i = 0; rc == 0 && i < src->nclasses; i++)
        rc = stoker_writer_add_class(w, src->classes[i]);
    if (rc < 0)
        pack_err("%s", stoker_writer_errmsg(w));
    return rc < 0 ? PACK_FAIL : 0;
}

/* Writes everything and publishes it; returns an exit code. */
static int write_all(const pack_opts *o, bool is_npy, const npy_pair *np, const pack_source *src,
                     const size_t *order, pack_result *res)
{
    int code = 0;
    exit_at_once = 0;
    stoker_writer *w = open_writer(o, &code);
    if (!w)
        return code;
    live_writer = w;
    if (pack_interrupted)
        stoker_writer_cancel(w);
    code = declare_field(w, is_npy, np, src);
    if (code == 0)
        code = np->h5    ? pack_h5_rows(o, np->h5, order, w, res)
               : is_npy ? pack_rows(o, &np->data, np->has_labels ? &np->labels : NULL, order, w,
                                    res)
                        : pack_images(o, src, order, w, res);
    if (code == 0) {
        const int rc = stoker_writer_finish(w);
        if (rc == STOKER_E_CANCELED || (rc < 0 && pack_interrupted)) {
            code = PACK_INTERRUPTED;
        } else if (rc == STOKER_E_EMPTY) {
            pack_err("%s: no records (every file was left out)", o->src);
            code = PACK_FAIL;
        } else if (rc < 0) {
            pack_err("%s", stoker_writer_errmsg(w));
            code = PACK_FAIL;
        }
    }
    drop_writer(w);
    if (code == PACK_INTERRUPTED)
        pack_err("interrupted; %s left as it was", o->out);
    return code;
}

static int run_pack(const pack_opts *o)
{
    struct stat st;
    if (!o->force && lstat(o->out, &st) == 0) {
        pack_err("%s exists; use --force to replace it", o->out);
        return PACK_USAGE;
    }
    if (out_inside_src(o->src, o->out)) {
        pack_err("%s is inside the source %s; choose an output outside it", o->out, o->src);
        return PACK_USAGE;
    }
    pack_source src = {0};
    npy_pair np = {0};
    bool is_npy = false;
    int code = load_source(o, &is_npy, &src, &np);
    const size_t n = np.h5    ? (size_t)stoker_dataset_num_records(np.h5)
                     : is_npy ? (size_t)np.data.rows
                              : src.n;
    if (code == 0 && !o->quiet)
        print_options(o, np.h5    ? "HDF5 file"
                         : is_npy ? "npy array"
                         : src.nclasses ? "image folder" : "list file");
    if (code == 0 && n == 0) {
        pack_err("%s: no records (no image files found)", o->src);
        code = PACK_FAIL;
    }
    if (code == 0 && !o->quiet && !is_npy && !np.h5)
        fprintf(stderr, "stoker-pack: %zu files in %zu classes%s\n", src.n, src.nclasses,
                src.ignored ? " (non-image files ignored)" : "");
    size_t *order = code == 0 ? pack_order(n, o->shuffle, o->seed) : NULL;
    pack_result res = {0};
    const double t0 = pack_now();
    if (code == 0)
        code = order ? write_all(o, is_npy, &np, &src, order, &res) : PACK_FAIL;
    if (code == 0 || code == PACK_FAIL)
        print_skips(&res.skips);
    if (code == 0 && !o->quiet)
        print_summary(o, &res, pack_now() - t0);
    free(order);
    pack_skips_free(&res.skips);
    pack_source_free(&src);
    pack_npy_close(&np.data);
    pack_npy_close(&np.labels);
    stoker_dataset_close(np.h5);
    return code;
}

int main(int argc, char **argv)
{
    pack_opts o;
    const int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (o.mode == MODE_VERIFY)
        return pack_verify(o.out);
    if (o.mode == MODE_INFO)
        return pack_info(o.out, o.json);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    return run_pack(&o);
}
