// Pooling kernels: max pooling (the ImageNet stem's 3x3/2) and global average pooling, NHWC.
//
// Max pooling is an own kernel rather than cuDNN's because the seam fixes the tie rule (the
// gradient goes to the FIRST maximum in row-major window order) and wants it deterministic:
// forward saves each output's winning window position (one byte), and backward GATHERS, for
// every input element, the gradients of the windows that chose it, in (oy, ox) order. That is
// the reference's summation order, with no atomics for the overlapping windows.
#include <cstdint>

#include "cuda/cuda_check.hpp"
#include "cuda/dtype.cuh"
#include "cuda/kernels.hpp"

namespace sieve::cuda {
namespace {

constexpr int kThreads = 256;
constexpr uint8_t kNoWinner = 0xff;  // a window with no valid element (never with pad < kernel)

// One thread per output (n, oy, ox, c), c fastest: neighbouring threads read neighbouring
// channels (coalesced).
// Index: uint32_t where the element count fits in 31 bits, else size_t; 64-bit integer
// division is emulated on the GPU and made the backward 4 ms for ResNet-50's stem at batch 256
// on an H100 (7 % of a bf16 step; the data it moves take ~0.6 ms).
template <typename T, typename Index>
__global__ void maxpool_forward_kernel(nn::PoolShape s, int oh, int ow, const T* __restrict__ x,
                                       T* __restrict__ y, uint8_t* __restrict__ winner) {
  const Index total = Index(s.n) * oh * ow * s.c;
  for (Index i = blockIdx.x * Index(blockDim.x) + threadIdx.x; i < total;
       i += Index(gridDim.x) * blockDim.x) {
    const Index pixel = i / Index(s.c);
    const int c = int(i - pixel * Index(s.c));
    const Index row = pixel / Index(ow);
    const int ox = int(pixel - row * Index(ow));
    const int n = int(row / Index(oh)), oy = int(row - Index(n) * Index(oh));
    float best = -INFINITY;
    uint8_t arg = kNoWinner;
    for (int r = 0; r < s.kernel; ++r) {
      const int iy = oy * s.stride - s.pad + r;
      if (iy < 0 || iy >= s.h) continue;
      for (int q = 0; q < s.kernel; ++q) {
        const int ix = ox * s.stride - s.pad + q;
        if (ix < 0 || ix >= s.w) continue;
        const float v = to_float(x[((Index(n) * s.h + iy) * s.w + ix) * s.c + c]);
        if (v > best || arg == kNoWinner) best = v, arg = uint8_t(r * s.kernel + q);
      }
    }
    y[i] = from_float<T>(best);
    if (winner) winner[i] = arg;
  }
}

// One thread per input (n, iy, ix, c): the outputs whose window covers (iy, ix) are
// oy in [ceil((iy + pad - kernel + 1) / stride), (iy + pad) / stride], same for ox.
template <typename T, typename Index>
__global__ void maxpool_backward_kernel(nn::PoolShape s, int oh, int ow,
                                        const uint8_t* __restrict__ winner,
                                        const T* __restrict__ dy, T* __restrict__ dx) {
  const Index total = Index(s.n) * s.h * s.w * s.c;
  for (Index i = blockIdx.x * Index(blockDim.x) + threadIdx.x; i < total;
       i += Index(gridDim.x) * blockDim.x) {
    const Index pixel = i / Index(s.c);
    const int c = int(i - pixel * Index(s.c));
    const Index row = pixel / Index(s.w);
    const int ix = int(pixel - row * Index(s.w));
    const int n = int(row / Index(s.h)), iy = int(row - Index(n) * Index(s.h));
    const int ty = iy + s.pad, tx = ix + s.pad;
    const int oy_lo = ty >= s.kernel ? (ty - s.kernel) / s.stride + 1 : 0;
    const int ox_lo = tx >= s.kernel ? (tx - s.kernel) / s.stride + 1 : 0;
    const int oy_hi = min(ty / s.stride, oh - 1), ox_hi = min(tx / s.stride, ow - 1);
    float acc = 0.f;
    for (int oy = oy_lo; oy <= oy_hi; ++oy)
      for (int ox = ox_lo; ox <= ox_hi; ++ox) {
        const Index o = ((Index(n) * oh + oy) * ow + ox) * s.c + c;
        const int pos = (ty - oy * s.stride) * s.kernel + (tx - ox * s.stride);
        if (winner[o] == pos) acc += to_float(dy[o]);
      }
    dx[i] = from_float<T>(acc);
  }
}

// One thread per (n, c): the mean over the hw positions, coalesced across c.
template <typename T>
__global__ void avgpool_forward_kernel(const T* __restrict__ x, T* __restrict__ y, int n, int c,
                                       int hw) {
  const size_t total = size_t(n) * c;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    const size_t img = i / c, ch = i % c;
    float acc = 0.f;
    for (int p = 0; p < hw; ++p) acc += to_float(x[(img * hw + p) * c + ch]);
    y[i] = from_float<T>(acc / hw);
  }
}

template <typename T>
__global__ void avgpool_backward_kernel(const T* __restrict__ dy, T* __restrict__ dx, int n, int c,
                                        int hw) {
  const size_t total = size_t(n) * hw * c;
  const float inv = 1.f / hw;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    const size_t img = i / (size_t(hw) * c), ch = i % c;
    dx[i] = from_float<T>(to_float(dy[img * c + ch]) * inv);
  }
}

