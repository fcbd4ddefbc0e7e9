/* SPDX-License-Identifier: Apache-2.0 */
/* The data set writer: shards written sequentially through one large staging buffer (no
 * per-record system call for records smaller than it), the manifest at finish, and an
 * atomic publish by rename of a hidden temporary directory. Files hold nothing but the
 * records and options, so the same input always gives the same bytes. */
#include "common/config.h"
#include "format/manifest.h"
#include "format/schema.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { W_OPEN = 0, W_FINISHED = 1, W_FAILED = 2 };

typedef struct wshard {
    uint64_t records;
    uint64_t bytes;
    uint32_t crc;
} wshard;

struct stoker_writer {
    stoker__err err;
    atomic_int canceled;
    int state;
    char *path;   /* destination, trailing '/' removed */
    char *parent; /* its directory */
    char *tmp;    /* hidden temporary directory beside it; NULL once published */
    int tmpfd;
    pid_t pid; /* the creator: a forked child's destroy leaves its output alone */
    uint64_t shard_size;
    uint32_t align;
    bool overwrite, do_fsync;
    bool jpeg_checked; /* STOKER_OPT_JPEG_CHECKED: the manifest says so (version 2) */
    uint64_t max_record, max_records, max_shards;
    int32_t kind, dtype, ndim;
    int64_t shape[STOKER_MAX_DIMS];
    uint64_t raw_size;
    stoker__schema *schema; /* stoker_writer_set_fields: manifest version 3; else NULL */
    stoker__buf sample;     /* a sample's payload, encoded */
    stoker__buf classes;    /* escaped "class NAME\n" lines */
    stoker__buf keys;       /* escaped key lines, once any record had a key */
    bool any_key;
    wshard *shards;
    uint32_t nshards, cap_shards;
    /* the shard being written (fd < 0: none) */
    int fd;
    uint64_t pos; /* bytes of the shard so far, staged ones included */
    uint32_t crc; /* CRC32C of those bytes */
    uint8_t *stage;
    size_t staged;
    stoker__buf index; /* the shard's index entries */
    uint64_t shard_payload;
    int64_t records;
    uint64_t bytes;
};

static const uint8_t ZEROS[STK_HEADER_REGION];

/* Marks the writer failed for good: only destroy is allowed after an I/O or memory error,
 * because the shard on disk no longer matches the writer's bookkeeping. */
static int doom(stoker_writer *w, int rc)
{
    static const char tail[] = " (the writer is failed; only destroy is allowed)";
    const size_t n = strlen(w->err.msg);
    if (n + sizeof tail <= sizeof w->err.msg && !strstr(w->err.msg, tail))
        memcpy(w->err.msg + n, tail, sizeof tail);
    w->state = W_FAILED;
    return rc;
}

static int usable(stoker_writer *w)
{
    if (atomic_load(&w->canceled)) {
        stoker__fail(&w->err, STOKER_E_CANCELED, "%s: writing was canceled", w->path);
        return doom(w, STOKER_E_CANCELED);
    }
    STOKER_RETURN_IF(w->state == W_FINISHED, &w->err, STOKER_E_STATE, "%s: the writer has finished",
                     w->path);
    STOKER_RETURN_IF(w->state == W_FAILED, &w->err, STOKER_E_STATE,
                     "%s: the writer failed earlier; only destroy is allowed", w->path);
    return 0;
}

static int write_all(stoker_writer *w, int fd, const void *p, size_t n, const char *name)
{
    const uint8_t *b = p;
    while (n > 0) {
        if (atomic_load(&w->canceled))
            return stoker__fail(&w->err, STOKER_E_CANCELED, "%s: writing was canceled", w->path);
        const size_t chunk = n < STK_WRITE_CHUNK ? n : STK_WRITE_CHUNK;
        const ssize_t r = write(fd, b, chunk);
        if (r < 0 && errno == EINTR)
            continue;
        STOKER_RETURN_IF(r < 0, &w->err, -errno, "%s/%s: write: %s", w->tmp, name,
                         stoker_strerror(-errno));
        b += r;
        n -= (size_t)r;
    }
    return 0;
}

static void shard_name(char *buf, size_t cap, uint32_t i)
{
    snprintf(buf, cap, "shard-%05u.stk", i);
}

static int flush_stage(stoker_writer *w)
{
    char name[32];
    shard_name(name, sizeof name, w->nshards);
    const int rc = write_all(w, w->fd, w->stage, w->staged, name);
    w->staged = 0;
    return rc;
}

/* Appends bytes to the current shard: staged, or written through when larger than the
 * staging buffer (after flushing it, so file order is kept). */
static int emit(stoker_writer *w, const void *p, size_t n)
{
    w->crc = stoker_crc32c(w->crc, p, n);
    w->pos += n;
    if (n <= STK_WRITE_CHUNK - w->staged) {
        memcpy(w->stage + w->staged, p, n);
        w->staged += n;
        return 0;
    }
    int rc = flush_stage(w);
    if (rc < 0)
        return rc;
    if (n < STK_WRITE_CHUNK) {
        memcpy(w->stage, p, n);
        w->staged = n;
        return 0;
    }
    char name[32];
    shard_name(name, sizeof name, w->nshards);
    return write_all(w, w->fd, p, n, name);
}

