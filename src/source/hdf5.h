/* SPDX-License-Identifier: Apache-2.0 */
/* The HDF5 source: an h5py-written file whose records lie along axis 0 of one dataset.
 * libhdf5 is called only at open (and for the serialised fallback reads); the record map
 * it yields lets the loader read the bytes itself. Built only with STOKER_HAVE_HDF5. */
#ifndef STOKER_FORMAT_HDF5_SOURCE_H
#define STOKER_FORMAT_HDF5_SOURCE_H

#include "common/common.h"
#include "source/source.h"

#include <hdf5.h>
#include <string.h>
#include <stdatomic.h>

#define STOKER__H5_MAX_RANK 32 /* HDF5's own limit */
#define STOKER__H5_MAX_FILTERS 8

/* How a record's bytes are found. */
enum {
    H5M_EXTENT = 1, /* contiguous: one extent per record, read by the loader's reader */
    H5M_CHUNKS,     /* chunked (no filter, deflate, shuffle): assembled from whole chunks */
    H5M_READ,       /* anything else libhdf5 can read: H5Dread, serialised */
    H5M_VLEN,       /* variable-length (global heap): H5Dread, serialised */
};

/* The bytes of a file that is not local (a URL): its size and a read function (the remote
 * transport's), which libhdf5 reads through the driver of hdf5_vfd.c and the record reads of
 * hdf5_fetch.c call directly. `read` is thread-safe; 0 or a negative stoker error with the
 * message (naming the URL) in err. */
typedef struct stoker__h5_bytes {
    void *ctx;
    uint64_t size;
    const char *name; /* the name H5Fopen is given: the only file the driver opens */
    int (*read)(void *ctx, uint8_t *dst, uint64_t len, uint64_t off, const atomic_int *cancel,
                stoker__err *err);
    /* Written by the driver under the HDF5 lock: what its reads wait on (the cancel flag of
     * the fetch that called libhdf5, or NULL), and its first failure since rc was last set to
     * 0, whose message the caller reports instead of libhdf5's. */
    const atomic_int *cancel;
    int rc;
    stoker__err err;
} stoker__h5_bytes;

/* A file access property list reading through `b` (HDF5 lock held), or -1. */
hid_t stoker__h5_vfd_fapl(stoker__h5_bytes *b);

/* One chunk of the map: where it lies, its stored size, which filters were skipped. */
typedef struct stoker__h5_chunk {
    uint64_t addr; /* UINT64_MAX: not allocated (fill value) */
    uint64_t size;
    uint32_t mask;
} stoker__h5_chunk;

typedef struct stoker__h5 {
    uint64_t serial; /* tells data sets apart in the per-thread chunk caches */
    char *file;      /* the HDF5 file, for messages */
    char *name;      /* the dataset's path inside it */
    char *shown;     /* a field's dataset as messages name it, with the field as the user named
                        it: "PATH (field \"NAME\")" (hdf5_fields.c); NULL: PATH alone */
    char *data_file; /* the file fd reads when the bytes are not in `file` (an external link's
                        target, an external raw data file); NULL when they are */
    int fd;          /* -1 when the file is remote */
    stoker__h5_bytes *remote; /* a URL's bytes; NULL for a local file */
    void *remote_state;       /* hdf5_remote.c's */
    int mode;
    int rank;
    uint64_t dims[STOKER__H5_MAX_RANK];
    uint64_t cdims[STOKER__H5_MAX_RANK]; /* chunk shape (H5M_CHUNKS) */
    uint64_t grid[STOKER__H5_MAX_RANK];  /* chunks along each axis */
    size_t esize;                        /* bytes per element (a vlen's: of its base) */
    int32_t dtype;                       /* the elements' stoker_dtype (a vlen's base's) */
    bool vlen;                           /* variable-length rows (H5M_VLEN) */
    uint64_t row_bytes;                  /* bytes per axis-0 row */
    uint64_t records;
    uint64_t base;            /* H5M_EXTENT: file offset of row 0 */
    stoker__h5_chunk *chunks; /* row-major over grid */
    uint64_t nchunks, chunk_bytes;
    int nfilters;
    int filters[STOKER__H5_MAX_FILTERS]; /* pipeline order (H5Z_FILTER_DEFLATE/SHUFFLE) */
    uint8_t fill[16];                    /* the fill value of one element */
    bool fill_zero;
    int64_t *labels;       /* per record, -1 without a labels dataset */
    uint64_t *offs;        /* blob layouts: records+1 row offsets; NULL: record i is row i */
    uint64_t *lens;        /* H5M_VLEN: per record byte length (elements x esize) */
    hid_t fid, did, mtype; /* kept open only for the serialised modes */
} stoker__h5;

