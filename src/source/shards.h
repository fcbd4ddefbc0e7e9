/* SPDX-License-Identifier: Apache-2.0 */
/* The packed-shard source's state, shared by its files: shards.c (open: the manifest and
 * every shard's header, footer and index, read from local files or through the remote
 * transport, and parsed there only; locate), shards_verify.c (stoker_dataset_verify of local
 * files) and remote.c (the record path of a data set behind a URL: block holds for the
 * workers' reader, read-ahead, refetch). Internal to the source. */
#ifndef STOKER_SOURCE_SHARDS_H
#define STOKER_SOURCE_SHARDS_H

#include "format/manifest.h"
#ifdef STOKER_HAVE_CURL
#include "remote/object.h"
#endif
#include "source/shard_rec.h"
#include "source/source.h"

#include <pthread.h>

typedef struct stoker__shard_file {
    char *path;     /* directory + "/" + name, for messages */
    int fd;         /* buffered read-only descriptor */
    int direct_fd;  /* O_DIRECT descriptor, -1 until opened (under direct_lock) */
    int direct_err; /* the errno of a refused O_DIRECT open, 0 if not tried */
    uint8_t *index; /* the index entries, read at open (owned) */
#ifdef STOKER_HAVE_CURL
    stoker__robj *obj; /* a remote shard (fd -1): its object, the set's */
#endif
    uint64_t records;
} stoker__shard_file;

typedef struct stoker__shards_remote stoker__shards_remote; /* remote.c's */

typedef struct stoker__shards {
    char *dir; /* the directory holding the shards; a remote data set's URL (no trailing
                  slash, no manifest name) */
    int dirfd;
    stoker__manifest m;
    int32_t n;
    stoker__shard_file *files;
    uint64_t *first; /* first[i]: id of shard i's first record; first[n] = total */
    uint64_t max_record_size, max_records, max_shards;
    pthread_mutex_t key_lock, direct_lock;
    int keys_state; /* 0 not decoded, 1 decoded, <0 decoding failed (under key_lock) */
#ifdef STOKER_HAVE_CURL
    stoker__robjs *rs;          /* a remote data set: its objects; NULL for local files */
    stoker__shards_remote *rem; /* and the record path's state (remote.c) */
#endif
} stoker__shards;

/* Record id's key in m (NULL: it has none, or id is out of range), m's keys decoded on the
 * first call under `lock` (*state as keys_state); a failure to decode them is set on ds. The
 * local source's key op and the remote source's. */
const char *stoker__manifest_record_key(stoker_dataset *ds, stoker__manifest *m,
                                        pthread_mutex_t *lock, int *state, int64_t id);
/* Record id's label in its shard's index entry (8 little-endian bytes, kept while the data
 * set is open); the local and the remote source's label_at op. */
const void *stoker__shards_label_at(const stoker_dataset *ds, int64_t id);
/* Reads and parses the manifest of `path` (a local directory or manifest file, or a URL)
 * and allocates the shard table (no shard file opened): ds->state, ds->ops and ds->path
 * are set, even on failure. */
int stoker__shards_begin(stoker_dataset *ds, const char *path, const stoker_config *cfg);
/* Opens every shard (header, footer, index checked) and fills ds->info: the open of both
 * sources, local and remote. */
int stoker__shards_open(stoker_dataset *ds, const char *path, const stoker_config *cfg);
/* Frees the source's state (the ops' close, for both). */
void stoker__shards_close(stoker_dataset *ds);
/* Opens and checks shard i (descriptor, size, header, footer, index); `err` receives the
 * message. */
int stoker__shards_open_file(stoker_dataset *ds, int32_t i, stoker__err *err);

/* stoker_dataset_verify of a local data set (shards_verify.c). */
int stoker__shards_verify(stoker_dataset *ds, const stoker_config *cfg, stoker_verify_fn fn,
                          void *user, int64_t *problems);

#ifdef STOKER_HAVE_CURL
/* remote.c: the remote data set's operations, and the state of its record path, made once
 * the shards are open (after the set's objects) and freed by shards_close. */
extern const stoker__source_ops stoker__remote_shard_ops;
int stoker__shards_remote_begin(stoker_dataset *ds, const stoker_config *cfg);
void stoker__shards_remote_end(stoker__shards *S);
#endif

#endif
