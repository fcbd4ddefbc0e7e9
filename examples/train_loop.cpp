/* SPDX-License-Identifier: Apache-2.0 */
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
//                       [--sync spin|block] [--decoder auto|cpu|gpu]
//                       [--kernel spin|work|net] [--launches N] [--host-us U]
//                       [--backward-thread] [--net-iters I] [--synthetic]
//                       [--log error|warn|info|debug]
//
// --device cpu keeps host delivery: each host batch is then copied by this program
// (cudaMemcpyAsync on its stream, then a wait for the copy before the release), the way a
// loader without a GPU stage is used. --log writes the loader's messages of that level and
// above to stderr (with info: where the GPU decode stage's time went). --kernel spin
// (default) watches the clock for X ms, so it lasts X ms whatever else runs; --kernel work
// does a fixed amount of arithmetic on every SM, sized before the loader starts to last X
// ms alone, so that its time with the loader shows what the loader's kernels take from it.
//
// --kernel net behaves like a network: per step a chain of --launches N short kernels (300
// by default; each reads the previous one's output, the first reads the batch) launched
// one by one from this thread, each sized before the loader starts so that the chain's GPU
// time alone is X ms; --host-us U spins U us on the host before each launch (a framework's
// own work per operation: 0 by default); --backward-thread launches the last two thirds of
// the chain from a second host thread, on the same stream, while this one waits for it (as
// autograd's engine runs the backward pass); --net-iters I gives the layers' size instead
// of sizing them. It adds to the JSON line the host time of each launch call (mean, p50,
// p99 over the timed steps: what grows when other threads of the process, such as the
// loader's GPU decode, make CUDA calls meanwhile), the same mean before the loader starts
// and after it is destroyed, the host time to queue a step, the chain's GPU time alone and
// the share of wall time the GPU did not run the chain (net_gpu_idle_fraction: between
// steps, and between launches when the host falls behind).
// --synthetic feeds every step the same batch with no loader running: the data set's first
// batch, loaded once on the host and copied to the GPU before the loader is destroyed: the
// consumer's own speed, to hold the runs with a loader against.
#include "consumer_kernel.h"

#include <stoker.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Options {
    const char *data = nullptr;
    long device = 0; // STOKER_OPT_DEVICE: ordinal + 1, -1 cpu, 0 default
    double compute_ms = 0;
    long steps = 200, warmup = 10, batch = 256, threads = 0, depth = 0, bufs = 0;
    bool block = false;           // --sync block
    bool work = false;            // --kernel work
    bool net = false;             // --kernel net
    long launches = 300;          // --launches: kernels per step of the net consumer
    double host_us = 0;           // --host-us: host work before each launch
    bool backward_thread = false; // --backward-thread
    long long net_iters = -1;     // --net-iters: the layers' rounds; -1 sized to X
    bool synthetic = false;       // --synthetic: one fixed batch, no loader
    int32_t decoder = -1;         // --decoder: a stoker_decoder; -1 the library's default
    int32_t log = -1;             // --log: a stoker_log_level; -1 no log
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

// A stoker call's status: 0, or exit naming the call and the loader's message (if any).
void sk(int rc, const char *what, const stoker_loader *l = nullptr)
{
    if (rc != 0) {
        const char *msg = l ? stoker_loader_errmsg(l) : nullptr;
        die(what, msg && *msg ? msg : stoker_strerror(rc));
    }
}

// A number that must be a whole string: --launches 3x is refused, not read as 3.
double number(const char *opt, const char *v, double lo)
{
    char *end = nullptr;
    const double x = v ? std::strtod(v, &end) : 0;
    if (!v || end == v || *end != '\0' || !(x >= lo))
        die(opt, lo > 0 ? "needs a positive number" : "needs a number >= 0");
    return x;
}

