/* The JPEG image pipeline as the loader's process step: every record is decoded, cropped,
 * resized and normalised by the worker that read it, straight into its fixed-size place in
 * the batch, so a batch is one dense [count, 3, C, C] (NCHW) or [count, C, C, 3] (NHWC)
 * array of the output dtype. Each worker owns one scratch; the parameters are shared and
 * read-only after create. */
#include "common/config.h"
#include "loader.h"
#include "transform/transform.h"

#include <string.h>

/* Single writer (the worker): a relaxed load and store, read by stats with relaxed loads. */
static inline void put(atomic_uint_fast64_t *c, uint64_t v)
{
    atomic_store_explicit(c, v, memory_order_relaxed);
}

/* Publishes the scratch's stage times, which only the worker may read, as its counters. */
static void publish_stats(stoker__worker *w)
{
    const stoker__xform_stats *st = stoker__xform_scratch_stats(w->xs);
    put(&w->stats.decode_ns, st->decode_ns);
    put(&w->stats.resize_ns, st->resize_ns);
    put(&w->stats.normalize_ns, st->normalize_ns);
    put(&w->stats.reduced, st->reduced);
}

/* The process step: one JPEG record to one finished sample. Randomness (train) depends on
 * (seed, epoch, id) only, so any worker produces the same sample. A decoded size above the
 * pixel limit is a corrupt record like any other damage (the policy decides), its cause
 * kept in the message. */
static int process_jpeg(stoker__worker *w, int64_t id, const uint8_t *src, uint64_t n, uint8_t *dst,
                        uint64_t dst_cap)
{
    const stoker_loader *l = w->loader;
    if (dst_cap < l->rec_size)
        return stoker__fail(&w->err, STOKER_E_LIMIT,
                            "output slot of %" PRIu64 " bytes is smaller than a sample (%" PRIu64
                            ")",
                            dst_cap, l->rec_size);
    int rc =
        stoker__xform_jpeg(w->xs, l->xp, l->smp.seed, w->epoch, id, src, (size_t)n, dst, &w->err);
    publish_stats(w);
    if (rc == STOKER_E_LIMIT) {
        char why[STOKER_ERRMSG_CAP];
        memcpy(why, w->err.msg, sizeof why);
        rc = stoker__fail(&w->err, STOKER_E_CORRUPT,
                          "image over the size limit (STOKER_E_LIMIT): %s", why);
    }
    return rc;
}

int stoker__xform_setup(stoker_loader *l, const stoker_config *cfg)
{
    l->xp = stoker__calloc(1, sizeof *l->xp);
    if (!l->xp)
        return stoker__fail(&l->err, -ENOMEM, "out of memory for the image pipeline");
    stoker__err why = {0};
    const int rc = stoker__xform_params_from_config(l->xp, cfg, &why);
    if (rc < 0)
        return stoker__fail(&l->err, rc, "%s: %s", stoker__dataset_path(l->ds), why.msg);
    stoker__xform_params *p = l->xp;
    if (stoker__cfg_int(cfg, STOKER_OPT_GPU_NORMALIZE)) {
        /* The GPU stage normalises into the requested dtype and layout (loader_gpu.c): the
         * workers stop at uint8 [C, C, 3], what its kernel takes, and only that crosses
         * PCIe. Without a device, create fails there (GPU normalisation was asked for). */
        p->dtype = STOKER_DTYPE_UINT8;
        p->layout = STOKER_LAYOUT_NHWC;
    }
    l->process = process_jpeg;
    l->dtype = p->dtype;
    l->ndim = 3;
    const bool nchw = p->layout == STOKER_LAYOUT_NCHW;
    l->shape[0] = nchw ? 3 : p->size;
    l->shape[1] = p->size;
    l->shape[2] = nchw ? p->size : 3;
    l->rec_size = stoker__xform_sample_bytes(p);
    return 0;
}

int stoker__xform_worker_init(stoker_loader *l, stoker__worker *w)
{
    if (!l->xp)
        return 0;
    if (stoker__xform_scratch_create(&w->xs) < 0)
        return stoker__fail(&l->err, -ENOMEM, "out of memory for worker %u's image scratch",
                            w->index);
    return 0;
}

void stoker__xform_worker_fini(stoker__worker *w)
{
    stoker__xform_scratch_destroy(w->xs);
    w->xs = NULL;
}

void stoker__xform_free(stoker_loader *l)
{
    stoker__free(l->xp);
    l->xp = NULL;
}
