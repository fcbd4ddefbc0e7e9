/* The CPU/GPU split controller (split.h). */
#include "loader/split.h"

#include <math.h>

#define DEFAULT_FLOOR 0.05
#define DEFAULT_SMOOTHING 0.4
#define DEFAULT_INITIAL 0.5
#define DEFAULT_MAX_FAILURES 3
#define DEFAULT_RETRY_AFTER 64
#define MAX_WAIT_DOUBLINGS 6 /* a fallback lasts at most 64 times retry_after batches */

static double clamp(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

void stoker__split_init(stoker__split *s, const stoker__split_config *cfg, bool gpu)
{
    *s = (stoker__split){0};
    if (cfg)
        s->cfg = *cfg;
    stoker__split_config *c = &s->cfg;
    c->floor = c->floor > 0 && c->floor < 0.5 ? c->floor : DEFAULT_FLOOR;
    c->smoothing = c->smoothing > 0 && c->smoothing <= 1 ? c->smoothing : DEFAULT_SMOOTHING;
    c->initial = c->initial > 0 && c->initial < 1 ? c->initial : DEFAULT_INITIAL;
    c->max_failures = c->max_failures > 0 ? c->max_failures : DEFAULT_MAX_FAILURES;
    c->retry_after = c->retry_after > 0 ? c->retry_after : DEFAULT_RETRY_AFTER;
    s->gpu = gpu;
    s->share = gpu ? clamp(c->initial, c->floor, 1 - c->floor) : 0;
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
        return s->share;                                               /* nothing to go by yet */
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
        if (s->retrying) /* the GPU works again: the next fallback waits the least */
            s->wait = s->cfg.retry_after;
        s->retrying = false;
        measure(&s->gpu_rate, b->gpu_records, b->gpu_ns, w);
    }
    if (!s->retrying)
        s->share = balance(s);
    return s->share;
}

double stoker__split_share(const stoker__split *s)
{
    return s->share;
}

bool stoker__split_fallen_back(const stoker__split *s)
{
    return s->gpu && s->fallback_left > 0;
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
