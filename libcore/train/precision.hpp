// precision: auto, settled per network. nn::resolve_precision answers for the machine (bf16
// where it computes bf16 natively and faster); on a backend whose bf16 speed also depends on
// the network (the cpu backend with AMX: bf16 wins on ResNet's wide layers and loses on
// narrow ones, docs/engine.md) the trainer confirms that answer on its own network here.
#pragma once
#include <cstdint>
#include <string>

#include "comm/comm.hpp"
#include "nn/model.hpp"

namespace sieve::train {

// Collective. Times one training step of `spec` at `micro_batch` samples (this rank's
// forward) in fp32 and in bf16 on every rank and returns the dtype whose summed time is
// smaller, the same on every rank, with one line under `key` saying what was measured. A
// step under kUntimedStepMs in fp32 is fp32 without a choice: too short to time apart from
// the scheduler's noise, and too short for bf16 to save anything. Once per process and
// network shape: a sweep's runs of one shape (one process) share the first one's answer.
// spec.dtype on return from a backend without the measurement: unchanged.
nn::DType timed_auto_precision(const Comm& comm, const nn::ModelSpec& spec, int64_t micro_batch,
                               const std::string& key);
inline constexpr double kUntimedStepMs = 2.0;

}  // namespace sieve::train
