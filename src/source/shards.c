/* SPDX-License-Identifier: Apache-2.0 */
/* The packed-shard source: a packed data set's directory (or its manifest file) on a local
 * file system, or behind a URL (http://, https://, s3://; read through the remote transport,
 * remote/object.h). Open reads the manifest, then every shard's header, footer and index,
 * each checked (format/shard.h) before use, the same steps whatever the transport: local
 * files by pread, remote objects by ranged GETs pinned to the validator their HEAD gave
 * (If-Match), all shards' at once. Afterwards the handle is immutable (except the lazily
 * decoded keys and O_DIRECT descriptors, each under its own lock), so reads need no lock.
 * A remote data set's records are read by remote.c's operations. */
#include "common/config.h"
#include "format/signature.h"
#include "source/shards.h"
#ifdef STOKER_HAVE_CURL
#include "remote/http.h"
#endif

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Where the HDF5 source is built it claims HDF5 files first: a build without it gets here. */
#define HDF5_REFUSAL "an HDF5 file; this build cannot read HDF5 data sets"

static int shards_locate(const stoker_dataset *ds, int64_t id, stoker__recloc *loc)
{
    const stoker__shards *S = ds->state;
    if (id < 0 || (uint64_t)id >= S->first[S->n])
        return STOKER_E_INVALID;
    const int32_t i = stoker__shard_find(S->first, S->n, (uint64_t)id);
    stoker__shard_locate(S->files[i].index, (uint64_t)id - S->first[i], loc);
    loc->fd = S->files[i].fd;
    loc->shard = i;
    loc->fetch = 0;
    return 0;
}

const void *stoker__shards_label_at(const stoker_dataset *ds, int64_t id)
{
    const stoker__shards *S = ds->state;
    if (id < 0 || (uint64_t)id >= S->first[S->n])
        return NULL;
    const int32_t i = stoker__shard_find(S->first, S->n, (uint64_t)id);
    return S->files[i].index + ((uint64_t)id - S->first[i]) * STK_ENTRY_SIZE + STK_E_LABEL;
}

static const char *shards_file_path(const stoker_dataset *ds, int32_t i)
{
    const stoker__shards *S = ds->state;
    return i >= 0 && i < S->n ? S->files[i].path : NULL;
}

static int shards_direct_fd(stoker_dataset *ds, int32_t i)
{
    stoker__shards *S = ds->state;
    if (i < 0 || i >= S->n)
        return -EINVAL;
    stoker__shard_file *sh = &S->files[i];
    pthread_mutex_lock(&S->direct_lock);
    if (sh->direct_fd < 0 && sh->direct_err == 0) {
        const int fd =
            openat(S->dirfd, S->m.shards[i].name, O_RDONLY | O_DIRECT | O_CLOEXEC | O_NOFOLLOW);
        struct stat a, b;
        if (fd < 0) {
            sh->direct_err = errno;
        } else if (fstat(fd, &a) != 0 || fstat(sh->fd, &b) != 0 || a.st_ino != b.st_ino ||
                   a.st_dev != b.st_dev) {
            sh->direct_err = ESTALE; /* replaced since open: never mix two files */
            close(fd);
        } else {
            sh->direct_fd = fd;
        }
    }
    const int rc = sh->direct_fd >= 0 ? sh->direct_fd : -sh->direct_err;
    pthread_mutex_unlock(&S->direct_lock);
    return rc;
}

const char *stoker__manifest_record_key(stoker_dataset *ds, stoker__manifest *m,
                                        pthread_mutex_t *lock, int *state, int64_t id)
{
    if (id < 0 || (uint64_t)id >= m->records || m->nkeys == 0)
        return NULL;
    pthread_mutex_lock(lock);
    if (*state == 0) {
        stoker__err err = {0};
        const int rc = stoker__manifest_keys(m, ds->path, &err);
        /* out of memory may pass; anything else is in the manifest for good */
        *state = rc == 0 ? 1 : rc == -ENOMEM ? 0 : -1;
        if (rc < 0)
            stoker__dataset_fail(ds, rc, "%s", err.msg);
    }
    const int ok = *state > 0;
    pthread_mutex_unlock(lock);
    if (!ok)
        return NULL;
    const uint64_t off = m->key_offs[id];
    return off == UINT64_MAX ? NULL : m->text + off;
}

