#include "embed/repulsion.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "util/error.hpp"

namespace sieve::embed {

RepulsionMethod parse_repulsion(const std::string& name) {
  if (name == "exact") return RepulsionMethod::Exact;
  if (name == "barnes_hut") return RepulsionMethod::BarnesHut;
  if (name == "fft") return RepulsionMethod::Fft;
  throw UsageError(cat("unknown repulsion method '", name, "' (exact, barnes_hut, fft)"));
}

const char* repulsion_name(RepulsionMethod m) {
  switch (m) {
    case RepulsionMethod::Exact: return "exact";
    case RepulsionMethod::BarnesHut: return "barnes_hut";
    case RepulsionMethod::Fft: return "fft";
  }
  return "?";
}

double Repulsion::compute(const Comm& comm, const double* Y, int64_t N, Range own,
                          double* rep) {
  switch (method_) {
    // Exact and Barnes-Hut sum Z over the owned rows: one allreduce. The FFT path computes
    // the whole Z on every rank (it spreads all points anyway) and needs none.
    case RepulsionMethod::Exact: return comm.allreduce_sum(exact(Y, N, own, rep));
    case RepulsionMethod::BarnesHut: return comm.allreduce_sum(barnes_hut(Y, N, own, rep));
    case RepulsionMethod::Fft: return fft(Y, N, own, rep);
  }
  return 0.0;
}

double Repulsion::exact(const double* Y, int64_t N, Range own, double* rep) const {
  const int d = dims_;
  std::vector<double> zrow(size_t(own.size()));
#pragma omp parallel for schedule(static) if (N >= 512)  // O(N^2): worth threads early
  for (int64_t i = own.begin; i < own.end; ++i) {
    double f[3] = {0, 0, 0}, z = 0.0;
    for (int64_t j = 0; j < N; ++j) {
      if (j == i) continue;
      double diff[3], d2 = 0.0;
      for (int c = 0; c < d; ++c) {
        diff[c] = Y[i * d + c] - Y[j * d + c];
        d2 += diff[c] * diff[c];
      }
      double w = 1.0 / (1.0 + d2);
      z += w;
      for (int c = 0; c < d; ++c) f[c] += w * w * diff[c];
    }
    for (int c = 0; c < d; ++c) rep[(i - own.begin) * d + c] = f[c];
    zrow[i - own.begin] = z;
  }
  double z = 0.0;
  for (double v : zrow) z += v;
  return z;
}

namespace {

// A 2^d-tree over all points, rebuilt every iteration (O(N log N), cheap next to the
// traversal). Children of a node are contiguous; leaves reference a range of `perm`.
struct Tree {
  struct Node {
    double center[3], half;  // cell centre and half width
    double com[3];           // centre of mass of the points inside
    int64_t count = 0;
    int64_t first_child = -1;  // -1: leaf
    int64_t begin = 0, end = 0;  // leaf points: perm[begin, end)
  };
  int d;
  const double* Y;
  std::vector<Node> nodes;
  std::vector<int64_t> perm, scratch;

  void build(int64_t n) {
    perm.resize(static_cast<size_t>(n));
    scratch.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) perm[i] = i;
    double lo[3], hi[3];
    for (int c = 0; c < d; ++c) lo[c] = hi[c] = Y[c];
    for (int64_t i = 0; i < n; ++i)
      for (int c = 0; c < d; ++c) {
        lo[c] = std::min(lo[c], Y[i * d + c]);
        hi[c] = std::max(hi[c], Y[i * d + c]);
      }
    Node root;
    double half = 0.0;
    for (int c = 0; c < d; ++c) {
      root.center[c] = 0.5 * (lo[c] + hi[c]);
      half = std::max(half, 0.5 * (hi[c] - lo[c]));
    }
    root.half = half * (1.0 + 1e-9) + 1e-12;
    nodes.clear();
    nodes.reserve(size_t(2 * n + 16));
    nodes.push_back(root);
    split(0, 0, n, 0);
  }

