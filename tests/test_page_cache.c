/* SPDX-License-Identifier: Apache-2.0 */
/* A data set larger than the page cache it may fill (STOKER_OPT_MAX_CACHE): buffered reads
 * drop their pages behind them, so after an epoch the shards' resident pages stay within the
 * bound plus what is still in flight, and the process does not grow. A data set within the
 * bound keeps its pages (a warm second epoch). Resident pages are counted with mincore on a
 * mapping of each shard, after the test has dropped what writing them left in the cache. */
#include "test_loader_util.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/mman.h>
#include <unistd.h>

#define N 1024
#define RS (64 << 10) /* 64 MiB of records in all */
#define BATCH 16

/* Resident bytes of every shard of the data set at path (drop: evict them first). */
static uint64_t resident(const char *path, bool drop)
{
    char pat[4200];
    snprintf(pat, sizeof pat, "%s/shard-*.stk", path);
    glob_t g;
    T_OK(glob(pat, 0, NULL, &g));
    const long page = sysconf(_SC_PAGESIZE);
    uint64_t total = 0;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        const int fd = open(g.gl_pathv[i], O_RDONLY);
        T_ASSERT(fd >= 0);
        if (drop) {
            T_OK(fdatasync(fd));
            T_OK(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED));
        }
        const off_t size = lseek(fd, 0, SEEK_END);
        void *m = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
        T_ASSERT(m != MAP_FAILED);
        const size_t pages = ((size_t)size + (size_t)page - 1) / (size_t)page;
        unsigned char *vec = malloc(pages);
        T_OK(mincore(m, (size_t)size, vec));
        for (size_t k = 0; k < pages; k++)
            total += (vec[k] & 1) ? (uint64_t)page : 0;
        free(vec);
        munmap(m, (size_t)size);
        close(fd);
    }
    globfree(&g);
    return total;
}

/* The process's resident set (VmRSS), in bytes. */
static uint64_t rss(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %llu kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return (uint64_t)kib << 10;
}

static void one_epoch(const char *path, int64_t max_cache, int32_t backend, stoker_stats *st)
{
    stoker_config *cfg = tl_cfg(BATCH, 2);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_BACKEND, backend));
    if (max_cache)
        T_OK(stoker_config_set_int(cfg, STOKER_OPT_MAX_CACHE, max_cache));
    stoker_loader *l = tl_open(path, cfg);
    int64_t v = 0;
    T_OK(stoker_loader_get_int(l, STOKER_OPT_MAX_CACHE, &v));
    T_ASSERT(max_cache == 0 || v == max_cache);
    int64_t n = 0;
    stoker_batch *b = NULL;
    int rc;
    while ((rc = stoker_loader_next(l, &b)) == 0) {
        tl_check_batch(b, RS);
        n += stoker_batch_count(b);
        T_OK(stoker_batch_release(b));
    }
    T_EQ_RC(rc, STOKER_END);
    T_EQ_INT(n, N);
    st->struct_size = sizeof *st;
    T_OK(stoker_loader_get_stats(l, st));
    stoker_loader_destroy(l);
    stoker_config_destroy(cfg);
}

int main(void)
{
    char *dir = t_mkdtemp("page-cache");
    char path[4200];
    snprintf(path, sizeof path, "%s/ds", dir);
    tl_make(path, N, RS, 0, 16 << 20);
    const uint64_t all = (uint64_t)N * RS;
    /* Batches in flight when the epoch ends: depth slots of read-ahead (4 by default). */
    const uint64_t in_flight = 4ull * BATCH * RS;
    static const int32_t backends[] = {STOKER_BACKEND_PREAD, STOKER_BACKEND_IO_URING};
    for (size_t k = 0; k < 2; k++) {
        if (backends[k] == STOKER_BACKEND_IO_URING && !stoker_capability_get(STOKER_CAP_IO_URING))
            continue;
        /* larger than its 8 MiB bound: read, then dropped */
        T_ASSERT(resident(path, true) < all / 8);
        const uint64_t rss0 = rss();
        stoker_stats st;
        one_epoch(path, 8 << 20, backends[k], &st);
        const uint64_t left = resident(path, false);
        printf("%s, max cache 8 MiB: %llu KiB of %llu resident after an epoch, %lld bytes "
               "dropped, RSS %+lld KiB\n",
               stoker_backend_name(backends[k]), (unsigned long long)(left >> 10),
               (unsigned long long)(all >> 10), (long long)st.dropped_bytes,
               (long long)((int64_t)rss() - (int64_t)rss0) / 1024);
        if (left > (8 << 20) + in_flight)
            T_FAIL("%llu bytes of the data set stayed in the page cache (bound %d + %llu)",
                   (unsigned long long)left, 8 << 20, (unsigned long long)in_flight);
        T_ASSERT(st.dropped_bytes >= (int64_t)(all - in_flight));
        T_ASSERT(rss() < rss0 + (16u << 20)); /* slots and staging, not the data set */

        /* within the bound (the default: half the memory available): pages are kept */
        T_ASSERT(resident(path, true) < all / 8);
        one_epoch(path, 0, backends[k], &st);
        T_EQ_INT(st.dropped_bytes, 0);
        T_ASSERT(resident(path, false) > all / 2);
    }
    t_rmrf(dir);
    free(dir);
    printf("page cache ok\n");
    return 0;
}
