/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stoker.h - the whole public API of stoker, a library that keeps a GPU fed.
 *
 * stoker turns a data set on disk (packed shards written by stoker's own writer,
 * or HDF5) into ready batches in host or GPU memory. Everything public is in this
 * one header; every type is opaque or a size-prefixed view; every fallible function
 * returns an int status: 0 on success, a negative code on failure (a system error
 * as -errno, or one of stoker's own STOKER_E_* codes, which never collide with
 * errno values). Positive values are documented per function (STOKER_END).
 *
 * Handles keep a detailed message for their last failure (file, record id, cause),
 * read with stoker_errmsg_*(); stoker_strerror() gives a static text per code.
 *
 * The library never aborts, exits or prints on its own: diagnostics go to the log
 * callback set on a config (stoker_config_set_log), or nowhere.
 *
 * ABI rules: fixed-width integers, size_t, pointers and 32-bit enums only; nothing
 * passed by value that could grow; every function exists as a real symbol (no macro
 * or inline-only API), so ctypes and other FFIs can bind all of it.
 */
#ifndef STOKER_H
#define STOKER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(STOKER_BUILDING) && defined(__GNUC__)
#define STOKER_API __attribute__((visibility("default")))
#else
#define STOKER_API
#endif

/* ------------------------------------------------------------------------------------------ */
/* Version                                                                                    */
/* ------------------------------------------------------------------------------------------ */

#define STOKER_VERSION_MAJOR 0
#define STOKER_VERSION_MINOR 1
#define STOKER_VERSION_PATCH 0
#define STOKER_VERSION_NUMBER                                                                      \
    (STOKER_VERSION_MAJOR * 10000 + STOKER_VERSION_MINOR * 100 + STOKER_VERSION_PATCH)

/* The version of the library actually loaded, as MAJOR*10000 + MINOR*100 + PATCH.
 * Compare with STOKER_VERSION_NUMBER to detect a header/library mismatch. Thread-safe. */
STOKER_API uint32_t stoker_version(void);

/* The same as a static string, e.g. "0.1.0". Thread-safe. */
STOKER_API const char *stoker_version_string(void);

/* Version of the shard format this library writes (and the newest it reads). */
#define STOKER_FORMAT_VERSION 1
/* The newest manifest version this library reads. Version 2 is version 1 with a line saying
 * that every JPEG record was decoded without damage before it was written
 * (STOKER_OPT_JPEG_CHECKED); version 3 declares samples of several named fields
 * (stoker_writer_set_fields). A writer writes 3 only for a data set with a schema, 2 for one
 * whose JPEGs were checked, else 1. */
#define STOKER_MANIFEST_VERSION 3

/* ------------------------------------------------------------------------------------------ */
/* Errors                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* Status codes. System errors are returned as -errno (always > -4096); stoker's own codes
 * start at -10000 so they can never collide. */
typedef enum stoker_status {
    STOKER_OK = 0,
    STOKER_END = 1,                /* stoker_loader_next: the epoch has no more batches */
    STOKER_AGAIN = 2,              /* stoker_loader_next_wait: not ready in time, nothing
                                      consumed */
    STOKER_E_INVALID = -10001,     /* an argument or option is invalid for this call */
    STOKER_E_FORMAT = -10002,      /* a file is not in the expected format / version */
    STOKER_E_CORRUPT = -10003,     /* data failed a check (CRC, decode, size, ...) */
    STOKER_E_LIMIT = -10004,       /* a configured safety limit was exceeded */
    STOKER_E_CUDA = -10005,        /* a CUDA runtime call failed (message has CUDA's text) */
    STOKER_E_UNSUPPORTED = -10006, /* the feature is unavailable in this build/on this host */
    STOKER_E_STATE = -10007,       /* the call is not valid in the object's current state */
    STOKER_E_EXISTS = -10008,      /* the output exists and overwriting was not allowed */
    STOKER_E_CANCELED = -10009,    /* the operation was canceled (stoker_writer_cancel) */
    STOKER_E_EMPTY = -10010,       /* nothing to do: the input holds no records */
} stoker_status;

/* A static, never-NULL English description of a status code, including -errno values.
 * Thread-safe. */
STOKER_API const char *stoker_strerror(int code);

/* `text` (a data set's path or URL, or a message naming URLs) as it may be shown: each URL's
 * user information keeps its user name and shows its password, or a user name alone (often
 * a token), as "***" (http://user:***@host/ds); the rest is copied. Writes at most cap bytes
 * to out, NUL-terminated (cap > 0; longer text is cut); returns out. The library shows URLs
 * this way in every message, file and report it writes (and a request header's value never).
 * Thread-safe. */
STOKER_API char *stoker_redact(const char *text, char *out, size_t cap);

/* ------------------------------------------------------------------------------------------ */
/* Capabilities of this build and host                                                        */
/* ------------------------------------------------------------------------------------------ */

typedef enum stoker_capability {
    STOKER_CAP_IO_URING = 1,     /* 1 if an io_uring ring can be set up here, else 0 */
    STOKER_CAP_CUDA_BUILD = 2,   /* 1 if the library was built with CUDA support */
    STOKER_CAP_CUDA_DEVICES = 3, /* number of usable CUDA devices (0 without driver/GPU) */
    STOKER_CAP_SIMD = 4,         /* the best SIMD level usable here, a stoker_simd value */
    STOKER_CAP_HDF5 = 5,         /* 1 if the library was built with HDF5 support */
    STOKER_CAP_CRC32C_HW = 6,    /* 1 if CRC32C uses the SSE4.2 instruction */
} stoker_capability;

typedef enum stoker_simd {
    STOKER_SIMD_AUTO = 0, /* option value: pick the best available */
    STOKER_SIMD_SCALAR = 1,
    STOKER_SIMD_AVX2 = 2,
    STOKER_SIMD_AVX512 = 3,
} stoker_simd;

/* Queries a capability. Returns its value (>= 0), or STOKER_E_INVALID for an unknown
 * capability. May probe the host on first call (io_uring setup, cudaGetDeviceCount);
 * results are cached. Thread-safe. */
STOKER_API int64_t stoker_capability_get(stoker_capability cap);

/* A static name for a SIMD level ("scalar", "avx2", "avx512"); "unknown" otherwise. */
STOKER_API const char *stoker_simd_name(int32_t level);

/* ------------------------------------------------------------------------------------------ */
/* Logging                                                                                    */
/* ------------------------------------------------------------------------------------------ */

typedef enum stoker_log_level {
    STOKER_LOG_ERROR = 1,
    STOKER_LOG_WARN = 2,
    STOKER_LOG_INFO = 3,
    STOKER_LOG_DEBUG = 4,
} stoker_log_level;

/* Log callback. May be called from any of the library's threads, concurrently; `msg` is
 * valid only during the call. */
typedef void (*stoker_log_fn)(void *user, int32_t level, const char *msg);

/* ------------------------------------------------------------------------------------------ */
/* Configuration                                                                              */
/* ------------------------------------------------------------------------------------------ */

/* An opaque, growable set of options for writers, data sets and loaders. A config is
 * read (copied) when an object is created from it, so it may be changed or destroyed
 * afterwards. Not thread-safe: one thread at a time per config. */
typedef struct stoker_config stoker_config;

/* Option keys. Values are explicit and never reused. For counts and enum-valued options,
 * 0 means "the default" (also where the range begins above 0: block_size, fetch_window,
 * fetch_transfers, fetch_timeout_ms); booleans are 0/1 with the default given here. A value
 * outside an option's range (stoker_option_describe) is STOKER_E_INVALID. Unless said
 * otherwise options are integers (stoker_config_set_int). */