/* Zero padding up to the next multiple of the alignment (< 4096 bytes). */
static int pad(stoker_writer *w)
{
    const uint64_t to = stoker__align_up(w->pos, w->align);
    return emit(w, ZEROS, (size_t)(to - w->pos));
}

static int shard_begin(stoker_writer *w)
{
    char name[32];
    shard_name(name, sizeof name, w->nshards);
    /* readers with the same limits must be able to open what is written */
    STOKER_RETURN_IF(w->nshards >= w->max_shards, &w->err, STOKER_E_LIMIT,
                     "%s: more than %llu shards (STOKER_OPT_MAX_SHARDS)", w->path,
                     (unsigned long long)w->max_shards);
    w->fd = openat(w->tmpfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    STOKER_RETURN_IF(w->fd < 0, &w->err, -errno, "%s/%s: create: %s", w->tmp, name,
                     stoker_strerror(-errno));
    uint8_t h[STK_HEADER_SIZE] = {0};
    memcpy(h + STK_H_MAGIC, STK_HEADER_MAGIC, 8);
    stoker__put_u32(h + STK_H_VERSION, STOKER_FORMAT_VERSION);
    stoker__put_u32(h + STK_H_ALIGN, w->align);
    stoker__put_u32(h + STK_H_SHARD, w->nshards);
    stoker__put_u32(h + STK_H_REGION, STK_HEADER_REGION);
    stoker__put_u32(h + STK_H_CRC, stoker_crc32c(0, h, STK_H_CRC));
    w->pos = 0;
    w->crc = 0;
    w->staged = 0;
    w->index.len = 0;
    w->shard_payload = 0;
    int rc = emit(w, h, sizeof h);
    return rc < 0 ? rc : emit(w, ZEROS, STK_HEADER_REGION - STK_HEADER_SIZE);
}

static int add_shard_entry(stoker_writer *w)
{
    if (w->nshards == w->cap_shards) {
        const uint32_t cap = w->cap_shards ? w->cap_shards * 2 : 16;
        wshard *s = stoker__realloc(w->shards, (size_t)cap * sizeof *s);
        STOKER_RETURN_IF(!s, &w->err, -ENOMEM, "%s: out of memory", w->path);
        w->shards = s;
        w->cap_shards = cap;
    }
    return 0;
}

/* Writes the index and footer, syncs and closes the shard. */
static int shard_end(stoker_writer *w)
{
    char name[32];
    shard_name(name, sizeof name, w->nshards);
    int rc = add_shard_entry(w);
    if (rc < 0 || (rc = pad(w)) < 0)
        return rc;
    const uint64_t index_off = w->pos;
    const uint64_t count = w->index.len / STK_ENTRY_SIZE;
    if ((rc = emit(w, w->index.data, w->index.len)) < 0)
        return rc;
    uint8_t f[STK_FOOTER_SIZE] = {0};
    memcpy(f + STK_F_MAGIC, STK_FOOTER_MAGIC, 8);
    stoker__put_u32(f + STK_F_VERSION, STOKER_FORMAT_VERSION);
    stoker__put_u32(f + STK_F_SHARD, w->nshards);
    stoker__put_u64(f + STK_F_COUNT, count);
    stoker__put_u64(f + STK_F_INDEX_OFF, index_off);
    stoker__put_u64(f + STK_F_INDEX_SIZE, w->index.len);
    stoker__put_u64(f + STK_F_PAYLOAD, w->shard_payload);
    stoker__put_u32(f + STK_F_INDEX_CRC, stoker_crc32c(0, w->index.data, w->index.len));
    stoker__put_u32(f + STK_F_ALIGN, w->align);
    stoker__put_u32(f + STK_F_CRC, stoker_crc32c(0, f, STK_F_CRC));
    if ((rc = emit(w, f, sizeof f)) < 0 || (rc = flush_stage(w)) < 0)
        return rc;
    STOKER_RETURN_IF(w->do_fsync && fsync(w->fd) != 0, &w->err, -errno, "%s/%s: fsync: %s", w->tmp,
                     name, stoker_strerror(-errno));
    const int fd = w->fd;
    w->fd = -1;
    STOKER_RETURN_IF(close(fd) != 0, &w->err, -errno, "%s/%s: close: %s", w->tmp, name,
                     stoker_strerror(-errno));
    w->shards[w->nshards++] = (wshard){count, w->pos, w->crc};
    return 0;
}

static int remove_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(p) == 0 || errno == ENOENT ? 0 : -1;
}

/* Removes our own temporary directory: every byte in it was written by this writer. */
static int rmtree(const char *path)
{
    return nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -errno;
}

/* A shard file's name as writers make them: "shard-", at least five digits, ".stk". */
static bool is_shard_name(const char *name)
{
    if (strncmp(name, "shard-", 6) != 0)
        return false;
    size_t digits = 0;
    while (name[6 + digits] >= '0' && name[6 + digits] <= '9')
        digits++;
    return digits >= 5 && strcmp(name + 6 + digits, ".stk") == 0;
}

