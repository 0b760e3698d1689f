// Non-blocking reductions in flight, each with a label and its start time, so that the
// timeline (util/trace.hpp) shows every one from its start to the moment this rank saw it
// complete (lane kComm). The gradient strategies (train/reducer, fusion_queue,
// param_server) start their reductions through Comm and hand the Requests here.
#pragma once
#include <mpi.h>

#include <string>
#include <vector>

#include "comm/request.hpp"

namespace sieve {

// poll() never blocks (it tests every request: that also drives progress while backward
// runs); wait_all() blocks and returns the seconds spent blocked. The destructor waits for
// whatever is still in flight (the buffers are the caller's).
class InFlight {
 public:
  InFlight() = default;
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  ~InFlight();
  void add(Request req, std::string label, double bytes);
  void poll();
  double wait_all();
  bool empty() const { return reqs_.empty(); }

 private:
  void retire(const std::vector<int>& done, int n);
  std::vector<MPI_Request> reqs_;
  std::vector<std::string> labels_;
  std::vector<double> t0_us_, bytes_;
  size_t live_ = 0;
};

}  // namespace sieve
