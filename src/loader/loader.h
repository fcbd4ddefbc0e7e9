/* SPDX-License-Identifier: Apache-2.0 */
/* The loader: the stages wired together (loader.c: create, next, release, restarts, state;
 * stats.c: batch views and statistics).
 *
 *   plan ─► sampler ─► pool (workers) ─► ring (slots) ─► h2d (device buffers) ─► consumer
 *
 * The plan is made once and never changes; the sampler changes only in a restart, while the
 * pool is paused and the H2D stage quiesced. Without a device there is no H2D stage and the
 * consumer takes host batches from the ring itself.
 *
 * Lock order: the pool's mutex before a slot's mutex; a slot's mutex and the H2D stage's
 * mutex are leaves. The consumer thread runs next, set_epoch and state restore; release may
 * run on any thread (a host batch's slot mutex, or the H2D stage's). */
#ifndef STOKER_LOADER_LOADER_H
#define STOKER_LOADER_LOADER_H

#include "loader/h2d.h"
#include "loader/plan.h"
#include "loader/pool.h"
#include "loader/ring.h"
#include "loader/sampler.h"

#include <sys/types.h>

/* What a window is computed from: a loader's counters at time t (stats.c). */
typedef struct stoker__snap {
    double t, wait, read, crc, process, decode, resize, normalize, h2d, gdec, fetch;
    uint64_t batches, records, bytes, next_calls, ready_sum;
} stoker__snap;

#define STOKER__WIN_SNAPS 128 /* snapshots kept: 64 s of them */
#define STOKER__WIN_EVERY 0.5 /* seconds between snapshots */

struct stoker_loader {
    stoker__err err; /* the consumer thread's: create, next, set_epoch, restore */
    stoker_dataset *ds;
    stoker__plan plan;
    stoker__sampler smp;
    stoker__ring ring;
    stoker__pool pool;
    stoker__h2d *h2d;   /* NULL: host batches */
    stoker__gdec *gdec; /* NULL: the CPU decodes every JPEG */
    bool running;       /* create succeeded: every stage runs */
    pid_t pid;          /* the creator: a forked child has none of the threads */
    atomic_bool busy;   /* a consumer call runs: another thread's is refused */

    /* The order's options as in force (a restored state brings its own seed, shuffle,
     * drop_last and order): written by the consumer thread, read by get_int anywhere. */
    _Atomic uint64_t order_seed;
    atomic_uint order_flags; /* 1 shuffle, 2 drop_last, 4 block order */

    /* the consumer thread's position */
    uint64_t cons_seq, cons_epoch, cons_pos;
    double wait_carry; /* seconds the consumer spent in next calls for batch cons_seq that
                          timed out (stoker_loader_next_wait): counted with its delivery */
    double t_entry;    /* when the consumer's next call in progress began */
    /* A state was restored and no next has run since: set_epoch of the restored epoch then
     * keeps the restored position (the resumed loop calls set_epoch before its batches). */
    bool restored;
    atomic_int outstanding; /* batches handed out and not released */

    /* delivery counters: relaxed atomics, written by the consumer, read by stats anywhere */
    atomic_uint_fast64_t c_batches, c_records, c_bytes, c_skipped, c_next_calls, c_ready_sum;
    _Atomic double c_wait;
    double t_create;

    /* The window's snapshots (stats.c): a ring of STOKER__WIN_SNAPS, one taken by next every
     * STOKER__WIN_EVERY seconds, the first at create; win_mu guards them (a leaf). */
    pthread_mutex_t win_mu;
    bool has_win_mu;
    stoker__snap win[STOKER__WIN_SNAPS];
    uint32_t win_n, win_head; /* snapshots held; where the next goes */
    double win_next;          /* when next takes the next one (the consumer's) */
};

/* stats.c: the window's first snapshot (at create, all zeros) and its lock. */
void stoker__window_init(stoker_loader *l);

/* stats.c: counts batch b handed out by next after `waited` seconds, with `ready` batches
 * finished and not yet taken at that moment (occupancy). Consumer thread. */
/* Adds seconds the consumer spent getting a batch (stoker_loader_add_wait). Consumer thread. */
void stoker__count_wait(stoker_loader *l, double seconds);
void stoker__count_delivery(stoker_loader *l, const stoker_batch *b, double waited, uint64_t ready);

#endif