/* libhdf5 is not thread-safe in common builds: every call goes between these, which also
 * silence libhdf5's own error printing for the duration (saved and restored). */
void stoker__h5_lock(void);
void stoker__h5_unlock(void);
/* The innermost message on libhdf5's error stack (cleared), or "" (under the lock). */
const char *stoker__h5_why(char *buf, size_t cap);
/* The same for a failed read of records: returns -errno when libhdf5 reports a failed system
 * call (an I/O error says nothing about the record: it fails the batch whatever
 * on_corrupt), else STOKER_E_CORRUPT (the file's contents do not read). */
int stoker__h5_read_failure(char *buf, size_t cap);

/* ---- hdf5_map.c: turning libhdf5's answers into the record map (no libhdf5 call) ---- */
/* From dims, cdims (0 taken as 1), esize: grid, nchunks, chunk_bytes. False beyond the
 * limits (2^32 chunks, 2 GiB per chunk) or on overflow. */
bool stoker__h5_grid(stoker__h5 *h);
/* Chunk i's coordinate (in chunks) along axis d; chunks are numbered row-major. */
uint64_t stoker__h5_chunk_coord(const stoker__h5 *h, uint64_t i, int d);
/* Does the chunk's stored extent lie in a file of file_size bytes, with a plausible size? */
bool stoker__h5_chunk_fits(const stoker__h5 *h, const stoker__h5_chunk *c, uint64_t file_size);
/* Sets records and the end offset from n offsets read into h->offs (room for n + 1) and
 * checks them: -1 when all records lie in the blob within max_size, else the first bad
 * record. */
int64_t stoker__h5_bad_offset(stoker__h5 *h, uint64_t n, uint64_t max_size);

/* The file the record bytes are read from, for messages. */
static inline const char *stoker__h5_bytes_file(const stoker__h5 *h)
{
    return h->data_file ? h->data_file : h->file;
}

/* The dataset as every message about it names it: its path, and its field's name when it
 * is one field of several. */
static inline const char *stoker__h5_shown(const stoker__h5 *h)
{
    return h->shown ? h->shown : h->name;
}

/* What a message naming a dataset beside h's (its labels, its offsets) adds for h's field:
 * " (field \"NAME\")", or "". */
static inline const char *stoker__h5_field_note(const stoker__h5 *h)
{
    return h->shown ? h->shown + strlen(h->name) : "";
}

/* Record id's rows [r0, r1) along axis 0 and its byte length. */
void stoker__h5_rows(const stoker__h5 *h, int64_t id, uint64_t *r0, uint64_t *r1);
/* Record id's length in bytes. */
uint64_t stoker__h5_length(const stoker__h5 *h, int64_t id);

/* ---- hdf5.c: opening one dataset (the source of one dataset, or one field of several) ---- */
/* Starts h for `path`: h->file and the path's dataset part (*dset, NULL when none; the
 * caller frees it), h->serial, and the file's bytes: h->fd for a local file; for a URL the
 * transport (h->remote), or, when `share` is given, the transport of `share` (opened for the
 * same URL), which h then reads without owning it. ds->err has any failure. */
int stoker__h5_start(stoker_dataset *ds, stoker__h5 *h, const char *path, const stoker_config *cfg,
                     const stoker__h5 *share, char **dset);
