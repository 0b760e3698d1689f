#include "cluster/detect.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "embed/knn.hpp"
#include "util/error.hpp"

namespace sieve::cluster {

namespace {

// The labels must index the probabilities' columns (checked on the whole labels, so every
// rank fails alike).
void check_labels(const int32_t* labels, int64_t n, int classes) {
  for (int64_t i = 0; i < n; ++i)
    SIEVE_CHECK(labels[i] >= 0 && labels[i] < classes, "confident detector: label ", labels[i],
                " of row ", i, " is outside the ", classes, " classes of the probabilities");
}

// How far below the in-sample mean self-confidence a class's held-out mean must lie, in its
// standard errors, to replace it as the class's threshold: a one-sided test at about 2.3 %,
// so that a few held-out samples (a small table's tenth) keep the in-sample threshold unless
// the difference is plain.
constexpr double kHeldoutThresholdZ = 2.0;

// rows == nullptr: the rows of p are 0..m-1 and comm is null (one process). heldout (whole
// rows, or nullptr): the rows pretrain never trained on.
Detection confident(const Comm* comm, const float* p, const int64_t* rows, int64_t m, int classes,
                    int64_t n, const int32_t* labels, const uint8_t* heldout,
                    NoiseEstimate* estimate) {
  check_labels(labels, n, classes);
  auto row_of = [&](int64_t q) { return rows ? rows[q] : q; };
  // Per-class threshold: the mean self-confidence of the samples given that label. The sums
  // run along the ranks in order (rank r continues rank r-1's), not as an allreduce: the same
  // additions in the same order as on one rank, so the thresholds are bit-identical on any
  // rank count. Beside them, the held-out rows' sums and sums of squares.
  const bool ranks = comm && comm->size() > 1;
  constexpr int kTag = 4711;
  const size_t C = size_t(classes);
  std::vector<double> sum(3 * C, 0.0);  // all rows | held-out rows | their squares
  std::vector<int64_t> cnt(2 * C, 0);   // all rows | held-out rows
  if (ranks && comm->rank() > 0) comm->recv(sum.data(), sum.size(), comm->rank() - 1, kTag);
  for (int64_t q = 0; q < m; ++q) {
    const int64_t i = row_of(q);
    const size_t y = size_t(labels[i]);
    const double self = p[q * classes + int64_t(y)];
    sum[y] += self;
    ++cnt[y];
    if (heldout && heldout[i]) {
      sum[C + y] += self;
      sum[2 * C + y] += self * self;
      ++cnt[C + y];
    }
  }
  if (ranks) {
    if (comm->rank() + 1 < comm->size()) comm->send(sum.data(), sum.size(), comm->rank() + 1, kTag);
    comm->bcast(sum.data(), sum.size(), comm->size() - 1);
    comm->allreduce_sum(cnt.data(), cnt.size());
  }
  std::vector<double> t(C, 0.0);
  std::vector<uint8_t> from_heldout(C, 0);
  for (size_t c = 0; c < C; ++c) {
    t[c] = cnt[c] ? sum[c] / double(cnt[c]) : 1.0;
    // In-sample probabilities are fitted: a class's trained samples sit more confident than
    // any sample of that class the model did not train as that class, and a flipped sample
    // (trained under another label) is one of those. Its true class's probability then falls
    // short of the in-sample mean although the model prefers that class (Fashion-MNIST with
    // 20 % pairwise noise, long-tailed: 97 % of the Trousers labelled Dress predicted Trouser,
    // 36 % above Trouser's in-sample threshold), and the joint under-counts. The held-out
    // samples are the same class never trained on, so where their mean is plainly lower it is
    // the threshold (docs/detection.md).
    const int64_t nh = cnt[C + c];
    if (nh < 2) continue;
    const double mean = sum[C + c] / double(nh);
    const double var = std::max(0.0, (sum[2 * C + c] - double(nh) * mean * mean) / double(nh - 1));
    if (t[c] - mean > kHeldoutThresholdZ * std::sqrt(var / double(nh))) {
      t[c] = mean;
      from_heldout[c] = 1;
    }
  }
  Detection det;
  det.method = "confident";
  det.inputs = "class probabilities (confident joint)";
  det.score.assign(size_t(n), 0.0f);
  det.flag.assign(size_t(n), 0);
  // The confident joint (calibrate.hpp): given label x confidently predicted class.
  std::vector<int64_t> joint(size_t(classes) * size_t(classes), 0);
  for (int64_t q = 0; q < m; ++q) {
    const float* pi = p + q * classes;
    const int64_t i = row_of(q);
    const int y = labels[i];
    int best = -1;
    float other = -1.0f;
    for (int j = 0; j < classes; ++j) {
      if (pi[j] >= t[size_t(j)] && (best < 0 || pi[j] > pi[best])) best = j;
      if (j != y) other = std::max(other, pi[j]);
    }
    det.flag[size_t(i)] = best >= 0 && best != y;
    if (best >= 0) ++joint[size_t(y) * classes + best];
    det.score[size_t(i)] = classes > 1 ? other - pi[y] : 0.0f;
  }
  if (ranks) {  // disjoint rows: the sums gather
    comm->allreduce_sum(det.score.data(), det.score.size());
    comm->allreduce_sum(det.flag.data(), det.flag.size());
    comm->allreduce_sum(joint.data(), joint.size());
  }
  if (estimate) {
    cnt.resize(C);  // the class sizes
    *estimate = estimate_from_joint(std::move(joint), std::move(cnt), classes);
    estimate->threshold = std::move(t);
    estimate->threshold_from_heldout = std::move(from_heldout);
  }
  return det;
}

}  // namespace

Detection detect_confident(const Comm& comm, const RowShare& probs, int64_t n,
                           const int32_t* labels, NoiseEstimate* estimate, const uint8_t* heldout) {
  return confident(&comm, probs.x.data(), probs.rows.data(), probs.size(), probs.width, n, labels,
                   heldout, estimate);
}

Detection detect_confident(const float* p, int64_t n, int classes, const int32_t* labels,
                           NoiseEstimate* estimate, const uint8_t* heldout) {
  return confident(nullptr, p, nullptr, n, classes, n, labels, heldout, estimate);
}

Detection detect_posterior(const Comm& comm, const RowShare& probs, int64_t n,
                           const int32_t* labels, const std::vector<double>& transition) {
  SIEVE_CHECK(transition.size() == size_t(probs.width) * size_t(probs.width),
              "posterior detector: ", probs.width,
              " probability columns for a label transition of ", transition.size(), " cells");
  check_labels(labels, n, probs.width);
  Detection det;
  det.method = "posterior";
  det.inputs = "class probabilities (the noise's label transition)";
  det.score.assign(size_t(n), 0.0f);
  for (int64_t q = 0; q < probs.size(); ++q) {
    const int64_t i = probs.rows[size_t(q)];
    det.score[size_t(i)] = float(wrong_label_posterior(probs.x.data() + q * probs.width, labels[i],
                                                       transition, probs.width));
  }
  if (comm.size() > 1) comm.allreduce_sum(det.score.data(), det.score.size());  // disjoint rows
  return det;
}

Detection detect_knn_posterior(const Comm& comm, const NeighbourLists& neighbours, int64_t n,
                               const int32_t* labels, const std::vector<double>& transition,
                               int classes) {
  const int k = neighbours.k;
  SIEVE_CHECK(transition.size() == size_t(classes) * size_t(classes),
              "knn_posterior detector: a label transition of ", transition.size(), " cells for ",
              classes, " classes");
  SIEVE_CHECK(neighbours.lists.size() == neighbours.rows.size() * size_t(k),
              "knn_posterior detector: ", neighbours.lists.size(), " neighbour entries for ",
              neighbours.rows.size(), " rows of ", k);
  check_labels(labels, n, classes);
  Detection det;
  det.method = "knn_posterior";
  det.inputs = "penultimate features (cosine k-NN) + the noise's label transition";
  det.score.assign(size_t(n), 0.0f);
  std::vector<float> shares(static_cast<size_t>(classes));
  const float total = float(k) + float(classes) * float(kNeighbourVotePrior);
  for (size_t q = 0; q < neighbours.rows.size(); ++q) {
    std::fill(shares.begin(), shares.end(), float(kNeighbourVotePrior));
    for (int j = 0; j < k; ++j) shares[size_t(labels[neighbours.lists[q * size_t(k) + j]])] += 1;
    for (auto& v : shares) v /= total;
    const int64_t i = neighbours.rows[q];
    det.score[size_t(i)] =
        float(wrong_label_posterior(shares.data(), labels[i], transition, classes));
  }
  if (comm.size() > 1) comm.allreduce_sum(det.score.data(), det.score.size());  // disjoint rows
  return det;
}

std::vector<float> core_distance_per_class(const float* x, int64_t n, int d, const int32_t* labels,
                                           int min_samples) {
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
  // AUROC (Mann-Whitney): each noisy sample counts the clean ones scored below it, a tied
  // group half of its own clean ones.
  double pairs_right = 0;
  int64_t clean_below = 0;
  for (size_t i = n; i > 0;) {
    size_t j = i;
    int64_t noisy = 0, clean = 0;
    while (j > 0 && d.score[order[j - 1]] == d.score[order[i - 1]]) {
      (truth[order[j - 1]] != 0 ? noisy : clean) += 1;
      --j;
    }
    pairs_right += double(noisy) * (double(clean_below) + 0.5 * double(clean));
    clean_below += clean;
    i = j;
  }
  const int64_t clean_total = int64_t(n) - s.truth;
  s.auroc = clean_total > 0 ? pairs_right / (double(s.truth) * double(clean_total)) : 1.0;
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
