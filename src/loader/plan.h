/* SPDX-License-Identifier: Apache-2.0 */
/* The plan: every option of a loader resolved once, at create, from its stoker_config and
 * its data set into the immutable values the stages run on. plan.c is the only part of the
 * loader that reads a stoker_config: defaults, the rules between options (who normalises,
 * which dtype comes out, how many slots) and their validation are decided there and nowhere
 * else, and stoker_loader_get_int/_get_float report what it decided. */
#ifndef STOKER_LOADER_PLAN_H
#define STOKER_LOADER_PLAN_H

#include "common/common.h"
#include "loader/fields.h"
#include "source/dataset.h"
#include "transform/transform.h"

#include <inttypes.h>

#define STOKER__PIECE 32u /* records per work piece: the unit workers take, and copies stream */

/* GPU normalisation: uint8 [h, w, 3] samples to `dtype` (NCHW when nchw), v * scale + bias
 * per channel, the same float32 arithmetic as the workers' normalisation. */
typedef struct stoker__norm {
    int32_t dtype;
    bool nchw;
    int64_t h, w;
    float scale[3], bias[3];
} stoker__norm;

typedef struct stoker__plan {
    /* ---- order ---- */
    uint64_t records; /* in the data set */
    uint64_t batch;   /* per rank */
    bool shuffle, drop_last;
    uint64_t seed;
    uint32_t rank, world;
    bool dist_env;  /* RANK / WORLD_SIZE / LOCAL_RANK were consulted */
    uint64_t epoch; /* the first epoch */
    int32_t order;  /* RECORDS or BLOCKS */
    uint64_t block; /* the data set's records per block (BLOCKS; 0: the sampler's own) */

    /* ---- workers and reads ---- */
    uint32_t threads, depth, read_ahead;
    uint32_t local_ranks;   /* LOCAL_WORLD_SIZE, else 1: ranks sharing this node's CPUs */
    stoker__cpus cpus;      /* the CPUs this process may use, probed at create */
    char threads_note[128]; /* how `threads` was chosen (stats' threads_note) */
    uint32_t pieces;        /* work pieces of STOKER__PIECE records per batch */
    int32_t backend;        /* IO_URING or PREAD, as probed */
    bool direct;            /* O_DIRECT reads */
    bool staged;            /* reads land in worker staging, then are copied or processed */
    uint64_t round_bytes;   /* most bytes one round of reads covers */
    int32_t on_corrupt;     /* ERROR or SKIP */
    uint64_t max_cache;     /* page cache the data set may fill (bytes) */
    bool drop_behind;       /* the data set is larger: buffered reads drop their pages */
    int32_t simd;           /* the level in use */

    /* ---- records in, samples out ---- */
    int32_t kind;      /* the data set's field kind */
    int32_t transform; /* NONE, or the image transform the workers run */
    bool image;        /* the workers decode and transform JPEGs with `xform` */
    stoker__xform_params xform;
    int32_t dtype, ndim; /* what the workers write per record */
    int64_t shape[STOKER_MAX_DIMS];
    uint64_t rec_size;    /* bytes per sample; 0: records vary in size */
    uint64_t max_record;  /* the data set's largest stored record */
    uint64_t mean_record; /* the data set's stored bytes per record */
    int32_t layout;       /* of the delivered images (the option's value otherwise) */
    float mean[3], std[3];
    stoker__pfields fields; /* what a batch delivers, and where (fields.h) */

    /* ---- device ---- */
    int32_t device;          /* CUDA ordinal; -1: host batches */
    uint32_t device_buffers; /* the device ring (with a device) */
    bool gpu_normalize;      /* the H2D stage normalises with `norm` */
    stoker__norm norm;
    int32_t out_dtype; /* of the delivered batches */

    /* ---- JPEG decoding ---- */
    int32_t decoder;        /* STOKER_OPT_DECODER as asked */
    bool gpu_decode;        /* the GPU decode stage runs beside the workers (the loader
                               clears it when nvJPEG cannot be loaded) */
    char decoder_note[160]; /* why the GPU decodes nothing, when it does not */
    int32_t gdec_emulate;   /* STOKER__GDEC_*: the test hook's stage (below), or REAL */
    double gpu_share;       /* above 0: auto's share, fixed (the test hook's, else the
                               measuring switch STOKER_GPU_SHARE's); 0: the split decides */
    bool gpu_share_by_env;  /* ... fixed by STOKER_GPU_SHARE */

    /* ---- measuring switches (docs/GPU.md's table), read from the environment here ---- */
    bool gpu_decode_urgent; /* STOKER_GPU_DECODE_PRIORITY=greatest: the decode lanes'
                               streams at the device's greatest priority, not its least */
    int32_t worker_nice;    /* STOKER_WORKER_NICE=N (1..19): the CPU workers' nice; 0 */

    /* ---- limits and diagnostics ---- */
    uint64_t max_pixels, max_record_size, max_records, max_shards;
    stoker__log log;
} stoker__plan;

/* Resolves `cfg` (NULL: defaults) for data set ds into *p. Errors: STOKER_E_INVALID (rank
 * >= world, a bad RANK/WORLD_SIZE/LOCAL_RANK, direct I/O on unaligned shards, bad mean/std),
 * STOKER_E_UNSUPPORTED (a transform or dtype these records cannot take, a SIMD level this CPU
 * lacks, io_uring asked for but unavailable, GPU normalisation without a device or nvcc),
 * STOKER_E_CUDA (an explicit device that is not usable); the message is in err. */
int stoker__plan_make(stoker__plan *p, const stoker_config *cfg, stoker_dataset *ds,
                      stoker__err *err);

/* The plan's value of an option, in the option's own encoding (what stoker_config_set_int
 * would take to ask for it). STOKER_E_UNSUPPORTED for an option that does not apply to this
 * loader (image options of raw records), STOKER_E_INVALID for one that is not a loader's. */
int stoker__plan_get_int(const stoker__plan *p, stoker_option opt, int64_t *v);
int stoker__plan_get_float(const stoker__plan *p, stoker_option opt, double *v);

/* Test hook, so that the GPU decode stage's routing, its worker, the CPU retries and the
 * split's fallback run where there is no GPU: STOKER__GDEC_REFUSE makes loaders planned from
 * now on (image records, decoder not cpu) have the stage with no device and no nvJPEG, its
 * decoder refusing every image; STOKER__GDEC_FAIL, its every batch failing;
 * STOKER__GDEC_TAKE, its decoder taking every routed image and writing nothing (those images
 * are left as the slot held them, so a test compares the rest of each batch, whose batches
 * the GPU worker then finishes and repairs itself, as after a real run with nothing left for
 * the CPU); STOKER__GDEC_REAL (the default) turns it off. Not for production use. */
enum {
    STOKER__GDEC_REAL = 0,
    STOKER__GDEC_REFUSE = 1,
    STOKER__GDEC_FAIL = 2,
    STOKER__GDEC_TAKE = 3
};
void stoker__plan_emulate_gdec(int mode);
/* Test hook: a share above 0 pins decoder auto's share of the loaders planned next at it (the
 * split's decisions are not taken), so that routing under auto can be tested where nothing
 * makes the consumer wait for busy workers; 0 lets the split decide again. */
void stoker__plan_pin_gpu_share(double share);

#endif
