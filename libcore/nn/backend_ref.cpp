// The "ref" backend: the reference loops of ref_ops.hpp in float, behind the op interface.
// Slow by design; the oracle the optimised backends are tested against, and a backend small
// models (tests, gradient checks of whole networks) can run on.
#include <vector>

#include "nn/backend_impl.hpp"
#include "nn/ref_ops.hpp"

namespace sieve::nn {
namespace {

class RefConv final : public ConvOp {
 public:
  explicit RefConv(const ConvShape& s) : s_(s) {}
  void forward(const float* x, const float* w, float* y) override {
    ref::conv_forward(s_, x, w, y);
  }
  void backward_data(const float* dy, const float* w, float* dx) override {
    ref::conv_backward_data(s_, dy, w, dx);
  }
  void backward_weights(const float* x, const float* dy, float* dw) override {
    ref::conv_backward_weights(s_, x, dy, dw);
  }

 private:
  ConvShape s_;
};

class RefBatchNorm final : public BatchNormOp {
 public:
  RefBatchNorm(int n, int c, int h, int w, bool relu, float momentum, float eps)
      : m_(n * h * w), c_(c), relu_(relu), momentum_(momentum), eps_(eps), mean_(c), var_(c) {}
  void forward(const float* x, const float* gamma, const float* beta, float* rm, float* rv,
               float* y, bool training) override {
    if (!training) {
      ref::bn_forward_eval(m_, c_, x, gamma, beta, rm, rv, y, eps_, relu_);
      return;
    }
    ref::bn_forward_train(m_, c_, x, gamma, beta, y, mean_.data(), var_.data(), eps_, relu_);
    update_running_stats(m_, c_, momentum_, mean_.data(), var_.data(), rm, rv);
  }
  void backward(const float* x, const float* y, const float* dy, const float* gamma, float* dx,
                float* dgamma, float* dbeta) override {
    ref::bn_backward(m_, c_, x, y, dy, gamma, mean_.data(), var_.data(), dx, dgamma, dbeta, eps_,
                     relu_);
  }

 private:
  int m_, c_;
  bool relu_;
  float momentum_, eps_;
  std::vector<float> mean_, var_;
};

class RefMaxPool final : public MaxPoolOp {
 public:
  explicit RefMaxPool(const PoolShape& s) : s_(s) {}
  void forward(const float* x, float* y, bool) override { ref::maxpool_forward(s_, x, y); }
  void backward(const float* x, const float* dy, float* dx) override {
    ref::maxpool_backward(s_, x, dy, dx);
  }

 private:
  PoolShape s_;
};

class RefLinear final : public LinearOp {
 public:
  RefLinear(int n, int in, int out) : n_(n), in_(in), out_(out) {}
  void forward(const float* x, const float* w, const float* b, float* y) override {
    ref::linear_forward(n_, in_, out_, x, w, b, y);
  }
  void backward(const float* x, const float* dy, const float* w, float* dx, float* dw,
                float* db) override {
    ref::linear_backward(n_, in_, out_, x, dy, w, dx, dw, db);
  }

 private:
  int n_, in_, out_;
};

class RefBackend final : public Backend {
 public:
  std::string name() const override { return "ref"; }
  std::unique_ptr<ConvOp> conv2d(const ConvShape& s) override {
    return std::make_unique<RefConv>(s);
  }
  std::unique_ptr<BatchNormOp> batchnorm(int n, int c, int h, int w, bool relu, float momentum,
                                         float eps) override {
    return std::make_unique<RefBatchNorm>(n, c, h, w, relu, momentum, eps);
  }
  std::unique_ptr<MaxPoolOp> maxpool(const PoolShape& s) override {
    return std::make_unique<RefMaxPool>(s);
  }
  std::unique_ptr<LinearOp> linear(int n, int in, int out) override {
    return std::make_unique<RefLinear>(n, in, out);
  }
  void relu_forward(const float* x, float* y, size_t count) override {
    ref::relu_forward(x, y, count);
  }
  void relu_backward(const float* y, const float* dy, float* dx, size_t count) override {
    ref::relu_backward(y, dy, dx, count);
  }
  void add(const float* a, const float* b, float* y, size_t count) override {
    for (size_t i = 0; i < count; ++i) y[i] = a[i] + b[i];
  }
  void avgpool_forward(const float* x, float* y, int n, int c, int hw) override {
    ref::avgpool_forward(x, y, n, c, hw);
  }
  void avgpool_backward(const float* dy, float* dx, int n, int c, int hw) override {
    ref::avgpool_backward(dy, dx, n, c, hw);
  }
};

}  // namespace

std::unique_ptr<Backend> make_ref_backend() {
  return std::make_unique<RefBackend>();
}

}  // namespace sieve::nn
