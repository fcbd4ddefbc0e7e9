/* SPDX-License-Identifier: Apache-2.0 */
/* stoker-pack: what its files share. The tool sees the public API (stoker.h) only; its
 * messages go through tools/common/cli.h (cli_err, cli_put_escaped). */
#ifndef STOKER_PACK_H
#define STOKER_PACK_H

#include "cli.h"
#include "stoker.h"

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum { PACK_OK = 0, PACK_FAIL = 1, PACK_USAGE = 2, PACK_INTERRUPTED = 130 };

typedef enum pack_mode { MODE_PACK, MODE_VERIFY, MODE_INFO } pack_mode;

typedef struct pack_opts {
    pack_mode mode;
    const char *src, *out, *labels;
    int64_t shard_size;
    int32_t align, max_side, quality;
    bool align_set; /* --align given; else align is chosen from the records (align.c) */
    int jobs;
    uint64_t seed;
    /* validate: decode every JPEG (the default; off with --no-validate). validate_set:
     * --validate was given, which sources of raw records refuse as they refuse --rgb. */
    bool validate, strict, rgb, shuffle, force, quiet, fsync, json;
    bool quality_set, seed_set, validate_set, no_validate;
    const char *pack_option; /* the first option given that only packing uses, or NULL */
    /* Samples of several fields (fields.h): --jsonl FILE --schema FILE, --coco FILE --images
     * DIR, --wds TAR... [--schema FILE]. skip_bad: a bad sample is left out and counted instead of
     * failing the pack; keep_crowd: COCO's iscrowd boxes too. */
    const char *jsonl, *schema, *coco, *images;
    bool skip_bad, keep_crowd;
    /* --wds A.tar [B.tar ...]: the first tar, and the operands before OUT (argv's). */
    const char *wds;
    char **wds_more;
    int n_wds_more;
    /* FILE.h5 --h5-field NAME=DATASET[:KIND[:TIE=FIELD]], in the order given. */
    const char *h5_fields[STOKER_MAX_FIELDS];
    int n_h5_fields;
} pack_opts;

/* One source file of an image data set, or one record of an HDF5 source. */
typedef struct pack_item {
    char *path; /* as opened; for a record, its name in messages ("x.h5: record 7") */
    char *key;  /* relative path (the record's index), stored with the record */
    int64_t label;
    int64_t record; /* the record's index in pack_source.ds; -1 for a file */
    int64_t size;   /* its bytes as found (the scan's stat, the record's info); -1: unknown */
} pack_item;

typedef struct pack_source {
    pack_item *items;
    size_t n, cap;
    char **classes; /* ImageFolder class names, label order */
    size_t nclasses;
    size_t ignored;     /* files without an image extension (ImageFolder) */
    stoker_dataset *ds; /* where records come from (HDF5); not owned */
} pack_source;

/* ---- scan.c: building the list of records ---- */
int pack_scan_folder(const char *root, bool quiet, pack_source *src);
int pack_scan_list(const char *list, pack_source *src);
void pack_source_free(pack_source *src);
/* A permutation of 0..n-1 drawn from `seed` (Fisher-Yates over splitmix64), or the
 * identity when !shuffle. NULL when out of memory. */
size_t *pack_order(size_t n, bool shuffle, uint64_t seed);

/* ---- npy.c: NumPy .npy arrays ---- */
typedef struct pack_npy {
    const char *path;
    void *map;
    size_t map_size;
    const uint8_t *data; /* first element */
    uint64_t rows;       /* shape[0] */
    size_t row_bytes;
    int32_t dtype; /* a stoker_dtype */
    size_t itemsize;
    char kind;    /* NumPy kind: 'u', 'i', 'f', 'b' */
    int32_t ndim; /* per-row dims */
    int64_t shape[STOKER_MAX_DIMS];
} pack_npy;
/* A .npy header (versions 1 to 3) as read from a file's first bytes. */
typedef struct pack_npy_head {
    size_t data_off; /* where the elements start */
    int32_t dtype;   /* a stoker_dtype */
    size_t itemsize;
    char kind;    /* NumPy kind: 'u', 'i', 'f', 'b' */
    bool fortran; /* Fortran order of more than one dimension (refused by its users) */
    int32_t ndim; /* every dimension, the first included */
    int64_t shape[STOKER_MAX_DIMS + 1];
} pack_npy_head;
/* Parses the header in the first `avail` bytes p; 0, or -1 with why. The elements' bytes are
 * the caller's to check against the shape. */
int pack_npy_head_parse(const uint8_t *p, size_t avail, pack_npy_head *h, char *why, size_t cap);
/* Maps and validates a .npy file; on failure prints why and returns -1. */
int pack_npy_open(const char *path, pack_npy *a);
void pack_npy_close(pack_npy *a);
/* Is `path` a .npy file (by its magic)? */
bool pack_is_npy(const char *path);

