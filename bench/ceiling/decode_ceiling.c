/* SPDX-License-Identifier: Apache-2.0 */
/* decode_ceiling: how fast can T threads decode JPEGs with libjpeg and nothing else?
 *
 * Loads every JPEG named in LIST into memory, then decodes them REPS times over with T
 * threads, twice: the full image, and only a torchvision-style RandomResizedCrop box
 * (jpeg_crop_scanline for the columns, jpeg_skip_scanlines for the rows above it). No
 * resize, no normalise, no copy: the upper bound of any pipeline that decodes with libjpeg
 * on this machine. Prints one JSON object per mode on stdout.
 *
 *   decode_ceiling [--threads T] [--reps R] [--mode full|crop|both] [--dct islow|ifast]
 *                  [--seed S] [--max-images N] LIST      (LIST "-": standard input)
 *
 * Grey JPEGs decode to RGB; CMYK/YCCK ones to CMYK (libjpeg-turbo 2.1 converts no further).
 * Files that fail to decode are counted apart and left out of the rate. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <jpeglib.h> /* after stdio.h and stddef.h, which it needs */

#define MAX_THREADS 1024

typedef struct blob {
    unsigned char *data;
    unsigned long size;
} blob;

typedef struct job {
    const blob *blobs;
    int64_t nblobs, total; /* total = nblobs × reps */
    int crop;
    J_DCT_METHOD dct;
    uint64_t seed;
    atomic_llong next, ok, failed, pixels;
} job;

typedef struct err_mgr {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
} err_mgr;

