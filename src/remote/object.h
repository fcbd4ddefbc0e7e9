/* SPDX-License-Identifier: Apache-2.0 */
/* The remote transport: objects behind http://, https:// or s3:// read by byte range, as a
 * source reads a local file, through the block cache (docs/REMOTE.md). No format is known
 * here; a source parses its own bytes and tells the transport which ranges it will want.
 *
 * A set (stoker__robjs, one per open data set) holds the HTTP clients (remote/http.h), the
 * block cache (remote/cache.h) and one read-ahead thread; its objects (stoker__robj, one per
 * file) are opened with a HEAD that pins their size and validator: every later request
 * carries If-Match, so a replaced object fails (-ESTALE) rather than mix two versions. An
 * object's bytes are read in blocks of `block_size`: a block missing from the cache is
 * fetched whole, kept as a file shared by every process of the node (the cache's flock
 * locks: ranks fetch each block once), and pinned while this set may still read it.
 *
 * Two ways to the bytes:
 *   - stoker__robj_read: synchronous, waits for the blocks (bounded: see below), preads them;
 *   - stoker__robj_hold / stoker__robj_release: for a caller with its own reader (io_uring,
 *     pread): hold answers at once, without a lock on the hot path, with the cached block
 *     files' (descriptor, offset, length) spans covering a byte range, held until release;
 *     or -EAGAIN.
 * Reading ahead: stoker__robjs_follow gives the future order as byte extents, batch by batch;
 * the thread starts the blocks they need in that order within `fetch_window` bytes pinned
 * (the oldest batch not yet read may pin up to half the cache's limit), and unpins a block
 * once stoker__robjs_progress says no batch the readers may still read needs it.
 *
 * Waits, each bounded: a request ends within the client's deadlines (remote/http.h:
 * retries, retry_seconds, fetch_timeout_ms); a reader waiting for a block another process
 * fetches looks again every STOKER__WAIT_NS and fails with that block's error; a fetched
 * block waiting for room in a cache full of pins gives up after 60 s; an interrupted set
 * (stoker__robjs_interrupt) or a set `cancel` ends every wait at once.
 *
 * Thread-safe, except open and close. Internal to src/remote/ and the sources. */
#ifndef STOKER_REMOTE_OBJECT_H
#define STOKER_REMOTE_OBJECT_H

#include "common/common.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct stoker__robjs stoker__robjs; /* remote objects sharing HTTP clients, the block
                                               cache, the read-ahead; one per open data set */
typedef struct stoker__robj stoker__robj;   /* one object (a file at a URL): size and
                                               validator pinned at open */

/* Opens a set for the data set at `url` (its messages name url): HTTP clients, the block
 * cache and the read-ahead thread, from cfg's remote options (credentials, cache_dir,
 * cache_limit, block_size, fetch_* ...). 0, or a negative error with *out NULL and err set. */
int stoker__robjs_open(stoker__robjs **out, const char *url, const stoker_config *cfg,
                       stoker__err *err);
/* Opens the object at url (a HEAD: its size and validator); owned by s. -ENOENT (404),
 * STOKER_E_FORMAT (no Content-Length: the size is unknown), or the request's failure. */
int stoker__robj_open(stoker__robjs *s, const char *url, stoker__robj **out, stoker__err *err);
/* Opens n objects, their HEADs in parallel; the first failure's code and message (the
 * objects opened stay s's, closed with it). */
int stoker__robj_open_all(stoker__robjs *s, const char *const *urls, uint32_t n, stoker__robj **out,
                          stoker__err *err);
/* Opens an object read only with stoker__robj_get_all: nothing of it goes to the cache. */
int stoker__robj_open_meta(stoker__robjs *s, const char *url, stoker__robj **out, stoker__err *err);
uint64_t stoker__robj_size(const stoker__robj *o);
const char *stoker__robj_url(const stoker__robj *o);
/* The URL redacted (stoker_redact), for messages. */
const char *stoker__robj_shown(const stoker__robj *o);
/* The object's ETag as sent ("" when the server gave none). */
const char *stoker__robj_etag(const stoker__robj *o);

/* Reads [off, off + len) through the block cache, waiting for blocks not yet there.
 * `cancel` (may be NULL): once non-zero, a wait gives up with STOKER_E_CANCELED. 0 or a
 * negative error with a message naming the URL and the byte range. */
int stoker__robj_read(stoker__robj *o, uint8_t *dst, uint64_t len, uint64_t off,
                      const atomic_int *cancel, stoker__err *err);

