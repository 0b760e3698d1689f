// The writer's producer threads (data/writer.cpp): one job at a time on every thread, while
// the caller's thread, the only one that calls MPI and HDF5, writes the previous batch.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sieve::data {

// Waits block on condition variables: no spinning threads competing with the writer for cores
// (OpenMP's spin-waits cost ~1/3 of the CPU on a busy machine).
class ProducerPool {
 public:
  explicit ProducerPool(int threads);
  ~ProducerPool();
  ProducerPool(const ProducerPool&) = delete;
  ProducerPool& operator=(const ProducerPool&) = delete;
  int size() const { return int(threads_.size()); }
  // Run job(thread index) on every thread.
  void submit(std::function<void(int)> job);
  // Wait for the submitted job on every thread; rethrows the first exception.
  void wait();

 private:
  void loop(int t);
  std::mutex m_;
  std::condition_variable cv_, done_cv_;
  std::function<void(int)> job_;
  std::exception_ptr error_;
  uint64_t generation_ = 0;
  int running_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace sieve::data
