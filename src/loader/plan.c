/* SPDX-License-Identifier: Apache-2.0 */
/* The plan: a loader's options resolved once (plan.h). The only reader of stoker_config in
 * the loader; each option is read once, here, and each rule between options lives in one
 * function below. */
#include "loader/plan.h"

#include "common/config.h"
#include "cuda/cuda.h"
#include "format/schema.h"
#include "source/dataset.h"
#include "io/reader.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ROUND_BYTES (UINT64_C(1) << 20) /* docs/BENCHMARKS.md: rounds of 1 MiB */

/* A non-negative decimal environment variable (at most 2^20); -1 when unset. A value that
 * is not one is an error when `strict`, else taken as unset. */
static int env_int(const char *name, bool strict, int64_t *v, stoker__err *err)
{
    const char *s = getenv(name);
    *v = -1;
    if (!s || !*s)
        return 0;
    char *end = NULL;
    errno = 0;
    const long long x = strtoll(s, &end, 10);
    const bool bad = errno || *end || x < 0 || x > (1 << 20);
    STOKER_RETURN_IF(bad && strict, err, STOKER_E_INVALID,
                     "environment variable %s=\"%s\" is not a valid rank or size", name, s);
    *v = bad ? -1 : x;
    return 0;
}

/* Rank and world size: explicit options win; with DIST_ENV, RANK / WORLD_SIZE fill what
 * was not set. LOCAL_RANK picks the default device; with DIST_ENV a bad one is an error. */
static int plan_ranks(stoker__plan *p, const stoker_config *cfg, int64_t *local, stoker__err *err)
{
    int64_t r = stoker__cfg_int(cfg, STOKER_OPT_RANK);
    int64_t w = stoker__cfg_int(cfg, STOKER_OPT_WORLD_SIZE);
    const bool env = p->dist_env = stoker__cfg_int(cfg, STOKER_OPT_DIST_ENV) != 0;
    int64_t er = -1, ew = -1;
    int rc = 0;
    if (env && (rc = env_int("RANK", true, &er, err)) == 0)
        rc = env_int("WORLD_SIZE", true, &ew, err);
    if (rc == 0)
        rc = env_int("LOCAL_RANK", env, local, err);
    if (rc < 0)
        return rc;
    int64_t lws = -1;
    (void)env_int("LOCAL_WORLD_SIZE", false, &lws, err); /* not strict: never an error */
    p->local_ranks = lws > 0 ? (uint32_t)lws : 1;
    if (!stoker__cfg_is_set(cfg, STOKER_OPT_RANK) && er >= 0)
        r = er;
    if (!stoker__cfg_is_set(cfg, STOKER_OPT_WORLD_SIZE) && ew > 0)
        w = ew;
    if (w <= 0)
        w = 1;
    STOKER_RETURN_IF(r >= w, err, STOKER_E_INVALID, "rank %lld is not below the world size %lld",
                     (long long)r, (long long)w);
    p->rank = (uint32_t)r;
    p->world = (uint32_t)w;
    return 0;
}

static int plan_order(stoker__plan *p, const stoker_config *cfg, stoker_dataset *ds,
                      stoker__err *err)
{
    p->records = (uint64_t)stoker_dataset_num_records(ds);
    p->batch = (uint64_t)stoker__cfg_int(cfg, STOKER_OPT_BATCH_SIZE);
    p->shuffle = stoker__cfg_int(cfg, STOKER_OPT_SHUFFLE) != 0;
    p->drop_last = stoker__cfg_int(cfg, STOKER_OPT_DROP_LAST) != 0;
    p->seed = (uint64_t)stoker__cfg_int(cfg, STOKER_OPT_SEED);
    p->epoch = (uint64_t)stoker__cfg_int(cfg, STOKER_OPT_EPOCH);
    p->order = stoker__cfg_int(cfg, STOKER_OPT_ORDER) == STOKER_ORDER_BLOCKS ? STOKER_ORDER_BLOCKS
                                                                             : STOKER_ORDER_RECORDS;
    p->block = p->order == STOKER_ORDER_BLOCKS ? stoker__dataset_block_records(ds) : 0;
    STOKER_RETURN_IF(p->batch < 1, err, STOKER_E_INVALID, "invalid batch size %llu",
                     (unsigned long long)p->batch);
    return 0;
}

/* Mean and std, read once; checked by whoever normalises (stoker__xform_check_mean_std). */
static void read_mean_std(stoker__plan *p, const stoker_config *cfg)
{
    for (int c = 0; c < 3; c++) {
        p->mean[c] = (float)stoker__cfg_float(cfg, (stoker_option)(STOKER_OPT_MEAN_R + c));
        p->std[c] = (float)stoker__cfg_float(cfg, (stoker_option)(STOKER_OPT_STD_R + c));
    }
}

/* The SIMD level: AUTO is the best this CPU has; an explicit one must be there. */
static int plan_simd(stoker__plan *p, const stoker_config *cfg, stoker__err *err)
{
    const int32_t best = (int32_t)stoker_capability_get(STOKER_CAP_SIMD);
    const int64_t simd = stoker__cfg_int(cfg, STOKER_OPT_SIMD);
    STOKER_RETURN_IF(simd > best, err, STOKER_E_UNSUPPORTED,
                     "SIMD level %s is not available on this CPU (best: %s)",
                     stoker_simd_name((int32_t)simd), stoker_simd_name(best));
    p->simd = simd == STOKER_SIMD_AUTO ? best : (int32_t)simd;
    return 0;
}

/* The dtype of image batches when none is asked for: float16 for a GPU (half the bytes
 * across PCIe, what mixed precision computes in), float32 for host batches (what a model on
 * the CPU computes in). The plan of the device comes first. */
static int32_t default_image_dtype(const stoker__plan *p)
{
    return p->device < 0 ? STOKER_DTYPE_FLOAT32 : STOKER_DTYPE_FLOAT16;
}

/* The JPEG pipeline's parameters. Who normalises is decided here: with GPU normalisation
 * the workers stop at uint8 [C, C, 3], which the GPU stage's kernel takes. */
