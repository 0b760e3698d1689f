// Helpers of the data tests: small input files written byte by byte (CIFAR binary batches,
// IDX files), running shard_dataset (directly or under mpirun), and dumping every dataset
// and attribute of an HDF5 file for comparisons.
#pragma once
#include <hdf5.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "io/h5.hpp"
#include "support/test_util.hpp"
#include "util/error.hpp"

namespace sieve::test::data {

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

inline void write_gz(const std::string& path, const std::vector<uint8_t>& b) {
  gzFile gz = gzopen(path.c_str(), "wb");
  gzwrite(gz, b.data(), unsigned(b.size()));
  gzclose(gz);
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// One CIFAR record as the source holds it.
struct CifarRecord {
  uint8_t coarse = 0, label = 0;
  std::vector<uint8_t> chw;  // 3 * 1024 bytes: R plane, G plane, B plane
};

inline CifarRecord random_record(std::mt19937& rng, int classes) {
  CifarRecord r;
  r.label = uint8_t(rng() % classes);
  r.coarse = uint8_t(rng() % 20);
  r.chw.resize(3072);
  for (auto& b : r.chw) b = uint8_t(rng());
  return r;
}

inline std::vector<uint8_t> cifar_bytes(const std::vector<CifarRecord>& recs, bool c100) {
  std::vector<uint8_t> out;
  for (auto& r : recs) {
    if (c100) out.push_back(r.coarse);
    out.push_back(r.label);
    out.insert(out.end(), r.chw.begin(), r.chw.end());
  }
  return out;
}

struct CifarSet {
  std::vector<CifarRecord> train, test;
};

// CIFAR-10 layout: data_batch_{1..5}.bin with `per_batch[i]` records, test_batch.bin,
// batches.meta.txt (with a trailing blank line, as the real one has).
inline CifarSet make_cifar10(const std::string& dir, std::vector<int> per_batch, int n_test,
                             uint32_t seed = 1) {
  std::filesystem::create_directories(dir);
  std::mt19937 rng(seed);
  CifarSet s;
  for (int b = 0; b < 5; ++b) {
    std::vector<CifarRecord> recs;
    for (int i = 0; i < per_batch[size_t(b)]; ++i) recs.push_back(random_record(rng, 10));
    write_bytes(dir + "/data_batch_" + std::to_string(b + 1) + ".bin", cifar_bytes(recs, false));
    s.train.insert(s.train.end(), recs.begin(), recs.end());
  }
  for (int i = 0; i < n_test; ++i) s.test.push_back(random_record(rng, 10));
  write_bytes(dir + "/test_batch.bin", cifar_bytes(s.test, false));
  std::ofstream(dir + "/batches.meta.txt")
      << "airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n\n";
  return s;
}

inline CifarSet make_cifar100(const std::string& dir, int n_train, int n_test, uint32_t seed = 2) {
  std::filesystem::create_directories(dir);
  std::mt19937 rng(seed);
  CifarSet s;
  for (int i = 0; i < n_train; ++i) s.train.push_back(random_record(rng, 100));
  for (int i = 0; i < n_test; ++i) s.test.push_back(random_record(rng, 100));
  write_bytes(dir + "/train.bin", cifar_bytes(s.train, true));
  write_bytes(dir + "/test.bin", cifar_bytes(s.test, true));
  return s;
}

inline void put_be32(std::vector<uint8_t>& v, uint32_t x) {
  v.push_back(uint8_t(x >> 24));
  v.push_back(uint8_t(x >> 16));
  v.push_back(uint8_t(x >> 8));
  v.push_back(uint8_t(x));
}

inline std::vector<uint8_t> idx_images(uint32_t n, uint32_t rows, uint32_t cols, const std::vector<uint8_t>& px) {
  std::vector<uint8_t> v;
  put_be32(v, 0x00000803);
  put_be32(v, n);
  put_be32(v, rows);
  put_be32(v, cols);
  v.insert(v.end(), px.begin(), px.end());
  return v;
}

inline std::vector<uint8_t> idx_labels(const std::vector<uint8_t>& labels) {
  std::vector<uint8_t> v;
  put_be32(v, 0x00000801);
  put_be32(v, uint32_t(labels.size()));
  v.insert(v.end(), labels.begin(), labels.end());
  return v;
}

struct IdxSet {
  int rows = 0, cols = 0;
  std::vector<uint8_t> images[2], labels[2];  // train, test
};

// MNIST layout in `dir`, plain or gzip-compressed (".gz" names).
inline IdxSet make_idx(const std::string& dir, int n_train, int n_test, int rows, int cols, bool gz,
                       uint32_t seed = 3) {
  std::filesystem::create_directories(dir);
  std::mt19937 rng(seed);
  IdxSet s;
  s.rows = rows;
  s.cols = cols;
  const char* stems[2] = {"train", "t10k"};
  int counts[2] = {n_train, n_test};
  for (int k = 0; k < 2; ++k) {
    s.images[k].resize(size_t(counts[k]) * rows * cols);
    for (auto& b : s.images[k]) b = uint8_t(rng());
    s.labels[k].resize(size_t(counts[k]));
    for (auto& b : s.labels[k]) b = uint8_t(rng() % 10);
    auto img = idx_images(uint32_t(counts[k]), uint32_t(rows), uint32_t(cols), s.images[k]);
    auto lab = idx_labels(s.labels[k]);
    std::string base = dir + "/" + stems[k];
    if (gz) {
      write_gz(base + "-images-idx3-ubyte.gz", img);
      write_gz(base + "-labels-idx1-ubyte.gz", lab);
    } else {
      write_bytes(base + "-images-idx3-ubyte", img);
      write_bytes(base + "-labels-idx1-ubyte", lab);
    }
  }
  return s;
}

// Run shard_dataset with `args` (ranks 0: directly, as a singleton; else under mpirun -n).
inline int shard(const std::string& args, std::string* out = nullptr, int ranks = 0) {
  std::string tool = tool_path("shard_dataset");
  std::string cmd = ranks > 0 ? mpirun_prefix(ranks) + tool + " " + args
                              : tool + " " + args;
  return run_command(cmd, out);
}

// Every dataset (bytes in the native form of its type) and every attribute (as text) of an
// HDF5 file, keyed "path" and "path@attr". `datasets_only` leaves attributes out.
inline std::map<std::string, std::string> dump_h5(const std::string& path, bool datasets_only = false) {
  std::map<std::string, std::string> out;
  h5::File f = h5::File::open(path);
  std::vector<std::string> objects = {"/"};
  H5Lvisit(f.id(), H5_INDEX_NAME, H5_ITER_INC,
           [](hid_t, const char* name, const H5L_info_t*, void* data) -> herr_t {
             static_cast<std::vector<std::string>*>(data)->push_back(std::string("/") + name);
             return 0;
           },
           &objects);
  for (auto& obj : objects) {
    H5O_info_t info;
    H5Oget_info_by_name(f.id(), obj.c_str(), &info, H5P_DEFAULT);
    if (info.type == H5O_TYPE_DATASET) {
      hid_t d = H5Dopen2(f.id(), obj.c_str(), H5P_DEFAULT);
      hid_t t = H5Dget_type(d);
      hid_t nt = H5Tget_native_type(t, H5T_DIR_ASCEND);
      hid_t s = H5Dget_space(d);
      hssize_t n = H5Sget_simple_extent_npoints(s);
      std::string buf(size_t(n) * H5Tget_size(nt), '\0');
      if (n > 0) H5Dread(d, nt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data());
      int rank = H5Sget_simple_extent_ndims(s);
      std::vector<hsize_t> dims(size_t(std::max(rank, 0)));
      H5Sget_simple_extent_dims(s, dims.data(), nullptr);
      std::string shape = h5::type_name(t) + "[";
      for (auto x : dims) shape += std::to_string(x) + ",";
      out[obj] = shape + "]" + buf;
      H5Sclose(s);
      H5Tclose(nt);
      H5Tclose(t);
      H5Dclose(d);
    }
    if (datasets_only) continue;
    std::vector<std::string> names;
    hid_t o = H5Oopen(f.id(), obj.c_str(), H5P_DEFAULT);
    H5Aiterate2(o, H5_INDEX_NAME, H5_ITER_INC, nullptr,
                [](hid_t, const char* name, const H5A_info_t*, void* data) -> herr_t {
                  static_cast<std::vector<std::string>*>(data)->push_back(name);
                  return 0;
                },
                &names);
    for (auto& a : names) {
      hid_t at = H5Aopen(o, a.c_str(), H5P_DEFAULT);
      hid_t t = H5Aget_type(at);
      bool is_string = H5Tget_class(t) == H5T_STRING;
      H5Tclose(t);
      H5Aclose(at);
      std::string v;
      if (is_string) {
        for (auto& s : f.attr_strings(obj, a)) v += s + "\n";
      } else {
        for (double x : f.attr_doubles(obj, a)) v += std::to_string(x) + ",";
      }
      out[obj + "@" + a] = v;
    }
    H5Oclose(o);
  }
  return out;
}

// First difference between two dumps ("" when equal), for assertion messages.
inline std::string first_difference(const std::map<std::string, std::string>& a,
                                    const std::map<std::string, std::string>& b) {
  for (auto& [k, v] : a) {
    auto it = b.find(k);
    if (it == b.end()) return "only in the first: " + k;
    if (it->second != v) return "differs: " + k;
  }
  for (auto& [k, v] : b)
    if (!a.count(k)) return "only in the second: " + k;
  return "";
}

// Files in `dir` (names), to check that failed runs leave nothing behind.
inline std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  for (auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace sieve::test::data
