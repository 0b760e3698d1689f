#include "cluster/inputs.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "io/h5.hpp"
#include "io/schemas.hpp"
#include "util/error.hpp"

namespace sieve::cluster {

namespace {

// x [rows, d] holds rows row0.. of `where`: the first NaN or infinity is an Error naming it.
void check_finite(const std::vector<float>& x, int d, const std::string& where, int64_t row0 = 0) {
  for (size_t i = 0; i < x.size(); ++i)
    SIEVE_CHECK(std::isfinite(x[i]), where, " row ", row0 + int64_t(i / size_t(d)), " column ",
                i % size_t(d), " is NaN or infinite (", x[i], ")");
}

// The row of the features file holding each input sample (joined on sample id).
std::vector<int64_t> join_rows(const std::string& path, const std::vector<int64_t>& file_ids,
                               const std::vector<int32_t>& file_labels,
                               const std::vector<int64_t>& ids,
                               const std::vector<int32_t>& labels) {
  // Sorted (id, row) order instead of a hash map: a third of the memory at 1 M samples.
  std::vector<int64_t> order(file_ids.size());
  std::iota(order.begin(), order.end(), int64_t(0));
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return file_ids[size_t(a)] < file_ids[size_t(b)] ||
           (file_ids[size_t(a)] == file_ids[size_t(b)] && a < b);
  });
  for (size_t t = 1; t < order.size(); ++t)
    SIEVE_CHECK(file_ids[size_t(order[t])] != file_ids[size_t(order[t - 1])], path,
                ": /train/sample_id has the id ", file_ids[size_t(order[t])], " twice");
  std::vector<int64_t> row(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    auto it = std::lower_bound(order.begin(), order.end(), ids[i],
                               [&](int64_t r, int64_t id) { return file_ids[size_t(r)] < id; });
    SIEVE_CHECK(it != order.end() && file_ids[size_t(*it)] == ids[i], path,
                ": no /train/sample_id ", ids[i],
                " (the embedding's sample; were they made from different datasets?)");
    SIEVE_CHECK(file_labels[size_t(*it)] == labels[i], path, ": sample id ", ids[i], " has label ",
                file_labels[size_t(*it)], " here but ", labels[i], " in the embedding");
    row[i] = *it;
  }
  return row;
}

}  // namespace

Input read_input(const std::string& path, const std::string& dataset) {
  h5::File f = h5::File::open(path);
  SIEVE_CHECK(f.has_attr("/", "schema"), path,
              ": not a Sieve file (no 'schema' attribute); expected ", schema::kEmbedding, ", ",
              schema::kFeatures, " or ", schema::kDataset);
  std::string s = f.attr_string("/", "schema");
  SIEVE_CHECK(s == schema::kEmbedding || s == schema::kFeatures || s == schema::kDataset, path,
              ": schema '", s, "', expected ", schema::kEmbedding, ", ", schema::kFeatures, " or ",
              schema::kDataset);
  std::string group = dataset.substr(0, dataset.find_last_of('/'));
  std::string labels = group + "/labels", ids = group + "/sample_id";
  SIEVE_CHECK(f.exists(dataset), path, ": no dataset '", dataset,
              "' (choose one with --input-dataset or filter.input_dataset)");
  SIEVE_CHECK(f.exists(labels), path, ": missing dataset '", labels, "' (int32 [N] class labels)");
  SIEVE_CHECK(f.exists(ids), path, ": missing dataset '", ids, "' (int64 [N] sample ids)");
  auto dims = f.require<float>(dataset, 2);
  auto ldims = f.require<int32_t>(labels, 1);
  auto idims = f.require<int64_t>(ids, 1);
  SIEVE_CHECK(ldims[0] == dims[0] && idims[0] == dims[0], path, ": mismatched lengths: ", dataset,
              " has ", dims[0], " rows, ", labels, " ", ldims[0], ", ", ids, " ", idims[0]);
  Input in;
  in.n = int64_t(dims[0]);
  in.d = int(dims[1]);
  SIEVE_CHECK(in.n > 0, path, ": ", dataset, " is empty (0 samples)");
  SIEVE_CHECK(in.d > 0, path, ": ", dataset, " has 0 columns");
  in.x = f.read_all<float>(dataset);
  in.labels = f.read_all<int32_t>(labels);
  in.ids = f.read_all<int64_t>(ids);
  check_finite(in.x, in.d, path + ": " + dataset);
  for (int64_t i = 0; i < in.n; ++i)
    SIEVE_CHECK(in.labels[i] >= 0, path, ": ", labels, " row ", i, " is negative (", in.labels[i],
                "); expected class indices >= 0");
  return in;
}

