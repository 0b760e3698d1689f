#include "cluster/calibrate.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "cluster/detectors.hpp"
#include "util/error.hpp"

namespace sieve::cluster {

int64_t NoiseEstimate::total() const {
  return std::accumulate(per_class.begin(), per_class.end(), int64_t(0));
}

NoiseEstimate estimate_from_joint(std::vector<int64_t> joint, std::vector<int64_t> class_size,
                                  int classes) {
  SIEVE_ASSERT(
      joint.size() == size_t(classes) * size_t(classes) && class_size.size() == size_t(classes),
      "estimate_from_joint: ", joint.size(), " joint cells, ", class_size.size(),
      " class sizes for ", classes, " classes");
  NoiseEstimate e;
  e.classes = classes;
  e.per_class.assign(size_t(classes), 0);
  for (int i = 0; i < classes; ++i) {
    int64_t row = 0;
    for (int j = 0; j < classes; ++j) row += joint[size_t(i) * classes + j];
    if (row == 0) continue;
    const double off = 1.0 - double(joint[size_t(i) * classes + i]) / double(row);
    e.per_class[size_t(i)] = int64_t(std::llround(off * double(class_size[size_t(i)])));
  }
  e.joint = std::move(joint);
  e.class_size = std::move(class_size);
  return e;
}

std::vector<double> label_transition(const std::vector<double>& joint, int classes,
                                     double prior_share) {
  const int k = classes;
  SIEVE_ASSERT(joint.size() == size_t(k) * size_t(k), "label_transition: ", joint.size(),
               " cells for ", k, " classes");
  auto cell = [&](int i, int j) { return std::max(joint[size_t(i) * k + j], 0.0); };
  std::vector<double> t(size_t(k) * size_t(k), 0.0);
  for (int j = 0; j < k; ++j) {
    double column = 0;
    for (int i = 0; i < k; ++i) column += cell(i, j);
    const double prior = prior_share * column;
    const double total = column + double(k) * prior;
    for (int i = 0; i < k; ++i)
      t[size_t(i) * k + j] = total > 0 ? (cell(i, j) + prior) / total : 1.0 / k;
  }
  return t;
}

std::vector<double> label_transition(const NoiseEstimate& estimate, double prior_share) {
  return label_transition(std::vector<double>(estimate.joint.begin(), estimate.joint.end()),
                          estimate.classes, prior_share);
}

double wrong_label_posterior(const float* p, int y, const std::vector<double>& transition,
                             int classes) {
  const double* row = transition.data() + size_t(y) * size_t(classes);
  double all = 0;
  for (int j = 0; j < classes; ++j) all += double(p[j]) * row[j];
  return all > 0 ? 1.0 - double(p[y]) * row[y] / all : 0.0;
}

namespace {

// `amount` units shared in proportion to `weight` (negative counts as 0; all 0: in proportion
// to the room), the rounding's units to the largest remainders (ties to the lower class), no
// class past its `room`: a class that would be is filled and the rest shared again.
std::vector<int64_t> share_out(int64_t amount, const std::vector<int64_t>& weight,
                               const std::vector<int64_t>& room) {
  const size_t k = room.size();
  std::vector<int64_t> out(k, 0);
  std::vector<bool> full(k, false);
  while (amount > 0) {
    std::vector<double> w(k, 0.0);
    for (size_t c = 0; c < k; ++c)
      if (!full[c]) w[c] = double(std::max<int64_t>(weight[c], 0));
    double wsum = std::accumulate(w.begin(), w.end(), 0.0);
    if (wsum == 0) {
      for (size_t c = 0; c < k; ++c)
        if (!full[c]) w[c] = double(std::max<int64_t>(room[c] - out[c], 0));
      wsum = std::accumulate(w.begin(), w.end(), 0.0);
    }
    if (wsum == 0) break;  // every class full
    std::vector<int64_t> add(k, 0);
    std::vector<std::pair<double, size_t>> remainder;
    int64_t given = 0;
    for (size_t c = 0; c < k; ++c) {
      const double exact = double(amount) * w[c] / wsum;
      add[c] = int64_t(std::floor(exact));
      given += add[c];
      if (w[c] > 0) remainder.push_back({exact - double(add[c]), c});
    }
    std::stable_sort(remainder.begin(), remainder.end(),
                     [](const auto& x, const auto& y) { return x.first > y.first; });
    for (size_t r = 0; given < amount && r < remainder.size(); ++r, ++given)
      ++add[remainder[r].second];
    bool filled = false;
    for (size_t c = 0; c < k; ++c) {
      if (w[c] > 0 && add[c] >= room[c] - out[c]) {
        add[c] = room[c] - out[c];
        full[c] = filled = true;
      }
      out[c] += add[c];
      amount -= add[c];
    }
    if (!filled) break;  // all placed
  }
  return out;
}

}  // namespace

std::vector<int64_t> counts_for_rate(double rate, const std::vector<int64_t>& estimated,
                                     const std::vector<int64_t>& class_size) {
  SIEVE_ASSERT(estimated.size() == class_size.size() && rate >= 0 && rate <= 1,
               "counts_for_rate: rate ", rate, ", ", estimated.size(), " estimates for ",
               class_size.size(), " classes");
  const size_t k = class_size.size();
  const int64_t n = std::accumulate(class_size.begin(), class_size.end(), int64_t(0));
  const int64_t total = std::min<int64_t>(n, std::llround(rate * double(n)));
  std::vector<int64_t> seen(k);
  for (size_t c = 0; c < k; ++c) seen[c] = std::clamp<int64_t>(estimated[c], 0, class_size[c]);
  const int64_t seen_total = std::accumulate(seen.begin(), seen.end(), int64_t(0));
  if (total <= seen_total) return share_out(total, seen, class_size);
  // Above the estimate: the rest spread by class size, no class past its own size.
  return counts_raised_within_limit(total, seen, class_size, 1.0);
}

std::vector<int64_t> counts_raised_within_limit(int64_t total, const std::vector<int64_t>& counts,
                                                const std::vector<int64_t>& class_size,
                                                double max_share) {
  SIEVE_ASSERT(counts.size() == class_size.size() && max_share >= 0 && max_share <= 1,
               "counts_raised_within_limit: ", counts.size(), " counts for ", class_size.size(),
               " classes, max_share ", max_share);
  const int64_t counted = std::accumulate(counts.begin(), counts.end(), int64_t(0));
  if (total <= counted) return counts;
  std::vector<int64_t> room(counts.size());
  for (size_t c = 0; c < counts.size(); ++c) {
    const auto limit = int64_t(std::floor(max_share * double(class_size[c])));
    room[c] = std::max<int64_t>(limit - std::max<int64_t>(counts[c], 0), 0);
  }
  const std::vector<int64_t> added = share_out(total - counted, class_size, room);
  std::vector<int64_t> out = counts;
  for (size_t c = 0; c < out.size(); ++c) out[c] += added[c];
  return out;
}

std::vector<uint8_t> flag_top_overall(const std::vector<float>& score, const int32_t* labels,
                                      const std::vector<int64_t>& counts, double max_share,
                                      const std::vector<int64_t>& class_limit) {
  SIEVE_ASSERT(class_limit.empty() || class_limit.size() == counts.size(),
               "flag_top_overall: ", class_limit.size(), " class limits for ", counts.size(),
               " counts");
  std::vector<int64_t> room(counts.size(), 0);  // first the class sizes
  for (size_t i = 0; i < score.size(); ++i) {
    SIEVE_ASSERT(labels[i] >= 0 && size_t(labels[i]) < counts.size(), "flag_top_overall: label ",
                 labels[i], " outside the ", counts.size(), " counts");
    ++room[size_t(labels[i])];
  }
  int64_t wanted = 0;
  for (size_t c = 0; c < counts.size(); ++c) {
    const int64_t share = int64_t(std::floor(max_share * double(room[c])));
    room[c] = std::clamp<int64_t>(std::max(counts[c], share), 0, room[c]);
    if (!class_limit.empty() && class_limit[c] >= 0) room[c] = std::min(room[c], class_limit[c]);
    wanted += std::max<int64_t>(counts[c], 0);
  }
  std::vector<int64_t> order(score.size());
  std::iota(order.begin(), order.end(), int64_t(0));
  // Rows ascend, so a stable sort by descending score breaks ties toward the lower row.
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return score[size_t(a)] > score[size_t(b)]; });
  std::vector<uint8_t> flag(score.size(), 0);
  for (size_t q = 0; q < order.size() && wanted > 0; ++q) {
    int64_t& left = room[size_t(labels[order[q]])];
    if (left == 0) continue;
    --left;
    --wanted;
    flag[size_t(order[q])] = 1;
  }
  return flag;
}