static int plan_image(stoker__plan *p, const stoker_config *cfg, const char *path, stoker__err *err)
{
    stoker__xform_params *x = &p->xform;
    memset(x, 0, sizeof *x);
    x->transform = (int32_t)stoker__cfg_int(cfg, STOKER_OPT_TRANSFORM);
    x->size = (int32_t)stoker__cfg_int(cfg, STOKER_OPT_SIZE);
    x->resize = (int32_t)stoker__cfg_int(cfg, STOKER_OPT_RESIZE);
    x->dtype = (int32_t)stoker__cfg_int(cfg, STOKER_OPT_DTYPE);
    if (x->dtype == STOKER_DTYPE_DEFAULT)
        x->dtype = default_image_dtype(p);
    x->layout = (int32_t)stoker__cfg_int(cfg, STOKER_OPT_LAYOUT);
    x->dct = (int32_t)stoker__cfg_int(cfg, STOKER_OPT_DCT);
    x->antialias = (int32_t)stoker__cfg_int(cfg, STOKER_OPT_ANTIALIAS);
    x->resampler = (int32_t)stoker__cfg_int(cfg, STOKER_OPT_RESAMPLER);
    x->dct_scale = (int32_t)stoker__cfg_int(cfg, STOKER_OPT_DCT_SCALE);
    x->vflip = stoker__cfg_float(cfg, STOKER_OPT_VFLIP);
    const double hflip = stoker__cfg_float(cfg, STOKER_OPT_HFLIP);
    x->hflip = hflip > 0.0 ? hflip : -1.0; /* the parameters' 0 is the default */
    x->crop_scale[0] = stoker__cfg_float(cfg, STOKER_OPT_SCALE_MIN);
    x->crop_scale[1] = stoker__cfg_float(cfg, STOKER_OPT_SCALE_MAX);
    x->crop_ratio[0] = stoker__cfg_float(cfg, STOKER_OPT_RATIO_MIN);
    x->crop_ratio[1] = stoker__cfg_float(cfg, STOKER_OPT_RATIO_MAX);
    x->min_box_size = stoker__cfg_float(cfg, STOKER_OPT_MIN_BOX_SIZE);
    x->min_box_vis = stoker__cfg_float(cfg, STOKER_OPT_MIN_BOX_VISIBILITY);
    x->mask_fill = (int32_t)stoker__cfg_int(cfg, STOKER_OPT_MASK_FILL);
    x->max_pixels = p->max_pixels;
    memcpy(x->mean, p->mean, sizeof x->mean);
    memcpy(x->std, p->std, sizeof x->std);
    stoker__err why = {0};
    int rc = stoker__xform_params_prepare(x, p->simd, &why);
    if (rc < 0)
        return stoker__fail(err, rc, "%s: %s", path, why.msg);
    p->transform = x->transform;
    p->out_dtype = x->dtype;
    p->layout = x->layout;
    if (p->gpu_normalize) {
        x->dtype = STOKER_DTYPE_UINT8;
        x->layout = STOKER_LAYOUT_NHWC;
        if ((rc = stoker__xform_params_prepare(x, p->simd, &why)) < 0)
            return stoker__fail(err, rc, "%s: %s", path, why.msg);
    }
    p->image = true;
    p->dtype = x->dtype;
    p->ndim = 3;
    const bool nchw = x->layout == STOKER_LAYOUT_NCHW;
    p->shape[0] = nchw ? 3 : x->size;
    p->shape[1] = x->size;
    p->shape[2] = nchw ? x->size : 3;
    p->rec_size = stoker__xform_sample_bytes(x);
    return 0;
}

/* The data set's field: fixed-size raw records, JPEGs through the image pipeline, or bytes
 * that vary in size; which transform and dtype each can take. */
/* The transformed image of a data set with a schema: its first JPEG or PNG field that is tied
 * to nothing, or -1. */
static int32_t schema_image(const stoker__schema *sc)
{
    for (int32_t k = 0; k < sc->n; k++)
        if ((sc->f[k].kind == STOKER_FIELD_JPEG || sc->f[k].kind == STOKER_FIELD_PNG) &&
            sc->f[k].tie == STOKER_TIE_NONE)
            return k;
    return -1;
}

/* A data set with a schema: the first image goes through the image pipeline (unless the
 * transform is none) as the batch's data; every field is split out by the workers. */
static int plan_schema(stoker__plan *p, const stoker_config *cfg, stoker_dataset *ds,
                       const stoker__schema *sc, stoker__err *err)
{
    const char *path = stoker__dataset_path(ds);
    const int64_t transform = stoker__cfg_int(cfg, STOKER_OPT_TRANSFORM);
    const int32_t img = schema_image(sc);
    p->fields.split = true;
    p->fields.schema = sc;
    p->max_record = stoker__dataset_max_record(ds);
    p->layout = (int32_t)stoker__cfg_int(cfg, STOKER_OPT_LAYOUT);
    p->kind = img >= 0 ? sc->f[img].kind : STOKER_FIELD_BYTES;
    if (img >= 0 && transform != STOKER_TRANSFORM_NONE)
        return plan_image(p, cfg, path, err);
    STOKER_RETURN_IF(img < 0 && transform != STOKER_TRANSFORM_NONE &&
                         transform != STOKER_TRANSFORM_DEFAULT,
                     err, STOKER_E_INVALID,
                     "%s: an image transform (%s) needs a JPEG or PNG field; this data set has "
                     "none",
                     path, stoker_enum_name(STOKER_ENUM_TRANSFORM, (int32_t)transform));
    p->transform = STOKER_TRANSFORM_NONE;
    p->dtype = p->out_dtype = STOKER_DTYPE_UINT8;
    p->ndim = 0;
    p->rec_size = 0; /* no data: every field is in the fields region */
    return 0;
}

static int plan_field(stoker__plan *p, const stoker_config *cfg, stoker_dataset *ds,
                      stoker__err *err)
{
    const char *path = stoker__dataset_path(ds);
    const stoker__schema *sc = stoker__dataset_schema(ds);
    if (sc && !sc->legacy)
        return plan_schema(p, cfg, ds, sc, err);
    int32_t stored = 0;
    const int rc = stoker_dataset_field(ds, &p->kind, &stored, &p->ndim, p->shape);
    if (rc < 0)
        return stoker__fail(err, rc, "%s", stoker_dataset_errmsg(ds));
    const int64_t transform = stoker__cfg_int(cfg, STOKER_OPT_TRANSFORM);
    const int64_t dtype = stoker__cfg_int(cfg, STOKER_OPT_DTYPE);
    p->max_record = stoker__dataset_max_record(ds);
    p->layout = (int32_t)stoker__cfg_int(cfg, STOKER_OPT_LAYOUT);
    if (p->kind == STOKER_FIELD_JPEG && transform != STOKER_TRANSFORM_NONE)
        return plan_image(p, cfg, path, err);
    p->transform = STOKER_TRANSFORM_NONE;
    if (p->kind == STOKER_FIELD_RAW) {
        STOKER_RETURN_IF(transform != STOKER_TRANSFORM_DEFAULT &&
                             transform != STOKER_TRANSFORM_NONE,
                         err, STOKER_E_INVALID,
                         "%s: raw records take no image transform (%s): the transforms "
                         "decode JPEG records",
                         path, stoker_enum_name(STOKER_ENUM_TRANSFORM, (int32_t)transform));
        STOKER_RETURN_IF(dtype != STOKER_DTYPE_DEFAULT && dtype != stored && !p->gpu_normalize, err,
                         STOKER_E_UNSUPPORTED, "%s: converting %s records to %s is not supported",
                         path, stoker_dtype_name(stored), stoker_dtype_name((int32_t)dtype));
        p->dtype = p->out_dtype = stored;
        uint64_t size = stoker_dtype_size(stored);
        for (int32_t i = 0; i < p->ndim; i++)
            STOKER_RETURN_IF(stoker__mul_ovf(size, (uint64_t)p->shape[i], &size), err,
                             STOKER_E_LIMIT, "%s: record shape overflows", path);
        p->rec_size = size;
        return 0;
    }
    STOKER_RETURN_IF(transform != STOKER_TRANSFORM_NONE &&
                         !(p->kind == STOKER_FIELD_BYTES && transform == 0),
                     err, STOKER_E_UNSUPPORTED,
                     "%s: image transforms apply to JPEG data sets only; set "
                     "STOKER_OPT_TRANSFORM to STOKER_TRANSFORM_NONE for the encoded bytes",
                     path);
    p->dtype = p->out_dtype = STOKER_DTYPE_UINT8;
    p->ndim = 0;
    return 0;
}

