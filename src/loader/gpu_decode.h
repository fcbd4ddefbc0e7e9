/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU decode stage: the batches' device decodes a share of each batch's JPEGs with its
 * hardware decoder (nvJPEG), beside the CPU workers. Exists only when the plan's gpu_decode
 * holds and nvJPEG's hardware back-end opens on the device.
 *
 * A batch's way through it:
 *
 *   prepare (first worker)      the batch's share of the eligible records, from the split
 *   route (each worker, per     a record the split picks and the hardware decoder can take
 *   record, after its CRC)      (by its header) is not decoded: its bytes are copied to the
 *                               slot's staging area with its geometry (the same (seed,
 *                               epoch, id) crop box and flip as the CPU's) and region
 *   submit (last piece)         a batch holding such records is queued for the GPU worker,
 *                               one of the pool's threads, instead of being published
 *   run (GPU worker)            one batched region decode and one transform launch into the
 *                               slot's device samples, waited for (two runs in flight); the
 *                               records the decoder refused or failed come back as a list
 *   retry (a worker)            decodes that list on the CPU from the staged bytes (a record
 *                               corrupt there too goes to on_corrupt as always), repairs,
 *                               publishes; a batch with no such record is published by the
 *                               GPU worker
 *   gather (H2D stage)          after copying the host batch, moves the GPU's samples to
 *                               their places in the device batch
 *
 * So a batch is READY only when each of its records is final, whichever side decoded it,
 * and the SKIP replacements, retries and counts work as on the CPU alone.
 *
 * The split (split.h) is fed once per batch, by whoever publishes it, the CPU's decode time
 * and the GPU's run time of that batch (the rates it reports), and once a period of
 * deliveries, by the consumer's thread, what the consumer waited, how many batches were ready
 * and how many waited for the GPU worker (the share itself). Each batch's GPU records are a multiple of
 * QUANTUM. With STOKER_DECODER_GPU every eligible record goes to the GPU (until GPU
 * failures make the split fall back to the CPU).
 *
 * Per slot, the stage holds a staging area for the routed records' bytes (pinned host
 * memory: nvJPEG reads it while decoding), their geometry, and device memory for a batch of
 * finished samples. Locks: the stage's mutex is a leaf (the queue and the split); the share
 * is read without it. */
#ifndef STOKER_LOADER_GPU_DECODE_H
#define STOKER_LOADER_GPU_DECODE_H

#include "cuda/cuda.h"
#include "loader/plan.h"
#include "loader/ring.h"

typedef struct stoker__gdec stoker__gdec;

/* Counters for stats. */
typedef struct stoker__gdec_stats {
    uint64_t decoded, retried, fallbacks;
    double share, busy_s;
    char reason[160]; /* why the share is what it is (split.h), empty when nothing to say */
} stoker__gdec_stats;

/* Loads nvJPEG on plan->device. Returns 0; STOKER_E_UNSUPPORTED with the reason in why
 * (cap bytes) when the hardware decoder cannot be used (the loader then decodes on the CPU);
 * -ENOMEM or STOKER_E_CUDA (message in err) for a failure of this machine. */
int stoker__gdec_create(stoker__gdec **out, const stoker__plan *plan, char *why, size_t cap,
                        stoker__err *err);
/* Per-slot staging and device memory, the stream and events (after the ring exists). */
int stoker__gdec_start(stoker__gdec *gd, stoker__ring *ring, stoker__err *err);
/* After the pool and the H2D stage are gone. NULL ok. */
void stoker__gdec_destroy(stoker__gdec *gd);
const char *stoker__gdec_describe(const stoker__gdec *gd);

/* ---- workers ---- */

/* Batch seq is being prepared in slot s (slot mutex held, nobody else touches it). */
void stoker__gdec_prepare(stoker__gdec *gd, stoker__slot *s);
/* Record j of slot s, of `epoch`, whose n bytes at src passed their checks (`checked`: a
 * CRC32C among them): true when it is routed to the GPU (its bytes staged), false when the
 * worker decodes it. With STOKER_DECODER_AUTO only checked records are routed. */
bool stoker__gdec_route(stoker__gdec *gd, stoker__slot *s, uint32_t j, uint64_t seed,
                        int64_t epoch, const uint8_t *src, uint64_t n, bool checked);
/* A worker decoded a record of slot s in ns nanoseconds (the split's CPU measure). */
void stoker__gdec_cpu_time(stoker__gdec *gd, stoker__slot *s, uint64_t ns);
/* Whether slot s (all pieces done) holds records routed to the GPU. */
bool stoker__gdec_pending(const stoker__gdec *gd, const stoker__slot *s);
/* No more routing for slot s: replacements and retries are decoded by the CPU. */
void stoker__gdec_close(stoker__gdec *gd, stoker__slot *s);
/* Slot s's batch is final: updates the split with what it measured (gpu_ns of run). */
void stoker__gdec_batch_done(stoker__gdec *gd, stoker__slot *s, uint64_t gpu_ns, bool gpu_failed);

