/* CUDA device queries (built only with CUDA). */
#ifndef STOKER_CUDA_DEVICE_H
#define STOKER_CUDA_DEVICE_H

#include <stddef.h>

/* Number of usable CUDA devices; 0 on any error (no driver, no GPU). Thread-safe. */
int stoker__cuda_device_count(void);

/* The same, with the reason when there is none ("no CUDA-capable device", CUDA's text for
 * a missing driver, ...) in msg (capacity cap). Thread-safe. */
int stoker__cuda_device_query(char *msg, size_t cap);

#endif
