/* SPDX-License-Identifier: Apache-2.0 */
/* nvJPEG over dlopen (nvjpeg.h). The few types and constants used are declared here, with
 * their values from the nvJPEG documentation (docs.nvidia.com/cuda/nvjpeg, "nvJPEG Type
 * Declarations" and "nvJPEG API Reference"), which match nvjpeg.h of CUDA 11 to 13:
 * handles are opaque pointers, enums are passed as int (their C type), and a status of 0
 * is NVJPEG_STATUS_SUCCESS. */
#include "cuda/nvjpeg.h"

#include "cuda/image_kernels.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* nvjpegBackend_t: NVJPEG_BACKEND_HARDWARE ("nvJPEG Backend") */
#define BACKEND_HARDWARE 3
/* nvjpegOutputFormat_t: NVJPEG_OUTPUT_YUV, the planes at their own resolution in
 * channel[0..2] (the chroma upsampling and colour conversion are image_kernels.h's) */
#define OUTPUT_YUV 1
/* nvjpegChromaSubsampling_t */
#define CSS_444 0
#define CSS_422 1
#define CSS_420 2
#define CSS_GRAY 6
/* nvJPEG flags ("nvJPEG Flags"): NVJPEG_FLAGS_BITSTREAM_STRICT, an error rather than a
 * best-effort decode for a bitstream that breaks the JPEG specification (a damaged record
 * must not pass). Not NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION: with it, every batched
 * decode of the hardware back-end waits until every kernel queued on the device, on any
 * stream, has finished (seen on an H200 with nvJPEG 13: a decode of 100 images beside a 50
 * ms kernel on another stream took 57 ms instead of 5), so a training job's kernels would
 * hold up decoding; the planes are upsampled as libjpeg does by stoker's own kernel. */
#define FLAGS_BITSTREAM_STRICT 4
static const unsigned FLAG_SETS[] = {FLAGS_BITSTREAM_STRICT};
/* nvjpegStatus_t ("nvJPEG API Return Codes") */
#define STATUS_SUCCESS 0
#define STATUS_ALLOCATOR_FAILURE 5
/* libraryPropertyType (library_types.h): MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL */
#define PROPERTY_MAJOR 0
#define PROPERTY_MINOR 1
#define PROPERTY_PATCH 2
/* NVJPEG_MAX_COMPONENT */
#define MAX_COMPONENT 4
#define PLANE_ALIGN 256u

typedef void *nj_handle; /* nvjpegHandle_t, nvjpegJpegState_t, nvjpegJpegStream_t, ... */

/* nvjpegImage_t */
typedef struct nj_image {
    unsigned char *channel[MAX_COMPONENT];
    size_t pitch[MAX_COMPONENT];
} nj_image;

/* The entry points, with the signatures of the nvJPEG API reference. */
typedef struct nj_api {
    int (*create_ex)(int backend, void *dev_allocator, void *pinned_allocator, unsigned flags,
                     nj_handle *handle);
    int (*destroy)(nj_handle handle);
    int (*state_create)(nj_handle handle, nj_handle *state);
    int (*state_destroy)(nj_handle state);
    int (*params_create)(nj_handle handle, nj_handle *params);
    int (*params_destroy)(nj_handle params);
    int (*params_set_output_format)(nj_handle params, int format);
    int (*params_set_roi)(nj_handle params, int x, int y, int w, int h);
    int (*stream_create)(nj_handle handle, nj_handle *stream);
    int (*stream_destroy)(nj_handle stream);
    int (*stream_parse_header)(nj_handle handle, const unsigned char *data, size_t length,
                               nj_handle stream);
    int (*batched_supported_ex)(nj_handle handle, nj_handle stream, nj_handle params,
                                int *is_supported);
    int (*batched_initialize)(nj_handle handle, nj_handle state, int batch_size,
                              int max_cpu_threads, int format);
    int (*batched_ex)(nj_handle handle, nj_handle state, const unsigned char *const *data,
                      const size_t *lengths, nj_image *destinations, nj_handle *params,
                      void *cuda_stream);
    int (*get_image_info)(nj_handle handle, const unsigned char *data, size_t length,
                          int *components, int *subsampling, int *widths, int *heights);
    /* optional: absent from older libraries */
    int (*get_property)(int type, int *value);
    int (*hardware_decoder_info)(nj_handle handle, unsigned *engines, unsigned *cores);
    int (*pre_allocate)(nj_handle handle, nj_handle state, int batch_size, int width, int height,
                        int chroma_subsampling, int format);
} nj_api;

