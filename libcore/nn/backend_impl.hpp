// Internal to libcore/nn: factories of the host backends (called only by backend_registry.cpp)
// and helpers shared by backend implementations.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "nn/backend.hpp"

namespace sieve::nn {

// Factories of the host backends for one activation dtype, and whether this machine supports it
// (native: in hardware, not emulated; `why` says why not). Called only by the registry.
std::unique_ptr<Backend> make_ref_backend(DType dtype);
bool ref_backend_supports(DType dtype, bool native, std::string* why);
std::unique_ptr<Backend> make_cpu_backend(DType dtype);
bool cpu_backend_supports(DType dtype, bool native, std::string* why);
// Whether bf16 outruns fp32 on this CPU (cpu_bf16_speed.cpp), asked only where it is native:
// with AMX always; otherwise measured once per process (one convolution's three passes in
// each dtype, single-threaded, ~50 ms). `why`: the measured speeds, where not.
struct Bf16Speed {
  bool amx = false;                 // decided without measuring
  double fp32_ms = 0, bf16_ms = 0;  // best of 7, one convolution's 3 passes, 1 thread's CPU time
  std::string failed;               // oneDNN could not make a bf16 convolution here
  bool faster() const;
};
const Bf16Speed& cpu_bf16_speed();
bool cpu_bf16_faster(std::string* why);
// backend_time_training_step for the cpu backend (cpu_bf16_speed.cpp).
bool cpu_time_training_step(const ModelSpec& spec, int batch, StepTimes* out);

// 64-byte aligned host memory (free with std::free); throws bad_alloc.
void* host_allocate(size_t bytes);

// What the host backends ("cpu", "ref") share: host memory, the model's edges, axpy, and the
// bf16 <-> fp32 staging of ops that compute in fp32 on bf16 activations.
class HostBackend : public Backend {
 public:
  explicit HostBackend(DType dtype) : dtype_(dtype) {}
  DType dtype() const override { return dtype_; }
  Device device() const override { return Device::cpu; }
  void* allocate(size_t bytes) override;
  void release(void* p) override;
  void to_device(void* dst, const void* host_src, size_t bytes) override;
  void to_host(void* host_dst, const void* src, size_t bytes) override;
  void fill_zero(void* p, size_t bytes) override;
  void load_input(const float* host_nchw, Act* y, int n, int c, int h, int w) override;
  void act_to_host(const Act* x, float* host, size_t count) override;
  void act_from_host(const float* host, Act* y, size_t count) override;
  void axpy(float a, const float* x, float* y, size_t count) override;
  // The optimizer step on host memory: nn/sgd.hpp's host loops, so that a backend-driven
  // step on the CPU is bitwise the host step (the CPU as a fake device, train/param_home.hpp).
  double sum(const float* x, size_t count) override;
  void sgd_norms(const float* params, const float* grads, const SgdTerm* terms, size_t n,
                 double* norms) override;
  void sgd_apply(const SgdBuffers& b, size_t total, const SgdTerm* terms, size_t n,
                 const SgdStep& s) override;
  // Null: the host's Comm reduces host memory in place.
  std::unique_ptr<DeviceReducer> device_reducer(
      const Comm& comm, float* grads, size_t total, const std::vector<size_t>& cuts,
      const std::vector<std::pair<size_t, size_t>>& covered) override;

  // x as fp32: x itself for an fp32 backend, else decoded into scratch.
  const float* as_f32(const Act* x, size_t count, std::vector<float>& scratch) const;
  // Where to compute an fp32 result destined for y: y itself (fp32), else scratch; then
  // store() rounds it into y (a no-op for fp32).
  float* f32_out(Act* y, size_t count, std::vector<float>& scratch) const;
  void store(const float* computed, Act* y, size_t count) const;
  // fp32 master weights rounded to bf16 values (still fp32), into scratch: what a bf16 kernel
  // multiplies, for the host backends that compute a bf16 op with fp32 arithmetic.
  static const float* rounded_to_bf16(const float* w, size_t count, std::vector<float>& scratch);

 private:
  DType dtype_;
  std::vector<float> sgd_scratch_;  // sgd_apply's g where the caller passes none
};

// PyTorch's running-stat update from batch mean and biased variance over m samples:
// r = (1 - momentum) * r + momentum * stat, with the variance made unbiased (m / (m - 1)).
inline void update_running_stats(int m, int c, float momentum, const float* mean, const float* var,
                                 float* run_mean, float* run_var) {
  const double unbias = m > 1 ? double(m) / (m - 1) : 1.0;
  for (int i = 0; i < c; ++i) {
    run_mean[i] = float((1.0 - momentum) * run_mean[i] + momentum * double(mean[i]));
    run_var[i] = float((1.0 - momentum) * run_var[i] + momentum * double(var[i]) * unbias);
  }
}

}  // namespace sieve::nn
