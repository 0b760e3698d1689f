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
  const float wd = float(opt_.weight_decay);
  const float mu = float(opt_.momentum);
  float* g = scratch_.data();
  for (size_t i = begin; i < end; ++i) g[i] = grads[i];
  // Per-tensor: L2 term and LARS trust ratio. Elements not covered by a slice keep g.
  for (const auto& s : slices_) {
    if (s.offset < begin || s.offset + s.count > end) {
      SIEVE_ASSERT(s.offset + s.count <= begin || s.offset >= end, "slice ", s.name,
                   " straddles the edge of step_range [", begin, ", ", end, ")");
      continue;
    }
    const bool decay = opt_.decay_bn_bias || !s.is_bn_or_bias;
    float* gs = g + s.offset;
    const float* ws = w + s.offset;
    if (opt_.lars && !s.is_bn_or_bias) {
      double wn = 0, gn = 0;
      for (size_t i = 0; i < s.count; ++i) {
        wn += double(ws[i]) * ws[i];
        gn += double(gs[i]) * gs[i];
      }
      wn = std::sqrt(wn);
      gn = std::sqrt(gn);
      const double l2 = (decay && !opt_.decoupled) ? opt_.weight_decay : 0.0;
      double trust = 1.0;
      if (wn > 0 && gn > 0) trust = opt_.lars_eta * wn / (gn + l2 * wn);
      const float t = float(trust);
      const float wl = float(l2);
      for (size_t i = 0; i < s.count; ++i) gs[i] = t * (gs[i] + wl * ws[i]);
    } else if (decay && !opt_.decoupled && wd != 0.0f) {
      for (size_t i = 0; i < s.count; ++i) gs[i] += wd * ws[i];
    }
  }
  const float flr = float(lr);
  float* v = velocity_.data();
  for (size_t i = begin; i < end; ++i) {
    v[i] = mu * v[i] + g[i];
    g[i] = opt_.nesterov ? g[i] + mu * v[i] : v[i];
  }
  if (opt_.decoupled && wd != 0.0f) {
    const float f = flr * wd;
    for (const auto& s : slices_) {
      if (!opt_.decay_bn_bias && s.is_bn_or_bias) continue;
      if (s.offset < begin || s.offset >= end) continue;
      for (size_t i = s.offset; i < s.offset + s.count; ++i) w[i] -= f * w[i];
    }
  }
  for (size_t i = begin; i < end; ++i) w[i] -= flr * g[i];
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
      case LrScaling::Linear: peak_ *= r; break;
      case LrScaling::Sqrt: peak_ *= std::sqrt(r); break;
      case LrScaling::Auto: peak_ *= r <= 8.0 ? r : 8.0 * std::sqrt(r / 8.0); break;
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
