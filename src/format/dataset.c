/* Opening a data set: the manifest, then every shard's header, footer and index, each
 * checked before use. After open the handle is immutable (except the lazily decoded keys
 * and O_DIRECT descriptors, each under its own lock), so reads need no lock.
 *
 * Source kinds sit behind stoker__source_ops: the shard format is the one implemented
 * here; HDF5 files (hdf5_source.c) plug in at stoker_dataset_open with their own ops. */
#include "common/config.h"
#include "format/format.h"
#ifdef STOKER_HAVE_HDF5
#include "format/hdf5_source.h"
#endif

#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* HDF5's superblock signature: at byte 0, or past a user block at 512, 1024, 2048, ... */
int stoker__hdf5_signature(int fd)
{
    static const uint8_t sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    uint8_t got[8];
    for (uint64_t at = 0; at <= (UINT64_C(1) << 40); at = at ? at * 2 : 512) {
        ssize_t n;
        while ((n = pread(fd, got, sizeof got, (off_t)at)) < 0 && errno == EINTR) {
        }
        if (n < 0)
            return -errno;
        if (n != (ssize_t)sizeof got)
            return 0;
        if (memcmp(got, sig, sizeof sig) == 0)
            return 1;
    }
    return 0;
}
#ifdef STOKER_HAVE_HDF5 /* open reaches open_source with an HDF5 file only from verify */
#define HDF5_REFUSAL "an HDF5 file, not a shard data set; convert it with stoker-pack to verify it"
#else
#define HDF5_REFUSAL "an HDF5 file; this build cannot read HDF5 data sets"
#endif

/* The calling thread's last failure on an open data set: stoker_dataset_errmsg promises
 * each thread its own, so concurrent readers never share (or tear) one message. `serial`
 * names the handle, so a handle freed and another allocated at its address do not match. */
static _Thread_local struct {
    uint64_t serial;
    stoker__err err;
} thread_fail;

static atomic_uint_fast64_t next_serial = 1;

stoker_dataset *stoker__dataset_alloc(void)
{
    stoker_dataset *ds = stoker__calloc(1, sizeof *ds);
    if (!ds)
        return NULL;
    ds->dirfd = -1;
    ds->serial = atomic_fetch_add_explicit(&next_serial, 1, memory_order_relaxed);
    pthread_mutex_init(&ds->key_lock, NULL);
    pthread_mutex_init(&ds->direct_lock, NULL);
    return ds;
}

/* A failure of a call on an open data set (any thread): kept for the calling thread. */
int stoker__dataset_fail(stoker_dataset *ds, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(thread_fail.err.msg, sizeof thread_fail.err.msg, fmt, ap);
    va_end(ap);
    thread_fail.err.code = code;
    thread_fail.serial = ds->serial;
    return code;
}

