/* SPDX-License-Identifier: Apache-2.0 */
/* The HDF5 source: libhdf5 for the map, the loader's reader for the bytes.
 *
 * At open, under one global lock, libhdf5 tells where the records lie: a contiguous
 * dataset's file offset (H5Dget_offset), or every chunk's address, stored size and filter
 * mask (H5Dget_chunk_info_by_coord, one call per chunk: by index is quadratic in 1.10),
 * and which file those offsets are in: an external link or external raw storage puts the
 * bytes outside the file named. After that the hot path never calls libhdf5, except for
 * the layouts whose bytes cannot be mapped (variable-length data in the global heap, other
 * filters, byte orders other than the host's, virtual datasets, raw data across several
 * external files): those are read with H5Dread, serialised, and logged as such.
 *
 * libhdf5 1.10 is not robust against malicious files: an untrusted file should be
 * converted with stoker-pack in a separate process. */
#include "source/hdf5.h"
#include "common/config.h"
#include "format/signature.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_mutex_t h5_mu = PTHREAD_MUTEX_INITIALIZER;
static H5E_auto2_t h5_saved_fn;
static void *h5_saved_data;
static atomic_uint_fast64_t h5_serial;
static int h5_io_errno; /* under the lock: see note_io_error */

/* The errno of a failed system call in one entry of libhdf5's error stack, or 0. libhdf5
 * reports its file drivers' failed reads in the I/O class, with ", errno = N, error message
 * = ..." in the description. */
static int entry_errno(const H5E_error2_t *e)
{
    const char *at = e->maj_num == H5E_IO && e->desc ? strstr(e->desc, "errno = ") : NULL;
    const long v = at ? strtol(at + strlen("errno = "), NULL, 10) : 0;
    return v > 0 && v < 4096 ? (int)v : 0;
}

static herr_t errno_walk(unsigned n, const H5E_error2_t *e, void *data)
{
    (void)n;
    int *errnum = data;
    if (!*errnum)
        *errnum = entry_errno(e);
    return 0;
}

/* libhdf5's automatic error function while we hold the lock: it prints nothing, and notes
 * the first failed system call that any call reports, even one whose failure its caller
 * takes as an answer (a lookup that fails reads as "no labels dataset"), so that an open
 * that read less than it asked for fails with that error (the HDF5 source's open). */
static herr_t note_io_error(hid_t stack, void *data)
{
    (void)data;
    int errnum = 0;
    H5Ewalk2(stack, H5E_WALK_UPWARD, errno_walk, &errnum);
    if (!h5_io_errno)
        h5_io_errno = errnum;
    return 0;
}

/* libhdf5's automatic error printing is process-global (the error stack is per thread only
 * in thread-safe builds): it is replaced while we hold the lock, and whatever the
 * application had set is put back when we let go, so h5py or the application keep theirs. */
void stoker__h5_lock(void)
{
    pthread_mutex_lock(&h5_mu);
    H5Eget_auto2(H5E_DEFAULT, &h5_saved_fn, &h5_saved_data);
    H5Eset_auto2(H5E_DEFAULT, note_io_error, NULL);
    h5_io_errno = 0;
}

void stoker__h5_unlock(void)
{
    H5Eclear2(H5E_DEFAULT);
    H5Eset_auto2(H5E_DEFAULT, h5_saved_fn, h5_saved_data);
    pthread_mutex_unlock(&h5_mu);
}

typedef struct why_state {
    char *buf;
    size_t cap;
    int errnum; /* of a failed system call libhdf5 reported, or 0 */
} why_state;

static herr_t why_walk(unsigned n, const H5E_error2_t *e, void *data)
{
    (void)n;
    why_state *w = data;
    if (!w->buf[0] && e->desc && e->desc[0]) /* the innermost message that says something */
        snprintf(w->buf, w->cap, "%s", e->desc);
    if (!w->errnum)
        w->errnum = entry_errno(e);
    return 0;
}

static int take_why(char *buf, size_t cap)
{
    buf[0] = '\0';
    why_state w = {buf, cap, 0};
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, why_walk, &w);
    H5Eclear2(H5E_DEFAULT);
    if (w.errnum) /* the driver's message holds a time stamp, pointers and sizes: noise */
        snprintf(buf, cap, "a read of the file failed: %s", strerror(w.errnum));
    else if (!buf[0])
        snprintf(buf, cap, "libhdf5 failed without a reason (a filter missing from this build?)");
    for (char *c = buf; *c; c++) /* one line: libhdf5's messages may hold line breaks */
        if ((unsigned char)*c < 0x20)
            *c = ' ';
    return w.errnum;
}

const char *stoker__h5_why(char *buf, size_t cap)
{
    take_why(buf, cap);
    return buf;
}

int stoker__h5_read_failure(char *buf, size_t cap)
{
    const int errnum = take_why(buf, cap);
    return errnum ? -errnum : STOKER_E_CORRUPT;
}

/* ---- the path: "file" or "file:/dataset" ---- */

/* 1 when `file` is a regular file holding HDF5's signature, 0 when it is not (or cannot be
 * opened: the open that follows says why), -errno when reading it failed. */
static int has_signature(const char *file)
{
    const int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return 0;
    struct stat st;
    const int sig = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? stoker__hdf5_signature(fd) : 0;
    close(fd);
    return sig;
}

/* Splits path into its file and dataset parts (dataset NULL when there is no colon part).
 * 0, -ENOMEM, or -errno when reading the file failed. A URL is split by its name
 * (stoker__hdf5_url): its bytes are not read for this. */
static int split_path(const char *path, char **file, char **dset)
{
    *dset = NULL;
    *file = stoker__strdup(path);
    if (!*file)
        return -ENOMEM;
    const size_t url = stoker__hdf5_url(path);
    if (url > 0 && path[url] != '\0') {
        (*file)[url] = '\0';
        *dset = stoker__strdup(path + url + 1);
        return *dset ? 0 : -ENOMEM;
    }
    if (url > 0)
        return 0;
    const int sig = has_signature(path);
    if (sig != 0)
        return sig < 0 ? sig : 0;
    char *colon = strrchr(*file, ':');
    if (!colon)
        return 0;
    *colon = '\0';
    *dset = stoker__strdup(colon + 1);
    return *dset ? 0 : -ENOMEM;
}

/* Allocates nothing: every open asks, and allocation failures belong to the open itself. */
int stoker__h5_detect(const char *path)
{
    if (stoker__hdf5_url(path) > 0)
        return 1; /* a URL is told by its name: reading it to tell would cost a request */
    const int whole = has_signature(path);
    if (whole != 0)
        return whole;
    const char *colon = strrchr(path, ':');
    char file[4096];
    if (!colon || (size_t)(colon - path) >= sizeof file)
        return 0;
    memcpy(file, path, (size_t)(colon - path));
    file[colon - path] = '\0';
    return has_signature(file);
}

/* ---- types ---- */

static int32_t stoker_dtype_of(hid_t t)
{
    const size_t size = H5Tget_size(t);
    switch (H5Tget_class(t)) {
    case H5T_INTEGER: {
        const bool sig = H5Tget_sign(t) == H5T_SGN_2;
        return size == 1   ? (sig ? STOKER_DTYPE_INT8 : STOKER_DTYPE_UINT8)
               : size == 2 ? (sig ? STOKER_DTYPE_INT16 : STOKER_DTYPE_UINT16)
               : size == 4 ? (sig ? STOKER_DTYPE_INT32 : STOKER_DTYPE_UINT32)
               : size == 8 ? (sig ? STOKER_DTYPE_INT64 : STOKER_DTYPE_UINT64)
                           : 0;
    }
    case H5T_FLOAT:
        return size == 2   ? STOKER_DTYPE_FLOAT16
               : size == 4 ? STOKER_DTYPE_FLOAT32
               : size == 8 ? STOKER_DTYPE_FLOAT64
                           : 0;
    default: return 0;
    }
}

/* The stoker_dtype of a variable-length type's elements (h5py's vlen_dtype(...)), or 0 when
 * t is not one, or its elements are of no stoker_dtype. */
static int32_t vlen_dtype(hid_t t)
{
    if (H5Tget_class(t) != H5T_VLEN)
        return 0;
    const hid_t base = H5Tget_super(t);
    const int32_t dt = base >= 0 ? stoker_dtype_of(base) : 0;
    if (base >= 0)
        H5Tclose(base);
    return dt;
}