FeatureShares read_feature_shares(const Comm& comm, const std::string& path,
                                  const std::vector<int64_t>& ids,
                                  const std::vector<int32_t>& labels, bool want_features,
                                  bool want_probs) {
  FeatureShares out;
  if (!want_features && !want_probs) return out;
  h5::File f = h5::File::open(path);
  h5::require_schema(f, schema::kFeatures);
  // The per-sample columns whole (every rank alike, so their errors are raised alike).
  const auto file_ids = f.read_all<int64_t>("/train/sample_id");
  const auto file_labels = f.read_all<int32_t>("/train/labels");
  const int64_t rows = int64_t(file_ids.size());
  SIEVE_CHECK(int64_t(file_labels.size()) == rows, path,
              ": mismatched lengths: /train/sample_id has ", rows, " rows, /train/labels ",
              file_labels.size());
  const std::vector<int64_t> file_row = join_rows(path, file_ids, file_labels, ids, labels);
  // This rank's block of the file's rows, and the input row of each (-1: not an input sample).
  const Range block = block_range(rows, comm.rank(), comm.size());
  std::vector<int64_t> input_row(size_t(block.size()), -1);
  for (size_t i = 0; i < file_row.size(); ++i)
    if (file_row[i] >= block.begin && file_row[i] < block.end)
      input_row[size_t(file_row[i] - block.begin)] = int64_t(i);
  auto read = [&](const std::string& name, RowShare& share) {
    if (!f.exists(name)) return;
    const auto dims = f.require<float>(name, 2);
    SIEVE_CHECK(int64_t(dims[0]) == rows, path, ": mismatched lengths: ", name, " has ", dims[0],
                " rows, /train/sample_id ", rows);
    SIEVE_CHECK(dims[1] > 0, path, ": ", name, " has 0 columns");
    const int w = int(dims[1]);
    share.width = w;
    // Only this rank sees its rows: agree on the outcome, so a NaN in one block is one line
    // from one rank, not a hang or an abort.
    agreed_step(comm, [&] {
      share.x.resize(size_t(block.size()) * size_t(w));
      f.read_rows<float>(name, hsize_t(block.begin), hsize_t(block.size()), share.x.data());
      check_finite(share.x, w, path + ": " + name, block.begin);
      int64_t kept = 0;  // drop the rows of samples the input does not hold, in place
      for (int64_t q = 0; q < block.size(); ++q) {
        if (input_row[size_t(q)] < 0) continue;
        if (kept != q) std::copy_n(share.x.data() + q * w, w, share.x.data() + kept * w);
        share.rows.push_back(input_row[size_t(q)]);
        ++kept;
      }
      share.x.resize(size_t(kept) * size_t(w));
    });
  };
  if (want_features) read("/train/features", out.feats);
  if (want_probs) read("/train/probs", out.probs);
  if (want_probs && f.has_attr("/", "probs_source"))
    out.probs_source = f.attr_string("/", "probs_source");
  return out;
}

