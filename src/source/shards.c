/* SPDX-License-Identifier: Apache-2.0 */
/* The local shard source: a packed data set's directory (or its manifest file) on a local
 * file system. Open reads the manifest, then every shard's header, footer and index, each
 * checked (format/shard.h) before use; afterwards the handle is immutable (except the lazily
 * decoded keys and O_DIRECT descriptors, each under its own lock), so reads need no lock. */
#include "common/config.h"
#include "format/signature.h"
#include "source/shards.h"

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
        const int fd = openat(S->dirfd, S->m.shards[i].name,
                              O_RDONLY | O_DIRECT | O_CLOEXEC | O_NOFOLLOW);
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

static void shards_close(stoker_dataset *ds)
{
    stoker__shards *S = ds->state;
    if (!S)
        return;
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
    pthread_mutex_destroy(&S->key_lock);
    pthread_mutex_destroy(&S->direct_lock);
    stoker__free(S);
    ds->state = NULL;
}

static const stoker__source_ops SHARD_OPS = {
    .name = "shards",
    .locate = shards_locate,
    .file_path = shards_file_path,
    .close = shards_close,
    .key = shards_key,
    .direct_fd = shards_direct_fd,
    .advise = shards_advise,
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
    int rc = open_source(ds, path, &mfd, what, sizeof what);
    if (rc == 0)
        rc = stoker__manifest_load(mfd, what, &text, &size, &ds->err);
    if (mfd >= 0)
        close(mfd);
    if (rc < 0)
        return rc;
    rc = stoker__manifest_parse(&S->m, text, size, what, S->max_shards, S->max_records, &ds->err);
    if (rc < 0)
        return rc;
    const uint32_t n = S->m.nshards;
    S->files = stoker__calloc(n ? n : 1, sizeof *S->files);
    S->first = stoker__calloc((size_t)n + 1, sizeof *S->first);
    STOKER_RETURN_IF(!S->files || !S->first, &ds->err, -ENOMEM,
                     "%s: out of memory for %u shards", path, n);
    S->n = (int32_t)n;
    const size_t dlen = strlen(S->dir);
    for (uint32_t i = 0; i < n; i++) {
        stoker__shard_file *sh = &S->files[i];
        sh->fd = sh->direct_fd = -1;
        const size_t len = dlen + strlen(S->m.shards[i].name) + 2;
        sh->path = stoker__malloc(len);
        STOKER_RETURN_IF(!sh->path, &ds->err, -ENOMEM, "%s: out of memory", path);
        snprintf(sh->path, len, "%s/%s", S->dir, S->m.shards[i].name);
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
    sh->fd =
        openat(S->dirfd, S->m.shards[i].name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
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

int stoker__shards_open_file(stoker_dataset *ds, int32_t i, stoker__err *err)
{
    stoker__shards *S = ds->state;
    stoker__shard_file *sh = &S->files[i];
    int rc = open_shard_file(ds, i, err);
    if (rc < 0)
        return rc;
    const stoker__shard_ctx c = {&S->m, i, sh->path, S->first[i], S->max_records,
                                 S->max_record_size};
    const uint64_t size = S->m.shards[i].bytes; /* >= STK_MIN_SHARD (manifest parse) */
    uint8_t h[STK_HEADER_SIZE], f[STK_FOOTER_SIZE];
    rc = stoker__pread_full(sh->fd, h, sizeof h, 0);
    if (rc == 0)
        rc = stoker__pread_full(sh->fd, f, sizeof f, size - STK_FOOTER_SIZE);
    STOKER_RETURN_IF(rc < 0, err, rc, "%s: read: %s", sh->path,
                     rc == STOKER_E_CORRUPT ? "file shrank" : stoker_strerror(rc));
    uint64_t ioff = 0, isize = 0;
    if ((rc = stoker__shard_check_header(&c, h, err)) < 0 ||
        (rc = stoker__shard_check_footer(&c, f, &ioff, &isize, err)) < 0)
        return rc;
    /* A copy, not a mapping: a shard truncated while open would turn reads of a mapped
     * index into SIGBUS, where a read past the end is an error the loader reports. */
    sh->index = stoker__malloc(isize ? (size_t)isize : 1);
    STOKER_RETURN_IF(!sh->index, err, -ENOMEM, "%s: out of memory for an index of %llu bytes",
                     sh->path, (unsigned long long)isize);
    sh->records = isize / STK_ENTRY_SIZE;
    rc = stoker__pread_full(sh->fd, sh->index, (size_t)isize, ioff);
    STOKER_RETURN_IF(rc < 0, err, rc, "%s: reading the index: %s", sh->path,
                     rc == STOKER_E_CORRUPT ? "file shrank" : stoker_strerror(rc));
    return stoker__shard_check_index(&c, f, sh->index, &ds->info.payload_bytes,
                                     &ds->info.max_record, err);
}

/* ---- the source ---- */

static int shards_claims(const char *path)
{
    (void)path;
    return 1; /* the last in the list: whatever is left is a data set or is refused */
}

static int shards_open(stoker_dataset *ds, const char *path, const stoker_config *cfg)
{
    int rc = stoker__shards_begin(ds, path, cfg);
    stoker__shards *S = ds->state;
    for (int32_t i = 0; rc == 0 && i < S->n; i++)
        rc = stoker__shards_open_file(ds, i, &ds->err);
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
    return 0;
}

const stoker__source stoker__shards_source = {
    .name = "shards",
    .claims = shards_claims,
    .open = shards_open,
    .verify = stoker__shards_verify,
};