static const char *shards_key(stoker_dataset *ds, int64_t id)
{
    stoker__shards *S = ds->state;
    return stoker__manifest_record_key(ds, &S->m, &S->key_lock, &S->keys_state, id);
}

static void shards_advise(const stoker_dataset *ds, int advice)
{
    const stoker__shards *S = ds->state;
    for (int32_t i = 0; i < S->n; i++)
        if (S->files[i].fd >= 0)
            posix_fadvise(S->files[i].fd, 0, 0, advice);
}

void stoker__shards_close(stoker_dataset *ds)
{
    stoker__shards *S = ds->state;
    if (!S)
        return;
#ifdef STOKER_HAVE_CURL
    stoker__shards_remote_end(S); /* the read-ahead reads the indexes until then */
#endif
    for (int32_t i = 0; S->files && i < S->n; i++) {
        stoker__shard_file *sh = &S->files[i];
        stoker__free(sh->index);
        if (sh->fd >= 0)
            close(sh->fd);
        if (sh->direct_fd >= 0)
            close(sh->direct_fd);
        stoker__free(sh->path);
    }
    stoker__free(S->files);
    stoker__free(S->first);
    stoker__manifest_free(&S->m);
    if (S->dirfd >= 0)
        close(S->dirfd);
    stoker__free(S->dir);
#ifdef STOKER_HAVE_CURL
    stoker__robjs_close(S->rs);
#endif
    pthread_mutex_destroy(&S->key_lock);
    pthread_mutex_destroy(&S->direct_lock);
    stoker__free(S);
    ds->state = NULL;
}

static const stoker__source_ops SHARD_OPS = {
    .name = "shards",
    .locate = shards_locate,
    .file_path = shards_file_path,
    .close = stoker__shards_close,
    .key = shards_key,
    .direct_fd = shards_direct_fd,
    .advise = shards_advise,
    .label_at = stoker__shards_label_at,
};

/* ---- opening: the manifest ---- */

/* Finds the directory and the manifest for `path` (a directory or a manifest file). */
static int open_source(stoker_dataset *ds, const char *path, int *mfd, char *what, size_t cap)
{
    stoker__shards *S = ds->state;
    struct stat st;
    STOKER_RETURN_IF(stat(path, &st) != 0, &ds->err, -errno, "%s: %s", path,
                     stoker_strerror(-errno));
    const int flags = O_RDONLY | O_CLOEXEC;
    STOKER_RETURN_IF(!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode), &ds->err, STOKER_E_FORMAT,
                     "%s: neither a data set directory nor a manifest file", path);
    if (S_ISDIR(st.st_mode)) {
        S->dir = stoker__strdup(path);
        STOKER_RETURN_IF(!S->dir, &ds->err, -ENOMEM, "%s: out of memory", path);
        S->dirfd = open(path, flags | O_DIRECTORY);
        STOKER_RETURN_IF(S->dirfd < 0, &ds->err, -errno, "%s: %s", path, stoker_strerror(-errno));
        snprintf(what, cap, "%s/%s", path, STK_MANIFEST_NAME);
        *mfd = openat(S->dirfd, STK_MANIFEST_NAME, flags | O_NOFOLLOW | O_NONBLOCK);
        STOKER_RETURN_IF(*mfd < 0 && errno == ENOENT, &ds->err, STOKER_E_FORMAT,
                         "%s: not a stoker data set (no %s)", path, STK_MANIFEST_NAME);
        STOKER_RETURN_IF(*mfd < 0, &ds->err, -errno, "%s: %s", what, stoker_strerror(-errno));
        return 0;
    }
    snprintf(what, cap, "%s", path);
    *mfd = open(path, flags | O_NONBLOCK);
    STOKER_RETURN_IF(*mfd < 0, &ds->err, -errno, "%s: %s", path, stoker_strerror(-errno));
    const int sig = stoker__hdf5_signature(*mfd);
    STOKER_RETURN_IF(sig < 0, &ds->err, sig, "%s: a read of the file failed: %s", path,
                     strerror(-sig));
    STOKER_RETURN_IF(sig > 0, &ds->err, STOKER_E_UNSUPPORTED, "%s: " HDF5_REFUSAL, path);
    const char *slash = strrchr(path, '/');
    const size_t n = slash ? (slash == path ? 1 : (size_t)(slash - path)) : 1;
    S->dir = stoker__malloc(n + 1);
    STOKER_RETURN_IF(!S->dir, &ds->err, -ENOMEM, "%s: out of memory", path);
    memcpy(S->dir, slash ? path : ".", n);
    S->dir[n] = '\0';
    S->dirfd = open(S->dir, flags | O_DIRECTORY);
    STOKER_RETURN_IF(S->dirfd < 0, &ds->err, -errno, "%s: %s", S->dir, stoker_strerror(-errno));
    return 0;
}

