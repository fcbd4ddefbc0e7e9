/* SPDX-License-Identifier: Apache-2.0 */
/* The local shard source's state, shared by its two files: shards.c (open, locate) and
 * shards_verify.c (stoker_dataset_verify). Internal to the source. */
#ifndef STOKER_SOURCE_SHARDS_H
#define STOKER_SOURCE_SHARDS_H

#include "format/manifest.h"
#include "source/shard_rec.h"
#include "source/source.h"

#include <pthread.h>

typedef struct stoker__shard_file {
    char *path;     /* directory + "/" + name, for messages */
    int fd;         /* buffered read-only descriptor */
    int direct_fd;  /* O_DIRECT descriptor, -1 until opened (under direct_lock) */
    int direct_err; /* the errno of a refused O_DIRECT open, 0 if not tried */
    uint8_t *index; /* the index entries, read at open (owned) */
    uint64_t records;
} stoker__shard_file;

typedef struct stoker__shards {
    char *dir; /* the directory holding the shards */
    int dirfd;
    stoker__manifest m;
    int32_t n;
    stoker__shard_file *files;
    uint64_t *first; /* first[i]: id of shard i's first record; first[n] = total */
    uint64_t max_record_size, max_records, max_shards;
    pthread_mutex_t key_lock, direct_lock;
    int keys_state; /* 0 not decoded, 1 decoded, <0 decoding failed (under key_lock) */
} stoker__shards;

/* Record id's key in m (NULL: it has none, or id is out of range), m's keys decoded on the
 * first call under `lock` (*state as keys_state); a failure to decode them is set on ds. The
 * local source's key op and the remote source's. */
const char *stoker__manifest_record_key(stoker_dataset *ds, stoker__manifest *m,
                                       pthread_mutex_t *lock, int *state, int64_t id);
/* Reads and parses the manifest of `path` and allocates the shard table (no shard file
 * opened): ds->state, ds->ops and ds->path are set, even on failure. */
int stoker__shards_begin(stoker_dataset *ds, const char *path, const stoker_config *cfg);
/* Opens and checks shard i (descriptor, size, header, footer, index); `err` receives the
 * message. */
int stoker__shards_open_file(stoker_dataset *ds, int32_t i, stoker__err *err);

/* stoker_dataset_verify of a local data set (shards_verify.c). */
int stoker__shards_verify(stoker_dataset *ds, const stoker_config *cfg, stoker_verify_fn fn,
                          void *user, int64_t *problems);

#endif
