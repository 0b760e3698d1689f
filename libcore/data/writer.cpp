#include "data/writer.hpp"

#include <fcntl.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "data/fileutil.hpp"
#include "data/rng.hpp"
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
      for (int k = 0; k < opt.shards; ++k) check_output_path(shard_path(opt.output, k), opt.overwrite, schema::kDataset);
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
    case 1: return pixel_sums_c<1>(p, n, sum, sumsq);
    case 2: return pixel_sums_c<2>(p, n, sum, sumsq);
    case 3: return pixel_sums_c<3>(p, n, sum, sumsq);
    case 4: return pixel_sums_c<4>(p, n, sum, sumsq);
    default:
      for (int64_t i = 0; i < n; ++i) {
        int64_t v = p[i];
        sum[i % C] += v;
        sumsq[i % C] += v * v;
      }
  }
}

// A dataset of the index file: a virtual dataset over the shards' datasets of the same name.
void create_virtual(h5::File& idx, const std::string& name, hid_t type, const std::vector<hsize_t>& dims,
                    const std::vector<std::string>& shard_files, int64_t n_total) {
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
  hid_t d = H5Dcreate2(idx.id(), name.c_str(), type, space.get(), lcpl.get(), dcpl.get(), H5P_DEFAULT);
  if (d < 0) throw Error(cat(idx.path(), ": ", name, ": cannot create virtual dataset"));
  H5Dclose(d);
}

