/* SPDX-License-Identifier: Apache-2.0 */
/* NVTX ranges as a Chrome trace, without Nsight Systems: an NVTX 3 injection library. The
 * header-only NVTX of any program (stoker's included) loads it at its first NVTX call when
 * NVTX_INJECTION64_PATH names it, and calls InitializeInjectionNvtx2; from then on the
 * domain API's ranges of every thread are recorded, and at exit they are written to the file
 * named by STOKER_NVTX_TRACE (nothing is recorded without it):
 *
 *   NVTX_INJECTION64_PATH=build/libbench_nvtx_trace.so STOKER_NVTX_TRACE=trace.json PROG
 *
 * The file is the Chrome trace format (Perfetto and chrome://tracing open it): a push/pop
 * range is a complete event ("ph":"X") on the thread that pushed it, with args.depth its
 * nesting depth on that thread's stack of the same domain (0 outermost); a start/end range,
 * which may overlap others and end on another thread, is an async pair ("ph":"b" on the
 * starting thread, "ph":"e" on the ending one, joined by "id"). "cat" is the domain's name
 * ("" for the default domain), "pid" and "tid" the kernel's ids, "ts" and "dur" microseconds
 * of CLOCK_MONOTONIC. "M" events name the threads (pthread_setname_np's names). The object's
 * "otherData" says what was lost: "dropped" (ranges that ended after the first MAX_RANGES,
 * 262144, were kept, or that started while MAX_OPEN, 4096, start/end ranges were open),
 * "unmatched" (pops with no open push, ends of unknown ids) and "unclosed" (pushes a thread
 * had not popped when it ended, or the exiting thread at exit, and starts not ended at
 * exit); the same is printed to stderr when not zero.
 *
 * Only the domain API (nvtxDomainCreateA, nvtxDomainRegisterStringA, nvtxDomainRangePushEx,
 * nvtxDomainRangePop, nvtxDomainRangeStartEx, nvtxDomainRangeEnd) is recorded; other NVTX
 * calls stay no-ops. Messages may be registered or ASCII strings (others show as "?").
 * The file is written by the process that loaded the library (a forked child writes
 * nothing), through a temporary file renamed into place. A measuring tool, not part of the
 * library: each range costs a lock and a clock read. */
#define _GNU_SOURCE
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANGES (1u << 18) /* ranges kept, ended ones in order of ending */
#define MAX_OPEN 4096u        /* start/end ranges open at once (a power of two) */
#define MAX_NAMES 1024u       /* distinct range names and domains together */
#define MAX_DEPTH 256         /* push/pop depth per thread */
#define MAX_THREADS 4096u     /* threads named in the file */
#define NAME_LEN 64

/* The opaque handles NVTX gives back to the program: entries of one table. */
struct nvtxStringRegistration_st {
    char s[NAME_LEN];
};
struct nvtxDomainRegistration_st {
    struct nvtxStringRegistration_st name;
};

typedef struct range {
    uint64_t t0, t1; /* ns, CLOCK_MONOTONIC */
    int32_t tid, end_tid;
    uint16_t name, domain; /* indexes in names[] */
    int16_t depth;         /* -1: a start/end range */
} range;

typedef struct open_range {
    uint64_t id, t0;
    int32_t tid;
    uint16_t name, domain;
} open_range;

typedef struct frame {
    uint64_t t0;
    uint16_t name, domain;
} frame;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char out_path[4096];
static pid_t owner;
/* Guarded by mu. names[0] is "" (the default domain, an empty message), names[1] "?". */
static struct nvtxStringRegistration_st names[MAX_NAMES];
static uint32_t n_names = 2;
static range *ranges;
static uint32_t n_ranges;
static open_range open_ranges[MAX_OPEN];
static uint64_t next_id = 1;
static uint64_t dropped, unmatched, unclosed;
static pthread_key_t exit_key; /* its destructor counts an ending thread's open pushes */
static struct {
    int32_t tid;
    char name[16];
} threads[MAX_THREADS];
static uint32_t n_threads;

