/* SPDX-License-Identifier: Apache-2.0 */
/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78), as used by iSCSI, ext4 and
 * the shard format. The SSE4.2 instruction is used when the CPU has it, and folding with
 * VPCLMULQDQ on AVX-512 registers when it has those too. */
#ifndef STOKER_CRC32C_H
#define STOKER_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* The paths, each callable on its own so that the tests cover those the dispatcher passes
 * over; the SSE4.2 one only where stoker__crc32c_hw() >= STOKER__CRC32C_SSE42, the AVX-512
 * one only where it is STOKER__CRC32C_AVX512. */
uint32_t stoker__crc32c_portable(uint32_t crc, const void *data, size_t size);
uint32_t stoker__crc32c_sse42(uint32_t crc, const void *data, size_t size);
uint32_t stoker__crc32c_avx512(uint32_t crc, const void *data, size_t size);

enum { STOKER__CRC32C_PORTABLE, STOKER__CRC32C_SSE42, STOKER__CRC32C_AVX512 };
/* The path stoker_crc32c takes: one of the above, nonzero when it uses an instruction. */
int stoker__crc32c_hw(void);

/* Below this many bytes the AVX-512 path hands the buffer to the SSE4.2 one: setting up
 * the fold and reducing it cost more than they save. At least 256, the first fold's. */
#define STOKER__CRC32C_AVX512_MIN 256u

/* 0 where crc32c_avx512.c was compiled without the instruction sets it needs (its
 * stoker__crc32c_avx512 then runs stoker_crc32c, which never picks it). */
extern const int stoker__crc32c_avx512_built;

/* The AVX-512 path's fold constants (crc32c_avx512.c says how they are used), exposed so
 * that the tests can recompute them. */
typedef struct stoker__crc32c_fold {
    uint32_t bytes; /* distance the lane moves forward */
    uint32_t k_lo;  /* x^(8 bytes + 31) mod P, reflected: for the lane's first 8 bytes */
    uint32_t k_hi;  /* x^(8 bytes - 33) mod P, reflected: for its last 8 */
} stoker__crc32c_fold;

enum {
    STOKER__CRC32C_FOLD16,
    STOKER__CRC32C_FOLD32,
    STOKER__CRC32C_FOLD48,
    STOKER__CRC32C_FOLD64,
    STOKER__CRC32C_FOLD128,
    STOKER__CRC32C_FOLD192,
    STOKER__CRC32C_FOLD256,
    STOKER__CRC32C_NFOLDS
};
extern const stoker__crc32c_fold stoker__crc32c_folds[STOKER__CRC32C_NFOLDS];

#endif
