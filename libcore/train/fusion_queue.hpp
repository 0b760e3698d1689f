// The `fusion-queue` strategy (Horovod-style): dynamic negotiation instead of static buckets.
//
// Each parameter tensor enters this rank's queue when the grad-ready hook reports it. The
// ranks run agreement rounds ("cycles"): a round is an MPI_Iallreduce(BAND) of a bitmask of
// locally ready tensors, so its result is the set ready on ALL ranks — Horovod's coordinator
// step, done as one collective instead of messages to rank 0. For the newly agreed tensors,
// in reverse layer order (identical on every rank), the rank copies them into fusion buffers
// of at most fusion_bytes (a tensor larger than that goes alone, in place) and starts one
// MPI_Iallreduce per buffer; results are copied back in finish().
//
// Cycles: a round starts when the previous one has completed and at least cycle_ms have
// passed since it started (Horovod's HOROVOD_CYCLE_TIME); in finish() rounds continue until
// every tensor is agreed, with the same pacing, so the cycle time's latency is real here
// too. Rounds are collectives, so every rank must start the same sequence of them: the
// sequence ends when the AGREED set is complete, which every rank learns from the same
// results, so all ranks start the same number of rounds whatever their local timing.
// Measured: rounds per step, time blocked on rounds, copy-in/copy-out time.
#pragma once
#include <chrono>
#include <cstdint>
#include <vector>

#include "train/grad_sync.hpp"

namespace sieve::train {

class FusionQueue final : public GradSync {
 public:
  FusionQueue(const Comm& comm, float* grads, size_t total,
              const std::vector<std::pair<size_t, size_t>>& covered, double cycle_ms,
              size_t fusion_bytes);
  ~FusionQueue() override;
  const char* name() const override { return "fusion-queue"; }
  void arm() override;
  void ready(size_t offset, size_t count) override;
  void finish() override;

 private:
  struct Tensor {
    size_t offset, count;
  };
  struct Fused {  // one fused buffer in flight
    std::vector<size_t> tensors;
    std::vector<float> buffer;  // empty: a single tensor reduced in place
  };
  void start_round();
  // Completes a finished round: fuses and starts the reductions of the newly agreed tensors.
  void on_round_done();
  bool round_due() const;
  void poll_round();

  const Comm& comm_;
  float* grads_;
  std::vector<Tensor> tensors_;  // ascending offset
  double cycle_s_;
  size_t fusion_floats_;
  std::vector<uint64_t> local_, agreed_, send_, recv_;
  size_t agreed_count_ = 0;
  Request round_;
  std::chrono::steady_clock::time_point round_started_;
  double round_t0_us_ = 0;
  std::vector<Fused> fused_;
  InFlight inflight_;
  bool armed_ = false;
};

}  // namespace sieve::train
