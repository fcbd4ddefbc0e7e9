/* SPDX-License-Identifier: Apache-2.0 */
/* Errors, allocation, logging and small helpers shared by every layer. */
#include "common/common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int stoker__fail(stoker__err *err, int code, const char *fmt, ...)
{
    if (err) {
        char raw[sizeof err->msg];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(raw, sizeof raw, fmt, ap);
        va_end(ap);
        stoker_redact(raw, err->msg, sizeof err->msg); /* no credential in a message */
        err->code = code;
    }
    return code;
}

void stoker__err_clear(stoker__err *err)
{
    err->code = 0;
    err->msg[0] = '\0';
}

const char *stoker_strerror(int code)
{
    switch (code) {
    case STOKER_OK: return "success";
    case STOKER_END: return "end of epoch";
    case STOKER_AGAIN: return "not ready yet";
    case STOKER_E_INVALID: return "invalid argument or option";
    case STOKER_E_FORMAT: return "not in the expected format";
    case STOKER_E_CORRUPT: return "corrupt data";
    case STOKER_E_LIMIT: return "a safety limit was exceeded";
    case STOKER_E_CUDA: return "CUDA error";
    case STOKER_E_UNSUPPORTED: return "not supported by this build or host";
    case STOKER_E_STATE: return "call not valid in the current state";
    case STOKER_E_EXISTS: return "output exists (overwrite not allowed)";
    case STOKER_E_CANCELED: return "canceled";
    case STOKER_E_EMPTY: return "no records";
    default: break;
    }
    if (code < 0 && code > -4096) {
        /* strerror() is not thread-safe in general, but glibc's returns static strings
         * for known codes; the fallback covers the rest. */
        switch (-code) {
        case ENOENT: return "no such file or directory";
        case EACCES: return "permission denied";
        case ENOMEM: return "out of memory";
        case EIO: return "input/output error";
        case EINVAL: return "invalid argument (system)";
        case ENOSPC: return "no space left on device";
        case EEXIST: return "file exists";
        case ENOTDIR: return "not a directory";
        case EISDIR: return "is a directory";
        case EMFILE: return "too many open files";
        case EAGAIN: return "resource temporarily unavailable";
        case EINTR: return "interrupted system call";
        case ENOSYS: return "function not implemented";
        case EPERM: return "operation not permitted";
        case EFBIG: return "file too large";
        case EROFS: return "read-only file system";
        default: return "system error";
        }
    }
    return "unknown error";
}

uint32_t stoker_version(void)
{
    return STOKER_VERSION_NUMBER;
}

const char *stoker_version_string(void)
{
    return STOKER_VERSION_STRING;
}

/* ---- fault injection: allocations, CUDA resources, thread starts ---- */

/* Counts calls of one kind and fails the one numbered `at` (0: none). */
typedef struct fault {
    atomic_uint_fast64_t count, at;
} fault;

static fault alloc_fault, cuda_fault, thread_fault;

/* Arms f for its nth next call (0 disarms); returns the calls counted since last armed. */
static uint64_t fault_arm(fault *f, uint64_t nth)
{
    const uint64_t made = atomic_exchange(&f->count, 0);
    atomic_store(&f->at, nth);
    return made;
}

/* Counts one call; true when it is the one to fail. */
static bool fault_hit(fault *f)
{
    const uint64_t n = atomic_fetch_add(&f->count, 1) + 1;
    const uint64_t at = atomic_load_explicit(&f->at, memory_order_relaxed);
    return at != 0 && n == at;
}

uint64_t stoker__alloc_fail_at(uint64_t nth)
{
    return fault_arm(&alloc_fault, nth);
}

void *stoker__malloc(size_t size)
{
    if (fault_hit(&alloc_fault))
        return NULL;
    return malloc(size ? size : 1);
}

void *stoker__calloc(size_t n, size_t size)
{
    if (fault_hit(&alloc_fault))
        return NULL;
    return calloc(n ? n : 1, size ? size : 1);
}

