/* SPDX-License-Identifier: Apache-2.0 */
/* The option table and the config object. */
#include "common/config.h"

#include <float.h>
#include <string.h>

enum opt_kind {
    OPT_INT = STOKER_OPTION_INT,
    OPT_FLOAT = STOKER_OPTION_FLOAT,
    OPT_STRING = STOKER_OPTION_STRING,
};

/* flags: set_int takes 0 as "the default"; the value is a number of bytes, of
 * milliseconds (stoker_option_unit) */
enum { ZERO_IS_DEFAULT = 1, BYTES = 2, MS = 4 };

typedef struct opt_desc {
    stoker_option key;
    const char *name;
    enum opt_kind kind;
    uint8_t applies; /* STOKER_FOR_* bits */
    uint8_t flags;
    stoker_enum values; /* the enum naming its values, or 0 */
    int64_t def;        /* an integer's default */
    int64_t min, max;   /* an integer's range */
    double fdef;        /* a float's default */
    double fmin, fmax;  /* a float's range */
    const char *sdef;   /* a string's default */
    int slot;           /* float/string slot */
    const char *doc;    /* one line: what it sets, its default */
} opt_desc;

#define GiB (INT64_C(1) << 30)
#define MiB (INT64_C(1) << 20)
#define W STOKER_FOR_WRITER
#define D STOKER_FOR_DATASET
#define L STOKER_FOR_LOADER

/* Rows: an integer (range, default, flags), one of an enum's values (the enum names them),
 * a float or a string (their slot in the config). */
#define INT(key, name, applies, def, min, max, flags, doc)                                         \
    {                                                                                              \
        key, name, OPT_INT, applies, flags, (stoker_enum)0, def, min, max, 0, 0, 0, NULL, 0, doc   \
    }
#define ENUM(key, name, applies, values, def, max, flags, doc)                                     \
    {                                                                                              \
        key, name, OPT_INT, applies, flags, values, def, 0, max, 0, 0, 0, NULL, 0, doc             \
    }
#define FLOAT(key, name, slot, def, min, max, doc)                                                 \
    {                                                                                              \
        key, name, OPT_FLOAT, L, 0, (stoker_enum)0, 0, 0, 0, def, min, max, NULL, slot, doc        \
    }
#define STRING(key, name, applies, slot, def, doc)                                                 \
    {                                                                                              \
        key, name, OPT_STRING, applies, 0, (stoker_enum)0, 0, 0, 0, 0, 0, 0, def, slot, doc        \
    }

/* The one table of options: every option's name, type, the objects it applies to, its
 * range, default and doc line. stoker_option_name/_doc/_describe and stoker_enum_* (for
 * STOKER_ENUM_OPTION) read it; so do the Python binding (at run time) and
 * tests/python/test_option_table.py, which fails while a row's option is missing from
 * stoker.h, the Python binding's keywords and properties or stoker-bench's flags (unless
 * listed there as left out on purpose). The doc line is the short form of the comment
 * beside the key in stoker.h; defaults are also in docs/SEMANTICS.md. */
