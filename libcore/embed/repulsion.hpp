// Repulsive forces of t-SNE: the N-body part of the gradient.
//
// With w_ij = 1/(1 + |y_i - y_j|^2) (the Student-t kernel) and Z = sum_{i != j} w_ij, the
// gradient of the KL divergence is
//   dC/dy_i = 4 [ sum_j p_ij w_ij (y_i - y_j)  -  (1/Z) sum_j w_ij^2 (y_i - y_j) ].
// A Repulsion computes, for the points a rank owns, the unnormalised second sum
//   rep_i = sum_j w_ij^2 (y_i - y_j)
// and its share of Z; the caller allreduces Z. Three methods:
//  - Exact: O(N^2), the reference for tests.
//  - BarnesHut: a 2^d-tree (quad/octree) over all points, cells summarised when
//    width/distance < theta (0.5 by default); 2-D and 3-D.
//  - Fft: FIt-SNE (Linderman et al. 2019) interpolation, 2-D only. The bounding square is
//    cut into n_b x n_b boxes (n_b >= 50, about one box per unit of embedding length,
//    rounded up to a 2^a 3^b 5^c size) with p = 3 equispaced Lagrange nodes per box and
//    dimension, so the nodes form one uniform (3 n_b)^2 grid. Charges are spread onto the
//    nodes, the kernels 1/(1+d^2) (charge 1: gives Z) and 1/(1+d^2)^2 (charges 1, y_x,
//    y_y: gives rep) are applied to the node grid as circulant convolutions with FFTW
//    r2c/c2r on a zero-padded (6 n_b)^2 grid, and the potentials are interpolated back.
//    Plans are made once per grid size (FFTW_ESTIMATE: the same algorithm on every run,
//    hence bitwise-reproducible). The kernels are real and even, so their spectra are real
//    and come from a 2-D DCT-I (REDFT00) of the (M+1)^2 non-negative offsets: a quarter of
//    the size of the padded grid. The padded r2c / c2r transforms run as separate row and
//    column passes so that the M all-zero (forward) or unused (inverse) rows are skipped.
//    Every rank spreads ALL points (O(N), cheap next to the
//    FFTs, which every rank runs anyway) and computes the whole Z itself, so an iteration
//    needs no messages here: on a shared 2-core machine each collective costs a scheduler
//    time slice, far more than the arithmetic it saves. Each rank interpolates the forces
//    for its own points only.
// Every per-point loop is OpenMP-parallel; every sum that crosses points is done
// serially in a fixed order, so results do not depend on the thread count.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "embed/parallel.hpp"

namespace sieve::embed {

enum class RepulsionMethod { Exact, BarnesHut, Fft };
RepulsionMethod parse_repulsion(const std::string& name);  // "exact", "barnes_hut", "fft"
const char* repulsion_name(RepulsionMethod m);

class Repulsion {
 public:
  Repulsion(RepulsionMethod method, int dims, double theta = 0.5);
  ~Repulsion();
  Repulsion(const Repulsion&) = delete;
  Repulsion& operator=(const Repulsion&) = delete;

  // Y [N,dims]: all points (every rank holds all). rep [own.size(),dims] receives rep_i for
  // the owned rows; returns Z = sum over all i of sum_{j != i} w_ij (the same on every rank).
  // Collective (Exact and BarnesHut allreduce their owned shares; Fft needs no messages).
  double compute(const Comm& comm, const double* Y, int64_t N, Range own, double* rep);

  RepulsionMethod method() const { return method_; }
  int last_grid_boxes() const { return last_boxes_; }  // Fft: boxes per dimension last used

 private:
  double exact(const double* Y, int64_t N, Range own, double* rep) const;
  double barnes_hut(const double* Y, int64_t N, Range own, double* rep) const;
  double fft(const double* Y, int64_t N, Range own, double* rep);

  struct FftGrid;  // FFTW plans and buffers for one grid size
  RepulsionMethod method_;
  int dims_;
  double theta_;
  int last_boxes_ = 0;
  std::map<int, std::unique_ptr<FftGrid>> grids_;  // by boxes per dimension, made once each
  std::vector<int32_t> base_;  // Fft scratch, reused: [N,2] first node per dimension
  std::vector<double> wts_;    // [N,2,3] Lagrange weights
  std::vector<double> zrow_;   // [N] Z share per point
};

}  // namespace sieve::embed
