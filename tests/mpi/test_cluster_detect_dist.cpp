// The knn and confident detectors over row-distributed inputs (detect.hpp, RowShare) and
// the distributed read of a features file (inputs.hpp) give exactly the result of a naive
// double-precision reference on 1 rank (MPI_COMM_SELF), on all ranks (2 or 3) and, under 3,
// on a 2-rank sub-communicator: whatever the ranks' shares (blocks, a scrambled file order,
// an empty share, shares smaller than k, references streamed in many small pieces). The
// data keep a margin between the k-th and the (k+1)-th neighbour, so ties never decide.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "cluster/detect.hpp"
#include "cluster/inputs.hpp"
#include "comm/comm.hpp"
#include "io/h5.hpp"
#include "io/schemas.hpp"
#include "support/test_util.hpp"

using namespace sieve;
using namespace sieve::cluster;

namespace {

struct Data {
  std::vector<float> x;  // [n, d]
  std::vector<float> p;  // [n, c]
  std::vector<int32_t> labels;
  int64_t n = 0;
  int d = 0, c = 0;
};

// Classes as directions in d-D at random scales, 15 % of the labels flipped; probabilities
// from noisy logits of the true class.
Data make_data(int64_t n, int d, int c, uint64_t seed) {
  Data s;
  s.n = n;
  s.d = d;
  s.c = c;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> N(0, 0.3f);
  std::uniform_real_distribution<float> scale(0.5f, 3.0f), U(0, 1);
  for (int64_t i = 0; i < n; ++i) {
    const int cls = int(rng() % uint64_t(c));
    const float sc = scale(rng);
    for (int j = 0; j < d; ++j) s.x.push_back(sc * ((j % c == cls ? 1.0f : 0.0f) + N(rng)));
    s.labels.push_back(U(rng) < 0.15f ? int32_t((cls + 1 + rng() % uint64_t(c - 1)) % c) : cls);
    std::vector<float> e(static_cast<size_t>(c));
    float sum = 0;
    for (int j = 0; j < c; ++j)
      sum += e[size_t(j)] = std::exp((j == cls ? 2.0f : 0.0f) + 2 * N(rng));
    for (int j = 0; j < c; ++j) s.p.push_back(e[size_t(j)] / sum);
  }
  return s;
}

// Naive reference: cosine distance in double, the k nearest others by (distance, row).
std::vector<float> knn_reference(const Data& s, int k) {
  std::vector<double> xn(s.x.begin(), s.x.end());
  for (int64_t i = 0; i < s.n; ++i) {
    double nn = 0;
    for (int j = 0; j < s.d; ++j) nn += xn[size_t(i * s.d + j)] * xn[size_t(i * s.d + j)];
    for (int j = 0; j < s.d; ++j) xn[size_t(i * s.d + j)] /= std::sqrt(nn);
  }
  std::vector<float> score(size_t(s.n));
  for (int64_t q = 0; q < s.n; ++q) {
    std::vector<std::pair<double, int64_t>> dist;
    for (int64_t i = 0; i < s.n; ++i) {
      if (i == q) continue;
      double dot = 0;
      for (int j = 0; j < s.d; ++j) dot += xn[size_t(q * s.d + j)] * xn[size_t(i * s.d + j)];
      dist.push_back({2 - 2 * dot, i});
    }
    std::sort(dist.begin(), dist.end());
    // Ties must not decide: the k-th and the next are apart by more than the float rounding
    // of the detector's distances (~1e-7).
    EXPECT_GT(dist[size_t(k)].first - dist[size_t(k - 1)].first, 2e-6) << "row " << q;
    int disagree = 0;
    for (int j = 0; j < k; ++j)
      disagree += s.labels[size_t(dist[size_t(j)].second)] != s.labels[size_t(q)];
    score[size_t(q)] = float(disagree) / float(k);
  }
  return score;
}

// Naive reference of confident learning, in double; no probability sits near a threshold.
std::vector<uint8_t> confident_reference(const Data& s) {
  std::vector<double> sum(size_t(s.c), 0), cnt(size_t(s.c), 0);
  for (int64_t i = 0; i < s.n; ++i) {
    sum[size_t(s.labels[size_t(i)])] += s.p[size_t(i * s.c + s.labels[size_t(i)])];
    cnt[size_t(s.labels[size_t(i)])] += 1;
  }
  std::vector<uint8_t> flag(size_t(s.n));
  for (int64_t i = 0; i < s.n; ++i) {
    int best = -1;
    for (int j = 0; j < s.c; ++j) {
      const double pj = s.p[size_t(i * s.c + j)], t = sum[size_t(j)] / cnt[size_t(j)];
      EXPECT_GT(std::abs(pj - t), 1e-6) << "row " << i << " class " << j;
      if (pj >= t && (best < 0 || pj > s.p[size_t(i * s.c + best)])) best = j;
    }
    flag[size_t(i)] = best >= 0 && best != s.labels[size_t(i)];
  }
  return flag;
}

// Part `part` of `parts` (block_range over `order`, the rows in the order a file would hold
// them); part -1 holds nothing.
RowShare share_of(int part, int parts, const std::vector<float>& v, int w,
                  const std::vector<int64_t>& order) {
  RowShare s;
  s.width = w;
  if (part < 0) return s;
  const Range r = block_range(int64_t(order.size()), part, parts);
  for (int64_t t = r.begin; t < r.end; ++t) {
    const int64_t i = order[size_t(t)];
    s.rows.push_back(i);
    s.x.insert(s.x.end(), v.begin() + i * w, v.begin() + (i + 1) * w);
  }
  return s;
}

RowShare share_of(const Comm& comm, const std::vector<float>& v, int w,
                  const std::vector<int64_t>& order) {
  return share_of(comm.rank(), comm.size(), v, w, order);
}

// The communicators to run on: one rank, all ranks, and under 3 ranks a 2-rank one.
struct Comms {
  Comm self{MPI_COMM_SELF}, world = Comm::world();
  MPI_Comm pair_raw = MPI_COMM_NULL;
  Comms() {
    if (world.size() >= 3)
      MPI_Comm_split(world.raw(), world.rank() < 2 ? 0 : MPI_UNDEFINED, world.rank(), &pair_raw);
  }
  ~Comms() {
    if (pair_raw != MPI_COMM_NULL) MPI_Comm_free(&pair_raw);
  }
  std::vector<Comm> all() const {
    std::vector<Comm> c = {self, world};
    if (pair_raw != MPI_COMM_NULL) c.emplace_back(pair_raw);
    return c;
  }
};

std::vector<int64_t> identity(int64_t n) {
  std::vector<int64_t> o(static_cast<size_t>(n));
  std::iota(o.begin(), o.end(), int64_t(0));
  return o;
}

std::vector<int64_t> scrambled(int64_t n, uint64_t seed) {
  std::vector<int64_t> o = identity(n);
  std::shuffle(o.begin(), o.end(), std::mt19937_64(seed));
  return o;
}

}  // namespace

