// Where a traced training step's time goes (the step timeline of --trace, util/trace.hpp).
//
// Per rank, on the main lane, each span counts its exclusive time (its duration minus the
// spans nested in it), attributed to the step span that contains it:
//   compute        forward/backward ("compute" spans, their per-unit "layer" spans inside)
//   exposed_comm   blocked on communication: "wait" spans (bucket/push/pull waits, the BN
//                  broadcast, the per-step statistics allreduce) and "negotiate" spans
//   negotiate      of which fusion-queue agreement rounds, cycle pacing included
//   data           waiting for the next batch
//   optimizer      the SGD update (the parameter server's pull wait inside it is excluded)
//   other          the rest of the step span
// Means over the steps after the first (warm-up) and over the ranks, in seconds.
// scripts/trace_summary.py computes the same split for the benchmark script.
#pragma once
#include <string>
#include <vector>

namespace sieve::report {

struct StepSplit {
  std::string strategy, arch;
  int ranks = 0;
  double width = 0;
  long long global_batch = 0, steps = 0;
  // The run's communication settings (the trace's otherData): what the model needs.
  double params = 0, bucket_mb = 4, cycle_ms = 1, fusion_mb = 64;
  int servers = 1, tensors = 64;
  double step_s = 0, compute_s = 0, exposed_comm_s = 0, negotiate_s = 0, data_s = 0,
         optimizer_s = 0, other_s = 0;
};

// Throws Error naming the file if it is not a Sieve trace.
StepSplit summarize_trace(const std::string& path);

// Every trace-*.json in `dir`, sorted by (strategy, ranks).
std::vector<StepSplit> summarize_traces(const std::string& dir);

}  // namespace sieve::report