/* Per thread: its push/pop stack. */
static __thread frame stack[MAX_DEPTH];
static __thread int depth;
static __thread int32_t my_tid;

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The calling thread's id, and its name noted once in threads[] (under mu). */
static int32_t tid_locked(void)
{
    if (my_tid)
        return my_tid;
    my_tid = (int32_t)syscall(SYS_gettid);
    pthread_setspecific(exit_key, &my_tid);
    if (n_threads < MAX_THREADS) {
        threads[n_threads].tid = my_tid;
        if (pthread_getname_np(pthread_self(), threads[n_threads].name, 16) != 0)
            threads[n_threads].name[0] = '\0';
        n_threads++;
    }
    return my_tid;
}

static void thread_ends(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&mu);
    unclosed += (uint64_t)depth;
    pthread_mutex_unlock(&mu);
}

/* The index of s in names[], added if new (under mu); "?" when the table is full. */
static uint16_t intern_locked(const char *s)
{
    for (uint32_t i = 0; i < n_names; i++)
        if (strncmp(names[i].s, s, NAME_LEN - 1) == 0)
            return (uint16_t)i;
    if (n_names == MAX_NAMES)
        return 1;
    snprintf(names[n_names].s, NAME_LEN, "%s", s);
    return (uint16_t)n_names++;
}

static uint16_t domain_index(nvtxDomainHandle_t d)
{
    return d ? (uint16_t)(&d->name - names) : 0;
}

static uint16_t message_locked(const nvtxEventAttributes_t *a)
{
    if (!a)
        return 0;
    switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_REGISTERED:
        return a->message.registered ? (uint16_t)(a->message.registered - names) : 0;
    case NVTX_MESSAGE_TYPE_ASCII: return a->message.ascii ? intern_locked(a->message.ascii) : 0;
    case NVTX_MESSAGE_UNKNOWN: return 0;
    default: return 1;
    }
}

static void keep_locked(const range *r)
{
    if (ranges && n_ranges < MAX_RANGES)
        ranges[n_ranges++] = *r;
    else
        dropped++;
}

static nvtxDomainHandle_t NVTX_API domain_create(const char *name)
{
    pthread_mutex_lock(&mu);
    const uint16_t i = intern_locked(name ? name : "");
    pthread_mutex_unlock(&mu);
    return (nvtxDomainHandle_t)(void *)&names[i];
}

static nvtxStringHandle_t NVTX_API register_string(nvtxDomainHandle_t d, const char *s)
{
    (void)d;
    pthread_mutex_lock(&mu);
    const uint16_t i = intern_locked(s ? s : "");
    pthread_mutex_unlock(&mu);
    return &names[i];
}

static int NVTX_API push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    pthread_mutex_lock(&mu);
    const uint16_t name = message_locked(a);
    tid_locked();
    pthread_mutex_unlock(&mu);
    const int level = depth;
    if (depth < MAX_DEPTH)
        stack[depth] = (frame){now_ns(), name, domain_index(d)};
    depth++; /* past MAX_DEPTH only counted, so that pops still match */
    return level;
}

/* Pops the innermost range of domain d: each domain has its own stack, interleaved in one. */
static int NVTX_API pop(nvtxDomainHandle_t d)
{
    const uint64_t t1 = now_ns();
    const uint16_t dom = domain_index(d);
    int i = depth - 1;
    while (i >= 0 && i < MAX_DEPTH && stack[i].domain != dom)
        i--;
    pthread_mutex_lock(&mu);
    if (i < 0) {
        unmatched++;
        pthread_mutex_unlock(&mu);
        return -1;
    }
    int level = 0;
    for (int k = 0; k < i && k < MAX_DEPTH; k++)
        level += stack[k].domain == dom;
    if (i < MAX_DEPTH) {
        const range r = {stack[i].t0,   t1,  tid_locked(),  tid_locked(),
                         stack[i].name, dom, (int16_t)level};
        keep_locked(&r);
        const int top = depth < MAX_DEPTH ? depth : MAX_DEPTH;
        memmove(&stack[i], &stack[i + 1], (size_t)(top - 1 - i) * sizeof stack[0]);
    } else {
        dropped++;
    }
    pthread_mutex_unlock(&mu);
    depth--;
    return level;
}