Options parse(int argc, char **argv)
{
    Options o;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        auto num = [&](long &x) {
            if (!v)
                die(a.c_str(), "needs a value");
            x = std::atol(v);
            i++;
        };
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
            if (!v || (std::strcmp(v, "spin") != 0 && std::strcmp(v, "work") != 0 &&
                       std::strcmp(v, "net") != 0))
                die("--kernel", "needs spin, work or net");
            o.work = std::strcmp(v, "work") == 0;
            o.net = std::strcmp(v, "net") == 0;
            i++;
        } else if (a == "--launches") {
            o.launches = (long)number("--launches", v, 1);
            i++;
        } else if (a == "--host-us") {
            o.host_us = number("--host-us", v, 0);
            i++;
        } else if (a == "--net-iters") {
            o.net_iters = (long long)number("--net-iters", v, 0);
            i++;
        } else if (a == "--backward-thread") {
            o.backward_thread = true;
        } else if (a == "--synthetic") {
            o.synthetic = true;
        } else if (a == "--decoder") {
            if (!v || stoker_enum_parse(STOKER_ENUM_DECODER, v, &o.decoder) != 0)
                die("--decoder", "needs auto, cpu or gpu");
            i++;
        } else if (a == "--log") {
            if (!v || stoker_enum_parse(STOKER_ENUM_LOG_LEVEL, v, &o.log) != 0)
                die("--log", "needs error, warn, info or debug");
            i++;
        } else if (a == "--steps")
            num(o.steps);
        else if (a == "--warmup")
            num(o.warmup);
        else if (a == "--batch-size")
            num(o.batch);
        else if (a == "--threads")
            num(o.threads);
        else if (a == "--depth")
            num(o.depth);
        else if (a == "--device-buffers")
            num(o.bufs);
        else if (!o.data && a[0] != '-')
            o.data = argv[i];
        else
            die(a.c_str(), "unknown argument");
    }
    if (!o.data)
        die("usage", "train_loop_cpp DATA [--device N|cpu] [--compute-ms X] [--steps N] ...");
    if (o.synthetic && o.device < 0)
        die("--synthetic", "needs a GPU (--device N, or the default GPU 0)");
    if (o.net && o.backward_thread && o.launches < 3)
        die("--backward-thread", "needs --launches 3 or more");
    if (o.net && o.launches > 100000)
        die("--launches", "at most 100000");
    return o;
}

void log_line(void *, int32_t level, const char *msg)
{
    const char *name = stoker_enum_name(STOKER_ENUM_LOG_LEVEL, level);
    std::fprintf(stderr, "stoker %s: %s\n", name ? name : "?", msg);
}

// The loader, delivering to `device` (STOKER_OPT_DEVICE's value: ordinal + 1, -1 host).
stoker_loader *open_loader(const Options &o, long device)
{
    stoker_config *cfg = nullptr;
    if (stoker_config_create(&cfg) != 0)
        die("config", "out of memory");
    sk(stoker_config_set_int(cfg, STOKER_OPT_DEVICE, device), "--device");
    sk(stoker_config_set_int(cfg, STOKER_OPT_BATCH_SIZE, o.batch), "--batch-size");
    sk(stoker_config_set_int(cfg, STOKER_OPT_THREADS, o.threads), "--threads");
    sk(stoker_config_set_int(cfg, STOKER_OPT_DEPTH, o.depth), "--depth");
    sk(stoker_config_set_int(cfg, STOKER_OPT_DEVICE_BUFFERS, o.bufs), "--device-buffers");
    sk(stoker_config_set_int(cfg, STOKER_OPT_DROP_LAST, 1), "drop_last");
    if (o.decoder >= 0 && stoker_config_set_int(cfg, STOKER_OPT_DECODER, o.decoder) != 0)
        die("--decoder", "not an option of this library");
    if (o.log >= 0)
        sk(stoker_config_set_log(cfg, log_line, nullptr, o.log), "--log");
    stoker_loader *l = nullptr;
    const int rc = stoker_loader_create(&l, o.data, cfg);
    if (rc != 0)
        die("create",
            l && *stoker_loader_errmsg(l) ? stoker_loader_errmsg(l) : stoker_strerror(rc));
    stoker_config_destroy(cfg);
    return l;
}