/* Slots by default. Decoding pieces take long and unequal times, so an image pipeline gets
 * slots enough that no worker waits for one while a slow piece holds up the oldest batch:
 * one for the consumer, one being finished, and three pieces of room per thread beyond
 * them, from 4 to 16 (docs/BENCHMARKS.md). Copying raw records takes short, even pieces. */
static uint32_t default_depth(const stoker__plan *p)
{
    if (!p->image)
        return 4;
    const uint64_t d = 2 + (3 * (uint64_t)p->threads + p->pieces - 1) / p->pieces;
    return d < 4 ? 4 : d > 16 ? 16 : (uint32_t)d;
}

/* The CPUs one rank of this node may use: those of the process's affinity mask, fewer under
 * its cgroup's CPU quota, shared among the node's LOCAL_WORLD_SIZE ranks (at least 1). */
static uint32_t rank_cpus(const stoker__plan *p)
{
    const uint32_t n = (uint32_t)p->cpus.usable / p->local_ranks;
    return n > 0 ? n : 1;
}

/* The default thread count: the rank's CPUs less `spare` (at least 1), and how it was chosen
 * in threads_note, e.g. "15 = 16 cores (online 16, affinity 16, cgroup quota none) / 1 rank
 * - 1". */
static void default_threads(stoker__plan *p, uint32_t spare, const char *why)
{
    const uint32_t cpus = rank_cpus(p);
    p->threads = cpus > spare ? cpus - spare : 1;
    char quota[32] = "none";
    if (p->cpus.quota > 0)
        snprintf(quota, sizeof quota, "%.2f", p->cpus.quota);
    snprintf(p->threads_note, sizeof p->threads_note,
             "%u = %d cores (online %d, affinity %d, cgroup quota %s) / %u rank%s - %u%s%s",
             p->threads, p->cpus.usable, p->cpus.online, p->cpus.affinity, quota, p->local_ranks,
             p->local_ranks == 1 ? "" : "s", spare, why ? " " : "", why ? why : "");
}

static int plan_machinery(stoker__plan *p, const stoker_config *cfg, stoker_dataset *ds,
                          stoker__err *err)
{
    const int64_t threads = stoker__cfg_int(cfg, STOKER_OPT_THREADS);
    stoker__cpus_probe(&p->cpus);
    if (threads > 0) {
        p->threads = (uint32_t)threads;
        snprintf(p->threads_note, sizeof p->threads_note, "%u as asked (STOKER_OPT_THREADS)",
                 p->threads);
    } else {
        default_threads(p, 1, NULL);
    }
    p->pieces = (uint32_t)((p->batch + STOKER__PIECE - 1) / STOKER__PIECE);
    const int64_t depth = stoker__cfg_int(cfg, STOKER_OPT_DEPTH);
    p->depth = depth > 0 ? (uint32_t)depth : default_depth(p);
    p->read_ahead = (uint32_t)stoker__cfg_int(cfg, STOKER_OPT_READ_AHEAD);
    p->direct = stoker__cfg_int(cfg, STOKER_OPT_DIRECT_IO) != 0;
    p->on_corrupt = stoker__cfg_int(cfg, STOKER_OPT_ON_CORRUPT) == STOKER_ON_CORRUPT_SKIP
                        ? STOKER_ON_CORRUPT_SKIP
                        : STOKER_ON_CORRUPT_ERROR;
    STOKER_RETURN_IF(p->direct && stoker__dataset_align(ds) % 4096 != 0, err, STOKER_E_INVALID,
                     "%s: direct I/O needs records aligned to 4096 bytes; "
                     "this data set is aligned to %u (stoker-pack --align 4096 packs one so)",
                     stoker__dataset_path(ds), stoker__dataset_align(ds));
    p->staged = p->direct || p->image || p->fields.split;
    /* Buffered reads of cached data complete at submit, so rounds are kept small enough to
     * be CRC-checked while still in L2; direct reads take whole pieces. */
    p->round_bytes = p->direct ? UINT64_MAX : ROUND_BYTES;
    return 0;
}

/* Memory the kernel could give the page cache now without swapping (MemAvailable), else
 * the machine's memory. */
static uint64_t memory_available(void)
{
    FILE *f = fopen("/proc/meminfo", "re");
    unsigned long long kib = 0;
    char line[128];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    if (kib)
        return (uint64_t)kib << 10;
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : UINT64_MAX;
}

/* A data set larger than the page cache it may fill is read dropping its pages behind the
 * reader (buffered reads only: direct I/O bypasses the cache), so that the cache holds
 * what is still to come and never pushes the training job's memory out. The default bound
 * is half the memory available at create. */
static void plan_cache(stoker__plan *p, const stoker_config *cfg, stoker_dataset *ds)
{
    const int64_t max = stoker__cfg_int(cfg, STOKER_OPT_MAX_CACHE);
    p->max_cache = max > 0 ? (uint64_t)max : memory_available() / 2;
    const uint64_t payload = (uint64_t)stoker_dataset_payload_bytes(ds);
    p->drop_behind = !p->direct && payload > p->max_cache;
    p->mean_record = p->records ? payload / p->records : 0;
}

/* The read back-end: io_uring when asked or when AUTO finds a working ring, else pread. */
static int plan_backend(stoker__plan *p, const stoker_config *cfg, stoker__err *err)
{
    const int64_t want = stoker__cfg_int(cfg, STOKER_OPT_BACKEND);
    p->backend = STOKER_BACKEND_PREAD;
    if (want == STOKER_BACKEND_PREAD)
        return 0;
    stoker__reader *probe = NULL;
    const int rc = stoker__reader_open(&probe, STOKER_BACKEND_IO_URING, 1);
    stoker__reader_close(probe);
    if (rc == 0) {
        p->backend = STOKER_BACKEND_IO_URING;
        return 0;
    }
    STOKER_RETURN_IF(want == STOKER_BACKEND_IO_URING, err, STOKER_E_UNSUPPORTED,
                     "io_uring is not available here: %s", stoker_strerror(rc));
    stoker__logf(&p->log, STOKER_LOG_INFO, "io_uring unavailable (%s); using pread",
                 stoker_strerror(rc));
    return 0;
}