static const opt_desc OPTS[] = {
    /* writer */
    INT(STOKER_OPT_SHARD_SIZE, "shard_size", W, 256 * MiB, 4096, INT64_C(1) << 40, BYTES,
        "target shard size in bytes; default 256 MiB"),
    INT(STOKER_OPT_ALIGN, "align", W, 4096, 0, 4096, ZERO_IS_DEFAULT,
        "payload alignment in bytes: 1, 512 or 4096; default 4096"),
    INT(STOKER_OPT_OVERWRITE, "overwrite", W, 0, 0, 1, 0,
        "1: replace a previous data set (only); default 0"),
    INT(STOKER_OPT_FSYNC, "fsync", W, 1, 0, 1, 0,
        "1: fsync shards and manifest before publishing; default 1"),
    INT(STOKER_OPT_JPEG_CHECKED, "jpeg_checked", W, 0, 0, 1, 0,
        "1: the caller vouches that libjpeg decoded every JPEG record without damage; default 0"),
    /* limits on untrusted input */
    INT(STOKER_OPT_MAX_RECORD_SIZE, "max_record_size", W | D | L, GiB, 1, INT64_C(1) << 40, BYTES,
        "largest record in bytes; default 1 GiB"),
    INT(STOKER_OPT_MAX_RECORDS, "max_records", W | D | L, INT64_C(1) << 28, 1, INT64_C(1) << 32, 0,
        "most records per shard; default 2^28"),
    INT(STOKER_OPT_MAX_PIXELS, "max_pixels", L, INT64_C(1) << 28, 1, INT64_C(1) << 40, 0,
        "most pixels of a decoded image; default 2^28"),
    INT(STOKER_OPT_MAX_SHARDS, "max_shards", W | D | L, INT64_C(1) << 20, 1, INT64_C(1) << 24, 0,
        "most shards per data set; default 2^20"),
    /* loader: order */
    INT(STOKER_OPT_BATCH_SIZE, "batch_size", L, 256, 1, INT64_C(1) << 24, 0,
        "records per batch, per rank; default 256"),
    INT(STOKER_OPT_SHUFFLE, "shuffle", L, 1, 0, 1, 0, "1: shuffle every epoch; default 1"),
    INT(STOKER_OPT_SEED, "seed", L, 0, INT64_MIN, INT64_MAX, 0,
        "the 64-bit seed of the order and the random crops; default 0"),
    INT(STOKER_OPT_DROP_LAST, "drop_last", L, 0, 0, 1, 0,
        "1: drop an epoch's last, partial batch; default 0"),
    INT(STOKER_OPT_RANK, "rank", L, 0, 0, INT64_C(1) << 20, 0,
        "this process's rank; default 0 (or RANK with dist_env)"),
    INT(STOKER_OPT_WORLD_SIZE, "world_size", L, 1, 0, INT64_C(1) << 20, ZERO_IS_DEFAULT,
        "number of ranks; default 1 (or WORLD_SIZE with dist_env)"),
    INT(STOKER_OPT_DIST_ENV, "dist_env", L, 0, 0, 1, 0,
        "1: take rank, world size and local rank from RANK, WORLD_SIZE, LOCAL_RANK; default 0"),
    INT(STOKER_OPT_EPOCH, "epoch", L, 0, 0, INT64_C(1) << 40, 0, "first epoch; default 0"),
    ENUM(STOKER_OPT_ORDER, "order", L, STOKER_ENUM_ORDER, STOKER_ORDER_RECORDS, 2, ZERO_IS_DEFAULT,
         "how each epoch's permutation is drawn; default records"),
    /* loader: machinery */
    INT(STOKER_OPT_THREADS, "threads", L, 0, 0, 1024, 0,
        "worker threads; default the rank's cores - 1 (affinity, cgroup quota, "
        "LOCAL_WORLD_SIZE; at least 1)"),
    INT(STOKER_OPT_DEPTH, "depth", L, 0, 0, 1024, ZERO_IS_DEFAULT,
        "batch slots in flight; default 4, more for image transforms (up to 16, +4 with GPU "
        "decoding)"),
    ENUM(STOKER_OPT_BACKEND, "backend", L, STOKER_ENUM_BACKEND, STOKER_BACKEND_AUTO, 2, 0,
         "the read back-end: auto, io_uring or pread; default auto"),
    INT(STOKER_OPT_DIRECT_IO, "direct_io", L, 0, 0, 1, 0,
        "1: O_DIRECT reads of aligned shards; default 0"),
    INT(STOKER_OPT_READ_AHEAD, "read_ahead", L, 64, 0, 4096, ZERO_IS_DEFAULT,
        "reads in flight per reader; default 64"),
    ENUM(STOKER_OPT_ON_CORRUPT, "on_corrupt", L, STOKER_ENUM_ON_CORRUPT, STOKER_ON_CORRUPT_ERROR, 2,
         ZERO_IS_DEFAULT,
         "a corrupt record fails its batch (error) or is replaced (skip); "
         "default error"),
    ENUM(STOKER_OPT_SIMD, "simd", L, STOKER_ENUM_SIMD, STOKER_SIMD_AUTO, 3, 0,
         "the SIMD level of the transforms; default auto (the best available)"),
    INT(STOKER_OPT_DEVICE, "device", L, 0, -1, 1024, 0,
        "CUDA device ordinal + 1, -1 the CPU; default GPU 0 (or LOCAL_RANK) when usable, else "
        "the CPU"),
    /* docs/GPU.md: why six */
    INT(STOKER_OPT_DEVICE_BUFFERS, "device_buffers", L, 6, 0, 64, ZERO_IS_DEFAULT,
        "device batch buffers (1 counts as 2); default 6"),
    INT(STOKER_OPT_GPU_NORMALIZE, "gpu_normalize", L, 0, 0, 1, 0,
        "1: uint8 crosses PCIe and is normalised on the GPU; default 0"),
    INT(STOKER_OPT_MAX_CACHE, "max_cache", L, 0, 0, INT64_MAX, BYTES,
        "bytes of page cache the data set may fill; default half the memory available"),
    ENUM(STOKER_OPT_DECODER, "decoder", L, STOKER_ENUM_DECODER, STOKER_DECODER_AUTO, 2, 0,
         "who decodes JPEGs: auto, cpu or gpu; default auto"),
    /* loader: transforms */
    ENUM(STOKER_OPT_TRANSFORM, "transform", L, STOKER_ENUM_TRANSFORM, STOKER_TRANSFORM_DEFAULT, 5,
         0, "the image transform; default train for JPEG data sets, none for raw records"),
    INT(STOKER_OPT_SIZE, "size", L, 224, 0, 65535, ZERO_IS_DEFAULT,
        "output crop size C; default 224"),
    INT(STOKER_OPT_RESIZE, "resize", L, 0, 0, 65535, 0,
        "eval short side S; default round(C * 256 / 224)"),
    ENUM(STOKER_OPT_DTYPE, "dtype", L, STOKER_ENUM_DTYPE, STOKER_DTYPE_DEFAULT, 13, 0,
         "the batches' dtype; default for images float16 on a GPU, float32 for host "
         "batches; the stored dtype for raw records"),
    ENUM(STOKER_OPT_LAYOUT, "layout", L, STOKER_ENUM_LAYOUT, STOKER_LAYOUT_NCHW, 2, ZERO_IS_DEFAULT,
         "the batches' layout of images; default nchw"),
    ENUM(STOKER_OPT_DCT, "dct", L, STOKER_ENUM_DCT, STOKER_DCT_ISLOW, 2, ZERO_IS_DEFAULT,
         "libjpeg's IDCT; default islow"),
    ENUM(STOKER_OPT_ANTIALIAS, "antialias", L, STOKER_ENUM_ANTIALIAS, STOKER_ANTIALIAS_OVER_2X, 2,
         ZERO_IS_DEFAULT, "when a resize is antialiased; default over2x"),
    ENUM(STOKER_OPT_RESAMPLER, "resampler", L, STOKER_ENUM_RESAMPLER, STOKER_RESAMPLER_FAST, 2,
         ZERO_IS_DEFAULT, "the resize's weights: fast (16 bits) or pillow; default fast"),
    ENUM(STOKER_OPT_DCT_SCALE, "dct_scale", L, STOKER_ENUM_DCT_SCALE, STOKER_DCT_SCALE_TRAIN, 3,
         ZERO_IS_DEFAULT, "which transforms decode large crops at 1/2, 1/4 or 1/8; default train"),
    /* a float's range: [min, max]; a std's is (0, DBL_MAX] */
    FLOAT(STOKER_OPT_MEAN_R, "mean_r", 0, 0.485, -DBL_MAX, DBL_MAX,
          "red mean of normalisation; default 0.485"),
    FLOAT(STOKER_OPT_MEAN_G, "mean_g", 1, 0.456, -DBL_MAX, DBL_MAX,
          "green mean of normalisation; default 0.456"),
    FLOAT(STOKER_OPT_MEAN_B, "mean_b", 2, 0.406, -DBL_MAX, DBL_MAX,
          "blue mean of normalisation; default 0.406"),
    FLOAT(STOKER_OPT_STD_R, "std_r", 3, 0.229, DBL_TRUE_MIN, DBL_MAX,
          "red std of normalisation (> 0); default 0.229"),
    FLOAT(STOKER_OPT_STD_G, "std_g", 4, 0.224, DBL_TRUE_MIN, DBL_MAX,
          "green std of normalisation (> 0); default 0.224"),
    FLOAT(STOKER_OPT_STD_B, "std_b", 5, 0.225, DBL_TRUE_MIN, DBL_MAX,
          "blue std of normalisation (> 0); default 0.225"),
    FLOAT(STOKER_OPT_VFLIP, "vflip", 6, 0.0, 0.0, 1.0,
          "probability that the train transform also flips a sample vertically; default 0"),
    FLOAT(STOKER_OPT_SCALE_MIN, "scale_min", 7, 0.08, DBL_TRUE_MIN, 1.0,
          "the train transform's smallest crop, a share of the image's area; default 0.08"),
    FLOAT(STOKER_OPT_SCALE_MAX, "scale_max", 8, 1.0, DBL_TRUE_MIN, 1.0,
          "the train transform's largest crop, a share of the image's area; default 1"),
    FLOAT(STOKER_OPT_RATIO_MIN, "ratio_min", 9, 3.0 / 4.0, DBL_TRUE_MIN, DBL_MAX,
          "the train transform's smallest crop width/height ratio; default 3/4"),
    FLOAT(STOKER_OPT_RATIO_MAX, "ratio_max", 10, 4.0 / 3.0, DBL_TRUE_MIN, DBL_MAX,
          "the train transform's largest crop width/height ratio; default 4/3"),
    FLOAT(STOKER_OPT_MIN_BOX_SIZE, "min_box_size", 11, 0.0, 0.0, DBL_MAX,
          "the least width and height, in output pixels, of a box an image transform keeps "
          "(1: torchvision's); default 0: any above 0"),
    FLOAT(STOKER_OPT_MIN_BOX_VISIBILITY, "min_box_visibility", 12, 0.0, 0.0, 1.0,
          "the least share of a box's area an image transform must show to keep it; "
          "default 0"),
    FLOAT(STOKER_OPT_HFLIP, "hflip", 13, 0.5, 0.0, 1.0,
          "probability that the train transform flips a sample horizontally; default 0.5"),
    INT(STOKER_OPT_MASK_FILL, "mask_fill", L, 0, 0, 255, 0,
        "the value of a mask's padding under transform letterbox (255: an ignore index); "
        "default 0"),
    /* sources */
    STRING(STOKER_OPT_H5_IMAGES, "h5_images", D | L, 0, "images",
           "the HDF5 dataset holding the records; default \"images\""),
    STRING(STOKER_OPT_H5_LABELS, "h5_labels", D | L, 1, "labels",
           "the HDF5 dataset holding the labels; default \"labels\""),
    STRING(STOKER_OPT_CACHE_DIR, "cache_dir", D | L, 2, "",
           "remote data sets' block cache; default $STOKER_CACHE_DIR, $XDG_CACHE_HOME/stoker, "
           "~/.cache/stoker"),
    STRING(STOKER_OPT_CA_BUNDLE, "ca_bundle", D | L, 3, "",
           "a CA certificate file for HTTPS; default the system's"),
    STRING(STOKER_OPT_HTTP_HEADER, "http_header", D | L, 4, "",
           "one extra header for http(s):// requests, \"Name: value\"; default none"),
    STRING(STOKER_OPT_S3_REGION, "s3_region", D | L, 5, "",
           "S3 region; default $AWS_REGION, $AWS_DEFAULT_REGION, us-east-1"),
    STRING(STOKER_OPT_S3_ENDPOINT, "s3_endpoint", D | L, 6, "",
           "an S3-compatible endpoint URL (path-style); default $AWS_ENDPOINT_URL, none"),
    STRING(STOKER_OPT_FIELDS, "fields", L, 7, "",
           "the fields a batch holds, by name, comma-separated (IMAGE.size: each image's "
           "stored height and width); default all"),
    STRING(STOKER_OPT_H5_FIELDS, "h5_fields", D | L, 8, "",
           "an HDF5 file's datasets as the fields of a sample, \"NAME=DATASET[:KIND],...\"; "
           "default none (one dataset and its labels)"),
    STRING(STOKER_OPT_FIELD_DTYPES, "field_dtypes", L, 9, "",
           "dtype conversions of delivered fields, \"NAME=DTYPE,...\"; default none"),
    INT(STOKER_OPT_CACHE_LIMIT, "cache_limit", D | L, 0, 0, INT64_MAX, BYTES,
        "bytes the block cache may hold; 0 (default): a quarter of its file system, at least "
        "four times what is in flight, at most its free space and the cache's own blocks"),
    INT(STOKER_OPT_BLOCK_SIZE, "block_size", D | L, 16 * MiB, 4096, GiB, ZERO_IS_DEFAULT | BYTES,
        "bytes per block fetched from a remote data set; default 16 MiB"),
    INT(STOKER_OPT_FETCH_WINDOW, "fetch_window", D | L, 512 * MiB, 4096, INT64_C(1) << 40,
        ZERO_IS_DEFAULT | BYTES, "bytes fetched ahead of the workers; default 512 MiB"),
    INT(STOKER_OPT_FETCH_TRANSFERS, "fetch_transfers", D | L, 16, 1, 1024, ZERO_IS_DEFAULT,
        "remote transfers in flight; default 16"),
    INT(STOKER_OPT_FETCH_RETRIES, "fetch_retries", D | L, 8, 0, 1000, 0,
        "attempts after the first for a failed remote request (0: none); default 8"),
    INT(STOKER_OPT_FETCH_RETRY_MS, "fetch_retry_ms", D | L, 60000, 0, INT64_C(1) << 31, MS,
        "most milliseconds one remote request spends retrying (0: no retry); default 60000"),
    INT(STOKER_OPT_FETCH_TIMEOUT_MS, "fetch_timeout_ms", D | L, 30000, 100, INT64_C(1) << 31,
        ZERO_IS_DEFAULT | MS, "a transfer moving no byte this long fails; default 30000"),
    INT(STOKER_OPT_FETCH_CLIENTS, "fetch_clients", D | L, 0, 0, 16, 0,
        "HTTP clients (a thread each) sharing the transfers; 0 (default): 2, 1 under 4 "
        "transfers"),
};

