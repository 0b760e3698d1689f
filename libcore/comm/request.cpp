#include "comm/request.hpp"

#include <exception>

#include "comm/comm.hpp"

namespace sieve {

Request& Request::operator=(Request&& o) noexcept {
  if (this != &o) {
    if (active()) MPI_Wait(&req_, MPI_STATUS_IGNORE);  // never drop a pending operation
    req_ = o.req_;
    o.req_ = MPI_REQUEST_NULL;
  }
  return *this;
}

Request::~Request() {
  // A destructor cannot throw: a failure here is left to the next checked call.
  if (active() && std::uncaught_exceptions() == 0) MPI_Wait(&req_, MPI_STATUS_IGNORE);
}

void Request::wait() {
  if (active()) SIEVE_MPI_CHECK(MPI_Wait(&req_, MPI_STATUS_IGNORE));
}

bool Request::test() {
  if (!active()) return true;
  int done = 0;
  SIEVE_MPI_CHECK(MPI_Test(&req_, &done, MPI_STATUS_IGNORE));
  return done != 0;
}

void wait_all(std::vector<Request>& reqs) {
  if (reqs.empty()) return;
  std::vector<MPI_Request> raw;
  raw.reserve(reqs.size());
  for (Request& r : reqs) raw.push_back(r.req_);
  SIEVE_MPI_CHECK(MPI_Waitall(int(raw.size()), raw.data(), MPI_STATUSES_IGNORE));
  for (Request& r : reqs) r.req_ = MPI_REQUEST_NULL;
}

}  // namespace sieve
