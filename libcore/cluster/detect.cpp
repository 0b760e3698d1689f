#include "cluster/detect.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "embed/knn.hpp"
#include "util/error.hpp"

namespace sieve::cluster {

Detection detect_knn_vote(const Comm& comm, const float* x, int64_t n, int d,
                          const int32_t* labels, int k, double threshold) {
  SIEVE_CHECK(k >= 1 && int64_t(k) < n, "knn detector: k = ", k, " needs 1 <= k < samples (",
              n, ")");
  // Cosine distance: the penultimate features of a ReLU network differ mostly in scale
  // between easy and hard samples, which should not decide who the neighbours are.
  std::vector<float> xn(size_t(n) * d);
  for (int64_t i = 0; i < n; ++i) {
    double s = 0;
    for (int j = 0; j < d; ++j) s += double(x[i * d + j]) * x[i * d + j];
    const float inv = s > 0 ? float(1.0 / std::sqrt(s)) : 0.0f;
    for (int j = 0; j < d; ++j) xn[size_t(i) * d + j] = x[i * d + j] * inv;
  }
  Range r = block_range(n, comm.rank(), comm.size());
  std::vector<int32_t> idx(size_t(r.size()) * k);
  std::vector<float> d2(size_t(r.size()) * k);
  if (r.size() > 0) embed::knn_exact(xn.data(), n, d, k, r.begin, r.end, idx.data(), d2.data());
  Detection det;
  det.method = "knn";
  det.inputs = "penultimate features (cosine k-NN)";
  det.score.assign(size_t(n), 0.0f);
  for (int64_t q = 0; q < r.size(); ++q) {
    int disagree = 0;
    for (int j = 0; j < k; ++j)
      if (labels[idx[size_t(q) * k + j]] != labels[r.begin + q]) ++disagree;
    det.score[size_t(r.begin + q)] = float(disagree) / float(k);
  }
  comm.allreduce_sum(det.score.data(), det.score.size());  // disjoint rows: the sum gathers
  det.flag.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) det.flag[size_t(i)] = double(det.score[size_t(i)]) > threshold;
  return det;
}

Detection detect_confident(const float* p, int64_t n, int classes, const int32_t* labels) {
  // Per-class threshold: the mean self-confidence of the samples given that label.
  std::vector<double> sum(size_t(classes), 0.0);
  std::vector<int64_t> cnt(size_t(classes), 0);
  for (int64_t i = 0; i < n; ++i) {
    const int y = labels[i];
    SIEVE_CHECK(y >= 0 && y < classes, "confident detector: label ", y, " of row ", i,
                " is outside the ", classes, " classes of the probabilities");
    sum[size_t(y)] += p[i * classes + y];
    ++cnt[size_t(y)];
  }
  std::vector<double> t(size_t(classes), 0.0);
  for (int c = 0; c < classes; ++c) t[size_t(c)] = cnt[size_t(c)] ? sum[size_t(c)] / cnt[size_t(c)] : 1.0;
  Detection det;
  det.method = "confident";
  det.inputs = "class probabilities (confident joint)";
  det.score.resize(size_t(n));
  det.flag.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    const float* pi = p + i * classes;
    const int y = labels[i];
    int best = -1;
    float other = -1.0f;
    for (int j = 0; j < classes; ++j) {
      if (pi[j] >= t[size_t(j)] && (best < 0 || pi[j] > pi[best])) best = j;
      if (j != y) other = std::max(other, pi[j]);
    }
    det.flag[size_t(i)] = best >= 0 && best != y;
    det.score[size_t(i)] = classes > 1 ? other - pi[y] : 0.0f;
  }
  return det;
}

