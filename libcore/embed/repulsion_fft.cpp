// FIt-SNE interpolation for the 2-D repulsive forces (see repulsion.hpp for the method).
#include <fftw3.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "embed/repulsion.hpp"
#include "util/error.hpp"

namespace sieve::embed {

namespace {
constexpr int kNodes = 3;              // Lagrange nodes per box and dimension
constexpr int kMinBoxes = 50;          // boxes per dimension, at least
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
  w[0] = b * c / 2.0;  // (0.5-1.5)(0.5-2.5) = 2
  w[1] = -a * c;       // (1.5-0.5)(1.5-2.5) = -1
  w[2] = a * b / 2.0;  // (2.5-0.5)(2.5-1.5) = 2
}
}  // namespace

// Plans and buffers for one grid: M = 3 n_b nodes per dimension, FFT size L = 2M. All
// buffers live as long as the grid (no allocation per iteration). The two kernel spectra,
// the three charge spectra and the four convolutions are independent transforms: they run
// as tasks on the OpenMP threads, each thread with its own scratch planes (FFTW's
// new-array execute functions are thread-safe; results do not depend on which thread).
struct Repulsion::FftGrid {
  int boxes, M, L, C;  // C = L/2 + 1 = M + 1 complex columns
  struct Scratch {
    float* real = nullptr;          // [L][L] padded node grid (input of r2c, output of c2r)
    float* even = nullptr;          // [M+1][M+1] kernel at non-negative offsets (DCT-I input)
    fftwf_complex* prod = nullptr;  // [L][C] spectrum product, destroyed by c2r
  };
  std::vector<Scratch> scratch;          // one per OpenMP thread
  float* kspec[2] = {nullptr, nullptr};  // [M+1][M+1] real spectra of K1, K2 (DCT-I output)
  fftwf_complex* q[3] = {nullptr, nullptr, nullptr};  // [L][C] spectra of the charges
  fftwf_plan fwd_rows = nullptr, fwd_cols = nullptr, inv_cols = nullptr, inv_rows = nullptr;
  fftwf_plan dct = nullptr;
  std::vector<double> charges;  // [3][M][M] charges 1, y_x, y_y; row = y-node
  std::vector<float> pot;       // [4][M][M] potentials K1*q0, K2*q0, K2*qx, K2*qy

