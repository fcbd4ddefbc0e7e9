/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU/GPU split controller (src/loader/split.c).
 *
 * Beside a consumer that always waits (a benchmark with no model), with simulated sides whose
 * busy time per batch is a fixed cost plus records / throughput (with noise where said) and
 * batches queued for the GPU whenever its part of the last batch took longer than the CPU's:
 * the share rises until the GPU falls behind and settles in a band around equal finish times
 * (CPU 12k img/s, GPU 10k img/s: share 10/22), with and without records the GPU cannot take
 * and with a fixed GPU cost per batch; it follows a step change of either side; the CPU keeps
 * its floor, and a GPU that cannot keep up with the floor's share is left out; repeated GPU
 * failures send every record to the CPU for a while, then one batch retries, and a failed
 * retry doubles the wait. The routing of
 * records picks exactly the count, spread evenly, as a pure function of its arguments.
 *
 * Its objective, the consumer's step rate, with a simulated training job shaped as the
 * loader runs one: batches begun as ring slots come free, the CPU's part first, then the
 * GPU's (in order, ready some time after its decode), delivered in order to a consumer whose
 * step takes longer the more images the GPU decodes, every time noisy. A consumer slower than
 * the CPU alone keeps a share of 0; a faster one (ResNet-18 at 224 and 176 px, as measured
 * beside 16 cores) that starts slow, as a training job does, runs near its best rate within
 * 3 s of reaching its speed and then waits less than 1% of its time, the share in a band
 * around the best one; when the consumer slows down, the share falls back to 0; workers that
 * are not busy (the CPU is not the limit) get no GPU help. Rises in a row grow; a ring that
 * runs dry with busy workers gets a small rise before the consumer waits. The same jobs run
 * with the periods' rates, as the loader gives them (the records delivered and those each
 * side decoded), which move the share to what they ask for at once: up on waits and on a ring
 * running dry, down to where both sides keep pace when the GPU is behind, and down a step a
 * period while batches come in time and the rates ask for less. */
#include "testutil.h"

#include "loader/split.h"

#include <math.h>

typedef struct side {
    double rate;  /* records per second */
    double fixed; /* seconds per batch with any records */
} side;

typedef struct sim {
    side cpu, gpu;
    int32_t records, eligible;
    double noise; /* relative spread of each busy time (uniform, +- noise / 2) */
    uint64_t seed;
    double cpu_s, gpu_s; /* the last batch's busy times */
} sim;

static double busy(const side *s, int32_t n, sim *m)
{
    if (n == 0)
        return 0;
    const double u = (double)(t_rand(&m->seed) >> 11) / 9007199254740992.0;
    return (s->fixed + n / s->rate) * (1 + m->noise * (u - 0.5));
}

/* One batch at the controller's share, routed record by record; returns its measurements. */
static stoker__split_batch run_batch(sim *m, const stoker__split *s, bool gpu_fails)
{
    const double share = stoker__split_share(s);
    int32_t k = 0;
    for (int32_t i = 0; i < m->eligible; i++)
        k += stoker__split_to_gpu(share, m->eligible, i);
    T_EQ_INT(k, stoker__split_gpu_count(share, m->eligible));
    const int32_t cpu = m->records - (gpu_fails ? 0 : k);
    m->cpu_s = busy(&m->cpu, cpu, m);
    m->gpu_s = gpu_fails ? 0 : busy(&m->gpu, k, m);
    return (stoker__split_batch){.cpu_ns = (uint64_t)(m->cpu_s * 1e9),
                                 .gpu_ns = (uint64_t)(m->gpu_s * 1e9),
                                 .cpu_records = cpu,
                                 .gpu_records = gpu_fails ? 0 : k,
                                 .records = m->records,
                                 .eligible = m->eligible,
                                 .gpu_failed = gpu_fails};
}

/* Half the width of the band the share settles in: rises of at most 0.05 a period, falls of
 * 0.02. */
#define BAND 0.06

/* One batch, then a period of a consumer that waited half its time for busy workers, with two
 * batches queued for the GPU when its part took longer than the CPU's. */
static double step(sim *m, stoker__split *s, bool gpu_fails)
{
    const stoker__split_batch b = run_batch(m, s, gpu_fails);
    stoker__split_update(s, &b);
    const stoker__split_period hungry = {.seconds = 1,
                                         .waited = 0.5,
                                         .ahead = 0,
                                         .busy = 1,
                                         .gpu_queued = m->gpu_s > m->cpu_s ? 2 : 0};
    return stoker__split_consumed(s, &hungry);
}

/* |cpu - gpu| / the longer, of the last batch */
static double imbalance(const sim *m)
{
    const double hi = fmax(m->cpu_s, m->gpu_s);
    return hi > 0 ? fabs(m->cpu_s - m->gpu_s) / hi : 0;
}

/* n steps; the mean imbalance of the last `tail` of them. */
static double settle(sim *m, stoker__split *s, int n, int tail)
{
    double sum = 0;
    for (int i = 0; i < n; i++) {
        step(m, s, false);
        if (i >= n - tail)
            sum += imbalance(m);
    }
    return tail > 0 ? sum / tail : 0;
}

static void check_converges(void)
{
    /* all eligible: the share is the GPU's part of the total throughput */
    sim m = {.cpu = {12000, 0}, .gpu = {10000, 0}, .records = 256, .eligible = 256, .seed = 1};
    stoker__split s;
    stoker__split_init(&s, NULL, true);
    T_ASSERT(stoker__split_share(&s) == 0); /* the CPU first */
    const double mean = settle(&m, &s, 40, 20), want = 10000.0 / 22000.0;
    printf("12k/10k: share %.4f (want %.4f), mean imbalance %.3f, balance by the rates %.4f\n",
           stoker__split_share(&s), want, mean, stoker__split_cap(&s));
    T_ASSERT(fabs(stoker__split_share(&s) - want) < BAND);
    T_ASSERT(mean < 0.15);
    T_ASSERT(fabs(stoker__split_cap(&s) - want) < 0.01); /* the rates are measured right */

    /* 56 of 256 records only the CPU decodes: the GPU takes more of the eligible ones */
    sim p = {.cpu = {12000, 0}, .gpu = {10000, 0}, .records = 256, .eligible = 200, .seed = 2};
    stoker__split_init(&s, NULL, true);
    T_ASSERT(settle(&p, &s, 40, 20) < 0.15);
    T_ASSERT(fabs(stoker__split_share(&s) - want * 256 / 200) < BAND);
}

