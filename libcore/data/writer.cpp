#include "data/writer.hpp"

#include <fcntl.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include "data/fileutil.hpp"
#include "data/producer_pool.hpp"
#include "data/rng.hpp"
#include "data/writer_index.hpp"
#include "io/atomic_output.hpp"
#include "io/h5.hpp"
#include "io/lineage.hpp"
#include "io/schemas.hpp"
#include "util/log.hpp"

namespace fs = std::filesystem;

namespace sieve::data {

std::string shard_path(const std::string& output, int k) {
  fs::path p(output);
  return (p.parent_path() / cat(p.stem().string(), ".shard-", k, ".h5")).string();
}

void check_outputs(const WriteOptions& opt, const Comm& comm) {
  on_root_agreed(comm, [&] {
    if (opt.output.empty()) throw UsageError("output path is empty");
    check_output_path(opt.output, opt.overwrite, schema::kDataset);
    check_resolved_config_path(config_sidecar_path(opt.output));
    if (opt.shards > 1)
      for (int k = 0; k < opt.shards; ++k)
        check_output_path(shard_path(opt.output, k), opt.overwrite, schema::kDataset);
    // access(W_OK) says yes to root even where nothing can be created: try it.
    fs::path dir = fs::path(opt.output).parent_path();
    if (dir.empty()) dir = ".";
    std::string probe = (dir / cat(".sieve-probe-", getpid())).string();
    int fd = ::open(probe.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0)
      throw Error(cat(opt.output, ": output directory ", dir.string(), " is not writable (",
                      std::strerror(errno), ")"));
    ::close(fd);
    ::unlink(probe.c_str());
  });
}

namespace {

// One batch in flight: produced by the pool, written by the main thread.
struct Slot {
  std::vector<uint8_t> images, noise, truth;
  std::vector<float> features;
  std::vector<int32_t> labels, clean;
  std::vector<int64_t> ids;
  int64_t row0 = 0, count = 0;  // rows in the slice (file-local)
  void resize(const DatasetMeta& m, int64_t n) {
    if (m.kind == Kind::Image)
      images.resize(size_t(n * m.row_elems()));
    else
      features.resize(size_t(n * m.row_elems()));
    labels.resize(size_t(n));
    ids.resize(size_t(n));
    noise.resize(m.has_noise ? size_t(n) : 0);
    truth.resize(m.has_noise ? size_t(n) : 0);
    clean.resize(m.has_clean_labels ? size_t(n) : 0);
  }
};

// Per-thread tallies of a batch (summed by the main thread: integers, so the order of
// the threads does not matter).
struct Tally {
  int64_t sum[4] = {0, 0, 0, 0}, sumsq[4] = {0, 0, 0, 0};
  int64_t n_label = 0, n_outlier = 0;
  lineage::Fingerprint fp;  // this batch's rows (io/lineage.hpp)
};

// Accumulate exact per-channel pixel sums of a batch of HWC images. Sums run over
// position modulo 16*C in 32-bit lanes (a vectorisable inner loop), flushed to 64 bits
// before they could overflow.
template <int C>
void pixel_sums_c(const uint8_t* __restrict p, int64_t n, int64_t* sum, int64_t* sumsq) {
  constexpr int64_t period = 16 * C;
  constexpr int64_t flush = period * 4096;  // <= 4096 adds of <= 65025 per lane: < 2^32
  for (int64_t a = 0; a < n; a += flush) {
    const int64_t b = std::min(n, a + flush);
    alignas(64) uint32_t s[period] = {}, q[period] = {};
    int64_t i = a;
    for (; i + period <= b; i += period)
      for (int64_t j = 0; j < period; ++j) {
        uint32_t v = p[i + j];
        s[j] += v;
        q[j] += v * v;
      }
    for (; i < b; ++i) {  // the last partial period (a is a multiple of the period)
      uint32_t v = p[i];
      s[(i - a) % period] += v;
      q[(i - a) % period] += v * v;
    }
    for (int64_t j = 0; j < period; ++j) {
      sum[j % C] += s[j];
      sumsq[j % C] += q[j];
    }
  }
}

void pixel_sums(const uint8_t* p, int64_t pixels, int C, int64_t* sum, int64_t* sumsq) {
  const int64_t n = pixels * C;
  switch (C) {
    case 1:
      return pixel_sums_c<1>(p, n, sum, sumsq);
    case 2:
      return pixel_sums_c<2>(p, n, sum, sumsq);
    case 3:
      return pixel_sums_c<3>(p, n, sum, sumsq);
    case 4:
      return pixel_sums_c<4>(p, n, sum, sumsq);
    default:
      for (int64_t i = 0; i < n; ++i) {
        int64_t v = p[i];
        sum[i % C] += v;
        sumsq[i % C] += v * v;
      }
  }
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One split's slice of one output file, as this rank writes it.
struct SplitBlock {
  Split split;
  Range slice;    // the slice's rows in the split
  Range mine;     // this rank's rows of the slice (file-local)
  int64_t id0;    // sample id of the slice's first row
  int64_t iters;  // batches: the same on every rank (every write is collective)
};

// write_dataset's state across its phases: the plan (files, chunking, this rank's blocks),
// the outputs, the producer threads and the statistics gathered while writing.
class DatasetWriter {
 public:
  DatasetWriter(const Source& src, const WriteOptions& opt, const Comm& comm);
  int shards() const { return K_; }
  void write_file(int k);
  void reduce_statistics();
  void finish_files();
  void sync_and_commit();
  void remove_stale_shards();
  WriteSummary summary();

 private:
  // Every HDF5 call is collective on a shared file: a rank that fails (disk full, a bad row
  // from the source) must not leave the others waiting in the next collective (they spun at
  // 100 % CPU for minutes). Each collective step's error is agreed on by all ranks, which
  // then throw together; the file is closed by every rank on the way out.
  template <typename Step>
  void agreed(Step&& step) {
    agreed_step(comm_, step, cat(opt_.output, ": not written: "));
  }
  // This rank's rows of a slice of n rows: a chunk-aligned block.
  Range my_block(int64_t n, int rank) const {
    int64_t nch = (n + cr_ - 1) / cr_;
    Range c = block_range(nch, rank, P_);
    return Range{std::min(n, c.begin * cr_), std::min(n, c.end * cr_)};
  }
  void create_datasets(h5::File& f, Split s, int64_t n) const;
  void write_split(h5::File& f, int k, Split s);
  void start_batch(Slot& sl, int64_t it, const SplitBlock& b);
  void produce_rows(Slot& sl, const SplitBlock& b, int64_t grain, int t);
  void add_tallies(int k, Split s);
  void write_batch(h5::File& f, Split s, const Slot& cur);

  const Source& src_;
  const WriteOptions& opt_;
  const Comm& comm_;
  const DatasetMeta& m_;
  const int K_, P_, me_;
  int64_t row_bytes_ = 0, cr_ = 0, batch_rows_ = 0, extra_bytes_ = 0;
  int C_ = 0;
  double t0_ = 0, t_finish_ = 0;
  WriteSummary sum_;
  std::vector<std::string> files_;
  std::vector<std::unique_ptr<AtomicOutput>> outs_;
  std::unique_ptr<AtomicOutput> index_out_;
  int64_t local_total_ = 0, global_total_ = 0, local_done_ = 0;
  std::unique_ptr<log::Progress> progress_;
  int64_t lsum_[4] = {0, 0, 0, 0}, lsumsq_[4] = {0, 0, 0, 0};
  int64_t lnoise_[2] = {0, 0};
  std::vector<uint64_t> shard_fp_;  // per shard file: lo, hi
  int64_t payload_ = 0;
  std::vector<Tally> tallies_;          // per producer thread, of the running batch
  std::atomic<int64_t> next_row_{0};    // the running batch's next row to produce
  std::unique_ptr<ProducerPool> pool_;  // last: its threads stop before the above go away
};

// The plan: shard count checked, chunking, the output files (checked and opened), this
// rank's share of the rows, the producer threads.
DatasetWriter::DatasetWriter(const Source& src, const WriteOptions& opt, const Comm& comm)
    : src_(src),
      opt_(opt),
      comm_(comm),
      m_(src.meta()),
      K_(opt.shards),
      P_(comm.size()),
      me_(comm.rank()) {
  const DatasetMeta& m = m_;
  // A shard with no training rows is a file of nothing to train on (data.shards=1000 on 304
  // samples wrote 1,000 of them). Shards without test rows are fine (the test split is
  // small). The same on every rank: no agreement needed.
  if (K_ > m.rows(Split::Train))
    throw UsageError(cat("data.shards = ", K_, ": more shard files than the ", m.rows(Split::Train),
                         " training samples of ", m.description,
                         " (every shard holds a slice of them); use at most ",
                         m.rows(Split::Train)));
  row_bytes_ = m.row_bytes();
  // Chunks of whole samples; automatic: ~2 MiB, more than HDF5's default 1 MiB chunk cache,
  // so that whole-chunk writes go straight to the file instead of through the cache.
  cr_ = opt.chunk_rows > 0
            ? opt.chunk_rows
            : std::max<int64_t>(1, ((2 << 20) + row_bytes_ - 1) / std::max<int64_t>(1, row_bytes_));
  batch_rows_ =
      std::max<int64_t>(cr_, (opt.batch_bytes / std::max<int64_t>(1, row_bytes_)) / cr_ * cr_);
  C_ = m.kind == Kind::Image ? int(m.channels) : 0;
  SIEVE_ASSERT(C_ <= 4, "images with ", C_, " channels");
  t0_ = now_s();

  sum_.rows[0] = m.rows(Split::Train);
  sum_.rows[1] = m.rows(Split::Test);
  for (int k = 0; k < K_; ++k) files_.push_back(K_ > 1 ? shard_path(opt.output, k) : opt.output);
  for (auto& f : files_)
    outs_.push_back(
        std::make_unique<AtomicOutput>(f, opt.overwrite, comm, false, schema::kDataset));
  if (K_ > 1)
    index_out_ =
        std::make_unique<AtomicOutput>(opt.output, opt.overwrite, comm, false, schema::kDataset);

  // This rank's rows: in every shard slice of every split, a chunk-aligned block.
  for (int k = 0; k < K_; ++k)
    for (Split s : kSplits) {
      int64_t n = block_range(m.rows(s), k, K_).size();
      local_total_ += my_block(n, me_).size();
      global_total_ += n;
    }
  progress_ = std::make_unique<log::Progress>("writing", global_total_, "samples",
                                              opt.progress ? 2.0 : 1e9);
  shard_fp_.assign(size_t(2 * K_), 0);
  extra_bytes_ = 4 + 8 + (m.has_noise ? 2 : 0) + (m.has_clean_labels ? 4 : 0);
  // Producer threads: opt.threads, else OMP_NUM_THREADS, else this node's cores shared by
  // its ranks.
  int threads = opt.threads;
  if (threads <= 0)
    threads = std::getenv("OMP_NUM_THREADS") ? omp_get_max_threads()
                                             : omp_get_num_procs() / std::max(1, comm.local_size());
  pool_ = std::make_unique<ProducerPool>(std::max(1, threads));
  tallies_.resize(size_t(pool_->size()));
}

// Output file k (the single file, or shard k): created collectively, stamped, every split's
// datasets written batch by batch, closed.
void DatasetWriter::write_file(int k) {
  const DatasetMeta& m = m_;
  h5::File f = h5::File::create(outs_[size_t(k)]->tmp_path(), &comm_);
  h5::stamp(f, schema::kDataset, opt_.config_yaml);
  set_common_attrs(f, m);
  if (K_ > 1) {
    f.set_attr("/", "shard", int64_t(k));
    f.set_attr("/", "num_shards", int64_t(K_));
    f.set_attr("/", "train_offset", block_range(m.rows(Split::Train), k, K_).begin);
    f.set_attr("/", "test_offset", block_range(m.rows(Split::Test), k, K_).begin);
  }
  for (Split s : kSplits) write_split(f, k, s);
  agreed([&] { f.close(); });
}

void DatasetWriter::create_datasets(h5::File& f, Split s, int64_t n) const {
  const DatasetMeta& m = m_;
  if (m.kind == Kind::Image)
    f.create_dataset<uint8_t>(images_path(s), row_dims(m, n), hsize_t(cr_));
  else
    f.create_dataset<float>(features_path(s), row_dims(m, n), hsize_t(cr_));
  f.create_dataset<int32_t>(labels_path(s), {hsize_t(n)});
  f.create_dataset<int64_t>(sample_id_path(s), {hsize_t(n)});
  if (m.has_noise) {
    f.create_dataset<uint8_t>(noise_truth_path(s), {hsize_t(n)});
    f.create_dataset<uint8_t>(noise_kind_path(s), {hsize_t(n)});
  }
  if (m.has_clean_labels) f.create_dataset<int32_t>(clean_labels_path(s), {hsize_t(n)});
}

// One split's slice of file k: the pool produces batch it + 1 while this thread writes
// batch it (two slots).
void DatasetWriter::write_split(h5::File& f, int k, Split s) {
  const DatasetMeta& m = m_;
  SplitBlock b{s, block_range(m.rows(s), k, K_), {}, 0, 0};
  const int64_t n = b.slice.size();
  create_datasets(f, s, n);
  b.mine = my_block(n, me_);
  for (int r = 0; r < P_; ++r)
    b.iters = std::max(b.iters, (my_block(n, r).size() + batch_rows_ - 1) / batch_rows_);
  b.id0 = first_sample_id(s, m.rows(Split::Train)) + b.slice.begin;

  Slot slots[2];
  // On an error, let a running job finish before `slots` goes away.
  struct Drain {
    ProducerPool& p;
    ~Drain() {
      try {
        p.wait();
      } catch (...) {
      }
    }
  } drain{*pool_};
  if (b.iters > 0) start_batch(slots[0], 0, b);
  for (int64_t it = 0; it < b.iters; ++it) {
    double tw = now_s();
    agreed([&] { pool_->wait(); });  // rethrows a producer's error
    double tg = now_s();
    sum_.wait_s += tg - tw;
    Slot& cur = slots[it % 2];
    add_tallies(k, s);
    if (it + 1 < b.iters) start_batch(slots[(it + 1) % 2], it + 1, b);
    write_batch(f, s, cur);
    sum_.write_s += now_s() - tg;
    payload_ += cur.count * (row_bytes_ + extra_bytes_);
    local_done_ += cur.count;
    if (opt_.progress)
      progress_->update(
          local_total_ ? int64_t(double(local_done_) / double(local_total_) * double(global_total_))
                       : global_total_);
  }
}

// Batch `it` into `sl`: the pool's threads take blocks of rows in turn.
void DatasetWriter::start_batch(Slot& sl, int64_t it, const SplitBlock& b) {
  sl.row0 = std::min(b.mine.end, b.mine.begin + it * batch_rows_);
  sl.count = std::min(b.mine.end, sl.row0 + batch_rows_) - sl.row0;
  sl.resize(m_, sl.count);
  for (auto& t : tallies_) t = Tally{};
  next_row_ = 0;
  const int64_t grain =
      std::max<int64_t>(1, std::min<int64_t>(64, sl.count / (4 * pool_->size()) + 1));
  pool_->submit([this, &b, grain, slp = &sl](int t) { produce_rows(*slp, b, grain, t); });
}

// One producer thread's share of a batch: rows from the source, checked, fingerprinted and
// tallied.
void DatasetWriter::produce_rows(Slot& sl, const SplitBlock& b, int64_t grain, int t) {
  const DatasetMeta& m = m_;
  const Split s = b.split;
  Tally& tl = tallies_[size_t(t)];
  const int64_t re = m.row_elems();
  while (true) {
    int64_t a = next_row_.fetch_add(grain);
    if (a >= sl.count) return;
    int64_t n = std::min(grain, sl.count - a);
    Rows rows;
    if (m.kind == Kind::Image)
      rows.images = sl.images.data() + a * re;
    else
      rows.features = sl.features.data() + a * re;
    rows.labels = sl.labels.data() + a;
    if (m.has_noise) rows.noise = sl.noise.data() + a;
    if (m.has_clean_labels) rows.clean_labels = sl.clean.data() + a;
    src_.produce(s, b.slice.begin + sl.row0 + a, n, rows);
    for (int64_t i = a; i < a + n; ++i) {
      sl.ids[size_t(i)] = b.id0 + sl.row0 + i;
      int32_t l = sl.labels[size_t(i)];
      if (l < 0 || l >= m.num_classes)
        throw Error(cat(m.description, ": ", split_name(s), " row ", b.slice.begin + sl.row0 + i,
                        ": label ", l, " out of range 0..", m.num_classes - 1));
      // The row's content at its position in the split: the same fingerprint for any
      // number of ranks, threads or shards.
      const uint64_t pos = uint64_t(b.slice.begin + sl.row0 + i) * 2 + (s == Split::Test);
      const void* bytes = m.kind == Kind::Image
                              ? static_cast<const void*>(sl.images.data() + i * re)
                              : static_cast<const void*>(sl.features.data() + i * re);
      tl.fp.add_row(hash3(lineage::hash_bytes(bytes, size_t(row_bytes_), pos),
                          uint64_t(uint32_t(l)), uint64_t(sl.ids[size_t(i)])));
    }
    if (m.has_noise)
      for (int64_t i = a; i < a + n; ++i) {
        uint8_t v = sl.noise[size_t(i)];
        sl.truth[size_t(i)] = v != kNoiseClean;
        tl.n_label += v == kNoiseLabel;
        tl.n_outlier += v == kNoiseOutlier;
      }
    if (s == Split::Train && C_ > 0)
      pixel_sums(rows.images, n * m.height * m.width, C_, tl.sum, tl.sumsq);
  }
}

// The finished batch's per-thread tallies into this rank's running sums and file k's
// fingerprint (integers: the order of the threads does not matter).
void DatasetWriter::add_tallies(int k, Split s) {
  for (auto& t : tallies_) {
    for (int c = 0; c < 4; ++c) {
      lsum_[c] += t.sum[c];
      lsumsq_[c] += t.sumsq[c];
    }
    if (s == Split::Train) {
      lnoise_[0] += t.n_label;
      lnoise_[1] += t.n_outlier;
    }
    shard_fp_[size_t(2 * k)] += t.fp.lo;
    shard_fp_[size_t(2 * k + 1)] += t.fp.hi;
  }
}

// One agreement per collective write: a rank whose write failed must not wait in the
// agreement while the others are already inside the next write.
void DatasetWriter::write_batch(h5::File& f, Split s, const Slot& cur) {
  const DatasetMeta& m = m_;
  hsize_t r0 = hsize_t(cur.row0), cnt = hsize_t(cur.count);
  if (m.kind == Kind::Image)
    agreed([&] { f.write_rows<uint8_t>(images_path(s), r0, cnt, cur.images.data()); });
  else
    agreed([&] { f.write_rows<float>(features_path(s), r0, cnt, cur.features.data()); });
  agreed([&] { f.write_rows<int32_t>(labels_path(s), r0, cnt, cur.labels.data()); });
  agreed([&] { f.write_rows<int64_t>(sample_id_path(s), r0, cnt, cur.ids.data()); });
  if (m.has_noise) {
    agreed([&] { f.write_rows<uint8_t>(noise_truth_path(s), r0, cnt, cur.truth.data()); });
    agreed([&] { f.write_rows<uint8_t>(noise_kind_path(s), r0, cnt, cur.noise.data()); });
  }
  if (m.has_clean_labels)
    agreed([&] { f.write_rows<int32_t>(clean_labels_path(s), r0, cnt, cur.clean.data()); });
}

// Mean / std of the training set: exact integer pixel sums (rank-independent) or the
// source's own (tabular); the noise counts and the fingerprints of every rank.
void DatasetWriter::reduce_statistics() {
  const DatasetMeta& m = m_;
  t_finish_ = now_s();
  comm_.allreduce_sum(lsum_, 4);
  comm_.allreduce_sum(lsumsq_, 4);
  comm_.allreduce_sum(lnoise_, 2);
  comm_.allreduce_sum(shard_fp_.data(), shard_fp_.size());
  lineage::Fingerprint whole;
  for (int k = 0; k < K_; ++k) whole.add({shard_fp_[size_t(2 * k)], shard_fp_[size_t(2 * k + 1)]});
  sum_.fingerprint = whole.hex();
  sum_.label_noise = lnoise_[0];
  sum_.outliers = lnoise_[1];
  sum_.payload_bytes = comm_.allreduce_sum(payload_);
  if (m.kind == Kind::Image) {
    double npx = double(m.rows(Split::Train)) * double(m.height) * double(m.width);
    for (int c = 0; c < C_; ++c) {
      double mu = npx > 0 ? double(lsum_[c]) / npx : 0.0;
      double var = npx > 0 ? double(lsumsq_[c]) / npx - mu * mu : 0.0;
      sum_.mean.push_back(mu / 255.0);
      sum_.std.push_back(std::sqrt(std::max(0.0, var)) / 255.0);
    }
  } else {
    sum_.mean = src_.exact_mean();
    sum_.std = src_.exact_std();
  }
}

// Statistics attributes (rank 0, serial), then the index.
void DatasetWriter::finish_files() {
  on_root_agreed(comm_, [&] {
    for (size_t k = 0; k < outs_.size(); ++k) {
      h5::File f = h5::File::open_rw(outs_[k]->tmp_path());
      // A shard file is a dataset of its own slice (its own fingerprint); the index, or the
      // single file, has the whole dataset's.
      f.set_attr("/", lineage::kFingerprint,
                 K_ > 1 ? lineage::Fingerprint{shard_fp_[2 * k], shard_fp_[2 * k + 1]}.hex()
                        : sum_.fingerprint);
      f.set_attr("/", "mean", sum_.mean);
      f.set_attr("/", "std", sum_.std);
      if (m_.has_noise) {
        f.set_attr("/", "label_noise_count", sum_.label_noise);
        f.set_attr("/", "outlier_count", sum_.outliers);
      }
      f.close();
    }
    if (K_ > 1) write_index(index_out_->tmp_path(), m_, opt_.config_yaml, files_, sum_);
  });
}

// fsync (where asked), then every file renamed into place: the shards, the sidecar, the
// index last.
void DatasetWriter::sync_and_commit() {
  if (opt_.sync) {
    // Every rank flushes what it wrote (on a shared file system each node holds its own pages).
    std::string err;
    try {
      for (auto& o : outs_) fsync_path(o->tmp_path());
      if (K_ > 1 && comm_.is_root()) fsync_path(index_out_->tmp_path());
    } catch (const Error& e) {
      err = e.what();
    }
    agree_on_error(comm_, err);
  }
  for (auto& o : outs_) o->commit();
  on_root_agreed(
      comm_, [&] { write_resolved_config(config_sidecar_path(opt_.output), opt_.config_yaml); });
  if (index_out_) index_out_->commit();
}

// The directory synced; an overwritten dataset with more shards leaves no stale shard files
// behind.
void DatasetWriter::remove_stale_shards() {
  on_root_agreed(comm_, [&] {
    fs::path dir = fs::path(opt_.output).parent_path();
    if (dir.empty()) dir = ".";
    if (opt_.sync) fsync_path(dir.string());
    if (!opt_.overwrite) return;
    std::string prefix = fs::path(opt_.output).stem().string() + ".shard-";
    for (auto& e : fs::directory_iterator(dir)) {
      std::string name = e.path().filename().string();
      if (name.rfind(prefix, 0) != 0 || e.path().extension() != ".h5") continue;
      std::string num = name.substr(prefix.size(), name.size() - prefix.size() - 3);
      if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos) continue;
      // Only our own stale shards: a file of that name that is no dataset stays.
      if ((K_ == 1 || std::stoll(num) >= K_) && output_kind(e.path().string()) == schema::kDataset)
        fs::remove(e.path());
    }
  });
}

WriteSummary DatasetWriter::summary() {
  sum_.finish_s = now_s() - t_finish_;
  if (opt_.progress) progress_->finish();
  sum_.files = files_;
  if (K_ > 1) sum_.files.push_back(opt_.output);
  int64_t bytes = 0;
  if (comm_.is_root())
    for (auto& fp : sum_.files) bytes += int64_t(fs::file_size(fp));
  comm_.bcast(&bytes, 1);
  sum_.file_bytes = bytes;
  sum_.seconds = comm_.allreduce_max(now_s() - t0_);
  return sum_;
}

}  // namespace

// As hpdbscan's cluster() reads: plan -> write every file -> reduce the statistics -> stamp
// them and write the index -> sync and rename into place -> remove stale shards.
WriteSummary write_dataset(const Source& src, const WriteOptions& opt, const Comm& comm) {
  check_outputs(opt, comm);
  DatasetWriter w(src, opt, comm);
  for (int k = 0; k < w.shards(); ++k) w.write_file(k);
  w.reduce_statistics();
  w.finish_files();
  w.sync_and_commit();
  w.remove_stale_shards();
  return w.summary();
}

}  // namespace sieve::data
