#include "data/label_noise.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <set>

#include "data/names.hpp"
#include "data/quick_model.hpp"
#include "data/rng.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace sieve::data {
namespace {

constexpr int32_t kKeep = -1;   // target_: row not flipped
constexpr int32_t kShift = -2;  // target_: symmetric flip, the shift drawn from the row's hash
constexpr const char* kPairsKey = "data.label_noise.pairs";
constexpr uint64_t kFolds = 5;  // the quick model's cross-fitting folds

int64_t class_index(const YAML::Node& n, const char* role) {
  int64_t v = -1;
  if (n.IsScalar()) {
    const std::string& s = n.Scalar();
    size_t pos = 0;
    try {
      v = std::stoll(s, &pos, 10);
    } catch (...) {
      pos = 0;
    }
    if (pos != s.size() || s.empty()) v = -1;
  }
  if (v < 0)
    throw UsageError(cat(kPairsKey, ": ", role, " '", n.IsScalar() ? n.Scalar() : std::string("?"),
                         "' is not a class index (expected {from: to, ...} with class indices)"));
  return v;
}

// The training rows' labels (and noise, and pooled pixels when `pixels`), every rank
// producing its block of rows and all of them gathered on every rank in row order.
struct Scan {
  std::vector<int32_t> labels;
  std::vector<uint8_t> noise;  // empty when the source has none
  std::vector<float> x;        // [n, d]
  int64_t d = 0;
};

Scan scan_train(const Source& src, bool pixels, const Comm& comm) {
  const DatasetMeta& m = src.meta();
  const Range mine = block_range(m.rows(Split::Train), comm.rank(), comm.size());
  const PooledShape ps = pooled_shape(m);
  const int64_t d = pixels ? ps.dims() : 0, rn = mine.size(), batch = 256;
  std::vector<int32_t> labels(static_cast<size_t>(rn));
  std::vector<uint8_t> noise(m.has_noise ? size_t(rn) : 0);
  std::vector<float> x(size_t(rn * d));
  all_checked(comm, [&] {
    std::string err;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t a = 0; a < rn; a += batch) {
      try {
        const int64_t cnt = std::min(batch, rn - a);
        Rows rows;
        rows.labels = labels.data() + a;
        if (m.has_noise) rows.noise = noise.data() + a;
        if (!pixels) {
          src.produce_labels(Split::Train, mine.begin + a, cnt, rows);
          continue;
        }
        std::vector<uint8_t> images(m.kind == Kind::Image ? size_t(cnt * m.row_elems()) : 0);
        std::vector<float> features(m.kind == Kind::Tabular ? size_t(cnt * m.row_elems()) : 0);
        rows.images = images.empty() ? nullptr : images.data();
        rows.features = features.empty() ? nullptr : features.data();
        src.produce(Split::Train, mine.begin + a, cnt, rows);
        pool_rows(m, ps, rows.images, rows.features, cnt, x.data() + a * d);
      } catch (const Error& e) {
#pragma omp critical
        if (err.empty()) err = e.what();
      }
    }
    if (!err.empty()) throw Error(err);
  });
  Scan s;
  s.d = d;
  s.labels = comm.allgatherv(labels);
  if (m.has_noise) s.noise = comm.allgatherv(noise);
  if (pixels) s.x = comm.allgatherv(x);
  return s;
}

// The `k` rows of `rows` with the smallest keys (ties: lower row), in that order.
std::vector<int64_t> smallest(std::vector<std::pair<uint64_t, int64_t>> keyed, int64_t k) {
  auto end = keyed.begin() + k;
  std::partial_sort(keyed.begin(), end, keyed.end());
  std::vector<int64_t> out;
  for (auto it = keyed.begin(); it != end; ++it) out.push_back(it->second);
  return out;
}

