#include "train/optimizer.hpp"

#include <cmath>

#include "util/error.hpp"

namespace sieve::train {

SgdOptimizer::SgdOptimizer(std::vector<ParamSlice> slices, size_t total, OptimizerOptions opt)
    : slices_(std::move(slices)), opt_(opt), velocity_(total, 0.0f), scratch_(total, 0.0f) {
  for (const auto& s : slices_)
    SIEVE_ASSERT(s.offset + s.count <= total, "slice ", s.name, " outside the buffer");
}

void SgdOptimizer::step(float* w, const float* grads, double lr) {
  step_range(w, grads, lr, 0, velocity_.size());
}

void SgdOptimizer::step_range(float* w, const float* grads, double lr, size_t begin, size_t end) {
  SIEVE_ASSERT(begin <= end && end <= velocity_.size(), "step_range [", begin, ", ", end,
               ") outside the buffer");
  std::vector<nn::SgdTerm> t = terms(begin, end);
  std::vector<double> norms(2 * t.size(), 0.0);
  nn::sgd_norms_host(w, grads, t.data(), t.size(), norms.data());
  set_trust(t, norms);
  nn::sgd_apply_host({w, grads, velocity_.data(), scratch_.data()}, begin, end, t.data(), t.size(),
                     step_at(lr));
}

// The L2 coefficient inside a LARS term: LARS tensors are never BN or bias, so they are
// always decayed, by L2 unless the decay is decoupled (applied to the weights instead).
double SgdOptimizer::lars_l2() const {
  return opt_.decoupled ? 0.0 : opt_.weight_decay;
}

std::vector<nn::SgdTerm> SgdOptimizer::terms(size_t begin, size_t end) const {
  std::vector<nn::SgdTerm> out;
  const float wd = float(opt_.weight_decay);
  for (const auto& s : slices_) {
    if (s.offset < begin || s.offset + s.count > end) {
      SIEVE_ASSERT(s.offset + s.count <= begin || s.offset >= end, "slice ", s.name,
                   " straddles the edge of step_range [", begin, ", ", end, ")");
      continue;
    }
    const bool decay = opt_.decay_bn_bias || !s.is_bn_or_bias;
    nn::SgdTerm t;
    t.offset = s.offset;
    t.count = s.count;
    if (opt_.lars && !s.is_bn_or_bias) {
      t.kind = nn::SgdTerm::Kind::lars;
      t.l2 = float(lars_l2());
    } else if (decay && !opt_.decoupled && wd != 0.0f) {
      t.kind = nn::SgdTerm::Kind::l2;
      t.l2 = wd;
    }
    if (opt_.decoupled && decay && wd != 0.0f) t.decoupled = wd;
    out.push_back(t);
  }
  return out;
}

// trust = eta * |w| / (|g| + l2 * |w|) in double (1 where either norm is 0), per LARS term.
void SgdOptimizer::set_trust(std::vector<nn::SgdTerm>& terms,
                             const std::vector<double>& norms) const {
  SIEVE_ASSERT(norms.size() == 2 * terms.size(), "set_trust: ", norms.size(), " norms for ",
               terms.size(), " terms");
  for (size_t k = 0; k < terms.size(); ++k) {
    if (terms[k].kind != nn::SgdTerm::Kind::lars) continue;
    const double wn = norms[2 * k], gn = norms[2 * k + 1];
    double trust = 1.0;
    if (wn > 0 && gn > 0) trust = opt_.lars_eta * wn / (gn + lars_l2() * wn);
    terms[k].trust = float(trust);
  }
}

nn::SgdStep SgdOptimizer::step_at(double lr) const {
  return {float(lr), float(opt_.momentum), opt_.nesterov};
}

LrScaling parse_scaling(const std::string& s) {
  if (s == "linear") return LrScaling::Linear;
  if (s == "sqrt") return LrScaling::Sqrt;
  if (s == "auto") return LrScaling::Auto;
  throw UsageError(cat("LR scaling '", s, "': expected linear, sqrt or auto"));
}

Decay parse_decay(const std::string& s) {
  if (s == "none") return Decay::None;
  if (s == "step") return Decay::Step;
  if (s == "cosine") return Decay::Cosine;
  throw UsageError(cat("schedule.decay: expected none, step or cosine, got '", s, "'"));
}

LrSchedule::LrSchedule(ScheduleOptions o) : o_(std::move(o)) {
  peak_ = o_.base_lr;
  if (o_.ref_batch > 0) {
    const double r = double(o_.global_batch) / double(o_.ref_batch);
    switch (o_.scaling) {
      case LrScaling::Linear:
        peak_ *= r;
        break;
      case LrScaling::Sqrt:
        peak_ *= std::sqrt(r);
        break;
      case LrScaling::Auto:
        peak_ *= r <= 8.0 ? r : 8.0 * std::sqrt(r / 8.0);
        break;
    }
  }
  warmup_steps_ = int64_t(std::llround(o_.warmup_epochs * double(o_.steps_per_epoch)));
  total_steps_ = o_.epochs * o_.steps_per_epoch;
}

double LrSchedule::lr_at(int64_t step) const {
  if (step < warmup_steps_) return peak_ * double(step + 1) / double(warmup_steps_);
  switch (o_.decay) {
    case Decay::None:
      return peak_;
    case Decay::Step: {
      const int64_t epoch = step / std::max<int64_t>(1, o_.steps_per_epoch);
      double lr = peak_;
      for (int64_t m : o_.milestones)
        if (epoch >= m) lr *= o_.gamma;
      return lr;
    }
    case Decay::Cosine: {
      const int64_t span = std::max<int64_t>(1, total_steps_ - warmup_steps_);
      const double t = std::min(1.0, double(step - warmup_steps_) / double(span));
      return 0.5 * peak_ * (1.0 + std::cos(M_PI * t));
    }
  }
  return peak_;
}

}  // namespace sieve::train
