// The shared op-by-op suite (tests/support/op_suite.hpp) on the CUDA backend in fp32 and
// bf16, against the fp32 "ref" backend. fp32 tolerance 1e-4: cuDNN's FMA algorithms and the
// kernels' fp32 reductions against the reference's double sums (TF32 is off unless
// SIEVE_ALLOW_TF32=1, which this suite is not meant to pass). bf16: 2e-2.
#include <gtest/gtest.h>

#include "gpu/cuda_test_env.hpp"
#include "nn/backend.hpp"
#include "support/op_suite.hpp"

using sieve::nn::DType;
using namespace sieve::nn::op_suite;

INSTANTIATE_TEST_SUITE_P(Cuda, BackendOps,
                         ::testing::Values(OpCase{"cuda", DType::f32, 1e-4},
                                           OpCase{"cuda", DType::bf16, 2e-2}),
                         op_case_name);
