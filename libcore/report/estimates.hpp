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

// Step time per gradient strategy (train/grad_sync.hpp), modelled on this implementation,
// weak scaling (a fixed per-rank batch b, as the DDP/Horovod comparisons run). With
// A(n, p) = 2(p-1)alpha + 2(p-1)/p n/BW the ring allreduce, s(p) = 2 ceil(log2 p) alpha a
// latency-bound small allreduce, T_c the compute of b samples and T_b = f_b T_c its backward
// part (the overlap window):
//   buckets           k = ceil(G/bucket) buckets; total C = k 2(p-1)alpha + 2(p-1)/p G/BW;
//                     exposed = max(A(G/k), C - T_b)
//   fusion-queue      r = min(tensors, max(1, T_b/cycle)) rounds, a fused buffer per round;
//                     reductions start a cycle late, and the last round adds cycle/2 + s(p):
//                     exposed = cycle/2 + s(p) + max(A(G/r), C_r - max(0, T_b - cycle))
//   parameter-server  S shards, binomial-tree reduce (push) and broadcast (pull) of G/S
//                     each: push = pull = ceil(log2 p)(alpha + G/(S BW)); the pull is
//                     exposed, the push overlaps backward: exposed = max(0, push - T_b) + pull
// plus s(p) for the per-step statistics allreduce, all strategies alike.
// A model of these three implementations (MPI collectives on one link per rank), not of a
// PS with dedicated server NICs or of Horovod's coordinator (gather at rank 0: O(p)).
struct StrategyModelInputs {
  double grad_bytes = 0;
  double compute_s_per_sample = 0;  // measured: one rank's forward+backward per sample
  double backward_fraction = 2.0 / 3.0;
  double per_rank_batch = 0;
  int tensors = 64;  // parameter tensors (ResNet-18: 62): at most one agreement round each
  double bucket_bytes = 4 << 20, cycle_s = 1e-3, fusion_bytes = 64 << 20;
  int servers = 1;
  double latency_s = 5e-6, bandwidth_bytes_per_s = 12.5e9;  // ring-equivalent
};
struct StrategyPoint {
  std::string strategy;
  int64_t ranks = 1;
  double compute_s = 0, exposed_s = 0, step_s = 0, efficiency = 0;
};
// Rows for buckets, fusion-queue and parameter-server at rank_counts(max_ranks).
std::vector<StrategyPoint> predict_strategies(const StrategyModelInputs& in, int64_t max_ranks);

// Parameter count of the model the config's `section` (scaled/pretrain) describes, built
// with sieve::nn::make_model for the given input shape and classes.
int64_t model_param_count(const Config& cfg, const std::string& section,
                          const std::vector<int64_t>& sample_shape, int64_t num_classes);

// Rough activation bytes kept for backward per sample (float32): the outputs of every
// conv/BN/ReLU of a ResNet or every layer of an MLP. An estimate, not a measurement.
double activation_bytes_estimate(const Config& cfg, const std::string& section,
                                 const std::vector<int64_t>& sample_shape);

}  // namespace sieve::report
