#include "nn/sgd.hpp"

#include <cmath>

#include "util/error.hpp"

namespace sieve::nn {

// Sequential loops (no OpenMP, no reordering): the update must be bitwise reproducible and
// identical wherever it runs on the host.
double sum_host(const float* x, size_t count) {
  double total = 0;
  for (size_t i = 0; i < count; ++i) total += x[i];
  return total;
}

void sgd_norms_host(const float* w, const float* g, const SgdTerm* terms, size_t n, double* norms) {
  for (size_t k = 0; k < n; ++k) {
    const SgdTerm& t = terms[k];
    if (t.kind != SgdTerm::Kind::lars) continue;
    double wn = 0, gn = 0;
    for (size_t i = t.offset; i < t.offset + t.count; ++i) {
      wn += double(w[i]) * w[i];
      gn += double(g[i]) * g[i];
    }
    norms[2 * k] = std::sqrt(wn);
    norms[2 * k + 1] = std::sqrt(gn);
  }
}

void sgd_apply_host(const SgdBuffers& b, size_t begin, size_t end, const SgdTerm* terms, size_t n,
                    const SgdStep& s) {
  float* w = b.params;
  float* g = b.scratch;
  float* v = b.velocity;
  for (size_t i = begin; i < end; ++i) g[i] = b.grads[i];
  for (size_t k = 0; k < n; ++k) {
    const SgdTerm& t = terms[k];
    SIEVE_ASSERT(t.offset >= begin && t.offset + t.count <= end, "SGD term at ", t.offset,
                 " outside [", begin, ", ", end, ")");
    float* gs = g + t.offset;
    const float* ws = w + t.offset;
    if (t.kind == SgdTerm::Kind::lars) {
      for (size_t i = 0; i < t.count; ++i) gs[i] = t.trust * (gs[i] + t.l2 * ws[i]);
    } else if (t.kind == SgdTerm::Kind::l2) {
      for (size_t i = 0; i < t.count; ++i) gs[i] += t.l2 * ws[i];
    }
  }
  const float mu = s.momentum;
  for (size_t i = begin; i < end; ++i) {
    v[i] = mu * v[i] + g[i];
    g[i] = s.nesterov ? g[i] + mu * v[i] : v[i];
  }
  for (size_t k = 0; k < n; ++k) {
    const SgdTerm& t = terms[k];
    if (t.decoupled == 0.f) continue;
    const float f = s.lr * t.decoupled;
    for (size_t i = t.offset; i < t.offset + t.count; ++i) w[i] -= f * w[i];
  }
  for (size_t i = begin; i < end; ++i) w[i] -= s.lr * g[i];
}

}  // namespace sieve::nn
