#include "train/precision.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "io/metrics.hpp"
#include "nn/backend.hpp"
#include "util/log.hpp"

namespace sieve::train {

namespace fs = std::filesystem;

namespace {

struct Decision {
  nn::DType dtype = nn::DType::f32;
  double fp32_ms = 0, bf16_ms = 0;
};

std::string ms(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

// What the timing depends on, uniform over the ranks of a run (each rank's own forward batch
// follows from the global batch, the rank count and the micro-batch), as a file name.
std::string network_name(const nn::ModelSpec& s, int64_t global_batch, int ranks,
                         int64_t micro_batch) {
  std::string input = s.in_features > 0 ? cat("f", s.in_features)
                                        : cat(s.in_channels, "x", s.in_height, "x", s.in_width);
  std::string name = cat(s.backend, "_", s.arch, "_w", s.width, "_", s.stem, "_", input);
  if (s.arch == "mlp") {
    name += "_h";
    for (size_t i = 0; i < s.mlp_hidden.size(); ++i) name += cat(i ? "-" : "", s.mlp_hidden[i]);
  }
  return cat(name, "_c", s.num_classes, "_b", global_batch, "_r", ranks, "_m", micro_batch);
}

// Rank 0: the decision recorded at `path`, if there is one it can read: a JSON object whose
// `precision` is "fp32" or "bf16" (its times, where they are not numbers, read as 0).
std::optional<Decision> read_record(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  std::ifstream in(path);
  const Json j = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  const Json* p = j.is_object() && j.contains("precision") ? &j["precision"] : nullptr;
  if (!p || !p->is_string() || (*p != "fp32" && *p != "bf16")) {
    log::warn(cat(path,
                  ": not a precision record (expected JSON with precision fp32 or bf16); "
                  "ignored, this run decides for itself"));
    return std::nullopt;
  }
  auto time = [&](const char* k) {
    return j.contains(k) && j[k].is_number() ? j[k].get<double>() : 0.0;
  };
  return Decision{*p == "bf16" ? nn::DType::bf16 : nn::DType::f32, time("fp32_ms"),
                  time("bf16_ms")};
}

// Rank 0: records `d` at `path` unless another run recorded first (link() never replaces a
// file, on NFS too), and returns the decision recorded there.
Decision record_first(const std::string& path, const std::string& network, const Decision& d) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  const std::string tmp = cat(path, ".tmp-", getpid());
  const Json j = {{"network", network},
                  {"precision", nn::dtype_name(d.dtype)},
                  {"fp32_ms", d.fp32_ms},
                  {"bf16_ms", d.bf16_ms}};
  std::ofstream out(tmp);
  out << j.dump(2) << "\n";
  out.close();
  // A record written only in part is never linked: others would read it as no record.
  const int linked = out ? ::link(tmp.c_str(), path.c_str()) : -1;
  const int err = out ? errno : EIO;
  fs::remove(tmp, ec);
  if (linked == 0) return d;
  if (err == EEXIST)
    if (std::optional<Decision> first = read_record(path)) return *first;
  log::warn(cat(path, ": cannot record precision: auto's choice (", std::strerror(err),
                "); this run keeps its own"));
  return d;
}

// This rank's forward batch in a run of `global_batch` on comm's ranks.
int64_t forward_batch(const Comm& comm, int64_t global_batch, int64_t micro_batch) {
  const int64_t per_rank = block_range(global_batch, comm.rank(), comm.size()).size();
  return micro_batch > 0 ? std::min(micro_batch, per_rank) : per_rank;
}

// Rank 0's decision on every rank.
Decision bcast(const Comm& comm, const Decision& d) {
  double v[3] = {double(d.dtype == nn::DType::bf16), d.fp32_ms, d.bf16_ms};
  comm.bcast(v, 3);
  return {v[0] > 0 ? nn::DType::bf16 : nn::DType::f32, v[1], v[2]};
}

}  // namespace

std::string auto_precision_record(const std::string& record_dir, const nn::ModelSpec& spec,
                                  int64_t global_batch, int ranks, int64_t micro_batch) {
  return cat(record_dir, "/auto_precision/", network_name(spec, global_batch, ranks, micro_batch),
             ".json");
}

nn::DType timed_auto_precision(const Comm& comm, const nn::ModelSpec& spec, int64_t global_batch,
                               int64_t micro_batch, const std::string& key,
                               const std::string& record_dir) {
  // Every rank of `comm` asks with the same arguments in the same order, so a name is found
  // here on all of them or on none.
  static std::map<std::string, nn::DType> decided;
  const std::string network = network_name(spec, global_batch, comm.size(), micro_batch);
  const std::string path =
      record_dir.empty()
          ? std::string()
          : auto_precision_record(record_dir, spec, global_batch, comm.size(), micro_batch);
  const std::string& known = path.empty() ? network : path;  // the path names the network
  if (auto it = decided.find(known); it != decided.end()) return it->second;
  auto say = [&](nn::DType dtype, const std::string& why) {
    log::info(cat(key, ": auto -> ", nn::dtype_name(dtype), " (", why, ")"));
    decided[known] = dtype;
    return dtype;
  };
  int64_t recorded = 0;
  Decision d;
  if (!path.empty() && comm.is_root())
    if (std::optional<Decision> r = read_record(path)) recorded = 1, d = *r;
  comm.bcast(&recorded, 1);
  if (recorded) {
    d = bcast(comm, d);
    return say(d.dtype, cat("as recorded for this network in ", path, ", timed ", ms(d.fp32_ms),
                            " ms a step in fp32 and ", ms(d.bf16_ms), " ms in bf16"));
  }

  nn::StepTimes t;
  const bool timed = nn::backend_time_training_step(
      spec.backend, spec, int(forward_batch(comm, global_batch, micro_batch)), &t);
  // Every rank has the same backend, so every rank timed or none did.
  if (!comm.allreduce_max(int64_t(timed))) return spec.dtype;
  double sum[2] = {t.fp32_ms, t.bf16_ms};
  comm.allreduce_sum(sum, 2);
  d.fp32_ms = sum[0] / comm.size();
  d.bf16_ms = sum[1] / comm.size();
  const bool untimed = d.fp32_ms < kUntimedStepMs;
  d.dtype = untimed || d.fp32_ms <= d.bf16_ms ? nn::DType::f32 : nn::DType::bf16;
  std::string why =
      cat("one training step of this network at ", forward_batch(comm, global_batch, micro_batch),
          " samples a rank took ", ms(d.fp32_ms), " ms of CPU time in fp32 and ", ms(d.bf16_ms),
          " ms in bf16", comm.size() > 1 ? ", mean of the ranks" : "");
  if (untimed) why += cat("; under ", kUntimedStepMs, " ms a step, fp32");
  if (path.empty()) return say(d.dtype, why);
  Decision first = d;
  if (comm.is_root()) first = record_first(path, network, d);
  first = bcast(comm, first);
  if (first.dtype != d.dtype)
    return say(first.dtype, cat(why, "; but ", path, ", recorded first by another run, says ",
                                nn::dtype_name(first.dtype), ": taken, so that the runs agree"));
  return say(d.dtype, cat(why, "; recorded in ", path));
}

}  // namespace sieve::train
