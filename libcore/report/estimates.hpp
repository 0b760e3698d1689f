// A-priori estimates for a configured job: data size, model size, communication and
// compute per step, memory per rank, and the predicted scaling efficiency.
//
// Model of one optimizer step on p ranks (synchronous data parallelism):
//   T_comp(p) = b(p) / r            b(p): per-rank batch, r: images/s of one rank
//   T_comm(p) = 2(p-1)/p * G / BW + 2(p-1) * alpha     ring allreduce of G gradient bytes
//   T_step(p) = T_comp + T_comm    (or max(T_comp, T_comm) when backward overlaps the reduce)
//   efficiency(p) = tau_p / (p * tau_1) = T_comp(p) / T_step(p)
// with tau_p = p*b(p)/T_step(p) the images/s of the whole job. Strong scaling keeps the
// global batch B fixed (b = B/p; rows with b < 1 are infeasible); weak scaling keeps b fixed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace sieve::report {

struct NetworkModel {
  double bandwidth_gbps = 100;  // link bandwidth per rank, gigabits/s
  double latency_us = 5;        // per-message latency alpha
};

// Ring allreduce time (seconds) of `bytes` over p ranks.
double ring_allreduce_s(double bytes, int64_t p, const NetworkModel& net);

struct ScalingRow {
  int64_t ranks = 1;
  double per_rank_batch = 0;  // b(p)
  bool feasible = true;       // b(p) >= 1
  double comp_s = 0, comm_s = 0, step_s = 0;
  double images_per_s = 0;  // tau_p
  double efficiency = 0;    // tau_p / (p * tau_1)
};

struct EstimateInputs {
  int64_t num_samples = 0;  // N (training set)
  int64_t bytes_per_sample = 0;
  int64_t num_params = 0;            // M
  int64_t grad_bytes_per_param = 4;  // 4 fp32, 2 bf16
  double activation_bytes_per_sample = 0;
  double images_per_s_per_rank = 0;  // r
  int64_t global_batch = 0;          // B (strong scaling)
  int64_t per_rank_batch = 0;        // > 0: weak scaling with this b
  bool overlap = false;
  NetworkModel net;
  int64_t max_ranks = 1536;
};

struct Estimates {
  double dataset_bytes = 0;          // N * n
  double param_bytes = 0;            // 4M
  double grad_bytes = 0;             // 4M or 2M
  double memory_per_rank_bytes = 0;  // params + grads + momentum + activations of b(1)
  std::vector<ScalingRow> rows;      // p = 1, 2, 4, ..., max_ranks (max_ranks last)
};

// Rank counts of the table: powers of two up to max_ranks, then max_ranks itself.
std::vector<int64_t> rank_counts(int64_t max_ranks);

Estimates estimate(const EstimateInputs& in);

// Memory of one rank at per-rank batch b: params + grads + momentum + b * activations.
double memory_per_rank(const EstimateInputs& in, double b);

// Parameter count of the model the config's `section` (scaled/pretrain) describes, built
// with sieve::nn::make_model for the given input shape and classes.
int64_t model_param_count(const Config& cfg, const std::string& section,
                          const std::vector<int64_t>& sample_shape, int64_t num_classes);

// Rough activation bytes kept for backward per sample (float32): the outputs of every
// conv/BN/ReLU of a ResNet or every layer of an MLP. An estimate, not a measurement.
double activation_bytes_estimate(const Config& cfg, const std::string& section,
                                 const std::vector<int64_t>& sample_shape);

}  // namespace sieve::report
