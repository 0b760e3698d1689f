// Model base class, parameter initialisation and the softmax cross-entropy loss.
#include "nn/model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>

#include "config/config.hpp"
#include "nn/backend.hpp"
#include "nn/models_impl.hpp"
#include "util/error.hpp"

namespace sieve::nn {

size_t Model::input_size() const {
  if (spec_.in_features > 0) return size_t(spec_.in_features);
  return size_t(spec_.in_channels) * spec_.in_height * spec_.in_width;
}

const float* Model::forward(const float* x, int n, bool training) {
  SIEVE_ASSERT(x != nullptr && n > 0, "Model::forward needs a non-empty batch, got n=", n);
  last_n_ = n;
  last_training_ = training;
  const void* logits = forward_impl(x, n, training);
  logits_host_.resize(size_t(n) * spec_.num_classes);
  backend_->act_to_host(logits, logits_host_.data(), logits_host_.size());
  return logits_host_.data();
}

const float* Model::features() {
  SIEVE_ASSERT(last_n_ > 0, "Model::features needs a forward first");
  features_host_.resize(size_t(last_n_) * feature_dim());
  backend_->act_to_host(features_act(), features_host_.data(), features_host_.size());
  return features_host_.data();
}

void Model::backward(const float* dlogits) {
  SIEVE_ASSERT(dlogits != nullptr);
  SIEVE_ASSERT(last_training_, "Model::backward needs a forward with training=true first");
  dlogits_.resize({last_n_, spec_.num_classes});
  backend_->act_from_host(dlogits, dlogits_.raw(), dlogits_.size());
  backward_impl(dlogits_.raw());
}

void Model::zero_grad() {
  grads_.zero();
}

std::vector<float> Model::params_to_host() const {
  std::vector<float> out(num_params());
  backend_->to_host(out.data(), params_.raw(), params_.bytes());
  return out;
}
std::vector<float> Model::grads_to_host() const {
  std::vector<float> out(num_params());
  backend_->to_host(out.data(), grads_.raw(), grads_.bytes());
  return out;
}
void Model::params_from_host(const float* host) {
  backend_->to_device(params_.raw(), host, params_.bytes());
}
void Model::buffer_to_host(const BufferInfo& b, float* host) const {
  backend_->to_host(host, b.data, b.size * sizeof(float));
}
void Model::buffer_from_host(const BufferInfo& b, const float* host) {
  backend_->to_device(b.data, host, b.size * sizeof(float));
}

size_t Model::add_param(const std::string& name, std::vector<int64_t> shape, bool bnb) {
  SIEVE_ASSERT(backend_ == nullptr, "add_param after finalize_params");
  ParamInfo p;
  p.name = name;
  p.offset = next_offset_;
  p.size = 1;
  for (int64_t d : shape) p.size *= size_t(d);
  p.shape = std::move(shape);
  p.is_bn_or_bias = bnb;
  next_offset_ += (p.size + 15) / 16 * 16;  // 64-byte aligned slices
  info_.push_back(std::move(p));
  return info_.back().offset;
}

void Model::finalize_params(Backend& be) {
  backend_ = &be;
  params_ = Tensor(be, DType::f32);
  grads_ = Tensor(be, DType::f32);
  dlogits_ = Tensor(be, be.dtype());
  params_.resize({int64_t(next_offset_)});
  grads_.resize({int64_t(next_offset_)});
  params_.zero();
  grads_.zero();
}

// ---- init ----
namespace {
// splitmix64: a tiny, portable generator, so initial weights do not depend on the C++
// library's distributions.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
  double normal() {
    double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(6.283185307179586 * u2);
  }
};
}  // namespace

namespace {
// The weight of the last BN of each residual block ("layer2.1.bn2.weight" in a basic block,
// "layer2.1.bn3.weight" in a bottleneck; the downsample's BN is not on the residual branch).
void zero_last_bn_of_blocks(const Model& model, float* params) {
  std::map<std::string, std::pair<int, const ParamInfo*>> last;  // block -> (bn index, weight)
  for (const ParamInfo& p : model.param_info()) {
    if (!p.name.starts_with("layer") || !p.name.ends_with(".weight")) continue;
    const size_t dot = p.name.rfind('.', p.name.size() - 8);  // before "bnK.weight"
    if (dot == std::string::npos || p.name.compare(dot + 1, 2, "bn") != 0) continue;
    const int k = std::atoi(p.name.c_str() + dot + 3);
    auto& slot = last[p.name.substr(0, dot)];
    if (!slot.second || k > slot.first) slot = {k, &p};
  }
  for (const auto& [block, bn] : last)
    std::fill(params + bn.second->offset, params + bn.second->offset + bn.second->size, 0.f);
}
}  // namespace

