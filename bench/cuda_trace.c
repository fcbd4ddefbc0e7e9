/* SPDX-License-Identifier: Apache-2.0 */
/* Where a process's threads spend their time in the CUDA driver: a CUPTI injection module.
 * The driver loads it at cuInit when CUDA_INJECTION64_PATH names it, and calls
 * InitializeInjection; from then on every driver API call of every thread (nvJPEG's and the
 * CUDA runtime's included, which call the driver) is counted and timed, and at exit the
 * threads that spent at least STOKER_TRACE_MIN_MS (default 20) in the driver are reported,
 * each with its STOKER_TRACE_TOP (default 25) costliest calls:
 *
 *   CUDA_INJECTION64_PATH=build/libbench_cuda_trace.so build/examples/train_loop_cpp DATA ...
 *
 * Calls are told apart by the stream they name: a number in creation order (the report
 * lists each stream's creating thread, flags and priority), `null` for stream 0, `legacy`
 * and `per-thread` for the special handles, `?` for one created before the module loaded.
 * cuEventSynchronize counts under the stream its event was last recorded on. cuMemFree of
 * memory that no traced cuMemAlloc or cuMemAllocPitch returned counts as "untraced": memory
 * allocated before the module loaded, or through a path the callbacks do not see (the
 * device memory nvJPEG's hardware decoder frees is such). The report goes to
 * STOKER_TRACE_OUT (appended) or stderr.
 *
 * A measuring tool, not part of the library: times are host wall time inside each call, the
 * callbacks add about a microsecond to every call, and the report reads other threads'
 * tables while they may still run (their last calls may be missing). */
#define _GNU_SOURCE
#include <cupti.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NCBID 4096   /* driver callback ids are below this */
#define NSTREAM 1024 /* streams remembered */
#define NSLOT 65536  /* event and allocation maps (open addressing, power of two) */
#define NENTRY 2048  /* (call, stream, kind) kinds per thread */
#define S_NONE (-1)  /* a call that names no stream */
#define S_UNKNOWN (-2)
#define S_NULL (-3)
#define S_LEGACY (-4)
#define S_PERTHREAD (-5)
#define TAG_UNTRACED 1 /* cuMemFree of memory no traced call allocated */

typedef struct entry {
    const char *fn;
    int stream, tag;
    uint64_t n, total_ns, max_ns;
} entry;

typedef struct thread_log {
    char name[16];
    int tid;
    entry e[NENTRY];
    int ne;
    /* the call in progress, by callback id: calls do not nest within one id */
    uint64_t t0[NCBID];
    int stream[NCBID], tag[NCBID];
    struct thread_log *next;
} thread_log;

typedef struct stream_info {
    CUstream h;
    char who[16];
    unsigned flags;
    int priority;
} stream_info;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* everything below, but own logs */
static stream_info streams[NSTREAM];
static int nstreams;
typedef struct kv {
    uintptr_t key;
    int value;
} kv;
static kv events[NSLOT], allocs[NSLOT]; /* event -> stream; allocation -> 1 while live */
static thread_log *logs;
static __thread thread_log *mine;

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The slot for key in map (mu held); NULL when the map is full. */
static int *slot(kv *map, uintptr_t key, int create)
{
    for (uint32_t i = 0, h = (uint32_t)(key >> 4) & (NSLOT - 1); i < NSLOT;
         i++, h = (h + 1) & (NSLOT - 1)) {
        if (map[h].key == key)
            return &map[h].value;
        if (map[h].key == 0) {
            if (!create)
                return NULL;
            map[h].key = key;
            return &map[h].value;
        }
    }
    return NULL;
}

static int stream_id(CUstream h)
{
    switch ((uintptr_t)h) {
    case 0: return S_NULL;
    case 1: return S_LEGACY;    /* CU_STREAM_LEGACY */
    case 2: return S_PERTHREAD; /* CU_STREAM_PER_THREAD */
    }
    pthread_mutex_lock(&mu);
    int id = S_UNKNOWN;
    for (int i = nstreams - 1; i >= 0 && id == S_UNKNOWN; i--) /* the newest: handles recur */
        if (streams[i].h == h)
            id = i;
    pthread_mutex_unlock(&mu);
    return id;
}

