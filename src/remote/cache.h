/* SPDX-License-Identifier: Apache-2.0 */
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
 * directories it created: nothing it did not write. Each handle counts the bytes itself
 * (cache.c, "Counting"), so with P processes sharing a cache the bytes may pass the limit
 * by about P * limit / 64 until a count. A commit that finds the limit filled by pinned
 * blocks waits (STOKER__BLOCK_WAIT) rather than fail, as those pins are let go over time,
 * and waiting handles, of any process, take the room let go in turn, oldest first (a claim
 * file each in DIR/waits/, cache.c "Waiting in turn");
 * a write that finds the disk full may evict beyond the limit (stoker__cache_reclaim).
 * Internal to src/remote/. */
#ifndef STOKER_REMOTE_CACHE_H
#define STOKER_REMOTE_CACHE_H

#include "common/common.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct stoker__cache stoker__cache;
typedef struct stoker__cache_obj stoker__cache_obj;

/* Opens (creating it and its tag when missing) the cache at `dir`; NULL or "" takes the
 * default: $STOKER_CACHE_DIR, else $XDG_CACHE_HOME/stoker, else $HOME/.cache/stoker (an
 * empty variable counts as unset; a relative XDG_CACHE_HOME is ignored, as the XDG rules
 * say). A directory that exists, is not empty and has no CACHEDIR.TAG is refused with
 * STOKER_E_EXISTS (the cache never adopts a directory holding anyone else's files).
 * `limit`: the most bytes of block files, > 0 (UINT64_MAX: no limit); 0 is
 * STOKER_E_INVALID. *out is NULL on failure. A child of fork opens its own handle. */
int stoker__cache_open(stoker__cache **out, const char *dir, uint64_t limit, stoker__err *err);
/* Releases every pin of this handle's objects and frees it (files stay). Every descriptor
 * the handle gave out and still holds is closed: pins, and the temporary files of fetches
 * neither committed nor aborted (those files are removed). Call it after their last use;
 * NULL is accepted. */
void stoker__cache_close(stoker__cache *c);
const char *stoker__cache_dir(const stoker__cache *c);
uint64_t stoker__cache_limit(const stoker__cache *c);

/* An object's blocks, keyed by its URL as shown (stoker_redact: no password reaches the
 * cache), `validator` (the ETag, or Last-Modified and size:
 * whatever changes when the object does; NULL is ""), size and block size. The same key
 * gives the same object again. Freed by close. Errors: STOKER_E_INVALID (block size 0, a
 * control character in the URL or validator), STOKER_E_LIMIT (more than 10^10 blocks),
 * STOKER_E_CORRUPT (the key's directory holds another object's `object` file), -errno. */
int stoker__cache_object(stoker__cache *c, const char *url, const char *validator, uint64_t size,
                         uint32_t block_size, stoker__cache_obj **out, stoker__err *err);
/* Bytes of block `block` (the last one may be short). */
uint64_t stoker__cache_block_bytes(const stoker__cache_obj *o, uint64_t block);

enum {
    STOKER__BLOCK_READY = 0, /* *fd: the block file, read-only, pinned until release */
    STOKER__BLOCK_FETCH = 1, /* the caller fetches it: *fd is a fresh temporary file to
                                write the block into at offset 0; then commit or abort */
    STOKER__BLOCK_BUSY = 2,  /* another process is fetching it now: ask again later */
    STOKER__BLOCK_WAIT = 3,  /* commit: no room, as readers (of any process) pin the rest:
                                the fetch stays as it was; commit again later, or abort */
};
/* Takes block `block` of o: READY, FETCH or BUSY as above, or a negative error (the
 * message in err): STOKER_E_INVALID (no such block), STOKER_E_CORRUPT (the block's file
 * is not what the cache writes: a link, or not the block's size while another process pins
 * it; one nobody pins is removed and answered FETCH), -errno. BUSY also
 * answers while an evictor is removing the block at that instant. Thread-safe (the
 * handle's mutex); never blocks on another process. */
int stoker__cache_acquire(stoker__cache_obj *o, uint64_t block, int *fd, stoker__err *err);
/* Publishes a block written to tmp_fd (FETCH) after checking its size: tmp_fd is closed and
 * *fd receives the block file, pinned as READY. Makes room first by evicting unpinned
 * blocks; STOKER__BLOCK_WAIT when pinned blocks alone fill the limit, less the room that
 * older waiting commits (of any handle) are owed: nothing is published
 * nor given up (the fetch holds its temporary file and lock; commit again once readers of
 * this process or others unpin, or abort). Any other failure gives the fetch up as abort does
 * (tmp_fd closed, the temporary file removed, the lock released; STOKER_E_CORRUPT for a size other
 * than stoker__cache_block_bytes), except STOKER_E_INVALID when this handle does not fetch `block`
 * through tmp_fd: then nothing is touched. */
int stoker__cache_commit(stoker__cache_obj *o, uint64_t block, int tmp_fd, int *fd,
                         stoker__err *err);
/* Gives up a FETCH: the temporary file is removed, tmp_fd closed and the fetch lock
 * released. A descriptor that is not this handle's fetch of `block` is left alone. */
void stoker__cache_abort(stoker__cache_obj *o, uint64_t block, int tmp_fd);
/* Unpins a READY block (closes fd). A descriptor that is not this handle's pin of `block`
 * is left alone. */
void stoker__cache_release(stoker__cache_obj *o, uint64_t block, int fd);

/* Bytes free to unprivileged writers on the cache's file system (0 when unknown). */
uint64_t stoker__cache_free_bytes(const stoker__cache *c);
/* For a write that found the file system full (ENOSPC): evicts the least recently used
 * blocks no reader pins, of any object, until `want` bytes are free there or none is left
 * to evict, whatever the limit. Returns the bytes free then. */
uint64_t stoker__cache_reclaim(stoker__cache *c, uint64_t want);
/* Unpins a READY block, as release does, and removes its file when the path still names the
 * file pinned: its bytes were found damaged (a record in it failed its CRC32C), so that the
 * next acquire, by any process, fetches it again. A process that pins the file keeps reading
 * it until it releases it. A descriptor that is not this handle's pin of `block` is left
 * alone. */
void stoker__cache_discard(stoker__cache_obj *o, uint64_t block, int fd);
/* The path of block `block`'s file, for messages: DIR/OBJECT/bNNNNNNNNNN. */
void stoker__cache_block_path(const stoker__cache_obj *o, uint64_t block, char *buf, size_t cap);

typedef struct stoker__cache_stats {
    uint64_t hits;    /* acquires answered READY at once */
    uint64_t misses;  /* acquires answered FETCH */
    uint64_t busy;    /* acquires answered BUSY */
    uint64_t bytes;   /* bytes of block files in the cache at the last count */
    uint64_t evicted; /* block files this handle removed */
} stoker__cache_stats;
void stoker__cache_stats_get(stoker__cache *c, stoker__cache_stats *s);

#endif
