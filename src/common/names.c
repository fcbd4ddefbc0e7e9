/* SPDX-License-Identifier: Apache-2.0 */
/* The names of every public enum, one table each: what stoker_enum_name prints and
 * stoker_enum_parse reads, and what stoker-bench and the Python binding use, so that a
 * value is spelt the same everywhere. Aliases are accepted when parsing only. */
#include "common/common.h"

#include <strings.h>

typedef struct name_entry {
    int32_t value;
    const char *name;
    const char *alias; /* another spelling parse accepts, or NULL */
} name_entry;

#define TABLE(...) ((const name_entry[]){__VA_ARGS__})
#define COUNT(...) (sizeof((const name_entry[]){__VA_ARGS__}) / sizeof(name_entry))
#define ENTRY(kind, ...) [kind] = {TABLE(__VA_ARGS__), COUNT(__VA_ARGS__)}

typedef struct name_table {
    const name_entry *e;
    size_t n;
} name_table;

static const name_table TABLES[] = {
    ENTRY(STOKER_ENUM_STATUS, {STOKER_OK, "ok", NULL}, {STOKER_END, "end", NULL},
          {STOKER_AGAIN, "again", NULL}, {STOKER_E_INVALID, "invalid", NULL},
          {STOKER_E_FORMAT, "format", NULL}, {STOKER_E_CORRUPT, "corrupt", NULL},
          {STOKER_E_LIMIT, "limit", NULL}, {STOKER_E_CUDA, "cuda", NULL},
          {STOKER_E_UNSUPPORTED, "unsupported", NULL}, {STOKER_E_STATE, "state", NULL},
          {STOKER_E_EXISTS, "exists", NULL}, {STOKER_E_CANCELED, "canceled", NULL},
          {STOKER_E_EMPTY, "empty", NULL}),
    ENTRY(STOKER_ENUM_CAPABILITY, {STOKER_CAP_IO_URING, "io_uring", NULL},
          {STOKER_CAP_CUDA_BUILD, "cuda_build", NULL},
          {STOKER_CAP_CUDA_DEVICES, "cuda_devices", NULL}, {STOKER_CAP_SIMD, "simd", NULL},
          {STOKER_CAP_HDF5, "hdf5", NULL}, {STOKER_CAP_CRC32C_HW, "crc32c_hw", NULL}),
    ENTRY(STOKER_ENUM_SIMD, {STOKER_SIMD_AUTO, "auto", NULL}, {STOKER_SIMD_SCALAR, "scalar", NULL},
          {STOKER_SIMD_AVX2, "avx2", NULL}, {STOKER_SIMD_AVX512, "avx512", NULL}),
    ENTRY(STOKER_ENUM_LOG_LEVEL, {STOKER_LOG_ERROR, "error", NULL},
          {STOKER_LOG_WARN, "warn", "warning"}, {STOKER_LOG_INFO, "info", NULL},
          {STOKER_LOG_DEBUG, "debug", NULL}),
    ENTRY(STOKER_ENUM_BACKEND, {STOKER_BACKEND_AUTO, "auto", NULL},
          {STOKER_BACKEND_IO_URING, "io_uring", NULL}, {STOKER_BACKEND_PREAD, "pread", NULL},
          {STOKER_BACKEND_HDF5, "hdf5", NULL}, {STOKER_BACKEND_REMOTE, "remote", NULL}),
    ENTRY(STOKER_ENUM_ON_CORRUPT, {STOKER_ON_CORRUPT_ERROR, "error", NULL},
          {STOKER_ON_CORRUPT_SKIP, "skip", NULL}),
    ENTRY(STOKER_ENUM_ORDER, {STOKER_ORDER_RECORDS, "records", NULL},
          {STOKER_ORDER_BLOCKS, "blocks", NULL}),
    ENTRY(STOKER_ENUM_TRANSFORM, {STOKER_TRANSFORM_NONE, "none", NULL},
          {STOKER_TRANSFORM_TRAIN, "train", NULL}, {STOKER_TRANSFORM_EVAL, "eval", NULL},
          {STOKER_TRANSFORM_RESIZE, "resize", NULL},
          {STOKER_TRANSFORM_LETTERBOX, "letterbox", NULL}),
    ENTRY(STOKER_ENUM_DCT, {STOKER_DCT_ISLOW, "islow", "accurate"},
          {STOKER_DCT_IFAST, "ifast", "fast"}),
    ENTRY(STOKER_ENUM_ANTIALIAS, {STOKER_ANTIALIAS_ALWAYS, "always", NULL},
          {STOKER_ANTIALIAS_OVER_2X, "over2x", "over_2x"}),
    ENTRY(STOKER_ENUM_RESAMPLER, {STOKER_RESAMPLER_FAST, "fast", NULL},
          {STOKER_RESAMPLER_PILLOW, "pillow", NULL}),
    ENTRY(STOKER_ENUM_DCT_SCALE, {STOKER_DCT_SCALE_NEVER, "never", NULL},
          {STOKER_DCT_SCALE_TRAIN, "train", NULL}, {STOKER_DCT_SCALE_ALWAYS, "always", NULL}),
    ENTRY(STOKER_ENUM_DTYPE, {STOKER_DTYPE_UINT8, "uint8", NULL}, {STOKER_DTYPE_INT8, "int8", NULL},
          {STOKER_DTYPE_UINT16, "uint16", NULL}, {STOKER_DTYPE_INT16, "int16", NULL},
          {STOKER_DTYPE_UINT32, "uint32", NULL}, {STOKER_DTYPE_INT32, "int32", NULL},
          {STOKER_DTYPE_UINT64, "uint64", NULL}, {STOKER_DTYPE_INT64, "int64", NULL},
          {STOKER_DTYPE_FLOAT16, "float16", "half"}, {STOKER_DTYPE_BFLOAT16, "bfloat16", NULL},
          {STOKER_DTYPE_FLOAT32, "float32", "float"}, {STOKER_DTYPE_FLOAT64, "float64", "double"},
          {STOKER_DTYPE_BOOL, "bool", NULL}),
    ENTRY(STOKER_ENUM_LAYOUT, {STOKER_LAYOUT_NCHW, "nchw", NULL},
          {STOKER_LAYOUT_NHWC, "nhwc", NULL}),
    ENTRY(STOKER_ENUM_FIELD, {STOKER_FIELD_BYTES, "bytes", NULL}, {STOKER_FIELD_JPEG, "jpeg", NULL},
          {STOKER_FIELD_RAW, "raw", NULL}, {STOKER_FIELD_PNG, "png", NULL},
          {STOKER_FIELD_ARRAY, "array", NULL}, {STOKER_FIELD_INT64, "int64", NULL},
          {STOKER_FIELD_FLOAT32, "float32", NULL}),
    ENTRY(STOKER_ENUM_DECODER, {STOKER_DECODER_AUTO, "auto", NULL},
          {STOKER_DECODER_CPU, "cpu", NULL}, {STOKER_DECODER_GPU, "gpu", NULL}),
    ENTRY(STOKER_ENUM_FIELD_TIE, {STOKER_TIE_NONE, "none", NULL},
          {STOKER_TIE_MASK, "mask_of", "mask"}, {STOKER_TIE_BOXES, "boxes_of", "boxes"},
          {STOKER_TIE_ROWS, "rows_of", "rows"}),
};

