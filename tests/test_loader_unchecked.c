/* SPDX-License-Identifier: Apache-2.0 */
/* JPEGs nobody checked: a data set written with the public writer without
 * STOKER_OPT_JPEG_CHECKED (as stoker-pack --no-validate packs, and as every HDF5 file is read)
 * holds JPEGs damaged inside their entropy-coded data below the rows a crop needs. libjpeg's
 * full decode warns about each ("Corrupt JPEG data: ..."); a decode that stops at the crop's
 * last row never reaches the damage. Under every transform such a record must fail its batch
 * naming it (on_corrupt error), or be replaced and counted (skip), on every epoch; a clean
 * record of such a data set is decoded to its end once, on its first use, and not again
 * (the workers' count of such decodes); a checked data set is never decoded past its crops. */
#include "jpegutil.h"
#include "test_loader_util.h"

#define N 16
#define W 160
#define H 320 /* tall: the eval crop's rows end well above the bottom */
#define SIZE 32

static const int64_t DAMAGED[] = {3, 9, 14};
#define NDAMAGED ((int)(sizeof DAMAGED / sizeof DAMAGED[0]))

static bool is_damaged(int64_t id)
{
    for (int i = 0; i < NDAMAGED; i++)
        if (DAMAGED[i] == id)
            return true;
    return false;
}

/* ---- the data sets ---- */

/* 40 bytes of the entropy-coded data damaged, ending 20 bytes before the EOI marker: in
 * the image's last rows. No marker is made or unmade (no 0xFF byte, nor the byte after
 * one, changes or appears), so libjpeg warns of corrupt data instead of failing. */
static void damage_tail(uint8_t *j, size_t n)
{
    T_ASSERT(n > 200 && j[n - 2] == 0xFF && j[n - 1] == 0xD9);
    for (size_t k = n - 62; k < n - 22; k++) {
        const uint8_t v = j[k] ^ (uint8_t)((0x5A + 17 * k) | 1);
        if (j[k] != 0xFF && j[k - 1] != 0xFF && v != 0xFF)
            j[k] = v;
    }
}

static uint8_t *g_jpeg[N];
static size_t g_size[N];

static void make_records(void)
{
    static const t_jpeg_kind k420 = {"420", 3, 2, 2, 0, 0, 0};
    for (int64_t id = 0; id < N; id++) {
        g_jpeg[id] = t_make_jpeg(&k420, W, H, 90, (uint64_t)id + 1, &g_size[id]);
        char msg[JMSG_LENGTH_MAX];
        if (is_damaged(id)) {
            damage_tail(g_jpeg[id], g_size[id]);
            const int verdict = t_jpeg_verdict(g_jpeg[id], g_size[id], UINT64_MAX, msg);
            printf("record %lld: libjpeg's full decode: %s\n", (long long)id, msg);
            T_EQ_INT(verdict, 1); /* a warning of damage, which libjpeg decodes through */
        } else {
            T_EQ_INT(t_jpeg_verdict(g_jpeg[id], g_size[id], UINT64_MAX, msg), 0);
        }
    }
}

static void write_set(const char *path, int checked, bool with_damaged)
{
    stoker_writer *w = t_jpeg_writer_checked(path, 60000, checked); /* several shards */
    for (int64_t id = 0; id < N; id++) {
        if (!with_damaged && is_damaged(id)) { /* a clean copy of another record */
            T_OK(stoker_writer_add(w, g_jpeg[0], g_size[0], id, NULL));
            continue;
        }
        T_OK(stoker_writer_add(w, g_jpeg[id], g_size[id], id, NULL));
    }
    T_OK(stoker_writer_finish(w));
    stoker_writer_destroy(w);
}

static stoker_config *cfg_for(int32_t transform, int32_t policy, int64_t batch, int64_t threads)
{
    stoker_config *cfg = tl_cfg(batch, threads);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SHUFFLE, 0));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_TRANSFORM, transform));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SIZE, SIZE));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DTYPE, STOKER_DTYPE_UINT8));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_ON_CORRUPT, policy));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_DECODER, STOKER_DECODER_CPU));
    return cfg;
}

static const int32_t TRANSFORMS[] = {STOKER_TRANSFORM_TRAIN, STOKER_TRANSFORM_EVAL,
                                     STOKER_TRANSFORM_RESIZE};
static const char *const TNAMES[] = {"train", "eval", "resize"};

/* on_corrupt error, one record per batch: a damaged record's batch fails naming its shard
 * and the record, on every epoch; every other batch holds its own record. */
