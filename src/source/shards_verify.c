/* SPDX-License-Identifier: Apache-2.0 */
/* stoker_dataset_verify: every check open makes, plus each shard's whole-file CRC32C (the
 * manifest's) and every record's CRC32C, continuing past problems and reporting each. */
#include "source/shards.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct verifier {
    stoker_dataset *ds;
    stoker__shards *S;
    stoker_verify_fn fn;
    void *user;
    int64_t problems;
    uint8_t *buf; /* STK_WRITE_CHUNK bytes for streaming */
} verifier;

static void report(verifier *v, int32_t shard, int64_t record, int code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void report(verifier *v, int32_t shard, int64_t record, int code, const char *fmt, ...)
{
    char msg[STOKER_ERRMSG_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    v->problems++;
    if (v->fn)
        v->fn(v->user, shard, record, code, msg);
}

/* CRC32C of `len` bytes from `off`, in large reads. */
static int stream_crc(verifier *v, int fd, uint64_t off, uint64_t len, uint32_t *crc)
{
    *crc = 0;
    while (len > 0) {
        const size_t n = len < STK_WRITE_CHUNK ? (size_t)len : STK_WRITE_CHUNK;
        const int rc = stoker__pread_full(fd, v->buf, n, off);
        if (rc < 0)
            return rc;
        *crc = stoker_crc32c(*crc, v->buf, n);
        off += n;
        len -= n;
    }
    return 0;
}

/* The whole file against the manifest's size and CRC32C. */
static void check_file(verifier *v, int32_t i)
{
    const stoker__mshard *ms = &v->S->m.shards[i];
    const char *p = v->S->files[i].path;
    const int fd = openat(v->S->dirfd, ms->name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return; /* stoker__shards_open_file reports it */
    struct stat st;
    uint32_t crc = 0;
    /* a wrong size or type is reported by stoker__shards_open_file */
    const bool same =
        fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == ms->bytes;
    const int rc = same ? stream_crc(v, fd, 0, ms->bytes, &crc) : 0;
    close(fd);
    if (rc < 0)
        report(v, i, -1, rc, "%s: read: %s", p, stoker_strerror(rc));
    else if (same && crc != ms->crc)
        report(v, i, -1, STOKER_E_CORRUPT,
               "%s: whole-file CRC32C mismatch (manifest %08x, computed %08x)", p, ms->crc, crc);
}

static void check_records(verifier *v, int32_t i)
{
    stoker_dataset *ds = v->ds;
    const stoker__shard_file *sh = &v->S->files[i];
    for (uint64_t r = 0; r < sh->records; r++) {
        const int64_t id = (int64_t)(v->S->first[i] + r);
        stoker__recloc loc;
        ds->ops->locate(ds, id, &loc);
        uint32_t crc = 0;
        const int rc = stream_crc(v, sh->fd, loc.offset, loc.length, &crc);
        if (rc < 0)
            report(v, i, id, rc, "%s: record %lld (shard record %llu): read: %s", sh->path,
                   (long long)id, (unsigned long long)r, stoker_strerror(rc));
        else if (crc != loc.crc)
            report(v, i, id, STOKER_E_CORRUPT,
                   "%s: record %lld (shard record %llu): CRC32C mismatch (stored %08x, "
                   "computed %08x)",
                   sh->path, (long long)id, (unsigned long long)r, loc.crc, crc);
    }
}

static void check_shards(verifier *v)
{
    for (int32_t i = 0; i < v->S->n; i++) {
        check_file(v, i);
        stoker__err err = {0};
        const int rc = stoker__shards_open_file(v->ds, i, &err);
        if (rc < 0) {
            report(v, i, -1, rc, "%s", err.msg);
            continue;
        }
        check_records(v, i);
    }
}

int stoker__shards_verify(stoker_dataset *ds, const stoker_config *cfg, stoker_verify_fn fn,
                          void *user, int64_t *problems)
{
    verifier v = {ds, NULL, fn, user, 0, stoker__malloc(STK_WRITE_CHUNK)};
    int rc =
        v.buf ? 0
              : stoker__fail(&ds->err, -ENOMEM, "%s: out of memory for the read buffer", ds->path);
    if (rc == 0 && (rc = stoker__shards_begin(ds, ds->path, cfg)) == 0) {
        v.S = ds->state;
        check_shards(&v);
        rc = v.problems > 0 ? STOKER_E_CORRUPT : 0;
    }
    stoker__free(v.buf);
    *problems = v.problems;
    return rc;
}