static const struct {
    const char *name;
    size_t offset;
    bool required;
} SYMBOLS[] = {
    {"nvjpegCreateEx", offsetof(nj_api, create_ex), true},
    {"nvjpegDestroy", offsetof(nj_api, destroy), true},
    {"nvjpegJpegStateCreate", offsetof(nj_api, state_create), true},
    {"nvjpegJpegStateDestroy", offsetof(nj_api, state_destroy), true},
    {"nvjpegDecodeParamsCreate", offsetof(nj_api, params_create), true},
    {"nvjpegDecodeParamsDestroy", offsetof(nj_api, params_destroy), true},
    {"nvjpegDecodeParamsSetOutputFormat", offsetof(nj_api, params_set_output_format), true},
    {"nvjpegDecodeParamsSetROI", offsetof(nj_api, params_set_roi), true},
    {"nvjpegJpegStreamCreate", offsetof(nj_api, stream_create), true},
    {"nvjpegJpegStreamDestroy", offsetof(nj_api, stream_destroy), true},
    {"nvjpegJpegStreamParseHeader", offsetof(nj_api, stream_parse_header), true},
    {"nvjpegDecodeBatchedSupportedEx", offsetof(nj_api, batched_supported_ex), true},
    {"nvjpegDecodeBatchedInitialize", offsetof(nj_api, batched_initialize), true},
    {"nvjpegDecodeBatchedEx", offsetof(nj_api, batched_ex), true},
    {"nvjpegGetImageInfo", offsetof(nj_api, get_image_info), true},
    {"nvjpegGetProperty", offsetof(nj_api, get_property), false},
    {"nvjpegGetHardwareDecoderInfo", offsetof(nj_api, hardware_decoder_info), false},
    {"nvjpegDecodeBatchedPreAllocate", offsetof(nj_api, pre_allocate), false},
};
#define NSYMBOLS (sizeof SYMBOLS / sizeof SYMBOLS[0])

struct stoker__nvjpeg {
    void *lib;
    bool called; /* an nvJPEG function ran: the library stays loaded (see close) */
    nj_api api;
    int device;
    size_t pitch_align;                     /* the planes' rows this many bytes apart at least */
    unsigned flags;                         /* nvjpegCreateEx's */
    nj_handle handle, state, stream, check; /* check: the decode parameters of supported() */
    /* per image of a batch, grown on demand; params[i] is created once and reused */
    nj_handle *params, *batch_params;
    const unsigned char **data;
    size_t *lengths;
    nj_image *images;
    stoker__gpu_ycc *ycc; /* per image taken: its planes and the region to convert */
    int32_t cap, params_made;
    /* device: the batch's planes, and the conversion's descriptors (reused by the next batch:
     * the caller waits for a batch's work before the next) */
    uint8_t *planes;
    size_t planes_cap;
    stoker__gpu_ycc *dycc;
    int32_t dycc_cap;
    int32_t initialized; /* the batch size nvjpegDecodeBatchedInitialize was given; 0: none */
    char describe[160];
    bool pooled; /* counted among the memory pool's users */
    /* where the host's time goes, for logs: checking images, initialising, queueing */
    uint64_t check_ns, init_ns, queue_ns, inits, batches, decoded;
};

static const char *status_name(int s)
{
    static const char *const names[] = {"NVJPEG_STATUS_SUCCESS",
                                        "NVJPEG_STATUS_NOT_INITIALIZED",
                                        "NVJPEG_STATUS_INVALID_PARAMETER",
                                        "NVJPEG_STATUS_BAD_JPEG",
                                        "NVJPEG_STATUS_JPEG_NOT_SUPPORTED",
                                        "NVJPEG_STATUS_ALLOCATOR_FAILURE",
                                        "NVJPEG_STATUS_EXECUTION_FAILED",
                                        "NVJPEG_STATUS_ARCH_MISMATCH",
                                        "NVJPEG_STATUS_INTERNAL_ERROR",
                                        "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED",
                                        "NVJPEG_STATUS_INCOMPLETE_BITSTREAM"};
    return s >= 0 && (size_t)s < sizeof names / sizeof names[0] ? names[s] : "unknown status";
}

/* ---- loading ------------------------------------------------------------------------------- */

