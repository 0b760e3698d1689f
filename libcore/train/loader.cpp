#include "train/loader.hpp"

#include <algorithm>
#include <unordered_map>

#include "data/dataset_file.hpp"
#include "io/h5.hpp"
#include "io/lineage.hpp"
#include "io/schemas.hpp"
#include "util/log.hpp"

namespace sieve::train {

// Every dataset read goes through data::DatasetFile::open, which checks the schema, shapes,
// types, label ranges and that every shard file of a sharded dataset exists (HDF5 reads a
// missing shard as zeros: a model trained on it reports "test acc 1").
DatasetMeta read_dataset_meta(const std::string& path) {
  data::DatasetFile::Options o;
  o.check_labels = false;  // read_split checks the labels it reads
  const auto ds = data::DatasetFile::open(path, o);
  DatasetMeta m = ds.meta();
  SIEVE_CHECK(m.num_classes >= 2, path, ": attr num_classes: expected >= 2, found ", m.num_classes);
  return m;
}

namespace {
data::Split split_of(const std::string& path, const std::string& split) {
  if (split == "train") return data::Split::Train;
  if (split == "test") return data::Split::Test;
  throw Error(cat(path, ": no split '", split, "' (expected train or test)"));
}
}  // namespace

bool has_split(const std::string& path, const std::string& split) {
  data::DatasetFile::Options o;
  o.check_labels = false;
  // DatasetFile::open requires both splits, so a readable dataset has either.
  data::DatasetFile::open(path, o);
  split_of(path, split);
  return true;
}

SplitData read_split(const std::string& path, const std::string& split) {
  const auto ds = data::DatasetFile::open(path);  // also checks every label's range
  const data::Split s = split_of(path, split);
  return read_rows(ds, s, 0, ds.rows(s));
}

SplitData read_rows(const data::DatasetFile& ds, data::Split s, int64_t begin, int64_t end) {
  SplitData d;
  d.n = end - begin;
  d.image = ds.is_image();
  const size_t row_elems = size_t(ds.row_elems());
  // Few large reads: blocks of ~64 MiB of rows each.
  auto read_blocks = [&](auto* out, auto read) {
    using T = std::remove_pointer_t<decltype(out)>;
    const int64_t rows_per =
        std::max<int64_t>(1, int64_t((64u << 20) / std::max<size_t>(1, row_elems * sizeof(T))));
    for (int64_t r = 0; r < d.n; r += rows_per)
      read(begin + r, begin + std::min(d.n, r + rows_per), out + size_t(r) * row_elems);
  };
  if (d.image) {
    d.h = int(ds.height());
    d.w = int(ds.width());
    d.c = int(ds.channels());
    d.images.resize(size_t(d.n) * row_elems);
    read_blocks(d.images.data(),
                [&](int64_t a, int64_t b, uint8_t* o) { ds.read_images(s, a, b, o); });
  } else {
    d.f = int(ds.features());
    d.features.resize(size_t(d.n) * row_elems);
    read_blocks(d.features.data(),
                [&](int64_t a, int64_t b, float* o) { ds.read_features(s, a, b, o); });
  }
  d.labels = ds.read_labels(s, begin, end);
  d.sample_id = ds.read_sample_ids(s, begin, end);
  return d;
}

std::vector<int64_t> read_keep_indices(const std::string& filter_path, const std::string& which,
                                       const JoinTarget& dataset) {
  h5::File f = h5::File::open(filter_path);
  h5::require_schema(f, schema::kFilter);
  lineage::require_same_dataset(filter_path, lineage::dataset_fingerprint_of(f), dataset.path,
                                dataset.fingerprint);
  const auto& ids = dataset.ids;
  auto kd = f.require<uint8_t>("/" + which, 1);
  auto sd = f.require<int64_t>("/sample_id", 1);
  SIEVE_CHECK(kd[0] == sd[0], filter_path, ": /", which, " has ", kd[0],
              " rows but /sample_id has ", sd[0]);
  auto keep = f.read_all<uint8_t>("/" + which);
  auto sid = f.read_all<int64_t>("/sample_id");
  std::vector<int32_t> flabels;
  if (f.exists("/labels")) {
    SIEVE_CHECK(f.require<int32_t>("/labels", 1)[0] == sd[0], filter_path, ": /labels has ",
                f.require<int32_t>("/labels", 1)[0], " rows but /sample_id has ", sd[0]);
    flabels = f.read_all<int32_t>("/labels");
  }
  std::unordered_map<int64_t, size_t> row_of;
  row_of.reserve(sid.size());
  for (size_t i = 0; i < sid.size(); ++i)
    SIEVE_CHECK(row_of.emplace(sid[i], i).second, filter_path, ": /sample_id ", sid[i],
                " appears more than once");
  SIEVE_CHECK(sid.size() == ids.size(), filter_path, ": filter has ", sid.size(),
              " samples but the training split of ", dataset.path, " has ", ids.size(),
              " (filter made from another dataset?)");
  std::vector<int64_t> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto it = row_of.find(ids[i]);
    SIEVE_CHECK(it != row_of.end(), filter_path, ": sample_id ", ids[i], " of ", dataset.path,
                " is missing from /sample_id (filter made from another dataset?)");
    if (!flabels.empty())
      SIEVE_CHECK(flabels[it->second] == dataset.labels[i], filter_path, ": sample_id ", ids[i],
                  " has label ", flabels[it->second], " here but ", dataset.labels[i], " in ",
                  dataset.path, " (filter made from another dataset?)");
    if (keep[it->second]) out.push_back(int64_t(i));
  }
  SIEVE_CHECK(!out.empty(), filter_path, ": /", which, " keeps no sample");
  return out;
}

