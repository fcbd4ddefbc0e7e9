/* SPDX-License-Identifier: Apache-2.0 */
/* The internal face of an open data set: how the reader finds a record's bytes.
 *
 * Every source (local shards, an HDF5 file, remote shards; source.h) maps a record id to
 * (file descriptor, offset, length, label, checksum). The reader reads those bytes itself
 * (io_uring or pread); the data set never reads payloads on the hot path. An open data set
 * is immutable, so any thread may call these concurrently. */
#ifndef STOKER_SOURCE_DATASET_H
#define STOKER_SOURCE_DATASET_H

#include "common/common.h"

#include <stdatomic.h>

typedef struct stoker__recloc {
    int fd;          /* buffered read-only descriptor of the file holding the record */
    int32_t shard;   /* shard number (file index within the data set) */
    uint64_t offset; /* byte offset of the payload in that file */
    uint64_t length; /* payload length in bytes */
    int64_t label;
    uint32_t crc;     /* CRC32C of the payload */
    uint32_t has_crc; /* 1 when crc is meaningful */
    uint32_t fetch;   /* 1: not one plain extent (chunked or compressed HDF5): read it
                         with stoker__dataset_fetch, not at (fd, offset, length) */
} stoker__recloc;

/* Locates record `id` (0 <= id < records). O(log shards), no allocation, no I/O (the index
 * was read and validated at open). Returns 0 or STOKER_E_INVALID. */
int stoker__dataset_locate(const stoker_dataset *ds, int64_t id, stoker__recloc *loc);

/* The data set's path as given to open, its payload alignment (1, 512 or 4096), and the
 * path of shard `shard` (for messages). */
const char *stoker__dataset_path(const stoker_dataset *ds);
uint32_t stoker__dataset_align(const stoker_dataset *ds);
/* The kind of source the records come from: "shards", "hdf5" or "remote". */
const char *stoker__dataset_source(const stoker_dataset *ds);
const char *stoker__dataset_shard_path(const stoker_dataset *ds, int32_t shard);

/* Gives the kernel `advice` (POSIX_FADV_*) for every file of the data set, whole. */
void stoker__dataset_advise(const stoker_dataset *ds, int advice);

/* A descriptor of shard `shard` opened with O_DIRECT (opened on first use, kept until
 * close; thread-safe), or a negative errno when the file system refuses O_DIRECT. */
int stoker__dataset_direct_fd(stoker_dataset *ds, int32_t shard);

/* Reads a record whose location has `fetch` set: the source assembles its loc->length
 * bytes into `dst` or, when dst is NULL, into a buffer of the calling thread (valid until
 * its next fetch) with a small per-thread cache of decoded chunks. *out points at the
 * bytes. `cancel` (may be NULL): once it reads non-zero, a fetch waiting on anything but
 * local I/O (a remote block) gives up with STOKER_E_CANCELED (the caller's batch failed).
 * Thread-safe; `err` receives the message of a failure. */
int stoker__dataset_fetch(stoker_dataset *ds, int64_t id, const stoker__recloc *loc, uint8_t *dst,
                          const uint8_t **out, const atomic_int *cancel, stoker__err *err);

/* A record fetched with stoker__dataset_fetch failed its CRC32C: the source drops the copy it
 * read it from where that copy may be what is damaged (a remote source's blocks in the block
 * cache: a reply with wrong bytes committed there, or a file damaged on disk), so that the
 * next fetch reads the record afresh. 1: dropped (`what`, cap bytes, says what was, for a
 * message: fetch the record once more before it counts as corrupt); 0: nothing to drop (the
 * record is corrupt as it is stored). Thread-safe. */
int stoker__dataset_refetch(stoker_dataset *ds, int64_t id, const stoker__recloc *loc, char *what,
                            size_t cap);

/* Fetched records through the caller's own reader (chunked HDF5): before fetching a batch
 * piece's records, a worker asks the source, record by record, for the reads they still
 * lack (whole stored chunks missing from the calling thread's chunk cache), makes them
 * with its reader in one round, hands each completion back (stoker__dataset_fetch_landed),
 * and then fetches the records, which the cache now serves. Every chunk a planned record
 * needs stays in the cache until the thread plans under another `round` number, so a
 * round's records never evict each other's chunks. One thread: plan, landed and fetch of
 * a round must run in the same thread, and every planned read must have landed (or the
 * round been abandoned) before the thread fetches. */
#define STOKER__FETCH_READS 16 /* most reads one record's plan lists */