/* A GPU batch costs 4 ms whatever its size, and times are noisy: the split still settles
 * where both sides take the same time. */
static void check_fixed_cost(void)
{
    sim m = {.cpu = {12000, 0.0005},
             .gpu = {20000, 0.004},
             .records = 512,
             .eligible = 512,
             .noise = 0.06,
             .seed = 3};
    stoker__split s;
    stoker__split_init(&s, NULL, true);
    settle(&m, &s, 40, 0);
    const double sum = 40 * settle(&m, &s, 40, 40);
    /* where the two times are equal: 0.0005 + (512 - k) / 12000 = 0.004 + k / 20000 */
    const double k = (0.0005 - 0.004 + 512.0 / 12000) / (1.0 / 12000 + 1.0 / 20000);
    printf("fixed GPU cost: share %.4f (balance %.4f), mean imbalance %.3f\n",
           stoker__split_share(&s), k / 512, sum / 40);
    T_ASSERT(fabs(stoker__split_share(&s) - k / 512) < BAND);
    T_ASSERT(sum / 40 < 0.15);
}

static void check_step_change(void)
{
    sim m = {.cpu = {12000, 0}, .gpu = {10000, 0}, .records = 256, .eligible = 256, .seed = 4};
    stoker__split s;
    stoker__split_init(&s, NULL, true);
    settle(&m, &s, 40, 0);
    const double before = stoker__split_share(&s), after = 5000.0 / 17000.0;
    m.gpu.rate = 5000; /* the GPU halves its speed */
    settle(&m, &s, 5, 0);
    const double mid = stoker__split_share(&s);
    settle(&m, &s, 10, 0);
    printf("GPU 10k -> 5k: share %.4f, %.4f after 5 batches, %.4f after 15 (want %.4f)\n", before,
           mid, stoker__split_share(&s), after);
    T_ASSERT(mid < before - 0.08);                          /* falling at once */
    T_ASSERT(fabs(stoker__split_share(&s) - after) < BAND); /* there in 15 */

    m.cpu.rate = 24000; /* the CPU doubles its speed: the GPU's share falls again */
    settle(&m, &s, 15, 0);
    T_ASSERT(fabs(stoker__split_share(&s) - 5000.0 / 29000.0) < BAND);
}

static void check_floors(void)
{
    stoker__split s;
    stoker__split_init(&s, NULL, true);
    sim fast = {.cpu = {1000, 0}, .gpu = {1e6, 0}, .records = 256, .eligible = 256, .seed = 5};
    for (int i = 0; i < 30; i++) /* rises of at most 0.05 */
        step(&fast, &s, false);
    T_ASSERT(fabs(stoker__split_share(&s) - 0.95) < 1e-9); /* the CPU keeps its floor */
    T_ASSERT(fast.cpu_s > 0);
    stoker__split_init(&s, NULL, true);
    sim slow = {.cpu = {12000, 0}, .gpu = {50, 0}, .records = 256, .eligible = 256, .seed = 6};
    for (int i = 0; i < 10; i++) /* the GPU falls behind at its floor: it is left out, tried */
        T_ASSERT(step(&slow, &s, false) <= 0.05 + 1e-12); /* again, never given more */
    /* a floor of its own, and small batches keep one record on each side */
    const stoker__split_config cfg = {.floor = 0.2};
    stoker__split_init(&s, &cfg, true);
    for (int i = 0; i < 30; i++) /* rises of at most 0.05 */
        step(&fast, &s, false);
    T_ASSERT(fabs(stoker__split_share(&s) - 0.8) < 1e-9);
    T_EQ_INT(stoker__split_gpu_count(0.05, 3), 1);
    T_EQ_INT(stoker__split_gpu_count(0.95, 3), 2);
    T_EQ_INT(stoker__split_gpu_count(0.95, 1), 1);
    T_EQ_INT(stoker__split_gpu_count(0, 100), 0);
    T_EQ_INT(stoker__split_gpu_count(1, 100), 100);
    T_EQ_INT(stoker__split_gpu_count(0.5, 0), 0);
    /* no GPU: nothing ever goes there */
    stoker__split_init(&s, NULL, false);
    T_ASSERT(stoker__split_share(&s) == 0);
    sim cpu_only = {.cpu = {12000, 0}, .gpu = {10000, 0}, .records = 64, .eligible = 64};
    for (int i = 0; i < 5; i++)
        T_ASSERT(step(&cpu_only, &s, false) == 0);
    T_ASSERT(cpu_only.gpu_s == 0 && !stoker__split_fallen_back(&s));
}

/* Batches on the CPU alone until the share leaves 0; returns how many. */
static int fallback_length(sim *m, stoker__split *s)
{
    int n = 0;
    while (stoker__split_share(s) == 0) {
        T_ASSERT(stoker__split_fallen_back(s));
        step(m, s, false);
        T_ASSERT(m->gpu_s == 0);
        n++;
        T_ASSERT(n < 100000);
    }
    return n;
}

/* One batch whose GPU part failed; returns the share for the next (no consumer's period: the
 * split's answer to the failure alone). */
static double fail_batch(sim *m, stoker__split *s)
{
    const stoker__split_batch b = run_batch(m, s, true);
    return stoker__split_update(s, &b);
}