/* dlopen of the first name that loads; the loader's messages otherwise. */
static void *load(const char **name, char *why, size_t cap)
{
    const char *env = getenv("STOKER_NVJPEG_LIBRARY");
    const char *names[2] = {"libnvjpeg.so.13", "libnvjpeg.so"};
    const size_t n = env && *env ? 1 : 2;
    if (n == 1)
        names[0] = env;
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib) {
            *name = names[i];
            return lib;
        }
        const char *e = dlerror();
        if (why && used < cap)
            used += (size_t)snprintf(why + used, cap - used, "%s%s",
                                     i ? "; " : "nvJPEG not found: ", e ? e : names[i]);
    }
    return NULL;
}

/* Resolves every symbol; the missing required ones are named in why. */
static bool resolve(void *lib, const char *name, nj_api *api, char *why, size_t cap)
{
    char list[STOKER_ERRMSG_CAP] = "";
    size_t used = 0, missing = 0;
    for (size_t i = 0; i < NSYMBOLS; i++) {
        void *sym = dlsym(lib, SYMBOLS[i].name);
        memcpy((char *)api + SYMBOLS[i].offset, &sym, sizeof sym); /* POSIX: same size */
        if (sym || !SYMBOLS[i].required)
            continue;
        if (used < sizeof list)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", missing ? ", " : "",
                                     SYMBOLS[i].name);
        missing++;
    }
    if (missing && why && cap)
        snprintf(why, cap, "%s lacks %zu nvJPEG function%s: %s", name, missing,
                 missing > 1 ? "s" : "", list);
    return missing == 0;
}

static void describe(stoker__nvjpeg *nj, const char *name)
{
    int v[3] = {0, 0, 0};
    const int props[3] = {PROPERTY_MAJOR, PROPERTY_MINOR, PROPERTY_PATCH};
    for (int i = 0; i < 3 && nj->api.get_property; i++)
        if (nj->api.get_property(props[i], &v[i]) != STATUS_SUCCESS)
            v[i] = -1;
    unsigned engines = 0, cores = 0;
    if (nj->api.hardware_decoder_info)
        nj->api.hardware_decoder_info(nj->handle, &engines, &cores);
    snprintf(nj->describe, sizeof nj->describe,
             "%s %d.%d.%d, device %d, %u engines x %u cores, planes upsampled as libjpeg", name,
             v[0], v[1], v[2], nj->device, engines, cores);
}

/* ---- nvJPEG's memory ----------------------------------------------------------------------
 * nvJPEG allocates and frees device and pinned buffers as batches change (their count, their
 * images' sizes). cudaFree and cudaFreeHost wait for the whole device to be idle: beside a
 * training job's kernels, a decode that frees would wait for the kernel running at that
 * moment. nvJPEG gets allocators that keep freed blocks for
 * reuse instead (by kind and device, a block serving a request of at least half its size),
 * and free for real only what is idle beyond POOL_IDLE_MAX. The callbacks carry no context,
 * so the pool is the process's. */
#define POOL_IDLE_MAX (UINT64_C(1) << 30) /* idle bytes kept per kind */

typedef struct nj_block {
    void *p;
    size_t size;
    int device;
    bool pinned, idle;
} nj_block;

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static nj_block *pool;
static size_t pool_n, pool_cap, pool_idle[2];
static int pool_users; /* decoders open: the last to close frees the idle blocks */

/* An idle block of that kind for `size` bytes, taken (mutex held); NULL when none fits. */
static void *pool_take(size_t size, bool pinned, int device)
{
    nj_block *best = NULL;
    for (size_t i = 0; i < pool_n; i++) {
        nj_block *b = &pool[i];
        if (b->idle && b->pinned == pinned && b->device == device && b->size >= size &&
            b->size / 2 <= size && (!best || b->size < best->size))
            best = b;
    }
    if (!best)
        return NULL;
    best->idle = false;
    pool_idle[pinned] -= best->size;
    return best->p;
}

static int pool_alloc(void **p, size_t size, bool pinned)
{
    const int device = stoker__cuda_current_device();
    pthread_mutex_lock(&pool_mu);
    *p = pool_take(size, pinned, device);
    pthread_mutex_unlock(&pool_mu);
    if (*p)
        return 0;
    char msg[64];
    const size_t n = size ? size : 1;
    if (pinned)
        *p = device >= 0 ? stoker__cuda_host_alloc(device, n, msg, sizeof msg) : NULL;
    else if (stoker__cuda_malloc(p, n) != 0)
        *p = NULL;
    if (!*p)
        return 2; /* cudaErrorMemoryAllocation */
    pthread_mutex_lock(&pool_mu);
    if (pool_n == pool_cap) {
        const size_t cap = pool_cap ? 2 * pool_cap : 64;
        nj_block *q = stoker__realloc(pool, cap * sizeof *q);
        if (q)
            pool = q, pool_cap = cap;
    }
    const bool kept = pool_n < pool_cap;
    if (kept)
        pool[pool_n++] = (nj_block){*p, n, device, pinned, false};
    pthread_mutex_unlock(&pool_mu);
    if (!kept) { /* no room to remember it: nothing handed out that free could not find */
        pinned ? stoker__cuda_host_free(*p) : stoker__cuda_free(*p);
        *p = NULL;
        return 2;
    }
    return 0;
}