typedef enum stoker_option {
    /* ---- writer (stoker_writer_create) ---- */
    STOKER_OPT_SHARD_SIZE = 1,   /* target shard size in bytes; default 256 MiB */
    STOKER_OPT_ALIGN = 2,        /* payload alignment: 1, 512 or 4096 (default) */
    STOKER_OPT_OVERWRITE = 3,    /* 1: replace a previous data set (only); default 0 */
    STOKER_OPT_FSYNC = 4,        /* 1: fsync shards and manifest before publishing; default 1 */
    STOKER_OPT_JPEG_CHECKED = 5, /* 1: the caller vouches that every record of a JPEG data set
                                    was decoded by libjpeg without an error or a warning before
                                    it was appended (stoker-pack does this by default); the
                                    manifest says so, and only such data sets' JPEGs go to the
                                    GPU under STOKER_DECODER_AUTO; default 0 */

    /* ---- limits on untrusted input (data sets, decoders) ---- */
    STOKER_OPT_MAX_RECORD_SIZE = 20, /* bytes; default 1 GiB */
    STOKER_OPT_MAX_RECORDS = 21,     /* records per shard; default 1 << 28 */
    STOKER_OPT_MAX_PIXELS = 22,      /* decoded image pixels; default 1 << 28 */
    STOKER_OPT_MAX_SHARDS = 23,      /* shards per data set; default 1 << 20 */

    /* ---- loader: order ---- */
    STOKER_OPT_BATCH_SIZE = 40, /* records per batch, per rank; default 256 */
    STOKER_OPT_SHUFFLE = 41,    /* boolean; default 1 */
    STOKER_OPT_SEED = 42,       /* uint64 seed; default 0 */
    STOKER_OPT_DROP_LAST = 43,  /* boolean; default 0 */
    STOKER_OPT_RANK = 44,       /* this process's rank; default 0 (or RANK, see DIST_ENV) */
    STOKER_OPT_WORLD_SIZE = 45, /* number of ranks; 0 = default 1 (or WORLD_SIZE) */
    STOKER_OPT_DIST_ENV = 46,   /* 1: take rank/world/local rank from RANK, WORLD_SIZE,
                                   LOCAL_RANK when not set explicitly; default 0 */
    STOKER_OPT_EPOCH = 47,      /* first epoch; default 0 */
    STOKER_OPT_ORDER = 48,      /* a stoker_order value: how each epoch's permutation is
                                   drawn; default RECORDS */

    /* ---- loader: machinery ---- */
    STOKER_OPT_THREADS = 60,        /* worker threads; 0 = the rank's cores - 1 (at least 1):
                                       the CPUs of the process's affinity mask, fewer under its
                                       cgroup's CPU quota (rounded up), divided among the
                                       LOCAL_WORLD_SIZE ranks of the node when that is set; the
                                       rank's cores - 3 under DECODER_AUTO with the GPU decode
                                       stage planned, on 8 of them or more (docs/GPU.md);
                                       stoker_stats.threads_note says how it was chosen */
    STOKER_OPT_DEPTH = 61,          /* batch slots in flight; 0 = default: 4, and for image
                                       transforms 2 + ceil(3 x threads / pieces of 32 records
                                       per batch), from 4 to 16, and 4 more when the GPU
                                       decodes a share (STOKER_OPT_DECODER) */
    STOKER_OPT_BACKEND = 62,        /* AUTO, IO_URING or PREAD (stoker_backend); default AUTO */
    STOKER_OPT_DIRECT_IO = 63,      /* boolean: O_DIRECT reads of aligned shards; default 0 */
    STOKER_OPT_READ_AHEAD = 64,     /* reads in flight per reader; 0 = default 64 */
    STOKER_OPT_ON_CORRUPT = 65,     /* a stoker_on_corrupt value; default ERROR */
    STOKER_OPT_SIMD = 66,           /* a stoker_simd value; default AUTO */
    STOKER_OPT_DEVICE = 67,         /* CUDA device ordinal + 1; 0 = default (GPU 0 or
                                       LOCAL_RANK when usable, else CPU); -1 = CPU */
    STOKER_OPT_DEVICE_BUFFERS = 68, /* device batch buffers (ring, >= 2); 0 = default 6 */
    STOKER_OPT_GPU_NORMALIZE = 69,  /* boolean: raw uint8 [H, W, 3] records cross PCIe as
                                       uint8 and are normalised on the GPU to DTYPE/LAYOUT
                                       with MEAN/STD (needs a device); default 0 */
    STOKER_OPT_MAX_CACHE = 70,      /* bytes of page cache the data set may fill; 0 = default:
                                       half the memory available at create. A larger data
                                       set is read dropping its pages behind the reader, so
                                       the cache holds what is still to come */
    STOKER_OPT_DECODER = 71,        /* a stoker_decoder value: who decodes JPEGs; default
                                       AUTO */

    /* ---- loader: transforms (images) ---- */
    STOKER_OPT_TRANSFORM = 80, /* a stoker_transform value; default by data set kind */
    STOKER_OPT_SIZE = 81,      /* output crop size C; default 224 */
    STOKER_OPT_RESIZE = 82,    /* eval short side S; default round(C * 256 / 224) */
    STOKER_OPT_DTYPE = 83,     /* a stoker_dtype; default for images FLOAT16 on a GPU,
                                  FLOAT32 for host batches */
    STOKER_OPT_LAYOUT = 84,    /* a stoker_layout; default NCHW */
    STOKER_OPT_DCT = 85,       /* a stoker_dct value; default ISLOW */
    STOKER_OPT_ANTIALIAS = 86, /* a stoker_antialias value; default OVER_2X */
    STOKER_OPT_RESAMPLER = 87, /* a stoker_resampler value; default FAST */
    STOKER_OPT_DCT_SCALE = 88, /* a stoker_dct_scale value; default TRAIN */
    STOKER_OPT_VFLIP = 89,     /* float (stoker_config_set_float): the probability, 0 to 1,
                                  that the train transform also mirrors a sample top to
                                  bottom, drawn from (seed, epoch, id) as its horizontal
                                  flip; default 0 (never) */
    STOKER_OPT_MEAN_R = 90,    /* float options (stoker_config_set_float) */
    STOKER_OPT_MEAN_G = 91,
    STOKER_OPT_MEAN_B = 92,
    STOKER_OPT_STD_R = 93,
    STOKER_OPT_STD_G = 94,
    STOKER_OPT_STD_B = 95,
    /* floats: the train transform's RandomResizedCrop draws a box of SCALE_MIN to SCALE_MAX
     * of the image's area (each in (0, 1]) and of a width/height ratio drawn log-uniformly
     * from RATIO_MIN to RATIO_MAX (each > 0), as torchvision's scale= and ratio=; each MIN at
     * most its MAX */
    STOKER_OPT_SCALE_MIN = 96, /* default 0.08 */
    STOKER_OPT_SCALE_MAX = 97, /* default 1 */
    STOKER_OPT_RATIO_MIN = 98, /* default 3/4 */
    STOKER_OPT_RATIO_MAX = 99, /* default 4/3 */
    /* floats: which boxes (boxes_of fields) an image transform keeps, besides a positive
     * width and height: MIN_BOX_SIZE, the least width and height in output pixels (1 is
     * torchvision's SanitizeBoundingBoxes default); MIN_BOX_VISIBILITY, the least share of
     * the mapped box's area that the output shows, 0 to 1 (albumentations' min_visibility).
     * A dropped box takes its rows of every rows_of field with it */
    STOKER_OPT_MIN_BOX_SIZE = 100,       /* default 0 */
    STOKER_OPT_MIN_BOX_VISIBILITY = 101, /* default 0 */
    STOKER_OPT_HFLIP = 102,              /* float: the probability, 0 to 1, that the train transform
                                            mirrors a sample left to right; default 0.5 (0: never, for
                                            data whose left and right differ: text, some keypoints) */
    STOKER_OPT_MASK_FILL = 103,          /* the value, 0 to 255, of a mask's padding under
                                            STOKER_TRANSFORM_LETTERBOX; default 0 (background;
                                            255: the ignore index of torchvision's
                                            segmentation references) */

    /* ---- sources (string options, stoker_config_set_string) ---- */
    STOKER_OPT_H5_IMAGES = 120, /* HDF5 dataset holding the records; default "images" */
    STOKER_OPT_H5_LABELS = 121, /* HDF5 dataset holding the labels; default "labels" */
    /* remote data sets (http://, https://, s3://; docs/REMOTE.md) */
    STOKER_OPT_CACHE_DIR = 122,        /* the block cache's directory; default $STOKER_CACHE_DIR,
                                          else $XDG_CACHE_HOME/stoker, else ~/.cache/stoker */
    STOKER_OPT_CA_BUNDLE = 123,        /* a CA certificate file for HTTPS; default the system's */
    STOKER_OPT_HTTP_HEADER = 124,      /* one extra request header for http(s)://, "Name: value"
                                          (e.g. "Authorization: Bearer TOKEN"), sent to the data
                                          set's origin only, never across a redirect to another
                                          scheme, host or port; default none */
    STOKER_OPT_S3_REGION = 125,        /* default $AWS_REGION, $AWS_DEFAULT_REGION, us-east-1 */
    STOKER_OPT_S3_ENDPOINT = 126,      /* an S3-compatible endpoint (path-style requests); default
                                          $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, none (AWS) */
    STOKER_OPT_FIELDS = 127,           /* the fields a batch holds, by name, comma-separated
                                          ("image,boxes,classes"); default all. IMAGE.size
                                          (the image field's name and ".size") adds each
                                          image's stored height and width, int64 [2], after
                                          the image, under an image transform */
    STOKER_OPT_H5_FIELDS = 128,        /* an HDF5 file's datasets of one length as the fields of
                                          a sample, "NAME=DATASET[:KIND][:TIE=FIELD],..."
                                          (ties mask_of, boxes_of, rows_of; docs/HDF5.md
                                          "Several datasets as the fields of a sample"); default
                                          none: one dataset (H5_IMAGES) and its labels */
    STOKER_OPT_FIELD_DTYPES = 129,     /* dtype conversions of delivered fields, "NAME=DTYPE,..."
                                          ("mask=int64,boxes=float16"; dtype names as
                                          stoker_dtype_name's): numeric dense, mask and array
                                          fields, not bytes or images (the data's dtype is
                                          STOKER_OPT_DTYPE's). Integers wrap; floats to
                                          integers truncate toward zero, NaN gives 0, out of
                                          range the least or greatest value; float16 and
                                          bfloat16 round to nearest even (docs/SEMANTICS.md);
                                          default none: each field as stored */
    STOKER_OPT_CACHE_LIMIT = 130,      /* bytes the block cache may hold; 0 (default): a quarter
                                          of the cache's file system, at least 4 x the window */
    STOKER_OPT_BLOCK_SIZE = 131,       /* bytes per fetched block; default 16 MiB */
    STOKER_OPT_FETCH_WINDOW = 132,     /* bytes fetched ahead of the workers; default 512 MiB */
    STOKER_OPT_FETCH_TRANSFERS = 133,  /* transfers in flight; default 16 */
    STOKER_OPT_FETCH_RETRIES = 134,    /* attempts after the first, per request (0: none);
                                          default 8 */
    STOKER_OPT_FETCH_RETRY_MS = 135,   /* most time one request spends retrying (0: no retry);
                                          default 60000 */
    STOKER_OPT_FETCH_TIMEOUT_MS = 136, /* T: a transfer moving no byte this long fails (and is
                                          retried); also the connect timeout; an attempt for L
                                          bytes ends within T x (1 + L / 1 MiB), a request
                                          within fetch_retry_ms + that (docs/REMOTE.md);
                                          default 30000 */
    STOKER_OPT_FETCH_CLIENTS = 137,    /* HTTP clients (a thread each) sharing the transfers; 0
                                          (default): 2, or 1 under 4 transfers */
} stoker_option;

typedef enum stoker_backend {
    STOKER_BACKEND_AUTO = 0,
    STOKER_BACKEND_IO_URING = 1,
    STOKER_BACKEND_PREAD = 2,
    /* Reported only (stoker_stats.backend), never an option: the data set's records are
     * read by libhdf5 (H5Dread), one at a time under its global lock, not by the loader's
     * reader: HDF5 variable-length, lzf, szip or other filters, big-endian, compact
     * (docs/HDF5.md). Convert such a file with stoker-pack for full speed. */
    STOKER_BACKEND_HDF5 = 3,
    /* Reported only, never an option: a remote data set's records are read by the remote
     * source from the files of its block cache (docs/REMOTE.md), not by the loader's reader. */
    STOKER_BACKEND_REMOTE = 4,
} stoker_backend;

typedef enum stoker_on_corrupt {
    STOKER_ON_CORRUPT_DEFAULT = 0, /* = ERROR */
    STOKER_ON_CORRUPT_ERROR = 1,   /* stoker_loader_next fails with STOKER_E_CORRUPT */
    STOKER_ON_CORRUPT_SKIP = 2,    /* replace deterministically, count in stats */
} stoker_on_corrupt;

