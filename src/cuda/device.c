/* CUDA device queries. */
#include "cuda/device.h"

#include <cuda_runtime_api.h>
#include <stdio.h>

int stoker__cuda_device_query(char *msg, size_t cap)
{
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* reset the runtime's last error so later calls start clean */
        if (msg && cap)
            snprintf(msg, cap, "%s", cudaGetErrorString(e));
        return 0;
    }
    if (n <= 0 && msg && cap)
        snprintf(msg, cap, "no CUDA device found");
    return n > 0 ? n : 0;
}

int stoker__cuda_device_count(void)
{
    return stoker__cuda_device_query(NULL, 0);
}