/* The device: an explicit ordinal must be usable; the default takes LOCAL_RANK (or GPU 0)
 * when a device is usable and falls back to host batches otherwise. */
static int plan_device(stoker__plan *p, const stoker_config *cfg, int64_t local, stoker__err *err)
{
    const int64_t opt = stoker__cfg_int(cfg, STOKER_OPT_DEVICE);
    const int64_t nb = stoker__cfg_int(cfg, STOKER_OPT_DEVICE_BUFFERS);
    p->device = -1;
    p->device_buffers = nb < 2 ? 2u : (uint32_t)nb; /* a ring of one would never overlap */
    if (opt < 0)
        return 0;
    STOKER_RETURN_IF(opt > 0 && !stoker__cuda_built(), err, STOKER_E_UNSUPPORTED,
                     "a CUDA device was requested but this build has no CUDA support");
    char why[160] = "";
    const int n = stoker__cuda_device_query(why, sizeof why);
    if (opt > 0) {
        STOKER_RETURN_IF(n == 0, err, STOKER_E_CUDA,
                         "CUDA device %lld was requested but no device is usable: %s",
                         (long long)(opt - 1), why);
        STOKER_RETURN_IF(opt - 1 >= n, err, STOKER_E_CUDA,
                         "CUDA device %lld was requested but there are %d device(s)",
                         (long long)(opt - 1), n);
        p->device = (int32_t)(opt - 1);
        return 0;
    }
    const int64_t want = local >= 0 ? local : 0;
    if (n == 0) {
        stoker__logf(&p->log, STOKER_LOG_INFO, "no usable CUDA device (%s): host batches", why);
        return 0;
    }
    if (want >= n) {
        stoker__logf(&p->log, STOKER_LOG_WARN,
                     "LOCAL_RANK %lld but %d CUDA device(s): host batches", (long long)want, n);
        return 0;
    }
    p->device = (int32_t)want;
    return 0;
}

/* GPU normalisation: asked for, it needs a device, a build with the kernel, and uint8
 * [H, W, 3] samples (raw records, or the image pipeline stopped at uint8 NHWC). */
static int plan_gpu_normalize(stoker__plan *p, const stoker_config *cfg, const char *path,
                              stoker__err *err)
{
    if (!p->gpu_normalize)
        return 0;
    STOKER_RETURN_IF(p->device < 0, err, STOKER_E_UNSUPPORTED,
                     "GPU normalisation needs a usable CUDA device (%s)",
                     stoker__cuda_built() ? "this loader would deliver host batches"
                                          : "this build has no CUDA support");
    STOKER_RETURN_IF(!stoker__cuda_has_kernels(), err, STOKER_E_UNSUPPORTED,
                     "GPU normalisation needs a build with nvcc (this one has the CUDA "
                     "runtime only)");
    STOKER_RETURN_IF(!p->rec_size || p->dtype != STOKER_DTYPE_UINT8 || p->ndim != 3 ||
                         p->shape[2] != 3,
                     err, STOKER_E_UNSUPPORTED,
                     "%s: GPU normalisation takes uint8 records of shape [H, W, 3] or JPEG "
                     "images with a transform",
                     path);
    const int rc = stoker__xform_check_mean_std(p->mean, p->std, err);
    if (rc < 0)
        return rc;
    const int64_t dt = stoker__cfg_int(cfg, STOKER_OPT_DTYPE);
    stoker__norm *n = &p->norm;
    n->dtype = dt == STOKER_DTYPE_DEFAULT ? default_image_dtype(p) : (int32_t)dt;
    STOKER_RETURN_IF(n->dtype != STOKER_DTYPE_FLOAT16 && n->dtype != STOKER_DTYPE_FLOAT32 &&
                         n->dtype != STOKER_DTYPE_BFLOAT16,
                     err, STOKER_E_UNSUPPORTED,
                     "GPU normalisation produces float16, bfloat16 or float32, not %s",
                     stoker_dtype_name(n->dtype));
    n->nchw = stoker__cfg_int(cfg, STOKER_OPT_LAYOUT) != STOKER_LAYOUT_NHWC;
    n->h = p->shape[0];
    n->w = p->shape[1];
    for (int c = 0; c < 3; c++) {
        n->scale[c] = (float)(1.0 / (255.0 * (double)p->std[c]));
        n->bias[c] = (float)(-(double)p->mean[c] / (double)p->std[c]);
    }
    p->out_dtype = n->dtype;
    p->layout = n->nchw ? STOKER_LAYOUT_NCHW : STOKER_LAYOUT_NHWC;
    return 0;
}

static atomic_int gdec_emulation;
static _Atomic double pinned_share;

void stoker__plan_emulate_gdec(int mode)
{
    atomic_store(&gdec_emulation, mode);
}

void stoker__plan_pin_gpu_share(double share)
{
    atomic_store(&pinned_share, share > 0 && share <= 1 ? share : 0);
}

/* The measuring switches (docs/GPU.md lists them), read once, here. STOKER_GPU_SHARE=S
 * (0 < S <= 1) fixes auto's share at S, to measure what a given share costs a consumer
 * beside the split's own choice; a value outside that, or not a number, is ignored, as the
 * others' are. */
static void plan_switches(stoker__plan *p)
{
    const char *v = getenv("STOKER_GPU_DECODE_PRIORITY");
    p->gpu_decode_urgent = v && strcmp(v, "greatest") == 0;
    v = getenv("STOKER_WORKER_NICE");
    const long nice = v ? strtol(v, NULL, 10) : 0;
    p->worker_nice = nice > 0 && nice < 20 ? (int32_t)nice : 0;
    p->gdec_emulate = atomic_load(&gdec_emulation);
    p->gpu_share = atomic_load(&pinned_share); /* the test hook's before the switch's */
    v = getenv("STOKER_GPU_SHARE");
    char *end = NULL;
    const double share = v ? strtod(v, &end) : 0;
    if (p->gpu_share == 0 && v && end != v && *end == '\0' && share > 0 && share <= 1) {
        p->gpu_share = share;
        p->gpu_share_by_env = true;
    }
}

#define GPU_DECODE_SLOTS 4 /* default depth beyond the workers' with the GPU decode stage */
#define AUTO_SPARE 3       /* cores left to other threads under AUTO with the GPU stage */
#define AUTO_SPARE_FROM 8  /* ... on machines of this many cores or more */

/* Whether the batch's image is a JPEG: the records' (a data set of one field), or the image
 * field's that a sample delivers (a schema's: the GPU decode stage takes that field, the
 * workers the others). */
