// MNIST / Fashion-MNIST IDX files (http://yann.lecun.com/exdb/mnist/ format), plain or gzip:
//   train-images-idx3-ubyte  magic 0x00000803, dims n, rows, cols (big-endian uint32), n*rows*cols bytes
//   train-labels-idx1-ubyte  magic 0x00000801, dim n, n label bytes
//   t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte: the test split.
// A file may also be named with ".gz" (read with zlib) or with a dot before "idx"
// (train-images.idx3-ubyte, as some mirrors ship it).
#include <algorithm>

#include "data/fileutil.hpp"
#include "data/source.hpp"
#include "util/error.hpp"

namespace sieve::data {
namespace {

constexpr int64_t kMaxIdxBytes = int64_t(8) << 30;

uint32_t be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

std::string find_idx(const std::string& dir, const std::string& stem, const std::string& kind) {
  // stem "train-images", kind "idx3-ubyte"
  for (const std::string& base : {dir + "/" + stem + "-" + kind, dir + "/" + stem + "." + kind})
    for (const char* ext : {"", ".gz"})
      if (is_regular_file(base + ext)) return base + ext;
  throw Error(cat(dir, "/", stem, "-", kind, "[.gz]: no such file (MNIST IDX input)"));
}

struct IdxArray {
  std::string path;
  std::vector<uint8_t> bytes;  // whole file (decompressed)
  std::vector<uint32_t> dims;
  size_t header = 0;
  const uint8_t* data() const { return bytes.data() + header; }
};

IdxArray read_idx(const std::string& path, int want_dims) {
  IdxArray a;
  a.path = path;
  a.bytes = read_maybe_gz(path, kMaxIdxBytes);
  const auto& b = a.bytes;
  if (b.size() < 4) throw Error(cat(path, ": ", b.size(), " bytes: too short for an IDX header"));
  uint32_t magic = be32(b.data());
  uint32_t want = 0x00000800u | uint32_t(want_dims);
  if (magic != want) {
    char got[16], exp[16];
    std::snprintf(got, sizeof got, "0x%08x", magic);
    std::snprintf(exp, sizeof exp, "0x%08x", want);
    throw Error(cat(path, ": bad IDX magic ", got, ", expected ", exp,
                    want_dims == 3 ? " (unsigned-byte images, 3 dimensions)"
                                   : " (unsigned-byte labels, 1 dimension)"));
  }
  a.header = 4 + 4 * size_t(want_dims);
  if (b.size() < a.header)
    throw Error(cat(path, ": truncated IDX header (", b.size(), " bytes)"));
  uint64_t elems = 1;
  for (int d = 0; d < want_dims; ++d) {
    a.dims.push_back(be32(b.data() + 4 + 4 * d));
    elems *= a.dims.back();
  }
  if (want_dims == 3 && (a.dims[1] == 0 || a.dims[2] == 0 || a.dims[1] > 4096 || a.dims[2] > 4096))
    throw Error(cat(path, ": implausible image size ", a.dims[1], "x", a.dims[2]));
  uint64_t expect = a.header + elems;
  if (b.size() < expect)
    throw Error(cat(path, ": truncated: ", b.size(), " bytes, the header's dimensions need ", expect));
  if (b.size() > expect)
    throw Error(cat(path, ": oversized: ", b.size(), " bytes, the header's dimensions need ", expect,
                    " (", b.size() - expect, " trailing bytes)"));
  return a;
}

class IdxSource : public Source {
 public:
  IdxSource(const std::string& dir, const std::vector<std::string>& names) {
    if (!is_directory(dir)) throw Error(cat(dir, ": no such directory (data.path for MNIST IDX files)"));
    const char* stems[2] = {"train", "t10k"};
    for (Split s : kSplits) {
      int k = int(s);
      images_[k] = read_idx(find_idx(dir, cat(stems[k], "-images"), "idx3-ubyte"), 3);
      labels_[k] = read_idx(find_idx(dir, cat(stems[k], "-labels"), "idx1-ubyte"), 1);
      if (images_[k].dims[0] != labels_[k].dims[0])
        throw Error(cat(images_[k].path, " holds ", images_[k].dims[0], " images but ",
                        labels_[k].path, " holds ", labels_[k].dims[0], " labels"));
      meta_.n[k] = images_[k].dims[0];
    }
    const auto& tr = images_[0].dims;
    const auto& te = images_[1].dims;
    if (tr[1] != te[1] || tr[2] != te[2])
      throw Error(cat(images_[1].path, ": images are ", te[1], "x", te[2], " but the training images are ",
                      tr[1], "x", tr[2]));
    meta_.kind = Kind::Image;
    meta_.source = "mnist";
    meta_.description = cat("IDX files in ", dir);
    meta_.height = tr[1];
    meta_.width = tr[2];
    meta_.channels = 1;
    if (names.empty())
      for (int c = 0; c < 10; ++c) meta_.class_names.push_back(std::to_string(c));
    else
      meta_.class_names = names;
    meta_.num_classes = int64_t(meta_.class_names.size());
    for (Split s : kSplits) {
      const IdxArray& l = labels_[int(s)];
      for (int64_t i = 0; i < meta_.n[int(s)]; ++i)
        if (l.data()[i] >= meta_.num_classes)
          throw Error(cat(l.path, ": label ", int(l.data()[i]), " at index ", i, " out of range 0..",
                          meta_.num_classes - 1));
    }
  }
  const DatasetMeta& meta() const override { return meta_; }
  void produce(Split split, int64_t row0, int64_t count, const Rows& out) const override {
    const int64_t rb = meta_.row_elems();
    std::copy_n(images_[int(split)].data() + row0 * rb, count * rb, out.images);
    const uint8_t* l = labels_[int(split)].data() + row0;
    for (int64_t i = 0; i < count; ++i) out.labels[i] = l[i];
  }

 private:
  IdxArray images_[2], labels_[2];
  DatasetMeta meta_;
};

}  // namespace

std::unique_ptr<Source> open_idx(const std::string& dir, const std::vector<std::string>& class_names,
                                 const Comm& comm) {
  std::unique_ptr<Source> src;
  all_checked(comm, [&] { src = std::make_unique<IdxSource>(dir, class_names); });
  return src;
}

}  // namespace sieve::data
