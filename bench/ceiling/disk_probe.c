/* SPDX-License-Identifier: Apache-2.0 */
/* disk_probe: how fast can the storage itself deliver the reads stoker issues?
 *
 *   disk_probe random FILE... --size BYTES [--qd N] [--threads T] [--seconds S] [--seed S]
 *                             [--checksum]
 *   disk_probe seq FILE... --block BYTES [--qd N] [--threads T] [--seconds S] [--checksum]
 *
 * random: each FILE is cut into slots of SIZE rounded up to 4096 bytes (the room a record of
 * SIZE bytes takes in shards packed with --align 4096) and every slot of every file is read
 * once, in one random permutation: the access pattern of a shuffled epoch. seq: each FILE is
 * read from start to end in BLOCK-byte reads (BLOCK a multiple of 4096), the way a streaming
 * reader or `cat` reads. Reads are O_DIRECT io_uring reads, N in flight in each of T threads
 * (each with its own ring; the threads take the next read in turn), so the page cache plays
 * no part: this is the device's ceiling whatever the cache holds. --seconds stops issuing
 * reads after S seconds (the reads in flight are still counted); --checksum adds the sum of
 * every byte read, which tells that the bytes were really fetched.
 *
 * Sizes take a K, M or G suffix (powers of 1024). FILE may be a regular file or a block
 * device; it is only read. Prints one JSON object on one line. Exit status: 0 measured,
 * 1 an open or read failed, 2 bad arguments, 3 the file system refuses O_DIRECT. */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <liburing.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ALIGN 4096
#define MAX_THREADS 256
#define MAX_QD 4096
#define MAX_READ (1LL << 30)
#define LAT_BUCKETS 100001 /* 1 us each; the last one holds everything from 100 ms on */

enum { EXIT_IO = 1, EXIT_USAGE = 2, EXIT_NO_DIRECT = 3 };

typedef struct source {
    const char *path;
    int fd;
    int64_t size, first; /* first: index of the file's first read in the whole plan */
} source;

typedef struct plan {
    int random;
    int64_t record, read; /* read: bytes asked for by every read (record rounded up) */
    int qd, threads, checksum;
    double seconds;
    uint64_t seed;
    source *src;
    int nsrc;
    int64_t total;   /* reads in the plan */
    uint64_t *order; /* random: the permutation of the plan's reads */
    atomic_llong next;
    atomic_int failed;
} plan;

typedef struct worker {
    plan *p;
    int64_t reads, bytes;
    uint64_t sum;
    double lat_sum, lat_max;
    uint32_t *hist;
    int status;
    char error[512];
} worker;

typedef struct slot {
    int64_t item;
    double issued;
} slot;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: disk_probe random FILE... --size BYTES [--qd N] [--threads T] "
               "[--seconds S]\n"
               "                  [--seed S] [--checksum]\n"
               "       disk_probe seq FILE... --block BYTES [--qd N] [--threads T] "
               "[--seconds S] [--checksum]\n"
               "BYTES takes a K, M or G suffix (powers of 1024); --qd defaults to 32, "
               "--threads to 1.\n");
}

