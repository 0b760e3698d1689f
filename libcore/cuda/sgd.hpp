// Fused optimizer step on the GPU over the flat parameter buffer (one kernel launch per
// step instead of one per tensor). Semantics match the CPU SGD: PyTorch's SGD with
// momentum/dampening 0, optional Nesterov, L2 weight decay added to the gradient.
#pragma once
#include <cstddef>

#include <cuda_runtime.h>

namespace sieve::cuda {

struct SgdParams {
  float lr = 0.1f, momentum = 0.9f, weight_decay = 0.0f;
  bool nesterov = false;
};

// params/grads/momentum: device pointers of n floats. Asynchronous on `stream`.
void sgd_step(float* params, const float* grads, float* momentum, size_t n, const SgdParams& p,
              cudaStream_t stream = nullptr);

// Host reference of the same update (used by the GPU tests and the CPU fallback).
void sgd_step_reference(float* params, const float* grads, float* momentum, size_t n,
                        const SgdParams& p);

}  // namespace sieve::cuda
