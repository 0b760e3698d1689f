// The "ref" backend: the reference loops of ref_ops.hpp in float, behind the op interface.
// Slow by design; the oracle the optimised backends are tested against, and a backend small
// models (tests, gradient checks of whole networks) can run on. Its bf16 instance stores
// activations in bf16, rounds convolution weights to bf16 and computes in fp32 (double
// accumulation): the semantics every bf16 backend approximates, runnable on any machine.
#include <vector>

#include "nn/backend_impl.hpp"
#include "nn/ref_ops.hpp"

namespace sieve::nn {
namespace {

// Every op: inputs decoded to fp32 (bf16 backend), the fp32 reference loops, outputs rounded
// to bf16 once. Scratch vectors per op object, so a steady loop allocates nothing.
struct Staging {
  explicit Staging(HostBackend& be) : be(be) {}
  HostBackend& be;
  std::vector<float> a, b, c, d, e;
};

class RefConv final : public ConvOp {
 public:
  RefConv(HostBackend& be, const ConvShape& s)
      : s_(s),
        st_(be),
        nx_(size_t(s.n) * s.c * s.h * s.w),
        ny_(size_t(s.n) * s.k * s.oh() * s.ow()) {}
  void forward(const Act* x, const float* w, Act* y) override {
    float* out = st_.be.f32_out(y, ny_, st_.c);
    ref::conv_forward(s_, st_.be.as_f32(x, nx_, st_.a), weights(w), out);
    st_.be.store(out, y, ny_);
  }
  void backward_data(const Act* dy, const float* w, Act* dx) override {
    float* out = st_.be.f32_out(dx, nx_, st_.c);
    ref::conv_backward_data(s_, st_.be.as_f32(dy, ny_, st_.a), weights(w), out);
    st_.be.store(out, dx, nx_);
  }
  void backward_weights(const Act* x, const Act* dy, float* dw) override {
    ref::conv_backward_weights(s_, st_.be.as_f32(x, nx_, st_.a), st_.be.as_f32(dy, ny_, st_.b),
                               dw);
  }

 private:
  // A bf16 convolution multiplies bf16 weights (the fp32 master weights rounded, as every
  // bf16 backend's kernels take them); fp32 uses them as they are.
  const float* weights(const float* w) {
    if (st_.be.dtype() == DType::f32) return w;
    return HostBackend::rounded_to_bf16(w, size_t(s_.k) * s_.c * s_.r * s_.s, st_.e);
  }

  ConvShape s_;
  Staging st_;
  size_t nx_, ny_;
};

class RefBatchNorm final : public BatchNormOp {
 public:
  RefBatchNorm(HostBackend& be, int n, int c, int h, int w, bool relu, float momentum, float eps)
      : m_(n * h * w),
        c_(c),
        relu_(relu),
        momentum_(momentum),
        eps_(eps),
        count_(size_t(n) * c * h * w),
        mean_(c),
        var_(c),
        st_(be) {}
  void forward(const Act* x, const float* gamma, const float* beta, float* rm, float* rv, Act* y,
               bool training) override {
    const float* xf = st_.be.as_f32(x, count_, st_.a);
    float* out = st_.be.f32_out(y, count_, st_.c);
    if (!training) {
      ref::bn_forward_eval(m_, c_, xf, gamma, beta, rm, rv, out, eps_, relu_);
    } else {
      ref::bn_forward_train(m_, c_, xf, gamma, beta, out, mean_.data(), var_.data(), eps_, relu_);
      update_running_stats(m_, c_, momentum_, mean_.data(), var_.data(), rm, rv);
    }
    st_.be.store(out, y, count_);
  }
  void backward(const Act* x, const Act* y, const Act* dy, const float* gamma, Act* dx,
                float* dgamma, float* dbeta) override {
    float* out = st_.be.f32_out(dx, count_, st_.d);
    ref::bn_backward(m_, c_, st_.be.as_f32(x, count_, st_.a), st_.be.as_f32(y, count_, st_.b),
                     st_.be.as_f32(dy, count_, st_.c), gamma, mean_.data(), var_.data(), out,
                     dgamma, dbeta, eps_, relu_);
    st_.be.store(out, dx, count_);
  }

