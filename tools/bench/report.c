/* What stoker-bench prints: the effective options, the results, the per-stage breakdown
 * and the verdict, as text or as one JSON object. */
#include "bench.h"
#include "cli.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#define RULE_OF_THUMB_MBPS 500.0 /* sequential read a data set should sustain */
#define CONSUMER_BOUND 0.05      /* below this wait fraction the loader is ahead */

static const char *transform_name(int32_t t)
{
    switch (t) {
    case STOKER_TRANSFORM_TRAIN: return "train";
    case STOKER_TRANSFORM_EVAL: return "eval";
    case STOKER_TRANSFORM_RESIZE: return "resize";
    default: return "none";
    }
}

/* The effective transform: the library's default is train for JPEG, none otherwise. */
static int32_t eff_transform(const opts *o, const result *r)
{
    if (o->transform != STOKER_TRANSFORM_DEFAULT)
        return o->transform;
    return r->kind == STOKER_FIELD_JPEG ? STOKER_TRANSFORM_TRAIN : STOKER_TRANSFORM_NONE;
}

static int is_image(const opts *o, const result *r)
{
    return r->kind == STOKER_FIELD_JPEG && eff_transform(o, r) != STOKER_TRANSFORM_NONE;
}

typedef struct effective {
    const char *transform, *dtype, *layout, *dct, *antialias, *resampler, *dct_scale, *device;
    int64_t size, resize;
} effective;

static void effective_options(const opts *o, const result *r, effective *e)
{
    const int img = is_image(o, r);
    e->transform = transform_name(eff_transform(o, r));
    e->size = img ? (o->size ? o->size : 224) : 0;
    e->resize = img ? (o->resize ? o->resize : (int64_t)floor(e->size * 256.0 / 224.0 + 0.5)) : 0;
    const int32_t dt = r->ndim ? r->dtype
                       : img   ? (o->dtype ? o->dtype : STOKER_DTYPE_FLOAT16)
                               : STOKER_DTYPE_UINT8;
    e->dtype = stoker_dtype_name(dt);
    e->layout = !img ? "n/a" : o->layout == STOKER_LAYOUT_NHWC ? "NHWC" : "NCHW";
    e->dct = !img ? "n/a" : o->dct == STOKER_DCT_IFAST ? "fast" : "accurate";
    e->antialias = !img ? "n/a" : o->antialias == STOKER_ANTIALIAS_ALWAYS ? "always" : "over2x";
    e->resampler = !img ? "n/a" : o->resampler == STOKER_RESAMPLER_PILLOW ? "pillow" : "fast";
    e->dct_scale = !img                                      ? "n/a"
                   : o->dct_scale == STOKER_DCT_SCALE_NEVER  ? "never"
                   : o->dct_scale == STOKER_DCT_SCALE_ALWAYS ? "always"
                                                             : "train";
    e->device = r->stats.device >= 0 ? r->gpu.name : "cpu";
}

const char *bench_verdict(const result *r, char *why, size_t cap)
{
    const stages *s = &r->st;
    const double secs = r->seconds > 0 ? r->seconds : 1e-9, wf = r->wait / secs;
    if (r->records == 0) {
        snprintf(why, cap, "nothing was delivered in the timed part");
        return "none";
    }
    if (wf < CONSUMER_BOUND) {
        snprintf(why, cap,
                 "the loader is ahead: the consumer waited %.1f%% of the run, "
                 "%.1f batches ready on average",
                 100 * wf, r->stats.ready_slots);
        return "consumer";
    }
    const double transform = s->resize + s->normalize;
    const struct {
        const char *name, *what;
        double v;
    } st[] = {
        {"storage", "reading", s->read},
        {"crc", "CRC checks", s->crc},
        {"decode", "JPEG decoding", s->decode},
        {"transform", "resize + normalise", transform},
        {"host-to-device copy", "host-to-device copies", s->h2d},
    };
    size_t best = 0;
    double total = 0;
    for (size_t i = 0; i < sizeof st / sizeof st[0]; i++) {
        total += st[i].v;
        if (st[i].v > st[best].v)
            best = i;
    }
    const double share = total > 0 ? 100 * st[best].v / total : 0;
    int n = snprintf(why, cap,
                     "%s takes %.0f%% of the workers' stage time (%.2f s over %d "
                     "threads in %.2f s) while the consumer waited %.0f%% of the run",
                     st[best].what, share, st[best].v, r->stats.threads, secs, 100 * wf);
    if (best == 0 && r->io.bytes > 0 && n > 0 && (size_t)n < cap)
        snprintf(why + n, cap - (size_t)n,
                 "; raw reads run at %.0f MB/s (%s the %.0f MB/s "
                 "rule of thumb)",
                 r->io.direct_mbps > 0 ? r->io.direct_mbps : r->io.buffered_mbps,
                 (r->io.direct_mbps > 0 ? r->io.direct_mbps : r->io.buffered_mbps) <
                         RULE_OF_THUMB_MBPS
                     ? "below"
                     : "above",
                 RULE_OF_THUMB_MBPS);
    return best == 1 ? "crc" : st[best].name;
}

