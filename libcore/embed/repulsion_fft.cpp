// FIt-SNE interpolation for the 2-D repulsive forces (see repulsion.hpp for the method).
#include <fftw3.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "embed/repulsion.hpp"
#include "util/error.hpp"

namespace sieve::embed {

namespace {
constexpr int kNodes = 3;             // Lagrange nodes per box and dimension
constexpr int kMinBoxes = 50;         // boxes per dimension, at least
constexpr double kBoxesPerUnit = 1.0;  // about one box per unit of embedding length

// Smallest n >= target whose only prime factors are 2, 3, 5 (fast FFT sizes).
int nice_size(int target) {
  for (int n = target;; ++n) {
    int m = n;
    for (int p : {2, 3, 5})
      while (m % p == 0) m /= p;
    if (m == 1) return n;
  }
}

// Lagrange basis on the nodes 0.5, 1.5, 2.5 (box-local units of the node spacing).
inline void lagrange3(double u, double w[3]) {
  const double a = u - 0.5, b = u - 1.5, c = u - 2.5;
  w[0] = b * c / 2.0;   // (0.5-1.5)(0.5-2.5) = 2
  w[1] = -a * c;        // (1.5-0.5)(1.5-2.5) = -1
  w[2] = a * b / 2.0;   // (2.5-0.5)(2.5-1.5) = 2
}
}  // namespace

// Plans and buffers for one grid: M = 3 n_b nodes per dimension, FFT size L = 2M.
struct Repulsion::FftGrid {
  int boxes, M, L, C;  // C = L/2 + 1 complex columns
  float* real = nullptr;
  fftwf_complex *spec = nullptr, *k1 = nullptr, *k2 = nullptr, *prod = nullptr;
  fftwf_complex* q[3] = {nullptr, nullptr, nullptr};
  fftwf_plan fwd = nullptr, inv = nullptr;

  explicit FftGrid(int nb) : boxes(nb), M(kNodes * nb), L(2 * M), C(M + 1) {
    size_t nr = size_t(L) * L, nc = size_t(L) * C;
    real = fftwf_alloc_real(nr);
    spec = fftwf_alloc_complex(nc);
    k1 = fftwf_alloc_complex(nc);
    k2 = fftwf_alloc_complex(nc);
    prod = fftwf_alloc_complex(nc);
    for (auto& p : q) p = fftwf_alloc_complex(nc);
    SIEVE_CHECK(real && spec && k1 && k2 && prod && q[0] && q[1] && q[2],
                "t-SNE FFT: out of memory for a ", L, "x", L, " grid");
    fwd = fftwf_plan_dft_r2c_2d(L, L, real, spec, FFTW_ESTIMATE);
    inv = fftwf_plan_dft_c2r_2d(L, L, prod, real, FFTW_ESTIMATE);
    SIEVE_CHECK(fwd && inv, "t-SNE FFT: cannot create FFTW plans for ", L, "x", L);
  }
  ~FftGrid() {
    fftwf_destroy_plan(fwd);
    fftwf_destroy_plan(inv);
    fftwf_free(real);
    for (auto* p : {spec, k1, k2, prod, q[0], q[1], q[2]}) fftwf_free(p);
  }
  // real (L x L) -> out spectrum (L x C)
  void forward(fftwf_complex* out) { fftwf_execute_dft_r2c(fwd, real, out); }
  // prod = a .* b; real = c2r(prod) (destroys prod)
  void multiply_inverse(const fftwf_complex* a, const fftwf_complex* b) {
    const size_t n = size_t(L) * C;
    for (size_t t = 0; t < n; ++t) {
      float re = a[t][0] * b[t][0] - a[t][1] * b[t][1];
      float im = a[t][0] * b[t][1] + a[t][1] * b[t][0];
      prod[t][0] = re;
      prod[t][1] = im;
    }
    fftwf_execute_dft_c2r(inv, prod, real);
  }
};

double Repulsion::fft(const Comm& comm, const double* Y, int64_t N, Range own, double* rep) {
  SIEVE_CHECK(dims_ == 2, "FFT repulsion supports 2-D embeddings only (use barnes_hut for 3-D)");
  // Bounding square of all points (identical on every rank: Y is replicated).
  double lo = Y[0], hi = Y[0];
  for (int64_t t = 0; t < 2 * N; ++t) {
    lo = std::min(lo, Y[t]);
    hi = std::max(hi, Y[t]);
  }
  double span = std::max(hi - lo, 1e-6);
  lo -= 1e-6 * span;
  span *= 1.0 + 2e-6;
  const int nb = nice_size(std::max(kMinBoxes, int(std::ceil(span * kBoxesPerUnit))));
  auto& slot = grids_[nb];
  if (!slot) slot = std::make_unique<FftGrid>(nb);
  FftGrid& g = *slot;
  last_boxes_ = nb;
  const int M = g.M, L = g.L;
  const double h = span / M;  // node spacing; node t sits at lo + (t + 0.5) h
  // Charges use coordinates relative to the grid centre: rep = y phi_1 - phi_y is
  // translation invariant, and small |y| keeps the float cancellation small.
  const double mid = lo + 0.5 * span;

  // Per owned point: first node index and the 3 weights in each dimension.
  const int64_t n = own.size();
  std::vector<int32_t> base(size_t(2 * n));
  std::vector<double> wts(size_t(6 * n));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    for (int c = 0; c < 2; ++c) {
      double u = (Y[(own.begin + i) * 2 + c] - lo) / h;  // in node units, [0, M)
      int box = std::min(nb - 1, std::max(0, int(u / kNodes)));
      base[2 * i + c] = box * kNodes;
      lagrange3(u - box * kNodes, &wts[6 * i + 3 * c]);
    }
  }
  // Spread charges 1, y_x, y_y of owned points onto the node grid (serial: fixed order).
  std::vector<double> charges(size_t(3) * M * M, 0.0);  // [3][M][M], row = y-node
  for (int64_t i = 0; i < n; ++i) {
    const double yx = Y[(own.begin + i) * 2] - mid, yy = Y[(own.begin + i) * 2 + 1] - mid;
    const double* wx = &wts[6 * i];
    const double* wy = &wts[6 * i + 3];
    for (int a = 0; a < kNodes; ++a)
      for (int b = 0; b < kNodes; ++b) {
        double w = wy[a] * wx[b];
        size_t cell = size_t(base[2 * i + 1] + a) * M + base[2 * i] + b;
        charges[cell] += w;
        charges[size_t(M) * M + cell] += w * yx;
        charges[size_t(2) * M * M + cell] += w * yy;
      }
  }
  comm.allreduce_sum(charges.data(), charges.size());

