// Host memory (the CPU backends' device) and the shared host-side parts of the CPU backends.
#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "nn/backend_impl.hpp"

namespace sieve::nn {

namespace {
// Below this many elements our loops stay serial: a parallel region costs more than the
// work, and far more when the cores are oversubscribed (MPI ranks x threads).
constexpr size_t kParallelMin = 1 << 15;

class HostMemory final : public Memory {
 public:
  Device device() const override { return Device::cpu; }
  void* allocate(size_t bytes) override { return host_allocate(bytes); }
  void release(void* p) override { std::free(p); }
  void to_device(void* dst, const void* src, size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void to_host(void* dst, const void* src, size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void fill_zero(void* p, size_t bytes) override {
    if (bytes) std::memset(p, 0, bytes);
  }
};
}  // namespace

void* host_allocate(size_t bytes) {
  // 64-byte aligned (AVX-512 loads, oneDNN's preferred alignment); aligned_alloc wants a
  // multiple of the alignment.
  void* p = std::aligned_alloc(64, ((bytes + 63) / 64) * 64 + (bytes == 0 ? 64 : 0));
  if (!p) throw std::bad_alloc();
  return p;
}

Memory& host_memory() {
  static HostMemory m;
  return m;
}

void* HostBackend::allocate(size_t bytes) {
  return host_allocate(bytes);
}
void HostBackend::release(void* p) {
  std::free(p);
}
void HostBackend::to_device(void* dst, const void* src, size_t bytes) {
  host_memory().to_device(dst, src, bytes);
}
void HostBackend::to_host(void* dst, const void* src, size_t bytes) {
  host_memory().to_host(dst, src, bytes);
}
void HostBackend::fill_zero(void* p, size_t bytes) {
  host_memory().fill_zero(p, bytes);
}

void HostBackend::load_input(const float* x, Act* y, int n, int c, int h, int w) {
  const size_t plane = size_t(h) * w, total = size_t(n) * c * plane;
  const bool bf16 = dtype() == DType::bf16;
  float* yf = static_cast<float*>(y);
  uint16_t* yb = static_cast<uint16_t*>(y);
#pragma omp parallel for schedule(static) if (total > kParallelMin)
  for (int i = 0; i < n; ++i)  // NCHW -> NHWC
    for (int ch = 0; ch < c; ++ch)
      for (size_t p = 0; p < plane; ++p) {
        const float v = x[(size_t(i) * c + ch) * plane + p];
        const size_t at = (size_t(i) * plane + p) * c + ch;
        if (bf16)
          yb[at] = to_bf16(v);
        else
          yf[at] = v;
      }
}

void HostBackend::act_to_host(const Act* x, float* host, size_t count) {
  if (dtype() == DType::f32) return to_host(host, x, count * sizeof(float));
  const uint16_t* xb = static_cast<const uint16_t*>(x);
  for (size_t i = 0; i < count; ++i) host[i] = from_bf16(xb[i]);
}

void HostBackend::act_from_host(const float* host, Act* y, size_t count) {
  if (dtype() == DType::f32) return to_device(y, host, count * sizeof(float));
  uint16_t* yb = static_cast<uint16_t*>(y);
  for (size_t i = 0; i < count; ++i) yb[i] = to_bf16(host[i]);
}

void HostBackend::axpy(float a, const float* x, float* y, size_t count) {
#pragma omp parallel for simd schedule(static) if (count > kParallelMin)
  for (size_t i = 0; i < count; ++i) y[i] += a * x[i];
}

double HostBackend::sum(const float* x, size_t count) {
  return sum_host(x, count);
}

void HostBackend::sgd_norms(const float* params, const float* grads, const SgdTerm* terms, size_t n,
                            double* norms) {
  sgd_norms_host(params, grads, terms, n, norms);
}

void HostBackend::sgd_apply(const SgdBuffers& b, size_t total, const SgdTerm* terms, size_t n,
                            const SgdStep& s) {
  if (b.scratch) return sgd_apply_host(b, 0, total, terms, n, s);
  sgd_scratch_.resize(total);
  SgdBuffers with_scratch = b;
  with_scratch.scratch = sgd_scratch_.data();
  sgd_apply_host(with_scratch, 0, total, terms, n, s);
}

std::unique_ptr<DeviceReducer> HostBackend::device_reducer(
    const Comm&, float*, size_t, const std::vector<size_t>&,
    const std::vector<std::pair<size_t, size_t>>&) {
  return nullptr;
}

const float* HostBackend::as_f32(const Act* x, size_t count, std::vector<float>& scratch) const {
  if (dtype() == DType::f32) return static_cast<const float*>(x);
  scratch.resize(count);
  const uint16_t* xb = static_cast<const uint16_t*>(x);
#pragma omp parallel for simd schedule(static) if (count > kParallelMin)
  for (size_t i = 0; i < count; ++i) scratch[i] = from_bf16(xb[i]);
  return scratch.data();
}

float* HostBackend::f32_out(Act* y, size_t count, std::vector<float>& scratch) const {
  if (dtype() == DType::f32) return static_cast<float*>(y);
  scratch.resize(count);
  return scratch.data();
}

void HostBackend::store(const float* computed, Act* y, size_t count) const {
  if (dtype() == DType::f32) return;  // computed in place
  uint16_t* yb = static_cast<uint16_t*>(y);
#pragma omp parallel for simd schedule(static) if (count > kParallelMin)
  for (size_t i = 0; i < count; ++i) yb[i] = to_bf16(computed[i]);
}

const float* HostBackend::rounded_to_bf16(const float* w, size_t count,
                                          std::vector<float>& scratch) {
  scratch.resize(count);
#pragma omp parallel for simd schedule(static) if (count > kParallelMin)
  for (size_t i = 0; i < count; ++i) scratch[i] = from_bf16(to_bf16(w[i]));
  return scratch.data();
}

}  // namespace sieve::nn
