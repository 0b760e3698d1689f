#include "nn/layers.hpp"

#include "util/error.hpp"

namespace sieve::nn {

const Act* Layer::forward(const Act* x, const Shape4& in, bool training) {
  SIEVE_ASSERT(x != nullptr && in.n > 0, "layer forward needs a non-empty input");
  if (channels_ >= 0) {
    long got = flat_ ? long(in.c) * in.h * in.w : in.c;
    SIEVE_ASSERT(got == channels_, "layer input has ", got, " channels/features, expected ",
                 channels_);
  }
  if (!(in == in_)) {
    in_ = in;
    out_ = output_shape(in);
    SIEVE_ASSERT(out_.h > 0 && out_.w > 0, "input ", in.h, "x", in.w, " too small for layer");
    y_.resize({out_.n, out_.c, out_.h, out_.w});
    if (need_dx_) dx_.resize({in.n, in.c, in.h, in.w});
    reshape();
  }
  x_ = x;
  trained_ = training;
  forward_impl(x, training);
  return y_.raw();
}

const Act* Layer::backward(const Act* dy) {
  SIEVE_ASSERT(trained_ && x_ != nullptr, "layer backward needs a training forward first");
  SIEVE_ASSERT(dy != nullptr);
  if (need_dx_ && dx_.size() != in_.size()) dx_.resize({in_.n, in_.c, in_.h, in_.w});
  backward_impl(dy);
  return need_dx_ ? dx_.raw() : nullptr;
}

size_t Layer::reg(ParamSink& sink, const std::string& name, std::vector<int64_t> shape, bool bnb) {
  size_t n = numel(shape);
  size_t off = sink.add(name, std::move(shape), bnb);
  pranges_.push_back({off, n});
  return off;
}

// ---- Conv2d ----
Conv2d::Conv2d(Backend& be, ParamSink& sink, const std::string& name, int cin_, int cout_,
               int kernel_, int stride_, int pad_)
    : Layer(be, cin_), cin(cin_), cout(cout_), kernel(kernel_), stride(stride_), pad(pad_) {
  w_ = reg(sink, name + ".weight", {cout, cin, kernel, kernel}, false);
}
Shape4 Conv2d::output_shape(const Shape4& in) const {
  return {in.n, cout, (in.h + 2 * pad - kernel) / stride + 1,
          (in.w + 2 * pad - kernel) / stride + 1};
}
void Conv2d::reshape() {
  op_ = be_.conv2d({in_.n, in_.c, in_.h, in_.w, cout, kernel, kernel, stride, pad});
}
void Conv2d::forward_impl(const Act* x, bool) {
  op_->forward(x, p(w_), y_.raw());
}
void Conv2d::backward_impl(const Act* dy) {
  op_->backward_weights(x_, dy, g(w_));
  if (need_dx_) op_->backward_data(dy, p(w_), dx_.raw());
}

// ---- BatchNorm2d ----
BatchNorm2d::BatchNorm2d(Backend& be, ParamSink& sink, const std::string& name, int c,
                         bool fuse_relu)
    : Layer(be, c),
      name_(name),
      relu_(fuse_relu),
      run_mean_(be, DType::f32),
      run_var_(be, DType::f32),
      tracked_(be, DType::f32) {
  gamma_ = reg(sink, name + ".weight", {c}, true);
  beta_ = reg(sink, name + ".bias", {c}, true);
  run_mean_.resize({c});
  run_var_.resize({c});
  tracked_.resize({1});
  const std::vector<float> zeros(c, 0.f), ones(c, 1.f);
  be.to_device(run_mean_.raw(), zeros.data(), c * sizeof(float));
  be.to_device(run_var_.raw(), ones.data(), c * sizeof(float));
  tracked_.zero();
}
void BatchNorm2d::reshape() {
  op_ = be_.batchnorm(in_.n, in_.c, in_.h, in_.w, relu_, 0.1f, 1e-5f);
}
void BatchNorm2d::forward_impl(const Act* x, bool training) {
  SIEVE_CHECK(!training || size_t(in_.n) * in_.h * in_.w > 1, "BatchNorm2d '", name_,
              "': training needs more than 1 value per channel");
  op_->forward(x, p(gamma_), p(beta_), run_mean_.data(), run_var_.data(), y_.raw(), training);
  if (training) {  // a counter in a float on the device: one tiny axpy from a device 1
    if (!one_) {
      one_ = std::make_unique<Tensor>(be_, DType::f32);
      one_->resize({1});
      const float v = 1.f;
      be_.to_device(one_->raw(), &v, sizeof v);
    }
    be_.axpy(1.f, one_->data(), tracked_.data(), 1);
  }
}
void BatchNorm2d::backward_impl(const Act* dy) {
  op_->backward(x_, y_.raw(), dy, p(gamma_), dx_.raw(), g(gamma_), g(beta_));
}
void BatchNorm2d::buffers(std::vector<BufferInfo>& out) {
  int64_t c = channels_;
  out.push_back({name_ + ".running_mean", run_mean_.data(), run_mean_.size(), {c}});
  out.push_back({name_ + ".running_var", run_var_.data(), run_var_.size(), {c}});
  out.push_back({name_ + ".num_batches_tracked", tracked_.data(), 1, {}});
}

// ---- ReLU ----
void ReLU::forward_impl(const Act* x, bool) {
  be_.relu_forward(x, y_.raw(), in_.size());
}
void ReLU::backward_impl(const Act* dy) {
  be_.relu_backward(y_.raw(), dy, dx_.raw(), in_.size());
}

// ---- MaxPool2d ----
Shape4 MaxPool2d::output_shape(const Shape4& in) const {
  return {in.n, in.c, (in.h + 2 * pad_ - kernel_) / stride_ + 1,
          (in.w + 2 * pad_ - kernel_) / stride_ + 1};
}
void MaxPool2d::reshape() {
  op_ = be_.maxpool({in_.n, in_.c, in_.h, in_.w, kernel_, stride_, pad_});
}
void MaxPool2d::forward_impl(const Act* x, bool training) {
  op_->forward(x, y_.raw(), training);
}
void MaxPool2d::backward_impl(const Act* dy) {
  op_->backward(x_, dy, dx_.raw());
}

// ---- GlobalAvgPool ----
void GlobalAvgPool::forward_impl(const Act* x, bool) {
  be_.avgpool_forward(x, y_.raw(), in_.n, in_.c, in_.h * in_.w);
}
void GlobalAvgPool::backward_impl(const Act* dy) {
  be_.avgpool_backward(dy, dx_.raw(), in_.n, in_.c, in_.h * in_.w);
}

// ---- Linear ----
Linear::Linear(Backend& be, ParamSink& sink, const std::string& name, int in, int out)
    : Layer(be, in), in_f_(in), out_f_(out) {
  flat_ = true;
  w_ = reg(sink, name + ".weight", {out, in}, false);
  b_ = reg(sink, name + ".bias", {out}, true);
}
void Linear::reshape() {
  op_ = be_.linear(in_.n, in_f_, out_f_);
}
void Linear::forward_impl(const Act* x, bool) {
  op_->forward(x, p(w_), p(b_), y_.raw());
}
void Linear::backward_impl(const Act* dy) {
  op_->backward(x_, dy, p(w_), need_dx_ ? dx_.raw() : nullptr, g(w_), g(b_));
}

}  // namespace sieve::nn
