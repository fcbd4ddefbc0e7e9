/* SPDX-License-Identifier: Apache-2.0 */
/* The library's CUDA runtime calls, behind small wrappers: runtime.c implements them with
 * the CUDA runtime, none.c for a build without CUDA (no device is ever found there, so the
 * callers never go past the device query). The kernels are launched in their own files:
 * normalize.cu and image_kernels.cu (cuda_runtime.h) launch them and read the launch's
 * error; their stand-ins without nvcc (kernels_none.c, image_kernels_none.c) include
 * cuda_runtime_api.h for the code they return, cudaErrorNotSupported. No other file of the
 * library includes a CUDA header.
 *
 * Handles are opaque pointers (a cudaStream_t, a cudaEvent_t). Fallible calls return 0 or
 * a nonzero code that stoker__cuda_error_string names; the runtime's sticky "last error" is
 * cleared by the wrappers, so a failure is reported once, where it happened. Resource
 * requests (streams, events, device and pinned memory) honour stoker__cuda_injected
 * (common.h), so tests can fail the Nth one on a real GPU. */
#ifndef STOKER_CUDA_CUDA_H
#define STOKER_CUDA_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void *stoker__stream; /* cudaStream_t */
typedef void *stoker__event;  /* cudaEvent_t */

/* Whether this build has the CUDA runtime; and the GPU kernels (nvcc). */
bool stoker__cuda_built(void);
bool stoker__cuda_has_kernels(void);

/* Usable CUDA devices; 0 on any error (no driver, no GPU), with the reason in msg
 * (capacity cap; msg may be NULL). Thread-safe. */
int stoker__cuda_device_query(char *msg, size_t cap);
int stoker__cuda_device_count(void);

/* Makes `device` the calling thread's current device and returns the one it replaced (-1
 * when none could be read); stoker__cuda_restore_device puts that back. Every call of the
 * library on a caller's thread runs between the two, so the caller's current device is
 * kept. */
int stoker__cuda_use_device(int device);
void stoker__cuda_restore_device(int device, int previous);
/* Sets the calling thread's current device (the library's own threads). */
int stoker__cuda_set_device(int device);
/* The calling thread's current device; -1 when none can be read. */
int stoker__cuda_current_device(void);

/* A stream that never orders with the legacy default stream; urgent: of the device's
 * greatest priority (its kernels are scheduled before the consumer's queued ones), else of
 * its least (they run where the consumer's leave room). */
int stoker__cuda_stream_create(stoker__stream *s, bool urgent);
void stoker__cuda_stream_destroy(stoker__stream s);
int stoker__cuda_stream_sync(stoker__stream s);
/* Makes stream s wait for event e (the host does not block). */
int stoker__cuda_stream_wait(stoker__stream s, stoker__event e);
/* Queues fn(arg) on stream s, after the work queued before it (it must make no CUDA
 * call: it runs on CUDA's callback thread). */
int stoker__cuda_host_func(stoker__stream s, void (*fn)(void *), void *arg);

/* An event without timing; blocking_sync: a host wait on it sleeps rather than spins. */
int stoker__cuda_event_create(stoker__event *e, bool blocking_sync);
void stoker__cuda_event_destroy(stoker__event e);
int stoker__cuda_event_record(stoker__event e, stoker__stream s);
int stoker__cuda_event_sync(stoker__event e);

/* Device memory on the current device; free accepts NULL. */
int stoker__cuda_malloc(void **p, size_t size);
void stoker__cuda_free(void *p);
/* size bytes of pinned, portable host memory allocated with `device` current (the calling
 * thread's current device is kept); NULL on failure, with the reason in msg. Thread-safe. */
void *stoker__cuda_host_alloc(int device, size_t size, char *msg, size_t cap);
void stoker__cuda_host_free(void *p);
/* Queues a host-to-device copy of size bytes on stream s. */
int stoker__cuda_copy_to_device(void *dst, const void *src, size_t size, stoker__stream s);

/* The GPU normalisation kernel (normalize.cu): out = v * scale[c] + bias[c] for every uint8
 * value v of channel c, the same float32 arithmetic as the CPU pipeline, rounded to nearest
 * into dtype (FLOAT32 / FLOAT16 / BFLOAT16). src: n images [h, w, 3]; dst: [n, 3, h, w]
 * when nchw, else [n, h, w, 3]. Queued on s. */
int stoker__cuda_normalize(const uint8_t *src, void *dst, int64_t n, int64_t h, int64_t w,
                           int32_t dtype, bool nchw, const float scale[3], const float bias[3],
                           stoker__stream s);

/* CUDA's text for a code these functions returned. */
const char *stoker__cuda_error_string(int code);

#ifdef __cplusplus
}
#endif

#endif
