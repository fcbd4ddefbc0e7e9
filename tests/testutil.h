/* SPDX-License-Identifier: Apache-2.0 */
/* Small helpers for stoker's C tests: asserts that print both sides, temporary
 * directories, file helpers. Exit codes: 0 pass, 77 skip, anything else fail. */
#ifndef STOKER_TESTUTIL_H
#define STOKER_TESTUTIL_H

#include "stoker.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define T_SKIP 77

#define T_FAIL(...)                                                                                \
    do {                                                                                           \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                            \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
        exit(1);                                                                                   \
    } while (0)

#define T_ASSERT(cond)                                                                             \
    do {                                                                                           \
        if (!(cond))                                                                               \
            T_FAIL("assertion failed: %s", #cond);                                                 \
    } while (0)

#define T_EQ_INT(a, b)                                                                             \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ != b_)                                                                              \
            T_FAIL("%s == %s: %lld != %lld", #a, #b, a_, b_);                                      \
    } while (0)

/* Asserts a stoker status equals the expected one, printing both codes' texts. */
#define T_EQ_RC(a, b)                                                                              \
    do {                                                                                           \
        int a_ = (a), b_ = (b);                                                                    \
        if (a_ != b_)                                                                              \
            T_FAIL("%s: got %d (%s), want %d (%s)", #a, a_, stoker_strerror(a_), b_,               \
                   stoker_strerror(b_));                                                           \
    } while (0)

#define T_OK(expr) T_EQ_RC((expr), 0)

#define T_EQ_STR(a, b)                                                                             \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        if (!a_ || !b_ || strcmp(a_, b_) != 0)                                                     \
            T_FAIL("%s == %s: \"%s\" != \"%s\"", #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)");  \
    } while (0)

#define T_CONTAINS(hay, needle)                                                                    \
    do {                                                                                           \
        const char *h_ = (hay), *n_ = (needle);                                                    \
        if (!h_ || !strstr(h_, n_))                                                                \
            T_FAIL("\"%s\" does not contain \"%s\"", h_ ? h_ : "(null)", n_);                      \
    } while (0)

/* A CUDA runtime call that must succeed (in tests that include cuda_runtime_api.h). */
#define T_CUDA_OK(x)                                                                               \
    do {                                                                                           \
        const cudaError_t e_ = (x);                                                                \
        if (e_ != cudaSuccess)                                                                     \
            T_FAIL("%s: %s", #x, cudaGetErrorString(e_));                                          \
    } while (0)

/* A fresh temporary directory under $STOKER_TEST_TMP (or /tmp); the caller may remove it
 * with t_rmrf. Returns a static buffer per call site's copy. */
static inline char *t_mkdtemp(const char *tag)
{
    const char *base = getenv("STOKER_TEST_TMP");
    if (!base || !*base)
        base = "/tmp";
    mkdir(base, 0755);
    char *path = malloc(4096);
    snprintf(path, 4096, "%s/%s-XXXXXX", base, tag);
    if (!mkdtemp(path))
        T_FAIL("mkdtemp %s: %s", path, strerror(errno));
    return path;
}

static inline void t_rmrf(const char *path)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0)
        T_FAIL("%s failed", cmd);
}

static inline void t_write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
        T_FAIL("write %s: %s", path, strerror(errno));
}

/* Reads a whole file (malloc'd, *size set); NULL when absent. */
static inline void *t_read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc(n > 0 ? (size_t)n : 1);
    *size = fread(buf, 1, (size_t)n, f);
    fclose(f);
    return buf;
}

static inline int t_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* A writer at path, no fields declared yet: no fsync, over a data set already there, shards of
 * at most shard_size bytes and payloads aligned to `align` (0: the defaults),
 * STOKER_OPT_JPEG_CHECKED `checked` (0 or 1). */
static inline stoker_writer *t_writer_open(const char *path, int64_t shard_size, int64_t align,
                                           int checked)
{
    stoker_config *cfg = NULL;
    T_OK(stoker_config_create(&cfg));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_FSYNC, 0));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_OVERWRITE, 1));
    if (shard_size)
        T_OK(stoker_config_set_int(cfg, STOKER_OPT_SHARD_SIZE, shard_size));
    if (align)
        T_OK(stoker_config_set_int(cfg, STOKER_OPT_ALIGN, align));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_JPEG_CHECKED, checked));
    stoker_writer *w = NULL;
    if (stoker_writer_create(&w, path, cfg))
        T_FAIL("writer_create %s: %s", path, w ? stoker_writer_errmsg(w) : "no writer");
    stoker_config_destroy(cfg); /* read when the writer was made */
    return w;
}

/* Deterministic pseudo-random bytes (splitmix64). */
static inline uint64_t t_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* SANITIZED: 1 when built with AddressSanitizer or ThreadSanitizer (gcc or clang), whose
 * runtimes change memory figures such as RSS. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

#endif
