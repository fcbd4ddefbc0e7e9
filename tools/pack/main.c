/* SPDX-License-Identifier: Apache-2.0 */
/* stoker-pack: packs an ImageFolder tree, a list file, a .npy array or an HDF5 file into a
 * stoker data set; --verify and --info inspect one. Exit codes: 0 ok, 1 failure or
 * corruption, 2 usage, 130 interrupted. */
#include "cli.h"
#include "fields.h"
#include "pack.h"

#include <errno.h>
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

/* A writer option's default: the library's table's (a fresh config's value). */
static int64_t table_default(stoker_option opt)
{
    stoker_config *cfg = NULL;
    int64_t v = 0;
    if (stoker_config_create(&cfg) == 0)
        stoker_config_get_int(cfg, opt, &v);
    stoker_config_destroy(cfg);
    return v;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: stoker-pack [options] SRC OUT     pack SRC into the data set OUT\n"
            "       stoker-pack --jsonl FILE --schema FILE [options] OUT\n"
            "       stoker-pack --coco FILE --images DIR [options] OUT\n"
            "       stoker-pack --wds A.tar [B.tar ...] [--schema FILE] [options] OUT\n"
            "       stoker-pack FILE.h5 --h5-field NAME=DATASET[:KIND] ... [options] OUT\n"
            "                                         pack samples of several fields\n"
            "       stoker-pack --verify OUT          check every byte of a data set\n"
            "                                         (of an HDF5 file: read every record)\n"
            "       stoker-pack --info [--json] OUT   describe a data set\n"
            "       stoker-pack --version | --help\n"
            "\n"
            "SRC is an ImageFolder tree (one folder per class), a list file of\n"
            "'path<TAB>label' lines, a NumPy .npy array (one record per row), or an\n"
            "HDF5 file FILE.h5[:/DATASET] (one record per index along axis 0).\n"
            "\n"
            "options:\n"
            "  --shard-size SIZE  target shard size, with K/M/G suffixes (default %lldM)\n"
            "  --align N          payload alignment 1, 512 or 4096 (default: %lld, unless\n"
            "                     its padding would add more than 5%% to the payload:\n"
            "                     then 512, or 1 if 512's would too)\n"
            "  --jobs N           worker threads (default: online cores)\n"
            "  --validate         decode every JPEG and leave out damaged files (or records\n"
            "                     of an HDF5 file of encoded images); the default\n"
            "  --no-validate      check JPEG headers only: faster, but damage inside the\n"
            "                     compressed data is packed, and the data set is not\n"
            "                     marked checked (see below)\n"
            "  --strict           fail (no output) when any file would be left out\n"
            "  --rgb              convert CMYK/grey JPEG and PNG to RGB JPEG\n"
            "  --max-side N       re-encode images whose longer side exceeds N\n"
            "  --quality Q        JPEG quality of re-encoded images (default 90)\n"
            "  --seed S           seed of the storage order's shuffle (default 0)\n"
            "  --no-shuffle       store records in source order\n"
            "  --labels FILE      labels of a .npy source: an (N,) integer .npy;\n"
            "                     of an HDF5 source: the labels dataset's name\n"
            "  --force            replace a previous data set at OUT (nothing else)\n"
            "  --no-fsync         do not fsync the output before publishing it\n"
            "  --quiet            print errors only\n"
            "\n"
            "samples of several fields (README.md, \"Packing a data set\"):\n"
            "  --jsonl FILE       one sample per line: a JSON object of every field (image\n"
            "                     and mask fields: paths relative to FILE's folder; bytes: a\n"
            "                     string, or {\"path\": P}; numbers and nested lists for the\n"
            "                     rest); an optional \"key\"; other members are refused\n"
            "  --schema FILE      the fields, as Python's Writer(fields=...) dict in JSON;\n"
            "                     of --wds: extensions to fields (a kind, or an object\n"
            "                     with \"kind\", ... and \"name\"; null leaves it out)\n"
            "  --coco FILE        a COCO instances file: image, boxes (xyxy float32),\n"
            "                     classes (category_id), image_id per image; segmentation\n"
            "                     masks (polygons, RLE) are not packed\n"
            "  --images DIR       the folder of the COCO file's file_names\n"
            "  --wds A.tar ...    WebDataset shards: members KEY.EXT, consecutive members of\n"
            "                     one key a sample; a field per extension, named after it\n"
            "                     ('.' as '_'): jpg/jpeg jpeg, png png, cls int64, npy raw,\n"
            "                     others bytes; without --schema the first sample's\n"
            "                     extensions are the schema, and every sample has them all\n"
            "  --h5-field NAME=DATASET[:KIND[:TIE=FIELD]]\n"
            "                     a field from an HDF5 dataset (repeat it; every dataset of\n"
            "                     as many rows): numbers raw (int64/float32 for scalars),\n"
            "                     encoded rows bytes; KIND: bytes, jpeg, png, raw, int64,\n"
            "                     float32; TIE: mask_of, boxes_of or rows_of a field\n"
            "  --keep-crowd       keep iscrowd annotations (and an iscrowd field); by\n"
            "                     default they are left out\n"
            "  --skip-bad         leave out (and count) a bad sample instead of failing;\n"
            "                     every JPEG and PNG field is decoded unless --no-validate\n"
            "\n"
            "A data set whose JPEGs were all decoded without damage here is marked checked\n"
            "(--info says so). The loader's default decoder (auto) sends JPEGs to the GPU's\n"
            "hardware decoder only from a checked data set: that decoder does not report\n"
            "damage inside the compressed data. An unchecked data set is decoded on the CPU\n"
            "unless the loader is told to use the GPU (decoder gpu).\n",
            (long long)(table_default(STOKER_OPT_SHARD_SIZE) >> 20),
            (long long)table_default(STOKER_OPT_ALIGN));
}