static void event_recorded(CUevent e, int stream)
{
    pthread_mutex_lock(&mu);
    int *v = slot(events, (uintptr_t)e, 1);
    if (v)
        *v = stream;
    pthread_mutex_unlock(&mu);
}

static int event_stream(CUevent e)
{
    pthread_mutex_lock(&mu);
    const int *v = slot(events, (uintptr_t)e, 0);
    const int s = v ? *v : S_UNKNOWN;
    pthread_mutex_unlock(&mu);
    return s;
}

static void stream_created(CUstream h, unsigned flags, int priority)
{
    pthread_mutex_lock(&mu);
    if (nstreams < NSTREAM) {
        streams[nstreams] = (stream_info){h, "", flags, priority};
        memcpy(streams[nstreams++].who, mine->name, sizeof mine->name);
    }
    pthread_mutex_unlock(&mu);
}

static void allocated(CUdeviceptr p)
{
    pthread_mutex_lock(&mu);
    int *v = slot(allocs, (uintptr_t)p, 1);
    if (v)
        *v = 1;
    pthread_mutex_unlock(&mu);
}

static int freed_tag(CUdeviceptr p)
{
    pthread_mutex_lock(&mu);
    int *v = slot(allocs, (uintptr_t)p, 0);
    const int traced = v && *v;
    if (v)
        *v = 0;
    pthread_mutex_unlock(&mu);
    return traced ? 0 : TAG_UNTRACED;
}

static thread_log *my_log(void)
{
    if (!mine && (mine = calloc(1, sizeof *mine))) {
        mine->tid = (int)syscall(SYS_gettid);
        pthread_getname_np(pthread_self(), mine->name, sizeof mine->name);
        pthread_mutex_lock(&mu);
        mine->next = logs;
        logs = mine;
        pthread_mutex_unlock(&mu);
    }
    return mine;
}

/* At a call's entry: the stream it names (events: where theirs was recorded). */
static void on_enter(thread_log *t, CUpti_CallbackId id, const void *params)
{
    int s = S_NONE, tag = 0;
    switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize:
        s = event_stream(((const cuEventSynchronize_params *)params)->hEvent);
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuEventRecord: {
        const cuEventRecord_params *p = params;
        event_recorded(p->hEvent, s = stream_id(p->hStream));
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuEventRecordWithFlags: {
        const cuEventRecordWithFlags_params *p = params;
        event_recorded(p->hEvent, s = stream_id(p->hStream));
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent:
        s = stream_id(((const cuStreamWaitEvent_params *)params)->hStream);
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize:
        s = stream_id(((const cuStreamSynchronize_params *)params)->hStream);
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
        s = stream_id(((const cuLaunchKernel_params *)params)->hStream);
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchHostFunc:
        s = stream_id(((const cuLaunchHostFunc_params *)params)->hStream);
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync:
        s = stream_id(((const cuMemcpyAsync_params *)params)->hStream);
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2:
        s = stream_id(((const cuMemcpyHtoDAsync_v2_params *)params)->hStream);
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync_v2:
        s = stream_id(((const cuMemcpy2DAsync_v2_params *)params)->hStream);
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
        tag = freed_tag(((const cuMemFree_v2_params *)params)->dptr);
        break;
    }
    t->stream[id] = s;
    t->tag[id] = tag;
    t->t0[id] = now_ns();
}

/* At a call's exit: what it created, and its time under (call, stream, tag). */
static void on_return(thread_log *t, CUpti_CallbackId id, const CUpti_CallbackData *cd)
{
    const uint64_t dt = now_ns() - t->t0[id];
    const void *params = cd->functionParams;
    if (id == CUPTI_DRIVER_TRACE_CBID_cuStreamCreate) {
        const cuStreamCreate_params *p = params;
        stream_created(*p->phStream, p->Flags, 0);
    } else if (id == CUPTI_DRIVER_TRACE_CBID_cuStreamCreateWithPriority) {
        const cuStreamCreateWithPriority_params *p = params;
        stream_created(*p->phStream, p->flags, p->priority);
    } else if (id == CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2) {
        allocated(*((const cuMemAlloc_v2_params *)params)->dptr);
    } else if (id == CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2) {
        allocated(*((const cuMemAllocPitch_v2_params *)params)->dptr);
    }
    entry *e = NULL;
    for (int i = 0; i < t->ne && !e; i++)
        if (t->e[i].fn == cd->functionName && t->e[i].stream == t->stream[id] &&
            t->e[i].tag == t->tag[id])
            e = &t->e[i];
    if (!e && t->ne < NENTRY) {
        e = &t->e[t->ne++];
        *e = (entry){cd->functionName, t->stream[id], t->tag[id], 0, 0, 0};
    }
    if (e) {
        e->n++;
        e->total_ns += dt;
        e->max_ns = dt > e->max_ns ? dt : e->max_ns;
    }
}

static void CUPTIAPI on_call(void *user, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                             const void *data)
{
    (void)user;
    const CUpti_CallbackData *cd = data;
    thread_log *t = domain == CUPTI_CB_DOMAIN_DRIVER_API && id < NCBID ? my_log() : NULL;
    if (!t)
        return;
    if (cd->callbackSite == CUPTI_API_ENTER)
        on_enter(t, id, cd->functionParams);
    else
        on_return(t, id, cd);
}

static int by_total(const void *a, const void *b)
{
    const entry *x = *(entry *const *)a, *y = *(entry *const *)b;
    return x->total_ns < y->total_ns ? 1 : x->total_ns > y->total_ns ? -1 : 0;
}

static const char *stream_name(int s, char *buf, size_t cap)
{
    switch (s) {
    case S_NONE: return "-";
    case S_UNKNOWN: return "?";
    case S_NULL: return "null";
    case S_LEGACY: return "legacy";
    case S_PERTHREAD: return "per-thread";
    }
    snprintf(buf, cap, "s%d", s);
    return buf;
}

static long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : dflt;
}

