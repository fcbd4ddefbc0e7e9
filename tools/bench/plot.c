/* SPDX-License-Identifier: Apache-2.0 */
/* --plot: the timeline as a self-contained SVG (no plotting dependency): throughput on the
 * left axis, the consumer's wait fraction on the right one, time along the bottom. */
#include "bench.h"

#include <errno.h>
#include <math.h>

#define W 820.0
#define H 420.0
#define LEFT 80.0
#define RIGHT 70.0
#define TOP 50.0
#define BOTTOM 60.0
#define PW (W - LEFT - RIGHT)
#define PH (H - TOP - BOTTOM)

/* A "nice" tick step (1, 2 or 5 times a power of ten) giving about n ticks up to max. */
static double nice_step(double max, int n)
{
    const double raw = max / n, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

static void axes(FILE *f, double tmax, double ymax, double xstep, double ystep)
{
    fprintf(f,
            "<rect x='%.0f' y='%.0f' width='%.0f' height='%.0f' fill='none' "
            "stroke='#444'/>\n",
            LEFT, TOP, PW, PH);
    for (double x = 0; x <= tmax + 1e-9; x += xstep) {
        const double px = LEFT + PW * x / tmax;
        fprintf(f,
                "<line x1='%.1f' y1='%.0f' x2='%.1f' y2='%.0f' stroke='#ddd'/>"
                "<text x='%.1f' y='%.0f' text-anchor='middle'>%g</text>\n",
                px, TOP, px, TOP + PH, px, TOP + PH + 18, x);
    }
    for (double y = 0; y <= ymax + 1e-9; y += ystep) {
        const double py = TOP + PH - PH * y / ymax;
        fprintf(f,
                "<line x1='%.0f' y1='%.1f' x2='%.0f' y2='%.1f' stroke='#ddd'/>"
                "<text x='%.0f' y='%.1f' text-anchor='end' fill='#1f5fbf'>%g</text>\n",
                LEFT, py, LEFT + PW, py, LEFT - 6, py + 4, y);
    }
    for (int k = 0; k <= 4; k++) {
        const double py = TOP + PH - PH * k / 4.0;
        fprintf(f, "<text x='%.0f' y='%.1f' fill='#c0392b'>%d%%</text>\n", LEFT + PW + 6, py + 4,
                25 * k);
    }
    fprintf(f, "<text x='%.0f' y='%.0f' text-anchor='middle'>time (s)</text>\n", LEFT + PW / 2,
            H - 15);
    fprintf(f,
            "<text transform='translate(20,%.0f) rotate(-90)' text-anchor='middle' "
            "fill='#1f5fbf'>records/s</text>\n",
            TOP + PH / 2);
    fprintf(f,
            "<text transform='translate(%.0f,%.0f) rotate(90)' text-anchor='middle' "
            "fill='#c0392b'>consumer wait</text>\n",
            W - 18, TOP + PH / 2);
}

/* A point's figure holds over the interval it measured, so the first one is drawn from the
 * start of the run: a run shorter than a step, measured by one point, is a level line. */
static void series(FILE *f, const result *r, double tmax, double ymax, int which)
{
    fprintf(f, "<polyline fill='none' stroke-width='2' stroke='%s' points='",
            which ? "#c0392b" : "#1f5fbf");
    for (size_t i = 0; i < r->ntimeline; i++) {
        const sample *s = &r->timeline[i];
        const double v = which ? s->wait_fraction / 1.0 : s->records_per_sec / ymax;
        if (i == 0)
            fprintf(f, "%.1f,%.1f ", LEFT, TOP + PH - PH * v);
        fprintf(f, "%.1f,%.1f ", LEFT + PW * s->t / tmax, TOP + PH - PH * v);
    }
    fprintf(f, "'/>\n");
}

static void legend(FILE *f)
{
    const double x = LEFT + 12, y = TOP + 14;
    fprintf(f,
            "<rect x='%.0f' y='%.0f' width='190' height='44' fill='white' "
            "stroke='#999'/>\n",
            x - 6, y - 10);
    fprintf(f,
            "<line x1='%.0f' y1='%.0f' x2='%.0f' y2='%.0f' stroke='#1f5fbf' "
            "stroke-width='2'/><text x='%.0f' y='%.0f'>throughput (records/s)</text>\n",
            x, y, x + 24, y, x + 30, y + 4);
    fprintf(f,
            "<line x1='%.0f' y1='%.0f' x2='%.0f' y2='%.0f' stroke='#c0392b' "
            "stroke-width='2'/><text x='%.0f' y='%.0f'>consumer wait (%%)</text>\n",
            x, y + 20, x + 24, y + 20, x + 30, y + 24);
}

static void plot(FILE *f, const result *r)
{
    double tmax = r->seconds > 0 ? r->seconds : 1, ymax = 0;
    for (size_t i = 0; i < r->ntimeline; i++) {
        if (r->timeline[i].records_per_sec > ymax)
            ymax = r->timeline[i].records_per_sec;
        if (r->timeline[i].t > tmax)
            tmax = r->timeline[i].t;
    }
    const double xstep = nice_step(tmax, 8), ystep = nice_step(ymax > 0 ? ymax : 1, 5);
    tmax = ceil(tmax / xstep - 1e-9) * xstep;
    ymax = ceil((ymax > 0 ? ymax : 1) / ystep - 1e-9) * ystep;
    char samples[96];
    if (r->ntimeline == 1)
        snprintf(samples, sizeof samples, "one sample: the run took %.3g s", r->seconds);
    else
        snprintf(samples, sizeof samples, "%zu samples every 0.25 s", r->ntimeline);
    fprintf(f,
            "<?xml version='1.0' encoding='UTF-8'?>\n<svg xmlns='http://www.w3.org/2000/svg'"
            " width='%.0f' height='%.0f' viewBox='0 0 %.0f %.0f' font-family='sans-serif' "
            "font-size='12'>\n<rect width='100%%' height='100%%' fill='white'/>\n"
            "<text x='%.0f' y='28' text-anchor='middle' font-size='15'>stoker-bench: "
            "throughput and consumer wait (%s)</text>\n",
            W, H, W, H, W / 2, samples);
    axes(f, tmax, ymax, xstep, ystep);
    series(f, r, tmax, ymax, 0);
    series(f, r, tmax, ymax, 1);
    legend(f);
    fprintf(f, "</svg>\n");
}

int bench_plot(const char *path, const result *r)
{
    char *tmp = NULL;
    FILE *f = bench_out_open(path, &tmp);
    if (!f)
        return -errno;
    plot(f, r);
    return bench_out_close(f, tmp, path, 1);
}
