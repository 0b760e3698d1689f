// With SIEVE_CUDNN_DETERMINISTIC=1 a training step on the CUDA backend is bitwise
// reproducible: the backend's own kernels reduce in a fixed order (no atomics), cuBLAS is
// deterministic for a fixed configuration, and cuDNN is restricted to deterministic
// algorithms. Its own binary because the backend reads the variable once, when created.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <vector>

#include "gpu/cuda_test_env.hpp"
#include "nn/backend.hpp"
#include "nn/model.hpp"

using namespace sieve::nn;

namespace {

// Set before main, so before the first backend("cuda").
const bool deterministic_cudnn = setenv("SIEVE_CUDNN_DETERMINISTIC", "1", 1) == 0;

struct Step {
  std::vector<float> logits, grads, params;
};

Step train_step(DType dtype) {
  ModelSpec spec;
  spec.arch = "resnet18";
  spec.backend = "cuda";
  spec.dtype = dtype;
  auto model = make_model(spec);
  init_params(*model, 5);
  const int n = 32;
  std::mt19937 g(9);
  std::normal_distribution<float> d;
  std::vector<float> x(size_t(n) * model->input_size()), dz(size_t(n) * 10);
  for (float& v : x) v = d(g);
  for (float& v : dz) v = d(g) / n;
  Step s;
  for (int step = 0; step < 2; ++step) {  // the second step sees updated weights and stats
    model->zero_grad();
    const float* z = model->forward(x.data(), n, true);
    s.logits.assign(z, z + size_t(n) * 10);
    model->backward(dz.data());
    model->backend().axpy(-0.1f, model->grads(), model->params(), model->num_params());
  }
  s.grads = model->grads_to_host();
  s.params = model->params_to_host();
  return s;
}

}  // namespace

TEST(CudaDeterminism, TrainingStepsAreBitwiseReproducible) {
  ASSERT_TRUE(deterministic_cudnn);
  for (DType dtype : {DType::f32, DType::bf16}) {
    const Step a = train_step(dtype), b = train_step(dtype);
    EXPECT_EQ(a.logits, b.logits) << dtype_name(dtype);
    EXPECT_EQ(a.grads, b.grads) << dtype_name(dtype);
    EXPECT_EQ(a.params, b.params) << dtype_name(dtype);
  }
}
