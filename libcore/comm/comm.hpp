// The communicator: passed explicitly to everything that talks to other ranks.
//
// Wraps an MPI communicator with rank/size/local rank and the handful of collectives
// Sieve uses. A program started without mpirun is a one-rank job (MPI singleton), so
// single-process code needs no #ifdefs: every collective is a cheap no-op at size 1.
// Every MPI call goes through SIEVE_MPI_CHECK, which names the file and line on failure.
// Nothing outside libcore/comm names MPI (tests/fault/no_raw_mpi.sh checks it): what a
// caller needs is here (collectives, point-to-point, non-blocking operations returning a
// Request), in in_flight.hpp, trace_gather.hpp and h5_mpio.hpp. A Comm may also be a rank of
// an in-process fake world (fake.hpp), for unit tests of multi-rank logic without mpirun:
// each operation then branches to it before touching MPI.
#pragma once
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "comm/fake.hpp"
#include "comm/request.hpp"
#include "util/error.hpp"

#define SIEVE_MPI_CHECK(call)                                                              \
  do {                                                                                     \
    int sieve_mpi_rc_ = (call);                                                            \
    if (sieve_mpi_rc_ != MPI_SUCCESS) {                                                    \
      char sieve_mpi_msg_[MPI_MAX_ERROR_STRING];                                           \
      int sieve_mpi_len_ = 0;                                                              \
      MPI_Error_string(sieve_mpi_rc_, sieve_mpi_msg_, &sieve_mpi_len_);                    \
      throw ::sieve::Error(::sieve::cat(__FILE__, ":", __LINE__, ": ", #call, " failed: ", \
                                        std::string(sieve_mpi_msg_, sieve_mpi_len_)));     \
    }                                                                                      \
  } while (0)

namespace sieve {

template <typename T>
MPI_Datatype mpi_type();
// clang-format off
template <> inline MPI_Datatype mpi_type<float>() { return MPI_FLOAT; }
template <> inline MPI_Datatype mpi_type<double>() { return MPI_DOUBLE; }
template <> inline MPI_Datatype mpi_type<int32_t>() { return MPI_INT32_T; }
template <> inline MPI_Datatype mpi_type<int64_t>() { return MPI_INT64_T; }
template <> inline MPI_Datatype mpi_type<uint8_t>() { return MPI_UINT8_T; }
template <> inline MPI_Datatype mpi_type<uint64_t>() { return MPI_UINT64_T; }
template <> inline MPI_Datatype mpi_type<char>() { return MPI_CHAR; }
// clang-format on

namespace fake {
// The reductions of the fake world (fake.hpp): acc[i] = f(acc[i], in[i]) on n elements of T.
template <typename T, typename F>
void combine_each(void* acc, const void* in, size_t n, F f) {
  T* a = static_cast<T*>(acc);
  const T* b = static_cast<const T*>(in);
  for (size_t i = 0; i < n; ++i) a[i] = f(a[i], b[i]);
}
// The operation is picked once here, not per element (MPI_Op values are not constant
// expressions in Open MPI, so they cannot be template arguments).
template <typename T>
Combine combiner(MPI_Op op) {
  if (op == MPI_SUM)
    return [](void* a, const void* b, size_t n) {
      combine_each<T>(a, b, n, [](T x, T y) { return T(x + y); });
    };
  if (op == MPI_MAX)
    return [](void* a, const void* b, size_t n) {
      combine_each<T>(a, b, n, [](T x, T y) { return y > x ? y : x; });
    };
  if (op == MPI_MIN)
    return [](void* a, const void* b, size_t n) {
      combine_each<T>(a, b, n, [](T x, T y) { return y < x ? y : x; });
    };
  if constexpr (std::is_integral_v<T>)
    if (op == MPI_BAND)
      return [](void* a, const void* b, size_t n) {
        combine_each<T>(a, b, n, [](T x, T y) { return T(x & y); });
      };
  throw Error("fake communicator: unsupported reduction");
}
}  // namespace fake

class Comm {
 public:
  // The world communicator (MPI must be initialised; see MpiSession).
  static Comm world();
  // This process alone (a one-rank communicator: work a rank does by itself).
  static Comm self();
  explicit Comm(MPI_Comm comm);
  // Rank `rank` of an in-process fake world (fake.hpp: fake_comms, run_fake_ranks).
  Comm(std::shared_ptr<fake::World> world, int rank);
  // A private duplicate (collective): its messages never match those on this communicator.
  // Freed when its last copy goes.
  Comm dup() const;
  // The ranks of this communicator that pass the same `color`, as their own communicator
  // (collective), ranked in this one's order: groups that work apart (train_scaled
  // --ranks-per-run). Freed when its last copy goes. Not for the fake world.
  Comm split(int color) const;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  bool is_root() const { return rank_ == 0; }
  // The MPI handle, for libcore/comm only (h5_mpio.cpp): everything else goes through Comm.
  MPI_Comm raw() const { return comm_; }
  // The fake world behind this communicator (null for MPI's).
  const std::shared_ptr<fake::World>& fake_world() const { return fake_; }

