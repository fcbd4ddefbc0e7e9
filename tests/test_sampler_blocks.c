/* SPDX-License-Identifier: Apache-2.0 */
/* The block order (STOKER_ORDER_BLOCKS): each epoch a permutation of all ids in which every
 * block of consecutive ids takes consecutive positions (the partial last block included),
 * drawn from (seed, epoch) alone, then padded and cut into rank slices by the same rule as
 * the record order; and the loader delivering it, state save/restore included. */
#include "source/dataset.h"
#include "loader/sampler.h"
#include "test_loader_util.h"

#ifdef STOKER_HAVE_HDF5
#include <hdf5.h>
#endif

/* The whole order of one epoch, checked to be a permutation with contiguous blocks. */
static void check_order(uint64_t n, uint64_t k, uint64_t seed, uint64_t epoch, uint64_t *out)
{
    stoker__order o;
    stoker__order_init(&o, n, k, seed, epoch, true);
    uint8_t *seen = calloc(n + 1, 1);
    for (uint64_t i = 0; i < n; i++) {
        const uint64_t x = stoker__order_at(&o, i);
        if (x >= n || seen[x])
            T_FAIL("n=%" PRIu64 " k=%" PRIu64 " position %" PRIu64 ": id %" PRIu64
                   " out of range or repeated",
                   n, k, i, x);
        seen[x] = 1;
        out[i] = x;
    }
    /* blocks are contiguous: a block starts wherever the block number changes, and each
     * block number appears in exactly one run of the block's full size */
    uint64_t runs = 0;
    for (uint64_t i = 0; i < n; runs++) {
        const uint64_t b = out[i] / k, size = b == n / k ? n % k : k;
        for (uint64_t j = 0; j < size; j++)
            if (i + j >= n || out[i + j] / k != b)
                T_FAIL("n=%" PRIu64 " k=%" PRIu64 ": block %" PRIu64 " not contiguous at %" PRIu64,
                       n, k, b, i);
        i += size;
    }
    T_EQ_INT(runs, n / k + (n % k != 0));
    free(seen);
}

static void check_orders(void)
{
    const uint64_t ns[] = {1, 2, 5, 63, 64, 65, 100, 128, 1000, 2000, 4099};
    const uint64_t ks[] = {1, 3, 7, 64, 100, 5000};
    uint64_t *a = malloc(5000 * sizeof *a), *b = malloc(5000 * sizeof *b);
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (size_t j = 0; j < sizeof ks / sizeof ks[0]; j++)
            for (uint64_t e = 0; e < 3; e++) {
                check_order(ns[i], ks[j], 11, e, a);
                check_order(ns[i], ks[j], 11, e, b); /* a pure function of its inputs */
                T_ASSERT(memcmp(a, b, ns[i] * sizeof *a) == 0);
            }

    /* other epochs and seeds give other orders, both of blocks and inside blocks */
    const uint64_t n = 2000, k = 64;
    check_order(n, k, 11, 0, a);
    check_order(n, k, 11, 1, b);
    T_ASSERT(memcmp(a, b, n * sizeof *a) != 0);
    check_order(n, k, 12, 0, b);
    T_ASSERT(memcmp(a, b, n * sizeof *a) != 0);
    uint64_t sorted_blocks = 0, in_order = 0, tail_last = 0;
    for (uint64_t i = 0; i + k <= n; i += k) {
        bool ascending = true;
        for (uint64_t j = 1; j < k && i + j < n; j++)
            ascending &= a[i + j] == a[i + j - 1] + 1;
        in_order += ascending;
        sorted_blocks += i && a[i] / k == a[i - k] / k + 1;
    }
    T_ASSERT(in_order == 0);     /* records shuffled inside their blocks */
    T_ASSERT(sorted_blocks < 5); /* blocks shuffled among themselves */
    /* the partial block (2000 = 31 x 64 + 16) is placed by the permutation, not always last */
    for (uint64_t e = 0; e < 8; e++) {
        check_order(n, k, 5, e, a);
        tail_last += a[n - 1] >= n / k * k;
    }
    T_ASSERT(tail_last < 8);

    /* no shuffle: the identity, whatever the block size */
    stoker__order o;
    stoker__order_init(&o, 1000, 64, 3, 2, false);
    for (uint64_t i = 0; i < 1000; i++)
        T_EQ_INT(stoker__order_at(&o, i), i);
    /* block 0: exactly the record permutation */
    stoker__perm p;
    stoker__order_init(&o, 1000, 0, 3, 2, true);
    stoker__perm_init(&p, 1000, 3, 2, true);
    for (uint64_t i = 0; i < 1000; i++)
        T_EQ_INT(stoker__order_at(&o, i), stoker__perm_at(&p, i));
    free(a);
    free(b);
}

