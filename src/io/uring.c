/* SPDX-License-Identifier: Apache-2.0 */
/* The io_uring back-end: one ring per reader, hence per worker thread. A buffered read of
 * cached data is copied by the thread that submits it, so throughput scales with the
 * number of submitting threads, which is why rings are per worker and never shared.
 *
 * Files are registered lazily in a sparse fixed-file table (IOSQE_FIXED_FILE): that spares
 * the kernel the per-read reference count on the shared struct file, which otherwise
 * bounces one cache line between all workers reading the same shard. A descriptor that
 * does not fit the table, or a kernel that refuses the table, uses the plain descriptor.
 *
 * Buffers are not registered: slots are plain reads' destinations (READ_FIXED needs the
 * slots registered per ring and saves only the page pinning of each read, which is not
 * where buffered reads of cached data spend their time). */
#include "io/reader.h"

#include <liburing.h>

#define FILE_SLOTS 256u /* fixed-file table entries per ring */
#define FILE_HASH (2 * FILE_SLOTS)
#define MAX_CHUNK (UINT64_C(1) << 30) /* one SQE reads at most this much (len is 32-bit) */

typedef struct ureq {
    stoker__read_req req;
    uint64_t done; /* bytes read so far */
} ureq;

typedef struct uring_reader {
    stoker__reader base;
    struct io_uring ring;
    ureq *reqs;         /* depth entries; an SQE's user_data is the index */
    uint32_t *free_ids; /* stack of unused indices */
    uint32_t nfree;
    bool files_ok;      /* the sparse table was registered */
    bool files_stale;   /* descriptors were closed since they were registered, with
                           reads in flight: plain descriptors until the next reset */
    uint64_t fds_epoch; /* stoker__fds_epoch() when the table was last reset */
    uint32_t nfiles;
    int hash_fd[FILE_HASH]; /* open addressing: fd -> table slot; -1 empty */
    int hash_slot[FILE_HASH];
} uring_reader;

/* The fixed-file slot of fd, registering it on first use; -1 to use the plain fd. */
static int file_slot(uring_reader *u, int fd)
{
    if (!u->files_ok || u->files_stale)
        return -1;
    uint32_t h = ((uint32_t)fd * 2654435761u) % FILE_HASH;
    for (uint32_t i = 0; i < FILE_HASH; i++, h = (h + 1) % FILE_HASH) {
        if (u->hash_fd[h] == fd)
            return u->hash_slot[h];
        if (u->hash_fd[h] != -1)
            continue;
        if (u->nfiles == FILE_SLOTS)
            return -1;
        const int slot = (int)u->nfiles;
        if (io_uring_register_files_update(&u->ring, (unsigned)slot, &fd, 1) != 1)
            return -1;
        u->nfiles++;
        u->hash_fd[h] = fd;
        u->hash_slot[h] = slot;
        return slot;
    }
    return -1;
}

/* Queues the remainder of request `id` (start, short-read resubmission and retries). */
static void queue_rest(uring_reader *u, uint32_t id)
{
    ureq *q = &u->reqs[id];
    struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
    if (!sqe) {
        /* The ring has depth entries and never more than depth requests: cannot happen,
         * but make room rather than lose the request. */
        io_uring_submit(&u->ring);
        sqe = io_uring_get_sqe(&u->ring);
    }
    uint64_t n = q->req.length - q->done;
    if (n > MAX_CHUNK)
        n = MAX_CHUNK;
    const int slot = q->req.transient ? -1 : file_slot(u, q->req.fd);
    io_uring_prep_read(sqe, slot >= 0 ? slot : q->req.fd, (uint8_t *)q->req.dst + q->done,
                       (unsigned)n, q->req.offset + q->done);
    if (slot >= 0)
        sqe->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data64(sqe, id);
}