std::vector<float> core_distance_per_class(const float* x, int64_t n, int d,
                                           const int32_t* labels, int min_samples) {
  std::unordered_map<int32_t, std::vector<int64_t>> rows;
  for (int64_t i = 0; i < n; ++i) rows[labels[i]].push_back(i);
  std::vector<float> score(size_t(n), -1.0f);
  const int k = std::max(1, min_samples - 1);  // DBSCAN counts the point itself
  std::vector<float> sub, d2;
  std::vector<int32_t> idx;
  std::vector<int64_t> small;
  for (auto& [cls, r] : rows) {
    const int64_t m = int64_t(r.size());
    if (m <= k) {
      small.insert(small.end(), r.begin(), r.end());
      continue;
    }
    sub.resize(size_t(m) * d);
    for (int64_t i = 0; i < m; ++i)
      std::copy(x + r[size_t(i)] * d, x + (r[size_t(i)] + 1) * d, sub.data() + size_t(i) * d);
    idx.resize(size_t(m) * k);
    d2.resize(size_t(m) * k);
    embed::knn_exact(sub.data(), m, d, k, 0, m, idx.data(), d2.data());
    for (int64_t i = 0; i < m; ++i)
      score[size_t(r[size_t(i)])] = std::sqrt(std::max(0.0f, d2[size_t(i) * k + k - 1]));
  }
  float top = 0.0f;
  for (float s : score) top = std::max(top, s);
  for (int64_t i : small) score[size_t(i)] = top;
  return score;
}

DetectionScore score_detection(const Detection& d, const std::vector<uint8_t>& truth,
                               size_t max_points) {
  const size_t n = truth.size();
  SIEVE_CHECK(d.score.size() == n && d.flag.size() == n, "score_detection: ", d.method, " has ",
              d.score.size(), " scores for ", n, " truth flags");
  DetectionScore s;
  for (size_t i = 0; i < n; ++i) {
    s.truth += truth[i] != 0;
    s.flagged += d.flag[i] != 0;
    s.hits += (truth[i] != 0) && (d.flag[i] != 0);
  }
  s.precision = s.flagged ? double(s.hits) / double(s.flagged) : 0.0;
  s.recall = s.truth ? double(s.hits) / double(s.truth) : 0.0;
  s.f1 = s.precision + s.recall > 0 ? 2 * s.precision * s.recall / (s.precision + s.recall) : 0.0;
  if (s.truth == 0) return s;
  // PR curve over the score: sort descending, one point per distinct score (tied samples
  // enter together, so the curve does not depend on the order of equal scores).
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return d.score[a] > d.score[b]; });
  std::vector<PrPoint> full;
  int64_t tp = 0;
  double prev_recall = 0.0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && d.score[order[j]] == d.score[order[i]]) tp += truth[order[j++]] != 0;
    const double prec = double(tp) / double(j), rec = double(tp) / double(s.truth);
    s.average_precision += prec * (rec - prev_recall);
    prev_recall = rec;
    full.push_back({d.score[order[i]], prec, rec});
    i = j;
  }
  // Thin to at most max_points, keeping the first and last points.
  const size_t m = full.size();
  if (m <= max_points || max_points < 2) {
    s.curve = std::move(full);
  } else {
    for (size_t q = 0; q < max_points; ++q) s.curve.push_back(full[q * (m - 1) / (max_points - 1)]);
  }
  return s;
}

std::vector<uint8_t> align_truth(const std::vector<int64_t>& ids,
                                 const std::vector<int64_t>& truth_ids,
                                 const std::vector<uint8_t>& truth, const std::string& what) {
  SIEVE_CHECK(truth_ids.size() == truth.size(), what, ": /train/sample_id has ", truth_ids.size(),
              " rows, /train/noise_truth ", truth.size());
  std::unordered_map<int64_t, uint8_t> by_id;
  by_id.reserve(truth.size());
  for (size_t i = 0; i < truth.size(); ++i) by_id[truth_ids[i]] = truth[i] != 0;
  std::vector<uint8_t> out(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    auto it = by_id.find(ids[i]);
    SIEVE_CHECK(it != by_id.end(), what, ": sample id ", ids[i],
                " of the filter input has no /train/noise_truth entry (files from different "
                "datasets?)");
    out[i] = it->second;
  }
  return out;
}

}  // namespace sieve::cluster
