/* SPDX-License-Identifier: Apache-2.0 */
/* The loader's public face (loader.h): create wires the stages from the plan, next and
 * release move batches between them and the consumer, restarts (set_epoch, state restore)
 * pause them, reposition the order and let them go. */
#include "loader/loader.h"

#include "common/crc32c.h"
#include "cuda/nvtx.h"
#include "loader/memory.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The largest epoch: that of STOKER_OPT_EPOCH, and of set_epoch and a restored state. */
#define MAX_EPOCH (UINT64_C(1) << 40)

/* Consumer calls are one at a time: a second thread's is refused at once (no message: the
 * loader's message belongs to the call in progress), never queued behind the first's waits,
 * which a restart from another thread could leave waiting forever. */
static bool consumer_enter(stoker_loader *l)
{
    return !atomic_exchange_explicit(&l->busy, true, memory_order_acquire);
}

static int consumer_leave(stoker_loader *l, int rc)
{
    atomic_store_explicit(&l->busy, false, memory_order_release);
    return rc;
}

/* Publishes the order's options in force, for get_int on any thread. */
static void publish_order(stoker_loader *l)
{
    atomic_store(&l->order_seed, l->smp.seed);
    atomic_store(&l->order_flags, (l->smp.shuffle ? 1u : 0u) | (l->smp.drop_last ? 2u : 0u) |
                                      (l->smp.block ? 4u : 0u));
}

/* The GPU decode stage, when nvJPEG's hardware decoder opens on the device; else the CPU
 * decodes everything and the plan says why (stats' decoder_note): never a failure. */
static int open_gpu_decoder(stoker_loader *l)
{
    stoker__plan *p = &l->plan;
    char why[sizeof p->decoder_note];
    const int rc = stoker__gdec_create(&l->gdec, p, why, sizeof why, &l->err);
    if (rc == STOKER_E_UNSUPPORTED) {
        p->gpu_decode = false;
        snprintf(p->decoder_note, sizeof p->decoder_note, "%s", why);
        stoker__logf(&p->log, STOKER_LOG_INFO, "JPEG decoding on the CPU: %s", why);
        return 0;
    }
    if (rc == 0)
        stoker__logf(&p->log, STOKER_LOG_INFO, "JPEG decoding on the CPU and on device %d: %s",
                     p->device, stoker__gdec_describe(l->gdec));
    return rc;
}

/* The stages, in the order each needs the ones before it. */
static int wire(stoker_loader *l)
{
    const stoker__plan *p = &l->plan;
    const char *path = stoker__dataset_path(l->ds);
    STOKER_RETURN_IF(!stoker__sampler_init(&l->smp, p->records, p->batch, p->rank, p->world,
                                           p->shuffle, p->drop_last, p->seed),
                     &l->err, STOKER_E_INVALID, "invalid batch size / rank / world size");
    if (p->order == STOKER_ORDER_BLOCKS)
        stoker__sampler_set_blocks(&l->smp, p->block);
    publish_order(l);
    l->cons_epoch = p->epoch;
    int rc = 0;
    if (p->device >= 0 && (rc = stoker__h2d_create(&l->h2d, p, &l->err)) < 0)
        return rc;
    if (p->gpu_decode && (rc = open_gpu_decoder(l)) < 0)
        return rc;
    /* a data set with a schema and no image to transform keeps nothing in batch.data: its
     * records' fields go to the fields region */
    const uint64_t data_max = p->fields.split && !p->rec_size ? 0 : p->max_record;
    const stoker__ring_shape shape = {p->depth, p->batch, p->pieces, p->rec_size, data_max,
                                      p->dtype, p->ndim,  p->shape,  &p->fields};
    const stoker__slot_mem mem = l->h2d ? stoker__h2d_slot_mem(l->h2d) : (stoker__slot_mem){0};
    if ((rc = stoker__ring_create(&l->ring, &shape, l->h2d ? &mem : NULL, path, &l->err)) < 0)
        return rc;
    for (uint32_t i = 0; i < l->ring.nslots; i++)
        l->ring.slots[i].batch.loader = l;
    if (l->gdec && (rc = stoker__gdec_start(l->gdec, &l->ring, &l->err)) < 0)
        return rc;
    if (l->h2d && (rc = stoker__h2d_start(l->h2d, &l->ring, l->gdec, l, &l->err)) < 0)
        return rc;
    if ((rc = stoker__pool_create(&l->pool, p, l->ds, &l->ring, &l->smp, l->gdec, &l->err)) < 0)
        return rc;
    return stoker__pool_start(&l->pool, &l->err);
}