std::vector<int64_t> combined_counts(const std::vector<int64_t>& estimate,
                                     const std::vector<uint8_t>& vote_flag, const int32_t* labels) {
  std::vector<int64_t> voted(estimate.size(), 0);
  for (size_t i = 0; i < vote_flag.size(); ++i) {
    SIEVE_ASSERT(labels[i] >= 0 && size_t(labels[i]) < estimate.size(), "combined_counts: label ",
                 labels[i], " outside the ", estimate.size(), " classes");
    voted[size_t(labels[i])] += vote_flag[i] != 0;
  }
  for (size_t c = 0; c < voted.size(); ++c) voted[c] = std::max(voted[c], estimate[c]);
  return voted;
}

namespace {

// Normalised ranks of one score: ascending order, tied values share their mean rank; the
// largest value ranks 1, NaN stays NaN.
std::vector<double> normalised_ranks(const std::vector<float>& s) {
  std::vector<size_t> order;
  for (size_t i = 0; i < s.size(); ++i)
    if (!std::isnan(s[i])) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return s[a] < s[b]; });
  std::vector<double> rank(s.size(), std::nan(""));
  const double m = double(order.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j < order.size() && s[order[j]] == s[order[i]]) ++j;
    const double mean_rank = 0.5 * double(i + 1 + j);  // ranks i+1..j, 1-based
    for (size_t q = i; q < j; ++q) rank[order[q]] = mean_rank / m;
    i = j;
  }
  return rank;
}

}  // namespace

