/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU/GPU split controller (split.h). */
#include "loader/split.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define DEFAULT_FLOOR 0.05
#define DEFAULT_SMOOTHING 0.4
#define DEFAULT_MAX_FAILURES 3
#define DEFAULT_RETRY_AFTER 64
#define DEFAULT_WAIT_HIGH 0.02
#define DEFAULT_WAIT_LOW 0.005
#define DEFAULT_AHEAD 1.5
#define DEFAULT_BUSY_HIGH 0.5
#define DEFAULT_GAIN 0.6
#define DEFAULT_STEP_MIN 0.02
#define DEFAULT_STEP_MAX 0.05
#define MAX_RISE_DOUBLINGS 2 /* rises in a row may reach 4 times step_max */
#define DEFAULT_STEP_DOWN 0.02
#define DEFAULT_GPU_BEHIND 1.0
#define DEFAULT_BUSY_SLACK 0.85
#define DEFAULT_MARGIN 0.04
#define DEFAULT_JUMP 0.3
#define DEFAULT_DROP 0.1
#define UNSURE_RATIO                                                                               \
    2.0                      /* a consumer whose own rate is more than this many times what it     \
                                was given (one that waited more than half its time): its rate is   \
                                unsure, and the ceiling bounds its rises */
#define MAX_WAIT_DOUBLINGS 6 /* a fallback lasts at most 64 times retry_after batches */

