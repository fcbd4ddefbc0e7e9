/* SPDX-License-Identifier: Apache-2.0 */
/* CRC32C against published check values (RFC 3720 B.4); the AVX-512 path's fold constants
 * recomputed; and every path the CPU has (portable, SSE4.2, AVX-512 folding, and the
 * dispatcher) against the portable code: every size 0..4096 at every offset 0..63 from a
 * 64-byte boundary, every size around the SSE4.2 three-chain block boundaries, random sizes
 * up to 4 MiB at random offsets, and buffers split in two or three, each part through a
 * different path. */
#include "common/crc32c.h"
#include "testutil.h"

typedef uint32_t (*crc_fn)(uint32_t crc, const void *data, size_t size);

typedef struct path {
    const char *name;
    crc_fn fn;
} path;

static path paths[4];
static int npaths;

static void find_paths(void)
{
    paths[npaths++] = (path){"portable", stoker__crc32c_portable};
    paths[npaths++] = (path){"dispatcher", stoker_crc32c};
    if (stoker__crc32c_hw() >= STOKER__CRC32C_SSE42)
        paths[npaths++] = (path){"sse42", stoker__crc32c_sse42};
    if (stoker__crc32c_hw() >= STOKER__CRC32C_AVX512)
        paths[npaths++] = (path){"avx512", stoker__crc32c_avx512};
}

/* size bytes at p through every path give want. */
static void check_paths(const uint8_t *p, size_t size, uint32_t init, uint32_t want, size_t off)
{
    for (int i = 0; i < npaths; i++) {
        const uint32_t got = paths[i].fn(init, p, size);
        if (got != want)
            T_FAIL("%s: size %zu offset %zu init %08x: %08x != %08x", paths[i].name, size, off,
                   init, got, want);
    }
}

/* x^e mod P, reflected, computed in the other bit order: the remainder with bit i the
 * coefficient of x^i, multiplied by x and reduced by the unreflected polynomial
 * 0x1EDC6F41 (x^32 implied), then reversed. */
static uint32_t x_pow_mod_p(uint32_t e)
{
    uint32_t r = 1;
    while (e--)
        r = r & 0x80000000u ? (r << 1) ^ 0x1EDC6F41u : r << 1;
    uint32_t reflected = 0;
    for (int i = 0; i < 32; i++)
        reflected |= ((r >> i) & 1u) << (31 - i);
    return reflected;
}

static void check_constants(void)
{
    /* the two routes agree where the answer is known: x^0 is 1, x^32 is P less x^32 */
    T_EQ_INT(x_pow_mod_p(0), 0x80000000u);
    T_EQ_INT(x_pow_mod_p(32), 0x82F63B78u);
    static const uint32_t distances[STOKER__CRC32C_NFOLDS] = {16, 32, 48, 64, 128, 192, 256};
    for (int i = 0; i < STOKER__CRC32C_NFOLDS; i++) {
        const stoker__crc32c_fold *f = &stoker__crc32c_folds[i];
        T_EQ_INT(f->bytes, distances[i]);
        if (f->k_lo != x_pow_mod_p(8 * f->bytes + 31))
            T_FAIL("fold %u: k_lo %08x != %08x", f->bytes, f->k_lo, x_pow_mod_p(8 * f->bytes + 31));
        if (f->k_hi != x_pow_mod_p(8 * f->bytes - 33))
            T_FAIL("fold %u: k_hi %08x != %08x", f->bytes, f->k_hi, x_pow_mod_p(8 * f->bytes - 33));
    }
}

/* Where the CPU and the OS have what the folding needs, the dispatcher must take it, or
 * the fast path would go untested and unused without a sign. */
static void check_choice(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    const int sse42 = __builtin_cpu_supports("sse4.2");
    const int avx512 = sse42 && __builtin_cpu_supports("avx512f") &&
                       __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("vpclmulqdq") &&
                       __builtin_cpu_supports("pclmul");
    if (avx512 && stoker__crc32c_avx512_built)
        T_EQ_INT(stoker__crc32c_hw(), STOKER__CRC32C_AVX512);
    else
        T_EQ_INT(stoker__crc32c_hw(), sse42 ? STOKER__CRC32C_SSE42 : STOKER__CRC32C_PORTABLE);
#endif
}

