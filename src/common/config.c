/* The option table and the config object. */
#include "common/config.h"

#include <string.h>

enum opt_kind { OPT_INT = 1, OPT_FLOAT, OPT_STRING };

typedef struct opt_desc {
    stoker_option key;
    const char *name;
    enum opt_kind kind;
    int64_t def;
    int64_t min, max;
    int slot; /* float/string slot */
} opt_desc;

#define GiB (INT64_C(1) << 30)
#define MiB (INT64_C(1) << 20)

/* Defaults are documented in stoker.h and docs/SEMANTICS.md; keep the three in step. */
static const opt_desc OPTS[] = {
    {STOKER_OPT_SHARD_SIZE, "shard_size", OPT_INT, 256 * MiB, 4096, INT64_C(1) << 40, 0},
    {STOKER_OPT_ALIGN, "align", OPT_INT, 4096, 0, 4096, 0},
    {STOKER_OPT_OVERWRITE, "overwrite", OPT_INT, 0, 0, 1, 0},
    {STOKER_OPT_FSYNC, "fsync", OPT_INT, 1, 0, 1, 0},
    {STOKER_OPT_JPEG_CHECKED, "jpeg_checked", OPT_INT, 0, 0, 1, 0},
    {STOKER_OPT_MAX_RECORD_SIZE, "max_record_size", OPT_INT, GiB, 1, INT64_C(1) << 40, 0},
    {STOKER_OPT_MAX_RECORDS, "max_records", OPT_INT, INT64_C(1) << 28, 1, INT64_C(1) << 32, 0},
    {STOKER_OPT_MAX_PIXELS, "max_pixels", OPT_INT, INT64_C(1) << 28, 1, INT64_C(1) << 40, 0},
    {STOKER_OPT_MAX_SHARDS, "max_shards", OPT_INT, INT64_C(1) << 20, 1, INT64_C(1) << 24, 0},
    {STOKER_OPT_BATCH_SIZE, "batch_size", OPT_INT, 256, 1, INT64_C(1) << 24, 0},
    {STOKER_OPT_SHUFFLE, "shuffle", OPT_INT, 1, 0, 1, 0},
    {STOKER_OPT_SEED, "seed", OPT_INT, 0, INT64_MIN, INT64_MAX, 0},
    {STOKER_OPT_DROP_LAST, "drop_last", OPT_INT, 0, 0, 1, 0},
    {STOKER_OPT_RANK, "rank", OPT_INT, 0, 0, INT64_C(1) << 20, 0},
    {STOKER_OPT_WORLD_SIZE, "world_size", OPT_INT, 1, 0, INT64_C(1) << 20, 0},
    {STOKER_OPT_DIST_ENV, "dist_env", OPT_INT, 0, 0, 1, 0},
    {STOKER_OPT_EPOCH, "epoch", OPT_INT, 0, 0, INT64_C(1) << 40, 0},
    {STOKER_OPT_ORDER, "order", OPT_INT, STOKER_ORDER_RECORDS, 0, 2, 0},
    {STOKER_OPT_THREADS, "threads", OPT_INT, 0, 0, 1024, 0},
    {STOKER_OPT_DEPTH, "depth", OPT_INT, 0, 0, 1024, 0},
    {STOKER_OPT_BACKEND, "backend", OPT_INT, STOKER_BACKEND_AUTO, 0, 2, 0},
    {STOKER_OPT_DIRECT_IO, "direct_io", OPT_INT, 0, 0, 1, 0},
    {STOKER_OPT_READ_AHEAD, "read_ahead", OPT_INT, 64, 0, 4096, 0},
    {STOKER_OPT_ON_CORRUPT, "on_corrupt", OPT_INT, STOKER_ON_CORRUPT_ERROR, 0, 2, 0},
    {STOKER_OPT_SIMD, "simd", OPT_INT, STOKER_SIMD_AUTO, 0, 3, 0},
    {STOKER_OPT_DEVICE, "device", OPT_INT, 0, -1, 1024, 0},
    {STOKER_OPT_DEVICE_BUFFERS, "device_buffers", OPT_INT, 0, 0, 64, 0},
    {STOKER_OPT_GPU_NORMALIZE, "gpu_normalize", OPT_INT, 0, 0, 1, 0},
    {STOKER_OPT_MAX_CACHE, "max_cache", OPT_INT, 0, 0, INT64_MAX, 0},
    {STOKER_OPT_DECODER, "decoder", OPT_INT, STOKER_DECODER_AUTO, 0, 2, 0},
    {STOKER_OPT_TRANSFORM, "transform", OPT_INT, STOKER_TRANSFORM_DEFAULT, 0, 4, 0},
    {STOKER_OPT_SIZE, "size", OPT_INT, 224, 0, 65535, 0},
    {STOKER_OPT_RESIZE, "resize", OPT_INT, 0, 0, 65535, 0},
    {STOKER_OPT_DTYPE, "dtype", OPT_INT, STOKER_DTYPE_DEFAULT, 0, 13, 0},
    {STOKER_OPT_LAYOUT, "layout", OPT_INT, STOKER_LAYOUT_NCHW, 0, 2, 0},
    {STOKER_OPT_DCT, "dct", OPT_INT, STOKER_DCT_ISLOW, 0, 2, 0},
    {STOKER_OPT_ANTIALIAS, "antialias", OPT_INT, STOKER_ANTIALIAS_OVER_2X, 0, 2, 0},
    {STOKER_OPT_RESAMPLER, "resampler", OPT_INT, STOKER_RESAMPLER_FAST, 0, 2, 0},
    {STOKER_OPT_DCT_SCALE, "dct_scale", OPT_INT, STOKER_DCT_SCALE_TRAIN, 0, 3, 0},
    {STOKER_OPT_MEAN_R, "mean_r", OPT_FLOAT, 0, 0, 0, 0},
    {STOKER_OPT_MEAN_G, "mean_g", OPT_FLOAT, 0, 0, 0, 1},
    {STOKER_OPT_MEAN_B, "mean_b", OPT_FLOAT, 0, 0, 0, 2},
    {STOKER_OPT_STD_R, "std_r", OPT_FLOAT, 0, 0, 0, 3},
    {STOKER_OPT_STD_G, "std_g", OPT_FLOAT, 0, 0, 0, 4},
    {STOKER_OPT_STD_B, "std_b", OPT_FLOAT, 0, 0, 0, 5},
    {STOKER_OPT_H5_IMAGES, "h5_images", OPT_STRING, 0, 0, 0, 0},
    {STOKER_OPT_H5_LABELS, "h5_labels", OPT_STRING, 0, 0, 0, 1},
};
static const double FLOAT_DEFAULTS[6] = {0.485, 0.456, 0.406, 0.229, 0.224, 0.225};
static const char *const STRING_DEFAULTS[2] = {"images", "labels"};

