// A pending non-blocking MPI operation (Comm::isend, irecv, iallreduce_*, ireduce_sum, ibcast).
//
// Move-only, one per operation. The buffers it names must outlive it. A request destroyed
// while still pending is waited for (its buffers may be freed right after), except while an
// exception unwinds the stack: then it is left pending, because its peer may never take part
// (the failed rank is about to end the job) and waiting would hang the rank instead.
#pragma once
#include <mpi.h>

#include <functional>
#include <vector>

namespace sieve {

class Request {
 public:
  Request() = default;
  Request(Request&& o) noexcept : req_(o.req_), pending_(std::move(o.pending_)) {
    o.req_ = MPI_REQUEST_NULL;
    o.pending_ = nullptr;
  }
  Request& operator=(Request&& o) noexcept;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request();

  // Started and not yet seen complete.
  bool active() const { return req_ != MPI_REQUEST_NULL || pending_ != nullptr; }
  // Blocks until complete (no-op when not active).
  void wait();
  // Whether it has completed (true when not active); never blocks, and drives progress.
  bool test();
  // Forgets the operation without waiting: only for a rank about to end the job (its peers
  // may never take part, so waiting, here or in the destructor, could hang it).
  void abandon() noexcept {
    req_ = MPI_REQUEST_NULL;
    pending_ = nullptr;
  }

 private:
  friend class Comm;
  friend class InFlight;
  friend void wait_all(std::vector<Request>& reqs);
  void wait_quietly() noexcept;  // for the destructor and move assignment
  MPI_Request req_ = MPI_REQUEST_NULL;
  // A fake communicator's operation (comm/fake.hpp): completes it, blocking or not; true when
  // done.
  std::function<bool(bool block)> pending_;
};

// Blocks until every request of `reqs` is complete.
void wait_all(std::vector<Request>& reqs);

}  // namespace sieve
