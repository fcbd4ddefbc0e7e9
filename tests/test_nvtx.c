/* SPDX-License-Identifier: Apache-2.0 */
/* NVTX ranges (cuda/nvtx.h) from several threads, nested and overlapping: they run in every
 * build, with CUDA (NVTX 3, here with an injection library that cannot be loaded, as when a
 * profiler's path is wrong) and without (nothing is marked); nothing breaks either way. */
#include "cuda/nvtx.h"
#include "testutil.h"

#include <pthread.h>

static void *marker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 1000; i++) {
        stoker__nvtx_push(STOKER__NVTX_NEXT);
        stoker__nvtx_push((stoker__nvtx_range)(i % STOKER__NVTX_RANGES));
        const uint64_t a = stoker__nvtx_start(STOKER__NVTX_FETCH);
        const uint64_t b = stoker__nvtx_start(STOKER__NVTX_FETCH);
        stoker__nvtx_end(a); /* overlapping ranges end in any order */
        stoker__nvtx_pop();
        stoker__nvtx_end(b);
        stoker__nvtx_pop();
    }
    stoker__nvtx_end(0); /* "nothing marked" is a valid id */
    return NULL;
}

int main(void)
{
    setenv("NVTX_INJECTION64_PATH", "/nonexistent/stoker-no-such-tool.so", 1);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        T_ASSERT(pthread_create(&t[i], NULL, marker, NULL) == 0);
    for (int i = 0; i < 4; i++)
        T_ASSERT(pthread_join(t[i], NULL) == 0);
    return 0;
}
