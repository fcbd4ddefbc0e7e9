/* SPDX-License-Identifier: Apache-2.0 */
/* What a server gives to plain parallel ranged GETs: the ceiling for stoker's remote reads.
 *
 *   http_ceiling URL... --block BYTES [--transfers N] [--seconds S] [--out DIR]
 *
 * Cuts every URL (its size from a HEAD) into blocks of BYTES and fetches each block once,
 * in order, with one ranged GET each, N at once (default 16) over libcurl's multi interface
 * with the options stoker's client uses (HTTP/2 where offered, keep-alive), the body
 * discarded, or with --out written to a file of its own in DIR (as `curl -o` would, and as
 * stoker's block cache does; the files are removed after the timing, or a failure).
 * --seconds stops starting GETs after S seconds. One JSON line: urls, file_bytes, block,
 * transfers, requests, bytes, seconds, mb_per_sec (10^6 bytes), complete, to_files. Exit
 * status 2 for bad arguments, 1 when a request fails (the message names URL, range and
 * status). libcurl only: no library code, so it measures the server and the link alone. */
#define _GNU_SOURCE
#include <curl/curl.h>

#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct job {
    const char *url;
    uint64_t offset, length, got;
    char range[64];
    int fd; /* --out: the block's file; -1 when the body is discarded */
    bool failed;
} job;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t parse_size(const char *s)
{
    char *end = NULL;
    const double v = strtod(s, &end);
    double m = 1;
    if (end && (*end == 'K' || *end == 'k'))
        m = 1024.0;
    else if (end && (*end == 'M' || *end == 'm'))
        m = 1024.0 * 1024;
    else if (end && (*end == 'G' || *end == 'g'))
        m = 1024.0 * 1024 * 1024;
    return v > 0 ? (uint64_t)(v * m) : 0;
}

/* A body's bytes: counted, and with --out written to the block's file. */
static size_t on_body(char *p, size_t size, size_t n, void *user)
{
    job *j = user;
    const size_t len = size * n;
    for (size_t at = 0; j->fd >= 0 && at < len;) {
        const ssize_t w = pwrite(j->fd, p + at, len - at, (off_t)(j->got + at));
        if (w <= 0) {
            j->failed = true;
            return 0;
        }
        at += (size_t)w;
    }
    j->got += len;
    return len;
}

static void setup(CURL *e)
{
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 512L << 10); /* as stoker's client */
}

static int64_t head_size(const char *url)
{
    CURL *e = curl_easy_init();
    if (!e)
        return -1;
    setup(e);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    curl_off_t len = -1;
    long status = 0;
    const CURLcode rc = curl_easy_perform(e);
    if (rc == CURLE_OK) {
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_getinfo(e, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len);
    }
    curl_easy_cleanup(e);
    if (rc != CURLE_OK || status != 200 || len < 0) {
        fprintf(stderr, "http_ceiling: %s: HEAD: %s (status %ld)\n", url,
                rc != CURLE_OK ? curl_easy_strerror(rc) : "no size", status);
        return -1;
    }
    return (int64_t)len;
}