/* Prints "disk_probe: MESSAGE" and returns STATUS, the exit status it calls for. */
static int say(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("disk_probe: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return status;
}

/* A byte count with an optional K, M or G suffix; -1 when it is not one. */
static int64_t parse_bytes(const char *s)
{
    char *end = NULL;
    errno = 0;
    const long long v = s ? strtoll(s, &end, 10) : -1;
    if (!s || errno || end == s || v < 0)
        return -1;
    int shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10;
    else if (*end == 'M' || *end == 'm')
        shift = 20;
    else if (*end == 'G' || *end == 'g')
        shift = 30;
    if (shift)
        end++;
    if (*end || v > (INT64_MAX >> shift))
        return -1;
    return (int64_t)v << shift;
}

static int parse_int(const char *s, long min, long max, long *out)
{
    char *end = NULL;
    errno = 0;
    const long v = s ? strtol(s, &end, 10) : 0;
    if (!s || errno || !*s || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* Checks --size or --block and sets p->record and p->read. */
static int check_read_size(plan *p, const char *size, const char *block)
{
    const char *opt = p->random ? "--size" : "--block", *v = p->random ? size : block;
    if (p->random ? block != NULL : size != NULL)
        return say(EXIT_USAGE, p->random ? "random reads take --size, not --block"
                                         : "sequential reads take --block, not --size");
    if (!v)
        return say(EXIT_USAGE, "%s is missing: the bytes of every read", opt);
    const int64_t n = parse_bytes(v);
    if (n <= 0 || n > MAX_READ)
        return say(EXIT_USAGE, "%s %s: not a byte count from 1 to 1G", opt, v);
    if (!p->random && n % ALIGN != 0)
        return say(EXIT_USAGE,
                   "--block %s: not a multiple of %d bytes, which O_DIRECT reads "
                   "need",
                   v, ALIGN);
    p->record = n;
    p->read = (n + ALIGN - 1) / ALIGN * ALIGN;
    return 0;
}

typedef struct args {
    const char *size, *block, *qd, *threads, *seconds, *seed;
} args;

/* Sorts argv[2..] into files and option values; 0, or an exit status. */
static int split_args(int argc, char **argv, plan *p, args *a, const char **files)
{
    static const char *names[] = {"--size", "--block", "--qd", "--threads", "--seconds", "--seed"};
    const char **slots[] = {&a->size, &a->block, &a->qd, &a->threads, &a->seconds, &a->seed};
    for (int i = 2; i < argc; i++) {
        size_t k = 0;
        while (k < 6 && strcmp(argv[i], names[k]) != 0)
            k++;
        if (k < 6) {
            if (i + 1 >= argc)
                return say(EXIT_USAGE, "%s needs a value", names[k]);
            *slots[k] = argv[++i];
        } else if (!strcmp(argv[i], "--checksum")) {
            p->checksum = 1;
        } else if (argv[i][0] == '-' && argv[i][1] == '-') {
            return say(EXIT_USAGE, "unknown option %s (see --help)", argv[i]);
        } else {
            files[p->nsrc++] = argv[i];
        }
    }
    return p->nsrc > 0 ? 0 : say(EXIT_USAGE, "no FILE to read");
}

static int parse_args(int argc, char **argv, plan *p, const char **files)
{
    if (argc < 2 || (strcmp(argv[1], "random") && strcmp(argv[1], "seq"))) {
        usage(stderr);
        return EXIT_USAGE;
    }
    p->random = !strcmp(argv[1], "random");
    args a = {0};
    int rc = split_args(argc, argv, p, &a, files);
    if (rc == 0)
        rc = check_read_size(p, a.size, a.block);
    long qd = 32, threads = 1, seed = 0;
    if (rc == 0 && a.qd && parse_int(a.qd, 1, MAX_QD, &qd) != 0)
        rc = say(EXIT_USAGE, "--qd %s: not a queue depth from 1 to 4096", a.qd);
    if (rc == 0 && a.threads && parse_int(a.threads, 1, MAX_THREADS, &threads) != 0)
        rc = say(EXIT_USAGE, "--threads %s: not a count from 1 to 256", a.threads);
    if (rc == 0 && a.seed && parse_int(a.seed, 0, INT32_MAX, &seed) != 0)
        rc = say(EXIT_USAGE, "--seed %s: not a non-negative integer", a.seed);
    if (rc == 0 && a.seed && !p->random)
        rc = say(EXIT_USAGE, "--seed is for random reads");
    char *end = NULL;
    if (rc == 0 && a.seconds) {
        p->seconds = strtod(a.seconds, &end);
        if (end == a.seconds || *end || !(p->seconds > 0 && p->seconds < 1e6))
            rc = say(EXIT_USAGE, "--seconds %s: not a positive number of seconds", a.seconds);
    }
    p->qd = (int)qd;
    p->threads = (int)threads;
    p->seed = (uint64_t)seed;
    return rc;
}

/* Opens FILE for O_DIRECT reads and learns its size; 0, or an exit status. */
static int open_source(source *s, const plan *p)
{
    s->fd = open(s->path, O_RDONLY | O_DIRECT | O_CLOEXEC);
    const int direct_errno = s->fd < 0 ? errno : 0;
    if (direct_errno == EINVAL) /* open it plainly to tell a directory from a refusal */
        s->fd = open(s->path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (s->fd < 0 || fstat(s->fd, &st) != 0)
        return say(EXIT_IO, "%s: %s", s->path, strerror(errno));
    uint64_t dev_size = 0;
    if (S_ISBLK(st.st_mode) && ioctl(s->fd, BLKGETSIZE64, &dev_size) == 0)
        s->size = (int64_t)dev_size;
    else if (S_ISREG(st.st_mode))
        s->size = (int64_t)st.st_size;
    else
        return say(EXIT_USAGE, "%s: not a regular file or a block device", s->path);
    if (direct_errno == EINVAL)
        return say(EXIT_NO_DIRECT,
                   "%s: the file system refuses O_DIRECT (%s); the probe reads "
                   "past the page cache or not at all",
                   s->path, strerror(direct_errno));
    if (p->random && s->size < p->read)
        return say(EXIT_USAGE, "%s: %" PRId64 " bytes, shorter than one %" PRId64 "-byte read",
                   s->path, s->size, p->read);
    if (s->size == 0)
        return say(EXIT_USAGE, "%s: empty, nothing to read", s->path);
    return 0;
}

static int64_t reads_of(const source *s, const plan *p)
{
    return p->random ? s->size / p->read : (s->size + p->read - 1) / p->read;
}

/* Opens every file, numbers the reads and, for random reads, shuffles them. */
static int make_plan(plan *p, const char **files)
{
    p->src = calloc((size_t)p->nsrc, sizeof *p->src);
    if (!p->src)
        return say(EXIT_IO, "out of memory");
    for (int i = 0; i < p->nsrc; i++)
        p->src[i] = (source){.path = files[i], .fd = -1};
    for (int i = 0; i < p->nsrc; i++) {
        p->src[i].first = p->total;
        const int rc = open_source(&p->src[i], p);
        if (rc != 0)
            return rc;
        p->total += reads_of(&p->src[i], p);
    }
    if (!p->random)
        return 0;
    p->order = malloc((size_t)p->total * sizeof *p->order);
    if (!p->order)
        return say(EXIT_IO, "out of memory for a permutation of %" PRId64 " reads", p->total);
    uint64_t s = p->seed;
    for (int64_t i = 0; i < p->total; i++)
        p->order[i] = (uint64_t)i;
    for (int64_t i = p->total - 1; i > 0; i--) { /* Fisher-Yates */
        const int64_t j = (int64_t)(next_u64(&s) % (uint64_t)(i + 1));
        const uint64_t t = p->order[i];
        p->order[i] = p->order[j];
        p->order[j] = t;
    }
    return 0;
}

/* The file and offset of read `item` of the plan, and the bytes it must return. */
static const source *locate(const plan *p, int64_t item, int64_t *off, int64_t *want)
{
    const int64_t k = p->random ? (int64_t)p->order[item] : item;
    int lo = 0, hi = p->nsrc - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (p->src[mid].first <= k)
            lo = mid;
        else
            hi = mid - 1;
    }
    const source *s = &p->src[lo];
    *off = (k - s->first) * p->read;
    *want = s->size - *off < p->read ? s->size - *off : p->read;
    return s;
}

/* Records the worker's first failure and stops every worker from issuing more reads. */
static void fail(worker *w, int status, const char *fmt, ...)
{
    if (w->status == 0) {
        va_list ap;
        va_start(ap, fmt);
        w->status = status;
        vsnprintf(w->error, sizeof w->error, fmt, ap);
        va_end(ap);
    }
    atomic_store(&w->p->failed, 1);
}

static void account(worker *w, const uint8_t *buf, int64_t got, double issued)
{
    w->reads++;
    w->bytes += got;
    if (w->p->checksum) {
        uint64_t s = 0;
        for (int64_t i = 0; i < got; i++)
            s += buf[i];
        w->sum += s;
    }
    const double us = (now() - issued) * 1e6;
    w->lat_sum += us;
    if (us > w->lat_max)
        w->lat_max = us;
    w->hist[us < LAT_BUCKETS - 1 ? (int)us : LAT_BUCKETS - 1]++;
}

/* Takes the next read of the plan, if any is left and time remains, into slot `i`. */
static int issue(worker *w, struct io_uring *ring, uint8_t *bufs, slot *slots, int i,
                 double deadline)
{
    plan *p = w->p;
    if (atomic_load(&p->failed) || (deadline > 0 && now() >= deadline))
        return 0;
    const int64_t item = atomic_fetch_add(&p->next, 1);
    if (item >= p->total)
        return 0;
    int64_t off, want;
    const source *s = locate(p, item, &off, &want);
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    io_uring_prep_read(sqe, s->fd, bufs + (size_t)i * (size_t)p->read, (unsigned)p->read,
                       (uint64_t)off);
    io_uring_sqe_set_data64(sqe, (uint64_t)i);
    slots[i] = (slot){item, now()};
    return 1;
}

static void complete(worker *w, struct io_uring_cqe *cqe, const uint8_t *bufs, const slot *slots)
{
    const int i = (int)io_uring_cqe_get_data64(cqe);
    int64_t off, want;
    const source *s = locate(w->p, slots[i].item, &off, &want);
    const char *what = "%s: read of %" PRId64 " bytes at offset %" PRId64 ": %s";
    if (cqe->res == -EINVAL)
        fail(w, EXIT_NO_DIRECT, what, s->path, want, off,
             "the file system refuses O_DIRECT reads (Invalid argument)");
    else if (cqe->res < 0)
        fail(w, EXIT_IO, what, s->path, want, off, strerror(-cqe->res));
    else if (cqe->res != want)
        fail(w, EXIT_IO,
             "%s: read of %" PRId64 " bytes at offset %" PRId64 " returned %d "
             "(did the file shrink?)",
             s->path, want, off, cqe->res);
    else
        account(w, bufs + (size_t)i * (size_t)w->p->read, cqe->res, slots[i].issued);
}

/* Keeps qd reads in flight until the plan or the time is spent, or a read fails; returns
 * the reads still in flight (not 0 only when the ring itself failed). */
static int drive(worker *w, struct io_uring *ring, uint8_t *bufs, slot *slots)
{
    const plan *p = w->p;
    const double deadline = p->seconds > 0 ? now() + p->seconds : 0;
    int free_n = p->qd, in_flight = 0;
    int *free_slots = malloc((size_t)p->qd * sizeof *free_slots);
    if (!free_slots) {
        fail(w, EXIT_IO, "out of memory");
        return 0;
    }
    for (int i = 0; i < p->qd; i++)
        free_slots[i] = i;
    for (;;) {
        while (free_n > 0 && issue(w, ring, bufs, slots, free_slots[free_n - 1], deadline)) {
            free_n--;
            in_flight++;
        }
        if (in_flight == 0)
            break;
        const int rc = io_uring_submit_and_wait(ring, 1);
        if (rc < 0 && rc != -EINTR) {
            fail(w, EXIT_IO, "io_uring_submit_and_wait: %s", strerror(-rc));
            break;
        }
        struct io_uring_cqe *cqe;
        while (io_uring_peek_cqe(ring, &cqe) == 0) {
            free_slots[free_n++] = (int)io_uring_cqe_get_data64(cqe);
            complete(w, cqe, bufs, slots);
            io_uring_cqe_seen(ring, cqe);
            in_flight--;
        }
    }
    free(free_slots);
    return in_flight;
}

static void *work(void *arg)
{
    worker *w = arg;
    const plan *p = w->p;
    struct io_uring ring;
    const int rc = io_uring_queue_init((unsigned)p->qd, &ring, 0);
    if (rc < 0) {
        fail(w, EXIT_IO, "io_uring unavailable: %s", strerror(-rc));
        return NULL;
    }
    uint8_t *bufs = NULL;
    slot *slots = calloc((size_t)p->qd, sizeof *slots);
    w->hist = calloc(LAT_BUCKETS, sizeof *w->hist);
    int in_flight = 0;
    if (!slots || !w->hist ||
        posix_memalign((void **)&bufs, ALIGN, (size_t)p->qd * (size_t)p->read) != 0) {
        bufs = NULL;
        fail(w, EXIT_IO, "out of memory for %d buffers of %" PRId64 " bytes", p->qd, p->read);
    } else {
        in_flight = drive(w, &ring, bufs, slots);
    }
    io_uring_queue_exit(&ring);
    if (in_flight == 0) /* else the kernel may still write into them: the process ends soon */
        free(bufs);
    free(slots);
    return NULL;
}

static double percentile(const uint64_t *hist, int64_t n, double q)
{
    const int64_t rank = (int64_t)(q * (double)(n - 1));
    int64_t seen = 0;
    for (int i = 0; i < LAT_BUCKETS; i++) {
        seen += (int64_t)hist[i];
        if (seen > rank)
            return (double)i + 0.5;
    }
    return LAT_BUCKETS - 1;
}

static void report(const plan *p, const worker *w, double seconds)
{
    int64_t reads = 0, bytes = 0, file_bytes = 0;
    uint64_t sum = 0;
    double lat_sum = 0, lat_max = 0;
    static uint64_t hist[LAT_BUCKETS];
    for (int t = 0; t < p->threads; t++) {
        reads += w[t].reads;
        bytes += w[t].bytes;
        sum += w[t].sum;
        lat_sum += w[t].lat_sum;
        lat_max = w[t].lat_max > lat_max ? w[t].lat_max : lat_max;
        for (int i = 0; i < LAT_BUCKETS && w[t].hist; i++)
            hist[i] += w[t].hist[i];
    }
    for (int i = 0; i < p->nsrc; i++)
        file_bytes += p->src[i].size;
    const double s = seconds > 0 ? seconds : 1e-9;
    printf("{\"mode\":\"%s\",\"direct\":true,\"files\":%d,\"file_bytes\":%" PRId64,
           p->random ? "random" : "seq", p->nsrc, file_bytes);
    if (p->random)
        printf(",\"record_size\":%" PRId64 ",\"seed\":%" PRIu64, p->record, p->seed);
    printf(",\"read_size\":%" PRId64 ",\"qd\":%d,\"threads\":%d,\"reads_planned\":%" PRId64
           ",\"reads\":%" PRId64 ",\"complete\":%s,\"bytes\":%" PRId64 ",\"seconds\":%.6f,"
           "\"mb_per_sec\":%.3f,\"reads_per_sec\":%.3f,\"latency_us\":{\"mean\":%.1f,"
           "\"p50\":%.1f,\"p99\":%.1f,\"max\":%.1f}",
           p->read, p->qd, p->threads, p->total, reads, reads == p->total ? "true" : "false", bytes,
           seconds, (double)bytes / s / 1e6, (double)reads / s,
           reads ? lat_sum / (double)reads : 0.0, reads ? percentile(hist, reads, 0.5) : 0.0,
           reads ? percentile(hist, reads, 0.99) : 0.0, lat_max);
    if (p->checksum)
        printf(",\"checksum\":%" PRIu64, sum);
    printf("}\n");
}

/* Runs the plan over p->threads threads; 0, or the first failure's exit status. */
static int run(plan *p, double *seconds, worker *w)
{
    pthread_t tid[MAX_THREADS];
    int started = 0, status = 0;
    const double t0 = now();
    for (; started < p->threads; started++) {
        w[started] = (worker){.p = p};
        if (pthread_create(&tid[started], NULL, work, &w[started]) != 0)
            break;
    }
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    *seconds = now() - t0;
    for (int i = 0; i < started && status == 0; i++) {
        if (w[i].status != 0) {
            fprintf(stderr, "disk_probe: %s\n", w[i].error);
            status = w[i].status;
        }
    }
    if (status == 0 && started < p->threads) {
        fprintf(stderr, "disk_probe: cannot start %d threads\n", p->threads);
        status = EXIT_IO;
    }
    return status;
}

int main(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        usage(stdout);
        return 0;
    }
    plan p = {.qd = 32, .threads = 1};
    const char **files = calloc((size_t)(argc > 1 ? argc : 1), sizeof *files);
    static worker w[MAX_THREADS];
    int rc = files ? parse_args(argc, argv, &p, files) : EXIT_IO;
    if (rc == 0)
        rc = make_plan(&p, files);
    double seconds = 0;
    if (rc == 0)
        rc = run(&p, &seconds, w);
    if (rc == 0)
        report(&p, w, seconds);
    for (int i = 0; i < p.nsrc && p.src; i++)
        if (p.src[i].fd >= 0)
            close(p.src[i].fd);
    for (int t = 0; t < MAX_THREADS; t++)
        free(w[t].hist);
    free(p.src);
    free(p.order);
    free(files);
    return rc;
}