/* ---- the consumer ---- */

/* The consumer was handed a batch of `records` after waiting `waited` seconds, with `ready`
 * batches ready and not yet taken at its call. Once a period of deliveries, the split decides
 * the GPU's share from them, from the records each side decoded meanwhile and from the CPU
 * workers' busy seconds, which busy(ctx, &decoded) reads with the records they decoded, both
 * so far (only then: it sums every worker's counters). The consumer's thread alone. */
void stoker__gdec_consumed(stoker__gdec *gd, uint64_t records, double waited, double ready,
                           double (*busy)(void *ctx, uint64_t *decoded), void *ctx);

/* ---- the GPU worker ---- */

/* Queues slot s (all pieces done, pending) for the GPU worker. */
void stoker__gdec_submit(stoker__gdec *gd, stoker__slot *s);
/* What the GPU worker does next: BEGIN a run of *s (a lane is free and a slot queued), END
 * the oldest run (it has finished, or must be waited for: every lane in flight, its end is
 * not signalled, or no signal came within a bounded wait), RETRY *s on the CPU (nothing in
 * flight: the workers may all be waiting for slots), or IDLE: nothing after a bounded wait,
 * or `halt` was set. The GPU worker sleeps while runs are on the GPU, and a batch queued
 * meanwhile is begun at once. */
enum { STOKER__GDEC_IDLE, STOKER__GDEC_BEGIN, STOKER__GDEC_END, STOKER__GDEC_RETRY };
int stoker__gdec_next(stoker__gdec *gd, const atomic_bool *halt, stoker__slot **s);
/* Forgets every queued slot, the retries' too (a restart resets them). */
void stoker__gdec_drop_queue(stoker__gdec *gd);
/* A run decodes slot s's routed records on the GPU into its device samples. Runs are begun
 * and ended in order, a few in flight (each in its own lane: decoder state, stream,
 * scratch), so that the host's part of one (parsing, queueing) overlaps the GPU's work on
 * the others. begin needs a free lane (stoker__gdec_next said BEGIN); end waits for the oldest
 * run, keeps its outcome with its slot (the records left for the CPU, its time, whether
 * the GPU failed as a whole: a CUDA or nvJPEG failure leaves every routed record, the
 * cause logged) and returns its slot. */
void stoker__gdec_begin(stoker__gdec *gd, stoker__slot *s);
uint32_t stoker__gdec_in_flight(const stoker__gdec *gd);
stoker__slot *stoker__gdec_end(stoker__gdec *gd);
/* What slot s's run left: the records for the CPU (*n of them), its time, its failure. */
const uint32_t *stoker__gdec_outcome(const stoker__gdec *gd, const stoker__slot *s, uint32_t *n,
                                     uint64_t *gpu_ns, bool *failed);
/* Queues slot s, whose run left records for the CPU, for the workers, who decode them in
 * parallel with the GPU's next batch; stoker__gdec_take_retry hands it to one (NULL: none
 * queued; no wait, no lock when none). */
void stoker__gdec_submit_retry(stoker__gdec *gd, stoker__slot *s);
stoker__slot *stoker__gdec_take_retry(stoker__gdec *gd);
/* The staged bytes of record j of slot s (for its CPU retry). */
const uint8_t *stoker__gdec_bytes(const stoker__gdec *gd, const stoker__slot *s, uint32_t j,
                                  uint64_t *n);

/* ---- the H2D stage ---- */

/* Queues the move of slot s's GPU samples to their places in the device batch at dst (bytes
 * of one sample apart) on stream. 0 or a CUDA code. */
int stoker__gdec_gather(stoker__gdec *gd, const stoker__slot *s, uint8_t *dst,
                        stoker__stream stream);

void stoker__gdec_stats_get(stoker__gdec *gd, stoker__gdec_stats *st);

/* Test hook, so that the routing, the GPU worker, the CPU retries and the split's fallback
 * run where there is no GPU: STOKER__GDEC_REFUSE makes loaders created from now on (image
 * records, decoder not cpu) have the stage with no device and no nvJPEG, its decoder
 * refusing every image; STOKER__GDEC_FAIL, its every batch failing; STOKER__GDEC_REAL (the
 * default) turns it off. Not for production use. */
enum { STOKER__GDEC_REAL = 0, STOKER__GDEC_REFUSE = 1, STOKER__GDEC_FAIL = 2 };
void stoker__gdec_emulate(int mode);
int stoker__gdec_emulated(void);
/* Test hook: a share above 0 pins decoder auto's share of the loaders created next at it (the
 * split's decisions are not taken), so that routing under auto can be tested where nothing
 * makes the consumer wait for busy workers; 0 lets the split decide again. */
void stoker__gdec_pin_share(double share);

#endif