#define NOPTS (sizeof OPTS / sizeof OPTS[0])

static const opt_desc *find(stoker_option opt, enum opt_kind kind)
{
    for (size_t i = 0; i < NOPTS; i++)
        if (OPTS[i].key == opt)
            return OPTS[i].kind == kind ? &OPTS[i] : NULL;
    return NULL;
}

static void set_defaults(stoker_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < NOPTS; i++)
        if (OPTS[i].kind == OPT_INT)
            cfg->ints[OPTS[i].key] = OPTS[i].def;
        else if (OPTS[i].kind == OPT_FLOAT)
            cfg->floats[OPTS[i].slot] = OPTS[i].fdef;
}

int stoker_config_create(stoker_config **out)
{
    if (!out)
        return STOKER_E_INVALID;
    *out = stoker__malloc(sizeof **out);
    if (!*out)
        return -ENOMEM;
    set_defaults(*out);
    return 0;
}

void stoker_config_destroy(stoker_config *cfg)
{
    if (!cfg)
        return;
    for (int i = 0; i < STOKER__NUM_STR_OPTS; i++)
        stoker__free(cfg->strings[i]);
    stoker__free(cfg);
}

int stoker_config_set_int(stoker_config *cfg, stoker_option opt, int64_t value)
{
    const opt_desc *d = find(opt, OPT_INT);
    if (!cfg || !d)
        return STOKER_E_INVALID;
    /* "the default" for counts and enums, also where 0 lies below the range */
    if (value == 0 && (d->flags & ZERO_IS_DEFAULT))
        value = d->def;
    if (value < d->min || value > d->max)
        return STOKER_E_INVALID;
    if (opt == STOKER_OPT_ALIGN && value != 1 && value != 512 && value != 4096)
        return STOKER_E_INVALID;
    cfg->ints[opt] = value;
    cfg->int_set[opt] = 1;
    return 0;
}