#define NTABLES (int)(sizeof TABLES / sizeof TABLES[0])

static const name_table *table(stoker_enum e)
{
    return (int)e > 0 && (int)e < NTABLES && TABLES[e].e ? &TABLES[e] : NULL;
}

const char *stoker_enum_name(stoker_enum e, int32_t value)
{
    if (e == STOKER_ENUM_OPTION)
        return stoker_option_name((stoker_option)value);
    const name_table *t = table(e);
    for (size_t i = 0; t && i < t->n; i++)
        if (t->e[i].value == value)
            return t->e[i].name;
    return NULL;
}

int stoker_enum_parse(stoker_enum e, const char *name, int32_t *value)
{
    if (!name || !value)
        return STOKER_E_INVALID;
    if (e == STOKER_ENUM_OPTION) {
        int32_t opt = 0;
        for (int32_t i = 0; stoker__option_at(i, &opt) == 0; i++)
            if (strcasecmp(stoker_option_name((stoker_option)opt), name) == 0) {
                *value = opt;
                return 0;
            }
        return STOKER_E_INVALID;
    }
    const name_table *t = table(e);
    for (size_t i = 0; t && i < t->n; i++) {
        const name_entry *n = &t->e[i];
        if (strcasecmp(n->name, name) == 0 || (n->alias && strcasecmp(n->alias, name) == 0)) {
            *value = n->value;
            return 0;
        }
    }
    return STOKER_E_INVALID;
}

int stoker_enum_at(stoker_enum e, int32_t index, int32_t *value)
{
    if (!value || index < 0)
        return STOKER_E_INVALID;
    if (e == STOKER_ENUM_OPTION)
        return stoker__option_at(index, value);
    const name_table *t = table(e);
    if (!t || (size_t)index >= t->n)
        return STOKER_E_INVALID;
    *value = t->e[index].value;
    return 0;
}

/* The older per-enum names, kept for callers of the first releases. */

const char *stoker_simd_name(int32_t level)
{
    const char *n = stoker_enum_name(STOKER_ENUM_SIMD, level);
    return n ? n : "unknown";
}

const char *stoker_backend_name(int32_t backend)
{
    const char *n = stoker_enum_name(STOKER_ENUM_BACKEND, backend);
    return n ? n : "unknown";
}

const char *stoker_dtype_name(int32_t dtype)
{
    const char *n = stoker_enum_name(STOKER_ENUM_DTYPE, dtype);
    return n ? n : "unknown";
}
