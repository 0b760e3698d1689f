// CIFAR-10 / CIFAR-100 binary batches as https://www.cs.toronto.edu/~kriz/cifar.html
// distributes them:
//   CIFAR-10:  cifar-10-batches-bin/data_batch_{1..5}.bin, test_batch.bin, batches.meta.txt;
//              records of 1 label byte + 3072 bytes (1024 R, 1024 G, 1024 B; rows of 32).
//   CIFAR-100: cifar-100-binary/train.bin, test.bin, fine_label_names.txt;
//              records of 1 coarse byte + 1 fine byte + 3072 bytes (the fine label is used).
// Images are converted from CHW planes to HWC.
#include <algorithm>

#include "data/fileutil.hpp"
#include "data/source.hpp"
#include "util/error.hpp"

namespace sieve::data {
namespace {

constexpr int kSide = 32, kPlane = kSide * kSide, kPixels = 3 * kPlane;

const std::vector<std::string> kCifar10Names = {"airplane", "automobile", "bird",  "cat",  "deer",
                                                "dog",      "frog",       "horse", "ship", "truck"};
const std::vector<std::string> kCifar100Names = {
    "apple",      "aquarium_fish", "baby",        "bear",      "beaver",       "bed",
    "bee",        "beetle",        "bicycle",     "bottle",    "bowl",         "boy",
    "bridge",     "bus",           "butterfly",   "camel",     "can",          "castle",
    "caterpillar", "cattle",       "chair",       "chimpanzee", "clock",       "cloud",
    "cockroach",  "couch",         "crab",        "crocodile", "cup",          "dinosaur",
    "dolphin",    "elephant",      "flatfish",    "forest",    "fox",          "girl",
    "hamster",    "house",         "kangaroo",    "keyboard",  "lamp",         "lawn_mower",
    "leopard",    "lion",          "lizard",      "lobster",   "man",          "maple_tree",
    "motorcycle", "mountain",      "mouse",       "mushroom",  "oak_tree",     "orange",
    "orchid",     "otter",         "palm_tree",   "pear",      "pickup_truck", "pine_tree",
    "plain",      "plate",         "poppy",       "porcupine", "possum",       "rabbit",
    "raccoon",    "ray",           "road",        "rocket",    "rose",         "sea",
    "seal",       "shark",         "shrew",       "skunk",     "skyscraper",   "snail",
    "snake",      "spider",        "squirrel",    "streetcar", "sunflower",    "sweet_pepper",
    "table",      "tank",          "telephone",   "television", "tiger",       "tractor",
    "train",      "trout",         "tulip",       "turtle",    "wardrobe",     "whale",
    "willow_tree", "wolf",         "woman",       "worm"};

struct Part {
  std::string path;
  int64_t first = 0;  // first row of the split held by this file
  int64_t count = 0;  // records
};

class CifarSource : public Source {
 public:
  CifarSource(std::string dir, bool c100, const std::vector<std::string>& names)
      : dir_(std::move(dir)), c100_(c100) {
    label_bytes_ = c100_ ? 2 : 1;
    rec_ = label_bytes_ + kPixels;
    std::string name = c100_ ? "CIFAR-100" : "CIFAR-10";
    if (!is_directory(dir_)) throw Error(cat(dir_, ": no such directory (data.path for ", name, ")"));
    // Accept the directory the archive extracts to, or its parent.
    std::string sub = dir_ + (c100_ ? "/cifar-100-binary" : "/cifar-10-batches-bin");
    std::string probe = c100_ ? "/train.bin" : "/data_batch_1.bin";
    if (!is_regular_file(dir_ + probe) && is_directory(sub)) dir_ = sub;

    std::vector<std::string> train_files, test_files;
    if (c100_) {
      train_files = {dir_ + "/train.bin"};
      test_files = {dir_ + "/test.bin"};
    } else {
      for (int i = 1; i <= 5; ++i) train_files.push_back(cat(dir_, "/data_batch_", i, ".bin"));
      test_files = {dir_ + "/test_batch.bin"};
    }
    add_parts(Split::Train, train_files, c100_ ? 50000 : 10000, name);
    add_parts(Split::Test, test_files, 10000, name);

    // Class names: config override, else the archive's list, else the known names.
    format_classes_ = c100_ ? 100 : 10;
    std::vector<std::string> file_names;
    std::string meta_path = dir_ + (c100_ ? "/fine_label_names.txt" : "/batches.meta.txt");
    if (is_regular_file(meta_path)) {
      for (auto& l : read_lines(meta_path))
        if (!trim(l).empty()) file_names.push_back(trim(l));
      if (int(file_names.size()) != format_classes_)
        throw Error(cat(meta_path, ": ", file_names.size(), " class names, expected ", format_classes_));
    }
    meta_.class_names = !names.empty() ? names
                        : !file_names.empty() ? file_names
                                              : (c100_ ? kCifar100Names : kCifar10Names);
    meta_.kind = Kind::Image;
    meta_.source = c100_ ? "cifar100" : "cifar10";
    meta_.description = cat(name, " binary batches in ", dir_);
    meta_.height = kSide;
    meta_.width = kSide;
    meta_.channels = 3;
    meta_.num_classes = int64_t(meta_.class_names.size());
  }

