// The MLP of the batch-size studies: fc1 -> ReLU -> ... -> fcK (K = hidden layers + 1).
// Inputs are flattened in memory order ([n, F] tabular, or [n, C, H, W] images).
#include <memory>

#include "nn/layers.hpp"
#include "nn/models_impl.hpp"
#include "util/error.hpp"

namespace sieve::nn {
namespace {

class Mlp final : public Model, public ParamSink {
 public:
  explicit Mlp(const ModelSpec& s) : Model(s) {
    Backend& be = nn::backend(s.backend, s.dtype);
    input_ = Tensor(be, be.dtype());
    int in = int(input_size());
    if (in < 1) throw UsageError(cat("model input size: expected >= 1 features, got ", in));
    int i = 1;
    for (int h : s.mlp_hidden) {
      if (h < 1) throw UsageError(cat("model mlp_hidden: expected widths >= 1, got ", h));
      units_.push_back(cat("fc", i));
      fcs_.push_back(std::make_unique<Linear>(be, *this, cat("fc", i++), in, h));
      relus_.push_back(std::make_unique<ReLU>(be));
      in = h;
    }
    units_.push_back(cat("fc", i));
    fcs_.push_back(std::make_unique<Linear>(be, *this, cat("fc", i), in, s.num_classes));
    fcs_.front()->set_need_dx(false);
    feature_dim_ = in;
    finalize_params(be);
    for (auto& l : fcs_) l->bind(params(), grads());
  }

  std::vector<BufferInfo> buffers() override { return {}; }
  const Act* features_act() const override { return features_; }
  int feature_dim() const override { return feature_dim_; }

 private:
  size_t add(const std::string& name, std::vector<int64_t> shape, bool bnb) override {
    return add_param(name, std::move(shape), bnb);
  }

  const Act* forward_impl(const float* x, int n, bool training) override {
    Shape4 shape{n, int(input_size()), 1, 1};
    input_.resize({n, shape.c});
    backend_->load_input(x, input_.raw(), n, shape.c, 1, 1);
    const Act* a = input_.raw();
    for (size_t i = 0; i < fcs_.size(); ++i) {
      UnitScope unit(*this, units_[i].c_str(), false);
      a = fcs_[i]->forward(a, shape, training);
      shape = fcs_[i]->out_shape();
      if (i < relus_.size()) a = features_ = relus_[i]->forward(a, shape, training);
    }
    if (relus_.empty()) features_ = input_.raw();  // no hidden layer: the input is the feature
    return a;
  }

  void backward_impl(const Act* dlogits) override {
    const Act* d = dlogits;
    for (size_t i = fcs_.size(); i-- > 0;) {
      UnitScope unit(*this, units_[i].c_str(), true);
      if (i < relus_.size()) d = relus_[i]->backward(d);
      d = fcs_[i]->backward(d);
      grad_ready(fcs_[i]->param_ranges());
    }
  }

  std::vector<std::unique_ptr<Linear>> fcs_;
  std::vector<std::unique_ptr<ReLU>> relus_;
  std::vector<std::string> units_;  // "fc1", ...: the units of the step timeline
  Tensor input_;
  const Act* features_ = nullptr;
  int feature_dim_ = 0;
};

}  // namespace

std::unique_ptr<Model> make_mlp(const ModelSpec& spec) {
  return std::make_unique<Mlp>(spec);
}

}  // namespace sieve::nn
