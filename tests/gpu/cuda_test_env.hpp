// For GPU test binaries: exit 77 (CTest: skipped) before any test runs when no CUDA device is
// visible, e.g. in CI, and name the GPU otherwise. Include once per binary.
#pragma once
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "cuda/device.hpp"

namespace sieve::cuda::testing {

class RequireCudaDevice : public ::testing::Environment {
 public:
  void SetUp() override {
    if (device_count() == 0) {
      std::fprintf(stderr, "no CUDA device: skipping GPU tests\n");
      std::exit(77);
    }
    std::fprintf(stderr, "GPU: %s\n", device_name(0).c_str());
  }
};

inline ::testing::Environment* const require_cuda_device =
    ::testing::AddGlobalTestEnvironment(new RequireCudaDevice);

}  // namespace sieve::cuda::testing