/* Each epoch's order is a permutation of the record ids, a pure function of (seed, epoch,
 * data set), the same on every rank and cut into batches and rank slices alike. */
typedef enum stoker_order {
    STOKER_ORDER_DEFAULT = 0, /* = RECORDS */
    STOKER_ORDER_RECORDS = 1, /* a permutation of all records */
    STOKER_ORDER_BLOCKS = 2,  /* a permutation of blocks of consecutive ids (a chunked HDF5
                                 dataset: one chunk's rows along axis 0; a remote data set:
                                 the records of four fetched blocks, on average; else 64 ids),
                                 each block's ids visited together in a permutation of their
                                 own: compressed chunks are inflated once per epoch
                                 (docs/HDF5.md), remote blocks fetched once (docs/REMOTE.md) */
} stoker_order;

typedef enum stoker_transform {
    STOKER_TRANSFORM_DEFAULT = 0, /* TRAIN for JPEG data sets, NONE for raw records */
    STOKER_TRANSFORM_NONE = 1,
    STOKER_TRANSFORM_TRAIN = 2,     /* RandomResizedCrop (STOKER_OPT_SCALE_MIN .. RATIO_MAX) +
                                       horizontal flip with probability STOKER_OPT_HFLIP (+
                                       vertical flip with probability STOKER_OPT_VFLIP) */
    STOKER_TRANSFORM_EVAL = 3,      /* resize short side to RESIZE, centre crop SIZE */
    STOKER_TRANSFORM_RESIZE = 4,    /* plain resize to SIZE x SIZE */
    STOKER_TRANSFORM_LETTERBOX = 5, /* the whole image, its aspect kept: the long side resized
                                       to SIZE, at the top left of a SIZE x SIZE sample whose
                                       rest is black (pixels of 0, normalised as the image's:
                                       -mean/std); no flips */
} stoker_transform;

typedef enum stoker_dct {
    STOKER_DCT_DEFAULT = 0, /* = ISLOW */
    STOKER_DCT_ISLOW = 1,
    STOKER_DCT_IFAST = 2,
} stoker_dct;

/* When the bilinear resampling is antialiased (its filter widened by the shrink factor,
 * as Pillow and torchvision's antialias=True do). Pillow's and torchvision's resize of a
 * Pillow image, term for term: ALWAYS with STOKER_RESAMPLER_PILLOW. */
typedef enum stoker_antialias {
    STOKER_ANTIALIAS_DEFAULT = 0, /* = OVER_2X */
    STOKER_ANTIALIAS_ALWAYS = 1,  /* every shrink: Pillow's bilinear resize */
    STOKER_ANTIALIAS_OVER_2X = 2, /* only along an axis shrunk by more than 2x; otherwise
                                     plain two-tap bilinear interpolation (torchvision's
                                     antialias=False), fewer taps and faster */
} stoker_antialias;

/* The arithmetic of the bilinear resampling. Both compute the same weights (Pillow's); they
 * differ in the precision they apply them with. */
typedef enum stoker_resampler {
    STOKER_RESAMPLER_DEFAULT = 0, /* = FAST */
    STOKER_RESAMPLER_FAST = 1,    /* weights rounded to 16 bits (at least 14 significant),
                                     two taps per SIMD multiply-add, as torchvision's own
                                     uint8 tensor resize does: a pixel may differ from
                                     Pillow's by 1, rarely 2 */
    STOKER_RESAMPLER_PILLOW = 2,  /* Pillow's 22-bit weights: for the same decoded pixels,
                                     the uint8 result equals Pillow's (and torchvision's on
                                     PIL images) exactly; slower */
} stoker_resampler;

/* Which transforms may have libjpeg shrink an image by 2, 4 or 8 while decoding it (in the
 * IDCT, as Pillow's Image.draft does): the largest factor after which the crop still
 * shrinks (or stays) to its output size along both axes is taken, and the resampler works
 * on the reduced image with the crop box scaled alike (a fractional box). The IDCT does the
 * first 2x of the shrink for less than the cost of decoding those pixels, and the resize
 * after it reads a quarter of them; the result is a slightly different low-pass of the same
 * crop (not equal to Pillow's resize of the full decode). */
typedef enum stoker_dct_scale {
    STOKER_DCT_SCALE_DEFAULT = 0, /* = TRAIN */
    STOKER_DCT_SCALE_NEVER = 1,   /* always decode the crop at full resolution */
    STOKER_DCT_SCALE_TRAIN = 2,   /* the train transform only (an augmentation already):
                                     eval keeps torchvision's resize of the full decode */
    STOKER_DCT_SCALE_ALWAYS = 3,  /* train, eval and resize */
} stoker_dct_scale;

/* Element types of records and batches. */
typedef enum stoker_dtype {
    STOKER_DTYPE_DEFAULT = 0,
    STOKER_DTYPE_UINT8 = 1,
    STOKER_DTYPE_INT8 = 2,
    STOKER_DTYPE_UINT16 = 3,
    STOKER_DTYPE_INT16 = 4,
    STOKER_DTYPE_UINT32 = 5,
    STOKER_DTYPE_INT32 = 6,
    STOKER_DTYPE_UINT64 = 7,
    STOKER_DTYPE_INT64 = 8,
    STOKER_DTYPE_FLOAT16 = 9,
    STOKER_DTYPE_BFLOAT16 = 10,
    STOKER_DTYPE_FLOAT32 = 11,
    STOKER_DTYPE_FLOAT64 = 12,
    STOKER_DTYPE_BOOL = 13,
} stoker_dtype;

/* Who decodes JPEG records (STOKER_OPT_DECODER). The GPU side is the hardware JPEG decoder
 * of the batches' device (nvJPEG's hardware back-end, loaded at run time): it takes the
 * records that decoder can decode (baseline or extended Huffman, 8-bit, grey or YCbCr with
 * 4:4:4, 4:2:2, 4:2:0 or 4:4:0 sampling) and the CPU workers the rest. Either side gives
 * the same samples within the decoders' rounding (docs/SEMANTICS.md). */
typedef enum stoker_decoder {
    STOKER_DECODER_AUTO = 0, /* the CPU first, the GPU only for what it cannot give: the
                                GPU's share rises while the consumer waits for batches with
                                the workers busy and falls while batches are ready ahead of
                                it (every image decoded on the GPU costs the consumer's
                                kernels some time), when batches
                                go to a GPU with the hardware decoder and the data set's
                                JPEGs were checked when packed (stoker_dataset_jpeg_checked:
                                that decoder reports no damage inside the compressed data);
                                else the CPU, and stoker_stats.decoder_note says why */
    STOKER_DECODER_CPU = 1,  /* the workers decode everything */
    STOKER_DECODER_GPU = 2,  /* every record the hardware decoder takes goes to the GPU,
                                from data sets not checked when packed too */
} stoker_decoder;

typedef enum stoker_layout {
    STOKER_LAYOUT_DEFAULT = 0, /* = NCHW */
    STOKER_LAYOUT_NCHW = 1,
    STOKER_LAYOUT_NHWC = 2,
} stoker_layout;

/* Size in bytes of one element of `dtype`, or 0 for an unknown value. */
STOKER_API size_t stoker_dtype_size(int32_t dtype);
/* A static name for `dtype` ("uint8", "float16", ...; NumPy's spelling), "unknown" else. */
STOKER_API const char *stoker_dtype_name(int32_t dtype);

/* Creates a config holding every default. Returns 0, or -ENOMEM (then *out is NULL). */
STOKER_API int stoker_config_create(stoker_config **out);
/* Destroys a config; NULL is accepted. */
STOKER_API void stoker_config_destroy(stoker_config *cfg);
/* Sets an integer option. STOKER_E_INVALID for an unknown option, a non-integer option or
 * a value out of the option's range (the config is then unchanged). */
STOKER_API int stoker_config_set_int(stoker_config *cfg, stoker_option opt, int64_t value);
/* Reads an integer option's current value (its default unless set). */
STOKER_API int stoker_config_get_int(const stoker_config *cfg, stoker_option opt, int64_t *value);
/* Sets / reads a floating-point option (mean, std). */
STOKER_API int stoker_config_set_float(stoker_config *cfg, stoker_option opt, double value);
STOKER_API int stoker_config_get_float(const stoker_config *cfg, stoker_option opt, double *value);
/* Sets a string option (copied), NULL restoring the default; -ENOMEM, STOKER_E_INVALID. */
STOKER_API int stoker_config_set_string(stoker_config *cfg, stoker_option opt, const char *value);
/* Reads a string option; the pointer is owned by the config, valid until it changes. */
STOKER_API int stoker_config_get_string(const stoker_config *cfg, stoker_option opt,
                                        const char **value);
/* Sets the log callback (NULL: no logging) and the most verbose level passed to it. */
STOKER_API int stoker_config_set_log(stoker_config *cfg, stoker_log_fn fn, void *user,
                                     int32_t max_level);
/* A static name of an option ("batch_size"), or NULL for an unknown one. */
STOKER_API const char *stoker_option_name(stoker_option opt);

/* ---- what each option is ----
 * Read from the library's one table of options (src/common/config.c), which also gives
 * each option its name, range and default (a new config's value), so that bindings and
 * tools list options from it instead of keeping lists of their own. */
#define STOKER_OPTION_INT 1    /* set with stoker_config_set_int */
#define STOKER_OPTION_FLOAT 2  /* set with stoker_config_set_float */
#define STOKER_OPTION_STRING 3 /* set with stoker_config_set_string */
#define STOKER_FOR_WRITER 1    /* read by stoker_writer_create */
#define STOKER_FOR_DATASET 2   /* read by stoker_dataset_open */
#define STOKER_FOR_LOADER 4    /* read by stoker_loader_create */

/* A static one-line description of option `opt`: what it sets and its default, as the
 * comment beside its key above says at length; NULL for an unknown option. Thread-safe. */
STOKER_API const char *stoker_option_doc(stoker_option opt);
/* What option `opt` is: *type, a STOKER_OPTION_* (which stoker_config_set_* takes it);
 * *applies, STOKER_FOR_* bits (the objects it has an effect on); *values, the stoker_enum
 * that names its values (STOKER_ENUM_DCT for STOKER_OPT_DCT), or 0; *min and *max, the
 * range stoker_config_set_int takes (a few options take only some values of it: ALIGN),
 * 0 and 0 for an option that is not an integer. Any pointer may be NULL. Returns 0, or
 * STOKER_E_INVALID for an unknown option (nothing is written). Thread-safe. */
