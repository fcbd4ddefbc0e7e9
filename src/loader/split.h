/* The split of a batch's JPEG records between the CPU workers and the GPU decoder.
 *
 * The GPU side takes a share of the records it can decode (the eligible ones); the CPU
 * workers take the rest and every record the GPU cannot take. After each batch, both sides
 * report how long they were busy and how many records they finished; the controller keeps a
 * smoothed throughput per side and sets the next share so that both would finish a batch at
 * the same time: the GPU's part of all records is r_gpu / (r_cpu + r_gpu), divided by the
 * eligible fraction. That is a fixed-point iteration whose fixed point is equal finish times
 * even when a side's time is not proportional to its records (a fixed cost per batch).
 *
 * While both sides work, each keeps at least `floor` of the eligible records, so both stay
 * measured and a change of speed on either side is seen. A GPU batch that fails (its records
 * go back to the CPU) leaves the share as it was; `max_failures` failed batches in a row
 * send everything to the CPU for `retry_after` batches, after which one batch at the floor
 * share tries the GPU again: a success resumes the split, a failure doubles the wait.
 *
 * Plain data, one owner (the thread that plans batches): no locks, no allocation. */
#ifndef STOKER_LOADER_SPLIT_H
#define STOKER_LOADER_SPLIT_H

#include "common/common.h"

typedef struct stoker__split_config {
    double floor;         /* least share of eligible records per side while both work (0: 0.05) */
    double smoothing;     /* weight of the newest batch in the throughputs (0: 0.4) */
    double initial;       /* the share before anything was measured (0: 0.5) */
    int32_t max_failures; /* failed GPU batches in a row before the CPU takes all (0: 3) */
    int32_t retry_after;  /* batches on the CPU alone before trying the GPU again (0: 64) */
} stoker__split_config;

/* What one batch measured. Busy time is the wall time a side needed for its records of the
 * batch (from its first record started to its last finished), so that records / time is its
 * throughput. A side with no records or no time tells nothing about its speed. */
typedef struct stoker__split_batch {
    uint64_t cpu_ns, gpu_ns;
    int64_t cpu_records, gpu_records;
    int64_t records;  /* in the batch */
    int64_t eligible; /* of them, those the GPU could take */
    bool gpu_failed;  /* the GPU side failed; its records were decoded by the CPU */
} stoker__split_batch;

typedef struct stoker__split {
    stoker__split_config cfg;  /* defaults resolved */
    bool gpu;                  /* a GPU side exists */
    double share;              /* of the eligible records, for the next batch */
    double cpu_rate, gpu_rate; /* records per second, smoothed; 0 until measured */
    double eligible_part;      /* eligible / records, smoothed; 0 until measured */
    int32_t failures;          /* failed GPU batches in a row */
    bool retrying;             /* this batch tries the GPU again after a fallback */
    int64_t fallback_left;     /* batches left on the CPU alone */
    int64_t wait;              /* the next fallback's length */
} stoker__split;

/* A controller; cfg may be NULL (every default). gpu false: the share is always 0. */
void stoker__split_init(stoker__split *s, const stoker__split_config *cfg, bool gpu);

/* Takes one batch's measurements; returns the share of eligible records (0..1) that the GPU
 * takes in the next batch. */
double stoker__split_update(stoker__split *s, const stoker__split_batch *b);

/* The share for the next batch (what the last update returned). */
double stoker__split_share(const stoker__split *s);

/* Whether the CPU has taken everything because the GPU failed (until the next retry). */
bool stoker__split_fallen_back(const stoker__split *s);

/* How many of `eligible` records go to the GPU at `share`: the nearest whole number, at least
 * one when the share is above 0 and at most eligible - 1 when it is below 1 (so that a small
 * batch keeps both sides measured). */
int32_t stoker__split_gpu_count(double share, int32_t eligible);

/* Whether eligible record `index` (0 .. eligible - 1, in batch order) goes to the GPU: the
 * gpu_count records picked are spread evenly over the batch (any run of n eligible records
 * holds n * count / eligible of them, rounded either way), so that every piece of the batch
 * gives the CPU workers the same mix. A pure function of its arguments. */
bool stoker__split_to_gpu(double share, int32_t eligible, int32_t index);

#endif