static void check_failures(void)
{
    sim m = {.cpu = {12000, 0}, .gpu = {10000, 0}, .records = 256, .eligible = 256, .seed = 7};
    const double want = 10000.0 / 22000.0;
    stoker__split s;
    stoker__split_init(&s, NULL, true);
    settle(&m, &s, 40, 0);
    double share = stoker__split_share(&s);
    /* two failures leave the share as it was; a success clears them */
    T_ASSERT(fail_batch(&m, &s) == share);
    T_ASSERT(fail_batch(&m, &s) == share);
    share = step(&m, &s, false);
    T_ASSERT(fabs(share - want) < BAND);
    T_ASSERT(fail_batch(&m, &s) == share && fail_batch(&m, &s) == share);
    /* the third in a row: the CPU takes everything for 64 batches */
    T_ASSERT(fail_batch(&m, &s) == 0);
    T_EQ_INT(fallback_length(&m, &s), 64);
    /* then one batch at the floor tries again; it fails: twice the wait */
    T_ASSERT(fabs(stoker__split_share(&s) - 0.05) < 1e-12 && !stoker__split_fallen_back(&s));
    T_ASSERT(fail_batch(&m, &s) == 0);
    T_EQ_INT(fallback_length(&m, &s), 128);
    /* this retry succeeds: the split resumes and settles again */
    T_ASSERT(step(&m, &s, false) > 0.05);
    settle(&m, &s, 20, 0);
    T_ASSERT(fabs(stoker__split_share(&s) - want) < BAND);
    /* and a later fallback waits the least again */
    for (int i = 0; i < 3; i++)
        fail_batch(&m, &s);
    T_EQ_INT(fallback_length(&m, &s), 64);
    /* a configured count and wait */
    const stoker__split_config cfg = {.max_failures = 1, .retry_after = 5};
    stoker__split_init(&s, &cfg, true);
    T_ASSERT(fail_batch(&m, &s) == 0);
    T_EQ_INT(fallback_length(&m, &s), 5);
    T_ASSERT(fail_batch(&m, &s) == 0);
    T_EQ_INT(fallback_length(&m, &s), 10);
    for (int i = 0; i < 10; i++) { /* the wait stops doubling at 64 times its start */
        T_ASSERT(fail_batch(&m, &s) == 0);
        const int n = fallback_length(&m, &s);
        T_EQ_INT(n, 5 << (i + 2 < 6 ? i + 2 : 6));
    }
}

static void check_routing(void)
{
    static const double shares[] = {0, 0.01, 0.05, 0.3, 10.0 / 22.0, 0.5, 0.77, 0.95, 1};
    for (int32_t e = 1; e <= 300; e++)
        for (size_t si = 0; si < sizeof shares / sizeof shares[0]; si++) {
            const double share = shares[si];
            const int32_t k = stoker__split_gpu_count(share, e);
            T_ASSERT(k >= 0 && k <= e);
            T_ASSERT(fabs(k - share * e) <= 1.0); /* the nearest count, or the floor's */
            int32_t picked = 0;
            for (int32_t i = 0; i < e; i++) {
                const bool g = stoker__split_to_gpu(share, e, i);
                T_ASSERT(g == stoker__split_to_gpu(share, e, i));
                picked += g;
                /* every prefix holds its part of the count, to within one record */
                T_ASSERT(fabs(picked - (double)(i + 1) * k / e) < 1.0);
            }
            T_EQ_INT(picked, k);
            T_ASSERT(!stoker__split_to_gpu(share, e, -1) && !stoker__split_to_gpu(share, e, e));
        }
}

/* ---- the objective: a simulated training job ---- */

/* Producers and a consumer around a ring of `depth` batches, as the loader runs them. Batch i
 * is begun when its slot is free (the consumer took batch i - depth) and the CPU is done with
 * batch i - 1; its share is the split's at that moment. The CPU decodes its records
 * (cpu_rate: all workers together), then the GPU its share (gpu_rate, in order, one batch at
 * a time) and the batch is ready gpu_latency later (the GPU's runs wait behind the consumer's
 * kernels); a batch with no GPU records is ready when the CPU is done. The consumer takes the
 * batches in order, waiting for one not ready, and its step takes step_s * (1 + slowdown *
 * share): the GPU's images cost its kernels time. Every time varies by +- noise / 2.
 * A consumer with host_s > 0 only queues its steps for the GPU (as one that replays a CUDA
 * graph): its host takes host_s a step and runs at most `queue` steps ahead of the GPU, which
 * computes the steps in order, each once its batch is taken; the batch's slot is given back
 * when its step is computed. */
#define JOB_KEEP 64 /* batches remembered: more than any depth here */

typedef struct job {
    double cpu_rate, gpu_rate, gpu_latency, step_s, slowdown, noise;
    double stall_p, stall_s; /* a GPU batch stalls the GPU this long with this chance */
    double host_s;           /* > 0: the host's time a step, the GPU computing it */
    int32_t queue;           /* ... and the steps the host may run ahead of the GPU */
    double gpu_t;            /* the GPU's clock: the end of the last step queued */
    int32_t records, depth;
    bool rates; /* the periods carry their rates, as the loader's do */
    uint64_t seed;
    /* the run */
    double t; /* the consumer's clock */
    double cpu_free, gpu_free;
    int64_t begun, taken; /* batches begun by the producers; taken by the consumer */
    double share[JOB_KEEP], cpu_done[JOB_KEEP], gpu_start[JOB_KEEP], ready[JOB_KEEP];
    double taken_at[JOB_KEEP];
    double period_t0, period_wait, period_ready, period_busy, period_queued;
    double period_cpu, period_gpu; /* records each side decoded in the batches begun */
    int32_t period_n;
    double waited; /* in all */
} job;

static double jitter(job *j)
{
    return 1 + j->noise * ((double)(t_rand(&j->seed) >> 11) / 9007199254740992.0 - 0.5);
}

/* When the next batch can be begun (its slot given back and the CPU free): INFINITY while its
 * slot's batch is not taken. */
static double next_begin(const job *j)
{
    const int64_t i = j->begun;
    if (i >= j->depth && j->taken <= i - j->depth)
        return INFINITY;
    const double slot = i >= j->depth ? j->taken_at[(i - j->depth) % JOB_KEEP] : 0;
    return fmax(slot, j->cpu_free);
}