/* ---- open ---- */

typedef struct h5_open {
    stoker_dataset *ds;
    stoker__h5 *h;
    hid_t type, space, dcpl;
    int32_t dtype;
    bool native, vlen;
    const char *labels_name; /* NULL: no labels; "": the dataset itself */
    bool labels_set;
    bool vlen_any; /* variable-length rows of any dtype (else of 1-byte integers only) */
    uint64_t max_records, max_record_size;
} h5_open;

#define H5_FAIL_IF(cond, code, ...) STOKER_RETURN_IF(cond, &o->ds->err, code, __VA_ARGS__)

static int open_shape(h5_open *o)
{
    stoker__h5 *h = o->h;
    hsize_t dims[H5S_MAX_RANK];
    h->rank = H5Sget_simple_extent_ndims(o->space);
    H5_FAIL_IF(h->rank < 1 || h->rank > STOKER_MAX_DIMS + 1, STOKER_E_FORMAT,
               "%s: dataset %s: rank %d; records lie along axis 0 of a dataset of rank 1 to %d",
               h->file, stoker__h5_shown(h), h->rank, STOKER_MAX_DIMS + 1);
    H5Sget_simple_extent_dims(o->space, dims, NULL);
    h->row_bytes = h->esize;
    for (int d = 0; d < h->rank; d++) {
        h->dims[d] = dims[d];
        H5_FAIL_IF(d > 0 && stoker__mul_ovf(h->row_bytes, dims[d], &h->row_bytes), STOKER_E_LIMIT,
                   "%s: dataset %s: record size overflows", h->file, stoker__h5_shown(h));
    }
    return 0;
}

static int open_type(h5_open *o)
{
    stoker__h5 *h = o->h;
    const int32_t vdt = vlen_dtype(o->type);
    const size_t vsize = vdt ? stoker_dtype_size(vdt) : 0;
    o->vlen = vdt && (o->vlen_any || vsize == 1);
    /* bytes: a vlen of 1-byte integers, whatever their sign, unless any dtype is asked */
    o->dtype = !o->vlen                     ? stoker_dtype_of(o->type)
               : vsize == 1 && !o->vlen_any ? STOKER_DTYPE_UINT8
                                            : vdt;
    H5_FAIL_IF(o->dtype == 0, STOKER_E_UNSUPPORTED,
               "%s: dataset %s: element type not supported (integers, floats, or variable-length "
               "%s only; compound and string types are not); convert it with numpy first",
               h->file, stoker__h5_shown(h), o->vlen_any ? "integers or floats" : "uint8");
    h->esize = o->vlen ? vsize : H5Tget_size(o->type);
    o->native = o->vlen || h->esize == 1 || H5Tget_order(o->type) == H5T_ORDER_LE;
    H5_FAIL_IF(!o->native && o->dtype == STOKER_DTYPE_FLOAT16, STOKER_E_UNSUPPORTED,
               "%s: dataset %s: big-endian float16 is not supported", h->file, stoker__h5_shown(h));
    hid_t base = -1;
    if (o->vlen && vsize > 1) {
        const hid_t super = H5Tget_super(o->type);
        base = super >= 0 ? H5Tget_native_type(super, H5T_DIR_ASCEND) : -1;
        if (super >= 0)
            H5Tclose(super);
    }
    h->mtype = !o->vlen     ? H5Tget_native_type(o->type, H5T_DIR_ASCEND)
               : vsize == 1 ? H5Tvlen_create(H5T_NATIVE_UINT8)
               : base >= 0  ? H5Tvlen_create(base)
                            : -1;
    if (base >= 0)
        H5Tclose(base);
    H5_FAIL_IF(h->mtype < 0, STOKER_E_FORMAT, "%s: dataset %s: no native type", h->file,
               stoker__h5_shown(h));
    h->vlen = o->vlen;
    h->dtype = o->dtype;
    return 0;
}

/* Why a dataset of labels or offsets cannot be read as 64-bit integers without changing a
 * value (libhdf5 would truncate 3.7 to 3), or NULL when it can. */
static const char *not_int64(hid_t t)
{
    const H5T_class_t c = H5Tget_class(t);
    if (c == H5T_FLOAT)
        return "floating-point values, which would be truncated (3.7 to 3): store integers";
    return c != H5T_INTEGER || H5Tget_size(t) > 8 ? "not an integer type" : NULL;
}

/* Reads an integer dataset into 64-bit values, signed ones as int64 and unsigned ones as
 * uint64, so that libhdf5's conversion clips nothing: the caller checks the range. */
static herr_t read_int64(hid_t d, hid_t t, void *out, bool *is_unsigned)
{
    *is_unsigned = H5Tget_sign(t) == H5T_SGN_NONE;
    return H5Dread(d, *is_unsigned ? H5T_NATIVE_UINT64 : H5T_NATIVE_INT64, H5S_ALL, H5S_ALL,
                   H5P_DEFAULT, out);
}

/* Checks the labels dataset d (type t) and reads it into h->labels. */
static int read_labels(h5_open *o, hid_t d, hid_t t, hid_t sp, const char *name)
{
    stoker__h5 *h = o->h;
    const char *bad = not_int64(t);
    H5_FAIL_IF(bad, STOKER_E_FORMAT, "%s: labels dataset %s%s: %s; labels are int64", h->file, name,
               stoker__h5_field_note(h), bad);
    hsize_t n = 0;
    H5_FAIL_IF(H5Sget_simple_extent_ndims(sp) != 1 ||
                   H5Sget_simple_extent_dims(sp, &n, NULL) != 1 || n != h->records,
               STOKER_E_FORMAT,
               "%s: labels dataset %s: expected (%llu,) integers, one per record "
               "of %s",
               h->file, name, (unsigned long long)h->records, stoker__h5_shown(h));
    char why[256];
    bool is_unsigned = false;
    H5_FAIL_IF(read_int64(d, t, h->labels, &is_unsigned) < 0, STOKER_E_CORRUPT,
               "%s: labels dataset %s%s: read failed: %s", h->file, name, stoker__h5_field_note(h),
               stoker__h5_why(why, sizeof why));
    const uint64_t *u = (const uint64_t *)h->labels;
    for (uint64_t i = 0; is_unsigned && i < h->records; i++)
        H5_FAIL_IF(u[i] > INT64_MAX, STOKER_E_FORMAT,
                   "%s: labels dataset %s%s: label %llu is %llu, above INT64_MAX; labels are int64",
                   h->file, name, stoker__h5_field_note(h), (unsigned long long)i,
                   (unsigned long long)u[i]);
    return 0;
}

/* The labels: one integer per record, read once (small next to the records). Negative
 * values are delivered as they are. */
static int open_labels(h5_open *o, const char *group)
{
    stoker__h5 *h = o->h;
    h->labels = stoker__malloc((h->records ? h->records : 1) * sizeof *h->labels);
    H5_FAIL_IF(!h->labels, -ENOMEM, "%s: out of memory for labels", h->file);
    char name[1024];
    if (!o->labels_name[0]) /* the dataset itself */
        snprintf(name, sizeof name, "%s", h->name);
    else
        snprintf(name, sizeof name, "%s%s", o->labels_name[0] == '/' ? "" : group, o->labels_name);
    const bool link = H5Lexists(h->fid, name, H5P_DEFAULT) > 0;
    const bool there = link && H5Oexists_by_name(h->fid, name, H5P_DEFAULT) > 0;
    char why[256];
    /* a link that leads nowhere (an external link to a missing file) is not "no labels" */
    H5_FAIL_IF(link && !there, STOKER_E_FORMAT,
               "%s: labels dataset %s%s: the link leads nowhere: %s", h->file, name,
               stoker__h5_field_note(h), stoker__h5_why(why, sizeof why));
    H5_FAIL_IF(!there && o->labels_set, STOKER_E_FORMAT, "%s: no labels dataset %s%s", h->file,
               name, stoker__h5_field_note(h));
    for (uint64_t i = 0; !there && i < h->records; i++)
        h->labels[i] = -1;
    if (!there)
        return 0;
    const hid_t d = H5Dopen2(h->fid, name, H5P_DEFAULT);
    H5_FAIL_IF(d < 0, STOKER_E_FORMAT, "%s: labels dataset %s%s: %s", h->file, name,
               stoker__h5_field_note(h), stoker__h5_why(why, sizeof why));
    const hid_t t = H5Dget_type(d), sp = H5Dget_space(d);
    const int rc =
        t >= 0 && sp >= 0
            ? read_labels(o, d, t, sp, name)
            : stoker__fail(&o->ds->err, STOKER_E_FORMAT, "%s: labels dataset %s%s: %s", h->file,
                           name, stoker__h5_field_note(h), stoker__h5_why(why, sizeof why));
    if (sp >= 0)
        H5Sclose(sp);
    if (t >= 0)
        H5Tclose(t);
    H5Dclose(d);
    return rc;
}

