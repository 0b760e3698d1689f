// Whether bf16 is worth its rounding on this CPU: what `precision: auto` asks of the cpu
// backend once the CPU computes bf16 natively (AVX512-BF16 or AMX).
//
// Native bf16 is not the same as fast bf16. With AMX, oneDNN's bf16 convolutions run on the
// tile units, several times fp32's speed. Without AMX, they run on AVX512-BF16's vdpbf16ps
// (32 bf16 products summed into 16 fp32 lanes), and its throughput relative to fp32 FMA
// differs by CPU: on the AMD EPYC of issue 29 bf16 training ran 1.6x fp32; on an Intel Xeon
// (Sapphire/Emerald Rapids) with AMX hidden by the VM, vdpbf16ps zmm issues at a quarter of
// vfmadd231ps's rate (half the multiply-adds per second), every oneDNN bf16 convolution ran
// 0.45-0.6x its fp32 one, and bf16 training 0.62x fp32 (docs/engine.md). No CPU flag tells
// these apart, so where there is no AMX a short measurement decides: one 3x3 convolution of
// ResNet's shape, forward, backward data and backward weights, in fp32 and in bf16.
//
// The measurement runs single-threaded, in the thread's own CPU time: the ratio is a property
// of one core's units. With several OpenMP threads on shared or oversubscribed cores each
// pass waits for the slowest thread's time slice (2 threads beside other jobs: ~20 ms per
// pass in both dtypes where one thread took 0.8 and 1.6 ms), and wall-clock time of even one
// thread counts the slices other processes got: at load 10 on 2 cores the best of 5 wall
// times once made bf16 look faster. CPU time leaves out preemption; the best of several
// interleaved repetitions leaves out the rest (caches refilled after a switch): six runs at
// load 9 on that Xeon all gave 2.6-2.8 ms fp32 against 5.0-5.1 ms bf16. About 0.1 s, once
// per process.
//
// A CPU-wide answer is not the whole answer: with AMX the tile units win on ResNet's wide
// layers, but a narrow network (8-64 channels on small maps) ran 1.28x slower in bf16 than in
// fp32 (docs/engine.md). So where the answer is bf16, the trainer also times one training step
// of its own network in each dtype (cpu_time_training_step, asked by train/precision.cpp).
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "nn/backend_impl.hpp"
#include "nn/model.hpp"
#include "util/error.hpp"

