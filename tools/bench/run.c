/* SPDX-License-Identifier: Apache-2.0 */
/* The timed run: warm-up batches, then the epochs, with a simulated consumer, a timeline
 * sampled every quarter second, a heartbeat every 5 s and a clean stop on SIGINT. */
#include "bench.h"
#include "cli.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define SAMPLE_EVERY 0.25 /* s between timeline points */
#define HEARTBEAT_EVERY 5.0

static void dump_batch(FILE *f, const stoker_batch *b)
{
    const int64_t *ids = stoker_batch_ids(b);
    for (int64_t j = 0; j < stoker_batch_count(b); j++)
        fprintf(f, j ? " %" PRId64 : "%" PRId64, ids[j]);
    fputc('\n', f);
}

/* Takes the next batch; STOKER_END at the end of an epoch, 0 with *out, or the error. */
static int take(stoker_loader *l, stoker_batch **out)
{
    const int rc = stoker_loader_next(l, out);
    if (rc < 0)
        cli_err("%s: %s", stoker_strerror(rc), stoker_loader_errmsg(l));
    return rc;
}

/* The simulated consumer's work on a batch: spinning keeps a core busy as a training step
 * feeding a GPU would; sleeping leaves it free. */
static void consume(const opts *o)
{
    if (o->compute_ms <= 0)
        return;
    if (o->compute_sleep) {
        const double s = o->compute_ms * 1e-3;
        struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
        while (nanosleep(&ts, &ts) != 0 && !bench_interrupted) {
        }
        return;
    }
    const double end = bench_now() + o->compute_ms * 1e-3;
    while (bench_now() < end) {
    }
}

static double cpu_seconds(int64_t *peak_rss)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *peak_rss = (int64_t)ru.ru_maxrss * 1024;
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static void snapshot(stoker_loader *l, stoker_stats *st, stages *sg)
{
    memset(st, 0, sizeof *st);
    st->struct_size = sizeof *st;
    stoker_loader_get_stats(l, st);
    *sg = (stages){st->read_seconds,   st->crc_seconds,       st->decode_seconds,
                   st->resize_seconds, st->normalize_seconds, st->process_seconds,
                   st->h2d_seconds,    st->wait_seconds,      st->device >= 0};
}

static void stage_delta(const stages *a, const stages *b, stages *d)
{
    *d = (stages){b->read - a->read,
                  b->crc - a->crc,
                  b->decode - a->decode,
                  b->resize - a->resize,
                  b->normalize - a->normalize,
                  b->process - a->process,
                  b->h2d - a->h2d,
                  b->wait - a->wait,
                  b->has_h2d};
}

static void push_sample(result *r, double t, double rps, double wait)
{
    if (r->ntimeline == r->cap_timeline) {
        const size_t cap = r->cap_timeline ? 2 * r->cap_timeline : 256;
        sample *p = realloc(r->timeline, cap * sizeof *p);
        if (!p)
            return; /* the timeline is a nicety: keep what there is */
        r->timeline = p;
        r->cap_timeline = cap;
    }
    r->timeline[r->ntimeline++] = (sample){t, rps, wait};
}

/* Progress kept by the timed loop for the timeline and the heartbeat. */
typedef struct ticker {
    double t0, last_t, last_wait, last_beat;
    int64_t last_records;
} ticker;

/* A timeline point at t: throughput and consumer wait since the last one (returned). */
static double sample_at(stoker_loader *l, result *r, ticker *k, double t)
{
    stoker_stats st = {.struct_size = sizeof st};
    stoker_loader_get_stats(l, &st);
    const double dt = t - k->last_t;
    double wf = (st.wait_seconds - k->last_wait) / dt;
    wf = wf < 0 ? 0 : wf > 1 ? 1 : wf;
    push_sample(r, t - k->t0, (double)(r->records - k->last_records) / dt, wf);
    k->last_t = t;
    k->last_wait = st.wait_seconds;
    k->last_records = r->records;
    return wf;
}

static void tick(stoker_loader *l, result *r, ticker *k)
{
    const double t = bench_now();
    if (t - k->last_t < SAMPLE_EVERY)
        return;
    const double wf = sample_at(l, r, k, t);
    if (t - k->last_beat >= HEARTBEAT_EVERY) {
        k->last_beat = t;
        cli_err("%.0f s, %" PRId64 " records, %.0f records/s, consumer wait %.0f%%", t - k->t0,
                r->records, (double)r->records / (t - k->t0), 100.0 * wf);
    }
}

/* The stretch after the last point, at the end of the timed run: a point of its own when it
 * lasts half a step or more, or when there is no point yet, so that a run shorter than a
 * step still has its figure on the timeline (and --plot a line to draw). */