static bool is_dataset_file(const char *name)
{
    return strcmp(name, STK_MANIFEST_NAME) == 0 || is_shard_name(name);
}

/* Removes a replaced output: only the files a data set consists of, then the directory,
 * which stays (under its hidden name) if anything else appeared in it since it was checked:
 * the writer deletes nothing it did not write. */
static void remove_dataset(const char *path)
{
    const int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return;
    }
    const struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (is_dataset_file(e->d_name))
            unlinkat(dfd, e->d_name, 0); /* fails on a directory, which is not ours */
    closedir(d);
    rmdir(path);
}

/* The first entry of the directory that is not a data set's file (into foreign, "" if
 * none), whether it has a manifest, and how many entries it has. 0 or -errno. */
static int scan_output(int dfd, char *foreign, size_t cap, bool *has_manifest, size_t *n)
{
    const int fd = dup(dfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        const int rc = -errno;
        if (fd >= 0)
            close(fd);
        return rc;
    }
    foreign[0] = '\0';
    *has_manifest = false;
    *n = 0;
    const struct dirent *e;
    struct stat st;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        ++*n;
        const bool regular =
            fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
        if (regular && strcmp(e->d_name, STK_MANIFEST_NAME) == 0)
            *has_manifest = true;
        else if ((!regular || !is_shard_name(e->d_name)) && !foreign[0])
            snprintf(foreign, cap, "%s", e->d_name);
    }
    closedir(d);
    return 0;
}

/* Does the directory's manifest start as a stoker manifest does? */
static bool manifest_is_stokers(int dfd)
{
    static const char magic[] = STK_MANIFEST_MAGIC " ";
    char head[sizeof magic - 1];
    const int fd = openat(dfd, STK_MANIFEST_NAME, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return false;
    const bool ok =
        stoker__pread_full(fd, head, sizeof head, 0) == 0 && memcmp(head, magic, sizeof head) == 0;
    close(fd);
    return ok;
}

/* What OVERWRITE may replace: nothing at the path, an empty directory, or a stoker data set
 * (a manifest and shard files, nothing else). Anything else may hold someone's files. */
static int check_replaceable(stoker_writer *w)
{
    struct stat st;
    if (lstat(w->path, &st) != 0)
        return errno == ENOENT
                   ? 0
                   : stoker__fail(&w->err, -errno, "%s: %s", w->path, stoker_strerror(-errno));
    STOKER_RETURN_IF(S_ISLNK(st.st_mode), &w->err, STOKER_E_EXISTS,
                     "%s: a symbolic link, not a stoker data set; not replaced", w->path);
    STOKER_RETURN_IF(!S_ISDIR(st.st_mode), &w->err, STOKER_E_EXISTS,
                     "%s: not a stoker data set (not a directory); not replaced", w->path);
    const int dfd = open(w->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    STOKER_RETURN_IF(dfd < 0, &w->err, -errno, "%s: open: %s", w->path, stoker_strerror(-errno));
    char foreign[256];
    bool has_manifest = false;
    size_t entries = 0;
    const int rc = scan_output(dfd, foreign, sizeof foreign, &has_manifest, &entries);
    const bool stokers = has_manifest && manifest_is_stokers(dfd);
    close(dfd);
    STOKER_RETURN_IF(rc < 0, &w->err, rc, "%s: cannot list: %s", w->path, stoker_strerror(rc));
    STOKER_RETURN_IF(!has_manifest && entries > 0, &w->err, STOKER_E_EXISTS,
                     "%s: not a stoker data set (no " STK_MANIFEST_NAME "); not replaced", w->path);
    STOKER_RETURN_IF(has_manifest && !stokers, &w->err, STOKER_E_EXISTS,
                     "%s: not a stoker data set (its " STK_MANIFEST_NAME
                     " is not a stoker manifest); not replaced",
                     w->path);
    STOKER_RETURN_IF(foreign[0], &w->err, STOKER_E_EXISTS,
                     "%s: holds '%s', which is not a file of a stoker data set; not replaced",
                     w->path, foreign);
    return 0;
}

/* Splits `path` into destination, parent and hidden temporary template. */
static int split_path(stoker_writer *w, const char *path, char **tmpl)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    const char *slash = memrchr(path, '/', n);
    const char *base = slash ? slash + 1 : path;
    const size_t blen = n - (size_t)(base - path);
    STOKER_RETURN_IF(blen == 0 || (blen == 1 && base[0] == '.') ||
                         (blen == 2 && base[0] == '.' && base[1] == '.'),
                     &w->err, STOKER_E_INVALID, "%s: not a usable output path", path);
    const size_t plen = slash ? (slash == path ? 1 : (size_t)(slash - path)) : 1;
    w->path = stoker__malloc(n + 1);
    w->parent = stoker__malloc(plen + 1);
    *tmpl = stoker__malloc(plen + blen + 16);
    STOKER_RETURN_IF(!w->path || !w->parent || !*tmpl, &w->err, -ENOMEM, "out of memory");
    memcpy(w->path, path, n);
    w->path[n] = '\0';
    memcpy(w->parent, slash ? path : ".", plen);
    w->parent[plen] = '\0';
    snprintf(*tmpl, plen + blen + 16, "%s/.%.*s.tmp-XXXXXX", w->parent, (int)blen, base);
    return 0;
}

/* mkdtemp, but with mode 0777 less the umask (mkdtemp's 0700 would be published as is). */
static int make_tmpdir(char *tmpl)
{
    static const char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    static atomic_uint_fast64_t counter;
    char *x = tmpl + strlen(tmpl) - 6;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t s = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 16);
    for (int attempt = 0; attempt < 100; attempt++) {
        s += 0x9E3779B97F4A7C15ull * (atomic_fetch_add(&counter, 1) + 1);
        uint64_t z = s;
        for (int i = 0; i < 6; i++, z /= 62)
            x[i] = chars[z % 62];
        if (mkdir(tmpl, 0777) == 0)
            return 0;
        if (errno != EEXIST)
            return -1;
    }
    return -1;
}