static void check_published(void)
{
    T_EQ_INT(stoker_crc32c(0, "123456789", 9), 0xE3069283u);
    uint8_t buf[32];
    memset(buf, 0, 32);
    T_EQ_INT(stoker_crc32c(0, buf, 32), 0x8A9136AAu);
    memset(buf, 0xFF, 32);
    T_EQ_INT(stoker_crc32c(0, buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)i;
    T_EQ_INT(stoker_crc32c(0, buf, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)(31 - i);
    T_EQ_INT(stoker_crc32c(0, buf, 32), 0x113FDB5Cu);
}

/* 64-byte aligned, so that offset i is i bytes past a cache line. */
static uint8_t *random_buffer(size_t size, uint64_t seed)
{
    uint8_t *buf = aligned_alloc(64, (size + 63) & ~(size_t)63);
    T_ASSERT(buf);
    for (size_t i = 0; i < size; i++)
        buf[i] = (uint8_t)t_rand(&seed);
    return buf;
}

/* The same bytes copied to each offset, so that one portable CRC per size serves all. */
static void check_every_size_and_offset(void)
{
    /* past 4096, so that sizes where the AVX-512 path starts aligning its loads, with
     * every head, are covered too */
    enum { MAX = 4096 + 320 };
    const uint32_t init = 0x1234u;
    uint8_t *src = random_buffer(MAX, 1);
    uint8_t *buf = random_buffer(MAX + 64, 2);
    uint32_t *want = malloc((MAX + 1) * sizeof *want);
    for (size_t n = 0; n <= MAX; n++)
        want[n] = stoker__crc32c_portable(init, src, n);
    for (size_t off = 0; off < 64; off++) {
        memcpy(buf + off, src, MAX);
        for (size_t n = 0; n <= MAX; n++)
            check_paths(buf + off, n, init, want[n], off);
    }
    free(want);
    free(buf);
    free(src);
}

/* Sizes around the three-chain blocks of the SSE4.2 path (3 x 512, 3 x 4096), which
 * check_every_size_and_offset does not reach. */
static void check_block_edges(const uint8_t *buf)
{
    static const size_t edges[] = {3 * 4096, 2 * 3 * 4096 + 3 * 512};
    for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++)
        for (size_t n = edges[e] - 17; n <= edges[e] + 17; n++)
            for (size_t off = 0; off < 8; off += 3)
                check_paths(buf + off, n, 0, stoker__crc32c_portable(0, buf + off, n), off);
}

static void check_random_sizes(const uint8_t *buf, size_t cap)
{
    uint64_t s = 3;
    for (int i = 0; i < 60; i++) {
        const size_t off = t_rand(&s) % 64;
        /* half up to 4 MiB, half up to 64 KiB, where the steps after the main loop weigh */
        const size_t limit = i % 2 ? cap - 64 : 65536;
        const size_t n = t_rand(&s) % (limit + 1);
        const uint32_t init = i % 3 == 0 ? 0 : i % 3 == 1 ? 0xFFFFFFFFu : (uint32_t)t_rand(&s);
        check_paths(buf + off, n, init, stoker__crc32c_portable(init, buf + off, n), off);
    }
}

/* CRC of A, then of B from A's: equals the CRC of A B, for each pair of paths. */
static void check_chained(const uint8_t *buf, size_t cap)
{
    uint64_t s = 4;
    for (int i = 0; i < 200; i++) {
        const size_t off = t_rand(&s) % 64;
        const size_t n = t_rand(&s) % (i % 8 ? 20000 : cap - 64);
        /* splits anywhere, and next to the AVX-512 path's threshold and fold sizes */
        static const size_t near[] = {STOKER__CRC32C_AVX512_MIN, 256, 64, 16};
        size_t a = t_rand(&s) % (n + 1);
        if (i % 2 && n >= 600)
            a = near[(i / 2) % 4] + t_rand(&s) % 3 - 1;
        const uint32_t init = (uint32_t)t_rand(&s);
        const uint32_t want = stoker__crc32c_portable(init, buf + off, n);
        for (int x = 0; x < npaths; x++)
            for (int y = 0; y < npaths; y++) {
                const uint32_t part = paths[x].fn(init, buf + off, a);
                const uint32_t got = paths[y].fn(part, buf + off + a, n - a);
                if (got != want)
                    T_FAIL("%s then %s: size %zu split at %zu offset %zu: %08x != %08x",
                           paths[x].name, paths[y].name, n, a, off, got, want);
            }
        /* in three, the middle part through the next path */
        const size_t b = a + (n - a) / 2;
        for (int x = 0; x < npaths; x++) {
            uint32_t part = paths[x].fn(init, buf + off, a);
            part = paths[(x + 1) % npaths].fn(part, buf + off + a, b - a);
            T_EQ_INT(paths[x].fn(part, buf + off + b, n - b), want);
        }
    }
}

int main(void)
{
    check_published();
    check_constants();
    check_choice();
    find_paths();
    check_every_size_and_offset();
    const size_t cap = (4u << 20) + 64;
    uint8_t *buf = random_buffer(cap, 7);
    check_block_edges(buf);
    check_random_sizes(buf, cap);
    check_chained(buf, cap);
    free(buf);
    printf("crc32c ok (path: %d; avx512 built: %d)\n", stoker__crc32c_hw(),
           stoker__crc32c_avx512_built);
    return 0;
}
