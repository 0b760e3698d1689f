// Optimizers and learning-rate schedules over ONE flat parameter buffer.
//
// Parameters, gradients and momentum live in flat float buffers of the same length
// (nn::Model::params()/grads()); a ParamSlice names one tensor inside them. Per-tensor
// work (weight-decay exclusion, LARS trust ratios) walks the slices; everything else is
// one loop over the buffer. Updates are plain sequential loops so results are bitwise
// reproducible on CPU.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nn/sgd.hpp"

namespace sieve::train {

// One tensor in the flat buffer.
struct ParamSlice {
  std::string name;   // torchvision state_dict name, e.g. "layer1.0.conv1.weight"
  size_t offset = 0;  // first element in the flat buffer
  size_t count = 0;   // elements
  bool is_bn_or_bias = false;
};

struct OptimizerOptions {
  double momentum = 0.9;
  bool nesterov = true;
  double weight_decay = 0.0;
  bool decoupled = false;      // w -= lr*wd*w (AdamW-style) instead of g += wd*w
  bool decay_bn_bias = false;  // false: BN and bias parameters get no weight decay
  bool lars = false;           // layer-wise adaptive rate scaling (You et al. 2017)
  double lars_eta = 0.001;
};

// SGD with (Nesterov) momentum, L2 or decoupled weight decay, optional LARS.
//   L2:        g' = g + wd*w
//   LARS:      g' *= trust, trust = eta*|w| / (|g| + wd*|w|) per non-BN/bias tensor
//   momentum:  v = mu*v + g' ; step = nesterov ? g' + mu*v : v
//   update:    w -= lr*step  (decoupled: also w -= lr*wd*w)
class SgdOptimizer {
 public:
  SgdOptimizer(std::vector<ParamSlice> slices, size_t total, OptimizerOptions opt);
  // One update of `params` (length total) with `grads` at learning rate `lr`.
  void step(float* params, const float* grads, double lr);
  // The same update restricted to elements [begin, end) (a parameter server's shard): every
  // tensor must lie wholly inside or outside the range, so per-tensor terms (LARS) see the
  // whole tensor. Elements outside keep their parameters and momentum; each element gets
  // bitwise the update step() would give it.
  void step_range(float* params, const float* grads, double lr, size_t begin, size_t end);

  // The same step where the buffers are not the host's (a device-resident parameter home):
  // the tensors wholly inside [begin, end) as the element update sees them (nn/sgd.hpp), then
  // their LARS trust ratios from the norms that nn::sgd_norms_host or a backend's sgd_norms
  // measured, and the whole-buffer part at learning rate `lr`. step_range is exactly
  // terms -> sgd_norms_host -> set_trust -> sgd_apply_host on the host buffers.
  std::vector<nn::SgdTerm> terms(size_t begin, size_t end) const;
  void set_trust(std::vector<nn::SgdTerm>& terms, const std::vector<double>& norms) const;
  nn::SgdStep step_at(double lr) const;
  std::vector<float>& momentum() { return velocity_; }
  const std::vector<float>& momentum() const { return velocity_; }
  const std::vector<ParamSlice>& slices() const { return slices_; }
  const OptimizerOptions& options() const { return opt_; }

 private:
  double lars_l2() const;

  std::vector<ParamSlice> slices_;
  OptimizerOptions opt_;
  std::vector<float> velocity_;  // [total]
  std::vector<float> scratch_;   // [total] effective gradient g'
};

enum class Decay { None, Step, Cosine };
Decay parse_decay(const std::string& s);

// How the peak LR follows the global batch B relative to ref_batch (r = B / ref_batch):
//   linear  base * r                      (Goyal et al. 2017; holds up to a few thousand)
//   sqrt    base * sqrt(r)                (Krizhevsky 2014, Hoffer et al. 2017)
//   auto    linear up to r = 8, then sqrt beyond: base * 8 * sqrt(r / 8), so that the
//           batches where linear scaling is known to hold keep it and very large batches
//           do not get a learning rate that diverges (docs/training.md)
enum class LrScaling { Linear, Sqrt, Auto };
LrScaling parse_scaling(const std::string& s);

struct ScheduleOptions {
  double base_lr = 0.1;
  int64_t ref_batch = 0;  // 0: no scaling
  LrScaling scaling = LrScaling::Linear;
  int64_t global_batch = 1;
  double warmup_epochs = 0.0;
  Decay decay = Decay::Cosine;
  std::vector<int64_t> milestones;  // epochs
  double gamma = 0.1;
  int64_t epochs = 1;
  int64_t steps_per_epoch = 1;
};

// LR as a function of the optimizer step: peak = base_lr scaled by global_batch / ref_batch
// (see LrScaling); warm-up rises linearly to the peak over warmup_epochs
// (lr at step s = peak*(s+1)/warmup_steps); after it, step decay by epoch milestones or
// cosine decay to 0 over the remaining steps.
class LrSchedule {
 public:
  explicit LrSchedule(ScheduleOptions o);
  double peak() const { return peak_; }
  double lr_at(int64_t step) const;

 private:
  ScheduleOptions o_;
  double peak_;
  int64_t warmup_steps_, total_steps_;
};

}  // namespace sieve::train