#ifdef STOKER_HAVE_CURL
static bool ends_with(const char *s, const char *tail)
{
    const size_t n = strlen(s), m = strlen(tail);
    return n >= m && strcmp(s + n - m, tail) == 0;
}

/* A remote data set's manifest: the transport's set opened, then HEAD (its size, bounded)
 * and one GET pinned to the HEAD's validator. S->dir becomes the data set's URL. */
static int remote_manifest(stoker_dataset *ds, const char *path, const stoker_config *cfg,
                           char *what, size_t cap, char **text, size_t *size)
{
    stoker__shards *S = ds->state;
    size_t len = strlen(path);
    if (ends_with(path, "/" STK_MANIFEST_NAME))
        len -= strlen("/" STK_MANIFEST_NAME);
    while (len > 0 && path[len - 1] == '/')
        len--;
    S->dir = stoker__malloc(len + 1);
    STOKER_RETURN_IF(!S->dir, &ds->err, -ENOMEM, "%s: out of memory", path);
    memcpy(S->dir, path, len);
    S->dir[len] = '\0';
    int rc = stoker__robjs_open(&S->rs, path, cfg, &ds->err);
    if (rc < 0)
        return rc;
    snprintf(what, cap, "%s/%s", S->dir, STK_MANIFEST_NAME);
    stoker__robj *m = NULL;
    rc = stoker__robj_open_meta(S->rs, what, &m, &ds->err);
    if (rc == -ENOENT) {
        char was[STOKER_ERRMSG_CAP];
        snprintf(was, sizeof was, "%s", ds->err.msg);
        const bool h5 = ends_with(path, ".h5") || ends_with(path, ".hdf5") ||
                        ends_with(path, ".hdf") || strstr(path, ".h5:") != NULL;
        return stoker__fail(&ds->err, h5 ? STOKER_E_UNSUPPORTED : STOKER_E_FORMAT,
                            h5 ? "%s: HDF5 files are read from local files only; pack it with "
                                 "`stoker-pack FILE.h5 OUT`, upload OUT and open its URL"
                               : "%s: not a stoker data set (no %s there: %s)",
                            path, STK_MANIFEST_NAME, was);
    }
    if (rc < 0)
        return rc;
    const uint64_t n = stoker__robj_size(m);
    STOKER_RETURN_IF(n > STK_MANIFEST_MAX, &ds->err, STOKER_E_LIMIT,
                     "%s: manifest of %llu bytes exceeds the limit of %llu", what,
                     (unsigned long long)n, (unsigned long long)STK_MANIFEST_MAX);
    *text = stoker__malloc((size_t)n + 1);
    STOKER_RETURN_IF(!*text, &ds->err, -ENOMEM, "%s: out of memory", what);
    const stoker__rget g = {m, 0, n, (uint8_t *)*text};
    rc = n ? stoker__robj_get_all(S->rs, &g, 1, &ds->err) : 0;
    if (rc < 0)
        return rc;
    (*text)[n] = '\0';
    *size = (size_t)n;
    return 0;
}
#endif