static bool delivers_jpeg(const stoker__plan *p)
{
    const stoker__pfields *pf = &p->fields;
    if (!p->image)
        return false;
    if (!pf->split)
        return true; /* plan_field: JPEG records, with a transform */
    return pf->data >= 0 && pf->f[pf->data].kind == STOKER_FIELD_JPEG;
}

/* Who decodes JPEGs: the GPU decode stage runs where it is asked for (AUTO or GPU), the
 * batch's images are JPEGs with a transform (a data set's records, or a sample's image
 * field), and their batches go to a device this build has kernels for; whether that device
 * has a hardware decoder is found at create, when nvJPEG is loaded. A GPU asked for where
 * there is none means CPU decoding and a note, never a failure, so that one configuration
 * runs on every machine. */
static int plan_decoder(stoker__plan *p, const stoker_config *cfg, stoker_dataset *ds,
                        const char *path, stoker__err *err)
{
    p->decoder = (int32_t)stoker__cfg_int(cfg, STOKER_OPT_DECODER);
    p->decoder_note[0] = '\0';
    if (p->decoder == STOKER_DECODER_GPU) { /* every eligible record: no share to fix */
        p->gpu_share = 0;
        p->gpu_share_by_env = false;
    }
    const bool jpeg = delivers_jpeg(p);
    const char *not_jpeg = !p->image ? "the records are not decoded"
                           : p->fields.data < 0
                               ? "the batch delivers no image (STOKER_OPT_FIELDS leaves it out)"
                               : "the data set's images are PNGs";
    STOKER_RETURN_IF(!jpeg && p->decoder == STOKER_DECODER_GPU, err, STOKER_E_UNSUPPORTED,
                     "%s: the GPU decodes JPEG images with a transform only: %s", path, not_jpeg);
    /* the GPU's kernels fill the whole sample from the image: the letterbox's padding is
     * the workers' */
    const bool padded = p->transform == STOKER_TRANSFORM_LETTERBOX;
    STOKER_RETURN_IF(jpeg && padded && p->decoder == STOKER_DECODER_GPU, err, STOKER_E_UNSUPPORTED,
                     "%s: the GPU decodes the train, eval and resize transforms; letterbox is "
                     "the CPU's (decoder cpu or auto)",
                     path);
    const char *why = !jpeg                              ? not_jpeg
                      : padded                           ? "transform letterbox is the CPU's"
                      : p->decoder == STOKER_DECODER_CPU ? "STOKER_OPT_DECODER is cpu"
                      : p->device < 0                    ? "batches stay in host memory"
                      : !stoker__cuda_has_kernels()      ? "this build has no GPU kernels (nvcc)"
                                                         : NULL;
    p->gpu_decode = why == NULL;
    if (jpeg && !padded && p->decoder != STOKER_DECODER_CPU && p->gdec_emulate)
        p->gpu_decode = true, why = NULL; /* the test hook's stage needs no device */
    /* The hardware decoder does not report damage inside the compressed data, where libjpeg
     * does: AUTO sends it only JPEGs that libjpeg decoded without damage when they were
     * packed (the manifest says so), so that the choice of side never turns a record the CPU
     * counts as corrupt into a delivered one. GPU is the user's choice to send the rest. */
    if (p->gpu_decode && p->decoder == STOKER_DECODER_AUTO && !stoker_dataset_jpeg_checked(ds)) {
        p->gpu_decode = false;
        /* format version 0: records stoker did not pack (an HDF5 file), so never checked */
        why = stoker_dataset_format_version(ds) == 0
                  ? "HDF5 records were not checked when written: decoder gpu sends them to the "
                    "GPU"
                  : "the data set's JPEGs were not checked when packed (stoker-pack checks them "
                    "unless --no-validate): pack it again, or ask for decoder gpu";
    }
    if (why)
        snprintf(p->decoder_note, sizeof p->decoder_note, "%s", why);
    const bool own_depth = stoker__cfg_int(cfg, STOKER_OPT_DEPTH) > 0;
    /* AUTO decodes beside the GPU stage's own thread and a training step's two launching
     * threads (Python's and autograd's): three cores left, not one (docs/GPU.md) */
    if (p->gpu_decode && p->decoder == STOKER_DECODER_AUTO &&
        stoker__cfg_int(cfg, STOKER_OPT_THREADS) <= 0 && rank_cpus(p) >= AUTO_SPARE_FROM) {
        default_threads(p, AUTO_SPARE, "(GPU decoding)");
        if (!own_depth)
            p->depth = default_depth(p);
    }
    /* batches wait for the GPU's share besides the workers': slots for those in its queue */
    if (p->gpu_decode && !own_depth)
        p->depth += GPU_DECODE_SLOTS;
    return 0;
}

#define SIZE_SUFFIX ".size" /* IMAGE.size: an image's stored size */

/* The names of pf's fields, ", "-separated, as much as `cap` bytes hold. */
static void field_names(const stoker__pfields *pf, char *out, size_t cap)
{
    size_t used = 0;
    out[0] = '\0';
    for (int32_t k = 0; k < pf->n && used < cap; k++)
        used += (size_t)snprintf(out + used, cap - used, "%s%s", k ? ", " : "", pf->f[k].name);
}

/* Whether the n bytes at s end in ".size" after a name: an image's size, which no schema's
 * name can be (its names have no dots). */
static bool names_a_size(const char *s, size_t n)
{
    const size_t k = sizeof SIZE_SUFFIX - 1;
    return n > k && memcmp(s + n - k, SIZE_SUFFIX, k) == 0;
}

/* Whether the n bytes at s name the image's size field, IMAGE.size (the data field's name
 * and ".size"). */
static bool names_image_size(const stoker__pfields *pf, const char *s, size_t n)
{
    if (pf->data < 0 || !names_a_size(s, n))
        return false;
    const char *img = pf->f[pf->data].name;
    const size_t k = n - (sizeof SIZE_SUFFIX - 1);
    return strlen(img) == k && memcmp(img, s, k) == 0;
}

/* The image's size field, IMAGE.size, at pf->f[at]: int64 [height, width] of each sample's
 * image as stored, made by the worker (src STOKER__SRC_IMAGE_SIZE). */
static void image_size_pfield(stoker__pfields *pf, int32_t at)
{
    char name[sizeof pf->f[0].name];
    snprintf(name, sizeof name, "%.*s%s", STOKER_FIELD_NAME_MAX, pf->f[pf->data].name,
             SIZE_SUFFIX); /* a schema's name: at most STOKER_FIELD_NAME_MAX bytes */
    stoker__pfield *f = &pf->f[at];
    memset(f, 0, sizeof *f);
    memcpy(f->name, name, sizeof name);
    f->src = STOKER__SRC_IMAGE_SIZE;
    f->kind = STOKER_FIELD_RAW;
    f->tied = -1;
    f->role = STOKER__PF_DENSE;
    f->dtype = STOKER_DTYPE_INT64;
    f->ndim = 1;
    f->shape[0] = 2;
    f->item = 16;
}