STOKER_API int stoker_option_describe(stoker_option opt, int32_t *type, int32_t *applies,
                                      int32_t *values, int64_t *min, int64_t *max);
/* The unit of integer option `opt`'s value: STOKER_UNIT_BYTES, STOKER_UNIT_MS
 * (milliseconds), or 0 (a count, a flag, an enum's value, or not an integer option). */
#define STOKER_UNIT_BYTES 1
#define STOKER_UNIT_MS 2
STOKER_API int32_t stoker_option_unit(stoker_option opt);

/* ---- names of enum values ----
 * One table per enum, used by stoker-bench and the Python binding alike, so a value is
 * spelt the same everywhere: "float16", "nchw", "train", "islow", "io_uring", ... */
typedef enum stoker_enum {
    STOKER_ENUM_STATUS = 1,     /* stoker_status: "ok", "end", "invalid", "corrupt", ... */
    STOKER_ENUM_CAPABILITY = 2, /* stoker_capability: "io_uring", "simd", ... */
    STOKER_ENUM_SIMD = 3,       /* stoker_simd: "auto", "scalar", "avx2", "avx512" */
    STOKER_ENUM_LOG_LEVEL = 4,  /* stoker_log_level: "error", "warn", "info", "debug" */
    STOKER_ENUM_OPTION = 5,     /* stoker_option: "batch_size", ... (stoker_option_name) */
    STOKER_ENUM_BACKEND = 6,    /* stoker_backend: "auto", "io_uring", "pread", "hdf5",
                                   "remote" */
    STOKER_ENUM_ON_CORRUPT = 7, /* stoker_on_corrupt: "error", "skip" */
    STOKER_ENUM_ORDER = 8,      /* stoker_order: "records", "blocks" */
    STOKER_ENUM_TRANSFORM = 9,  /* stoker_transform: "none", "train", "eval", "resize",
                                   "letterbox" */
    STOKER_ENUM_DCT = 10,       /* stoker_dct: "islow" (also "accurate"), "ifast" ("fast") */
    STOKER_ENUM_ANTIALIAS = 11, /* stoker_antialias: "always", "over2x" */
    STOKER_ENUM_RESAMPLER = 12, /* stoker_resampler: "fast", "pillow" */
    STOKER_ENUM_DCT_SCALE = 13, /* stoker_dct_scale: "never", "train", "always" */
    STOKER_ENUM_DTYPE = 14,     /* stoker_dtype: NumPy's spelling, "uint8" .. "bool" */
    STOKER_ENUM_LAYOUT = 15,    /* stoker_layout: "nchw", "nhwc" */
    STOKER_ENUM_FIELD = 16,     /* stoker_field_kind: "bytes", "jpeg", "raw", "png", "array",
                                   "int64", "float32" */
    STOKER_ENUM_DECODER = 17,   /* stoker_decoder: "auto", "cpu", "gpu" */
    STOKER_ENUM_FIELD_TIE = 18, /* stoker_field_tie: "none", "mask_of" (also "mask"),
                                   "boxes_of" ("boxes"), "rows_of" ("rows") */
} stoker_enum;

/* The static name of `value` in enum `e`, or NULL when it has none (an unknown value, or a
 * DEFAULT that only means "choose for me"). Thread-safe. */
STOKER_API const char *stoker_enum_name(stoker_enum e, int32_t value);
/* The value named `name` in enum `e` (case-insensitive; the aliases listed above too).
 * 0, or STOKER_E_INVALID for an unknown name. Thread-safe. */
STOKER_API int stoker_enum_parse(stoker_enum e, const char *name, int32_t *value);
/* The index-th value of enum `e` (0, 1, ...), to list them: 0, or STOKER_E_INVALID past the
 * last. Thread-safe. */
STOKER_API int stoker_enum_at(stoker_enum e, int32_t index, int32_t *value);

/* ------------------------------------------------------------------------------------------ */
/* Writing a data set (packed shards)                                                         */
/* ------------------------------------------------------------------------------------------ */

/* A writer builds a data set directory: shard files plus one manifest (docs/FORMAT.md).
 * Output is atomic: everything is written into a hidden temporary directory beside the
 * destination and renamed into place by stoker_writer_finish(); an unfinished writer
 * (destroyed, canceled or failed) removes its temporary directory and leaves any previous
 * output untouched. One thread at a time per writer, except stoker_writer_cancel. */
typedef struct stoker_writer stoker_writer;

/* What every record of a data set holds. */
typedef enum stoker_field_kind {
    STOKER_FIELD_BYTES = 1,   /* opaque variable-size bytes */
    STOKER_FIELD_JPEG = 2,    /* JPEG-encoded images */
    STOKER_FIELD_RAW = 3,     /* fixed-shape tensors of one dtype */
    STOKER_FIELD_PNG = 4,     /* PNG-encoded images (masks: 8-bit gray or palette indices) */
    STOKER_FIELD_ARRAY = 5,   /* rows of one dtype and row shape, any number per sample */
    STOKER_FIELD_INT64 = 6,   /* one int64 (a class id) */
    STOKER_FIELD_FLOAT32 = 7, /* one float32 (a regression target) */
} stoker_field_kind;

/* How a field follows another (docs/FORMAT.md "Samples with several fields"). */
typedef enum stoker_field_tie {
    STOKER_TIE_NONE = 0,
    STOKER_TIE_MASK = 1,  /* mask_of IMAGE: a PNG (or raw uint8 [H, W]) the image's size,
                             cropped, resized (nearest neighbour) and flipped with it */
    STOKER_TIE_BOXES = 2, /* boxes_of IMAGE: a float32 array of rows [x1, y1, x2, y2] in the
                             image's pixels, mapped through its crop, resize and flip, clipped;
                             a box left with no area is dropped */
    STOKER_TIE_ROWS = 3,  /* rows_of BOXES: an array with one row per box (class ids), whose
                             rows are dropped with their boxes */
} stoker_field_tie;

#define STOKER_MAX_DIMS 8
#define STOKER_MAX_FIELDS 32     /* fields per sample */
#define STOKER_FIELD_NAME_MAX 63 /* bytes of a field's name */

/* One field of a sample. Names are 1 to STOKER_FIELD_NAME_MAX bytes of [A-Za-z0-9_], not
 * starting with a digit, unique within the schema. A data set written with one field (and a
 * label) has the fields "image" (JPEG) or "data" (RAW, BYTES), then "label" (INT64). */
typedef struct stoker_field_desc {
    uint32_t struct_size; /* sizeof(stoker_field_desc), set by the caller */
    int32_t kind;         /* stoker_field_kind */
    const char *name;
    int32_t dtype; /* RAW, ARRAY: the element's stoker_dtype; INT64, FLOAT32: theirs */
    int32_t ndim;  /* RAW: the tensor's dimensions; ARRAY: one row's (0: rows of one value) */
    int64_t shape[STOKER_MAX_DIMS];
    int32_t tie;        /* stoker_field_tie */
    const char *tie_to; /* the field it is tied to, or NULL */
    int64_t max;        /* in a data set: the largest value of a variable field (bytes; rows
                           for ARRAY), 0 for fixed fields; ignored by the writer */
} stoker_field_desc;

/* One field's value in a sample: the encoded bytes of JPEG, PNG and BYTES, the rows of an
 * ARRAY (size a multiple of the row's bytes), the tensor of RAW, the 8 or 4 bytes of INT64 and
 * FLOAT32, all little-endian. */
typedef struct stoker_field_value {
    const void *data;
    uint64_t size;
} stoker_field_value;

/* Creates a writer for the data set directory `path`. Fails with STOKER_E_EXISTS when
 * `path` exists and STOKER_OPT_OVERWRITE is 0, and also with OVERWRITE when `path` is not an
 * empty folder or a stoker data set (a manifest and its shards, nothing else): the writer
 * only ever deletes the files of a data set it replaces. STOKER_E_INVALID for a bad
 * option. `cfg` may be NULL (defaults). *out is set even on failure (unless -ENOMEM leaves
 * it NULL) so the message can be read with stoker_writer_errmsg; destroy it either way. */
STOKER_API int stoker_writer_create(stoker_writer **out, const char *path,
                                    const stoker_config *cfg);

/* Declares the records' field; must precede the first record. For STOKER_FIELD_RAW,
 * `dtype` and `shape[0..ndim)` give each record's tensor (ndim 0..STOKER_MAX_DIMS) and every
 * record must be exactly that many bytes; otherwise dtype/ndim/shape are ignored (pass 0,
 * 0, NULL). Default: STOKER_FIELD_BYTES. */
STOKER_API int stoker_writer_set_field(stoker_writer *w, stoker_field_kind kind, int32_t dtype,
                                       int32_t ndim, const int64_t *shape);

/* Declares a schema of `n` fields (1 .. STOKER_MAX_FIELDS); must precede the first record,
 * instead of stoker_writer_set_field. A mask or boxes field must be tied to a JPEG or PNG
 * field, a rows field to a boxes field; a boxes field is a float32 ARRAY of rows of 4. The
 * data set is then written in manifest version 3 (docs/FORMAT.md). STOKER_E_INVALID names
 * the field and what is wrong with it. */
STOKER_API int stoker_writer_set_fields(stoker_writer *w, const stoker_field_desc *fields,
                                        int32_t n);

/* Appends one sample of the declared schema: values[i] for field i (n must equal the number
 * of fields), copied before return. Checks each value against its field: a size that does not
 * fit the kind, dtype or shape; an image that is not a JPEG or PNG (its size read from its
 * header); a mask of another size than its image; a box with NaN, x2 < x1, y2 < y1 or outside
 * the image; rows whose count differs from their boxes'. STOKER_E_INVALID then names the key
 * (or the sample's number) and the field, and the writer stays usable. */
STOKER_API int stoker_writer_add_sample(stoker_writer *w, const stoker_field_value *values,
                                        int32_t n, const char *key);

/* Appends a class name (label = its position). Optional; names are stored in the manifest.
 * UTF-8, any bytes but NUL. */
STOKER_API int stoker_writer_add_class(stoker_writer *w, const char *name);

/* Appends one record: its payload (copied before return), label, and an optional key
 * (e.g. the source's relative path; NULL for none). Record ids follow call order. */