static void io_text(const io_result *io)
{
    if (io->bytes <= 0)
        return;
    printf("raw read     %.1f MB of shards in 1 MiB blocks: buffered %.0f MB/s, ",
           (double)io->bytes / 1e6, io->buffered_mbps);
    if (io->direct_mbps >= 0)
        printf("O_DIRECT %.0f MB/s", io->direct_mbps);
    else
        printf("O_DIRECT not measured (%s)", io->direct_note);
    printf(" (rule of thumb: %.0f MB/s)\n", RULE_OF_THUMB_MBPS);
}

static void stages_text(const result *r)
{
    const stages *s = &r->st;
    printf("stages       worker seconds over %d threads: read %.3f, crc %.3f, decode %.3f, "
           "resize %.3f, normalise %.3f",
           r->stats.threads, s->read, s->crc, s->decode, s->resize, s->normalize);
    if (s->has_h2d)
        printf(", host-to-device %.3f", s->h2d);
    printf("; consumer wait %.3f s\n", s->wait);
}

void bench_report_text(const opts *o, const result *r)
{
    const double s = r->seconds > 0 ? r->seconds : 1e-9;
    const stoker_stats *st = &r->stats;
    effective e;
    effective_options(o, r, &e);
    printf("stoker-bench %s\n", stoker_version_string());
    fputs("data set     ", stdout);
    cli_put_escaped(stdout, o->data);
    putchar('\n');
    printf("back-end     %s\nsimd         %s\ndevice       %s\n", stoker_backend_name(st->backend),
           stoker_simd_name(st->simd), e.device);
    printf("options      epochs=%" PRId64 " batch_size=%" PRId64
           " threads=%d depth=%d seed=%" PRId64 " shuffle=%d drop_last=%d rank=%" PRId64
           " world_size=%" PRId64 " backend=%s direct=%d on_corrupt=%s warmup=%" PRId64
           " compute_ms=%g (%s)\n",
           o->epochs, o->batch, st->threads, st->depth, o->seed, o->shuffle, o->drop_last, o->rank,
           o->world, stoker_backend_name(o->backend), o->direct,
           o->on_corrupt == STOKER_ON_CORRUPT_SKIP ? "skip" : "error", o->warmup, o->compute_ms,
           o->compute_sleep ? "sleep" : "spin");
    printf("pipeline     transform=%s size=%" PRId64 " resize=%" PRId64 " dct=%s antialias=%s "
           "resampler=%s dct_scale=%s dtype=%s layout=%s gpu_normalize=%d\n",
           e.transform, e.size, e.resize, e.dct, e.antialias, e.resampler, e.dct_scale, e.dtype,
           e.layout, o->gpu_normalize);
    io_text(&r->io);
    printf("warm-up      %" PRId64 " batches, %" PRId64 " records (not timed)\n", r->warm_batches,
           r->warm_records);
    printf("result       %" PRId64 " batches, %" PRId64 " records, %.1f MB in %.3f s%s\n",
           r->batches, r->records, (double)r->bytes / 1e6, r->seconds,
           r->interrupted ? " (interrupted)" : "");
    printf("throughput   %.0f records/s, %.1f MB/s\n", (double)r->records / s,
           (double)r->bytes / s / 1e6);
    printf("consumer     waited %.3f s (%.1f%% of the run)\n", r->wait, 100.0 * r->wait / s);
    stages_text(r);
    printf("cpu          %.1f us of CPU per record (%.2f s user+sys), peak RSS %.1f MB, "
           "pinned %.1f MB\n",
           r->records ? 1e6 * r->cpu_seconds / (double)r->records : 0.0, r->cpu_seconds,
           (double)r->peak_rss / 1e6, (double)st->pinned_bytes / 1e6);
    if (r->gpu.measured)
        printf("gpu          utilisation mean %.0f%%, max %.0f%% (%d samples)\n", r->gpu.mean,
               r->gpu.max, r->gpu.samples);
    printf("stats        skipped=%" PRId64 " records_read=%" PRId64 " ready_slots=%.2f "
           "reads_in_flight=%.2f reduced=%" PRId64 "\n",
           st->skipped, st->records_read, st->ready_slots, st->reads_in_flight, st->reduced);
    char why[512];
    const char *v = bench_verdict(r, why, sizeof why);
    printf("verdict      %s: %s\n", v, why);
}