TEST(DetectDistributed, KnnVoteEqualsTheReferenceOnEveryRankCountAndLayout) {
  const Data s = make_data(600, 12, 4, 7);
  const int k = 10;
  const std::vector<float> ref = knn_reference(s, k);
  Comms comms;
  for (const Comm& comm : comms.all()) {
    for (bool scramble : {false, true})
      for (int64_t piece : {kKnnPieceBytes, int64_t(12 * 4 * 7)}) {  // 7 rows a message
        SCOPED_TRACE(testing::Message()
                     << comm.size() << " ranks, scrambled " << scramble << ", piece " << piece);
        RowShare share = share_of(comm, s.x, s.d, scramble ? scrambled(s.n, 3) : identity(s.n));
        Detection det = detect_knn_vote(comm, share, s.n, s.labels.data(), k, 0.7, piece);
        EXPECT_EQ(det.score, ref);
        for (int64_t i = 0; i < s.n; ++i)
          ASSERT_EQ(det.flag[size_t(i)], double(ref[size_t(i)]) > 0.7) << "row " << i;
      }
    // The whole-x form (every rank holds x, takes its block) agrees too.
    EXPECT_EQ(detect_knn_vote(comm, s.x.data(), s.n, s.d, s.labels.data(), k, 0.7).score, ref);
  }
}

TEST(DetectDistributed, KnnVoteWithSharesSmallerThanKAndAnEmptyShare) {
  const Data s = make_data(23, 5, 3, 11);
  const int k = 9;
  const std::vector<float> ref = knn_reference(s, k);
  Comms comms;
  for (const Comm& comm : comms.all()) {
    // Rank 0 holds nothing (unless alone); the others hold the rows in scrambled order.
    const int parts = std::max(1, comm.size() - 1);
    RowShare share =
        share_of(comm.size() == 1 ? 0 : comm.rank() - 1, parts, s.x, s.d, scrambled(s.n, 5));
    Detection det = detect_knn_vote(comm, share, s.n, s.labels.data(), k, 0.5, 5 * 4 * 2);
    EXPECT_EQ(det.score, ref) << comm.size() << " ranks";
  }
}