void init_params(Model& model, uint64_t seed) {
  std::map<std::string, const ParamInfo*> by_name;
  for (const ParamInfo& p : model.param_info()) by_name[p.name] = &p;
  std::vector<float> host(model.num_params(), 0.f);
  float* P = host.data();
  for (size_t i = 0; i < model.param_info().size(); ++i) {
    const ParamInfo& p = model.param_info()[i];
    Rng rng{seed ^ (0xA0761D6478BD642Full * (i + 1))};  // one stream per parameter
    float* d = P + p.offset;
    std::string prefix = p.name.substr(0, p.name.rfind('.'));
    bool is_bias = p.name.size() > 5 && p.name.compare(p.name.size() - 5, 5, ".bias") == 0;
    auto w = by_name.find(prefix + ".weight");
    bool linear = w != by_name.end() && w->second->shape.size() == 2;
    if (p.shape.size() == 4) {  // conv: Kaiming normal, fan_out, ReLU gain
      double fan_out = double(p.shape[0]) * p.shape[2] * p.shape[3];
      double sd = std::sqrt(2.0 / fan_out);
      for (size_t j = 0; j < p.size; ++j) d[j] = float(sd * rng.normal());
    } else if (linear) {  // PyTorch Linear default: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
      double bound = 1.0 / std::sqrt(double(w->second->shape[1]));
      for (size_t j = 0; j < p.size; ++j) d[j] = float(bound * (2.0 * rng.uniform() - 1.0));
    } else {  // BN: weight 1, bias 0
      std::fill(d, d + p.size, is_bias ? 0.f : 1.f);
    }
  }
  if (model.spec().zero_init_residual) zero_last_bn_of_blocks(model, P);
  model.params_from_host(host.data());
  for (BufferInfo& b : model.buffers()) {
    const std::vector<float> v(b.size, b.name.ends_with("running_var") ? 1.f : 0.f);
    model.buffer_from_host(b, v.data());
  }
  model.zero_grad();
}

// ---- loss ----
namespace {

// One sample's logits z [k], shared by the losses: checks its label y, counts a correct argmax
// (the first maximum) into *right, fills prob [k] with exp(z - max) and returns the max and
// the sum of prob (the softmax's denominator).
struct SoftmaxRow {
  double max, sum;
};
SoftmaxRow softmax_row(const float* z, int k, int32_t y, int i, double* prob, int* right) {
  SIEVE_CHECK(y >= 0 && y < k, "label ", y, " of sample ", i, " outside [0, ", k, ")");
  const int arg = int(std::max_element(z, z + k) - z);
  *right += arg == y;
  const double mx = z[arg];
  double sum = 0;
  for (int j = 0; j < k; ++j) sum += prob[j] = std::exp(double(z[j]) - mx);
  return {mx, sum};
}

}  // namespace

double softmax_cross_entropy(const float* logits, const int32_t* labels, int n, int k,
                             float label_smoothing, float* dlogits, int* correct) {
  SIEVE_ASSERT(n > 0 && k > 0);
  double total = 0;
  int right = 0;
  const double eps = label_smoothing, off = eps / k, on = 1.0 - eps + off;
  std::vector<double> prob(k);
  for (int i = 0; i < n; ++i) {
    const float* z = logits + size_t(i) * k;
    const int y = labels[i];
    const SoftmaxRow row = softmax_row(z, k, y, i, prob.data(), &right);
    const double lse = row.max + std::log(row.sum);
    for (int j = 0; j < k; ++j) {
      double t = j == y ? on : off;
      total -= t * (double(z[j]) - lse);
      if (dlogits) dlogits[size_t(i) * k + j] = float((prob[j] / row.sum - t) / n);
    }
  }
  if (correct) *correct = right;
  return total / n;
}

double generalized_cross_entropy(const float* logits, const int32_t* labels, int n, int k, float q,
                                 float* dlogits, int* correct) {
  SIEVE_ASSERT(n > 0 && k > 0 && q > 0 && q <= 1);
  double total = 0;
  int right = 0;
  std::vector<double> prob(k);
  for (int i = 0; i < n; ++i) {
    const int y = labels[i];
    const double sum = softmax_row(logits + size_t(i) * k, k, y, i, prob.data(), &right).sum;
    const double py_q = std::pow(prob[y] / sum, double(q));
    total += (1.0 - py_q) / q;
    if (dlogits)
      for (int j = 0; j < k; ++j)
        dlogits[size_t(i) * k + j] = float(py_q * (prob[j] / sum - (j == y ? 1.0 : 0.0)) / n);
  }
  if (correct) *correct = right;
  return total / n;
}

// ---- factory ----
std::unique_ptr<Model> make_model(const ModelSpec& spec) {
  if (spec.num_classes < 1)
    throw UsageError(cat("model num_classes: expected >= 1, got ", spec.num_classes));
  if (!(spec.width > 0)) throw UsageError(cat("model width: expected > 0, got ", spec.width));
  backend(spec.backend, spec.dtype);  // validates the name and the dtype on this machine
  if (spec.arch == "mlp") return make_mlp(spec);
  if (spec.arch.starts_with("resnet")) return make_resnet(spec);
  throw UsageError(cat("model arch '", spec.arch,
                       "': expected mlp, resnet18, resnet34, resnet50, resnet101 or resnet152"));
}

ModelSpec model_spec_from(const Config& cfg, const std::string& section) {
  ModelSpec spec;
  spec.arch = cfg.get_string(section + ".model.arch");
  spec.width = cfg.get_float(section + ".model.width");
  spec.stem = cfg.get_string(section + ".model.stem");
  spec.mlp_hidden.clear();
  for (auto h : cfg.get_int_list(section + ".model.hidden")) spec.mlp_hidden.push_back(int(h));
  spec.zero_init_residual = cfg.get_bool(section + ".model.zero_init_residual");
  return spec;
}

}  // namespace sieve::nn
