// Internal to libcore/nn: factories of the backends (called only by backend_registry.cpp) and
// helpers shared by backend implementations.
#pragma once
#include <cstddef>
#include <memory>

#include "nn/backend.hpp"

namespace sieve::nn {

std::unique_ptr<Backend> make_ref_backend();
std::unique_ptr<Backend> make_cpu_backend();

// PyTorch's running-stat update from batch mean and biased variance over m samples:
// r = (1 - momentum) * r + momentum * stat, with the variance made unbiased (m / (m - 1)).
inline void update_running_stats(int m, int c, float momentum, const float* mean, const float* var,
                                 float* run_mean, float* run_var) {
  const double unbias = m > 1 ? double(m) / (m - 1) : 1.0;
  for (int i = 0; i < c; ++i) {
    run_mean[i] = float((1.0 - momentum) * run_mean[i] + momentum * double(mean[i]));
    run_var[i] = float((1.0 - momentum) * run_var[i] + momentum * double(var[i]) * unbias);
  }
}

}  // namespace sieve::nn