int stoker_loader_create(stoker_loader **out, const char *path, const stoker_config *cfg)
{
    if (!out)
        return STOKER_E_INVALID;
    stoker_loader *l = stoker__calloc(1, sizeof *l);
    *out = l;
    if (!l)
        return -ENOMEM;
    l->t_create = stoker__now();
    l->pid = getpid();
    stoker__window_init(l);
    l->plan.device = -1;
    STOKER_RETURN_IF(!path, &l->err, STOKER_E_INVALID, "no data set path");
    int rc = stoker_dataset_open(&l->ds, path, cfg);
    if (rc < 0)
        return stoker__fail(&l->err, rc, "%s",
                            l->ds ? stoker_dataset_errmsg(l->ds) : "out of memory");
    if ((rc = stoker__plan_make(&l->plan, cfg, l->ds, &l->err)) < 0 || (rc = wire(l)) < 0)
        return rc;
    l->running = true;
    stoker__logf(&l->plan.log, STOKER_LOG_INFO,
                 "loader over %s: %" PRIu64 " records, %" PRIu64
                 " batches per epoch, %u threads, depth %u, %s",
                 path, l->smp.n, l->smp.nbatches, l->plan.threads, l->plan.depth,
                 stoker_backend_name(l->plan.backend));
    return 0;
}

void stoker_loader_destroy(stoker_loader *l)
{
    if (!l || l->pid != getpid())
        return;                     /* a forked child: the threads to stop are the parent's */
    stoker__h2d_stop(l->h2d);       /* copies in flight end before the slots they read */
    stoker__pool_destroy(&l->pool); /* stop + join before anything they use goes */
    stoker__gdec_destroy(l->gdec);  /* after the GPU worker and the copies that read it */
    stoker__ring_destroy(&l->ring); /* pinned slots go back through the H2D stage */
    stoker__h2d_destroy(l->h2d);
    stoker_dataset_close(l->ds);
    if (l->has_win_mu)
        pthread_mutex_destroy(&l->win_mu);
    stoker__free(l);
}

const char *stoker_loader_errmsg(const stoker_loader *l)
{
    return l ? l->err.msg : "no loader";
}

int stoker_loader_get_int(const stoker_loader *l, stoker_option opt, int64_t *value)
{
    if (!l || !value)
        return STOKER_E_INVALID;
    if (!l->running)
        return STOKER_E_STATE;
    const unsigned flags = atomic_load(&l->order_flags);
    switch (opt) { /* the order in force: a restored state's own */
    case STOKER_OPT_SEED: *value = (int64_t)atomic_load(&l->order_seed); return 0;
    case STOKER_OPT_SHUFFLE: *value = (flags & 1u) != 0; return 0;
    case STOKER_OPT_DROP_LAST: *value = (flags & 2u) != 0; return 0;
    case STOKER_OPT_ORDER:
        *value = flags & 4u ? STOKER_ORDER_BLOCKS : STOKER_ORDER_RECORDS;
        return 0;
    default: return stoker__plan_get_int(&l->plan, opt, value);
    }
}

int stoker_loader_get_float(const stoker_loader *l, stoker_option opt, double *value)
{
    if (!l || !value)
        return STOKER_E_INVALID;
    return l->running ? stoker__plan_get_float(&l->plan, opt, value) : STOKER_E_STATE;
}

