// Distributed PCA by the covariance eigendecomposition.
//
// Each rank holds a contiguous block of rows of X [N,F]. The fit makes ONE pass over the
// local rows: column sums and the Gram matrix X^T X accumulated in double (dsyrk on
// row chunks converted to double), then ONE allreduce of [X^T X | sums | n], then every
// rank solves the same symmetric eigenproblem (LAPACKE_dsyevr, only the top k pairs), so
// every rank ends with the same model and no broadcast is needed.
// The covariance is formed as (G - n mu mu^T)/(n-1) in double; with float32 input this
// loses nothing that matters unless |mean|/std exceeds ~1e5 in some feature.
// Sign convention: the entry of largest magnitude in each component is positive, so the
// result does not depend on LAPACK's arbitrary eigenvector signs.
#pragma once
#include <cstdint>
#include <vector>

#include "comm/comm.hpp"

namespace sieve::embed {

struct PcaModel {
  int64_t features = 0;    // F
  int64_t components = 0;  // k
  int64_t samples = 0;     // N over all ranks
  bool whiten = false;
  std::vector<double> mean;               // [F]
  std::vector<double> basis;              // [k,F] row-major, orthonormal rows
  std::vector<double> variance;           // [k] eigenvalues of the covariance (descending)
  std::vector<double> explained_ratio;    // [k] variance / total variance
};

// Fit on the local rows x [rows,F] of every rank (collective). k is clipped to F.
PcaModel pca_fit(const Comm& comm, const float* x, int64_t rows, int64_t F, int64_t k,
                 bool whiten);

// out [rows,k] = (x - mean) basis^T (divided by sqrt(variance) when whitening); one sgemm.
void pca_transform(const PcaModel& m, const float* x, int64_t rows, float* out);

}  // namespace sieve::embed