// data.label_noise.kind projection: the instance-dependent noise of Xia et al. (NeurIPS 2020,
// "Part-dependent label noise"), the benchmark most papers call IDN. Each row flips with its
// own probability, drawn from a normal around the rate (sd 0.1) cut to [0, 1], and goes to the
// wrong class whose random projection of the row's pooled pixels (standardised; one Gaussian
// d x C matrix per labelled class) is largest. Xia et al. sample that class from the softmax
// of the projections; with d of about 256 they are spread by ~16, so the softmax is nearly
// its argmax, which Sieve takes so that the target is a function of the image. Exactly
// `flips` rows are drawn, each with weight its probability (Efraimidis-Spirakis keys
// -log(u) / p: the smallest keys). Unlike `instance` neither choice follows what makes
// classes look alike: which rows flip is random, where they go is a fixed random function
// of the pixels. Returns, per candidate row, its new label or kKeep.
std::vector<int32_t> projection_targets(std::vector<float> x, int64_t d,
                                        const std::vector<int32_t>& y,
                                        const std::vector<int64_t>& rows, int64_t classes,
                                        double rate, uint64_t seed, int64_t flips) {
  const auto n = int64_t(y.size());
  for (int64_t k = 0; k < d; ++k) {
    double sum = 0, sq = 0;
    for (int64_t j = 0; j < n; ++j) sum += x[size_t(j * d + k)];
    const double mean = n ? sum / double(n) : 0;
    for (int64_t j = 0; j < n; ++j) sq += std::pow(x[size_t(j * d + k)] - mean, 2);
    const double sd = n > 1 ? std::sqrt(sq / double(n - 1)) : 0;
    for (int64_t j = 0; j < n; ++j)
      x[size_t(j * d + k)] = float((x[size_t(j * d + k)] - mean) / (sd > 0 ? sd : 1.0));
  }
  std::vector<std::pair<double, int64_t>> keyed(static_cast<size_t>(n));  // (-log(u) / p, row)
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < n; ++j) {
    Rng rng(hash3(seed, uint64_t(rows[size_t(j)]), 5));
    double p = -1;
    while (p < 0 || p > 1) p = rate + 0.1 * rng.normal();
    const double u = (double(rng.next() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    keyed[size_t(j)] = {p > 0 ? -std::log(u) / p : HUGE_VAL, rows[size_t(j)]};
  }
  std::vector<size_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), size_t(0));
  std::partial_sort(order.begin(), order.begin() + flips, order.end(),
                    [&](size_t a, size_t b) { return keyed[a] < keyed[b]; });
  // The flipped rows by label; one label's projection (d x classes, drawn from the seed) at a
  // time, so that memory stays d x classes whatever the number of classes.
  std::vector<std::vector<size_t>> by_label(static_cast<size_t>(classes));
  for (int64_t k = 0; k < flips; ++k)
    by_label[size_t(y[order[size_t(k)]])].push_back(order[size_t(k)]);
  std::vector<int32_t> out(size_t(n), kKeep);
  std::vector<double> w(size_t(d * classes));  // [dim][class]
  for (int64_t label = 0; label < classes; ++label) {
    const std::vector<size_t>& mine = by_label[size_t(label)];
    if (mine.empty()) continue;
    Rng rng(hash3(seed, uint64_t(label), 4));
    for (double& v : w) v = rng.normal();
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < mine.size(); ++i) {
      const size_t j = mine[i];
      double best = -HUGE_VAL;
      for (int64_t c = 0; c < classes; ++c) {
        if (c == label) continue;
        double s = 0;
        for (int64_t k = 0; k < d; ++k)
          s += double(x[j * size_t(d) + size_t(k)]) * w[size_t(k * classes + c)];
        if (s > best) best = s, out[j] = int32_t(c);
      }
    }
  }
  return out;
}

