#include "data/source.hpp"

#include <climits>

#include "config/seeds.hpp"
#include "data/label_noise.hpp"
#include "data/rng.hpp"
#include "data/synthetic.hpp"
#include "util/error.hpp"

namespace sieve::data {


namespace {

class SyntheticSource : public Source {
 public:
  SyntheticSource(const SyntheticSpec& spec, const std::vector<std::string>& names) : gen_(spec) {
    meta_.kind = Kind::Image;
    meta_.source = "synthetic";
    meta_.description = cat("synthetic shapes (seed ", spec.seed, ")");
    meta_.n[0] = gen_.rows(Split::Train);
    meta_.n[1] = gen_.rows(Split::Test);
    meta_.height = spec.height;
    meta_.width = spec.width;
    meta_.channels = spec.channels;
    meta_.num_classes = spec.classes;
    meta_.class_names = names.empty() ? gen_.class_names() : names;
    meta_.has_noise = true;
    meta_.has_clean_labels = true;
  }
  const DatasetMeta& meta() const override { return meta_; }
  void produce(Split split, int64_t row0, int64_t count, const Rows& out) const override {
    const int64_t rb = gen_.row_bytes();
    for (int64_t i = 0; i < count; ++i) {
      SyntheticSample smp = gen_.generate(split, row0 + i, out.images + i * rb);
      out.labels[i] = smp.label;
      out.noise[i] = smp.noise;
      if (out.clean_labels) out.clean_labels[i] = smp.true_class;
    }
  }
  void produce_labels(Split split, int64_t row0, int64_t count, const Rows& out) const override {
    for (int64_t i = 0; i < count; ++i) {
      SyntheticSample smp = gen_.describe(split, row0 + i);
      out.labels[i] = smp.label;
      if (out.noise) out.noise[i] = smp.noise;
      if (out.clean_labels) out.clean_labels[i] = smp.true_class;
    }
  }

 private:
  SyntheticGenerator gen_;
  DatasetMeta meta_;
};

}  // namespace

void Source::produce_labels(Split split, int64_t row0, int64_t count, const Rows& out) const {
  const DatasetMeta& m = meta();
  std::vector<uint8_t> images(m.kind == Kind::Image ? size_t(count * m.row_elems()) : 0);
  std::vector<float> features(m.kind == Kind::Tabular ? size_t(count * m.row_elems()) : 0);
  Rows full = out;
  full.images = images.empty() ? nullptr : images.data();
  full.features = features.empty() ? nullptr : features.data();
  produce(split, row0, count, full);
}

uint64_t data_seed(const Config& cfg) {
  int64_t s = cfg.get_int("data.seed");
  if (s >= 0) return uint64_t(s);
  return derived_seed(cfg, SeedFor::data);
}

SyntheticSpec synthetic_spec(const Config& cfg) {
  SyntheticSpec spec;
  spec.classes = int(cfg.get_int("data.synthetic.classes"));
  spec.train_per_class = cfg.get_int("data.synthetic.train_per_class");
  spec.test_per_class = cfg.get_int("data.synthetic.test_per_class");
  spec.height = int(cfg.get_int("data.synthetic.height"));
  spec.width = int(cfg.get_int("data.synthetic.width"));
  spec.channels = int(cfg.get_int("data.synthetic.channels"));
  spec.label_noise = cfg.get_float("data.synthetic.label_noise");
  spec.outliers = cfg.get_float("data.synthetic.outliers");
  spec.pixel_noise = cfg.get_float("data.synthetic.pixel_noise");
  spec.seed = data_seed(cfg);
  return spec;
}

std::unique_ptr<Source> open_source(const Config& cfg, const std::string& input, const Comm& comm) {
  std::string kind = cfg.get_string("data.source");
  std::string path = input.empty() ? cfg.get_string("data.path") : input;
  std::vector<std::string> names = cfg.get_string_list("data.class_names");
  // Parsed (and its keys checked) before any input is read.
  const LabelNoiseOptions noise = label_noise_options(cfg);
  std::unique_ptr<Source> src;
  if (kind == "synthetic") {
    const SyntheticSpec spec = synthetic_spec(cfg);
    if (spec.channels == 2)
      throw UsageError("data.synthetic.channels: 2 is not supported (use 1 or 3)");
    if (spec.label_noise + spec.outliers > 1.0)
      throw UsageError(cat("data.synthetic.label_noise + data.synthetic.outliers = ",
                           spec.label_noise + spec.outliers, ": must not exceed 1"));
    if (!names.empty() && int64_t(names.size()) != spec.classes)
      throw UsageError(cat("data.class_names has ", names.size(),
                           " names but data.synthetic.classes is ", spec.classes));
    src = std::make_unique<SyntheticSource>(spec, names);
    return noise.rate > 0 ? with_label_noise(std::move(src), noise, comm) : std::move(src);
  }
  if (path.empty())
    throw UsageError(cat("data.path is empty: data.source '", kind,
                         "' needs an input (set data.path or pass --input)"));
  if (kind == "cifar10" || kind == "cifar100")
    src = open_cifar(path, kind == "cifar100", names, comm);
  else if (kind == "mnist")
    src = open_idx(path, names, comm);
  else if (kind == "folder") {
    FolderOptions fo;
    fo.size = int(cfg.get_int("data.folder.size"));
    fo.resize = int(cfg.get_int("data.folder.resize"));
    fo.channels = int(cfg.get_int("data.folder.channels"));
    fo.skip_bad = cfg.get_string("data.folder.on_error") == "skip";
    fo.test_fraction = cfg.get_float("data.folder.test_fraction");
    fo.seed = data_seed(cfg);
    if (fo.channels == 2) throw UsageError("data.folder.channels: 2 is not supported (use 1 or 3)");
    if (fo.resize == 0) fo.resize = fo.size;
    if (fo.resize < fo.size)
      throw UsageError(cat("data.folder.resize = ", fo.resize, ": smaller than data.folder.size = ",
                           fo.size, " (the centre crop would not fit)"));
    src = open_folder(path, fo, names, comm);
  } else if (kind == "csv")
    src = open_csv(path, cfg.get_string("data.csv.label_column"),
                   cfg.get_float("data.csv.test_fraction"), data_seed(cfg), names, comm);
  else
    throw UsageError(cat("data.source '", kind, "' is not supported"));
  // Refuse at the source what every later stage would reject (or train on as nonsense):
  // the same verdict on every rank, since every rank opened the same input.
  const DatasetMeta& m = src->meta();
  if (m.num_classes < 2) {
    std::string names_list;
    for (auto& n : m.class_names) names_list += (names_list.empty() ? "'" : ", '") + n + "'";
    throw Error(cat(path, ": ", m.num_classes, " class", m.num_classes == 1 ? "" : "es",
                    names_list.empty() ? "" : cat(" (", names_list, ")"),
                    ": a dataset needs at least 2 classes to train a classifier"));
  }
  if (m.rows(Split::Train) == 0)
    throw Error(cat(path, ": no training samples (", m.description, ")"));
  if (noise.rate > 0) src = with_label_noise(std::move(src), noise, comm);
  return src;
}

}  // namespace sieve::data
