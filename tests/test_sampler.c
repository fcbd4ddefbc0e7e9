/* SPDX-License-Identifier: Apache-2.0 */
/* The sampler against a straightforward reference of docs/SEMANTICS.md's rule: permutation,
 * padding with its own first records to a multiple of the world size, global batches of
 * batch x world, rank r takes slice r of each (the short last one split evenly). */
#include "loader/sampler.h"
#include "testutil.h"

/* Reference: builds the padded (or truncated) permutation explicitly and slices it. Writes
 * rank r's batches as a flat list with per-batch sizes. Returns the number of batches. */
static uint64_t reference(uint64_t n, uint64_t b, uint32_t r, uint32_t w, bool shuffle,
                          bool drop_last, uint64_t seed, uint64_t epoch, int64_t *out,
                          uint64_t *sizes)
{
    stoker__perm p;
    stoker__perm_init(&p, n, seed, epoch, shuffle);
    uint64_t total = drop_last ? n / (b * w) * (b * w) : (n + w - 1) / w * w;
    int64_t *q = malloc((total + 1) * sizeof *q);
    for (uint64_t i = 0; i < total; i++)
        q[i] = (int64_t)stoker__perm_at(&p, i % n); /* padding repeats the first records */
    uint64_t nb = 0, k = 0;
    for (uint64_t start = 0; start < total; start += b * w) {
        const uint64_t g = total - start < b * w ? total - start : b * w;
        T_ASSERT(g % w == 0);
        const uint64_t each = g / w;
        for (uint64_t j = 0; j < each; j++)
            out[k++] = q[start + r * each + j];
        sizes[nb++] = each;
    }
    free(q);
    return nb;
}

static void check_perm(uint64_t n, uint64_t seed, uint64_t epoch)
{
    stoker__perm p;
    stoker__perm_init(&p, n, seed, epoch, true);
    uint8_t *seen = calloc(n + 1, 1);
    for (uint64_t i = 0; i < n; i++) {
        const uint64_t x = stoker__perm_at(&p, i);
        T_ASSERT(x < n);
        T_EQ_INT(seen[x], 0);
        seen[x] = 1;
    }
    free(seen);
}

/* One (n, batch, world, shuffle, drop_last) combination, every rank, two epochs. */
static void check_combo(uint64_t n, uint64_t b, uint32_t w, bool shuffle, bool drop_last)
{
    const uint64_t cap = (n + w) * 2 + b * w;
    int64_t *want = malloc(cap * sizeof *want), *got = malloc(b * sizeof *got);
    uint64_t *sizes = malloc(cap * sizeof *sizes);
    uint32_t *count = calloc(n, sizeof *count);
    uint64_t nb0 = UINT64_MAX, per_rank0 = 0;
    uint64_t *sizes0 = malloc(cap * sizeof *sizes0);
    for (uint64_t epoch = 0; epoch < 2; epoch++) {
        memset(count, 0, n * sizeof *count);
        for (uint32_t r = 0; r < w; r++) {
            stoker__sampler s;
            T_ASSERT(stoker__sampler_init(&s, n, b, r, w, shuffle, drop_last, 42));
            const uint64_t nb = reference(n, b, r, w, shuffle, drop_last, 42, epoch, want, sizes);
            T_EQ_INT(s.nbatches, nb);
            uint64_t k = 0;
            for (uint64_t i = 0; i < nb; i++) {
                const uint64_t c = stoker__sampler_batch_count(&s, i);
                T_EQ_INT(c, sizes[i]);
                stoker__sampler_batch(&s, epoch, i, got);
                for (uint64_t j = 0; j < c; j++, k++) {
                    if (got[j] != want[k])
                        T_FAIL("n=%" PRIu64 " b=%" PRIu64 " w=%u r=%u shuffle=%d drop=%d "
                               "epoch %" PRIu64 " batch %" PRIu64 "[%" PRIu64 "]: %" PRId64
                               " != %" PRId64,
                               n, b, w, r, shuffle, drop_last, epoch, i, j, got[j], want[k]);
                    count[got[j]]++;
                }
            }
            T_EQ_INT(s.nrecords, k);
            /* every rank: the same batch count and the same size per batch index */
            if (nb0 == UINT64_MAX) {
                nb0 = nb;
                per_rank0 = k;
                memcpy(sizes0, sizes, nb * sizeof *sizes);
            }
            T_EQ_INT(nb, nb0);
            T_EQ_INT(k, per_rank0);
            for (uint64_t i = 0; i < nb; i++)
                T_EQ_INT(sizes[i], sizes0[i]);
        }
        /* together complete (no drop), disjoint apart from the padding */
        uint64_t total = 0, extra = 0;
        for (uint64_t i = 0; i < n; i++) {
            total += count[i];
            if (!drop_last)
                T_ASSERT(count[i] >= 1);
            else
                T_ASSERT(count[i] <= 1);
            extra += count[i] > 1 ? count[i] - 1 : 0;
        }
        if (!drop_last) {
            const uint64_t padded = (n + w - 1) / w * w;
            T_EQ_INT(total, padded);
            T_EQ_INT(extra, padded - n);
        } else {
            T_EQ_INT(total, n / (b * w) * (b * w));
        }
    }
    free(want), free(got), free(sizes), free(count), free(sizes0);
}

