// A training loop on stoker batches with its own CUDA stream, and the compute-never-waits
// benchmark. Per step, shaped like a training step:
//   next -> make my stream wait on the batch's event -> launch a kernel that runs X ms on
//   the batch -> release the batch with my stream -> wait for the previous step's kernel
//   (as loss.item() would), so at most two steps are queued.
// It reports, as one JSON line: the fraction of wall time the GPU was idle between
// consumer kernels (CUDA events), the fraction the host was blocked in next, p50/p99 of
// next, the delivered bytes per second, and the median time of the consumer's kernel in
// the timed steps beside its median time alone (the same kernel on a copy of the last
// batch, after the loader is destroyed): how much the loader's own GPU work slows it.
//
//   train_loop_cpp DATA [--device N|cpu] [--compute-ms X] [--steps N] [--batch-size B]
//                       [--threads T] [--depth D] [--device-buffers K] [--warmup N]
//                       [--sync spin|block] [--decoder auto|cpu|gpu] [--kernel spin|work]
//                       [--log error|warn|info|debug]
//
// --device cpu keeps host delivery: each host batch is then copied by this program
// (cudaMemcpyAsync on its stream, then a wait for the copy before the release), the way a
// loader without a GPU stage is used. --log writes the loader's messages of that level and
// above to stderr (with info: where the GPU decode stage's time went). --kernel spin
// (default) watches the clock for X ms, so it lasts X ms whatever else runs; --kernel work
// does a fixed amount of arithmetic on every SM, sized before the loader starts to last X
// ms alone, so that its time with the loader shows what the loader's kernels take from it.
#include "consumer_kernel.h"

#include <stoker.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Options {
    const char *data = nullptr;
    long device = 0; // STOKER_OPT_DEVICE: ordinal + 1, -1 cpu, 0 default
    double compute_ms = 0;
    long steps = 200, warmup = 10, batch = 256, threads = 0, depth = 0, bufs = 0;
    bool block = false; // --sync block
    bool work = false;  // --kernel work
    int32_t decoder = -1; // --decoder: a stoker_decoder; -1 the library's default
    int32_t log = -1;     // --log: a stoker_log_level; -1 no log
};

double now()
{
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

[[noreturn]] void die(const char *what, const char *why)
{
    std::fprintf(stderr, "train_loop_cpp: %s: %s\n", what, why);
    std::exit(1);
}

void ck(cudaError_t e, const char *what)
{
    if (e != cudaSuccess)
        die(what, cudaGetErrorString(e));
}

Options parse(int argc, char **argv)
{
    Options o;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        auto num = [&](long &x) { if (!v) die(a.c_str(), "needs a value"); x = std::atol(v); i++; };
        if (a == "--device") {
            if (!v)
                die("--device", "needs a value");
            o.device = std::strcmp(v, "cpu") == 0 ? -1 : std::atol(v) + 1;
            i++;
        } else if (a == "--compute-ms") {
            if (!v)
                die("--compute-ms", "needs a value");
            o.compute_ms = std::atof(v);
            i++;
        } else if (a == "--sync") {
            if (!v || (std::strcmp(v, "spin") != 0 && std::strcmp(v, "block") != 0))
                die("--sync", "needs spin or block");
            o.block = std::strcmp(v, "block") == 0;
            i++;
        } else if (a == "--kernel") {
            if (!v || (std::strcmp(v, "spin") != 0 && std::strcmp(v, "work") != 0))
                die("--kernel", "needs spin or work");
            o.work = std::strcmp(v, "work") == 0;
            i++;
        } else if (a == "--decoder") {
            if (!v || stoker_enum_parse(STOKER_ENUM_DECODER, v, &o.decoder) != 0)
                die("--decoder", "needs auto, cpu or gpu");
            i++;
        } else if (a == "--log") {
            if (!v || stoker_enum_parse(STOKER_ENUM_LOG_LEVEL, v, &o.log) != 0)
                die("--log", "needs error, warn, info or debug");
            i++;
        } else if (a == "--steps") num(o.steps);
        else if (a == "--warmup") num(o.warmup);
        else if (a == "--batch-size") num(o.batch);
        else if (a == "--threads") num(o.threads);
        else if (a == "--depth") num(o.depth);
        else if (a == "--device-buffers") num(o.bufs);
        else if (!o.data && a[0] != '-') o.data = argv[i];
        else die(a.c_str(), "unknown argument");
    }
    if (!o.data)
        die("usage", "train_loop_cpp DATA [--device N|cpu] [--compute-ms X] [--steps N] ...");
    return o;
}

