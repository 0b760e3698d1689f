// Check macros for CUDA runtime, cuBLAS, cuDNN and NCCL calls: a failure throws sieve::Error
// naming the call, file and line (llm.c's habit: every device call is checked).
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include "util/error.hpp"

#define SIEVE_CUDA_CHECK(call)                                                             \
  do {                                                                                     \
    cudaError_t sieve_cuda_rc_ = (call);                                                   \
    if (sieve_cuda_rc_ != cudaSuccess)                                                     \
      throw ::sieve::Error(::sieve::cat(__FILE__, ":", __LINE__, ": ", #call,              \
                                        " failed: ", cudaGetErrorString(sieve_cuda_rc_))); \
  } while (0)

#define SIEVE_CUBLAS_CHECK(call)                                                                \
  do {                                                                                          \
    cublasStatus_t sieve_cublas_rc_ = (call);                                                   \
    if (sieve_cublas_rc_ != CUBLAS_STATUS_SUCCESS)                                              \
      throw ::sieve::Error(::sieve::cat(__FILE__, ":", __LINE__, ": ", #call,                   \
                                        " failed: ", cublasGetStatusString(sieve_cublas_rc_))); \
  } while (0)

#define SIEVE_CUDNN_CHECK(call)                                                              \
  do {                                                                                       \
    cudnnStatus_t sieve_cudnn_rc_ = (call);                                                  \
    if (sieve_cudnn_rc_ != CUDNN_STATUS_SUCCESS)                                             \
      throw ::sieve::Error(::sieve::cat(__FILE__, ":", __LINE__, ": ", #call,                \
                                        " failed: ", cudnnGetErrorString(sieve_cudnn_rc_))); \
  } while (0)

#define SIEVE_NCCL_CHECK(call)                                                             \
  do {                                                                                     \
    ncclResult_t sieve_nccl_rc_ = (call);                                                  \
    if (sieve_nccl_rc_ != ncclSuccess)                                                     \
      throw ::sieve::Error(::sieve::cat(__FILE__, ":", __LINE__, ": ", #call,              \
                                        " failed: ", ncclGetErrorString(sieve_nccl_rc_))); \
  } while (0)

// After a kernel launch: launch-configuration errors surface here, at the launching line.
#define SIEVE_CUDA_CHECK_LAUNCH() SIEVE_CUDA_CHECK(cudaGetLastError())