static void begin_one(job *j, stoker__split *s)
{
    const double at = next_begin(j);
    const int64_t i = j->begun++ % JOB_KEEP;
    const int32_t k = stoker__split_gpu_count(stoker__split_share(s), j->records);
    const double cpu_s = (j->records - k) / j->cpu_rate * jitter(j);
    j->share[i] = (double)k / j->records;
    j->cpu_done[i] = j->cpu_free = at + cpu_s;
    double gpu_s = 0;
    if (k > 0) {
        gpu_s = k / j->gpu_rate * jitter(j);
        j->gpu_start[i] = fmax(j->cpu_done[i], j->gpu_free);
        j->gpu_free = j->gpu_start[i] + gpu_s;
        if (j->stall_p > 0 && (double)(t_rand(&j->seed) >> 11) / 9007199254740992.0 < j->stall_p)
            j->gpu_free += j->stall_s;
        j->ready[i] = j->gpu_free + j->gpu_latency * jitter(j);
    } else {
        j->gpu_start[i] = j->ready[i] = j->cpu_done[i];
    }
    j->period_busy += cpu_s;
    j->period_cpu += j->records - k;
    j->period_gpu += k;
    const stoker__split_batch b = {.cpu_ns = (uint64_t)(cpu_s * 1e9),
                                   .gpu_ns = (uint64_t)(gpu_s * 1e9),
                                   .cpu_records = j->records - k,
                                   .gpu_records = k,
                                   .records = j->records,
                                   .eligible = j->records};
    stoker__split_update(s, &b);
}

/* The producers begin every batch they can by time `now`. */
static void produce(job *j, stoker__split *s, double now)
{
    while (next_begin(j) <= now)
        begin_one(j, s);
}

/* One step of the consumer: take a batch (waiting if none is ready), tell the split once a
 * period of 8, compute. */
static void consume(job *j, stoker__split *s, double busy_scale)
{
    produce(j, s, j->t);
    int32_t ready = 0, queued = 0;
    for (int64_t b = j->taken; b < j->begun; b++) {
        const int64_t i = b % JOB_KEEP;
        ready += j->ready[i] <= j->t;
        queued += j->cpu_done[i] <= j->t && j->t < j->gpu_start[i];
    }
    const double t_call = j->t;
    while (j->begun <= j->taken) /* nothing decided meanwhile: begun at the share of now */
        begin_one(j, s);
    const int64_t i = j->taken % JOB_KEEP;
    j->t = fmax(j->t, j->ready[i]);
    const double waited = j->t - t_call;
    j->taken_at[i] = j->t;
    j->taken++;
    if (j->taken > 1) { /* as the loader: the first delivery starts the first period */
        j->waited += waited;
        j->period_wait += waited;
        j->period_ready += ready;
        j->period_queued += queued;
        if (++j->period_n == 8) {
            const double secs = j->t - j->period_t0;
            const stoker__split_period p = {.seconds = secs,
                                            .waited = j->period_wait,
                                            .ahead = j->period_ready / 8,
                                            .busy = fmin(1, busy_scale * j->period_busy / secs),
                                            .gpu_queued = j->period_queued / 8,
                                            .records = j->rates ? 8.0 * j->records : 0,
                                            .cpu_records = j->period_cpu,
                                            .gpu_records = j->period_gpu};
            stoker__split_consumed(s, &p);
            j->period_n = 0;
        }
    }
    if (j->period_n == 0) {
        j->period_t0 = j->t;
        j->period_wait = j->period_ready = j->period_busy = j->period_queued = 0;
        j->period_cpu = j->period_gpu = 0;
    }
    const double work = j->step_s * (1 + j->slowdown * j->share[i]) * jitter(j);
    if (j->host_s > 0) {
        j->gpu_t = fmax(j->gpu_t, j->t) + work;
        j->taken_at[i] = j->gpu_t;
        j->t = fmax(j->t + j->host_s, j->gpu_t - j->queue * j->step_s);
    } else {
        j->t += work;
    }
}

static void job_start(job *j, stoker__split *s)
{
    /* as the GPU stage sets them */
    const stoker__split_config cfg = {
        .ahead = 0.75 * j->depth, .low = 0.35 * j->depth, .slack = 0.5 * j->depth};
    stoker__split_init(s, &cfg, true);
}

/* The consumer's steady rate (batches per second) at share x: the slowest of the CPU, the GPU
 * and the consumer. */
static double job_rate(const job *j, double x)
{
    const double make = fmax((1 - x) * j->records / j->cpu_rate, x * j->records / j->gpu_rate);
    return 1 / fmax(make, j->step_s * (1 + j->slowdown * x));
}

/* Runs the job for `seconds`; over the last `tail` seconds: the share's range, the consumer's
 * rate (batches per second) and the share of its time it waited. */
static void job_run(job *j, stoker__split *s, double seconds, double tail, double busy_scale,
                    double *lo, double *hi, double *rate, double *wait)
{
    const double end = j->t + seconds;
    *lo = 1;
    *hi = 0;
    int64_t n0 = -1;
    double t0 = 0, w0 = 0;
    while (j->t < end) {
        consume(j, s, busy_scale);
        if (j->t >= end - tail) {
            if (n0 < 0) {
                n0 = j->taken;
                t0 = j->t;
                w0 = j->waited;
            }
            *lo = fmin(*lo, stoker__split_share(s));
            *hi = fmax(*hi, stoker__split_share(s));
        }
    }
    *rate = (double)(j->taken - n0) / (j->t - t0);
    *wait = (j->waited - w0) / (j->t - t0);
}

/* A job whose share must stay 0 for `seconds`, the workers' busy share scaled by busy_scale;
 * the split's last word must contain `why_part`. */
static void check_cpu_alone(job *j, double seconds, double busy_scale, const char *what,
                            const char *why_part)
{
    stoker__split s;
    job_start(j, &s);
    double lo, hi, rate, wait;
    job_run(j, &s, seconds, seconds, busy_scale, &lo, &hi, &rate, &wait);
    char why[160];
    stoker__split_describe(&s, why, sizeof why);
    printf("%s: share %.3f..%.3f, %.0f img/s; %s\n", what, lo, hi, rate * j->records, why);
    T_ASSERT(hi == 0);
    T_CONTAINS(why, why_part);
}

/* ResNet-50 beside 16 cores: the CPU alone makes 12k img/s, the model takes 4.7k. */
static void check_slow_consumer(void)
{
    job j = {.cpu_rate = 12000,
             .gpu_rate = 5000,
             .gpu_latency = 0.03,
             .step_s = 256 / 4700.0,
             .slowdown = 0.1,
             .noise = 0.2,
             .records = 256,
             .depth = 11,
             .seed = 11};
    check_cpu_alone(&j, 20, 1, "slow consumer", "the CPU decodes alone");
}