/* ---- progress.c: progress and summary on stderr ---- */
typedef struct pack_progress {
    double start, last;
    int64_t total;
    bool tty, quiet, drawn;
    const char *noun; /* what is counted: "files", "rows", "records" */
} pack_progress;
void pack_progress_init(pack_progress *p, int64_t total, bool quiet, const char *noun);
void pack_progress_update(pack_progress *p, int64_t done, int64_t records, int64_t bytes);
void pack_progress_end(pack_progress *p);
double pack_now(void);

/* Files (or records) left out, with reasons, in record order. */
typedef struct pack_skips {
    char **lines; /* "path: reason" */
    size_t n, cap;
} pack_skips;
void pack_skips_add(pack_skips *s, const char *path, const char *reason);
void pack_skips_free(pack_skips *s);

/* ---- pipeline.c: reading, checking and adding records ---- */
typedef struct pack_result {
    int64_t records, bytes;
    pack_skips skips;
} pack_result;
/* Adds every item to `w` in `order`; returns 0, or a PACK_* exit code after printing why. */
int pack_images(const pack_opts *o, const pack_source *src, const size_t *order, stoker_writer *w,
                pack_result *res);
int pack_rows(const pack_opts *o, const pack_npy *data, const pack_npy *labels, const size_t *order,
              stoker_writer *w, pack_result *res);

/* ---- h5.c: HDF5 files (through the library's HDF5 source) ---- */
/* Does `path` name an HDF5 source ("x.h5", "x.hdf5", optionally ":/dataset" after it, or
 * a file that starts with HDF5's signature)? */
bool pack_is_h5(const char *path);
/* The records of an HDF5 source as items, to be checked and converted as image files are
 * (pack_images); 0 or an exit code. */
int pack_h5_items(const pack_opts *o, stoker_dataset *ds, pack_source *src);
/* Reads every record of an HDF5 source (--verify); an exit code. */
int pack_h5_verify(const char *path, bool quiet);
/* Opens the file as a data set (--labels names the labels dataset); 0 or an exit code. */
int pack_h5_open(const pack_opts *o, stoker_dataset **ds);
int pack_h5_field(stoker_writer *w, const stoker_dataset *ds);
int pack_h5_rows(const pack_opts *o, stoker_dataset *ds, const size_t *order, stoker_writer *w,
                 pack_result *res);

/* ---- align.c: the default alignment ---- */
/* The padding the records would take at each alignment the format allows (4096, 512, 1),
 * added up record by record before anything is written. */
enum { PACK_ALIGNS = 3 };
typedef struct pack_padding {
    uint64_t payload;          /* the records' bytes */
    uint64_t pad[PACK_ALIGNS]; /* zeros between them at 4096, 512 and 1 */
} pack_padding;
/* Counts `count` records of `size` bytes each. */
void pack_padding_add(pack_padding *p, uint64_t size, uint64_t count);
/* The default alignment: the largest whose padding is at most PACK_PADDING_PERCENT of the
 * payload (4096 when there is no payload). */
#define PACK_PADDING_PERCENT 5
int32_t pack_padding_align(const pack_padding *p);
/* What the choice was made on, for the options summary: the padding of the alignment chosen
 * and what each larger one would have added ("padding 2.4% of the payload; 4096 would add
 * 37%", "no padding; 4096 would add 25500% of the payload, 512 3100%"). */
void pack_padding_describe(const pack_padding *p, char *buf, size_t cap);

/* ---- main.c: interruption ---- */
extern volatile sig_atomic_t pack_interrupted;

/* ---- info.c: --info and --verify ---- */
int pack_info(const char *path, bool json);
int pack_verify(const char *path, bool quiet);

/* ---- paths.c: where the output may go ---- */
/* Refuses an output that is, holds or lies inside the source (or --labels); an exit code. */
int pack_check_paths(const pack_opts *o);
/* Refuses an existing output that holds one of the source's files; an exit code. */
int pack_check_items(const pack_opts *o, const pack_source *src);
/* Refuses an output whose folder is missing or not a folder, naming the first such folder
 * of its path (a/b/c, with no a: "folder a does not exist"); an exit code. */
int pack_check_out_folder(const char *out);
/* Removes the temporary directories ".OUT.tmp-XXXXXX" beside the output that writers of
 * earlier runs, killed, left: only those that no live writer holds (the writer's lock on
 * it) and that hold only a writer's files; each removed is named unless quiet. */
void pack_remove_leftovers(const char *out, bool quiet);

#endif
