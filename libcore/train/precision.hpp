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

// Collective over `comm`, the ranks that train the run together. The dtype a run of `spec`
// at `global_batch` samples a step (micro-batches of `micro_batch`, 0: none) should train in,
// the same on every rank:
//   * a decision this process made already for the same network, batch and rank count;
//   * else, where `record_dir` is given, the decision recorded there for them (rank 0 reads
//     it), so that every run of a sweep (other processes, Slurm array tasks, reruns) trains
//     that network in one dtype;
//   * else every rank times one training step of its forward batch in fp32 and in bf16
//     (nn::backend_time_training_step) and the ranks' mean decides; a step under
//     kUntimedStepMs in fp32 is fp32 without a choice (too short to time apart from the
//     scheduler's noise, and too short for bf16 to save anything). Rank 0 then records it in
//     `record_dir` unless another run recorded first, whose decision it takes instead.
// One line under `key` says what was decided and from what. spec.dtype where the backend has
// no such measurement. The record is auto_precision_record(...): JSON with the network, the
// two times and the dtype; a file that cannot be read or written is one warning, and the run
// decides for itself.
nn::DType timed_auto_precision(const Comm& comm, const nn::ModelSpec& spec, int64_t global_batch,
                               int64_t micro_batch, const std::string& key,
                               const std::string& record_dir);
inline constexpr double kUntimedStepMs = 2.0;

// `<record_dir>/auto_precision/<network>.json`, the network named by its backend, layers,
// input, classes, batch, rank count and micro-batch, e.g.
// `cpu_resnet18_w0.125_imagenet_3x32x32_c10_b512_r2_m0.json`.
std::string auto_precision_record(const std::string& record_dir, const nn::ModelSpec& spec,
                                  int64_t global_batch, int ranks, int64_t micro_batch);

}  // namespace sieve::train
