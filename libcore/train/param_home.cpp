#include "train/param_home.hpp"

#include <algorithm>
#include <cmath>

#include "nn/backend.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/trace.hpp"

namespace sieve::train {

std::vector<std::pair<size_t, size_t>> covered_ranges(const nn::Model& model) {
  std::vector<std::pair<size_t, size_t>> covered;
  for (const auto& p : model.param_info()) covered.push_back({p.offset, p.size});
  return covered;
}

namespace {

void install_hook(nn::Model& m, GradSync* reducer) {
  m.set_grad_ready_hook([reducer](size_t off, size_t cnt) { reducer->ready(off, cnt); });
}

// The model's own host buffers.
class HostHome final : public ParamHome {
 public:
  explicit HostHome(nn::Model& m) : m_(m) {}
  const char* name() const override { return "host"; }
  std::unique_ptr<GradSync> make_reducer(const CommOptions& o, const Comm& comm) override {
    auto r = make_grad_sync(o, comm, m_.grads(), m_.num_params(), covered_ranges(m_));
    install_hook(m_, r.get());
    return r;
  }
  double gradient_sum() override { return nn::sum_host(m_.grads(), m_.num_params()); }
  void poison_gradient() override { m_.grads()[0] = std::nanf(""); }
  void update(GradSync& r, SgdOptimizer& opt, double lr) override {
    r.update(opt, m_.params(), m_.grads(), lr);
  }

 private:
  nn::Model& m_;
};

// Host master copies of a device model, staged once per step.
class StagedHome final : public ParamHome {
 public:
  explicit StagedHome(nn::Model& m)
      : m_(m), params_(m.params_to_host()), grads_(m.num_params(), 0.f) {}
  const char* name() const override { return "staged"; }
  // No hook: the gradients reach the host only after backward.
  std::unique_ptr<GradSync> make_reducer(const CommOptions& o, const Comm& comm) override {
    SIEVE_CHECK(o.mode != "async",
                "comm.mode async (stale-synchronous parameter server) needs the host parameter "
                "home: the staged home uploads the host weights after each update, not after a "
                "drain");
    return make_grad_sync(o, comm, grads_.data(), grads_.size(), covered_ranges(m_));
  }
  void after_backward() override {
    m_.backend().to_host(grads_.data(), m_.grads(), grads_.size() * sizeof(float));
  }
  double gradient_sum() override { return nn::sum_host(grads_.data(), grads_.size()); }
  void poison_gradient() override { grads_[0] = std::nanf(""); }
  void update(GradSync& r, SgdOptimizer& opt, double lr) override {
    r.update(opt, params_.data(), grads_.data(), lr);
    m_.params_from_host(params_.data());
  }

 private:
  nn::Model& m_;
  std::vector<float> params_, grads_;
};

// A backend's own reducer seen as the trainer's strategy (buckets only).
class DeviceBuckets final : public GradSync {
 public:
  explicit DeviceBuckets(std::unique_ptr<nn::DeviceReducer> r) : r_(std::move(r)) {}
  const char* name() const override { return "buckets"; }
  void arm() override {
    ++stats_.steps;
    r_->arm();
  }
  void ready(size_t offset, size_t count) override { r_->ready(offset, count); }
  void finish() override {
    const double t0 = trace::now_us();
    r_->finish();
    trace::complete("queue device reductions", "wait", t0, trace::now_us());
    stats_.messages = r_->messages();
    stats_.started_early = r_->started_early();
    stats_.bytes = r_->bytes();
  }
  void update(SgdOptimizer&, float*, float*, double) override {
    SIEVE_ASSERT(false, "the device parameter home updates through the backend");
  }
  size_t num_buckets() const override { return r_->num_buckets(); }

