// ResNet-18/34 (BasicBlock) and ResNet-50/101/152 (Bottleneck, stride on the 3x3 conv as
// torchvision "v1.5"), CIFAR or ImageNet stem, width multiplier, any input size. Parameter
// names and order match torchvision's state_dict.
//
// Data flow: the host NCHW fp32 input is transposed once to NHWC activations of the
// backend's dtype (Backend::load_input); every layer then stays NHWC. BN is
// fused with the ReLU that follows it, except the last BN of each block (ReLU after the add).
#include <cmath>
#include <memory>

#include "nn/layers.hpp"
#include "nn/models_impl.hpp"
#include "util/error.hpp"

namespace sieve::nn {
namespace {

using Hook = std::function<void(const Layer&)>;

// A residual block: main path of (conv, bn) pairs, optional 1x1 conv + BN shortcut,
// out = relu(main(x) + shortcut(x)).
class Block {
 public:
  Block(Backend& be, ParamSink& sink, const std::string& name, int cin, int planes, int stride,
        bool bottleneck)
      : be_(be), name_(name), relu_(be), sum_(be, be.dtype()), dx_(be, be.dtype()) {
    int expansion = bottleneck ? 4 : 1, cout = planes * expansion;
    struct Step {
      int cin, cout, k, stride;
    };
    std::vector<Step> steps;
    if (bottleneck)
      steps = {{cin, planes, 1, 1}, {planes, planes, 3, stride}, {planes, cout, 1, 1}};
    else
      steps = {{cin, planes, 3, stride}, {planes, planes, 3, 1}};
    for (size_t i = 0; i < steps.size(); ++i) {
      const Step& s = steps[i];
      std::string idx = std::to_string(i + 1);
      convs_.push_back(std::make_unique<Conv2d>(be, sink, name + ".conv" + idx, s.cin, s.cout, s.k,
                                                s.stride, s.k / 2));
      bns_.push_back(std::make_unique<BatchNorm2d>(be, sink, name + ".bn" + idx, s.cout,
                                                   i + 1 < steps.size()));
    }
    if (stride != 1 || cin != cout) {
      ds_conv_ =
          std::make_unique<Conv2d>(be, sink, name + ".downsample.0", cin, cout, 1, stride, 0);
      ds_bn_ = std::make_unique<BatchNorm2d>(be, sink, name + ".downsample.1", cout, false);
    }
  }

  std::vector<Layer*> layers() {
    std::vector<Layer*> out;
    for (size_t i = 0; i < convs_.size(); ++i)
      out.push_back(convs_[i].get()), out.push_back(bns_[i].get());
    if (ds_conv_) out.push_back(ds_conv_.get()), out.push_back(ds_bn_.get());
    return out;
  }
  void buffers(std::vector<BufferInfo>& out) {
    for (auto& b : bns_) b->buffers(out);
    if (ds_bn_) ds_bn_->buffers(out);
  }

  const Act* forward(const Act* x, const Shape4& in, bool training) {
    const Act* a = x;
    Shape4 s = in;
    for (size_t i = 0; i < convs_.size(); ++i) {
      a = convs_[i]->forward(a, s, training);
      a = bns_[i]->forward(a, convs_[i]->out_shape(), training);
      s = bns_[i]->out_shape();
    }
    const Act* shortcut = x;
    if (ds_conv_) {
      shortcut = ds_conv_->forward(x, in, training);
      shortcut = ds_bn_->forward(shortcut, ds_conv_->out_shape(), training);
    }
    out_ = s;
    in_ = in;
    sum_.resize({s.n, s.c, s.h, s.w});
    be_.add(a, shortcut, sum_.raw(), s.size());
    return relu_.forward(sum_.raw(), s, training);
  }
  Shape4 out_shape() const { return out_; }
  const char* name() const { return name_.c_str(); }

  // Returns dx; reports each layer whose gradients are final, shortcut first (its parameters
  // come last in the flat buffer).
  const Act* backward(const Act* dy, const Hook& ready) {
    const Act* dsum = relu_.backward(dy);
    const Act* dshort = dsum;
    if (ds_conv_) {
      dshort = ds_conv_->backward(ds_bn_->backward(dsum));
      ready(*ds_bn_), ready(*ds_conv_);
    }
    const Act* d = dsum;
    for (size_t i = convs_.size(); i-- > 0;) {
      d = bns_[i]->backward(d);
      ready(*bns_[i]);
      d = convs_[i]->backward(d);
      ready(*convs_[i]);
    }
    dx_.resize({in_.n, in_.c, in_.h, in_.w});
    be_.add(d, dshort, dx_.raw(), in_.size());
    return dx_.raw();
  }

