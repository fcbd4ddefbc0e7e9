/* SPDX-License-Identifier: Apache-2.0 */
/* The pool: the worker threads. Each batch is cut into pieces of STOKER__PIECE records;
 * workers draw tickets (seq * pieces + piece) from one atomic counter, so they walk the
 * sampler's future order in step, and the only shared write of the hot path is that
 * fetch_add. A worker claims its batch's slot in the ring, reads its piece's records
 * through its own reader, checks each (CRC32C, the process step: the JPEG pipeline), and
 * flags the piece done; the last piece's worker replaces corrupt records (SKIP) and
 * publishes the batch. The pool knows the ring and the data set, nothing downstream; with
 * GPU decoding, the GPU decode stage through gpu_stage.h, whose thread (the GPU worker) uses
 * one more worker's reader and scratch to finish and retry batches.
 *
 * Pause protocol (restarts): the controlling thread calls pause, which sets `halt`, wakes
 * every waiter and waits until all workers are parked (each finishes the piece it is
 * reading first: its reads must land before the slot is reused); the order may then change
 * (resume takes the new base position), and resume lets them go. */
#ifndef STOKER_LOADER_POOL_H
#define STOKER_LOADER_POOL_H

#include "io/reader.h"
#include "loader/gpu_stage.h"
#include "loader/plan.h"
#include "loader/ring.h"
#include "loader/sampler.h"

#include <stdalign.h>

/* Per-worker counters: one writer (the worker), read with relaxed loads; each worker is its
 * own cache line, so counting never shares one. */
typedef struct stoker__wstats {
    atomic_uint_fast64_t records, bytes, inflight_sum, inflight_n;
    /* nanoseconds per stage: in the reader (submit + reap), CRC, the process step, and
     * the image pipeline's decode / resize / normalise */
    atomic_uint_fast64_t read_ns, crc_ns, process_ns, decode_ns, resize_ns, normalize_ns;
    atomic_uint_fast64_t reduced; /* images decoded at a DCT reduction */
    atomic_uint_fast64_t dropped; /* bytes dropped from the page cache behind the reads */
    atomic_uint_fast64_t decoded; /* images this worker decoded (the process step succeeded) */
    atomic_uint_fast64_t whole;   /* images decoded to their end to look for damage */
} stoker__wstats;

/* The workers' counters, summed. */
typedef struct stoker__pool_stats {
    uint64_t records, bytes, reduced, dropped, decoded, whole;
    double reads_in_flight; /* mean per submit */
    double read_s, crc_s, process_s, decode_s, resize_s, normalize_s;
} stoker__pool_stats;

typedef struct stoker__worker stoker__worker;

typedef struct stoker__pool {
    const stoker__plan *plan;
    stoker_dataset *ds;
    stoker__ring *ring;
    const stoker__sampler *smp; /* changes only while every worker is parked */
    stoker__gdec *gd;           /* the GPU decode stage, or NULL */
    /* JPEGs of a data set nobody checked (not checked when packed, or HDF5) are decoded to
     * their end on first use, to find damage outside their crops; a bit per record id is
     * set once its record came out clean, so that later epochs decode it as a checked one.
     * NULL: the data set's JPEGs were all decoded whole when packed, or none is decoded. */
    _Atomic uint64_t *clean;
    stoker__worker *workers; /* threads readers, then the GPU worker's when gd is set */
    uint32_t nworkers;       /* workers allocated (destroy frees these) */

    pthread_mutex_t mu; /* parking; taken before a slot mutex, never after */
    pthread_cond_t cond;
    bool has_locks;
    atomic_bool stop;
    atomic_bool halt; /* stop or pause: every wait of a worker gives up */
    bool paused;      /* under mu */
    uint32_t parked;  /* under mu */
    atomic_uint_fast64_t ticket;
    /* Written only while every worker is parked, or before they start. */
    uint64_t base_epoch, base_pos;
} stoker__pool;

/* Workers with their readers, staging and image scratch; threads start in start. With the
 * GPU decode stage gd (may be NULL), the workers route records to it, one more worker's
 * resources serve the stage's own thread, the GPU worker (started in start, stopped in
 * destroy, parked with the others), and the workers decode on the CPU what the GPU did not,
 * before their next ticket (gpu_stage.h). */
int stoker__pool_create(stoker__pool *p, const stoker__plan *plan, stoker_dataset *ds,
                        stoker__ring *ring, const stoker__sampler *smp, stoker__gdec *gd,
                        stoker__err *err);
int stoker__pool_start(stoker__pool *p, stoker__err *err);
/* Stops and joins every worker and frees everything. */
void stoker__pool_destroy(stoker__pool *p);

/* Parks every worker (the ring is then untouched by them). Controlling thread. */
void stoker__pool_pause(stoker__pool *p);
/* Restarts the workers at batch 0 = (epoch, pos) of the (possibly new) sampler. */
void stoker__pool_resume(stoker__pool *p, uint64_t epoch, uint64_t pos);

/* (epoch, position) of sequence number seq. */
void stoker__pool_position(const stoker__pool *p, uint64_t seq, uint64_t *epoch, uint64_t *pos);
/* The workers' counters. Any thread. */
void stoker__pool_stats_get(const stoker__pool *p, stoker__pool_stats *s);

#endif