static int pool_free(void *p, bool pinned)
{
    if (!p)
        return 0;
    bool release = false;
    pthread_mutex_lock(&pool_mu);
    for (size_t i = 0; i < pool_n; i++) {
        nj_block *b = &pool[i];
        if (b->p != p)
            continue;
        if (pool_idle[pinned] + b->size > POOL_IDLE_MAX) {
            *b = pool[--pool_n]; /* forgotten, and freed below */
            release = true;
        } else {
            b->idle = true;
            pool_idle[pinned] += b->size;
        }
        break;
    }
    pthread_mutex_unlock(&pool_mu);
    if (release)
        pinned ? stoker__cuda_host_free(p) : stoker__cuda_free(p);
    return 0;
}

/* A decoder opens (+1) or closes (-1); with none left, idle blocks are freed. */
static void pool_use(int d)
{
    nj_block idle[64];
    size_t n;
    do {
        n = 0;
        pthread_mutex_lock(&pool_mu);
        pool_users += d;
        d = 0;
        for (size_t i = 0; i < pool_n && n < 64 && pool_users == 0;) {
            if (!pool[i].idle) {
                i++;
                continue;
            }
            idle[n++] = pool[i];
            pool_idle[pool[i].pinned] -= pool[i].size;
            pool[i] = pool[--pool_n];
        }
        pthread_mutex_unlock(&pool_mu);
        for (size_t i = 0; i < n; i++)
            idle[i].pinned ? stoker__cuda_host_free(idle[i].p) : stoker__cuda_free(idle[i].p);
    } while (n == 64);
}

static int dev_malloc(void **p, size_t size)
{
    return pool_alloc(p, size, false);
}

static int dev_free(void *p)
{
    return pool_free(p, false);
}

static int pinned_malloc(void **p, size_t size, unsigned flags)
{
    (void)flags; /* portable pinned memory serves every flag nvJPEG asks for */
    return pool_alloc(p, size, true);
}

static int pinned_free(void *p)
{
    return pool_free(p, true);
}

/* nvjpegDevAllocator_t and nvjpegPinnedAllocator_t */
static struct {
    int (*malloc)(void **, size_t);
    int (*free)(void *);
} dev_allocator = {dev_malloc, dev_free};
static struct {
    int (*malloc)(void **, size_t, unsigned);
    int (*free)(void *);
} pinned_allocator = {pinned_malloc, pinned_free};

/* The decoder's handle, state, parsed stream and checking parameters on the current device. */
static int create_handles(stoker__nvjpeg *nj, char *why, size_t cap)
{
    const nj_api *a = &nj->api;
    nj->called = true;
    int s = -1;
    for (size_t i = 0; i < sizeof FLAG_SETS / sizeof FLAG_SETS[0] && s != STATUS_SUCCESS; i++) {
        nj->flags = FLAG_SETS[i];
        s = a->create_ex(BACKEND_HARDWARE, &dev_allocator, &pinned_allocator, nj->flags,
                         &nj->handle);
    }
    if (s == STATUS_SUCCESS) {
        pool_use(1);
        nj->pooled = true;
    }
    if (s != STATUS_SUCCESS) {
        nj->handle = NULL;
        if (why && cap)
            snprintf(why, cap,
                     "nvjpegCreateEx with the hardware back-end on device %d: %s (%d); no JPEG "
                     "decoder engine on this GPU, or its driver does not offer it",
                     nj->device, status_name(s), s);
        return STOKER_E_UNSUPPORTED;
    }
    const char *step = "nvjpegJpegStateCreate";
    s = a->state_create(nj->handle, &nj->state);
    if (s == STATUS_SUCCESS && (step = "nvjpegJpegStreamCreate"))
        s = a->stream_create(nj->handle, &nj->stream);
    if (s == STATUS_SUCCESS && (step = "nvjpegDecodeParamsCreate"))
        s = a->params_create(nj->handle, &nj->check);
    if (s == STATUS_SUCCESS && (step = "nvjpegDecodeParamsSetOutputFormat"))
        s = a->params_set_output_format(nj->check, OUTPUT_YUV);
    if (s != STATUS_SUCCESS) {
        if (why && cap)
            snprintf(why, cap, "%s on device %d: %s (%d)", step, nj->device, status_name(s), s);
        return s == STATUS_ALLOCATOR_FAILURE ? -ENOMEM : STOKER_E_UNSUPPORTED;
    }
    unsigned engines = 1, cores = 1;
    if (a->hardware_decoder_info &&
        a->hardware_decoder_info(nj->handle, &engines, &cores) == STATUS_SUCCESS &&
        (engines == 0 || cores == 0)) {
        if (why && cap)
            snprintf(why, cap, "device %d has no JPEG decoder engine (nvJPEG counts %u x %u)",
                     nj->device, engines, cores);
        return STOKER_E_UNSUPPORTED;
    }
    return 0;
}

