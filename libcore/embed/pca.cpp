#include "embed/pca.hpp"

#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>

#include "util/error.hpp"

namespace sieve::embed {

PcaModel pca_fit(const Comm& comm, const float* x, int64_t rows, int64_t F, int64_t k,
                 bool whiten) {
  SIEVE_ASSERT(F > 0 && k > 0);
  k = std::min(k, F);
  // buf = [G (F*F, upper triangle filled by dsyrk) | column sums (F) | n (1)]
  std::vector<double> buf(size_t(F * F + F + 1), 0.0);
  double* G = buf.data();
  double* sums = G + F * F;
  // Row chunks converted to double: dsyrk keeps full double accumulation at BLAS speed.
  const int64_t chunk = std::max<int64_t>(64, std::min<int64_t>(4096, (1 << 22) / F));
  std::vector<double> xd(size_t(chunk * F));  // [chunk,F]
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    int64_t nr = std::min(chunk, rows - r0);
    const float* src = x + r0 * F;
    for (int64_t i = 0; i < nr * F; ++i) xd[i] = src[i];
    for (int64_t i = 0; i < nr; ++i)
      for (int64_t j = 0; j < F; ++j) sums[j] += xd[i * F + j];
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, int(F), int(nr), 1.0, xd.data(), int(F),
                1.0, G, int(F));
  }
  buf.back() = double(rows);
  comm.allreduce_sum(buf.data(), buf.size());  // the one collective of the fit

  PcaModel m;
  m.features = F;
  m.components = k;
  m.samples = int64_t(buf.back());
  m.whiten = whiten;
  SIEVE_CHECK(m.samples >= 2, "PCA needs at least 2 samples, found ", m.samples);
  const double n = double(m.samples);
  // The mean and the covariance are rounded to float (the precision of the features): the
  // sums above depend in their last bits (~1e-16) on how the rows were split over the ranks,
  // and t-SNE downstream amplifies a one-ulp change of its input into a different layout.
  // Rounded, the fit is the same for any rank count (unless an entry straddles a float
  // rounding boundary, a ~1e-9 chance per entry), which keeps the per-class embedding
  // independent of the rank count (reduce_dims).
  m.mean.assign(sums, sums + F);
  for (auto& v : m.mean) v = double(float(v / n));
  // Covariance, upper triangle (row-major: j >= i).
  double total = 0.0;
  for (int64_t i = 0; i < F; ++i) {
    for (int64_t j = i; j < F; ++j)
      G[i * F + j] =
          double(float((G[i * F + j] - n * (sums[i] / n) * (sums[j] / n)) / (n - 1.0)));
    total += G[i * F + i];
  }
  std::vector<double> w(static_cast<size_t>(F)), z(size_t(F * k));  // z [F,k]
  std::vector<lapack_int> support(size_t(2 * F));
  lapack_int found = 0;
  lapack_int info = LAPACKE_dsyevr(LAPACK_ROW_MAJOR, 'V', 'I', 'U', lapack_int(F), G,
                                   lapack_int(F), 0.0, 0.0, lapack_int(F - k + 1), lapack_int(F),
                                   0.0, &found, w.data(), z.data(), lapack_int(k), support.data());
  SIEVE_CHECK(info == 0 && found == k, "PCA: LAPACKE_dsyevr failed (info ", info, ", found ",
              found, " of ", k, " eigenpairs)");
  // dsyevr returns ascending eigenvalues: component c is column k-1-c of z.
  m.basis.assign(size_t(k * F), 0.0);
  m.variance.resize(static_cast<size_t>(k));
  m.explained_ratio.resize(static_cast<size_t>(k));
  for (int64_t c = 0; c < k; ++c) {
    int64_t col = k - 1 - c;
    double big = 0.0;
    for (int64_t j = 0; j < F; ++j)
      if (std::abs(z[j * k + col]) > std::abs(big)) big = z[j * k + col];
    double sign = big < 0 ? -1.0 : 1.0;
    for (int64_t j = 0; j < F; ++j) m.basis[c * F + j] = sign * z[j * k + col];
    m.variance[c] = std::max(0.0, w[col]);
    m.explained_ratio[c] = total > 0 ? m.variance[c] / total : 0.0;
  }
  return m;
}

void pca_transform(const PcaModel& m, const float* x, int64_t rows, float* out) {
  const int64_t F = m.features, k = m.components;
  // Scaled basis W [k,F] as float, and the offset mean . W^T [k] in double.
  std::vector<float> W(size_t(k * F));
  std::vector<float> offset(static_cast<size_t>(k));
  for (int64_t c = 0; c < k; ++c) {
    double s = 1.0;
    if (m.whiten) s = m.variance[c] > 0 ? 1.0 / std::sqrt(m.variance[c]) : 0.0;
    double off = 0.0;
    for (int64_t j = 0; j < F; ++j) {
      W[c * F + j] = float(m.basis[c * F + j] * s);
      off += m.mean[j] * m.basis[c * F + j] * s;
    }
    offset[c] = float(off);
  }
  if (rows == 0) return;
  // out [i,:] = W [k,F] . x [i,:] - offset, one matrix-vector product per row: a GEMM over
  // all rows would round a row differently depending on where it falls in the kernel's
  // blocking (edge tiles use other kernels), i.e. on how the rows were split over the
  // ranks; per row, a row's projection is the same wherever it is computed.
  for (int64_t i = 0; i < rows; ++i) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, int(k), int(F), 1.0f, W.data(), int(F), x + i * F, 1,
                0.0f, out + i * k, 1);
    for (int64_t c = 0; c < k; ++c) out[i * k + c] -= offset[c];
  }
}

}  // namespace sieve::embed
