/* SPDX-License-Identifier: Apache-2.0 */
/* Soak: many epochs through one loader, and many loaders created and destroyed, must not
 * grow the process: resident memory (from /proc/self/statm) after the last epoch or cycle
 * is within 1% of what it was after the first (plus a small absolute slack, see
 * RSS_SLACK), and the number of open file descriptors (/proc/self/fd) is unchanged.
 *   phase 1: 200 epochs over 64 raw records of 4 KiB (batch 8, 2 threads);
 *   phase 2: 50 epochs over 64 small JPEGs with the train transform (batch 8, 2 threads);
 *   phase 3: 1,000 loader create/destroy cycles (2 threads), every other one destroyed
 *            mid-epoch with a batch still held; measured from the end of cycle 10.
 * glibc gives new threads new malloc arenas until it holds 8 per core, each keeping a few
 * touched pages: with fresh worker threads every cycle, RSS rises by about 1 MiB over the
 * first ~30 cycles on 2 cores (and longer on bigger machines), then stays flat. That is
 * glibc, not the loader (MALLOC_ARENA_MAX=1 makes it flat from the first cycle; a cap of 4
 * still grew by 772 KiB after cycle 10), so the test keeps one arena (mallopt M_ARENA_MAX
 * 1) and starts measuring after WARMUP_CYCLES cycles.
 * Under AddressSanitizer or ThreadSanitizer the RSS bound is not checked, since the
 * sanitizer's quarantine of freed memory grows on its own (by 72 MiB over the JPEG phase
 * under ASan); LeakSanitizer checks for leaks instead. The fd check always applies. */
#include "jpegutil.h"
#include "test_loader_util.h"

#include <dirent.h>
#include <malloc.h>

#define RECORDS 64
#define RECORD_SIZE 4096
#define BATCH 8
#define THREADS 2
#ifndef RAW_EPOCHS
#define RAW_EPOCHS 200
#endif
#define JPEG_EPOCHS 50
#define CYCLES 1000
#define WARMUP_CYCLES 10

/* Absolute slack on top of 1%: the process is about 9-10 MiB, so 1% is about 95 KiB, and
 * the first epochs are followed by a one-time settling of malloc's and libjpeg's memory of
 * up to about 100 KiB that does not grow with more epochs (+96 KiB over 200 epochs and the
 * same over 2,000; build with -DRAW_EPOCHS=2000 to see). 256 KiB is still far below what
 * one leaked batch per epoch (200 x 32 KiB) or one leaked loader per cycle would add. */
#define RSS_SLACK (256 * 1024)

static char *g_tmp;

static long rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    T_ASSERT(f != NULL);
    long size = 0, resident = 0;
    T_EQ_INT(fscanf(f, "%ld %ld", &size, &resident), 2);
    fclose(f);
    return resident * sysconf(_SC_PAGESIZE);
}

static int fd_count(void)
{
    DIR *d = opendir("/proc/self/fd");
    T_ASSERT(d != NULL);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory stream's own descriptor */
}

/* Asserts memory and descriptors did not grow from (rss0, fd0) to now. */
static void check_flat(const char *what, long rss0, int fd0)
{
    const long rss = rss_bytes();
    const int fds = fd_count();
    long allowed = rss0 / 100;
    if (allowed < RSS_SLACK)
        allowed = RSS_SLACK;
    printf("%s: RSS %ld KiB -> %ld KiB (%+ld KiB, allowed +%ld KiB%s), fds %d -> %d\n", what,
           rss0 / 1024, rss / 1024, (rss - rss0) / 1024, allowed / 1024,
           SANITIZED ? ", not checked under a sanitizer" : "", fd0, fds);
    T_EQ_INT(fds, fd0);
    if (!SANITIZED && rss - rss0 > allowed)
        T_FAIL("%s: RSS grew by %ld bytes (from %ld to %ld), more than %ld", what, rss - rss0, rss0,
               rss, allowed);
}