enum {
    OPT_SHARD_SIZE = 256,
    OPT_ALIGN,
    OPT_JOBS,
    OPT_VALIDATE,
    OPT_NO_VALIDATE,
    OPT_STRICT,
    OPT_MAX_SIDE,
    OPT_QUALITY,
    OPT_RGB,
    OPT_SEED,
    OPT_NO_SHUFFLE,
    OPT_FORCE,
    OPT_QUIET,
    OPT_LABELS,
    OPT_JSONL,
    OPT_SCHEMA,
    OPT_COCO,
    OPT_IMAGES,
    OPT_SKIP_BAD,
    OPT_KEEP_CROWD,
    OPT_WDS,
    OPT_H5_FIELD,
    OPT_NO_FSYNC,
    OPT_VERIFY,
    OPT_INFO,
    OPT_JSON,
    OPT_VERSION,
    OPT_HELP = 'h', /* -h too */
};

static const struct option long_opts[] = {
    {"shard-size", required_argument, NULL, OPT_SHARD_SIZE},
    {"align", required_argument, NULL, OPT_ALIGN},
    {"jobs", required_argument, NULL, OPT_JOBS},
    {"validate", no_argument, NULL, OPT_VALIDATE},
    {"no-validate", no_argument, NULL, OPT_NO_VALIDATE},
    {"strict", no_argument, NULL, OPT_STRICT},
    {"max-side", required_argument, NULL, OPT_MAX_SIDE},
    {"quality", required_argument, NULL, OPT_QUALITY},
    {"rgb", no_argument, NULL, OPT_RGB},
    {"seed", required_argument, NULL, OPT_SEED},
    {"no-shuffle", no_argument, NULL, OPT_NO_SHUFFLE},
    {"force", no_argument, NULL, OPT_FORCE},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"labels", required_argument, NULL, OPT_LABELS},
    {"jsonl", required_argument, NULL, OPT_JSONL},
    {"schema", required_argument, NULL, OPT_SCHEMA},
    {"coco", required_argument, NULL, OPT_COCO},
    {"images", required_argument, NULL, OPT_IMAGES},
    {"skip-bad", no_argument, NULL, OPT_SKIP_BAD},
    {"keep-crowd", no_argument, NULL, OPT_KEEP_CROWD},
    {"wds", required_argument, NULL, OPT_WDS},
    {"h5-field", required_argument, NULL, OPT_H5_FIELD},
    {"no-fsync", no_argument, NULL, OPT_NO_FSYNC},
    {"verify", no_argument, NULL, OPT_VERIFY},
    {"info", no_argument, NULL, OPT_INFO},
    {"json", no_argument, NULL, OPT_JSON},
    {"version", no_argument, NULL, OPT_VERSION},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

/* An int option in lo..hi; -1 to go on, else an exit code. */
static int take_int(const char *name, const char *arg, int64_t lo, int64_t hi, int32_t *out)
{
    int64_t v;
    if (cli_int(name, arg, lo, hi, &v) < 0)
        return PACK_USAGE;
    *out = (int32_t)v;
    return -1;
}

static int take_align(const char *name, const char *arg, pack_opts *o)
{
    int64_t v;
    if (!cli_parse_int(arg, &v) || (v != 1 && v != 512 && v != 4096)) {
        cli_bad_value(name, arg, "1, 512 or 4096");
        return PACK_USAGE;
    }
    o->align = (int32_t)v;
    o->align_set = true;
    return -1;
}