void check_global_batch(int64_t global_batch, int64_t samples, const std::string& key,
                        const std::string& what) {
  if (global_batch > samples)
    throw UsageError(cat(key, " = ", global_batch, ": larger than ", what, " (", samples,
                         "); every step would take all of them, a smaller batch than asked. "
                         "Use a global batch of at most ",
                         samples, " or more data"));
}

void warn_uneven_split(int64_t global_batch, int ranks, const std::string& key) {
  if (ranks <= 1 || global_batch % ranks == 0) return;
  const int64_t lo = global_batch / ranks;
  log::warn(cat(key, " = ", global_batch, " does not split evenly over ", ranks, " ranks: ",
                global_batch % ranks, " rank(s) take ", lo + 1, " samples per step, the others ",
                lo, " (gradients are weighted exactly; BatchNorm sees the uneven parts)"));
}

Sampler::Sampler(std::vector<int64_t> active, int64_t global_batch, uint64_t seed)
    : active_(std::move(active)), global_(global_batch), seed_(seed) {
  SIEVE_CHECK(!active_.empty(), "sampler: no training samples");
  const int64_t n = int64_t(active_.size());
  check_global_batch(global_, n, "global batch", "the training samples");
  batch_ = global_;
  steps_ = whole_batches(n, global_);
}

std::vector<int64_t> keyed_order(const std::vector<int64_t>& rows, uint64_t key) {
  std::vector<std::pair<uint64_t, int64_t>> keyed(rows.size());
  for (size_t i = 0; i < rows.size(); ++i)
    keyed[i] = {mix64(key ^ mix64(uint64_t(rows[i]) + 0x9e3779b97f4a7c15ull)), int64_t(i)};
  std::sort(keyed.begin(), keyed.end());  // distinct rows: ties (equal draws) broken by position
  std::vector<int64_t> order(rows.size());
  for (size_t i = 0; i < keyed.size(); ++i) order[i] = keyed[i].second;
  return order;
}

uint64_t epoch_order_key(uint64_t seed, int64_t epoch) {
  return mix64(seed ^ mix64(uint64_t(epoch) + 0x5151));
}

void Sampler::ensure_epoch(int64_t epoch) {
  if (perm_epoch_ == epoch) return;
  const std::vector<int64_t> order = keyed_order(active_, epoch_order_key(seed_, epoch));
  perm_.resize(order.size());
  for (size_t i = 0; i < order.size(); ++i) perm_[i] = active_[size_t(order[i])];
  perm_epoch_ = epoch;
}