namespace sieve::nn {
namespace {

using dnnl::memory;
using dt = memory::data_type;
using tag = memory::format_tag;

// CPU time, in ms, of the calling thread (CLOCK_THREAD_CPUTIME_ID: the single-threaded
// passes) or of the whole process (CLOCK_PROCESS_CPUTIME_ID: a training step runs on every
// OpenMP thread of it). Time spent preempted (the machine busy with other work) is not
// counted, so the figure is the cores'.
double cpu_ms(clockid_t clock) {
  timespec t;
  clock_gettime(clock, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

// One 3x3/1 convolution (ResNet's layer1 at batch 8, 16x16) in one dtype: weights in the
// layout oneDNN picks, activations NHWC and weight gradients fp32, as the cpu backend runs
// them; zero-free inputs (no special cases in the arithmetic).
class ConvPasses {
 public:
  ConvPasses(dnnl::engine& eng, dt t) {
    const memory::dims x{8, 64, 16, 16}, w{64, 64, 3, 3}, one{1, 1};
    memory::desc xd(x, t, tag::nhwc), wd(w, t, tag::any), dwd(w, dt::f32, tag::any);
    const auto alg = dnnl::algorithm::convolution_direct;
    dnnl::convolution_forward::primitive_desc f(
        {dnnl::prop_kind::forward_training, alg, xd, wd, xd, one, one, one}, eng);
    dnnl::convolution_backward_data::primitive_desc d({alg, xd, wd, xd, one, one, one}, eng, f);
    dnnl::convolution_backward_weights::primitive_desc g({alg, xd, dwd, xd, one, one, one}, eng, f);
    fwd_ = dnnl::convolution_forward(f);
    bwd_d_ = dnnl::convolution_backward_data(d);
    bwd_w_ = dnnl::convolution_backward_weights(g);
    for (const memory::desc& md : {xd, f.weights_desc(), d.weights_desc(), xd, xd, xd})
      mem_.emplace_back(md, eng);
    mem_.emplace_back(g.diff_weights_desc(), eng);
    for (memory& m : mem_)  // 0x3c in every byte: ~0.0115 in fp32 and bf16 alike
      std::memset(m.get_data_handle(), 0x3c, m.get_desc().get_size());
  }
  double run_ms(dnnl::stream& s) {
    const double t = cpu_ms(CLOCK_THREAD_CPUTIME_ID);
    fwd_.execute(s,
                 {{DNNL_ARG_SRC, mem_[0]}, {DNNL_ARG_WEIGHTS, mem_[1]}, {DNNL_ARG_DST, mem_[3]}});
    bwd_d_.execute(
        s,
        {{DNNL_ARG_DIFF_DST, mem_[3]}, {DNNL_ARG_WEIGHTS, mem_[2]}, {DNNL_ARG_DIFF_SRC, mem_[4]}});
    bwd_w_.execute(
        s,
        {{DNNL_ARG_SRC, mem_[0]}, {DNNL_ARG_DIFF_DST, mem_[5]}, {DNNL_ARG_DIFF_WEIGHTS, mem_[6]}});
    s.wait();
    return cpu_ms(CLOCK_THREAD_CPUTIME_ID) - t;
  }

 private:
  dnnl::convolution_forward fwd_;
  dnnl::convolution_backward_data bwd_d_;
  dnnl::convolution_backward_weights bwd_w_;
  std::vector<memory> mem_;  // x, w (fwd), w (bwd data), y, dx, dy, dw
};

bool has_amx() {
  const int isa = int(dnnl::get_effective_cpu_isa());
  const int amx = int(dnnl::cpu_isa::avx512_core_amx);
  return (isa & amx) == amx;
}

Bf16Speed measure() {
  Bf16Speed r;
  r.amx = has_amx();
  if (r.amx) return r;
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  try {
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream s(eng);
    ConvPasses f32(eng, dt::f32), bf16(eng, dt::bf16);
    f32.run_ms(s), bf16.run_ms(s);  // first runs touch the memory and the code
    r.fp32_ms = r.bf16_ms = 1e300;
    for (int rep = 0; rep < 7; ++rep) {
      r.fp32_ms = std::min(r.fp32_ms, f32.run_ms(s));
      r.bf16_ms = std::min(r.bf16_ms, bf16.run_ms(s));
    }
  } catch (const dnnl::error& e) {  // no bf16 convolution here at all: never faster
    r.fp32_ms = 1, r.bf16_ms = 0;
    r.failed = e.what();
  }
  omp_set_num_threads(threads);
  return r;
}

// A throwaway copy of the network in one dtype and one fixed batch: inputs and logit
// gradients of a smooth pattern (no zeros, nothing the arithmetic could skip).
class StepPass {
 public:
  StepPass(ModelSpec spec, DType dtype, int batch) : n_(batch) {
    spec.backend = "cpu";
    spec.dtype = dtype;
    model_ = make_model(spec);
    init_params(*model_, 1);
    x_.resize(size_t(batch) * model_->input_size());
    for (size_t i = 0; i < x_.size(); ++i) x_[i] = 0.5f + 0.4f * float((i * 37) % 101) / 101;
    dlogits_.resize(size_t(batch) * size_t(model_->num_classes()));
    for (size_t i = 0; i < dlogits_.size(); ++i)
      dlogits_[i] = (i % 2 ? 1.0f : -1.0f) / float(dlogits_.size());
  }
  double run_ms() {
    const double t = cpu_ms(CLOCK_PROCESS_CPUTIME_ID);
    model_->forward(x_.data(), n_, true);
    model_->backward(dlogits_.data());
    return cpu_ms(CLOCK_PROCESS_CPUTIME_ID) - t;
  }

 private:
  int n_;
  std::unique_ptr<Model> model_;
  std::vector<float> x_, dlogits_;
};

// The run's own network, as it will train: every thread the run has, the batch of one
// forward. The first pass creates oneDNN's primitives (kept in its cache, so the run's first
// step gains them back) and is not counted; then the best of 5 passes, 3 where the first took
// over 200 ms, 1 where it took over a second (the same network timed on a loaded machine
// ranged 71-113 ms with 3). One dtype after the other, each copy freed before the next is
// built: at most one network's activations beside the run's own parameters, as training
// itself will hold (interleaved passes would hold two).
double best_step_ms(const ModelSpec& spec, DType dtype, int batch) {
  StepPass pass(spec, dtype, batch);
  const double first = pass.run_ms();
  const int reps = first > 1000 ? 1 : first > 200 ? 3 : 5;
  double best = 1e300;
  for (int rep = 0; rep < reps; ++rep) best = std::min(best, pass.run_ms());
  return best;
}

double hundredths(double ms) {
  return double(int64_t(ms * 100 + 0.5)) / 100;
}

}  // namespace

bool Bf16Speed::faster() const {
  return amx || (failed.empty() && bf16_ms < fp32_ms);
}

const Bf16Speed& cpu_bf16_speed() {
  static const Bf16Speed r = measure();
  return r;
}

bool cpu_bf16_faster(std::string* why) {
  const Bf16Speed& r = cpu_bf16_speed();
  if (r.faster()) return true;
  if (why)
    *why = r.failed.empty()
               ? cat("bf16 convolutions run at ", int(100 * r.fp32_ms / r.bf16_ms + 0.5),
                     " % of fp32's speed on this CPU without AMX (one 3x3 convolution's 3 passes, "
                     "1 thread: ",
                     hundredths(r.fp32_ms), " ms fp32, ", hundredths(r.bf16_ms),
                     " ms bf16); precision: bf16 forces it")
               : cat("no bf16 convolution on this CPU (", r.failed, ")");
  return false;
}

// The run's own network timed in each dtype (best_step_ms).
bool cpu_time_training_step(const ModelSpec& spec, int batch, StepTimes* out) {
  if (!backend_supports("cpu", DType::bf16, true)) return false;
  out->fp32_ms = best_step_ms(spec, DType::f32, batch);
  out->bf16_ms = best_step_ms(spec, DType::bf16, batch);
  return true;
}

}  // namespace sieve::nn
