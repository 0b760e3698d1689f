// Elementwise kernels (ReLU, add, axpy, casts) and the layout changes at the model's edges and
// around cuDNN's filter layout. All memory-bound: the only goals are full-width coalesced
// accesses (16-byte vectors where the pointers allow it) and one pass over the data.
#include <cstdint>

#include "cuda/cuda_check.hpp"
#include "cuda/dtype.cuh"
#include "cuda/kernels.hpp"

namespace sieve::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

// y[i] = op(a[i], b[i]) in fp32, V elements per 16-byte access; the tail (count % V) is
// done element by element by the first threads of the grid.
template <typename T, int V, typename Op>
__global__ void map2_kernel(const T* a, const T* b, T* y, size_t count, Op op) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  const size_t first = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  const size_t nvec = count / V;
  const auto* av = reinterpret_cast<const Vec<T, V>*>(a);
  const auto* bv = reinterpret_cast<const Vec<T, V>*>(b);
  auto* yv = reinterpret_cast<Vec<T, V>*>(y);
  for (size_t i = first; i < nvec; i += stride) {
    const Vec<T, V> x0 = av[i], x1 = bv[i];
    Vec<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) out.v[k] = from_float<T>(op(to_float(x0.v[k]), to_float(x1.v[k])));
    yv[i] = out;
  }
  for (size_t i = nvec * V + first; i < count; i += stride)
    y[i] = from_float<T>(op(to_float(a[i]), to_float(b[i])));
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

template <typename T, typename Op>
void map2(const CudaBackend& be, const T* a, const T* b, T* y, size_t count, Op op) {
  if (count == 0) return;
  constexpr int V = 16 / sizeof(T);
  if (aligned16(a) && aligned16(b) && aligned16(y)) {
    map2_kernel<T, V><<<grid_blocks(be, (count + V - 1) / V, kThreads), kThreads, 0, be.stream()>>>(
        a, b, y, count, op);
  } else {
    map2_kernel<T, 1>
        <<<grid_blocks(be, count, kThreads), kThreads, 0, be.stream()>>>(a, b, y, count, op);
  }
  SIEVE_CUDA_CHECK_LAUNCH();
}

// The ops, as functors of (first, second) operand. NaN > 0 is false, as in the reference.
struct ReluOp {
  __device__ float operator()(float x, float) const { return x > 0.f ? x : 0.f; }
};
struct ReluBackwardOp {
  __device__ float operator()(float y, float dy) const { return y > 0.f ? dy : 0.f; }
};
struct AddOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct AxpyOp {  // operands (x, y): y + alpha * x
  float alpha;
  __device__ float operator()(float x, float y) const { return fmaf(alpha, x, y); }
};

template <typename From, typename To>
__global__ void cast_kernel(const From* __restrict__ x, To* __restrict__ y, size_t count) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x)
    y[i] = from_float<To>(to_float(x[i]));
}

// One thread per output element (n, h, w, c), c fastest: coalesced writes; the reads stride
// over the few input channels of an image and stay in cache.
template <typename T>
__global__ void nchw_to_nhwc_kernel(const float* __restrict__ x, T* __restrict__ y, int n, int c,
                                    int h, int w) {
  const size_t total = size_t(n) * c * h * w;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    const int ch = int(i % c);
    const size_t pix = i / c;  // (n*h + y)*w + x
    const int xw = int(pix % w), yh = int(pix / w % h), img = int(pix / (size_t(w) * h));
    y[i] = from_float<T>(x[((size_t(img) * c + ch) * h + yh) * w + xw]);
  }
}

// OIHW fp32 -> OHWI (cuDNN's NHWC filter, KRSC) in T; one thread per output element.
template <typename T>
__global__ void oihw_to_ohwi_kernel(const float* __restrict__ w, T* __restrict__ out, int k, int c,
                                    int r, int s) {
  const size_t total = size_t(k) * c * r * s;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    const int ch = int(i % c);
    const int q = int(i / c % s), p = int(i / (size_t(c) * s) % r);
    const int o = int(i / (size_t(c) * s * r));
    out[i] = from_float<T>(w[((size_t(o) * c + ch) * r + p) * s + q]);
  }
}