/* Reads the offsets dataset d (n entries) into h->offs, refusing floating-point and
 * negative offsets, which libhdf5's conversion would truncate or clip to 0. */
static int read_offsets(h5_open *o, hid_t d, hsize_t n, const char *name)
{
    stoker__h5 *h = o->h;
    const hid_t t = H5Dget_type(d);
    const char *bad = t >= 0 ? not_int64(t) : "its type cannot be read";
    bool is_unsigned = false;
    herr_t r = -1;
    if (!bad && (h->offs = stoker__malloc((n + 1) * sizeof *h->offs)) != NULL)
        r = read_int64(d, t, h->offs, &is_unsigned);
    char why[256] = "";
    if (r < 0)
        stoker__h5_why(why, sizeof why);
    if (t >= 0)
        H5Tclose(t);
    H5_FAIL_IF(bad, STOKER_E_FORMAT, "%s: offsets dataset %s%s: %s; offsets are byte positions",
               h->file, name, stoker__h5_field_note(h), bad);
    H5_FAIL_IF(!h->offs, -ENOMEM, "%s: out of memory for %s", h->file, name);
    H5_FAIL_IF(r < 0, STOKER_E_CORRUPT, "%s: offsets dataset %s%s: read failed: %s", h->file, name,
               stoker__h5_field_note(h), why);
    const int64_t *v = (const int64_t *)h->offs;
    for (hsize_t i = 0; !is_unsigned && i < n; i++)
        H5_FAIL_IF(v[i] < 0, STOKER_E_FORMAT,
                   "%s: offsets dataset %s%s: entry %llu is %lld; offsets must not be negative",
                   h->file, name, stoker__h5_field_note(h), (unsigned long long)i, (long long)v[i]);
    return 0;
}

/* Blob layout: a 1-D uint8 dataset plus "<name>_offsets" (N+1 or N integers, the start of
 * each record; with N, the last record ends at the blob's end). 0 when there is none. */
static int open_offsets(h5_open *o)
{
    stoker__h5 *h = o->h;
    char name[1024], why[256];
    snprintf(name, sizeof name, "%s_offsets", h->name);
    if (h->rank != 1 || o->dtype != STOKER_DTYPE_UINT8 || o->vlen ||
        H5Lexists(h->fid, name, H5P_DEFAULT) <= 0)
        return 0;
    const hid_t d = H5Dopen2(h->fid, name, H5P_DEFAULT);
    H5_FAIL_IF(d < 0, STOKER_E_FORMAT, "%s: offsets dataset %s%s: %s", h->file, name,
               stoker__h5_field_note(h), stoker__h5_why(why, sizeof why));
    const hid_t sp = H5Dget_space(d);
    hsize_t n = 0;
    const bool shape_ok = sp >= 0 && H5Sget_simple_extent_ndims(sp) == 1 &&
                          H5Sget_simple_extent_dims(sp, &n, NULL) == 1 && n >= 1 &&
                          n <= o->max_records + 1;
    const int rc = shape_ok ? read_offsets(o, d, n, name) : 0;
    if (sp >= 0)
        H5Sclose(sp);
    H5Dclose(d);
    H5_FAIL_IF(!shape_ok, STOKER_E_FORMAT,
               "%s: offsets dataset %s%s: expected a 1-D integer array of 1 to %llu entries",
               h->file, name, stoker__h5_field_note(h), (unsigned long long)o->max_records + 1);
    if (rc < 0)
        return rc;
    const int64_t i = stoker__h5_bad_offset(h, n, o->max_record_size);
    H5_FAIL_IF(i >= 0, STOKER_E_CORRUPT,
               "%s: offsets dataset %s%s: record %llu spans [%llu, %llu) of a %llu-byte blob "
               "(or exceeds STOKER_OPT_MAX_RECORD_SIZE)",
               h->file, name, stoker__h5_field_note(h), (unsigned long long)i,
               (unsigned long long)h->offs[i], (unsigned long long)h->offs[i + 1],
               (unsigned long long)h->dims[0]);
    return 1;
}

/* ---- where the bytes are: the named file, or another ----
 *
 * The loader reads the bytes at the offsets libhdf5 gives from the file it opened. An
 * external link puts the dataset, and so its offsets, in another file; external raw
 * storage puts the bytes in plain files of their own; a virtual dataset takes them from
 * source datasets elsewhere. Each is read from the file that holds the bytes, or by
 * libhdf5 once every file it will read has been found whole. */

/* Makes fd (open on path) the file the loader reads, unless it is the named file itself. */
static int adopt_fd(h5_open *o, int fd, const char *path)
{
    stoker__h5 *h = o->h;
    struct stat a, b;
    if (fstat(fd, &a) == 0 && fstat(h->fd, &b) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino) {
        close(fd);
        return 0;
    }
    h->data_file = stoker__strdup(path);
    if (!h->data_file)
        close(fd);
    H5_FAIL_IF(!h->data_file, -ENOMEM, "%s: out of memory", h->file);
    close(h->fd);
    h->fd = fd;
    return 0;
}

/* The file that holds the dataset: the named one, or an external link's target. */
static int open_holder(h5_open *o)
{
    stoker__h5 *h = o->h;
    char path[4096];
    const ssize_t n = H5Fget_name(h->did, path, sizeof path);
    H5_FAIL_IF(n < 0 || (size_t)n >= sizeof path, STOKER_E_FORMAT,
               "%s: dataset %s: cannot tell which file holds it", h->file, stoker__h5_shown(h));
    if (strcmp(path, h->file) == 0)
        return 0;
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    const int e = errno;
    H5_FAIL_IF(fd < 0, -e,
               "%s: dataset %s lies in %s (an external link), which cannot be opened: %s", h->file,
               stoker__h5_shown(h), path, stoker_strerror(-e));
    return adopt_fd(o, fd, path);
}

/* prefix and name joined as libhdf5 joins them: an empty prefix or an absolute name leaves
 * the name alone. False when the result does not fit. */
static bool join_path(char *out, size_t cap, const char *prefix, const char *name)
{
    const size_t n = strlen(prefix);
    const int w = !n || name[0] == '/'
                      ? snprintf(out, cap, "%s", name)
                      : snprintf(out, cap, "%s%s%s", prefix, prefix[n - 1] == '/' ? "" : "/", name);
    return w >= 0 && (size_t)w < cap;
}

/* External file i: the next *left bytes of the data start at its offset; they must all be
 * there (libhdf5 reads what is missing as zeros). On success *fd is open on path (4096). */
static int open_segment(h5_open *o, const char *prefix, int i, uint64_t *left, int *fd,
                        uint64_t *off, char *path)
{
    stoker__h5 *h = o->h;
    char name[4096] = "", why[256];
    off_t at = 0;
    hsize_t size = 0;
    H5_FAIL_IF(H5Pget_external(o->dcpl, (unsigned)i, sizeof name, name, &at, &size) < 0 || at < 0,
               STOKER_E_FORMAT, "%s: dataset %s: external file %d: %s", h->file,
               stoker__h5_shown(h), i, stoker__h5_why(why, sizeof why));
    name[sizeof name - 1] = '\0';
    H5_FAIL_IF(!join_path(path, 4096, prefix, name), STOKER_E_LIMIT,
               "%s: dataset %s: external raw data file %s: path too long", h->file,
               stoker__h5_shown(h), name);
    const uint64_t need = size < *left ? size : *left;
    *fd = open(path, O_RDONLY | O_CLOEXEC);
    const int e = errno;
    H5_FAIL_IF(*fd < 0, -e,
               "%s: dataset %s: external raw data file %s%s is missing or cannot be "
               "opened: %s",
               h->file, stoker__h5_shown(h), path,
               path[0] == '/' ? "" : " (relative to the current directory or HDF5_EXTFILE_PREFIX)",
               stoker_strerror(-e));
    struct stat st;
    uint64_t end = 0;
    const bool whole = fstat(*fd, &st) == 0 && !stoker__add_ovf((uint64_t)at, need, &end) &&
                       end <= (uint64_t)st.st_size;
    if (!whole)
        close(*fd);
    H5_FAIL_IF(!whole, STOKER_E_CORRUPT,
               "%s: dataset %s: external raw data file %s is short: the dataset's bytes there end "
               "at %llu, the file at %llu (libhdf5 would read the rest as zeros)",
               h->file, stoker__h5_shown(h), path, (unsigned long long)end,
               (unsigned long long)st.st_size);
    *left -= need;
    *off = (uint64_t)at;
    return 0;
}

