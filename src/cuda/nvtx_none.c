/* SPDX-License-Identifier: Apache-2.0 */
/* NVTX ranges without CUDA: nothing is marked (nvtx.h). */
#include "cuda/nvtx.h"

void stoker__nvtx_push(stoker__nvtx_range r)
{
    (void)r;
}

void stoker__nvtx_pop(void)
{
}

uint64_t stoker__nvtx_start(stoker__nvtx_range r)
{
    (void)r;
    return 0;
}

void stoker__nvtx_end(uint64_t id)
{
    (void)id;
}