/* Every rank's batches against the rule applied to the block order: Q[i] = P[i mod N],
 * global batches of B x W, rank r's slice of each; each id once per epoch (padding aside). */
static void check_ranks(uint64_t n, uint64_t bs, uint32_t w, bool drop_last, uint64_t k)
{
    uint32_t *count = calloc(n, sizeof *count);
    int64_t *got = malloc(bs * sizeof *got);
    stoker__order o;
    stoker__order_init(&o, n, k, 77, 3, true);
    uint64_t per_rank = UINT64_MAX, seen = 0;
    for (uint32_t r = 0; r < w; r++) {
        stoker__sampler s;
        T_ASSERT(stoker__sampler_init(&s, n, bs, r, w, true, drop_last, 77));
        stoker__sampler_set_blocks(&s, k);
        if (per_rank != UINT64_MAX)
            T_EQ_INT(s.nrecords, per_rank); /* the same count on every rank */
        per_rank = s.nrecords;
        uint64_t total = 0;
        for (uint64_t b = 0; b < s.nbatches; b++) {
            const uint64_t c = stoker__sampler_batch_count(&s, b);
            const uint64_t start = b * bs * w + r * c;
            stoker__sampler_batch(&s, 3, b, got);
            for (uint64_t j = 0; j < c; j++) {
                T_EQ_INT(got[j], stoker__order_at(&o, (start + j) % n));
                count[got[j]]++;
            }
            total += c;
        }
        T_EQ_INT(total, s.nrecords);
        seen += total;
    }
    if (drop_last) {
        T_EQ_INT(seen, n / (bs * w) * (bs * w));
        for (uint64_t i = 0; i < n; i++)
            T_ASSERT(count[i] <= 1);
    } else {
        const uint64_t padded = (n + w - 1) / w * w;
        T_EQ_INT(seen, padded);
        for (uint64_t i = 0; i < n; i++) {
            /* padding repeats the order's first padded - n ids, once more each */
            const uint64_t extra = padded - n;
            uint64_t want = 1;
            for (uint64_t q = 0; q < extra; q++)
                want += stoker__order_at(&o, q % n) == i;
            T_EQ_INT(count[i], want);
        }
    }
    free(count);
    free(got);
}