static nvtxRangeId_t NVTX_API start(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    const uint64_t t0 = now_ns();
    pthread_mutex_lock(&mu);
    const uint64_t id = next_id++;
    for (uint32_t k = 0; k < MAX_OPEN; k++) {
        open_range *o = &open_ranges[(id + k) & (MAX_OPEN - 1)];
        if (o->id == 0) {
            *o = (open_range){id, t0, tid_locked(), message_locked(a), domain_index(d)};
            pthread_mutex_unlock(&mu);
            return id;
        }
    }
    dropped++;
    pthread_mutex_unlock(&mu);
    return id; /* its end finds nothing open: counted once above, not again */
}

static void NVTX_API end(nvtxDomainHandle_t d, nvtxRangeId_t id)
{
    (void)d;
    const uint64_t t1 = now_ns();
    pthread_mutex_lock(&mu);
    for (uint32_t k = 0; k < MAX_OPEN; k++) {
        open_range *o = &open_ranges[(id + k) & (MAX_OPEN - 1)];
        if (o->id == id) {
            const range r = {o->t0, t1, o->tid, tid_locked(), o->name, o->domain, -1};
            keep_locked(&r);
            o->id = 0;
            pthread_mutex_unlock(&mu);
            return;
        }
    }
    if (id == 0 || id >= next_id)
        unmatched++;
    pthread_mutex_unlock(&mu);
}

static void put_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            fprintf(f, "\\u%04x", c); /* names are ASCII; anything else shows as its byte */
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void put_event(FILE *f, const char *ph, const range *r, int32_t tid, uint64_t t,
                      const char *tail)
{
    fprintf(f, ",\n{\"ph\":\"%s\",\"name\":", ph);
    put_string(f, names[r->name].s);
    fputs(",\"cat\":", f);
    put_string(f, names[r->domain].s);
    fprintf(f, ",\"pid\":%d,\"tid\":%d,\"ts\":%.3f%s}", (int)owner, (int)tid, (double)t / 1e3,
            tail);
}

static int write_trace(const char *path)
{
    char tmp[sizeof out_path + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)owner);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -errno;
    fprintf(f,
            "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"dropped\":%llu,\"unmatched\":%llu,"
            "\"unclosed\":%llu,\"capacity\":%u},\n\"traceEvents\":[\n"
            "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":",
            (unsigned long long)dropped, (unsigned long long)unmatched,
            (unsigned long long)unclosed, MAX_RANGES, (int)owner);
    put_string(f, program_invocation_short_name);
    fputs("}}", f);
    for (uint32_t i = 0; i < n_threads; i++) {
        fprintf(f,
                ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,"
                "\"args\":{\"name\":",
                (int)owner, (int)threads[i].tid);
        put_string(f, threads[i].name);
        fputs("}}", f);
    }
    for (uint32_t i = 0; i < n_ranges; i++) {
        const range *r = &ranges[i];
        char tail[96];
        if (r->depth >= 0) {
            snprintf(tail, sizeof tail, ",\"dur\":%.3f,\"args\":{\"depth\":%d}",
                     (double)(r->t1 - r->t0) / 1e3, r->depth);
            put_event(f, "X", r, r->tid, r->t0, tail);
        } else {
            snprintf(tail, sizeof tail, ",\"id\":%u", i + 1);
            put_event(f, "b", r, r->tid, r->t0, tail);
            put_event(f, "e", r, r->end_tid, r->t1, tail);
        }
    }
    fputs("\n]}\n", f);
    const int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        const int e = errno ? errno : EIO;
        unlink(tmp);
        return -e;
    }
    return 0;
}

