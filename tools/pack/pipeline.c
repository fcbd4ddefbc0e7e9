/* SPDX-License-Identifier: Apache-2.0 */
/* The packing pipeline. Worker threads read whole files and check or convert them into a
 * ring of slots; the main thread adds the slots to the writer strictly in storage order
 * (a bounded reorder window), so the output is byte-identical whatever --jobs is.
 *
 * Lock order: one mutex guards the ring's bookkeeping (next, consumed, stop, slot states).
 * A slot's buffers belong to the worker that marked it BUSY until it marks it READY, then
 * to the main thread until FREE; the mutex hands them over (release/acquire). */
#include "image.h"
#include "pack.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_FILE_BYTES (1ull << 30) /* the writer's default record limit */

typedef enum slot_state { SLOT_FREE, SLOT_BUSY, SLOT_READY } slot_state;

typedef struct slot {
    slot_state state;
    uint8_t *buf; /* the file's bytes; reused, grown as needed */
    size_t cap;
    void *converted; /* pack_image_transcode's output (malloc'd), or NULL */
    const uint8_t *payload;
    size_t size;
    bool skip;
    char reason[640];
} slot;

typedef struct pipeline {
    const pack_opts *o;
    const pack_source *src;
    const size_t *order;
    slot *slots;
    size_t window;
    pthread_mutex_t mu;
    pthread_cond_t ready; /* a slot became READY */
    pthread_cond_t space; /* consumed advanced, or stop */
    size_t next, consumed;
    bool stop;
} pipeline;

/* Makes room for `size` bytes in the slot's buffer. */
static bool grow(slot *s, size_t size)
{
    if (size <= s->cap)
        return true;
    uint8_t *b = realloc(s->buf, size);
    if (!b)
        return false;
    s->buf = b;
    s->cap = size;
    return true;
}

/* What a file that is not a regular file is, for the message that leaves it out. */
static const char *file_kind(mode_t mode)
{
    return S_ISDIR(mode)    ? "a directory"
           : S_ISFIFO(mode) ? "a FIFO"
           : S_ISSOCK(mode) ? "a socket"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
                            : "of another kind";
}

/* Reads a regular file whole. Anything else is left out unopened: opening a FIFO blocks
 * until a writer comes, and a device's open may act on it. O_NONBLOCK keeps a file that
 * became a FIFO since the stat from blocking the open; it means nothing to a regular file. */
static bool read_whole(const char *path, slot *s)
{
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        snprintf(s->reason, sizeof s->reason, "not a regular file (%s)", file_kind(st.st_mode));
        return false;
    }
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(s->reason, sizeof s->reason, "cannot read: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return false;
    }
    const char *why = !S_ISREG(st.st_mode)                    ? "not a regular file"
                      : st.st_size == 0                       ? "empty file (0 bytes)"
                      : (uint64_t)st.st_size > MAX_FILE_BYTES ? "larger than 1 GiB"
                                                              : NULL;
    if (!why && !grow(s, (size_t)st.st_size))
        why = "out of memory";
    size_t got = 0;
    while (!why && got < (size_t)st.st_size) {
        const ssize_t r = read(fd, s->buf + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            snprintf(s->reason, sizeof s->reason, "cannot read: %s",
                     r < 0 ? strerror(errno) : "file shrank while being read");
            close(fd);
            return false;
        }
        got += (size_t)r;
    }
    close(fd);
    if (why) {
        snprintf(s->reason, sizeof s->reason, "%s", why);
        return false;
    }
    s->payload = s->buf;
    s->size = got;
    return true;
}

/* Reads a record of an HDF5 source as read_whole reads a file: the same limits, and an
 * empty record is left out as an empty file is (no image is 0 bytes). */
static bool read_record(stoker_dataset *ds, int64_t id, slot *s)
{
    uint64_t size = 0;
    const char *why = NULL;
    if (stoker_dataset_record_info(ds, id, &size, NULL, NULL) < 0)
        why = "no such record";
    else if (size == 0)
        why = "empty record (0 bytes)";
    else if (size > MAX_FILE_BYTES)
        why = "larger than 1 GiB";
    else if (!grow(s, (size_t)size))
        why = "out of memory";
    size_t got = 0;
    if (!why && stoker_dataset_read(ds, id, s->buf, s->cap, &got) < 0) {
        snprintf(s->reason, sizeof s->reason, "cannot read: %s", stoker_dataset_errmsg(ds));
        return false;
    }
    if (why) {
        snprintf(s->reason, sizeof s->reason, "%s", why);
        return false;
    }
    s->payload = s->buf;
    s->size = got;
    return true;
}

