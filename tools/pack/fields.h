/* SPDX-License-Identifier: Apache-2.0 */
/* stoker-pack's samples of several named fields (docs/FORMAT.md "Samples with several fields"):
 * the schema read from JSON, the samples a source lists (fields.c), the sources that list
 * them (jsonl.c, coco.c), and the pass that reads, checks and adds them. Every error is
 * printed here, naming the file, the sample and the field. */
#ifndef STOKER_PACK_FIELDS_H
#define STOKER_PACK_FIELDS_H

#include "json.h"
#include "pack.h"

/* A schema as stoker_writer_set_fields takes it, with its strings. */
typedef struct pack_schema {
    int32_t n;
    stoker_field_desc f[STOKER_MAX_FIELDS];
    char names[STOKER_MAX_FIELDS][STOKER_FIELD_NAME_MAX + 1];
    char ties[STOKER_MAX_FIELDS][STOKER_FIELD_NAME_MAX + 1];
} pack_schema;

/* Reads a schema from its dict form (Python's Writer(fields=...)): an object whose members
 * are the fields in order, each a kind name ("jpeg", "png", "bytes", "int64", "float32") or
 * an object with "kind", "dtype" and "shape" (raw: every dimension; array: the first null) and
 * a tie ("mask_of", "boxes_of", "rows_of"). `where` names it in messages. 0, or -1 after
 * printing why. The library checks the rest (stoker_writer_set_fields). */
int pack_schema_parse(const json_value *v, const char *where, pack_schema *s);
/* Appends the field `name` of value v (pack_schema_parse's form of one member); 0, or -1 after
 * printing why. */
int pack_schema_parse_field(const char *name, const json_value *v, const char *where,
                            pack_schema *s);
/* Appends a field; its strings are copied. */
void pack_schema_add(pack_schema *s, const char *name, int32_t kind, int32_t dtype, int32_t ndim,
                     const int64_t *shape, int32_t tie, const char *tie_to);
/* Reads a schema file (JSON, pack_schema_parse's form); 0, or -1 after printing why. */
int pack_schema_load(const char *path, pack_schema *s);
int32_t pack_schema_find(const pack_schema *s, const char *name);

/* One field's value in a sample before it is read: inline bytes, or a file's (whole, or
 * `size` bytes at `offset`: a tar member). */
typedef struct pack_value {
    uint8_t *data;      /* inline value (owned), or NULL */
    char *file;         /* the file that holds it (owned), or NULL */
    int64_t offset;     /* in file; -1: the whole file */
    uint64_t size;      /* inline: its bytes; a file's: as found (for the alignment), 0 unknown */
    char *member;       /* a tar member's name (owned), which messages give instead of file */
    stoker_dataset *ds; /* field `field` of a record of this data set, which has a schema
                           (not owned: pack_samples.sources); a sample's values of a data set
                           are all of one record, read once */
    int64_t record;
    int32_t field;
    bool set;
} pack_value;

typedef struct pack_sample {
    char *where; /* "samples.jsonl: line 7", "instances.json: image 42 (x.jpg)" */
    char *key;   /* stored with the record, or NULL */
    pack_value v[STOKER_MAX_FIELDS];
} pack_sample;

typedef struct pack_samples {
    pack_schema schema;
    pack_sample *s;
    size_t n, cap;
    const char *source;      /* what the source is: "JSON lines", "COCO instances" */
    const char *schema_from; /* where the schema came from, for messages */
    char *schema_from_owned; /* schema_from when the source made it (owned), or NULL */
    pack_skips bad;          /* samples left out while listing them (--skip-bad) */
    stoker_dataset *sources[STOKER_MAX_FIELDS]; /* data sets values come from (owned) */
} pack_samples;

/* A new sample at the end (zeroed; where and key copied); NULL when out of memory. */
pack_sample *pack_samples_add(pack_samples *ss, const char *where, const char *key);
void pack_samples_free(pack_samples *ss);
/* A sample found bad while listing: with --skip-bad it is removed (the last one added) and
 * counted; else the error is printed and PACK_FAIL returned. 0 to go on. */
int pack_samples_bad(const pack_opts *o, pack_samples *ss, const char *where, const char *why);

/* Encodes the JSON value `v` as field f's inline value (int64, float32: a number; raw: nested
 * lists of exactly its shape; array: a list of rows; bytes: a string, its UTF-8 bytes).
 * 0, or -1 with the reason in why. */
int pack_value_from_json(const stoker_field_desc *f, const json_value *v, pack_value *out,
                         char *why, size_t cap);
/* Sets an inline value (copied). -1 when out of memory. */
int pack_value_bytes(pack_value *out, const void *data, size_t size);
/* Sets a file's value: `rel` under folder `dir` (NULL: as given), stat'ed for its size. */
int pack_value_file(pack_value *out, const char *dir, const char *rel);

/* Reads a whole file into memory; NULL (with errno) on failure. */
char *pack_read_text(const char *path, size_t *size);

/* Reads and parses a JSON file (`what` it is, for messages); 0, or -1 after printing why. */
int pack_read_json(const char *path, const char *what, json_value *v);

/* ---- the sources ---- */
int pack_jsonl_load(const pack_opts *o, pack_samples *ss);
int pack_coco_load(const pack_opts *o, pack_samples *ss);
/* FILE.h5 --h5-field NAME=DATASET[:KIND[:TIE=FIELD]] ...: an HDF5 file's datasets as the
 * fields of its samples (h5fields.c states the rules). */
int pack_h5_fields_load(const pack_opts *o, pack_samples *ss);
/* --wds A.tar [B.tar ...]: WebDataset shards (wds.c states the rules). */
int pack_wds_load(const pack_opts *o, pack_samples *ss);

/* Reads, checks (every JPEG and PNG field decoded, unless --no-validate) and adds every sample
 * in `order` to `w`, whose schema ss->schema is declared already; 0 or an exit code. */
int pack_samples_write(const pack_opts *o, const pack_samples *ss, const size_t *order,
                       stoker_writer *w, pack_result *res);

#endif