typedef struct worker {
    job *job;
    struct jpeg_decompress_struct dec;
    err_mgr err;
    unsigned char *out;
    size_t out_cap;
} worker;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double cpu_seconds(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec * 1e-6 +
           (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec * 1e-6;
}

static void on_error(j_common_ptr c)
{
    longjmp(((err_mgr *)c->err)->jump, 1);
}

/* Warnings (damaged data) are not printed: the ceiling measures decoding only. */
static void on_message(j_common_ptr c, int level)
{
    (void)c;
    (void)level;
}

/* splitmix64: one independent stream per image, so boxes do not depend on threads. */
static uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *s, double lo, double hi)
{
    return lo + (hi - lo) * (double)(next_u64(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* torchvision's RandomResizedCrop.get_params: scale (0.08, 1), ratio (3/4, 4/3), ten tries,
 * then a centre crop clamped to the ratio range. Python's round() rounds half to even, as
 * nearbyint does in the default rounding mode. */
static void random_resized_crop(int width, int height, uint64_t *s, int *x, int *y, int *w, int *h)
{
    const double area = (double)width * height, lo = log(3.0 / 4.0), hi = log(4.0 / 3.0);
    for (int k = 0; k < 10; k++) {
        const double target = area * uniform(s, 0.08, 1.0), aspect = exp(uniform(s, lo, hi));
        const int cw = (int)nearbyint(sqrt(target * aspect));
        const int ch = (int)nearbyint(sqrt(target / aspect));
        if (cw > 0 && cw <= width && ch > 0 && ch <= height) {
            *y = (int)(next_u64(s) % (uint64_t)(height - ch + 1));
            *x = (int)(next_u64(s) % (uint64_t)(width - cw + 1));
            *w = cw;
            *h = ch;
            return;
        }
    }
    const double in_ratio = (double)width / height;
    *w = width;
    *h = height;
    if (in_ratio < 3.0 / 4.0)
        *h = (int)nearbyint(width / (3.0 / 4.0));
    else if (in_ratio > 4.0 / 3.0)
        *w = (int)nearbyint(height * (4.0 / 3.0));
    *x = (width - *w) / 2;
    *y = (height - *h) / 2;
}

static int reserve(worker *wk, size_t bytes)
{
    if (bytes <= wk->out_cap)
        return 0;
    unsigned char *p = realloc(wk->out, bytes);
    if (!p)
        return -1;
    wk->out = p;
    wk->out_cap = bytes;
    return 0;
}

/* Decodes image `index` whole or its crop box into the worker's buffer; returns the pixels
 * written, or -1. Nothing that changes after setjmp is read after a longjmp. */
static int64_t decode_one(worker *wk, int64_t index)
{
    const job *jb = wk->job;
    const blob *b = &jb->blobs[index % jb->nblobs];
    struct jpeg_decompress_struct *d = &wk->dec;
    uint64_t s = jb->seed ^ ((uint64_t)index * 0xD1B54A32D192ED03ull);
    if (setjmp(wk->err.jump)) {
        jpeg_abort_decompress(d);
        return -1;
    }
    jpeg_mem_src(d, b->data, b->size);
    jpeg_read_header(d, TRUE);
    const int cmyk = d->jpeg_color_space == JCS_CMYK || d->jpeg_color_space == JCS_YCCK;
    d->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    d->dct_method = jb->dct;
    int x = 0, y = 0, w = (int)d->image_width, h = (int)d->image_height;
    if (jb->crop)
        random_resized_crop(w, h, &s, &x, &y, &w, &h);
    jpeg_start_decompress(d);
    JDIMENSION xoff = (JDIMENSION)x, cw = (JDIMENSION)w;
    if (jb->crop) {
        jpeg_crop_scanline(d, &xoff, &cw);
        if (y > 0)
            jpeg_skip_scanlines(d, (JDIMENSION)y);
    }
    const size_t stride = (size_t)d->output_width * (size_t)d->output_components;
    if (reserve(wk, stride * (size_t)h) != 0) {
        jpeg_abort_decompress(d);
        return -1;
    }
    JSAMPROW rows[16];
    for (int r = 0; r < h;) {
        int n = 0;
        while (n < 16 && r + n < h) {
            rows[n] = wk->out + (size_t)(r + n) * stride;
            n++;
        }
        const JDIMENSION got = jpeg_read_scanlines(d, rows, (JDIMENSION)n);
        if (got == 0) {
            jpeg_abort_decompress(d);
            return -1;
        }
        r += (int)got;
    }
    jpeg_abort_decompress(d); /* skips the rows below the box without decoding them */
    return (int64_t)cw * h;
}

static void *work(void *arg)
{
    worker *wk = arg;
    job *jb = wk->job;
    wk->dec.err = jpeg_std_error(&wk->err.pub);
    wk->err.pub.error_exit = on_error;
    wk->err.pub.emit_message = on_message;
    jpeg_create_decompress(&wk->dec);
    int64_t ok = 0, failed = 0, pixels = 0;
    for (;;) {
        const int64_t i = atomic_fetch_add(&jb->next, 1);
        if (i >= jb->total)
            break;
        const int64_t p = decode_one(wk, i);
        if (p < 0) {
            failed++;
        } else {
            ok++;
            pixels += p;
        }
    }
    jpeg_destroy_decompress(&wk->dec);
    atomic_fetch_add(&jb->ok, ok);
    atomic_fetch_add(&jb->failed, failed);
    atomic_fetch_add(&jb->pixels, pixels);
    return NULL;
}

static int load(FILE *list, int64_t max_images, blob **out, int64_t *count)
{
    char path[4096];
    int64_t n = 0, cap = 0;
    blob *v = NULL;
    while (n < max_images && fgets(path, sizeof path, list)) {
        path[strcspn(path, "\r\n")] = 0;
        if (!path[0])
            continue;
        FILE *f = fopen(path, "rb");
        if (!f) {
            fprintf(stderr, "decode_ceiling: %s: %s\n", path, strerror(errno));
            continue;
        }
        long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
        if (n == cap) {
            cap = cap ? cap * 2 : 1024;
            blob *nv = realloc(v, (size_t)cap * sizeof *v);
            if (!nv) {
                fclose(f);
                break;
            }
            v = nv;
        }
        unsigned char *data = size > 0 ? malloc((size_t)size) : NULL;
        if (data && fseek(f, 0, SEEK_SET) == 0 && fread(data, 1, (size_t)size, f) == (size_t)size)
            v[n++] = (blob){data, (unsigned long)size};
        else
            free(data);
        fclose(f);
    }
    *out = v;
    *count = n;
    return n > 0 ? 0 : -1;
}

static int run(job *jb, int threads, double *seconds, double *cpu)
{
    static worker workers[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    int started = 0;
    const double t0 = now(), c0 = cpu_seconds();
    for (; started < threads; started++) {
        workers[started] = (worker){.job = jb};
        if (pthread_create(&tid[started], NULL, work, &workers[started]) != 0)
            break;
    }
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    *seconds = now() - t0;
    *cpu = cpu_seconds() - c0;
    for (int i = 0; i < started; i++)
        free(workers[i].out);
    return started == threads ? 0 : -1;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: decode_ceiling [--threads T] [--reps R] [--mode full|crop|both]\n"
               "                      [--dct islow|ifast] [--seed S] [--max-images N] LIST\n");
}

static int parse_long(const char *s, long min, long max, long *out)
{
    char *end = NULL;
    errno = 0;
    const long v = s ? strtol(s, &end, 10) : 0;
    if (!s || errno || !*s || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    long threads = 1, reps = 1, seed = 0, max_images = INT32_MAX;
    const char *mode = "both", *dct = "islow", *list_path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0;
        if (!strcmp(a, "--threads"))
            rc = parse_long(v, 1, MAX_THREADS, &threads), i++;
        else if (!strcmp(a, "--reps"))
            rc = parse_long(v, 1, 1000000, &reps), i++;
        else if (!strcmp(a, "--seed"))
            rc = parse_long(v, 0, INT32_MAX, &seed), i++;
        else if (!strcmp(a, "--max-images"))
            rc = parse_long(v, 1, INT32_MAX, &max_images), i++;
        else if (!strcmp(a, "--mode"))
            rc = (mode = v) ? 0 : -1, i++;
        else if (!strcmp(a, "--dct"))
            rc = (dct = v) ? 0 : -1, i++;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return usage(stdout), 0;
        else if (!list_path && (a[0] != '-' || !strcmp(a, "-")))
            list_path = a;
        else
            rc = -1;
        if (rc != 0) {
            usage(stderr);
            return 2;
        }
    }
    const int do_full = !strcmp(mode, "full") || !strcmp(mode, "both");
    const int do_crop = !strcmp(mode, "crop") || !strcmp(mode, "both");
    const int ifast = !strcmp(dct, "ifast");
    if (!list_path || (!do_full && !do_crop) || (!ifast && strcmp(dct, "islow"))) {
        usage(stderr);
        return 2;
    }
    FILE *list = strcmp(list_path, "-") ? fopen(list_path, "r") : stdin;
    if (!list) {
        fprintf(stderr, "decode_ceiling: %s: %s\n", list_path, strerror(errno));
        return 1;
    }
    blob *blobs = NULL;
    int64_t nblobs = 0;
    const int lrc = load(list, max_images, &blobs, &nblobs);
    if (list != stdin)
        fclose(list);
    if (lrc != 0) {
        fprintf(stderr, "decode_ceiling: no readable JPEG in %s\n", list_path);
        return 1;
    }
    int status = 0;
    for (int crop = 0; crop < 2; crop++) {
        if (!(crop ? do_crop : do_full))
            continue;
        job jb = {.blobs = blobs,
                  .nblobs = nblobs,
                  .total = nblobs * reps,
                  .crop = crop,
                  .dct = ifast ? JDCT_IFAST : JDCT_ISLOW,
                  .seed = (uint64_t)seed};
        double seconds = 0, cpu = 0;
        if (run(&jb, (int)threads, &seconds, &cpu) != 0) {
            fprintf(stderr, "decode_ceiling: cannot start %ld threads\n", threads);
            status = 1;
            break;
        }
        const long long ok = atomic_load(&jb.ok), failed = atomic_load(&jb.failed);
        const double s = seconds > 0 ? seconds : 1e-9, per = ok ? cpu / (double)ok : 0;
        printf("{\"mode\":\"%s\",\"dct\":\"%s\",\"threads\":%ld,\"files\":%lld,\"reps\":%ld,"
               "\"images\":%lld,\"failed\":%lld,\"seconds\":%.6f,\"images_per_sec\":%.3f,"
               "\"images_per_sec_per_thread\":%.3f,\"cpu_seconds\":%.6f,"
               "\"cpu_seconds_per_image\":%.9f,\"mpixels_per_sec\":%.3f}\n",
               crop ? "crop" : "full", ifast ? "ifast" : "islow", threads, (long long)nblobs, reps,
               ok, failed, seconds, (double)ok / s, (double)ok / s / (double)threads, cpu, per,
               (double)atomic_load(&jb.pixels) / s / 1e6);
        fflush(stdout);
    }
    for (int64_t i = 0; i < nblobs; i++)
        free(blobs[i].data);
    free(blobs);
    return status;
}
