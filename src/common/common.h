/* SPDX-License-Identifier: Apache-2.0 */
/* Internal utilities every layer may use: errors, messages, checked arithmetic,
 * allocation with fault injection, logging. Depends on nothing but libc. */
#ifndef STOKER_COMMON_H
#define STOKER_COMMON_H

#include "stoker.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STOKER_ERRMSG_CAP 512

/* A detailed error message kept in a handle. */
typedef struct stoker__err {
    int code;
    char msg[STOKER_ERRMSG_CAP];
} stoker__err;

/* Formats `fmt` into err (when err is not NULL) and returns `code`, so that callers can write
 * `return stoker__fail(&h->err, STOKER_E_FORMAT, "%s: bad magic", path);`. */
int stoker__fail(stoker__err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void stoker__err_clear(stoker__err *err);

/* The two error macros of the code base (zstd's RETURN_ERROR_IF / FORWARD_IF_ERROR):
 * RETURN_IF sets the message and returns the code; FAIL_IF sets `rc` and jumps to the
 * function's single `fail:` cleanup label. Both expect a `stoker__err *` expression. */
#define STOKER_RETURN_IF(cond, errp, code, ...)                                                    \
    do {                                                                                           \
        if (cond)                                                                                  \
            return stoker__fail((errp), (code), __VA_ARGS__);                                      \
    } while (0)
#define STOKER_FAIL_IF(cond, errp, code, ...)                                                      \
    do {                                                                                           \
        if (cond) {                                                                                \
            rc = stoker__fail((errp), (code), __VA_ARGS__);                                        \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)
/* Forwards a failed status (message already set by the callee) to `fail:`. */
#define STOKER_FORWARD(expr)                                                                       \
    do {                                                                                           \
        rc = (expr);                                                                               \
        if (rc < 0)                                                                                \
            goto fail;                                                                             \
    } while (0)

/* ---- checked size arithmetic: return false on overflow ---- */
static inline bool stoker__add_ovf(uint64_t a, uint64_t b, uint64_t *out)
{
    return __builtin_add_overflow(a, b, out);
}
static inline bool stoker__mul_ovf(uint64_t a, uint64_t b, uint64_t *out)
{
    return __builtin_mul_overflow(a, b, out);
}
static inline uint64_t stoker__align_up(uint64_t v, uint64_t align)
{
    return (v + align - 1) / align * align;
}

/* ---- allocation. Every allocation of the library goes through these, so that tests can
 * fail the Nth one (stoker__alloc_fail_at). They return NULL on overflow or failure. ---- */
void *stoker__malloc(size_t size);
void *stoker__calloc(size_t n, size_t size);
void *stoker__realloc(void *p, size_t size);
/* Makes the scratch buffer *p (capacity *cap) hold at least n bytes; its contents are not
 * kept. 0 or -ENOMEM (then *p is NULL and *cap 0, or unchanged when it was large enough). */
int stoker__scratch_grow(uint8_t **p, size_t *cap, uint64_t n);

/* A per-thread object of one type: each thread that asks gets its own, zeroed at its first
 * use, and `destroy` (which frees the object and what it holds) runs at the thread's exit.
 * Declare one with static storage: `static stoker__thread_key k = STOKER__THREAD_KEY(T, fn);`
 * Its pthread key is made at the first use and never deleted: it lives as long as the process. */
typedef struct stoker__thread_key {
    size_t size;
    void (*destroy)(void *obj);
    atomic_int state; /* 0: no key yet; 1: `key` made; -1: making it failed */
    pthread_key_t key;
} stoker__thread_key;
#define STOKER__THREAD_KEY(type, destroy_fn)                                                       \
    {                                                                                              \
        .size = sizeof(type), .destroy = (destroy_fn)                                              \
    }
/* The calling thread's object under k, or NULL (out of memory or keys). */
void *stoker__thread_object(stoker__thread_key *k);

void *stoker__aligned_alloc(size_t align, size_t size); /* free with stoker__free */
char *stoker__strdup(const char *s);
void stoker__free(void *p);
/* Test hook: the nth allocation from now (1 = the next) fails; 0 disables. Returns how
 * many allocations have been made since the last call. Not for production use. */
uint64_t stoker__alloc_fail_at(uint64_t nth);

/* ---- threads: every thread of the library starts here, so that tests can make the Nth
 * start fail with EAGAIN (stoker__thread_fail_at), as pthread_create does when the process
 * is out of threads or memory. Returns 0 or a positive errno, like pthread_create. ---- */
int stoker__thread_start(pthread_t *t, void *(*fn)(void *), void *arg);
/* Test hook: the nth thread start from now (1 = the next) fails; 0 disables. Returns how
 * many starts were made since the last call. Not for production use. */
uint64_t stoker__thread_fail_at(uint64_t nth);

/* ---- CUDA resources: every stream, event, device and pinned allocation of the library
 * asks stoker__cuda_injected first and fails with cudaErrorMemoryAllocation when it says
 * so, so that tests can fail the Nth one on a real GPU (stoker__cuda_fail_at, same
 * contract as stoker__alloc_fail_at). ---- */
bool stoker__cuda_injected(void);
uint64_t stoker__cuda_fail_at(uint64_t nth);

/* ---- logging through a config's callback ---- */
typedef struct stoker__log {
    stoker_log_fn fn;
    void *user;
    int32_t max_level;
} stoker__log;
void stoker__logf(const stoker__log *log, int32_t level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- little-endian encode/decode (the on-disk formats are little-endian) ---- */
static inline void stoker__put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline void stoker__put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t stoker__get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static inline uint64_t stoker__get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* ---- options ---- */
/* The index-th option of the option table (config.c), for the enum of option names: 0, or
 * STOKER_E_INVALID past the last. */
int stoker__option_at(int32_t index, int32_t *value);

/* ---- time ---- */
double stoker__now(void);      /* CLOCK_MONOTONIC seconds */
uint64_t stoker__now_ns(void); /* CLOCK_MONOTONIC nanoseconds (vDSO, ~20 ns a call) */

/* Bumped (after the close) by whoever closes a descriptor it handed to the loader's readers
 * for a while only (the remote transport's block files): a reader that keeps descriptors
 * it saw (the io_uring reader's registered files) forgets them all when it changed, since
 * the number may now name another file. Descriptors that live as long as their data set
 * (local shards) need not bump it. */
void stoker__fds_closed(void);
uint64_t stoker__fds_epoch(void);
#define STOKER__WAIT_NS 20000000L /* bounded waits re-check their halt flag this often */
/* A bounded wait on cond (mu held): returns after a signal or STOKER__WAIT_NS, so that the
 * caller re-checks its halt flag. */
void stoker__timed_wait(pthread_cond_t *cond, pthread_mutex_t *mu);

/* The CPUs this process may use (cpus.c). */
typedef struct stoker__cpus {
    int online;   /* cores online */
    int affinity; /* CPUs in the affinity mask (sched_getaffinity; online when unknown) */
    double quota; /* the cgroup's CPU quota in CPUs (quota / period, the smallest on the way
                     up the hierarchy); 0: none */
    int usable;   /* the affinity's CPUs, fewer under a quota (rounded up, at least 1) */
} stoker__cpus;
/* Probes the calling thread's affinity and its cgroup's quota (cgroup v2's cpu.max, v1's
 * cpu.cfs_quota_us / cpu.cfs_period_us), the cgroup found through /proc/self/cgroup under
 * /sys/fs/cgroup. _at takes both paths (tests give trees of their own). */
void stoker__cpus_probe(stoker__cpus *out);
void stoker__cpus_probe_at(const char *cgroup_root, const char *self_cgroup, stoker__cpus *out);
/* Reads `len` bytes at `off` (retrying EINTR and short reads); 0, -errno, or
 * STOKER_E_CORRUPT when the file ends first. No message is set. */
int stoker__pread_full(int fd, void *buf, size_t len, uint64_t off);

/* Names the calling thread (truncated to 15 bytes). */
void stoker__thread_name(const char *name);

#endif
