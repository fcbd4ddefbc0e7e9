/* SPDX-License-Identifier: Apache-2.0 */
/* The ring: `depth` batch slots and the back-pressure between the stages, which meet only
 * through these calls. Batches are numbered by a sequence number `seq` counted from the
 * last restart; batch seq lives in slot (seq + first) % depth, where `first` is the slot
 * after the one taken last before the restart: a batch still held then is needed last.
 *
 * Slot life (state and seq under the slot's mutex):
 *
 *   FREE(seq) --claim (first worker prepares ids, locations, layout)--> PREPARED
 *   PREPARED --the last piece is done: publish--> READY
 *   READY --take (the consumer, or the copy stage)--> OUT
 *   OUT --give_back--> FREE(seq + depth)
 *
 * A worker of batch seq waits in claim until the slot is FREE or PREPARED for seq: batch
 * seq is filled only after batch seq - depth was given back. That is the back-pressure.
 * While a batch is PREPARED its finished pieces are flagged (piece_ok, with release), so a
 * stage that copies them may do so before the batch is whole (take's `progress`).
 *
 * Lock order: a slot's mutex is a leaf (never two at once, never with another lock held
 * except the pool's control mutex before it). Every wait is bounded (it re-checks its
 * `halt` flag every STOKER__WAIT_NS), so stopping never hangs. */
#ifndef STOKER_LOADER_RING_H
#define STOKER_LOADER_RING_H

#include "source/dataset.h"
#include "loader/batch.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>

enum { SLOT_FREE = 0, SLOT_PREPARED, SLOT_READY, SLOT_OUT };

/* A record's marks in its slot (stoker__slot.marks), for the SKIP policy. */
enum {
    REC_BAD = 1,     /* failed its latest check: to be replaced */
    REC_REPLACED = 2 /* its position holds a replacement (counted as skipped on delivery) */
};

typedef struct stoker__ring stoker__ring;

typedef struct stoker__slot {
    stoker__ring *ring; /* the owner (give_back from a callback that has only the slot) */
    pthread_mutex_t mu;
    pthread_cond_t cond; /* workers wait for FREE/PREPARED, takers for READY */
    uint64_t seq;        /* under mu */
    int state;           /* under mu */
    /* Pieces of the batch not yet done. The last worker to decrement it (acq_rel) sees
     * every other piece's writes and publishes READY under mu. */
    atomic_uint pending;
    stoker_batch batch;     /* written in prepare (under mu) and by pieces (disjoint) */
    stoker__recloc *locs;   /* per record */
    uint8_t *marks;         /* per record: REC_* (SKIP policy) */
    atomic_uchar *piece_ok; /* per piece: its records are in place (set with release) */
    bool repaired;          /* SKIP replaced records after their pieces were done: written
                               by the last worker before READY is published */
    size_t cap;             /* bytes of batch.data */
    bool pinned;            /* batch.data came from the pinned allocator */
    size_t extra_cap;       /* bytes of batch.extra, the fields region (fields.h) */
    bool extra_pinned;
    /* stoker_batch_detach gave batch.data and batch.extra away: the slot's memory from
     * give_back on is fresh_data and fresh_extra (same capacities). Set while OUT, by the
     * consumer, under mu; give_back puts them in place. */
    bool detached;
    uint8_t *fresh_data, *fresh_extra;
    bool fresh_pinned, fresh_extra_pinned;
    uint64_t *rows;    /* RAGGED fields: rows of field i's sample j at i * batch + j */
    uint64_t *place;   /* RAGGED fields: the first row of field i's sample j in its values,
                          at i * (batch + 1) + j; entry count: the area's rows (fields.h) */
    int err_code;      /* first failure of this batch, under mu */
    atomic_int failed; /* err_code != 0, read without mu: a worker, or a source waiting
                          for the network, gives up on a batch that already failed */
    char err_msg[STOKER_ERRMSG_CAP];
} stoker__slot;

/* Where slot memory comes from: page-aligned host memory by default; the H2D stage gives
 * pinned memory (*pinned tells which kind alloc returned, for free). Memory that alloc
 * returns is also freeable without ctx (a detached batch's, memory.h): with stoker__free,
 * or with stoker__cuda_host_free where *pinned; `disown` (may be NULL) tells ctx that such
 * memory left the ring (detach) and is no longer its to count. */
typedef struct stoker__slot_mem {
    void *(*alloc)(void *ctx, size_t size, bool *pinned);
    void (*free)(void *ctx, void *p, size_t size, bool pinned);
    void (*disown)(void *ctx, size_t size, bool pinned);
    void *ctx;
} stoker__slot_mem;

/* What the ring's batches hold (from the plan). */
typedef struct stoker__ring_shape {
    uint32_t depth;
    uint64_t batch;      /* records per batch at most */
    uint32_t pieces;     /* pieces per batch */
    uint64_t rec_size;   /* bytes per record; 0: records vary */
    uint64_t max_record; /* the largest stored record (records that vary) */
    int32_t dtype, ndim; /* of one record */
    const int64_t *shape;
    const struct stoker__pfields *fields; /* the fields region's layout (loader/fields.h) */
} stoker__ring_shape;

