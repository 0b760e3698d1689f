// Check macros for CUDA runtime and cuBLAS calls: a failure names the call, file and line.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "util/error.hpp"

#define SIEVE_CUDA_CHECK(call)                                                              \
  do {                                                                                      \
    cudaError_t sieve_cuda_rc_ = (call);                                                    \
    if (sieve_cuda_rc_ != cudaSuccess)                                                      \
      throw ::sieve::Error(::sieve::cat(__FILE__, ":", __LINE__, ": ", #call, " failed: ",  \
                                        cudaGetErrorString(sieve_cuda_rc_)));               \
  } while (0)

#define SIEVE_CUBLAS_CHECK(call)                                                            \
  do {                                                                                      \
    cublasStatus_t sieve_cublas_rc_ = (call);                                               \
    if (sieve_cublas_rc_ != CUBLAS_STATUS_SUCCESS)                                          \
      throw ::sieve::Error(::sieve::cat(__FILE__, ":", __LINE__, ": ", #call, " failed: ",  \
                                        cublasGetStatusString(sieve_cublas_rc_)));          \
  } while (0)