/* The device must exist before nvJPEG is asked for it. */
static int check_device(int device, char *why, size_t cap)
{
    char msg[STOKER_ERRMSG_CAP] = "";
    const int n = stoker__cuda_device_query(msg, sizeof msg);
    if (n == 0) {
        if (why && cap)
            snprintf(why, cap, "no CUDA device for nvJPEG: %s", msg);
        return STOKER_E_UNSUPPORTED;
    }
    if (device < 0 || device >= n) {
        if (why && cap)
            snprintf(why, cap, "CUDA device %d does not exist (%d found)", device, n);
        return STOKER_E_UNSUPPORTED;
    }
    return 0;
}

int stoker__nvjpeg_open(stoker__nvjpeg **out, int device, char *why, size_t cap)
{
    *out = NULL;
    if (why && cap)
        why[0] = '\0';
    stoker__nvjpeg *nj = stoker__calloc(1, sizeof *nj);
    if (!nj) {
        if (why && cap)
            snprintf(why, cap, "no memory for the nvJPEG decoder");
        return -ENOMEM;
    }
    nj->device = device;
    /* The planes' rows are packed (1 byte apart at least); STOKER_NVJPEG_PITCH_ALIGN (a power
     * of two up to 4096) pads them, to measure whether nvJPEG's copies out of its hardware
     * decoder's surfaces depend on the pitch (docs/GPU.md) */
    const char *pa = getenv("STOKER_NVJPEG_PITCH_ALIGN");
    const long a = pa ? strtol(pa, NULL, 10) : 1;
    nj->pitch_align = a > 1 && a <= 4096 && (a & (a - 1)) == 0 ? (size_t)a : 1;
    const char *name = NULL;
    int rc = STOKER_E_UNSUPPORTED;
    nj->lib = load(&name, why, cap);
    if (!nj->lib || !resolve(nj->lib, name, &nj->api, why, cap))
        goto fail;
    rc = check_device(device, why, cap);
    if (rc < 0)
        goto fail;
    const int prev = stoker__cuda_use_device(device);
    rc = create_handles(nj, why, cap);
    if (rc == 0)
        describe(nj, name);
    stoker__cuda_restore_device(device, prev);
    if (rc < 0)
        goto fail;
    *out = nj;
    return 0;
fail:
    stoker__nvjpeg_close(nj);
    return rc;
}

void stoker__nvjpeg_close(stoker__nvjpeg *nj)
{
    if (!nj)
        return;
    const nj_api *a = &nj->api;
    if (nj->handle) {
        const int prev = stoker__cuda_use_device(nj->device);
        for (int32_t i = 0; i < nj->params_made; i++)
            a->params_destroy(nj->params[i]);
        if (nj->check)
            a->params_destroy(nj->check);
        if (nj->stream)
            a->stream_destroy(nj->stream);
        if (nj->state)
            a->state_destroy(nj->state);
        a->destroy(nj->handle);
        stoker__cuda_restore_device(nj->device, prev);
    }
    if (nj->pooled)
        pool_use(-1);
    /* once used, the library stays loaded: nvJPEG and the CUDA runtime keep process-wide
     * state (registered kernels, the runtime's context) that an unload would leave dangling */
    if (nj->lib && !nj->called)
        dlclose(nj->lib);
    if (nj->planes || nj->dycc) {
        const int prev = stoker__cuda_use_device(nj->device);
        dev_free(nj->planes);
        dev_free(nj->dycc);
        stoker__cuda_restore_device(nj->device, prev);
    }
    stoker__free(nj->ycc);
    stoker__free(nj->params);
    stoker__free(nj->batch_params);
    stoker__free(nj->data);
    stoker__free(nj->lengths);
    stoker__free(nj->images);
    stoker__free(nj);
}