int stoker_config_get_int(const stoker_config *cfg, stoker_option opt, int64_t *value)
{
    const opt_desc *d = find(opt, OPT_INT);
    if (!cfg || !d || !value)
        return STOKER_E_INVALID;
    *value = cfg->ints[opt];
    return 0;
}

int stoker_config_set_float(stoker_config *cfg, stoker_option opt, double value)
{
    const opt_desc *d = find(opt, OPT_FLOAT);
    if (!cfg || !d || value != value)
        return STOKER_E_INVALID;
    if (!(value >= d->fmin && value <= d->fmax))
        return STOKER_E_INVALID;
    cfg->floats[d->slot] = value;
    return 0;
}

int stoker_config_get_float(const stoker_config *cfg, stoker_option opt, double *value)
{
    const opt_desc *d = find(opt, OPT_FLOAT);
    if (!cfg || !d || !value)
        return STOKER_E_INVALID;
    *value = cfg->floats[d->slot];
    return 0;
}

int stoker_config_set_string(stoker_config *cfg, stoker_option opt, const char *value)
{
    const opt_desc *d = find(opt, OPT_STRING);
    if (!cfg || !d)
        return STOKER_E_INVALID;
    char *copy = NULL;
    if (value) {
        copy = stoker__strdup(value);
        if (!copy)
            return -ENOMEM;
    }
    stoker__free(cfg->strings[d->slot]);
    cfg->strings[d->slot] = copy;
    return 0;
}