/* One option; returns -1 to go on, else an exit code. */
static int take_option(int c, const char *name, const char *arg, pack_opts *o)
{
    if (c == OPT_VERIFY || c == OPT_INFO) {
        const pack_mode m = c == OPT_VERIFY ? MODE_VERIFY : MODE_INFO;
        if (o->mode != MODE_PACK && o->mode != m) {
            cli_err("choose one of --verify and --info");
            return PACK_USAGE;
        }
    }
    switch (c) {
    case OPT_SHARD_SIZE: return cli_size(name, arg, &o->shard_size) < 0 ? PACK_USAGE : -1;
    case OPT_ALIGN: return take_align(name, arg, o);
    case OPT_JOBS: return take_int(name, arg, 1, 1024, &o->jobs);
    case OPT_VALIDATE: o->validate_set = true; return -1;
    case OPT_NO_VALIDATE: o->no_validate = true; return -1;
    case OPT_STRICT: o->strict = true; return -1;
    case OPT_MAX_SIDE: return take_int(name, arg, 1, 65535, &o->max_side);
    case OPT_QUALITY: o->quality_set = true; return take_int(name, arg, 1, 100, &o->quality);
    case OPT_RGB: o->rgb = true; return -1;
    case OPT_SEED: o->seed_set = true; return cli_u64(name, arg, &o->seed) < 0 ? PACK_USAGE : -1;
    case OPT_NO_SHUFFLE: o->shuffle = false; return -1;
    case OPT_FORCE: o->force = true; return -1;
    case OPT_QUIET: o->quiet = true; return -1;
    case OPT_LABELS: o->labels = arg; return -1;
    case OPT_JSONL: o->jsonl = arg; return -1;
    case OPT_SCHEMA: o->schema = arg; return -1;
    case OPT_COCO: o->coco = arg; return -1;
    case OPT_IMAGES: o->images = arg; return -1;
    case OPT_SKIP_BAD: o->skip_bad = true; return -1;
    case OPT_KEEP_CROWD: o->keep_crowd = true; return -1;
    case OPT_WDS: o->wds = arg; return -1;
    case OPT_H5_FIELD:
        if (o->n_h5_fields == STOKER_MAX_FIELDS) {
            cli_err("--h5-field: at most %d fields", STOKER_MAX_FIELDS);
            return PACK_USAGE;
        }
        o->h5_fields[o->n_h5_fields++] = arg;
        return -1;
    case OPT_NO_FSYNC: o->fsync = false; return -1;
    case OPT_VERIFY: o->mode = MODE_VERIFY; return -1;
    case OPT_INFO: o->mode = MODE_INFO; return -1;
    case OPT_JSON: o->json = true; return -1;
    case OPT_VERSION:
        printf("stoker-pack %s (library %s, shard format %d, manifest %d)\n",
               STOKER_VERSION_STRING_TOOL, stoker_version_string(), STOKER_FORMAT_VERSION,
               STOKER_MANIFEST_VERSION);
        return PACK_OK;
    case OPT_HELP: usage(stdout); return PACK_OK;
    default: return PACK_USAGE; /* CLI_ERROR: reported */
    }
}

/* Is the source one of samples of several fields (--jsonl, --coco, --wds)? */
static bool samples_source(const pack_opts *o)
{
    return o->jsonl || o->coco || o->wds || o->n_h5_fields;
}

/* The options of the sources of samples, each refused where it would mean nothing; -1 to go
 * on, else an exit code. */
static int check_samples_options(const pack_opts *o)
{
    const int sources = !!o->jsonl + !!o->coco + !!o->wds + !!o->n_h5_fields;
    const char *bad = NULL;
    if (sources > 1)
        bad = "choose one of --jsonl, --coco, --wds and --h5-field";
    else if (o->jsonl && !o->schema)
        bad = "--jsonl needs --schema FILE: the fields of its samples";
    else if (o->schema && !o->jsonl && !o->wds)
        bad = "--schema is an option of --jsonl and --wds";
    else if (o->coco && !o->images)
        bad = "--coco needs --images DIR: the folder its file_names are relative to";
    else if (o->images && !o->coco)
        bad = "--images is an option of --coco";
    else if (o->keep_crowd && !o->coco)
        bad = "--keep-crowd is an option of --coco";
    else if (o->skip_bad && !sources)
        bad = "--skip-bad is an option of --jsonl, --coco, --wds and --h5-field (an image "
              "folder or list leaves bad files out already; --strict makes them fail the pack)";
    else if (o->skip_bad && o->strict)
        bad = "choose one of --skip-bad and --strict";
    else if (sources && (o->rgb || o->max_side > 0))
        bad = "--rgb and --max-side re-encode image files, not the image fields of samples "
              "(a mask or boxes tied to an image would no longer match it)";
    else if (sources && o->labels)
        bad = o->n_h5_fields ? "--labels is no option of --h5-field: make the labels a field "
                               "(label=/labels)"
                             : "--labels is only for a .npy or HDF5 source";
    if (bad && o->mode == MODE_PACK) {
        cli_err("%s", bad);
        return PACK_USAGE;
    }
    return -1;
}

