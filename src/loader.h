/* The loader's internal layout, shared by loader.c (public API, control), loader_worker.c
 * (the worker stage), loader_slots.c (slot memory) and loader_stats.c (views, stats).
 *
 * Pipeline: batches are numbered by a sequence number `seq` counted from the last restart
 * (create, set_epoch, state_restore); seq maps to (epoch, position) through base_epoch,
 * base_pos and the batches per epoch. Batch seq lives in slot seq % depth. Each batch is cut
 * into pieces of STOKER__PIECE records; workers draw tickets (seq * ppb + piece) from one
 * atomic counter, so they walk the sampler's future order in step, and the only shared
 * write of the hot path is that fetch_add.
 *
 * Slot life (state and seq under the slot's mutex):
 *   FREE(seq) --first worker of seq prepares: ids, locations, layout--> PREPARED
 *   PREPARED --last piece done (pending hits 0)--> READY --next--> OUT
 *   OUT --stoker_batch_release--> FREE(seq + depth)
 * With a device (loader_gpu.c), the copy thread copies a PREPARED slot's finished pieces
 * and then the READY slot to a device buffer, and the slot goes OUT --copy done (host
 * function)--> FREE(seq + depth); the consumer holds device batches (own ring, own states),
 * never host slots.
 * Workers of batch seq wait until the slot is FREE or PREPARED for seq: that is the
 * back-pressure (batch seq is filled only after batch seq - depth was released).
 *
 * Lock order: ctl_mu before any slot mu; never two slot mutexes at once. Waits are all
 * bounded (timed, re-checking stop and pause) so destroy never hangs. */
#ifndef STOKER_LOADER_H
#define STOKER_LOADER_H

#include "common/common.h"
#include "format/dataset.h"
#include "io/reader.h"
#include "sampler.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>

#define STOKER__PIECE 32u         /* records per work piece */
#define STOKER__WAIT_NS 20000000L /* bounded waits re-check stop/pause this often */
#define STOKER__REPLACE_TRIES 16u /* SKIP policy: replacements tried per corrupt record */

enum { SLOT_FREE = 0, SLOT_PREPARED, SLOT_READY, SLOT_OUT };

/* A record's marks in its slot (stoker__slot.bad), for the SKIP policy. */
enum {
    REC_BAD = 1,     /* failed its latest check: to be replaced */
    REC_REPLACED = 2 /* its position holds a replacement (counted as skipped on delivery) */
};

typedef struct stoker__slot stoker__slot;

struct stoker_batch {
    stoker_loader *loader;
    stoker__slot *slot;
    int64_t count, epoch, position;
    int64_t replaced; /* positions holding a replacement (SKIP), set before READY */
    int64_t *ids, *labels;
    int64_t *offsets; /* count + 1 byte offsets into data (every mode; public only when
                         records vary in size) */
    uint8_t *data;    /* slot memory (stoker__slot_alloc) */
    uint64_t nbytes;
    int32_t dtype, ndim;
    int64_t shape[STOKER_MAX_DIMS + 1];
    struct stoker__dbuf *dbuf; /* a device batch's buffer (loader_gpu.c); NULL: host batch */
};

struct stoker__slot {
    pthread_mutex_t mu;
    pthread_cond_t cond; /* workers wait for FREE/PREPARED, the consumer for READY */
    uint64_t seq;        /* under mu */
    int state;           /* under mu */
    /* Pieces of the batch not yet done. The last worker to decrement it (acq_rel) sees
     * every other piece's writes and publishes READY under mu. */
    atomic_uint pending;
    stoker_batch batch;     /* written in prepare (under mu) and by pieces (disjoint) */
    stoker__recloc *locs;   /* per record */
    uint8_t *bad;           /* per record: REC_* marks (SKIP policy) */
    atomic_uchar *piece_ok; /* per piece: its records are in place (set with release) */
    bool repaired;          /* SKIP replaced records after their pieces were done: written
                               by the last worker before READY is published */
    size_t cap;             /* bytes of batch.data */
    bool pinned;            /* batch.data came from cudaHostAlloc */
    int err_code;           /* first failure of this batch, under mu */
    char err_msg[STOKER_ERRMSG_CAP];
};

