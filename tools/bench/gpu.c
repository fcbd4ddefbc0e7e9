/* SPDX-License-Identifier: Apache-2.0 */
/* GPU utilisation through NVML, loaded at run time (dlopen) so that stoker-bench needs no
 * NVIDIA library to build or run: without it, nothing is measured and nothing is said. */
#include "bench.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct nvml_util {
    unsigned int gpu, memory;
} nvml_util;

typedef int (*init_fn)(void);
typedef int (*handle_fn)(unsigned int, void **);
typedef int (*util_fn)(void *, nvml_util *);
typedef int (*name_fn)(void *, char *, unsigned int);

typedef struct nvml {
    void *lib, *dev;
    init_fn shutdown;
    util_fn util;
    name_fn name;
} nvml;

struct gpu_sampler {
    nvml n;
    pthread_t thread;
    pthread_mutex_t mu;
    int stop; /* under mu */
    double sum, max;
    int samples;
};

/* Loads NVML and finds device `index` (NVML's numbering: the same as CUDA's unless
 * CUDA_VISIBLE_DEVICES reorders them). 0, or -1 with nothing held. */
static int nvml_open(nvml *n, int index)
{
    memset(n, 0, sizeof *n);
    n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!n->lib)
        return -1;
    init_fn init = (init_fn)dlsym(n->lib, "nvmlInit_v2");
    handle_fn handle = (handle_fn)dlsym(n->lib, "nvmlDeviceGetHandleByIndex_v2");
    n->shutdown = (init_fn)dlsym(n->lib, "nvmlShutdown");
    n->util = (util_fn)dlsym(n->lib, "nvmlDeviceGetUtilizationRates");
    n->name = (name_fn)dlsym(n->lib, "nvmlDeviceGetName");
    if (init && handle && n->shutdown && n->util && n->name && init() == 0) {
        if (handle((unsigned int)index, &n->dev) == 0)
            return 0;
        n->shutdown();
    }
    dlclose(n->lib);
    n->lib = NULL;
    return -1;
}

static void nvml_close(nvml *n)
{
    if (!n->lib)
        return;
    n->shutdown();
    dlclose(n->lib);
    n->lib = NULL;
}

int bench_gpu_name(int device, char *buf, size_t cap)
{
    nvml n;
    if (nvml_open(&n, device) < 0)
        return -1;
    const int rc = n.name(n.dev, buf, (unsigned int)cap) == 0 ? 0 : -1;
    nvml_close(&n);
    return rc;
}

static void *sampler_main(void *arg)
{
    gpu_sampler *g = arg;
    for (;;) {
        pthread_mutex_lock(&g->mu);
        const int stop = g->stop;
        pthread_mutex_unlock(&g->mu);
        if (stop)
            break;
        nvml_util u;
        if (g->n.util(g->n.dev, &u) == 0) {
            g->sum += u.gpu;
            g->max = u.gpu > g->max ? u.gpu : g->max;
            g->samples++;
        }
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

gpu_sampler *bench_gpu_start(int device)
{
    gpu_sampler *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    if (nvml_open(&g->n, device) < 0 || pthread_mutex_init(&g->mu, NULL) != 0) {
        nvml_close(&g->n);
        free(g);
        return NULL;
    }
    if (pthread_create(&g->thread, NULL, sampler_main, g) != 0) {
        pthread_mutex_destroy(&g->mu);
        nvml_close(&g->n);
        free(g);
        return NULL;
    }
    return g;
}

void bench_gpu_stop(gpu_sampler *g, gpu_util *out)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->mu);
    g->stop = 1;
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->thread, NULL); /* the sampler's counters are ours after the join */
    out->measured = g->samples > 0;
    out->samples = g->samples;
    out->mean = g->samples ? g->sum / g->samples : 0;
    out->max = g->max;
    pthread_mutex_destroy(&g->mu);
    nvml_close(&g->n);
    free(g);
}
