#include "comm/comm.hpp"

#include <unistd.h>
#include <algorithm>
#include <climits>
#include <cstdlib>

namespace sieve {

namespace {
// A handle for a communicator this process creates (dup, split), freed with its last copy
// unless MPI has already been finalized.
std::shared_ptr<MPI_Comm> new_owned_comm() {
  return std::shared_ptr<MPI_Comm>(new MPI_Comm(MPI_COMM_NULL), [](MPI_Comm* c) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && *c != MPI_COMM_NULL) MPI_Comm_free(c);  // a destructor cannot throw
    delete c;
  });
}
}  // namespace

Comm Comm::world() {
  return Comm(MPI_COMM_WORLD);
}
Comm Comm::self() {
  return Comm(MPI_COMM_SELF);
}

Comm::Comm(std::shared_ptr<fake::World> world, int rank)
    : comm_(MPI_COMM_NULL),
      rank_(rank),
      size_(world->size()),
      local_rank_(rank),
      local_size_(world->size()),  // one node
      fake_(std::move(world)) {}

Comm Comm::dup() const {
  if (fake_) return Comm(fake_->dup(rank_), rank_);
  std::shared_ptr<MPI_Comm> owned = new_owned_comm();
  SIEVE_MPI_CHECK(MPI_Comm_dup(comm_, owned.get()));
  Comm d = *this;  // same ranks and node placement: no second split needed
  d.comm_ = *owned;
  d.owned_ = std::move(owned);
  return d;
}

Comm Comm::split(int color) const {
  if (fake_) throw Error("fake communicator: split is not supported");
  std::shared_ptr<MPI_Comm> owned = new_owned_comm();
  SIEVE_MPI_CHECK(MPI_Comm_split(comm_, color, rank_, owned.get()));
  Comm part(*owned);  // its own ranks and node placement
  part.owned_ = std::move(owned);
  return part;
}

Comm::Comm(MPI_Comm comm) : comm_(comm) {
  SIEVE_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  SIEVE_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  MPI_Comm node;
  SIEVE_MPI_CHECK(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node));
  SIEVE_MPI_CHECK(MPI_Comm_rank(node, &local_rank_));
  SIEVE_MPI_CHECK(MPI_Comm_size(node, &local_size_));
  SIEVE_MPI_CHECK(MPI_Comm_free(&node));
}

int Comm::int_count(size_t n) {
  if (n > size_t(INT_MAX)) throw Error(cat("MPI message of ", n, " elements exceeds INT_MAX"));
  return int(n);
}

void Comm::barrier() const {
  if (size_ > 1 && fake_) return fake_->barrier();
  if (size_ > 1) SIEVE_MPI_CHECK(MPI_Barrier(comm_));
}

void Comm::bcast_string(std::string& s, int root) const {
  if (size_ == 1) return;
  int64_t n = int64_t(s.size());
  bcast(&n, 1, root);
  s.resize(size_t(n));
  bcast(s.data(), s.size(), root);
}

std::string describe_placement(const Comm& comm) {
  if (comm.size() == 1) return "";
  const int nodes = comm.allreduce_sum(comm.local_rank() == 0 ? 1 : 0);
  if (nodes == 1) return "";
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '?';
  const std::string mine = cat(host, " (node rank ", comm.local_rank(), ")");
  const std::vector<int> lens = comm.allgather<int>(int(mine.size()));
  const std::vector<char> all = comm.allgatherv(std::vector<char>(mine.begin(), mine.end()));
  constexpr int kListed = 16;
  std::string out = cat(comm.size(), " ranks on ", nodes, " nodes:");
  size_t at = 0;
  for (int r = 0; r < comm.size() && r < kListed; ++r) {
    out += cat(r ? ", " : " ", "rank ", r, " on ", std::string(all.data() + at, size_t(lens[r])));
    at += size_t(lens[r]);
  }
  if (comm.size() > kListed) out += ", ...";
  return out;
}

void agree_on_error(const Comm& comm, const std::string& error, int code) {
  int mine = error.empty() ? INT_MAX : comm.rank();
  int first = comm.allreduce_min(mine);
  if (first == INT_MAX) return;
  std::string msg = error;
  comm.bcast_string(msg, first);
  comm.bcast(&code, 1, first);
  if (code == 2) throw UsageError(msg);  // the tool runner prints these on rank 0 only
  throw CollectiveError(msg, code);      // every rank throws it; the runner prints it once
}

int64_t Comm::exscan_sum(int64_t v) const {
  if (size_ == 1) return 0;
  if (fake_) {
    const std::vector<int64_t> all = allgather(v);
    int64_t below = 0;
    for (int r = 0; r < rank_; ++r) below += all[size_t(r)];
    return below;
  }
  int64_t out = 0;
  SIEVE_MPI_CHECK(MPI_Exscan(&v, &out, 1, MPI_INT64_T, MPI_SUM, comm_));
  return rank_ == 0 ? 0 : out;
}

void Comm::abort(int exit_code) const {
  // A fake rank is a thread of a test: it ends its rank, not the process.
  if (fake_) throw Error(cat("abort(", exit_code, ") on rank ", rank_, " of a fake communicator"));
  if (size_ > 1) MPI_Abort(comm_, exit_code);
  std::_Exit(exit_code);
}

Range block_range(int64_t n, int rank, int size) {
  int64_t base = n / size, extra = n % size;
  int64_t begin = rank * base + std::min<int64_t>(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

std::vector<std::vector<int>> deal_largest_first(const std::vector<int64_t>& sizes, int ranks) {
  std::vector<int> order(sizes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return sizes[size_t(a)] > sizes[size_t(b)]; });
  std::vector<int64_t> load(size_t(std::max(ranks, 1)), 0);
  std::vector<std::vector<int>> dealt(load.size());
  for (int i : order) {
    const size_t r = size_t(std::min_element(load.begin(), load.end()) - load.begin());
    load[r] += sizes[size_t(i)];
    dealt[r].push_back(i);
  }
  return dealt;
}

MpiSession::MpiSession(int* argc, char*** argv, bool serialized_threads) {
  int provided = 0;
  int wanted = serialized_threads ? MPI_THREAD_SERIALIZED : MPI_THREAD_FUNNELED;
  SIEVE_MPI_CHECK(MPI_Init_thread(argc, argv, wanted, &provided));
  SIEVE_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();  // a destructor cannot throw
}

void finalize_mpi() {
  int finalized = 0;
  SIEVE_MPI_CHECK(MPI_Finalized(&finalized));
  if (!finalized) SIEVE_MPI_CHECK(MPI_Finalize());
}

}  // namespace sieve
