/* SPDX-License-Identifier: Apache-2.0 */
/* Run-time capabilities of this build and host, probed once and cached. */
#include "common/common.h"
#include "common/crc32c.h"
#include "cuda/cuda.h"
#include "io/reader.h"

#include <pthread.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int64_t cap_uring, cap_cuda_devices, cap_simd, cap_crc_hw;

#if defined(__x86_64__) || defined(__i386__)
/* F16C through CPUID itself: clang's __builtin_cpu_supports does not know "f16c". */
static bool has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
#endif

static int64_t probe_simd(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"))
        return STOKER_SIMD_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c())
        return STOKER_SIMD_AVX2;
#endif
    return STOKER_SIMD_SCALAR;
}

/* The probe does not go through the test fault hook: it reports the host. */
static void probe(void)
{
    stoker__reader *r = NULL;
    cap_uring = stoker__uring_open(&r, 1) == 0;
    stoker__reader_close(r);
    cap_simd = probe_simd();
    cap_crc_hw = stoker__crc32c_hw() != 0;
}

/* Apart, because it initialises the CUDA driver: only when asked for. */
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static void probe_cuda(void)
{
    cap_cuda_devices = stoker__cuda_device_count();
}

int64_t stoker_capability_get(stoker_capability cap)
{
    if (cap == STOKER_CAP_CUDA_DEVICES) {
        pthread_once(&cuda_once, probe_cuda);
        return cap_cuda_devices;
    }
    pthread_once(&once, probe);
    switch (cap) {
    case STOKER_CAP_IO_URING: return cap_uring;
    case STOKER_CAP_CUDA_BUILD: return stoker__cuda_built();
    case STOKER_CAP_SIMD: return cap_simd;
#ifdef STOKER_HAVE_HDF5
    case STOKER_CAP_HDF5: return 1;
#else
    case STOKER_CAP_HDF5: return 0;
#endif
    case STOKER_CAP_CRC32C_HW: return cap_crc_hw;
    default: return STOKER_E_INVALID;
    }
}