int stoker__shards_begin(stoker_dataset *ds, const char *path, const stoker_config *cfg)
{
    stoker__shards *S = ds->state = stoker__calloc(1, sizeof *S);
    STOKER_RETURN_IF(!S, &ds->err, -ENOMEM, "%s: out of memory", path);
    S->dirfd = -1;
    pthread_mutex_init(&S->key_lock, NULL);
    pthread_mutex_init(&S->direct_lock, NULL);
    ds->ops = &SHARD_OPS;
    S->max_record_size = (uint64_t)stoker__cfg_int(cfg, STOKER_OPT_MAX_RECORD_SIZE);
    S->max_records = (uint64_t)stoker__cfg_int(cfg, STOKER_OPT_MAX_RECORDS);
    S->max_shards = (uint64_t)stoker__cfg_int(cfg, STOKER_OPT_MAX_SHARDS);
    int mfd = -1;
    char what[4200];
    char *text = NULL;
    size_t size = 0;
    int rc = 0;
#ifdef STOKER_HAVE_CURL
    if (stoker__http_is_url(path)) {
        ds->ops = &stoker__remote_shard_ops;
        rc = remote_manifest(ds, path, cfg, what, sizeof what, &text, &size);
        if (rc < 0) {
            stoker__free(text);
            return rc;
        }
    } else
#endif
    {
        rc = open_source(ds, path, &mfd, what, sizeof what);
        if (rc == 0)
            rc = stoker__manifest_load(mfd, what, &text, &size, &ds->err);
        if (mfd >= 0)
            close(mfd);
        if (rc < 0)
            return rc;
    }
    rc = stoker__manifest_parse(&S->m, text, size, what, S->max_shards, S->max_records, &ds->err);
    if (rc < 0)
        return rc;
    const uint32_t n = S->m.nshards;
    S->files = stoker__calloc(n ? n : 1, sizeof *S->files);
    S->first = stoker__calloc((size_t)n + 1, sizeof *S->first);
    STOKER_RETURN_IF(!S->files || !S->first, &ds->err, -ENOMEM, "%s: out of memory for %u shards",
                     path, n);
    S->n = (int32_t)n;
    const size_t dlen = strlen(S->dir);
    for (uint32_t i = 0; i < n; i++) {
        stoker__shard_file *sh = &S->files[i];
        sh->fd = sh->direct_fd = -1;
        const size_t len = dlen + strlen(S->m.shards[i].name) + 2;
#ifdef STOKER_HAVE_CURL
        if (S->rs) /* the URL, its name percent-encoded */
            sh->path = stoker__http_join(S->dir, S->m.shards[i].name);
        else
#endif
            if ((sh->path = stoker__malloc(len)) != NULL)
            snprintf(sh->path, len, "%s/%s", S->dir, S->m.shards[i].name);
        STOKER_RETURN_IF(!sh->path, &ds->err, -ENOMEM, "%s: out of memory", path);
        S->first[i + 1] = S->first[i] + S->m.shards[i].records;
    }
    return 0;
}

/* ---- opening: one shard ---- */

