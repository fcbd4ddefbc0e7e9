/* SPDX-License-Identifier: Apache-2.0 */
/* The H2D stage: finished host slots are copied to a ring of device buffers on the stage's
 * own stream and handed out as device batches. It takes slots from the ring like any taker
 * and knows CUDA only through src/cuda/. Exists only when the plan has a device.
 *
 * Who copies: the stage's copy thread. Once batch N's device buffer is free it copies each
 * piece of N as soon as a worker has finished it (the ring's take with progress; fixed-size
 * records only, whose layout never changes), takes the slot when the batch is whole, copies
 * what is left and records N's ready event; a host function then gives the slot back to
 * the ring. A batch whose records SKIP replaced after their pieces were copied is copied
 * again whole; GPU normalisation copies whole batches through a staging buffer and runs
 * the kernel. next only waits until N's copy has been issued (the consumer's stream waits
 * on the event, never the host) and makes no CUDA call.
 *
 * Per device buffer (batch seq uses buffer seq % nbuf):
 *   FREE --copy issued--> COPIED --next--> OUT --release--> RELEASING --> RELEASED --reuse-->
 * RELEASING: release_stream records the consumer's event with no lock held. A RELEASED
 * buffer whose release recorded an event is refilled only after that event completed. The
 * copy thread runs at most nbuf batches ahead of next.
 *
 * Threads: next, quiesce and destroy run on the consumer thread; release on any thread;
 * copies are issued by the copy thread; the slot-done host function runs on CUDA's callback
 * thread. Every CUDA call on a caller's thread runs with the stage's device current and
 * restores the caller's. The stage's mutex is a leaf: taken alone, no CUDA call under it. */
#ifndef STOKER_LOADER_H2D_H
#define STOKER_LOADER_H2D_H

#include "loader/gpu_decode.h"
#include "loader/plan.h"
#include "loader/ring.h"

typedef struct stoker__h2d stoker__h2d;

/* The stage for plan->device (before the ring, whose slots it pins). */
int stoker__h2d_create(stoker__h2d **out, const stoker__plan *plan, stoker__err *err);
/* Slot memory for the ring: pinned (cudaHostAlloc), pageable when pinning fails. */
stoker__slot_mem stoker__h2d_slot_mem(stoker__h2d *g);
/* Streams, events, device buffers and the copy thread, over the ring's slots. Device
 * batches name `owner` as their loader. With the GPU decode stage gd (may be NULL), each
 * batch's GPU samples are moved into its device batch after the host slot's copy. */
int stoker__h2d_start(stoker__h2d *g, stoker__ring *ring, stoker__gdec *gd, stoker_loader *owner,
                      stoker__err *err);
/* Waits for every copy in flight, stops the copy thread and frees the device side (before
 * the workers and the ring's slots go). NULL ok. */
void stoker__h2d_stop(stoker__h2d *g);
/* Frees what is left: the slot allocator's state, which the ring's slots use until they
 * are freed (after the ring). Stops first if stop was not called. NULL ok. */
void stoker__h2d_destroy(stoker__h2d *g);
/* Settles every copy in flight and drops prefetched batches (restarts). */
void stoker__h2d_quiesce(stoker__h2d *g);
/* After a restart has reset the ring: the copy thread goes on from batch 0. */
void stoker__h2d_resume(stoker__h2d *g);

/* Device batch seq once its copy was issued: 0 with *out; a failed batch's code (consumed,
 * message in err); STOKER_E_STATE (nothing consumed) when its device buffer still holds a
 * batch not released; STOKER_AGAIN (nothing consumed) when `until` (stoker__now()'s clock;
 * 0: no limit) passed first. *waited: seconds waited; *queued: batches copied and not yet
 * handed out. Consumer thread. */
int stoker__h2d_next(stoker__h2d *g, uint64_t seq, double until, stoker_batch **out, double *waited,
                     uint64_t *queued, stoker__err *err);
/* Gives a device batch back; with `record`, after the work queued on `stream`. Any thread:
 * a CUDA failure goes to the log, never to a loader's message. STOKER_E_STATE when it was
 * not out, STOKER_E_CUDA. */
int stoker__h2d_release(stoker_batch *b, bool record, void *stream);
/* Device batch b (handed out, not released) gives its device memory to *m
 * (stoker_batch_detach) once its copy completed (the host waits for the ready event); the
 * buffer gets fresh memory of the same sizes, put in place at release. Consumer thread. 0;
 * STOKER_E_STATE (released or detached already); STOKER_E_CUDA (nothing changed); message
 * in err. */
int stoker__h2d_detach(stoker_batch *b, struct stoker_memory *m, stoker__err *err);
/* Makes `stream` wait for the batch's copy (message in err on failure). */
int stoker__h2d_wait_stream(const stoker_batch *b, void *stream, stoker__err *err);
void *stoker__h2d_event(const stoker_batch *b);
/* Seconds the copies were busy: from a batch's first copy queued to its completion, overlaps
 * counted once. Any thread; 0 for NULL. */
double stoker__h2d_busy_seconds(const stoker__h2d *g);
/* Page-locked bytes held by the ring's slots. Any thread. */
int64_t stoker__h2d_pinned_bytes(const stoker__h2d *g);

#endif