  // Check every label byte; records are spread over the ranks. Returns "" or the error.
  std::string check_labels(const Comm& comm) const {
    int64_t total = meta_.n[0] + meta_.n[1];
    Range mine = block_range(total, comm.rank(), comm.size());
    std::vector<uint8_t> buf;
    for (Split s : kSplits) {
      int64_t base = s == Split::Train ? 0 : meta_.n[0];
      for (const Part& p : parts_[int(s)]) {
        int64_t a = std::max(mine.begin, base + p.first), b = std::min(mine.end, base + p.first + p.count);
        for (int64_t r = a; r < b;) {
          int64_t n = std::min<int64_t>(b - r, 2048);
          int64_t rec0 = r - base - p.first;
          buf.resize(size_t(n * rec_));
          read_at(p.path, rec0 * rec_, n * rec_, buf.data());
          for (int64_t i = 0; i < n; ++i) {
            const uint8_t* rec = buf.data() + i * rec_;
            if (c100_ && rec[0] >= 20)
              return cat(p.path, ": record ", rec0 + i, ": coarse label ", int(rec[0]),
                         " out of range 0..19 (not a CIFAR-100 file?)");
            int label = rec[label_bytes_ - 1];
            if (label >= meta_.num_classes)
              return cat(p.path, ": record ", rec0 + i, ": label ", label, " out of range 0..",
                         meta_.num_classes - 1, c100_ ? " (CIFAR-100 fine labels)" : " (CIFAR-10)");
          }
          r += n;
        }
      }
    }
    return "";
  }

  const DatasetMeta& meta() const override { return meta_; }

  void produce(Split split, int64_t row0, int64_t count, const Rows& out) const override {
    std::vector<uint8_t> buf;
    for (const Part& p : parts_[int(split)]) {
      int64_t a = std::max(row0, p.first), b = std::min(row0 + count, p.first + p.count);
      if (a >= b) continue;
      buf.resize(size_t((b - a) * rec_));
      read_at(p.path, (a - p.first) * rec_, (b - a) * rec_, buf.data());
      for (int64_t i = 0; i < b - a; ++i) {
        const uint8_t* rec = buf.data() + i * rec_;
        const uint8_t* px = rec + label_bytes_;
        uint8_t* img = out.images + (a - row0 + i) * kPixels;
        out.labels[a - row0 + i] = rec[label_bytes_ - 1];
        for (int q = 0; q < kPlane; ++q) {  // CHW planes -> HWC
          img[3 * q] = px[q];
          img[3 * q + 1] = px[kPlane + q];
          img[3 * q + 2] = px[2 * kPlane + q];
        }
      }
    }
  }

 private:
  void add_parts(Split s, const std::vector<std::string>& files, int64_t max_records,
                 const std::string& name) {
    int64_t first = 0;
    for (const auto& f : files) {
      if (!is_regular_file(f))
        throw Error(cat(f, ": no such file (expected the ", name, " binary version in ", dir_, ")"));
      int64_t size = file_size(f);
      if (size == 0) throw Error(cat(f, ": empty file (truncated ", name, " batch)"));
      if (size % rec_ != 0)
        throw Error(cat(f, ": ", size, " bytes is not a whole number of ", rec_, "-byte ", name,
                        " records (truncated or oversized file)"));
      int64_t n = size / rec_;
      if (n > max_records)
        throw Error(cat(f, ": ", n, " records: oversized (a ", name, " file holds at most ",
                        max_records, ")"));
      parts_[int(s)].push_back({f, first, n});
      first += n;
    }
    meta_.n[int(s)] = first;
  }

  std::string dir_;
  bool c100_;
  int label_bytes_, rec_, format_classes_ = 10;
  std::vector<Part> parts_[2];
  DatasetMeta meta_;
};

}  // namespace

std::unique_ptr<Source> open_cifar(const std::string& dir, bool cifar100,
                                   const std::vector<std::string>& class_names, const Comm& comm) {
  std::unique_ptr<CifarSource> src;
  all_checked(comm, [&] { src = std::make_unique<CifarSource>(dir, cifar100, class_names); });
  std::string err;
  try {
    err = src->check_labels(comm);
  } catch (const Error& e) {
    err = e.what();
  }
  agree_on_error(comm, err);
  return src;
}

}  // namespace sieve::data
