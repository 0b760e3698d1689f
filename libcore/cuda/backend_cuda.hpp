// The CUDA backend of the op seam (nn/backend.hpp), internal to libcore/cuda.
//
// One CudaBackend per (process, activation dtype), made by nn's registry, into which
// cuda/register.cpp enters it. It owns:
//   * one CUDA stream: every op, kernel and copy of this backend is ordered on it, so ops need
//     no events between them and a shared workspace is safe;
//   * a cuDNN handle and a cuBLAS handle bound to that stream;
//   * device memory from the driver's stream-ordered pool (cudaMallocAsync on the stream, with
//     the pool's release threshold raised so freed blocks stay cached): per-step tensors of a
//     steady batch size come back from the pool without a cudaMalloc/device sync, and a free
//     is ordered after the kernels that still use the block, which a hand-written caching
//     allocator would have to track with events;
//   * one workspace shared by all its ops (cuDNN algorithms, staging of host copies), grown
//     to the largest request and never shrunk.
//
// The op classes live in one file per concern: conv_cudnn.cu (cuDNN convolution),
// batchnorm.cu (own kernels), linear_cublas.cu (cuBLAS GEMM), pool_kernels.cu (max and
// global average pooling), elementwise.cu (ReLU, add, axpy, casts, layout changes), sgd.cu
// (the optimizer step and its reductions), grad_reducer.cpp (the NCCL gradient reducer).
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/backend.hpp"

namespace sieve::cuda {

class CudaBackend final : public nn::Backend {
 public:
  explicit CudaBackend(nn::DType dtype);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  // Memory: stream-ordered device memory; host copies are synchronous (they wait for the
  // stream, so what the host reads is what the queued ops wrote).
  nn::Device device() const override { return nn::Device::cuda; }
  void* allocate(size_t bytes) override;
  void release(void* p) override;
  void to_device(void* dst, const void* host_src, size_t bytes) override;
  void to_host(void* host_dst, const void* src, size_t bytes) override;
  void fill_zero(void* p, size_t bytes) override;

  std::string name() const override { return "cuda"; }
  nn::DType dtype() const override { return dtype_; }

  std::unique_ptr<nn::ConvOp> conv2d(const nn::ConvShape& s) override;
  std::unique_ptr<nn::BatchNormOp> batchnorm(int n, int c, int h, int w, bool fuse_relu,
                                             float momentum, float eps) override;
  std::unique_ptr<nn::MaxPoolOp> maxpool(const nn::PoolShape& s) override;
  std::unique_ptr<nn::LinearOp> linear(int n, int in, int out) override;

  void relu_forward(const nn::Act* x, nn::Act* y, size_t count) override;
  void relu_backward(const nn::Act* y, const nn::Act* dy, nn::Act* dx, size_t count) override;
  void add(const nn::Act* a, const nn::Act* b, nn::Act* y, size_t count) override;
  void avgpool_forward(const nn::Act* x, nn::Act* y, int n, int c, int hw) override;
  void avgpool_backward(const nn::Act* dy, nn::Act* dx, int n, int c, int hw) override;

  void load_input(const float* host_nchw, nn::Act* y, int n, int c, int h, int w) override;
  void act_to_host(const nn::Act* x, float* host, size_t count) override;
  void act_from_host(const float* host, nn::Act* y, size_t count) override;

  void axpy(float a, const float* x, float* y, size_t count) override;

  // The optimizer step on the device (sgd.cu): nn/sgd.hpp's passes as kernels on stream().
  // sum and sgd_norms wait for their results; sgd_apply waits for the stream only to upload its
  // table of terms, then queues the step and returns.
  double sum(const float* x, size_t count) override;
  void sgd_norms(const float* params, const float* grads, const nn::SgdTerm* terms, size_t n,
                 double* norms) override;
  void sgd_apply(const nn::SgdBuffers& b, size_t total, const nn::SgdTerm* terms, size_t n,
                 const nn::SgdStep& s) override;
  // NCCL bucket reduction of the gradients (grad_reducer.cpp); collective over `comm`.
  std::unique_ptr<nn::DeviceReducer> device_reducer(
      const Comm& comm, float* grads, size_t total, const std::vector<size_t>& cuts,
      const std::vector<std::pair<size_t, size_t>>& covered) override;

  // For the op classes.
  int device_index() const { return device_; }
  int sm_count() const { return sm_count_; }
  cudaStream_t stream() const { return stream_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  cublasHandle_t cublas() const { return cublas_; }
  // fp32 convolutions and GEMMs may use TF32 tensor cores: env SIEVE_ALLOW_TF32=1. Off by
  // default so that fp32 results match the CPU backend to ~1e-5.
  bool allow_tf32() const { return allow_tf32_; }
  // Pick convolution algorithms by timing them (cudnnFind*) instead of by cuDNN's heuristics:
  // env SIEVE_CUDNN_BENCHMARK=1 (PyTorch's cudnn.benchmark).
  bool cudnn_benchmark() const { return cudnn_benchmark_; }
  // Only deterministic cuDNN algorithms (no atomics in reductions): env
  // SIEVE_CUDNN_DETERMINISTIC=1 (PyTorch's cudnn.deterministic); off by default for speed.
  bool cudnn_deterministic() const { return cudnn_deterministic_; }
  // Scratch for the op running now: valid until the next workspace() call (ops run one at a
  // time on stream()). Grows to the largest request.
  void* workspace(size_t bytes);

 private:
  nn::DType dtype_;
  int device_ = 0, sm_count_ = 1;
  bool allow_tf32_ = false, cudnn_benchmark_ = false, cudnn_deterministic_ = false;
  cudaStream_t stream_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

// Device memory owned by an op, from its backend's pool, resized on demand (contents are not
// kept across a resize).
class DeviceScratch {
 public:
  explicit DeviceScratch(CudaBackend& be) : be_(be) {}
  ~DeviceScratch() { be_.release(ptr_); }
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  void* ensure(size_t bytes) {
    if (bytes > bytes_) {
      be_.release(ptr_);
      ptr_ = nullptr;
      ptr_ = be_.allocate(bytes);
      bytes_ = bytes;
    }
    return ptr_;
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  CudaBackend& be_;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// The registry's entry points (cuda/register.cpp registers them with nn's registry).
std::unique_ptr<nn::Backend> make_cuda_backend(nn::DType dtype);
// bf16 needs compute capability 8.0; a machine without a visible device says so in `why`.
bool cuda_backend_supports(nn::DType dtype, bool native, std::string* why);

// Op factories, one per file.
std::unique_ptr<nn::ConvOp> make_cudnn_conv(CudaBackend& be, const nn::ConvShape& s);
// 1x1 stride-1 unpadded convolutions in fp32 run as cuBLAS GEMMs (conv_gemm.cu says why).
bool gemm_conv_applies(const CudaBackend& be, const nn::ConvShape& s);
std::unique_ptr<nn::ConvOp> make_gemm_conv(CudaBackend& be, const nn::ConvShape& s);
std::unique_ptr<nn::BatchNormOp> make_batchnorm(CudaBackend& be, int n, int c, int h, int w,
                                                bool fuse_relu, float momentum, float eps);
std::unique_ptr<nn::MaxPoolOp> make_maxpool(CudaBackend& be, const nn::PoolShape& s);
std::unique_ptr<nn::LinearOp> make_cublas_linear(CudaBackend& be, int n, int in, int out);

// Blocks for a grid-stride loop over `count` items: enough to fill the GPU, never more than
// the items need.
int grid_blocks(const CudaBackend& be, size_t count, int threads);

}  // namespace sieve::cuda
