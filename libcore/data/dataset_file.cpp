#include "data/dataset_file.hpp"

#include <algorithm>
#include <filesystem>

#include "io/lineage.hpp"
#include "io/schemas.hpp"
#include "util/error.hpp"

namespace fs = std::filesystem;

namespace sieve::data {

DatasetFile DatasetFile::open(const std::string& path, const Options& opt) {
  DatasetFile d;
  d.file_ = h5::File::open(path);
  const h5::File& f = d.file_;
  h5::require_schema(f, schema::kDataset);
  auto bad = [&](const std::string& what) { return Error(cat(path, ": ", what)); };

  std::string kind = f.attr_string("/", "kind");
  if (kind == "image")
    d.meta_.kind = Kind::Image;
  else if (kind == "tabular")
    d.meta_.kind = Kind::Tabular;
  else
    throw bad(cat("attribute 'kind' is '", kind, "', expected 'image' or 'tabular'"));
  d.meta_.source = f.has_attr("/", "source") ? f.attr_string("/", "source") : "";
  d.meta_.fingerprint = lineage::fingerprint_of(f);

  // A sharded dataset: the shard files must all be there.
  if (f.has_attr("/", "shards")) {
    auto shards = f.attr_strings("/", "shards");
    fs::path dir = fs::path(path).parent_path();
    for (auto& s : shards) {
      fs::path p = dir / s;
      if (!fs::exists(p)) throw bad(cat("shard file ", p.string(), " is missing"));
    }
    d.shards_ = int(shards.size());
  }

  for (Split s : kSplits) {
    int k = int(s);
    std::vector<hsize_t> dims;
    if (d.is_image()) {
      dims = f.require<uint8_t>(images_path(s), 4);
      if (s == Split::Train) {
        d.meta_.height = int64_t(dims[1]);
        d.meta_.width = int64_t(dims[2]);
        d.meta_.channels = int64_t(dims[3]);
      } else if (int64_t(dims[1]) != d.meta_.height || int64_t(dims[2]) != d.meta_.width ||
                 int64_t(dims[3]) != d.meta_.channels) {
        throw bad(cat(images_path(s), ": images are ", dims[1], "x", dims[2], "x", dims[3],
                      ", the training images ", d.meta_.height, "x", d.meta_.width, "x",
                      d.meta_.channels));
      }
      if (d.meta_.height <= 0 || d.meta_.width <= 0 || d.meta_.channels <= 0)
        throw bad(cat(images_path(s), ": empty image shape"));
    } else {
      dims = f.require<float>(features_path(s), 2);
      if (s == Split::Train)
        d.meta_.features = int64_t(dims[1]);
      else if (int64_t(dims[1]) != d.meta_.features)
        throw bad(cat(features_path(s), ": ", dims[1], " features, the training set has ",
                      d.meta_.features));
      if (d.meta_.features <= 0) throw bad(cat(features_path(s), ": no feature columns"));
    }
    d.meta_.n[k] = int64_t(dims[0]);
    auto check_len = [&](const std::string& name, hsize_t n) {
      if (int64_t(n) != d.meta_.n[k])
        throw bad(cat(name, ": ", n, " rows, but ",
                      d.is_image() ? images_path(s) : features_path(s), " has ", d.meta_.n[k]));
    };
    check_len(labels_path(s), f.require<int32_t>(labels_path(s), 1)[0]);
    check_len(sample_id_path(s), f.require<int64_t>(sample_id_path(s), 1)[0]);
    if (f.exists(noise_truth_path(s))) {
      check_len(noise_truth_path(s), f.require<uint8_t>(noise_truth_path(s), 1)[0]);
      d.has_noise_[k] = true;
      d.meta_.has_noise = true;
    }
  }

  d.meta_.num_classes = f.attr_int("/", "num_classes");
  if (d.meta_.num_classes < 1) throw bad(cat("num_classes is ", d.meta_.num_classes));
  d.meta_.class_names = f.attr_strings("/", "class_names");
  if (int64_t(d.meta_.class_names.size()) != d.meta_.num_classes)
    throw bad(cat("class_names has ", d.meta_.class_names.size(), " names, num_classes is ",
                  d.meta_.num_classes));
  if (f.has_attr("/", "feature_names"))
    d.meta_.feature_names = f.attr_strings("/", "feature_names");
  d.meta_.mean = f.attr_doubles("/", "mean");
  d.meta_.std = f.attr_doubles("/", "std");
  size_t want = size_t(d.is_image() ? d.meta_.channels : d.meta_.features);
  if (d.meta_.mean.size() != want || d.meta_.std.size() != want)
    throw bad(cat("mean/std have ", d.meta_.mean.size(), "/", d.meta_.std.size(),
                  " values, expected ", want,
                  d.is_image() ? " (one per channel)" : " (one per feature)"));

  if (opt.check_labels) {
    for (Split s : kSplits) {
      const int64_t step = 1 << 20;
      std::vector<int32_t> buf;
      for (int64_t a = 0; a < d.rows(s); a += step) {
        int64_t b = std::min(d.rows(s), a + step);
        buf.resize(size_t(b - a));
        d.read_labels(s, a, b, buf.data());
        for (int64_t i = 0; i < b - a; ++i)
          if (buf[size_t(i)] < 0 || buf[size_t(i)] >= d.meta_.num_classes)
            throw bad(cat(labels_path(s), "[", a + i, "] = ", buf[size_t(i)], ": out of range 0..",
                          d.meta_.num_classes - 1));
      }
    }
    // sample_id is the join key of every later file: a repeated one would join two rows
    // to one filter/feature row. Unique over both splits (test ids follow the training ids).
    std::vector<int64_t> ids;
    ids.reserve(size_t(d.rows(Split::Train) + d.rows(Split::Test)));
    for (Split s : kSplits) {
      auto v = d.sample_ids(s);
      ids.insert(ids.end(), v.begin(), v.end());
    }
    std::sort(ids.begin(), ids.end());
    auto dup = std::adjacent_find(ids.begin(), ids.end());
    if (dup != ids.end()) throw bad(cat("sample_id ", *dup, " appears more than once"));
  }
  return d;
}

std::string DatasetFile::config_yaml() const {
  return file_.has_attr("/", "config") ? file_.attr_string("/", "config") : "";
}

void DatasetFile::check_range(Split s, int64_t begin, int64_t end) const {
  if (begin < 0 || end < begin || end > rows(s))
    throw Error(cat(path(), ": ", split_name(s), " rows [", begin, ", ", end, ") out of range (",
                    rows(s), " rows)"));
}

void DatasetFile::read_images(Split s, int64_t begin, int64_t end, uint8_t* out) const {
  if (!is_image()) throw Error(cat(path(), ": a tabular dataset has no images"));
  check_range(s, begin, end);
  file_.read_rows<uint8_t>(images_path(s), hsize_t(begin), hsize_t(end - begin), out);
}
void DatasetFile::read_features(Split s, int64_t begin, int64_t end, float* out) const {
  if (is_image()) throw Error(cat(path(), ": an image dataset has no feature rows"));
  check_range(s, begin, end);
  file_.read_rows<float>(features_path(s), hsize_t(begin), hsize_t(end - begin), out);
}
void DatasetFile::read_labels(Split s, int64_t begin, int64_t end, int32_t* out) const {
  check_range(s, begin, end);
  file_.read_rows<int32_t>(labels_path(s), hsize_t(begin), hsize_t(end - begin), out);
}
void DatasetFile::read_sample_ids(Split s, int64_t begin, int64_t end, int64_t* out) const {
  check_range(s, begin, end);
  file_.read_rows<int64_t>(sample_id_path(s), hsize_t(begin), hsize_t(end - begin), out);
}
void DatasetFile::read_noise_truth(Split s, int64_t begin, int64_t end, uint8_t* out) const {
  check_range(s, begin, end);
  if (!has_noise_truth(s)) {
    std::fill(out, out + (end - begin), uint8_t(0));
    return;
  }
  file_.read_rows<uint8_t>(noise_truth_path(s), hsize_t(begin), hsize_t(end - begin), out);
}

std::vector<uint8_t> DatasetFile::read_images(Split s, int64_t begin, int64_t end) const {
  std::vector<uint8_t> v(size_t(std::max<int64_t>(0, end - begin) * row_elems()));
  read_images(s, begin, end, v.data());
  return v;
}
std::vector<float> DatasetFile::read_features(Split s, int64_t begin, int64_t end) const {
  std::vector<float> v(size_t(std::max<int64_t>(0, end - begin) * row_elems()));
  read_features(s, begin, end, v.data());
  return v;
}
std::vector<int32_t> DatasetFile::read_labels(Split s, int64_t begin, int64_t end) const {
  std::vector<int32_t> v(size_t(std::max<int64_t>(0, end - begin)));
  read_labels(s, begin, end, v.data());
  return v;
}
std::vector<int64_t> DatasetFile::read_sample_ids(Split s, int64_t begin, int64_t end) const {
  std::vector<int64_t> v(size_t(std::max<int64_t>(0, end - begin)));
  read_sample_ids(s, begin, end, v.data());
  return v;
}
std::vector<uint8_t> DatasetFile::read_noise_truth(Split s, int64_t begin, int64_t end) const {
  std::vector<uint8_t> v(size_t(std::max<int64_t>(0, end - begin)));
  read_noise_truth(s, begin, end, v.data());
  return v;
}

template <typename T>
void DatasetFile::gather(const std::string& name, Split s, const std::vector<int64_t>& idx,
                         int64_t elems, T* out) const {
  size_t i = 0;
  while (i < idx.size()) {
    size_t j = i + 1;
    while (j < idx.size() && idx[j] == idx[j - 1] + 1) ++j;
    check_range(s, idx[i], idx[j - 1] + 1);
    file_.read_rows<T>(name, hsize_t(idx[i]), hsize_t(j - i), out + i * size_t(elems));
    i = j;
  }
}

void DatasetFile::gather_images(Split s, const std::vector<int64_t>& idx, uint8_t* out) const {
  if (!is_image()) throw Error(cat(path(), ": a tabular dataset has no images"));
  gather<uint8_t>(images_path(s), s, idx, row_elems(), out);
}
void DatasetFile::gather_features(Split s, const std::vector<int64_t>& idx, float* out) const {
  if (is_image()) throw Error(cat(path(), ": an image dataset has no feature rows"));
  gather<float>(features_path(s), s, idx, row_elems(), out);
}
void DatasetFile::gather_labels(Split s, const std::vector<int64_t>& idx, int32_t* out) const {
  gather<int32_t>(labels_path(s), s, idx, 1, out);
}

}  // namespace sieve::data
