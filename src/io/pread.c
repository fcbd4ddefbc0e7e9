/* SPDX-License-Identifier: Apache-2.0 */
/* The pread back-end: each request is read synchronously at submit, on the worker's own
 * thread (the workers are the thread pool), and its completion queued for reap. The same
 * code serves the fault-injecting test back-end, with the system call wrapped. */
#include "io/reader.h"

typedef struct pread_reader {
    stoker__reader base;
    uint32_t head, count; /* queued completions: ring of `depth` */
    stoker__read_done *done;
} pread_reader;

static int pr_submit(stoker__reader *r, const stoker__read_req *req, uint32_t n)
{
    pread_reader *p = (pread_reader *)r;
    if (n > r->depth - r->inflight)
        return -EINVAL;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t got = 0;
        const int64_t res = stoker__io_pread_full(req[i].fd, req[i].dst, req[i].length,
                                                  req[i].offset, r->fault, &got);
        const uint32_t at = (p->head + p->count) % r->depth;
        p->done[at] = (stoker__read_done){.tag = req[i].tag, .res = res, .got = got};
        p->count++;
    }
    r->inflight += n;
    return 0;
}

static int pr_reap(stoker__reader *r, stoker__read_done *done, uint32_t cap, uint32_t *got)
{
    pread_reader *p = (pread_reader *)r;
    uint32_t k = 0;
    while (k < cap && p->count > 0) {
        done[k++] = p->done[p->head];
        p->head = (p->head + 1) % r->depth;
        p->count--;
    }
    r->inflight -= k;
    *got = k;
    return 0;
}

static void pr_close(stoker__reader *r)
{
    pread_reader *p = (pread_reader *)r;
    stoker__free(p->done);
    stoker__free(p);
}

static const stoker__reader_ops PREAD_OPS = {
    .name = "pread",
    .backend = STOKER_BACKEND_PREAD,
    .submit = pr_submit,
    .reap = pr_reap,
    .close = pr_close,
};

int stoker__pread_open(stoker__reader **out, uint32_t depth, bool fault)
{
    pread_reader *p = stoker__calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->done = stoker__calloc(depth, sizeof *p->done);
    if (!p->done) {
        stoker__free(p);
        return -ENOMEM;
    }
    p->base = (stoker__reader){.ops = &PREAD_OPS, .depth = depth, .fault = fault};
    *out = &p->base;
    return 0;
}