int stoker_loader_position(const stoker_loader *l, int64_t *epoch, int64_t *position)
{
    if (!l || !l->running)
        return STOKER_E_INVALID;
    if (epoch)
        *epoch = (int64_t)l->cons_epoch;
    if (position)
        *position = (int64_t)l->cons_pos;
    return 0;
}

/* ---- next and release ---- */

/* The CPU workers' busy seconds so far (their time on records) and the records they
 * decoded, for the split. */
static double workers_busy(void *ctx, uint64_t *decoded)
{
    stoker__pool_stats ps;
    stoker__pool_stats_get(ctx, &ps);
    *decoded = ps.decoded;
    return ps.read_s + ps.crc_s + ps.process_s;
}

/* Tells the GPU decode stage what the consumer saw at a delivery of batch b: its split
 * follows the consumer's waits and rate (split.h). */
static void tell_split(stoker_loader *l, const stoker_batch *b, double waited, uint64_t ready)
{
    if (l->gdec)
        stoker__gdec_consumed(l->gdec, (uint64_t)b->count, waited, (double)ready, workers_busy,
                              &l->pool);
}

/* A host batch from the ring. A failed batch is given back at once: it counts as consumed. */
static int next_host(stoker_loader *l, double until, stoker_batch **out)
{
    stoker__slot *s = NULL;
    double waited = 0;
    int ready = 0;
    const int rc = stoker__ring_take(&l->ring, l->cons_seq, NULL, true, until, NULL, NULL, &s,
                                     &waited, &ready);
    if (rc == STOKER_E_STATE)
        return stoker__fail(&l->err, STOKER_E_STATE,
                            "the batch handed out %u batches before this one is still held: "
                            "release it first (the %u slots form a ring)",
                            l->plan.depth, l->plan.depth);
    if (rc == 2) {
        l->wait_carry += stoker__now() - l->t_entry;
        return STOKER_AGAIN;
    }
    const double spent = stoker__now() - l->t_entry + l->wait_carry;
    waited += l->wait_carry;
    l->wait_carry = 0;
    l->cons_seq++;
    l->cons_pos++;
    const int failed = stoker__ring_failed(s);
    if (failed != 0) {
        pthread_mutex_lock(&s->mu);
        stoker__fail(&l->err, failed, "%s", s->err_msg);
        pthread_mutex_unlock(&s->mu);
        stoker__ring_give_back(&l->ring, s);
        return failed;
    }
    atomic_fetch_add(&l->outstanding, 1);
    stoker__count_delivery(l, &s->batch, spent, (uint64_t)ready);
    tell_split(l, &s->batch, waited, (uint64_t)ready);
    *out = &s->batch;
    return 0;
}

/* A device batch from the H2D stage. */
static int next_device(stoker_loader *l, double until, stoker_batch **out)
{
    double waited = 0;
    uint64_t queued = 0;
    const int rc = stoker__h2d_next(l->h2d, l->cons_seq, until, out, &waited, &queued, &l->err);
    if (rc == STOKER_E_STATE)
        return rc;
    if (rc == STOKER_AGAIN) {
        l->wait_carry += stoker__now() - l->t_entry;
        return rc;
    }
    const double spent = stoker__now() - l->t_entry + l->wait_carry;
    waited += l->wait_carry;
    l->wait_carry = 0;
    l->cons_seq++;
    l->cons_pos++;
    if (rc < 0)
        return rc;
    atomic_fetch_add(&l->outstanding, 1);
    const uint64_t ready = (uint64_t)atomic_load_explicit(&l->ring.ready, memory_order_relaxed);
    stoker__count_delivery(l, *out, spent, ready + queued);
    tell_split(l, *out, waited, ready + queued);
    return 0;
}

static int next(stoker_loader *l, double until, stoker_batch **out)
{
    STOKER_RETURN_IF(!l->running, &l->err, STOKER_E_STATE,
                     "the loader was not created successfully");
    l->restored = false;
    if (l->cons_pos >= l->smp.nbatches) {
        l->cons_pos = 0;
        l->cons_epoch++;
        return STOKER_END;
    }
    return l->h2d ? next_device(l, until, out) : next_host(l, until, out);
}