  // Kernel spectra: circulant embedding of K(offset * h), offsets wrapped modulo L.
  for (int s = 1; s <= 2; ++s) {
    for (int a = 0; a < L; ++a) {
      int da = a < M ? a : a - L;
      for (int b = 0; b < L; ++b) {
        int db = b < M ? b : b - L;
        double r2 = (double(da) * da + double(db) * db) * h * h;
        double k = 1.0 / (1.0 + r2);
        g.real[size_t(a) * L + b] = float(s == 1 ? k : k * k);
      }
    }
    g.forward(s == 1 ? g.k1 : g.k2);
  }
  for (int c = 0; c < 3; ++c) {
    std::fill(g.real, g.real + size_t(L) * L, 0.0f);
    for (int a = 0; a < M; ++a)
      for (int b = 0; b < M; ++b)
        g.real[size_t(a) * L + b] = float(charges[size_t(c) * M * M + size_t(a) * M + b]);
    g.forward(g.q[c]);
  }
  // Node potentials: [4][M][M] = K1*q0 (for Z), K2*q0, K2*qx, K2*qy.
  std::vector<float> pot(size_t(4) * M * M);
  const float norm = 1.0f / (float(L) * float(L));
  const fftwf_complex* kern[4] = {g.k1, g.k2, g.k2, g.k2};
  const fftwf_complex* chg[4] = {g.q[0], g.q[0], g.q[1], g.q[2]};
  for (int t = 0; t < 4; ++t) {
    g.multiply_inverse(kern[t], chg[t]);
    for (int a = 0; a < M; ++a)
      for (int b = 0; b < M; ++b)
        pot[size_t(t) * M * M + size_t(a) * M + b] = g.real[size_t(a) * L + b] * norm;
  }
  // Interpolate the potentials back to the owned points.
  std::vector<double> zrow(static_cast<size_t>(n));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const double* wx = &wts[6 * i];
    const double* wy = &wts[6 * i + 3];
    double phi[4] = {0, 0, 0, 0};
    for (int a = 0; a < kNodes; ++a)
      for (int b = 0; b < kNodes; ++b) {
        double w = wy[a] * wx[b];
        size_t cell = size_t(base[2 * i + 1] + a) * M + base[2 * i] + b;
        for (int t = 0; t < 4; ++t) phi[t] += w * pot[size_t(t) * M * M + cell];
      }
    const double yx = Y[(own.begin + i) * 2] - mid, yy = Y[(own.begin + i) * 2 + 1] - mid;
    zrow[i] = phi[0] - 1.0;  // drop the self term K1(0) = 1
    rep[2 * i] = yx * phi[1] - phi[2];
    rep[2 * i + 1] = yy * phi[1] - phi[3];
  }
  double z = 0.0;
  for (double v : zrow) z += v;
  return z;
}

Repulsion::Repulsion(RepulsionMethod method, int dims, double theta)
    : method_(method), dims_(dims), theta_(theta) {
  SIEVE_CHECK(dims == 2 || dims == 3, "t-SNE embedding dimension must be 2 or 3, got ", dims);
  SIEVE_CHECK(method != RepulsionMethod::Fft || dims == 2,
              "FFT repulsion supports 2-D embeddings only (use barnes_hut for 3-D)");
}

Repulsion::~Repulsion() = default;

}  // namespace sieve::embed
