/* SPDX-License-Identifier: Apache-2.0 */
/* Memory taken out of a loader by stoker_batch_detach: a batch's data and its fields region,
 * the caller's until stoker_memory_free. Freeing needs nothing of the loader (which may be
 * gone by then): host memory is plain (stoker__free) or pinned (the CUDA runtime's
 * cudaFreeHost), device memory is freed with cudaFree on its device. */
#ifndef STOKER_LOADER_MEMORY_H
#define STOKER_LOADER_MEMORY_H

#include "common/common.h"

typedef struct stoker__mem_part {
    void *p; /* NULL: none */
    size_t size;
    bool pinned; /* host memory from cudaHostAlloc */
} stoker__mem_part;

struct stoker_memory {
    int32_t device;           /* -1: host memory; else the CUDA device of both parts */
    stoker__mem_part part[2]; /* the batch's data, its fields region */
};

#endif