static int next_within(stoker_loader *l, stoker_batch **out, double until)
{
    if (!l || !out)
        return STOKER_E_INVALID;
    *out = NULL;
    if (!consumer_enter(l))
        return STOKER_E_STATE;
    stoker__nvtx_push(STOKER__NVTX_NEXT);
    l->t_entry = stoker__now();
    const int rc = next(l, until, out);
    stoker__nvtx_pop();
    return consumer_leave(l, rc);
}

int stoker_loader_next(stoker_loader *l, stoker_batch **out)
{
    return next_within(l, out, 0);
}

int stoker_loader_take(stoker_loader *l, stoker_batch **out, int64_t timeout_ms, stoker_take *t)
{
    if (!l || !out || !t || t->struct_size != sizeof *t)
        return STOKER_E_INVALID;
    const bool copies = t->labels || t->ids || t->offsets;
    if (copies && t->cap < (int64_t)l->smp.batch)
        return STOKER_E_INVALID;
    t->epoch = (int64_t)l->cons_epoch;
    t->position = (int64_t)l->cons_pos;
    t->num_fields = 0;
    const int rc = stoker_loader_next_wait(l, out, timeout_ms);
    if (rc != 0 || !*out)
        return rc;
    const stoker_batch *b = *out;
    t->view.struct_size = sizeof t->view;
    stoker_batch_get_view(b, &t->view);
    const size_t n = (size_t)b->count;
    if (t->labels && b->labels)
        memcpy(t->labels, b->labels, n * sizeof *t->labels);
    if (t->ids && b->ids)
        memcpy(t->ids, b->ids, n * sizeof *t->ids);
    if (t->offsets && t->view.offsets)
        memcpy(t->offsets, t->view.offsets, (n + 1) * sizeof *t->offsets);
    t->num_fields = stoker_batch_num_fields(b);
    for (int32_t i = 0; i < t->num_fields; i++) {
        t->fields[i].struct_size = sizeof t->fields[i];
        stoker_batch_field(b, i, NULL, &t->fields[i]);
    }
    return 0;
}

int stoker_loader_next_wait(stoker_loader *l, stoker_batch **out, int64_t timeout_ms)
{
    if (timeout_ms < 0)
        return next_within(l, out, 0);
    /* 0 still takes a batch that is ready: the deadline is checked only while waiting */
    const double until = stoker__now() + (double)timeout_ms / 1000.0;
    return next_within(l, out, until > 0 ? until : 1e-9);
}

int stoker_loader_add_wait(stoker_loader *l, double seconds)
{
    if (!l || !(seconds >= 0 && seconds < 1e9))
        return STOKER_E_INVALID;
    if (!consumer_enter(l))
        return STOKER_E_STATE;
    stoker__count_wait(l, seconds);
    return consumer_leave(l, 0);
}

int stoker_batch_release(stoker_batch *b)
{
    if (!b)
        return STOKER_E_INVALID;
    const int rc = b->dbuf ? stoker__h2d_release(b, false, NULL)
                           : stoker__ring_give_back(b->slot->ring, b->slot);
    if (rc != STOKER_E_STATE)
        atomic_fetch_sub(&b->loader->outstanding, 1);
    return rc;
}

static int detach(stoker_loader *l, stoker_batch *b, stoker_memory **out)
{
    stoker_memory *m = stoker__calloc(1, sizeof *m);
    STOKER_RETURN_IF(!m, &l->err, -ENOMEM, "out of memory detaching a batch");
    int rc;
    if (b->dbuf) {
        rc = stoker__h2d_detach(b, m, &l->err);
    } else {
        rc = stoker__ring_detach(&l->ring, b->slot, m);
        if (rc == STOKER_E_STATE)
            stoker__fail(&l->err, rc,
                         "stoker_batch_detach: the batch was released or detached "
                         "already");
        else if (rc < 0)
            stoker__fail(&l->err, rc,
                         "out of memory for a batch slot's fresh memory (%zu bytes) to detach "
                         "the batch",
                         b->slot->cap + b->slot->extra_cap);
    }
    if (rc < 0) {
        stoker__free(m);
        return rc;
    }
    *out = m;
    return 0;
}