STOKER_API int stoker_writer_add(stoker_writer *w, const void *payload, size_t size, int64_t label,
                                 const char *key);

/* Completes the data set: writes the last shard's index and footer, the manifest, syncs
 * and renames the result into place (replacing an old one only with OVERWRITE). After
 * success the writer accepts nothing but destroy. Returns STOKER_E_EMPTY if no record was
 * added (nothing is published). */
STOKER_API int stoker_writer_finish(stoker_writer *w);

/* Asks a writer to stop: the next (or a running) add/finish fails with STOKER_E_CANCELED.
 * Async-signal-safe and callable from any thread. */
STOKER_API void stoker_writer_cancel(stoker_writer *w);

/* Destroys a writer; if it was not finished, its temporary output is removed (not in a child
 * process forked from the creator, whose copy of the writer does not own it). NULL ok. */
STOKER_API void stoker_writer_destroy(stoker_writer *w);

/* The detailed message of the writer's last failure ("" if none). Owned by the writer. */
STOKER_API const char *stoker_writer_errmsg(const stoker_writer *w);

/* Records and bytes (payload) written so far. */
STOKER_API int64_t stoker_writer_records(const stoker_writer *w);
STOKER_API int64_t stoker_writer_bytes(const stoker_writer *w);

/* ------------------------------------------------------------------------------------------ */
/* Reading a data set                                                                         */
/* ------------------------------------------------------------------------------------------ */

/* An open, read-only data set: a shard directory, an HDF5 file (FILE or FILE:/dataset) where
 * supported, or either at an http://, https:// or s3:// URL (an HDF5 file's URL ends in .h5,
 * .hdf5 or .he5; docs/REMOTE.md) where built with libcurl. Opening
 * validates the manifest and every shard's footer and index against the configured limits;
 * payload CRCs are checked when records are read. Immutable after open: any number of
 * threads may call the read functions concurrently. */
typedef struct stoker_dataset stoker_dataset;

/* Opens a data set. *out is set even on failure (unless -ENOMEM leaves it NULL); read the
 * reason with stoker_dataset_errmsg and close it either way. Errors: -ENOENT and other
 * -errno, STOKER_E_FORMAT (not a data set, wrong version), STOKER_E_CORRUPT (checksum,
 * truncation, inconsistent sizes), STOKER_E_LIMIT.
 *
 * `path` may also be the http://, https:// or s3://BUCKET/PREFIX URL of a packed data set
 * (of its directory or of its manifest.stk; docs/REMOTE.md): open reads the manifest and
 * every shard's header, footer and index over the network, with the same checks, and
 * records are then read from blocks fetched into a block cache on local disk. These options
 * set how: STOKER_OPT_CACHE_DIR, STOKER_OPT_CACHE_LIMIT, STOKER_OPT_BLOCK_SIZE,
 * STOKER_OPT_FETCH_WINDOW, STOKER_OPT_FETCH_TRANSFERS, STOKER_OPT_FETCH_CLIENTS,
 * STOKER_OPT_FETCH_RETRIES, STOKER_OPT_FETCH_RETRY_MS, STOKER_OPT_FETCH_TIMEOUT_MS,
 * STOKER_OPT_CA_BUNDLE, STOKER_OPT_HTTP_HEADER, STOKER_OPT_S3_REGION, STOKER_OPT_S3_ENDPOINT
 * (S3's keys come from the environment: AWS_ACCESS_KEY_ID, ...). An HDF5 file's URL (its path
 * ends in .h5, .hdf5 or .he5, optionally followed by :/dataset) is read through the same
 * block cache, its batches the local file's (docs/HDF5.md). STOKER_E_UNSUPPORTED for any URL
 * in a build without libcurl (or an HDF5 URL in a build without HDF5); a request that still
 * fails after its retries fails the open, naming the URL and the cause. */
STOKER_API int stoker_dataset_open(stoker_dataset **out, const char *path,
                                   const stoker_config *cfg);
/* Closes a data set; NULL ok. Not while another thread uses it. */
STOKER_API void stoker_dataset_close(stoker_dataset *ds);
/* The detailed message of the calling thread's last failed call on this handle, else of a
 * failed open ("" if none). Each thread has its own: a read failing on another thread never
 * changes it. Owned by the library; valid until the calling thread's next call on a data
 * set. Any thread. */
STOKER_API const char *stoker_dataset_errmsg(const stoker_dataset *ds);

STOKER_API int64_t stoker_dataset_num_records(const stoker_dataset *ds);
STOKER_API int32_t stoker_dataset_num_shards(const stoker_dataset *ds);
/* The file of shard `i` (owned by the data set), or NULL when out of range. */
STOKER_API const char *stoker_dataset_shard_path(const stoker_dataset *ds, int32_t i);
STOKER_API int32_t stoker_dataset_num_classes(const stoker_dataset *ds);
/* Class name `i` (owned by the data set), or NULL when out of range. */
STOKER_API const char *stoker_dataset_class_name(const stoker_dataset *ds, int32_t i);
/* Total payload bytes of all records. */
STOKER_API int64_t stoker_dataset_payload_bytes(const stoker_dataset *ds);
/* Format version of the data set's manifest (1; 2 for a data set whose JPEGs were checked; 3
 * for one with a schema of several fields). */
STOKER_API int32_t stoker_dataset_format_version(const stoker_dataset *ds);
/* The payload alignment its manifest states (1, 512 or 4096), of a local or a remote data
 * set; 1 for an HDF5 file (its records are not aligned). */
STOKER_API int32_t stoker_dataset_align(const stoker_dataset *ds);
/* 1 when the manifest says that every JPEG record was decoded without an error or a warning
 * before it was written (STOKER_OPT_JPEG_CHECKED), else 0 (HDF5 files included). */
STOKER_API int stoker_dataset_jpeg_checked(const stoker_dataset *ds);
/* The field: kind (stoker_field_kind), and for RAW the dtype and shape (shape must have
 * room for STOKER_MAX_DIMS). Any out pointer may be NULL. A data set with a schema (manifest
 * version 3) answers BYTES: its records are payloads of several fields, which
 * stoker_dataset_split_record separates. */
STOKER_API int stoker_dataset_field(const stoker_dataset *ds, int32_t *kind, int32_t *dtype,
                                    int32_t *ndim, int64_t *shape);
/* The data set's fields (at least 1): a data set written before schemas has its one field
 * and "label". */
STOKER_API int32_t stoker_dataset_num_fields(const stoker_dataset *ds);
/* Field `i` (0 .. num_fields - 1) into *out (struct_size set by the caller); its strings are
 * owned by the data set. STOKER_E_INVALID for `i` out of range. */
STOKER_API int stoker_dataset_field_desc(const stoker_dataset *ds, int32_t i,
                                         stoker_field_desc *out);
/* The index of the field named `name`, or -1. */
STOKER_API int32_t stoker_dataset_field_index(const stoker_dataset *ds, const char *name);
/* Splits record `id`'s payload (as stoker_dataset_read gives it) into its fields' values:
 * out[i] for field i (room for num_fields), pointing into `payload`, except a data set without
 * a schema's "label", which points to the record's label (8 bytes owned by the data set).
 * STOKER_E_CORRUPT when the payload does not follow the schema's layout, or when its boxes
 * break the rule the loader checks them by (a value not finite, a box not within its image's
 * stored size with x1 <= x2, y1 <= y2; rows tied to them not one a box) (the message names
 * the file, the record, the field and what is wrong), STOKER_E_INVALID for an id out of
 * range. */
STOKER_API int stoker_dataset_split_record(stoker_dataset *ds, int64_t id, const void *payload,
                                           size_t size, stoker_field_value *out);

/* A record's payload size, label and shard number, without reading it. Any out pointer may
 * be NULL. STOKER_E_INVALID for an id out of range. */
STOKER_API int stoker_dataset_record_info(const stoker_dataset *ds, int64_t id, uint64_t *size,
                                          int64_t *label, int32_t *shard);
/* A record's key (NUL-terminated, owned by the data set), or NULL if it has none or `id`
 * is out of range. */
STOKER_API const char *stoker_dataset_record_key(stoker_dataset *ds, int64_t id);
/* Reads record `id` into buf (capacity cap) and checks its CRC32C. *size receives the
 * payload size. Errors: STOKER_E_INVALID (id), STOKER_E_LIMIT (cap too small; *size tells
 * the need), STOKER_E_CORRUPT (CRC mismatch, short file), -EIO. Thread-safe. */
STOKER_API int stoker_dataset_read(stoker_dataset *ds, int64_t id, void *buf, size_t cap,
                                   size_t *size);

/* One finding of stoker_dataset_verify: `shard` and `record` are -1 where not applicable. */
typedef void (*stoker_verify_fn)(void *user, int32_t shard, int64_t record, int32_t code,
                                 const char *msg);

/* Checks a data set completely: manifest, every shard's size, whole-file checksum, footer,
 * index and every record's CRC32C, continuing past problems. Each problem is reported
 * through `fn` (may be NULL) naming the shard and record. `*problems` (may be NULL) receives
 * the count. Returns 0 when intact, STOKER_E_CORRUPT (or the first open error) otherwise. */
STOKER_API int stoker_dataset_verify(const char *path, const stoker_config *cfg,
                                     stoker_verify_fn fn, void *user, int64_t *problems);

/* Frees memory the library returned to the caller. NULL ok. */
STOKER_API void stoker_free(void *p);

/* CRC32C (Castagnoli) of `size` bytes, continuing from `crc` (0 to start). */
STOKER_API uint32_t stoker_crc32c(uint32_t crc, const void *data, size_t size);

/* ------------------------------------------------------------------------------------------ */
/* Loader                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* A loader streams batches from a data set: sampler -> reader -> worker pool -> batch
 * slots (-> GPU). Its threads start at create. Unless said otherwise, loader functions
 * must be called from one thread at a time (the consumer thread): next, set_epoch and
 * state_restore called while another thread is in one of them return STOKER_E_STATE at once
 * (no message is set). stoker_batch_release may be called from any thread, and the stats
 * and get functions from any thread. In a child process forked from the creator the loader
 * is unusable (its threads are the parent's); there, destroy frees nothing and returns.
 *
 * Order: each epoch is a permutation drawn from (seed, epoch), the same on every rank, cut
 * into global batches of batch_size x world_size records; rank r takes slice r of each
 * (docs/SEMANTICS.md). Corrupt records follow STOKER_OPT_ON_CORRUPT. Memory: `depth`
 * batch slots allocated at create (STOKER_OPT_DEPTH; stoker_stats.depth says how many);
 * steady state allocates nothing. */