int stoker_config_get_string(const stoker_config *cfg, stoker_option opt, const char **value)
{
    const opt_desc *d = find(opt, OPT_STRING);
    if (!cfg || !d || !value)
        return STOKER_E_INVALID;
    *value = cfg->strings[d->slot] ? cfg->strings[d->slot] : d->sdef;
    return 0;
}

int stoker_config_set_log(stoker_config *cfg, stoker_log_fn fn, void *user, int32_t max_level)
{
    if (!cfg)
        return STOKER_E_INVALID;
    cfg->log.fn = fn;
    cfg->log.user = user;
    cfg->log.max_level = max_level;
    return 0;
}

/* The index-th option of the table (names.c lists them), or STOKER_E_INVALID past the end. */
int stoker__option_at(int32_t index, int32_t *value)
{
    if (index < 0 || (size_t)index >= NOPTS)
        return STOKER_E_INVALID;
    *value = (int32_t)OPTS[index].key;
    return 0;
}

const char *stoker_option_name(stoker_option opt)
{
    for (size_t i = 0; i < NOPTS; i++)
        if (OPTS[i].key == opt)
            return OPTS[i].name;
    return NULL;
}

const char *stoker_option_doc(stoker_option opt)
{
    for (size_t i = 0; i < NOPTS; i++)
        if (OPTS[i].key == opt)
            return OPTS[i].doc;
    return NULL;
}

