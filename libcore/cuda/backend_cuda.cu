// The CUDA backend: device memory, stream and handles, its registry entry points, and the
// small ops that are one kernel each. See backend_cuda.hpp for the design.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "cuda/backend_cuda.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/dtype.cuh"
#include "cuda/kernels.hpp"
#include "cuda/nccl_comm.hpp"

namespace sieve::cuda {
namespace {

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, "") != 0 && std::strcmp(v, "0") != 0;
}

}  // namespace

CudaBackend::CudaBackend(nn::DType dtype)
    : dtype_(dtype),
      allow_tf32_(env_flag("SIEVE_ALLOW_TF32")),
      cudnn_benchmark_(env_flag("SIEVE_CUDNN_BENCHMARK")),
      cudnn_deterministic_(env_flag("SIEVE_CUDNN_DETERMINISTIC")) {
  // One GPU per rank: the node-local rank (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID) picks
  // among the visible devices, so `mpiexec -n 4` or `srun --ntasks-per-node=4` on a 4-GPU
  // node puts each rank on its own GPU without a wrapper script (a launcher that gives each
  // rank one device through CUDA_VISIBLE_DEVICES leaves one visible: device 0).
  int visible = 0;
  SIEVE_CUDA_CHECK(cudaGetDeviceCount(&visible));
  device_ = device_for_local_rank(local_rank_from_env(0), visible);
  SIEVE_CUDA_CHECK(cudaSetDevice(device_));
  SIEVE_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device_));
  // Keep freed blocks in the pool instead of returning them to the driver at every stream
  // synchronisation: with a steady batch size every step then allocates from the cache.
  cudaMemPool_t pool;
  SIEVE_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device_));
  uint64_t keep_all = UINT64_MAX;
  SIEVE_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
  SIEVE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  SIEVE_CUDNN_CHECK(cudnnCreate(&cudnn_));
  SIEVE_CUDNN_CHECK(cudnnSetStream(cudnn_, stream_));
  SIEVE_CUBLAS_CHECK(cublasCreate(&cublas_));
  SIEVE_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
}

// Backends are process-wide singletons destroyed at exit, when the CUDA runtime may already be
// unloaded: then the driver reclaims everything and calling into cuDNN/cuBLAS could crash, so
// nothing is released. Otherwise errors are ignored (a destructor must not throw).
CudaBackend::~CudaBackend() {
  int current = 0;
  if (cudaGetDevice(&current) != cudaSuccess) return;
  if (workspace_) cudaFreeAsync(workspace_, stream_);
  cudaStreamSynchronize(stream_);
  cublasDestroy(cublas_);
  cudnnDestroy(cudnn_);
  cudaStreamDestroy(stream_);
}

void* CudaBackend::allocate(size_t bytes) {
  void* p = nullptr;
  const cudaError_t rc = cudaMallocAsync(&p, std::max<size_t>(bytes, 1), stream_);
  if (rc == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it so the next check does not report it
    throw std::bad_alloc();
  }
  SIEVE_CUDA_CHECK(rc);
  return p;
}

// Ordered after every kernel already queued that may still read or write p. Unchecked: it runs
// in destructors (Tensor, DeviceScratch), which must not throw; an error here resurfaces at the
// next checked call.
void CudaBackend::release(void* p) {
  if (p) cudaFreeAsync(p, stream_);
}

void CudaBackend::to_device(void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  SIEVE_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
  SIEVE_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::to_host(void* host_dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  SIEVE_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  SIEVE_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::fill_zero(void* p, size_t bytes) {
  if (bytes) SIEVE_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
}

void* CudaBackend::workspace(size_t bytes) {
  if (bytes > workspace_bytes_) {
    release(workspace_);
    workspace_ = nullptr;
    workspace_ = allocate(bytes);
    workspace_bytes_ = bytes;
  }
  return workspace_;
}

std::unique_ptr<nn::ConvOp> CudaBackend::conv2d(const nn::ConvShape& s) {
  return gemm_conv_applies(*this, s) ? make_gemm_conv(*this, s) : make_cudnn_conv(*this, s);
}

std::unique_ptr<nn::BatchNormOp> CudaBackend::batchnorm(int n, int c, int h, int w, bool fuse_relu,
                                                        float momentum, float eps) {
  return make_batchnorm(*this, n, c, h, w, fuse_relu, momentum, eps);
}

std::unique_ptr<nn::MaxPoolOp> CudaBackend::maxpool(const nn::PoolShape& s) {
  return make_maxpool(*this, s);
}

std::unique_ptr<nn::LinearOp> CudaBackend::linear(int n, int in, int out) {
  return make_cublas_linear(*this, n, in, out);
}

void CudaBackend::relu_forward(const nn::Act* x, nn::Act* y, size_t count) {
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    launch_relu_forward(*this, static_cast<const T*>(x), static_cast<T*>(y), count);
  });
}