typedef struct stoker_loader stoker_loader;
/* A batch handed out by stoker_loader_next, valid until stoker_batch_release. */
typedef struct stoker_batch stoker_batch;

/* Creates a loader over the data set at `path` and starts its worker threads. *out is set
 * even on failure (unless -ENOMEM leaves it NULL) so stoker_loader_errmsg can tell why;
 * destroy it either way (a loader whose create failed answers STOKER_E_STATE).
 * Errors: those of stoker_dataset_open; STOKER_E_INVALID (rank >= world size, a bad
 * RANK/WORLD_SIZE with STOKER_OPT_DIST_ENV, direct I/O on a data set not aligned to 4096);
 * STOKER_E_UNSUPPORTED (io_uring requested but unavailable, a transform or dtype conversion
 * this build cannot do, a SIMD level this CPU lacks, GPU normalisation without a device);
 * STOKER_E_CUDA (an explicit STOKER_OPT_DEVICE that is not usable, a CUDA failure setting up
 * the GPU stage; docs/GPU.md); -ENOMEM. With STOKER_BACKEND_AUTO the
 * loader uses io_uring when a ring can be set up, else pread (see stoker_stats.backend). */
STOKER_API int stoker_loader_create(stoker_loader **out, const char *path,
                                    const stoker_config *cfg);

/* Stops the loader's threads and frees everything, including batches not yet released
 * (their pointers become invalid). Any time, mid-epoch too. NULL ok. Not concurrently with
 * any other call on the loader or its batches. */
STOKER_API void stoker_loader_destroy(stoker_loader *l);

/* The detailed message of the loader's last failure ("" if none): data set, shard file,
 * record id and cause. Owned by the loader, valid until its next call. */
STOKER_API const char *stoker_loader_errmsg(const stoker_loader *l);

/* The value the loader runs with for option `opt`, as it resolved it at create: defaults
 * applied and the rules between options decided (the dtype batches come in, the depth, the
 * threads, the device, the eval resize...), in the option's own encoding, so that setting
 * it gives the same loader. STOKER_OPT_DEVICE is the ordinal + 1, or -1 for host batches.
 * SEED, SHUFFLE, DROP_LAST and ORDER are the order in force: after
 * stoker_loader_state_restore, the restored state's.
 * Returns 0; STOKER_E_UNSUPPORTED for an option with no effect on this loader (image
 * options of raw records; mean and std when nothing is normalised); STOKER_E_INVALID for
 * NULL arguments or an option that is not a loader's; STOKER_E_STATE when create failed.
 * Any thread. */
STOKER_API int stoker_loader_get_int(const stoker_loader *l, stoker_option opt, int64_t *value);
STOKER_API int stoker_loader_get_float(const stoker_loader *l, stoker_option opt, double *value);
/* Where the consumer is: the epoch it is in and the batches of it already handed out (what
 * a saved state holds). Either pointer may be NULL. STOKER_E_INVALID when create failed.
 * The consumer thread. */
STOKER_API int stoker_loader_position(const stoker_loader *l, int64_t *epoch, int64_t *position);

/* Hands out the next batch of the current epoch, blocking until it is ready. Returns 0
 * (*out set; give it back with stoker_batch_release), or STOKER_END once at the end of the
 * epoch (*out NULL): the following call starts the next epoch (epoch + 1) by itself, its
 * batches already read ahead; stoker_loader_set_epoch chooses another one.
 * Errors: STOKER_E_CORRUPT (a record failed its CRC32C or was cut short, with policy ERROR,
 * or with SKIP when no intact replacement was found), -EIO and other -errno from reads,
 * -ENOMEM (read and memory errors are never skipped, whatever the policy);
 * errmsg names the shard and record. A failed batch counts as consumed: the next call goes
 * on with the following batch. STOKER_E_STATE when create failed, or when the batch
 * handed out `depth` calls earlier is still held: the `depth` slots form a ring, so batch k
 * is filled in the slot of batch k - depth once that one is released (release it, or
 * detach its memory with stoker_batch_detach and release it, then call again; holding fewer
 * than `depth` batches in order never sees this). STOKER_E_INVALID for
 * NULL arguments. */
STOKER_API int stoker_loader_next(stoker_loader *l, stoker_batch **out);

/* stoker_loader_next waiting at most `timeout_ms` for the batch (< 0: as long as it takes,
 * as stoker_loader_next; 0: only a batch that is ready): STOKER_AGAIN, with nothing
 * consumed and *out NULL, when it is not ready by then; the next call waits for the same
 * batch (the time waited counts in the stats once it is delivered). A batch that failed
 * (with -ETIMEDOUT from a remote read, say) is consumed and returns its error, as with
 * stoker_loader_next. A binding calls it in short steps, so that a signal or a close from
 * another thread is acted on while the loader waits (for a remote block, say). Same thread
 * rule and other returns as stoker_loader_next. */
STOKER_API int stoker_loader_next_wait(stoker_loader *l, stoker_batch **out, int64_t timeout_ms);

/* Counts `seconds` more of the consumer's time getting batches, for the stats' and the
 * windows' wait: a binding's own work around stoker_loader_next (building its batch object,
 * say), which the library cannot see, so that the consumer's share of time spent in next()
 * is what its loop spent there. Consumer thread, as stoker_loader_next. 0,
 * STOKER_E_INVALID (NULL, negative or not finite) or STOKER_E_STATE (another thread is in
 * a consumer call). */
STOKER_API int stoker_loader_add_wait(stoker_loader *l, double seconds);

/* Gives a batch's slot back to the loader, which may then refill it. Any thread. Returns
 * 0, STOKER_E_INVALID (NULL) or STOKER_E_STATE (already released). */
STOKER_API int stoker_batch_release(stoker_batch *b);

/* Memory taken out of a loader by stoker_batch_detach, freed with stoker_memory_free. */
typedef struct stoker_memory stoker_memory;

/* Takes batch b's memory (its data and its fields region, host or device) out of the
 * loader, without a copy, so that b's data and field pointers stay valid past its release:
 * until stoker_memory_free(*out), from any thread, even after the loader is destroyed. The
 * loader gives b's slot (or device buffer) fresh memory of the same size, which it uses
 * from b's release on; release b as usual afterwards (b's pointers do not change). ids,
 * labels (unless a field), offsets and host_offsets are the loader's: valid until release.
 * Costs one allocation of the batch's size (pinned memory with a device; device memory for
 * a device batch) and nothing in the steady state of a loader that never detaches. For a
 * device batch, detach waits on the host until the loader's copy into b is complete: from
 * then on the memory's only readers are the caller's own work, which must be done (or be
 * queued before the free: cudaFree waits for the device's work) before stoker_memory_free.
 * The consumer thread, on a batch handed out and not yet released. Returns 0;
 * STOKER_E_INVALID (NULL); STOKER_E_STATE (b released, or already detached); -ENOMEM or
 * STOKER_E_CUDA (no fresh memory: nothing changed, b is still the loader's); message in
 * stoker_loader_errmsg. */
STOKER_API int stoker_batch_detach(stoker_batch *b, stoker_memory **out);

/* Frees memory taken by stoker_batch_detach (pinned host memory with cudaFreeHost, device
 * memory with cudaFree on its device, the caller's current device kept). Any thread, at any
 * time after the detach (before or after the batch's release or the loader's destruction).
 * NULL ok. */
STOKER_API void stoker_memory_free(stoker_memory *m);

/* DLPack deleters for a binding whose release code runs inside an interpreter (Python). A
 * consumer calls a DLManagedTensor's deleter from C: from any thread, with or without the
 * interpreter's lock, and often while the interpreter unwinds an exception (a tensor freed
 * as a frame is left); interpreted code run then would see that exception pending and lose
 * or replace it. These deleters take the lock (enter), set the pending exception aside
 * (save), call the binding's function, put the exception back (restore) and let go (leave).
 * The binding gives its interpreter's entry points once, before its first export: for
 * CPython PyGILState_Ensure, PyGILState_Release, PyErr_Fetch, PyErr_Restore and
 * PyErr_SetInterrupt. The binding's functions return nonzero when the user's interrupt
 * (Ctrl-C) landed inside them, where it cannot propagate: the thunk then raises it again
 * (interrupt) after the pending exception is back, so the interpreter acts on it once
 * control returns to its code, not inside the binding's function. */
typedef struct stoker_dlpack_guard {
    int (*enter)(void);
    void (*leave)(int state);
    void (*save)(void **type, void **value, void **traceback);
    void (*restore)(void *type, void *value, void *traceback);
    int (*deleter)(void *managed_tensor); /* the binding's: releases one export */
    int (*destructor)(void *capsule);     /* the binding's: an unconsumed capsule's */
    void (*interrupt)(void);
} stoker_dlpack_guard;

/* Sets the guard the two functions below use (g stays valid for the life of the process;
 * the last call wins). Returns 0 or STOKER_E_INVALID (NULL, or a NULL member). */
STOKER_API int stoker_dlpack_set_guard(const stoker_dlpack_guard *g);

/* A DLManagedTensor's deleter: runs the guard's deleter on it as described above; nothing
 * before stoker_dlpack_set_guard. */
STOKER_API void stoker_dlpack_deleter(void *managed_tensor);

/* A PyCapsule's destructor, likewise with the guard's destructor. */
STOKER_API void stoker_dlpack_capsule_destructor(void *capsule);

/* A DLPack DLManagedTensor (the classic, unversioned ABI that numpy >= 1.22 and PyTorch
 * take) for a C-contiguous tensor at `data`: `ndim` (0 .. STOKER_MAX_DIMS + 1) extents in
 * `shape` (copied), of stoker dtype `dtype`, in host memory (device -1: kDLCPU, pinned
 * memory included) or on CUDA device `device` (kDLCUDA). Its deleter runs the guard's deleter
 * on it as stoker_dlpack_deleter does, then frees it. *managed gets its address. Made in one
 * call for a binding whose foreign calls cost more than the struct. STOKER_E_INVALID (NULL
 * managed, ndim out of range, a negative extent, a dtype DLPack has no code for, no guard
 * set), -ENOMEM. */
STOKER_API int stoker_dlpack_export(void *data, int32_t ndim, const int64_t *shape, int32_t dtype,
                                    int32_t device, void **managed);