/* The best share of a job and the consumer's rate there (batches per second). */
static double best_share(const job *j, double *rate)
{
    double best = 0, best_x = 0;
    for (double x = 0; x <= 0.95; x += 0.001)
        if (job_rate(j, x) > best) {
            best = job_rate(j, x);
            best_x = x;
        }
    *rate = best;
    return best_x;
}

/* A job the CPU alone cannot feed, started as a training job starts: its first steps take
 * three times as long (the framework's first iterations), then the model runs at its speed.
 * Within 3 s of that the consumer runs at nearly its best rate, and from then on the share
 * stays in a band around the best one, with waits below 1%. */
static void check_fast_job(job *j, const char *what)
{
    double best;
    const double best_x = best_share(j, &best);
    stoker__split s;
    job_start(j, &s);
    double lo, hi, rate, wait;
    const double step_s = j->step_s;
    j->step_s = 3 * step_s;
    job_run(j, &s, 1.5, 1.5, 1, &lo, &hi, &rate, &wait);
    j->step_s = step_s;
    job_run(j, &s, 3, 3, 1, &lo, &hi, &rate, &wait); /* the first 3 s at speed */
    const double early = rate, early_wait = wait;
    job_run(j, &s, 30, 20, 1, &lo, &hi, &rate, &wait);
    char why[160];
    stoker__split_describe(&s, why, sizeof why);
    printf("%s: best share %.3f (%.0f img/s, CPU alone %.0f); first 3 s %.0f img/s, waited "
           "%.1f%%; then share %.3f..%.3f, %.0f img/s, waited %.2f%%; %s\n",
           what, best_x, best * j->records, job_rate(j, 0) * j->records, early * j->records,
           100 * early_wait, lo, hi, rate * j->records, 100 * wait, why);
    T_ASSERT(early > 0.93 * best); /* settled within a few seconds */
    T_ASSERT(rate > 0.97 * best);
    T_ASSERT(wait < 0.01);
    T_ASSERT(hi - lo < 0.15); /* a band, no oscillation */
    T_ASSERT(lo > best_x - 0.1 && hi < best_x + 0.15);
}

/* ResNet-18 at 224 px beside 16 cores: the model takes 13.2k img/s, the CPU workers make
 * 9.6k beside it, the GPU 5k, and each 1,000 img/s the GPU decodes costs the step about 1%.
 * At 176 px: the model takes 19k, the CPU 11.4k, the GPU 10k, with a dearer GPU. The GPU's
 * part of a batch is ready 30 ms after its decode (its runs wait behind the model's
 * kernels); the ring holds 11 batches, as the loader's default with 13 workers. */
static void check_fast_consumer(bool rates)
{
    job r224 = {.cpu_rate = 9600,
                .gpu_rate = 5000,
                .gpu_latency = 0.03,
                .step_s = 256 / 13200.0,
                .slowdown = 0.13,
                .noise = 0.2,
                .records = 256,
                .depth = 11,
                .rates = rates,
                .seed = 12};
    check_fast_job(&r224, rates ? "fast consumer, 224 px, rates" : "fast consumer, 224 px");
    job r176 = {.cpu_rate = 11400,
                .gpu_rate = 10000,
                .gpu_latency = 0.03,
                .step_s = 256 / 19000.0,
                .slowdown = 0.3,
                .noise = 0.2,
                .records = 256,
                .depth = 11,
                .rates = rates,
                .seed = 13};
    check_fast_job(&r176, rates ? "fast consumer, 176 px, rates" : "fast consumer, 176 px");

    /* the model grows slower (evaluation, a bigger input): the share goes back to 0 */
    stoker__split s;
    job_start(&r176, &s);
    double lo, hi, rate, wait;
    job_run(&r176, &s, 10, 1, 1, &lo, &hi, &rate, &wait);
    T_ASSERT(stoker__split_share(&s) > 0.2);
    r176.step_s = 256 / 6000.0;
    job_run(&r176, &s, 12, 4, 1, &lo, &hi, &rate, &wait); /* falls of 0.02 a period */
    printf("consumer slowed down: share %.3f..%.3f\n", lo, hi);
    T_ASSERT(hi == 0);
}

/* The 176 px job with a consumer that only queues its steps (a CUDA graph replayed): its
 * host waits for nearly every batch, so that the rates take its own rate for many times what
 * it computes and ask for every image the GPU can take. Beside a model whose kernels run back
 * to back the GPU decodes less (4,500 img/s), so the best share is where both sides keep
 * pace, and the GPU falls behind above it: where it fell behind is where later rises stop.
 * Without that the share rose by the rates' jumps past twice the best every few periods and
 * came down a tenth a period (as measured on the H200 with ResNet-18: 0.26 to 0.88 and back). */
static void check_queued_steps(void)
{
    job j = {.cpu_rate = 11400,
             .gpu_rate = 4500,
             .gpu_latency = 0.03,
             .step_s = 256 / 19000.0,
             .slowdown = 0.3,
             .noise = 0.2,
             .records = 256,
             .depth = 11,
             .rates = true,
             .seed = 14,
             .host_s = 0.0003,
             .queue = 2};
    double best;
    const double best_x = best_share(&j, &best);
    stoker__split s;
    job_start(&j, &s);
    double lo, hi, rate, wait;
    job_run(&j, &s, 5, 5, 1, &lo, &hi, &rate, &wait);
    const double early = rate;
    job_run(&j, &s, 30, 20, 1, &lo, &hi, &rate, &wait);
    char why[200];
    stoker__split_describe(&s, why, sizeof why);
    printf("queued steps, 176 px: best share %.3f (%.0f img/s, CPU alone %.0f); first 5 s "
           "%.0f img/s; then share %.3f..%.3f, %.0f img/s, the host waited %.1f%%; %s\n",
           best_x, best * j.records, job_rate(&j, 0) * j.records, early * j.records, lo, hi,
           rate * j.records, 100 * wait, why);
    T_ASSERT(early > 0.85 * best);
    T_ASSERT(rate > 0.93 * best);
    T_ASSERT(hi < best_x + 0.1);
}