typedef struct stoker__fetch_read {
    int fd;
    uint64_t offset;
    uint64_t length;
    void *dst;       /* the source's buffer or the record's destination: written only by
                        this read until it lands */
    uint32_t cookie; /* handed back to stoker__dataset_fetch_landed */
    bool transient;  /* fd is closed once the read lands (stoker__read_req's transient) */
} stoker__fetch_read;

enum {
    STOKER__PLAN_OK = 0, /* *n reads listed (0: every chunk is cached already) */
    STOKER__PLAN_FULL,   /* the record does not fit the rest of this round (cache entries
                            or `cap` reads); nothing listed. In an empty round: fetch it */
    STOKER__PLAN_NONE,   /* not read through the caller's reader (the serialised fallback,
                            no cache): fetch it directly */
};

/* Plans record id's reads into out (room for cap <= STOKER__FETCH_READS). dst: where the
 * record's fetch will be asked to put it (the same pointer, or NULL when the fetch will give
 * none): a source whose record is its stored bytes may list reads into it, so that the
 * fetch copies nothing. Never fails: a record it cannot plan (out of memory included)
 * answers PLAN_NONE or PLAN_FULL and the fetch reports any error. */
int stoker__dataset_fetch_plan(stoker_dataset *ds, int64_t id, const stoker__recloc *loc,
                               uint64_t round, uint8_t *dst, stoker__fetch_read *out, uint32_t cap,
                               uint32_t *n);
/* A planned read completed: res is the bytes read or -errno. A failed or short read is
 * reported by the fetch of a record that needs the chunk. */
void stoker__dataset_fetch_landed(stoker_dataset *ds, uint32_t cookie, uint64_t length,
                                  int64_t res);

/* true when the data set's records are read by the source itself, one at a time and
 * serialised (HDF5 layouts read with H5Dread): stats report STOKER_BACKEND_HDF5. */
bool stoker__dataset_serialised(const stoker_dataset *ds);

/* The stoker_backend that reads the records when it is not the loader's reader:
 * STOKER_BACKEND_HDF5 (serialised), STOKER_BACKEND_REMOTE; else 0. */
int32_t stoker__dataset_backend(const stoker_dataset *ds);

/* The loader's future order, for a source that reads ahead of need (remote shards fetch
 * blocks in the order batches will want them). batch(ctx, seq, ids) writes the ids of the
 * seq-th batch from the loader's start (or restart) and returns their count; 0 past the
 * last batch the loader will deliver. `batch_cap` bounds the count. */
typedef struct stoker__future {
    uint64_t (*batch)(void *ctx, uint64_t seq, int64_t *ids);
    void *ctx;
    uint64_t first; /* the first seq still to come */
    uint64_t batch_cap;
} stoker__future;

/* Tells the source the future order (f NULL: forget it; call before the order changes and
 * before ctx goes away). No-op for sources that do not read ahead. */
void stoker__dataset_follow(stoker_dataset *ds, const stoker__future *f);
/* Batches before `seq` are read: what they needed may go. */
void stoker__dataset_progress(stoker_dataset *ds, uint64_t seq);
/* on: reads waiting inside the source for something other than local I/O (a remote block
 * still on its way) give up at once with STOKER_E_CANCELED, as does every such read begun
 * until off. A stopping loader sets it before it waits for its workers, so that neither a
 * restart nor the loader's end waits on the network. No-op for other sources. */
void stoker__dataset_interrupt(stoker_dataset *ds, bool on);

/* Remote sources' counters . */
typedef struct stoker__remote_stats {
    uint64_t bytes_fetched, requests, retries;
    uint64_t cache_hits, cache_misses, cache_bytes, cache_limit;
    uint64_t wait_ns; /* time workers waited for blocks not yet fetched */
    uint64_t block_size, window;
    uint64_t records; /* records read from blocks in the cache */
} stoker__remote_stats;
/* A remote source's counters; false, and zeros, for other sources. */
bool stoker__dataset_remote_stats(stoker_dataset *ds, stoker__remote_stats *s);

/* The data set's schema: its fields and a record's payload layout (format/schema.h; a data
 * set written before schemas has its legacy one, whose "label" is the index entry's). Never
 * NULL for an open data set; stoker__schema_split splits a payload with it. */
struct stoker__schema;
const struct stoker__schema *stoker__dataset_schema(const stoker_dataset *ds);

/* The largest payload of any record (for sizing buffers). */
uint64_t stoker__dataset_max_record(const stoker_dataset *ds);

/* Records per natural block of the data set: consecutive ids that are cheapest read together
 * (a chunked HDF5 dataset: the chunk's rows along axis 0), for the block order
 * (STOKER_ORDER_BLOCKS). 0 when the data set has none (shards, contiguous data). */
uint64_t stoker__dataset_block_records(const stoker_dataset *ds);

#endif
