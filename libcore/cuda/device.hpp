// CUDA device basics for the GPU backend: device discovery and RAII device memory.
//
// Everything here compiles and links on machines without a GPU (CI); callers ask
// cuda_device_count() first and fall back to the CPU backend (tests skip) when it is 0.
#pragma once
#include <cstddef>
#include <string>

namespace sieve::cuda {

// Number of usable CUDA devices; 0 when no driver or no device is present (never throws).
int device_count();
// "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)" for device `index`.
std::string device_name(int index);

// Owning device allocation of `count` elements of T (cudaMalloc/cudaFree).
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t count);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), count_(o.count_) {
    o.ptr_ = nullptr;
    o.count_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return ptr_; }
  size_t size() const { return count_; }
  void upload(const T* host, size_t count);
  void download(T* host, size_t count) const;

 private:
  T* ptr_ = nullptr;
  size_t count_ = 0;
};

}  // namespace sieve::cuda