/* Maps dataset h->name (h started): its type, shape, layout and record lengths. `labels`:
 * the labels dataset to read into h->labels ("" for h->name itself, which must then be a
 * 1-D integer dataset), and whether one named so must exist; NULL: no labels (h->labels
 * stays NULL). `vlen_any`: variable-length rows of any integer or float type are taken
 * (else of 1-byte integers only). ds->err names the file and the dataset (stoker__h5_shown:
 * with its field) on failure. */
int stoker__h5_open_map(stoker_dataset *ds, stoker__h5 *h, const stoker_config *cfg,
                        const char *labels, bool labels_set, bool vlen_any);
/* The log line for a dataset read one record at a time (NULL for the mapped modes). */
const char *stoker__h5_mode_slow(const stoker__h5 *h);
/* Frees h, its handles, descriptor and owned transport. */
void stoker__h5_free(stoker__h5 *h);
/* Reads record id (length bytes, stoker__h5_length) of h into dst, whatever the mode;
 * `err` names the file, the dataset (with its field) and the record on failure. Thread-safe. */
int stoker__h5_read_record(const stoker__h5 *h, int64_t id, uint64_t length, uint8_t *dst,
                           const atomic_int *cancel, stoker__err *err);

/* ---- hdf5_fields.c: several datasets of one length as the fields of a sample ---- */
/* Opens `path` (an HDF5 file or its URL, no dataset part) with the fields `spec` names
 * (STOKER_OPT_H5_FIELDS: "NAME=DATASET[:KIND],..."), setting ds->ops and ds->state. */
int stoker__h5_fields_open(stoker_dataset *ds, const char *path, const stoker_config *cfg,
                           const char *spec);

/* The fetch operation (format.h's source table). */
int stoker__h5_fetch(stoker_dataset *ds, int64_t id, const stoker__recloc *loc, uint8_t *dst,
                     const uint8_t **out, const atomic_int *cancel, stoker__err *err);
/* len bytes at off of the file holding the records: pread, or the remote transport's read
 * (its message in err). 0, -errno, or STOKER_E_CORRUPT when the file ends first. */
int stoker__h5_read_at(const stoker__h5 *h, uint8_t *dst, uint64_t len, uint64_t off,
                       const atomic_int *cancel, stoker__err *err);
/* The plan and landed operations (dataset.h: fetched records through the worker's reader):
 * chunked datasets only; the other modes answer STOKER__PLAN_NONE. */
int stoker__h5_plan(stoker_dataset *ds, int64_t id, const stoker__recloc *loc, uint64_t round,
                    uint8_t *dst, stoker__fetch_read *out, uint32_t cap, uint32_t *n);
void stoker__h5_landed(stoker_dataset *ds, uint32_t cookie, uint64_t length, int64_t res);
/* Reverses a chunk's filters into out (chunk_bytes); raw holds `size` stored bytes. */
int stoker__h5_decode(const stoker__h5 *h, uint32_t mask, uint8_t *raw, uint64_t size, uint8_t *out,
                      uint8_t *tmp);

/* ---- hdf5_remote.c: a URL's bytes through the remote transport (built with libcurl) ---- */
/* Opens h->file (a URL) through the transport into h->remote, whose name and h->file become
 * the URL as it may be shown (no credentials); the message in err on failure. */
int stoker__h5_remote_open(stoker__h5 *h, const stoker_config *cfg, stoker__err *err);
/* Frees what open made (nothing when it made nothing). */
void stoker__h5_remote_close(stoker__h5 *h);
/* The source's interrupt and remote_stats operations (source.h). */
void stoker__h5_remote_interrupt(stoker__h5 *h, bool on);
void stoker__h5_remote_stats(stoker__h5 *h, stoker__remote_stats *s);

/* 1 when `path` names an HDF5 file, either whole or as "file:/dataset/path", 0 when not,
 * -errno when reading the file to tell failed (an I/O error the open reports as such). A
 * URL is told by its name (stoker__hdf5_url), without a request. */
int stoker__h5_detect(const char *path);

#endif