class LabelNoiseSource final : public Source {
 public:
  LabelNoiseSource(std::unique_ptr<Source> inner, const LabelNoiseOptions& opt, const Comm& comm)
      : inner_(std::move(inner)), meta_(inner_->meta()), seed_(opt.seed) {
    const DatasetMeta& im = inner_->meta();
    const int64_t C = meta_.num_classes, n = meta_.rows(Split::Train);
    SIEVE_CHECK(C >= 2, "data.label_noise needs at least 2 classes, found ", C);
    for (auto [from, to] : opt.pairs)
      if (from >= C || to >= C)
        throw UsageError(cat(kPairsKey, ": class ", std::max(from, to), " out of range 0..", C - 1,
                             " (", C, " classes)"));
    const auto flips = int64_t(std::llround(opt.rate * double(n)));
    const double t0 = now();
    const bool model = opt.kind == "instance" || (opt.kind == "pairwise" && opt.pairs.empty());
    const bool pixels = model || opt.kind == "projection";
    Scan sc;
    if (opt.kind != "symmetric" || im.has_noise) sc = scan_train(*inner_, pixels, comm);
    // Candidates: the rows the source left clean (all of them for a real source).
    std::vector<int64_t> cand;
    for (int64_t r = 0; r < n; ++r)
      if (sc.noise.empty() || sc.noise[size_t(r)] == kNoiseClean) cand.push_back(r);
    if (flips > int64_t(cand.size()))
      throw UsageError(cat("data.label_noise.rate=", opt.rate, ": ", flips, " flips asked but only ",
                           cand.size(), " of ", n, " training rows are left clean by the source"));
    auto key = [&](int64_t r) { return hash3(seed_, uint64_t(r), 1); };
    target_.assign(size_t(n), kKeep);
    std::vector<int64_t> partner;
    std::string model_note;
    if (opt.kind == "symmetric") {
      std::vector<std::pair<uint64_t, int64_t>> keyed;
      for (int64_t r : cand) keyed.push_back({key(r), r});
      for (int64_t r : smallest(std::move(keyed), flips)) target_[size_t(r)] = kShift;
    } else {
      std::vector<int32_t> y;
      for (int64_t r : cand) y.push_back(sc.labels[size_t(r)]);
      QuickModel q;
      std::vector<float> x;
      if (int64_t(cand.size()) == n) {
        x = std::move(sc.x);  // every row a candidate: no copy
      } else if (pixels) {
        x.resize(cand.size() * size_t(sc.d));
        for (size_t j = 0; j < cand.size(); ++j)
          std::copy_n(sc.x.data() + cand[j] * sc.d, sc.d, x.data() + j * size_t(sc.d));
        sc.x = {};
      }
      const PooledShape ps = pooled_shape(meta_);
      const std::string inputs = meta_.kind == Kind::Image ? cat(ps.gh, "x", ps.gw, "x", ps.c, " pooled pixels")
                                                           : cat(ps.c, " features");
      if (model) {
        std::vector<uint8_t> fold(cand.size());
        for (size_t j = 0; j < cand.size(); ++j)
          fold[j] = uint8_t(hash3(seed_, uint64_t(cand[j]), 3) % kFolds);
        q = cross_fit_lda(x, sc.d, y, fold, C);
        model_note = cat("; quick model: LDA on ", inputs, ", out-of-fold accuracy ",
                         std::round(q.accuracy * 1000) / 1000, ", ", std::round((now() - t0) * 100) / 100, " s");
      }
      if (opt.kind == "pairwise") {
        partner.assign(size_t(C), -1);
        if (opt.pairs.empty()) {
          auto p = most_confused(q, y);
          partner.assign(p.begin(), p.end());
        }
        for (auto [from, to] : opt.pairs) partner[size_t(from)] = to;
        flip_pairwise(cand, y, partner, flips, key);
      } else if (opt.kind == "projection") {
        const std::vector<int32_t> t =
            projection_targets(std::move(x), sc.d, y, cand, C, opt.rate, seed_, flips);
        for (size_t j = 0; j < cand.size(); ++j) target_[size_t(cand[j])] = t[j];
        model_note = cat("; each row's flip probability ~ N(", opt.rate, ", 0.1) in [0, 1], to the wrong "
                         "class of largest random projection of its ", inputs);
      } else {
        std::vector<int32_t> wrong;
        std::vector<double> margin;
        wrong_class_margins(q, y, wrong, margin);
        // Lexicographic (margin, key): the margin decides, the seeded hash breaks ties.
        std::vector<size_t> order(cand.size());
        std::iota(order.begin(), order.end(), size_t(0));
        std::partial_sort(order.begin(), order.begin() + flips, order.end(), [&](size_t a, size_t b) {
          if (margin[a] != margin[b]) return margin[a] < margin[b];
          return std::make_pair(key(cand[a]), cand[a]) < std::make_pair(key(cand[b]), cand[b]);
        });
        for (int64_t k = 0; k < flips; ++k) target_[size_t(cand[order[size_t(k)]])] = wrong[order[size_t(k)]];
      }
    }
    meta_.has_noise = true;
    meta_.has_clean_labels = true;
    meta_.injected = {opt.kind, opt.rate, int64_t(opt.seed), flips, partner};
    // Symmetric keeps the description it always had (the attribute is part of the file).
    meta_.description += opt.kind == "symmetric"
                             ? cat("; ", flips, " of ", n, " training labels flipped (data.label_noise=",
                                   opt.rate, ")")
                             : cat("; ", flips, " of ", n, " training labels flipped (data.label_noise: ",
                                   opt.kind, " ", opt.rate, ")");
    std::string map;
    for (int64_t c = 0; c < int64_t(partner.size()); ++c)
      if (partner[size_t(c)] >= 0)
        map += cat(map.empty() ? "; map " : ", ", meta_.class_names[size_t(c)], "->",
                   meta_.class_names[size_t(partner[size_t(c)])]);
    log::info(cat("label noise: ", opt.kind, ", rate ", opt.rate, ", seed ", opt.seed, ": ", flips, " of ",
                  n, " training labels flipped", map, model_note));
  }

