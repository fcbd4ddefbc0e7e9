/* SPDX-License-Identifier: Apache-2.0 */
/* Sources: where an open data set's records come from. Each kind (local shards, an HDF5
 * file, remote shards) is one file behind this interface, and none calls another; the data
 * set's public face (dataset.c) chooses one at open from an explicit list (sources.c), each
 * entry saying which paths it claims, and afterwards talks to it through its operations
 * only. What the loader sees of any source is dataset.h. */
#ifndef STOKER_SOURCE_SOURCE_H
#define STOKER_SOURCE_SOURCE_H

#include "common/common.h"
#include "format/schema.h"
#include "source/dataset.h"

/* What a source fills at open: the data set as the public API describes it. */
typedef struct stoker__dsinfo {
    uint64_t records;
    int32_t files;     /* shard files (1: an HDF5 file); stoker_dataset_num_shards */
    uint32_t version;  /* the shard format's version; 0: not a packed data set */
    uint32_t align;    /* payload alignment (1, 512 or 4096) */
    bool jpeg_checked; /* every JPEG was decoded without damage when written */
    int32_t kind, dtype, ndim;
    int64_t shape[STOKER_MAX_DIMS];
    uint32_t nclasses;
    const char *const *classes;
    uint64_t payload_bytes;
    uint64_t max_record; /* the largest record's stored bytes */
    /* the fields (manifest version 3), owned by the source; NULL: the data set's one field
     * and its label (dataset.c makes the legacy schema) */
    const stoker__schema *schema;
} stoker__dsinfo;

/* An open source's operations. Required: locate, file_path, close; a NULL optional one
 * takes the default in its comment. */
typedef struct stoker__source_ops {
    const char *name; /* "shards", "hdf5", "remote": what stats and messages call it */
    int (*locate)(const stoker_dataset *ds, int64_t id, stoker__recloc *loc);
    const char *(*file_path)(const stoker_dataset *ds, int32_t file); /* NULL if no such */
    void (*close)(stoker_dataset *ds);
    /* NULL: records have no keys */
    const char *(*key)(stoker_dataset *ds, int64_t id);
    /* NULL: no O_DIRECT (-EOPNOTSUPP) */
    int (*direct_fd)(stoker_dataset *ds, int32_t file);
    /* NULL: nothing to advise */
    void (*advise)(const stoker_dataset *ds, int advice);
    /* Records located with `fetch` set (dataset.h). NULL: every record is one extent */
    int (*fetch)(stoker_dataset *ds, int64_t id, const stoker__recloc *loc, uint8_t *dst,
                 const uint8_t **out, const atomic_int *cancel, stoker__err *err);
    /* Fetched records through the worker's reader (dataset.h). NULL: fetched directly */
    int (*plan)(stoker_dataset *ds, int64_t id, const stoker__recloc *loc, uint64_t round,
                uint8_t *dst, stoker__fetch_read *out, uint32_t cap, uint32_t *n);
    void (*landed)(stoker_dataset *ds, uint32_t cookie, uint64_t length, int64_t res);
    /* A fetched record failed its CRC32C (dataset.h). NULL: the source keeps no copy that
     * may be damaged (0) */
    int (*refetch)(stoker_dataset *ds, int64_t id, const stoker__recloc *loc, char *what,
                   size_t cap);
    /* NULL: no natural block */
    uint64_t (*block_records)(const stoker_dataset *ds);
    /* NULL: never; true: the source reads every record itself, one at a time */
    bool (*serialised)(const stoker_dataset *ds);
    /* 0: the loader's reader reads the records; else the stoker_backend that stats report,
     * since the source reads them itself (STOKER_BACKEND_REMOTE) */
    int32_t backend;
    /* The loader's future order (dataset.h). NULL: the source does not read ahead */
    void (*follow)(stoker_dataset *ds, const stoker__future *f);
    void (*progress)(stoker_dataset *ds, uint64_t seq);
    /* NULL: no read of the source waits on anything but local I/O */
    void (*interrupt)(stoker_dataset *ds, bool on);
    /* NULL: not remote */
    void (*remote_stats)(stoker_dataset *ds, stoker__remote_stats *s);
    /* Record id's label as 8 little-endian bytes owned by the source (id in range), for a
     * data set without a schema's "label" field (stoker_dataset_split_record). NULL: none */
    const void *(*label_at)(const stoker_dataset *ds, int64_t id);
} stoker__source_ops;

/* One kind of source, as the list in sources.c names it. */
typedef struct stoker__source {
    const char *name;
    /* 1 when `path` is this source's (no other is asked), 0 when not, -errno when finding
     * out failed (the open fails with it) */
    int (*claims)(const char *path);
    /* Opens `path` into ds (ds->path is set; on failure ds->err has the message and close
     * is still called if ds->ops was set) */
    int (*open)(stoker_dataset *ds, const char *path, const stoker_config *cfg);
    /* stoker_dataset_verify into a fresh handle (ds->path set; closed by the caller), each
     * problem counted in *problems and reported to fn; ds->err has a failure that stopped
     * it. NULL: the source cannot verify (`refusal` says why) */
    int (*verify)(stoker_dataset *ds, const stoker_config *cfg, stoker_verify_fn fn, void *user,
                  int64_t *problems);
    const char *refusal; /* verify's or open's message when the build lacks the source */
} stoker__source;

struct stoker__robjs;
/* A remote source's stats from its transport's (remote/object.h; NULL: zeros), `records`
 * read from the block cache; remote.c, in builds with libcurl. */
void stoker__source_remote_stats(struct stoker__robjs *set, uint64_t records,
                                 stoker__remote_stats *s);

/* The list, first claimant wins (sources.c). */
const stoker__source *stoker__source_for(const char *path, int *rc);

struct stoker_dataset {
    const stoker__source_ops *ops;
    void *state;     /* the source's own, freed by ops->close */
    char *path;      /* as given to open */
    stoker__err err; /* open's failure; written only while opening */
    uint64_t serial; /* unique per handle: tells a thread's failure record apart */
    bool ready;      /* open succeeded */
    stoker__dsinfo info;
    stoker__schema legacy; /* the schema of a data set without one (info.schema points here) */
};

/* Sets the data set's message for the calling thread (failures of concurrent readers). */
int stoker__dataset_fail(stoker_dataset *ds, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
