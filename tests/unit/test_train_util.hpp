// Tiny dataset / filter files for the train tests, written directly with h5::File
// following docs/formats.md (independent of the data module).
#pragma once
#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "io/h5.hpp"
#include "io/schemas.hpp"

namespace sieve::test {

struct TinySplit {
  std::vector<uint8_t> images;  // [n,h,w,c]
  std::vector<float> features;  // [n,f]
  std::vector<int32_t> labels;
  std::vector<int64_t> ids;
};

// Images: class k has a bright square in quadrant k (of 4) plus noise; h=w=8, c=3.
inline TinySplit synthetic_images(int n, int classes, uint64_t seed, int64_t id0, int hw = 8) {
  TinySplit s;
  uint64_t x = seed * 2654435761u + 1;
  auto rnd = [&] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return double(x % 1000003) / 1000003.0;
  };
  for (int i = 0; i < n; ++i) {
    int k = i % classes;
    s.labels.push_back(k);
    s.ids.push_back(id0 + i * 7);
    for (int y = 0; y < hw; ++y)
      for (int xx = 0; xx < hw; ++xx)
        for (int c = 0; c < 3; ++c) {
          bool in = ((y < hw / 2) == (k % 2 == 0)) && ((xx < hw / 2) == (k / 2 % 2 == 0));
          double v = 60 + 100 * rnd() + (in ? 90 : 0) + (c == k % 3 ? 10 : 0);
          s.images.push_back(uint8_t(std::min(255.0, v)));
        }
  }
  return s;
}

inline void write_split(h5::File& f, const std::string& g, const TinySplit& s, int hw, int feat) {
  hsize_t n = s.labels.size();
  if (feat > 0)
    f.write_small<float>(g + "/features", {n, hsize_t(feat)}, s.features);
  else
    f.write_small<uint8_t>(g + "/images", {n, hsize_t(hw), hsize_t(hw), 3}, s.images);
  f.write_small<int32_t>(g + "/labels", {n}, s.labels);
  f.write_small<int64_t>(g + "/sample_id", {n}, s.ids);
}

inline void write_dataset(const std::string& path, const TinySplit& train, const TinySplit* test,
                          int classes, int hw, int feat, std::vector<double> mean,
                          std::vector<double> stdv) {
  h5::File f = h5::File::create(path);
  h5::stamp(f, schema::kDataset, "test: {}\n");
  write_split(f, "/train", train, hw, feat);
  // The format has both splits (an empty test split when there is none).
  write_split(f, "/test", test ? *test : TinySplit{}, hw, feat);
  f.set_attr("/", "num_classes", int64_t(classes));
  std::vector<std::string> names;
  for (int k = 0; k < classes; ++k) names.push_back("class" + std::to_string(k));
  f.set_attr("/", "class_names", names);
  f.set_attr("/", "mean", mean);
  f.set_attr("/", "std", stdv);
  f.set_attr("/", "kind", std::string(feat > 0 ? "tabular" : "image"));
}

inline void write_image_dataset(const std::string& path, int n_train, int n_test, int classes,
                                int hw = 8) {
  auto tr = synthetic_images(n_train, classes, 1, 1000, hw);
  auto te = synthetic_images(n_test, classes, 2, 900000, hw);
  write_dataset(path, tr, &te, classes, hw, 0, {0.5, 0.5, 0.5}, {0.25, 0.25, 0.25});
}

// Filter file: keep = every sample whose position is not a multiple of 4; random_keep =
// every other sample. Rows in reverse order (the join must use sample_id).
inline void write_filter(const std::string& path, const std::vector<int64_t>& ids,
                         int64_t* n_keep, int64_t* n_random) {
  std::vector<int64_t> sid(ids.rbegin(), ids.rend());
  std::vector<uint8_t> keep, rkeep;
  *n_keep = *n_random = 0;
  for (size_t j = 0; j < sid.size(); ++j) {
    size_t i = sid.size() - 1 - j;
    keep.push_back(i % 4 != 0);
    rkeep.push_back(i % 2 == 0);
    *n_keep += keep.back();
    *n_random += rkeep.back();
  }
  h5::File f = h5::File::create(path);
  h5::stamp(f, schema::kFilter, "test: {}\n");
  f.write_small<uint8_t>("/keep", {sid.size()}, keep);
  f.write_small<uint8_t>("/random_keep", {sid.size()}, rkeep);
  f.write_small<int64_t>("/sample_id", {sid.size()}, sid);
}

// Iris CSV (sepal_length,...,species) -> tabular dataset with per-feature mean/std.
inline bool write_iris_dataset(const std::string& csv, const std::string& path) {
  std::ifstream in(csv);
  if (!in) return false;
  std::string line;
  std::getline(in, line);  // header
  TinySplit s;
  std::vector<std::string> names;
  int64_t id = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::stringstream ss(line);
    std::string cell;
    std::vector<std::string> cells;
    while (std::getline(ss, cell, ',')) cells.push_back(cell);
    if (cells.size() < 5) continue;
    for (int j = 0; j < 4; ++j) s.features.push_back(std::stof(cells[j]));
    std::string lab = cells[4];
    int k = -1;
    for (size_t q = 0; q < names.size(); ++q)
      if (names[q] == lab) k = int(q);
    if (k < 0) {
      names.push_back(lab);
      k = int(names.size()) - 1;
    }
    s.labels.push_back(k);
    s.ids.push_back(id++);
  }
  std::vector<double> mean(4, 0), sd(4, 0);
  const size_t n = s.labels.size();
  for (size_t i = 0; i < n; ++i)
    for (int j = 0; j < 4; ++j) mean[j] += s.features[i * 4 + j] / double(n);
  for (size_t i = 0; i < n; ++i)
    for (int j = 0; j < 4; ++j) sd[j] += std::pow(s.features[i * 4 + j] - mean[j], 2) / double(n);
  for (auto& v : sd) v = std::sqrt(v);
  write_dataset(path, s, nullptr, int(names.size()), 0, 4, mean, sd);
  return true;
}

}  // namespace sieve::test
