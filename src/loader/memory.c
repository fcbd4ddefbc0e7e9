/* SPDX-License-Identifier: Apache-2.0 */
/* stoker_memory_free (memory.h). */
#include "loader/memory.h"

#include "cuda/cuda.h"

void stoker_memory_free(stoker_memory *m)
{
    if (!m)
        return;
    if (m->device >= 0) {
        const int prev = stoker__cuda_use_device(m->device);
        for (int i = 0; i < 2; i++)
            stoker__cuda_free(m->part[i].p);
        stoker__cuda_restore_device(m->device, prev);
    } else {
        for (int i = 0; i < 2; i++) {
            if (m->part[i].pinned)
                stoker__cuda_host_free(m->part[i].p);
            else
                stoker__free(m->part[i].p);
        }
    }
    stoker__free(m);
}