static int ur_submit(stoker__reader *r, const stoker__read_req *req, uint32_t n)
{
    uring_reader *u = (uring_reader *)r;
    if (n > u->nfree)
        return -EINVAL;
    const uint64_t epoch = stoker__fds_epoch();
    if (epoch != u->fds_epoch) { /* a registered number may name another file now */
        u->files_stale = r->inflight > 0;
        if (!u->files_stale) {
            for (uint32_t i = 0; i < FILE_HASH; i++)
                u->hash_fd[i] = -1;
            u->nfiles = 0; /* slots are overwritten as descriptors come */
            u->fds_epoch = epoch;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t id = u->free_ids[--u->nfree];
        u->reqs[id] = (ureq){.req = req[i]};
        queue_rest(u, id);
    }
    for (;;) {
        const int rc = io_uring_submit(&u->ring);
        if (rc >= 0 || (rc != -EINTR && rc != -EAGAIN)) {
            if (rc < 0)
                return rc;
            break;
        }
    }
    r->inflight += n;
    return 0;
}

/* Handles one CQE: true when its request is final (written to *out). */
static bool complete(uring_reader *u, const struct io_uring_cqe *cqe, stoker__read_done *out)
{
    const uint32_t id = (uint32_t)io_uring_cqe_get_data64(cqe);
    ureq *q = &u->reqs[id];
    const int res = cqe->res;
    if (res == -EINTR || res == -EAGAIN) {
        queue_rest(u, id);
        return false;
    }
    if (res > 0) {
        q->done += (uint64_t)res;
        if (q->done < q->req.length) {
            queue_rest(u, id); /* short read: the rest */
            return false;
        }
    }
    *out = (stoker__read_done){
        .tag = q->req.tag, .res = res < 0 ? res : (int64_t)q->done, .got = q->done};
    u->free_ids[u->nfree++] = id;
    return true;
}

static int ur_reap(stoker__reader *r, stoker__read_done *done, uint32_t cap, uint32_t *got)
{
    uring_reader *u = (uring_reader *)r;
    uint32_t k = 0;
    while (k == 0 && r->inflight > 0 && cap > 0) {
        struct io_uring_cqe *cqe = NULL;
        int rc = io_uring_wait_cqe(&u->ring, &cqe);
        if (rc == -EINTR)
            continue;
        if (rc < 0)
            return rc;
        bool resubmit = false;
        while (k < cap && io_uring_peek_cqe(&u->ring, &cqe) == 0 && cqe) {
            if (complete(u, cqe, &done[k])) {
                k++;
                r->inflight--;
            } else {
                resubmit = true;
            }
            io_uring_cqe_seen(&u->ring, cqe);
        }
        while (resubmit && (rc = io_uring_submit(&u->ring)) < 0)
            if (rc != -EINTR && rc != -EAGAIN)
                return rc;
    }
    *got = k;
    return 0;
}

static void ur_close(stoker__reader *r)
{
    uring_reader *u = (uring_reader *)r;
    io_uring_queue_exit(&u->ring);
    stoker__free(u->reqs);
    stoker__free(u->free_ids);
    stoker__free(u);
}

static const stoker__reader_ops URING_OPS = {
    .name = "io_uring",
    .backend = STOKER_BACKEND_IO_URING,
    .submit = ur_submit,
    .reap = ur_reap,
    .close = ur_close,
};

int stoker__uring_open(stoker__reader **out, uint32_t depth)
{
    uring_reader *u = stoker__calloc(1, sizeof *u);
    if (!u)
        return -ENOMEM;
    u->reqs = stoker__calloc(depth, sizeof *u->reqs);
    u->free_ids = stoker__calloc(depth, sizeof *u->free_ids);
    if (!u->reqs || !u->free_ids) {
        stoker__free(u->reqs);
        stoker__free(u->free_ids);
        stoker__free(u);
        return -ENOMEM;
    }
    /* The ring's SQ has room for every request at once; short-read resubmissions reuse the
     * entry their request just freed. */
    const int rc = io_uring_queue_init(depth, &u->ring, 0);
    if (rc < 0) {
        stoker__free(u->reqs);
        stoker__free(u->free_ids);
        stoker__free(u);
        return rc;
    }
    for (uint32_t i = 0; i < depth; i++)
        u->free_ids[i] = depth - 1 - i;
    u->nfree = depth;
    for (uint32_t i = 0; i < FILE_HASH; i++)
        u->hash_fd[i] = -1;
    u->files_ok = io_uring_register_files_sparse(&u->ring, FILE_SLOTS) == 0;
    u->base = (stoker__reader){.ops = &URING_OPS, .depth = depth};
    *out = &u->base;
    return 0;
}
