// Convolution on cuDNN's legacy convolution API (cudnnConvolutionForward / BackwardData /
// BackwardFilter): deprecated in cuDNN 9 but shipped and complete, and far smaller than the
// same three graphs on the v9 graph API.
//
// Layouts: activations NHWC (CUDNN_TENSOR_NHWC), so the filter must be NHWC too (KRSC = OHWI:
// the layout of cuDNN's tensor-core kernels). The seam's weights are fp32 OIHW master weights
// that change every step, so each forward/backward_data call first converts them into an op-
// owned OHWI copy in the activation dtype (a few MB at most: negligible beside the conv).
// backward_weights writes OHWI into scratch with beta = 0 and a kernel adds it into the
// seam's OIHW fp32 dw (the seam's +=). In bf16 the gradient scratch is bf16 (cuDNN's bf16
// configuration has x, w and dw in one type, fp32 accumulation), as PyTorch autocast does.
//
// Algorithms are chosen once per shape (cached for the process): cuDNN's heuristics (_v7), or
// timing (cudnnFind*) with SIEVE_CUDNN_BENCHMARK=1. fp32 uses FMA math only (no TF32) unless
// SIEVE_ALLOW_TF32=1, so that it matches the CPU backend; bf16 uses tensor-op math. The workspace
// is sized once (largest of the three algorithms) and taken from the backend's shared workspace per
// call.
#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/cuda_check.hpp"
#include "cuda/dtype.cuh"
#include "cuda/kernels.hpp"

namespace sieve::cuda {
namespace {

// Algorithms needing more workspace than this are skipped (the next best one is taken).
constexpr size_t kMaxWorkspaceBytes = size_t(1) << 30;

cudnnDataType_t cudnn_type(nn::DType t) {
  return t == nn::DType::bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  TensorDesc() { SIEVE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d)); }
  ~TensorDesc() { cudnnDestroyTensorDescriptor(d); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
};
struct FilterDesc {
  cudnnFilterDescriptor_t d = nullptr;
  FilterDesc() { SIEVE_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d)); }
  ~FilterDesc() { cudnnDestroyFilterDescriptor(d); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
};
struct ConvDesc {
  cudnnConvolutionDescriptor_t d = nullptr;
  ConvDesc() { SIEVE_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d)); }
  ~ConvDesc() { cudnnDestroyConvolutionDescriptor(d); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
};

std::string shape_text(const nn::ConvShape& s) {
  return cat("conv x[", s.n, ",", s.c, ",", s.h, ",", s.w, "] w[", s.k, ",", s.c, ",", s.r, ",",
             s.s, "] stride ", s.stride, " pad ", s.pad);
}