 private:
  int m_, c_;
  bool relu_;
  float momentum_, eps_;
  size_t count_;
  std::vector<float> mean_, var_;
  Staging st_;
};

class RefMaxPool final : public MaxPoolOp {
 public:
  RefMaxPool(HostBackend& be, const PoolShape& s)
      : s_(s),
        st_(be),
        nx_(size_t(s.n) * s.c * s.h * s.w),
        ny_(size_t(s.n) * s.c * s.oh() * s.ow()) {}
  void forward(const Act* x, Act* y, bool) override {
    float* out = st_.be.f32_out(y, ny_, st_.c);
    ref::maxpool_forward(s_, st_.be.as_f32(x, nx_, st_.a), out);
    st_.be.store(out, y, ny_);
  }
  void backward(const Act* x, const Act* dy, Act* dx) override {
    float* out = st_.be.f32_out(dx, nx_, st_.c);
    ref::maxpool_backward(s_, st_.be.as_f32(x, nx_, st_.a), st_.be.as_f32(dy, ny_, st_.b), out);
    st_.be.store(out, dx, nx_);
  }

 private:
  PoolShape s_;
  Staging st_;
  size_t nx_, ny_;
};

class RefLinear final : public LinearOp {
 public:
  RefLinear(HostBackend& be, int n, int in, int out) : n_(n), in_(in), out_(out), st_(be) {}
  void forward(const Act* x, const float* w, const float* b, Act* y) override {
    const size_t ny = size_t(n_) * out_;
    float* o = st_.be.f32_out(y, ny, st_.c);
    ref::linear_forward(n_, in_, out_, st_.be.as_f32(x, size_t(n_) * in_, st_.a), w, b, o);
    st_.be.store(o, y, ny);
  }
  void backward(const Act* x, const Act* dy, const float* w, Act* dx, float* dw,
                float* db) override {
    const size_t nx = size_t(n_) * in_;
    float* o = dx ? st_.be.f32_out(dx, nx, st_.c) : nullptr;
    ref::linear_backward(n_, in_, out_, st_.be.as_f32(x, nx, st_.a),
                         st_.be.as_f32(dy, size_t(n_) * out_, st_.b), w, o, dw, db);
    if (dx) st_.be.store(o, dx, nx);
  }

 private:
  int n_, in_, out_;
  Staging st_;
};

class RefBackend final : public HostBackend {
 public:
  explicit RefBackend(DType dtype) : HostBackend(dtype) {}
  std::string name() const override { return "ref"; }
  std::unique_ptr<ConvOp> conv2d(const ConvShape& s) override {
    return std::make_unique<RefConv>(*this, s);
  }
  std::unique_ptr<BatchNormOp> batchnorm(int n, int c, int h, int w, bool relu, float momentum,
                                         float eps) override {
    return std::make_unique<RefBatchNorm>(*this, n, c, h, w, relu, momentum, eps);
  }
  std::unique_ptr<MaxPoolOp> maxpool(const PoolShape& s) override {
    return std::make_unique<RefMaxPool>(*this, s);
  }
  std::unique_ptr<LinearOp> linear(int n, int in, int out) override {
    return std::make_unique<RefLinear>(*this, n, in, out);
  }
  void relu_forward(const Act* x, Act* y, size_t count) override {
    float* out = f32_out(y, count, c_);
    ref::relu_forward(as_f32(x, count, a_), out, count);
    store(out, y, count);
  }
  void relu_backward(const Act* y, const Act* dy, Act* dx, size_t count) override {
    float* out = f32_out(dx, count, c_);
    ref::relu_backward(as_f32(y, count, a_), as_f32(dy, count, b_), out, count);
    store(out, dx, count);
  }
  void add(const Act* a, const Act* b, Act* y, size_t count) override {
    float* out = f32_out(y, count, c_);
    const float* af = as_f32(a, count, a_);
    const float* bf = as_f32(b, count, b_);
    for (size_t i = 0; i < count; ++i) out[i] = af[i] + bf[i];
    store(out, y, count);
  }
  void avgpool_forward(const Act* x, Act* y, int n, int c, int hw) override {
    float* out = f32_out(y, size_t(n) * c, c_);
    ref::avgpool_forward(as_f32(x, size_t(n) * c * hw, a_), out, n, c, hw);
    store(out, y, size_t(n) * c);
  }
  void avgpool_backward(const Act* dy, Act* dx, int n, int c, int hw) override {
    float* out = f32_out(dx, size_t(n) * c * hw, c_);
    ref::avgpool_backward(as_f32(dy, size_t(n) * c, a_), out, n, c, hw);
    store(out, dx, size_t(n) * c * hw);
  }

 private:
  std::vector<float> a_, b_, c_;  // staging of the elementwise ops
};

}  // namespace

std::unique_ptr<Backend> make_ref_backend(DType dtype) {
  return std::make_unique<RefBackend>(dtype);
}

// The ref backend emulates bf16 (rounding every activation) on any CPU: never native.
bool ref_backend_supports(DType dtype, bool native, std::string* why) {
  if (dtype == DType::f32 || !native) return true;
  if (why) *why = "the ref backend only emulates bf16";
  return false;
}

}  // namespace sieve::nn