std::vector<float> rank_average(const std::vector<const std::vector<float>*>& scores) {
  if (scores.empty()) return {};
  const size_t n = scores[0]->size();
  std::vector<double> sum(n, 0.0);
  std::vector<int> cnt(n, 0);
  for (const auto* s : scores) {
    SIEVE_ASSERT(s->size() == n, "rank_average: scores of ", s->size(), " and ", n, " samples");
    const std::vector<double> r = normalised_ranks(*s);
    for (size_t i = 0; i < n; ++i)
      if (!std::isnan(r[i])) {
        sum[i] += r[i];
        ++cnt[i];
      }
  }
  std::vector<float> out(n, 0.0f);
  for (size_t i = 0; i < n; ++i)
    if (cnt[i]) out[i] = float(sum[i] / cnt[i]);
  return out;
}

double own_error_share(double heldout_peak_accuracy, double estimated_share) {
  return (1.0 - heldout_peak_accuracy) - estimated_share;
}

bool estimate_in_doubt(double heldout_peak_accuracy, double estimated_share) {
  return own_error_share(heldout_peak_accuracy, estimated_share) >= estimated_share;  // NaN: no
}

std::string class_and_name(int64_t c, const std::vector<std::string>& class_names) {
  const bool named = c >= 0 && size_t(c) < class_names.size();
  return cat("class ", c, named ? cat(" '", class_names[size_t(c)], "'") : std::string());
}

std::string over_max_flagged(const std::string& method, const std::vector<uint8_t>& flag,
                             const int32_t* labels, double max_share,
                             const std::vector<std::string>& class_names) {
  std::map<int32_t, std::pair<int64_t, int64_t>> by_class;  // flagged, size
  for (size_t i = 0; i < flag.size(); ++i) {
    auto& [f, m] = by_class[labels[i]];
    f += flag[i] != 0;
    ++m;
  }
  struct Over {
    int32_t label;
    int64_t flagged, size;
  };
  std::vector<Over> over;
  for (const auto& [c, fm] : by_class)
    if (double(fm.first) > max_share * double(fm.second)) over.push_back({c, fm.first, fm.second});
  if (over.empty()) return "";
  // Every class over the limit, the largest share first: the first one alone would hide
  // a worse class behind it (a 40 % class named while a 73 % one went unsaid).
  std::stable_sort(over.begin(), over.end(), [](const Over& a, const Over& b) {
    return double(a.flagged) * double(b.size) > double(b.flagged) * double(a.size);
  });
  constexpr size_t kListed = 5;  // one line, however many classes
  std::string list;
  for (size_t i = 0; i < over.size() && i < kListed; ++i) {
    const Over& o = over[i];
    list += cat(i == 0 ? "" : (i + 1 == over.size() ? " and " : ", "), o.flagged, " of the ",
                o.size, " samples of ", class_and_name(o.label, class_names), " (",
                int(std::lround(100.0 * double(o.flagged) / double(o.size))), " %)");
  }
  if (over.size() > kListed) list += cat(" and ", over.size() - kListed, " more classes");
  // A calibrated detector has no parameter to blame: its count is the data's own estimate
  // (a class whose labels are mostly wrong, such as a small class under symmetric noise on
  // a long tail), so the one decision left is whether to believe it.
  const bool it = over.size() == 1;
  const std::string what_to_do =
      detector(method).counts_estimated
          ? cat("; the noise estimate itself puts that many of ", it ? "its" : "their",
                " labels in doubt (filter.h5's /noise_estimate after a run with the key raised): "
                "if so many may be wrong there, raise filter.max_flagged knowingly")
          : std::string("; check the detector's parameters, or raise filter.max_flagged");
  return cat("filter.method=", method, " flags ", list, ", more than config key ",
             "'filter.max_flagged' = ", max_share, " allows: the filtered arm would lose most of ",
             it ? "that class" : "those classes", what_to_do);
}

}  // namespace sieve::cluster
