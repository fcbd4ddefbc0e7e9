/* The CPU/GPU split controller (src/loader/split.c) driven by simulated sides whose busy time
 * per batch is a fixed cost plus records / throughput (with noise where said): it converges
 * to equal finish times (CPU 12k img/s, GPU 10k img/s: share 10/22), with and without
 * records the GPU cannot take and with a fixed GPU cost per batch; it follows a step change
 * of either side within a few batches; the floors keep both sides working; repeated GPU
 * failures send every record to the CPU for a while, then one batch retries, and a failed
 * retry doubles the wait. The routing of records picks exactly the count, spread evenly,
 * as a pure function of its arguments. */
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

static double step(sim *m, stoker__split *s, bool gpu_fails)
{
    const stoker__split_batch b = run_batch(m, s, gpu_fails);
    return stoker__split_update(s, &b);
}

/* |cpu - gpu| / the longer, of the last batch */
static double imbalance(const sim *m)
{
    const double hi = fmax(m->cpu_s, m->gpu_s);
    return hi > 0 ? fabs(m->cpu_s - m->gpu_s) / hi : 0;
}

static void check_converges(void)
{
    /* all eligible: the share is the GPU's part of the total throughput */
    sim m = {.cpu = {12000, 0}, .gpu = {10000, 0}, .records = 256, .eligible = 256, .seed = 1};
    stoker__split s;
    stoker__split_init(&s, NULL, true);
    T_ASSERT(fabs(stoker__split_share(&s) - 0.5) < 1e-12);
    for (int i = 0; i < 5; i++)
        step(&m, &s, false);
    const double want = 10000.0 / 22000.0;
    printf("12k/10k: share %.4f (want %.4f), imbalance %.3f\n", stoker__split_share(&s), want,
           imbalance(&m));
    T_ASSERT(fabs(stoker__split_share(&s) - want) < 0.01);
    step(&m, &s, false);
    T_ASSERT(imbalance(&m) < 0.02);

    /* 56 of 256 records only the CPU decodes: the GPU takes more of the eligible ones */
    sim p = {.cpu = {12000, 0}, .gpu = {10000, 0}, .records = 256, .eligible = 200, .seed = 2};
    stoker__split_init(&s, NULL, true);
    for (int i = 0; i < 5; i++)
        step(&p, &s, false);
    T_ASSERT(fabs(stoker__split_share(&s) - want * 256 / 200) < 0.01);
    step(&p, &s, false);
    T_ASSERT(imbalance(&p) < 0.02);
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
    for (int i = 0; i < 40; i++)
        step(&m, &s, false);
    double sum = 0, worst_gap = 0;
    for (int i = 0; i < 40; i++) {
        step(&m, &s, false);
        sum += imbalance(&m);
        worst_gap = fmax(worst_gap, imbalance(&m));
    }
    /* where the two times are equal: 0.0005 + (512 - k) / 12000 = 0.004 + k / 20000 */
    const double k = (0.0005 - 0.004 + 512.0 / 12000) / (1.0 / 12000 + 1.0 / 20000);
    printf("fixed GPU cost: share %.4f (balance %.4f), mean imbalance %.3f, worst %.3f\n",
           stoker__split_share(&s), k / 512, sum / 40, worst_gap);
    T_ASSERT(fabs(stoker__split_share(&s) - k / 512) < 0.03);
    T_ASSERT(sum / 40 < 0.05);
}

static void check_step_change(void)
{
    sim m = {.cpu = {12000, 0}, .gpu = {10000, 0}, .records = 256, .eligible = 256, .seed = 4};
    stoker__split s;
    stoker__split_init(&s, NULL, true);
    for (int i = 0; i < 20; i++)
        step(&m, &s, false);
    const double before = stoker__split_share(&s), after = 5000.0 / 17000.0;
    m.gpu.rate = 5000; /* the GPU halves its speed */
    for (int i = 0; i < 3; i++)
        step(&m, &s, false);
    const double mid = stoker__split_share(&s);
    for (int i = 0; i < 5; i++)
        step(&m, &s, false);
    printf("GPU 10k -> 5k: share %.4f, %.4f after 3 batches, %.4f after 8 (want %.4f)\n", before,
           mid, stoker__split_share(&s), after);
    T_ASSERT(mid < (before + after) / 2);                   /* past half way in 3 */
    T_ASSERT(fabs(stoker__split_share(&s) - after) < 0.01); /* there in 8 */

    m.cpu.rate = 24000; /* the CPU doubles its speed: the GPU's share falls again */
    for (int i = 0; i < 8; i++)
        step(&m, &s, false);
    T_ASSERT(fabs(stoker__split_share(&s) - 5000.0 / 29000.0) < 0.01);
}

