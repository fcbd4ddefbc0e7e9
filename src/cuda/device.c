/* CUDA device queries. */
#include "cuda/device.h"

#include <cuda_runtime_api.h>

int stoker__cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* reset the runtime's last error so later calls start clean */
        return 0;
    }
    return n > 0 ? n : 0;
}
