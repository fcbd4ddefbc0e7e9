/* SPDX-License-Identifier: Apache-2.0 */
/* The workers' per-record process step: the JPEG image pipeline. Each record's stored bytes
 * become its finished sample, written straight into its fixed-size place in the batch, so
 * a batch is one dense [count, 3, C, C] (NCHW) or [count, C, C, 3] (NHWC) array. Each
 * worker owns one process state (a decoder scratch); the parameters are the plan's. */
#ifndef STOKER_LOADER_PROCESS_H
#define STOKER_LOADER_PROCESS_H

#include "loader/pool.h"

typedef struct stoker__process stoker__process;

/* A worker's state for plan->xform, publishing its stage times into `stats`. -ENOMEM. */
int stoker__process_create(stoker__process **out, const stoker__plan *plan, stoker__wstats *stats);
void stoker__process_destroy(stoker__process *pr); /* NULL ok */

/* Record `id` of `epoch` (src, n bytes) to its sample at dst (cap bytes). Randomness (train)
 * depends on (seed, epoch, id) only (the order's seed: a restored state may bring its own),
 * so any worker makes the same sample. An image over the pixel limit is a corrupt record like
 * any other damage (the policy decides), its cause kept in the message. `whole`: the JPEG is
 * decoded to its end, past its crop, so that damage anywhere in it is found
 * (stoker__xform_jpeg_whole). Returns 0, STOKER_E_CORRUPT, STOKER_E_LIMIT (dst too small) or
 * -ENOMEM. */
int stoker__process_record(stoker__process *pr, uint64_t seed, int64_t epoch, int64_t id,
                           const uint8_t *src, uint64_t n, bool whole, uint8_t *dst, uint64_t cap,
                           stoker__err *err);

/* Where a sample's image is decoded (stoker__process_sample). */
enum {
    STOKER__IMAGE_HERE = 0,      /* by the process step, into dst */
    STOKER__IMAGE_ELSEWHERE = 1, /* by the GPU decode stage: only its size is read, for the
                                    geometry its tied fields follow; dst is left alone */
};

/* A record of a data set with a schema (plan->fields.split): its payload (src, n bytes) split
 * into its fields, each into its place for sample j: the image through the pipeline into dst
 * (cap bytes; none without one), the others into batch b's fields region (fields.h): masks
 * and boxes through the image's geometry, rows tied to boxes dropped with them, a ragged
 * field's rows at its place (place[i * (batch + 1) + j], within the room the next entry
 * ends) and their count into rows[i * batch + j]. The same (seed, epoch, id) rule as
 * process_record. `image` says where the image is decoded (STOKER__IMAGE_*): its geometry is
 * the same either way, a rule of its size and (seed, epoch, id). A payload that breaks the
 * layout, an image or mask that does not decode, a mask of another size than its image, rows
 * that do not match their boxes: STOKER_E_CORRUPT, the message naming the field. -ENOMEM. */
int stoker__process_sample(stoker__process *pr, uint64_t seed, int64_t epoch, int64_t id,
                           const uint8_t *src, uint64_t n, bool whole, int image, uint8_t *dst,
                           uint64_t cap, stoker_batch *b, uint64_t *rows, const uint64_t *place,
                           uint64_t j, stoker__err *err);

/* The delivered image's bytes within a record of a data set with a schema (a JPEG field's, for
 * the GPU decode stage): true with *img and *len set; false when the batch delivers no image
 * or the payload breaks the layout (stoker__process_sample then reports it). */
bool stoker__process_image_bytes(const stoker__process *pr, const uint8_t *src, uint64_t n,
                                 const uint8_t **img, uint64_t *len);

/* The image of sample `id` alone, from its bytes (img, len: the field's, as
 * stoker__process_image_bytes gives them), into dst (cap bytes): the part of
 * stoker__process_sample that STOKER__IMAGE_ELSEWHERE left to a decoder that then gave it
 * back. The same result and failures as that part of process_sample. */
int stoker__process_sample_image(stoker__process *pr, uint64_t seed, int64_t epoch, int64_t id,
                                 const uint8_t *img, uint64_t len, bool whole, uint8_t *dst,
                                 uint64_t cap, stoker__err *err);

#endif
