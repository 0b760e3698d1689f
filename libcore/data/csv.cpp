// CSV tables: a header row, numeric feature columns and one label column
// (data.csv.label_column). Labels are integers (used as class indices 0..max, names "0"..)
// or strings (classes = the sorted distinct strings). Fields may be double-quoted;
// blank lines are skipped. The train/test split is stratified: within each class, a seeded
// shuffle picks round(test_fraction * n_class) rows for the test split; both splits keep
// the file's row order.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "data/fileutil.hpp"
#include "data/rng.hpp"
#include "data/source.hpp"
#include "util/error.hpp"

namespace sieve::data {
namespace {

// Split one line into fields (RFC 4180 quoting within the line); fields are trimmed.
std::vector<std::string> split_fields(const std::string& line, const std::string& where) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false, was_quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < line.size() && line[i + 1] == '"') {
          cur += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        cur += c;
      }
    } else if (c == '"' && trim(cur).empty()) {
      quoted = was_quoted = true;
      cur.clear();
    } else if (c == ',') {
      out.push_back(was_quoted ? cur : trim(cur));
      cur.clear();
      was_quoted = false;
    } else {
      cur += c;
    }
  }
  if (quoted) throw Error(cat(where, ": unterminated quoted field"));
  out.push_back(was_quoted ? cur : trim(cur));
  return out;
}

bool parse_int(const std::string& s, int64_t* v) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *v = x;
  return true;
}

bool parse_float(const std::string& s, double* v) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  double x = std::strtod(s.c_str(), &end);
  if (*end != '\0' || !std::isfinite(x) || errno == ERANGE) return false;
  *v = x;
  return true;
}

