// Minimal tensors for the engine: an RAII owner (Tensor) and a non-owning view (TensorView).
//
// Only what the layers need: a shape, a dtype (float32 today), a device tag, and 64-byte
// aligned storage (AVX-512 loads, oneDNN's preferred alignment). Activations inside the
// engine are NHWC ("channels last": what oneDNN's and cuDNN's fast kernels like best without
// blocked formats leaking into the seam); the shape is always stored logically as
// {N, C, H, W} and the layout is a property of the engine, not of each tensor.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

namespace sieve::nn {

enum class DType { f32 };
enum class Device { cpu, cuda };

inline size_t numel(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

// A non-owning view: pointer + logical shape.
struct TensorView {
  float* data = nullptr;
  std::vector<int64_t> shape;
  DType dtype = DType::f32;
  Device device = Device::cpu;
  size_t size() const { return numel(shape); }
};

// Owns aligned host memory. Resizing to a shape with the same or smaller element count
// reuses the allocation, so per-step calls with a steady batch size never allocate.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::vector<int64_t> shape) { resize(std::move(shape)); }

  void resize(std::vector<int64_t> shape) {
    size_t n = numel(shape);
    if (n > capacity_) {
      size_t bytes = ((n * sizeof(float) + 63) / 64) * 64;
      float* p = static_cast<float*>(std::aligned_alloc(64, bytes ? bytes : 64));
      if (!p) throw std::bad_alloc();
      data_.reset(p);
      capacity_ = n;
    }
    shape_ = std::move(shape);
  }
  void zero() {
    if (data_) std::memset(data_.get(), 0, size() * sizeof(float));
  }

  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  const std::vector<int64_t>& shape() const { return shape_; }
  size_t size() const { return numel(shape_); }
  DType dtype() const { return DType::f32; }
  Device device() const { return Device::cpu; }
  TensorView view() { return {data_.get(), shape_, DType::f32, Device::cpu}; }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data_;
  size_t capacity_ = 0;
  std::vector<int64_t> shape_;
};

}  // namespace sieve::nn