/* At exit (or unload): the trace, by the process that loaded the library only. */
__attribute__((destructor)) static void finish(void)
{
    if (!out_path[0] || getpid() != owner)
        return;
    pthread_mutex_lock(&mu);
    unclosed += (uint64_t)depth; /* the exiting thread's; ended threads counted theirs */
    for (uint32_t k = 0; k < MAX_OPEN; k++)
        unclosed += open_ranges[k].id != 0;
    const int rc = write_trace(out_path);
    if (rc < 0)
        fprintf(stderr, "nvtx_trace: cannot write %s: %s\n", out_path, strerror(-rc));
    else if (dropped || unmatched || unclosed)
        fprintf(stderr, "nvtx_trace: %s: %u ranges, %llu dropped, %llu unmatched, %llu unclosed\n",
                out_path, n_ranges, (unsigned long long)dropped, (unsigned long long)unmatched,
                (unsigned long long)unclosed);
    out_path[0] = '\0';
    pthread_mutex_unlock(&mu);
}

static int install(NvtxGetExportTableFunc_t get, uint32_t module, const uint32_t *ids,
                   NvtxFunctionPointer const *fns, int n)
{
    const NvtxExportTableCallbacks *cb = get(NVTX_ETID_CALLBACKS);
    NvtxFunctionTable table = NULL;
    unsigned int size = 0;
    if (!cb || !cb->GetModuleFunctionTable ||
        !cb->GetModuleFunctionTable((NvtxCallbackModule)module, &table, &size) || !table)
        return 0;
    for (int i = 0; i < n; i++) {
        if (ids[i] >= size || !table[ids[i]])
            return 0;
        *table[ids[i]] = fns[i];
    }
    return 1;
}

/* The process's state, made once: every copy of NVTX in the process (each library built with
 * the header-only NVTX has its own) calls the entry point, and all record into one trace. */
static int setup_locked(void)
{
    static int state; /* 0 not tried, 1 ready, -1 failed */
    if (state)
        return state > 0;
    state = -1;
    const char *path = getenv("STOKER_NVTX_TRACE");
    if (!path || !path[0] || strlen(path) >= sizeof out_path)
        return 0;
    if (pthread_key_create(&exit_key, thread_ends) != 0)
        return 0;
    ranges = malloc(MAX_RANGES * sizeof *ranges);
    if (!ranges)
        return 0;
    strcpy(names[1].s, "?");
    snprintf(out_path, sizeof out_path, "%s", path);
    owner = getpid();
    state = 1;
    return 1;
}

/* NVTX's entry point, once per copy of NVTX: 0 leaves that copy's calls no-ops (no
 * STOKER_NVTX_TRACE, no memory, or an NVTX without the domain API's table). */
int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get);
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get)
{
    static const uint32_t ids[] = {
        NVTX_CBID_CORE2_DomainCreateA,      NVTX_CBID_CORE2_DomainRegisterStringA,
        NVTX_CBID_CORE2_DomainRangePushEx,  NVTX_CBID_CORE2_DomainRangePop,
        NVTX_CBID_CORE2_DomainRangeStartEx, NVTX_CBID_CORE2_DomainRangeEnd};
    const NvtxFunctionPointer fns[] = {
        (NvtxFunctionPointer)domain_create, (NvtxFunctionPointer)register_string,
        (NvtxFunctionPointer)push,          (NvtxFunctionPointer)pop,
        (NvtxFunctionPointer)start,         (NvtxFunctionPointer)end};
    pthread_mutex_lock(&mu);
    const int ok = get && setup_locked() &&
                   install(get, NVTX_CB_MODULE_CORE2, ids, fns, (int)(sizeof ids / sizeof ids[0]));
    pthread_mutex_unlock(&mu);
    return ok;
}