class CsvSource : public Source {
 public:
  CsvSource(const std::string& path, const std::string& label_column, double test_fraction,
            uint64_t seed, const std::vector<std::string>& names) {
    if (!is_regular_file(path)) throw Error(cat(path, ": no such file (CSV input)"));
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(cat(path, ": cannot open"));
    std::string line;
    int64_t lineno = 0;
    std::vector<std::string> header;
    while (header.empty() && std::getline(in, line)) {
      ++lineno;
      // A UTF-8 byte order mark (spreadsheet exports) is no part of the first column's name.
      if (lineno == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (trim(line).empty()) continue;
      header = split_fields(line, cat(path, ":", lineno));
    }
    if (header.empty()) throw Error(cat(path, ": empty CSV file (no header row)"));
    int label_col = -1;
    for (size_t c = 0; c < header.size(); ++c)
      if (header[c] == label_column) label_col = int(c);
    if (label_col < 0) {
      std::string cols;
      for (size_t c = 0; c < header.size(); ++c) cols += (c ? ", " : "") + header[c];
      throw UsageError(cat("data.csv.label_column '", label_column, "' is not a column of ", path,
                           " (columns: ", cols, ")"));
    }
    for (size_t c = 0; c < header.size(); ++c)
      if (int(c) != label_col) meta_.feature_names.push_back(header[c]);
    const size_t F = meta_.feature_names.size();
    if (F == 0) throw Error(cat(path, ": no feature columns besides the label column '", label_column, "'"));

    // Rows: features (float32, parsed as double) and raw label strings.
    std::vector<float> feats;
    std::vector<std::string> raw_labels;
    std::vector<int64_t> lines;
    while (std::getline(in, line)) {
      ++lineno;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (trim(line).empty()) continue;
      std::string where = cat(path, ":", lineno);
      auto fields = split_fields(line, where);
      if (fields.size() != header.size())
        throw Error(cat(where, ": ", fields.size(), " fields, the header has ", header.size(),
                        " (ragged row)"));
      for (size_t c = 0; c < fields.size(); ++c) {
        if (int(c) == label_col) continue;
        double v;
        if (!parse_float(fields[c], &v))
          throw Error(cat(where, ": column '", header[c], "': '", fields[c], "' is not a number"));
        // Features are stored as float32: a larger magnitude would silently become inf.
        if (std::fabs(v) > double(std::numeric_limits<float>::max()))
          throw Error(cat(where, ": column '", header[c], "': ", fields[c],
                          " is outside the float32 range of features"));
        feats.push_back(float(v));
      }
      if (fields[size_t(label_col)].empty())
        throw Error(cat(where, ": empty label in column '", label_column, "'"));
      raw_labels.push_back(fields[size_t(label_col)]);
      lines.push_back(lineno);
    }
    const int64_t N = int64_t(raw_labels.size());
    if (N == 0) throw Error(cat(path, ": no data rows after the header"));

    // Labels: all integers -> class indices; otherwise sorted distinct strings.
    std::vector<int32_t> labels(static_cast<size_t>(N));
    bool all_int = true;
    for (auto& s : raw_labels) {
      int64_t v;
      if (!parse_int(s, &v)) {
        all_int = false;
        break;
      }
    }
    if (all_int) {
      int64_t max_label = 0;
      int64_t limit = names.empty() ? int64_t(1) << 20 : int64_t(names.size());
      for (int64_t i = 0; i < N; ++i) {
        int64_t v;
        parse_int(raw_labels[size_t(i)], &v);
        if (v < 0 || v >= limit)
          throw Error(cat(path, ":", lines[size_t(i)], ": label ", v, " out of range 0..", limit - 1,
                          names.empty() ? "" : " (data.class_names)"));
        labels[size_t(i)] = int32_t(v);
        max_label = std::max(max_label, v);
      }
      if (names.empty())
        for (int64_t c = 0; c <= max_label; ++c) meta_.class_names.push_back(std::to_string(c));
      else
        meta_.class_names = names;
    } else {
      std::map<std::string, int32_t> index;
      if (names.empty()) {
        std::vector<std::string> distinct(raw_labels.begin(), raw_labels.end());
        std::sort(distinct.begin(), distinct.end());
        distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
        meta_.class_names = distinct;
      } else {
        meta_.class_names = names;
      }
      for (size_t c = 0; c < meta_.class_names.size(); ++c) index[meta_.class_names[c]] = int32_t(c);
      for (int64_t i = 0; i < N; ++i) {
        auto it = index.find(raw_labels[size_t(i)]);
        if (it == index.end())
          throw Error(cat(path, ":", lines[size_t(i)], ": label '", raw_labels[size_t(i)],
                          "' is not one of data.class_names"));
        labels[size_t(i)] = it->second;
      }
    }
    meta_.num_classes = int64_t(meta_.class_names.size());

    // Stratified split.
    std::vector<std::vector<int64_t>> by_class(size_t(meta_.num_classes));
    for (int64_t i = 0; i < N; ++i) by_class[size_t(labels[size_t(i)])].push_back(i);
    std::vector<uint8_t> is_test(size_t(N), 0);
    for (size_t c = 0; c < by_class.size(); ++c) {
      auto& rows = by_class[c];
      Rng rng(hash3(seed, 0x73706c74 /* "splt" */, c));
      for (size_t i = rows.size(); i > 1; --i) std::swap(rows[i - 1], rows[rng.below(i)]);
      int64_t n_test = std::llround(test_fraction * double(rows.size()));
      for (int64_t k = 0; k < n_test; ++k) is_test[size_t(rows[size_t(k)])] = 1;
    }
    for (int64_t i = 0; i < N; ++i) {
      int k = is_test[size_t(i)] ? 1 : 0;
      feats_[k].insert(feats_[k].end(), feats.begin() + i * int64_t(F), feats.begin() + (i + 1) * int64_t(F));
      labels_[k].push_back(labels[size_t(i)]);
    }
    meta_.kind = Kind::Tabular;
    meta_.source = "csv";
    meta_.description = cat("CSV table ", path, " (label column '", label_column, "')");
    meta_.features = int64_t(F);
    meta_.n[0] = int64_t(labels_[0].size());
    meta_.n[1] = int64_t(labels_[1].size());

    // Per-feature mean / std (population) over the training rows, in file order.
    mean_.assign(F, 0.0);
    std_.assign(F, 0.0);
    const int64_t ntr = meta_.n[0];
    for (int64_t i = 0; i < ntr; ++i)
      for (size_t f = 0; f < F; ++f) mean_[f] += feats_[0][size_t(i) * F + f];
    for (size_t f = 0; f < F; ++f) mean_[f] = ntr ? mean_[f] / double(ntr) : 0.0;
    for (int64_t i = 0; i < ntr; ++i)
      for (size_t f = 0; f < F; ++f) {
        double d = feats_[0][size_t(i) * F + f] - mean_[f];
        std_[f] += d * d;
      }
    for (size_t f = 0; f < F; ++f) std_[f] = ntr ? std::sqrt(std_[f] / double(ntr)) : 0.0;
  }

  const DatasetMeta& meta() const override { return meta_; }
  void produce(Split split, int64_t row0, int64_t count, const Rows& out) const override {
    const int64_t F = meta_.features;
    std::copy_n(feats_[int(split)].begin() + row0 * F, count * F, out.features);
    std::copy_n(labels_[int(split)].begin() + row0, count, out.labels);
  }
  std::vector<double> exact_mean() const override { return mean_; }
  std::vector<double> exact_std() const override { return std_; }

 private:
  DatasetMeta meta_;
  std::vector<float> feats_[2];
  std::vector<int32_t> labels_[2];
  std::vector<double> mean_, std_;
};

}  // namespace

std::unique_ptr<Source> open_csv(const std::string& path, const std::string& label_column,
                                 double test_fraction, uint64_t seed,
                                 const std::vector<std::string>& class_names, const Comm& comm) {
  std::unique_ptr<Source> src;
  all_checked(comm, [&] {
    src = std::make_unique<CsvSource>(path, label_column, test_fraction, seed, class_names);
  });
  return src;
}

}  // namespace sieve::data