static void report(void)
{
    const char *path = getenv("STOKER_TRACE_OUT");
    FILE *f = path && *path ? fopen(path, "a") : NULL;
    f = f ? f : stderr;
    const uint64_t min_ns = (uint64_t)env_long("STOKER_TRACE_MIN_MS", 20) * 1000000u;
    const long top = env_long("STOKER_TRACE_TOP", 25);
    pthread_mutex_lock(&mu);
    fprintf(f, "CUDA driver calls by thread (pid %d)\nstreams:\n", (int)getpid());
    for (int i = 0; i < nstreams; i++)
        fprintf(f, "  s%-3d by %-16s flags %u priority %d\n", i, streams[i].who, streams[i].flags,
                streams[i].priority);
    for (thread_log *t = logs; t; t = t->next) {
        entry *v[NENTRY];
        uint64_t sum = 0;
        for (int i = 0; i < t->ne; i++)
            sum += (v[i] = &t->e[i])->total_ns;
        if (sum < min_ns)
            continue;
        qsort(v, (size_t)t->ne, sizeof *v, by_total);
        fprintf(f, "thread %d (%s): %.1f ms in the driver\n", t->tid, t->name, (double)sum / 1e6);
        for (int i = 0; i < t->ne && i < top; i++) {
            char b[16];
            fprintf(f, "  %-28s %-10s %-9s n %8llu  total %9.1f ms  mean %9.1f us  max %7.2f ms\n",
                    v[i]->fn, stream_name(v[i]->stream, b, sizeof b),
                    v[i]->tag == TAG_UNTRACED ? "untraced" : "", (unsigned long long)v[i]->n,
                    (double)v[i]->total_ns / 1e6, (double)v[i]->total_ns / 1e3 / (double)v[i]->n,
                    (double)v[i]->max_ns / 1e6);
        }
    }
    pthread_mutex_unlock(&mu);
    if (f != stderr)
        fclose(f);
}

int InitializeInjection(void);

int InitializeInjection(void)
{
    CUpti_SubscriberHandle sub;
    if (cuptiSubscribe(&sub, (CUpti_CallbackFunc)on_call, NULL) != CUPTI_SUCCESS ||
        cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API) != CUPTI_SUCCESS) {
        fprintf(stderr, "cuda_trace: CUPTI refused the subscription; nothing is traced\n");
        return 0;
    }
    atexit(report);
    return 1;
}
