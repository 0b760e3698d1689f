// Independent O(N^2) DBSCAN reference for the cluster tests, and the checks that compare a
// result with it: same noise set, same core flags, same partition of the core points, and
// every border point in the cluster of some core point within eps. And run_split: the
// distributed DBSCAN over a communicator's ranks, gathered back into input order.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "cluster/dbscan.hpp"
#include "cluster/dbscan_dist.hpp"
#include "comm/comm.hpp"

namespace sieve::test {

struct RefDbscan {
  std::vector<uint8_t> core;
  std::vector<int> comp;  // component of core points (BFS order), -1 otherwise
  std::vector<uint8_t> noise;
};

inline double ref_d2(const std::vector<float>& x, int d, int64_t i, int64_t j) {
  double s = 0;
  for (int k = 0; k < d; ++k) {
    double t = double(x[i * d + k]) - double(x[j * d + k]);
    s += t * t;
  }
  return s;
}

// Textbook DBSCAN: neighbour lists by all pairs, BFS over core points.
inline RefDbscan reference_dbscan(const std::vector<float>& x, int d, double eps, int64_t minpts) {
  const int64_t n = int64_t(x.size()) / d;
  std::vector<std::vector<int64_t>> nb(n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      if (ref_d2(x, d, i, j) <= eps * eps) nb[i].push_back(j);
  RefDbscan r;
  r.core.assign(n, 0);
  r.comp.assign(n, -1);
  r.noise.assign(n, 1);
  for (int64_t i = 0; i < n; ++i) r.core[i] = int64_t(nb[i].size()) >= minpts;
  int c = 0;
  for (int64_t s = 0; s < n; ++s) {
    if (!r.core[s] || r.comp[s] >= 0) continue;
    std::vector<int64_t> stack{s};
    r.comp[s] = c;
    while (!stack.empty()) {
      int64_t i = stack.back();
      stack.pop_back();
      for (int64_t j : nb[i])
        if (r.core[j] && r.comp[j] < 0) {
          r.comp[j] = c;
          stack.push_back(j);
        }
    }
    ++c;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (r.core[i]) r.noise[i] = 0;
    for (int64_t j : nb[i])
      if (r.core[j]) r.noise[i] = 0;
  }
  return r;
}

// Compare labels/core flags with the reference (see the header comment).
inline void expect_matches_reference(const std::vector<float>& x, int d, double eps,
                                     const RefDbscan& ref, const std::vector<int32_t>& label,
                                     const std::vector<uint8_t>& core) {
  const int64_t n = int64_t(label.size());
  ASSERT_EQ(int64_t(ref.core.size()), n);
  std::map<int, int32_t> ref_to_mine;
  std::map<int32_t, int> mine_to_ref;
  int64_t bad_noise = 0, bad_core = 0, bad_partition = 0, bad_border = 0;
  for (int64_t i = 0; i < n; ++i) {
    bad_noise += (label[i] < 0) != bool(ref.noise[i]);
    bad_core += core[i] != ref.core[i];
    if (ref.core[i] && label[i] >= 0) {
      auto a = ref_to_mine.emplace(ref.comp[i], label[i]).first;
      auto b = mine_to_ref.emplace(label[i], ref.comp[i]).first;
      bad_partition += a->second != label[i] || b->second != ref.comp[i];
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    if (ref.core[i] || label[i] < 0) continue;
    bool ok = false;
    for (int64_t j = 0; j < n && !ok; ++j)
      ok = ref.core[j] && label[j] == label[i] && ref_d2(x, d, i, j) <= eps * eps;
    bad_border += !ok;
  }
  EXPECT_EQ(bad_noise, 0) << "points whose noise flag differs from the reference";
  EXPECT_EQ(bad_core, 0) << "points whose core flag differs from the reference";
  EXPECT_EQ(bad_partition, 0) << "core points split/merged differently from the reference";
  EXPECT_EQ(bad_border, 0) << "border points not next to a core of their cluster";
}

// Named adversarial and random point sets shared by the unit and MPI tests.
struct Case {
  std::string name;
  int d;
  double eps;
  int64_t min_samples;
  std::vector<float> x;
};

inline std::vector<Case> dbscan_cases() {
  std::vector<Case> cs;
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<float> U(0, 1);
  std::normal_distribution<float> N(0, 1);
  {  // uniform random
    Case c{"uniform2d", 2, 0.04, 5, {}};
    for (int i = 0; i < 3000 * 2; ++i) c.x.push_back(U(rng));
    cs.push_back(c);
  }
  {  // blobs + background, negative coordinates
    Case c{"blobs_negative", 2, 0.3, 6, {}};
    for (int b = 0; b < 5; ++b)
      for (int i = 0; i < 400; ++i) {
        c.x.push_back(-50 + 3 * b + 0.4f * N(rng));
        c.x.push_back(-80 - 2 * b + 0.4f * N(rng));
      }
    for (int i = 0; i < 300; ++i) {
      c.x.push_back(-55 + 25 * U(rng));
      c.x.push_back(-95 + 25 * U(rng));
    }
    cs.push_back(c);
  }
  {  // many exact duplicates on a few sites
    Case c{"duplicates", 2, 0.5, 4, {}};
    std::uniform_int_distribution<int> site(0, 30);
    for (int i = 0; i < 800; ++i) {
      int s = site(rng);
      c.x.push_back(float(s % 6));
      c.x.push_back(float(s / 6) * 0.75f);
    }
    cs.push_back(c);
  }
  {  // lattice with spacing exactly eps (dyadic: distances are exact); 4 neighbours + self
    Case c{"exactly_eps_lattice", 2, 0.25, 5, {}};
    for (int i = -20; i < 20; ++i)
      for (int j = -15; j < 15; ++j)
        if ((i * 7 + j * 3) % 11 != 0) {  // holes make some points border or noise
          c.x.push_back(0.25f * i);
          c.x.push_back(0.25f * j);
        }
    cs.push_back(c);
  }
  {  // grid-aligned integer points, eps = 1 = cell side, diagonal neighbours out of reach
    Case c{"grid_aligned", 2, 1.0, 3, {}};
    std::uniform_int_distribution<int> I(-30, 30);
    for (int i = 0; i < 1500; ++i) {
      c.x.push_back(float(I(rng)));
      c.x.push_back(float(I(rng)));
    }
    cs.push_back(c);
  }
  {  // one huge dense cluster
    Case c{"one_cluster", 2, 0.1, 10, {}};
    for (int i = 0; i < 2500; ++i) {
      c.x.push_back(0.3f * U(rng));
      c.x.push_back(0.3f * U(rng));
    }
    cs.push_back(c);
  }
  {  // everything noise
    Case c{"all_noise", 2, 0.001, 3, {}};
    for (int i = 0; i < 1000; ++i) {
      c.x.push_back(100 * U(rng));
      c.x.push_back(100 * U(rng));
    }
    cs.push_back(c);
  }
  {  // 3-D blobs
    Case c{"blobs3d", 3, 0.35, 8, {}};
    for (int i = 0; i < 2500; ++i) {
      int b = i % 4;
      for (int k = 0; k < 3; ++k) c.x.push_back(3 * ((b >> (k % 2)) & 1) + 0.5f * N(rng));
    }
    cs.push_back(c);
  }
  {  // 5-D: the all-pairs fallback
    Case c{"blobs5d", 5, 0.9, 6, {}};
    for (int i = 0; i < 1200; ++i)
      for (int k = 0; k < 5; ++k) c.x.push_back((i % 3) * 4 + 0.6f * N(rng));
    cs.push_back(c);
  }
  {  // min_samples = 1: every point is core, clusters = eps-connected components
    Case c{"min_samples_1", 2, 0.05, 1, {}};
    for (int i = 0; i < 1500 * 2; ++i) c.x.push_back(U(rng));
    cs.push_back(c);
  }
  return cs;
}

// Run the distributed DBSCAN on `comm` with the rows dealt round-robin (so every rank's
// share is spread over space), and gather the labels back into input order. index_bits:
// as in dbscan_distributed (0: by each rank's point count).
inline cluster::DbscanResult run_split(const Comm& comm, const Case& c, int index_bits = 0) {
  const int64_t n = int64_t(c.x.size()) / c.d;
  std::vector<float> mine;
  std::vector<int64_t> gid;
  for (int64_t i = comm.rank(); i < n; i += comm.size()) {
    mine.insert(mine.end(), c.x.begin() + i * c.d, c.x.begin() + (i + 1) * c.d);
    gid.push_back(i);
  }
  cluster::DbscanResult part = cluster::dbscan_distributed(
      comm, mine.data(), gid.data(), int64_t(gid.size()), c.d, {c.eps, c.min_samples}, index_bits);
  std::vector<int64_t> all_gid = comm.allgatherv(gid);
  std::vector<int32_t> all_label = comm.allgatherv(part.label);
  std::vector<uint8_t> all_core = comm.allgatherv(part.core);
  cluster::DbscanResult r;
  r.label.assign(n, -2);
  r.core.assign(n, 0);
  for (size_t k = 0; k < all_gid.size(); ++k) {
    r.label[all_gid[k]] = all_label[k];
    r.core[all_gid[k]] = all_core[k];
  }
  r.num_clusters = part.num_clusters;
  r.num_noise = part.num_noise;
  return r;
}

}  // namespace sieve::test
