/* SPDX-License-Identifier: Apache-2.0 */
/* The reader: one narrow interface over the read back-ends (io_uring, pread, and a
 * fault-injecting pread for tests).
 *
 * A reader belongs to one thread (one per worker): it is not thread-safe, and needs no
 * locks. The caller submits up to `depth - inflight` requests, then reaps completions.
 * Each request completes exactly once, fully read, or with a final result: back-ends
 * resubmit the remainder of short reads themselves and retry EINTR/EAGAIN, so the caller
 * sees either `length` bytes, fewer bytes only at end of file, or -errno. */
#ifndef STOKER_IO_READER_H
#define STOKER_IO_READER_H

#include "common/common.h"

typedef struct stoker__read_req {
    int fd;
    uint64_t offset;
    uint64_t length;
    void *dst;    /* `length` writable bytes, owned by the caller until completion */
    uint64_t tag; /* returned with the completion */
    /* The caller closes fd soon after the read completes (a remote block's file, whose flock
     * is the block cache's pin): read through the plain descriptor, never registered with
     * the kernel (io_uring's fixed files), which would keep the file open, and its lock
     * held, past that close */
    bool transient;
} stoker__read_req;

typedef struct stoker__read_done {
    uint64_t tag;
    int64_t res;  /* bytes read (length, or less at end of file), or -errno */
    uint64_t got; /* with res < 0: the bytes read before the failure, which lies at offset +
                     got (a read of several records failed in one of them, not the first) */
} stoker__read_done;

typedef struct stoker__reader stoker__reader;

typedef struct stoker__reader_ops {
    const char *name;
    int32_t backend; /* a stoker_backend value */
    /* Queues n requests (n <= depth - inflight) and starts them. 0 or -errno (nothing of
     * this call was queued then). */
    int (*submit)(stoker__reader *r, const stoker__read_req *req, uint32_t n);
    /* Waits until at least one request completes (when any is in flight) and writes up to
     * `cap` completions; *got receives their number. 0 or -errno. */
    int (*reap)(stoker__reader *r, stoker__read_done *done, uint32_t cap, uint32_t *got);
    void (*close)(stoker__reader *r);
} stoker__reader_ops;

struct stoker__reader {
    const stoker__reader_ops *ops;
    uint32_t depth;    /* most requests in flight */
    uint32_t inflight; /* submitted, not yet reaped */
    bool fault;        /* the fault-injecting back-end: its reads go through the hook */
};

/* Opens a reader of `backend` (IO_URING or PREAD; AUTO is resolved by the caller) with
 * room for `depth` requests in flight. The io_uring back-end returns -ENOSYS or the setup
 * error when a ring cannot be made (the caller may fall back to pread). While the test
 * fault hook is armed, io_uring setup fails with -ENOSYS and PREAD gives the
 * fault-injecting back-end. */
int stoker__reader_open(stoker__reader **out, int32_t backend, uint32_t depth);
/* Closes a reader; every request must have been reaped. NULL ok. */
void stoker__reader_close(stoker__reader *r);

int stoker__uring_open(stoker__reader **out, uint32_t depth);
/* `fault` selects the fault-injecting system call wrapper. */
int stoker__pread_open(stoker__reader **out, uint32_t depth, bool fault);

/* Reads `length` bytes with pread, resubmitting after short reads and retrying EINTR and
 * EAGAIN. Returns the bytes read (less only at end of file) or -errno; *got (may be NULL)
 * receives the bytes read before a failure. `fault` routes it through the fault hook. */
int64_t stoker__io_pread_full(int fd, void *dst, uint64_t length, uint64_t offset, bool fault,
                              uint64_t *got);
/* One read now, outside r's queue, with r's own system call (the hook's wrapper for the
 * fault back-end): for reading again, alone, the records of a read that failed. As above. */
int64_t stoker__reader_pread(const stoker__reader *r, int fd, void *dst, uint64_t length,
                             uint64_t offset);

/* ---- the test fault hook (process-wide; for tests only) ---- */
typedef struct stoker__io_fault {
    uint64_t fail_read_at; /* the Nth read call from now (1 = the next) fails; 0 = never */
    int fail_errno;        /* its errno, and the bad bytes'; 0 = EIO */
    /* Bytes [bad_offset, bad_offset + bad_length) of every file cannot be read, as a bad
     * sector: a read call that reaches them returns the bytes before them (short), one that
     * starts among them fails, as the kernel answers a buffered read. 0 bytes: none. */
    uint64_t bad_offset, bad_length;
    bool short_reads; /* every read call returns at most half of what it was asked */
    bool eintr;       /* every other read call fails with EINTR first */
} stoker__io_fault;

/* Arms the hook (copied), or disarms it with NULL. Not while readers are in use. */
void stoker__io_fault_set(const stoker__io_fault *f);
/* true while armed. */
bool stoker__io_fault_armed(void);
/* Read calls made through the fault wrapper since it was armed. */
uint64_t stoker__io_fault_reads(void);

#endif
