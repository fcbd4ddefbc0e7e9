/* SPDX-License-Identifier: Apache-2.0 */
/* Progress on stderr: a bar redrawn at most 10 times a second on a terminal, a plain line
 * every 2 seconds otherwise; and the list of files left out. */
#include "pack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double pack_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void pack_progress_init(pack_progress *p, int64_t total, bool quiet, const char *noun)
{
    p->noun = noun;
    p->start = p->last = pack_now();
    p->total = total;
    p->quiet = quiet;
    p->tty = isatty(STDERR_FILENO) == 1;
    p->drawn = false;
}

static void format_eta(double s, char *out, size_t cap)
{
    const long t = s < 0 || s > 359999 ? -1 : (long)(s + 0.5);
    if (t < 0)
        snprintf(out, cap, "--:--");
    else
        snprintf(out, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
}

void pack_progress_update(pack_progress *p, int64_t done, int64_t records, int64_t bytes)
{
    if (p->quiet)
        return;
    const double now = pack_now();
    if (now - p->last < (p->tty ? 0.1 : 2.0) && done != p->total)
        return;
    p->last = now;
    const double dt = now - p->start > 1e-6 ? now - p->start : 1e-6;
    const double rate = (double)done / dt;
    char eta[32];
    format_eta(rate > 0 ? (double)(p->total - done) / rate : -1, eta, sizeof eta);
    const double pct = p->total ? 100.0 * (double)done / (double)p->total : 100.0;
    if (p->tty) {
        char bar[31];
        const int fill = (int)(pct * 30 / 100);
        for (int i = 0; i < 30; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[30] = '\0';
        fprintf(stderr, "\r[%s] %5.1f%% %lld/%lld  %.0f rec/s  %.1f MB/s  ETA %s ", bar, pct,
                (long long)done, (long long)p->total, (double)records / dt,
                (double)bytes / dt / 1e6, eta);
        p->drawn = true;
    } else {
        fprintf(stderr,
                "stoker-pack: %lld/%lld %s (%.1f%%), %lld records, %.0f rec/s, "
                "%.1f MB/s, ETA %s\n",
                (long long)done, (long long)p->total, p->noun, pct, (long long)records,
                (double)records / dt, (double)bytes / dt / 1e6, eta);
    }
    fflush(stderr);
}

void pack_progress_end(pack_progress *p)
{
    if (p->tty && p->drawn)
        fputc('\n', stderr);
    p->drawn = false;
}

void pack_skips_add(pack_skips *s, const char *path, const char *reason)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        char **v = realloc(s->lines, s->cap * sizeof *v);
        if (!v) {
            cli_err("out of memory");
            exit(PACK_FAIL);
        }
        s->lines = v;
    }
    const size_t n = strlen(path) + strlen(reason) + 3;
    char *line = malloc(n);
    if (!line) {
        cli_err("out of memory");
        exit(PACK_FAIL);
    }
    snprintf(line, n, "%s: %s", path, reason);
    s->lines[s->n++] = line;
}

void pack_skips_free(pack_skips *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->lines[i]);
    free(s->lines);
    memset(s, 0, sizeof *s);
}