int main(int argc, char **argv)
{
    uint64_t block = 0, transfers = 16;
    double seconds = 0;
    const char *out = NULL;
    const char **urls = calloc((size_t)argc, sizeof *urls);
    int nurls = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--block") == 0 && i + 1 < argc)
            block = parse_size(argv[++i]);
        else if (strcmp(argv[i], "--transfers") == 0 && i + 1 < argc)
            transfers = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = strtod(argv[++i], NULL);
        else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            out = argv[++i];
        else if (strncmp(argv[i], "--", 2) == 0) {
            fprintf(stderr, "http_ceiling: unknown option %s\n", argv[i]);
            return 2;
        } else
            urls[nurls++] = argv[i];
    }
    if (!urls || nurls == 0 || block == 0 || transfers == 0 || transfers > 1024) {
        fprintf(stderr, "usage: http_ceiling URL... --block BYTES [--transfers N (1..1024)] "
                        "[--seconds S] [--out DIR]\n");
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    uint64_t file_bytes = 0, njobs = 0;
    int64_t *sizes = calloc((size_t)nurls, sizeof *sizes);
    for (int u = 0; u < nurls; u++) {
        if ((sizes[u] = head_size(urls[u])) < 0)
            return 1;
        file_bytes += (uint64_t)sizes[u];
        njobs += ((uint64_t)sizes[u] + block - 1) / block;
    }
    job *jobs = calloc(njobs ? njobs : 1, sizeof *jobs);
    CURL **easy = calloc(transfers, sizeof *easy);
    if (!jobs || !easy) {
        fprintf(stderr, "http_ceiling: out of memory\n");
        return 1;
    }
    uint64_t k = 0;
    for (int u = 0; u < nurls; u++)
        for (uint64_t off = 0; off < (uint64_t)sizes[u]; off += block, k++) {
            job *j = &jobs[k];
            j->url = urls[u];
            j->offset = off;
            j->length = (uint64_t)sizes[u] - off < block ? (uint64_t)sizes[u] - off : block;
            snprintf(j->range, sizeof j->range, "%" PRIu64 "-%" PRIu64, off, off + j->length - 1);
            j->fd = -1;
        }
    char path[4096];
    CURLM *multi = curl_multi_init();
    curl_multi_setopt(multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    uint64_t next = 0, done = 0, bytes = 0, running = 0;
    const double t0 = now();
    int status = 0;
    for (;;) {
        const bool more = next < njobs && (seconds <= 0 || now() - t0 < seconds);
        for (uint64_t s = 0; more && s < transfers && next < njobs; s++) {
            if (easy[s])
                continue;
            CURL *e = curl_easy_init();
            setup(e);
            job *j = &jobs[next];
            if (out) {
                snprintf(path, sizeof path, "%s/block-%" PRIu64, out, next);
                if ((j->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
                    perror(path);
                    curl_easy_cleanup(e);
                    status = 1;
                    break;
                }
            }
            next++;
            curl_easy_setopt(e, CURLOPT_URL, j->url);
            curl_easy_setopt(e, CURLOPT_RANGE, j->range);
            curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
            curl_easy_setopt(e, CURLOPT_WRITEDATA, j);
            curl_easy_setopt(e, CURLOPT_PRIVATE, j);
            curl_multi_add_handle(multi, e);
            easy[s] = e;
            running++;
        }
        if (running == 0 || status)
            break;
        int still = 0;
        curl_multi_perform(multi, &still);
        CURLMsg *m;
        int left = 0;
        while ((m = curl_multi_info_read(multi, &left))) {
            if (m->msg != CURLMSG_DONE)
                continue;
            CURL *e = m->easy_handle;
            job *j = NULL;
            long code = 0;
            curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&j);
            curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
            if (m->data.result != CURLE_OK || code != 206 || j->got != j->length) {
                fprintf(stderr,
                        "http_ceiling: %s: bytes %s: %s (status %ld, %" PRIu64 " of %" PRIu64
                        " bytes)\n",
                        j->url, j->range,
                        j->failed ? "writing its file failed" : curl_easy_strerror(m->data.result),
                        code, j->got, j->length);
                status = 1;
            }
            if (j->fd >= 0)
                close(j->fd);
            bytes += j->got;
            done++;
            for (uint64_t s = 0; s < transfers; s++)
                if (easy[s] == e)
                    easy[s] = NULL;
            curl_multi_remove_handle(multi, e);
            curl_easy_cleanup(e);
            running--;
        }
        if (status)
            break;
        curl_multi_poll(multi, NULL, 0, 100, NULL);
    }
    const double dt = now() - t0;
    for (uint64_t s = 0; s < transfers; s++)
        if (easy[s]) {
            job *j = NULL;
            curl_easy_getinfo(easy[s], CURLINFO_PRIVATE, (char **)&j);
            if (j && j->fd >= 0)
                close(j->fd);
            curl_multi_remove_handle(multi, easy[s]);
            curl_easy_cleanup(easy[s]);
        }
    curl_multi_cleanup(multi);
    curl_global_cleanup();
    for (uint64_t i = 0; out && i < next; i++) { /* after the timing, or a failure */
        snprintf(path, sizeof path, "%s/block-%" PRIu64, out, i);
        unlink(path);
    }
    printf("{\"urls\": %d, \"file_bytes\": %" PRIu64 ", \"block\": %" PRIu64
           ", \"transfers\": %" PRIu64 ", \"requests\": %" PRIu64 ", \"bytes\": %" PRIu64
           ", \"seconds\": %.6f, \"mb_per_sec\": %.1f, \"complete\": %s, \"to_files\": %s}\n",
           nurls, file_bytes, block, transfers, done, bytes, dt,
           dt > 0 ? (double)bytes / dt / 1e6 : 0.0, done == njobs ? "true" : "false",
           out ? "true" : "false");
    free(jobs);
    free(easy);
    free(sizes);
    free(urls);
    return status;
}