class CudaMaxPool final : public nn::MaxPoolOp {
 public:
  CudaMaxPool(CudaBackend& be, const nn::PoolShape& s) : be_(be), s_(s), winner_(be) {
    SIEVE_ASSERT(s.kernel * s.kernel < kNoWinner, "max pool kernel ", s.kernel,
                 " too large for a one-byte window position");
    SIEVE_ASSERT(s.pad < s.kernel, "max pool pad ", s.pad, " >= kernel ", s.kernel);
  }

  void forward(const nn::Act* x, nn::Act* y, bool training) override {
    const size_t outputs = size_t(s_.n) * s_.oh() * s_.ow() * s_.c;
    uint8_t* winner = training ? static_cast<uint8_t*>(winner_.ensure(outputs)) : nullptr;
    dispatch_dtype(be_.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const size_t inputs = size_t(s_.n) * s_.h * s_.w * s_.c;  // the largest index used
      const auto blocks = grid_blocks(be_, outputs, kThreads);
      if (inputs <= INT32_MAX)  // i + the grid stride cannot wrap
        maxpool_forward_kernel<T, uint32_t><<<blocks, kThreads, 0, be_.stream()>>>(
            s_, s_.oh(), s_.ow(), static_cast<const T*>(x), static_cast<T*>(y), winner);
      else
        maxpool_forward_kernel<T, size_t><<<blocks, kThreads, 0, be_.stream()>>>(
            s_, s_.oh(), s_.ow(), static_cast<const T*>(x), static_cast<T*>(y), winner);
    });
    SIEVE_CUDA_CHECK_LAUNCH();
    trained_ = training;
  }

  // The saved winners already encode x (the same x as the training forward, per the seam).
  void backward(const nn::Act*, const nn::Act* dy, nn::Act* dx) override {
    SIEVE_ASSERT(trained_, "max pool backward without a training forward");
    const size_t inputs = size_t(s_.n) * s_.h * s_.w * s_.c;
    dispatch_dtype(be_.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const auto blocks = grid_blocks(be_, inputs, kThreads);
      if (inputs <= INT32_MAX)  // i + the grid stride cannot wrap
        maxpool_backward_kernel<T, uint32_t><<<blocks, kThreads, 0, be_.stream()>>>(
            s_, s_.oh(), s_.ow(), winner_.as<uint8_t>(), static_cast<const T*>(dy),
            static_cast<T*>(dx));
      else
        maxpool_backward_kernel<T, size_t><<<blocks, kThreads, 0, be_.stream()>>>(
            s_, s_.oh(), s_.ow(), winner_.as<uint8_t>(), static_cast<const T*>(dy),
            static_cast<T*>(dx));
    });
    SIEVE_CUDA_CHECK_LAUNCH();
  }

 private:
  CudaBackend& be_;
  nn::PoolShape s_;
  DeviceScratch winner_;  // [n, oh, ow, c] winning window position r*kernel+q
  bool trained_ = false;
};

}  // namespace

std::unique_ptr<nn::MaxPoolOp> make_maxpool(CudaBackend& be, const nn::PoolShape& s) {
  return std::make_unique<CudaMaxPool>(be, s);
}

template <typename T>
void launch_avgpool_forward(const CudaBackend& be, const T* x, T* y, int n, int c, int hw) {
  const size_t total = size_t(n) * c;
  if (total == 0) return;
  avgpool_forward_kernel<<<grid_blocks(be, total, kThreads), kThreads, 0, be.stream()>>>(x, y, n, c,
                                                                                         hw);
  SIEVE_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch_avgpool_backward(const CudaBackend& be, const T* dy, T* dx, int n, int c, int hw) {
  const size_t total = size_t(n) * c * hw;
  if (total == 0) return;
  avgpool_backward_kernel<<<grid_blocks(be, total, kThreads), kThreads, 0, be.stream()>>>(dy, dx, n,
                                                                                          c, hw);
  SIEVE_CUDA_CHECK_LAUNCH();
}

template void launch_avgpool_forward<float>(const CudaBackend&, const float*, float*, int, int,
                                            int);
template void launch_avgpool_forward<bf16>(const CudaBackend&, const bf16*, bf16*, int, int, int);
template void launch_avgpool_backward<float>(const CudaBackend&, const float*, float*, int, int,
                                             int);
template void launch_avgpool_backward<bf16>(const CudaBackend&, const bf16*, bf16*, int, int, int);

}  // namespace sieve::cuda