int stoker_batch_detach(stoker_batch *b, stoker_memory **out)
{
    if (!b || !out)
        return STOKER_E_INVALID;
    *out = NULL;
    stoker_loader *l = b->loader;
    if (!consumer_enter(l))
        return STOKER_E_STATE;
    return consumer_leave(l, detach(l, b, out));
}

int stoker_batch_release_stream(stoker_batch *b, void *cuda_stream)
{
    if (!b)
        return STOKER_E_INVALID;
    if (!b->dbuf)
        return stoker_batch_release(b);
    const int rc = stoker__h2d_release(b, true, cuda_stream);
    if (rc != STOKER_E_STATE)
        atomic_fetch_sub(&b->loader->outstanding, 1);
    return rc;
}

int stoker_batch_wait_stream(const stoker_batch *b, void *cuda_stream)
{
    if (!b)
        return STOKER_E_INVALID;
    return b->dbuf ? stoker__h2d_wait_stream(b, cuda_stream, &b->loader->err) : 0;
}

void *stoker_batch_cuda_event(const stoker_batch *b)
{
    return b && b->dbuf ? stoker__h2d_event(b) : NULL;
}

/* ---- restarts ---- */

/* Stops the pipeline, repositions it at (epoch, pos) (with a new sampler unless smp is
 * NULL) and lets it run again. */
static void restart(stoker_loader *l, const stoker__sampler *smp, uint64_t epoch, uint64_t pos)
{
    if (l->h2d) /* no copy in flight nor slot-done callback while slots reset */
        stoker__h2d_quiesce(l->h2d);
    stoker__pool_pause(&l->pool);
    stoker__ring_reset(&l->ring);
    if (smp) {
        l->smp = *smp;
        publish_order(l);
    }
    l->cons_epoch = epoch;
    l->cons_pos = pos;
    l->cons_seq = 0;
    l->wait_carry = 0;
    l->restored = false;
    stoker__pool_resume(&l->pool, epoch, pos);
    if (l->h2d)
        stoker__h2d_resume(l->h2d);
}

static int set_epoch(stoker_loader *l, int64_t epoch)
{
    STOKER_RETURN_IF(epoch < 0 || (uint64_t)epoch > MAX_EPOCH, &l->err, STOKER_E_INVALID,
                     "epoch %lld outside 0 .. 2^40", (long long)epoch);
    STOKER_RETURN_IF(!l->running, &l->err, STOKER_E_STATE,
                     "the loader was not created successfully");
    if (l->restored && (uint64_t)epoch == l->cons_epoch) {
        l->restored = false; /* the restored position is where this epoch goes on */
        return 0;
    }
    restart(l, NULL, (uint64_t)epoch, 0);
    return 0;
}

int stoker_loader_set_epoch(stoker_loader *l, int64_t epoch)
{
    if (!l)
        return STOKER_E_INVALID;
    if (!consumer_enter(l))
        return STOKER_E_STATE;
    return consumer_leave(l, set_epoch(l, epoch));
}

int stoker_loader_num_batches(const stoker_loader *l, int64_t *n)
{
    if (!l || !n || !l->running)
        return STOKER_E_INVALID;
    *n = (int64_t)l->smp.nbatches;
    return 0;
}

int stoker_loader_num_records(const stoker_loader *l, int64_t *n)
{
    if (!l || !n || !l->running)
        return STOKER_E_INVALID;
    *n = (int64_t)l->smp.nrecords;
    return 0;
}

