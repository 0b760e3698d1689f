#include "train/stream.hpp"

#include <algorithm>
#include <mutex>
#include <numeric>

#include "util/error.hpp"
#include "util/log.hpp"

namespace sieve::train {

namespace {

// Debian's HDF5 is built without thread safety: no two threads may be inside the library at
// once. Every read of this file (the read-ahead thread's and the caller's) holds this lock;
// the trainer's own HDF5 work (checkpoints, model files) first waits for the read-ahead
// (SampleSource::quiesce).
std::mutex& hdf5_mutex() {
  static std::mutex m;
  return m;
}

// Fisher-Yates from a given initial state (the chunks' order: which rank reads which chunk).
void shuffle(std::vector<int64_t>& v, uint64_t state) {
  for (size_t i = v.size(); i > 1; --i) {
    state = mix64(state);
    std::swap(v[i - 1], v[size_t(state % i)]);
  }
}

// An empty split of the dataset's geometry holding n rows.
SplitData empty_like(const data::DatasetFile& ds, int64_t n) {
  SplitData d;
  d.n = n;
  d.image = ds.is_image();
  const size_t row = size_t(ds.row_elems());
  if (d.image) {
    d.h = int(ds.height()), d.w = int(ds.width()), d.c = int(ds.channels());
    d.images.resize(size_t(n) * row);
  } else {
    d.f = int(ds.features());
    d.features.resize(size_t(n) * row);
  }
  d.labels.resize(size_t(n));
  d.sample_id.resize(size_t(n));
  return d;
}

void copy_row(const SplitData& from, int64_t i, SplitData& to, int64_t j) {
  const size_t row = from.sample_floats();
  if (from.image)
    std::copy_n(from.images.begin() + ptrdiff_t(size_t(i) * row), row,
                to.images.begin() + ptrdiff_t(size_t(j) * row));
  else
    std::copy_n(from.features.begin() + ptrdiff_t(size_t(i) * row), row,
                to.features.begin() + ptrdiff_t(size_t(j) * row));
  to.labels[size_t(j)] = from.labels[size_t(i)];
  to.sample_id[size_t(j)] = from.sample_id[size_t(i)];
}

int64_t split_bytes_of(const SplitData& d) {
  return int64_t(d.images.size() + d.features.size() * sizeof(float) +
                 d.labels.size() * sizeof(int32_t) + d.sample_id.size() * sizeof(int64_t));
}

}  // namespace

// ---- MemorySource ----

MemorySource::MemorySource(const SplitData& split, std::vector<int64_t> active,
                           int64_t global_batch, uint64_t seed, int rank, int size)
    : split_(std::shared_ptr<const SplitData>(), &split),  // aliasing: does not own
      sampler_(std::move(active), global_batch, seed),
      rank_(rank),
      size_(size) {}

StepPart MemorySource::rank_part(int64_t epoch, int64_t step) {
  return {split_, sampler_.rank_part(epoch, step, rank_, size_)};
}

void for_each_eval_block(
    const EvalSplit& eval, const std::vector<int64_t>* positions, int rank, int size,
    const std::function<void(const SplitData&, const std::vector<int64_t>&)>& fn) {
  const int64_t total = positions ? int64_t(positions->size()) : eval.rows;
  const Range r = block_range(total, rank, size);
  auto row_at = [&](int64_t i) { return positions ? (*positions)[size_t(i)] : i; };
  if (eval.mem) {
    std::vector<int64_t> local;
    for (int64_t i = r.begin; i < r.end; ++i) local.push_back(row_at(i));
    fn(*eval.mem, local);
    return;
  }
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  const data::DatasetFile ds = data::DatasetFile::open(eval.path);
  for (int64_t i = r.begin; i < r.end;) {
    const int64_t a = row_at(i);
    int64_t j = i + 1;  // positions are sorted: extend while the span fits one read
    while (j < r.end && row_at(j) >= row_at(j - 1) && row_at(j) - a < eval.block_rows) ++j;
    const SplitData block = read_rows(ds, eval.split, a, row_at(j - 1) + 1);
    std::vector<int64_t> local;
    for (int64_t k = i; k < j; ++k) local.push_back(row_at(k) - a);
    fn(block, local);
    i = j;
  }
}

// ---- StreamSource ----

StreamGeometry stream_geometry(int64_t row_bytes, int64_t budget_bytes) {
  row_bytes = std::max<int64_t>(1, row_bytes);
  const int64_t window_rows = std::max<int64_t>(1, budget_bytes / 4 / row_bytes);
  const int64_t chunk_rows = std::clamp<int64_t>(
      std::min<int64_t>((int64_t(4) << 20) / row_bytes, window_rows / 16), 1, window_rows);
  return {chunk_rows, std::max<int64_t>(1, window_rows / chunk_rows)};
}

bool use_stream(const std::string& loader, int64_t split_bytes, int64_t budget_bytes) {
  if (loader == "stream") return true;
  if (loader == "memory") return false;
  return split_bytes > budget_bytes;
}

StreamSource::StreamSource(const std::string& path, data::Split split, std::vector<int64_t> active,
                           int64_t global_batch, uint64_t seed, int rank, int size,
                           StreamGeometry geometry)
    : path_(path),
      split_(split),
      active_(std::move(active)),
      global_(global_batch),
      seed_(seed),
      rank_(rank),
      size_(size),
      geo_(geometry) {
  SIEVE_CHECK(!active_.empty(), "stream loader: no training samples");
  SIEVE_ASSERT(std::is_sorted(active_.begin(), active_.end()), "active rows must be sorted");
  SIEVE_ASSERT(geo_.chunk_rows > 0 && geo_.window_chunks > 0);
  const int64_t n = int64_t(active_.size());
  check_global_batch(global_, n, "global batch", "the training samples");
  for (int q = 0; q < size_; ++q) parts_.push_back(block_range(global_, q, size_).size());
  part_ = parts_[size_t(rank_)];
  // Chunks go to ranks balanced by active rows (plan_epoch), so with several ranks a rank's
  // share is within one chunk of its proportional share; the steps per epoch are fixed for
  // the whole run from that bound, so every epoch (and every rank) has the same number.
  steps_ = whole_batches(n, global_);
  if (size_ > 1)
    for (int64_t b : parts_)
      if (b > 0)
        steps_ = std::min(steps_, std::max<int64_t>(0, n * b / global_ - geo_.chunk_rows) / b);
  SIEVE_CHECK(steps_ > 0, path_, ": streaming ", n, " samples over ", size_, " ranks in chunks of ",
              geo_.chunk_rows, " rows leaves no full global batch of ", global_,
              " per epoch; raise data.memory_budget_mb or use data.loader: memory");
}

StreamSource::~StreamSource() {
  if (ahead_.valid()) ahead_.wait();
}

std::string StreamSource::describe() const {
  return cat("stream chunk_rows=", geo_.chunk_rows, " window_chunks=", geo_.window_chunks,
             " ranks=", size_);
}

void StreamSource::plan_epoch(int64_t epoch) {
  if (ahead_.valid()) ahead_.wait();
  ahead_ = {};
  resident_.clear();
  windows_.clear();
  int64_t rows = 0;
  {
    std::lock_guard<std::mutex> lock(hdf5_mutex());
    rows = data::DatasetFile::open(path_).rows(split_);
  }
  const int64_t K = geo_.chunk_rows;
  const int64_t chunks = (rows + K - 1) / K;
  // Active rows per chunk (active_ is sorted).
  std::vector<int64_t> first(size_t(chunks) + 1);
  for (int64_t c = 0; c <= chunks; ++c)
    first[size_t(c)] =
        std::lower_bound(active_.begin(), active_.end(), std::min(rows, c * K)) - active_.begin();
  std::vector<int64_t> perm(static_cast<size_t>(chunks));
  std::iota(perm.begin(), perm.end(), 0);
  shuffle(perm, mix64(seed_ ^ mix64(uint64_t(epoch) + 0xC4C4)));
  // Balanced assignment: each chunk, in permuted order, to the rank furthest below its share
  // (assigned rows / its batch part); ties to the lowest rank.
  std::vector<int64_t> mine;
  std::vector<int64_t> assigned(size_t(size_), 0);
  for (int64_t c : perm) {
    const int64_t cnt = first[size_t(c) + 1] - first[size_t(c)];
    if (cnt == 0) continue;
    int best = -1;
    for (int q = 0; q < size_; ++q) {
      const int64_t b = parts_[size_t(q)];
      if (b == 0) continue;
      // assigned[q]/b < assigned[best]/b_best, compared without division
      if (best < 0 || assigned[size_t(q)] * parts_[size_t(best)] < assigned[size_t(best)] * b)
        best = q;
    }
    assigned[size_t(best)] += cnt;
    if (best == rank_) mine.push_back(c);
  }
  SIEVE_ASSERT(assigned[size_t(rank_)] >= steps_ * part_, "rank ", rank_, " got ",
               assigned[size_t(rank_)], " rows for ", steps_, " steps of ", part_);
  // Windows of window_chunks chunks; inside a window the chunks are in file order (sequential
  // reads; and with one window, storage = the active rows in order, as the in-memory path).
  std::vector<int64_t> carry;
  int64_t step = 0;
  for (size_t w0 = 0, k = 0; w0 < mine.size() && step < steps_;
       w0 += size_t(geo_.window_chunks), ++k) {
    std::vector<int64_t> group(
        mine.begin() + ptrdiff_t(w0),
        mine.begin() + ptrdiff_t(std::min(mine.size(), w0 + size_t(geo_.window_chunks))));
    std::sort(group.begin(), group.end());
    Window win;
    win.rows = carry;
    for (int64_t c : group)
      win.rows.insert(win.rows.end(), active_.begin() + first[size_t(c)],
                      active_.begin() + first[size_t(c) + 1]);
    // The Sampler's keyed order inside the window: with one window (k = 0) the in-memory order.
    win.order = keyed_order(win.rows, epoch_order_key(seed_, epoch) + uint64_t(k));
    win.first_step = step;
    win.steps = part_ > 0 ? std::min<int64_t>(int64_t(win.rows.size()) / part_, steps_ - step) : 0;
    step += win.steps;
    carry.clear();
    for (size_t i = size_t(win.steps * part_); i < win.order.size(); ++i)
      carry.push_back(win.rows[size_t(win.order[i])]);
    windows_.push_back(std::move(win));
  }
  SIEVE_ASSERT(step == steps_ || part_ == 0, "stream plan covers ", step, " of ", steps_, " steps");
  resident_.assign(windows_.size(), nullptr);
  planned_epoch_ = epoch;
}

std::shared_ptr<const SplitData> StreamSource::load(size_t w,
                                                    std::shared_ptr<const SplitData> prev) const {
  const Window& win = windows_[w];
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  const data::DatasetFile ds = data::DatasetFile::open(path_);
  auto out = std::make_shared<SplitData>(empty_like(ds, int64_t(win.rows.size())));
  // The carried rows come first (from the previous window's data when it is still held,
  // else read one by one: at most one step's part); then the window's rows, read as runs of
  // consecutive rows in large blocks.
  size_t at = 0;
  if (w > 0) {
    const Window& pw = windows_[w - 1];
    const size_t n_carry = pw.order.size() - size_t(pw.steps * part_);
    for (size_t i = 0; i < n_carry; ++i, ++at) {
      const int64_t src_pos = pw.order[size_t(pw.steps * part_) + i];
      if (prev) {
        copy_row(*prev, src_pos, *out, int64_t(at));
      } else {
        const int64_t r = win.rows[at];
        copy_row(read_rows(ds, split_, r, r + 1), 0, *out, int64_t(at));
      }
    }
  }
  while (at < win.rows.size()) {
    size_t end = at + 1;  // a run of rows inside one chunk-sized read
    while (end < win.rows.size() && win.rows[end] - win.rows[at] < geo_.chunk_rows &&
           win.rows[end] > win.rows[end - 1])
      ++end;
    const int64_t a = win.rows[at], b = win.rows[end - 1] + 1;
    const SplitData block = read_rows(ds, split_, a, b);
    for (size_t i = at; i < end; ++i) copy_row(block, win.rows[i] - a, *out, int64_t(i));
    at = end;
  }
  return out;
}

std::shared_ptr<const SplitData> StreamSource::window_data(size_t w) {
  if (!resident_[w]) {
    if (ahead_.valid() && ahead_window_ == w)
      resident_[w] = ahead_.get();
    else
      resident_[w] = load(w, w > 0 ? resident_[w - 1] : nullptr);
  }
  // Older windows are released (a batch still being built holds its own reference); the
  // next one is read ahead on a thread. load() only reads the dataset file: the trainer calls
  // quiesce() before its own HDF5 work, as Debian's HDF5 is not thread-safe.
  for (size_t i = 0; i < w; ++i) resident_[i].reset();
  if (w + 1 < windows_.size() && !resident_[w + 1] && !(ahead_.valid() && ahead_window_ == w + 1)) {
    if (ahead_.valid()) ahead_.wait();
    ahead_window_ = w + 1;
    ahead_ =
        std::async(std::launch::async, [this, w, cur = resident_[w]] { return load(w + 1, cur); });
  }
  return resident_[w];
}

StepPart StreamSource::rank_part(int64_t epoch, int64_t step) {
  if (planned_epoch_ != epoch) plan_epoch(epoch);
  SIEVE_ASSERT(step >= 0 && step < steps_, "step ", step, " outside the epoch's ", steps_);
  size_t w = 0;
  while (w + 1 < windows_.size() && windows_[w].first_step + windows_[w].steps <= step) ++w;
  const Window& win = windows_[w];
  StepPart p;
  p.data = window_data(w);
  const size_t base = size_t((step - win.first_step) * part_);
  p.rows.assign(win.order.begin() + ptrdiff_t(base),
                win.order.begin() + ptrdiff_t(base + size_t(part_)));
  return p;
}

void StreamSource::quiesce() {
  if (ahead_.valid()) ahead_.wait();
}

TrainInput load_train_input(const std::string& path, const Config& cfg) {
  TrainInput in;
  in.path = path;
  in.meta = read_dataset_meta(path);
  in.budget_bytes = int64_t(cfg.get_float("data.memory_budget_mb") * double(1 << 20));
  const data::DatasetFile ds = data::DatasetFile::open(path);  // checks every label's range
  const int64_t row_bytes = in.row_bytes = ds.row_bytes();
  in.train_rows = ds.rows(data::Split::Train);
  in.test_rows = ds.rows(data::Split::Test);
  const int64_t split_bytes = in.train_rows * row_bytes;
  in.stream = use_stream(cfg.get_string("data.loader"), split_bytes, in.budget_bytes);
  in.has_test = in.test_rows > 0;
  if (!in.stream) {
    in.train = read_rows(ds, data::Split::Train, 0, ds.rows(data::Split::Train));
    if (in.has_test) in.test = read_rows(ds, data::Split::Test, 0, ds.rows(data::Split::Test));
    log::info(cat(path, ": ", in.train.n, " train / ", in.test.n, " test samples, ",
                  in.meta.num_classes, " classes, in memory (", split_bytes >> 20, " MB)"));
    return in;
  }
  in.geometry = stream_geometry(row_bytes, in.budget_bytes);
  SplitData& t = in.train = empty_like(ds, 0);  // the index: everything but the sample data
  t.n = in.train_rows;
  t.labels = ds.labels(data::Split::Train);
  t.sample_id = ds.sample_ids(data::Split::Train);
  log::info(cat(path, ": ", t.n, " train / ", in.test_rows, " test samples, ", in.meta.num_classes,
                " classes, streamed (", split_bytes >> 20,
                " MB of training samples; data.memory_budget_mb ", in.budget_bytes >> 20,
                ": chunks of ", in.geometry.chunk_rows, " rows, windows of ",
                in.geometry.window_chunks, " chunks = ",
                (in.geometry.chunk_rows * in.geometry.window_chunks * row_bytes) >> 20, " MB)"));
  return in;
}

std::unique_ptr<SampleSource> make_source(const TrainInput& in, std::vector<int64_t> active,
                                          int64_t global_batch, uint64_t seed, const Comm& comm) {
  if (!in.stream)
    return std::make_unique<MemorySource>(in.train, std::move(active), global_batch, seed,
                                          comm.rank(), comm.size());
  std::sort(active.begin(), active.end());
  return std::make_unique<StreamSource>(in.path, data::Split::Train, std::move(active),
                                        global_batch, seed, comm.rank(), comm.size(), in.geometry);
}

EvalSplit eval_split(const TrainInput& in, data::Split split) {
  EvalSplit e;
  if (split == data::Split::Test && !in.has_test) return e;
  if (!in.stream) {
    e.mem = split == data::Split::Test ? &in.test : &in.train;
    e.rows = e.mem->n;
    return e;
  }
  e.path = in.path;
  e.split = split;
  e.rows = split == data::Split::Test ? in.test_rows : in.train_rows;
  e.block_rows = std::max<int64_t>(1, in.budget_bytes / 4 / std::max<int64_t>(1, in.row_bytes));
  return e;
}

int64_t StreamSource::resident_bytes() const {
  int64_t total = 0;
  for (const auto& r : resident_)
    if (r) total += split_bytes_of(*r);
  return total;
}

}  // namespace sieve::train
