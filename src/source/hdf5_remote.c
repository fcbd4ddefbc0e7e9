/* SPDX-License-Identifier: Apache-2.0 */
/* An HDF5 file at a URL (http://, https://, s3://): its bytes come from the remote transport
 * (remote/object.h), through the block cache, for libhdf5's reads at open (hdf5_vfd.c) and
 * for the records alike (hdf5_fetch.c). One set of remote objects per open data set, holding
 * the one object. Built only with libcurl. */
#include "source/hdf5.h"
#include "remote/object.h"

typedef struct h5_remote {
    stoker__robjs *set;
    stoker__robj *obj;
    stoker__h5_bytes bytes;
} h5_remote;

static int remote_read(void *ctx, uint8_t *dst, uint64_t len, uint64_t off,
                       const atomic_int *cancel, stoker__err *err)
{
    return stoker__robj_read(ctx, dst, len, off, cancel, err);
}

int stoker__h5_remote_open(stoker__h5 *h, const stoker_config *cfg, stoker__err *err)
{
    h5_remote *r = stoker__calloc(1, sizeof *r);
    STOKER_RETURN_IF(!r, err, -ENOMEM, "%s: out of memory", h->file);
    h->remote_state = r;
    int rc = stoker__robjs_open(&r->set, h->file, cfg, err);
    if (rc == 0)
        rc = stoker__robj_open(r->set, h->file, &r->obj, err); /* its message names the URL */
    if (rc < 0)
        return rc;
    char *shown = stoker__strdup(stoker__robj_shown(r->obj));
    STOKER_RETURN_IF(!shown, err, -ENOMEM, "%s: out of memory", stoker__robj_shown(r->obj));
    stoker__free(h->file);
    h->file = shown; /* messages, and the name libhdf5 is given, never hold credentials */
    r->bytes = (stoker__h5_bytes){
        .ctx = r->obj,
        .size = stoker__robj_size(r->obj),
        .name = h->file,
        .read = remote_read,
    };
    h->remote = &r->bytes;
    return 0;
}

void stoker__h5_remote_close(stoker__h5 *h)
{
    h5_remote *r = h->remote_state;
    if (!r)
        return;
    stoker__robjs_close(r->set);
    stoker__free(r);
    h->remote_state = NULL;
    h->remote = NULL;
}

void stoker__h5_remote_interrupt(stoker__h5 *h, bool on)
{
    h5_remote *r = h->remote_state;
    if (r)
        stoker__robjs_interrupt(r->set, on);
}

void stoker__h5_remote_stats(stoker__h5 *h, stoker__remote_stats *s)
{
    h5_remote *r = h->remote_state;
    stoker__source_remote_stats(r ? r->set : NULL, 0, s);
}