/* Options that mean nothing to the mode chosen would be ignored: refused instead. */
static int check_combination(const pack_opts *o)
{
    const char *what = o->mode == MODE_VERIFY ? "--verify" : "--info";
    if (o->mode != MODE_PACK && (o->pack_option || (o->mode == MODE_INFO && o->quiet))) {
        cli_err("--%s is an option of packing; %s takes none of those",
                o->pack_option ? o->pack_option : "quiet", what);
        return PACK_USAGE;
    }
    if (o->validate_set && o->no_validate) {
        cli_err("choose one of --validate and --no-validate");
        return PACK_USAGE;
    }
    if (o->json && o->mode != MODE_INFO) {
        cli_err("--json is an option of --info");
        return PACK_USAGE;
    }
    if (o->mode == MODE_PACK && o->quality_set && !o->rgb && o->max_side == 0) {
        cli_err("--quality sets the quality of re-encoded images: give --rgb or --max-side "
                "with it");
        return PACK_USAGE;
    }
    if (o->mode == MODE_PACK && o->seed_set && !o->shuffle) {
        cli_err("--seed chooses the shuffle, and --no-shuffle turns it off: give one of them");
        return PACK_USAGE;
    }
    return check_samples_options(o);
}

/* The operands: SRC OUT to pack, one path to --verify or --info. */
static int take_operands(int argc, char **argv, pack_opts *o)
{
    if (o->mode == MODE_PACK && o->wds) {
        if (argc - optind < 1) {
            cli_usage("no output given (stoker-pack --wds A.tar [B.tar ...] [options] OUT)");
            return PACK_USAGE;
        }
        o->src = o->wds;
        o->wds_more = argv + optind;
        o->n_wds_more = argc - optind - 1;
        o->out = argv[argc - 1];
        return -1;
    }
    if (o->mode == MODE_PACK && (o->jsonl || o->coco)) {
        if (argc - optind != 1) {
            cli_usage("%s (stoker-pack %s FILE%s [options] OUT)",
                      argc == optind ? "no output given" : "expected one operand, OUT",
                      o->jsonl ? "--jsonl" : "--coco",
                      o->jsonl ? " --schema FILE" : " --images DIR");
            return PACK_USAGE;
        }
        o->src = o->jsonl ? o->jsonl : o->coco;
        o->out = argv[optind];
        return -1;
    }
    const int rest = argc - optind, want = o->mode == MODE_PACK ? 2 : 1;
    const char *what = o->mode == MODE_VERIFY ? "--verify" : "--info";
    if (rest > want) {
        cli_usage("unexpected argument '%s' (%s)", argv[optind + want],
                  o->mode == MODE_PACK ? "expected SRC OUT" : "expected one path");
    } else if (rest == 0 && o->mode == MODE_PACK) {
        cli_usage("no source and output given (stoker-pack [options] SRC OUT)");
    } else if (rest == 0) {
        cli_usage("%s needs the data set to read", what);
    } else if (rest < want) {
        cli_usage("missing the output: where should the data set from '%s' go? "
                  "(stoker-pack [options] SRC OUT)",
                  argv[optind]);
    } else {
        o->src = o->mode == MODE_PACK ? argv[optind] : NULL;
        o->out = argv[argc - 1];
        return -1;
    }
    return PACK_USAGE;
}

static int parse_args(int argc, char **argv, pack_opts *o)
{
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    *o = (pack_opts){.mode = MODE_PACK,
                     .shard_size = table_default(STOKER_OPT_SHARD_SIZE),
                     .align = (int)table_default(STOKER_OPT_ALIGN),
                     .jobs = cpus > 0 ? (int)cpus : 1,
                     .quality = 90,
                     .shuffle = true,
                     .fsync = table_default(STOKER_OPT_FSYNC) != 0};
    int c;
    const char *name, *arg;
    while ((c = cli_next(argc, argv, long_opts, &name, &arg)) != CLI_END) {
        if (c >= OPT_SHARD_SIZE && c <= OPT_NO_FSYNC && c != OPT_QUIET && !o->pack_option)
            o->pack_option = name;
        const int rc = take_option(c, name, arg, o);
        if (rc >= 0)
            return rc;
    }
    o->validate = !o->no_validate;
    const int rc = check_combination(o);
    return rc >= 0 ? rc : take_operands(argc, argv, o);
}

/* kind: what the source is; validate: what is checked (validate_summary); align_why: how
 * the default alignment was chosen, or NULL (--align). */