 private:
  Backend& be_;
  std::string name_;  // "layer1.0": the unit of the step timeline
  std::vector<std::unique_ptr<Conv2d>> convs_;
  std::vector<std::unique_ptr<BatchNorm2d>> bns_;
  std::unique_ptr<Conv2d> ds_conv_;
  std::unique_ptr<BatchNorm2d> ds_bn_;
  ReLU relu_;
  Tensor sum_, dx_;
  Shape4 in_, out_;
};

class ResNet final : public Model, public ParamSink {
 public:
  explicit ResNet(const ModelSpec& s) : Model(s) {
    std::vector<int> depth;
    bool bottleneck = false;
    if (s.arch == "resnet18")
      depth = {2, 2, 2, 2};
    else if (s.arch == "resnet34")
      depth = {3, 4, 6, 3};
    else if (s.arch == "resnet50")
      depth = {3, 4, 6, 3}, bottleneck = true;
    else if (s.arch == "resnet101")
      depth = {3, 4, 23, 3}, bottleneck = true;
    else if (s.arch == "resnet152")
      depth = {3, 8, 36, 3}, bottleneck = true;
    else
      throw UsageError(cat("model arch '", s.arch,
                           "': expected resnet18, resnet34, resnet50, resnet101 or resnet152"));
    if (s.stem != "cifar" && s.stem != "imagenet")
      throw UsageError(cat("model stem '", s.stem, "': expected cifar or imagenet"));
    if (s.in_features > 0 || s.in_channels < 1 || s.in_height < 1 || s.in_width < 1)
      throw UsageError(
          cat("model input: resnet needs an image input (in_channels, in_height, "
              "in_width >= 1, in_features 0)"));
    Backend& be = nn::backend(s.backend, s.dtype);
    input_ = Tensor(be, be.dtype());
    auto w = [&](int base) { return std::max(1, int(std::lround(base * s.width))); };
    int c = w(64);
    if (s.stem == "cifar") {
      conv1_ = std::make_unique<Conv2d>(be, *this, "conv1", s.in_channels, c, 3, 1, 1);
    } else {
      conv1_ = std::make_unique<Conv2d>(be, *this, "conv1", s.in_channels, c, 7, 2, 3);
      pool_ = std::make_unique<MaxPool2d>(be, 3, 2, 1);
    }
    conv1_->set_need_dx(false);
    bn1_ = std::make_unique<BatchNorm2d>(be, *this, "bn1", c, true);
    int planes[4] = {w(64), w(128), w(256), w(512)};
    for (int l = 0; l < 4; ++l)
      for (int b = 0; b < depth[l]; ++b) {
        int stride = (l > 0 && b == 0) ? 2 : 1;
        blocks_.push_back(std::make_unique<Block>(be, *this, cat("layer", l + 1, ".", b), c,
                                                  planes[l], stride, bottleneck));
        c = planes[l] * (bottleneck ? 4 : 1);
      }
    avgpool_ = std::make_unique<GlobalAvgPool>(be);
    feature_dim_ = c;
    fc_ = std::make_unique<Linear>(be, *this, "fc", c, s.num_classes);
    finalize_params(be);
    for (Layer* l : all_layers()) l->bind(params(), grads());
  }

  std::vector<BufferInfo> buffers() override {
    std::vector<BufferInfo> out;
    bn1_->buffers(out);
    for (auto& b : blocks_) b->buffers(out);
    return out;
  }
  const Act* features_act() const override { return features_; }
  int feature_dim() const override { return feature_dim_; }

 private:
  size_t add(const std::string& name, std::vector<int64_t> shape, bool bnb) override {
    return add_param(name, std::move(shape), bnb);
  }
  std::vector<Layer*> all_layers() {
    std::vector<Layer*> out{conv1_.get(), bn1_.get(), avgpool_.get(), fc_.get()};
    if (pool_) out.push_back(pool_.get());
    for (auto& b : blocks_)
      for (Layer* l : b->layers()) out.push_back(l);
    return out;
  }

  const Act* forward_impl(const float* x, int n, bool training) override {
    const int C = spec_.in_channels, H = spec_.in_height, W = spec_.in_width;
    input_.resize({n, C, H, W});
    backend_->load_input(x, input_.raw(), n, C, H, W);  // host NCHW fp32 -> NHWC activations
    const Act* a;
    {
      UnitScope unit(*this, "conv1", false);
      a = conv1_->forward(input_.raw(), {n, C, H, W}, training);
    }
    {
      UnitScope unit(*this, "bn1", false);
      a = bn1_->forward(a, conv1_->out_shape(), training);
    }
    Shape4 s = bn1_->out_shape();
    if (pool_) {
      UnitScope unit(*this, "maxpool", false);
      a = pool_->forward(a, s, training), s = pool_->out_shape();
    }
    for (auto& b : blocks_) {
      UnitScope unit(*this, b->name(), false);
      a = b->forward(a, s, training), s = b->out_shape();
    }
    {
      UnitScope unit(*this, "avgpool", false);
      features_ = avgpool_->forward(a, s, training);
    }
    UnitScope unit(*this, "fc", false);
    return fc_->forward(features_, avgpool_->out_shape(), training);
  }

  void backward_impl(const Act* dlogits) override {
    Hook ready = [this](const Layer& l) { grad_ready(l.param_ranges()); };
    const Act* d;
    {
      UnitScope unit(*this, "fc", true);
      d = fc_->backward(dlogits);
      ready(*fc_);
    }
    {
      UnitScope unit(*this, "avgpool", true);
      d = avgpool_->backward(d);
    }
    for (size_t i = blocks_.size(); i-- > 0;) {
      UnitScope unit(*this, blocks_[i]->name(), true);
      d = blocks_[i]->backward(d, ready);
    }
    if (pool_) {
      UnitScope unit(*this, "maxpool", true);
      d = pool_->backward(d);
    }
    {
      UnitScope unit(*this, "bn1", true);
      d = bn1_->backward(d);
      ready(*bn1_);
    }
    UnitScope unit(*this, "conv1", true);
    conv1_->backward(d);
    ready(*conv1_);
  }

  std::unique_ptr<Conv2d> conv1_;
  std::unique_ptr<BatchNorm2d> bn1_;
  std::unique_ptr<MaxPool2d> pool_;
  std::vector<std::unique_ptr<Block>> blocks_;
  std::unique_ptr<GlobalAvgPool> avgpool_;
  std::unique_ptr<Linear> fc_;
  Tensor input_;
  const Act* features_ = nullptr;
  int feature_dim_ = 0;
};

}  // namespace

std::unique_ptr<Model> make_resnet(const ModelSpec& spec) {
  return std::make_unique<ResNet>(spec);
}

}  // namespace sieve::nn
