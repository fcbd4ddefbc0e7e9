/* SPDX-License-Identifier: Apache-2.0 */
/* NVTX ranges in the domain "stoker", so that Nsight Systems (and tools reading NVTX) show
 * the loader's stages (docs/SEMANTICS.md). Built with CUDA, nvtx.c marks them with the
 * header-only NVTX 3 of the toolkit (no library to link; each call is a test and a return
 * while no tool is attached); without CUDA, nvtx_none.c does nothing. Callers mark a piece
 * or a batch, never a record. Any thread. */
#ifndef STOKER_CUDA_NVTX_H
#define STOKER_CUDA_NVTX_H

#include <stdint.h>

typedef enum stoker__nvtx_range {
    STOKER__NVTX_NEXT,       /* "next": the consumer's call, its wait included */
    STOKER__NVTX_PIECE,      /* "piece": a worker reads and decodes a piece of a batch */
    STOKER__NVTX_H2D,        /* "h2d": the copy thread issues a batch's copies */
    STOKER__NVTX_GPU_DECODE, /* "gpu decode": the GPU stage's work on a batch */
    STOKER__NVTX_FETCH,      /* "fetch": a remote block's request, start to end */
    STOKER__NVTX_RANGES
} stoker__nvtx_range;

/* A range on the calling thread, ended by pop on the same thread (nested ranges allowed). */
void stoker__nvtx_push(stoker__nvtx_range r);
void stoker__nvtx_pop(void);
/* A range that may end on another thread and overlap others: start returns its id for end
 * (0 where nothing is marked). */
uint64_t stoker__nvtx_start(stoker__nvtx_range r);
void stoker__nvtx_end(uint64_t id);

#endif
