/* SPDX-License-Identifier: Apache-2.0 */
/* What stoker-bench prints: the effective options, the results, the per-stage breakdown
 * and the verdict, as text or as one JSON object. */
#include "bench.h"
#include "cli.h"

#include <inttypes.h>
#include <string.h>

#define RULE_OF_THUMB_MBPS 500.0 /* sequential read a data set should sustain */

static const char *name_of(stoker_enum e, int32_t value)
{
    const char *n = stoker_enum_name(e, value);
    return n ? n : "unknown";
}

/* Option `opt` as the loader runs with it: its name in enum `e`, "n/a" where it does not
 * apply. */
static const char *eff_name(const result *r, stoker_enum e, stoker_option opt)
{
    return r->eff.has[opt] ? name_of(e, (int32_t)r->eff.v[opt]) : "n/a";
}

/* Its number; 0 where it does not apply. */
static int64_t eff_int(const result *r, stoker_option opt)
{
    return r->eff.has[opt] ? r->eff.v[opt] : 0;
}

typedef struct effective {
    const char *transform, *dtype, *layout, *dct, *antialias, *resampler, *dct_scale, *device;
    const char *backend, *on_corrupt, *simd, *decoder;
} effective;

static void effective_options(const result *r, effective *e)
{
    e->transform = eff_name(r, STOKER_ENUM_TRANSFORM, STOKER_OPT_TRANSFORM);
    e->dtype = eff_name(r, STOKER_ENUM_DTYPE, STOKER_OPT_DTYPE);
    e->layout = eff_name(r, STOKER_ENUM_LAYOUT, STOKER_OPT_LAYOUT);
    e->dct = eff_name(r, STOKER_ENUM_DCT, STOKER_OPT_DCT);
    e->antialias = eff_name(r, STOKER_ENUM_ANTIALIAS, STOKER_OPT_ANTIALIAS);
    e->resampler = eff_name(r, STOKER_ENUM_RESAMPLER, STOKER_OPT_RESAMPLER);
    e->dct_scale = eff_name(r, STOKER_ENUM_DCT_SCALE, STOKER_OPT_DCT_SCALE);
    e->backend = eff_name(r, STOKER_ENUM_BACKEND, STOKER_OPT_BACKEND);
    e->on_corrupt = eff_name(r, STOKER_ENUM_ON_CORRUPT, STOKER_OPT_ON_CORRUPT);
    e->simd = eff_name(r, STOKER_ENUM_SIMD, STOKER_OPT_SIMD);
    e->decoder = eff_name(r, STOKER_ENUM_DECODER, STOKER_OPT_DECODER);
    e->device = r->stats.device >= 0 ? r->gpu.name : "cpu";
}

const char *bench_verdict(const result *r, char *why, size_t cap)
{
    static stoker_window w; /* the verdict returned points into it */
    w.struct_size = sizeof w;
    if (stoker_stats_window(&r->stats0, &r->stats, &w) != 0) {
        snprintf(why, cap, "no statistics of the timed part");
        return "none";
    }
    int n = snprintf(why, cap, "%s", w.verdict_reason);
    const double mbps = r->io.direct_mbps > 0 ? r->io.direct_mbps : r->io.buffered_mbps;
    if (strcmp(w.verdict, "storage") == 0 && r->io.bytes > 0 && n > 0 && (size_t)n < cap)
        snprintf(why + n, cap - (size_t)n,
                 "; raw reads run at %.0f MB/s (%s the %.0f MB/s rule of thumb)", mbps,
                 mbps < RULE_OF_THUMB_MBPS ? "below" : "above", RULE_OF_THUMB_MBPS);
    return w.verdict;
}

/* Whether the figure comes from a run shorter than --min-seconds (0: none is). */
static bool too_short(const opts *o, const result *r)
{
    return o->min_seconds > 0 && r->seconds < o->min_seconds;
}

