/* SPDX-License-Identifier: Apache-2.0 */
/* Chooses the SIMD kernels: the CPU is probed once (pthread_once), the best level it runs
 * is the default, and a level may be forced as long as the CPU has it. */
#include "transform/transform.h"

#include <cpuid.h>
#include <pthread.h>

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int32_t best_level = STOKER_SIMD_SCALAR;

/* F16C straight from CPUID (leaf 1, ECX bit 29): not every compiler's
 * __builtin_cpu_supports knows its name. */
static int has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}

/* __builtin_cpu_supports also checks that the OS saves the wide registers (XCR0); F16C
 * needs no more than AVX does. */
static void probe(void)
{
    __builtin_cpu_init();
    const int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    const int avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                       __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                       __builtin_cpu_supports("avx512dq");
    best_level = avx512 ? STOKER_SIMD_AVX512 : avx2 ? STOKER_SIMD_AVX2 : STOKER_SIMD_SCALAR;
}

int32_t stoker__simd_best(void)
{
    pthread_once(&probe_once, probe);
    return best_level;
}

int stoker__simd_ops_get(int32_t level, const stoker__simd_ops **out, stoker__err *err)
{
    static const stoker__simd_ops *const table[] = {
        [STOKER_SIMD_SCALAR] = &stoker__simd_scalar,
        [STOKER_SIMD_AVX2] = &stoker__simd_avx2,
        [STOKER_SIMD_AVX512] = &stoker__simd_avx512,
    };
    *out = NULL;
    const int32_t best = stoker__simd_best();
    if (level == STOKER_SIMD_AUTO)
        level = best;
    STOKER_RETURN_IF(level < STOKER_SIMD_SCALAR || level > STOKER_SIMD_AVX512, err,
                     STOKER_E_INVALID, "unknown SIMD level %d", (int)level);
    STOKER_RETURN_IF(level > best, err, STOKER_E_UNSUPPORTED,
                     "SIMD level %s is not supported by this CPU (best: %s)", table[level]->name,
                     table[best]->name);
    *out = table[level];
    return 0;
}