// --synthetic's batch: the data set's first, from a loader with host delivery (no CUDA
// call of its own), copied to device memory; the loader is gone when this returns.
void *synthetic_batch(const Options &o, size_t *nbytes)
{
    stoker_loader *l = open_loader(o, -1);
    stoker_batch *b = nullptr;
    sk(stoker_loader_next(l, &b), "next (synthetic batch)", l);
    stoker_batch_view v;
    v.struct_size = sizeof v;
    sk(stoker_batch_get_view(b, &v), "batch view", l);
    void *d = nullptr;
    ck(cudaMalloc(&d, v.nbytes ? v.nbytes : 1), "cudaMalloc (synthetic batch)");
    ck(cudaMemcpy(d, v.data, v.nbytes, cudaMemcpyHostToDevice), "H2D (synthetic batch)");
    *nbytes = v.nbytes;
    sk(stoker_batch_release(b), "release", l);
    stoker_loader_destroy(l);
    return d;
}

void spin_us(double us)
{
    if (us <= 0)
        return;
    const double end = now() + us * 1e-6;
    while (now() < end) {
    }
}

// The network-like consumer: a step is a chain of `launches` kernels on one stream, layer i
// reading layer i-1's activations (two buffers, in turn); the first reads the batch. With
// a backward thread, the main thread launches the first third and hands the rest to it,
// then waits until it has launched them. Each launch call is timed on the host.
class Net {
public:
    Net(const Options &o, cudaStream_t s, int dev, unsigned long long *dsum)
        : host_us(o.host_us), n_(o.launches),
          split_(o.backward_thread ? std::max(1L, o.launches / 3) : o.launches), s_(s), dsum_(dsum)
    {
        const size_t bytes = consumer_net_width() * sizeof(float);
        for (auto &a : act_) {
            ck(cudaMalloc(&a, bytes), "cudaMalloc (activations)");
            ck(cudaMemsetAsync(a, 0, bytes, s_), "memset (activations)");
        }
        if (split_ < n_)
            th_ = std::thread([this, dev] { backward_main(dev); });
    }
    Net(const Net &) = delete;
    Net &operator=(const Net &) = delete;

    ~Net()
    {
        if (th_.joinable()) {
            {
                std::lock_guard<std::mutex> g(mu_);
                quit_ = true;
            }
            cv_.notify_all();
            th_.join();
        }
        for (auto &a : act_)
            ck(cudaFree(a), "cudaFree (activations)");
    }

    // Queues one step on the stream; with `record`, keeps each launch call's host time.
    cudaError_t step(const void *data, unsigned long long nbytes, bool record)
    {
        cudaError_t e = layers(0, split_, data, nbytes, record ? &fwd_us_ : nullptr);
        if (e != cudaSuccess || split_ == n_)
            return e;
        std::unique_lock<std::mutex> g(mu_);
        data_ = data;
        nbytes_ = nbytes;
        rec_ = record;
        gen_++;
        cv_.notify_all();
        cv_.wait(g, [this] { return done_ == gen_; });
        return bwd_err_;
    }

    // The host times (us) of the launches recorded since the last clear, both threads'.
    std::vector<double> launch_us() const
    {
        std::vector<double> v(fwd_us_);
        v.insert(v.end(), bwd_us_.begin(), bwd_us_.end());
        return v;
    }
    void clear()
    {
        fwd_us_.clear();
        bwd_us_.clear();
    }

    unsigned long long iters = 0; // rounds of each layer after the first
    double host_us;               // host work before each launch

private:
    cudaError_t layers(long from, long to, const void *data, unsigned long long nbytes,
                       std::vector<double> *rec)
    {
        for (long i = from; i < to; i++) {
            spin_us(host_us);
            const double t0 = now();
            const cudaError_t e =
                i == 0 ? consumer_net_first(data, nbytes, act_[0], dsum_, s_)
                       : consumer_net_layer(act_[(i - 1) % 2], act_[i % 2], iters, s_);
            const double t1 = now();
            if (e != cudaSuccess)
                return e;
            if (rec)
                rec->push_back((t1 - t0) * 1e6);
        }
        return cudaSuccess;
    }