  FftGrid(int nb, int threads) : boxes(nb), M(kNodes * nb), L(2 * M), C(M + 1) {
    const size_t nr = size_t(L) * L, nc = size_t(L) * C, ne = size_t(M + 1) * (M + 1);
    scratch.resize(size_t(std::max(1, threads)));
    bool ok = true;
    for (auto& t : scratch) {
      t.real = fftwf_alloc_real(nr);
      t.even = fftwf_alloc_real(ne);
      t.prod = fftwf_alloc_complex(nc);
      ok = ok && t.real && t.even && t.prod;
    }
    for (auto& k : kspec) ok = ok && (k = fftwf_alloc_real(ne));
    for (auto& p : q) ok = ok && (p = fftwf_alloc_complex(nc));
    SIEVE_CHECK(ok, "t-SNE FFT: out of memory for a ", L, "x", L, " grid");
    // The 2-D transforms are split into their 1-D passes so that the zero rows of the
    // padding are skipped: the charges fill rows [0, M) only, and only rows [0, M) of the
    // convolution are used. Rows: r2c / c2r over M rows; columns: c2c over all C columns.
    // Planned on thread 0's buffers, executed on any thread's (same sizes and alignment).
    Scratch& s0 = scratch[0];
    fwd_rows = fftwf_plan_many_dft_r2c(1, &L, M, s0.real, nullptr, 1, L, q[0], nullptr, 1, C,
                                       FFTW_ESTIMATE);
    fwd_cols = fftwf_plan_many_dft(1, &L, C, q[0], nullptr, C, 1, q[0], nullptr, C, 1, FFTW_FORWARD,
                                   FFTW_ESTIMATE);
    inv_cols = fftwf_plan_many_dft(1, &L, C, s0.prod, nullptr, C, 1, s0.prod, nullptr, C, 1,
                                   FFTW_BACKWARD, FFTW_ESTIMATE);
    inv_rows = fftwf_plan_many_dft_c2r(1, &L, M, s0.prod, nullptr, 1, C, s0.real, nullptr, 1, L,
                                       FFTW_ESTIMATE);
    dct = fftwf_plan_r2r_2d(M + 1, M + 1, s0.even, kspec[0], FFTW_REDFT00, FFTW_REDFT00,
                            FFTW_ESTIMATE);
    SIEVE_CHECK(fwd_rows && fwd_cols && inv_cols && inv_rows && dct,
                "t-SNE FFT: cannot create FFTW plans for ", L, "x", L);
    charges.resize(size_t(3) * M * M);
    pot.resize(size_t(4) * M * M);
  }
  ~FftGrid() {
    for (auto p : {fwd_rows, fwd_cols, inv_cols, inv_rows, dct}) fftwf_destroy_plan(p);
    for (auto& t : scratch) {
      fftwf_free(t.real);
      fftwf_free(t.even);
      fftwf_free(t.prod);
    }
    for (auto* p : kspec) fftwf_free(p);
    for (auto* p : q) fftwf_free(p);
  }
  // Spectrum of circulant kernel s (K1 = 1/(1+r^2), K2 = K1^2) at node offsets (da, db) h,
  // |da|, |db| <= M. The circulant is even (K[a] = K[L-a]), so its DFT is real and equals
  // the DCT-I of the M+1 non-negative offsets: DFT index k maps to min(k, L-k).
  void kernel_spectrum(int s, double h, Scratch& w) {
    for (int a = 0; a <= M; ++a)
      for (int b = 0; b <= M; ++b) {
        const double k = 1.0 / (1.0 + (double(a) * a + double(b) * b) * h * h);
        w.even[size_t(a) * (M + 1) + b] = float(s == 0 ? k : k * k);
      }
    fftwf_execute_r2r(dct, w.even, kspec[s]);
  }
  // q[c] = r2c of charge plane c zero-padded to [L][L].
  void charge_spectrum(int c, Scratch& w) {
    const double* src = charges.data() + size_t(c) * M * M;
    for (int a = 0; a < M; ++a) {
      float* row = w.real + size_t(a) * L;
      for (int b = 0; b < M; ++b) row[b] = float(src[size_t(a) * M + b]);
      std::fill(row + M, row + L, 0.0f);
    }
    fftwf_execute_dft_r2c(fwd_rows, w.real, q[c]);  // rows [0, M); rows [M, L) are zero
    std::fill(&q[c][size_t(M) * C][0], &q[c][size_t(L) * C][0], 0.0f);
    fftwf_execute_dft(fwd_cols, q[c], q[c]);
  }
  // pot plane t = (kernel s) * (charges c), the M x M corner of the circular convolution.
  void convolve(int s, int c, int t, Scratch& w) {
    const float* ks = kspec[s];
    const fftwf_complex* a = q[c];
    fftwf_complex* prod = w.prod;
    for (int k1 = 0; k1 < L; ++k1) {
      const float* krow = ks + size_t(std::min(k1, L - k1)) * (M + 1);
      const size_t row = size_t(k1) * C;
      for (int k2 = 0; k2 < C; ++k2) {
        prod[row + k2][0] = a[row + k2][0] * krow[k2];
        prod[row + k2][1] = a[row + k2][1] * krow[k2];
      }
    }
    fftwf_execute_dft(inv_cols, prod, prod);
    fftwf_execute_dft_c2r(inv_rows, prod, w.real);  // rows [0, M) only: the ones used
    const float norm = 1.0f / (float(L) * float(L));
    float* dst = pot.data() + size_t(t) * M * M;
    for (int a = 0; a < M; ++a)
      for (int b = 0; b < M; ++b) dst[size_t(a) * M + b] = w.real[size_t(a) * L + b] * norm;
  }
};

