/* CUDA device queries (built only with CUDA). */
#ifndef STOKER_CUDA_DEVICE_H
#define STOKER_CUDA_DEVICE_H

/* Number of usable CUDA devices; 0 on any error (no driver, no GPU). Thread-safe. */
int stoker__cuda_device_count(void);

#endif