static const opt_desc *find(stoker_option opt, enum opt_kind kind)
{
    for (size_t i = 0; i < sizeof OPTS / sizeof OPTS[0]; i++)
        if (OPTS[i].key == opt)
            return OPTS[i].kind == kind ? &OPTS[i] : NULL;
    return NULL;
}

static void set_defaults(stoker_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < sizeof OPTS / sizeof OPTS[0]; i++)
        if (OPTS[i].kind == OPT_INT)
            cfg->ints[OPTS[i].key] = OPTS[i].def;
    memcpy(cfg->floats, FLOAT_DEFAULTS, sizeof cfg->floats);
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
    if (!cfg || !d || value < d->min || value > d->max)
        return STOKER_E_INVALID;
    if (opt == STOKER_OPT_ALIGN && value != 0 && value != 1 && value != 512 && value != 4096)
        return STOKER_E_INVALID;
    /* 0 means "the default" for counts and enum-valued options */
    if (value == 0 &&
        (opt == STOKER_OPT_ALIGN || opt == STOKER_OPT_DEPTH || opt == STOKER_OPT_READ_AHEAD ||
         opt == STOKER_OPT_WORLD_SIZE || opt == STOKER_OPT_LAYOUT || opt == STOKER_OPT_DCT ||
         opt == STOKER_OPT_ANTIALIAS || opt == STOKER_OPT_RESAMPLER ||
         opt == STOKER_OPT_DCT_SCALE || opt == STOKER_OPT_ON_CORRUPT || opt == STOKER_OPT_SIZE ||
         opt == STOKER_OPT_ORDER))
        value = d->def;
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
    if (d->slot >= 3 && !(value > 0))
        return STOKER_E_INVALID; /* a std must be positive */
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
    *value = cfg->strings[d->slot] ? cfg->strings[d->slot] : STRING_DEFAULTS[d->slot];
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
    if (index < 0 || (size_t)index >= sizeof OPTS / sizeof OPTS[0])
        return STOKER_E_INVALID;
    *value = (int32_t)OPTS[index].key;
    return 0;
}

const char *stoker_option_name(stoker_option opt)
{
    for (size_t i = 0; i < sizeof OPTS / sizeof OPTS[0]; i++)
        if (OPTS[i].key == opt)
            return OPTS[i].name;
    return NULL;
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
    return cfg ? cfg->floats[d->slot] : FLOAT_DEFAULTS[d->slot];
}

const char *stoker__cfg_string(const stoker_config *cfg, stoker_option opt)
{
    const opt_desc *d = find(opt, OPT_STRING);
    if (!d)
        return NULL;
    return cfg && cfg->strings[d->slot] ? cfg->strings[d->slot] : STRING_DEFAULTS[d->slot];
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