    void backward_main(int dev)
    {
        const cudaError_t set = cudaSetDevice(dev);
        std::unique_lock<std::mutex> g(mu_);
        for (;;) {
            cv_.wait(g, [this] { return quit_ || gen_ != done_; });
            if (quit_)
                return;
            const void *data = data_;
            const unsigned long long nbytes = nbytes_;
            const bool rec = rec_;
            g.unlock(); // the launches run unlocked; the main thread waits for done_
            const cudaError_t e = set != cudaSuccess
                                      ? set
                                      : layers(split_, n_, data, nbytes, rec ? &bwd_us_ : nullptr);
            g.lock();
            bwd_err_ = e;
            done_ = gen_;
            cv_.notify_all();
        }
    }

    const long n_, split_;
    cudaStream_t s_;
    unsigned long long *dsum_;
    float *act_[2] = {nullptr, nullptr};
    std::vector<double> fwd_us_, bwd_us_;
    std::thread th_;
    std::mutex mu_;
    std::condition_variable cv_;
    unsigned long long gen_ = 0, done_ = 0;
    bool quit_ = false;
    const void *data_ = nullptr;
    unsigned long long nbytes_ = 0;
    bool rec_ = false;
    cudaError_t bwd_err_ = cudaSuccess;
};

// Events around each step's kernel, kept for a few steps: the gap between step k-1's end
// and step k's start is time the GPU had no consumer work.
struct StepEvents {
    cudaEvent_t start, end;
};

// The consumer's step on `stream`: spin X ms, `iters` rounds of work, or the net's chain
// (whose launch times are kept when `record`).
void launch(const Options &o, unsigned long long iters, Net *net, const void *data, size_t nbytes,
            unsigned long long *dsum, cudaStream_t stream, bool record)
{
    if (net) {
        ck(net->step(data, nbytes, record), "net kernel launch");
        return;
    }
    if ((o.work ? consumer_work_launch(data, nbytes, iters, dsum, stream)
                : consumer_launch(data, nbytes, o.compute_ms, dsum, stream)) != 0)
        die("kernel", "launch failed");
}

// Milliseconds of each of `reps` steps of the consumer on `stream`, one at a time.
std::vector<float> time_alone(const Options &o, unsigned long long iters, Net *net,
                              const void *data, size_t nbytes, unsigned long long *dsum,
                              cudaStream_t stream, int reps)
{
    cudaEvent_t a, b;
    ck(cudaEventCreate(&a), "event");
    ck(cudaEventCreate(&b), "event");
    std::vector<float> ms;
    for (int r = 0; r < reps; r++) {
        float t = 0;
        ck(cudaEventRecord(a, stream), "record");
        launch(o, iters, net, data, nbytes, dsum, stream, true);
        ck(cudaEventRecord(b, stream), "record");
        ck(cudaEventSynchronize(b), "sync");
        ck(cudaEventElapsedTime(&t, a, b), "elapsed");
        ms.push_back(t);
    }
    ck(cudaEventDestroy(a), "event destroy");
    ck(cudaEventDestroy(b), "event destroy");
    return ms;
}