/* Runs a DLManagedTensor's own deleter (for a capsule destroyed unconsumed). NULL ok. */
STOKER_API void stoker_dlpack_delete(void *managed_tensor);

/* Restarts at the beginning of `epoch` (0 .. 2^40, as STOKER_OPT_EPOCH), discarding what
 * was read ahead; except right after stoker_loader_state_restore (no next since) with the
 * restored epoch: the loader then stays at the restored position, so that a resumed loop
 * that calls set_epoch before each epoch continues the restored one. Batches still held
 * stay valid: a held batch's slot is refilled once it is released, and until then
 * stoker_loader_next answers STOKER_E_STATE when it needs that slot (the ring rule). */
STOKER_API int stoker_loader_set_epoch(stoker_loader *l, int64_t epoch);

/* Batches, and records (padding included, replacements not counted apart), per epoch on
 * this rank. The same on every rank. */
STOKER_API int stoker_loader_num_batches(const stoker_loader *l, int64_t *n);
STOKER_API int stoker_loader_num_records(const stoker_loader *l, int64_t *n);

/* ---- batches ---- */

/* What a batch holds. Fixed-size records (STOKER_FIELD_RAW): data is a dense array
 * [count, *record_shape] of the stored dtype, offsets is NULL. Records that vary in size
 * (BYTES, JPEG with STOKER_TRANSFORM_NONE): data is the records' bytes packed back to back
 * (dtype uint8, ndim 1, shape [nbytes]) and offsets has count + 1 entries (record j is
 * data[offsets[j] .. offsets[j+1])). Pointers are owned by the loader and valid until the
 * batch is released. The caller sets struct_size = sizeof(stoker_batch_view); the library
 * fills only the fields that fit, and new fields are only ever added at the end. */
typedef struct stoker_batch_view {
    uint32_t struct_size;
    int32_t dtype;  /* a stoker_dtype */
    int32_t ndim;   /* dimensions of data, batch dimension included */
    int32_t device; /* -1: host memory; else the CUDA device ordinal */
    int64_t count;  /* records in the batch */
    int64_t shape[STOKER_MAX_DIMS + 1];
    void *data;
    uint64_t nbytes;        /* bytes of data */
    const int64_t *offsets; /* count + 1 entries, or NULL for fixed-size records */
    const int64_t *labels;  /* count entries */
    const int64_t *ids;     /* count record ids */
    int64_t epoch;
    int64_t position; /* index of the batch within its epoch */
} stoker_batch_view;

/* Fills `view` (struct_size set by the caller, at least 4). 0 or STOKER_E_INVALID. */
STOKER_API int stoker_batch_get_view(const stoker_batch *b, stoker_batch_view *view);

/* The same fields one by one (for FFIs); NULL b gives 0 / NULL. */
STOKER_API int64_t stoker_batch_count(const stoker_batch *b);
STOKER_API void *stoker_batch_data(const stoker_batch *b);
STOKER_API uint64_t stoker_batch_nbytes(const stoker_batch *b);
STOKER_API int32_t stoker_batch_dtype(const stoker_batch *b);
STOKER_API int32_t stoker_batch_ndim(const stoker_batch *b);
/* ndim entries, owned by the batch. */
STOKER_API const int64_t *stoker_batch_shape(const stoker_batch *b);
STOKER_API const int64_t *stoker_batch_offsets(const stoker_batch *b);
STOKER_API const int64_t *stoker_batch_labels(const stoker_batch *b);
STOKER_API const int64_t *stoker_batch_ids(const stoker_batch *b);
STOKER_API int64_t stoker_batch_epoch(const stoker_batch *b);
STOKER_API int64_t stoker_batch_position(const stoker_batch *b);
STOKER_API int32_t stoker_batch_device(const stoker_batch *b);

/* ---- a batch's fields ----
 * Every field of the schema (or those STOKER_OPT_FIELDS names), in schema order, each on
 * the batch's device and moved there by the batch's copy (labels too):
 *   - the transformed image (JPEG or PNG, the first image field): the batch's data;
 *   - a mask tied to it: uint8 [count, C, C] (the crop, nearest-neighbour resize and flips
 *     of its image);
 *   - INT64, FLOAT32, RAW: dense [count, ...];
 *   - ARRAY, BYTES (and images with STOKER_TRANSFORM_NONE): ragged, the values of every
 *     sample back to back ([rows, *row_shape], or uint8 [bytes]) and count + 1 offsets
 *     (rows, or bytes) into them; boxes are mapped to the output's pixels, their rows and
 *     their tied rows dropped where a box lost its area. */
typedef struct stoker_field_view {
    uint32_t struct_size; /* sizeof(stoker_field_view), set by the caller */
    int32_t kind;         /* stoker_field_kind */
    const char *name;     /* owned by the loader */
    int32_t tie;          /* stoker_field_tie */
    int32_t dtype, ndim;
    int32_t device; /* -1: host memory; else the CUDA device ordinal */
    int64_t shape[STOKER_MAX_DIMS + 1];
    void *data;
    uint64_t nbytes;
    const int64_t *offsets;      /* ragged: count + 1 entries on the batch's device; else NULL */
    const int64_t *host_offsets; /* ragged: the same offsets in host memory; else NULL */
} stoker_field_view;

/* The fields every batch of this loader holds, described before the first batch: as
 * stoker_batch_field gives them with data NULL, nbytes 0 and shape[0] the batch size (-1 for
 * the rows of a ragged field). */
STOKER_API int32_t stoker_loader_num_fields(const stoker_loader *l);
STOKER_API int stoker_loader_field(const stoker_loader *l, int32_t index, stoker_field_view *out);

/* The batch's number of fields. */
STOKER_API int32_t stoker_batch_num_fields(const stoker_batch *b);
/* Field `index`, or (index < 0) the field named `name`, into *out. Pointers stay valid until
 * the batch is released. STOKER_E_INVALID when there is no such field. */
STOKER_API int stoker_batch_field(const stoker_batch *b, int32_t index, const char *name,
                                  stoker_field_view *out);

/* What stoker_loader_take writes: where the consumer stood before the call, the batch's
 * view and every field's, and copies of its labels and ids. The caller sets struct_size =
 * sizeof(stoker_take) and labels, ids and offsets to buffers of cap, cap and cap + 1 entries
 * (or NULL: not copied). */
typedef struct stoker_take {
    uint32_t struct_size;
    int32_t num_fields; /* out: fields[0 .. num_fields) are filled */
    int64_t epoch;      /* out: the consumer's epoch and position before the call */
    int64_t position;
    int64_t cap;            /* in: the buffers' capacity in records */
    int64_t *labels;        /* in: the batch's labels are copied here (count entries) */
    int64_t *ids;           /* in: its record ids likewise */
    int64_t *offsets;       /* in: a batch of varying records' offsets (count + 1 entries) */
    stoker_batch_view view; /* out: as stoker_batch_get_view */
    stoker_field_view fields[STOKER_MAX_FIELDS]; /* out: as stoker_batch_field, in order */
} stoker_take;

/* stoker_loader_next_wait, then *t filled for the batch: one call where a binding makes one
 * per part otherwise (an FFI call there costs more than the copies). Returns what
 * stoker_loader_next_wait returns; t->epoch and t->position are filled whatever it returns,
 * the rest only with a batch. STOKER_E_INVALID (nothing taken): NULL t, a struct_size other
 * than sizeof(stoker_take), buffers with a cap below the batch size. */
STOKER_API int stoker_loader_take(stoker_loader *l, stoker_batch **out, int64_t timeout_ms,
                                  stoker_take *t);

/* The loader's state at batch b: what stoker_loader_state_save gave just before the call
 * that handed b out, so a loader restored from it delivers b's epoch and position next. For
 * a binding that may be interrupted after that call, before it hands the batch over. Sizes
 * and errors as stoker_loader_state_save. */
STOKER_API int stoker_batch_state_save(const stoker_batch *b, void *buf, size_t cap, size_t *size);

/* ---- GPU batches (docs/GPU.md) ----
 * With a device (stoker_stats.device >= 0), data and every field (stoker_batch_field: the
 * labels too) are device memory on that device, filled by an asynchronous copy on the
 * loader's own stream; stoker_batch_labels, ids, offsets and a ragged field's host_offsets
 * are host copies. Nothing blocks the host: make your stream wait for the copy, then give the batch
 * back with the stream whose work reads it. Host batches: these calls are no-ops. */

/* Makes `cuda_stream` (a cudaStream_t; NULL = the legacy default stream) wait until the
 * batch's data is on the device (cudaStreamWaitEvent; the host does not block). 0, or
 * STOKER_E_CUDA (message in stoker_loader_errmsg), STOKER_E_INVALID (NULL b). */
STOKER_API int stoker_batch_wait_stream(const stoker_batch *b, void *cuda_stream);

/* The batch's ready event (a cudaEvent_t, owned by the loader, valid until release), or
 * NULL for a host batch. */
STOKER_API void *stoker_batch_cuda_event(const stoker_batch *b);

/* Releases a batch whose data is still read by work queued on `cuda_stream` (NULL = the
 * legacy default stream): an event is recorded there, and the device buffer is refilled
 * only after it completes. Any thread. stoker_batch_release means "no queued work reads
 * it": the buffer may be refilled at once. Returns 0, STOKER_E_INVALID, STOKER_E_STATE
 * (already released), STOKER_E_CUDA (the event could not be recorded: the call waited for
 * the stream's work, and the batch is released; the cause goes to the log callback, never
 * to stoker_loader_errmsg, which belongs to the consumer thread). Host batches: the same
 * as stoker_batch_release. */
STOKER_API int stoker_batch_release_stream(stoker_batch *b, void *cuda_stream);

/* ---- statistics ---- */

/* A static name for a back-end ("io_uring", "pread", "auto", "hdf5"), "unknown" otherwise. */
STOKER_API const char *stoker_backend_name(int32_t backend);

/* Loader statistics; size-prefixed like stoker_batch_view. "Delivered" means handed out by
 * stoker_loader_next; rates are over the time since the loader was created. */