/* Per-worker counters: one writer (the worker), read by stats with relaxed loads; each
 * worker is its own cache line so counting never shares one. */
typedef struct stoker__wstats {
    atomic_uint_fast64_t records, bytes, inflight_sum, inflight_n;
    /* nanoseconds per stage: in the reader (submit + reap), CRC, the process step, and
     * the image pipeline's decode / resize / normalise (copied from the worker's scratch) */
    atomic_uint_fast64_t read_ns, crc_ns, process_ns, decode_ns, resize_ns, normalize_ns;
    atomic_uint_fast64_t reduced; /* images decoded at a DCT reduction */
} stoker__wstats;

typedef struct stoker__worker {
    alignas(64) stoker_loader *loader;
    uint32_t index;
    pthread_t thread;
    bool started;
    stoker__reader *reader;
    uint8_t *staging; /* aligned; direct I/O and the process step read here */
    size_t staging_cap;
    stoker__read_req *reqs; /* reader depth entries */
    stoker__read_done *done;
    uint32_t *req_first, *req_last;   /* per request: records [first, last) it covers */
    stoker__err err;                  /* messages of this worker's failures */
    struct stoker__xform_scratch *xs; /* image pipeline scratch (JPEG transforms), or NULL */
    int64_t epoch;                    /* of the batch being read: the process step's randomness */
    /* Records of the round whose chunks the round reads (dataset.h's planned fetches):
     * assembled once its reads are done. round numbers the worker's rounds. */
    uint64_t round;
    uint32_t nfetch;
    uint32_t fetch_j[STOKER__PIECE];
    stoker__wstats stats;
} stoker__worker;

/* The per-record process step: turns a record's stored bytes (src, n) into the finished
 * sample at dst. NULL when records are read straight into their place (raw records,
 * transform NONE, buffered reads). The JPEG path plugs decode + crop + normalise in here. */
typedef int (*stoker__process_fn)(stoker__worker *w, int64_t id, const uint8_t *src, uint64_t n,
                                  uint8_t *dst, uint64_t dst_cap);

struct stoker_loader {
    stoker__err err;
    stoker__log log;
    stoker_dataset *ds;

    /* order */
    stoker__sampler smp;
    int32_t local_rank;

    /* machinery (fixed after create) */
    uint32_t nthreads, depth, read_ahead, ppb;
    int32_t backend; /* the active back-end */
    int32_t simd;
    bool direct;
    int32_t on_corrupt;
    stoker__process_fn process;      /* NULL: read into place */
    struct stoker__xform_params *xp; /* image pipeline parameters (JPEG transforms), or NULL */
    bool staged;                     /* reads go to worker staging, then process/copy */
    uint64_t round_bytes;            /* most bytes one round of reads covers (see loader.c) */

    /* data set facts */
    int32_t kind, dtype, ndim;
    int64_t shape[STOKER_MAX_DIMS];
    uint64_t rec_size; /* fixed record size, 0 when records vary */
    uint64_t max_record;

    stoker__slot *slots;
    uint32_t nslots; /* slots whose locks exist (destroy tears down these) */
    stoker__worker *workers;
    uint32_t nworkers; /* workers allocated (destroy frees these) */

    /* control: pause/park for restarts, stop for destroy */
    pthread_mutex_t ctl_mu;
    pthread_cond_t ctl_cond;
    atomic_bool stop;
    atomic_bool paused;
    uint32_t parked; /* under ctl_mu */
    atomic_uint_fast64_t ticket;
    /* Written only while every worker is parked (under ctl_mu) or before they start. */
    uint64_t base_epoch, base_pos;

    /* consumer side (the consumer thread) */
    uint64_t cons_seq, cons_epoch, cons_pos;
    atomic_int outstanding;
    atomic_int ready; /* slots READY, for occupancy */
    bool has_locks, threads_started;