struct stoker__ring {
    stoker__slot *slots;
    uint32_t depth;
    uint32_t nslots; /* slots whose locks exist (destroy tears down these) */
    uint32_t pieces;
    stoker__slot_mem mem;
    bool watch_pieces; /* a taker copies finished pieces early: wake it per piece */
    atomic_int ready;  /* slots READY and not yet taken, for occupancy */
    uint32_t first;    /* slot of batch 0 since the last reset (written only by reset) */
    atomic_uint taken; /* slot taken last (by the taker, read by reset) */
};

/* Allocates every slot (memory for a full batch of fixed-size records, or of the largest
 * record up to 64 MiB; a batch that needs more grows its slot when prepared). mem NULL:
 * plain memory. The message names `path`. */
int stoker__ring_create(stoker__ring *r, const stoker__ring_shape *sh, const stoker__slot_mem *mem,
                        const char *path, stoker__err *err);
void stoker__ring_destroy(stoker__ring *r);

static inline stoker__slot *stoker__ring_slot(const stoker__ring *r, uint64_t seq)
{
    return &r->slots[(seq + r->first) % r->depth];
}

/* ---- workers ---- */

/* Waits until batch seq's slot can take it, calling prepare(ctx, slot, seq) (under the
 * slot's mutex: it may set the slot's err_code and err_msg directly) if this worker is
 * first. Returns 0 to go on, 1 when the batch already
 * failed (nothing to read), -1 when `halt` was set. */
int stoker__ring_claim(stoker__ring *r, uint64_t seq, const atomic_bool *halt,
                       void (*prepare)(void *ctx, stoker__slot *s, uint64_t seq), void *ctx);
/* Records the batch's first failure. */
void stoker__ring_fail(stoker__slot *s, const stoker__err *e);
/* The batch's failure code (0: none yet). */
int stoker__ring_failed(stoker__slot *s);
/* Whether the batch failed, without the mutex: a flag that turns true once and stays so
 * until the slot takes another batch (ring_fail stores it with release). */
static inline bool stoker__ring_failing(const stoker__slot *s)
{
    return atomic_load_explicit(&s->failed, memory_order_acquire) != 0;
}
/* Makes the slot hold at least `size` bytes (contents are not kept). Only while the caller
 * owns the slot's contents (prepare, or the last piece). */
int stoker__ring_reserve(stoker__ring *r, stoker__slot *s, size_t size);

/* Makes s->batch.extra hold at least `size` bytes, keeping its fixed part (fields.h): the
 * labels prepare wrote. Only while the caller owns the slot's contents, as above; 0 or
 * -ENOMEM (the slot unchanged). */
int stoker__ring_reserve_extra(stoker__ring *r, stoker__slot *s, size_t size);
/* A piece is in place. Returns true for the batch's last piece, whose worker then owns the
 * slot's contents until it publishes. */
bool stoker__ring_piece_done(stoker__ring *r, stoker__slot *s, uint32_t piece);
/* The batch is whole (or failed): READY. */
void stoker__ring_publish(stoker__ring *r, stoker__slot *s);

/* ---- takers: the consumer (host batches) or the copy stage ---- */

/* Waits until batch seq is READY and takes it (OUT); the taker checks
 * stoker__ring_failed and gives the slot back when done. While the batch is still being
 * made, progress(ctx, slot) (when not NULL) is called without the mutex, to copy finished
 * pieces (piece_ok); it returns true when it moved on. Returns 0 with *out, 1 when `halt`
 * was set, 2 (nothing taken) when `until` (stoker__now()'s clock; 0: no limit) passed first,
 * STOKER_E_STATE (nothing taken) when `held_fails` and the slot still holds batch
 * seq - depth, taken and not given back. *waited: seconds spent waiting for the batch (0
 * when it was READY at the call, the slot lock's cost aside); *found: batches
 * READY and not taken at that moment, this one included (occupancy). Either may be NULL. */
int stoker__ring_take(stoker__ring *r, uint64_t seq, const atomic_bool *halt, bool held_fails,
                      double until, bool (*progress)(void *ctx, stoker__slot *s), void *ctx,
                      stoker__slot **out, double *waited, int *found);
/* Gives a taken slot back for batch seq + depth, with the fresh memory of a detach in place.
 * STOKER_E_STATE when it was not taken. Any thread (CUDA's callback thread too: no CUDA
 * call, no lock but the slot's). */
int stoker__ring_give_back(stoker__ring *r, stoker__slot *s);

/* The consumer's host batch in slot s (taken, not given back) gives its data and fields
 * region to *m (stoker_batch_detach): the slot gets fresh memory of the same capacities,
 * put in place at give_back, so that the batch's pointers stay as they are until then.
 * 0; STOKER_E_STATE (not taken, or detached already); -ENOMEM (nothing changed). */
int stoker__ring_detach(stoker__ring *r, stoker__slot *s, struct stoker_memory *m);

/* ---- control ---- */

/* Wakes every thread waiting on any slot (after setting a halt flag). */
void stoker__ring_wake_all(stoker__ring *r);
/* Every slot FREE for batches 0 .. depth - 1 from the slot after the one taken last (a
 * restart; no worker or taker touches the ring), except a slot still OUT: it stays so until
 * given back, then FREE for its batch. */
void stoker__ring_reset(stoker__ring *r);

#endif