typedef struct stoker_stats {
    uint32_t struct_size;
    int32_t backend;      /* the active stoker_backend; STOKER_BACKEND_HDF5 when libhdf5
                             reads the records (the serialised HDF5 fallback),
                             STOKER_BACKEND_REMOTE for a remote data set */
    int32_t simd;         /* the stoker_simd level in use */
    int32_t threads;      /* worker threads */
    int32_t depth;        /* batch slots */
    int32_t device;       /* -1: batches stay in host memory */
    int64_t batches;      /* batches delivered */
    int64_t records;      /* records delivered */
    int64_t bytes;        /* bytes delivered (batch data) */
    int64_t skipped;      /* records replaced in delivered batches (ON_CORRUPT_SKIP) */
    int64_t records_read; /* records read by the workers (read-ahead included) */
    int64_t bytes_read;
    int64_t pinned_bytes;   /* page-locked host memory held (0 without CUDA) */
    double seconds;         /* since create */
    double records_per_sec; /* delivered / seconds */
    double bytes_per_sec;
    double wait_seconds;    /* time the consumer spent blocked inside stoker_loader_next */
    double ready_slots;     /* mean number of ready batches found by stoker_loader_next */
    double reads_in_flight; /* mean reads in flight per worker, sampled at each submit */
    /* Seconds per stage, summed over the worker threads (read-ahead included): */
    double read_seconds;      /* in the reader: submitting reads and waiting for them */
    double crc_seconds;       /* CRC32C checks (and staging copies) */
    double process_seconds;   /* the per-record process step (image pipeline), in all */
    double decode_seconds;    /* JPEG decoding, part of process_seconds */
    double resize_seconds;    /* cropping and resampling, part of process_seconds */
    double normalize_seconds; /* normalising and converting to the dtype, likewise */
    int64_t reduced;          /* images decoded at 1/2, 1/4 or 1/8 (STOKER_OPT_DCT_SCALE) */
    int64_t dropped_bytes;    /* read bytes whose pages were dropped from the page cache
                                 (a data set larger than STOKER_OPT_MAX_CACHE) */
    /* JPEG decoding (STOKER_OPT_DECODER), read-ahead included: */
    int32_t decoder; /* the stoker_decoder in effect: CPU when the GPU decodes none */
    int32_t reserved0;
    int64_t cpu_decoded;    /* images the workers decoded */
    int64_t gpu_decoded;    /* images the GPU decoded */
    int64_t gpu_retried;    /* images the GPU refused or failed, then decoded by the CPU */
    int64_t gpu_fallbacks;  /* times the CPU took everything after GPU failures */
    double gpu_share;       /* share of the eligible images the GPU takes now (0..1) */
    double cpu_busy;        /* fraction of the workers' time spent on records */
    double gpu_busy;        /* fraction of the time the GPU decode stage was busy */
    char decoder_note[160]; /* why the GPU decodes what it decodes: why nothing (no GPU
                               stage), or under STOKER_DECODER_AUTO the split's last
                               decision with the consumer's wait and the workers' load it
                               was made on (empty: nothing to say) */
    int64_t full_checks;    /* JPEGs decoded to the end of their data, past the crop, to
                               find damage there: a record of a data set not checked when
                               packed (or of an HDF5 file) on its first use, and again on
                               each use while it is found damaged (read-ahead included; 0
                               for a checked data set) */
    /* remote data sets (docs/REMOTE.md); 0 for local ones */
    int64_t remote_bytes;      /* body bytes fetched over the network */
    int64_t remote_requests;   /* requests sent (retries included) */
    int64_t remote_retries;    /* requests sent again after a fault */
    int64_t cache_hits;        /* blocks found in the block cache */
    int64_t cache_misses;      /* blocks this process fetched (or found another fetching) */
    int64_t cache_bytes;       /* bytes of blocks in the cache at the last count */
    int64_t cache_limit;       /* the limit in effect (bytes) */
    double fetch_wait_seconds; /* time workers waited for blocks not yet fetched */
    char threads_note[128];    /* how `threads` was chosen: "3 as asked (STOKER_OPT_THREADS)",
                                  or the default's rule with its figures, e.g. "15 = 16 cores
                                  (online 16, affinity 16, cgroup quota none) / 1 rank - 1" */
    /* The rest of the stages' busy time, and the counts behind ready_slots, so that two
     * snapshots make a window (stoker_stats_window): */
    double h2d_seconds;        /* the host-to-device copy stage busy: from a batch's first
                                  copy queued to its completion, overlaps counted once */
    double gpu_decode_seconds; /* the GPU decode stage busy (gpu_busy x seconds) */
    int64_t next_calls;        /* batches handed out by stoker_loader_next */
    int64_t ready_sum;         /* ready batches found by those calls, summed */
    int64_t cache_records;     /* records of a remote data set read from blocks in the block
                                  cache (read-ahead included); 0 for local ones */
} stoker_stats;

/* Fills `stats` (struct_size set by the caller). Any thread. 0 or STOKER_E_INVALID. */
STOKER_API int stoker_loader_get_stats(const stoker_loader *l, stoker_stats *stats);

/* The same as one JSON object, NUL-terminated, in buf (capacity cap). *needed (may be
 * NULL) receives the size it takes with the NUL. Returns 0, or STOKER_E_LIMIT when cap is
 * too small (buf then holds a truncated, NUL-terminated prefix when cap > 0). Any thread. */
STOKER_API int stoker_loader_stats_json(const stoker_loader *l, char *buf, size_t cap,
                                        size_t *needed);

/* The same for a snapshot taken with stoker_loader_get_stats (its struct_size the whole
 * struct's): how a caller formats the snapshots it keeps. */
STOKER_API int stoker_stats_json(const stoker_stats *stats, char *buf, size_t cap, size_t *needed);

/* The library's table of stoker_stats' fields, from which the JSON above, the Python
 * binding's struct and stoker-bench's report are made: the index-th field's name, type
 * (STOKER_STAT_*), byte offset and size in stoker_stats, the stoker_enum naming an int32's
 * values (0: a number) and a one-line doc. struct_size and reserved fields are not
 * listed. Any output may be NULL. 0, or STOKER_E_INVALID past the last field. */
#define STOKER_STAT_INT32 1
#define STOKER_STAT_INT64 2
#define STOKER_STAT_DOUBLE 3
#define STOKER_STAT_TEXT 4 /* a NUL-terminated char array */
STOKER_API int stoker_stats_field(int32_t index, const char **name, int32_t *type, int32_t *values,
                                  uint32_t *offset, uint32_t *size, const char **doc);

/* ---- stalls: rates, waits and busy shares over a window ---- */

/* What a span of a loader's life measured: its rates, the share of it the consumer spent
 * getting batches (inside stoker_loader_next, and its binding's work around it), each stage's busy
 * share and the verdict (the stage that limits the loader, as stoker-bench prints it). */
typedef struct stoker_window {
    uint32_t struct_size;
    int32_t threads; /* worker threads (the workers' shares are over them) */
    double seconds;  /* the span the figures cover */
    int64_t batches; /* delivered in the span */
    int64_t records;
    int64_t bytes;
    double batches_per_sec;
    double records_per_sec;
    double bytes_per_sec;
    double wait_seconds;     /* the consumer's time in stoker_loader_next, blocked or not (a
                                call in progress counts once it returns), and what its
                                binding added (stoker_loader_add_wait) */
    double wait_share;       /* wait_seconds / seconds */
    double ready_slots;      /* mean ready batches found by the span's next calls */
    double workers_busy;     /* share of the workers' time on records: (read + crc +
                                process) / (threads x seconds) */
    double gpu_decode_busy;  /* share of the span the GPU decode stage was busy (0: none) */
    double h2d_busy;         /* share of the span the host-to-device copies were busy */
    double fetch_wait_share; /* share of the workers' time waiting for remote blocks */
    /* the stages' seconds in the span (the workers' summed over threads): the verdict's */
    double read_seconds;
    double crc_seconds;
    double decode_seconds;
    double transform_seconds; /* resize + normalise */
    double h2d_seconds;
    double fetch_wait_seconds;
    char verdict[24];         /* "none" (nothing delivered), "consumer" (the loader is ahead:
                                 the consumer waited under 5% of the span), else the stage
                                 with the most seconds: "storage", "crc", "decode",
                                 "transform", "host-to-device copy" or "network" */
    char verdict_reason[256]; /* one line saying why, with the figures */
} stoker_window;

/* The figures over the last `seconds` of the loader's life, up to now; `seconds` <= 0: since
 * create. Snapshots are taken by stoker_loader_next every half second and the last 64 s are
 * kept (no allocation, no thread): w->seconds says the span covered, which is shorter than
 * asked early in a loader's life and rounds to the snapshots' half seconds. `w->struct_size`
 * set by the caller, as for stoker_stats. Any thread. 0 or STOKER_E_INVALID. */
STOKER_API int stoker_loader_window(const stoker_loader *l, double seconds, stoker_window *w);

/* The figures between two snapshots of one loader's stats (from taken before to): how
 * stoker-bench judges its timed part. 0 or STOKER_E_INVALID. */
STOKER_API int stoker_stats_window(const stoker_stats *from, const stoker_stats *to,
                                   stoker_window *w);

/* ---- resume ---- */

/* Size in bytes of a saved state. */
#define STOKER_STATE_SIZE 64

/* Saves where the loader stands: a versioned little-endian blob of STOKER_STATE_SIZE bytes
 * (magic, version, seed, epoch, position = batches consumed in the epoch, rank, world
 * size, batch size, drop_last, shuffle, the order, the block length of a shuffled block
 * order, the data set's record count, CRC32C). *size (may be NULL) receives the size;
 * STOKER_E_LIMIT when cap is smaller. */
STOKER_API int stoker_loader_state_save(const stoker_loader *l, void *buf, size_t cap,
                                        size_t *size);

/* Continues from a saved state: the following batches are exactly those an uninterrupted
 * loader would have delivered after the save, whatever the thread count or back-end. The
 * blob's seed, shuffle, drop_last and order are adopted. Batches still held stay valid, as
 * with stoker_loader_set_epoch, which keeps the restored position when called next with the
 * restored epoch. Errors: STOKER_E_INVALID (not a state, too short), STOKER_E_FORMAT
 * (unknown version; a version-1 state of a shuffled block order, which does not record its
 * block length), STOKER_E_CORRUPT (checksum), STOKER_E_STATE (another data set size, rank,
 * world size or batch size; in the block order, blocks of another length: the source's,
 * which block_size sets for a remote data set). */
STOKER_API int stoker_loader_state_restore(stoker_loader *l, const void *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* STOKER_H */