void CudaBackend::relu_backward(const nn::Act* y, const nn::Act* dy, nn::Act* dx, size_t count) {
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    launch_relu_backward(*this, static_cast<const T*>(y), static_cast<const T*>(dy),
                         static_cast<T*>(dx), count);
  });
}

void CudaBackend::add(const nn::Act* a, const nn::Act* b, nn::Act* y, size_t count) {
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    launch_add(*this, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(y),
               count);
  });
}

void CudaBackend::avgpool_forward(const nn::Act* x, nn::Act* y, int n, int c, int hw) {
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    launch_avgpool_forward(*this, static_cast<const T*>(x), static_cast<T*>(y), n, c, hw);
  });
}

void CudaBackend::avgpool_backward(const nn::Act* dy, nn::Act* dx, int n, int c, int hw) {
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    launch_avgpool_backward(*this, static_cast<const T*>(dy), static_cast<T*>(dx), n, c, hw);
  });
}

// The host batch is staged in the workspace (fp32 NCHW), then transposed and cast on the
// device: one contiguous upload instead of a strided host transpose.
void CudaBackend::load_input(const float* host_nchw, nn::Act* y, int n, int c, int h, int w) {
  const size_t count = size_t(n) * c * h * w;
  auto* staged = static_cast<float*>(workspace(count * sizeof(float)));
  to_device(staged, host_nchw, count * sizeof(float));
  dispatch_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    launch_nchw_to_nhwc(*this, staged, static_cast<T*>(y), n, c, h, w);
  });
}

void CudaBackend::act_to_host(const nn::Act* x, float* host, size_t count) {
  if (dtype_ == nn::DType::f32) return to_host(host, x, count * sizeof(float));
  auto* staged = static_cast<float*>(workspace(count * sizeof(float)));
  launch_cast_to_float(*this, static_cast<const bf16*>(x), staged, count);
  to_host(host, staged, count * sizeof(float));
}

void CudaBackend::act_from_host(const float* host, nn::Act* y, size_t count) {
  if (dtype_ == nn::DType::f32) return to_device(y, host, count * sizeof(float));
  auto* staged = static_cast<float*>(workspace(count * sizeof(float)));
  to_device(staged, host, count * sizeof(float));
  launch_cast_from_float(*this, staged, static_cast<bf16*>(y), count);
}

void CudaBackend::axpy(float a, const float* x, float* y, size_t count) {
  launch_axpy(*this, a, x, y, count);
}

int grid_blocks(const CudaBackend& be, size_t count, int threads) {
  const size_t needed = (count + threads - 1) / threads;
  const size_t one_wave = size_t(be.sm_count()) * (2048 / threads);  // full occupancy
  return int(std::clamp<size_t>(needed, 1, one_wave));
}

}  // namespace sieve::cuda

namespace sieve::cuda {
namespace {

// What this machine offers, queried once (cheap, never throws).
struct CudaDeviceInfo {
  int count = 0;
  int major = 0, minor = 0;
  std::string name;
  std::string error;  // why there is no usable device
};

const CudaDeviceInfo& cuda_device_info() {
  static const CudaDeviceInfo info = [] {
    CudaDeviceInfo d;
    const cudaError_t rc = cudaGetDeviceCount(&d.count);
    if (rc != cudaSuccess || d.count == 0) {
      cudaGetLastError();  // clear the "no driver / no device" error
      const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
      d.count = 0;
      d.error =
          cat("no CUDA device visible (CUDA_VISIBLE_DEVICES=", visible ? visible : "<unset>",
              rc != cudaSuccess ? "; " : "", rc != cudaSuccess ? cudaGetErrorString(rc) : "", ")");
      return d;
    }
    int dev = 0;
    cudaDeviceProp prop{};
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
      cudaGetLastError();
      d.count = 0;
      d.error = "no CUDA device usable (cudaGetDeviceProperties failed)";
      return d;
    }
    d.major = prop.major, d.minor = prop.minor, d.name = prop.name;
    return d;
  }();
  return info;
}

}  // namespace

// bf16 needs sm_80 (Ampere) or newer: the tensor-core and conversion instructions cuDNN and
// our kernels use. There it is native, so `native` changes nothing.
bool cuda_backend_supports(nn::DType dtype, bool /*native*/, std::string* why) {
  try {
    const CudaDeviceInfo& d = cuda_device_info();
    if (d.count == 0) {
      if (why) *why = d.error;
      return false;
    }
    if (dtype == nn::DType::bf16 && d.major < 8) {
      if (why)
        *why = cat("bf16 needs a GPU of compute capability 8.0 or newer; ", d.name, " is ", d.major,
                   ".", d.minor);
      return false;
    }
    return true;
  } catch (...) {  // allocation failure while formatting: report "unsupported", never throw
    if (why) why->clear();
    return false;
  }
}

std::unique_ptr<nn::Backend> make_cuda_backend(nn::DType dtype) {
  return std::make_unique<CudaBackend>(dtype);
}

}  // namespace sieve::cuda