/* The consumer waits, but the workers are mostly idle (reads, not decoding, hold them up):
 * the GPU's decoding would not help, and the share stays 0. */
static void check_not_cpu_bound(void)
{
    job j = {.cpu_rate = 11400,
             .gpu_rate = 10000,
             .gpu_latency = 0.03,
             .step_s = 256 / 19000.0,
             .slowdown = 0.3,
             .noise = 0.2,
             .records = 256,
             .depth = 11,
             .seed = 14};
    check_cpu_alone(&j, 10, 0.3, "workers not busy", "the CPU is not the limit");
}

/* The consumer waits while batches queue for the GPU: the GPU is the slower side, and its
 * share falls, whatever the workers' load; without the queue the same waits raise it. */
static void check_gpu_behind(void)
{
    stoker__split s;
    stoker__split_init(&s, NULL, true);
    const stoker__split_period hungry = {.seconds = 1, .waited = 0.3, .busy = 1};
    /* rises in a row may each be twice the last's, up to 4 times step_max (0.05): 0.05,
     * then 0.10, then the gain's part of the waited share, 0.6 * 0.3 */
    const double rises[] = {0.05, 0.15, 0.33, 0.51};
    for (int i = 0; i < 4; i++) {
        stoker__split_consumed(&s, &hungry);
        T_ASSERT(fabs(stoker__split_share(&s) - rises[i]) < 1e-9);
    }
    const double high = stoker__split_share(&s);
    const stoker__split_period behind = {.seconds = 1, .waited = 0.3, .busy = 1, .gpu_queued = 3};
    stoker__split_consumed(&s, &behind);
    T_ASSERT(fabs(stoker__split_share(&s) - (high - 0.02)) < 1e-9);
    char why[160];
    stoker__split_describe(&s, why, sizeof why);
    printf("GPU behind: %s\n", why);
    T_CONTAINS(why, "batches queued for the GPU");
}

/* The consumer does not wait yet, but fewer batches are ready at each period, below the
 * low mark, with the workers busy: the GPU takes step_min more before the consumer waits; the
 * ring filling again, or workers that are not busy, hold the share. */
static void check_running_dry(void)
{
    const stoker__split_config cfg = {.ahead = 8, .low = 4};
    stoker__split s;
    stoker__split_init(&s, &cfg, true);
    const stoker__split_period hungry = {.seconds = 1, .waited = 0.3, .busy = 1};
    stoker__split_consumed(&s, &hungry);
    T_ASSERT(fabs(stoker__split_share(&s) - 0.05) < 1e-9);
    stoker__split_period p = {.seconds = 1, .ahead = 3.5, .busy = 0.9};
    stoker__split_consumed(&s, &p); /* more ready than at the period before: the ring fills */
    T_ASSERT(fabs(stoker__split_share(&s) - 0.05) < 1e-9);
    p.ahead = 3;
    stoker__split_consumed(&s, &p); /* fewer: it runs dry */
    T_ASSERT(fabs(stoker__split_share(&s) - 0.07) < 1e-9);
    char why[160];
    stoker__split_describe(&s, why, sizeof why);
    printf("running dry: %s\n", why);
    T_CONTAINS(why, "and falling");
    p.ahead = 2;
    stoker__split_consumed(&s, &p);
    T_ASSERT(fabs(stoker__split_share(&s) - 0.09) < 1e-9);
    p.ahead = 3; /* filling again */
    stoker__split_consumed(&s, &p);
    T_ASSERT(fabs(stoker__split_share(&s) - 0.09) < 1e-9);
    p.ahead = 3;
    p.busy = 0.2; /* the workers are not the limit */
    stoker__split_consumed(&s, &p);
    T_ASSERT(fabs(stoker__split_share(&s) - 0.09) < 1e-9);
    p.busy = 0.9;
    p.ahead = 5; /* above the low mark */
    stoker__split_consumed(&s, &p);
    p.ahead = 4.5;
    stoker__split_consumed(&s, &p);
    T_ASSERT(fabs(stoker__split_share(&s) - 0.09) < 1e-9);
    /* no low mark: the same periods hold the share */
    stoker__split_init(&s, NULL, true);
    stoker__split_consumed(&s, &hungry);
    p.ahead = 0.5;
    stoker__split_consumed(&s, &p);
    p.ahead = 0.25;
    stoker__split_consumed(&s, &p);
    T_ASSERT(fabs(stoker__split_share(&s) - 0.05) < 1e-9);
}

/* Idle workers take records back: with the consumer not waiting, the workers under
 * busy_slack and half the ring ready, or batches queued for the GPU, the share falls by
 * step_down a period (not while the workers are busy, nor with few batches ready and none
 * queued for the GPU); a ring running dry because its batches wait for the GPU is no cue to
 * give the GPU more. */
