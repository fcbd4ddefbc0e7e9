/* SPDX-License-Identifier: Apache-2.0 */
/* Where the workers meet the GPU decode stage (gpu_decode.h): the pool's only way to it. A
 * batch's records are routed as the workers check them; a batch holding routed records is
 * handed over at its last piece instead of being finished; the stage's own thread, the GPU
 * worker (started by stoker__gdec_run, stopped by stoker__gdec_stop), decodes it and either
 * finishes it or leaves the records the GPU refused or failed to the workers
 * (stoker__gdec_retry). What the stage needs from the pool, the pool gives as a
 * stoker__gdec_host: a CPU decode, the finishing of a batch, and the pool's parking.
 *
 *   worker                                the stage
 *   prepare (first worker, slot mutex)    the batch's share of the records, from the split
 *   route (each record, after its CRC)    true: the record's bytes are staged for the GPU
 *   cpu_time (each record decoded)        the split's CPU measure
 *   hand_over (the last piece)            true: the GPU worker owns the batch now
 *   retry (before each ticket)            decodes a batch's leftovers, via host.decode,
 *                                         and finishes it, via host.finish
 *   batch_done (finishing, before         the split's measures of the batch
 *   the publish)
 *
 * Every call but run, stop and drop_queue is made by a worker (the GPU worker included, in
 * host.finish); none blocks for the GPU. */
#ifndef STOKER_LOADER_GPU_STAGE_H
#define STOKER_LOADER_GPU_STAGE_H

#include "loader/ring.h"

typedef struct stoker__gdec stoker__gdec;

/* The pool's side, called by the stage with the ctx it was given (a worker's). */
typedef struct stoker__gdec_host {
    /* Decodes on the CPU record j of slot s from the n bytes at src (a record the GPU
     * left), into its place in the slot; a failure goes the way of any record's. */
    void (*decode)(void *ctx, stoker__slot *s, uint32_t j, const uint8_t *src, uint64_t n);
    /* Slot s's records are all decided: replaces the corrupt ones, calls
     * stoker__gdec_batch_done and publishes the batch. */
    void (*finish)(void *ctx, stoker__slot *s);
    /* Whether the pool holds its threads (a pause, or an epoch without batches); then the
     * GPU worker ends its runs and calls park, which returns when that is over. */
    bool (*held)(void *ctx);
    void (*park)(void *ctx);
    const atomic_bool *stop; /* the GPU worker returns once it is set */
    const atomic_bool *halt; /* its waits give up once it is set */
} stoker__gdec_host;

/* ---- workers ---- */

/* Batch seq is being prepared in slot s (slot mutex held, nobody else touches it). */
void stoker__gdec_prepare(stoker__gdec *gd, stoker__slot *s);
/* Record j of slot s, of `epoch`, whose n bytes at src passed their checks (`checked`: a
 * CRC32C among them): true when it is routed to the GPU (its bytes staged), false when the
 * worker decodes it. With STOKER_DECODER_AUTO only checked records are routed. */
bool stoker__gdec_route(stoker__gdec *gd, stoker__slot *s, uint32_t j, uint64_t seed, int64_t epoch,
                        const uint8_t *src, uint64_t n, bool checked);
/* A worker decoded a record of slot s in ns nanoseconds (the split's CPU measure). */
void stoker__gdec_cpu_time(stoker__gdec *gd, stoker__slot *s, uint64_t ns);
/* Slot s's pieces are all done, by the caller. True: records of it were routed and the
 * batch has not failed, so it is queued for the GPU worker, which finishes it or leaves it
 * to the workers' retries. False: nothing more is routed (the replacements are decoded on
 * the CPU) and the caller finishes the batch. */
bool stoker__gdec_hand_over(stoker__gdec *gd, stoker__slot *s);
/* Slot s's batch is final (its replacements decoded): the split takes what it measured. */
void stoker__gdec_batch_done(stoker__gdec *gd, stoker__slot *s);
/* When a batch whose GPU run left records for the CPU is queued, takes it and decodes them
 * (host.decode with ctx), then finishes it (host.finish). Returns whether it took one; no
 * wait, and no lock when none is queued. */
bool stoker__gdec_retry(stoker__gdec *gd, void *ctx);

/* ---- the pool's control ---- */

/* Starts the GPU worker, which calls host with ctx (its own worker context). */
int stoker__gdec_run(stoker__gdec *gd, const stoker__gdec_host *host, void *ctx, stoker__err *err);
/* Joins the GPU worker, after the pool set host.stop and host.halt (its runs in flight are
 * ended first). NULL ok, and a stage whose worker never started. */
void stoker__gdec_stop(stoker__gdec *gd);
/* Forgets every queued slot, the retries' too (a restart resets them; every worker and the
 * GPU worker parked). */
void stoker__gdec_drop_queue(stoker__gdec *gd);

#endif