static void print_options(const pack_opts *o, const char *kind, const char *validate,
                          const char *align_why)
{
    fprintf(stderr, "stoker-pack %s (library %s, shard format %d, manifest %d)\n",
            STOKER_VERSION_STRING_TOOL, stoker_version_string(), STOKER_FORMAT_VERSION,
            STOKER_MANIFEST_VERSION);
    fputs("  source       ", stderr);
    cli_put_escaped(stderr, o->src);
    fprintf(stderr, " (%s)\n  output       ", kind);
    cli_put_escaped(stderr, o->out);
    fprintf(stderr, "\n  shard-size   %lld bytes\n  align        %d", (long long)o->shard_size,
            o->align);
    if (align_why)
        fprintf(stderr, " (default for these records: %s)", align_why);
    fprintf(stderr, "\n  jobs         %d\n", o->jobs);
    fprintf(stderr, "  validate     %s\n  strict       %s\n  rgb          %s\n", validate,
            o->strict ? "yes" : "no", o->rgb ? "yes" : "no");
    fprintf(stderr, "  max-side     %d%s\n  quality      %d\n", o->max_side,
            o->max_side ? "" : " (no resizing)", o->quality);
    fprintf(stderr, "  order        %s (seed %llu)\n  force        %s\n  fsync        %s\n",
            o->shuffle ? "shuffled" : "source order", (unsigned long long)o->seed,
            o->force ? "yes" : "no", o->fsync ? "yes" : "no");
    if (o->labels) {
        fputs("  labels       ", stderr);
        cli_put_escaped(stderr, o->labels);
        fputc('\n', stderr);
    }
}

static void print_summary(const pack_opts *o, const pack_result *r, double secs)
{
    int32_t shards = -1;
    stoker_dataset *ds = NULL;
    if (stoker_dataset_open(&ds, o->out, NULL) == 0)
        shards = stoker_dataset_num_shards(ds);
    stoker_dataset_close(ds);
    const double dt = secs > 1e-6 ? secs : 1e-6;
    cli_err("wrote %s: %lld records, %lld bytes, %d shard%s, %zu skipped, %.2f s, "
            "%.0f records/s, %.1f MB/s",
            o->out, (long long)r->records, (long long)r->bytes, shards, shards == 1 ? "" : "s",
            r->skips.n, secs, (double)r->records / dt, (double)r->bytes / dt / 1e6);
}

static void print_skips(const pack_skips *s, const char *noun)
{
    if (s->n == 0)
        return;
    fprintf(stderr, "stoker-pack: %zu %s%s left out:\n", s->n, noun, s->n == 1 ? "" : "s");
    for (size_t i = 0; i < s->n && i < 20; i++) {
        fputs("  ", stderr);
        cli_put_escaped(stderr, s->lines[i]);
        fputc('\n', stderr);
    }
    if (s->n > 20)
        fprintf(stderr, "  ... and %zu more\n", s->n - 20);
}

/* checked: every record added will have been decoded without damage, or encoded here
 * (records_checked); the manifest then says so. */
