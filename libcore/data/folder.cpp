// data.source: folder — torchvision's ImageFolder layout, decoded with libjpeg-turbo and
// libpng, resized (shorter side, antialiased bilinear) and centre-cropped (docs/data.md).
//
//   ROOT/<class>/.../*.jpg|*.jpeg|*.png            train; test = a seeded per-class fraction
//   ROOT/train/<class>/...  ROOT/val|test/<class>/... train and test trees
//
// Classes are the sorted sub-directory names; files are found recursively and sorted. The
// rows of each split are in a seeded random order (data.seed), so that every shard and
// every block of rows holds every class. Files with other extensions are not images to us
// (torchvision skips them too) and are counted in one log line; other image formats (BMP,
// GIF, TIFF, WebP, PPM) and unreadable files (empty, not JPEG/PNG, corrupt) fail the job or
// are skipped as data.folder.on_error says — never a crash, never silently.
#include <omp.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <numeric>

#include "data/image_decode.hpp"
#include "data/rng.hpp"
#include "data/source.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace fs = std::filesystem;

namespace sieve::data {

namespace {

std::string lower_ext(const fs::path& p) {
  std::string e = p.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return e;
}

bool decodable_ext(const std::string& e) { return e == ".jpg" || e == ".jpeg" || e == ".png"; }
bool other_image_ext(const std::string& e) {
  static const char* exts[] = {".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm", ".pbm"};
  return std::find(std::begin(exts), std::end(exts), e) != std::end(exts);
}

struct Entry {
  std::string path;
  int32_t label;
};

std::vector<std::string> class_dirs(const fs::path& root) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (e.is_directory() && e.path().filename().string()[0] != '.')
      names.push_back(e.path().filename().string());
  if (ec) throw Error(cat(root.string(), ": cannot list: ", ec.message()));
  std::sort(names.begin(), names.end());
  return names;
}

// data.class_names renames the classes by position (class k is the k-th sorted directory, as
// torchvision's ImageFolder numbers them), which is what a list of display names for
// directories such as ImageNet's wnids wants. A name that is itself one of the directories
// but at another position would label that directory's images with another class's name
// (e.g. a config's list in the dataset's usual order over directories sorted by name), so
// it is an error rather than a silent relabelling.
void reject_reordered_names(const std::vector<std::string>& names,
                            const std::vector<std::string>& dirs, const std::string& where) {
  for (size_t k = 0; k < names.size(); ++k) {
    auto dir = std::find(dirs.begin(), dirs.end(), names[k]);
    if (dir == dirs.end() || size_t(dir - dirs.begin()) == k) continue;
    throw UsageError(cat("data.class_names[", k, "] is '", names[k], "', but class ", k, " of ",
                         where, " is the directory '", dirs[k], "' and '", names[k], "' is class ",
                         dir - dirs.begin(),
                         " (classes are the sorted directory names): list the names in that order, "
                         "or leave data.class_names out"));
  }
}

// Every file under root/<class> for the known classes; counts the ignored ones.
std::vector<Entry> list_tree(const fs::path& root, const std::vector<std::string>& classes,
                             bool must_match, int64_t* ignored) {
  std::map<std::string, int32_t> index;
  for (size_t k = 0; k < classes.size(); ++k) index[classes[k]] = int32_t(k);
  std::vector<Entry> out;
  for (const std::string& c : class_dirs(root)) {
    auto it = index.find(c);
    if (it == index.end()) {
      if (must_match)
        throw Error(cat(root.string(), "/", c, ": a class the training tree does not have"));
      continue;
    }
    std::vector<std::string> files;
    std::error_code ec;
    for (auto i = fs::recursive_directory_iterator(root / c, fs::directory_options::follow_directory_symlink, ec);
         i != fs::recursive_directory_iterator(); i.increment(ec)) {
      if (ec) break;
      if (!i->is_regular_file() || i->path().filename().string()[0] == '.') continue;
      const std::string e = lower_ext(i->path());
      if (decodable_ext(e) || other_image_ext(e))
        files.push_back(i->path().string());
      else
        ++*ignored;
    }
    if (ec) throw Error(cat((root / c).string(), ": cannot list: ", ec.message()));
    std::sort(files.begin(), files.end());
    for (auto& f : files) out.push_back({f, it->second});
  }
  return out;
}

void shuffle(std::vector<Entry>& v, uint64_t seed) {
  Rng rng(seed);
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[size_t(rng.next() % i)]);
}