static void tick_end(stoker_loader *l, result *r, ticker *k)
{
    const double t = bench_now();
    if (t > k->last_t && (r->ntimeline == 0 || t - k->last_t >= SAMPLE_EVERY / 2))
        sample_at(l, r, k, t);
}

/* Where the run stands: epoch ends passed (the warm-up's too) and batches taken of the
 * epoch under way. */
typedef struct progress {
    int64_t ends, in_epoch;
} progress;

/* Whether the run is over at an epoch's end, `secs` into its timed part: --epochs N runs
 * exactly N epochs (the time rule never cuts a long one short; main.c refuses a warm-up
 * that leaves them no batch to time); otherwise at least o->epochs, o->min_seconds and a
 * batch timed (a warm-up may span those epochs), except after an epoch of no batch, which
 * leaves nothing to time however long it goes on. */
static bool over(const opts *o, const progress *p, const result *r, bool empty, double secs)
{
    if (o->epochs_exact)
        return p->ends >= o->epochs;
    return empty || (p->ends >= o->epochs && secs >= o->min_seconds && r->batches > 0);
}

/* Untimed warm-up: o->warmup batches, across epochs if need be (an epoch's end is no batch:
 * it counts as an epoch's end only). An epoch of no batch ends it: none will come. */
static int warm_up(stoker_loader *l, const opts *o, FILE *dump, result *r, progress *p)
{
    while (r->warm_batches < o->warmup && !bench_interrupted) {
        stoker_batch *b = NULL;
        const int rc = take(l, &b);
        if (rc < 0)
            return rc;
        if (rc == STOKER_END) {
            p->ends++;
            const bool empty = p->in_epoch == 0;
            p->in_epoch = 0;
            if (empty)
                break;
            continue;
        }
        p->in_epoch++;
        r->warm_batches++;
        r->warm_records += stoker_batch_count(b);
        if (dump)
            dump_batch(dump, b);
        stoker_batch_release(b);
    }
    return 0;
}

/* The timed epochs, from t0 (the clock of r->seconds, so that the timeline ends with it). */
static int timed(stoker_loader *l, const opts *o, FILE *dump, result *r, progress *p, double t0)
{
    ticker k = {0};
    k.t0 = k.last_t = k.last_beat = t0;
    stoker_stats st = {.struct_size = sizeof st};
    stoker_loader_get_stats(l, &st);
    k.last_wait = st.wait_seconds;
    bool done = o->epochs_exact && p->ends >= o->epochs; /* the warm-up ran them all */
    while (!done && !bench_interrupted) {
        stoker_batch *b = NULL;
        const int rc = take(l, &b);
        if (rc < 0)
            return rc;
        if (rc == STOKER_END) {
            p->ends++;
            done = over(o, p, r, p->in_epoch == 0, bench_now() - k.t0);
            p->in_epoch = 0;
            continue;
        }
        p->in_epoch++;
        r->batches++;
        r->records += stoker_batch_count(b);
        r->bytes += (int64_t)stoker_batch_nbytes(b);
        if (dump)
            dump_batch(dump, b);
        consume(o);
        stoker_batch_release(b);
        tick(l, r, &k);
    }
    tick_end(l, r, &k);
    return 0;
}

int bench_run(stoker_loader *l, const opts *o, FILE *dump, result *r)
{
    progress p = {0, 0};
    int rc = warm_up(l, o, dump, r, &p);
    if (rc < 0)
        return rc;
    stoker_stats st0, st1;
    stages s0, s1;
    snapshot(l, &st0, &s0);
    int64_t rss = 0;
    const double cpu0 = cpu_seconds(&rss), t0 = bench_now();
    gpu_sampler *g = st0.device >= 0 ? bench_gpu_start(st0.device) : NULL;
    rc = timed(l, o, dump, r, &p, t0);
    r->seconds = bench_now() - t0;
    r->epochs = p.ends;
    r->cpu_seconds = cpu_seconds(&r->peak_rss) - cpu0;
    bench_gpu_stop(g, &r->gpu);
    if (rc < 0)
        return rc;
    snapshot(l, &st1, &s1);
    stage_delta(&s0, &s1, &r->st);
    r->stats = st1;
    r->stats0 = st0;
    r->wait = r->st.wait;
    r->interrupted = bench_interrupted != 0;
    if (st1.device >= 0 && bench_gpu_name(st1.device, r->gpu.name, sizeof r->gpu.name) < 0)
        snprintf(r->gpu.name, sizeof r->gpu.name, "cuda:%d", (int)st1.device);
    return 0;
}
