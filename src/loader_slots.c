/* Batch slots: a ring of `depth` batches allocated once at create. Slot memory comes from
 * stoker__slot_alloc alone, so a CUDA build can swap in pinned memory in one place. */
#include "loader.h"
#ifdef STOKER_HAVE_CUDA
#include "cuda/pinned.h"
#endif

#include <string.h>

#define PAGE 4096u

/* Touches every page now, so that first-touch page faults (zeroing) happen at create and
 * not while the first batches are timed: steady state starts with the first batch.
 * With a device, slots are pinned (cudaHostAlloc) so that the H2D copy is a true DMA that
 * overlaps compute; when pinning fails (ulimit, no memory) pageable memory still works, only
 * slower, so that is a warning and not a failure. */
void *stoker__slot_alloc(stoker_loader *l, size_t size, bool *pinned)
{
    const size_t n = stoker__align_up(size ? size : 1, PAGE);
    *pinned = false;
#ifdef STOKER_HAVE_CUDA
    if (l->device >= 0) {
        char msg[160];
        void *h = stoker__cuda_host_alloc(l->device, n, msg, sizeof msg);
        if (h) {
            *pinned = true;
            atomic_fetch_add(&l->pinned_bytes, (int_fast64_t)n);
            memset(h, 0, n);
            return h;
        }
        stoker__logf(&l->log, STOKER_LOG_WARN,
                     "cannot pin %zu bytes of batch slot (%s); using pageable memory", n, msg);
    }
#else
    (void)l;
#endif
    uint8_t *p = stoker__aligned_alloc(PAGE, n);
    if (p)
        memset(p, 0, n);
    return p;
}

void stoker__slot_free(stoker_loader *l, void *p, size_t size, bool pinned)
{
#ifdef STOKER_HAVE_CUDA
    if (pinned && p) {
        stoker__cuda_host_free(p);
        atomic_fetch_sub(&l->pinned_bytes, (int_fast64_t)stoker__align_up(size ? size : 1, PAGE));
        return;
    }
#else
    (void)l;
    (void)size;
    (void)pinned;
#endif
    stoker__free(p);
}

void stoker__slot_wake(stoker__slot *s)
{
    pthread_mutex_lock(&s->mu);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
}

void stoker__slots_wake(stoker_loader *l)
{
    for (uint32_t i = 0; i < l->depth; i++)
        stoker__slot_wake(&l->slots[i]);
}

int stoker__slot_reserve(stoker__slot *s, size_t size)
{
    if (size <= s->cap && s->batch.data)
        return 0;
    stoker_loader *l = s->batch.loader;
    bool pinned = false;
    uint8_t *p = stoker__slot_alloc(l, size, &pinned);
    if (!p)
        return -ENOMEM;
    stoker__slot_free(l, s->batch.data, s->cap, s->pinned);
    s->batch.data = p;
    s->cap = size;
    s->pinned = pinned;
    return 0;
}

/* First capacity of a slot: a full batch of fixed-size records; for records that vary, a
 * full batch of the largest record when that is at most 64 MiB (or a single largest record
 * when that alone is more), otherwise 64 MiB; a batch that needs more grows its slot when it
 * is prepared (rare; reallocation happens only then, never per record). */
static size_t first_capacity(const stoker_loader *l)
{
    uint64_t full;
    if (l->rec_size)
        return stoker__mul_ovf(l->rec_size, l->smp.batch, &full) ? SIZE_MAX : (size_t)full;
    if (stoker__mul_ovf(l->max_record, l->smp.batch, &full) || full > (UINT64_C(64) << 20))
        full = l->max_record > (UINT64_C(64) << 20) ? l->max_record : UINT64_C(64) << 20;
    return (size_t)full;
}

static int slot_init(stoker_loader *l, stoker__slot *s, uint64_t i, size_t cap)
{
    const uint64_t b = l->smp.batch;
    s->seq = i;
    s->state = SLOT_FREE;
    atomic_init(&s->pending, 0);
    s->batch.loader = l;
    s->batch.slot = s;
    s->batch.dtype = l->dtype;
    s->batch.ndim = l->rec_size ? 1 + l->ndim : 1;
    for (int32_t d = 0; l->rec_size && d < l->ndim; d++)
        s->batch.shape[1 + d] = l->shape[d];
    s->batch.ids = stoker__calloc(b, sizeof(int64_t));
    s->batch.labels = stoker__calloc(b, sizeof(int64_t));
    s->batch.offsets = stoker__calloc(b + 1, sizeof(int64_t));
    s->locs = stoker__calloc(b, sizeof *s->locs);
    s->bad = stoker__calloc(b, 1);
    s->piece_ok = stoker__calloc(l->ppb, sizeof *s->piece_ok);
    if (!s->batch.ids || !s->batch.labels || !s->batch.offsets || !s->locs || !s->bad ||
        !s->piece_ok)
        return -ENOMEM;
    if (cap == SIZE_MAX || stoker__slot_reserve(s, cap) < 0)
        return -ENOMEM;
    return 0;
}

int stoker__slots_create(stoker_loader *l)
{
    l->slots = stoker__calloc(l->depth, sizeof *l->slots);
    if (!l->slots)
        return stoker__fail(&l->err, -ENOMEM, "%s: out of memory for %u batch slots",
                            stoker__dataset_path(l->ds), l->depth);
    const size_t cap = first_capacity(l);
    for (uint32_t i = 0; i < l->depth; i++) {
        stoker__slot *s = &l->slots[i];
        /* Mutexes first, so that destroy can always tear down every slot. */
        if (pthread_mutex_init(&s->mu, NULL) != 0)
            return stoker__fail(&l->err, -ENOMEM, "cannot create a slot lock");
        if (pthread_cond_init(&s->cond, NULL) != 0) {
            pthread_mutex_destroy(&s->mu);
            return stoker__fail(&l->err, -ENOMEM, "cannot create a slot condition");
        }
        l->nslots = i + 1;
        const int rc = slot_init(l, s, i, cap);
        if (rc < 0)
            return stoker__fail(&l->err, rc, "%s: out of memory for batch slot %u (%zu bytes)",
                                stoker__dataset_path(l->ds), i, cap);
    }
    return 0;
}

void stoker__slots_destroy(stoker_loader *l)
{
    if (!l->slots)
        return;
    /* Only the slots whose locks were made (all of them unless create failed midway). */
    for (uint32_t i = 0; i < l->nslots; i++) {
        stoker__slot *s = &l->slots[i];
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cond);
        stoker__free(s->batch.ids);
        stoker__free(s->batch.labels);
        stoker__free(s->batch.offsets);
        stoker__free(s->locs);
        stoker__free(s->bad);
        stoker__free((void *)s->piece_ok);
        stoker__slot_free(l, s->batch.data, s->cap, s->pinned);
    }
    stoker__free(l->slots);
    l->slots = NULL;
}