bool stoker__nvjpeg_reserve(stoker__nvjpeg *nj, int32_t batch, int32_t width, int32_t height)
{
    if (!nj->api.pre_allocate || batch < 1 || width < 1 || height < 1)
        return false;
    const int prev = stoker__cuda_use_device(nj->device);
    /* 4:4:4, the subsampling with the largest planes */
    const int s =
        nj->api.pre_allocate(nj->handle, nj->state, batch, width, height, CSS_444, OUTPUT_YUV);
    stoker__cuda_restore_device(nj->device, prev);
    return s == STATUS_SUCCESS;
}

void stoker__nvjpeg_timing(const stoker__nvjpeg *nj, char *buf, size_t cap)
{
    snprintf(buf, cap,
             "%llu batches of %llu images: checking %.3f s, initialising %.3f s (%llu times), "
             "queueing %.3f s",
             (unsigned long long)nj->batches, (unsigned long long)nj->decoded,
             (double)nj->check_ns * 1e-9, (double)nj->init_ns * 1e-9, (unsigned long long)nj->inits,
             (double)nj->queue_ns * 1e-9);
}

const char *stoker__nvjpeg_describe(const stoker__nvjpeg *nj)
{
    return nj->describe;
}

/* ---- checking and decoding ------------------------------------------------------------------ */

static int nj_fail(stoker__err *err, const char *call, int s)
{
    return stoker__fail(err, STOKER_E_CUDA, "%s: %s (%d)", call, status_name(s), s);
}

/* Whether the decoder takes `data` with `roi` under `params`: *ok false when the header does
 * not parse, the region leaves the image, or the planes are not ones the conversion takes
 * (4:4:4, 4:2:2, 4:2:0 or grayscale: libjpeg-turbo's versions upsample 4:4:0 differently).
 * *g gets the image's planes (region and pointers left to the caller). */
static int check_one(stoker__nvjpeg *nj, nj_handle params, const uint8_t *data, size_t size,
                     const stoker__nvjpeg_roi *roi, bool *ok, stoker__gpu_ycc *g, stoker__err *err)
{
    const nj_api *a = &nj->api;
    *ok = false;
    int comps = 0, subsampling = 0, w[MAX_COMPONENT] = {0}, h[MAX_COMPONENT] = {0};
    if (!data || size == 0 ||
        a->get_image_info(nj->handle, data, size, &comps, &subsampling, w, h) != STATUS_SUCCESS)
        return 0;
    *g = (stoker__gpu_ycc){.width = w[0], .height = h[0], .cw = w[1], .ch = h[1]};
    switch (subsampling) {
    case CSS_444: g->hs = g->vs = 1; break;
    case CSS_422: g->hs = 2, g->vs = 1; break;
    case CSS_420: g->hs = g->vs = 2; break;
    case CSS_GRAY: g->hs = g->vs = 0, g->cw = w[0], g->ch = h[0]; break; /* see plan_planes */
    default: return 0;
    }
    if (w[0] <= 0 || h[0] <= 0 ||
        (g->hs && (comps != 3 || g->cw != (w[0] + g->hs - 1) / g->hs ||
                   g->ch != (h[0] + g->vs - 1) / g->vs)))
        return 0;
    const bool whole = !roi || roi->w <= 0 || roi->h <= 0;
    if (!whole && (roi->x < 0 || roi->y < 0 || roi->x > w[0] - roi->w || roi->y > h[0] - roi->h))
        return 0;
    /* the image is decoded whole: the conversion reads the chroma around the region */
    if (a->params_set_roi(params, 0, 0, -1, -1) != STATUS_SUCCESS) /* -1, -1: no region */
        return 0;
    if (a->stream_parse_header(nj->handle, data, size, nj->stream) != STATUS_SUCCESS)
        return 0;
    int unsupported = 1;
    const int s = a->batched_supported_ex(nj->handle, nj->stream, params, &unsupported);
    if (s != STATUS_SUCCESS)
        return nj_fail(err, "nvjpegDecodeBatchedSupportedEx", s);
    *ok = unsupported == 0; /* 0 means supported */
    return 0;
}