static int read_options(stoker_writer *w, const stoker_config *cfg)
{
    w->shard_size = (uint64_t)stoker__cfg_int(cfg, STOKER_OPT_SHARD_SIZE);
    w->align = (uint32_t)stoker__cfg_int(cfg, STOKER_OPT_ALIGN);
    w->overwrite = stoker__cfg_int(cfg, STOKER_OPT_OVERWRITE) != 0;
    w->do_fsync = stoker__cfg_int(cfg, STOKER_OPT_FSYNC) != 0;
    w->jpeg_checked = stoker__cfg_int(cfg, STOKER_OPT_JPEG_CHECKED) != 0;
    w->max_record = (uint64_t)stoker__cfg_int(cfg, STOKER_OPT_MAX_RECORD_SIZE);
    w->max_records = (uint64_t)stoker__cfg_int(cfg, STOKER_OPT_MAX_RECORDS);
    w->max_shards = (uint64_t)stoker__cfg_int(cfg, STOKER_OPT_MAX_SHARDS);
    if (w->align == 0)
        w->align = 4096;
    STOKER_RETURN_IF(w->align != 1 && w->align != 512 && w->align != 4096, &w->err,
                     STOKER_E_INVALID, "alignment %u: must be 1, 512 or 4096", w->align);
    return 0;
}