/* Keeps the fields STOKER_OPT_FIELDS names ("" keeps all), in schema order; IMAGE.size
 * (named only) right after its image. */
static int select_fields(stoker__pfields *pf, const char *want, const char *path, stoker__err *err)
{
    if (!want || !*want)
        return 0;
    bool keep[STOKER_MAX_FIELDS + 1] = {0}, size = false;
    const char *s = want;
    while (*s) {
        const char *e = strchr(s, ',');
        const size_t n = e ? (size_t)(e - s) : strlen(s);
        char name[STOKER_FIELD_NAME_MAX + 1] = "";
        int32_t i = -1;
        if (n > 0 && n < sizeof name) {
            memcpy(name, s, n);
            name[n] = '\0';
            i = stoker__pfields_find(pf, name);
        }
        if (i < 0 && pf->split && names_image_size(pf, s, n)) {
            size = true;
            s += n + (e ? 1 : 0);
            continue;
        }
        STOKER_RETURN_IF(i < 0 && names_a_size(s, n) && (!pf->split || pf->data < 0), err,
                         STOKER_E_INVALID,
                         "%s: STOKER_OPT_FIELDS names \"%.*s\", an image's size: a data set with "
                         "a schema delivers it for its image under an image transform",
                         path, (int)(n > 64 ? 64 : n), s);
        if (i < 0) {
            char have[STOKER_ERRMSG_CAP / 2];
            field_names(pf, have, sizeof have);
            return stoker__fail(err, STOKER_E_INVALID,
                                "%s: STOKER_OPT_FIELDS names the field \"%.*s\", which the data "
                                "set does not have (its fields: %s)",
                                path, (int)(n > 64 ? 64 : n), s, have);
        }
        keep[i] = true;
        s += n + (e ? 1 : 0);
    }
    STOKER_RETURN_IF(pf->data >= 0 && !pf->split && !keep[pf->data], err, STOKER_E_INVALID,
                     "%s: a data set without a schema always delivers its field \"%s\"", path,
                     pf->f[pf->data].name);
    int32_t n = 0, data = -1, label = -1;
    for (int32_t i = 0; i < pf->n; i++) {
        if (!keep[i])
            continue;
        if (i == pf->data)
            data = n;
        if (i == pf->label)
            label = n;
        pf->f[n++] = pf->f[i];
    }
    STOKER_RETURN_IF(size && n >= STOKER_MAX_FIELDS, err, STOKER_E_INVALID,
                     "%s: STOKER_OPT_FIELDS names %d fields and an image's size: at most %d in all",
                     path, (int)n, STOKER_MAX_FIELDS);
    STOKER_RETURN_IF(size && data < 0, err, STOKER_E_INVALID,
                     "%s: STOKER_OPT_FIELDS names the size of image \"%s\" without the image: "
                     "name both",
                     path, pf->f[pf->data].name);
    pf->n = n;
    pf->data = data;
    pf->label = label;
    if (size) { /* right after the image */
        memmove(&pf->f[data + 2], &pf->f[data + 1], (size_t)(n - data - 1) * sizeof *pf->f);
        pf->label += pf->label > data;
        pf->n++;
        image_size_pfield(pf, data + 1);
    }
    return 0;
}

/* Why field f's values cannot be converted, or NULL when they can. */
static const char *unconvertible(const stoker__pfield *f)
{
    if (f->role == STOKER__PF_DATA)
        return "is the batch's data, whose dtype is STOKER_OPT_DTYPE's";
    if (f->role == STOKER__PF_LABEL)
        return "holds a data set's labels without a schema: int64, as its index keeps them";
    if (f->role == STOKER__PF_RAGGED && f->kind != STOKER_FIELD_ARRAY)
        return f->kind == STOKER_FIELD_BYTES ? "holds bytes, not numbers"
                                             : "holds an image's encoded bytes, not numbers";
    return stoker__dtype_convertible(f->dtype) ? NULL : "has no numeric dtype";
}

/* One "NAME=DTYPE" of STOKER_OPT_FIELD_DTYPES (`n` bytes at s): field f's delivered dtype. */
static int field_dtype(stoker__pfields *pf, const char *s, size_t n, bool *named, const char *path,
                       stoker__err *err)
{
    const char *eq = memchr(s, '=', n);
    char name[STOKER_FIELD_NAME_MAX + 1] = "", dt[32] = "";
    const size_t nl = eq ? (size_t)(eq - s) : 0, dl = eq ? n - nl - 1 : 0;
    STOKER_RETURN_IF(!eq || nl == 0 || nl >= sizeof name || dl == 0 || dl >= sizeof dt, err,
                     STOKER_E_INVALID,
                     "%s: STOKER_OPT_FIELD_DTYPES: \"%.*s\" is not NAME=DTYPE (such as "
                     "\"mask=int64\")",
                     path, (int)(n > 64 ? 64 : n), s);
    memcpy(name, s, nl);
    memcpy(dt, eq + 1, dl);
    const int32_t i = stoker__pfields_find(pf, name);
    if (i < 0) {
        char have[STOKER_ERRMSG_CAP / 2];
        field_names(pf, have, sizeof have);
        return stoker__fail(err, STOKER_E_INVALID,
                            "%s: STOKER_OPT_FIELD_DTYPES names the field \"%s\", which the batch "
                            "does not deliver (its fields: %s)",
                            path, name, have);
    }
    stoker__pfield *f = &pf->f[i];
    const char *why = unconvertible(f);
    STOKER_RETURN_IF(why, err, STOKER_E_INVALID,
                     "%s: STOKER_OPT_FIELD_DTYPES: field \"%s\" %s: it takes no dtype "
                     "conversion",
                     path, name, why);
    STOKER_RETURN_IF(named[i], err, STOKER_E_INVALID,
                     "%s: STOKER_OPT_FIELD_DTYPES names the field \"%s\" twice", path, name);
    int32_t to = 0;
    STOKER_RETURN_IF(stoker_enum_parse(STOKER_ENUM_DTYPE, dt, &to) < 0 ||
                         !stoker__dtype_convertible(to),
                     err, STOKER_E_INVALID,
                     "%s: STOKER_OPT_FIELD_DTYPES: field \"%s\": unknown dtype \"%s\" (uint8, "
                     "int8, uint16, int16, uint32, int32, uint64, int64, float16, bfloat16, "
                     "float32, float64 or bool)",
                     path, name, dt);
    named[i] = true;
    if (to == f->dtype)
        return 0;
    f->from = f->dtype;
    f->item = f->stored / stoker_dtype_size(f->dtype) * stoker_dtype_size(to);
    f->dtype = to;
    if (i == pf->label)
        pf->label = -1; /* the batch's labels stay the index's int64, on the host */
    return 0;
}