static void check_slack(void)
{
    const stoker__split_config cfg = {.ahead = 8, .low = 4, .slack = 5.5};
    stoker__split s;
    stoker__split_init(&s, &cfg, true);
    const stoker__split_period hungry = {.seconds = 1, .waited = 0.5, .busy = 1};
    for (int i = 0; i < 3; i++) /* rises of 0.05, 0.10, 0.20 */
        stoker__split_consumed(&s, &hungry);
    T_ASSERT(fabs(stoker__split_share(&s) - 0.35) < 1e-9);
    stoker__split_period p = {.seconds = 1, .ahead = 7.5, .busy = 0.6};
    stoker__split_consumed(&s, &p); /* below `ahead` (8): the dead band held it before */
    T_ASSERT(fabs(stoker__split_share(&s) - 0.33) < 1e-9);
    char why[200];
    stoker__split_describe(&s, why, sizeof why);
    printf("slack: %s\n", why);
    T_CONTAINS(why, "the workers 60% busy: the CPU takes more back, the GPU 33%");
    p.busy = 0.9; /* the workers are busy: the share holds */
    stoker__split_consumed(&s, &p);
    T_ASSERT(fabs(stoker__split_share(&s) - 0.33) < 1e-9);
    p.busy = 0.6;
    p.ahead = 4.5; /* few batches ready, none held by the GPU: it holds */
    stoker__split_consumed(&s, &p);
    T_ASSERT(fabs(stoker__split_share(&s) - 0.33) < 1e-9);
    p.waited = 0.1; /* the consumer waited: no fall */
    p.ahead = 7.5;
    stoker__split_consumed(&s, &p);
    T_ASSERT(stoker__split_share(&s) >= 0.33 - 1e-9);
    /* the ring runs dry, its batches held by the GPU, the workers idle: less, not more */
    const double before = stoker__split_share(&s);
    p = (stoker__split_period){.seconds = 1, .ahead = 1, .busy = 0.6, .gpu_queued = 2};
    stoker__split_consumed(&s, &p);
    p.ahead = 0.5;
    stoker__split_consumed(&s, &p);
    T_ASSERT(fabs(stoker__split_share(&s) - (before - 0.04)) < 1e-9);
    /* ... and with the workers busy, the dry ring's rule does not fire either */
    p.busy = 0.95;
    p.ahead = 0.25;
    stoker__split_consumed(&s, &p);
    T_ASSERT(fabs(stoker__split_share(&s) - (before - 0.04)) < 1e-9);

    /* a job the share rose too far for (as a training job's first waits send it) comes back
     * to its band: ResNet-18-like at 224 px beside a GPU that keeps up with half the images,
     * its part ready 60 ms late, so that 7-8 batches are ready at the consumer's calls:
     * under the three-quarters of the ring at which the share used to fall */
    job j = {.cpu_rate = 9600,
             .gpu_rate = 10000,
             .gpu_latency = 0.06,
             .step_s = 256 / 13200.0,
             .slowdown = 0.13,
             .noise = 0.2,
             .records = 256,
             .depth = 11,
             .seed = 15};
    double best;
    const double best_x = best_share(&j, &best);
    job_start(&j, &s);
    for (int i = 0; i < 4; i++)
        stoker__split_consumed(&s, &hungry);
    const double high = stoker__split_share(&s);
    double lo, hi, rate, wait;
    job_run(&j, &s, 20, 10, 1, &lo, &hi, &rate, &wait);
    stoker__split_describe(&s, why, sizeof why);
    printf("share risen to %.2f: best %.3f (%.0f img/s); after 10 s share %.3f..%.3f, %.0f "
           "img/s, waited %.2f%%; %s\n",
           high, best_x, best * j.records, lo, hi, rate * j.records, 100 * wait, why);
    T_ASSERT(high > 0.5);
    T_ASSERT(hi < best_x + 0.15);
    T_ASSERT(rate > 0.97 * best);
    T_ASSERT(wait < 0.01);
}

/* With the period's rates the share moves to what they ask for: on waits, up to the
 * consumer's own rate less the workers' (plus the margin) at once, at most `jump` a period;
 * with batches queued for the GPU, down to where both sides keep pace, at most `drop` a
 * period; with batches in time and workers that would make more than the consumer takes, down
 * a step a period to what the rates ask for, and no further; a ring running dry, up to what
 * they ask for. The rates are smoothed over periods. */