int stoker_writer_create(stoker_writer **out, const char *path, const stoker_config *cfg)
{
    if (!out)
        return STOKER_E_INVALID;
    stoker_writer *w = *out = stoker__calloc(1, sizeof *w);
    if (!w)
        return -ENOMEM;
    int rc = 0;
    char *tmpl = NULL;
    w->fd = w->tmpfd = -1;
    w->pid = getpid();
    w->kind = STOKER_FIELD_BYTES;
    atomic_init(&w->canceled, 0);
    STOKER_FAIL_IF(!path || !*path, &w->err, STOKER_E_INVALID, "no output path given");
    STOKER_FORWARD(read_options(w, cfg));
    /* w->tmp is set only once the directory exists, since destroy removes it */
    STOKER_FORWARD(split_path(w, path, &tmpl));
    struct stat st;
    STOKER_FAIL_IF(!w->overwrite && lstat(w->path, &st) == 0, &w->err, STOKER_E_EXISTS,
                   "%s: exists (set STOKER_OPT_OVERWRITE to replace it)", w->path);
    if (w->overwrite) /* refused now rather than after all the writing */
        STOKER_FORWARD(check_replaceable(w));
    STOKER_FAIL_IF(make_tmpdir(tmpl) != 0, &w->err, -errno,
                   "%s: cannot create a temporary directory: %s", tmpl, stoker_strerror(-errno));
    w->tmp = tmpl;
    tmpl = NULL;
    w->tmpfd = open(w->tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    STOKER_FAIL_IF(w->tmpfd < 0, &w->err, -errno, "%s: open: %s", w->tmp, stoker_strerror(-errno));
    /* Held while the writer lives (and by a killed writer until it is gone): a temporary
     * directory that can be locked belongs to no live writer, so a tool may remove it. */
    (void)flock(w->tmpfd, LOCK_EX | LOCK_NB);
    w->stage = stoker__aligned_alloc(4096, STK_WRITE_CHUNK);
    STOKER_FAIL_IF(!w->stage, &w->err, -ENOMEM, "%s: out of memory for the staging buffer",
                   w->path);
    return 0;
fail:
    stoker__free(tmpl);
    w->state = W_FAILED;
    return rc;
}

/* Whether w may have its field or fields (`what`) declared: usable, and no record written. */
static int schema_settable(stoker_writer *w, const char *what)
{
    if (!w)
        return STOKER_E_INVALID;
    const int rc = usable(w);
    if (rc < 0)
        return rc;
    STOKER_RETURN_IF(w->records > 0, &w->err, STOKER_E_STATE,
                     "%s: the %s must be set before the first record", w->path, what);
    return 0;
}

int stoker_writer_set_field(stoker_writer *w, stoker_field_kind kind, int32_t dtype, int32_t ndim,
                            const int64_t *shape)
{
    int rc = schema_settable(w, "field");
    if (rc < 0)
        return rc;
    STOKER_RETURN_IF(kind != STOKER_FIELD_BYTES && kind != STOKER_FIELD_JPEG &&
                         kind != STOKER_FIELD_RAW,
                     &w->err, STOKER_E_INVALID, "%s: unknown field kind %d", w->path, (int)kind);
    STOKER_RETURN_IF(w->jpeg_checked && kind != STOKER_FIELD_JPEG, &w->err, STOKER_E_INVALID,
                     "%s: STOKER_OPT_JPEG_CHECKED is for a jpeg field", w->path);
    if (kind == STOKER_FIELD_RAW) {
        uint64_t size = 0;
        STOKER_RETURN_IF((ndim > 0 && !shape) || !stoker__raw_size(dtype, ndim, shape, &size),
                         &w->err, STOKER_E_INVALID, "%s: raw field: bad dtype %d, ndim %d or shape",
                         w->path, (int)dtype, (int)ndim);
        STOKER_RETURN_IF(size > w->max_record, &w->err, STOKER_E_LIMIT,
                         "%s: raw records of %llu bytes exceed STOKER_OPT_MAX_RECORD_SIZE", w->path,
                         (unsigned long long)size);
        w->raw_size = size;
        w->dtype = dtype;
        w->ndim = ndim;
        memset(w->shape, 0, sizeof w->shape);
        if (ndim > 0)
            memcpy(w->shape, shape, (size_t)ndim * sizeof *shape);
    }
    w->kind = kind;
    stoker__free(w->schema); /* the one field replaces a schema set before */
    w->schema = NULL;
    return 0;
}

int stoker_writer_set_fields(stoker_writer *w, const stoker_field_desc *fields, int32_t n)
{
    int rc = schema_settable(w, "fields");
    if (rc < 0)
        return rc;
    stoker__schema *s = stoker__calloc(1, sizeof *s);
    STOKER_RETURN_IF(!s, &w->err, -ENOMEM, "%s: out of memory for the schema", w->path);
    stoker__err e = {0};
    rc = stoker__schema_from_desc(s, fields, n, &e);
    bool jpeg = false;
    for (int32_t i = 0; rc == 0 && i < s->n; i++)
        jpeg = jpeg || s->f[i].kind == STOKER_FIELD_JPEG;
    if (rc == 0 && w->jpeg_checked && !jpeg)
        rc = stoker__fail(&e, STOKER_E_INVALID, "STOKER_OPT_JPEG_CHECKED is for a jpeg field");
    if (rc < 0) {
        stoker__free(s);
        return stoker__fail(&w->err, rc, "%s: %s", w->path, e.msg);
    }
    stoker__free(w->schema);
    w->schema = s;
    w->kind = STOKER_FIELD_BYTES;
    return 0;
}

int stoker_writer_add_class(stoker_writer *w, const char *name)
{
    if (!w)
        return STOKER_E_INVALID;
    int rc = usable(w);
    if (rc < 0)
        return rc;
    STOKER_RETURN_IF(!name, &w->err, STOKER_E_INVALID, "%s: class name is NULL", w->path);
    const size_t mark = w->classes.len;
    if ((rc = stoker__buf_append(&w->classes, "class ", 6)) < 0 ||
        (rc = stoker__manifest_escape(&w->classes, name)) < 0 ||
        (rc = stoker__buf_append(&w->classes, "\n", 1)) < 0) {
        w->classes.len = mark; /* nothing half-added: the writer stays usable */
        return stoker__fail(&w->err, rc, "%s: out of memory for class names", w->path);
    }
    return 0;
}

/* Appends the record's key line; the first key makes up "-" lines for earlier records. */
static int add_key(stoker_writer *w, const char *key)
{
    int rc = 0;
    if (key && !w->any_key) {
        for (int64_t i = 0; i < w->records && rc == 0; i++)
            rc = stoker__buf_append(&w->keys, "-\n", 2);
        w->any_key = true;
    }
    if (rc == 0 && w->any_key && key)
        if ((rc = stoker__buf_append(&w->keys, "+", 1)) == 0 &&
            (rc = stoker__manifest_escape(&w->keys, key)) == 0)
            rc = stoker__buf_append(&w->keys, "\n", 1);
    if (rc == 0 && w->any_key && !key)
        rc = stoker__buf_append(&w->keys, "-\n", 2);
    STOKER_RETURN_IF(rc < 0, &w->err, rc, "%s: out of memory for keys", w->path);
    return 0;
}

/* Closes the current shard when the record would take it past the target size (a record
 * larger than the target gets a shard of its own) or past the per-shard record limit. */
static int maybe_roll(stoker_writer *w, size_t size)
{
    const uint64_t count = w->index.len / STK_ENTRY_SIZE;
    if (w->fd < 0 || count == 0)
        return 0;
    uint64_t end = 0, idx = 0;
    const bool ovf = stoker__add_ovf(stoker__align_up(w->pos, w->align), size, &end) ||
                     stoker__add_ovf(stoker__align_up(end, w->align),
                                     (count + 1) * STK_ENTRY_SIZE + STK_FOOTER_SIZE, &idx);
    if (!ovf && idx <= w->shard_size && count < w->max_records)
        return 0;
    return shard_end(w);
}

static int add_record(stoker_writer *w, const void *payload, size_t size, int64_t label,
                      const char *key)
{
    int rc = maybe_roll(w, size);
    if (rc < 0 || (w->fd < 0 && (rc = shard_begin(w)) < 0) || (rc = pad(w)) < 0)
        return rc;
    uint8_t e[STK_ENTRY_SIZE] = {0};
    stoker__put_u64(e + STK_E_OFFSET, w->pos);
    stoker__put_u64(e + STK_E_LENGTH, size);
    stoker__put_u64(e + STK_E_LABEL, (uint64_t)label);
    stoker__put_u32(e + STK_E_CRC, stoker_crc32c(0, payload, size));
    if ((rc = emit(w, payload, size)) < 0)
        return rc;
    if ((rc = stoker__buf_append(&w->index, e, sizeof e)) < 0)
        return stoker__fail(&w->err, rc, "%s: out of memory for the index", w->path);
    if ((rc = add_key(w, key)) < 0)
        return rc;
    w->shard_payload += size;
    w->bytes += size;
    w->records++;
    return 0;
}

int stoker_writer_add(stoker_writer *w, const void *payload, size_t size, int64_t label,
                      const char *key)
{
    if (!w)
        return STOKER_E_INVALID;
    int rc = usable(w);
    if (rc < 0)
        return rc;
    STOKER_RETURN_IF(!payload && size > 0, &w->err, STOKER_E_INVALID,
                     "%s: record %lld: NULL payload of %zu bytes", w->path, (long long)w->records,
                     size);
    STOKER_RETURN_IF(size > w->max_record, &w->err, STOKER_E_LIMIT,
                     "%s: record %lld: %zu bytes exceed STOKER_OPT_MAX_RECORD_SIZE (%llu)", w->path,
                     (long long)w->records, size, (unsigned long long)w->max_record);
    STOKER_RETURN_IF(w->schema, &w->err, STOKER_E_INVALID,
                     "%s: record %lld: the data set has fields: add samples with "
                     "stoker_writer_add_sample",
                     w->path, (long long)w->records);
    STOKER_RETURN_IF(w->jpeg_checked && w->kind != STOKER_FIELD_JPEG, &w->err, STOKER_E_INVALID,
                     "%s: STOKER_OPT_JPEG_CHECKED is for a jpeg field: set the field to jpeg "
                     "(stoker_writer_set_field) before the first record",
                     w->path);
    STOKER_RETURN_IF(w->kind == STOKER_FIELD_RAW && size != w->raw_size, &w->err, STOKER_E_INVALID,
                     "%s: record %lld: %zu bytes, but the raw field's records are %llu bytes",
                     w->path, (long long)w->records, size, (unsigned long long)w->raw_size);
    rc = add_record(w, payload, size, label, key);
    return rc < 0 ? doom(w, rc) : 0;
}

/* A sample's name in messages: its key, or its number. */
static void sample_name(const stoker_writer *w, const char *key, char *buf, size_t cap)
{
    if (key)
        snprintf(buf, cap, "sample \"%.200s\"", key);
    else
        snprintf(buf, cap, "sample %lld", (long long)w->records);
}

int stoker_writer_add_sample(stoker_writer *w, const stoker_field_value *values, int32_t n,
                             const char *key)
{
    if (!w)
        return STOKER_E_INVALID;
    int rc = usable(w);
    if (rc < 0)
        return rc;
    char what[256];
    sample_name(w, key, what, sizeof what);
    const stoker__schema *s = w->schema;
    STOKER_RETURN_IF(!s, &w->err, STOKER_E_INVALID,
                     "%s: %s: no fields were declared (stoker_writer_set_fields)", w->path, what);
    STOKER_RETURN_IF(!values || n != s->n, &w->err, STOKER_E_INVALID,
                     "%s: %s: %d values for %d fields", w->path, what, values ? (int)n : 0,
                     (int)s->n);
    stoker__err e = {0};
    if ((rc = stoker__schema_check(s, values, &e)) < 0)
        return stoker__fail(&w->err, rc, "%s: %s: %s", w->path, what, e.msg);
    const uint64_t size = stoker__schema_payload_size(s, values);
    STOKER_RETURN_IF(size > w->max_record, &w->err, STOKER_E_LIMIT,
                     "%s: %s: a payload of %llu bytes exceeds STOKER_OPT_MAX_RECORD_SIZE (%llu)",
                     w->path, what, (unsigned long long)size, (unsigned long long)w->max_record);
    w->sample.len = 0;
    if (w->sample.cap < size) {
        char *p = stoker__realloc(w->sample.data, (size_t)size);
        STOKER_RETURN_IF(!p, &w->err, -ENOMEM, "%s: %s: out of memory for %llu bytes", w->path,
                         what, (unsigned long long)size);
        w->sample.data = p;
        w->sample.cap = (size_t)size;
    }
    stoker__schema_encode(s, values, (uint8_t *)w->sample.data);
    int64_t label = 0;
    if (s->label >= 0)
        memcpy(&label, values[s->label].data, sizeof label);
    rc = add_record(w, w->sample.data, (size_t)size, label, key);
    if (rc < 0)
        return doom(w, rc);
    for (int32_t i = 0; i < s->n; i++) { /* the data set's max of each variable field */
        stoker__field *f = &w->schema->f[i];
        const uint64_t m =
            f->kind == STOKER_FIELD_ARRAY ? values[i].size / f->size : values[i].size;
        if (f->variable && m > f->max)
            f->max = m;
    }
    return 0;
}

static int field_line(const stoker_writer *w, stoker__buf *b)
{
    static const char *const kinds[] = {"", "bytes", "jpeg", "raw"};
    int rc = stoker__buf_printf(b, "field %s", kinds[w->kind]);
    if (rc == 0 && w->kind == STOKER_FIELD_RAW) {
        rc = stoker__buf_printf(b, " %s %d", stoker_dtype_name(w->dtype), (int)w->ndim);
        for (int32_t i = 0; i < w->ndim && rc == 0; i++)
            rc = stoker__buf_printf(b, " %lld", (long long)w->shape[i]);
    }
    return rc == 0 ? stoker__buf_append(b, "\n", 1) : rc;
}

/* Everything of the manifest before the key lines, up to the class lines. */
static int manifest_head(const stoker_writer *w, stoker__buf *b)
{
    uint64_t nclasses = 0;
    for (size_t i = 0; i < w->classes.len; i++)
        nclasses += w->classes.data[i] == '\n';
    /* version 1 unless the JPEGs were checked or there are fields: readers of version 1
     * still read the rest */
    const int version = w->schema ? 3 : w->jpeg_checked ? 2 : 1;
    int rc = stoker__buf_printf(b, STK_MANIFEST_MAGIC " %d\nalign %u\n", version, w->align);
    if (rc == 0)
        rc = w->schema ? stoker__schema_format(w->schema, b) : field_line(w, b);
    if (rc == 0 && w->jpeg_checked)
        rc = stoker__buf_printf(b, "checked jpeg\n");
    if (rc == 0)
        rc = stoker__buf_printf(b, "records %lld\nclasses %llu\n", (long long)w->records,
                                (unsigned long long)nclasses);
    return rc;
}

static int write_manifest(stoker_writer *w)
{
    stoker__buf b = {0};
    int rc = 0;
    int fd = -1;
    STOKER_FORWARD(manifest_head(w, &b));
    STOKER_FORWARD(stoker__buf_append(&b, w->classes.data, w->classes.len));
    STOKER_FORWARD(stoker__buf_printf(&b, "shards %u\n", w->nshards));
    for (uint32_t i = 0; i < w->nshards; i++)
        STOKER_FORWARD(stoker__buf_printf(&b, "shard shard-%05u.stk %llu %llu %08x\n", i,
                                          (unsigned long long)w->shards[i].records,
                                          (unsigned long long)w->shards[i].bytes,
                                          w->shards[i].crc));
    STOKER_FORWARD(stoker__buf_printf(&b, "keys %lld\n", w->any_key ? (long long)w->records : 0));
    fd = openat(w->tmpfd, STK_MANIFEST_NAME, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    STOKER_FAIL_IF(fd < 0, &w->err, -errno, "%s/%s: create: %s", w->tmp, STK_MANIFEST_NAME,
                   stoker_strerror(-errno));
    uint32_t crc = stoker_crc32c(0, b.data, b.len);
    crc = stoker_crc32c(crc, w->keys.data, w->keys.len);
    char tail[32];
    snprintf(tail, sizeof tail, "crc32c %08x\n", crc);
    STOKER_FORWARD(write_all(w, fd, b.data, b.len, STK_MANIFEST_NAME));
    STOKER_FORWARD(write_all(w, fd, w->keys.data, w->keys.len, STK_MANIFEST_NAME));
    STOKER_FORWARD(write_all(w, fd, tail, strlen(tail), STK_MANIFEST_NAME));
    STOKER_FAIL_IF(w->do_fsync && fsync(fd) != 0, &w->err, -errno, "%s/%s: fsync: %s", w->tmp,
                   STK_MANIFEST_NAME, stoker_strerror(-errno));
fail:
    if (rc == -ENOMEM)
        stoker__fail(&w->err, rc, "%s: out of memory for the manifest", w->path);
    if (fd >= 0 && close(fd) != 0 && rc == 0)
        rc = stoker__fail(&w->err, -errno, "%s/%s: close: %s", w->tmp, STK_MANIFEST_NAME,
                          stoker_strerror(-errno));
    stoker__buf_free(&b);
    return rc;
}

static int sync_dir(stoker_writer *w, const char *dir)
{
    if (!w->do_fsync)
        return 0;
    const int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    STOKER_RETURN_IF(fd < 0, &w->err, -errno, "%s: open: %s", dir, stoker_strerror(-errno));
    const int rc = fsync(fd) == 0 ? 0 : -errno;
    close(fd);
    STOKER_RETURN_IF(rc < 0, &w->err, rc, "%s: fsync: %s", dir, stoker_strerror(rc));
    return 0;
}

/* Replaces an existing output: an atomic exchange where the file system has it, else two
 * renames (the old output moves aside under the temporary name, then ours moves in). */
static int replace_existing(stoker_writer *w)
{
    if (renameat2(AT_FDCWD, w->tmp, AT_FDCWD, w->path, RENAME_EXCHANGE) == 0)
        return 0;
    STOKER_RETURN_IF(errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP, &w->err, -errno,
                     "%s: cannot replace with %s: %s", w->path, w->tmp, stoker_strerror(-errno));
    const size_t n = strlen(w->tmp) + 8;
    char *old = stoker__malloc(n);
    STOKER_RETURN_IF(!old, &w->err, -ENOMEM, "%s: out of memory", w->path);
    snprintf(old, n, "%s.old", w->tmp);
    int rc = 0;
    if (rename(w->path, old) != 0) {
        rc = stoker__fail(&w->err, -errno, "%s: cannot move aside: %s", w->path,
                          stoker_strerror(-errno));
    } else if (rename(w->tmp, w->path) != 0) {
        rc = stoker__fail(&w->err, -errno, "%s: cannot rename %s into place: %s", w->path, w->tmp,
                          stoker_strerror(-errno));
        if (rename(old, w->path) != 0) /* the previous output goes back where it was */
            rc = stoker__fail(&w->err, rc,
                              "%s: cannot rename into place, and the previous "
                              "output stays at %s",
                              w->path, old);
    } else if (rename(old, w->tmp) != 0) {
        remove_dataset(old); /* it could not move where publish's cleanup finds it */
    }
    stoker__free(old);
    return rc;
}

static int publish(stoker_writer *w)
{
    struct stat st;
    const bool exists = lstat(w->path, &st) == 0;
    STOKER_RETURN_IF(exists && !w->overwrite, &w->err, STOKER_E_EXISTS,
                     "%s: exists (set STOKER_OPT_OVERWRITE to replace it)", w->path);
    int rc = 0;
    if (exists) {
        /* checked again: the output may have changed since create */
        if ((rc = check_replaceable(w)) < 0 || (rc = replace_existing(w)) < 0)
            return rc;
        remove_dataset(w->tmp); /* the old output; the new one is in place whatever happens */
    } else if (renameat2(AT_FDCWD, w->tmp, AT_FDCWD, w->path, RENAME_NOREPLACE) != 0) {
        rc = -errno;
        if (rc == -EINVAL || rc == -ENOSYS)
            rc = rename(w->tmp, w->path) == 0 ? 0 : -errno;
        STOKER_RETURN_IF(rc == -EEXIST || rc == -ENOTEMPTY, &w->err, STOKER_E_EXISTS,
                         "%s: appeared while writing (not overwritten)", w->path);
        STOKER_RETURN_IF(rc < 0, &w->err, rc, "%s: cannot rename %s into place: %s", w->path,
                         w->tmp, stoker_strerror(rc));
    }
    stoker__free(w->tmp);
    w->tmp = NULL;
    return sync_dir(w, w->parent);
}

int stoker_writer_finish(stoker_writer *w)
{
    if (!w)
        return STOKER_E_INVALID;
    int rc = usable(w);
    if (rc < 0)
        return rc;
    STOKER_RETURN_IF(w->records == 0, &w->err, STOKER_E_EMPTY,
                     "%s: no record was added; nothing was published", w->path);
    if ((rc = shard_end(w)) < 0 || (rc = write_manifest(w)) < 0 || (rc = sync_dir(w, w->tmp)) < 0)
        return doom(w, rc);
    if (atomic_load(&w->canceled))
        return doom(w,
                    stoker__fail(&w->err, STOKER_E_CANCELED, "%s: writing was canceled", w->path));
    if ((rc = publish(w)) < 0)
        return doom(w, rc);
    w->state = W_FINISHED;
    return 0;
}

void stoker_writer_cancel(stoker_writer *w)
{
    if (w)
        atomic_store(&w->canceled, 1);
}

void stoker_writer_destroy(stoker_writer *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        close(w->fd);
    if (w->tmpfd >= 0)
        close(w->tmpfd);
    if (w->tmp && w->state != W_FINISHED && w->pid == getpid())
        rmtree(w->tmp); /* a forked child's copy of the writer does not own the output */
    stoker__free(w->path);
    stoker__free(w->parent);
    stoker__free(w->tmp);
    stoker__free(w->stage);
    stoker__buf_free(&w->classes);
    stoker__buf_free(&w->keys);
    stoker__buf_free(&w->sample);
    stoker__free(w->schema);
    stoker__buf_free(&w->index);
    stoker__free(w->shards);
    stoker__free(w);
}

const char *stoker_writer_errmsg(const stoker_writer *w)
{
    return w ? w->err.msg : "no writer";
}

int64_t stoker_writer_records(const stoker_writer *w)
{
    return w ? w->records : 0;
}

int64_t stoker_writer_bytes(const stoker_writer *w)
{
    return w ? (int64_t)w->bytes : 0;
}
