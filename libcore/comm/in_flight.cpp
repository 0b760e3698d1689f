#include "comm/in_flight.hpp"

#include <chrono>

#include "comm/comm.hpp"
#include "util/trace.hpp"

namespace sieve {

InFlight::~InFlight() {
  for (auto& r : reqs_)
    if (r != MPI_REQUEST_NULL) MPI_Wait(&r, MPI_STATUS_IGNORE);  // a destructor cannot throw
}

void InFlight::add(Request req, std::string label, double bytes) {
  const bool fake = req.pending_ != nullptr;
  if (fake) req.wait();  // a fake communicator's completes here (comm/fake.hpp)
  reqs_.push_back(req.req_);
  req.req_ = MPI_REQUEST_NULL;  // owned here from now on
  labels_.push_back(std::move(label));
  t0_us_.push_back(trace::now_us());
  bytes_.push_back(bytes);
  ++live_;
  if (fake) retire({int(reqs_.size()) - 1}, 1);  // done: not live, traced as the others
}

void InFlight::retire(const std::vector<int>& done, int n) {
  const double t = trace::now_us();
  for (int i = 0; i < n; ++i) {
    const size_t k = size_t(done[size_t(i)]);
    trace::complete(labels_[k], "comm", t0_us_[k], t, trace::kComm,
                    cat("\"bytes\":", int64_t(bytes_[k])));
  }
  live_ -= size_t(n);
}

void InFlight::poll() {
  if (live_ == 0) return;
  std::vector<int> done(reqs_.size());
  int n = 0;
  SIEVE_MPI_CHECK(
      MPI_Testsome(int(reqs_.size()), reqs_.data(), &n, done.data(), MPI_STATUSES_IGNORE));
  if (n != MPI_UNDEFINED && n > 0) retire(done, n);
}

double InFlight::wait_all() {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<int> done(reqs_.size());
  while (live_ > 0) {
    int n = 0;
    SIEVE_MPI_CHECK(
        MPI_Waitsome(int(reqs_.size()), reqs_.data(), &n, done.data(), MPI_STATUSES_IGNORE));
    if (n == MPI_UNDEFINED) break;
    retire(done, n);
  }
  reqs_.clear();
  labels_.clear();
  t0_us_.clear();
  bytes_.clear();
  live_ = 0;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace sieve