static void check_rates(void)
{
    const stoker__split_config cfg = {.ahead = 8, .low = 4};
    stoker__split s;
    stoker__split_init(&s, &cfg, true);
    /* the consumer takes 6,000 records in its own 0.6 s (10,000 a second); the workers made
     * 5,000, busy all the time: the GPU needs half, 0.54 with the margin; 0.3 at once */
    stoker__split_period p = {.seconds = 1,
                              .waited = 0.4,
                              .busy = 1,
                              .records = 6000,
                              .cpu_records = 5000,
                              .gpu_records = 0};
    stoker__split_consumed(&s, &p);
    T_ASSERT(fabs(stoker__split_share(&s) - 0.3) < 1e-9);
    /* a period at the new share, waits still: the workers at the same rate, 8,000 records in
     * the consumer's own 0.8 s: still half for the GPU, reached now (not a rise on a rise) */
    p = (stoker__split_period){.seconds = 1,
                               .waited = 0.2,
                               .busy = 1,
                               .records = 8000,
                               .cpu_records = 5000,
                               .gpu_records = 3000};
    stoker__split_consumed(&s, &p);
    T_ASSERT(fabs(stoker__split_share(&s) - 0.54) < 1e-9);
    stoker__split_consumed(&s, &p);
    T_ASSERT(fabs(stoker__split_share(&s) - 0.56) < 1e-9); /* waits again: step_min more */
    char why[160];
    stoker__split_describe(&s, why, sizeof why);
    T_CONTAINS(why, "the GPU takes 56% of the images it can");
    /* batches queue for the GPU: it made 2,000 while the workers made 4,000 busy 80% of the
     * time (5,000 busy all of it): 2/7 keeps pace, reached 0.1 a period */
    p = (stoker__split_period){.seconds = 1,
                               .waited = 0.1,
                               .busy = 0.8,
                               .gpu_queued = 3,
                               .records = 6000,
                               .cpu_records = 4000,
                               .gpu_records = 2000};
    stoker__split_consumed(&s, &p);
    T_ASSERT(fabs(stoker__split_share(&s) - 0.46) < 1e-9);
    stoker__split_consumed(&s, &p);
    stoker__split_consumed(&s, &p);
    T_ASSERT(fabs(stoker__split_share(&s) - 2.0 / 7.0) < 1e-9);
    /* the consumer waits again for busy workers, now 80% of the period: its own rate, read
     * from 0.2 s, comes to more than twice what it is given (smoothed), and is unsure: the
     * share rises to 2/7, where the GPU last kept pace, and above it by step_min a period */
    p = (stoker__split_period){.seconds = 1,
                               .waited = 0.8,
                               .busy = 1,
                               .records = 6000,
                               .cpu_records = 5000,
                               .gpu_records = 1000};
    stoker__split_consumed(&s, &p);
    T_ASSERT(fabs(stoker__split_share(&s) - (2.0 / 7.0 + 0.02)) < 1e-9);
    stoker__split_consumed(&s, &p);
    T_ASSERT(fabs(stoker__split_share(&s) - (2.0 / 7.0 + 0.04)) < 1e-9);
    /* it falls behind again, now at 3/7 by the rates: that is where rises stop */
    p = (stoker__split_period){.seconds = 1,
                               .waited = 0.1,
                               .busy = 0.8,
                               .gpu_queued = 3,
                               .records = 6000,
                               .cpu_records = 4000,
                               .gpu_records = 3750};
    stoker__split_consumed(&s, &p);
    T_ASSERT(fabs(stoker__split_share(&s) - (2.0 / 7.0 + 0.02)) < 1e-9); /* step_down */
    p = (stoker__split_period){.seconds = 1,
                               .waited = 0.8,
                               .busy = 1,
                               .records = 6000,
                               .cpu_records = 5000,
                               .gpu_records = 1000};
    stoker__split_consumed(&s, &p);
    T_ASSERT(fabs(stoker__split_share(&s) - 3.0 / 7.0) < 1e-9);
    stoker__split_describe(&s, why, sizeof why);
    T_CONTAINS(why, "the GPU fell behind above 43%");

    /* a consumer that waits less than half its time: its rate is sure, and after the GPU fell
     * behind at 1/6 the share rises past that to what the rates ask for */
    stoker__split_init(&s, &cfg, true);
    p = (stoker__split_period){
        .seconds = 1, .waited = 0.4, .busy = 1, .records = 6000, .cpu_records = 5000};
    stoker__split_consumed(&s, &p); /* 0.3 */
    p = (stoker__split_period){.seconds = 1,
                               .waited = 0.1,
                               .busy = 0.8,
                               .gpu_queued = 3,
                               .records = 6000,
                               .cpu_records = 4000,
                               .gpu_records = 1000};
    stoker__split_consumed(&s, &p);
    T_ASSERT(fabs(stoker__split_share(&s) - 0.2) < 1e-9); /* the most a period: drop */
    p = (stoker__split_period){.seconds = 1,
                               .waited = 0.4,
                               .busy = 1,
                               .records = 6000,
                               .cpu_records = 5000,
                               .gpu_records = 1000};
    stoker__split_consumed(&s, &p);
    T_ASSERT(stoker__split_share(&s) > 0.4);
    stoker__split_describe(&s, why, sizeof why);
    T_ASSERT(strstr(why, "fell behind above") == NULL); /* the ceiling bounded nothing */

    /* batches in time, 5 ready: the consumer takes 10,000 a second, the workers would make
     * 5,000 (4,000 at 80% busy): half asked for, above the share, which holds */
    stoker__split_init(&s, &cfg, true);
    p = (stoker__split_period){
        .seconds = 1, .waited = 0.4, .busy = 1, .records = 6000, .cpu_records = 5000};
    stoker__split_consumed(&s, &p); /* 0.3, as above */
    p = (stoker__split_period){.seconds = 1,
                               .ahead = 5,
                               .busy = 0.8,
                               .records = 10000,
                               .cpu_records = 4000,
                               .gpu_records = 6000};
    for (int i = 0; i < 5; i++)
        stoker__split_consumed(&s, &p);
    T_ASSERT(fabs(stoker__split_share(&s) - 0.3) < 1e-9);
    /* the consumer slows to 8,000 and the workers, half busy, would make 9,600: the CPU alone
     * is enough; the smoothed rates come to say so, and the share falls a step a period, to
     * the floor, then none */
    p = (stoker__split_period){.seconds = 1,
                               .ahead = 5,
                               .busy = 0.5,
                               .records = 8000,
                               .cpu_records = 4800,
                               .gpu_records = 3200};
    int periods = 0;
    while (stoker__split_share(&s) == 0.3 && periods < 3) {
        stoker__split_consumed(&s, &p);
        periods++;
    }
    T_ASSERT(fabs(stoker__split_share(&s) - 0.28) < 1e-9); /* within a few periods, one step */
    stoker__split_describe(&s, why, sizeof why);
    printf("rates: %s\n", why);
    T_CONTAINS(why, "the workers would make 7944 of the 8720 img/s taken: the GPU takes less");
    for (int i = 0; i < 20; i++)
        stoker__split_consumed(&s, &p);
    T_ASSERT(stoker__split_share(&s) == 0);

    /* ... but not with few batches ready (under `low`) */
    stoker__split_init(&s, &cfg, true);
    p = (stoker__split_period){
        .seconds = 1, .waited = 0.4, .busy = 1, .records = 6000, .cpu_records = 5000};
    stoker__split_consumed(&s, &p);
    p = (stoker__split_period){.seconds = 1,
                               .ahead = 3.5,
                               .busy = 0.4,
                               .records = 6000,
                               .cpu_records = 6000,
                               .gpu_records = 0};
    for (int i = 0; i < 5; i++)
        stoker__split_consumed(&s, &p);
    T_ASSERT(fabs(stoker__split_share(&s) - 0.3) < 1e-9);
    p.ahead = 5; /* now it may */
    stoker__split_consumed(&s, &p);
    T_ASSERT(fabs(stoker__split_share(&s) - 0.28) < 1e-9);

    /* the ring runs dry with the workers busy: up to what the rates ask for, at once: the
     * consumer takes 10,000 a second, the workers make 5,000 */
    stoker__split_init(&s, &cfg, true);
    p = (stoker__split_period){.seconds = 1,
                               .ahead = 5,
                               .busy = 1,
                               .records = 10000,
                               .cpu_records = 5000,
                               .gpu_records = 0};
    stoker__split_consumed(&s, &p);
    T_ASSERT(stoker__split_share(&s) == 0);
    p.ahead = 3;
    stoker__split_consumed(&s, &p);
    T_ASSERT(fabs(stoker__split_share(&s) - 0.3) < 1e-9);
    p.ahead = 2;
    stoker__split_consumed(&s, &p);
    T_ASSERT(fabs(stoker__split_share(&s) - 0.54) < 1e-9);
}

int main(void)
{
    check_converges();
    check_fixed_cost();
    check_step_change();
    check_floors();
    check_failures();
    check_routing();
    check_slow_consumer();
    check_fast_consumer(false);
    check_fast_consumer(true);
    check_queued_steps();
    check_not_cpu_bound();
    check_gpu_behind();
    check_running_dry();
    check_slack();
    check_rates();
    return 0;
}