std::vector<int64_t> Sampler::rank_part(int64_t epoch, int64_t step, int rank, int size) {
  ensure_epoch(epoch);
  Range r = block_range(batch_, rank, size);
  const int64_t base = step * batch_;
  return std::vector<int64_t>(perm_.begin() + base + r.begin, perm_.begin() + base + r.end);
}

int max_shift(int side) {
  return (side + 4) / 8;
}

void make_batch(const SplitData& d, const DatasetMeta& meta, const int64_t* idx, int n,
                Augmentation aug, uint64_t seed, int64_t epoch, Batch* out) {
  const size_t per = d.sample_floats();
  const int shift_y = aug.shift ? max_shift(d.h) : 0, shift_x = aug.shift ? max_shift(d.w) : 0;
  out->n = n;
  out->x.assign(size_t(n) * per, 0.0f);
  out->y.resize(size_t(n));
  for (int i = 0; i < n; ++i) {
    const int64_t s = idx[i];
    out->y[i] = d.labels[size_t(s)];
    float* dst = out->x.data() + size_t(i) * per;
    if (!d.image) {
      const float* src = d.features.data() + size_t(s) * d.f;
      for (int j = 0; j < d.f; ++j) {
        const double sd = j < int(meta.std.size()) && meta.std[j] > 0 ? meta.std[j] : 1.0;
        const double mu = j < int(meta.mean.size()) ? meta.mean[j] : 0.0;
        dst[j] = float((src[j] - mu) / sd);
      }
      continue;
    }
    int dy = 0, dx = 0;
    bool flip = false;
    if (aug.shift || aug.flip) {
      // One draw per (seed, epoch, sample): the same bits as when the shift was always 4.
      uint64_t r = mix64(seed ^ mix64(uint64_t(epoch) * 0x100000001b3ULL ^
                                      mix64(uint64_t(d.sample_id[size_t(s)]))));
      dy = int(r % uint64_t(2 * shift_y + 1)) - shift_y;
      dx = int((r >> 8) % uint64_t(2 * shift_x + 1)) - shift_x;
      flip = aug.flip && ((r >> 16) & 1) != 0;
    }
    const uint8_t* src = d.images.data() + size_t(s) * d.h * d.w * d.c;
    for (int c = 0; c < d.c; ++c) {
      const float mu = float(c < int(meta.mean.size()) ? meta.mean[c] : 0.0);
      const float sd = float(c < int(meta.std.size()) && meta.std[c] > 0 ? meta.std[c] : 1.0);
      const float zero = (0.0f - mu) / sd;  // padding is black, as torchvision's pad=0
      float* plane = dst + size_t(c) * d.h * d.w;
      for (int y = 0; y < d.h; ++y) {
        const int sy = y + dy;
        for (int x = 0; x < d.w; ++x) {
          const int xx = flip ? d.w - 1 - x : x;
          const int sx = xx + dx;
          float v = zero;
          if (sy >= 0 && sy < d.h && sx >= 0 && sx < d.w)
            v = (float(src[(size_t(sy) * d.w + sx) * d.c + c]) / 255.0f - mu) / sd;
          plane[size_t(y) * d.w + x] = v;
        }
      }
    }
  }
}

Prefetcher::~Prefetcher() {
  if (fut_.valid()) fut_.wait();
}

void Prefetcher::request(std::shared_ptr<const SplitData> d, std::vector<int64_t> idx,
                         Augmentation aug, uint64_t seed, int64_t epoch) {
  SIEVE_ASSERT(!fut_.valid(), "one prefetch at a time");
  fut_ = std::async(std::launch::async,
                    [this, d = std::move(d), idx = std::move(idx), aug, seed, epoch] {
                      Batch b;
                      make_batch(*d, meta_, idx.data(), int(idx.size()), aug, seed, epoch, &b);
                      return b;
                    });
}

Batch Prefetcher::take() {
  SIEVE_ASSERT(fut_.valid(), "take() without request()");
  return fut_.get();
}

}  // namespace sieve::train