/* Applies STOKER_OPT_FIELD_DTYPES ("NAME=DTYPE,...", "" none) to the delivered fields. */
static int field_dtypes(stoker__pfields *pf, const char *want, const char *path, stoker__err *err)
{
    bool named[STOKER_MAX_FIELDS + 1] = {0};
    for (int32_t i = 0; i < pf->n; i++) {
        pf->f[i].from = 0;
        pf->f[i].stored = pf->f[i].item;
    }
    for (const char *s = want ? want : ""; *s;) {
        const char *e = strchr(s, ',');
        const size_t n = e ? (size_t)(e - s) : strlen(s);
        const int rc = field_dtype(pf, s, n, named, path, err);
        if (rc < 0)
            return rc;
        s += n + (e ? 1 : 0);
    }
    return 0;
}

/* Field k of schema sc as the batch delivers it. */
static void schema_pfield(const stoker__plan *p, const stoker__schema *sc, int32_t k, int32_t img,
                          stoker__pfield *f)
{
    const stoker__field *sf = &sc->f[k];
    const bool shaped = p->transform != STOKER_TRANSFORM_NONE && img >= 0;
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", sf->name);
    f->src = k;
    f->kind = sf->kind;
    f->tie = sf->tie;
    f->tied = -1;
    if (k == img && shaped) {
        f->role = STOKER__PF_DATA;
        return;
    }
    if (shaped && sf->tie == STOKER_TIE_MASK && sf->target == img) {
        f->role = STOKER__PF_MASK;
        f->dtype = STOKER_DTYPE_UINT8;
        f->ndim = 2;
        f->shape[0] = f->shape[1] = p->xform.size;
        f->item = (uint64_t)p->xform.size * (uint64_t)p->xform.size;
        return;
    }
    if (sf->kind == STOKER_FIELD_INT64 || sf->kind == STOKER_FIELD_FLOAT32 ||
        sf->kind == STOKER_FIELD_RAW) {
        f->role = STOKER__PF_DENSE;
        f->dtype = sf->kind == STOKER_FIELD_INT64     ? STOKER_DTYPE_INT64
                   : sf->kind == STOKER_FIELD_FLOAT32 ? STOKER_DTYPE_FLOAT32
                                                      : sf->dtype;
        f->ndim = sf->kind == STOKER_FIELD_RAW ? sf->ndim : 0;
        memcpy(f->shape, sf->shape, sizeof f->shape);
        f->item = sf->size;
        return;
    }
    f->role = STOKER__PF_RAGGED; /* rows of an ARRAY; bytes of the others */
    if (sf->kind == STOKER_FIELD_ARRAY) {
        f->dtype = sf->dtype;
        f->ndim = sf->ndim;
        memcpy(f->shape, sf->shape, sizeof f->shape);
        f->item = sf->size;
    } else {
        f->dtype = STOKER_DTYPE_UINT8;
        f->item = 1;
    }
    f->max_rows = sf->max;
}

/* A data set with a schema: each field's role, then the ties checked against what is kept. */
static int schema_fields(stoker__plan *p, const stoker_config *cfg, const char *path,
                         stoker__err *err)
{
    stoker__pfields *pf = &p->fields;
    const stoker__schema *sc = pf->schema;
    const int32_t img = schema_image(sc);
    pf->n = sc->n;
    pf->data = pf->label = -1;
    for (int32_t k = 0; k < sc->n; k++) {
        schema_pfield(p, sc, k, img, &pf->f[k]);
        if (pf->f[k].role == STOKER__PF_DATA)
            pf->data = k;
        if (k == sc->label)
            pf->label = k;
    }
    int rc = select_fields(pf, stoker__cfg_string(cfg, STOKER_OPT_FIELDS), path, err);
    if (rc < 0)
        return rc;
    for (int32_t i = 0; i < pf->n; i++) {
        stoker__pfield *f = &pf->f[i];
        if (f->src < 0)
            continue; /* made by the worker: IMAGE.size */
        const stoker__field *sf = &sc->f[f->src];
        if (f->tie != STOKER_TIE_NONE) {
            int32_t t = -1;
            for (int32_t k = 0; k < pf->n; k++)
                if (pf->f[k].src == sf->target)
                    t = k;
            /* without a transform nothing is reshaped: a tied field passes through alone */
            STOKER_RETURN_IF(t < 0 && p->transform != STOKER_TRANSFORM_NONE, err, STOKER_E_INVALID,
                             "%s: field \"%s\" follows field \"%s\", which STOKER_OPT_FIELDS "
                             "leaves out: keep both, or neither (or ask for STOKER_TRANSFORM_NONE)",
                             path, f->name, sc->f[sf->target].name);
            f->tied = t;
        }
        STOKER_RETURN_IF(p->transform != STOKER_TRANSFORM_NONE && f->role == STOKER__PF_RAGGED &&
                             f->tie == STOKER_TIE_NONE &&
                             (f->kind == STOKER_FIELD_JPEG || f->kind == STOKER_FIELD_PNG),
                         err, STOKER_E_UNSUPPORTED,
                         "%s: field \"%s\" is a second image; the transform applies to the "
                         "first (\"%s\") only: leave it out with STOKER_OPT_FIELDS, or ask for "
                         "STOKER_TRANSFORM_NONE for every image's bytes",
                         path, f->name, img >= 0 ? sc->f[img].name : "");
    }
    rc = field_dtypes(pf, stoker__cfg_string(cfg, STOKER_OPT_FIELD_DTYPES), path, err);
    return rc < 0 ? rc : stoker__pfields_layout(pf, p->batch, path, err);
}

/* What a batch delivers: a data set without a schema, its data and its labels. */
static int plan_fields(stoker__plan *p, const stoker_config *cfg, const char *path,
                       stoker__err *err)
{
    stoker__pfields *pf = &p->fields;
    if (pf->split)
        return schema_fields(p, cfg, path, err);
    stoker__pfields_legacy(pf, p->kind);
    stoker__pfield *d = &pf->f[pf->data];
    d->dtype = p->out_dtype;
    d->ndim = p->rec_size ? p->ndim : 1;
    memcpy(d->shape, p->shape, sizeof d->shape);
    int rc = select_fields(pf, stoker__cfg_string(cfg, STOKER_OPT_FIELDS), path, err);
    if (rc == 0)
        rc = field_dtypes(pf, stoker__cfg_string(cfg, STOKER_OPT_FIELD_DTYPES), path, err);
    return rc < 0 ? rc : stoker__pfields_layout(pf, p->batch, path, err);
}