static void too_short_text(const opts *o, const result *r)
{
    if (!too_short(o, r))
        return;
    const char *hint = r->interrupted    ? "the run was interrupted"
                       : o->epochs_exact ? "use more --epochs, or leave --epochs out to run "
                                           "for --min-seconds"
                       : r->records == 0 ? "its epochs deliver no batch to time"
                                         : "use --min-seconds or more --epochs";
    printf("warning      run too short for a stable figure: %.2f s < %g s; %s\n", r->seconds,
           o->min_seconds, hint);
}

/* --epochs as given, or the rule that replaces it. */
static void epochs_text(const opts *o, char *buf, size_t cap)
{
    if (o->epochs_exact)
        snprintf(buf, cap, "%" PRId64, o->epochs);
    else
        snprintf(buf, cap, "at-least-%" PRId64, o->epochs);
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

/* The decoder in effect at the end of the run (GPU failures may have handed everything to
 * the CPU since create); "n/a" where the image pipeline does not run. */
static const char *decoder_in_effect(const result *r)
{
    return r->eff.has[STOKER_OPT_DECODER] ? name_of(STOKER_ENUM_DECODER, r->stats.decoder) : "n/a";
}

static void decoder_text(const result *r)
{
    const stoker_stats *st = &r->stats;
    printf("decoder      %s: cpu_decoded=%" PRId64 " gpu_decoded=%" PRId64 " gpu_retried=%" PRId64
           " gpu_fallbacks=%" PRId64 " gpu_share=%.2f cpu_busy=%.2f gpu_busy=%.2f"
           " full_checks=%" PRId64,
           decoder_in_effect(r), st->cpu_decoded, st->gpu_decoded, st->gpu_retried,
           st->gpu_fallbacks, st->gpu_share, st->cpu_busy, st->gpu_busy, st->full_checks);
    if (st->decoder_note[0]) {
        fputs(" (", stdout);
        cli_put_escaped(stdout, st->decoder_note);
        putchar(')');
    }
    putchar('\n');
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

/* The counters of the library's table of statistics (stoker_stats_field) that no other line
 * shows, then the ready slots and reads in flight: a counter added to the table is
 * reported without a change here. */
static void stats_text(const stoker_stats *st)
{
    static const char *const elsewhere[] = {
        "batches",     "records",      "bytes",           "pinned_bytes",
        "cpu_decoded", "gpu_decoded",  "gpu_retried",     "gpu_fallbacks",
        "full_checks", "remote_bytes", "remote_requests", "remote_retries",
        "cache_hits",  "cache_misses", "cache_bytes",     "cache_limit",
    };
    const char *name = NULL;
    int32_t type = 0;
    uint32_t offset = 0;
    fputs("stats       ", stdout);
    for (int32_t i = 0; stoker_stats_field(i, &name, &type, NULL, &offset, NULL, NULL) == 0; i++) {
        bool shown = type != STOKER_STAT_INT64;
        for (size_t k = 0; !shown && k < sizeof elsewhere / sizeof elsewhere[0]; k++)
            shown = !strcmp(name, elsewhere[k]);
        int64_t v;
        memcpy(&v, (const char *)st + offset, sizeof v);
        if (!shown)
            printf(" %s=%" PRId64, name, v);
    }
    printf(" ready_slots=%.2f reads_in_flight=%.2f\n", st->ready_slots, st->reads_in_flight);
}

/* The float options the loader reports (normalisation, the vertical flip's probability: the
 * library's table names them), on one line; none where the image pipeline does not run. */
static void floats_text(const result *r)
{
    int n = 0;
    for (int opt = 0; opt < BENCH_OPTIONS; opt++)
        if (r->eff.has_f[opt])
            printf("%s%s=%g", n++ ? " " : "floats       ", stoker_option_name((stoker_option)opt),
                   r->eff.f[opt]);
    if (n)
        putchar('\n');
}

static void floats_json(const result *r)
{
    for (int opt = 0; opt < BENCH_OPTIONS; opt++)
        if (r->eff.has_f[opt])
            printf(",\"%s\":%.17g", stoker_option_name((stoker_option)opt), r->eff.f[opt]);
}

void bench_report_text(const opts *o, const result *r)
{
    const double s = r->seconds > 0 ? r->seconds : 1e-9;
    const stoker_stats *st = &r->stats;
    effective e;
    effective_options(r, &e);
    char epochs[32];
    epochs_text(o, epochs, sizeof epochs);
    printf("stoker-bench %s\n", stoker_version_string());
    fputs("data set     ", stdout);
    cli_put_escaped(stdout, o->shown);
    putchar('\n');
    printf("back-end     %s\nsimd         %s\ndevice       %s\n",
           name_of(STOKER_ENUM_BACKEND, st->backend), e.simd, e.device);
    printf("options      epochs=%s min_seconds=%g batch_size=%" PRId64 " threads=%" PRId64
           " depth=%" PRId64 " seed=%" PRIu64 " shuffle=%" PRId64 " drop_last=%" PRId64
           " rank=%" PRId64 " world_size=%" PRId64 " backend=%s direct=%" PRId64
           " on_corrupt=%s warmup=%" PRId64 " compute_ms=%g (%s) max_cache=%" PRId64 "\n",
           epochs, o->min_seconds, eff_int(r, STOKER_OPT_BATCH_SIZE),
           eff_int(r, STOKER_OPT_THREADS), eff_int(r, STOKER_OPT_DEPTH),
           (uint64_t)eff_int(r, STOKER_OPT_SEED), eff_int(r, STOKER_OPT_SHUFFLE),
           eff_int(r, STOKER_OPT_DROP_LAST), eff_int(r, STOKER_OPT_RANK),
           eff_int(r, STOKER_OPT_WORLD_SIZE), e.backend, eff_int(r, STOKER_OPT_DIRECT_IO),
           e.on_corrupt, o->warmup, o->compute_ms, o->compute_sleep ? "sleep" : "spin",
           eff_int(r, STOKER_OPT_MAX_CACHE));
    printf("pipeline     transform=%s size=%" PRId64 " resize=%" PRId64 " dct=%s antialias=%s "
           "resampler=%s dct_scale=%s dtype=%s layout=%s gpu_normalize=%" PRId64 " decoder=%s\n",
           e.transform, eff_int(r, STOKER_OPT_SIZE), eff_int(r, STOKER_OPT_RESIZE), e.dct,
           e.antialias, e.resampler, e.dct_scale, e.dtype, e.layout,
           eff_int(r, STOKER_OPT_GPU_NORMALIZE), e.decoder);
    floats_text(r);
    io_text(&r->io);
    printf("warm-up      %" PRId64 " batches, %" PRId64 " records (not timed)\n", r->warm_batches,
           r->warm_records);
    printf("result       %" PRId64 " batches, %" PRId64 " records, %.1f MB in %.3f s, %" PRId64
           " epoch%s%s\n",
           r->batches, r->records, (double)r->bytes / 1e6, r->seconds, r->epochs,
           r->epochs == 1 ? "" : "s", r->interrupted ? " (interrupted)" : "");
    printf("throughput   %.0f records/s, %.1f MB/s\n", (double)r->records / s,
           (double)r->bytes / s / 1e6);
    too_short_text(o, r);
    printf("consumer     waited %.3f s (%.1f%% of the run)\n", r->wait, 100.0 * r->wait / s);
    stages_text(r);
    decoder_text(r);
    printf("cpu          %.1f us of CPU per record (%.2f s user+sys), peak RSS %.1f MB, "
           "pinned %.1f MB\n",
           r->records ? 1e6 * r->cpu_seconds / (double)r->records : 0.0, r->cpu_seconds,
           (double)r->peak_rss / 1e6, (double)st->pinned_bytes / 1e6);
    if (r->gpu.measured)
        printf("gpu          utilisation mean %.0f%%, max %.0f%% (%d samples)\n", r->gpu.mean,
               r->gpu.max, r->gpu.samples);
    if (st->remote_requests > 0)
        printf("remote       fetched %.1f MB in %" PRId64 " requests (%.1f MB each, %" PRId64
               " retried); cache hits=%" PRId64 " misses=%" PRId64 ", %.1f MB of a %.1f MB limit;"
               " workers waited %.2f s for blocks\n",
               (double)st->remote_bytes / 1e6, st->remote_requests,
               (double)st->remote_bytes / 1e6 / (double)st->remote_requests, st->remote_retries,
               st->cache_hits, st->cache_misses, (double)st->cache_bytes / 1e6,
               (double)st->cache_limit / 1e6, st->fetch_wait_seconds);
    stats_text(st);
    char why[512];
    const char *v = bench_verdict(r, why, sizeof why);
    printf("verdict      %s: %s\n", v, why);
}

static const char *json_bool(int64_t v)
{
    return v ? "true" : "false";
}

static void json_options(const opts *o, const result *r, const effective *e)
{
    printf(",\"options\":{\"transform\":\"%s\",\"size\":%" PRId64 ",\"resize\":%" PRId64
           ",\"dct\":\"%s\",\"antialias\":\"%s\",\"resampler\":\"%s\",\"dct_scale\":\"%s\","
           "\"dtype\":\"%s\",\"layout\":\"%s\",\"simd\":\"%s\",\"decoder\":\"%s\",\"device\":",
           e->transform, eff_int(r, STOKER_OPT_SIZE), eff_int(r, STOKER_OPT_RESIZE), e->dct,
           e->antialias, e->resampler, e->dct_scale, e->dtype, e->layout, e->simd, e->decoder);
    cli_put_json_string(stdout, e->device);
    printf(",\"batch_size\":%" PRId64 ",\"threads\":%" PRId64 ",\"depth\":%" PRId64
           ",\"seed\":%" PRIu64 ",\"shuffle\":%s,\"drop_last\":%s,\"rank\":%" PRId64
           ",\"world_size\":%" PRId64 ",\"backend\":\"%s\",\"direct\":%s,\"on_corrupt\":\"%s\","
           "\"warmup\":%" PRId64 ",\"compute_ms\":%g,\"compute\":\"%s\","
           "\"io\":%s,\"gpu_normalize\":%s,\"max_cache\":%" PRId64 ",\"min_seconds\":%g",
           eff_int(r, STOKER_OPT_BATCH_SIZE), eff_int(r, STOKER_OPT_THREADS),
           eff_int(r, STOKER_OPT_DEPTH), (uint64_t)eff_int(r, STOKER_OPT_SEED),
           json_bool(eff_int(r, STOKER_OPT_SHUFFLE)), json_bool(eff_int(r, STOKER_OPT_DROP_LAST)),
           eff_int(r, STOKER_OPT_RANK), eff_int(r, STOKER_OPT_WORLD_SIZE), e->backend,
           json_bool(eff_int(r, STOKER_OPT_DIRECT_IO)), e->on_corrupt, o->warmup, o->compute_ms,
           o->compute_sleep ? "sleep" : "spin", json_bool(o->io),
           json_bool(eff_int(r, STOKER_OPT_GPU_NORMALIZE)), eff_int(r, STOKER_OPT_MAX_CACHE),
           o->min_seconds);
    floats_json(r);
    printf(",\"epochs\":");
    if (o->epochs_exact) /* null: the run's length follows the time rule */
        printf("%" PRId64 "}", o->epochs);
    else
        printf("null}");
}

static void json_decoder(const result *r)
{
    const stoker_stats *st = &r->stats;
    printf(",\"decoder\":\"%s\",\"cpu_decoded\":%" PRId64 ",\"gpu_decoded\":%" PRId64
           ",\"gpu_retried\":%" PRId64 ",\"gpu_fallbacks\":%" PRId64 ",\"gpu_share\":%.4f,"
           "\"cpu_busy\":%.4f,\"gpu_busy\":%.4f,\"full_checks\":%" PRId64 ",\"decoder_note\":",
           decoder_in_effect(r), st->cpu_decoded, st->gpu_decoded, st->gpu_retried,
           st->gpu_fallbacks, st->gpu_share, st->cpu_busy, st->gpu_busy, st->full_checks);
    cli_put_json_string(stdout, st->decoder_note);
    printf(",\"remote_bytes\":%" PRId64 ",\"remote_requests\":%" PRId64
           ",\"remote_retries\":%" PRId64 ",\"cache_hits\":%" PRId64 ",\"cache_misses\":%" PRId64
           ",\"cache_bytes\":%" PRId64 ",\"cache_limit\":%" PRId64 ",\"fetch_wait_seconds\":%.6f",
           st->remote_bytes, st->remote_requests, st->remote_retries, st->cache_hits,
           st->cache_misses, st->cache_bytes, st->cache_limit, st->fetch_wait_seconds);
}

/* "stats": the end-of-run snapshot, every field of the library's table (stoker_stats_json). */
static void json_stats(const stoker_stats *st)
{
    char buf[16384];
    if (stoker_stats_json(st, buf, sizeof buf, NULL) == 0)
        printf(",\"stats\":%s", buf);
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
    effective_options(r, &e);
    char why[512];
    const char *verdict = bench_verdict(r, why, sizeof why);
    printf("{\"version\":\"%s\",\"data\":", stoker_version_string());
    cli_put_json_string(stdout, o->shown);
    printf(",\"backend\":\"%s\",\"simd\":\"%s\",\"device\":",
           name_of(STOKER_ENUM_BACKEND, st->backend), e.simd);
    cli_put_json_string(stdout, e.device);
    printf(",\"threads\":%d,\"depth\":%d,\"epochs\":%" PRId64 ",\"batch_size\":%" PRId64
           ",\"transform\":\"%s\",\"warmup_batches\":%" PRId64 ",\"warmup_records\":%" PRId64
           ",\"batches\":%" PRId64 ",\"records\":%" PRId64 ",\"bytes\":%" PRId64
           ",\"seconds\":%.6f,\"records_per_sec\":%.3f,\"bytes_per_sec\":%.3f,"
           "\"wait_seconds\":%.6f,\"wait_fraction\":%.6f,\"skipped\":%" PRId64
           ",\"reduced\":%" PRId64 ",\"records_read\":%" PRId64
           ",\"ready_slots\":%.3f,\"reads_in_flight\":%.3f,"
           "\"cpu_seconds_per_record\":%.9f,\"peak_rss_bytes\":%" PRId64
           ",\"pinned_bytes\":%" PRId64 ",\"dropped_bytes\":%" PRId64 ",\"interrupted\":%s,"
           "\"min_seconds\":%g,\"too_short\":%s,\"verdict\":\"%s\",\"verdict_reason\":",
           st->threads, st->depth, r->epochs, eff_int(r, STOKER_OPT_BATCH_SIZE), e.transform,
           r->warm_batches, r->warm_records, r->batches, r->records, r->bytes, r->seconds,
           (double)r->records / s, (double)r->bytes / s, r->wait, r->wait / s, st->skipped,
           st->reduced, st->records_read, st->ready_slots, st->reads_in_flight,
           r->records ? r->cpu_seconds / (double)r->records : 0.0, r->peak_rss, st->pinned_bytes,
           st->dropped_bytes, json_bool(r->interrupted), o->min_seconds, json_bool(too_short(o, r)),
           verdict);
    cli_put_json_string(stdout, why);
    json_decoder(r);
    json_stats(&r->stats);
    json_options(o, r, &e);
    json_extras(r);
    printf("}\n");
}