static void check_orders(void)
{
    const uint64_t n = 1000;
    stoker__perm a, b, c, d;
    stoker__perm_init(&a, n, 7, 0, true);
    stoker__perm_init(&b, n, 7, 0, true);
    stoker__perm_init(&c, n, 8, 0, true);
    stoker__perm_init(&d, n, 7, 1, true);
    uint64_t same_ab = 0, same_ac = 0, same_ad = 0, fixed = 0;
    for (uint64_t i = 0; i < n; i++) {
        const uint64_t x = stoker__perm_at(&a, i);
        same_ab += x == stoker__perm_at(&b, i);
        same_ac += x == stoker__perm_at(&c, i);
        same_ad += x == stoker__perm_at(&d, i);
        fixed += x == i;
    }
    T_EQ_INT(same_ab, n);
    T_ASSERT(same_ac < 20); /* a random pair of permutations agrees in ~1 place */
    T_ASSERT(same_ad < 20);
    T_ASSERT(fixed < 20);
    /* no shuffle: identity */
    stoker__perm id;
    stoker__perm_init(&id, n, 7, 3, false);
    for (uint64_t i = 0; i < n; i++)
        T_EQ_INT(stoker__perm_at(&id, i), i);
    /* rough uniformity: where does record 0 land, over many epochs */
    uint64_t first_half = 0;
    for (uint64_t e = 0; e < 2000; e++) {
        stoker__perm p;
        stoker__perm_init(&p, 10, 1, e, true);
        first_half += stoker__perm_at(&p, 0) < 5;
    }
    T_ASSERT(first_half > 850 && first_half < 1150);
}

static void check_rng(void)
{
    uint64_t a = stoker__sample_rng(1, 2, 3), b = stoker__sample_rng(1, 2, 3);
    T_EQ_INT(stoker__rng_next(&a), stoker__rng_next(&b));
    const uint64_t x = stoker__sample_rng(1, 2, 3);
    T_ASSERT(x != stoker__sample_rng(1, 2, 4));
    T_ASSERT(x != stoker__sample_rng(1, 3, 3));
    T_ASSERT(x != stoker__sample_rng(2, 2, 3));
}

int main(void)
{
    stoker__sampler s;
    T_ASSERT(!stoker__sampler_init(&s, 10, 0, 0, 1, true, false, 0));
    T_ASSERT(!stoker__sampler_init(&s, 10, 4, 2, 2, true, false, 0));
    T_ASSERT(!stoker__sampler_init(&s, 10, 4, 0, 0, true, false, 0));

    const uint64_t ns[] = {1, 2, 3, 5, 7, 10, 31, 64, 100, 257, 1000};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        check_perm(ns[i], 3, i);
    check_perm(100000, 9, 1);

    const uint64_t bs[] = {1, 2, 3, 7, 16, 64};
    const uint32_t ws[] = {1, 2, 3, 4, 8};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (size_t j = 0; j < sizeof bs / sizeof bs[0]; j++)
            for (size_t k = 0; k < sizeof ws / sizeof ws[0]; k++)
                for (int f = 0; f < 4; f++)
                    check_combo(ns[i], bs[j], ws[k], f & 1, f & 2);

    /* exactly once per epoch on one rank, N not a multiple of the batch */
    stoker__sampler one;
    T_ASSERT(stoker__sampler_init(&one, 103, 10, 0, 1, true, false, 5));
    T_EQ_INT(one.nbatches, 11);
    T_EQ_INT(stoker__sampler_batch_count(&one, 10), 3);
    T_EQ_INT(one.nrecords, 103);
    /* drop_last with N < batch x world: no batch at all */
    T_ASSERT(stoker__sampler_init(&one, 5, 4, 1, 2, true, true, 5));
    T_EQ_INT(one.nbatches, 0);
    /* N = 1, 3 ranks: every rank gets the one record */
    T_ASSERT(stoker__sampler_init(&one, 1, 4, 2, 3, true, false, 5));
    T_EQ_INT(one.nbatches, 1);
    T_EQ_INT(stoker__sampler_batch_count(&one, 0), 1);

    check_orders();
    check_rng();
    printf("sampler ok\n");
    return 0;
}