    /* consumer counters (relaxed atomics so that stats may be read from any thread) */
    atomic_uint_fast64_t c_batches, c_records, c_bytes, c_skipped, c_next_calls, c_ready_sum;
    _Atomic double c_wait;
    double t_create;

    /* GPU stage (loader_gpu.c): fixed after create. device -1: host batches. */
    int32_t device;
    struct stoker__gpu *gpu; /* NULL without a device */
    bool stream_pieces;      /* the copy thread copies each finished piece before the batch is
                                READY: workers wake it per piece */
    atomic_int_fast64_t pinned_bytes; /* slot memory that is page-locked */
};

/* loader_slots.c: slot memory, page-aligned; the one place to make it pinned (when the
 * loader drives a device: *pinned tells which kind was given, for stoker__slot_free). */
void *stoker__slot_alloc(stoker_loader *l, size_t size, bool *pinned);
void stoker__slot_free(stoker_loader *l, void *p, size_t size, bool pinned);
int stoker__slots_create(stoker_loader *l);
void stoker__slots_destroy(stoker_loader *l);
/* Broadcasts the slot's condition under its mutex, so that a thread about to wait on it
 * sees what was set before the call (a pause, a stop, a finished piece) and never sleeps
 * through it; stoker__slots_wake does so for every slot. */
void stoker__slot_wake(stoker__slot *s);
void stoker__slots_wake(stoker_loader *l);
/* Makes the slot hold at least `size` bytes (contents are not kept). */
int stoker__slot_reserve(stoker__slot *s, size_t size);

/* loader_worker.c */
void *stoker__worker_main(void *arg);
int stoker__workers_create(stoker_loader *l);
/* Starts the worker threads (after everything else is set up). */
int stoker__workers_start(stoker_loader *l);
/* Stops and joins every worker and frees them. */
void stoker__workers_destroy(stoker_loader *l);
/* (epoch, position) of sequence number seq. */
void stoker__seq_position(const stoker_loader *l, uint64_t seq, uint64_t *epoch, uint64_t *pos);

/* loader_stats.c: counts batch b handed out by next after `waited` seconds, with `ready`
 * batches finished and not yet taken at that moment (occupancy). Consumer thread. */
void stoker__count_delivery(stoker_loader *l, const stoker_batch *b, double waited, uint64_t ready);

/* loader_xform.c: the JPEG image pipeline as the process step */
/* For a JPEG data set with a transform: parameters from cfg, process step, output layout. */
int stoker__xform_setup(stoker_loader *l, const stoker_config *cfg);
/* The worker's scratch (when the loader has an image pipeline); freed with the worker. */
int stoker__xform_worker_init(stoker_loader *l, stoker__worker *w);
void stoker__xform_worker_fini(stoker__worker *w);
void stoker__xform_free(stoker_loader *l);

/* loader.c */
void stoker__deadline(struct timespec *ts);

/* loader_gpu.c: the H2D stage; each is a no-op (or host path) without a device. */
/* Picks the device from STOKER_OPT_DEVICE / LOCAL_RANK (before the slots are made). */
int stoker__gpu_configure(stoker_loader *l, const stoker_config *cfg);
/* Stream, events, device buffers (after the slots). */
int stoker__gpu_create(stoker_loader *l);
/* Waits for the copy stream, then frees the stage (first thing in destroy). */
void stoker__gpu_destroy(stoker_loader *l);
/* Settles every copy in flight and drops prefetched batches (restarts; consumer thread). */
void stoker__gpu_quiesce(stoker_loader *l);
/* After a restart has reset the slots: the copy thread goes on from batch 0. */
void stoker__gpu_resume(stoker_loader *l);
/* stoker_loader_next with a device. */
int stoker__gpu_next(stoker_loader *l, stoker_batch **out);
/* stoker_batch_release of a device batch; with `record`, release_stream on `stream`. */
int stoker__gpu_release(stoker_batch *b, bool record, void *stream);

#endif
