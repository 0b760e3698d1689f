#include "train/precision.hpp"

#include <cstdio>
#include <map>

#include "nn/backend.hpp"
#include "util/log.hpp"

namespace sieve::train {

namespace {

std::string ms(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

// What the timing depends on: the layers and their input, and the batch of one forward.
std::string shape_key(const nn::ModelSpec& s, int64_t micro_batch) {
  std::string k =
      cat(s.backend, " ", s.arch, " w", s.width, " ", s.stem, " ", s.in_channels, "x", s.in_height,
          "x", s.in_width, " f", s.in_features, " c", s.num_classes, " n", micro_batch, " h");
  for (int h : s.mlp_hidden) k += cat(h, ",");
  return k;
}

}  // namespace

nn::DType timed_auto_precision(const Comm& comm, const nn::ModelSpec& spec, int64_t micro_batch,
                               const std::string& key) {
  static std::map<std::string, nn::DType> decided;  // every rank runs the same sequence
  const std::string shape = shape_key(spec, micro_batch);
  if (auto it = decided.find(shape); it != decided.end()) return it->second;
  nn::StepTimes t;
  const bool timed = nn::backend_time_training_step(spec.backend, spec, int(micro_batch), &t);
  // Every rank has the same backend, so every rank timed or none did.
  if (!comm.allreduce_max(int64_t(timed))) return spec.dtype;
  double sum[2] = {t.fp32_ms, t.bf16_ms};
  comm.allreduce_sum(sum, 2);
  const double fp32 = sum[0] / comm.size(), bf16 = sum[1] / comm.size();
  const bool untimed = fp32 < kUntimedStepMs;
  const nn::DType d = untimed || fp32 <= bf16 ? nn::DType::f32 : nn::DType::bf16;
  log::info(cat(key, ": auto -> ", nn::dtype_name(d), " (one training step of this network at ",
                micro_batch, " samples took ", ms(fp32), " ms of CPU time in fp32 and ", ms(bf16),
                " ms in bf16", comm.size() > 1 ? ", mean of the ranks" : "",
                untimed ? cat("; under ", kUntimedStepMs, " ms a step, fp32") : std::string(),
                ")"));
  decided[shape] = d;
  return d;
}

}  // namespace sieve::train