void log_line(void *, int32_t level, const char *msg)
{
    const char *name = stoker_enum_name(STOKER_ENUM_LOG_LEVEL, level);
    std::fprintf(stderr, "stoker %s: %s\n", name ? name : "?", msg);
}

stoker_loader *open_loader(const Options &o)
{
    stoker_config *cfg = nullptr;
    if (stoker_config_create(&cfg) != 0)
        die("config", "out of memory");
    stoker_config_set_int(cfg, STOKER_OPT_DEVICE, o.device);
    stoker_config_set_int(cfg, STOKER_OPT_BATCH_SIZE, o.batch);
    stoker_config_set_int(cfg, STOKER_OPT_THREADS, o.threads);
    stoker_config_set_int(cfg, STOKER_OPT_DEPTH, o.depth);
    stoker_config_set_int(cfg, STOKER_OPT_DEVICE_BUFFERS, o.bufs);
    stoker_config_set_int(cfg, STOKER_OPT_DROP_LAST, 1);
    if (o.decoder >= 0 && stoker_config_set_int(cfg, STOKER_OPT_DECODER, o.decoder) != 0)
        die("--decoder", "not an option of this library");
    if (o.log >= 0)
        stoker_config_set_log(cfg, log_line, nullptr, o.log);
    stoker_loader *l = nullptr;
    if (stoker_loader_create(&l, o.data, cfg) != 0)
        die("create", stoker_loader_errmsg(l));
    stoker_config_destroy(cfg);
    return l;
}

// Events around each step's kernel, kept for a few steps: the gap between step k-1's end
// and step k's start is time the GPU had no consumer work.
struct StepEvents {
    cudaEvent_t start, end;
};

// The consumer's kernel on `stream`: spin X ms, or `iters` rounds of work.
int launch(const Options &o, unsigned long long iters, const void *data, size_t nbytes,
           unsigned long long *dsum, cudaStream_t stream)
{
    return o.work ? consumer_work_launch(data, nbytes, iters, dsum, stream)
                  : consumer_launch(data, nbytes, o.compute_ms, dsum, stream);
}