/* The loader: ids delivered in the sampler's block order; a saved state resumes it. */
static void check_loader(void)
{
    char *dir = t_mkdtemp("sampler-blocks");
    char path[4200];
    snprintf(path, sizeof path, "%s/ds", dir);
    const int64_t n = 300; /* 4 blocks of 64 and one of 44 */
    tl_make(path, n, 40, 0, 0);

    stoker_dataset *ds = NULL;
    T_OK(stoker_dataset_open(&ds, path, NULL));
    T_EQ_INT(stoker__dataset_block_records(ds), 0); /* shards: no natural block */
    stoker_dataset_close(ds);

    stoker_config *cfg = tl_cfg(16, 2);
    int64_t v = -1;
    T_OK(stoker_config_get_int(cfg, STOKER_OPT_ORDER, &v));
    T_EQ_INT(v, STOKER_ORDER_RECORDS);
    T_EQ_RC(stoker_config_set_int(cfg, STOKER_OPT_ORDER, 3), STOKER_E_INVALID);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_ORDER, 0));
    T_OK(stoker_config_get_int(cfg, STOKER_OPT_ORDER, &v));
    T_EQ_INT(v, STOKER_ORDER_RECORDS);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_ORDER, STOKER_ORDER_BLOCKS));

    tl_run *all = calloc(1, sizeof *all), *rest = calloc(1, sizeof *rest);
    stoker_loader *l = tl_open(path, cfg);
    tl_collect(l, all, 2, 1000, 40);
    stoker_loader_destroy(l);
    T_EQ_INT(all->nids, 2 * n);
    for (int64_t e = 0; e < 2; e++) {
        stoker__order o;
        stoker__order_init(&o, (uint64_t)n, STOKER__BLOCK_DEFAULT, 1234, (uint64_t)e, true);
        for (int64_t i = 0; i < n; i++)
            T_EQ_INT(all->ids[e * n + i], stoker__order_at(&o, (uint64_t)i));
    }

    /* save after 5 batches, restore into a loader with the record order: the state's block
     * order wins, as its seed and shuffle do */
    l = tl_open(path, cfg);
    tl_run *head = calloc(1, sizeof *head);
    tl_collect(l, head, 1, 5, 40);
    uint8_t state[STOKER_STATE_SIZE];
    T_OK(stoker_loader_state_save(l, state, sizeof state, NULL));
    stoker_loader_destroy(l);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_ORDER, STOKER_ORDER_RECORDS));
    l = tl_open(path, cfg);
    T_OK(stoker_loader_state_restore(l, state, sizeof state));
    tl_collect(l, rest, 2, 1000, 40);
    stoker_loader_destroy(l);
    tl_same(all, 5, rest);

    free(all);
    free(rest);
    free(head);
    stoker_config_destroy(cfg);
    t_rmrf(dir);
    free(dir);
}

#ifdef STOKER_HAVE_HDF5
enum { H5_ROWS = 96, H5_RS = 40 };

/* H5_ROWS records uint8 [H5_RS] in an HDF5 file chunked by `rows` records: the block order's
 * blocks are the chunks. Bytes and labels as tl_make's. */
