// Element types of the CUDA kernels: activations are float or __nv_bfloat16 (the backend's
// dtype), arithmetic is always fp32 (load -> float, compute, round once on store, as the
// "ref" backend's bf16 semantics). Kernels are templated on the element type T; host code
// picks T from the runtime DType with dispatch_dtype.
#pragma once
#include <cuda_bf16.h>

#include "nn/tensor.hpp"

namespace sieve::cuda {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float to_float(float v) {
  return v;
}
__device__ __forceinline__ float to_float(bf16 v) {
  return __bfloat162float(v);
}

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ bf16 from_float<bf16>(float v) {
  return __float2bfloat16_rn(v);  // round to nearest even, as the host's to_bf16
}

// Calls fn(T{}) with T = float or bf16 for the runtime dtype: one line per op instead of an
// if/else around every launch.
template <typename Fn>
void dispatch_dtype(nn::DType dtype, Fn&& fn) {
  if (dtype == nn::DType::bf16)
    fn(bf16{});
  else
    fn(float{});
}

}  // namespace sieve::cuda