void *stoker__realloc(void *p, size_t size)
{
    if (fault_hit(&alloc_fault))
        return NULL;
    return realloc(p, size ? size : 1);
}

int stoker__scratch_grow(uint8_t **p, size_t *cap, uint64_t n)
{
    if (*cap >= n && *p)
        return 0;
    stoker__free(*p);
    *cap = 0;
    *p = n <= SIZE_MAX ? stoker__malloc(n ? (size_t)n : 1) : NULL;
    if (!*p)
        return -ENOMEM;
    *cap = (size_t)n;
    return 0;
}

static pthread_mutex_t thread_key_lock = PTHREAD_MUTEX_INITIALIZER;

void *stoker__thread_object(stoker__thread_key *k)
{
    int state = atomic_load_explicit(&k->state, memory_order_acquire);
    if (state == 0) {
        pthread_mutex_lock(&thread_key_lock);
        state = atomic_load_explicit(&k->state, memory_order_relaxed);
        if (state == 0) {
            state = pthread_key_create(&k->key, k->destroy) == 0 ? 1 : -1;
            atomic_store_explicit(&k->state, state, memory_order_release);
        }
        pthread_mutex_unlock(&thread_key_lock);
    }
    if (state < 0)
        return NULL;
    void *obj = pthread_getspecific(k->key);
    if (!obj && (obj = stoker__calloc(1, k->size)) != NULL &&
        pthread_setspecific(k->key, obj) != 0) {
        stoker__free(obj);
        obj = NULL;
    }
    return obj;
}

void *stoker__aligned_alloc(size_t align, size_t size)
{
    if (fault_hit(&alloc_fault))
        return NULL;
    void *p = NULL;
    if (posix_memalign(&p, align, size ? size : 1) != 0)
        return NULL;
    return p;
}

char *stoker__strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = stoker__malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

void stoker__free(void *p)
{
    free(p);
}

void stoker_free(void *p)
{
    free(p);
}

/* ---- logging ---- */

void stoker__logf(const stoker__log *log, int32_t level, const char *fmt, ...)
{
    if (!log || !log->fn || level > log->max_level)
        return;
    char raw[1024], buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    log->fn(log->user, level, stoker_redact(raw, buf, sizeof buf));
}

void stoker__timed_wait(pthread_cond_t *cond, pthread_mutex_t *mu)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += STOKER__WAIT_NS;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(cond, mu, &ts);
}

static _Atomic uint64_t fds_epoch;

void stoker__fds_closed(void)
{
    atomic_fetch_add_explicit(&fds_epoch, 1, memory_order_release);
}

uint64_t stoker__fds_epoch(void)
{
    return atomic_load_explicit(&fds_epoch, memory_order_acquire);
}

uint64_t stoker__now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

double stoker__now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

uint64_t stoker__cuda_fail_at(uint64_t nth)
{
    return fault_arm(&cuda_fault, nth);
}

bool stoker__cuda_injected(void)
{
    return fault_hit(&cuda_fault);
}

uint64_t stoker__thread_fail_at(uint64_t nth)
{
    return fault_arm(&thread_fault, nth);
}

int stoker__thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
    if (fault_hit(&thread_fault))
        return EAGAIN;
    return pthread_create(t, NULL, fn, arg);
}

void stoker__thread_name(const char *name)
{
    char buf[16];
    snprintf(buf, sizeof buf, "%s", name);
    pthread_setname_np(pthread_self(), buf);
}

/* ---- dtypes ---- */

size_t stoker_dtype_size(int32_t dtype)
{
    static const uint8_t sizes[] = {0, 1, 1, 2, 2, 4, 4, 8, 8, 2, 2, 4, 8, 1};
    return dtype >= 0 && dtype < (int32_t)sizeof sizes ? sizes[dtype] : 0;
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