/* External raw storage: the bytes follow one another through the external files' segments,
 * named relative to the prefix libhdf5 uses for this dataset. 1 when they all lie in the
 * first file (now h->fd, from *base on), 0 when libhdf5 reads them across files. */
static int open_external(h5_open *o, int count, uint64_t *base)
{
    stoker__h5 *h = o->h;
    uint64_t left = 0;
    H5_FAIL_IF(stoker__mul_ovf(h->row_bytes, h->dims[0], &left), STOKER_E_LIMIT,
               "%s: dataset %s: size overflows", h->file, stoker__h5_shown(h));
    const uint64_t total = left;
    char prefix[4096] = "";
    const hid_t dapl = H5Dget_access_plist(h->did);
    const ssize_t n = dapl >= 0 ? H5Pget_efile_prefix(dapl, prefix, sizeof prefix) : -1;
    if (dapl >= 0)
        H5Pclose(dapl);
    H5_FAIL_IF(n < 0 || (size_t)n >= sizeof prefix, STOKER_E_FORMAT,
               "%s: dataset %s: cannot read its external file prefix", h->file,
               stoker__h5_shown(h));
    char path[4096];
    for (int i = 0; i < count && left > 0; i++) {
        int fd = -1;
        int rc = open_segment(o, prefix, i, &left, &fd, base, path);
        if (rc == 0 && i == 0 && left == 0)
            return (rc = adopt_fd(o, fd, path)) < 0 ? rc : 1;
        if (rc < 0)
            return rc;
        close(fd);
    }
    H5_FAIL_IF(left > 0, STOKER_E_FORMAT,
               "%s: dataset %s: its external files hold %llu of its %llu bytes", h->file,
               stoker__h5_shown(h), (unsigned long long)(total - left), (unsigned long long)total);
    return 0;
}

/* ---- virtual datasets: libhdf5 reads a source it cannot find as the fill value ---- */

/* name opened in the first folder of a ':'-separated list where it opens as HDF5 (a
 * leading ${ORIGIN} in a folder is the virtual dataset's folder), or -1. */
static hid_t open_in_list(const char *list, const char *origin, const char *name)
{
    hid_t f = -1;
    char dir[4096], path[4096];
    const char *p = list;
    while (p && *p && f < 0) {
        const size_t len = strcspn(p, ":");
        const size_t org = len >= 9 && strncmp(p, "${ORIGIN}", 9) == 0 ? 9 : 0;
        const int w =
            snprintf(dir, sizeof dir, "%s%.*s", org ? origin : "", (int)(len - org), p + org);
        if (len > 0 && w >= 0 && (size_t)w < sizeof dir && join_path(path, sizeof path, dir, name))
            f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        p += len + (p[len] == ':');
    }
    return f;
}

/* A source file opened where libhdf5 1.10 looks for it, or -1: an absolute name as it is
 * (failing that, its last component is looked for), then in the folders of HDF5_VDS_PREFIX
 * and of the dataset's virtual prefix, then in the virtual dataset's folder, then as it
 * is. The first file that opens as HDF5 is the one libhdf5 reads. */
static hid_t open_source_file(const stoker__h5 *h, const char *origin, const char *fname)
{
    hid_t f = fname[0] == '/' ? H5Fopen(fname, H5F_ACC_RDONLY, H5P_DEFAULT) : -1;
    const char *name = fname[0] == '/' ? strrchr(fname, '/') + 1 : fname;
    char prefix[4096] = "", path[4096];
    const hid_t dapl = f < 0 ? H5Dget_access_plist(h->did) : -1;
    const ssize_t n = dapl >= 0 ? H5Pget_virtual_prefix(dapl, prefix, sizeof prefix) : -1;
    if (dapl >= 0)
        H5Pclose(dapl);
    if (n < 0 || (size_t)n >= sizeof prefix)
        prefix[0] = '\0';
    if (f < 0)
        f = open_in_list(getenv("HDF5_VDS_PREFIX"), origin, name);
    if (f < 0)
        f = open_in_list(prefix, origin, name);
    if (f < 0 && join_path(path, sizeof path, origin, name))
        f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    return f >= 0 ? f : H5Fopen(name, H5F_ACC_RDONLY, H5P_DEFAULT);
}

/* Does source dataset d hold the part that mapping i reads? A whole-dataset source (h5py's
 * unsliced VirtualSource) must have as many elements as its place in the virtual dataset;
 * a selection must lie within d's extent. */
static bool source_covers(h5_open *o, size_t i, hid_t d)
{
    hsize_t dims[H5S_MAX_RANK], lo[H5S_MAX_RANK], hi[H5S_MAX_RANK];
    const hid_t sp = H5Dget_space(d), sel = H5Pget_virtual_srcspace(o->dcpl, i);
    const hid_t vsel = H5Pget_virtual_vspace(o->dcpl, i);
    const int rank = sp >= 0 ? H5Sget_simple_extent_dims(sp, dims, NULL) : -1;
    const hssize_t points = sel >= 0 ? H5Sget_select_npoints(sel) : -1;
    bool ok = rank >= 0 && points >= 0 && vsel >= 0;
    const bool whole = ok && H5Sget_select_type(sel) == H5S_SEL_ALL;
    if (whole)
        ok = H5Sget_simple_extent_npoints(sp) == H5Sget_select_npoints(vsel);
    else if (ok && points > 0)
        ok = H5Sget_simple_extent_ndims(sel) == rank && H5Sget_select_bounds(sel, lo, hi) >= 0;
    for (int k = 0; ok && !whole && points > 0 && k < rank; k++)
        ok = hi[k] < dims[k];
    if (vsel >= 0)
        H5Sclose(vsel);
    if (sel >= 0)
        H5Sclose(sel);
    if (sp >= 0)
        H5Sclose(sp);
    return ok;
}

typedef struct vds_file {
    char name[4096]; /* as the mapping names it ("." the virtual dataset's own file) */
    hid_t fid;       /* -1: not found */
} vds_file;

/* Mapping i's source: its file found where libhdf5 looks, its dataset there, large enough. */
static int check_source(h5_open *o, const char *origin, size_t i, vds_file *file)
{
    stoker__h5 *h = o->h;
    char fname[4096], dname[4096];
    const ssize_t fl = H5Pget_virtual_filename(o->dcpl, i, fname, sizeof fname);
    const ssize_t dl = H5Pget_virtual_dsetname(o->dcpl, i, dname, sizeof dname);
    H5_FAIL_IF(fl < 0 || dl < 0 || (size_t)fl >= sizeof fname || (size_t)dl >= sizeof dname,
               STOKER_E_FORMAT, "%s: dataset %s: virtual dataset mapping %zu cannot be read",
               h->file, stoker__h5_shown(h), i);
    H5_FAIL_IF(strchr(fname, '%') || strchr(dname, '%'), STOKER_E_UNSUPPORTED,
               "%s: dataset %s: virtual dataset source %zu (%s, dataset %s) is a printf-style "
               "pattern; such sources are not supported",
               h->file, stoker__h5_shown(h), i, fname, dname);
    if (strcmp(fname, file->name) != 0) {
        if (file->fid >= 0)
            H5Fclose(file->fid);
        file->fid =
            strcmp(fname, ".") == 0 ? H5Iget_file_id(h->did) : open_source_file(h, origin, fname);
        snprintf(file->name, sizeof file->name, "%s", fname);
    }
    H5_FAIL_IF(file->fid < 0, STOKER_E_FORMAT,
               "%s: dataset %s: virtual dataset source %zu: no HDF5 file %s in %s, under "
               "HDF5_VDS_PREFIX or in the current directory (libhdf5 would read its part as the "
               "fill value)",
               h->file, stoker__h5_shown(h), i, fname, origin);
    const hid_t d = H5Lexists(file->fid, dname, H5P_DEFAULT) > 0 &&
                            H5Oexists_by_name(file->fid, dname, H5P_DEFAULT) > 0
                        ? H5Dopen2(file->fid, dname, H5P_DEFAULT)
                        : -1;
    const bool covers = d >= 0 && source_covers(o, i, d);
    if (d >= 0)
        H5Dclose(d);
    H5_FAIL_IF(!covers, STOKER_E_FORMAT,
               "%s: dataset %s: virtual dataset source %zu: %s %s dataset %s (libhdf5 would read "
               "its part as the fill value)",
               h->file, stoker__h5_shown(h), i, fname,
               d < 0 ? "has no" : "holds less than the part mapped from its", dname);
    return 0;
}

