// Layers: explicit forward/backward pairs on top of a Backend's ops.
//
// Every layer's public forward/backward are non-virtual: they check shapes (and that backward
// follows a training forward), then call the virtual *_impl that does the work. A layer owns
// its output and its input-gradient buffers (re-sized only when the batch size changes) and
// keeps a pointer to its input from forward to backward, so the caller must keep the input
// alive until backward (true for the models here: every input is a previous layer's output).
//
// Activations (and their gradients) are `Act` buffers of the backend's dtype on its device;
// layers never look inside them.
//
// Parameters live in the model's flat buffers: a layer registers its parameters through a
// ParamSink at construction (getting offsets) and receives the base pointers once the buffers
// exist (bind). Parameter gradients accumulate (+=), activation gradients overwrite.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/backend.hpp"
#include "nn/model.hpp"
#include "nn/tensor.hpp"

namespace sieve::nn {

// Activation shape; data is NHWC in memory (see backend.hpp). Tabular data: h = w = 1.
struct Shape4 {
  int n = 0, c = 0, h = 1, w = 1;
  size_t size() const { return size_t(n) * c * h * w; }
  bool operator==(const Shape4&) const = default;
};

// Where layers register parameters and non-trainable buffers (implemented by Model classes).
class ParamSink {
 public:
  virtual ~ParamSink() = default;
  virtual size_t add(const std::string& name, std::vector<int64_t> shape, bool is_bn_or_bias) = 0;
};

class Layer {
 public:
  virtual ~Layer() = default;
  // x: [in.n, in.c, in.h, in.w] NHWC. Returns the output (owned by the layer).
  const Act* forward(const Act* x, const Shape4& in, bool training);
  // dy: gradient of the output of the last training forward. Returns dx (owned by the layer),
  // or nullptr if the layer was built with need_dx = false (a network's first layer).
  const Act* backward(const Act* dy);

  Shape4 in_shape() const { return in_; }
  Shape4 out_shape() const { return out_; }
  virtual Shape4 output_shape(const Shape4& in) const = 0;
  // This layer's parameter slices (offset, count) in the flat buffers, in registration
  // order (ascending offsets); alignment padding between them is not included.
  const std::vector<std::pair<size_t, size_t>>& param_ranges() const { return pranges_; }
  void bind(float* params, float* grads) { params_ = params, grads_ = grads; }
  void set_need_dx(bool v) { need_dx_ = v; }

 protected:
  Layer(Backend& be, int channels)
      : be_(be), channels_(channels), y_(be, be.dtype()), dx_(be, be.dtype()) {}
  virtual void forward_impl(const Act* x, bool training) = 0;
  virtual void backward_impl(const Act* dy) = 0;
  // Called when the input shape changes (e.g. a new batch size): recreate ops for in_.
  virtual void reshape() {}
  size_t reg(ParamSink& sink, const std::string& name, std::vector<int64_t> shape, bool bnb);
  float* p(size_t off) { return params_ + off; }
  float* g(size_t off) { return grads_ + off; }

  Backend& be_;
  int channels_;  // expected input channels (-1: any), or c*h*w when flat_ (Linear)
  bool flat_ = false;
  Shape4 in_, out_;
  const Act* x_ = nullptr;
  Tensor y_, dx_;
  bool need_dx_ = true, trained_ = false;
  float* params_ = nullptr;
  float* grads_ = nullptr;
  std::vector<std::pair<size_t, size_t>> pranges_;
};

// 2-D convolution without bias (every ResNet conv is followed by BN). Weight OIHW.
class Conv2d final : public Layer {
 public:
  Conv2d(Backend& be, ParamSink& sink, const std::string& name, int cin, int cout, int kernel,
         int stride, int pad);
  Shape4 output_shape(const Shape4& in) const override;
  int cin, cout, kernel, stride, pad;

 private:
  void forward_impl(const Act* x, bool training) override;
  void backward_impl(const Act* dy) override;
  void reshape() override;
  size_t w_;
  std::unique_ptr<ConvOp> op_;
};

// BatchNorm2d (eps 1e-5, momentum 0.1, as PyTorch), optionally fused with the following ReLU.
class BatchNorm2d final : public Layer {
 public:
  BatchNorm2d(Backend& be, ParamSink& sink, const std::string& name, int c, bool fuse_relu);
  Shape4 output_shape(const Shape4& in) const override { return in; }
  // running_mean [c], running_var [c], num_batches_tracked [1] (appended to out).
  void buffers(std::vector<BufferInfo>& out);

 private:
  void forward_impl(const Act* x, bool training) override;
  void backward_impl(const Act* dy) override;
  void reshape() override;
  std::string name_;
  bool relu_;
  size_t gamma_, beta_;
  Tensor run_mean_, run_var_, tracked_;  // fp32 on the backend's device
  std::unique_ptr<Tensor> one_;           // a device 1.0f: tracked_ += 1 by axpy
  std::unique_ptr<BatchNormOp> op_;
};

class ReLU final : public Layer {
 public:
  explicit ReLU(Backend& be) : Layer(be, -1) {}
  Shape4 output_shape(const Shape4& in) const override { return in; }

 private:
  void forward_impl(const Act* x, bool training) override;
  void backward_impl(const Act* dy) override;
};

class MaxPool2d final : public Layer {
 public:
  MaxPool2d(Backend& be, int kernel, int stride, int pad)
      : Layer(be, -1), kernel_(kernel), stride_(stride), pad_(pad) {}
  Shape4 output_shape(const Shape4& in) const override;

 private:
  void forward_impl(const Act* x, bool training) override;
  void backward_impl(const Act* dy) override;
  void reshape() override;
  int kernel_, stride_, pad_;
  std::unique_ptr<MaxPoolOp> op_;
};

// Global average pooling: [n, c, h, w] -> [n, c, 1, 1].
class GlobalAvgPool final : public Layer {
 public:
  explicit GlobalAvgPool(Backend& be) : Layer(be, -1) {}
  Shape4 output_shape(const Shape4& in) const override { return {in.n, in.c, 1, 1}; }

 private:
  void forward_impl(const Act* x, bool training) override;
  void backward_impl(const Act* dy) override;
};

// Fully connected: input [n, in] (any [n, c, h, w] with c*h*w == in, flattened in memory
// order), output [n, out, 1, 1]. Weight [out, in], bias [out].
class Linear final : public Layer {
 public:
  Linear(Backend& be, ParamSink& sink, const std::string& name, int in, int out);
  Shape4 output_shape(const Shape4& in) const override { return {in.n, out_f_, 1, 1}; }

 private:
  void forward_impl(const Act* x, bool training) override;
  void backward_impl(const Act* dy) override;
  void reshape() override;
  int in_f_, out_f_;
  size_t w_, b_;
  std::unique_ptr<LinearOp> op_;
};

}  // namespace sieve::nn
