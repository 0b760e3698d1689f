#include "report/estimates.hpp"

#include <algorithm>
#include <cmath>

#include "nn/model.hpp"
#include "util/error.hpp"

namespace sieve::report {

double ring_allreduce_s(double bytes, int64_t p, const NetworkModel& net) {
  if (p <= 1) return 0.0;
  const double bw_bytes_per_s = net.bandwidth_gbps * 1e9 / 8.0;
  const double pm1 = double(p - 1);
  return 2.0 * pm1 / double(p) * bytes / bw_bytes_per_s + 2.0 * pm1 * net.latency_us * 1e-6;
}

std::vector<int64_t> rank_counts(int64_t max_ranks) {
  std::vector<int64_t> out;
  for (int64_t p = 1; p < max_ranks; p *= 2) out.push_back(p);
  out.push_back(max_ranks);
  return out;
}

double memory_per_rank(const EstimateInputs& in, double b) {
  const double m = double(in.num_params);
  // fp32 master params + grads (fp32 or bf16) + one momentum buffer (SGD).
  return 4.0 * m + double(in.grad_bytes_per_param) * m + 4.0 * m +
         std::max(b, 1.0) * in.activation_bytes_per_sample;
}

Estimates estimate(const EstimateInputs& in) {
  SIEVE_ASSERT(in.images_per_s_per_rank > 0, "images/s per rank must be positive");
  Estimates e;
  e.dataset_bytes = double(in.num_samples) * double(in.bytes_per_sample);
  e.param_bytes = 4.0 * double(in.num_params);
  e.grad_bytes = double(in.grad_bytes_per_param) * double(in.num_params);
  const bool weak = in.per_rank_batch > 0;
  const double b1 = weak ? double(in.per_rank_batch) : double(in.global_batch);
  e.memory_per_rank_bytes = memory_per_rank(in, b1);
  for (int64_t p : rank_counts(in.max_ranks)) {
    ScalingRow r;
    r.ranks = p;
    r.per_rank_batch = weak ? double(in.per_rank_batch) : double(in.global_batch) / double(p);
    r.feasible = r.per_rank_batch >= 1.0;
    r.comp_s = r.per_rank_batch / in.images_per_s_per_rank;
    r.comm_s = ring_allreduce_s(e.grad_bytes, p, in.net);
    r.step_s = in.overlap ? std::max(r.comp_s, r.comm_s) : r.comp_s + r.comm_s;
    r.images_per_s = double(p) * r.per_rank_batch / r.step_s;
    r.efficiency = r.comp_s / r.step_s;
    e.rows.push_back(r);
  }
  return e;
}

std::vector<StrategyPoint> predict_strategies(const StrategyModelInputs& in, int64_t max_ranks) {
  const double a = in.latency_s, bw = in.bandwidth_bytes_per_s, G = in.grad_bytes;
  auto ring = [&](double n, double p) {
    return p > 1 ? 2 * (p - 1) * a + 2 * (p - 1) / p * n / bw : 0.0;
  };
  auto small = [&](double p) { return p > 1 ? 2 * std::ceil(std::log2(p)) * a : 0.0; };
  std::vector<StrategyPoint> out;
  for (int64_t pi : rank_counts(max_ranks)) {
    const double p = double(pi);
    const double tc = in.compute_s_per_sample * in.per_rank_batch;
    const double tb = in.backward_fraction * tc;
    const double k = std::max(1.0, std::ceil(G / in.bucket_bytes));
    const double wire = p > 1 ? 2 * (p - 1) / p * G / bw : 0.0;
    const double buckets = p > 1 ? std::max(ring(G / k, p), k * 2 * (p - 1) * a + wire - tb) : 0.0;
    const double rounds = std::max(
        {1.0,
         std::min(double(std::max(1, in.tensors)), std::floor(tb / std::max(in.cycle_s, 1e-9))),
         std::ceil(G / in.fusion_bytes)});
    const double fusion =
        p > 1 ? in.cycle_s / 2 + small(p) +
                    std::max(ring(G / rounds, p),
                             rounds * 2 * (p - 1) * a + wire - std::max(0.0, tb - in.cycle_s))
              : 0.0;
    const double shard = G / std::max(1, in.servers), depth = p > 1 ? std::ceil(std::log2(p)) : 0;
    const double push = depth * (a + shard / bw), pull = push;
    const double ps = std::max(0.0, push - tb) + pull;
    for (auto [name, exposed] : {std::pair<const char*, double>{"buckets", buckets},
                                 {"fusion-queue", fusion},
                                 {"parameter-server", ps}}) {
      StrategyPoint r;
      r.strategy = name;
      r.ranks = pi;
      r.compute_s = tc;
      r.exposed_s = exposed + small(p);
      r.step_s = tc + r.exposed_s;
      r.efficiency = tc / r.step_s;
      out.push_back(r);
    }
  }
  return out;
}

namespace {

nn::ModelSpec spec_from(const Config& cfg, const std::string& s, const std::vector<int64_t>& shape,
                        int64_t num_classes) {
  nn::ModelSpec spec = nn::model_spec_from(cfg, s);
  spec.num_classes = int(num_classes);
  if (shape.size() == 3) {  // [H, W, C]
    spec.in_height = int(shape[0]);
    spec.in_width = int(shape[1]);
    spec.in_channels = int(shape[2]);
  } else if (shape.size() == 1) {
    spec.in_features = int(shape[0]);
  }
  return spec;
}

}  // namespace

int64_t model_param_count(const Config& cfg, const std::string& section,
                          const std::vector<int64_t>& sample_shape, int64_t num_classes) {
  auto model = nn::make_model(spec_from(cfg, section, sample_shape, num_classes));
  // Sum of the named tensors: num_params() also counts the 16-float alignment padding.
  int64_t m = 0;
  for (const auto& p : model->param_info()) m += int64_t(p.size);
  return m;
}

double activation_bytes_estimate(const Config& cfg, const std::string& section,
                                 const std::vector<int64_t>& shape) {
  const std::string arch = cfg.get_string(section + ".model.arch");
  double floats = 0;
  if (arch == "mlp" || shape.size() == 1) {
    double in = 1;
    for (auto d : shape) in *= double(d);
    floats = in;
    for (auto h : cfg.get_int_list(section + ".model.hidden")) floats += 2.0 * double(h);
    return 4.0 * floats;
  }
  const double width = cfg.get_float(section + ".model.width");
  const bool imagenet = cfg.get_string(section + ".model.stem") == "imagenet";
  const bool bottleneck = arch == "resnet50" || arch == "resnet101" || arch == "resnet152";
  std::vector<int> blocks = arch == "resnet18"    ? std::vector<int>{2, 2, 2, 2}
                            : arch == "resnet101" ? std::vector<int>{3, 4, 23, 3}
                            : arch == "resnet152" ? std::vector<int>{3, 8, 36, 3}
                                                  : std::vector<int>{3, 4, 6, 3};
  auto w = [&](int base) { return std::max(1.0, std::round(base * width)); };
  double h = double(shape[0]), wd = double(shape[1]);
  double c = w(64);
  if (imagenet) h = std::ceil(h / 2), wd = std::ceil(wd / 2);
  floats += double(shape[0] * shape[1] * shape[2]) + 2.0 * c * h * wd;  // input, stem conv+BN
  if (imagenet) h = std::ceil(h / 2), wd = std::ceil(wd / 2), floats += c * h * wd;
  const int base[4] = {64, 128, 256, 512};
  for (int l = 0; l < 4; ++l) {
    const double planes = w(base[l]), cout = planes * (bottleneck ? 4 : 1);
    for (int b = 0; b < blocks[l]; ++b) {
      const bool down = b == 0 && l > 0;
      const double h_out = down ? std::ceil(h / 2) : h, w_out = down ? std::ceil(wd / 2) : wd;
      // conv + BN output of every step, the downsample pair, the block output (add+ReLU).
      // Bottleneck: 1x1 (input resolution), 3x3 (strided), 1x1 expand; basic: two 3x3.
      const double steps = bottleneck ? 2.0 * planes * h * wd + 2.0 * planes * h_out * w_out +
                                            2.0 * cout * h_out * w_out
                                      : 4.0 * cout * h_out * w_out;
      floats += steps + cout * h_out * w_out;
      if (b == 0 && (down || c != cout)) floats += 2.0 * cout * h_out * w_out;
      h = h_out, wd = w_out, c = cout;
    }
  }
  floats += c + double(1);  // pooled features (+ logits, negligible)
  return 4.0 * floats;
}

}  // namespace sieve::report