/* Every source of a virtual dataset must be there: libhdf5 reads the records (serialised),
 * and would give the fill value for a missing one without an error. */
static int open_virtual(h5_open *o)
{
    stoker__h5 *h = o->h;
    size_t n = 0;
    char holder[4096], origin[4096];
    const ssize_t hl = H5Fget_name(h->did, holder, sizeof holder);
    H5_FAIL_IF(H5Pget_virtual_count(o->dcpl, &n) < 0 || hl < 0 || (size_t)hl >= sizeof holder,
               STOKER_E_FORMAT, "%s: dataset %s: cannot read the virtual dataset's mappings",
               h->file, stoker__h5_shown(h));
    const char *slash = strrchr(holder, '/');
    snprintf(origin, sizeof origin, "%.*s", slash ? (int)(slash - holder + 1) : 2,
             slash ? holder : "./");
    vds_file file = {.name = "", .fid = -1};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = check_source(o, origin, i, &file);
    if (file.fid >= 0)
        H5Fclose(file.fid);
    return rc;
}

/* ---- the map ---- */

static int open_filters(h5_open *o)
{
    stoker__h5 *h = o->h;
    const int n = H5Pget_nfilters(o->dcpl);
    if (n < 0 || n > STOKER__H5_MAX_FILTERS)
        return 0;
    for (int i = 0; i < n; i++) {
        unsigned flags = 0;
        size_t nv = 0;
        const H5Z_filter_t f =
            H5Pget_filter2(o->dcpl, (unsigned)i, &flags, &nv, NULL, 0, NULL, NULL);
        if (f != H5Z_FILTER_DEFLATE && f != H5Z_FILTER_SHUFFLE)
            return 0;
        h->filters[i] = (int)f;
    }
    h->nfilters = n;
    return 1;
}

/* The fill value of unallocated chunks (zeros unless the dataset defines one). */
static void open_fill(h5_open *o)
{
    stoker__h5 *h = o->h;
    H5D_fill_value_t st = H5D_FILL_VALUE_UNDEFINED;
    memset(h->fill, 0, sizeof h->fill);
    if (h->esize <= sizeof h->fill && !o->vlen && H5Pfill_value_defined(o->dcpl, &st) >= 0 &&
        st != H5D_FILL_VALUE_UNDEFINED)
        H5Pget_fill_value(o->dcpl, h->mtype, h->fill);
    h->fill_zero = true;
    for (size_t i = 0; i < sizeof h->fill; i++)
        h->fill_zero = h->fill_zero && h->fill[i] == 0;
}

/* One call per chunk, in grid order: linear in the number of chunks. */
static int open_chunks(h5_open *o, uint64_t file_size)
{
    stoker__h5 *h = o->h;
    hsize_t cd[H5S_MAX_RANK];
    H5_FAIL_IF(H5Pget_chunk(o->dcpl, h->rank, cd) != h->rank, STOKER_E_FORMAT,
               "%s: dataset %s: cannot read the chunk shape", h->file, stoker__h5_shown(h));
    for (int d = 0; d < h->rank; d++)
        h->cdims[d] = cd[d];
    H5_FAIL_IF(!stoker__h5_grid(h), STOKER_E_LIMIT,
               "%s: dataset %s: %llu chunks of %llu bytes are beyond the limits", h->file,
               stoker__h5_shown(h), (unsigned long long)h->nchunks,
               (unsigned long long)h->chunk_bytes);
    h->chunks = stoker__malloc((h->nchunks ? h->nchunks : 1) * sizeof *h->chunks);
    H5_FAIL_IF(!h->chunks, -ENOMEM, "%s: out of memory for %llu chunks", h->file,
               (unsigned long long)h->nchunks);
    hsize_t at[H5S_MAX_RANK] = {0};
    for (uint64_t i = 0; i < h->nchunks; i++) {
        unsigned mask = 0;
        haddr_t addr = HADDR_UNDEF;
        hsize_t size = 0;
        for (int d = 0; d < h->rank; d++)
            at[d] = stoker__h5_chunk_coord(h, i, d) * h->cdims[d];
        const herr_t r = H5Dget_chunk_info_by_coord(o->h->did, at, &mask, &addr, &size);
        char why[256];
        H5_FAIL_IF(r < 0, STOKER_E_CORRUPT, "%s: dataset %s: chunk %llu: %s", h->file,
                   stoker__h5_shown(h), (unsigned long long)i, stoker__h5_why(why, sizeof why));
        stoker__h5_chunk *c = &h->chunks[i];
        c->addr = addr == HADDR_UNDEF ? UINT64_MAX : (uint64_t)addr;
        c->size = size;
        c->mask = mask;
        H5_FAIL_IF(!stoker__h5_chunk_fits(h, c, file_size), STOKER_E_CORRUPT,
                   "%s: dataset %s: chunk %llu: %llu bytes at %llu do not fit %s of %llu "
                   "bytes or the chunk of %llu (truncated or damaged file)",
                   h->file, stoker__h5_shown(h), (unsigned long long)i, (unsigned long long)c->size,
                   (unsigned long long)c->addr, stoker__h5_bytes_file(h),
                   (unsigned long long)file_size, (unsigned long long)h->chunk_bytes);
    }
    return 0;
}

static int open_extent(h5_open *o, uint64_t file_size)
{
    stoker__h5 *h = o->h;
    const haddr_t base = H5Dget_offset(h->did);
    uint64_t total = 0, end = 0;
    if (base == HADDR_UNDEF)
        return 0; /* never written: libhdf5 gives the fill value */
    H5_FAIL_IF(stoker__mul_ovf(h->row_bytes, h->dims[0], &total) ||
                   stoker__add_ovf((uint64_t)base, total, &end) || end > file_size,
               STOKER_E_CORRUPT,
               "%s: dataset %s: %llu bytes at %llu extend past the end of %s (%llu bytes): "
               "truncated file",
               h->file, stoker__h5_shown(h), (unsigned long long)total, (unsigned long long)base,
               stoker__h5_bytes_file(h), (unsigned long long)file_size);
    h->base = (uint64_t)base;
    return 1;
}

/* The user block of the file holding the dataset, in bytes (0: none, or unknown). */
static uint64_t user_block(const stoker__h5 *h)
{
    const hid_t fid = H5Iget_file_id(h->did);
    const hid_t fcpl = fid < 0 ? -1 : H5Fget_create_plist(fid);
    hsize_t ub = 0;
    if (fcpl < 0 || H5Pget_userblock(fcpl, &ub) < 0)
        ub = 0;
    if (fcpl >= 0)
        H5Pclose(fcpl);
    if (fid >= 0)
        H5Fclose(fid);
    return (uint64_t)ub;
}