 private:
  std::unique_ptr<nn::DeviceReducer> r_;
};

// Parameters, gradients and momentum in the backend's memory; the step as backend ops.
class DeviceHome final : public ParamHome {
 public:
  DeviceHome(nn::Model& m, SgdOptimizer& opt, std::string key)
      : m_(m), be_(m.backend()), key_(std::move(key)), velocity_(be_, nn::DType::f32) {
    const int64_t n = int64_t(m.num_params());
    velocity_.resize({n});
    be_.to_device(velocity_.data(), opt.momentum().data(), size_t(n) * sizeof(float));
  }
  const char* name() const override { return "device"; }
  std::unique_ptr<GradSync> make_reducer(const CommOptions& o, const Comm& comm) override {
    // Whatever the rank count: the other strategies update through GradSync::update (the
    // parameter server on its shard owners), which this home replaces by the backend's step.
    if (o.strategy != "buckets")
      throw UsageError(cat(key_, " device: gradients are reduced by the backend in buckets; the ",
                           "comm.strategy ", o.strategy,
                           " needs the host or staged parameter home"));
    const auto covered = covered_ranges(m_);
    std::unique_ptr<GradSync> r;
    if (auto own = be_.device_reducer(comm, m_.grads(), m_.num_params(),
                                      bucket_cuts(m_.num_params(), bucket_bytes(o)), covered))
      r = std::make_unique<DeviceBuckets>(std::move(own));
    else if (be_.device() == nn::Device::cpu)  // the host's Comm reduces host memory in place
      r = make_grad_sync(o, comm, m_.grads(), m_.num_params(), covered);
    else
      throw UsageError(
          cat(key_, " device: the ", be_.name(), " backend has no gradient reducer of its own"));
    install_hook(m_, r.get());
    return r;
  }
  double gradient_sum() override { return be_.sum(m_.grads(), m_.num_params()); }
  void poison_gradient() override {
    const float nan = std::nanf("");
    be_.to_device(m_.grads(), &nan, sizeof nan);
  }
  // SgdOptimizer's own decisions (terms, trust ratios), the elements on the backend.
  void update(GradSync&, SgdOptimizer& opt, double lr) override {
    const size_t n = m_.num_params();
    std::vector<nn::SgdTerm> terms = opt.terms(0, n);
    std::vector<double> norms(2 * terms.size(), 0.0);
    be_.sgd_norms(m_.params(), m_.grads(), terms.data(), terms.size(), norms.data());
    opt.set_trust(terms, norms);
    be_.sgd_apply({m_.params(), m_.grads(), velocity_.data(), nullptr}, n, terms.data(),
                  terms.size(), opt.step_at(lr));
  }
  void optimizer_to_host(SgdOptimizer& opt) override {
    be_.to_host(opt.momentum().data(), velocity_.data(), opt.momentum().size() * sizeof(float));
  }

 private:
  nn::Model& m_;
  nn::Backend& be_;
  std::string key_;
  nn::Tensor velocity_;
};

}  // namespace

std::unique_ptr<ParamHome> make_param_home(const std::string& which, const std::string& key,
                                           nn::Model& model, SgdOptimizer& opt) {
  const bool host_memory = model.device() == nn::Device::cpu;
  if (which == "auto") return make_param_home(host_memory ? "host" : "staged", key, model, opt);
  if (which == "host") {
    if (!host_memory)
      throw UsageError(cat(key, " host: the ", model.backend().name(),
                           " backend's parameters are not in host memory (use staged or device)"));
    return std::make_unique<HostHome>(model);
  }
  if (which == "staged") {
    log::info(cat(key, " staged: the ", model.backend().name(),
                  " model's parameters are updated on fp32 host copies, staged every step"));
    return std::make_unique<StagedHome>(model);
  }
  if (which == "device") {
    log::info(cat(key, " device: parameters, gradients and momentum stay in the ",
                  model.backend().name(), " backend's memory; SGD runs there"));
    return std::make_unique<DeviceHome>(model, opt, key);
  }
  throw UsageError(cat(key, " '", which, "': expected auto, host, staged or device"));
}

}  // namespace sieve::train