  void barrier() const;
  // In-place sum over all ranks.
  template <typename T>
  void allreduce_sum(T* data, size_t n) const {
    if (size_ == 1 || n == 0) return;
    if (fake_) return fake_->allreduce(rank_, data, n, sizeof(T), fake::combiner<T>(MPI_SUM));
    SIEVE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, int_count(n), mpi_type<T>(), MPI_SUM, comm_));
  }
  template <typename T>
  T allreduce_sum(T v) const {
    allreduce_sum(&v, 1);
    return v;
  }
  // In-place element-wise max / min over all ranks.
  template <typename T>
  void allreduce_max(T* data, size_t n) const {
    if (size_ == 1 || n == 0) return;
    if (fake_) return fake_->allreduce(rank_, data, n, sizeof(T), fake::combiner<T>(MPI_MAX));
    SIEVE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, int_count(n), mpi_type<T>(), MPI_MAX, comm_));
  }
  template <typename T>
  void allreduce_min(T* data, size_t n) const {
    if (size_ == 1 || n == 0) return;
    if (fake_) return fake_->allreduce(rank_, data, n, sizeof(T), fake::combiner<T>(MPI_MIN));
    SIEVE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, int_count(n), mpi_type<T>(), MPI_MIN, comm_));
  }
  template <typename T>
  T allreduce_max(T v) const {
    allreduce_max(&v, 1);
    return v;
  }
  template <typename T>
  T allreduce_min(T v) const {
    allreduce_min(&v, 1);
    return v;
  }
  template <typename T>
  void bcast(T* data, size_t n, int root = 0) const {
    if (size_ == 1 || n == 0) return;
    if (fake_) return fake_->bcast(rank_, data, n * sizeof(T), root);
    SIEVE_MPI_CHECK(MPI_Bcast(data, int_count(n), mpi_type<T>(), root, comm_));
  }
  void bcast_string(std::string& s, int root = 0) const;
  // Exclusive prefix sum of `v` over ranks (rank 0 gets 0).
  int64_t exscan_sum(int64_t v) const;
  // Gather one value from every rank onto every rank.
  template <typename T>
  std::vector<T> allgather(T v) const {
    std::vector<T> out(size_);
    if (size_ == 1) {
      out[0] = v;
      return out;
    }
    if (fake_) {
      const std::vector<char> all = fake_->allgatherv(rank_, &v, sizeof(T));
      std::memcpy(out.data(), all.data(), all.size());
      return out;
    }
    SIEVE_MPI_CHECK(MPI_Allgather(&v, 1, mpi_type<T>(), out.data(), 1, mpi_type<T>(), comm_));
    return out;
  }
  // Variable-size allgather: every rank contributes `mine`, all get the concatenation in rank
  // order.
  template <typename T>
  std::vector<T> allgatherv(const std::vector<T>& mine) const {
    if (size_ == 1) return mine;
    if (fake_) {
      const std::vector<char> all = fake_->allgatherv(rank_, mine.data(), mine.size() * sizeof(T));
      std::vector<T> out(all.size() / sizeof(T));
      std::memcpy(out.data(), all.data(), all.size());
      return out;
    }
    std::vector<int> counts = allgather<int>(int_count(mine.size()));
    std::vector<int> displs(size_, 0);
    for (int r = 1; r < size_; ++r) displs[r] = displs[r - 1] + counts[r - 1];
    std::vector<T> out(size_t(displs.back()) + counts.back());
    SIEVE_MPI_CHECK(MPI_Allgatherv(mine.data(), int_count(mine.size()), mpi_type<T>(), out.data(),
                                   counts.data(), displs.data(), mpi_type<T>(), comm_));
    return out;
  }
  // Variable-size allgather in place: rank r's counts[r] elements already sit at
  // data + displs[r]; afterwards every rank holds every rank's block.
  template <typename T>
  void allgatherv_in_place(T* data, const std::vector<int>& counts,
                           const std::vector<int>& displs) const {
    if (size_ == 1) return;
    if (fake_) {
      const std::vector<char> all = fake_->allgatherv(rank_, data + displs[size_t(rank_)],
                                                      size_t(counts[size_t(rank_)]) * sizeof(T));
      size_t at = 0;
      for (int r = 0; r < size_; ++r) {
        const size_t bytes = size_t(counts[size_t(r)]) * sizeof(T);
        if (r != rank_) std::memcpy(data + displs[size_t(r)], all.data() + at, bytes);
        at += bytes;
      }
      return;
    }
    SIEVE_MPI_CHECK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, counts.data(),
                                   displs.data(), mpi_type<T>(), comm_));
  }
  // Personalised exchange: `send` holds, in rank order, send_counts[r] elements for rank r;
  // returns what every rank sent to this one, concatenated in rank order, and (when given)
  // how many elements came from each rank in `recv_counts_out`.
  template <typename T>
  std::vector<T> alltoallv(const std::vector<T>& send, const std::vector<int>& send_counts,
                           std::vector<int>* recv_counts_out = nullptr) const {
    if (size_ == 1) {
      if (recv_counts_out) *recv_counts_out = send_counts;
      return send;
    }
    if (fake_) {
      std::vector<size_t> send_bytes, recv_bytes;
      for (int c : send_counts) send_bytes.push_back(size_t(c) * sizeof(T));
      const std::vector<char> all = fake_->alltoallv(
          rank_, reinterpret_cast<const char*>(send.data()), send_bytes, &recv_bytes);
      std::vector<T> out(all.size() / sizeof(T));
      std::memcpy(out.data(), all.data(), all.size());
      if (recv_counts_out) {
        recv_counts_out->clear();
        for (size_t b : recv_bytes) recv_counts_out->push_back(int(b / sizeof(T)));
      }
      return out;
    }
    std::vector<int> recv_counts(size_t(size_), 0);
    SIEVE_MPI_CHECK(
        MPI_Alltoall(send_counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT, comm_));
    std::vector<int> sd(size_t(size_), 0), rd(size_t(size_), 0);
    for (int r = 1; r < size_; ++r) {
      sd[r] = sd[r - 1] + send_counts[r - 1];
      rd[r] = rd[r - 1] + recv_counts[r - 1];
    }
    std::vector<T> out(size_t(rd.back()) + size_t(recv_counts.back()));
    SIEVE_MPI_CHECK(MPI_Alltoallv(send.data(), send_counts.data(), sd.data(), mpi_type<T>(),
                                  out.data(), recv_counts.data(), rd.data(), mpi_type<T>(), comm_));
    if (recv_counts_out) *recv_counts_out = std::move(recv_counts);
    return out;
  }

  // Point-to-point, blocking: n elements to / from one rank, matched by `tag`.
  template <typename T>
  void send(const T* data, size_t n, int dest, int tag) const {
    if (fake_) return fake_->send(rank_, data, n * sizeof(T), dest, tag);
    SIEVE_MPI_CHECK(MPI_Send(data, int_count(n), mpi_type<T>(), dest, tag, comm_));
  }
  template <typename T>
  void recv(T* data, size_t n, int source, int tag) const {
    if (fake_) {
      fake_->recv(rank_, data, n * sizeof(T), source, tag, true);
      return;
    }
    SIEVE_MPI_CHECK(
        MPI_Recv(data, int_count(n), mpi_type<T>(), source, tag, comm_, MPI_STATUS_IGNORE));
  }

  // Non-blocking: each returns the Request to wait for or test; the buffers must stay put
  // until it completes. Unlike the blocking collectives these call MPI at any size, so a
  // one-rank job runs the same code path.
  template <typename T>
  Request isend(const T* data, size_t n, int dest, int tag) const {
    Request r;
    if (fake_) {
      send(data, n, dest, tag);  // buffered: complete at once
      return fake_done();
    }
    SIEVE_MPI_CHECK(MPI_Isend(data, int_count(n), mpi_type<T>(), dest, tag, comm_, &r.req_));
    return r;
  }
  template <typename T>
  Request irecv(T* data, size_t n, int source, int tag) const {
    Request r;
    if (fake_) {
      r.pending_ = [world = fake_, rank = rank_, data, bytes = n * sizeof(T), source,
                    tag](bool block) { return world->recv(rank, data, bytes, source, tag, block); };
      return r;
    }
    SIEVE_MPI_CHECK(MPI_Irecv(data, int_count(n), mpi_type<T>(), source, tag, comm_, &r.req_));
    return r;
  }
  // In-place sum over all ranks.
  template <typename T>
  Request iallreduce_sum(T* data, size_t n) const {
    return iallreduce(MPI_IN_PLACE, data, n, MPI_SUM);
  }
  // Element-wise max / bitwise and of `send` over all ranks into `recv` (both n elements).
  template <typename T>
  Request iallreduce_max(const T* send, T* recv, size_t n) const {
    return iallreduce(send, recv, n, MPI_MAX);
  }
  template <typename T>
  Request iallreduce_band(const T* send, T* recv, size_t n) const {
    return iallreduce(send, recv, n, MPI_BAND);
  }
  // Sum of every rank's `data` into `root`'s `data` (in place there; the other ranks' data
  // is only read).
  template <typename T>
  Request ireduce_sum(T* data, size_t n, int root) const {
    Request r;
    if (fake_) {  // complete at once: the sum on every rank, kept by the root
      std::vector<T> sum(data, data + n);
      allreduce_sum(sum.data(), n);
      if (rank_ == root) std::copy(sum.begin(), sum.end(), data);
      return fake_done();
    }
    const bool at_root = rank_ == root;
    SIEVE_MPI_CHECK(MPI_Ireduce(at_root ? MPI_IN_PLACE : data, at_root ? data : nullptr,
                                int_count(n), mpi_type<T>(), MPI_SUM, root, comm_, &r.req_));
    return r;
  }
  template <typename T>
  Request ibcast(T* data, size_t n, int root) const {
    Request r;
    if (fake_) {
      bcast(data, n, root);
      return fake_done();
    }
    SIEVE_MPI_CHECK(MPI_Ibcast(data, int_count(n), mpi_type<T>(), root, comm_, &r.req_));
    return r;
  }
  // Ends every rank of the job at once (a failed rank must never leave the others hanging).
  [[noreturn]] void abort(int exit_code) const;

 private:
  static int int_count(size_t n);
  // A fake communicator's operation that completed when started: still active (as an MPI
  // request is) until a wait() or test() sees it done.
  static Request fake_done() {
    Request r;
    r.pending_ = [](bool) { return true; };
    return r;
  }
  template <typename T>
  Request iallreduce(const void* send, T* recv, size_t n, MPI_Op op) const {
    Request r;
    if (fake_) {  // complete at once
      if (send != MPI_IN_PLACE) std::memcpy(recv, send, n * sizeof(T));
      if (size_ > 1 && n > 0) fake_->allreduce(rank_, recv, n, sizeof(T), fake::combiner<T>(op));
      return fake_done();
    }
    SIEVE_MPI_CHECK(MPI_Iallreduce(send, recv, int_count(n), mpi_type<T>(), op, comm_, &r.req_));
    return r;
  }
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::shared_ptr<MPI_Comm> owned_;    // set on a dup(): frees the communicator
  std::shared_ptr<fake::World> fake_;  // set for a fake world's rank (MPI is not used)
};