// Milliseconds of each of `reps` launches of the kernel on `stream`, one at a time.
std::vector<float> time_alone(const Options &o, unsigned long long iters, const void *data,
                              size_t nbytes, unsigned long long *dsum, cudaStream_t stream,
                              int reps)
{
    cudaEvent_t a, b;
    ck(cudaEventCreate(&a), "event");
    ck(cudaEventCreate(&b), "event");
    std::vector<float> ms;
    for (int r = 0; r < reps; r++) {
        float t = 0;
        ck(cudaEventRecord(a, stream), "record");
        if (launch(o, iters, data, nbytes, dsum, stream) != 0)
            die("kernel", "launch failed");
        ck(cudaEventRecord(b, stream), "record");
        ck(cudaEventSynchronize(b), "sync");
        ck(cudaEventElapsedTime(&t, a, b), "elapsed");
        ms.push_back(t);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms;
}

double median(std::vector<float> v)
{
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Rounds of work that take about compute_ms alone, measured before the loader starts.
unsigned long long calibrate(const Options &o, unsigned long long *dsum, cudaStream_t stream)
{
    unsigned long long iters = 1024;
    double ms = median(time_alone(o, iters, nullptr, 0, dsum, stream, 3));
    while (ms < 2 && iters < (1ull << 40)) { // long enough for the clock's resolution
        iters *= 4;
        ms = median(time_alone(o, iters, nullptr, 0, dsum, stream, 3));
    }
    return (unsigned long long)((double)iters * o.compute_ms / ms) + 1;
}

} // namespace

int main(int argc, char **argv)
{
    const Options o = parse(argc, argv);
    // The work kernel is sized before the loader exists, on the GPU it will deliver to (an
    // explicit ordinal, else GPU 0), with nothing else running.
    ck(cudaSetDevice(o.device > 0 ? (int)o.device - 1 : 0), "cudaSetDevice");
    cudaStream_t my;
    ck(cudaStreamCreateWithFlags(&my, cudaStreamNonBlocking), "stream");
    unsigned long long *dsum = nullptr;
    ck(cudaMalloc(&dsum, sizeof *dsum), "cudaMalloc");
    ck(cudaMemsetAsync(dsum, 0, sizeof *dsum, my), "memset");
    const unsigned long long iters = o.work ? calibrate(o, dsum, my) : 0;
    stoker_loader *l = open_loader(o);
    stoker_stats st;
    st.struct_size = sizeof st;
    stoker_loader_get_stats(l, &st);
    const int dev = st.device >= 0 ? st.device : 0;
    ck(cudaSetDevice(dev), "cudaSetDevice");
    void *staging = nullptr; // host delivery: this program's device copy of the batch
    size_t staging_cap = 0;
    const int ring = 4;
    StepEvents ev[ring];
    for (auto &e : ev) {
        ck(cudaEventCreate(&e.start), "event");
        ck(cudaEventCreateWithFlags(&e.end, o.block ? cudaEventBlockingSync : cudaEventDefault),
           "event");
    }
    std::vector<double> next_us;
    std::vector<float> kernel_ms;
    void *last = nullptr; // a copy of the last batch, for the kernel's time alone
    size_t last_bytes = 0;
    double blocked = 0, idle_ms = 0, busy_span_ms = 0, t_begin = 0;
    unsigned long long bytes = 0;
    const long total = o.warmup + o.steps;
    long measured = 0;
    for (long k = 0; k < total; k++) {
        if (k == o.warmup)
            t_begin = now();
        stoker_batch *b = nullptr;
        const double t0 = now();
        int rc = stoker_loader_next(l, &b);
        if (rc == STOKER_END)
            rc = stoker_loader_next(l, &b);
        const double t1 = now();
        if (rc != 0)
            die("next", stoker_loader_errmsg(l));
        stoker_batch_view v;
        v.struct_size = sizeof v;
        stoker_batch_get_view(b, &v);
        const void *data = v.data;
        if (v.device < 0) { // host delivery: copy it ourselves
            if (v.nbytes > staging_cap) {
                cudaFree(staging);
                ck(cudaMalloc(&staging, v.nbytes), "cudaMalloc");
                staging_cap = v.nbytes;
            }
            ck(cudaMemcpyAsync(staging, v.data, v.nbytes, cudaMemcpyHostToDevice, my), "H2D");
            data = staging;
        } else if (stoker_batch_wait_stream(b, my) != 0) {
            die("wait_stream", stoker_loader_errmsg(l));
        }
        StepEvents &e = ev[k % ring];
        ck(cudaEventRecord(e.start, my), "record");
        if (launch(o, iters, data, v.nbytes, dsum, my) != 0)
            die("kernel", "launch failed");
        ck(cudaEventRecord(e.end, my), "record");
        if (k == total - 1) {
            ck(cudaMalloc(&last, v.nbytes), "cudaMalloc");
            ck(cudaMemcpyAsync(last, data, v.nbytes, cudaMemcpyDeviceToDevice, my), "D2D");
            last_bytes = v.nbytes;
        }
        if (v.device < 0) {
            ck(cudaStreamSynchronize(my), "sync"); // the host batch is read by the copy
            stoker_batch_release(b);
        } else if (stoker_batch_release_stream(b, my) != 0) {
            die("release_stream", stoker_loader_errmsg(l));
        }
        if (k > 0) { // wait for the previous step, then account its gap to the one before
            StepEvents &p = ev[(k - 1) % ring];
            ck(cudaEventSynchronize(p.end), "sync");
            if (k - 1 > o.warmup) {
                float gap = 0, run = 0, own = 0;
                ck(cudaEventElapsedTime(&gap, ev[(k - 2) % ring].end, p.start), "elapsed");
                ck(cudaEventElapsedTime(&run, ev[(k - 2) % ring].end, p.end), "elapsed");
                ck(cudaEventElapsedTime(&own, p.start, p.end), "elapsed");
                idle_ms += gap;
                busy_span_ms += run;
                kernel_ms.push_back(own);
            }
        }
        if (k >= o.warmup) {
            next_us.push_back((t1 - t0) * 1e6);
            blocked += t1 - t0;
            bytes += v.nbytes;
            measured++;
        }
    }
    ck(cudaStreamSynchronize(my), "sync");
    const double wall = now() - t_begin;
    unsigned long long sum = 0;
    ck(cudaMemcpy(&sum, dsum, sizeof sum, cudaMemcpyDeviceToHost), "D2H");
    std::sort(next_us.begin(), next_us.end());
    auto pct = [&](double q) {
        return next_us.empty() ? 0.0 : next_us[(size_t)(q * (double)(next_us.size() - 1))];
    };
    stoker_loader_get_stats(l, &st);
    stoker_loader_destroy(l); // the loader's threads and GPU work end here
    const std::vector<float> alone_ms = time_alone(o, iters, last, last_bytes, dsum, my, 21);
    const char *decoder = stoker_enum_name(STOKER_ENUM_DECODER, st.decoder);
    cudaDeviceProp prop;
    ck(cudaGetDeviceProperties(&prop, dev), "properties");
    std::printf("{\"device\":\"%s\",\"delivery\":\"%s\",\"compute_ms\":%.3f,\"steps\":%ld,"
                "\"batch_bytes\":%llu,\"wall_s\":%.4f,\"gpu_idle_fraction\":%.5f,"
                "\"next_block_fraction\":%.5f,\"next_p50_us\":%.1f,\"next_p99_us\":%.1f,"
                "\"ms_per_step\":%.4f,\"GB_per_s\":%.3f,\"pinned_bytes\":%lld,"
                "\"sync\":\"%s\",\"threads\":%d,\"kernel\":\"%s\",\"kernel_ms\":%.4f,"
                "\"kernel_alone_ms\":%.4f,\"decoder\":\"%s\",\"gpu_decoded\":%lld,"
                "\"cpu_decoded\":%lld,\"gpu_share\":%.3f,\"cpu_busy\":%.3f,"
                "\"gpu_busy\":%.3f,\"checksum\":%llu}\n",
                prop.name, st.device >= 0 ? "device" : "host", o.compute_ms, measured,
                measured ? bytes / (unsigned long long)measured : 0ull, wall,
                busy_span_ms > 0 ? idle_ms / busy_span_ms : 0.0, wall > 0 ? blocked / wall : 0,
                pct(0.50), pct(0.99), measured ? wall * 1e3 / (double)measured : 0,
                wall > 0 ? (double)bytes / wall / 1e9 : 0, (long long)st.pinned_bytes, o.block ? "block" : "spin",
                (int)st.threads, o.work ? "work" : "spin", median(kernel_ms), median(alone_ms),
                decoder ? decoder : "n/a", (long long)st.gpu_decoded, (long long)st.cpu_decoded,
                st.gpu_share, st.cpu_busy, st.gpu_busy, sum);
    for (auto &e : ev) {
        cudaEventDestroy(e.start);
        cudaEventDestroy(e.end);
    }
    cudaFree(staging);
    cudaFree(last);
    cudaFree(dsum);
    cudaStreamDestroy(my);
    return 0;
}
