/* SPDX-License-Identifier: Apache-2.0 */
/* stoker-bench's parts: options (main.c), the timed run (run.c), reports and the verdict
 * (report.c), the SVG plot (plot.c), raw read bandwidth (io.c) and GPU utilisation through
 * NVML (gpu.c). Public API (stoker.h) only. */
#ifndef STOKER_BENCH_H
#define STOKER_BENCH_H

#include "stoker.h"

#include <signal.h>
#include <stdio.h>

/* Left out, --epochs runs whole epochs until at least BENCH_MIN_EPOCHS have passed and
 * --min-seconds of timed delivery: the figure of a run of a second or so changes from one
 * run to the next by more than the differences it is meant to show. */
#define BENCH_MIN_EPOCHS 10
#define BENCH_MIN_SECONDS 3.0

/* Integer options the report reads back (stoker_loader_get_int), and the library's options
 * the command line holds: those whose key is below BENCH_OPTIONS. */
enum { BENCH_OPTIONS = 256 };

/* The command line: the tool's own options, and each library option given (its flag comes
 * from the library's table of options, main.c), by key, in the field of its type. An
 * option not given is not passed on: the loader resolves it. */
typedef struct opts {
    const char *data;
    const char *shown; /* data as reported: its password hidden (stoker_redact) */
    int64_t epochs, warmup;
    int epochs_exact; /* --epochs given: exactly that many, whatever the time */
    int warmup_given;
    double min_seconds; /* 0: no time rule, and no run is too short */
    double compute_ms;
    int json, io, compute_sleep;
    const char *dump, *plot;
    unsigned char given[BENCH_OPTIONS];
    int64_t ival[BENCH_OPTIONS];
    double fval[BENCH_OPTIONS];
    const char *sval[BENCH_OPTIONS];
} opts;

/* What the loader runs with, read back from it (stoker_loader_get_int, _get_float) for each
 * option below BENCH_OPTIONS; has[opt] (has_f) is 0 where the option does not apply to it
 * (image options of records the image pipeline does not transform) or is not of the type. */
typedef struct resolved {
    int64_t v[BENCH_OPTIONS];
    double f[BENCH_OPTIONS];
    unsigned char has[BENCH_OPTIONS], has_f[BENCH_OPTIONS];
} resolved;

/* One point of the timeline: seconds into the timed part, throughput and consumer wait
 * over the interval that ends there. */
typedef struct sample {
    double t, records_per_sec, wait_fraction;
} sample;

/* Per-stage worker seconds (summed over threads) over the timed part. */
typedef struct stages {
    double read, crc, decode, resize, normalize, process, h2d, wait;
    int has_h2d;
} stages;

/* --io: MB/s of sequential 1 MiB reads of every shard; < 0 when not measured. */
typedef struct io_result {
    double buffered_mbps, direct_mbps;
    int64_t bytes;
    char direct_note[160]; /* why O_DIRECT was not measured */
} io_result;

typedef struct gpu_util {
    int measured;
    double mean, max; /* percent */
    int samples;
    char name[96]; /* the GPU's name through NVML, "" if unknown */
} gpu_util;

typedef struct result {
    int64_t epochs; /* epoch ends passed, the warm-up's included */
    int64_t batches, records, bytes, warm_batches, warm_records;
    double seconds, wait, cpu_seconds;
    int64_t peak_rss;
    int interrupted;
    int32_t kind; /* the data set's field */
    resolved eff;
    stages st;
    sample *timeline;
    size_t ntimeline, cap_timeline;
    stoker_stats stats, stats0; /* at the end, and where the timed part began */
    io_result io;
    gpu_util gpu;
} result;

extern volatile sig_atomic_t bench_interrupted;

/* run.c: the warm-up and the timed epochs. 0, or the failing status (reported). */
int bench_run(stoker_loader *l, const opts *o, FILE *dump, result *r);

/* report.c */
void bench_report_text(const opts *o, const result *r);
void bench_report_json(const opts *o, const result *r);
/* The limiting stage ("storage", "decode", ...) and a one-line reason: the library's verdict
 * over the timed part (stoker_stats_window), with the raw read rate when it is storage. */
const char *bench_verdict(const result *r, char *why, size_t cap);

/* plot.c: the timeline as a self-contained SVG. 0 or -errno. */
int bench_plot(const char *path, const result *r);

/* outputs.c: --plot and --dump-indices can be written, and spare the data set's files.
 * 0, or -1 after saying why. */
int bench_check_outputs(const opts *o);
/* An output file is written beside its destination (*tmp, malloc'd) and renamed into
 * place only when complete (keep), so a failure leaves neither a partial file nor a spoilt
 * older one. open: NULL with errno on failure. close: 0 or -errno; frees tmp. */
FILE *bench_out_open(const char *path, char **tmp);
int bench_out_close(FILE *f, char *tmp, const char *path, int keep);

/* io.c */
void bench_io(const char *data, io_result *io);

/* gpu.c: a sampler of the GPU's utilisation every 100 ms between start and stop. NVML
 * absent or failing: start returns NULL and nothing is measured. */
typedef struct gpu_sampler gpu_sampler;
gpu_sampler *bench_gpu_start(int device);
void bench_gpu_stop(gpu_sampler *g, gpu_util *out);
/* The GPU's name through NVML into buf; 0, or -1 without NVML. */
int bench_gpu_name(int device, char *buf, size_t cap);

/* Seconds on the monotonic clock. */
double bench_now(void);

#endif