int stoker__plan_make(stoker__plan *p, const stoker_config *cfg, stoker_dataset *ds,
                      stoker__err *err)
{
    memset(p, 0, sizeof *p);
    p->log = stoker__cfg_log(cfg);
    p->max_pixels = (uint64_t)stoker__cfg_int(cfg, STOKER_OPT_MAX_PIXELS);
    p->max_record_size = (uint64_t)stoker__cfg_int(cfg, STOKER_OPT_MAX_RECORD_SIZE);
    p->max_records = (uint64_t)stoker__cfg_int(cfg, STOKER_OPT_MAX_RECORDS);
    p->max_shards = (uint64_t)stoker__cfg_int(cfg, STOKER_OPT_MAX_SHARDS);
    p->gpu_normalize = stoker__cfg_int(cfg, STOKER_OPT_GPU_NORMALIZE) != 0;
    read_mean_std(p, cfg);
    plan_switches(p);
    const char *path = stoker__dataset_path(ds);
    int64_t local = -1;
    int rc = plan_ranks(p, cfg, &local, err);
    if (rc == 0)
        rc = plan_order(p, cfg, ds, err);
    if (rc == 0)
        rc = plan_simd(p, cfg, err);
    if (rc == 0)
        rc = plan_device(p, cfg, local, err);
    if (rc == 0)
        rc = plan_field(p, cfg, ds, err);
    if (rc == 0)
        rc = plan_machinery(p, cfg, ds, err);
    if (rc == 0)
        rc = plan_backend(p, cfg, err);
    if (rc == 0)
        plan_cache(p, cfg, ds);
    if (rc == 0)
        rc = plan_gpu_normalize(p, cfg, path, err);
    if (rc == 0)
        rc = plan_fields(p, cfg, path, err);
    if (rc == 0)
        rc = plan_decoder(p, cfg, ds, path, err);
    return rc;
}

/* ---- what was decided ---- */

int stoker__plan_get_int(const stoker__plan *p, stoker_option opt, int64_t *v)
{
    const bool image = p->image;
    switch (opt) {
    case STOKER_OPT_BATCH_SIZE: *v = (int64_t)p->batch; return 0;
    case STOKER_OPT_SHUFFLE: *v = p->shuffle; return 0;
    case STOKER_OPT_SEED: *v = (int64_t)p->seed; return 0;
    case STOKER_OPT_DROP_LAST: *v = p->drop_last; return 0;
    case STOKER_OPT_RANK: *v = p->rank; return 0;
    case STOKER_OPT_WORLD_SIZE: *v = p->world; return 0;
    case STOKER_OPT_DIST_ENV: *v = p->dist_env; return 0;
    case STOKER_OPT_EPOCH: *v = (int64_t)p->epoch; return 0;
    case STOKER_OPT_ORDER: *v = p->order; return 0;
    case STOKER_OPT_THREADS: *v = p->threads; return 0;
    case STOKER_OPT_DEPTH: *v = p->depth; return 0;
    case STOKER_OPT_BACKEND: *v = p->backend; return 0;
    case STOKER_OPT_DIRECT_IO: *v = p->direct; return 0;
    case STOKER_OPT_READ_AHEAD: *v = p->read_ahead; return 0;
    case STOKER_OPT_ON_CORRUPT: *v = p->on_corrupt; return 0;
    case STOKER_OPT_SIMD: *v = p->simd; return 0;
    case STOKER_OPT_DEVICE: *v = p->device >= 0 ? p->device + 1 : -1; return 0;
    case STOKER_OPT_DEVICE_BUFFERS: *v = p->device_buffers; return 0;
    case STOKER_OPT_GPU_NORMALIZE: *v = p->gpu_normalize; return 0;
    case STOKER_OPT_DECODER:
        if (!image)
            return STOKER_E_UNSUPPORTED;
        *v = p->gpu_decode ? p->decoder : STOKER_DECODER_CPU;
        return 0;
    case STOKER_OPT_TRANSFORM: *v = p->transform; return 0;
    case STOKER_OPT_DTYPE: *v = p->out_dtype; return 0;
    case STOKER_OPT_MAX_PIXELS: *v = (int64_t)p->max_pixels; return 0;
    case STOKER_OPT_MAX_RECORD_SIZE: *v = (int64_t)p->max_record_size; return 0;
    case STOKER_OPT_MAX_RECORDS: *v = (int64_t)p->max_records; return 0;
    case STOKER_OPT_MAX_SHARDS: *v = (int64_t)p->max_shards; return 0;
    case STOKER_OPT_MAX_CACHE: *v = (int64_t)p->max_cache; return 0;
    case STOKER_OPT_LAYOUT:
        if (!image && !p->gpu_normalize)
            return STOKER_E_UNSUPPORTED;
        *v = p->layout;
        return 0;
    case STOKER_OPT_SIZE: *v = p->xform.size; break;
    case STOKER_OPT_RESIZE: *v = p->xform.resize; break;
    case STOKER_OPT_DCT: *v = p->xform.dct; break;
    case STOKER_OPT_ANTIALIAS: *v = p->xform.antialias; break;
    case STOKER_OPT_RESAMPLER: *v = p->xform.resampler; break;
    case STOKER_OPT_DCT_SCALE: *v = p->xform.dct_scale; break;
    case STOKER_OPT_MASK_FILL: *v = p->xform.mask_fill; break;
    default: return STOKER_E_INVALID;
    }
    return image ? 0 : STOKER_E_UNSUPPORTED; /* the image options */
}

int stoker__plan_get_float(const stoker__plan *p, stoker_option opt, double *v)
{
    const double *train = opt == STOKER_OPT_VFLIP                ? &p->xform.vflip
                          : opt == STOKER_OPT_SCALE_MIN          ? &p->xform.crop_scale[0]
                          : opt == STOKER_OPT_SCALE_MAX          ? &p->xform.crop_scale[1]
                          : opt == STOKER_OPT_RATIO_MIN          ? &p->xform.crop_ratio[0]
                          : opt == STOKER_OPT_RATIO_MAX          ? &p->xform.crop_ratio[1]
                          : opt == STOKER_OPT_MIN_BOX_SIZE       ? &p->xform.min_box_size
                          : opt == STOKER_OPT_MIN_BOX_VISIBILITY ? &p->xform.min_box_vis
                                                                 : NULL;
    if (opt == STOKER_OPT_HFLIP) {
        *v = p->xform.hflip > 0.0 ? p->xform.hflip : 0.0;
        return p->image ? 0 : STOKER_E_UNSUPPORTED;
    }
    if (train) {
        *v = *train;
        return p->image ? 0 : STOKER_E_UNSUPPORTED; /* the image transform's */
    }
    if (opt < STOKER_OPT_MEAN_R || opt > STOKER_OPT_STD_B)
        return STOKER_E_INVALID;
    if (!p->image && !p->gpu_normalize)
        return STOKER_E_UNSUPPORTED; /* nothing is normalised */
    const int c = (int)(opt - STOKER_OPT_MEAN_R);
    *v = c < 3 ? (double)p->mean[c] : (double)p->std[c - 3];
    return 0;
}