/* Uncached reads, straight into memory (metadata read once: a manifest, an index): each a
 * ranged GET pinned by If-Match, all in parallel; [off, off + len) must lie inside the
 * object, and len 0 with off 0 reads the whole object (dst holds its size). 0, or the first
 * failure's code and message (STOKER_E_CORRUPT when fewer bytes came than were due). */
typedef struct stoker__rget {
    stoker__robj *o;
    uint64_t off, len;
    uint8_t *dst;
} stoker__rget;
int stoker__robj_get_all(stoker__robjs *s, const stoker__rget *g, uint32_t n, stoker__err *err);

/* ---- the reader's way: cached block files read by the caller ---- */

typedef struct stoker__rspan {
    int fd;          /* a block file of the cache, read-only, held */
    uint64_t offset; /* in that file */
    uint64_t length;
} stoker__rspan;
#define STOKER__HOLD_MAX 16 /* spans one hold may list */

/* Holds the blocks covering [off, off + len) when every one is in the cache now, and lists
 * the spans to read (*n, at most cap): 0. -EAGAIN: some block is not ready; nothing is held
 * nor started (the read-ahead starts blocks in order; stoker__robj_read waits for them, one
 * at a time, within the cache's limit). STOKER_E_LIMIT: more
 * than cap blocks. Lock-free when every block is ready and pinned by this set. The spans'
 * descriptors stay valid until stoker__robj_release of the same range; once a block file is
 * closed, stoker__fds_closed (common.h) tells readers that keep descriptors to forget them.
 * A reader must keep nothing of the file open past the release (io_uring: read it as a
 * transient read, reader.h): the block's pin is the file's flock, which lives as long as
 * any reference to the open file does, and a block left locked cannot be evicted. */
int stoker__robj_hold(stoker__robj *o, uint64_t off, uint64_t len, stoker__rspan *spans,
                      uint32_t cap, uint32_t *n);
void stoker__robj_release(stoker__robj *o, uint64_t off, uint64_t len);
/* The bytes of [off, off + len) read from the cache were found damaged: the blocks holding
 * them are dropped, their files removed, so that the next read fetches them afresh. `what`
 * (cap bytes) names the block files, for a message. */
void stoker__robj_discard(stoker__robj *o, uint64_t off, uint64_t len, char *what, size_t cap);

/* ---- reading ahead ---- */

typedef struct stoker__rextent {
    stoker__robj *o;
    uint64_t off, len;
} stoker__rextent;

/* The future order as byte extents: batch(ctx, seq, out) writes the extents of the seq-th
 * batch (at most batch_cap) and returns their count; 0 past the last batch. Called on the
 * set's read-ahead thread only. */
typedef struct stoker__rahead {
    uint64_t (*batch)(void *ctx, uint64_t seq, stoker__rextent *out);
    void *ctx;
    uint64_t first; /* the first seq still to come */
    uint64_t batch_cap;
} stoker__rahead;
/* Follows f (NULL: forget it; call before the order changes and before ctx goes away). */
void stoker__robjs_follow(stoker__robjs *s, const stoker__rahead *f);
/* Batches before seq are read: blocks only they needed may go. */
void stoker__robjs_progress(stoker__robjs *s, uint64_t seq);
/* on: waits for blocks give up at once (STOKER_E_CANCELED) until off. */
void stoker__robjs_interrupt(stoker__robjs *s, bool on);

/* ---- about the set ---- */

typedef struct stoker__robjs_stats {
    uint64_t bytes_fetched, requests, retries;
    uint64_t cache_hits, cache_misses, cache_bytes, cache_limit;
    uint64_t wait_ns; /* time readers waited for blocks not yet fetched */
    uint64_t block_size, window;
} stoker__robjs_stats;
void stoker__robjs_stats_get(stoker__robjs *s, stoker__robjs_stats *st);
uint32_t stoker__robjs_block_size(const stoker__robjs *s);
uint64_t stoker__robjs_cache_limit(const stoker__robjs *s);

/* Optional marks of each block's fetch, start to end (a profiler's ranges): start returns
 * an id for end. Set before any read. */
void stoker__robjs_trace(stoker__robjs *s, uint64_t (*start)(void), void (*end)(uint64_t id));

/* Closes every object and the set: the read-ahead thread and the clients stop (transfers in
 * flight fail), pins are released. NULL is a no-op. */
void stoker__robjs_close(stoker__robjs *s);

#endif