static double clamp(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static double or_default(double v, double lo, double hi, double dflt)
{
    return v > lo && v <= hi ? v : dflt;
}

void stoker__split_init(stoker__split *s, const stoker__split_config *cfg, bool gpu)
{
    *s = (stoker__split){0};
    if (cfg)
        s->cfg = *cfg;
    stoker__split_config *c = &s->cfg;
    c->floor = c->floor > 0 && c->floor < 0.5 ? c->floor : DEFAULT_FLOOR;
    c->smoothing = or_default(c->smoothing, 0, 1, DEFAULT_SMOOTHING);
    c->max_failures = c->max_failures > 0 ? c->max_failures : DEFAULT_MAX_FAILURES;
    c->retry_after = c->retry_after > 0 ? c->retry_after : DEFAULT_RETRY_AFTER;
    c->wait_high = or_default(c->wait_high, 0, 1, DEFAULT_WAIT_HIGH);
    c->wait_low = or_default(c->wait_low, 0, c->wait_high, fmin(DEFAULT_WAIT_LOW, c->wait_high));
    c->ahead = or_default(c->ahead, 0, 1e9, DEFAULT_AHEAD);
    c->busy_high = or_default(c->busy_high, 0, 1, DEFAULT_BUSY_HIGH);
    c->gain = or_default(c->gain, 0, 10, DEFAULT_GAIN);
    c->step_min = or_default(c->step_min, 0, 1, DEFAULT_STEP_MIN);
    c->step_max = or_default(c->step_max, c->step_min, 1, fmax(DEFAULT_STEP_MAX, c->step_min));
    c->step_down = or_default(c->step_down, 0, 1, DEFAULT_STEP_DOWN);
    c->gpu_behind = or_default(c->gpu_behind, 0, 1e9, DEFAULT_GPU_BEHIND);
    c->busy_slack = or_default(c->busy_slack, 0, 1, DEFAULT_BUSY_SLACK);
    c->margin = or_default(c->margin, 0, 0.5, DEFAULT_MARGIN);
    c->jump = or_default(c->jump, c->step_min, 1, fmax(DEFAULT_JUMP, c->step_min));
    c->drop = or_default(c->drop, c->step_down, 1, fmax(DEFAULT_DROP, c->step_down));
    s->gpu = gpu;
    s->share = 0;
    s->cap = gpu ? 1 - c->floor : 0;
    s->wait = c->retry_after;
}

/* The newest value weighed into a smoothed one; the first value is taken as it is. */
static double smooth(double old, double v, double weight)
{
    return old > 0 ? old + weight * (v - old) : v;
}

static void measure(double *rate, int64_t records, uint64_t ns, double weight)
{
    if (records > 0 && ns > 0)
        *rate = smooth(*rate, (double)records * 1e9 / (double)ns, weight);
}

/* The share at which both sides would finish together, from what was measured. */
static double balance(const stoker__split *s)
{
    if (s->cpu_rate <= 0 || s->gpu_rate <= 0 || s->eligible_part <= 0)
        return 1 - s->cfg.floor;                                       /* nothing to go by yet */
    const double gpu_part = s->gpu_rate / (s->cpu_rate + s->gpu_rate); /* of all records */
    return clamp(gpu_part / s->eligible_part, s->cfg.floor, 1 - s->cfg.floor);
}

/* Everything to the CPU for a while; the wait doubles for the next time, up to its cap. */
static void fall_back(stoker__split *s)
{
    s->fallback_left = s->wait;
    const int64_t cap = (int64_t)s->cfg.retry_after << MAX_WAIT_DOUBLINGS;
    s->wait = s->wait * 2 < cap ? s->wait * 2 : cap;
    s->failures = 0;
    s->retrying = false;
    s->share = 0;
    s->reason = STOKER__SPLIT_FALLBACK;
}

/* One batch of the fallback has passed; the last one is followed by a retry at the floor. */
static void fallback_step(stoker__split *s)
{
    if (--s->fallback_left > 0)
        return;
    s->retrying = true;
    s->share = s->cfg.floor;
}

double stoker__split_update(stoker__split *s, const stoker__split_batch *b)
{
    const double w = s->cfg.smoothing;
    if (b->records > 0 && b->eligible >= 0 && b->eligible <= b->records)
        s->eligible_part = smooth(s->eligible_part, (double)b->eligible / (double)b->records, w);
    measure(&s->cpu_rate, b->cpu_records, b->cpu_ns, w);
    if (!s->gpu)
        return s->share = 0;
    if (s->fallback_left > 0) {
        fallback_step(s);
        return s->share;
    }
    if (b->gpu_failed) {
        if (s->retrying || ++s->failures >= s->cfg.max_failures)
            fall_back(s);
        return s->share;
    }
    if (b->gpu_records > 0) {
        s->failures = 0;
        if (s->retrying) { /* the GPU works again: the next fallback waits the least */
            s->wait = s->cfg.retry_after;
            s->reason = STOKER__SPLIT_START;
        }
        s->retrying = false;
        measure(&s->gpu_rate, b->gpu_records, b->gpu_ns, w);
    }
    s->cap = balance(s);
    return s->share;
}

/* The share down to `to` (below the floor, where the GPU would be measured poorly: none). */
static void lower(stoker__split *s, double to, int32_t reason)
{
    s->share = to < s->cfg.floor ? 0 : to;
    s->reason = reason;
}

/* The share down by step_down. */
static void fall(stoker__split *s, int32_t reason)
{
    lower(s, s->share - s->cfg.step_down, reason);
}

/* The share up to `want`, never below the floor nor above 1 - floor, never down. */
static void rise(stoker__split *s, double want, int32_t reason)
{
    const double top = 1 - s->cfg.floor;
    s->share = fmax(s->share, fmin(fmax(want, s->cfg.floor), top));
    s->reason = s->share >= top ? STOKER__SPLIT_CAPPED : reason;
}

/* The records the CPU workers would have decoded in the period had they been busy all of it:
 * their busy share counted at no less than busy_high, so that a period of idle workers cannot
 * promise more than twice what they made. */
static double workers_full(const stoker__split *s, const stoker__split_period *p)
{
    return p->cpu_records / clamp(p->busy, s->cfg.busy_high, 1);
}

/* Takes the period's rates into the smoothed ones: the workers' (workers_full) and the
 * consumer's own, records over its time less its waits. False without them. */
static bool take_rates(stoker__split *s, const stoker__split_period *p)
{
    const double own = p->seconds - p->waited;
    if (!(p->records > 0) || !(p->cpu_records > 0) || !(own > 0))
        return false;
    const double w = s->cfg.smoothing;
    s->cpu_full = smooth(s->cpu_full, workers_full(s, p) / p->seconds, w);
    s->consumer = smooth(s->consumer, p->records / own, w);
    s->delivered = smooth(s->delivered, p->records / p->seconds, w);
    return true;
}

/* The share the rates ask for: the consumer's own rate less what the workers make, as a part
 * of the eligible records, plus the margin (0 when the workers make it all). */
static double needed(const stoker__split *s)
{
    const double part = (1 - s->cpu_full / s->consumer) / stoker__split_eligible_part(s);
    return part > 0 ? fmin(part + s->cfg.margin, 1 - s->cfg.floor) : 0;
}

/* With batches queued for the GPU it is saturated: the share at which both sides would keep
 * pace by the period's rates (the workers' as workers_full); -1 without them. */
static double balanced(const stoker__split *s, const stoker__split_period *p)
{
    if (!(p->gpu_records > 0) || !(p->cpu_records > 0))
        return -1;
    const double cpu = workers_full(s, p);
    return p->gpu_records / (cpu + p->gpu_records) / stoker__split_eligible_part(s);
}

/* Whether the ceiling bounds the rises: the GPU has fallen behind, and the consumer's own
 * rate is more than UNSURE_RATIO times what it was given (both smoothed), so that it is read
 * from too little of its time (a host that only queues its steps for the GPU waits for
 * nearly every batch, and the rates take it for many times what it computes). */
static bool bounded(const stoker__split *s)
{
    return s->ceiling > 0 && s->consumer > UNSURE_RATIO * s->delivered;
}

/* A rise to what the rates ask for (need, -1: none), step_min at least and jump at most, and
 * where bounded, no higher than the ceiling unless by step_min. */
static double rise_to(const stoker__split *s, double need)
{
    const double lo = s->share + s->cfg.step_min;
    double hi = s->share + s->cfg.jump;
    if (bounded(s))
        hi = fmin(hi, fmax(s->ceiling, lo));
    return need >= 0 ? clamp(need, lo, hi) : lo;
}

double stoker__split_consumed(stoker__split *s, const stoker__split_period *p)
{
    if (!s->gpu || s->fallback_left > 0 || s->retrying || !(p->seconds > 0))
        return s->share;
    const stoker__split_config *c = &s->cfg;
    const double ahead_before = s->last.seconds > 0 ? s->last.ahead : INFINITY;
    s->last = *p;
    const double waited = clamp(p->waited / p->seconds, 0, 1);
    const int32_t rises = s->rises;
    s->rises = 0; /* unless this is a rise too */
    const double need = take_rates(s, p) ? needed(s) : -1;
    if (waited > c->wait_high && p->gpu_queued >= c->gpu_behind) {
        /* batches wait for the GPU, not for the workers: past its capacity; by the rates,
         * down to where both sides keep pace, by step_down at least and drop at most */
        const double even = balanced(s, p);
        if (even < 0) {
            fall(s, STOKER__SPLIT_GPU_BEHIND);
        } else {
            lower(s, clamp(even, s->share - c->drop, s->share - c->step_down),
                  STOKER__SPLIT_GPU_BEHIND);
            s->ceiling = fmax(even, c->floor);
        }
    } else if (waited > c->wait_high) {
        if (p->busy < c->busy_high) {
            s->reason = STOKER__SPLIT_NOT_CPU;
            return s->share;
        }
        if (need >= 0) {
            /* the GPU takes what the workers fell short of the consumer's own rate by, at
             * once (up to jump): a training job's waits end within a period or two */
            rise(s, rise_to(s, need), STOKER__SPLIT_MORE);
        } else {
            /* the CPU made 1 - waited of what the consumer asked for: the GPU takes the rest
             * of the records, which is waited / eligible_part of the eligible ones (damped) */
            const double ep = s->eligible_part > 0 ? s->eligible_part : 1;
            const double most = c->step_max * (double)(1 << rises);
            rise(s, s->share + clamp(c->gain * waited / ep, c->step_min, most), STOKER__SPLIT_MORE);
        }
        s->rises = rises < MAX_RISE_DOUBLINGS ? rises + 1 : rises;
    } else if (c->low > 0 && p->ahead < c->low && p->ahead <= ahead_before &&
               p->busy >= c->busy_high && p->gpu_queued < c->gpu_behind) {
        /* the consumer did not wait, but the ring runs dry while the workers are busy: the
         * GPU takes more before it does, what the rates ask for (step_min at least) */
        rise(s, rise_to(s, need), STOKER__SPLIT_DRY);
    } else if (waited < c->wait_low && s->share > 0 && p->busy < c->busy_slack &&
               ((c->slack > 0 && p->ahead >= c->slack) || p->gpu_queued >= c->gpu_behind)) {
        /* idle workers, and batches ahead or held by the GPU: the CPU takes records back */
        fall(s, STOKER__SPLIT_SLACK);
    } else if (waited < c->wait_low && p->ahead >= c->ahead) {
        fall(s, STOKER__SPLIT_LESS);
    } else if (waited < c->wait_low && need >= 0 && need < s->share - c->step_down &&
               p->ahead >= c->low && p->gpu_queued < c->gpu_behind) {
        /* batches come in time and the workers would make more than the consumer takes
         * beside a smaller share: the GPU takes less, a step a period (each image it decodes
         * costs the consumer's step), down to what the rates ask for; a ring that then runs
         * dry takes it up again */
        fall(s, STOKER__SPLIT_TRIM);
    } else if (s->reason != STOKER__SPLIT_START || s->share > 0) {
        s->reason = STOKER__SPLIT_HOLD;
    }
    return s->share;
}

double stoker__split_share(const stoker__split *s)
{
    return s->share;
}

double stoker__split_cap(const stoker__split *s)
{
    return s->cap;
}

double stoker__split_eligible_part(const stoker__split *s)
{
    return s->eligible_part > 0 ? s->eligible_part : 1;
}

bool stoker__split_fallen_back(const stoker__split *s)
{
    return s->gpu && s->fallback_left > 0;
}

void stoker__split_describe(const stoker__split *s, char *buf, size_t cap)
{
    const double waited = s->last.seconds > 0 ? 100 * s->last.waited / s->last.seconds : 0;
    const double busy = 100 * s->last.busy, share = 100 * s->share, ahead = s->last.ahead;
    switch (s->reason) {
    case STOKER__SPLIT_MORE:
        snprintf(buf, cap,
                 "the consumer waited %.1f%% of its time with the workers %.0f%% busy: "
                 "the GPU takes %.0f%% of the images it can",
                 waited, busy, share);
        break;
    case STOKER__SPLIT_CAPPED:
        snprintf(buf, cap,
                 "the consumer waited %.1f%% of its time with the workers %.0f%% busy: "
                 "the GPU takes its most, %.0f%%",
                 waited, busy, share);
        break;
    case STOKER__SPLIT_DRY:
        snprintf(buf, cap,
                 "%.1f batches ready at the consumer's calls and falling, the workers "
                 "%.0f%% busy: the GPU takes %.0f%% of the images it can",
                 ahead, busy, share);
        break;
    case STOKER__SPLIT_NOT_CPU:
        snprintf(buf, cap,
                 "the consumer waited %.1f%% of its time with the workers only %.0f%% "
                 "busy: the CPU is not the limit; the GPU keeps %.0f%%",
                 waited, busy, share);
        break;
    case STOKER__SPLIT_HOLD:
        snprintf(buf, cap,
                 "batches come as the consumer needs them (waited %.1f%%, %.1f ready): "
                 "the GPU keeps %.0f%%",
                 waited, ahead, share);
        break;
    case STOKER__SPLIT_TRIM:
        snprintf(buf, cap,
                 "batches come in time (%.1f ready) and the workers would make %.0f of "
                 "the %.0f img/s taken: the GPU takes less, %.0f%%",
                 ahead, s->cpu_full, s->consumer, share);
        break;
    case STOKER__SPLIT_LESS:
        snprintf(buf, cap, "%.1f batches ready at the consumer's calls, waited %.1f%%: %s", ahead,
                 waited, s->share > 0 ? "the GPU takes less" : "the CPU decodes alone");
        break;
    case STOKER__SPLIT_SLACK:
        snprintf(buf, cap,
                 "%.1f batches ready at the consumer's calls and %.1f queued for the "
                 "GPU, the workers %.0f%% busy: the CPU takes more back, the GPU %.0f%%",
                 ahead, s->last.gpu_queued, busy, share);
        break;
    case STOKER__SPLIT_GPU_BEHIND:
        snprintf(buf, cap,
                 "the consumer waited %.1f%% of its time with %.1f batches queued for "
                 "the GPU: the GPU takes less, %.0f%%",
                 waited, s->last.gpu_queued, share);
        break;
    case STOKER__SPLIT_FALLBACK:
        snprintf(buf, cap,
                 "the GPU failed %d batches in a row: the CPU decodes alone for %lld "
                 "batches",
                 (int)s->cfg.max_failures, (long long)s->fallback_left);
        break;
    default: snprintf(buf, cap, "the CPU decodes alone until the consumer waits for it"); break;
    }
    const size_t n = strlen(buf);
    if ((s->reason == STOKER__SPLIT_MORE || s->reason == STOKER__SPLIT_DRY) && bounded(s) &&
        s->share >= s->ceiling - 1e-9 && n < cap)
        snprintf(buf + n, cap - n, " (the GPU fell behind above %.0f%%)", 100 * s->ceiling);
}

int32_t stoker__split_gpu_count(double share, int32_t eligible)
{
    if (eligible <= 0 || !(share > 0))
        return 0;
    if (share >= 1)
        return eligible;
    int32_t k = (int32_t)floor(share * eligible + 0.5);
    k = k < 1 ? 1 : k;
    return eligible > 1 && k > eligible - 1 ? eligible - 1 : k;
}

bool stoker__split_to_gpu(double share, int32_t eligible, int32_t index)
{
    if (index < 0 || index >= eligible)
        return false;
    const int64_t k = stoker__split_gpu_count(share, eligible);
    /* record i is picked when the line through (0, 0) and (eligible, k) crosses a whole
     * number between i and i + 1 */
    return ((int64_t)index + 1) * k / eligible > (int64_t)index * k / eligible;
}