/* Where the bytes are (above), then how they are read. */
static int open_layout(h5_open *o)
{
    stoker__h5 *h = o->h;
    const H5D_layout_t lay = H5Pget_layout(o->dcpl);
    const int external = H5Pget_external_count(o->dcpl);
    /* libhdf5 would look for these files on the local disk, not beside the URL */
    H5_FAIL_IF(h->remote && (lay == H5D_VIRTUAL || external > 0), STOKER_E_UNSUPPORTED,
               "%s: dataset %s: %s; over HTTP(S) and S3 a dataset's bytes must lie in the file "
               "itself (copy them into it, or read a local copy)",
               h->file, stoker__h5_shown(h),
               lay == H5D_VIRTUAL ? "a virtual dataset, whose sources are other files"
                                  : "its bytes lie in external raw data files");
    uint64_t base = 0;
    int rc = lay == H5D_VIRTUAL ? open_virtual(o)
             : external > 0     ? open_external(o, external, &base)
                                : open_holder(o);
    if (rc < 0)
        return rc;
    open_fill(o);
    h->mode = o->vlen ? H5M_VLEN : H5M_READ;
    if (o->vlen || !o->native || lay == H5D_VIRTUAL)
        return 0;
    if (external > 0) {
        /* in one file: an extent there, checked whole already; across files: libhdf5 */
        h->mode = rc == 1 ? H5M_EXTENT : H5M_READ;
        h->base = base;
        return 0;
    }
    if (user_block(h) != 0)
        return 0; /* libhdf5 1.10 gives contiguous offsets past a user block but chunk
                   * addresses from the superblock: neither is trusted, libhdf5 reads them */
    struct stat st;
    H5_FAIL_IF(!h->remote && fstat(h->fd, &st) != 0, -errno, "%s: %s", stoker__h5_bytes_file(h),
               stoker_strerror(-errno));
    const uint64_t file_size = h->remote ? h->remote->size : (uint64_t)st.st_size;
    rc = 0;
    if (lay == H5D_CONTIGUOUS && (rc = open_extent(o, file_size)) > 0)
        h->mode = H5M_EXTENT;
    if (lay == H5D_CHUNKED && open_filters(o) && (rc = open_chunks(o, file_size)) == 0)
        h->mode = H5M_CHUNKS;
    return rc < 0 ? rc : 0;
}

/* The records libhdf5 allocates while reading variable-length data, kept so that all of them
 * are freed after the read, whether it succeeded or not: a read that fails part way (an I/O
 * error) leaves records converted in libhdf5's own buffers, which neither the caller's buffer
 * nor H5Dvlen_reclaim reaches. */
enum { VL_BLOCK = 256 };
typedef struct vl_kept {
    void *p[VL_BLOCK];
    size_t n;
} vl_kept;

static void *vl_alloc(size_t size, void *info)
{
    vl_kept *k = info;
    if (k->n == VL_BLOCK) /* one record a block element: never more than VL_BLOCK */
        return NULL;
    void *p = malloc(size ? size : 1);
    if (p)
        k->p[k->n++] = p;
    return p;
}

static void vl_free(void *p, void *info)
{
    (void)p;
    (void)info; /* freed by vl_release, after the read */
}

static void vl_release(vl_kept *k)
{
    for (size_t i = 0; i < k->n; i++)
        free(k->p[i]);
    k->n = 0;
}

/* Variable-length records: their lengths, read once in blocks (the bytes stay on disk). */
static int open_vlen(h5_open *o)
{
    stoker__h5 *h = o->h;
    h->lens = stoker__malloc((h->records ? h->records : 1) * sizeof *h->lens);
    H5_FAIL_IF(!h->lens, -ENOMEM, "%s: out of memory", h->file);
    static vl_kept kept; /* under stoker's HDF5 lock, as every libhdf5 call */
    const hid_t xfer = H5Pcreate(H5P_DATASET_XFER);
    const bool set =
        xfer >= 0 && H5Pset_vlen_mem_manager(xfer, vl_alloc, &kept, vl_free, &kept) >= 0;
    if (!set && xfer >= 0)
        H5Pclose(xfer);
    H5_FAIL_IF(!set, -ENOMEM, "%s: dataset %s: cannot set up reading its records", h->file,
               stoker__h5_shown(h));
    hvl_t v[VL_BLOCK];
    int rc = 0;
    for (uint64_t s = 0; s < h->records && rc == 0; s += VL_BLOCK) {
        const hsize_t start = s, count = h->records - s < VL_BLOCK ? h->records - s : VL_BLOCK;
        const hid_t ms = H5Screate_simple(1, &count, NULL);
        H5Sselect_hyperslab(o->space, H5S_SELECT_SET, &start, NULL, &count, NULL);
        const herr_t r = H5Dread(h->did, h->mtype, ms, o->space, xfer, v);
        vl_release(&kept);
        for (hsize_t i = 0; r >= 0 && i < count; i++)
            h->lens[s + i] = v[i].len * h->esize; /* < 2^32 elements of <= 8 bytes */
        H5Sclose(ms);
        if (r < 0) {
            char why[256];
            stoker__h5_why(why, sizeof why);
            rc = stoker__fail(&o->ds->err, STOKER_E_CORRUPT,
                              "%s: dataset %s: reading records %llu..: %s", h->file,
                              stoker__h5_shown(h), (unsigned long long)s, why);
        }
    }
    H5Pclose(xfer);
    if (rc < 0)
        return rc;
    for (uint64_t i = 0; i < h->records; i++)
        H5_FAIL_IF(h->lens[i] > o->max_record_size, STOKER_E_LIMIT,
                   "%s: dataset %s: record %llu: %llu bytes exceed the limit of %llu "
                   "(STOKER_OPT_MAX_RECORD_SIZE)",
                   h->file, stoker__h5_shown(h), (unsigned long long)i,
                   (unsigned long long)h->lens[i], (unsigned long long)o->max_record_size);
    return 0;
}

/* ---- the source table ---- */

void stoker__h5_rows(const stoker__h5 *h, int64_t id, uint64_t *r0, uint64_t *r1)
{
    *r0 = h->offs ? h->offs[id] : (uint64_t)id;
    *r1 = h->offs ? h->offs[id + 1] : (uint64_t)id + 1;
}

uint64_t stoker__h5_length(const stoker__h5 *h, int64_t id)
{
    uint64_t r0, r1;
    stoker__h5_rows(h, id, &r0, &r1);
    return h->lens ? h->lens[id] : (r1 - r0) * h->row_bytes;
}

static int h5_locate(const stoker_dataset *ds, int64_t id, stoker__recloc *loc)
{
    const stoker__h5 *h = ds->state;
    if (id < 0 || (uint64_t)id >= h->records)
        return STOKER_E_INVALID;
    uint64_t r0, r1;
    stoker__h5_rows(h, id, &r0, &r1);
    loc->fd = h->fd;
    loc->shard = 0;
    loc->label = h->labels[id];
    loc->crc = 0;
    loc->has_crc = 0; /* HDF5 keeps no per-record checksum */
    loc->length = stoker__h5_length(h, id);
    loc->fetch = h->mode != H5M_EXTENT || h->remote; /* a URL's bytes: through the transport */
    loc->offset = loc->fetch ? 0 : h->base + r0 * h->row_bytes;
    return 0;
}

/* No O_DIRECT (HDF5 offsets are not aligned: the loader refuses direct I/O first) and no
 * keys (the record id is the key: the index along axis 0). */
static const char *h5_file_path(const stoker_dataset *ds, int32_t file)
{
    const stoker__h5 *h = ds->state;
    return file == 0 && h ? stoker__h5_bytes_file(h) : NULL;
}

static void h5_advise(const stoker_dataset *ds, int advice)
{
    const stoker__h5 *h = ds->state;
    if (h->fd >= 0)
        posix_fadvise(h->fd, 0, 0, advice);
}

/* Closes the memory type, dataset and file the source holds open. HDF5 lock held. */
static void close_handles(stoker__h5 *h)
{
    if (h->mtype > 0)
        H5Tclose(h->mtype);
    if (h->did > 0)
        H5Dclose(h->did);
    if (h->fid > 0)
        H5Fclose(h->fid);
    h->mtype = h->did = h->fid = 0;
}

void stoker__h5_free(stoker__h5 *h)
{
    if (!h)
        return;
    if (h->did > 0 || h->fid > 0 || h->mtype > 0) {
        stoker__h5_lock();
        close_handles(h);
        stoker__h5_unlock();
    }
    if (h->fd >= 0)
        close(h->fd);
#ifdef STOKER_HAVE_CURL
    stoker__h5_remote_close(h);
#endif
    stoker__free(h->chunks);
    stoker__free(h->labels);
    stoker__free(h->offs);
    stoker__free(h->lens);
    stoker__free(h->file);
    stoker__free(h->name);
    stoker__free(h->shown);
    stoker__free(h->data_file);
    stoker__free(h);
}

