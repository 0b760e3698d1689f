// Element types, devices and the minimal tensors of the engine.
//
// The op seam (backend.hpp) is typed by an activation dtype and a device: a backend instance
// computes with one activation dtype (fp32, or bf16 for mixed precision) on one device (the
// host, or a CUDA GPU). Parameters, their gradients, optimizer state and BN statistics are
// always fp32 ("master weights"), whatever the activation dtype: checkpoints stay fp32 and
// resumable across precisions.
//
// Tensor owns memory from a Memory (the host, or a backend's device). Activations inside the
// engine are NHWC ("channels last": what oneDNN's and cuDNN's fast kernels like best without
// blocked formats leaking into the seam); shapes are stored logically as {N, C, H, W} and the
// layout is a property of the engine, not of each tensor.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace sieve::nn {

enum class DType { f32, bf16 };
enum class Device { cpu, cuda };

inline size_t dtype_size(DType t) {
  return t == DType::bf16 ? 2 : 4;
}
inline const char* dtype_name(DType t) {
  return t == DType::bf16 ? "bf16" : "fp32";
}
inline const char* device_name(Device d) {
  return d == Device::cuda ? "cuda" : "cpu";
}

// bf16 <-> fp32 on the host: round to nearest even (NaN stays NaN), as oneDNN, cuDNN and
// PyTorch convert.
inline uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
inline float from_bf16(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline size_t numel(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

// Where memory comes from: the host (aligned_alloc) or a backend's device.
class Memory {
 public:
  virtual ~Memory() = default;
  virtual Device device() const = 0;
  virtual void* allocate(size_t bytes) = 0;  // 64-byte aligned (256 on CUDA); throws bad_alloc
  virtual void release(void* p) = 0;
  // Copies between this memory and the host (plain memcpy on the host).
  virtual void to_device(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void fill_zero(void* p, size_t bytes) = 0;
};
Memory& host_memory();

// Owns memory of `dtype` elements from a Memory. Resizing to the same or a smaller byte size
// reuses the allocation, so per-step calls with a steady batch size never allocate.
class Tensor {
 public:
  Tensor() : Tensor(host_memory(), DType::f32) {}
  Tensor(Memory& mem, DType dtype) : mem_(&mem), dtype_(dtype) {}
  explicit Tensor(std::vector<int64_t> shape) : Tensor() { resize(std::move(shape)); }
  ~Tensor() { reset(); }
  Tensor(Tensor&& o) noexcept { *this = std::move(o); }
  Tensor& operator=(Tensor&& o) noexcept {
    if (this != &o) {
      reset();
      mem_ = o.mem_, dtype_ = o.dtype_, data_ = o.data_, capacity_ = o.capacity_;
      shape_ = std::move(o.shape_);
      o.data_ = nullptr, o.capacity_ = 0;
    }
    return *this;
  }
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  void resize(std::vector<int64_t> shape) {
    size_t bytes = numel(shape) * dtype_size(dtype_);
    if (bytes > capacity_) {
      reset();
      data_ = mem_->allocate(bytes ? bytes : 1);
      capacity_ = bytes;
    }
    shape_ = std::move(shape);
  }
  void zero() {
    if (data_) mem_->fill_zero(data_, bytes());
  }

  void* raw() { return data_; }
  const void* raw() const { return data_; }
  // fp32 access (asserted by the caller's dtype: only fp32 tensors use these).
  float* data() { return static_cast<float*>(data_); }
  const float* data() const { return static_cast<const float*>(data_); }
  const std::vector<int64_t>& shape() const { return shape_; }
  size_t size() const { return numel(shape_); }
  size_t bytes() const { return size() * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return mem_->device(); }

 private:
  void reset() {
    if (data_) mem_->release(data_);
    data_ = nullptr, capacity_ = 0;
  }
  Memory* mem_ = nullptr;
  DType dtype_ = DType::f32;
  void* data_ = nullptr;
  size_t capacity_ = 0;
  std::vector<int64_t> shape_;
};

}  // namespace sieve::nn