double median(std::vector<float> v)
{
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

double mean(const std::vector<double> &v)
{
    return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / (double)v.size();
}

// The q-quantile of v (sorted here), 0 when empty.
double quantile(std::vector<double> v, double q)
{
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    return v[(size_t)(q * (double)(v.size() - 1))];
}

// Rounds of work that take about compute_ms alone, measured before the loader starts.
unsigned long long calibrate(const Options &o, unsigned long long *dsum, cudaStream_t stream)
{
    unsigned long long iters = 1024;
    double ms = median(time_alone(o, iters, nullptr, nullptr, 0, dsum, stream, 3));
    while (ms < 2 && iters < (1ull << 40)) { // long enough for the clock's resolution
        iters *= 4;
        ms = median(time_alone(o, iters, nullptr, nullptr, 0, dsum, stream, 3));
    }
    return (unsigned long long)((double)iters * o.compute_ms / ms) + 1;
}

// Milliseconds the net's chain runs on the GPU alone (median of `reps`), without the
// host's part: each chain is queued behind a spinning kernel (a gate) that lasts until
// every launch is queued, so the layers run back to back; a gate that ended too soon is
// lengthened and the chain timed again. No host work between launches here; the launch
// times are kept (net.launch_us()).
double net_gpu_ms(const Options &o, Net &net, const void *data, size_t nbytes,
                  unsigned long long *dsum, cudaStream_t stream, int reps)
{
    cudaEvent_t a, b;
    ck(cudaEventCreate(&a), "event");
    ck(cudaEventCreate(&b), "event");
    const double host_us = net.host_us;
    net.host_us = 0;
    double gate_ms = 1 + 0.02 * (double)o.launches;
    std::vector<float> ms;
    while ((int)ms.size() < reps) {
        if (consumer_launch(nullptr, 0, gate_ms, dsum, stream) != 0)
            die("gate kernel", "launch failed");
        ck(cudaEventRecord(a, stream), "record");
        ck(net.step(data, nbytes, true), "net kernel launch");
        ck(cudaEventRecord(b, stream), "record");
        const cudaError_t q = cudaEventQuery(a); // not ready: the gate outlasted the launches
        ck(cudaEventSynchronize(b), "sync");
        if (q == cudaSuccess) {
            gate_ms *= 2;
            if (gate_ms > 60000)
                die("--kernel net", "cannot queue the chain ahead of the GPU (launches too slow)");
            continue;
        }
        if (q != cudaErrorNotReady)
            ck(q, "event query");
        float t = 0;
        ck(cudaEventElapsedTime(&t, a, b), "elapsed");
        ms.push_back(t);
    }
    net.host_us = host_us;
    ck(cudaEventDestroy(a), "event destroy");
    ck(cudaEventDestroy(b), "event destroy");
    return median(ms);
}

// Rounds per layer for which the chain's GPU time alone is about compute_ms, measured
// before the loader starts: the chain's time is its time with no rounds (launch and memory
// of every layer) plus a part that grows with the rounds.
unsigned long long calibrate_net(const Options &o, Net &net, unsigned long long *dsum,
                                 cudaStream_t stream)
{
    net.iters = 0;
    const double floor = net_gpu_ms(o, net, nullptr, 0, dsum, stream, 3);
    const double want = o.compute_ms - floor;
    if (want <= 0.02 * floor) {
        std::fprintf(stderr,
                     "train_loop_cpp: --kernel net: %ld layers take %.3f ms on the GPU with "
                     "no work, more than --compute-ms %.3f: they run with none\n",
                     o.launches, floor, o.compute_ms);
        return 0;
    }
    unsigned long long it = 16;
    double ms = floor;
    for (;;) {
        net.iters = it;
        ms = net_gpu_ms(o, net, nullptr, 0, dsum, stream, 1);
        if (ms - floor >= 0.5 * want || it >= (1ull << 34))
            break;
        it *= 2;
    }
    double est = ms > floor ? (double)it * want / (ms - floor) : (double)it;
    net.iters = (unsigned long long)est + 1; // once more at the estimate, for the curve's bend
    ms = net_gpu_ms(o, net, nullptr, 0, dsum, stream, 3);
    if (ms > floor)
        est *= want / (ms - floor);
    return (unsigned long long)est + 1;
}

// printf onto a string: the JSON line is built in parts.
__attribute__((format(printf, 2, 3))) void put(std::string &s, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    const int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof buf)
        die("output", "a JSON field too long");
    s += buf;
}

} // namespace

