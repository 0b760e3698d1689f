// GPU tests of the CUDA pieces against their CPU references. Exit 77 (CTest: skipped)
// when no CUDA device is present, e.g. in CI.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <vector>

#include "cuda/device.hpp"
#include "cuda/sgd.hpp"
#include "gpu/cuda_test_env.hpp"

using namespace sieve::cuda;

TEST(CudaSgd, MatchesCpuReferenceWithNesterovAndDecay) {
  const size_t n = 1 << 20;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  std::vector<float> w(n), g(n), m(n);
  for (size_t i = 0; i < n; ++i) {
    w[i] = nd(rng);
    g[i] = nd(rng);
    m[i] = 0.1f * nd(rng);
  }
  SgdParams p{0.05f, 0.9f, 5e-4f, true};
  DeviceBuffer<float> dw(n), dg(n), dm(n);
  dw.upload(w.data(), n);
  dg.upload(g.data(), n);
  dm.upload(m.data(), n);
  for (int step = 0; step < 3; ++step) {
    sgd_step(dw.get(), dg.get(), dm.get(), n, p);
    sgd_step_reference(w.data(), g.data(), m.data(), n, p);
  }
  std::vector<float> w_gpu(n), m_gpu(n);
  dw.download(w_gpu.data(), n);
  dm.download(m_gpu.data(), n);
  for (size_t i = 0; i < n; i += 997) {
    ASSERT_NEAR(w_gpu[i], w[i], 1e-5f * (1 + std::abs(w[i]))) << i;
    ASSERT_NEAR(m_gpu[i], m[i], 1e-5f * (1 + std::abs(m[i]))) << i;
  }
}
