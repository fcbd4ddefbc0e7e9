/* Page-locked host memory for the batch slots. */
#include "cuda/pinned.h"

#include "common/common.h"

#include <cuda_runtime_api.h>
#include <stdio.h>

void *stoker__cuda_host_alloc(int device, size_t size, char *msg, size_t cap)
{
    int prev = -1;
    void *p = NULL;
    /* The current device is per thread and may belong to the caller: save and restore. */
    cudaError_t e = cudaGetDevice(&prev);
    if (e == cudaSuccess)
        e = cudaSetDevice(device);
    if (e == cudaSuccess)
        e = stoker__cuda_injected() ? cudaErrorMemoryAllocation
                                    : cudaHostAlloc(&p, size, cudaHostAllocPortable);
    if (prev >= 0)
        cudaSetDevice(prev);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky last error; the failure is reported here */
        snprintf(msg, cap, "%s", cudaGetErrorString(e));
        return NULL;
    }
    return p;
}

void stoker__cuda_host_free(void *p)
{
    if (p)
        cudaFreeHost(p);
}