// dw OIHW += g OHWI; one thread per dw element (each written once: no atomics).
template <typename T>
__global__ void accumulate_ohwi_into_oihw_kernel(const T* __restrict__ g, float* __restrict__ dw,
                                                 int k, int c, int r, int s) {
  const size_t total = size_t(k) * c * r * s;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    const int q = int(i % s), p = int(i / s % r), ch = int(i / (size_t(s) * r) % c);
    const int o = int(i / (size_t(s) * r * c));
    dw[i] += to_float(g[((size_t(o) * r + p) * s + q) * c + ch]);
  }
}

}  // namespace

template <typename T>
void launch_relu_forward(const CudaBackend& be, const T* x, T* y, size_t count) {
  map2(be, x, x, y, count, ReluOp{});
}

template <typename T>
void launch_relu_backward(const CudaBackend& be, const T* y, const T* dy, T* dx, size_t count) {
  map2(be, y, dy, dx, count, ReluBackwardOp{});
}

template <typename T>
void launch_add(const CudaBackend& be, const T* a, const T* b, T* y, size_t count) {
  map2(be, a, b, y, count, AddOp{});
}

void launch_axpy(const CudaBackend& be, float a, const float* x, float* y, size_t count) {
  map2(be, x, static_cast<const float*>(y), y, count, AxpyOp{a});
}

template <typename T>
void launch_cast_from_float(const CudaBackend& be, const float* x, T* y, size_t count) {
  if (count == 0) return;
  cast_kernel<<<grid_blocks(be, count, kThreads), kThreads, 0, be.stream()>>>(x, y, count);
  SIEVE_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch_cast_to_float(const CudaBackend& be, const T* x, float* y, size_t count) {
  if (count == 0) return;
  cast_kernel<<<grid_blocks(be, count, kThreads), kThreads, 0, be.stream()>>>(x, y, count);
  SIEVE_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch_nchw_to_nhwc(const CudaBackend& be, const float* x, T* y, int n, int c, int h, int w) {
  const size_t total = size_t(n) * c * h * w;
  if (total == 0) return;
  nchw_to_nhwc_kernel<<<grid_blocks(be, total, kThreads), kThreads, 0, be.stream()>>>(x, y, n, c, h,
                                                                                      w);
  SIEVE_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch_oihw_to_ohwi(const CudaBackend& be, const float* w, T* w_ohwi, int k, int c, int r,
                         int s) {
  const size_t total = size_t(k) * c * r * s;
  oihw_to_ohwi_kernel<<<grid_blocks(be, total, kThreads), kThreads, 0, be.stream()>>>(w, w_ohwi, k,
                                                                                      c, r, s);
  SIEVE_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch_accumulate_ohwi_into_oihw(const CudaBackend& be, const T* grad_ohwi, float* dw_oihw,
                                      int k, int c, int r, int s) {
  const size_t total = size_t(k) * c * r * s;
  accumulate_ohwi_into_oihw_kernel<<<grid_blocks(be, total, kThreads), kThreads, 0, be.stream()>>>(
      grad_ohwi, dw_oihw, k, c, r, s);
  SIEVE_CUDA_CHECK_LAUNCH();
}

#define SIEVE_INSTANTIATE_ELEMENTWISE(T)                                                          \
  template void launch_relu_forward<T>(const CudaBackend&, const T*, T*, size_t);                 \
  template void launch_relu_backward<T>(const CudaBackend&, const T*, const T*, T*, size_t);      \
  template void launch_add<T>(const CudaBackend&, const T*, const T*, T*, size_t);                \
  template void launch_cast_from_float<T>(const CudaBackend&, const float*, T*, size_t);          \
  template void launch_cast_to_float<T>(const CudaBackend&, const T*, float*, size_t);            \
  template void launch_nchw_to_nhwc<T>(const CudaBackend&, const float*, T*, int, int, int, int); \
  template void launch_oihw_to_ohwi<T>(const CudaBackend&, const float*, T*, int, int, int, int); \
  template void launch_accumulate_ohwi_into_oihw<T>(const CudaBackend&, const T*, float*, int,    \
                                                    int, int, int);
SIEVE_INSTANTIATE_ELEMENTWISE(float)
SIEVE_INSTANTIATE_ELEMENTWISE(bf16)
#undef SIEVE_INSTANTIATE_ELEMENTWISE

}  // namespace sieve::cuda
