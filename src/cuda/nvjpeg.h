/* SPDX-License-Identifier: Apache-2.0 */
/* nvJPEG's hardware JPEG decoder (the NVJPG engines of A100, H100, H200 and later), loaded
 * at run time: the library needs neither nvjpeg.h nor libnvjpeg to build, and a machine
 * without them (or with a GPU that has no decoder engine) only finds the decoder
 * unavailable, with the reason. nvjpeg.c holds the implementation over dlopen (a build with
 * CUDA), nvjpeg_none.c the one that is never available (a build without).
 *
 * The library: STOKER_NVJPEG_LIBRARY (a file name or path) when set, else libnvjpeg.so.13,
 * else libnvjpeg.so, searched the dynamic linker's way (stoker's run path holds the CUDA
 * toolkit's library directory).
 *
 * Decoding is batched (nvjpegDecodeBatchedEx with the hardware back-end): bitstreams in host
 * memory, each with an optional region, decoded whole to their planes (YCbCr at the planes'
 * own resolution, in the object's device scratch), then the region converted to interleaved
 * RGB (3 bytes per pixel) in device buffers the caller gives by image_kernels.h's
 * conversion (libjpeg's chroma upsampling and colour tables), queued on the caller's stream.
 * Before a batch, every image is checked (its header parsed, nvjpegDecodeBatchedSupportedEx
 * asked); the batch decodes those the decoder takes and reports which it did not. The
 * hardware decoder works while the call runs (the call returns when it is done). The call
 * can still wait for kernels on other streams: the hardware decoder frees device memory as
 * batches change (see stoker__nvjpeg_reserve), and such a free waits for the whole device.
 *
 * One object per device; one thread at a time (nvJPEG's decode state and parsed streams are
 * not thread-safe). Every call runs with the object's device current and restores the
 * caller's current device. */
#ifndef STOKER_CUDA_NVJPEG_H
#define STOKER_CUDA_NVJPEG_H

#include "common/common.h"
#include "cuda/cuda.h"

typedef struct stoker__nvjpeg stoker__nvjpeg;

/* A region in an image's pixels; w or h 0: the whole image. */
typedef struct stoker__nvjpeg_roi {
    int32_t x, y, w, h;
} stoker__nvjpeg_roi;

/* Loads nvJPEG and creates a hardware-decoder handle on CUDA device `device`. Returns 0, or
 * STOKER_E_UNSUPPORTED with the reason in why (cap bytes; why may be NULL): the library not
 * found (naming the names tried and the loader's message), a symbol missing (naming the
 * library and the symbols), no CUDA device or no such device, the hardware back-end refused
 * (nvjpegCreateEx's status: a GPU without decoder engines), or a build without CUDA; or
 * -ENOMEM. A library that was never called is unloaded again after a failure. */
int stoker__nvjpeg_open(stoker__nvjpeg **out, int device, char *why, size_t cap);

/* Releases everything (NULL ok) but the library itself, which stays loaded once nvJPEG was
 * called. Work queued by decode_batch must be complete (synchronise its stream first). */
void stoker__nvjpeg_close(stoker__nvjpeg *nj);

/* Has nvJPEG set aside, once, the device memory its hardware decoder needs for batches of up
 * to `batch` images of up to width x height (nvjpegDecodeBatchedPreAllocate), which it
 * otherwise allocates and frees as the batches' sizes and images change; a cuMemFree waits
 * for the whole device, so beside a training job's kernels each such free waits for the
 * kernel running then. It makes such frees rarer, not absent (docs/GPU.md). False when the
 * library lacks the call or it failed: decoding works either way. */
bool stoker__nvjpeg_reserve(stoker__nvjpeg *nj, int32_t batch, int32_t width, int32_t height);

/* Where the host's time went (checking images, initialising, queueing decodes), for logs. */
void stoker__nvjpeg_timing(const stoker__nvjpeg *nj, char *buf, size_t cap);

/* The library, its version and the decoder's engines, for logs. */
const char *stoker__nvjpeg_describe(const stoker__nvjpeg *nj);

/* Whether the hardware decoder takes the JPEG `data` with region `roi` (NULL: the whole
 * image): *ok false for a header nvJPEG cannot parse, an image it does not support, or a
 * region outside the image. Returns 0, or STOKER_E_CUDA (with the message in err) when
 * nvJPEG itself fails. */
int stoker__nvjpeg_supported(stoker__nvjpeg *nj, const uint8_t *data, size_t size,
                             const stoker__nvjpeg_roi *roi, bool *ok, stoker__err *err);

/* Queues the decode of n JPEGs (data[i], sizes[i] bytes, host memory) on `stream`: image i
 * (its region rois[i] when rois is not NULL and rois[i].w > 0) to dst[i], device memory of
 * its height rows of pitch[i] bytes (pitch[i] >= 3 * its width), as interleaved RGB.
 * taken[i] (n bytes) says which images the decoder took; the others are left for the CPU and
 * their dst untouched. The bitstreams must stay unchanged until the stream has finished the
 * work, and the next call on the object must wait for it too (it reuses the scratch).
 * Returns 0 (also when it took none), or STOKER_E_CUDA with nvJPEG's status in err: the
 * decode of the taken images failed as a whole, and taken[i] then marks the images whose
 * dst holds undefined contents (all of them go back to the CPU); or, with nothing queued
 * and no image taken, STOKER_E_CUDA (a check failed), STOKER_E_INVALID (n < 0), -ENOMEM. */
int stoker__nvjpeg_decode_batch(stoker__nvjpeg *nj, int32_t n, const uint8_t *const data[],
                                const size_t sizes[], const stoker__nvjpeg_roi *rois,
                                uint8_t *const dst[], const size_t pitch[], stoker__stream stream,
                                uint8_t *taken, stoker__err *err);

#endif