TestPredictions read_test_predictions(const Comm& comm, const std::string& path, int classes) {
  TestPredictions out;
  h5::File f = h5::File::open(path);
  if (!f.exists("/test/probs")) return out;
  SIEVE_CHECK(f.exists("/test/labels"), path, ": /test/probs without /test/labels");
  out.label = f.read_all<int32_t>("/test/labels");
  const auto dims = f.require<float>("/test/probs", 2);
  const int64_t rows = int64_t(out.label.size());
  SIEVE_CHECK(int64_t(dims[0]) == rows, path, ": mismatched lengths: /test/probs has ", dims[0],
              " rows, /test/labels ", rows);
  SIEVE_CHECK(int(dims[1]) == classes, path, ": /test/probs has ", dims[1],
              " columns, /train/probs ", classes);
  for (int64_t i = 0; i < rows; ++i)
    SIEVE_CHECK(out.label[size_t(i)] >= 0 && out.label[size_t(i)] < classes, path,
                ": /test/labels row ", i, " is ", out.label[size_t(i)],
                "; expected a class in [0, ", classes, ")");
  // Each rank its block of rows (the probabilities are [N_test, classes]: 200 MB for an
  // ImageNet-sized validation split), then every rank the whole prediction column.
  const Range block = block_range(rows, comm.rank(), comm.size());
  RowShare share;
  share.width = classes;
  agreed_step(comm, [&] {
    share.x.resize(size_t(block.size()) * size_t(classes));
    f.read_rows<float>("/test/probs", hsize_t(block.begin), hsize_t(block.size()), share.x.data());
    check_finite(share.x, classes, path + ": /test/probs", block.begin);
  });
  share.rows.resize(size_t(block.size()));
  std::iota(share.rows.begin(), share.rows.end(), block.begin);
  out.predicted = most_likely_class(comm, share, rows);
  return out;
}

std::vector<int32_t> most_likely_class(const Comm& comm, const RowShare& p, int64_t n) {
  std::vector<int32_t> plus_one(size_t(n), 0);  // 0: no rank holds the row
  for (int64_t q = 0; q < p.size(); ++q) {
    const float* row = p.x.data() + q * p.width;
    plus_one[size_t(p.rows[size_t(q)])] = int32_t(std::max_element(row, row + p.width) - row) + 1;
  }
  comm.allreduce_sum(plus_one.data(), plus_one.size());  // disjoint rows
  for (auto& v : plus_one) v -= 1;
  return plus_one;
}

std::vector<float> area_under_margin(const std::vector<float>& margin, int64_t epochs, int64_t n) {
  SIEVE_CHECK(margin.size() == size_t(epochs) * size_t(n), "training dynamics: ", margin.size(),
              " margins for ", epochs, " epochs x ", n, " samples");
  std::vector<double> sum(size_t(n), 0.0);
  std::vector<int64_t> seen(size_t(n), 0);
  for (int64_t e = 0; e < epochs; ++e)
    for (int64_t i = 0; i < n; ++i) {
      const float m = margin[size_t(e) * size_t(n) + size_t(i)];
      if (std::isnan(m)) continue;
      sum[size_t(i)] += m;
      ++seen[size_t(i)];
    }
  std::vector<float> aum(size_t(n), std::nanf(""));
  for (int64_t i = 0; i < n; ++i)
    if (seen[size_t(i)]) aum[size_t(i)] = float(sum[size_t(i)] / double(seen[size_t(i)]));
  return aum;
}

namespace {
// One class of align_heldout_areas: the held-out areas (rows `held`) onto the quantiles of the
// trained ones (rows `trained`).
void map_quantiles(std::vector<float>& aum, std::vector<size_t> trained, std::vector<size_t> held) {
  if (trained.empty() || held.empty()) return;
  auto by_area = [&](size_t a, size_t b) { return aum[a] < aum[b]; };
  std::sort(trained.begin(), trained.end(), by_area);
  std::sort(held.begin(), held.end(), by_area);
  const double nt = double(trained.size()), nh = double(held.size());
  std::vector<float> mapped(held.size());
  for (size_t i = 0; i < held.size();) {
    size_t j = i + 1;
    while (j < held.size() && aum[held[j]] == aum[held[i]]) ++j;
    const double q = (0.5 * double(i + j - 1) + 0.5) / nh;  // the tie group's mean rank
    const double pos = std::clamp(q * nt - 0.5, 0.0, nt - 1.0);
    const size_t lo = size_t(pos), hi = std::min(lo + 1, trained.size() - 1);
    const double w = pos - double(lo);
    const float v = float((1 - w) * aum[trained[lo]] + w * aum[trained[hi]]);
    for (size_t k = i; k < j; ++k) mapped[k] = v;
    i = j;
  }
  for (size_t k = 0; k < held.size(); ++k) aum[held[k]] = mapped[k];
}
}  // namespace