int stoker__pread_full(int fd, void *buf, size_t len, uint64_t off)
{
    uint8_t *p = buf;
    while (len > 0) {
        const ssize_t r = pread(fd, p, len, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return STOKER_E_CORRUPT;
        p += r;
        len -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

/* ---- the shard source ---- */

static int shards_locate(const stoker_dataset *ds, int64_t id, stoker__recloc *loc)
{
    if (id < 0 || (uint64_t)id >= ds->first[ds->nshards])
        return STOKER_E_INVALID;
    /* the last shard whose first record is <= id (empty shards share a first id) */
    int32_t lo = 0, hi = ds->nshards - 1;
    while (lo < hi) {
        const int32_t mid = lo + (hi - lo + 1) / 2;
        if (ds->first[mid] <= (uint64_t)id)
            lo = mid;
        else
            hi = mid - 1;
    }
    const stoker__shard *sh = &ds->shards[lo];
    const uint8_t *e = sh->index + ((uint64_t)id - ds->first[lo]) * STK_ENTRY_SIZE;
    loc->fd = sh->fd;
    loc->shard = lo;
    loc->offset = stoker__get_u64(e + STK_E_OFFSET);
    loc->length = stoker__get_u64(e + STK_E_LENGTH);
    loc->label = (int64_t)stoker__get_u64(e + STK_E_LABEL);
    loc->crc = stoker__get_u32(e + STK_E_CRC);
    loc->has_crc = 1;
    loc->fetch = 0;
    return 0;
}

static int shards_direct_fd(stoker_dataset *ds, int32_t shard)
{
    if (shard < 0 || shard >= ds->nshards)
        return -EINVAL;
    stoker__shard *sh = &ds->shards[shard];
    pthread_mutex_lock(&ds->direct_lock);
    if (sh->direct_fd < 0 && sh->direct_err == 0) {
        const int fd = openat(ds->dirfd, ds->m.shards[shard].name,
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
    pthread_mutex_unlock(&ds->direct_lock);
    return rc;
}

static const char *shards_key(stoker_dataset *ds, int64_t id)
{
    if (id < 0 || (uint64_t)id >= ds->m.records || ds->m.nkeys == 0)
        return NULL;
    pthread_mutex_lock(&ds->key_lock);
    if (ds->keys_state == 0) {
        stoker__err err = {0};
        const int rc = stoker__manifest_keys(&ds->m, ds->path, &err);
        /* out of memory may pass; anything else is in the manifest for good */
        ds->keys_state = rc == 0 ? 1 : rc == -ENOMEM ? 0 : -1;
        if (rc < 0)
            stoker__dataset_fail(ds, rc, "%s", err.msg);
    }
    const int ok = ds->keys_state > 0;
    pthread_mutex_unlock(&ds->key_lock);
    if (!ok)
        return NULL;
    const uint64_t off = ds->m.key_offs[id];
    return off == UINT64_MAX ? NULL : ds->m.text + off;
}

static void shards_close(stoker_dataset *ds)
{
    for (int32_t i = 0; ds->shards && i < ds->nshards; i++) {
        stoker__shard *sh = &ds->shards[i];
        stoker__free((void *)sh->index);
        if (sh->fd >= 0)
            close(sh->fd);
        if (sh->direct_fd >= 0)
            close(sh->direct_fd);
        stoker__free(sh->path);
    }
    stoker__free(ds->shards);
    stoker__free(ds->first);
    ds->shards = NULL;
    ds->first = NULL;
}

static const stoker__source_ops SHARD_OPS = {
    "shards", shards_locate, shards_direct_fd, shards_key, shards_close, NULL, NULL, NULL, NULL,
    NULL,
};

/* ---- opening: the manifest ---- */

/* Finds the directory and the manifest for `path` (a directory or a manifest file). */
static int open_source(stoker_dataset *ds, const char *path, int *mfd, char *what, size_t cap)
{
    struct stat st;
    STOKER_RETURN_IF(stat(path, &st) != 0, &ds->err, -errno, "%s: %s", path,
                     stoker_strerror(-errno));
    const int flags = O_RDONLY | O_CLOEXEC;
    STOKER_RETURN_IF(!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode), &ds->err, STOKER_E_FORMAT,
                     "%s: neither a data set directory nor a manifest file", path);
    if (S_ISDIR(st.st_mode)) {
        ds->dir = stoker__strdup(path);
        STOKER_RETURN_IF(!ds->dir, &ds->err, -ENOMEM, "%s: out of memory", path);
        ds->dirfd = open(path, flags | O_DIRECTORY);
        STOKER_RETURN_IF(ds->dirfd < 0, &ds->err, -errno, "%s: %s", path, stoker_strerror(-errno));
        snprintf(what, cap, "%s/%s", path, STK_MANIFEST_NAME);
        *mfd = openat(ds->dirfd, STK_MANIFEST_NAME, flags | O_NOFOLLOW | O_NONBLOCK);
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
    ds->dir = stoker__malloc(n + 1);
    STOKER_RETURN_IF(!ds->dir, &ds->err, -ENOMEM, "%s: out of memory", path);
    memcpy(ds->dir, slash ? path : ".", n);
    ds->dir[n] = '\0';
    ds->dirfd = open(ds->dir, flags | O_DIRECTORY);
    STOKER_RETURN_IF(ds->dirfd < 0, &ds->err, -errno, "%s: %s", ds->dir, stoker_strerror(-errno));
    return 0;
}

int stoker__dataset_open_manifest(stoker_dataset *ds, const char *path, const stoker_config *cfg)
{
    ds->ops = &SHARD_OPS;
    ds->max_record_size = (uint64_t)stoker__cfg_int(cfg, STOKER_OPT_MAX_RECORD_SIZE);
    ds->max_records = (uint64_t)stoker__cfg_int(cfg, STOKER_OPT_MAX_RECORDS);
    ds->max_shards = (uint64_t)stoker__cfg_int(cfg, STOKER_OPT_MAX_SHARDS);
    STOKER_RETURN_IF(!path || !*path, &ds->err, STOKER_E_INVALID, "no data set path given");
    ds->path = stoker__strdup(path);
    STOKER_RETURN_IF(!ds->path, &ds->err, -ENOMEM, "%s: out of memory", path);
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
    return stoker__manifest_parse(&ds->m, text, size, what, ds->max_shards, ds->max_records,
                                  &ds->err);
}

int stoker__dataset_shards_alloc(stoker_dataset *ds)
{
    const uint32_t n = ds->m.nshards;
    ds->shards = stoker__calloc(n, sizeof *ds->shards);
    ds->first = stoker__calloc((size_t)n + 1, sizeof *ds->first);
    STOKER_RETURN_IF(!ds->shards || !ds->first, &ds->err, -ENOMEM,
                     "%s: out of memory for %u shards", ds->path, n);
    ds->nshards = (int32_t)n;
    const size_t dlen = strlen(ds->dir);
    for (uint32_t i = 0; i < n; i++) {
        stoker__shard *sh = &ds->shards[i];
        sh->fd = sh->direct_fd = -1;
        const size_t len = dlen + strlen(ds->m.shards[i].name) + 2;
        sh->path = stoker__malloc(len);
        STOKER_RETURN_IF(!sh->path, &ds->err, -ENOMEM, "%s: out of memory", ds->path);
        snprintf(sh->path, len, "%s/%s", ds->dir, ds->m.shards[i].name);
        ds->first[i + 1] = ds->first[i] + ds->m.shards[i].records;
    }
    return 0;
}

/* ---- opening: one shard ---- */

static int check_header(const stoker_dataset *ds, int32_t i, const uint8_t *h, stoker__err *err)
{
    const char *p = ds->shards[i].path;
    STOKER_RETURN_IF(memcmp(h + STK_H_MAGIC, STK_HEADER_MAGIC, 8) != 0, err, STOKER_E_FORMAT,
                     "%s: not a stoker shard (bad header magic)", p);
    const uint32_t crc = stoker_crc32c(0, h, STK_H_CRC);
    STOKER_RETURN_IF(stoker__get_u32(h + STK_H_CRC) != crc, err, STOKER_E_CORRUPT,
                     "%s: header CRC32C mismatch (stored %08x, computed %08x)", p,
                     stoker__get_u32(h + STK_H_CRC), crc);
    STOKER_RETURN_IF(stoker__get_u32(h + STK_H_VERSION) != STOKER_FORMAT_VERSION, err,
                     STOKER_E_FORMAT, "%s: unsupported shard format version %u", p,
                     stoker__get_u32(h + STK_H_VERSION));
    STOKER_RETURN_IF(stoker__get_u32(h + STK_H_ALIGN) != ds->m.align ||
                         stoker__get_u32(h + STK_H_SHARD) != (uint32_t)i ||
                         stoker__get_u32(h + STK_H_REGION) != STK_HEADER_REGION,
                     err, STOKER_E_CORRUPT,
                     "%s: header says shard %u, alignment %u, header region %u; the manifest "
                     "says shard %d, alignment %u",
                     p, stoker__get_u32(h + STK_H_SHARD), stoker__get_u32(h + STK_H_ALIGN),
                     stoker__get_u32(h + STK_H_REGION), (int)i, ds->m.align);
    return 0;
}

/* Checks the footer against the file's size and the manifest; *index_off on success. */
static int check_footer(const stoker_dataset *ds, int32_t i, const uint8_t *f, uint64_t size,
                        stoker__err *err)
{
    const char *p = ds->shards[i].path;
    STOKER_RETURN_IF(memcmp(f + STK_F_MAGIC, STK_FOOTER_MAGIC, 8) != 0, err, STOKER_E_CORRUPT,
                     "%s: bad footer magic (truncated or damaged shard)", p);
    const uint32_t crc = stoker_crc32c(0, f, STK_F_CRC);
    STOKER_RETURN_IF(stoker__get_u32(f + STK_F_CRC) != crc, err, STOKER_E_CORRUPT,
                     "%s: footer CRC32C mismatch (stored %08x, computed %08x)", p,
                     stoker__get_u32(f + STK_F_CRC), crc);
    STOKER_RETURN_IF(stoker__get_u32(f + STK_F_VERSION) != STOKER_FORMAT_VERSION, err,
                     STOKER_E_FORMAT, "%s: unsupported footer version %u", p,
                     stoker__get_u32(f + STK_F_VERSION));
    const uint64_t count = stoker__get_u64(f + STK_F_COUNT);
    const uint64_t off = stoker__get_u64(f + STK_F_INDEX_OFF);
    const uint64_t isize = stoker__get_u64(f + STK_F_INDEX_SIZE);
    STOKER_RETURN_IF(count > ds->max_records, err, STOKER_E_LIMIT,
                     "%s: %llu records exceed the limit of %llu (STOKER_OPT_MAX_RECORDS)", p,
                     (unsigned long long)count, (unsigned long long)ds->max_records);
    STOKER_RETURN_IF(stoker__get_u32(f + STK_F_SHARD) != (uint32_t)i ||
                         stoker__get_u32(f + STK_F_ALIGN) != ds->m.align ||
                         count != ds->m.shards[i].records,
                     err, STOKER_E_CORRUPT,
                     "%s: footer says shard %u, alignment %u, %llu records; the manifest says "
                     "shard %d, alignment %u, %llu records",
                     p, stoker__get_u32(f + STK_F_SHARD), stoker__get_u32(f + STK_F_ALIGN),
                     (unsigned long long)count, (int)i, ds->m.align,
                     (unsigned long long)ds->m.shards[i].records);
    uint64_t end = 0;
    const bool ovf = count > UINT64_MAX / STK_ENTRY_SIZE || stoker__add_ovf(off, isize, &end) ||
                     stoker__add_ovf(end, STK_FOOTER_SIZE, &end);
    STOKER_RETURN_IF(ovf || isize != count * STK_ENTRY_SIZE || end != size ||
                         off < STK_HEADER_REGION || off % ds->m.align != 0,
                     err, STOKER_E_CORRUPT,
                     "%s: index at %llu of %llu bytes for %llu records does not fit a file of "
                     "%llu bytes",
                     p, (unsigned long long)off, (unsigned long long)isize,
                     (unsigned long long)count, (unsigned long long)size);
    return 0;
}

static int check_entry(const stoker_dataset *ds, int32_t i, uint64_t r, uint64_t *prev_end,
                       stoker__err *err)
{
    const stoker__shard *sh = &ds->shards[i];
    const uint8_t *e = sh->index + r * STK_ENTRY_SIZE;
    const uint64_t off = stoker__get_u64(e + STK_E_OFFSET);
    const uint64_t len = stoker__get_u64(e + STK_E_LENGTH);
    const unsigned long long id = (unsigned long long)(ds->first[i] + r);
    const unsigned long long sr = (unsigned long long)r;
    uint64_t end = 0, raw = 0;
    STOKER_RETURN_IF(len > ds->max_record_size, err, STOKER_E_LIMIT,
                     "%s: record %llu (shard record %llu): %llu bytes exceed the limit of %llu "
                     "(STOKER_OPT_MAX_RECORD_SIZE)",
                     sh->path, id, sr, (unsigned long long)len,
                     (unsigned long long)ds->max_record_size);
    STOKER_RETURN_IF(stoker__get_u32(e + STK_E_FLAGS) != 0, err, STOKER_E_CORRUPT,
                     "%s: record %llu (shard record %llu): unknown flags %08x", sh->path, id, sr,
                     stoker__get_u32(e + STK_E_FLAGS));
    STOKER_RETURN_IF(off % ds->m.align != 0, err, STOKER_E_CORRUPT,
                     "%s: record %llu (shard record %llu): offset %llu not aligned to %u", sh->path,
                     id, sr, (unsigned long long)off, ds->m.align);
    STOKER_RETURN_IF(off < *prev_end, err, STOKER_E_CORRUPT,
                     "%s: record %llu (shard record %llu): offset %llu overlaps the header or "
                     "the previous record (which ends at %llu)",
                     sh->path, id, sr, (unsigned long long)off, (unsigned long long)*prev_end);
    STOKER_RETURN_IF(stoker__add_ovf(off, len, &end) || end > sh->index_off, err, STOKER_E_CORRUPT,
                     "%s: record %llu (shard record %llu): %llu bytes at %llu extend past the "
                     "payload area (which ends at %llu)",
                     sh->path, id, sr, (unsigned long long)len, (unsigned long long)off,
                     (unsigned long long)sh->index_off);
    STOKER_RETURN_IF(ds->m.kind == STOKER_FIELD_RAW &&
                         stoker__raw_size(ds->m.dtype, ds->m.ndim, ds->m.shape, &raw) && len != raw,
                     err, STOKER_E_CORRUPT,
                     "%s: record %llu (shard record %llu): %llu bytes, but raw records are "
                     "%llu bytes",
                     sh->path, id, sr, (unsigned long long)len, (unsigned long long)raw);
    *prev_end = end;
    return 0;
}

/* Reads the index into memory, checks its CRC and every entry. A copy, not a mapping: a
 * shard truncated while open would turn reads of a mapped index into SIGBUS, where a read
 * past the end is an error the loader reports. */
static int check_index(stoker_dataset *ds, int32_t i, const uint8_t *f, stoker__err *err)
{
    stoker__shard *sh = &ds->shards[i];
    sh->index_off = stoker__get_u64(f + STK_F_INDEX_OFF);
    sh->records = stoker__get_u64(f + STK_F_COUNT);
    const uint64_t isize = sh->records * STK_ENTRY_SIZE;
    uint8_t *index = stoker__malloc(isize ? (size_t)isize : 1);
    STOKER_RETURN_IF(!index, err, -ENOMEM, "%s: out of memory for an index of %llu bytes",
                     sh->path, (unsigned long long)isize);
    sh->index = index;
    const int rrc = stoker__pread_full(sh->fd, index, (size_t)isize, sh->index_off);
    STOKER_RETURN_IF(rrc < 0, err, rrc, "%s: reading the index: %s", sh->path,
                     rrc == STOKER_E_CORRUPT ? "file shrank" : stoker_strerror(rrc));
    const uint32_t crc = stoker_crc32c(0, sh->index, (size_t)isize);
    STOKER_RETURN_IF(crc != stoker__get_u32(f + STK_F_INDEX_CRC), err, STOKER_E_CORRUPT,
                     "%s: index CRC32C mismatch (stored %08x, computed %08x)", sh->path,
                     stoker__get_u32(f + STK_F_INDEX_CRC), crc);
    uint64_t prev_end = STK_HEADER_REGION, payload = 0, max = 0;
    for (uint64_t r = 0; r < sh->records; r++) {
        const int rc = check_entry(ds, i, r, &prev_end, err);
        if (rc < 0)
            return rc;
        const uint64_t len = stoker__get_u64(sh->index + r * STK_ENTRY_SIZE + STK_E_LENGTH);
        payload += len; /* cannot overflow: records do not overlap within the file */
        max = len > max ? len : max;
    }
    STOKER_RETURN_IF(payload != stoker__get_u64(f + STK_F_PAYLOAD), err, STOKER_E_CORRUPT,
                     "%s: footer says %llu payload bytes, the index %llu", sh->path,
                     (unsigned long long)stoker__get_u64(f + STK_F_PAYLOAD),
                     (unsigned long long)payload);
    ds->payload_bytes += payload;
    ds->max_record = max > ds->max_record ? max : ds->max_record;
    return 0;
}

static int open_shard_file(stoker_dataset *ds, int32_t i, stoker__err *err)
{
    stoker__shard *sh = &ds->shards[i];
    /* O_NONBLOCK: a FIFO in place of a shard must not hang open (no effect on files) */
    sh->fd =
        openat(ds->dirfd, ds->m.shards[i].name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
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
    STOKER_RETURN_IF((uint64_t)st.st_size != ds->m.shards[i].bytes, err, STOKER_E_CORRUPT,
                     "%s: %lld bytes, but the manifest says %llu (truncated or replaced)", sh->path,
                     (long long)st.st_size, (unsigned long long)ds->m.shards[i].bytes);
    return 0;
}

int stoker__shard_open(stoker_dataset *ds, int32_t i, stoker__err *err)
{
    stoker__shard *sh = &ds->shards[i];
    int rc = open_shard_file(ds, i, err);
    if (rc < 0)
        return rc;
    const uint64_t size = ds->m.shards[i].bytes; /* >= STK_MIN_SHARD (manifest parse) */
    uint8_t h[STK_HEADER_SIZE], f[STK_FOOTER_SIZE];
    rc = stoker__pread_full(sh->fd, h, sizeof h, 0);
    if (rc == 0)
        rc = stoker__pread_full(sh->fd, f, sizeof f, size - STK_FOOTER_SIZE);
    STOKER_RETURN_IF(rc < 0, err, rc, "%s: read: %s", sh->path,
                     rc == STOKER_E_CORRUPT ? "file shrank" : stoker_strerror(rc));
    if ((rc = check_header(ds, i, h, err)) < 0 || (rc = check_footer(ds, i, f, size, err)) < 0)
        return rc;
    return check_index(ds, i, f, err); /* check_footer placed it in the file */
}

/* ---- the public face ---- */

int stoker_dataset_open(stoker_dataset **out, const char *path, const stoker_config *cfg)
{
    if (!out)
        return STOKER_E_INVALID;
    stoker_dataset *ds = *out = stoker__dataset_alloc();
    if (!ds)
        return -ENOMEM;
#ifdef STOKER_HAVE_HDF5
    const int h5 = path ? stoker__h5_detect(path) : 0;
    if (h5 != 0) { /* an HDF5 file, or a file whose first bytes failed to read */
        const int hrc = h5 < 0 ? stoker__fail(&ds->err, h5, "%s: a read of the file failed: %s",
                                              path, strerror(-h5))
                               : stoker__h5_open(ds, path, cfg);
        if (hrc == 0)
            stoker__err_clear(&ds->err);
        ds->ready = hrc == 0;
        return hrc;
    }
#endif
    int rc = stoker__dataset_open_manifest(ds, path, cfg);
    if (rc == 0)
        rc = stoker__dataset_shards_alloc(ds);
    for (int32_t i = 0; rc == 0 && i < ds->nshards; i++)
        rc = stoker__shard_open(ds, i, &ds->err);
    if (rc == 0)
        stoker__err_clear(&ds->err);
    ds->ready = rc == 0;
    return rc;
}

void stoker_dataset_close(stoker_dataset *ds)
{
    if (!ds)
        return;
    if (ds->ops)
        ds->ops->close(ds);
    stoker__manifest_free(&ds->m);
    if (ds->dirfd >= 0)
        close(ds->dirfd);
    stoker__free(ds->path);
    stoker__free(ds->dir);
    pthread_mutex_destroy(&ds->key_lock);
    pthread_mutex_destroy(&ds->direct_lock);
    stoker__free(ds);
}

const char *stoker_dataset_errmsg(const stoker_dataset *ds)
{
    if (!ds)
        return "no data set";
    return thread_fail.serial == ds->serial ? thread_fail.err.msg : ds->err.msg;
}

int64_t stoker_dataset_num_records(const stoker_dataset *ds)
{
    return ds && ds->ready ? (int64_t)ds->first[ds->nshards] : 0;
}

int32_t stoker_dataset_num_shards(const stoker_dataset *ds)
{
    return ds && ds->ready ? ds->nshards : 0;
}

int32_t stoker_dataset_num_classes(const stoker_dataset *ds)
{
    return ds && ds->ready ? (int32_t)ds->m.nclasses : 0;
}

const char *stoker_dataset_class_name(const stoker_dataset *ds, int32_t i)
{
    return ds && ds->ready && i >= 0 && (uint32_t)i < ds->m.nclasses ? ds->m.classes[i] : NULL;
}

int64_t stoker_dataset_payload_bytes(const stoker_dataset *ds)
{
    return ds && ds->ready ? (int64_t)ds->payload_bytes : 0;
}

int32_t stoker_dataset_format_version(const stoker_dataset *ds)
{
    return ds && ds->ready ? (int32_t)ds->m.version : 0;
}

bool stoker__dataset_is_hdf5(const stoker_dataset *ds)
{
    return ds->source != NULL;
}

int stoker_dataset_jpeg_checked(const stoker_dataset *ds)
{
    return ds && ds->ready && ds->m.jpeg_checked ? 1 : 0;
}

int stoker_dataset_field(const stoker_dataset *ds, int32_t *kind, int32_t *dtype, int32_t *ndim,
                         int64_t *shape)
{
    if (!ds || !ds->ready)
        return STOKER_E_INVALID;
    if (kind)
        *kind = ds->m.kind;
    if (dtype)
        *dtype = ds->m.dtype;
    if (ndim)
        *ndim = ds->m.ndim;
    if (shape)
        memcpy(shape, ds->m.shape, sizeof ds->m.shape);
    return 0;
}

void stoker__dataset_advise(const stoker_dataset *ds, int advice)
{
    for (int32_t i = 0; ds && ds->ready && i < ds->nshards; i++)
        if (ds->shards[i].fd >= 0)
            posix_fadvise(ds->shards[i].fd, 0, 0, advice);
}

int stoker__dataset_locate(const stoker_dataset *ds, int64_t id, stoker__recloc *loc)
{
    if (!ds || !ds->ready || !loc)
        return STOKER_E_INVALID;
    return ds->ops->locate(ds, id, loc);
}

int stoker_dataset_record_info(const stoker_dataset *ds, int64_t id, uint64_t *size, int64_t *label,
                               int32_t *shard)
{
    stoker__recloc loc;
    const int rc = stoker__dataset_locate(ds, id, &loc);
    if (rc < 0)
        return rc;
    if (size)
        *size = loc.length;
    if (label)
        *label = loc.label;
    if (shard)
        *shard = loc.shard;
    return 0;
}

const char *stoker_dataset_record_key(stoker_dataset *ds, int64_t id)
{
    return ds && ds->ready ? ds->ops->key(ds, id) : NULL;
}

int stoker_dataset_read(stoker_dataset *ds, int64_t id, void *buf, size_t cap, size_t *size)
{
    if (!ds)
        return STOKER_E_INVALID;
    stoker__recloc loc;
    if (stoker__dataset_locate(ds, id, &loc) < 0)
        return stoker__dataset_fail(ds, STOKER_E_INVALID,
                                    "%s: record %lld out of range (%lld "
                                    "records)",
                                    ds->path, (long long)id,
                                    (long long)stoker_dataset_num_records(ds));
    if (size)
        *size = (size_t)loc.length;
    const char *p = ds->shards[loc.shard].path;
    const unsigned long long sr = (unsigned long long)((uint64_t)id - ds->first[loc.shard]);
    if (loc.length > cap)
        return stoker__dataset_fail(ds, STOKER_E_LIMIT,
                                    "%s: record %lld (shard record %llu): %llu bytes do not fit "
                                    "a buffer of %zu",
                                    p, (long long)id, sr, (unsigned long long)loc.length, cap);
    if (loc.length > 0 && !buf)
        return stoker__dataset_fail(ds, STOKER_E_INVALID, "%s: NULL buffer", ds->path);
    if (loc.fetch) {
        stoker__err err = {0};
        const uint8_t *got = NULL;
        const int frc = stoker__dataset_fetch(ds, id, &loc, buf, &got, &err);
        return frc < 0 ? stoker__dataset_fail(ds, frc, "%s", err.msg) : 0;
    }
    const int rc = stoker__pread_full(loc.fd, buf, (size_t)loc.length, loc.offset);
    if (rc < 0)
        return stoker__dataset_fail(
            ds, rc, "%s: record %lld (shard record %llu): read: %s", p, (long long)id, sr,
            rc == STOKER_E_CORRUPT ? "file ends early" : stoker_strerror(rc));
    const uint32_t crc = loc.has_crc ? stoker_crc32c(0, buf, (size_t)loc.length) : 0;
    if (loc.has_crc && crc != loc.crc)
        return stoker__dataset_fail(ds, STOKER_E_CORRUPT,
                                    "%s: record %lld (shard record %llu): CRC32C mismatch "
                                    "(stored %08x, computed %08x)",
                                    p, (long long)id, sr, loc.crc, crc);
    return 0;
}

/* ---- internal getters ---- */

const char *stoker__dataset_path(const stoker_dataset *ds)
{
    return ds->path;
}

uint32_t stoker__dataset_align(const stoker_dataset *ds)
{
    return ds->m.align;
}

const char *stoker__dataset_shard_path(const stoker_dataset *ds, int32_t shard)
{
    return shard >= 0 && shard < ds->nshards ? ds->shards[shard].path : "(no such shard)";
}

int stoker__dataset_direct_fd(stoker_dataset *ds, int32_t shard)
{
    return ds->ops->direct_fd(ds, shard);
}

int stoker__dataset_fetch(stoker_dataset *ds, int64_t id, const stoker__recloc *loc, uint8_t *dst,
                          const uint8_t **out, stoker__err *err)
{
    STOKER_RETURN_IF(!ds->ops->fetch, err, STOKER_E_INVALID,
                     "%s: record %lld: this source has no fetched records", ds->path,
                     (long long)id);
    return ds->ops->fetch(ds, id, loc, dst, out, err);
}

int stoker__dataset_fetch_plan(stoker_dataset *ds, int64_t id, const stoker__recloc *loc,
                               uint64_t round, stoker__fetch_read *out, uint32_t cap, uint32_t *n)
{
    *n = 0;
    return ds->ops->plan ? ds->ops->plan(ds, id, loc, round, out, cap, n) : STOKER__PLAN_NONE;
}

void stoker__dataset_fetch_landed(stoker_dataset *ds, uint32_t cookie, uint64_t length,
                                  int64_t res)
{
    if (ds->ops->landed)
        ds->ops->landed(ds, cookie, length, res);
}

bool stoker__dataset_serialised(const stoker_dataset *ds)
{
    return ds && ds->ops && ds->ops->serialised && ds->ops->serialised(ds);
}

uint64_t stoker__dataset_max_record(const stoker_dataset *ds)
{
    return ds->max_record;
}

uint64_t stoker__dataset_block_records(const stoker_dataset *ds)
{
    return ds->ops->block_records ? ds->ops->block_records(ds) : 0;
}
