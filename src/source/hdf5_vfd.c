/* SPDX-License-Identifier: Apache-2.0 */
/* A read-only virtual file driver for libhdf5 (the H5FD class of HDF5 1.10): every byte
 * libhdf5 reads of the file (superblock, object headers, chunk indexes, labels, the global
 * heap of variable-length records) comes from a stoker__h5_bytes, whose read function is
 * the remote transport's (docs/HDF5.md, "Over HTTP(S) and S3"). libhdf5 learns the file's
 * size from it and never writes.
 *
 * Why a driver of our own, and not the file image or the ros3 driver: a file image is the
 * whole file in memory before the first byte is parsed; ros3 is missing from many builds
 * (Debian's among them) and would fetch around the block cache, its limits, locks and ETag
 * pinning, and the SigV4 signing and retries of the transport. With this driver libhdf5's
 * few small metadata reads and the records read by the workers share one cache.
 *
 * Every call comes from libhdf5, under stoker's HDF5 lock (hdf5.c): the bytes' `rc`,
 * `err` and `cancel` are written and read under that lock only. */
#include "source/hdf5.h"

#include <H5FDpublic.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

typedef struct vfd_info {
    stoker__h5_bytes *bytes;
} vfd_info;

typedef struct vfd_file {
    H5FD_t pub; /* first: libhdf5 sees this part */
    stoker__h5_bytes *bytes;
    haddr_t eoa;
} vfd_file;

#define VFD_MAXADDR (((haddr_t)1 << 62) - 1)

static hid_t vfd_id = -1;

/* Pushes a read error in the I/O class, so that libhdf5's caller fails with it. */
static void vfd_error(const char *func, hid_t min, const char *what)
{
    H5Epush2(H5E_DEFAULT, __FILE__, func, __LINE__, H5E_ERR_CLS, H5E_VFL, min, "%s", what);
}

static H5FD_t *vfd_open(const char *name, unsigned flags, hid_t fapl, haddr_t maxaddr)
{
    (void)maxaddr;
    const vfd_info *info = H5Pget_driver_info(fapl);
    stoker__h5_bytes *b = info ? info->bytes : NULL;
    if (!b || (flags & (H5F_ACC_RDWR | H5F_ACC_CREAT | H5F_ACC_TRUNC))) {
        vfd_error(__func__, H5E_CANTOPENFILE, "the file is read-only");
        return NULL;
    }
    if (strcmp(name, b->name) != 0) {
        /* an external link or a virtual dataset's source: another file, not reached here */
        vfd_error(__func__, H5E_CANTOPENFILE, "only the remote file itself can be read");
        return NULL;
    }
    vfd_file *f = stoker__calloc(1, sizeof *f);
    if (!f) {
        vfd_error(__func__, H5E_CANTALLOC, "out of memory");
        return NULL;
    }
    f->bytes = b;
    return &f->pub;
}

static herr_t vfd_close(H5FD_t *file)
{
    stoker__free(file);
    return 0;
}

static int vfd_cmp(const H5FD_t *a, const H5FD_t *b)
{
    const stoker__h5_bytes *x = ((const vfd_file *)a)->bytes, *y = ((const vfd_file *)b)->bytes;
    return x == y ? 0 : x < y ? -1 : 1;
}

static herr_t vfd_query(const H5FD_t *file, unsigned long *flags)
{
    (void)file;
    /* metadata reads gathered into larger ones, and raw data read through a sieve buffer:
     * fewer, larger reads of the transport */
    *flags = H5FD_FEAT_ACCUMULATE_METADATA | H5FD_FEAT_DATA_SIEVE | H5FD_FEAT_AGGREGATE_SMALLDATA |
             H5FD_FEAT_AGGREGATE_METADATA;
    return 0;
}

static haddr_t vfd_get_eoa(const H5FD_t *file, H5FD_mem_t type)
{
    (void)type;
    return ((const vfd_file *)file)->eoa;
}

static herr_t vfd_set_eoa(H5FD_t *file, H5FD_mem_t type, haddr_t addr)
{
    (void)type;
    ((vfd_file *)file)->eoa = addr;
    return 0;
}

static haddr_t vfd_get_eof(const H5FD_t *file, H5FD_mem_t type)
{
    (void)type;
    return (haddr_t)((const vfd_file *)file)->bytes->size;
}

/* Bytes past the end of the file read as zeros, as with libhdf5's own drivers. */
static herr_t vfd_read(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size,
                       void *buf)
{
    (void)type;
    (void)dxpl;
    stoker__h5_bytes *b = ((vfd_file *)file)->bytes;
    if (addr == HADDR_UNDEF || addr > VFD_MAXADDR || size > VFD_MAXADDR - addr) {
        vfd_error(__func__, H5E_OVERFLOW, "address out of range");
        return -1;
    }
    const uint64_t have = addr >= b->size ? 0 : b->size - addr;
    const uint64_t n = size < have ? size : have;
    memset((uint8_t *)buf + n, 0, size - n);
    if (n == 0)
        return 0;
    stoker__err err = {0};
    const int rc = b->read(b->ctx, buf, n, addr, b->cancel, &err);
    if (rc < 0) {
        if (b->rc == 0) { /* the first failure is the cause: keep its message */
            b->rc = rc;
            b->err = err;
        }
        vfd_error(__func__, H5E_READERROR, err.msg[0] ? err.msg : "a read failed");
        return -1;
    }
    return 0;
}

static herr_t vfd_write(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size,
                        const void *buf)
{
    (void)file, (void)type, (void)dxpl, (void)addr, (void)size, (void)buf;
    vfd_error(__func__, H5E_WRITEERROR, "the file is read-only");
    return -1;
}

static herr_t vfd_truncate(H5FD_t *file, hid_t dxpl, hbool_t closing)
{
    (void)file, (void)dxpl, (void)closing;
    return 0; /* read-only: nothing was written, nothing changes size */
}

static const H5FD_class_t VFD_CLASS = {
    .name = "stoker",
    .maxaddr = VFD_MAXADDR,
    .fc_degree = H5F_CLOSE_WEAK,
    .fapl_size = sizeof(vfd_info),
    .open = vfd_open,
    .close = vfd_close,
    .cmp = vfd_cmp,
    .query = vfd_query,
    .get_eoa = vfd_get_eoa,
    .set_eoa = vfd_set_eoa,
    .get_eof = vfd_get_eof,
    .read = vfd_read,
    .write = vfd_write,
    .truncate = vfd_truncate,
    .fl_map = H5FD_FLMAP_DICHOTOMY,
};

hid_t stoker__h5_vfd_fapl(stoker__h5_bytes *b)
{
    if (vfd_id < 0)
        vfd_id = H5FDregister(&VFD_CLASS); /* once a process: the id lives as long as it */
    const hid_t fapl = vfd_id < 0 ? -1 : H5Pcreate(H5P_FILE_ACCESS);
    const vfd_info info = {b};
    if (fapl >= 0 && H5Pset_driver(fapl, vfd_id, &info) < 0) {
        H5Pclose(fapl);
        return -1;
    }
    return fapl;
}