static void h5_close(stoker_dataset *ds)
{
    stoker__h5_free(ds->state);
    ds->state = NULL;
}

/* Records that libhdf5 reads (H5Dread, one at a time, under the global lock). */
static bool h5_serialised(const stoker_dataset *ds)
{
    const stoker__h5 *h = ds->state;
    return h && (h->mode == H5M_READ || h->mode == H5M_VLEN);
}

/* A chunk's rows along axis 0 are records read together: the chunks holding one are
 * inflated whole. Blob layouts have rows of bytes, not records: no natural block. */
static uint64_t h5_block_records(const stoker_dataset *ds)
{
    const stoker__h5 *h = ds->state;
    return h->mode == H5M_CHUNKS && !h->offs ? h->cdims[0] : 0;
}

/* The source's fetch: a local file's reads wait on local I/O only; a remote file's give up
 * once `cancel` reads non-zero. */
static int h5_fetch(stoker_dataset *ds, int64_t id, const stoker__recloc *loc, uint8_t *dst,
                    const uint8_t **out, const atomic_int *cancel, stoker__err *err)
{
    return stoker__h5_fetch(ds, id, loc, dst, out, cancel, err);
}

#define H5_COMMON_OPS                                                                              \
    .name = "hdf5", .locate = h5_locate, .file_path = h5_file_path, .close = h5_close,             \
    .fetch = h5_fetch, .block_records = h5_block_records, .serialised = h5_serialised,             \
    .label_at = h5_label_at

/* The labels are int64 in host order, which is little-endian where stoker builds. */
static const void *h5_label_at(const stoker_dataset *ds, int64_t id)
{
    const stoker__h5 *h = ds->state;
    return id >= 0 && (uint64_t)id < h->records ? &h->labels[id] : NULL;
}

static const stoker__source_ops H5_OPS = {
    H5_COMMON_OPS,
    .advise = h5_advise,
    .plan = stoker__h5_plan,
    .landed = stoker__h5_landed,
};

#ifdef STOKER_HAVE_CURL
static void h5_interrupt(stoker_dataset *ds, bool on)
{
    stoker__h5_remote_interrupt(ds->state, on);
}

static void h5_remote_stats(stoker_dataset *ds, stoker__remote_stats *s)
{
    stoker__h5_remote_stats(ds->state, s);
}
#endif

/* A URL: the source reads every record itself, through the transport. */
static const stoker__source_ops H5_REMOTE_OPS = {
    H5_COMMON_OPS,
    .backend = STOKER_BACKEND_REMOTE,
#ifdef STOKER_HAVE_CURL
    .interrupt = h5_interrupt,
    .remote_stats = h5_remote_stats,
#endif
};

/* ---- open: the whole sequence ---- */

static int open_dataset(h5_open *o)
{
    stoker__h5 *h = o->h;
    char why[256];
    const hid_t fapl = h->remote ? stoker__h5_vfd_fapl(h->remote) : H5P_DEFAULT;
    H5_FAIL_IF(fapl < 0, STOKER_E_FORMAT, "%s: cannot set up libhdf5's reads: %s", h->file,
               stoker__h5_why(why, sizeof why));
    h->fid = H5Fopen(h->file, H5F_ACC_RDONLY, fapl);
    if (fapl != H5P_DEFAULT)
        H5Pclose(fapl);
    H5_FAIL_IF(h->fid < 0, STOKER_E_FORMAT, "%s: cannot open as HDF5: %s", h->file,
               stoker__h5_why(why, sizeof why));
    const htri_t there = H5Lexists(h->fid, h->name, H5P_DEFAULT);
    H5_FAIL_IF(there < 0, STOKER_E_FORMAT, "%s: dataset %s: cannot look it up: %s", h->file,
               stoker__h5_shown(h), stoker__h5_why(why, sizeof why));
    H5_FAIL_IF(there == 0 && h->shown, STOKER_E_FORMAT,
               "%s: no dataset %s, named in STOKER_OPT_H5_FIELDS", h->file, h->shown);
    H5_FAIL_IF(there == 0, STOKER_E_FORMAT,
               "%s: no dataset %s (choose one as FILE:/path or with STOKER_OPT_H5_IMAGES)", h->file,
               h->name);
    h->did = H5Dopen2(h->fid, h->name, H5P_DEFAULT);
    H5_FAIL_IF(h->did < 0, STOKER_E_FORMAT, "%s: dataset %s: %s", h->file, stoker__h5_shown(h),
               stoker__h5_why(why, sizeof why));
    o->type = H5Dget_type(h->did);
    o->space = H5Dget_space(h->did);
    o->dcpl = H5Dget_create_plist(h->did);
    H5_FAIL_IF(o->type < 0 || o->space < 0 || o->dcpl < 0, STOKER_E_FORMAT, "%s: dataset %s: %s",
               h->file, stoker__h5_shown(h), stoker__h5_why(why, sizeof why));
    int rc = open_type(o);
    if (rc == 0)
        rc = open_shape(o);
    if (rc < 0)
        return rc;
    h->records = h->dims[0];
    if ((rc = open_offsets(o)) < 0)
        return rc;
    H5_FAIL_IF(h->records > o->max_records, STOKER_E_LIMIT,
               "%s: dataset %s: %llu records exceed the limit of %llu (STOKER_OPT_MAX_RECORDS)",
               h->file, stoker__h5_shown(h), (unsigned long long)h->records,
               (unsigned long long)o->max_records);
    H5_FAIL_IF(!h->offs && !o->vlen && h->row_bytes > o->max_record_size, STOKER_E_LIMIT,
               "%s: dataset %s: records of %llu bytes exceed the limit of %llu "
               "(STOKER_OPT_MAX_RECORD_SIZE)",
               h->file, stoker__h5_shown(h), (unsigned long long)h->row_bytes,
               (unsigned long long)o->max_record_size);
    if ((rc = open_layout(o)) < 0 || (o->vlen && (rc = open_vlen(o)) < 0))
        return rc;
    if (!o->labels_name || (!o->labels_name[0] &&
                            (o->vlen || h->offs || h->rank != 1 || o->dtype != STOKER_DTYPE_INT64)))
        return 0; /* no labels, or the dataset itself, which holds none */
    char group[1024];
    snprintf(group, sizeof group, "%s", h->name);
    char *slash = strrchr(group, '/');
    if (slash)
        slash[1] = '\0';
    else
        group[0] = '\0';
    return open_labels(o, group);
}

/* Closes what the hot path does not need; the serialised modes keep the dataset open. */
static void open_release(h5_open *o)
{
    stoker__h5 *h = o->h;
    if (o->dcpl > 0)
        H5Pclose(o->dcpl);
    if (o->space > 0)
        H5Sclose(o->space);
    if (o->type > 0)
        H5Tclose(o->type);
    if (h->mode == H5M_READ || h->mode == H5M_VLEN)
        return;
    close_handles(h);
}

/* The field: RAW with shape dims[1..]; blobs and vlen are JPEG when record 0 is one. */
static int fill_handle(stoker_dataset *ds, stoker__h5 *h, int32_t dtype)
{
    stoker__dsinfo *m = &ds->info;
    m->version = 0;
    m->align = 1;
    m->records = h->records;
    m->files = 1;
    m->kind = STOKER_FIELD_RAW;
    m->dtype = dtype;
    m->ndim = h->rank - 1;
    for (int d = 1; d < h->rank; d++)
        m->shape[d - 1] = (int64_t)h->dims[d];
    for (int64_t i = 0; i < (int64_t)h->records; i++) {
        stoker__recloc loc;
        h5_locate(ds, i, &loc);
        m->payload_bytes += loc.length;
        m->max_record = loc.length > m->max_record ? loc.length : m->max_record;
    }
    if (!h->offs && !h->lens)
        return 0;
    m->kind = STOKER_FIELD_BYTES;
    m->ndim = 0;
    m->dtype = 0;
    stoker__recloc loc;
    if (h->records == 0 || h5_locate(ds, 0, &loc) < 0 || loc.length < 2)
        return 0;
    uint8_t *buf = stoker__malloc(loc.length);
    STOKER_RETURN_IF(!buf, &ds->err, -ENOMEM, "%s: out of memory", h->file);
    const uint8_t *got = NULL;
    int rc = 0;
    if (loc.fetch)
        rc = stoker__h5_fetch(ds, 0, &loc, buf, &got, NULL, &ds->err);
    else if ((rc = stoker__pread_full(h->fd, buf, 2, loc.offset)) < 0)
        stoker__fail(&ds->err, rc, "%s: dataset %s: record 0: cannot read %s: %s", h->file,
                     stoker__h5_shown(h), stoker__h5_bytes_file(h), stoker_strerror(rc));
    if (rc == 0 && buf[0] == 0xFF && buf[1] == 0xD8)
        m->kind = STOKER_FIELD_JPEG;
    stoker__free(buf);
    return rc;
}

