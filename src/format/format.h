/* The shard format, version 1: on-disk constants, the manifest's parsed form, and the
 * layout of an open data set. docs/FORMAT.md is the byte-by-byte specification; keep the
 * two in step. Internal to src/format/. */
#ifndef STOKER_FORMAT_FORMAT_H
#define STOKER_FORMAT_FORMAT_H

#include "common/common.h"
#include "format/dataset.h"

#include <pthread.h>
#include <stdatomic.h>

/* ---- shard file ---- */
#define STK_HEADER_MAGIC "STKSHARD" /* 8 bytes at offset 0 */
#define STK_FOOTER_MAGIC "STKINDEX" /* 8 bytes at the footer's start */
#define STK_HEADER_REGION 4096u     /* header region; payloads start here */
#define STK_HEADER_SIZE 64u         /* the fixed header at the region's start */
#define STK_FOOTER_SIZE 64u         /* the fixed footer at the file's end */
#define STK_ENTRY_SIZE 32u          /* one record's index entry */
#define STK_MIN_SHARD (STK_HEADER_REGION + STK_FOOTER_SIZE)

/* Header fields (offsets within the header). */
#define STK_H_MAGIC 0
#define STK_H_VERSION 8
#define STK_H_ALIGN 12
#define STK_H_SHARD 16
#define STK_H_REGION 20
#define STK_H_CRC 60

/* Footer fields (offsets within the footer). */
#define STK_F_MAGIC 0
#define STK_F_VERSION 8
#define STK_F_SHARD 12
#define STK_F_COUNT 16
#define STK_F_INDEX_OFF 24
#define STK_F_INDEX_SIZE 32
#define STK_F_PAYLOAD 40
#define STK_F_INDEX_CRC 48
#define STK_F_ALIGN 52
#define STK_F_CRC 60

/* Index entry fields. */
#define STK_E_OFFSET 0
#define STK_E_LENGTH 8
#define STK_E_LABEL 16
#define STK_E_CRC 24
#define STK_E_FLAGS 28

/* ---- data set directory ---- */
#define STK_MANIFEST_NAME "manifest.stk"
#define STK_MANIFEST_MAGIC "stoker-manifest"
#define STK_MANIFEST_MAX (UINT64_C(1) << 32) /* bytes; the whole manifest is loaded */
#define STK_NAME_MAX 255                     /* a shard file name */
#define STK_WRITE_CHUNK (8u << 20)           /* staging / streaming buffer size */

/* A growable byte buffer (stoker__malloc'd). */
typedef struct stoker__buf {
    char *data;
    size_t len, cap;
} stoker__buf;