// Producer threads. The pool runs one job at a time on all its threads (each thread calls
// job(thread index)) while the main thread, the only one that calls MPI and HDF5, writes
// the previous batch. Waits block on condition variables: no spinning threads competing
// with the writer for cores (OpenMP's spin-waits cost ~1/3 of the CPU on a busy machine).
class Pool {
 public:
  explicit Pool(int threads) {
    for (int t = 0; t < threads; ++t) threads_.emplace_back([this, t] { loop(t); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lk(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  int size() const { return int(threads_.size()); }
  void submit(std::function<void(int)> job) {
    std::lock_guard<std::mutex> lk(m_);
    job_ = std::move(job);
    ++generation_;
    running_ = int(threads_.size());
    error_ = nullptr;
    cv_.notify_all();
  }
  // Wait for the submitted job on every thread; rethrows the first exception.
  void wait() {
    std::unique_lock<std::mutex> lk(m_);
    done_cv_.wait(lk, [this] { return running_ == 0; });
    if (error_) {
      auto e = error_;
      error_ = nullptr;
      std::rethrow_exception(e);
    }
  }

 private:
  void loop(int t) {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lk(m_);
    while (true) {
      cv_.wait(lk, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      auto job = job_;
      lk.unlock();
      std::exception_ptr err;
      try {
        job(t);
      } catch (...) {
        err = std::current_exception();
      }
      lk.lock();
      if (err && !error_) error_ = err;
      if (--running_ == 0) done_cv_.notify_all();
    }
  }
  std::mutex m_;
  std::condition_variable cv_, done_cv_;
  std::function<void(int)> job_;
  std::exception_ptr error_;
  uint64_t generation_ = 0;
  int running_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

WriteSummary write_dataset(const Source& src, const WriteOptions& opt, const Comm& comm) {
  check_outputs(opt, comm);
  const DatasetMeta& m = src.meta();
  const int K = opt.shards;
  // A shard with no training rows is a file of nothing to train on (data.shards=1000 on 304
  // samples wrote 1,000 of them). Shards without test rows are fine (the test split is
  // small). The same on every rank: no agreement needed.
  if (K > m.rows(Split::Train))
    throw UsageError(cat("data.shards = ", K, ": more shard files than the ",
                         m.rows(Split::Train), " training samples of ", m.description,
                         " (every shard holds a slice of them); use at most ",
                         m.rows(Split::Train)));
  const int P = comm.size(), me = comm.rank();
  const int64_t row_bytes = m.row_bytes();
  // Chunks of whole samples; automatic: ~2 MiB, more than HDF5's default 1 MiB chunk cache,
  // so that whole-chunk writes go straight to the file instead of through the cache.
  const int64_t cr = opt.chunk_rows > 0 ? opt.chunk_rows
                                        : std::max<int64_t>(1, ((2 << 20) + row_bytes - 1) / std::max<int64_t>(1, row_bytes));
  const int64_t batch_rows = std::max<int64_t>(cr, (opt.batch_bytes / std::max<int64_t>(1, row_bytes)) / cr * cr);
  const int C = m.kind == Kind::Image ? int(m.channels) : 0;
  SIEVE_ASSERT(C <= 4, "images with ", C, " channels");
  double t0 = now_s();

  WriteSummary sum;
  sum.rows[0] = m.rows(Split::Train);
  sum.rows[1] = m.rows(Split::Test);
  std::vector<std::string> files;
  for (int k = 0; k < K; ++k) files.push_back(K > 1 ? shard_path(opt.output, k) : opt.output);

  std::vector<std::unique_ptr<AtomicOutput>> outs;
  for (auto& f : files) outs.push_back(std::make_unique<AtomicOutput>(f, opt.overwrite, comm, false, schema::kDataset));
  std::unique_ptr<AtomicOutput> index_out;
  if (K > 1) index_out = std::make_unique<AtomicOutput>(opt.output, opt.overwrite, comm, false, schema::kDataset);

  // This rank's rows: in every shard slice of every split, a chunk-aligned block.
  auto my_block = [&](int64_t n, int rank) {
    int64_t nch = (n + cr - 1) / cr;
    Range c = block_range(nch, rank, P);
    return Range{std::min(n, c.begin * cr), std::min(n, c.end * cr)};
  };
  int64_t local_total = 0, global_total = 0;
  for (int k = 0; k < K; ++k)
    for (Split s : kSplits) {
      int64_t n = block_range(m.rows(s), k, K).size();
      local_total += my_block(n, me).size();
      global_total += n;
    }
  log::Progress progress("writing", global_total, "samples", opt.progress ? 2.0 : 1e9);
  int64_t local_done = 0;

  int64_t lsum[4] = {0, 0, 0, 0}, lsumsq[4] = {0, 0, 0, 0};
  int64_t lnoise[2] = {0, 0};
  std::vector<uint64_t> shard_fp(size_t(2 * K), 0);  // per shard file: lo, hi
  int64_t payload = 0;
  const int64_t extra_bytes = 4 + 8 + (m.has_noise ? 2 : 0) + (m.has_clean_labels ? 4 : 0);
  // Producer threads: opt.threads, else OMP_NUM_THREADS, else this node's cores shared by
  // its ranks.
  int threads = opt.threads;
  if (threads <= 0) threads = std::getenv("OMP_NUM_THREADS") ? omp_get_max_threads()
                                                             : omp_get_num_procs() / std::max(1, comm.local_size());
  Pool pool(std::max(1, threads));
  std::vector<Tally> tallies(size_t(pool.size()));

  // Every HDF5 call below is collective on a shared file: a rank that fails (disk full,
  // a bad row from the source) must not leave the others waiting in the next collective
  // (they spun at 100 % CPU for minutes). Each collective step's error is agreed on by all
  // ranks, which then throw together; the file is closed by every rank on the way out.
  auto agreed = [&](auto&& step) { agreed_step(comm, step, cat(opt.output, ": not written: ")); };
  for (int k = 0; k < K; ++k) {
    h5::File f = h5::File::create(outs[size_t(k)]->tmp_path(), &comm);
    h5::stamp(f, schema::kDataset, opt.config_yaml);
    set_common_attrs(f, m);
    if (K > 1) {
      f.set_attr("/", "shard", int64_t(k));
      f.set_attr("/", "num_shards", int64_t(K));
      f.set_attr("/", "train_offset", block_range(m.rows(Split::Train), k, K).begin);
      f.set_attr("/", "test_offset", block_range(m.rows(Split::Test), k, K).begin);
    }
    for (Split s : kSplits) {
      Range slice = block_range(m.rows(s), k, K);
      const int64_t n = slice.size();
      if (m.kind == Kind::Image)
        f.create_dataset<uint8_t>(images_path(s), row_dims(m, n), hsize_t(cr));
      else
        f.create_dataset<float>(features_path(s), row_dims(m, n), hsize_t(cr));
      f.create_dataset<int32_t>(labels_path(s), {hsize_t(n)});
      f.create_dataset<int64_t>(sample_id_path(s), {hsize_t(n)});
      if (m.has_noise) {
        f.create_dataset<uint8_t>(noise_truth_path(s), {hsize_t(n)});
        f.create_dataset<uint8_t>(noise_kind_path(s), {hsize_t(n)});
      }
      if (m.has_clean_labels) f.create_dataset<int32_t>(clean_labels_path(s), {hsize_t(n)});
      Range mine = my_block(n, me);
      int64_t iters = 0;  // the same on every rank: every write is collective
      for (int r = 0; r < P; ++r) iters = std::max(iters, (my_block(n, r).size() + batch_rows - 1) / batch_rows);
      const int64_t id0 = first_sample_id(s, m.rows(Split::Train)) + slice.begin;

      Slot slots[2];
      // Batch `it` into `sl`: the pool's threads take blocks of rows in turn.
      std::atomic<int64_t> next_row{0};
      auto start = [&, s](Slot& sl, int64_t it) {
        sl.row0 = std::min(mine.end, mine.begin + it * batch_rows);
        sl.count = std::min(mine.end, sl.row0 + batch_rows) - sl.row0;
        sl.resize(m, sl.count);
        for (auto& t : tallies) t = Tally{};
        next_row = 0;
        const int64_t grain = std::max<int64_t>(1, std::min<int64_t>(64, sl.count / (4 * pool.size()) + 1));
        pool.submit([&, s, grain, slp = &sl](int t) {
          Slot& b = *slp;
          Tally& tl = tallies[size_t(t)];
          const int64_t re = m.row_elems();
          while (true) {
            int64_t a = next_row.fetch_add(grain);
            if (a >= b.count) return;
            int64_t n = std::min(grain, b.count - a);
            Rows rows;
            if (m.kind == Kind::Image) rows.images = b.images.data() + a * re;
            else rows.features = b.features.data() + a * re;
            rows.labels = b.labels.data() + a;
            if (m.has_noise) rows.noise = b.noise.data() + a;
            if (m.has_clean_labels) rows.clean_labels = b.clean.data() + a;
            src.produce(s, slice.begin + b.row0 + a, n, rows);
            for (int64_t i = a; i < a + n; ++i) {
              b.ids[size_t(i)] = id0 + b.row0 + i;
              int32_t l = b.labels[size_t(i)];
              if (l < 0 || l >= m.num_classes)
                throw Error(cat(m.description, ": ", split_name(s), " row ", slice.begin + b.row0 + i,
                                ": label ", l, " out of range 0..", m.num_classes - 1));
              // The row's content at its position in the split: the same fingerprint for
              // any number of ranks, threads or shards.
              const uint64_t pos = uint64_t(slice.begin + b.row0 + i) * 2 + (s == Split::Test);
              const void* bytes = m.kind == Kind::Image ? static_cast<const void*>(b.images.data() + i * re)
                                                        : static_cast<const void*>(b.features.data() + i * re);
              tl.fp.add_row(hash3(lineage::hash_bytes(bytes, size_t(row_bytes), pos),
                                  uint64_t(uint32_t(l)), uint64_t(b.ids[size_t(i)])));
            }
            if (m.has_noise)
              for (int64_t i = a; i < a + n; ++i) {
                uint8_t v = b.noise[size_t(i)];
                b.truth[size_t(i)] = v != kNoiseClean;
                tl.n_label += v == kNoiseLabel;
                tl.n_outlier += v == kNoiseOutlier;
              }
            if (s == Split::Train && C > 0)
              pixel_sums(rows.images, n * m.height * m.width, C, tl.sum, tl.sumsq);
          }
        });
      };
      // On an error, let a running job finish before `slots` goes away.
      struct Drain {
        Pool& p;
        ~Drain() {
          try {
            p.wait();
          } catch (...) {
          }
        }
      } drain{pool};
      if (iters > 0) start(slots[0], 0);
      for (int64_t it = 0; it < iters; ++it) {
        double tw = now_s();
        agreed([&] { pool.wait(); });  // rethrows a producer's error
        double tg = now_s();
        sum.wait_s += tg - tw;
        Slot& cur = slots[it % 2];
        for (auto& t : tallies) {
          for (int c = 0; c < 4; ++c) {
            lsum[c] += t.sum[c];
            lsumsq[c] += t.sumsq[c];
          }
          if (s == Split::Train) {
            lnoise[0] += t.n_label;
            lnoise[1] += t.n_outlier;
          }
          shard_fp[size_t(2 * k)] += t.fp.lo;
          shard_fp[size_t(2 * k + 1)] += t.fp.hi;
        }
        if (it + 1 < iters) start(slots[(it + 1) % 2], it + 1);
        hsize_t r0 = hsize_t(cur.row0), cnt = hsize_t(cur.count);
        // One agreement per collective write: a rank whose write failed must not wait in
        // the agreement while the others are already inside the next write.
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
        sum.write_s += now_s() - tg;
        payload += cur.count * (row_bytes + extra_bytes);
        local_done += cur.count;
        if (opt.progress)
          progress.update(local_total ? int64_t(double(local_done) / double(local_total) * double(global_total))
                                      : global_total);
      }
    }
    agreed([&] { f.close(); });
  }

  double t_finish = now_s();
  // Mean / std of the training set: exact integer pixel sums (rank-independent) or the
  // source's own (tabular).
  comm.allreduce_sum(lsum, 4);
  comm.allreduce_sum(lsumsq, 4);
  comm.allreduce_sum(lnoise, 2);
  comm.allreduce_sum(shard_fp.data(), shard_fp.size());
  lineage::Fingerprint whole;
  for (int k = 0; k < K; ++k) whole.add({shard_fp[size_t(2 * k)], shard_fp[size_t(2 * k + 1)]});
  sum.fingerprint = whole.hex();
  sum.label_noise = lnoise[0];
  sum.outliers = lnoise[1];
  sum.payload_bytes = comm.allreduce_sum(payload);
  if (m.kind == Kind::Image) {
    double npx = double(m.rows(Split::Train)) * double(m.height) * double(m.width);
    for (int c = 0; c < C; ++c) {
      double mu = npx > 0 ? double(lsum[c]) / npx : 0.0;
      double var = npx > 0 ? double(lsumsq[c]) / npx - mu * mu : 0.0;
      sum.mean.push_back(mu / 255.0);
      sum.std.push_back(std::sqrt(std::max(0.0, var)) / 255.0);
    }
  } else {
    sum.mean = src.exact_mean();
    sum.std = src.exact_std();
  }

  // Statistics attributes (rank 0, serial), the index, then sync and rename into place.
  on_root_agreed(comm, [&] {
    for (size_t k = 0; k < outs.size(); ++k) {
      h5::File f = h5::File::open_rw(outs[k]->tmp_path());
      // A shard file is a dataset of its own slice (its own fingerprint); the index, or the
      // single file, has the whole dataset's.
      f.set_attr("/", lineage::kFingerprint,
                 K > 1 ? lineage::Fingerprint{shard_fp[2 * k], shard_fp[2 * k + 1]}.hex() : sum.fingerprint);
      f.set_attr("/", "mean", sum.mean);
      f.set_attr("/", "std", sum.std);
      if (m.has_noise) {
        f.set_attr("/", "label_noise_count", sum.label_noise);
        f.set_attr("/", "outlier_count", sum.outliers);
      }
      f.close();
    }
    if (K > 1) {
      h5::File idx = h5::File::create(index_out->tmp_path());
      h5::stamp(idx, schema::kDataset, opt.config_yaml);
      set_common_attrs(idx, m);
      idx.set_attr("/", "num_shards", int64_t(K));
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
        if (m.has_clean_labels) create_virtual(idx, clean_labels_path(s), H5T_NATIVE_INT32, d1, files, n);
      }
      idx.close();
    }
  });
  if (opt.sync) {
    // Every rank flushes what it wrote (on a shared file system each node holds its own pages).
    std::string err;
    try {
      for (auto& o : outs) fsync_path(o->tmp_path());
      if (K > 1 && comm.is_root()) fsync_path(index_out->tmp_path());
    } catch (const Error& e) {
      err = e.what();
    }
    agree_on_error(comm, err);
  }
  for (auto& o : outs) o->commit();
  on_root_agreed(comm, [&] {
    write_resolved_config(config_sidecar_path(opt.output), opt.config_yaml);
  });
  if (index_out) index_out->commit();

  on_root_agreed(comm, [&] {
    fs::path dir = fs::path(opt.output).parent_path();
    if (dir.empty()) dir = ".";
    if (opt.sync) fsync_path(dir.string());
    // An overwritten dataset with more shards leaves no stale shard files behind.
    if (opt.overwrite) {
      std::string prefix = fs::path(opt.output).stem().string() + ".shard-";
      for (auto& e : fs::directory_iterator(dir)) {
        std::string name = e.path().filename().string();
        if (name.rfind(prefix, 0) != 0 || e.path().extension() != ".h5") continue;
        std::string num = name.substr(prefix.size(), name.size() - prefix.size() - 3);
        if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos) continue;
        // Only our own stale shards: a file of that name that is no dataset stays.
        if ((K == 1 || std::stoll(num) >= K) && output_kind(e.path().string()) == schema::kDataset)
          fs::remove(e.path());
      }
    }
  });

  sum.finish_s = now_s() - t_finish;
  if (opt.progress) progress.finish();
  sum.files = files;
  if (K > 1) sum.files.push_back(opt.output);
  int64_t bytes = 0;
  if (comm.is_root())
    for (auto& fp : sum.files) bytes += int64_t(fs::file_size(fp));
  comm.bcast(&bytes, 1);
  sum.file_bytes = bytes;
  sum.seconds = comm.allreduce_max(now_s() - t0);
  return sum;
}

}  // namespace sieve::data