  const DatasetMeta& meta() const override { return meta_; }

  void produce(Split split, int64_t row0, int64_t count, const Rows& out) const override {
    inner_->produce(split, row0, count, inner_rows(out));
    apply(split, row0, count, out);
  }
  void produce_labels(Split split, int64_t row0, int64_t count, const Rows& out) const override {
    inner_->produce_labels(split, row0, count, inner_rows(out));
    apply(split, row0, count, out);
  }

  std::vector<double> exact_mean() const override { return inner_->exact_mean(); }
  std::vector<double> exact_std() const override { return inner_->exact_std(); }

 private:
  static double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }

  // Each mapped class's share of `flips` (in proportion to its clean rows), its rows of
  // smallest key to its partner.
  template <typename Key>
  void flip_pairwise(const std::vector<int64_t>& cand, const std::vector<int32_t>& y,
                     const std::vector<int64_t>& partner, int64_t flips, Key key) {
    const int64_t C = meta_.num_classes;
    std::vector<std::vector<std::pair<uint64_t, int64_t>>> by_class(static_cast<size_t>(C));
    for (size_t j = 0; j < cand.size(); ++j)
      if (partner[size_t(y[j])] >= 0) by_class[size_t(y[j])].push_back({key(cand[j]), cand[j]});
    std::vector<int64_t> sizes(static_cast<size_t>(C));
    for (int64_t c = 0; c < C; ++c) sizes[size_t(c)] = int64_t(by_class[size_t(c)].size());
    const int64_t mapped = std::accumulate(sizes.begin(), sizes.end(), int64_t(0));
    if (flips > mapped)
      throw UsageError(cat("data.label_noise.rate: ", flips, " flips asked but the classes of ", kPairsKey,
                           " hold only ", mapped, " training rows"));
    const std::vector<int64_t> counts = proportional_counts(sizes, flips);
    for (int64_t c = 0; c < C; ++c)
      for (int64_t r : smallest(std::move(by_class[size_t(c)]), counts[size_t(c)]))
        target_[size_t(r)] = int32_t(partner[size_t(c)]);
  }

  Rows inner_rows(const Rows& out) const {
    Rows in = out;
    if (!inner_->meta().has_noise) in.noise = nullptr;
    if (!inner_->meta().has_clean_labels) in.clean_labels = nullptr;
    return in;
  }

  void apply(Split split, int64_t row0, int64_t count, const Rows& out) const {
    if (out.noise && !inner_->meta().has_noise) std::fill_n(out.noise, count, uint8_t(kNoiseClean));
    if (out.clean_labels && !inner_->meta().has_clean_labels) std::copy_n(out.labels, count, out.clean_labels);
    if (split != Split::Train) return;
    const int64_t C = meta_.num_classes;
    for (int64_t i = 0; i < count; ++i) {
      const int64_t row = row0 + i;
      const int32_t t = target_[size_t(row)];
      if (t == kKeep) continue;
      if (t == kShift) {
        const auto shift = int64_t(1 + hash3(seed_, uint64_t(row), 2) % uint64_t(C - 1));
        out.labels[i] = int32_t((int64_t(out.labels[i]) + shift) % C);
      } else {
        out.labels[i] = t;
      }
      if (out.noise) out.noise[i] = uint8_t(kNoiseLabel);
    }
  }

  std::unique_ptr<Source> inner_;
  DatasetMeta meta_;
  uint64_t seed_;
  std::vector<int32_t> target_;  // [train rows]: kKeep, kShift or the new label
};

}  // namespace

