/* Page-locked host memory (built only with CUDA). */
#ifndef STOKER_CUDA_PINNED_H
#define STOKER_CUDA_PINNED_H

#include <stddef.h>

/* size bytes of pinned, portable host memory (usable by every device's streams), allocated
 * with `device` current; the calling thread's current device is kept. NULL on failure, with
 * CUDA's error text in msg (capacity cap). Thread-safe. */
void *stoker__cuda_host_alloc(int device, size_t size, char *msg, size_t cap);
/* Frees memory from stoker__cuda_host_alloc. NULL ok. */
void stoker__cuda_host_free(void *p);

#endif