// The inverted file on every rank count: each rank's cells over its own (scrambled) rows,
// the other ranks' rows streamed in small pieces; scores land on the right rows although
// the shares are reordered, and the flags agree with the exact search on >= 99 % of them.
TEST(DetectDistributed, KnnVoteThroughTheInvertedFileAgreesWithTheExactSearch) {
  const Data s = make_data(3000, 24, 8, 17);
  const int k = 10;
  Comms comms;
  for (const Comm& comm : comms.all()) {
    auto run = [&](embed::KnnMethod search) {
      RowShare share = share_of(comm, s.x, s.d, scrambled(s.n, 4));
      return detect_knn_vote(comm, share, s.n, s.labels.data(), k, 0.7, 24 * 4 * 100, search);
    };
    const Detection exact = run(embed::KnnMethod::Exact), ivf = run(embed::KnnMethod::Ivf);
    int64_t same = 0;
    for (int64_t i = 0; i < s.n; ++i) same += exact.flag[size_t(i)] == ivf.flag[size_t(i)];
    EXPECT_GE(double(same), 0.99 * double(s.n)) << comm.size() << " ranks";
    EXPECT_EQ(run(embed::KnnMethod::Ivf).score, ivf.score) << comm.size() << " ranks";
  }
}

TEST(DetectDistributed, ConfidentEqualsTheSerialDetectorAndTheReference) {
  const Data s = make_data(900, 2, 5, 13);
  const std::vector<uint8_t> ref = confident_reference(s);
  const Detection serial = detect_confident(s.p.data(), s.n, s.c, s.labels.data());
  EXPECT_EQ(serial.flag, ref);
  EXPECT_GT(std::count(ref.begin(), ref.end(), 1), 20);
  Comms comms;
  for (const Comm& comm : comms.all())
    for (bool scramble : {false, true}) {
      SCOPED_TRACE(testing::Message() << comm.size() << " ranks, scrambled " << scramble);
      RowShare share = share_of(comm, s.p, s.c, scramble ? scrambled(s.n, 9) : identity(s.n));
      Detection det = detect_confident(comm, share, s.n, s.labels.data());
      EXPECT_EQ(det.flag, ref);
      EXPECT_EQ(det.score, serial.score);
    }
}

TEST(DetectDistributed, HeldOutThresholdsAreTheSameOnAnyRankCount) {
  const Data s = make_data(900, 2, 5, 13);
  // Every third row held out, and those rows' given labels made less sure (as a model is on
  // samples it never trained on), so that the thresholds move to the held-out means.
  Data held = s;
  std::vector<uint8_t> heldout(size_t(s.n), 0);
  for (int64_t i = 0; i < s.n; i += 3) {
    heldout[size_t(i)] = 1;
    float* row = held.p.data() + i * s.c;
    const float given = row[s.labels[size_t(i)]];
    row[s.labels[size_t(i)]] = 0.7f * given;
    for (int j = 0; j < s.c; ++j)
      if (j != s.labels[size_t(i)]) row[j] += 0.3f * given / float(s.c - 1);
  }
  NoiseEstimate plain, serial_est;
  const Detection before = detect_confident(held.p.data(), s.n, s.c, s.labels.data(), &plain);
  const Detection serial =
      detect_confident(held.p.data(), s.n, s.c, s.labels.data(), &serial_est, heldout.data());
  int moved = 0;
  for (int c = 0; c < s.c; ++c) {
    moved += serial_est.threshold_from_heldout[size_t(c)];
    EXPECT_LT(serial_est.threshold[size_t(c)], plain.threshold[size_t(c)]) << "class " << c;
  }
  EXPECT_EQ(moved, s.c);
  EXPECT_GT(serial_est.total(), plain.total());  // lower thresholds: more confidently elsewhere
  EXPECT_NE(serial.flag, before.flag);
  Comms comms;
  for (const Comm& comm : comms.all()) {
    SCOPED_TRACE(testing::Message() << comm.size() << " ranks");
    RowShare share = share_of(comm, held.p, s.c, scrambled(s.n, 9));
    NoiseEstimate est;
    Detection det = detect_confident(comm, share, s.n, s.labels.data(), &est, heldout.data());
    EXPECT_EQ(det.flag, serial.flag);
    EXPECT_EQ(est.threshold, serial_est.threshold);  // bit-identical: sums in rank order
    EXPECT_EQ(est.threshold_from_heldout, serial_est.threshold_from_heldout);
    EXPECT_EQ(est.per_class, serial_est.per_class);
  }
}