int stoker__nvjpeg_supported(stoker__nvjpeg *nj, const uint8_t *data, size_t size,
                             const stoker__nvjpeg_roi *roi, bool *ok, stoker__err *err)
{
    const int prev = stoker__cuda_use_device(nj->device);
    stoker__gpu_ycc g;
    const int rc = check_one(nj, nj->check, data, size, roi, ok, &g, err);
    stoker__cuda_restore_device(nj->device, prev);
    return rc;
}

/* *p (of *cap elements) holding n elements of `size` bytes; false without memory. */
static bool grow_array(void *p, size_t n, size_t size)
{
    void **a = p, *q = stoker__realloc(*a, n * size);
    if (q)
        *a = q;
    return q != NULL;
}

/* Room for n images, with decode parameters for each (output RGBI). */
static int grow(stoker__nvjpeg *nj, int32_t n, stoker__err *err)
{
    if (n > nj->cap) {
        const size_t c = (size_t)n;
        const bool ok = grow_array(&nj->params, c, sizeof *nj->params) &&
                        grow_array(&nj->batch_params, c, sizeof *nj->batch_params) &&
                        grow_array(&nj->data, c, sizeof *nj->data) &&
                        grow_array(&nj->lengths, c, sizeof *nj->lengths) &&
                        grow_array(&nj->images, c, sizeof *nj->images) &&
                        grow_array(&nj->ycc, c, sizeof *nj->ycc);
        STOKER_RETURN_IF(!ok, err, -ENOMEM, "no memory for a batch of %d JPEGs", (int)n);
        nj->cap = n;
    }
    while (nj->params_made < n) {
        nj_handle *p = &nj->params[nj->params_made];
        int s = nj->api.params_create(nj->handle, p);
        if (s != STATUS_SUCCESS)
            return nj_fail(err, "nvjpegDecodeParamsCreate", s);
        nj->params_made++;
        s = nj->api.params_set_output_format(*p, OUTPUT_YUV);
        if (s != STATUS_SUCCESS)
            return nj_fail(err, "nvjpegDecodeParamsSetOutputFormat", s);
    }
    return 0;
}

/* Checks every image; gathers those taken into the batch arrays (their planes placed in
 * plan_planes). Returns how many. */
static int gather(stoker__nvjpeg *nj, int32_t n, const uint8_t *const data[], const size_t sizes[],
                  const stoker__nvjpeg_roi *rois, uint8_t *const dst[], const size_t pitch[],
                  uint8_t *taken, stoker__err *err)
{
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        bool ok = false;
        stoker__gpu_ycc g;
        const stoker__nvjpeg_roi *r = rois && rois[i].w > 0 && rois[i].h > 0 ? &rois[i] : NULL;
        const int rc = check_one(nj, nj->params[i], data[i], sizes[i], r, &ok, &g, err);
        if (rc < 0)
            return rc;
        taken[i] = ok && dst[i] != NULL;
        if (!taken[i])
            continue;
        g.x = r ? r->x : 0;
        g.y = r ? r->y : 0;
        g.w = r ? r->w : g.width;
        g.h = r ? r->h : g.height;
        g.dst = dst[i];
        g.dst_pitch = (int64_t)pitch[i];
        nj->ycc[m] = g;
        nj->data[m] = data[i];
        nj->lengths[m] = sizes[i];
        nj->batch_params[m] = nj->params[i];
        m++;
    }
    return m;
}

/* Places the m images' planes in the device scratch (grown when short) and points nvJPEG's
 * outputs and the conversion's inputs at them. A grayscale image gets room for two more
 * planes of its size, which the conversion does not read: nvJPEG's planar output of a
 * one-component image is not documented to leave them alone. */