/* ---- state: 64 bytes, little-endian ----
 *   0 magic "STKLDST1"   8 u32 version (2)   12 u32 flags (1 shuffle, 2 drop_last,
 *                                                               4 block order)
 *  16 u64 seed          24 u64 epoch        32 u64 position (batches consumed)
 *  40 u32 rank          44 u32 world size   48 u32 batch size (at most 2^24)
 *  52 u32 block length K of the order (stoker__sampler_run: 0 unless shuffled blocks; low
 *     32 bits, the full length is checked through the CRC key below)
 *  56 u32 records (low 32 bits; the full count is checked through the CRC key below)
 *  60 u32 CRC32C of bytes 0..60, seeded with the full record count and block length, so a
 *     blob for another data set size or block length fails as a mismatch rather than
 *     passing on a truncated one.
 * Version 1 had a u64 batch size at 48 (so zero at 52) and the CRC seeded with the record
 * count alone: the same order when it is not a shuffled block order, which version 1 did not
 * pin to its block length and so is refused. */
#define STATE_MAGIC "STKLDST1"
#define STATE_VERSION 2u

static uint32_t state_crc(const uint8_t *p, uint32_t version, uint64_t records, uint64_t run)
{
    uint8_t key[16];
    stoker__put_u64(key, records);
    stoker__put_u64(key + 8, run);
    return stoker_crc32c(stoker_crc32c(0, key, version == 1 ? 8 : 16), p, 60);
}

/* The state of loader l standing at (epoch, pos) of its order. */
static int state_save_at(const stoker_loader *l, uint64_t epoch, uint64_t pos, void *buf,
                         size_t cap, size_t *size)
{
    if (!buf && cap)
        return STOKER_E_INVALID;
    if (size)
        *size = STOKER_STATE_SIZE;
    if (cap < STOKER_STATE_SIZE)
        return STOKER_E_LIMIT;
    uint8_t *p = buf;
    const uint64_t run = stoker__sampler_run(&l->smp);
    memset(p, 0, STOKER_STATE_SIZE);
    memcpy(p, STATE_MAGIC, 8);
    stoker__put_u32(p + 8, STATE_VERSION);
    stoker__put_u32(p + 12, (l->smp.shuffle ? 1u : 0u) | (l->smp.drop_last ? 2u : 0u) |
                                (l->smp.block ? 4u : 0u));
    stoker__put_u64(p + 16, l->smp.seed);
    stoker__put_u64(p + 24, epoch);
    stoker__put_u64(p + 32, pos);
    stoker__put_u32(p + 40, l->smp.rank);
    stoker__put_u32(p + 44, l->smp.world);
    stoker__put_u32(p + 48, (uint32_t)l->smp.batch);
    stoker__put_u32(p + 52, (uint32_t)run);
    stoker__put_u32(p + 56, (uint32_t)l->smp.n);
    stoker__put_u32(p + 60, state_crc(p, STATE_VERSION, l->smp.n, run));
    return 0;
}

int stoker_loader_state_save(const stoker_loader *l, void *buf, size_t cap, size_t *size)
{
    return l ? state_save_at(l, l->cons_epoch, l->cons_pos, buf, cap, size) : STOKER_E_INVALID;
}

/* A batch's epoch and position are the consumer's before the call that handed it out: each
 * call hands out the batch at cons_pos, and a failed one hands out nothing. */
int stoker_batch_state_save(const stoker_batch *b, void *buf, size_t cap, size_t *size)
{
    if (!b || !b->loader || b->epoch < 0 || b->position < 0)
        return STOKER_E_INVALID;
    return state_save_at(b->loader, (uint64_t)b->epoch, (uint64_t)b->position, buf, cap, size);
}

