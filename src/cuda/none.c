/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA wrappers of cuda.h for a build without CUDA: no device is ever found, so the
 * loader plans host batches and never reaches the other calls; they fail if called. */
#include "cuda/cuda.h"

#include <stdio.h>

#define NO_CUDA 1 /* the one code these wrappers return */

bool stoker__cuda_built(void)
{
    return false;
}

bool stoker__cuda_has_kernels(void)
{
    return false;
}

int stoker__cuda_device_query(char *msg, size_t cap)
{
    if (msg && cap)
        snprintf(msg, cap, "this build has no CUDA support");
    return 0;
}

int stoker__cuda_device_count(void)
{
    return 0;
}

int stoker__cuda_use_device(int device)
{
    (void)device;
    return -1;
}

void stoker__cuda_restore_device(int device, int previous)
{
    (void)device;
    (void)previous;
}

int stoker__cuda_set_device(int device)
{
    (void)device;
    return NO_CUDA;
}

int stoker__cuda_current_device(void)
{
    return -1;
}

int stoker__cuda_stream_create(stoker__stream *s, bool urgent)
{
    (void)urgent;
    *s = NULL;
    return NO_CUDA;
}

void stoker__cuda_stream_destroy(stoker__stream s)
{
    (void)s;
}

int stoker__cuda_stream_sync(stoker__stream s)
{
    (void)s;
    return NO_CUDA;
}

int stoker__cuda_stream_wait(stoker__stream s, stoker__event e)
{
    (void)s;
    (void)e;
    return NO_CUDA;
}

int stoker__cuda_host_func(stoker__stream s, void (*fn)(void *), void *arg)
{
    (void)s;
    (void)fn;
    (void)arg;
    return NO_CUDA;
}

int stoker__cuda_event_create(stoker__event *e, bool blocking_sync)
{
    (void)blocking_sync;
    *e = NULL;
    return NO_CUDA;
}

void stoker__cuda_event_destroy(stoker__event e)
{
    (void)e;
}

int stoker__cuda_event_record(stoker__event e, stoker__stream s)
{
    (void)e;
    (void)s;
    return NO_CUDA;
}

int stoker__cuda_event_sync(stoker__event e)
{
    (void)e;
    return NO_CUDA;
}

int stoker__cuda_malloc(void **p, size_t size)
{
    (void)size;
    *p = NULL;
    return NO_CUDA;
}

void stoker__cuda_free(void *p)
{
    (void)p;
}

void *stoker__cuda_host_alloc(int device, size_t size, char *msg, size_t cap)
{
    (void)device;
    (void)size;
    snprintf(msg, cap, "this build has no CUDA support");
    return NULL;
}

void stoker__cuda_host_free(void *p)
{
    (void)p;
}

int stoker__cuda_copy_to_device(void *dst, const void *src, size_t size, stoker__stream s)
{
    (void)dst;
    (void)src;
    (void)size;
    (void)s;
    return NO_CUDA;
}

int stoker__cuda_normalize(const uint8_t *src, void *dst, int64_t n, int64_t h, int64_t w,
                           int32_t dtype, bool nchw, const float scale[3], const float bias[3],
                           stoker__stream s)
{
    (void)src, (void)dst, (void)n, (void)h, (void)w, (void)dtype, (void)nchw, (void)scale;
    (void)bias, (void)s;
    return NO_CUDA;
}

const char *stoker__cuda_error_string(int code)
{
    (void)code;
    return "this build has no CUDA support";
}
