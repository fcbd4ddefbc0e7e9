/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for stoker_loader_state_restore: arbitrary bytes are restored into a real
 * loader over a tiny data set (made once, in a temporary directory); they must give a clean
 * error or a valid restore, never a crash, and after a successful restore the loader must
 * go on delivering well-formed batches.
 *
 * Input: byte 0 chooses the mode (modulo 3), the rest is the state blob.
 *   0: the blob as it is.
 *   1: the blob with its record count (bytes 56..59) and CRC32C (bytes 60..63) fixed up
 *      when it is at least STOKER_STATE_SIZE bytes (keyed as the blob's version keys it,
 *      with version 2's block length at 52..55), so that mutations reach the fields behind
 *      the checksum.
 *   2: as 1, with the rank, world size, batch size and block length (the one this loader's
 *      order takes for the blob's flags) fixed up too, so that mutations of the seed,
 *      flags, epoch and position reach the sampler.
 * Restore must refuse an epoch near 2^63 (it would come back negative in batches); the
 * check below that every batch's epoch is >= 0 holds it to that. */
#include "common/common.h"
#include "loader/sampler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define RECORDS 37
#define RECORD_SIZE 16
#define BATCH 4

static char g_dir[4096];
static stoker_loader *g_loader;

static void cleanup(void)
{
    stoker_loader_destroy(g_loader);
    char path[4200];
    snprintf(path, sizeof path, "%s/manifest.stk", g_dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/shard-00000.stk", g_dir);
    unlink(path);
    rmdir(g_dir);
}

__attribute__((constructor)) static void setup(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/fuzz-state-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(g_dir))
        abort(); /* the harness itself is broken, not the library */
    stoker_config *cfg = NULL;
    stoker_writer *w = NULL;
    if (stoker_config_create(&cfg) != 0)
        abort();
    stoker_config_set_int(cfg, STOKER_OPT_FSYNC, 0);
    stoker_config_set_int(cfg, STOKER_OPT_OVERWRITE, 1);
    if (stoker_writer_create(&w, g_dir, cfg) != 0)
        abort();
    const int64_t shape[1] = {RECORD_SIZE};
    if (stoker_writer_set_field(w, STOKER_FIELD_RAW, STOKER_DTYPE_UINT8, 1, shape) != 0)
        abort();
    for (int64_t id = 0; id < RECORDS; id++) {
        uint8_t rec[RECORD_SIZE];
        memset(rec, (int)id, sizeof rec);
        if (stoker_writer_add(w, rec, sizeof rec, id % 5, NULL) != 0)
            abort();
    }
    if (stoker_writer_finish(w) != 0)
        abort();
    stoker_writer_destroy(w);
    stoker_config_destroy(cfg);

    if (stoker_config_create(&cfg) != 0)
        abort();
    stoker_config_set_int(cfg, STOKER_OPT_BATCH_SIZE, BATCH);
    stoker_config_set_int(cfg, STOKER_OPT_THREADS, 1);
    stoker_config_set_int(cfg, STOKER_OPT_DEPTH, 2);
    stoker_config_set_int(cfg, STOKER_OPT_SEED, 99);
    stoker_config_set_int(cfg, STOKER_OPT_DEVICE, -1);
    if (stoker_loader_create(&g_loader, g_dir, cfg) != 0)
        abort();
    stoker_config_destroy(cfg);
    atexit(cleanup);
}

/* One batch must be well formed: count, ids in range, every byte the id's. */
static void check_batch(const stoker_batch *b)
{
    const int64_t count = stoker_batch_count(b);
    if (count < 1 || count > BATCH || stoker_batch_nbytes(b) != (uint64_t)count * RECORD_SIZE)
        abort();
    const int64_t *ids = stoker_batch_ids(b), *labels = stoker_batch_labels(b);
    const uint8_t *d = stoker_batch_data(b);
    for (int64_t j = 0; j < count; j++) {
        if (ids[j] < 0 || ids[j] >= RECORDS || labels[j] != ids[j] % 5)
            abort();
        for (int k = 0; k < RECORD_SIZE; k++)
            if (d[j * RECORD_SIZE + k] != (uint8_t)ids[j])
                abort();
    }
    if (stoker_batch_epoch(b) < 0 || stoker_batch_position(b) < 0)
        abort();
}

/* The block length this loader's order takes for a blob's flags: the shards' default
 * blocks when shuffled in the block order, else none. */
static uint32_t run_of(const uint8_t *p)
{
    return (stoker__get_u32(p + 12) & 5u) == 5u ? STOKER__BLOCK_DEFAULT : 0;
}

/* The CRC32C of a state blob, keyed with the data set's record count and (after version 1)
 * the blob's block length, as the loader's. */
static void seal(uint8_t *p)
{
    uint8_t key[16];
    stoker__put_u64(key, RECORDS);
    stoker__put_u64(key + 8, stoker__get_u32(p + 52));
    stoker__put_u32(p + 56, RECORDS);
    const size_t keyed = stoker__get_u32(p + 8) == 1 ? 8 : 16;
    stoker__put_u32(p + 60, stoker_crc32c(stoker_crc32c(0, key, keyed), p, 60));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t mode = data[0] % 3;
    data++;
    size--;
    uint8_t *blob = malloc(size + 1);
    memcpy(blob, data, size);
    if (mode == 2 && size >= STOKER_STATE_SIZE) {
        stoker__put_u32(blob + 40, 0);
        stoker__put_u32(blob + 44, 1);
        if (stoker__get_u32(blob + 8) == 1) {
            stoker__put_u64(blob + 48, BATCH);
        } else {
            stoker__put_u32(blob + 48, BATCH);
            stoker__put_u32(blob + 52, run_of(blob));
        }
    }
    if (mode >= 1 && size >= STOKER_STATE_SIZE) {
        seal(blob);
    }

    stoker_loader *l = g_loader;
    if (stoker_loader_set_epoch(l, 0) != 0) /* the same starting point for every input */
        abort();
    const int rc = stoker_loader_state_restore(l, blob, size);
    free(blob);
    if (rc != 0) {
        if (rc != STOKER_E_INVALID && rc != STOKER_E_FORMAT && rc != STOKER_E_CORRUPT &&
            rc != STOKER_E_STATE)
            abort(); /* an undocumented status */
        if (stoker_loader_errmsg(l)[0] == '\0')
            abort(); /* every failure says why */
        return 0;
    }
    /* restored: the rest of this epoch and the start of the next one come out whole */
    int64_t nbatches = 0;
    if (stoker_loader_num_batches(l, &nbatches) != 0 || nbatches < 0 || nbatches > RECORDS)
        abort();
    int ends = 0;
    for (int64_t k = 0; k <= nbatches + 2 && ends < 2; k++) {
        stoker_batch *b = NULL;
        const int r = stoker_loader_next(l, &b);
        if (r == STOKER_END) {
            ends++;
            continue;
        }
        if (r != 0 || !b)
            abort();
        check_batch(b);
        if (stoker_batch_release(b) != 0)
            abort();
    }
    return 0;
}