static void json_options(const opts *o, const result *r, const effective *e)
{
    printf(",\"options\":{\"transform\":\"%s\",\"size\":%" PRId64 ",\"resize\":%" PRId64
           ",\"dct\":\"%s\",\"antialias\":\"%s\",\"resampler\":\"%s\",\"dct_scale\":\"%s\","
           "\"dtype\":\"%s\",\"layout\":\"%s\",\"simd\":\"%s\",\"device\":",
           e->transform, e->size, e->resize, e->dct, e->antialias, e->resampler, e->dct_scale,
           e->dtype, e->layout, stoker_simd_name(r->stats.simd));
    cli_put_json_string(stdout, e->device);
    printf(",\"batch_size\":%" PRId64 ",\"threads\":%d,\"depth\":%d,\"seed\":%" PRId64
           ",\"shuffle\":%s,\"drop_last\":%s,\"rank\":%" PRId64 ",\"world_size\":%" PRId64
           ",\"backend\":\"%s\",\"direct\":%s,\"on_corrupt\":\"%s\",\"epochs\":%" PRId64
           ",\"warmup\":%" PRId64 ",\"compute_ms\":%g,\"compute\":\"%s\",\"io\":%s,"
           "\"gpu_normalize\":%s}",
           o->batch, r->stats.threads, r->stats.depth, o->seed, o->shuffle ? "true" : "false",
           o->drop_last ? "true" : "false", o->rank, o->world, stoker_backend_name(o->backend),
           o->direct ? "true" : "false", o->on_corrupt == STOKER_ON_CORRUPT_SKIP ? "skip" : "error",
           o->epochs, o->warmup, o->compute_ms, o->compute_sleep ? "sleep" : "spin",
           o->io ? "true" : "false", o->gpu_normalize ? "true" : "false");
}

static void json_extras(const result *r)
{
    const stages *s = &r->st;
    printf(",\"stage_seconds\":{\"read\":%.6f,\"crc\":%.6f,\"decode\":%.6f,\"resize\":%.6f,"
           "\"normalize\":%.6f,\"h2d\":%.6f,\"wait\":%.6f}",
           s->read, s->crc, s->decode, s->resize, s->normalize, s->h2d, s->wait);
    if (r->io.bytes > 0) {
        printf(",\"io\":{\"bytes\":%" PRId64 ",\"buffered_mb_per_sec\":%.1f,"
               "\"direct_mb_per_sec\":",
               r->io.bytes, r->io.buffered_mbps);
        if (r->io.direct_mbps >= 0) {
            printf("%.1f}", r->io.direct_mbps);
        } else {
            printf("null,\"direct_note\":");
            cli_put_json_string(stdout, r->io.direct_note);
            putchar('}');
        }
    }
    if (r->gpu.measured)
        printf(",\"gpu_util\":{\"mean\":%.1f,\"max\":%.1f,\"samples\":%d}", r->gpu.mean, r->gpu.max,
               r->gpu.samples);
    printf(",\"timeline\":[");
    for (size_t i = 0; i < r->ntimeline; i++)
        printf("%s[%.3f,%.1f,%.4f]", i ? "," : "", r->timeline[i].t, r->timeline[i].records_per_sec,
               r->timeline[i].wait_fraction);
    printf("]");
}

void bench_report_json(const opts *o, const result *r)
{
    const double s = r->seconds > 0 ? r->seconds : 1e-9;
    const stoker_stats *st = &r->stats;
    effective e;
    effective_options(o, r, &e);
    char why[512];
    const char *verdict = bench_verdict(r, why, sizeof why);
    printf("{\"version\":\"%s\",\"data\":", stoker_version_string());
    cli_put_json_string(stdout, o->data);
    printf(",\"backend\":\"%s\",\"simd\":\"%s\",\"device\":", stoker_backend_name(st->backend),
           stoker_simd_name(st->simd));
    cli_put_json_string(stdout, e.device);
    printf(
        ",\"threads\":%d,\"depth\":%d,\"epochs\":%" PRId64 ",\"batch_size\":%" PRId64
        ",\"transform\":\"%s\",\"warmup_batches\":%" PRId64 ",\"warmup_records\":%" PRId64
        ",\"batches\":%" PRId64 ",\"records\":%" PRId64 ",\"bytes\":%" PRId64
        ",\"seconds\":%.6f,\"records_per_sec\":%.3f,\"bytes_per_sec\":%.3f,"
        "\"wait_seconds\":%.6f,\"wait_fraction\":%.6f,\"skipped\":%" PRId64 ",\"reduced\":%" PRId64
        ",\"records_read\":%" PRId64 ",\"ready_slots\":%.3f,\"reads_in_flight\":%.3f,"
        "\"cpu_seconds_per_record\":%.9f,\"peak_rss_bytes\":%" PRId64 ",\"pinned_bytes\":%" PRId64
        ",\"interrupted\":%s,\"verdict\":\"%s\","
        "\"verdict_reason\":",
        st->threads, st->depth, o->epochs, o->batch, e.transform, r->warm_batches, r->warm_records,
        r->batches, r->records, r->bytes, r->seconds, (double)r->records / s, (double)r->bytes / s,
        r->wait, r->wait / s, st->skipped, st->reduced, st->records_read, st->ready_slots,
        st->reads_in_flight, r->records ? r->cpu_seconds / (double)r->records : 0.0, r->peak_rss,
        st->pinned_bytes, r->interrupted ? "true" : "false", verdict);
    cli_put_json_string(stdout, why);
    json_options(o, r, &e);
    json_extras(r);
    printf("}\n");
}
