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
 *   hand over (last piece)      a batch holding such records is queued for the GPU worker,
 *                               the stage's own thread, instead of being published
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
 * and how many waited for the GPU worker (the share itself). Each batch's GPU records are a
 * multiple of QUANTUM. With STOKER_DECODER_GPU every eligible record goes to the GPU (until GPU
 * failures make the split fall back to the CPU).
 *
 * Per slot, the stage holds a staging area for the routed records' bytes (pinned host
 * memory: nvJPEG reads it while decoding), their geometry, and device memory for a batch of
 * finished samples. Locks: the stage's mutex is a leaf (the queue and the split); the share
 * is read without it.
 *
 * The workers reach the stage through gpu_stage.h alone; this header is the loader's (create,
 * start, destroy, the consumer's measures) and the H2D stage's (gather). */
#ifndef STOKER_LOADER_GPU_DECODE_H
#define STOKER_LOADER_GPU_DECODE_H

#include "cuda/cuda.h"
#include "loader/gpu_stage.h"
#include "loader/plan.h"
#include "loader/ring.h"

/* Counters for stats. */
typedef struct stoker__gdec_stats {
    uint64_t decoded, retried, fallbacks;
    double share, busy_s;
    char reason[160]; /* why the share is what it is (split.h), empty when nothing to say */
} stoker__gdec_stats;

/* Loads nvJPEG on plan->device (nothing under the plan's test hook, gdec_emulate). Returns 0;
 * STOKER_E_UNSUPPORTED with the reason in why (cap bytes) when the hardware decoder cannot
 * be used (the loader then decodes on the CPU); -ENOMEM or STOKER_E_CUDA (message in err)
 * for a failure of this machine. */
int stoker__gdec_create(stoker__gdec **out, const stoker__plan *plan, char *why, size_t cap,
                        stoker__err *err);
/* Per-slot staging and device memory, the stream and events (after the ring exists). */
int stoker__gdec_start(stoker__gdec *gd, stoker__ring *ring, stoker__err *err);
/* After the pool (which stopped the GPU worker) and the H2D stage are gone. NULL ok. */
void stoker__gdec_destroy(stoker__gdec *gd);
const char *stoker__gdec_describe(const stoker__gdec *gd);

/* ---- the consumer ---- */

/* The consumer was handed a batch of `records` after waiting `waited` seconds, with `ready`
 * batches ready and not yet taken at its call. Once a period of deliveries, the split decides
 * the GPU's share from them, from the records each side decoded meanwhile and from the CPU
 * workers' busy seconds, which busy(ctx, &decoded) reads with the records they decoded, both
 * so far (only then: it sums every worker's counters). The consumer's thread alone. */
void stoker__gdec_consumed(stoker__gdec *gd, uint64_t records, double waited, double ready,
                           double (*busy)(void *ctx, uint64_t *decoded), void *ctx);

/* ---- the H2D stage ---- */

/* Queues the move of slot s's GPU samples to their places in the device batch at dst (bytes
 * of one sample apart) on stream. 0 or a CUDA code. */
int stoker__gdec_gather(stoker__gdec *gd, const stoker__slot *s, uint8_t *dst,
                        stoker__stream stream);

void stoker__gdec_stats_get(stoker__gdec *gd, stoker__gdec_stats *st);

#endif
