/* The block cache: remote objects' blocks as files on local disk, per node, shared by every
 * process that opens the same directory (several ranks of one node fetch each block once).
 *
 * Layout (docs/REMOTE.md): DIR/CACHEDIR.TAG marks the directory as the cache's; each object
 * (a URL at one validator and block size) is a sub-directory named by a hash of those, with
 * an `object` file naming them; each block is a file `bNNNNNNNNNN` (its number, ten digits)
 * holding bytes [n * block_size, min((n + 1) * block_size, size)) of the object. A block is
 * written to a temporary file and renamed, so a block file is always whole; a crash leaves
 * at most a temporary file, which the next fetcher of that block removes.
 *
 * Coordination between processes is by flock(2) only, so a process that dies leaves no
 * stale state: the fetcher of a block holds an exclusive lock on the block's `.lock` file;
 * every process reading a block holds a shared lock on the block file (a "pin") until it
 * releases it, and eviction takes an exclusive lock (non-blocking) before unlinking, so a
 * block in use by any process is never evicted. Eviction (least recently used first, by
 * the files' access times, which acquire updates) keeps the bytes of block files at or
 * under `limit`, and removes only files of the cache's own naming inside object
 * directories it created: nothing it did not write. Internal to src/remote/. */
#ifndef STOKER_REMOTE_CACHE_H
#define STOKER_REMOTE_CACHE_H

#include "common/common.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct stoker__cache stoker__cache;
typedef struct stoker__cache_obj stoker__cache_obj;

/* Opens (creating it and its tag when missing) the cache at `dir`; NULL or "" takes the
 * default: $STOKER_CACHE_DIR, else $XDG_CACHE_HOME/stoker, else $HOME/.cache/stoker.
 * A directory that exists, is not empty and has no CACHEDIR.TAG is refused (the cache
 * never adopts a directory holding anyone else's files). */
int stoker__cache_open(stoker__cache **out, const char *dir, uint64_t limit, stoker__err *err);
/* Releases every pin of this handle's objects and frees it (files stay). */
void stoker__cache_close(stoker__cache *c);
const char *stoker__cache_dir(const stoker__cache *c);
uint64_t stoker__cache_limit(const stoker__cache *c);

/* An object's blocks, keyed by its URL, `validator` (the ETag, or Last-Modified and size:
 * whatever changes when the object does), size and block size. Freed by close. */
int stoker__cache_object(stoker__cache *c, const char *url, const char *validator,
                         uint64_t size, uint32_t block_size, stoker__cache_obj **out,
                         stoker__err *err);
/* Bytes of block `block` (the last one may be short). */
uint64_t stoker__cache_block_bytes(const stoker__cache_obj *o, uint64_t block);

enum {
    STOKER__BLOCK_READY = 0, /* *fd: the block file, read-only, pinned until release */
    STOKER__BLOCK_FETCH = 1, /* the caller fetches it: *fd is a fresh temporary file to
                                write the block into at offset 0; then commit or abort */
    STOKER__BLOCK_BUSY = 2,  /* another process is fetching it now: ask again later */
};
/* Takes block `block` of o: READY, FETCH or BUSY as above, or a negative error (the
 * message in err). Thread-safe; never blocks on another process. */
int stoker__cache_acquire(stoker__cache_obj *o, uint64_t block, int *fd, stoker__err *err);
/* Publishes a block written to tmp_fd (FETCH) after checking its size: tmp_fd is closed and
 * *fd receives the block file, pinned as READY. Makes room first by evicting unpinned
 * blocks; STOKER_E_LIMIT when pinned blocks alone fill the limit (nothing is published). */
int stoker__cache_commit(stoker__cache_obj *o, uint64_t block, int tmp_fd, int *fd,
                         stoker__err *err);
/* Gives up a FETCH: the temporary file is removed and the fetch lock released. */
void stoker__cache_abort(stoker__cache_obj *o, uint64_t block, int tmp_fd);
/* Unpins a READY block (closes fd). */
void stoker__cache_release(stoker__cache_obj *o, uint64_t block, int fd);

typedef struct stoker__cache_stats {
    uint64_t hits;    /* acquires answered READY at once */
    uint64_t misses;  /* acquires answered FETCH */
    uint64_t busy;    /* acquires answered BUSY */
    uint64_t bytes;   /* bytes of block files in the cache at the last count */
    uint64_t evicted; /* block files this handle removed */
} stoker__cache_stats;
void stoker__cache_stats_get(stoker__cache *c, stoker__cache_stats *s);

#endif