static void make_h5(const char *path, hsize_t rows)
{
    static uint8_t img[H5_ROWS][H5_RS];
    int64_t labels[H5_ROWS];
    for (int i = 0; i < H5_ROWS; i++) {
        for (int k = 0; k < H5_RS; k++)
            img[i][k] = tl_byte(i, (uint64_t)k);
        labels[i] = tl_label(i);
    }
    const hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t dims[2] = {H5_ROWS, H5_RS}, chunk[2] = {rows, H5_RS}, n = H5_ROWS;
    const hid_t sp = H5Screate_simple(2, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    T_ASSERT(f >= 0 && sp >= 0 && dcpl >= 0 && H5Pset_chunk(dcpl, 2, chunk) >= 0);
    hid_t d = H5Dcreate2(f, "images", H5T_STD_U8LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    T_ASSERT(d >= 0 && H5Dwrite(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, img) >= 0);
    H5Dclose(d);
    const hid_t lsp = H5Screate_simple(1, &n, NULL);
    d = H5Dcreate2(f, "labels", H5T_STD_I64LE, lsp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    T_ASSERT(d >= 0 && H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels) >= 0);
    H5Dclose(d);
    H5Sclose(lsp);
    H5Pclose(dcpl);
    H5Sclose(sp);
    T_ASSERT(H5Fclose(f) >= 0);
}

/* A block order state pins its blocks: the same records chunked by 4 and by 16 rows are two
 * orders, so a state saved over one is refused by a loader over the other, naming both
 * lengths, and continues exactly over a copy with the same chunks. A version-1 state (which
 * holds no block length) is taken for the record order and refused for the block order. */
static void check_state_pins_blocks(void)
{
    char *dir = t_mkdtemp("sampler-blocks-h5");
    char p4[4200], p4b[4200], p16[4200];
    snprintf(p4, sizeof p4, "%s/c4.h5", dir);
    snprintf(p4b, sizeof p4b, "%s/c4-copy.h5", dir);
    snprintf(p16, sizeof p16, "%s/c16.h5", dir);
    make_h5(p4, 4);
    make_h5(p4b, 4);
    make_h5(p16, 16);
    stoker_config *cfg = tl_cfg(8, 2);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_ORDER, STOKER_ORDER_BLOCKS));
    tl_run *all = calloc(1, sizeof *all), *rest = calloc(1, sizeof *rest);
    tl_run *head = calloc(1, sizeof *head);
    tl_run_with(p4, cfg, all, 2, H5_RS);

    stoker_loader *l = tl_open(p4, cfg);
    tl_collect(l, head, 1, 3, H5_RS);
    uint8_t state[STOKER_STATE_SIZE];
    T_OK(stoker_loader_state_save(l, state, sizeof state, NULL));
    stoker_loader_destroy(l);

    l = tl_open(p16, cfg);
    T_EQ_RC(stoker_loader_state_restore(l, state, sizeof state), STOKER_E_STATE);
    T_CONTAINS(stoker_loader_errmsg(l), "the state was saved with blocks of 4 records; this "
                                        "loader's order uses blocks of 16 (block_size or "
                                        "source differs)");
    stoker_loader_destroy(l);

    l = tl_open(p4b, cfg);
    T_OK(stoker_loader_state_restore(l, state, sizeof state));
    tl_collect(l, rest, 2, 1000, H5_RS);
    stoker_loader_destroy(l);
    tl_same(all, 3, rest);

    /* version 1: the same layout with the version 1, bytes 52..55 zero (the high half of the
     * batch size then) and the CRC keyed with the record count alone */
    uint8_t v1[STOKER_STATE_SIZE], key[8];
    memcpy(v1, state, sizeof v1);
    stoker__put_u32(v1 + 8, 1);
    stoker__put_u32(v1 + 52, 0);
    stoker__put_u64(key, H5_ROWS);
    stoker__put_u32(v1 + 60, stoker_crc32c(stoker_crc32c(0, key, 8), v1, 60));
    l = tl_open(p4b, cfg);
    T_EQ_RC(stoker_loader_state_restore(l, v1, sizeof v1), STOKER_E_FORMAT);
    T_CONTAINS(stoker_loader_errmsg(l), "version 1");
    T_CONTAINS(stoker_loader_errmsg(l), "block order");
    /* the record order's version-1 state is taken, as before */
    stoker__put_u32(v1 + 12, stoker__get_u32(v1 + 12) & ~4u);
    stoker__put_u32(v1 + 60, stoker_crc32c(stoker_crc32c(0, key, 8), v1, 60));
    T_OK(stoker_loader_state_restore(l, v1, sizeof v1));
    int64_t v = -1, pos = -1;
    T_OK(stoker_loader_get_int(l, STOKER_OPT_ORDER, &v));
    T_EQ_INT(v, STOKER_ORDER_RECORDS);
    T_OK(stoker_loader_position(l, NULL, &pos));
    T_EQ_INT(pos, 3);
    stoker_loader_destroy(l);

    free(all);
    free(rest);
    free(head);
    stoker_config_destroy(cfg);
    t_rmrf(dir);
    free(dir);
}
#endif

int main(void)
{
    check_orders();
    const uint64_t ns[] = {1, 7, 64, 100, 257, 1000};
    const uint64_t bs[] = {1, 5, 32};
    const uint32_t ws[] = {1, 2, 3, 8};
    const uint64_t ks[] = {1, 16, 64};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (size_t j = 0; j < sizeof bs / sizeof bs[0]; j++)
            for (size_t q = 0; q < sizeof ws / sizeof ws[0]; q++)
                for (size_t m = 0; m < sizeof ks / sizeof ks[0]; m++)
                    for (int d = 0; d < 2; d++)
                        check_ranks(ns[i], bs[j], ws[q], d, ks[m]);
    check_loader();
#ifdef STOKER_HAVE_HDF5
    check_state_pins_blocks();
#endif
    printf("sampler blocks ok\n");
    return 0;
}