static int plan_planes(stoker__nvjpeg *nj, int32_t m, stoker__err *err)
{
    const size_t pa = nj->pitch_align;
    size_t need = 0;
    for (int32_t k = 0; k < m; k++) {
        const stoker__gpu_ycc *g = &nj->ycc[k];
        need +=
            stoker__align_up(stoker__align_up((size_t)g->width, pa) * (size_t)g->height,
                             PLANE_ALIGN) +
            2 * stoker__align_up(stoker__align_up((size_t)g->cw, pa) * (size_t)g->ch, PLANE_ALIGN);
    }
    if (need > nj->planes_cap) {
        dev_free(nj->planes);
        nj->planes = NULL;
        nj->planes_cap = 0;
        const size_t want = need + need / 4;
        STOKER_RETURN_IF(dev_malloc((void **)&nj->planes, want) != 0, err, STOKER_E_CUDA,
                         "cudaMalloc of %zu bytes for %d decoded images' planes", want, (int)m);
        nj->planes_cap = want;
    }
    if (m > nj->dycc_cap) {
        dev_free(nj->dycc);
        nj->dycc = NULL;
        nj->dycc_cap = 0;
        STOKER_RETURN_IF(dev_malloc((void **)&nj->dycc, (size_t)m * sizeof *nj->dycc) != 0, err,
                         STOKER_E_CUDA, "cudaMalloc of %d conversion descriptors", (int)m);
        nj->dycc_cap = m;
    }
    uint8_t *at = nj->planes;
    for (int32_t k = 0; k < m; k++) {
        stoker__gpu_ycc *g = &nj->ycc[k];
        nj_image *im = &nj->images[k];
        *im = (nj_image){{NULL}, {0}};
        for (int c = 0; c < 3; c++) {
            const int32_t pw = c ? g->cw : g->width, ph = c ? g->ch : g->height;
            const size_t pitch = stoker__align_up((size_t)pw, pa);
            g->plane[c] = at;
            g->pitch[c] = (int32_t)pitch;
            im->channel[c] = at;
            im->pitch[c] = pitch;
            at += stoker__align_up(pitch * (size_t)ph, PLANE_ALIGN);
        }
    }
    return 0;
}

static int decode(stoker__nvjpeg *nj, int32_t m, stoker__stream stream, stoker__err *err)
{
    const nj_api *a = &nj->api;
    int s;
    /* the documented rule: initialise again when the batch size changes or a batch failed */
    const uint64_t t0 = stoker__now_ns();
    if (nj->initialized != m) {
        nj->initialized = 0;
        s = a->batched_initialize(nj->handle, nj->state, m, 1, OUTPUT_YUV);
        if (s != STATUS_SUCCESS)
            return nj_fail(err, "nvjpegDecodeBatchedInitialize", s);
        nj->initialized = m;
        nj->inits++;
    }
    const uint64_t t1 = stoker__now_ns();
    nj->init_ns += t1 - t0;
    s = a->batched_ex(nj->handle, nj->state, nj->data, nj->lengths, nj->images, nj->batch_params,
                      stream);
    nj->queue_ns += stoker__now_ns() - t1;
    nj->batches++;
    nj->decoded += (uint64_t)m;
    if (s != STATUS_SUCCESS) {
        nj->initialized = 0;
        return stoker__fail(err, STOKER_E_CUDA, "nvjpegDecodeBatchedEx of %d JPEGs: %s (%d)",
                            (int)m, status_name(s), s);
    }
    /* the descriptors go from pageable memory: the copy has taken them when it returns */
    int e = stoker__cuda_copy_to_device(nj->dycc, nj->ycc, (size_t)m * sizeof *nj->ycc, stream);
    if (e == 0)
        e = stoker__gpu_ycc_to_rgb(nj->dycc, m, stream);
    STOKER_RETURN_IF(e != 0, err, STOKER_E_CUDA, "converting %d decoded JPEGs to RGB: %s", (int)m,
                     stoker__cuda_error_string(e));
    return 0;
}

int stoker__nvjpeg_decode_batch(stoker__nvjpeg *nj, int32_t n, const uint8_t *const data[],
                                const size_t sizes[], const stoker__nvjpeg_roi *rois,
                                uint8_t *const dst[], const size_t pitch[], stoker__stream stream,
                                uint8_t *taken, stoker__err *err)
{
    STOKER_RETURN_IF(n < 0, err, STOKER_E_INVALID, "a batch of %d JPEGs", (int)n);
    if (n == 0)
        return 0;
    memset(taken, 0, (size_t)n);
    const int prev = stoker__cuda_use_device(nj->device);
    int rc = grow(nj, n, err);
    const uint64_t t0 = stoker__now_ns();
    if (rc == 0)
        rc = gather(nj, n, data, sizes, rois, dst, pitch, taken, err);
    nj->check_ns += stoker__now_ns() - t0;
    if (rc > 0) {
        const int rp = plan_planes(nj, rc, err);
        rc = rp < 0 ? rp : rc;
    }
    if (rc < 0)
        memset(taken, 0, (size_t)n); /* nothing was queued */
    if (rc > 0)
        rc = decode(nj, rc, stream, err);
    stoker__cuda_restore_device(nj->device, prev);
    return rc < 0 ? rc : 0;
}
