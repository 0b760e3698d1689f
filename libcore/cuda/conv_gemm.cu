// A 1x1, stride-1, unpadded convolution in fp32 as three cuBLAS GEMMs. In NHWC such a
// convolution IS a matrix product over the P = n*h*w pixels: y[P,K] = x[P,C] W[K,C]^T, and
// the OIHW master weights of a 1x1 filter are already that [K,C] matrix (no conversion).
//
// Why not cuDNN: in strict fp32 (FMA math, no TF32) cuDNN 9's legacy API runs these shapes
// through NCHW kernels with layout transposes around them, and for one of ResNet-50's 1x1
// convolutions (batch 256, 224x224) its heuristics and its own timing (cudnnFind) both picked
// a direct backward-data kernel of 110-130 ms per call; with the 1x1s as GEMMs the step went
// from 581 to 399 ms of kernels on an H100 (docs/engine.md, "GPU").
// bf16 stays on cuDNN, whose tensor-core engines are fast for these shapes.
#include "cuda/cuda_check.hpp"
#include "cuda/kernels.hpp"

namespace sieve::cuda {
namespace {

class GemmConv1x1 final : public nn::ConvOp {
 public:
  GemmConv1x1(CudaBackend& be, const nn::ConvShape& s)
      : be_(be),
        pixels_(s.n * s.h * s.w),
        c_(s.c),
        k_(s.k),
        compute_(be.allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F) {
    SIEVE_ASSERT(gemm_conv_applies(be, s), "GemmConv1x1 for a convolution that is not a GEMM");
  }

  // Column-major views: x is C x P, y is K x P, W is C x K (the row-major [K,C]).
  void forward(const nn::Act* x, const float* w, nn::Act* y) override {
    const float one = 1.f, zero = 0.f;
    SIEVE_CUBLAS_CHECK(cublasGemmEx(be_.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, k_, pixels_, c_, &one,
                                    w, CUDA_R_32F, c_, x, CUDA_R_32F, c_, &zero, y, CUDA_R_32F, k_,
                                    compute_, CUBLAS_GEMM_DEFAULT));
  }

  void backward_data(const nn::Act* dy, const float* w, nn::Act* dx) override {
    const float one = 1.f, zero = 0.f;
    SIEVE_CUBLAS_CHECK(cublasGemmEx(be_.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, c_, pixels_, k_, &one,
                                    w, CUDA_R_32F, c_, dy, CUDA_R_32F, k_, &zero, dx, CUDA_R_32F,
                                    c_, compute_, CUBLAS_GEMM_DEFAULT));
  }

  void backward_weights(const nn::Act* x, const nn::Act* dy, float* dw) override {
    const float one = 1.f;  // beta = 1: the seam's dw +=
    SIEVE_CUBLAS_CHECK(cublasGemmEx(be_.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, c_, k_, pixels_, &one,
                                    x, CUDA_R_32F, c_, dy, CUDA_R_32F, k_, &one, dw, CUDA_R_32F,
                                    c_, compute_, CUBLAS_GEMM_DEFAULT));
  }

 private:
  CudaBackend& be_;
  int pixels_, c_, k_;
  cublasComputeType_t compute_;
};

}  // namespace

bool gemm_conv_applies(const CudaBackend& be, const nn::ConvShape& s) {
  return be.dtype() == nn::DType::f32 && s.r == 1 && s.s == 1 && s.stride == 1 && s.pad == 0;
}

std::unique_ptr<nn::ConvOp> make_gemm_conv(CudaBackend& be, const nn::ConvShape& s) {
  return std::make_unique<GemmConv1x1>(be, s);
}

}  // namespace sieve::cuda