int stoker_option_describe(stoker_option opt, int32_t *type, int32_t *applies, int32_t *values,
                           int64_t *min, int64_t *max)
{
    for (size_t i = 0; i < NOPTS; i++) {
        const opt_desc *d = &OPTS[i];
        if (d->key != opt)
            continue;
        if (type)
            *type = (int32_t)d->kind;
        if (applies)
            *applies = d->applies;
        if (values)
            *values = (int32_t)d->values;
        if (min)
            *min = d->min;
        if (max)
            *max = d->max;
        return 0;
    }
    return STOKER_E_INVALID;
}

int32_t stoker_option_unit(stoker_option opt)
{
    const opt_desc *d = find(opt, OPT_INT);
    return !d ? 0 : d->flags & BYTES ? STOKER_UNIT_BYTES : d->flags & MS ? STOKER_UNIT_MS : 0;
}

int64_t stoker__cfg_int(const stoker_config *cfg, stoker_option opt)
{
    const opt_desc *d = find(opt, OPT_INT);
    if (!d)
        return 0;
    return cfg ? cfg->ints[opt] : d->def;
}

bool stoker__cfg_is_set(const stoker_config *cfg, stoker_option opt)
{
    return cfg && find(opt, OPT_INT) && cfg->int_set[opt];
}

double stoker__cfg_float(const stoker_config *cfg, stoker_option opt)
{
    const opt_desc *d = find(opt, OPT_FLOAT);
    if (!d)
        return 0;
    return cfg ? cfg->floats[d->slot] : d->fdef;
}

const char *stoker__cfg_string(const stoker_config *cfg, stoker_option opt)
{
    const opt_desc *d = find(opt, OPT_STRING);
    if (!d)
        return NULL;
    return cfg && cfg->strings[d->slot] ? cfg->strings[d->slot] : d->sdef;
}

stoker__log stoker__cfg_log(const stoker_config *cfg)
{
    stoker__log none = {0};
    return cfg ? cfg->log : none;
}

stoker_config *stoker__cfg_clone(const stoker_config *cfg)
{
    stoker_config *c = NULL;
    if (stoker_config_create(&c) != 0)
        return NULL;
    if (!cfg)
        return c;
    memcpy(c->ints, cfg->ints, sizeof c->ints);
    memcpy(c->int_set, cfg->int_set, sizeof c->int_set);
    memcpy(c->floats, cfg->floats, sizeof c->floats);
    c->log = cfg->log;
    for (int i = 0; i < STOKER__NUM_STR_OPTS; i++) {
        if (cfg->strings[i] && !(c->strings[i] = stoker__strdup(cfg->strings[i]))) {
            stoker_config_destroy(c);
            return NULL;
        }
    }
    return c;
}