static int state_restore(stoker_loader *l, const void *buf, size_t size)
{
    const uint8_t *p = buf;
    STOKER_RETURN_IF(!p || size < STOKER_STATE_SIZE || memcmp(p, STATE_MAGIC, 8) != 0, &l->err,
                     STOKER_E_INVALID, "not a loader state (%zu bytes)", size);
    const uint32_t version = stoker__get_u32(p + 8);
    STOKER_RETURN_IF(version != 1 && version != STATE_VERSION, &l->err, STOKER_E_FORMAT,
                     "loader state version %u is not supported", version);
    STOKER_RETURN_IF(!l->running, &l->err, STOKER_E_STATE,
                     "the loader was not created successfully");
    const uint32_t flags = stoker__get_u32(p + 12);
    STOKER_RETURN_IF(version == 1 && (flags & 5u) == 5u, &l->err, STOKER_E_FORMAT,
                     "a loader state of version 1 does not hold the block length of its "
                     "shuffled block order, so it cannot be resumed exactly: start its epoch "
                     "again (set_epoch), or resume it with the release that saved it");
    STOKER_RETURN_IF(stoker__get_u32(p + 56) != (uint32_t)l->smp.n, &l->err, STOKER_E_STATE,
                     "the state is for a data set of another size");
    /* The order the state continues: its own flags and seed over this data set, whose
     * blocks must be those it was saved with. */
    stoker__sampler smp;
    stoker__sampler_init(&smp, l->smp.n, l->smp.batch, l->smp.rank, l->smp.world, flags & 1u,
                         (flags & 2u) != 0, stoker__get_u64(p + 16));
    if (flags & 4u)
        stoker__sampler_set_blocks(&smp, stoker__dataset_block_records(l->ds));
    const uint64_t run = stoker__sampler_run(&smp);
    const uint32_t saved_run = stoker__get_u32(p + 52);
    STOKER_RETURN_IF(version != 1 && saved_run != (uint32_t)run && (saved_run == 0 || run == 0),
                     &l->err, STOKER_E_CORRUPT,
                     "loader state block length %u disagrees with its flags 0x%x", saved_run,
                     flags);
    STOKER_RETURN_IF(version != 1 && saved_run != (uint32_t)run, &l->err, STOKER_E_STATE,
                     "the state was saved with blocks of %u records; this loader's order uses "
                     "blocks of %" PRIu64 " (block_size or source differs)",
                     saved_run, run);
    STOKER_RETURN_IF(stoker__get_u32(p + 60) != state_crc(p, version, l->smp.n, run), &l->err,
                     STOKER_E_CORRUPT,
                     "loader state checksum mismatch (corrupt, or saved for a data set of "
                     "another size or block length)");
    const uint64_t batch = version == 1 ? stoker__get_u64(p + 48) : stoker__get_u32(p + 48);
    STOKER_RETURN_IF(stoker__get_u32(p + 40) != l->smp.rank ||
                         stoker__get_u32(p + 44) != l->smp.world || batch != l->smp.batch,
                     &l->err, STOKER_E_STATE,
                     "the state is for rank %u of %u with batch size "
                     "%" PRIu64 "; this loader is rank %u of %u with batch size %" PRIu64,
                     stoker__get_u32(p + 40), stoker__get_u32(p + 44), batch, l->smp.rank,
                     l->smp.world, l->smp.batch);
    const uint64_t epoch = stoker__get_u64(p + 24), pos = stoker__get_u64(p + 32);
    /* No loader reaches an epoch beyond 2^40 (a new epoch a microsecond would take 35 years
     * to), so such a state is corrupt. */
    STOKER_RETURN_IF(epoch > MAX_EPOCH, &l->err, STOKER_E_CORRUPT,
                     "loader state epoch %" PRIu64 " is out of range", epoch);
    STOKER_RETURN_IF(pos > smp.nbatches, &l->err, STOKER_E_CORRUPT,
                     "loader state position %" PRIu64 " is beyond the epoch's %" PRIu64 " batches",
                     pos, smp.nbatches);
    restart(l, &smp, epoch, pos);
    l->restored = true;
    return 0;
}

int stoker_loader_state_restore(stoker_loader *l, const void *buf, size_t size)
{
    if (!l)
        return STOKER_E_INVALID;
    if (!consumer_enter(l))
        return STOKER_E_STATE;
    return consumer_leave(l, state_restore(l, buf, size));
}