LabelNoiseOptions label_noise_options(const Config& cfg) {
  LabelNoiseOptions o;
  o.rate = cfg.get_float("data.label_noise.rate");
  o.kind = cfg.get_string("data.label_noise.kind");
  const int64_t s = cfg.get_int("data.label_noise.seed");
  o.seed = s >= 0 ? uint64_t(s) : data_seed(cfg);
  std::set<int64_t> seen;
  for (const auto& kv : cfg.get_tree(kPairsKey)) {
    const int64_t from = class_index(kv.first, "class"), to = class_index(kv.second, "partner of class");
    if (!seen.insert(from).second) throw UsageError(cat(kPairsKey, ": class ", from, " appears twice"));
    if (from == to) throw UsageError(cat(kPairsKey, ": class ", from, " mapped to itself"));
    o.pairs.push_back({from, to});
  }
  if (!o.pairs.empty() && o.kind != "pairwise")
    throw UsageError(cat(kPairsKey, ": only for data.label_noise.kind pairwise (the kind is ", o.kind, ")"));
  return o;
}

std::unique_ptr<Source> with_label_noise(std::unique_ptr<Source> inner, const LabelNoiseOptions& opt,
                                         const Comm& comm) {
  return std::make_unique<LabelNoiseSource>(std::move(inner), opt, comm);
}

std::vector<int64_t> proportional_counts(const std::vector<int64_t>& sizes, int64_t total) {
  const int64_t sum = std::accumulate(sizes.begin(), sizes.end(), int64_t(0));
  std::vector<int64_t> out(sizes.size(), 0);
  if (sum == 0) return out;
  std::vector<std::pair<int64_t, size_t>> rem;  // (-remainder, class): largest first
  int64_t given = 0;
  for (size_t c = 0; c < sizes.size(); ++c) {
    const __int128 q = __int128(total) * sizes[c];
    out[c] = int64_t(q / sum);
    given += out[c];
    rem.push_back({-int64_t(q % sum), c});
  }
  std::sort(rem.begin(), rem.end());
  for (int64_t k = 0; k < total - given; ++k) ++out[rem[size_t(k)].second];
  return out;
}

}  // namespace sieve::data