/* Checks (and with --rgb / --max-side converts) one file or record; sets skip + reason when
 * it cannot be stored. By default every JPEG is entropy-decoded, so that what is stored was
 * decoded without an error or a warning, or encoded here: the data set is then marked checked
 * (main.c, records_checked), and nothing else may be stored. With --no-validate the check is
 * the header only (SOI and a parsable header), so garbage is never packed silently. */
static void process(const pack_opts *o, stoker_dataset *ds, const pack_item *it, slot *s)
{
    free(s->converted);
    s->converted = NULL;
    s->payload = NULL;
    s->size = 0;
    s->skip = it->record >= 0 ? !read_record(ds, it->record, s) : !read_whole(it->path, s);
    if (s->skip)
        return;
    char msg[512];
    int32_t kind = 0;
    const uint32_t flags = o->validate ? PACK_IMAGE_DECODE : 0;
    int rc =
        pack_image_inspect(s->payload, s->size, flags, 0, &kind, NULL, NULL, NULL, msg, sizeof msg);
    const bool png = rc == STOKER_E_FORMAT && kind == PACK_IMAGE_PNG;
    if (rc == 0 || (png && o->rgb)) {
        if (o->rgb || o->max_side > 0) {
            size_t n = 0;
            rc = pack_image_transcode(s->payload, s->size, o->rgb ? PACK_IMAGE_TO_RGB : 0,
                                      o->max_side, o->quality, 0, &s->converted, &n, msg,
                                      sizeof msg);
            if (rc == 0 && s->converted) {
                s->payload = s->converted;
                s->size = n;
            }
        }
        if (rc == 0)
            return;
    }
    s->skip = true;
    if (png)
        snprintf(s->reason, sizeof s->reason, "PNG, not JPEG (use --rgb)");
    else if (rc == STOKER_E_FORMAT)
        snprintf(s->reason, sizeof s->reason, "not JPEG: %s", msg);
    else
        snprintf(s->reason, sizeof s->reason, "%s", msg);
}

static void *worker(void *arg)
{
    pipeline *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->stop && !pack_interrupted && p->next < p->src->n) {
        if (p->next >= p->consumed + p->window) {
            pthread_cond_wait(&p->space, &p->mu);
            continue;
        }
        const size_t k = p->next++;
        slot *s = &p->slots[k % p->window];
        s->state = SLOT_BUSY;
        pthread_mutex_unlock(&p->mu);
        process(p->o, p->src->ds, &p->src->items[p->order[k]], s);
        pthread_mutex_lock(&p->mu);
        s->state = SLOT_READY;
        pthread_cond_broadcast(&p->ready);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Waits for slot k; false when interrupted. Wakes every 100 ms to notice a signal, which
 * cannot signal a condition variable itself. */
static bool wait_ready(pipeline *p, slot *s)
{
    pthread_mutex_lock(&p->mu);
    while (s->state != SLOT_READY && !pack_interrupted) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 100 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&p->ready, &p->mu, &ts);
    }
    pthread_mutex_unlock(&p->mu);
    return !pack_interrupted;
}

static void release(pipeline *p, slot *s, size_t k)
{
    pthread_mutex_lock(&p->mu);
    s->state = SLOT_FREE;
    p->consumed = k + 1;
    pthread_cond_broadcast(&p->space);
    pthread_mutex_unlock(&p->mu);
}

/* Adds or skips the item of slot s; returns 0 or an exit code. */
static int consume(const pack_opts *o, const pack_item *it, const slot *s, stoker_writer *w,
                   pack_result *res)
{
    if (s->skip) {
        pack_skips_add(&res->skips, it->path, s->reason);
        if (o->strict) {
            cli_err("%s: %s (--strict: no output written)", it->path, s->reason);
            return PACK_FAIL;
        }
        return 0;
    }
    const int rc = stoker_writer_add(w, s->payload, s->size, it->label, it->key);
    if (rc == STOKER_E_CANCELED || pack_interrupted)
        return PACK_INTERRUPTED;
    if (rc < 0) {
        cli_err("%s: %s", it->path, stoker_writer_errmsg(w));
        return PACK_FAIL;
    }
    res->records++;
    res->bytes += (int64_t)s->size;
    return 0;
}

static int init_sync(pipeline *p)
{
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) ||
        pthread_cond_init(&p->ready, &ca) || pthread_cond_init(&p->space, &ca) ||
        pthread_mutex_init(&p->mu, NULL))
        return -1;
    pthread_condattr_destroy(&ca);
    return 0;
}

/* Starts the workers with SIGINT/SIGTERM blocked, so only the main thread takes them. */
static int start_workers(pipeline *p, pthread_t *threads, int n)
{
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int started = 0;
    for (; started < n; started++)
        if (pthread_create(&threads[started], NULL, worker, p) != 0)
            break;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return started;
}

