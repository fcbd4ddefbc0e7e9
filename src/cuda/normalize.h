/* GPU normalisation of uint8 HWC images (normalize.cu; built only with nvcc). */
#ifndef STOKER_CUDA_NORMALIZE_H
#define STOKER_CUDA_NORMALIZE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out = v * scale[c] + bias[c] for every uint8 value v of channel c, the same float32
 * arithmetic as the CPU pipeline ((v/255 - mean)/std with scale = 1/(255 std),
 * bias = -mean/std), rounded to nearest into dtype (STOKER_DTYPE_FLOAT32 / FLOAT16 /
 * BFLOAT16). src: n images [h, w, 3]; dst: [n, 3, h, w] when nchw, else [n, h, w, 3].
 * Queued on `stream` (a cudaStream_t); returns 0 or the cudaError_t of the launch. */
int stoker__cuda_normalize(const uint8_t *src, void *dst, int64_t n, int64_t h, int64_t w,
                           int32_t dtype, int nchw, const float scale[3], const float bias[3],
                           void *stream);

#ifdef __cplusplus
}
#endif

#endif