/* Consumes one whole epoch; returns the batches seen. */
static int64_t one_epoch(stoker_loader *l, uint64_t rec_size)
{
    int64_t n = 0;
    for (;;) {
        stoker_batch *b = NULL;
        const int rc = stoker_loader_next(l, &b);
        if (rc == STOKER_END)
            return n;
        if (rc != 0)
            T_FAIL("next: %s: %s", stoker_strerror(rc), stoker_loader_errmsg(l));
        if (rec_size)
            tl_check_batch(b, rec_size);
        else
            T_EQ_INT(stoker_batch_count(b), BATCH);
        T_OK(stoker_batch_release(b));
        n++;
    }
}

static void soak_epochs(const char *path, stoker_config *cfg, int epochs, uint64_t rec_size,
                        const char *what)
{
    stoker_loader *l = tl_open(path, cfg);
    T_EQ_INT(one_epoch(l, rec_size), RECORDS / BATCH);
    const long rss0 = rss_bytes();
    const int fd0 = fd_count();
    for (int e = 1; e < epochs; e++)
        T_EQ_INT(one_epoch(l, rec_size), RECORDS / BATCH);
    stoker_stats st = {.struct_size = sizeof st};
    T_OK(stoker_loader_get_stats(l, &st));
    T_EQ_INT(st.batches, (int64_t)epochs * (RECORDS / BATCH));
    check_flat(what, rss0, fd0);
    stoker_loader_destroy(l);
}

static void make_jpeg_set(const char *path)
{
    static const t_jpeg_kind kinds[] = {
        {"420", 3, 2, 2, 0, 0, 0},
        {"gray", 1, 1, 1, 0, 0, 0},
        {"prog", 3, 2, 2, 1, 0, 0},
        {"cmyk", 4, 1, 1, 0, 0, 1},
    };
    const t_jpeg_set spec = {kinds, 4, {40, 7, 9}, {36, 5, 11}, 10, 0};
    t_write_jpeg_set(path, RECORDS, &spec);
}

static void soak_cycles(const char *path)
{
    stoker_config *cfg = tl_cfg(BATCH, THREADS);
    long rss0 = 0;
    int fd0 = 0;
    for (int c = 0; c < CYCLES; c++) {
        stoker_loader *l = tl_open(path, cfg);
        stoker_batch *b = NULL;
        T_OK(stoker_loader_next(l, &b));
        tl_check_batch(b, RECORD_SIZE);
        if (c % 2 == 0)
            T_OK(stoker_batch_release(b)); /* else destroyed with the batch still held */
        stoker_loader_destroy(l);
        if (c == WARMUP_CYCLES - 1) {
            rss0 = rss_bytes();
            fd0 = fd_count();
        }
    }
    stoker_config_destroy(cfg);
    char what[64];
    snprintf(what, sizeof what, "%d create/destroy cycles", CYCLES);
    check_flat(what, rss0, fd0);
}

int main(void)
{
#ifdef M_ARENA_MAX
    mallopt(M_ARENA_MAX, 1);
#endif
    g_tmp = t_mkdtemp("soak");
    char raw[4200], jpg[4200];
    snprintf(raw, sizeof raw, "%s/raw", g_tmp);
    snprintf(jpg, sizeof jpg, "%s/jpeg", g_tmp);
    tl_make(raw, RECORDS, RECORD_SIZE, 0, 0);
    make_jpeg_set(jpg);

    char what[64];
    stoker_config *cfg = tl_cfg(BATCH, THREADS);
    snprintf(what, sizeof what, "%d epochs, raw records", RAW_EPOCHS);
    soak_epochs(raw, cfg, RAW_EPOCHS, RECORD_SIZE, what);
    stoker_config_destroy(cfg);

    cfg = tl_cfg(BATCH, THREADS);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_TRANSFORM, STOKER_TRANSFORM_TRAIN));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SIZE, 32));
    snprintf(what, sizeof what, "%d epochs, JPEG train transform", JPEG_EPOCHS);
    soak_epochs(jpg, cfg, JPEG_EPOCHS, 0, what);
    stoker_config_destroy(cfg);

    soak_cycles(raw);

    t_rmrf(g_tmp);
    free(g_tmp);
    return 0;
}
