/* SPDX-License-Identifier: Apache-2.0 */
/* The JPEG image pipeline as the workers' process step (process.h). */
#include "loader/process.h"

#include <string.h>

struct stoker__process {
    const stoker__plan *plan;
    stoker__xform_scratch *xs;
    stoker__wstats *stats;
};

int stoker__process_create(stoker__process **out, const stoker__plan *plan, stoker__wstats *stats)
{
    stoker__process *pr = stoker__calloc(1, sizeof *pr);
    *out = pr;
    if (!pr)
        return -ENOMEM;
    pr->plan = plan;
    pr->stats = stats;
    return stoker__xform_scratch_create(&pr->xs) < 0 ? -ENOMEM : 0;
}

void stoker__process_destroy(stoker__process *pr)
{
    if (!pr)
        return;
    stoker__xform_scratch_destroy(pr->xs);
    stoker__free(pr);
}

/* Single writer (the worker): a relaxed store, read by stats with relaxed loads. */
static inline void counter_set(atomic_uint_fast64_t *c, uint64_t v)
{
    atomic_store_explicit(c, v, memory_order_relaxed);
}

/* Publishes the scratch's stage times, which only the worker may read, as its counters. */
static void publish_stats(const stoker__process *pr)
{
    const stoker__xform_stats *st = stoker__xform_scratch_stats(pr->xs);
    counter_set(&pr->stats->decode_ns, st->decode_ns);
    counter_set(&pr->stats->resize_ns, st->resize_ns);
    counter_set(&pr->stats->normalize_ns, st->normalize_ns);
    counter_set(&pr->stats->reduced, st->reduced);
}

int stoker__process_record(stoker__process *pr, uint64_t seed, int64_t epoch, int64_t id,
                           const uint8_t *src, uint64_t n, bool whole, uint8_t *dst, uint64_t cap,
                           stoker__err *err)
{
    const stoker__plan *p = pr->plan;
    if (cap < p->rec_size)
        return stoker__fail(err, STOKER_E_LIMIT,
                            "output slot of %" PRIu64 " bytes is smaller than a sample (%" PRIu64
                            ")",
                            cap, p->rec_size);
    int rc =
        whole
            ? stoker__xform_jpeg_whole(pr->xs, &p->xform, seed, epoch, id, src, (size_t)n, dst, err)
            : stoker__xform_jpeg(pr->xs, &p->xform, seed, epoch, id, src, (size_t)n, dst, err);
    publish_stats(pr);
    if (rc == STOKER_E_LIMIT) {
        char why[STOKER_ERRMSG_CAP];
        memcpy(why, err->msg, sizeof why);
        rc = stoker__fail(err, STOKER_E_CORRUPT, "image over the size limit (STOKER_E_LIMIT): %s",
                          why);
    }
    return rc;
}