static void check_error(const char *path, int t)
{
    stoker_config *cfg = cfg_for(TRANSFORMS[t], STOKER_ON_CORRUPT_ERROR, 1, 2);
    stoker_loader *l = tl_open(path, cfg);
    stoker_config_destroy(cfg);
    for (int epoch = 0; epoch < 2; epoch++) {
        stoker_batch *b = NULL;
        int64_t pos = 0;
        int rc;
        while ((rc = stoker_loader_next(l, &b)) != STOKER_END) {
            const int64_t id = pos++;
            if (is_damaged(id)) {
                if (rc == 0)
                    T_FAIL("%s, epoch %d: damaged record %lld delivered (status 0, want "
                           "STOKER_E_CORRUPT)",
                           TNAMES[t], epoch, (long long)id);
                T_EQ_RC(rc, STOKER_E_CORRUPT);
                char want[48];
                snprintf(want, sizeof want, ": record %lld: JPEG: ", (long long)id);
                T_CONTAINS(stoker_loader_errmsg(l), want);
                T_CONTAINS(stoker_loader_errmsg(l), ".stk");
                T_CONTAINS(stoker_loader_errmsg(l), "Corrupt JPEG data");
                if (epoch == 0 && id == DAMAGED[0])
                    printf("%s: %s\n", TNAMES[t], stoker_loader_errmsg(l));
                continue;
            }
            if (rc != 0)
                T_FAIL("%s, epoch %d: clean record %lld failed: %s", TNAMES[t], epoch,
                       (long long)id, stoker_loader_errmsg(l));
            T_EQ_INT(stoker_batch_ids(b)[0], id);
            T_OK(stoker_batch_release(b));
        }
        T_EQ_INT(pos, N);
    }
    T_EQ_INT(tl_stats(l).skipped, 0);
    /* every record on its first use, a damaged one again on the second epoch */
    T_ASSERT(tl_stats(l).full_checks >= N + NDAMAGED);
    stoker_loader_destroy(l);
}

/* on_corrupt skip: every damaged position holds a replacement, counted; nothing fails. */
static void check_skip(const char *path, int t)
{
    stoker_config *cfg = cfg_for(TRANSFORMS[t], STOKER_ON_CORRUPT_SKIP, 4, 2);
    stoker_loader *l = tl_open(path, cfg);
    stoker_config_destroy(cfg);
    int64_t replaced = 0;
    for (int epoch = 0; epoch < 2; epoch++) {
        stoker_batch *b = NULL;
        int64_t pos = 0;
        int rc;
        while ((rc = stoker_loader_next(l, &b)) != STOKER_END) {
            if (rc != 0)
                T_FAIL("%s, epoch %d: batch failed under skip: %s", TNAMES[t], epoch,
                       stoker_loader_errmsg(l));
            for (int64_t j = 0; j < stoker_batch_count(b); j++, pos++) {
                const int64_t id = stoker_batch_ids(b)[j];
                if (is_damaged(id))
                    T_FAIL("%s, epoch %d: damaged record %lld delivered at position %lld",
                           TNAMES[t], epoch, (long long)id, (long long)pos);
                if (is_damaged(pos))
                    replaced++;
                else
                    T_EQ_INT(id, pos);
            }
            T_OK(stoker_batch_release(b));
        }
    }
    T_EQ_INT(replaced, 2 * NDAMAGED);
    T_EQ_INT(tl_stats(l).skipped, replaced);
    stoker_loader_destroy(l);
}

/* `epochs` epochs of a clean data set, one worker (so that no record is decoded twice at
 * once): the images decoded to their end (stats.full_checks). */
static int64_t clean_run(const char *path, int t, int epochs)
{
    stoker_config *cfg = cfg_for(TRANSFORMS[t], STOKER_ON_CORRUPT_ERROR, 4, 1);
    stoker_loader *l = tl_open(path, cfg);
    stoker_config_destroy(cfg);
    for (int epoch = 0; epoch < epochs; epoch++) {
        stoker_batch *b = NULL;
        int rc;
        while ((rc = stoker_loader_next(l, &b)) != STOKER_END) {
            if (rc != 0)
                T_FAIL("%s: %s", TNAMES[t], stoker_loader_errmsg(l));
            T_OK(stoker_batch_release(b));
        }
    }
    const int64_t n = tl_stats(l).full_checks;
    stoker_loader_destroy(l);
    return n;
}

int main(void)
{
    char *dir = t_mkdtemp("loader-unchecked");
    char unchecked[4200], clean[4200], checked[4200];
    snprintf(unchecked, sizeof unchecked, "%s/unchecked", dir);
    snprintf(clean, sizeof clean, "%s/clean", dir);
    snprintf(checked, sizeof checked, "%s/checked", dir);
    make_records();
    write_set(unchecked, 0, true);
    write_set(clean, 0, false);
    write_set(checked, 1, false);
    for (int t = 0; t < 3; t++) {
        check_error(unchecked, t);
        check_skip(unchecked, t);
        /* a clean record of an unchecked data set: decoded to its end once, whatever the
         * epochs; of a checked one, never (its crops stop where they end) */
        const int64_t one = clean_run(clean, t, 1), three = clean_run(clean, t, 3);
        printf("%s: decoded to the end: %lld after 1 epoch, %lld after 3 (%d records)\n", TNAMES[t],
               (long long)one, (long long)three, N);
        T_EQ_INT(three, N);
        T_EQ_INT(one, N);
        T_EQ_INT(clean_run(checked, t, 2), 0);
    }
    for (int64_t id = 0; id < N; id++)
        free(g_jpeg[id]);
    t_rmrf(dir);
    free(dir);
    printf("test_loader_unchecked: ok\n");
    return 0;
}