class FolderSource : public Source {
 public:
  FolderSource(const std::string& root, const FolderOptions& opt,
               const std::vector<std::string>& names, const Comm& comm)
      : opt_(opt) {
    fs::path r(root);
    if (!fs::is_directory(r)) throw Error(cat(root, ": not a directory (data.source: folder)"));
    fs::path train = r, test;
    bool split_by_fraction = true;
    if (fs::is_directory(r / "train")) {
      train = r / "train";
      for (const char* t : {"val", "test"})
        if (fs::is_directory(r / t)) {
          test = r / t;
          split_by_fraction = false;
          break;
        }
    }
    const std::vector<std::string> classes = class_dirs(train);
    if (classes.empty())
      throw Error(cat(train.string(), ": no class sub-directories (expected <class>/<image> files)"));
    int64_t ignored = 0;
    std::vector<Entry> all = list_tree(train, classes, false, &ignored);
    std::vector<Entry> parts[2];
    if (split_by_fraction) {
      // A stratified, seeded test fraction of each class.
      std::vector<std::vector<Entry>> by_class(classes.size());
      for (auto& e : all) by_class[size_t(e.label)].push_back(e);
      for (size_t k = 0; k < by_class.size(); ++k) {
        shuffle(by_class[k], hash_combine(opt.seed, 0x666f6c64 + k));
        const size_t n_test = size_t(std::llround(opt.test_fraction * double(by_class[k].size())));
        for (size_t i = 0; i < by_class[k].size(); ++i) parts[i < n_test ? 1 : 0].push_back(by_class[k][i]);
      }
    } else {
      parts[0] = std::move(all);
      parts[1] = list_tree(test, classes, true, &ignored);
    }
    // Unreadable files, found by all ranks together (each its block, OpenMP inside).
    int64_t bad_total = 0;
    std::string first_bad;
    for (int s = 0; s < 2; ++s) {
      std::vector<uint8_t> bad(parts[s].size(), 0);
      std::vector<std::string> why(parts[s].size());
      Range mine = block_range(int64_t(parts[s].size()), comm.rank(), comm.size());
#pragma omp parallel for schedule(dynamic, 16)
      for (int64_t i = mine.begin; i < mine.end; ++i) {
        const std::string& p = parts[s][size_t(i)].path;
        try {
          if (other_image_ext(lower_ext(p)))
            throw Error(cat(p, ": ", lower_ext(p).substr(1), " images are not supported (JPEG and PNG are)"));
          if (opt.skip_bad)
            decode_image(p, opt.resize);  // the body too: skipped files must be known up front
          else
            read_image_header(p);
        } catch (const Error& e) {
          bad[size_t(i)] = 1;
          why[size_t(i)] = e.what();
        }
      }
      comm.allreduce_sum(bad.data(), bad.size());  // disjoint blocks: 0 or 1 each
      std::vector<Entry> kept;
      for (size_t i = 0; i < bad.size(); ++i) {
        if (!bad[i]) {
          kept.push_back(parts[s][i]);
          continue;
        }
        ++bad_total;
        meta_.skipped.push_back(parts[s][i].path);
        if (first_bad.empty() && !why[i].empty()) first_bad = why[i];
      }
      parts[s] = std::move(kept);
    }
    if (bad_total > 0 && !opt.skip_bad) {
      // The lowest rank that saw one names it (its block comes first).
      agree_on_error(comm, first_bad.empty() ? "" : cat(root, ": ", bad_total, " unreadable image file(s), ",
                                                "nothing written (data.folder.on_error=skip leaves ",
                                                "them out); first: ", first_bad));
    }
    if (bad_total > 0) {
      // Every rank knows the skipped paths; rank 0 names the first (reasons stay local).
      std::string first = first_bad;
      const int have = first.empty() ? comm.size() : comm.rank();
      const int owner = comm.allreduce_min(have);
      comm.bcast_string(first, owner);
      log::warn(cat("skipped ", bad_total, " unreadable image file(s) (data.folder.on_error=skip; ",
                    "listed in the dataset's skipped_inputs attribute); first: ", first));
    }
    if (ignored > 0)
      log::info(cat(root, ": ", ignored, " file(s) without an image extension ignored"));
    for (int s = 0; s < 2; ++s) {
      shuffle(parts[s], hash_combine(opt.seed, 0x726f7773 + uint64_t(s)));
      files_[s] = std::move(parts[s]);
      meta_.n[s] = int64_t(files_[s].size());
    }
    meta_.kind = Kind::Image;
    meta_.source = "folder";
    meta_.description = cat("image folder ", root);
    meta_.height = meta_.width = opt.size;
    meta_.channels = opt.channels;
    if (!names.empty() && names.size() != classes.size())
      throw UsageError(cat("data.class_names has ", names.size(), " names but ", train.string(),
                           " has ", classes.size(), " class directories"));
    reject_reordered_names(names, classes, train.string());
    meta_.class_names = names.empty() ? classes : names;
    meta_.num_classes = int64_t(classes.size());
  }

  const DatasetMeta& meta() const override { return meta_; }

  void produce(Split split, int64_t row0, int64_t count, const Rows& out) const override {
    const int64_t rb = meta_.row_elems();
    thread_local RgbImage img;  // reused: no fresh pages per image
    for (int64_t i = 0; i < count; ++i) {
      const Entry& e = files_[int(split)][size_t(row0 + i)];
      decode_image(e.path, opt_.resize, &img);
      resize_center_crop(img, opt_.resize, opt_.size, opt_.channels, out.images + i * rb);
      out.labels[i] = e.label;
    }
  }
  // The label is the directory: no decoding (data.label_noise with a class map reads these).
  void produce_labels(Split split, int64_t row0, int64_t count, const Rows& out) const override {
    for (int64_t i = 0; i < count; ++i) out.labels[i] = files_[int(split)][size_t(row0 + i)].label;
  }

 private:
  FolderOptions opt_;
  DatasetMeta meta_;
  std::vector<Entry> files_[2];
};

}  // namespace

std::unique_ptr<Source> open_folder(const std::string& root, const FolderOptions& opt,
                                    const std::vector<std::string>& class_names, const Comm& comm) {
  // Listing errors are the same on every rank; the scan inside agrees on its own.
  return std::make_unique<FolderSource>(root, opt, class_names, comm);
}

}  // namespace sieve::data
