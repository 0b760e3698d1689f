#include "comm/request.hpp"

#include <exception>

#include "comm/comm.hpp"

namespace sieve {

Request& Request::operator=(Request&& o) noexcept {
  if (this != &o) {
    if (active()) wait_quietly();  // never drop a pending operation
    req_ = o.req_;
    pending_ = std::move(o.pending_);
    o.req_ = MPI_REQUEST_NULL;
    o.pending_ = nullptr;
  }
  return *this;
}

Request::~Request() {
  // A destructor cannot throw: a failure here is left to the next checked call.
  if (active() && std::uncaught_exceptions() == 0) wait_quietly();
}

void Request::wait_quietly() noexcept {
  if (pending_) {
    try {
      pending_(true);
    } catch (...) {  // a fake world whose other rank failed: nothing left to wait for
    }
    pending_ = nullptr;
  }
  if (req_ != MPI_REQUEST_NULL) MPI_Wait(&req_, MPI_STATUS_IGNORE);
}

void Request::wait() {
  if (pending_) {
    auto complete = std::move(pending_);
    pending_ = nullptr;
    complete(true);
  }
  if (req_ != MPI_REQUEST_NULL) SIEVE_MPI_CHECK(MPI_Wait(&req_, MPI_STATUS_IGNORE));
}

bool Request::test() {
  if (!active()) return true;
  if (pending_) {
    if (!pending_(false)) return false;
    pending_ = nullptr;
    return true;
  }
  int done = 0;
  SIEVE_MPI_CHECK(MPI_Test(&req_, &done, MPI_STATUS_IGNORE));
  return done != 0;
}

void wait_all(std::vector<Request>& reqs) {
  if (reqs.empty()) return;
  for (Request& r : reqs)
    if (r.pending_) r.wait();  // a fake communicator's
  std::vector<MPI_Request> raw;
  raw.reserve(reqs.size());
  for (Request& r : reqs) raw.push_back(r.req_);
  SIEVE_MPI_CHECK(MPI_Waitall(int(raw.size()), raw.data(), MPI_STATUSES_IGNORE));
  for (Request& r : reqs) r.req_ = MPI_REQUEST_NULL;
}

}  // namespace sieve
