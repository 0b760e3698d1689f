#include "cuda/cuda_check.hpp"
#include "cuda/sgd.hpp"

namespace sieve::cuda {
namespace {

// One thread per element, grid-stride loop; memory-bound, so the only goal is coalescing.
__global__ void sgd_kernel(float* __restrict__ w, const float* __restrict__ g,
                           float* __restrict__ m, size_t n, float lr, float mu, float wd,
                           bool nesterov) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float d = g[i] + wd * w[i];
    float v = mu * m[i] + d;
    m[i] = v;
    w[i] -= lr * (nesterov ? d + mu * v : v);
  }
}

}  // namespace

void sgd_step(float* params, const float* grads, float* momentum, size_t n, const SgdParams& p,
              cudaStream_t stream) {
  if (n == 0) return;
  int threads = 256;
  int blocks = int(std::min<size_t>((n + threads - 1) / threads, 65535));
  sgd_kernel<<<blocks, threads, 0, stream>>>(params, grads, momentum, n, p.lr, p.momentum,
                                             p.weight_decay, p.nesterov);
  SIEVE_CUDA_CHECK(cudaGetLastError());
}

void sgd_step_reference(float* w, const float* g, float* m, size_t n, const SgdParams& p) {
  for (size_t i = 0; i < n; ++i) {
    float d = g[i] + p.weight_decay * w[i];
    float v = p.momentum * m[i] + d;
    m[i] = v;
    w[i] -= p.lr * (p.nesterov ? d + p.momentum * v : v);
  }
}

}  // namespace sieve::cuda
