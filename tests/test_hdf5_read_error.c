/* SPDX-License-Identifier: Apache-2.0 */
/* A read of an HDF5 file failing with an I/O error, where libhdf5 reads the records itself
 * (variable-length records, as h5py writes bytes): the error says nothing about the record,
 * so it fails the batch with -EIO under on_corrupt=skip too, naming the file and the record,
 * and no record is counted as skipped. Before, libhdf5's failed reads all counted as corrupt,
 * and skip replaced the record as if it were damaged. The same at open, for every layout:
 * each read made while a data set opens (stoker's and libhdf5's), failed in turn, fails the
 * open with -EIO (before, STOKER_E_CORRUPT, STOKER_E_FORMAT or STOKER_E_UNSUPPORTED, by the
 * step the open was at). The failures are injected into the reads of the file, libhdf5's
 * and stoker's: this program's pread stands in front of the C library's for the one file. */
#include "test_loader_util.h"

#ifdef STOKER_HAVE_HDF5
#include <dlfcn.h>
#include <hdf5.h>
#include <limits.h>
#include <stdatomic.h>

#define N_RECORDS 400

static char g_target[PATH_MAX];
static atomic_int g_armed; /* reads of g_target still to fail */
static atomic_int g_failed;
static atomic_int g_nth;   /* > 0: the g_nth-th read of g_target from now fails */
static atomic_int g_reads; /* reads of g_target since g_nth was set */

static bool is_target(int fd)
{
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    const ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0)
        return false;
    path[n] = '\0';
    return strcmp(path, g_target) == 0;
}

/* libhdf5's file driver reads with pread: it finds this one first. */
ssize_t pread(int fd, void *buf, size_t count, off_t offset)
{
    static ssize_t (*real)(int, void *, size_t, off_t);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "pread");
    if (atomic_load(&g_armed) > 0 && is_target(fd) && atomic_fetch_sub(&g_armed, 1) > 0) {
        atomic_fetch_add(&g_failed, 1);
        errno = EIO;
        return -1;
    }
    if (atomic_load(&g_nth) > 0 && is_target(fd) &&
        atomic_fetch_add(&g_reads, 1) + 1 == atomic_load(&g_nth)) {
        errno = EIO;
        return -1;
    }
    return real(fd, buf, count, offset);
}

/* n records of `least` to 1.5 x `least` bytes of random bytes, variable-length, with
 * labels. */