TEST(DetectDistributed, FeaturesFileReadInBlocksJoinsOnSampleId) {
  Comm world = Comm::world();
  const std::string dir = test::scratch_dir("detect_dist_read");
  // The file holds the input's 300 samples plus 40 others, in scrambled order; the input
  // (embedding order) is rows 0..299 with their ids.
  const Data s = make_data(340, 12, 4, 17);
  const int64_t n = 300;
  const std::vector<int64_t> order = scrambled(s.n, 21);
  auto id_of = [](int64_t row) { return row * 7919 % 100003 + 17; };
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(id_of(i));
  const std::vector<int32_t> labels(s.labels.begin(), s.labels.begin() + n);
  auto write = [&](const std::string& path, int64_t nan_row) {
    if (world.is_root()) {
      std::vector<float> x, p;
      std::vector<int32_t> l;
      std::vector<int64_t> fid;
      for (int64_t i : order) {
        x.insert(x.end(), s.x.begin() + i * s.d, s.x.begin() + (i + 1) * s.d);
        p.insert(p.end(), s.p.begin() + i * s.c, s.p.begin() + (i + 1) * s.c);
        l.push_back(s.labels[size_t(i)]);
        fid.push_back(id_of(i));
      }
      if (nan_row >= 0) x[size_t(nan_row * s.d + 3)] = std::nanf("");
      h5::File f = h5::File::create(path);
      f.create_group("/train");
      f.create_dataset<float>("/train/features", {hsize_t(s.n), hsize_t(s.d)});
      f.write_rows<float>("/train/features", 0, hsize_t(s.n), x.data());
      f.create_dataset<float>("/train/probs", {hsize_t(s.n), hsize_t(s.c)});
      f.write_rows<float>("/train/probs", 0, hsize_t(s.n), p.data());
      f.create_dataset<int32_t>("/train/labels", {hsize_t(s.n)});
      f.write_rows<int32_t>("/train/labels", 0, hsize_t(s.n), l.data());
      f.create_dataset<int64_t>("/train/sample_id", {hsize_t(s.n)});
      f.write_rows<int64_t>("/train/sample_id", 0, hsize_t(s.n), fid.data());
      h5::stamp(f, schema::kFeatures, "");
      f.close();
    }
    world.barrier();
  };
  write(dir + "/feat.h5", -1);
  // Reference: the detectors over the input's rows held whole on one process.
  Data in = s;
  in.n = n;
  in.x.resize(size_t(n * s.d));
  in.p.resize(size_t(n * s.c));
  in.labels = labels;
  const std::vector<float> knn_ref = knn_reference(in, 8);
  const Detection conf_ref = detect_confident(in.p.data(), n, s.c, labels.data());
  Comms comms;
  for (const Comm& comm : comms.all()) {
    SCOPED_TRACE(testing::Message() << comm.size() << " ranks");
    FeatureShares fs = read_feature_shares(comm, dir + "/feat.h5", ids, labels, true, true);
    EXPECT_EQ(fs.feats.width, s.d);
    EXPECT_EQ(fs.probs.width, s.c);
    // The rows of this rank's block of the file that belong to the input, in file order.
    const Range r = block_range(s.n, comm.rank(), comm.size());
    std::vector<int64_t> expect;
    for (int64_t t = r.begin; t < r.end; ++t)
      if (order[size_t(t)] < n) expect.push_back(order[size_t(t)]);
    EXPECT_EQ(fs.feats.rows, expect);
    EXPECT_EQ(fs.probs.rows, expect);
    EXPECT_EQ(detect_knn_vote(comm, fs.feats, n, labels.data(), 8, 0.7).score, knn_ref);
    const Detection conf = detect_confident(comm, fs.probs, n, labels.data());
    EXPECT_EQ(conf.flag, conf_ref.flag);
    EXPECT_EQ(conf.score, conf_ref.score);
    // Only what is asked for is read.
    FeatureShares none = read_feature_shares(comm, dir + "/feat.h5", ids, labels, false, true);
    EXPECT_EQ(none.feats.width, 0);
    EXPECT_TRUE(none.feats.x.empty());
  }
  // A NaN that only the last rank's block holds: every rank raises the same error.
  const int64_t nan_row = s.n - 2;
  write(dir + "/nan.h5", nan_row);
  std::string what;
  try {
    read_feature_shares(world, dir + "/nan.h5", ids, labels, true, false);
  } catch (const Error& e) {
    what = e.what();
  }
  EXPECT_NE(what.find("/train/features row " + std::to_string(nan_row) + " column 3 is NaN"),
            std::string::npos)
      << what;
}