static void check_floors(void)
{
    stoker__split s;
    stoker__split_init(&s, NULL, true);
    sim fast = {.cpu = {1000, 0}, .gpu = {1e6, 0}, .records = 256, .eligible = 256, .seed = 5};
    for (int i = 0; i < 10; i++)
        step(&fast, &s, false);
    T_ASSERT(fabs(stoker__split_share(&s) - 0.95) < 1e-9); /* the CPU keeps its floor */
    T_ASSERT(fast.cpu_s > 0);
    stoker__split_init(&s, NULL, true);
    sim slow = {.cpu = {12000, 0}, .gpu = {50, 0}, .records = 256, .eligible = 256, .seed = 6};
    for (int i = 0; i < 10; i++)
        step(&slow, &s, false);
    T_ASSERT(fabs(stoker__split_share(&s) - 0.05) < 1e-9); /* the GPU keeps its floor */
    T_ASSERT(slow.gpu_s > 0);
    /* a floor of its own, and small batches keep one record on each side */
    const stoker__split_config cfg = {.floor = 0.2};
    stoker__split_init(&s, &cfg, true);
    for (int i = 0; i < 10; i++)
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

static void check_failures(void)
{
    sim m = {.cpu = {12000, 0}, .gpu = {10000, 0}, .records = 256, .eligible = 256, .seed = 7};
    const double want = 10000.0 / 22000.0;
    stoker__split s;
    stoker__split_init(&s, NULL, true);
    for (int i = 0; i < 5; i++)
        step(&m, &s, false);
    double share = stoker__split_share(&s);
    /* two failures leave the share as it was; a success clears them */
    T_ASSERT(step(&m, &s, true) == share);
    T_ASSERT(step(&m, &s, true) == share);
    share = step(&m, &s, false);
    T_ASSERT(fabs(share - want) < 0.01);
    T_ASSERT(step(&m, &s, true) == share && step(&m, &s, true) == share);
    /* the third in a row: the CPU takes everything for 64 batches */
    T_ASSERT(step(&m, &s, true) == 0);
    T_EQ_INT(fallback_length(&m, &s), 64);
    /* then one batch at the floor tries again; it fails: twice the wait */
    T_ASSERT(fabs(stoker__split_share(&s) - 0.05) < 1e-12 && !stoker__split_fallen_back(&s));
    T_ASSERT(step(&m, &s, true) == 0);
    T_EQ_INT(fallback_length(&m, &s), 128);
    /* this retry succeeds: the split resumes and settles again */
    T_ASSERT(step(&m, &s, false) > 0.05);
    for (int i = 0; i < 3; i++)
        step(&m, &s, false);
    T_ASSERT(fabs(stoker__split_share(&s) - want) < 0.01);
    /* and a later fallback waits the least again */
    for (int i = 0; i < 3; i++)
        step(&m, &s, true);
    T_EQ_INT(fallback_length(&m, &s), 64);
    /* a configured count and wait */
    const stoker__split_config cfg = {.max_failures = 1, .retry_after = 5};
    stoker__split_init(&s, &cfg, true);
    T_ASSERT(step(&m, &s, true) == 0);
    T_EQ_INT(fallback_length(&m, &s), 5);
    T_ASSERT(step(&m, &s, true) == 0);
    T_EQ_INT(fallback_length(&m, &s), 10);
    for (int i = 0; i < 10; i++) { /* the wait stops doubling at 64 times its start */
        T_ASSERT(step(&m, &s, true) == 0);
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

int main(void)
{
    check_converges();
    check_fixed_cost();
    check_step_change();
    check_floors();
    check_failures();
    check_routing();
    return 0;
}
