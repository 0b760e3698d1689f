#include <cstdint>

#include "cuda/cuda_check.hpp"
#include "cuda/device.hpp"

namespace sieve::cuda {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

std::string device_name(int index) {
  cudaDeviceProp prop{};
  SIEVE_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  return cat(prop.name, " (sm_", prop.major, prop.minor, ", ",
             double(prop.totalGlobalMem) / (1024.0 * 1024 * 1024), " GiB)");
}

template <typename T>
DeviceBuffer<T>::DeviceBuffer(size_t count) : count_(count) {
  if (count) SIEVE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ptr_), count * sizeof(T)));
}

template <typename T>
DeviceBuffer<T>::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

template <typename T>
DeviceBuffer<T>& DeviceBuffer<T>::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_;
    count_ = o.count_;
    o.ptr_ = nullptr;
    o.count_ = 0;
  }
  return *this;
}

template <typename T>
void DeviceBuffer<T>::upload(const T* host, size_t count) {
  SIEVE_ASSERT(count <= count_, "upload of ", count, " elements into a buffer of ", count_);
  SIEVE_CUDA_CHECK(cudaMemcpy(ptr_, host, count * sizeof(T), cudaMemcpyHostToDevice));
}

template <typename T>
void DeviceBuffer<T>::download(T* host, size_t count) const {
  SIEVE_ASSERT(count <= count_, "download of ", count, " elements from a buffer of ", count_);
  SIEVE_CUDA_CHECK(cudaMemcpy(host, ptr_, count * sizeof(T), cudaMemcpyDeviceToHost));
}

template class DeviceBuffer<float>;
template class DeviceBuffer<int32_t>;
template class DeviceBuffer<uint8_t>;

}  // namespace sieve::cuda
