/* SPDX-License-Identifier: Apache-2.0 */
/* A training loop on stoker batches, in C. With a GPU (a CUDA build and a usable device)
 * the batches arrive in device memory and the loop works on its own CUDA stream:
 *
 *   next -> stoker_batch_wait_stream(my_stream) -> "compute" on my_stream (here a
 *   device-to-device copy of the batch and a memset, standing in for a model's step) ->
 *   stoker_batch_release_stream(my_stream) -> continue without waiting for the GPU.
 *
 * The host never blocks for the copy: my_stream waits on the batch's event, and the loader
 * refills the batch's device buffer only after my_stream's work on it is done. Without a
 * GPU the same program gets host batches and sums their bytes on the host.
 *
 *   train_loop DATA [STEPS]                      (STOKER_DEVICE=cpu forces host batches) */
#include <stoker.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TRAIN_LOOP_CUDA
#include <cuda_runtime_api.h>

/* The stand-in for a training step: reads the whole batch on the GPU (a device-to-device
 * copy into the step's work buffer) and writes a result (a memset). */
static int gpu_step(const stoker_batch_view *v, void **work, size_t *cap, cudaStream_t s)
{
    if (v->nbytes > *cap) {
        cudaFree(*work);
        *work = NULL;
        if (cudaMalloc(work, v->nbytes) != cudaSuccess)
            return -1;
        *cap = v->nbytes;
    }
    if (cudaMemcpyAsync(*work, v->data, v->nbytes, cudaMemcpyDeviceToDevice, s) != cudaSuccess)
        return -1;
    return cudaMemsetAsync(*work, 0, v->nbytes < 64 ? v->nbytes : 64, s) == cudaSuccess ? 0 : -1;
}
#endif

static uint64_t host_step(const stoker_batch_view *v)
{
    const uint8_t *p = v->data;
    uint64_t sum = 0;
    for (uint64_t i = 0; i < v->nbytes; i++)
        sum += p[i];
    return sum;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: train_loop DATA [STEPS]\n");
        return 2;
    }
    const long steps = argc > 2 ? atol(argv[2]) : 100;
    const char *want = getenv("STOKER_DEVICE");
    stoker_config *cfg = NULL;
    stoker_loader *l = NULL;
    if (stoker_config_create(&cfg) != 0)
        return 1;
    if (want && strcmp(want, "cpu") == 0)
        stoker_config_set_int(cfg, STOKER_OPT_DEVICE, -1);
    if (stoker_loader_create(&l, argv[1], cfg) != 0) {
        fprintf(stderr, "train_loop: %s\n", stoker_loader_errmsg(l));
        stoker_loader_destroy(l);
        stoker_config_destroy(cfg);
        return 1;
    }
    stoker_config_destroy(cfg);
#ifdef TRAIN_LOOP_CUDA
    cudaStream_t my = NULL;
    void *work = NULL;
    size_t cap = 0;
    stoker_stats st0;
    st0.struct_size = sizeof st0;
    stoker_loader_get_stats(l, &st0);
    if (st0.device >= 0 && (cudaSetDevice(st0.device) != cudaSuccess ||
                            cudaStreamCreateWithFlags(&my, cudaStreamNonBlocking) != cudaSuccess)) {
        fprintf(stderr, "train_loop: cannot create a stream on device %d\n", st0.device);
        return 1;
    }
#endif
    uint64_t host_sum = 0;
    long done = 0, ends = 0;
    int rc = 0;
    while (done < steps) {
        stoker_batch *b = NULL;
        rc = stoker_loader_next(l, &b);
        if (rc == STOKER_END && ++ends < 2)
            continue; /* the next call starts the following epoch */
        if (rc != 0)
            break; /* an error, or two ends in a row: an empty epoch */
        ends = 0;
        stoker_batch_view v;
        v.struct_size = sizeof v;
        stoker_batch_get_view(b, &v);
#ifdef TRAIN_LOOP_CUDA
        if (v.device >= 0) {
            rc = stoker_batch_wait_stream(b, my);
            if (rc == 0 && gpu_step(&v, &work, &cap, my) != 0)
                rc = STOKER_E_CUDA;
            const int rr = stoker_batch_release_stream(b, my);
            rc = rc ? rc : rr;
            if (rc != 0)
                break;
            done++;
            continue;
        }
#endif
        host_sum += host_step(&v);
        stoker_batch_release(b);
        done++;
    }
#ifdef TRAIN_LOOP_CUDA
    if (my) {
        cudaStreamSynchronize(my); /* the last steps' work, before their buffers go */
        cudaStreamDestroy(my);
    }
    cudaFree(work);
#endif
    stoker_stats st;
    st.struct_size = sizeof st;
    stoker_loader_get_stats(l, &st);
    if (rc != 0 && rc != STOKER_END)
        fprintf(stderr, "train_loop: %s: %s\n", stoker_strerror(rc), stoker_loader_errmsg(l));
    else
        printf("train_loop: %ld steps on %s, %" PRId64 " records, %.1f MB/s, waited %.3f s, "
               "pinned %" PRId64 " bytes, host sum %" PRIu64 "\n",
               done, st.device >= 0 ? "the GPU" : "the host", st.records, st.bytes_per_sec / 1e6,
               st.wait_seconds, st.pinned_bytes, host_sum);
    stoker_loader_destroy(l);
    return rc != 0 && rc != STOKER_END;
}