bool uses_tensor_cores(cudnnMathType_t math) {
  return math == CUDNN_TENSOR_OP_MATH || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

// The first usable result in cuDNN's order (best first): it ran / is supported, fits the
// workspace cap, computes in an allowed math mode and, if asked, is deterministic.
// Perf is cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t (same fields).
template <typename Perf>
const Perf& pick_algorithm(const std::vector<Perf>& results, int count, bool fma_only,
                           bool deterministic_only, const char* direction, const nn::ConvShape& s) {
  for (int i = 0; i < count; ++i) {
    const Perf& p = results[i];
    if (p.status != CUDNN_STATUS_SUCCESS || p.memory > kMaxWorkspaceBytes) continue;
    if (fma_only && uses_tensor_cores(p.mathType)) continue;
    if (deterministic_only && p.determinism != CUDNN_DETERMINISTIC) continue;
    return p;
  }
  throw Error(cat("cuDNN offers no ", direction, " algorithm for ", shape_text(s),
                  fma_only ? " in fp32 without TF32 (SIEVE_ALLOW_TF32=1 allows it)" : "",
                  deterministic_only ? " that is deterministic (SIEVE_CUDNN_DETERMINISTIC)" : ""));
}

// The algorithms (and math types) chosen for one convolution shape.
struct AlgoChoice {
  cudnnConvolutionFwdAlgo_t fwd;
  cudnnMathType_t fwd_math;
  cudnnConvolutionBwdDataAlgo_t data;
  cudnnMathType_t data_math;
  cudnnConvolutionBwdFilterAlgo_t filter;
  cudnnMathType_t filter_math;
};

// Choices by (device, dtype, selection policy, shape) for the whole process: layers re-create
// their ops whenever the batch size changes (an epoch's last partial batch, evaluation), and a
// ResNet has several convolutions of one shape; with SIEVE_CUDNN_BENCHMARK each search times
// every algorithm (~0.1 s per shape).
using AlgoKey = std::array<int, 14>;
std::mutex algo_cache_mutex;
std::map<AlgoKey, AlgoChoice> algo_cache;

class CudnnConv final : public nn::ConvOp {
 public:
  CudnnConv(CudaBackend& be, const nn::ConvShape& s)
      : be_(be), s_(s), w_compute_(be), dw_scratch_(be) {
    const cudnnDataType_t type = cudnn_type(be.dtype());
    SIEVE_CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(x_.d, CUDNN_TENSOR_NHWC, type, s.n, s.c, s.h, s.w));
    SIEVE_CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(y_.d, CUDNN_TENSOR_NHWC, type, s.n, s.k, s.oh(), s.ow()));
    SIEVE_CUDNN_CHECK(
        cudnnSetFilter4dDescriptor(w_.d, type, CUDNN_TENSOR_NHWC, s.k, s.c, s.r, s.s));
    // fp32 without TF32: FMA kernels only. Otherwise tensor cores (TF32 for fp32 on sm_80+).
    const bool fma_only = be.dtype() == nn::DType::f32 && !be.allow_tf32();
    const cudnnMathType_t math = fma_only ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
    for (ConvDesc* c : {&fwd_, &bwd_data_, &bwd_filter_}) {
      SIEVE_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
          c->d, s.pad, s.pad, s.stride, s.stride, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
      SIEVE_CUDNN_CHECK(cudnnSetConvolutionMathType(c->d, math));
    }
    int n = 0, c = 0, h = 0, w = 0;
    SIEVE_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(fwd_.d, x_.d, w_.d, &n, &c, &h, &w));
    SIEVE_ASSERT(n == s.n && c == s.k && h == s.oh() && w == s.ow(), shape_text(s),
                 ": cuDNN output ", n, "x", c, "x", h, "x", w);
    choose_algorithms(fma_only);
    const size_t wbytes = size_t(s.k) * s.c * s.r * s.s * dtype_size(be.dtype());
    w_compute_.ensure(wbytes);
    dw_scratch_.ensure(wbytes);
  }

  void forward(const nn::Act* x, const float* w, nn::Act* y) override {
    convert_weights(w);
    const float one = 1.f, zero = 0.f;
    SIEVE_CUDNN_CHECK(cudnnConvolutionForward(
        be_.cudnn(), &one, x_.d, x, w_.d, w_compute_.as<void>(), fwd_.d, fwd_algo_,
        be_.workspace(workspace_bytes_), workspace_bytes_, &zero, y_.d, y));
  }

  void backward_data(const nn::Act* dy, const float* w, nn::Act* dx) override {
    convert_weights(w);
    const float one = 1.f, zero = 0.f;
    SIEVE_CUDNN_CHECK(cudnnConvolutionBackwardData(
        be_.cudnn(), &one, w_.d, w_compute_.as<void>(), y_.d, dy, bwd_data_.d, bwd_data_algo_,
        be_.workspace(workspace_bytes_), workspace_bytes_, &zero, x_.d, dx));
  }

  void backward_weights(const nn::Act* x, const nn::Act* dy, float* dw) override {
    const float one = 1.f, zero = 0.f;
    SIEVE_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
        be_.cudnn(), &one, x_.d, x, y_.d, dy, bwd_filter_.d, bwd_filter_algo_,
        be_.workspace(workspace_bytes_), workspace_bytes_, &zero, w_.d, dw_scratch_.as<void>()));
    dispatch_dtype(be_.dtype(), [&](auto tag) {
      using T = decltype(tag);
      launch_accumulate_ohwi_into_oihw(be_, dw_scratch_.as<T>(), dw, s_.k, s_.c, s_.r, s_.s);
    });
  }

 private:
  void convert_weights(const float* w) {
    dispatch_dtype(be_.dtype(), [&](auto tag) {
      using T = decltype(tag);
      launch_oihw_to_ohwi(be_, w, w_compute_.as<T>(), s_.k, s_.c, s_.r, s_.s);
    });
  }

  // cuDNN picks kernels by algorithm AND math type, so a direction's descriptor takes the math
  // type its algorithm was reported with; except in strict fp32, where it stays FMA_MATH
  // (DEFAULT_MATH would let sm_80+ run TF32).
  static void set_math_type(const ConvDesc& desc, cudnnMathType_t reported, bool fma_only) {
    if (!fma_only) SIEVE_CUDNN_CHECK(cudnnSetConvolutionMathType(desc.d, reported));
  }

  // One algorithm per direction (from the cache, or searched), then the workspace for the
  // largest of the three.
  void choose_algorithms(bool fma_only) {
    const AlgoKey key{be_.device_index(),
                      int(be_.dtype()),
                      fma_only,
                      be_.cudnn_benchmark(),
                      be_.cudnn_deterministic(),
                      s_.n,
                      s_.c,
                      s_.h,
                      s_.w,
                      s_.k,
                      s_.r,
                      s_.s,
                      s_.stride,
                      s_.pad};
    AlgoChoice choice;
    {
      std::lock_guard<std::mutex> lock(algo_cache_mutex);
      auto it = algo_cache.find(key);
      if (it != algo_cache.end()) {
        choice = it->second;
      } else {
        choice = search_algorithms(fma_only);
        algo_cache.emplace(key, choice);
      }
    }
    fwd_algo_ = choice.fwd, bwd_data_algo_ = choice.data, bwd_filter_algo_ = choice.filter;
    set_math_type(fwd_, choice.fwd_math, fma_only);
    set_math_type(bwd_data_, choice.data_math, fma_only);
    set_math_type(bwd_filter_, choice.filter_math, fma_only);

    cudnnHandle_t h = be_.cudnn();
    size_t fwd_bytes = 0, data_bytes = 0, filter_bytes = 0;
    SIEVE_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(h, x_.d, w_.d, fwd_.d, y_.d,
                                                              fwd_algo_, &fwd_bytes));
    SIEVE_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(h, w_.d, y_.d, bwd_data_.d, x_.d,
                                                                   bwd_data_algo_, &data_bytes));
    SIEVE_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
        h, x_.d, y_.d, bwd_filter_.d, w_.d, bwd_filter_algo_, &filter_bytes));
    workspace_bytes_ = std::max({fwd_bytes, data_bytes, filter_bytes});
  }

  // cuDNN's heuristics (_v7), or timing every algorithm (cudnnFind*) with SIEVE_CUDNN_BENCHMARK.
  AlgoChoice search_algorithms(bool fma_only) {
    cudnnHandle_t h = be_.cudnn();
    const bool bench = be_.cudnn_benchmark(), det = be_.cudnn_deterministic();
    AlgoChoice choice{};
    int max_count = 0, count = 0;

    SIEVE_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max_count));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> fwd(max_count);
    if (bench)
      SIEVE_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(h, x_.d, w_.d, fwd_.d, y_.d, max_count,
                                                             &count, fwd.data()));
    else
      SIEVE_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, x_.d, w_.d, fwd_.d, y_.d,
                                                               max_count, &count, fwd.data()));
    const auto& f = pick_algorithm(fwd, count, fma_only, det, "forward", s_);
    choice.fwd = f.algo, choice.fwd_math = f.mathType;

    SIEVE_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max_count));
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> bd(max_count);
    if (bench)
      SIEVE_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(h, w_.d, y_.d, bwd_data_.d, x_.d,
                                                                  max_count, &count, bd.data()));
    else
      SIEVE_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
          h, w_.d, y_.d, bwd_data_.d, x_.d, max_count, &count, bd.data()));
    const auto& d = pick_algorithm(bd, count, fma_only, det, "backward-data", s_);
    choice.data = d.algo, choice.data_math = d.mathType;

    SIEVE_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &max_count));
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> bf(max_count);
    if (bench)
      SIEVE_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(
          h, x_.d, y_.d, bwd_filter_.d, w_.d, max_count, &count, bf.data()));
    else
      SIEVE_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
          h, x_.d, y_.d, bwd_filter_.d, w_.d, max_count, &count, bf.data()));
    const auto& g = pick_algorithm(bf, count, fma_only, det, "backward-filter", s_);
    choice.filter = g.algo, choice.filter_math = g.mathType;
    return choice;
  }

  CudaBackend& be_;
  nn::ConvShape s_;
  TensorDesc x_, y_;  // NHWC activations of the input and output shape
  FilterDesc w_;      // OHWI in the activation dtype
  ConvDesc fwd_, bwd_data_, bwd_filter_;
  cudnnConvolutionFwdAlgo_t fwd_algo_{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo_{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo_{};
  size_t workspace_bytes_ = 0;
  DeviceScratch w_compute_;   // [k, r, s, c] weights in the activation dtype
  DeviceScratch dw_scratch_;  // [k, r, s, c] this call's weight gradient
};

}  // namespace

std::unique_ptr<nn::ConvOp> make_cudnn_conv(CudaBackend& be, const nn::ConvShape& s) {
  return std::make_unique<CudnnConv>(be, s);
}

}  // namespace sieve::cuda
