// The op interface: what a compute backend provides to the layers.
//
// A backend is a factory of op objects. An op object is created once per layer instance for
// one shape and may cache whatever it needs between calls (oneDNN primitives, workspaces,
// saved batch statistics, reordered weights); layers re-create it when the batch size changes.
// The backends that exist are listed in ONE place, backend_registry.cpp.
//
// Conventions shared by every backend (and checked against the "ref" backend in tests):
//   * activations are NHWC: element (n, c, h, w) at ((n*H + h)*W + w)*C + c;
//   * conv weights are OIHW (torchvision), linear weights [out, in] (row-major);
//   * "backward" writes activation gradients (overwrite) and ACCUMULATES (+=) parameter
//     gradients, so the flat gradient buffer needs no scratch copy per layer;
//   * ops are deterministic for a fixed thread count (no atomics in reductions);
//   * backends and ops are not thread-safe (the CPU backend caches primitives): use a model
//     from one thread at a time; parallelism is inside each op (OpenMP / oneDNN threads).
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace sieve::nn {

struct ConvShape {
  int n, c, h, w;  // input
  int k, r, s;     // output channels, kernel height, width
  int stride, pad;
  int oh() const { return (h + 2 * pad - r) / stride + 1; }
  int ow() const { return (w + 2 * pad - s) / stride + 1; }
};

struct PoolShape {  // max pooling, square kernel
  int n, c, h, w;
  int kernel, stride, pad;
  int oh() const { return (h + 2 * pad - kernel) / stride + 1; }
  int ow() const { return (w + 2 * pad - kernel) / stride + 1; }
};

// y = conv(x, w), no bias (ResNet convs are followed by BN).
class ConvOp {
 public:
  virtual ~ConvOp() = default;
  virtual void forward(const float* x, const float* w, float* y) = 0;             // x NHWC, w OIHW
  virtual void backward_data(const float* dy, const float* w, float* dx) = 0;     // dx =
  virtual void backward_weights(const float* x, const float* dy, float* dw) = 0;  // dw +=
};

// Batch norm over (N, H, W) per channel, optionally fused with a following ReLU.
class BatchNormOp {
 public:
  virtual ~BatchNormOp() = default;
  // training: normalise with batch statistics (biased variance), save them for backward and
  // update running stats: r = (1-momentum)*r + momentum*batch (variance unbiased, M/(M-1)).
  // eval: normalise with running stats.
  virtual void forward(const float* x, const float* gamma, const float* beta, float* run_mean,
                       float* run_var, float* y, bool training) = 0;
  // After a training forward on the same x. y is that forward's output (for the fused ReLU
  // mask). dx =, dgamma +=, dbeta +=.
  virtual void backward(const float* x, const float* y, const float* dy, const float* gamma,
                        float* dx, float* dgamma, float* dbeta) = 0;
};

class MaxPoolOp {
 public:
  virtual ~MaxPoolOp() = default;
  virtual void forward(const float* x, float* y, bool training) = 0;
  // After a training forward on the same x; ties go to the first maximum in window order.
  virtual void backward(const float* x, const float* dy, float* dx) = 0;  // dx =
};

// y[n, out] = x[n, in] * W^T + b.
class LinearOp {
 public:
  virtual ~LinearOp() = default;
  virtual void forward(const float* x, const float* w, const float* b, float* y) = 0;
  // dx = dy * W (skipped if dx is null), dw += dy^T x, db += sum_n dy.
  virtual void backward(const float* x, const float* dy, const float* w, float* dx, float* dw,
                        float* db) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  virtual std::unique_ptr<ConvOp> conv2d(const ConvShape& s) = 0;
  virtual std::unique_ptr<BatchNormOp> batchnorm(int n, int c, int h, int w, bool fuse_relu,
                                                 float momentum, float eps) = 0;
  virtual std::unique_ptr<MaxPoolOp> maxpool(const PoolShape& s) = 0;
  virtual std::unique_ptr<LinearOp> linear(int n, int in, int out) = 0;

  // Elementwise and small ops on count floats.
  virtual void relu_forward(const float* x, float* y, size_t count) = 0;
  virtual void relu_backward(const float* y, const float* dy, float* dx, size_t count) = 0;
  virtual void add(const float* a, const float* b, float* y, size_t count) = 0;  // y = a + b
  // Global average pool: x [n, hw, c] (NHWC) -> y [n, c]; backward spreads dy/hw.
  virtual void avgpool_forward(const float* x, float* y, int n, int c, int hw) = 0;
  virtual void avgpool_backward(const float* dy, float* dx, int n, int c, int hw) = 0;
};

// The registry (backend_registry.cpp): "cpu" (oneDNN + OpenBLAS) and "ref" (naive loops).
// Backends are process-wide singletons. Throws UsageError naming the backend if unknown.
Backend& backend(const std::string& name);
std::vector<std::string> backend_names();

}  // namespace sieve::nn