int main(int argc, char **argv)
{
    const Options o = parse(argc, argv);
    // The work kernel and the net's layers are sized before the loader exists, on the GPU
    // it will deliver to (an explicit ordinal, else GPU 0), with nothing else running.
    ck(cudaSetDevice(o.device > 0 ? (int)o.device - 1 : 0), "cudaSetDevice");
    int first_dev = 0;
    ck(cudaGetDevice(&first_dev), "cudaGetDevice");
    cudaStream_t my;
    ck(cudaStreamCreateWithFlags(&my, cudaStreamNonBlocking), "stream");
    unsigned long long *dsum = nullptr;
    ck(cudaMalloc(&dsum, sizeof *dsum), "cudaMalloc");
    ck(cudaMemsetAsync(dsum, 0, sizeof *dsum, my), "memset");
    const unsigned long long iters = o.work ? calibrate(o, dsum, my) : 0;
    std::unique_ptr<Net> net;
    double launch_before = 0, chain_before_ms = 0;
    if (o.net) {
        net.reset(new Net(o, my, first_dev, dsum));
        net->iters =
            o.net_iters >= 0 ? (unsigned long long)o.net_iters : calibrate_net(o, *net, dsum, my);
        net->clear();
        chain_before_ms = net_gpu_ms(o, *net, nullptr, 0, dsum, my, 3);
        launch_before = mean(net->launch_us());
        net->clear();
    }
    stoker_loader *l = nullptr;
    stoker_stats st;
    std::memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    st.device = -1;
    void *synth = nullptr; // --synthetic: the one batch every step reads
    size_t synth_bytes = 0;
    if (o.synthetic) {
        synth = synthetic_batch(o, &synth_bytes);
    } else {
        l = open_loader(o, o.device);
        sk(stoker_loader_get_stats(l, &st), "stats", l);
    }
    const int dev = o.synthetic ? first_dev : st.device >= 0 ? st.device : 0;
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
    std::vector<double> next_us, host_ms;
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
        const void *data = synth;
        size_t nbytes = synth_bytes;
        bool host_batch = false;
        const double t0 = now();
        double t1 = t0;
        if (!o.synthetic) {
            int rc = stoker_loader_next(l, &b);
            if (rc == STOKER_END)
                rc = stoker_loader_next(l, &b);
            t1 = now();
            sk(rc, "next", l);
            stoker_batch_view v;
            v.struct_size = sizeof v;
            sk(stoker_batch_get_view(b, &v), "batch view", l);
            data = v.data;
            nbytes = v.nbytes;
            if (v.device < 0) { // host delivery: copy it ourselves
                host_batch = true;
                if (v.nbytes > staging_cap) {
                    ck(cudaFree(staging), "cudaFree");
                    ck(cudaMalloc(&staging, v.nbytes), "cudaMalloc");
                    staging_cap = v.nbytes;
                }
                ck(cudaMemcpyAsync(staging, v.data, v.nbytes, cudaMemcpyHostToDevice, my), "H2D");
                data = staging;
            } else {
                sk(stoker_batch_wait_stream(b, my), "wait_stream", l);
            }
        }
        StepEvents &e = ev[k % ring];
        ck(cudaEventRecord(e.start, my), "record");
        const double h0 = now();
        launch(o, iters, net.get(), data, nbytes, dsum, my, k >= o.warmup);
        const double h1 = now();
        ck(cudaEventRecord(e.end, my), "record");
        if (k == total - 1) {
            ck(cudaMalloc(&last, nbytes ? nbytes : 1), "cudaMalloc");
            ck(cudaMemcpyAsync(last, data, nbytes, cudaMemcpyDeviceToDevice, my), "D2D");
            last_bytes = nbytes;
        }
        if (host_batch) {
            ck(cudaStreamSynchronize(my), "sync"); // the host batch is read by the copy
            sk(stoker_batch_release(b), "release", l);
        } else if (b) {
            sk(stoker_batch_release_stream(b, my), "release_stream", l);
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
            host_ms.push_back((h1 - h0) * 1e3);
            blocked += t1 - t0;
            bytes += nbytes;
            measured++;
        }
    }
    ck(cudaStreamSynchronize(my), "sync");
    const double wall = now() - t_begin;
    unsigned long long sum = 0;
    ck(cudaMemcpy(&sum, dsum, sizeof sum, cudaMemcpyDeviceToHost), "D2H");
    const std::vector<double> step_launch_us = net ? net->launch_us() : std::vector<double>();
    if (l) {
        sk(stoker_loader_get_stats(l, &st), "stats", l);
        stoker_loader_destroy(l); // the loader's threads and GPU work end here
    }
    if (net)
        net->clear();
    const std::vector<float> alone_ms =
        time_alone(o, iters, net.get(), last, last_bytes, dsum, my, 21);
    double launch_after = 0, chain_ms = 0;
    if (net) {
        launch_after = mean(net->launch_us());
        net->clear();
        chain_ms = net_gpu_ms(o, *net, last, last_bytes, dsum, my, 5);
    }
    const char *decoder = o.synthetic ? "none" : stoker_enum_name(STOKER_ENUM_DECODER, st.decoder);
    cudaDeviceProp prop;
    ck(cudaGetDeviceProperties(&prop, dev), "properties");
    const double per_step_ms = measured ? wall * 1e3 / (double)measured : 0;
    std::string js;
    put(js,
        "{\"device\":\"%s\",\"delivery\":\"%s\",\"compute_ms\":%.3f,\"steps\":%ld,"
        "\"batch\":%ld,\"batch_bytes\":%llu,\"wall_s\":%.4f,\"gpu_idle_fraction\":%.5f,",
        prop.name,
        o.synthetic      ? "synthetic"
        : st.device >= 0 ? "device"
                         : "host",
        o.compute_ms, measured, o.batch, measured ? bytes / (unsigned long long)measured : 0ull,
        wall, busy_span_ms > 0 ? idle_ms / busy_span_ms : 0.0);
    put(js,
        "\"next_block_fraction\":%.5f,\"next_p50_us\":%.1f,\"next_p99_us\":%.1f,"
        "\"ms_per_step\":%.4f,\"steps_per_s\":%.3f,\"img_per_s\":%.1f,\"GB_per_s\":%.3f,"
        "\"host_ms_per_step\":%.4f,\"pinned_bytes\":%lld,",
        wall > 0 ? blocked / wall : 0, quantile(next_us, 0.50), quantile(next_us, 0.99),
        per_step_ms, wall > 0 ? (double)measured / wall : 0,
        wall > 0 ? (double)measured * (double)o.batch / wall : 0,
        wall > 0 ? (double)bytes / wall / 1e9 : 0, mean(host_ms), (long long)st.pinned_bytes);
    put(js,
        "\"sync\":\"%s\",\"threads\":%d,\"kernel\":\"%s\",\"kernel_ms\":%.4f,"
        "\"kernel_alone_ms\":%.4f,",
        o.block ? "block" : "spin", (int)st.threads,
        o.net    ? "net"
        : o.work ? "work"
                 : "spin",
        median(kernel_ms), median(alone_ms));
    if (net)
        put(js,
            "\"launches\":%ld,\"host_us\":%.2f,\"backward_thread\":%s,\"net_iters\":%llu,"
            "\"launch_us_mean\":%.3f,\"launch_us_p50\":%.3f,\"launch_us_p99\":%.3f,"
            "\"launch_us_before\":%.3f,\"launch_us_after\":%.3f,\"chain_gpu_ms\":%.4f,"
            "\"chain_gpu_ms_before\":%.4f,\"net_gpu_idle_fraction\":%.5f,",
            o.launches, o.host_us, o.backward_thread ? "true" : "false", net->iters,
            mean(step_launch_us), quantile(step_launch_us, 0.50), quantile(step_launch_us, 0.99),
            launch_before, launch_after, chain_ms, chain_before_ms,
            wall > 0 ? std::max(0.0, 1 - (double)measured * chain_ms * 1e-3 / wall) : 0.0);
    put(js,
        "\"decoder\":\"%s\",\"gpu_decoded\":%lld,\"cpu_decoded\":%lld,\"gpu_share\":%.3f,"
        "\"cpu_busy\":%.3f,\"gpu_busy\":%.3f,\"checksum\":%llu}",
        decoder ? decoder : "n/a", (long long)st.gpu_decoded, (long long)st.cpu_decoded,
        st.gpu_share, st.cpu_busy, st.gpu_busy, sum);
    std::printf("%s\n", js.c_str());
    for (auto &e : ev) {
        ck(cudaEventDestroy(e.start), "event destroy");
        ck(cudaEventDestroy(e.end), "event destroy");
    }
    net.reset(); // joins the backward thread, frees the activations
    ck(cudaFree(staging), "cudaFree");
    ck(cudaFree(last), "cudaFree");
    ck(cudaFree(synth), "cudaFree");
    ck(cudaFree(dsum), "cudaFree");
    ck(cudaStreamDestroy(my), "stream destroy");
    return 0;
}