static void make_vlen(const char *path, int n_records, size_t least)
{
    hvl_t recs[N_RECORDS];
    int64_t labels[N_RECORDS];
    uint64_t s = 7;
    T_ASSERT(n_records <= N_RECORDS);
    for (int i = 0; i < n_records; i++) {
        const size_t n = least + (size_t)(t_rand(&s) % (least / 2));
        uint8_t *p = malloc(n);
        T_ASSERT(p != NULL);
        for (size_t j = 0; j < n; j++)
            p[j] = (uint8_t)t_rand(&s);
        recs[i] = (hvl_t){n, p};
        labels[i] = i;
    }
    const hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t n = (hsize_t)n_records;
    const hid_t sp = H5Screate_simple(1, &n, NULL);
    const hid_t ft = H5Tvlen_create(H5T_STD_U8LE), mt = H5Tvlen_create(H5T_NATIVE_UINT8);
    T_ASSERT(f >= 0 && sp >= 0 && ft >= 0 && mt >= 0);
    hid_t d = H5Dcreate2(f, "images", ft, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    T_ASSERT(d >= 0 && H5Dwrite(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, recs) >= 0);
    H5Dclose(d);
    d = H5Dcreate2(f, "labels", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    T_ASSERT(d >= 0 && H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels) >= 0);
    H5Dclose(d);
    H5Tclose(ft);
    H5Tclose(mt);
    H5Sclose(sp);
    T_ASSERT(H5Fclose(f) >= 0);
    for (int i = 0; i < n_records; i++)
        free(recs[i].p);
}

/* 64 records of 300 bytes (uint8 [300]) with labels: contiguous, or chunked by 4 records
 * (deflated with `deflate`), so that libhdf5 maps the chunks at open. */
static void make_rows(const char *path, bool chunked, bool deflate)
{
    enum { ROWS = 64, RS = 300 };
    static uint8_t img[ROWS][RS];
    int64_t labels[ROWS];
    for (int i = 0; i < ROWS; i++) {
        for (int k = 0; k < RS; k++)
            img[i][k] = (uint8_t)(i * 7 + k);
        labels[i] = i % 5;
    }
    const hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t dims[2] = {ROWS, RS}, chunk[2] = {4, RS}, n = ROWS;
    const hid_t sp = H5Screate_simple(2, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    T_ASSERT(f >= 0 && sp >= 0 && dcpl >= 0);
    T_ASSERT(!chunked || H5Pset_chunk(dcpl, 2, chunk) >= 0);
    T_ASSERT(!deflate || H5Pset_deflate(dcpl, 4) >= 0);
    hid_t d = H5Dcreate2(f, "images", H5T_STD_U8LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    T_ASSERT(d >= 0 && H5Dwrite(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, img) >= 0);
    H5Dclose(d);
    const hid_t lsp = H5Screate_simple(1, &n, NULL);
    d = H5Dcreate2(f, "labels", H5T_STD_I64LE, lsp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    T_ASSERT(d >= 0 && H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels) >= 0);
    H5Dclose(d);
    H5Sclose(lsp);
    H5Pclose(dcpl);
    H5Sclose(sp);
    T_ASSERT(H5Fclose(f) >= 0);
}

/* make_rows' contiguous layout in a file whose root group holds `links` more (empty groups),
 * in the newest format: the links live in a B-tree, and looking up "labels" reads other
 * nodes than looking up "images". */
static void make_crowded(const char *path, int links)
{
    make_rows(path, false, false);
    const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    T_ASSERT(fapl >= 0 && H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST) >= 0);
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.new", path);
    const hid_t src = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    const hid_t f = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    T_ASSERT(src >= 0 && f >= 0);
    for (int i = 0; i < links / 2; i++) {
        char name[32];
        snprintf(name, sizeof name, "a%05d", i);
        const hid_t g = H5Gcreate2(f, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        T_ASSERT(g >= 0);
        H5Gclose(g);
    }
    T_ASSERT(H5Ocopy(src, "images", f, "images", H5P_DEFAULT, H5P_DEFAULT) >= 0);
    for (int i = links / 2; i < links; i++) {
        char name[32];
        snprintf(name, sizeof name, "m%05d", i);
        const hid_t g = H5Gcreate2(f, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        T_ASSERT(g >= 0);
        H5Gclose(g);
    }
    T_ASSERT(H5Ocopy(src, "labels", f, "labels", H5P_DEFAULT, H5P_DEFAULT) >= 0);
    H5Fclose(src);
    T_ASSERT(H5Fclose(f) >= 0);
    H5Pclose(fapl);
    T_ASSERT(rename(tmp, path) == 0);
}

/* Fails the first read of path while it opens (stoker's look for the signature), then the
 * second, and so on through libhdf5's, until an open makes no read that fails: every failed
 * open answers -EIO, with a message on one line that names the file and the failed read. */
static void open_fails_with_eio(const char *path)
{
    T_ASSERT(realpath(path, g_target) != NULL);
    int n = 1;
    for (;; n++) {
        atomic_store(&g_reads, 0);
        atomic_store(&g_nth, n);
        stoker_dataset *ds = NULL;
        const int rc = stoker_dataset_open(&ds, path, NULL);
        const int reads = atomic_load(&g_reads);
        atomic_store(&g_nth, 0);
        T_ASSERT(ds != NULL);
        const char *msg = stoker_dataset_errmsg(ds);
        if (reads < n) { /* no read failed: the open went through */
            T_OK(rc);
            stoker_dataset_close(ds);
            break;
        }
        if (rc != -EIO)
            T_FAIL("%s: read %d failed: %s (%d): %s", path, n, stoker_strerror(rc), rc, msg);
        T_CONTAINS(msg, path);
        T_CONTAINS(msg, "Input/output error");
        T_ASSERT(!strchr(msg, '\n'));
        stoker_dataset_close(ds);
    }
    printf("%s: each of the %d reads at open failed in turn: -EIO\n", path, n - 1);
    T_ASSERT(n > 3);
}

static stoker_loader *open_loader(const char *path)
{
    stoker_config *cfg = NULL;
    T_OK(stoker_config_create(&cfg));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_BATCH_SIZE, 4));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_THREADS, 2));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DEVICE, -1));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SHUFFLE, 0));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_ON_CORRUPT, STOKER_ON_CORRUPT_SKIP));
    stoker_loader *l = NULL;
    T_OK(stoker_loader_create(&l, path, cfg));
    stoker_config_destroy(cfg);
    return l;
}

int main(void)
{
    char *dir = t_mkdtemp("hdf5_read_error");
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/vlen.h5", dir);
    static const char *const kinds[] = {"vlen", "contiguous", "chunked", "deflated", "crowded"};
    for (int k = 0; k < 5; k++) {
        char small[PATH_MAX];
        snprintf(small, sizeof small, "%s/open_%s.h5", dir, kinds[k]);
        if (k == 0)
            make_vlen(small, 40, 2000);
        else if (k < 4)
            make_rows(small, k >= 2, k == 3);
        else
            make_crowded(small, 3000);
        open_fails_with_eio(small);
    }
    /* 40 MB, more than libhdf5 keeps in its metadata cache, so that records are read again
     * later */
    make_vlen(path, N_RECORDS, 80000);
    T_ASSERT(realpath(path, g_target) != NULL);
    stoker_loader *l = open_loader(path);
    T_EQ_INT(tl_stats(l).backend, STOKER_BACKEND_HDF5); /* libhdf5 reads the records */
    stoker_batch *b = NULL;
    T_OK(stoker_loader_next(l, &b));
    T_OK(stoker_batch_release(b));
    atomic_store(&g_armed, 1); /* the next read of the file libhdf5 makes fails */
    int rc = 0;
    int64_t batches = 1;
    while ((rc = stoker_loader_next(l, &b)) == 0) {
        T_OK(stoker_batch_release(b));
        batches++;
    }
    const char *msg = stoker_loader_errmsg(l);
    printf("after %lld batches: %s (%d): %s\n", (long long)batches, stoker_strerror(rc), rc, msg);
    T_EQ_INT(atomic_load(&g_failed), 1);
    T_EQ_RC(rc, -EIO);
    T_CONTAINS(msg, "vlen.h5");
    T_CONTAINS(msg, "record ");
    T_CONTAINS(msg, "a read of the file failed: Input/output error");
    T_ASSERT(!strchr(msg, '\n'));
    T_EQ_INT(tl_stats(l).skipped, 0);
    T_ASSERT(batches < N_RECORDS / 4);
    stoker_loader_destroy(l);
    t_rmrf(dir);
    free(dir);
    printf("ok\n");
    return 0;
}
#else
int main(void)
{
    printf("skipped: built without HDF5\n");
    return 77;
}
#endif
