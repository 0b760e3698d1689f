#include "data/writer_index.hpp"

#include <filesystem>

#include "io/lineage.hpp"
#include "io/schemas.hpp"
#include "util/error.hpp"

namespace fs = std::filesystem;

namespace sieve::data {

void set_common_attrs(h5::File& f, const DatasetMeta& m) {
  f.set_attr("/", "kind", std::string(kind_name(m.kind)));
  f.set_attr("/", "source", m.source);
  f.set_attr("/", "description", m.description);
  f.set_attr("/", "num_classes", int64_t(m.num_classes));
  f.set_attr("/", "class_names", m.class_names);
  if (m.kind == Kind::Tabular) f.set_attr("/", "feature_names", m.feature_names);
  f.set_attr("/", "num_train", m.rows(Split::Train));
  f.set_attr("/", "num_test", m.rows(Split::Test));
  if (!m.skipped.empty()) f.set_attr("/", "skipped_inputs", m.skipped);
  if (!m.injected.kind.empty()) {  // data.label_noise as applied
    f.set_attr("/", "label_noise_kind", m.injected.kind);
    f.set_attr("/", "label_noise_rate", m.injected.rate);
    f.set_attr("/", "label_noise_seed", m.injected.seed);
    f.set_attr("/", "label_noise_injected", m.injected.count);
    if (!m.injected.pairs.empty()) f.set_attr("/", "label_noise_pairs", m.injected.pairs);
  }
}

std::vector<hsize_t> row_dims(const DatasetMeta& m, int64_t n) {
  if (m.kind == Kind::Image)
    return {hsize_t(n), hsize_t(m.height), hsize_t(m.width), hsize_t(m.channels)};
  return {hsize_t(n), hsize_t(m.features)};
}

namespace {

// A dataset of the index file: a virtual dataset over the shards' datasets of the same name.
void create_virtual(h5::File& idx, const std::string& name, hid_t type,
                    const std::vector<hsize_t>& dims, const std::vector<std::string>& shard_files,
                    int64_t n_total) {
  int K = int(shard_files.size());
  h5::Handle space(H5Screate_simple(int(dims.size()), dims.data(), nullptr), H5Sclose);
  h5::Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  for (int k = 0; k < K; ++k) {
    Range r = block_range(n_total, k, K);
    if (r.size() == 0) continue;
    std::vector<hsize_t> start(dims.size(), 0), count = dims, sdims = dims;
    start[0] = hsize_t(r.begin);
    count[0] = sdims[0] = hsize_t(r.size());
    h5::Handle vsel(H5Scopy(space.get()), H5Sclose);
    H5Sselect_hyperslab(vsel.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
    h5::Handle sspace(H5Screate_simple(int(sdims.size()), sdims.data(), nullptr), H5Sclose);
    // Source files are named relative to the index: HDF5 looks next to the index file.
    std::string src = fs::path(shard_files[size_t(k)]).filename().string();
    if (H5Pset_virtual(dcpl.get(), vsel.get(), src.c_str(), name.c_str(), sspace.get()) < 0)
      throw Error(cat(idx.path(), ": ", name, ": cannot map shard ", src));
  }
  h5::Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  hid_t d =
      H5Dcreate2(idx.id(), name.c_str(), type, space.get(), lcpl.get(), dcpl.get(), H5P_DEFAULT);
  if (d < 0) throw Error(cat(idx.path(), ": ", name, ": cannot create virtual dataset"));
  H5Dclose(d);
}

}  // namespace

void write_index(const std::string& tmp_path, const DatasetMeta& m, const std::string& config_yaml,
                 const std::vector<std::string>& files, const WriteSummary& sum) {
  h5::File idx = h5::File::create(tmp_path);
  h5::stamp(idx, schema::kDataset, config_yaml);
  set_common_attrs(idx, m);
  idx.set_attr("/", "num_shards", int64_t(files.size()));
  std::vector<std::string> names;
  for (auto& fpath : files) names.push_back(fs::path(fpath).filename().string());
  idx.set_attr("/", "shards", names);
  idx.set_attr("/", lineage::kFingerprint, sum.fingerprint);
  idx.set_attr("/", "mean", sum.mean);
  idx.set_attr("/", "std", sum.std);
  if (m.has_noise) {
    idx.set_attr("/", "label_noise_count", sum.label_noise);
    idx.set_attr("/", "outlier_count", sum.outliers);
  }
  for (Split s : kSplits) {
    int64_t n = m.rows(s);
    std::vector<hsize_t> d1 = {hsize_t(n)};
    if (m.kind == Kind::Image)
      create_virtual(idx, images_path(s), H5T_NATIVE_UINT8, row_dims(m, n), files, n);
    else
      create_virtual(idx, features_path(s), H5T_NATIVE_FLOAT, row_dims(m, n), files, n);
    create_virtual(idx, labels_path(s), H5T_NATIVE_INT32, d1, files, n);
    create_virtual(idx, sample_id_path(s), H5T_NATIVE_INT64, d1, files, n);
    if (m.has_noise) {
      create_virtual(idx, noise_truth_path(s), H5T_NATIVE_UINT8, d1, files, n);
      create_virtual(idx, noise_kind_path(s), H5T_NATIVE_UINT8, d1, files, n);
    }
    if (m.has_clean_labels)
      create_virtual(idx, clean_labels_path(s), H5T_NATIVE_INT32, d1, files, n);
  }
  idx.close();
}

}  // namespace sieve::data
