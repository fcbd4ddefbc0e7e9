// A training loop on stoker batches with its own CUDA stream, and the compute-never-waits
// benchmark. Per step, shaped like a training step:
//   next -> make my stream wait on the batch's event -> launch a kernel that runs X ms on
//   the batch -> release the batch with my stream -> wait for the previous step's kernel
//   (as loss.item() would), so at most two steps are queued.
// It reports, as one JSON line: the fraction of wall time the GPU was idle between
// consumer kernels (CUDA events), the fraction the host was blocked in next, p50/p99 of
// next, and the delivered bytes per second.
//
//   train_loop_cpp DATA [--device N|cpu] [--compute-ms X] [--steps N] [--batch-size B]
//                       [--threads T] [--depth D] [--device-buffers K] [--warmup N]
//                       [--sync spin|block]
//
// --device cpu keeps host delivery: each host batch is then copied by this program
// (cudaMemcpyAsync on its stream, then a wait for the copy before the release), the way a
// loader without a GPU stage is used.
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

} // namespace

int main(int argc, char **argv)
{
    const Options o = parse(argc, argv);
    stoker_loader *l = open_loader(o);
    stoker_stats st;
    st.struct_size = sizeof st;
    stoker_loader_get_stats(l, &st);
    const int dev = st.device >= 0 ? st.device : 0;
    ck(cudaSetDevice(dev), "cudaSetDevice");
    cudaStream_t my;
    ck(cudaStreamCreateWithFlags(&my, cudaStreamNonBlocking), "stream");
    unsigned long long *dsum = nullptr;
    ck(cudaMalloc(&dsum, sizeof *dsum), "cudaMalloc");
    ck(cudaMemsetAsync(dsum, 0, sizeof *dsum, my), "memset");
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
        if (consumer_launch(data, v.nbytes, o.compute_ms, dsum, my) != 0)
            die("kernel", "launch failed");
        ck(cudaEventRecord(e.end, my), "record");
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
                float gap = 0, run = 0;
                ck(cudaEventElapsedTime(&gap, ev[(k - 2) % ring].end, p.start), "elapsed");
                ck(cudaEventElapsedTime(&run, ev[(k - 2) % ring].end, p.end), "elapsed");
                idle_ms += gap;
                busy_span_ms += run;
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
    cudaDeviceProp prop;
    ck(cudaGetDeviceProperties(&prop, dev), "properties");
    std::printf("{\"device\":\"%s\",\"delivery\":\"%s\",\"compute_ms\":%.3f,\"steps\":%ld,"
                "\"batch_bytes\":%llu,\"wall_s\":%.4f,\"gpu_idle_fraction\":%.5f,"
                "\"next_block_fraction\":%.5f,\"next_p50_us\":%.1f,\"next_p99_us\":%.1f,"
                "\"ms_per_step\":%.4f,\"GB_per_s\":%.3f,\"pinned_bytes\":%lld,"
                "\"sync\":\"%s\",\"threads\":%d,\"checksum\":%llu}\n",
                prop.name, st.device >= 0 ? "device" : "host", o.compute_ms, measured,
                measured ? bytes / (unsigned long long)measured : 0ull, wall,
                busy_span_ms > 0 ? idle_ms / busy_span_ms : 0.0, wall > 0 ? blocked / wall : 0,
                pct(0.50), pct(0.99), measured ? wall * 1e3 / (double)measured : 0,
                wall > 0 ? (double)bytes / wall / 1e9 : 0, (long long)st.pinned_bytes, o.block ? "block" : "spin",
                (int)st.threads, sum);
    for (auto &e : ev) {
        cudaEventDestroy(e.start);
        cudaEventDestroy(e.end);
    }
    cudaFree(staging);
    cudaFree(dsum);
    cudaStreamDestroy(my);
    stoker_loader_destroy(l);
    return 0;
}