void align_heldout_areas(std::vector<float>& aum, const std::vector<uint8_t>& heldout,
                         const std::vector<int32_t>& labels) {
  SIEVE_ASSERT(aum.size() == heldout.size() && aum.size() == labels.size(),
               "align_heldout_areas: ", aum.size(), " areas, ", heldout.size(), " held-out marks, ",
               labels.size(), " labels");
  std::unordered_map<int32_t, std::pair<std::vector<size_t>, std::vector<size_t>>> groups;
  for (size_t i = 0; i < aum.size(); ++i)
    if (!std::isnan(aum[i]))
      (heldout[i] ? groups[labels[i]].second : groups[labels[i]].first).push_back(i);
  for (auto& [label, g] : groups) map_quantiles(aum, std::move(g.first), std::move(g.second));
}

double heldout_peak_accuracy(const std::vector<float>& margin, int64_t epochs, int64_t n,
                             const std::vector<uint8_t>& heldout) {
  SIEVE_ASSERT(margin.size() == size_t(epochs * n) && heldout.size() == size_t(n),
               "heldout_peak_accuracy: ", margin.size(), " margins, ", heldout.size(),
               " held-out marks, ", epochs, " epochs x ", n);
  double peak = std::numeric_limits<double>::quiet_NaN();
  for (int64_t e = 0; e < epochs; ++e) {
    int64_t seen = 0, right = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float m = margin[size_t(e * n + i)];
      if (!heldout[size_t(i)] || std::isnan(m)) continue;
      ++seen;
      right += m > 0.0f;
    }
    if (seen > 0 && !(double(right) / double(seen) <= peak)) peak = double(right) / double(seen);
  }
  return peak;
}

DynamicsFile::DynamicsFile(const std::string& path) : path_(path) {
  h5::File f = h5::File::open(path);
  h5::require_schema(f, schema::kDynamics);
  const auto dims = f.require<float>("/margin", 2);
  const auto idims = f.require<int64_t>("/sample_id", 1);
  SIEVE_CHECK(dims[1] == idims[0], path, ": /margin has ", dims[1], " columns for ", idims[0],
              " sample ids");
  ids_ = f.read_all<int64_t>("/sample_id");
  if (f.exists("/heldout")) {
    const auto hdims = f.require<uint8_t>("/heldout", 1);
    SIEVE_CHECK(hdims[0] == idims[0], path, ": /heldout has ", hdims[0], " entries for ", idims[0],
                " sample ids");
    heldout_ = f.read_all<uint8_t>("/heldout");
  }
  const std::vector<float> margin = f.read_all<float>("/margin");
  const auto epochs = int64_t(dims[0]), n = int64_t(dims[1]);
  aum_ = area_under_margin(margin, epochs, n);
  if (heldout_.empty()) {
    heldout_peak_ = std::numeric_limits<double>::quiet_NaN();
    return;
  }
  align_heldout_areas(aum_, heldout_, f.read_all<int32_t>("/labels"));
  heldout_peak_ = heldout_peak_accuracy(margin, epochs, n, heldout_);
}

std::vector<size_t> DynamicsFile::columns_of(const std::vector<int64_t>& ids) const {
  std::unordered_map<int64_t, size_t> col;
  col.reserve(ids_.size());
  for (size_t i = 0; i < ids_.size(); ++i) col[ids_[i]] = i;
  std::vector<size_t> out(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    auto it = col.find(ids[i]);
    SIEVE_CHECK(it != col.end(), path_, ": sample id ", ids[i],
                " of the filter input is not in /sample_id (dynamics of another dataset?)");
    out[i] = it->second;
  }
  return out;
}

std::vector<float> DynamicsFile::aum_of(const std::vector<int64_t>& ids) const {
  const std::vector<size_t> col = columns_of(ids);
  std::vector<float> out(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) out[i] = aum_[col[i]];
  return out;
}

std::vector<uint8_t> DynamicsFile::heldout_of(const std::vector<int64_t>& ids) const {
  if (heldout_.empty()) return {};
  const std::vector<size_t> col = columns_of(ids);
  std::vector<uint8_t> out(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) out[i] = heldout_[col[i]] != 0;
  return out;
}

}  // namespace sieve::cluster