static int open_shard_file(stoker_dataset *ds, int32_t i, stoker__err *err)
{
    stoker__shards *S = ds->state;
    stoker__shard_file *sh = &S->files[i];
    /* O_NONBLOCK: a FIFO in place of a shard must not hang open (no effect on files) */
    sh->fd = openat(S->dirfd, S->m.shards[i].name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    STOKER_RETURN_IF(sh->fd < 0 && errno == ENOENT, err, -ENOENT,
                     "%s: missing (listed in the manifest as shard %d)", sh->path, (int)i);
    STOKER_RETURN_IF(sh->fd < 0 && errno == ELOOP, err, STOKER_E_CORRUPT,
                     "%s: a symbolic link; shards must be plain files inside the data set "
                     "directory",
                     sh->path);
    STOKER_RETURN_IF(sh->fd < 0, err, -errno, "%s: %s", sh->path, stoker_strerror(-errno));
    struct stat st;
    STOKER_RETURN_IF(fstat(sh->fd, &st) != 0, err, -errno, "%s: stat: %s", sh->path,
                     stoker_strerror(-errno));
    STOKER_RETURN_IF(!S_ISREG(st.st_mode), err, STOKER_E_CORRUPT, "%s: not a regular file",
                     sh->path);
    STOKER_RETURN_IF((uint64_t)st.st_size != S->m.shards[i].bytes, err, STOKER_E_CORRUPT,
                     "%s: %lld bytes, but the manifest says %llu (truncated or replaced)", sh->path,
                     (long long)st.st_size, (unsigned long long)S->m.shards[i].bytes);
    return 0;
}

/* The remote shards [i0, i1): their objects opened (HEADs at once), sizes checked. */
#ifdef STOKER_HAVE_CURL
static int open_remote_files(stoker_dataset *ds, int32_t i0, int32_t i1, stoker__err *err)
{
    stoker__shards *S = ds->state;
    const uint32_t n = (uint32_t)(i1 - i0);
    const char **urls = stoker__calloc(n ? n : 1, sizeof *urls);
    stoker__robj **objs = stoker__calloc(n ? n : 1, sizeof *objs);
    int rc = urls && objs ? 0 : stoker__fail(err, -ENOMEM, "%s: out of memory", ds->path);
    for (uint32_t k = 0; rc == 0 && k < n; k++)
        urls[k] = S->files[i0 + (int32_t)k].path;
    if (rc == 0)
        rc = stoker__robj_open_all(S->rs, urls, n, objs, err);
    for (uint32_t k = 0; rc == 0 && k < n; k++) {
        const int32_t i = i0 + (int32_t)k;
        S->files[i].obj = objs[k];
        const uint64_t size = stoker__robj_size(objs[k]), want = S->m.shards[i].bytes;
        if (size != want)
            rc = stoker__fail(err, STOKER_E_CORRUPT,
                              "%s: %llu bytes, but the manifest says %llu (truncated or replaced)",
                              S->files[i].path, (unsigned long long)size, (unsigned long long)want);
    }
    stoker__free(urls);
    stoker__free(objs);
    return rc;
}
#endif

/* Reads n ranges of shards, each from its file or object: remote ones all at once. */
typedef struct shard_range {
    int32_t shard;
    uint64_t off, len;
    uint8_t *dst;
} shard_range;

static int read_ranges(stoker_dataset *ds, const shard_range *q, uint32_t n, const char *what,
                       stoker__err *err)
{
    stoker__shards *S = ds->state;
#ifdef STOKER_HAVE_CURL
    if (S->rs) {
        stoker__rget *g = stoker__calloc(n ? n : 1, sizeof *g);
        STOKER_RETURN_IF(!g, err, -ENOMEM, "%s: out of memory", ds->path);
        for (uint32_t k = 0; k < n; k++)
            g[k] = (stoker__rget){S->files[q[k].shard].obj, q[k].off, q[k].len, q[k].dst};
        const int rc = stoker__robj_get_all(S->rs, g, n, err);
        stoker__free(g);
        return rc;
    }
#endif
    for (uint32_t k = 0; k < n; k++) {
        const int rc =
            stoker__pread_full(S->files[q[k].shard].fd, q[k].dst, (size_t)q[k].len, q[k].off);
        STOKER_RETURN_IF(rc < 0, err, rc, "%s: %s: %s", S->files[q[k].shard].path, what,
                         rc == STOKER_E_CORRUPT ? "file shrank" : stoker_strerror(rc));
    }
    return 0;
}

/* Opens shards [i0, i1) and checks each one's header, footer and index: the one parse of a
 * shard's structure, for local files and remote objects alike. */
static int open_files(stoker_dataset *ds, int32_t i0, int32_t i1, stoker__err *err)
{
    stoker__shards *S = ds->state;
    const uint32_t n = (uint32_t)(i1 - i0);
    int rc = 0;
#ifdef STOKER_HAVE_CURL
    if (S->rs)
        rc = open_remote_files(ds, i0, i1, err);
    else
#endif
        for (int32_t i = i0; rc == 0 && i < i1; i++)
            rc = open_shard_file(ds, i, err);
    if (rc < 0)
        return rc;
    const size_t hf = STK_HEADER_SIZE + STK_FOOTER_SIZE;
    shard_range *q = stoker__calloc(2 * (size_t)(n ? n : 1), sizeof *q);
    uint8_t *bytes = stoker__malloc((n ? n : 1) * hf);
    uint64_t *ioff = stoker__calloc(n ? n : 1, sizeof *ioff);
    rc = q && bytes && ioff ? 0 : stoker__fail(err, -ENOMEM, "%s: out of memory", ds->path);
    for (uint32_t k = 0; rc == 0 && k < n; k++) {
        const int32_t i = i0 + (int32_t)k;
        const uint64_t size = S->m.shards[i].bytes; /* >= STK_MIN_SHARD (manifest parse) */
        q[2 * k] = (shard_range){i, 0, STK_HEADER_SIZE, bytes + k * hf};
        q[2 * k + 1] = (shard_range){i, size - STK_FOOTER_SIZE, STK_FOOTER_SIZE,
                                     bytes + k * hf + STK_HEADER_SIZE};
    }
    if (rc == 0)
        rc = read_ranges(ds, q, 2 * n, "read", err);
    for (uint32_t k = 0; rc == 0 && k < n; k++) {
        const int32_t i = i0 + (int32_t)k;
        stoker__shard_file *sh = &S->files[i];
        const stoker__shard_ctx c = {
            &S->m, i, sh->path, S->first[i], S->max_records, S->max_record_size};
        const uint8_t *h = bytes + k * hf, *f = h + STK_HEADER_SIZE;
        uint64_t isize = 0;
        if ((rc = stoker__shard_check_header(&c, h, err)) < 0 ||
            (rc = stoker__shard_check_footer(&c, f, &ioff[k], &isize, err)) < 0)
            break;
        /* A copy, not a mapping: a shard truncated while open would turn reads of a mapped
         * index into SIGBUS, where a read past the end is an error the loader reports. */
        sh->index = stoker__malloc(isize ? (size_t)isize : 1);
        if (!sh->index) {
            rc = stoker__fail(err, -ENOMEM, "%s: out of memory for an index of %llu bytes",
                              sh->path, (unsigned long long)isize);
            break;
        }
        sh->records = isize / STK_ENTRY_SIZE;
        q[k] = (shard_range){i, ioff[k], isize, sh->index};
    }
    if (rc == 0)
        rc = read_ranges(ds, q, n, "reading the index", err);
    for (uint32_t k = 0; rc == 0 && k < n; k++) {
        const int32_t i = i0 + (int32_t)k;
        stoker__shard_file *sh = &S->files[i];
        const stoker__shard_ctx c = {
            &S->m, i, sh->path, S->first[i], S->max_records, S->max_record_size};
        rc = stoker__shard_check_index(&c, bytes + k * hf + STK_HEADER_SIZE, sh->index,
                                       &ds->info.payload_bytes, &ds->info.max_record, err);
    }
    stoker__free(q);
    stoker__free(bytes);
    stoker__free(ioff);
    return rc;
}

int stoker__shards_open_file(stoker_dataset *ds, int32_t i, stoker__err *err)
{
    return open_files(ds, i, i + 1, err);
}

/* ---- the source ---- */

static int shards_claims(const char *path)
{
    (void)path;
    return 1; /* the last in the list: whatever is left is a data set or is refused */
}

int stoker__shards_open(stoker_dataset *ds, const char *path, const stoker_config *cfg)
{
    int rc = stoker__shards_begin(ds, path, cfg);
    stoker__shards *S = ds->state;
    if (rc < 0)
        return rc;
#ifdef STOKER_HAVE_CURL
    if (S->rs) /* every shard's steps at once: each is a round trip */
        rc = open_files(ds, 0, S->n, &ds->err);
    else
#endif
        for (int32_t i = 0; rc == 0 && i < S->n; i++)
            rc = open_files(ds, i, i + 1, &ds->err);
#ifdef STOKER_HAVE_CURL
    if (rc == 0 && S->rs)
        rc = stoker__shards_remote_begin(ds, cfg);
#endif
    if (rc < 0)
        return rc;
    stoker__dsinfo *in = &ds->info;
    in->records = S->first[S->n];
    in->files = S->n;
    in->version = S->m.version;
    in->align = S->m.align;
    in->jpeg_checked = S->m.jpeg_checked;
    in->kind = S->m.kind;
    in->dtype = S->m.dtype;
    in->ndim = S->m.ndim;
    memcpy(in->shape, S->m.shape, sizeof in->shape);
    in->nclasses = S->m.nclasses;
    in->classes = S->m.classes;
    in->schema = S->m.schema;
    return 0;
}

const stoker__source stoker__shards_source = {
    .name = "shards",
    .claims = shards_claims,
    .open = stoker__shards_open,
    .verify = stoker__shards_verify,
};