static const char *mode_name(int mode)
{
    return mode == H5M_EXTENT   ? "contiguous"
           : mode == H5M_CHUNKS ? "chunked"
           : mode == H5M_VLEN   ? "variable-length, read serially with H5Dread"
                                : "read serially with H5Dread";
}

/* libhdf5 failed a read (errno `io`) while the dataset opened: the open fails with that
 * error, as a failed read of records fails a batch, whatever libhdf5 made of it (the
 * signature not found, a lookup answered "absent", an object header that does not decode,
 * a record's length not read), and the message says so if it does not already. */
static int failed_read_at_open(stoker_dataset *ds, const stoker__h5 *h, int rc, int io)
{
    char was[STOKER_ERRMSG_CAP];
    snprintf(was, sizeof was, "%s", ds->err.msg);
    if (rc == 0)
        return stoker__fail(&ds->err, -io, "%s: dataset %s: a read of the file failed: %s", h->file,
                            stoker__h5_shown(h), strerror(io));
    if (strstr(was, "a read of the file failed"))
        return stoker__fail(&ds->err, -io, "%s", was);
    return stoker__fail(&ds->err, -io, "%s (after a read of the file failed: %s)", was,
                        strerror(io));
}

static int remote_read8(void *ctx, uint8_t got[8], uint64_t at)
{
    stoker__h5_bytes *b = ctx;
    if (at > b->size || b->size - at < 8)
        return 0;
    const int rc = b->read(b->ctx, got, 8, at, NULL, &b->err);
    return rc < 0 ? rc : 1;
}

/* A URL's object through the transport (hdf5_remote.c): h->file becomes the URL as shown,
 * and the object must hold HDF5's signature. */
static int open_remote(stoker_dataset *ds, stoker__h5 *h, const stoker_config *cfg)
{
#ifdef STOKER_HAVE_CURL
    const int rc = stoker__h5_remote_open(h, cfg, &ds->err);
    if (rc < 0)
        return rc;
    const int sig = stoker__hdf5_signature_by(remote_read8, h->remote);
    STOKER_RETURN_IF(sig < 0, &ds->err, sig, "%s", h->remote->err.msg);
    STOKER_RETURN_IF(sig == 0, &ds->err, STOKER_E_FORMAT,
                     "%s: not an HDF5 file (no HDF5 signature in its %llu bytes), though its "
                     "name says so",
                     h->file, (unsigned long long)h->remote->size);
    return 0;
#else
    (void)cfg;
    return stoker__fail(&ds->err, STOKER_E_UNSUPPORTED,
                        "%s: a URL; this build cannot read remote data sets (it was built "
                        "without libcurl)",
                        h->file);
#endif
}

int stoker__h5_start(stoker_dataset *ds, stoker__h5 *h, const char *path, const stoker_config *cfg,
                     const stoker__h5 *share, char **dset)
{
    h->fd = -1;
    h->serial = atomic_fetch_add(&h5_serial, 1) + 1;
    const int split = split_path(path, &h->file, dset);
    STOKER_RETURN_IF(split < 0, &ds->err, split, "%s: %s%s", path,
                     split == -ENOMEM ? "out of memory" : "a read of the file failed: ",
                     split == -ENOMEM ? "" : strerror(-split));
    if (share && share->remote) {
        stoker__free(h->file); /* the URL as shown, which libhdf5 is given */
        h->file = stoker__strdup(share->file);
        STOKER_RETURN_IF(!h->file, &ds->err, -ENOMEM, "%s: out of memory", path);
        h->remote = share->remote;
        return 0;
    }
    if (stoker__hdf5_url(path) > 0)
        return open_remote(ds, h, cfg);
    h->fd = open(h->file, O_RDONLY | O_CLOEXEC);
    STOKER_RETURN_IF(h->fd < 0, &ds->err, -errno, "%s: %s", h->file, stoker_strerror(-errno));
    return 0;
}

int stoker__h5_open_map(stoker_dataset *ds, stoker__h5 *h, const stoker_config *cfg,
                        const char *labels, bool labels_set, bool vlen_any)
{
    h5_open o = {
        .ds = ds,
        .h = h,
        .type = -1,
        .space = -1,
        .dcpl = -1,
        .labels_name = labels,
        .labels_set = labels_set,
        .vlen_any = vlen_any,
        .max_records = (uint64_t)stoker__cfg_int(cfg, STOKER_OPT_MAX_RECORDS),
        .max_record_size = (uint64_t)stoker__cfg_int(cfg, STOKER_OPT_MAX_RECORD_SIZE),
    };
    stoker__h5_lock();
    if (h->remote)
        h->remote->rc = 0;
    int rc = open_dataset(&o);
    open_release(&o);
    const int io = h5_io_errno;
    const int remote_rc = h->remote ? h->remote->rc : 0;
    stoker__h5_unlock();
    if (io)
        rc = failed_read_at_open(ds, h, rc, io);
    if (remote_rc < 0) /* the transport's failure is the cause, whatever libhdf5 made of it */
        rc = stoker__fail(&ds->err, remote_rc, "%s: dataset %s: %s", h->file, stoker__h5_shown(h),
                          h->remote->err.msg);
    return rc;
}

const char *stoker__h5_mode_slow(const stoker__h5 *h)
{
    return h->mode != H5M_EXTENT && h->mode != H5M_CHUNKS ? mode_name(h->mode) : NULL;
}

static int hdf5_open(stoker_dataset *ds, const char *path, const stoker_config *cfg)
{
    const char *fields = stoker__cfg_string(cfg, STOKER_OPT_H5_FIELDS);
    if (fields && *fields)
        return stoker__h5_fields_open(ds, path, cfg, fields);
    ds->ops = &H5_OPS;
    stoker__h5 *h = ds->state = stoker__calloc(1, sizeof *h);
    STOKER_RETURN_IF(!h, &ds->err, -ENOMEM, "%s: out of memory", path);
    const char *images = stoker__cfg_string(cfg, STOKER_OPT_H5_IMAGES);
    const char *labels = stoker__cfg_string(cfg, STOKER_OPT_H5_LABELS);
    char *dset = NULL;
    if (stoker__hdf5_url(path) > 0)
        ds->ops = &H5_REMOTE_OPS;
    int rc = stoker__h5_start(ds, h, path, cfg, NULL, &dset);
    h->name = dset ? dset : stoker__strdup(images && *images ? images : "images");
    if (rc < 0)
        return rc;
    STOKER_RETURN_IF(!h->name, &ds->err, -ENOMEM, "%s: out of memory", path);
    rc = stoker__h5_open_map(ds, h, cfg, labels && *labels ? labels : "labels",
                             labels && *labels && strcmp(labels, "labels") != 0, false);
    if (rc == 0)
        rc = fill_handle(ds, h, h->dtype);
    if (rc == 0 && stoker__h5_mode_slow(h)) {
        const stoker__log log = stoker__cfg_log(cfg);
        stoker__logf(&log, STOKER_LOG_WARN,
                     "%s: dataset %s is %s, one record at a time; convert it with "
                     "`stoker-pack %s OUT` for full speed",
                     h->file, h->name, stoker__h5_mode_slow(h), h->file);
    }
    return rc;
}

const stoker__source stoker__hdf5_source = {
    .name = "hdf5",
    .claims = stoker__h5_detect,
    .open = hdf5_open,
    .refusal = "an HDF5 file, not a shard data set; convert it with stoker-pack to verify it",
};
