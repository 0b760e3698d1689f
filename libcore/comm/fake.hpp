// An in-process stand-in for MPI, for unit tests of multi-rank logic without mpirun: N ranks
// are N threads of one process, each with its own Comm over one shared FakeWorld. Every Comm
// operation works on it with MPI's meaning (collectives in the same order on every rank,
// point-to-point matched by source and tag, in order); what differs:
//  - non-blocking collectives complete when they are started (their Request is done at once);
//    an irecv completes on wait() or a successful test(), isend copies at once (buffered);
//  - raw() has no MPI communicator behind it (parallel HDF5 needs real MPI);
//  - abort() throws an Error on the calling rank instead of ending the process.
// Tests run ranks through run_fake_ranks, which rethrows the first rank's failure.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

namespace sieve {

class Comm;

namespace fake {

// Element-wise combine of n elements: acc[i] = op(acc[i], in[i]).
using Combine = void (*)(void* acc, const void* in, size_t n);

// The shared state of one fake communicator; Comm talks to it through these calls, each
// collective over every rank of the world (rank = the caller's).
class World {
 public:
  explicit World(int size);
  ~World();
  int size() const;
  void barrier();
  // In place over every rank's `data` (n elements of `elem` bytes).
  void allreduce(int rank, void* data, size_t n, size_t elem, Combine combine);
  void bcast(int rank, void* data, size_t bytes, int root);
  // Every rank's `bytes` bytes at `mine`, concatenated in rank order.
  std::vector<char> allgatherv(int rank, const void* mine, size_t bytes);
  // send: in rank order, send_bytes[r] bytes for rank r; returns what came to `rank`, in rank
  // order, and recv_bytes[r] per rank.
  std::vector<char> alltoallv(int rank, const char* send, const std::vector<size_t>& send_bytes,
                              std::vector<size_t>* recv_bytes);
  void send(int rank, const void* data, size_t bytes, int dest, int tag);
  // Waits (block) or checks (no block) for a message from source with tag; true when copied.
  bool recv(int rank, void* data, size_t bytes, int source, int tag, bool block);
  // A new world of the same size for dup(), the same object on every rank (collective).
  std::shared_ptr<World> dup(int rank);
  // A rank failed: every rank waiting in this world, or entering it later, gets an Error
  // instead of waiting for it forever.
  void fail();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace fake

// Comms of one fake world of `ranks` ranks: element r is rank r's.
std::vector<Comm> fake_comms(int ranks);
// Runs fn(comm) on `ranks` threads, one per rank of a fresh fake world, and waits for all;
// rethrows the exception of the lowest rank that threw (the others may then be stuck in a
// collective the failed rank left: they are released with an Error of their own).
void run_fake_ranks(int ranks, const std::function<void(const Comm&)>& fn);

}  // namespace sieve
