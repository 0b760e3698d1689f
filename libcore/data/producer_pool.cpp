#include "data/producer_pool.hpp"

namespace sieve::data {

ProducerPool::ProducerPool(int threads) {
  for (int t = 0; t < threads; ++t) threads_.emplace_back([this, t] { loop(t); });
}

ProducerPool::~ProducerPool() {
  {
    std::lock_guard<std::mutex> lk(m_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ProducerPool::submit(std::function<void(int)> job) {
  std::lock_guard<std::mutex> lk(m_);
  job_ = std::move(job);
  ++generation_;
  running_ = int(threads_.size());
  error_ = nullptr;
  cv_.notify_all();
}

void ProducerPool::wait() {
  std::unique_lock<std::mutex> lk(m_);
  done_cv_.wait(lk, [this] { return running_ == 0; });
  if (error_) {
    auto e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

void ProducerPool::loop(int t) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lk(m_);
  while (true) {
    cv_.wait(lk, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    auto job = job_;
    lk.unlock();
    std::exception_ptr err;
    try {
      job(t);
    } catch (...) {
      err = std::current_exception();
    }
    lk.lock();
    if (err && !error_) error_ = err;
    if (--running_ == 0) done_cv_.notify_all();
  }
}

}  // namespace sieve::data