// Contiguous block split of n items over p ranks: rank r owns [begin, end).
struct Range {
  int64_t begin, end;
  int64_t size() const { return end - begin; }
};
Range block_range(int64_t n, int rank, int size);

// Whole items spread over ranks: the largest item first to the least-loaded rank (ties: the
// earlier item, the lower rank). Returns, per rank, its items in the order dealt. A pure
// function of its arguments, so every rank computes the same plan without communicating.
std::vector<std::vector<int>> deal_largest_first(const std::vector<int64_t>& sizes, int ranks);

// RAII MPI_Init/MPI_Finalize (thread level FUNNELED: only the main thread calls MPI;
// SERIALIZED when the caller asks, for the background gradient-reduction thread).
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv, bool serialized_threads = false);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
};

// MPI_Finalize now (collective), for a process about to std::exit: MpiSession's destructor
// does not run then. A no-op when MPI is already finalized.
void finalize_mpi();

// Collective error agreement. Every rank passes its own error ("" = fine); when any rank
// failed, every rank throws the message of the lowest failing rank: a CollectiveError (the
// tool runner prints it once and all ranks exit cleanly), or a UsageError for `code` 2.
void agree_on_error(const Comm& comm, const std::string& error, int code = 1);

// Where the ranks run, when they span several nodes (collective; "" on one node):
// "2 ranks on 2 nodes: rank 0 on n1 (node rank 0), rank 1 on n2 (node rank 0)", the first 16
// ranks listed. The tools log it, so a multi-node job's log shows its placement.
std::string describe_placement(const Comm& comm);

// Run `fn` on rank 0 only (a write only rank 0 does) and agree on its outcome: an Error on
// rank 0 is raised on every rank, instead of leaving the others waiting in the next
// collective until the job is aborted.
template <typename Fn>
void on_root_agreed(const Comm& comm, Fn&& fn) {
  std::string err;
  int code = 1;
  if (comm.is_root()) {
    try {
      fn();
    } catch (const Error& e) {
      err = e.what();
      code = e.exit_code();
    }
  }
  comm.bcast(&code, 1);
  agree_on_error(comm, err, code);
}

// Run one collective step on every rank and agree on its outcome: a rank whose step failed
// (an Error, or out of memory) must not leave the others inside the next collective. Every
// rank then throws the lowest failed rank's message, prefixed by `context` when given.
template <typename Fn>
void agreed_step(const Comm& comm, Fn&& step, const std::string& context = "") {
  std::string err;
  try {
    step();
  } catch (const Error& e) {
    err = e.what();
  } catch (const std::bad_alloc&) {
    err = "out of memory";
  }
  if (!err.empty() && !context.empty()) err = context + err;
  agree_on_error(comm, err);
}

}  // namespace sieve