/* Joins the workers; when interrupted, only those that end within INTERRUPT_JOIN_MS (a
 * worker finishes the file it holds first, and one may take long: a huge image, a slow
 * file system), so that an interrupt ends the run within a second. False when some were
 * left running: their pipeline must then stay allocated until the process exits. */
#define INTERRUPT_JOIN_MS 500
static bool join_workers(pthread_t *threads, int n, bool interrupted)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += INTERRUPT_JOIN_MS * 1000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    bool all = true;
    for (int i = 0; i < n; i++) {
        if (!interrupted)
            pthread_join(threads[i], NULL);
        else if (pthread_timedjoin_np(threads[i], NULL, &until) != 0)
            all = false;
    }
    return all;
}

int pack_images(const pack_opts *o, const pack_source *src, const size_t *order, stoker_writer *w,
                pack_result *res)
{
    /* on the heap: workers still in a file when an interrupt ends the run keep it */
    pipeline *p = calloc(1, sizeof *p);
    if (!p) {
        cli_err("out of memory");
        exit(PACK_FAIL);
    }
    *p = (pipeline){.o = o, .src = src, .order = order};
    p->window = (size_t)o->jobs * 4 + 8;
    p->slots = calloc(p->window, sizeof *p->slots);
    pthread_t *threads = calloc((size_t)o->jobs, sizeof *threads);
    if (!p->slots || !threads || init_sync(p) < 0) {
        cli_err("out of memory");
        exit(PACK_FAIL);
    }
    const int nthreads = start_workers(p, threads, o->jobs);
    int rc = nthreads > 0 ? 0 : PACK_FAIL;
    if (nthreads == 0)
        cli_err("cannot start worker threads");
    pack_progress prog;
    pack_progress_init(&prog, (int64_t)src->n, o->quiet, src->ds ? "records" : "files");
    for (size_t k = 0; rc == 0 && k < src->n; k++) {
        slot *s = &p->slots[k % p->window];
        if (!wait_ready(p, s)) {
            rc = PACK_INTERRUPTED;
            break;
        }
        rc = consume(o, &src->items[order[k]], s, w, res);
        release(p, s, k);
        pack_progress_update(&prog, (int64_t)k + 1, res->records, res->bytes);
    }
    pack_progress_end(&prog);
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->space);
    pthread_mutex_unlock(&p->mu);
    if (!join_workers(threads, nthreads, rc == PACK_INTERRUPTED))
        return rc; /* the pipeline stays, for the workers still in a file */
    for (size_t i = 0; i < p->window; i++) {
        free(p->slots[i].buf);
        free(p->slots[i].converted);
    }
    free(p->slots);
    free(threads);
    pthread_cond_destroy(&p->ready);
    pthread_cond_destroy(&p->space);
    pthread_mutex_destroy(&p->mu);
    free(p);
    return rc;
}

/* Label `i` of a (N,) integer array as int64; false when it does not fit. */
static bool row_label(const pack_npy *a, uint64_t i, int64_t *out)
{
    const uint8_t *p = a->data + i * a->itemsize;
    uint64_t v = 0;
    for (size_t b = 0; b < a->itemsize; b++)
        v |= (uint64_t)p[b] << (8 * b);
    if (a->kind == 'i' && a->itemsize < 8 && (v >> (8 * a->itemsize - 1)) & 1)
        v |= ~0ull << (8 * a->itemsize); /* sign-extend */
    if (a->kind == 'u' && v > INT64_MAX)
        return false;
    *out = (int64_t)v;
    return true;
}

int pack_rows(const pack_opts *o, const pack_npy *data, const pack_npy *labels, const size_t *order,
              stoker_writer *w, pack_result *res)
{
    pack_progress prog;
    pack_progress_init(&prog, (int64_t)data->rows, o->quiet, "rows");
    int rc = 0;
    for (uint64_t k = 0; rc == 0 && k < data->rows; k++) {
        const uint64_t id = order[k];
        int64_t label = -1;
        if (labels && !row_label(labels, id, &label)) {
            cli_err("%s: label of row %llu does not fit int64", labels->path,
                    (unsigned long long)id);
            rc = PACK_FAIL;
            break;
        }
        const int r =
            stoker_writer_add(w, data->data + id * data->row_bytes, data->row_bytes, label, NULL);
        if (r == STOKER_E_CANCELED || pack_interrupted) {
            rc = PACK_INTERRUPTED;
        } else if (r < 0) {
            cli_err("%s: row %llu: %s", data->path, (unsigned long long)id,
                    stoker_writer_errmsg(w));
            rc = PACK_FAIL;
        } else {
            res->records++;
            res->bytes += (int64_t)data->row_bytes;
        }
        pack_progress_update(&prog, (int64_t)k + 1, res->records, res->bytes);
    }
    pack_progress_end(&prog);
    return rc;
}