double Repulsion::fft(const double* Y, int64_t N, Range own, double* rep) {
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
  if (!slot) slot = std::make_unique<FftGrid>(nb, std::min(4, omp_get_max_threads()));
  FftGrid& g = *slot;
  last_boxes_ = nb;
  const int M = g.M;
  const double h = span / M;  // node spacing; node t sits at lo + (t + 0.5) h
  // Charges use coordinates relative to the grid centre: rep = y phi_1 - phi_y is
  // translation invariant, and small |y| keeps the float cancellation small.
  const double mid = lo + 0.5 * span;

  // Per point (all N: every rank spreads all): first node index and 3 weights per dimension.
  base_.resize(size_t(2 * N));
  wts_.resize(size_t(6 * N));
#pragma omp parallel for schedule(static) if (N >= kMinPointsForThreads)
  for (int64_t i = 0; i < N; ++i) {
    for (int c = 0; c < 2; ++c) {
      double u = (Y[i * 2 + c] - lo) / h;  // in node units, [0, M)
      int box = std::min(nb - 1, std::max(0, int(u / kNodes)));
      base_[2 * i + c] = box * kNodes;
      lagrange3(u - box * kNodes, &wts_[6 * i + 3 * c]);
    }
  }
  // Spread charges 1, y_x, y_y of all points onto the node grid (serial: fixed order, so
  // every rank and rank count gets the same bits).
  std::fill(g.charges.begin(), g.charges.end(), 0.0);
  double* q0 = g.charges.data();
  double* qx = q0 + size_t(M) * M;
  double* qy = qx + size_t(M) * M;
  for (int64_t i = 0; i < N; ++i) {
    const double yx = Y[i * 2] - mid, yy = Y[i * 2 + 1] - mid;
    const double* wx = &wts_[6 * i];
    const double* wy = &wts_[6 * i + 3];
    for (int a = 0; a < kNodes; ++a) {
      const size_t row = size_t(base_[2 * i + 1] + a) * M + base_[2 * i];
      for (int b = 0; b < kNodes; ++b) {
        const double w = wy[a] * wx[b];
        q0[row + b] += w;
        qx[row + b] += w * yx;
        qy[row + b] += w * yy;
      }
    }
  }
  // Node potentials: [4][M][M] = K1*q0 (for Z), K2*q0, K2*qx, K2*qy. Tasks 0-1: kernel
  // spectra, 2-4: charge spectra; then the four convolutions.
  // At most one thread per scratch set (num_threads): thread i uses set i.
  const bool threaded = N >= kMinPointsForThreads && g.scratch.size() > 1;
  const int team = int(g.scratch.size());
#pragma omp parallel for schedule(dynamic, 1) num_threads(team) if (threaded)
  for (int task = 0; task < 5; ++task) {
    FftGrid::Scratch& w = g.scratch[size_t(omp_get_thread_num())];
    if (task < 2)
      g.kernel_spectrum(task, h, w);
    else
      g.charge_spectrum(task - 2, w);
  }
  const int kern[4] = {0, 1, 1, 1}, chg[4] = {0, 0, 1, 2};
#pragma omp parallel for schedule(dynamic, 1) num_threads(team) if (threaded)
  for (int t = 0; t < 4; ++t)
    g.convolve(kern[t], chg[t], t, g.scratch[size_t(omp_get_thread_num())]);
  const float* pot = g.pot.data();

  // Interpolate back: phi_0 at every point (Z), the force potentials at the owned ones.
  zrow_.resize(size_t(N));
#pragma omp parallel for schedule(static) if (N >= kMinPointsForThreads)
  for (int64_t i = 0; i < N; ++i) {
    const double* wx = &wts_[6 * i];
    const double* wy = &wts_[6 * i + 3];
    const bool mine = i >= own.begin && i < own.end;
    const int nt = mine ? 4 : 1;
    double phi[4] = {0, 0, 0, 0};
    for (int a = 0; a < kNodes; ++a)
      for (int b = 0; b < kNodes; ++b) {
        double w = wy[a] * wx[b];
        size_t cell = size_t(base_[2 * i + 1] + a) * M + base_[2 * i] + b;
        for (int t = 0; t < nt; ++t) phi[t] += w * pot[size_t(t) * M * M + cell];
      }
    zrow_[i] = phi[0] - 1.0;  // drop the self term K1(0) = 1
    if (mine) {
      const double yx = Y[i * 2] - mid, yy = Y[i * 2 + 1] - mid;
      const int64_t r = i - own.begin;
      rep[2 * r] = yx * phi[1] - phi[2];
      rep[2 * r + 1] = yy * phi[1] - phi[3];
    }
  }
  double z = 0.0;
  for (double v : zrow_) z += v;
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
