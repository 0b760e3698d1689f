// Where the optimizer step meets the parameters (`<section>.param_home`): the seam between
// the training loop (trainer.cpp: next batch, forward, zero grad, backward, reduce, update)
// and the memory the model's flat buffers live in.
//
//   host     the model's own buffers, on the host (the cpu and ref backends): the reducer's
//            buckets start from the grad-ready hook during backward; SGD/LARS on the host.
//   staged   fp32 host master copies of a device model: gradients copied down after backward,
//            reduced and updated on the host, parameters copied up. Correct for any backend
//            and strategy, at two copies of the parameters per step and no overlap.
//   device   everything stays in the backend's memory: the backend's own reducer (NCCL on
//            cuda) sums bucket by bucket as backward produces them, the non-finite check and
//            SGD/LARS are backend ops (nn::Backend::sum, sgd_norms, sgd_apply), and of the
//            update only two norms per LARS tensor and one sum cross to the host (the BN
//            running statistics are still broadcast through host copies on > 1 rank:
//            Trainer::broadcast_buffers). On a host backend the same
//            home runs with the host's bucket reducer: the CPU as a fake device, which the
//            tests pin bitwise to `host` (so the logic of this home is tested without a GPU).
//   auto     host on a host backend; staged on cuda until the device home has been verified on
//            a GPU (scripts/gpu_check.sh compares the two).
// The momentum lives where the home updates: the device home holds it in backend memory and
// hands it to the optimizer's host copy before a checkpoint (optimizer_to_host); it takes the
// host copy (fresh zeros or a resumed checkpoint's) when it is made.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/comm.hpp"
#include "nn/model.hpp"
#include "train/grad_sync.hpp"
#include "train/optimizer.hpp"

namespace sieve::train {

class ParamHome {
 public:
  virtual ~ParamHome() = default;
  virtual const char* name() const = 0;
  // The gradient reduction of this home's buffer with the strategy `o`; installs the model's
  // grad-ready hook where reductions may start during backward.
  virtual std::unique_ptr<GradSync> make_reducer(const CommOptions& o, const Comm& comm) = 0;
  // After the step's backward, before the reducer's finish().
  virtual void after_backward() {}
  // The sum of the reduced gradients (non-finite check), after finish().
  virtual double gradient_sum() = 0;
  // Fault injection (SIEVE_DEBUG_NAN_STEP): the first gradient becomes NaN.
  virtual void poison_gradient() = 0;
  // The optimizer step at learning rate lr on the reduced gradients.
  virtual void update(GradSync& reducer, SgdOptimizer& opt, double lr) = 0;
  // Before a checkpoint: the optimizer's host state (momentum) made current.
  virtual void optimizer_to_host(SgdOptimizer&) {}
};

// `which`: host | staged | device | auto (above); `key` names the setting in messages. A
// UsageError naming `key` where the model's backend cannot have that home (host on a device
// backend; device where the backend has no reducer of its own and its memory is not the host's).
std::unique_ptr<ParamHome> make_param_home(const std::string& which, const std::string& key,
                                           nn::Model& model, SgdOptimizer& opt);

// The (offset, count) ranges of the model's parameter tensors: what the grad-ready hook reports.
std::vector<std::pair<size_t, size_t>> covered_ranges(const nn::Model& model);

}  // namespace sieve::train