int stoker__buf_append(stoker__buf *b, const void *p, size_t n);
int stoker__buf_printf(stoker__buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void stoker__buf_free(stoker__buf *b);
/* Appends `s` escaped for a manifest line: '\\' "\\\\", '\n' "\\n", '\t' "\\t", other bytes
 * below 0x20 and 0x7F as "\\xHH"; every other byte (UTF-8 included) as is. */
int stoker__manifest_escape(stoker__buf *b, const char *s);

/* A manifest's shard line. `name` points into the manifest text. */
typedef struct stoker__mshard {
    const char *name;
    uint64_t records;
    uint64_t bytes;
    uint32_t crc; /* CRC32C of the whole shard file */
} stoker__mshard;

/* A parsed manifest. Names and class names point into `text`, which parsing edits in place
 * (NUL terminators, unescaping); keys are decoded lazily (stoker__manifest_keys). */
typedef struct stoker__manifest {
    char *text;
    size_t size;
    uint32_t version;
    uint32_t align;
    bool jpeg_checked; /* version 2: "checked jpeg", every JPEG decoded without damage */
    int32_t kind, dtype, ndim;
    int64_t shape[STOKER_MAX_DIMS];
    uint64_t records;
    uint32_t nclasses;
    const char **classes;
    uint32_t nshards;
    stoker__mshard *shards;
    uint64_t nkeys;     /* 0 (no record has a key) or records */
    size_t keys_begin;  /* the first key line's offset in text */
    size_t keys_end;    /* one past the last key line */
    uint64_t *key_offs; /* after decoding: per record, offset of its key or UINT64_MAX */
} stoker__manifest;

/* Parses manifest text (ownership of `text`, stoker__malloc'd, passes to `m`, even on
 * failure). `what` names the file in messages. Counts are checked against the limits before
 * anything is allocated. */
int stoker__manifest_parse(stoker__manifest *m, char *text, size_t size, const char *what,
                           uint64_t max_shards, uint64_t max_records, stoker__err *err);
/* Decodes every key line in place and fills key_offs. */
int stoker__manifest_keys(stoker__manifest *m, const char *what, stoker__err *err);
void stoker__manifest_free(stoker__manifest *m);
/* Reads a whole manifest file from an open descriptor (size-limited). */
int stoker__manifest_load(int fd, const char *what, char **text, size_t *size, stoker__err *err);

/* Size in bytes of each record of a raw field (overflow-checked); false on overflow. */
bool stoker__raw_size(int32_t dtype, int32_t ndim, const int64_t *shape, uint64_t *size);

/* ---- an open data set ---- */

/* One source kind behind stoker_dataset (the shard format here; HDF5 in its own file). */
typedef struct stoker__source_ops {
    const char *name;
    int (*locate)(const stoker_dataset *ds, int64_t id, stoker__recloc *loc);
    int (*direct_fd)(stoker_dataset *ds, int32_t shard);
    const char *(*key)(stoker_dataset *ds, int64_t id);
    void (*close)(stoker_dataset *ds);
    int (*fetch)(stoker_dataset *ds, int64_t id, const stoker__recloc *loc, uint8_t *dst,
                 const uint8_t **out, stoker__err *err); /* NULL: every record is one extent */
    uint64_t (*block_records)(const stoker_dataset *ds); /* NULL: no natural block */
    /* Fetched records through the worker's reader (dataset.h); NULL: fetched directly. */
    int (*plan)(stoker_dataset *ds, int64_t id, const stoker__recloc *loc, uint64_t round,
                stoker__fetch_read *out, uint32_t cap, uint32_t *n);
    void (*landed)(stoker_dataset *ds, uint32_t cookie, uint64_t length, int64_t res);
    bool (*serialised)(const stoker_dataset *ds); /* NULL: never */
} stoker__source_ops;

typedef struct stoker__shard {
    char *path;     /* directory + "/" + name, for messages */
    int fd;         /* buffered read-only descriptor */
    int direct_fd;  /* O_DIRECT descriptor, -1 until opened (under direct_lock) */
    int direct_err; /* the errno of a refused O_DIRECT open, 0 if not tried */
    const uint8_t *index; /* the index entries, read at open (owned) */
    uint64_t records;
    uint64_t index_off;
} stoker__shard;

struct stoker_dataset {
    const stoker__source_ops *ops;
    char *path; /* as given to open */
    char *dir;  /* the directory holding the shards */
    int dirfd;
    stoker__err err; /* open's failure; written only while opening */
    uint64_t serial; /* unique per handle: tells a thread's failure record apart (dataset.c) */
    pthread_mutex_t key_lock;
    pthread_mutex_t direct_lock;
    bool ready;     /* open succeeded: every shard was checked */
    int keys_state; /* 0 not decoded, 1 decoded, <0 decoding failed (under key_lock) */
    uint64_t max_record_size;
    uint64_t max_records;
    uint64_t max_shards;
    stoker__manifest m;
    int32_t nshards;
    stoker__shard *shards;
    uint64_t *first; /* first[i]: id of shard i's first record; first[nshards] = total */
    uint64_t payload_bytes;
    uint64_t max_record;
    void *source; /* the source kind's own state (HDF5), owned by ops->close */
};

/* Sets the data set's message under its lock (for failures of concurrent readers). */
int stoker__dataset_fail(stoker_dataset *ds, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Opens and checks shard i (descriptor, size, header, footer, index). Used by open (stops
 * at the first failure) and by verify (continues). `err` receives the message. */
int stoker__shard_open(stoker_dataset *ds, int32_t i, stoker__err *err);
/* Parses the manifest of the data set at ds->path into ds (no shard is opened). */
int stoker__dataset_open_manifest(stoker_dataset *ds, const char *path, const stoker_config *cfg);
/* Allocates ds->shards and ds->first from the parsed manifest (no file is opened). */
int stoker__dataset_shards_alloc(stoker_dataset *ds);
/* Reads `len` bytes at `off` (retrying EINTR and short reads); 0, -errno, or
 * STOKER_E_CORRUPT when the file ends first. No message is set. */
int stoker__pread_full(int fd, void *buf, size_t len, uint64_t off);
/* Allocates an empty handle (locks initialised). NULL on allocation failure. */
stoker_dataset *stoker__dataset_alloc(void);

/* Whether the open file fd holds HDF5's signature where libhdf5 looks for it (byte 0, or
 * after a user block): 1 or 0, or -errno when a read failed (which tells nothing of what the
 * file holds: the caller reports it). */
int stoker__hdf5_signature(int fd);

#endif
