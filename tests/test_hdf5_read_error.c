/* A read of an HDF5 file failing with an I/O error, where libhdf5 reads the records itself
 * (variable-length records, as h5py writes bytes): the error says nothing about the record,
 * so it fails the batch with -EIO under on_corrupt=skip too, naming the file and the record,
 * and no record is counted as skipped. Before, libhdf5's failed reads all counted as corrupt,
 * and skip replaced the record as if it were damaged. The failure is injected into libhdf5's
 * own reads: this program's pread stands in front of the C library's for the one file. */
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
    return real(fd, buf, count, offset);
}

/* N_RECORDS records of 80 to 120 KB of random bytes, variable-length, with labels: 40 MB,
 * more than libhdf5 keeps in its metadata cache, so that records are read again later. */
static void make_vlen(const char *path)
{
    hvl_t recs[N_RECORDS];
    int64_t labels[N_RECORDS];
    uint64_t s = 7;
    for (int i = 0; i < N_RECORDS; i++) {
        const size_t n = 80000 + (size_t)(t_rand(&s) % 40000);
        uint8_t *p = malloc(n);
        T_ASSERT(p != NULL);
        for (size_t j = 0; j < n; j++)
            p[j] = (uint8_t)t_rand(&s);
        recs[i] = (hvl_t){n, p};
        labels[i] = i;
    }
    const hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t n = N_RECORDS;
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
    for (int i = 0; i < N_RECORDS; i++)
        free(recs[i].p);
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
    make_vlen(path);
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