  void split(int64_t node, int64_t b, int64_t e, int depth) {
    Node& nd = nodes[node];
    nd.begin = b;
    nd.end = e;
    nd.count = e - b;
    for (int c = 0; c < d; ++c) nd.com[c] = 0.0;
    for (int64_t t = b; t < e; ++t)
      for (int c = 0; c < d; ++c) nd.com[c] += Y[perm[t] * d + c];
    for (int c = 0; c < d; ++c) nd.com[c] /= double(std::max<int64_t>(1, nd.count));
    if (nd.count <= 1 || depth >= 48) return;  // depth cap: duplicates stay in one leaf
    const int nc = 1 << d;
    int64_t counts[9] = {0};
    auto child_of = [&](int64_t p) {
      int o = 0;
      for (int c = 0; c < d; ++c)
        if (Y[p * d + c] >= nodes[node].center[c]) o |= 1 << c;
      return o;
    };
    for (int64_t t = b; t < e; ++t) counts[child_of(perm[t]) + 1]++;
    for (int o = 0; o < nc; ++o) counts[o + 1] += counts[o];
    int64_t starts[9];
    std::copy(counts, counts + nc + 1, starts);
    for (int64_t t = b; t < e; ++t) scratch[b + counts[child_of(perm[t])]++] = perm[t];
    std::copy(scratch.begin() + b, scratch.begin() + e, perm.begin() + b);
    int64_t first = int64_t(nodes.size());
    nodes[node].first_child = first;
    double h = nodes[node].half * 0.5;
    for (int o = 0; o < nc; ++o) {
      Node ch;
      for (int c = 0; c < d; ++c)
        ch.center[c] = nodes[node].center[c] + ((o >> c) & 1 ? h : -h);
      ch.half = h;
      nodes.push_back(ch);
    }
    for (int o = 0; o < nc; ++o) split(first + o, b + starts[o], b + starts[o + 1], depth + 1);
  }
};

}  // namespace

double Repulsion::barnes_hut(const double* Y, int64_t N, Range own, double* rep) const {
  const int d = dims_;
  Tree tree{d, Y, {}, {}, {}};
  tree.build(N);
  const double theta2 = theta_ * theta_;
  const int nc = 1 << d;
  std::vector<double> zrow(size_t(own.size()));
#pragma omp parallel if (N >= kMinPointsForThreads)
  {
    std::vector<int64_t> stack;
#pragma omp for schedule(dynamic, 64)
    for (int64_t i = own.begin; i < own.end; ++i) {
      const double* yi = Y + i * d;
      double f[3] = {0, 0, 0}, z = 0.0;
      stack.assign(1, 0);
      while (!stack.empty()) {
        const Tree::Node& nd = tree.nodes[stack.back()];
        stack.pop_back();
        if (nd.count == 0) continue;
        if (nd.first_child < 0) {
          for (int64_t t = nd.begin; t < nd.end; ++t) {
            int64_t j = tree.perm[t];
            if (j == i) continue;
            double diff[3], d2 = 0.0;
            for (int c = 0; c < d; ++c) {
              diff[c] = yi[c] - Y[j * d + c];
              d2 += diff[c] * diff[c];
            }
            double w = 1.0 / (1.0 + d2);
            z += w;
            for (int c = 0; c < d; ++c) f[c] += w * w * diff[c];
          }
          continue;
        }
        double diff[3], d2 = 0.0;
        for (int c = 0; c < d; ++c) {
          diff[c] = yi[c] - nd.com[c];
          d2 += diff[c] * diff[c];
        }
        double width = 2.0 * nd.half;
        if (width * width < theta2 * d2) {
          double w = 1.0 / (1.0 + d2), m = double(nd.count);
          z += m * w;
          for (int c = 0; c < d; ++c) f[c] += m * w * w * diff[c];
        } else {
          for (int o = nc - 1; o >= 0; --o) stack.push_back(nd.first_child + o);
        }
      }
      for (int c = 0; c < d; ++c) rep[(i - own.begin) * d + c] = f[c];
      zrow[i - own.begin] = z;
    }
  }
  double z = 0.0;
  for (double v : zrow) z += v;
  return z;
}

}  // namespace sieve::embed