static stoker_writer *open_writer(const pack_opts *o, bool checked, int *exit_code)
{
    stoker_config *cfg = NULL;
    stoker_writer *w = NULL;
    if (stoker_config_create(&cfg) < 0) {
        cli_err("out of memory");
        *exit_code = PACK_FAIL;
        return NULL;
    }
    stoker_config_set_int(cfg, STOKER_OPT_SHARD_SIZE, o->shard_size);
    stoker_config_set_int(cfg, STOKER_OPT_ALIGN, o->align);
    stoker_config_set_int(cfg, STOKER_OPT_OVERWRITE, o->force);
    stoker_config_set_int(cfg, STOKER_OPT_FSYNC, o->fsync);
    stoker_config_set_int(cfg, STOKER_OPT_JPEG_CHECKED, checked);
    const int rc = stoker_writer_create(&w, o->out, cfg);
    stoker_config_destroy(cfg);
    if (rc < 0) {
        if (w && *stoker_writer_errmsg(w))
            cli_err("%s", stoker_writer_errmsg(w)); /* names the file already */
        else
            cli_err("%s: %s", o->out, stoker_strerror(rc));
        if (rc == STOKER_E_EXISTS && !o->force)
            cli_err("%s exists; use --force to replace it", o->out);
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

/* What is being packed. Image files, and the records of an HDF5 source of JPEGs or one given
 * image options, go through pack_images; .npy rows and other HDF5 records are copied as
 * they are. */
typedef enum input_kind {
    IN_FOLDER,
    IN_LIST,
    IN_NPY,
    IN_H5,
    IN_H5_IMAGES,
    IN_SAMPLES, /* samples of several fields: --jsonl, --coco (fields.h) */
} input_kind;

typedef struct input {
    input_kind kind;
    pack_source files; /* IN_FOLDER, IN_LIST, IN_H5_IMAGES */
    pack_npy data, labels;
    bool has_labels;
    stoker_dataset *h5;   /* IN_H5, IN_H5_IMAGES */
    pack_samples samples; /* IN_SAMPLES */
} input;

/* The image options given: validation is on by default, and only --validate asked for
 * counts here, so that raw sources refuse it but pack as before without it. */
static bool image_options(const pack_opts *o)
{
    return o->validate_set || o->strict || o->rgb || o->max_side > 0;
}

/* Image options on raw records would be ignored: refused, naming them and the source. */
static int refuse_image_options(const pack_opts *o, const char *holds)
{
    if (!image_options(o))
        return 0;
    char names[64];
    snprintf(names, sizeof names, "%s%s%s%s", o->validate_set ? " --validate" : "",
             o->strict ? " --strict" : "", o->rgb ? " --rgb" : "",
             o->max_side ? " --max-side" : "");
    cli_err("%s holds %s, not images:%s appl%s to JPEG and PNG images only", o->src, holds, names,
            strchr(names + 1, ' ') ? "y" : "ies");
    return PACK_USAGE;
}

static int open_npy(const pack_opts *o, input *in)
{
    if (pack_npy_open(o->src, &in->data) < 0)
        return PACK_FAIL;
    const int code = refuse_image_options(o, "a NumPy array (raw records)");
    if (code != 0 || !o->labels)
        return code;
    if (pack_npy_open(o->labels, &in->labels) < 0)
        return PACK_FAIL;
    in->has_labels = true;
    if (in->labels.ndim != 0 || (in->labels.kind != 'i' && in->labels.kind != 'u')) {
        cli_err("%s: labels must be a 1-d integer array", o->labels);
        return PACK_FAIL;
    }
    if (in->labels.rows != in->data.rows) {
        cli_err("%s: %llu labels for %llu rows of %s", o->labels,
                (unsigned long long)in->labels.rows, (unsigned long long)in->data.rows, o->src);
        return PACK_FAIL;
    }
    return 0;
}

/* An HDF5 source: raw records refuse image options; encoded ones (variable-length or blob
 * records) given image options are checked and converted as image files are, and so are
 * JPEG records (the library's field: record 0 is a JPEG) by default, so that a data set of
 * JPEGs is checked whatever its source. With --no-validate and no other image option they
 * are copied as they are, and the data set is not marked checked. */
static int open_h5(const pack_opts *o, input *in)
{
    int code = pack_h5_open(o, &in->h5);
    int32_t kind = 0;
    if (code == 0)
        stoker_dataset_field(in->h5, &kind, NULL, NULL, NULL);
    if (code == 0 && kind == STOKER_FIELD_RAW)
        code = refuse_image_options(o, "raw records (a numeric array)");
    else if (code == 0 && (image_options(o) || (kind == STOKER_FIELD_JPEG && o->validate))) {
        in->kind = IN_H5_IMAGES;
        code = pack_h5_items(o, in->h5, &in->files);
    }
    return code;
}

/* Scans the source; returns 0 or an exit code. */
static int load_source(const pack_opts *o, input *in)
{
    struct stat st;
    if (samples_source(o)) {
        in->kind = IN_SAMPLES;
        return o->jsonl  ? pack_jsonl_load(o, &in->samples)
               : o->coco ? pack_coco_load(o, &in->samples)
               : o->wds  ? pack_wds_load(o, &in->samples)
                         : pack_h5_fields_load(o, &in->samples);
    }
    in->kind = IN_H5;
    if (pack_is_h5(o->src))
        return open_h5(o, in);
    if (stat(o->src, &st) != 0) {
        cli_err("%s: %s", o->src, strerror(errno));
        return PACK_FAIL;
    }
    in->kind = S_ISDIR(st.st_mode) ? IN_FOLDER : pack_is_npy(o->src) ? IN_NPY : IN_LIST;
    if (o->labels && in->kind != IN_NPY) {
        cli_err("--labels is only for a .npy or HDF5 source");
        return PACK_USAGE;
    }
    if (in->kind == IN_NPY)
        return open_npy(o, in);
    const int rc = in->kind == IN_FOLDER ? pack_scan_folder(o->src, o->quiet, &in->files)
                                         : pack_scan_list(o->src, &in->files);
    return rc < 0 ? PACK_FAIL : 0;
}

static size_t count_records(const input *in)
{
    switch (in->kind) {
    case IN_NPY: return (size_t)in->data.rows;
    case IN_H5: return in->h5 ? (size_t)stoker_dataset_num_records(in->h5) : 0;
    case IN_SAMPLES: return in->samples.n;
    default: return in->files.n;
    }
}

static const char *kind_name(const input *in)
{
    static const char *const names[] = {"image folder", "list file", "npy array", "HDF5 file",
                                        "HDF5 file, records as images"};
    if (in->kind == IN_SAMPLES)
        return in->samples.source;
    return names[in->kind];
}

/* Every record pack_images adds with validation on was decoded by libjpeg without an error
 * or a warning (pack_image_inspect with PACK_IMAGE_DECODE), or encoded by this tool (--rgb,
 * --max-side): what STOKER_OPT_JPEG_CHECKED vouches for. Copied records are not decoded. */
/* Samples with a JPEG or PNG field: the only ones the mark "checked" may be given to. */
static bool has_images(const input *in)
{
    for (int32_t i = 0; i < in->samples.schema.n; i++)
        if (in->samples.schema.f[i].kind == STOKER_FIELD_JPEG ||
            in->samples.schema.f[i].kind == STOKER_FIELD_PNG)
            return true;
    return false;
}

static bool records_checked(const pack_opts *o, const input *in)
{
    return o->validate && (in->kind == IN_FOLDER || in->kind == IN_LIST ||
                           in->kind == IN_H5_IMAGES || (in->kind == IN_SAMPLES && has_images(in)));
}

/* The summary's validate line. */
static const char *validate_summary(const pack_opts *o, const input *in)
{
    if (records_checked(o, in) && in->kind == IN_SAMPLES)
        return "yes (every JPEG and PNG field decoded; the data set is marked checked)";
    if (records_checked(o, in))
        return "yes (every JPEG decoded; the data set is marked checked)";
    if (in->kind == IN_SAMPLES && !has_images(in))
        return "n/a (no JPEG or PNG field)";
    if (in->kind == IN_SAMPLES)
        return "no (--no-validate: image headers only; not marked checked)";
    if (in->kind == IN_NPY || (in->kind == IN_H5 && !o->no_validate))
        return "n/a (not JPEG records: copied as they are)";
    if (in->kind == IN_H5)
        return "no (--no-validate: records copied as they are; not marked checked)";
    return "no (--no-validate: JPEG headers only; not marked checked)";
}

static int declare_field(stoker_writer *w, const input *in)
{
    if (in->kind == IN_H5)
        return pack_h5_field(w, in->h5);
    if (in->kind == IN_SAMPLES) {
        const pack_schema *sc = &in->samples.schema;
        if (stoker_writer_set_fields(w, sc->f, sc->n) == 0)
            return 0;
        cli_err("%s: %s", in->samples.schema_from, stoker_writer_errmsg(w));
        return PACK_USAGE;
    }
    int rc = in->kind == IN_NPY ? stoker_writer_set_field(w, STOKER_FIELD_RAW, in->data.dtype,
                                                          in->data.ndim, in->data.shape)
                                : stoker_writer_set_field(w, STOKER_FIELD_JPEG, 0, 0, NULL);
    for (size_t i = 0; rc == 0 && i < in->files.nclasses; i++)
        rc = stoker_writer_add_class(w, in->files.classes[i]);
    if (rc < 0)
        cli_err("%s", stoker_writer_errmsg(w));
    return rc < 0 ? PACK_FAIL : 0;
}

static int add_all(const pack_opts *o, const input *in, const size_t *order, stoker_writer *w,
                   pack_result *res)
{
    switch (in->kind) {
    case IN_NPY: return pack_rows(o, &in->data, in->has_labels ? &in->labels : NULL, order, w, res);
    case IN_H5: return pack_h5_rows(o, in->h5, order, w, res);
    case IN_SAMPLES: return pack_samples_write(o, &in->samples, order, w, res);
    default: return pack_images(o, &in->files, order, w, res);
    }
}

/* Writes everything and publishes it; returns an exit code. */
static int write_all(const pack_opts *o, const input *in, const size_t *order, pack_result *res)
{
    int code = 0;
    exit_at_once = 0;
    stoker_writer *w = open_writer(o, records_checked(o, in), &code);
    if (!w)
        return code;
    live_writer = w;
    if (pack_interrupted)
        stoker_writer_cancel(w);
    code = declare_field(w, in);
    if (code == 0)
        code = add_all(o, in, order, w, res);
    if (code == 0) {
        const int rc = stoker_writer_finish(w);
        if (rc == STOKER_E_CANCELED || (rc < 0 && pack_interrupted)) {
            code = PACK_INTERRUPTED;
        } else if (rc == STOKER_E_EMPTY) {
            cli_err("%s: no records (every %s was left out)", o->src,
                    in->kind == IN_H5_IMAGES ? "record"
                    : in->kind == IN_SAMPLES ? "sample"
                                             : "file");
            code = PACK_FAIL;
        } else if (rc < 0) {
            cli_err("%s", stoker_writer_errmsg(w));
            code = PACK_FAIL;
        }
    }
    drop_writer(w);
    if (code == 0)
        pack_remove_leftovers(o->out, o->quiet);
    if (code == PACK_INTERRUPTED)
        cli_err("interrupted; %s left as it was", o->out);
    return code;
}

/* The size of file item `it` as found: the scan's, else (a list file's) stat's; 0 when it
 * cannot be read (it will be left out). */
static uint64_t item_size(const pack_item *it)
{
    struct stat st;
    if (it->size >= 0)
        return (uint64_t)it->size;
    return stat(it->path, &st) == 0 && S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
}

/* The padding the source's records would take at each alignment: from the sizes of the
 * records as found, before they are checked or re-encoded (a file left out counts too), so
 * that the choice is made before anything is written and depends on the source alone. */
static void measure(const input *in, pack_padding *pp)
{
    *pp = (pack_padding){0};
    if (in->kind == IN_NPY) {
        pack_padding_add(pp, in->data.row_bytes, in->data.rows);
    } else if (in->kind == IN_H5) {
        const int64_t n = stoker_dataset_num_records(in->h5);
        for (int64_t i = 0; i < n; i++) {
            uint64_t size = 0;
            stoker_dataset_record_info(in->h5, i, &size, NULL, NULL);
            pack_padding_add(pp, size, 1);
        }
    } else if (in->kind == IN_SAMPLES) {
        for (size_t i = 0; i < in->samples.n; i++) {
            uint64_t size = 0;
            for (int32_t f = 0; f < in->samples.schema.n; f++)
                size += in->samples.s[i].v[f].size;
            pack_padding_add(pp, size, 1);
        }
    } else {
        for (size_t i = 0; i < in->files.n; i++)
            pack_padding_add(pp, item_size(&in->files.items[i]), 1);
    }
}

/* Everything a pack needs before the writer starts; 0 or an exit code. Without --align, the
 * alignment is chosen here, from the records (align.c). */
static int prepare(pack_opts *o, input *in)
{
    struct stat st;
    int code = pack_check_out_folder(o->out);
    if (code == 0)
        code = pack_check_paths(o);
    if (code == 0 && !o->force && lstat(o->out, &st) == 0) {
        cli_err("%s exists; use --force to replace it", o->out);
        code = PACK_USAGE;
    }
    if (code == 0)
        code = load_source(o, in);
    if (code == 0 && in->kind != IN_H5_IMAGES)
        code = pack_check_items(o, &in->files);
    char why[160];
    if (code == 0 && !o->align_set) {
        pack_padding pp;
        measure(in, &pp);
        o->align = pack_padding_align(&pp);
        pack_padding_describe(&pp, why, sizeof why);
    }
    if (code == 0 && !o->quiet)
        print_options(o, kind_name(in), validate_summary(o, in), o->align_set ? NULL : why);
    if (code == 0 && count_records(in) == 0) {
        cli_err("%s: no records (%s)", o->src,
                in->kind == IN_FOLDER    ? "no image files found"
                : in->kind == IN_LIST    ? "the list names no files"
                : in->kind == IN_SAMPLES ? (in->samples.bad.n ? "every sample was left out"
                                                              : "the source lists no samples")
                                         : "the source holds no records");
        code = PACK_FAIL;
    }
    if (code == 0 && !o->quiet && (in->kind == IN_FOLDER || in->kind == IN_LIST))
        fprintf(stderr, "stoker-pack: %zu files in %zu classes%s\n", in->files.n,
                in->files.nclasses, in->files.ignored ? " (non-image files ignored)" : "");
    return code;
}

static int run_pack(pack_opts *o)
{
    input in = {0};
    int code = prepare(o, &in);
    const size_t n = count_records(&in);
    size_t *order = code == 0 ? pack_order(n, o->shuffle, o->seed) : NULL;
    pack_result res = {0};
    const double t0 = pack_now();
    if (code == 0)
        code = order ? write_all(o, &in, order, &res) : PACK_FAIL;
    if (code == 0 || code == PACK_FAIL)
        print_skips(&res.skips, in.kind == IN_H5_IMAGES ? "record"
                                : in.kind == IN_SAMPLES ? "sample"
                                                        : "file");
    if (code == 0 && !o->quiet)
        print_summary(o, &res, pack_now() - t0);
    free(order);
    pack_skips_free(&res.skips);
    pack_source_free(&in.files);
    pack_npy_close(&in.data);
    pack_npy_close(&in.labels);
    stoker_dataset_close(in.h5);
    pack_samples_free(&in.samples);
    return code;
}

int main(int argc, char **argv)
{
    cli_init("stoker-pack");
    pack_opts o;
    const int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (o.mode == MODE_VERIFY)
        return pack_verify(o.out, o.quiet);
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
