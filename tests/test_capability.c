/* SPDX-License-Identifier: Apache-2.0 */
/* Capabilities agree with what the host says through other means. */
#include "testutil.h"

#include <cpuid.h>
#include <liburing.h>

static int f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

int main(void)
{
    struct io_uring ring;
    const int uring = io_uring_queue_init(4, &ring, 0) == 0;
    if (uring)
        io_uring_queue_exit(&ring);
    T_EQ_INT(stoker_capability_get(STOKER_CAP_IO_URING), uring);

    const int64_t build = stoker_capability_get(STOKER_CAP_CUDA_BUILD);
    T_ASSERT(build == 0 || build == 1);
    const int64_t devices = stoker_capability_get(STOKER_CAP_CUDA_DEVICES);
    T_ASSERT(devices >= 0);
    if (!build)
        T_EQ_INT(devices, 0);

    __builtin_cpu_init();
    int64_t simd = STOKER_SIMD_SCALAR;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"))
        simd = STOKER_SIMD_AVX512;
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c())
        simd = STOKER_SIMD_AVX2;
    T_EQ_INT(stoker_capability_get(STOKER_CAP_SIMD), simd);
    T_EQ_INT(stoker_capability_get(STOKER_CAP_CRC32C_HW), __builtin_cpu_supports("sse4.2") != 0);
    const int64_t h5 = stoker_capability_get(STOKER_CAP_HDF5);
    T_ASSERT(h5 == 0 || h5 == 1);
    T_EQ_INT(stoker_capability_get((stoker_capability)99), STOKER_E_INVALID);
    /* cached: the same answer again */
    T_EQ_INT(stoker_capability_get(STOKER_CAP_IO_URING), uring);

    T_EQ_STR(stoker_simd_name(STOKER_SIMD_SCALAR), "scalar");
    T_EQ_STR(stoker_simd_name(STOKER_SIMD_AVX2), "avx2");
    T_EQ_STR(stoker_simd_name(STOKER_SIMD_AVX512), "avx512");
    T_EQ_STR(stoker_simd_name(42), "unknown");
    T_EQ_STR(stoker_backend_name(STOKER_BACKEND_IO_URING), "io_uring");
    T_EQ_STR(stoker_backend_name(STOKER_BACKEND_PREAD), "pread");
    T_EQ_STR(stoker_backend_name(9), "unknown");
    printf("io_uring %d, cuda build %d, devices %d, simd %s, crc32c hw %d, hdf5 %d\n", uring,
           (int)build, (int)devices, stoker_simd_name((int32_t)simd),
           (int)stoker_capability_get(STOKER_CAP_CRC32C_HW), (int)h5);
    return 0;
}
