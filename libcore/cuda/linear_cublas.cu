// Fully connected layer on cuBLAS (cublasGemmEx), fp32 accumulation in both dtypes.
//
// The seam is row-major (x [n, in], W [out, in], y [n, out]); cuBLAS is column-major, where a
// row-major [a, b] buffer reads as its transpose [b, a]. So, with ld = row length:
//   y  = x W^T        <=>  y^T [out, n]  = W [out, in]   * x^T [in, n]    gemm(T, N)
//   dx = dy W         <=>  dx^T [in, n]  = W^T [in, out] * dy^T [out, n]  gemm(N, N)
//   dW += dy^T x      <=>  dW^T [in, out] += x^T [in, n] * dy [n, out]    gemm(N, T), beta 1
// In bf16, W is cast to a bf16 copy each call (master weights stay fp32); x, dy, dx are bf16;
// the forward GEMM writes fp32 so the bias is added before the one rounding to bf16; dW is
// accumulated in fp32 directly by the GEMM (bf16 inputs, fp32 C). The bias gradient is an own
// kernel: a column sum in a fixed order (deterministic).
#include "cuda/cuda_check.hpp"
#include "cuda/dtype.cuh"
#include "cuda/kernels.hpp"

namespace sieve::cuda {
namespace {

constexpr int kThreads = 256;

// y[i, o] = acc[i, o] + b[o] (b may be null), rounded to T. acc may alias y (fp32).
template <typename T>
__global__ void bias_add_kernel(const float* acc, const float* __restrict__ b, T* y, int n,
                                int out) {
  const size_t total = size_t(n) * out;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x)
    y[i] = from_float<T>(acc[i] + (b ? b[i % out] : 0.f));
}

// db[o] += sum_i dy[i, o]. Block = 32 columns x 8 lanes; lane l sums rows l, l+8, ... and a
// fixed tree adds the lanes (deterministic, and no serial walk down all rows per column).
constexpr int kSumColumns = 32, kSumLanes = 8;
template <typename T>
__global__ void column_sum_kernel(const T* __restrict__ dy, int n, int out,
                                  float* __restrict__ db) {
  __shared__ float partial[kSumLanes][kSumColumns];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int o = blockIdx.x * kSumColumns + tx;
  float acc = 0.f;
  if (o < out)
    for (int i = ty; i < n; i += kSumLanes) acc += to_float(dy[size_t(i) * out + o]);
  partial[ty][tx] = acc;
  __syncthreads();
  for (int half = kSumLanes / 2; half > 0; half /= 2) {
    if (ty < half) partial[ty][tx] += partial[ty + half][tx];
    __syncthreads();
  }
  if (ty == 0 && o < out) db[o] += partial[0][tx];
}

class CublasLinear final : public nn::LinearOp {
 public:
  CublasLinear(CudaBackend& be, int n, int in, int out)
      : be_(be),
        n_(n),
        in_(in),
        out_(out),
        bf16_(be.dtype() == nn::DType::bf16),
        w_low_(be),
        acc_(be) {
    SIEVE_ASSERT(n > 0 && in > 0 && out > 0, "linear ", n, "x", in, " -> ", out);
    if (bf16_) {
      w_low_.ensure(size_t(out) * in * sizeof(bf16));
      acc_.ensure(size_t(n) * out * sizeof(float));
    }
    // fp32 TF32 only when allowed (as the convolutions); bf16 inputs use tensor cores anyway.
    compute_ = !bf16_ && be.allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    act_type_ = bf16_ ? CUDA_R_16BF : CUDA_R_32F;
  }

  void forward(const nn::Act* x, const float* w, const float* b, nn::Act* y) override {
    const float one = 1.f, zero = 0.f;
    float* acc = bf16_ ? acc_.as<float>() : static_cast<float*>(y);
    SIEVE_CUBLAS_CHECK(cublasGemmEx(be_.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, out_, n_, in_, &one,
                                    weights(w), act_type_, in_, x, act_type_, in_, &zero, acc,
                                    CUDA_R_32F, out_, compute_, CUBLAS_GEMM_DEFAULT));
    dispatch_dtype(be_.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const size_t total = size_t(n_) * out_;
      bias_add_kernel<T><<<grid_blocks(be_, total, kThreads), kThreads, 0, be_.stream()>>>(
          acc, b, static_cast<T*>(y), n_, out_);
    });
    SIEVE_CUDA_CHECK_LAUNCH();
  }

  void backward(const nn::Act* x, const nn::Act* dy, const float* w, nn::Act* dx, float* dw,
                float* db) override {
    const float one = 1.f, zero = 0.f;
    if (dx)
      SIEVE_CUBLAS_CHECK(cublasGemmEx(be_.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, in_, n_, out_, &one,
                                      weights(w), act_type_, in_, dy, act_type_, out_, &zero, dx,
                                      act_type_, in_, compute_, CUBLAS_GEMM_DEFAULT));
    SIEVE_CUBLAS_CHECK(cublasGemmEx(be_.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, in_, out_, n_, &one, x,
                                    act_type_, in_, dy, act_type_, out_, &one, dw, CUDA_R_32F, in_,
                                    compute_, CUBLAS_GEMM_DEFAULT));
    if (db) {
      dispatch_dtype(be_.dtype(), [&](auto tag) {
        using T = decltype(tag);
        column_sum_kernel<T><<<(out_ + kSumColumns - 1) / kSumColumns, dim3(kSumColumns, kSumLanes),
                               0, be_.stream()>>>(static_cast<const T*>(dy), n_, out_, db);
      });
      SIEVE_CUDA_CHECK_LAUNCH();
    }
  }

 private:
  // The weights in the activation dtype: the fp32 master weights themselves, or a bf16 copy.
  const void* weights(const float* w) {
    if (!bf16_) return w;
    launch_cast_from_float(be_, w, w_low_.as<bf16>(), size_t(out_) * in_);
    return w_low_.as<bf16>();
  }

  CudaBackend& be_;
  int n_, in_, out_;
  bool bf16_;
  cublasComputeType_t compute_;
  cudaDataType_t act_type_;
  DeviceScratch w_low_;  // [out, in] bf16 copy of W (bf16 only)
  DeviceScratch acc_;    // [n, out] fp32 GEMM result before bias and rounding (bf16 only)
};

}  // namespace

std::unique_ptr<nn::LinearOp> make_cublas_linear(CudaBackend& be, int n, int in, int out) {
  return std::make_unique<CublasLinear>(be, n, in, out);
}

}  // namespace sieve::cuda
