#include "comm/fake.hpp"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "comm/comm.hpp"
#include "util/error.hpp"

namespace sieve {
namespace fake {

// One mutex guards everything; ranks meet at a generation barrier. A collective is: post this
// rank's buffer in its slot, barrier, read the others' slots, barrier (nobody reuses a buffer
// before every rank has read it).
struct World::State {
  int n = 1;
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  uint64_t generation = 0;
  bool failed = false;
  std::vector<const void*> ptr;
  std::vector<size_t> bytes;
  std::vector<const std::vector<size_t>*> parts;
  std::shared_ptr<World> dup;
  std::vector<std::weak_ptr<World>> dups;  // failed with this world
  std::map<std::tuple<int, int, int>, std::deque<std::vector<char>>> mail;  // (from, to, tag)
};

namespace {

[[noreturn]] void another_rank_failed() {
  throw Error("fake communicator: another rank failed, so this collective cannot complete");
}

}  // namespace

World::World(int size) : s_(std::make_unique<State>()) {
  SIEVE_ASSERT(size >= 1, "fake world of ", size, " ranks");
  s_->n = size;
  s_->ptr.assign(size_t(size), nullptr);
  s_->bytes.assign(size_t(size), 0);
  s_->parts.assign(size_t(size), nullptr);
}

World::~World() = default;

int World::size() const {
  return s_->n;
}

void World::barrier() {
  std::unique_lock<std::mutex> lock(s_->mu);
  if (s_->failed) another_rank_failed();
  const uint64_t gen = s_->generation;
  if (++s_->arrived == s_->n) {
    s_->arrived = 0;
    ++s_->generation;
    s_->cv.notify_all();
    return;
  }
  s_->cv.wait(lock, [&] { return s_->generation != gen || s_->failed; });
  if (s_->generation == gen) another_rank_failed();
}

void World::fail() {
  std::vector<std::weak_ptr<World>> dups;
  {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->failed = true;
    s_->cv.notify_all();
    dups = s_->dups;
  }
  for (auto& d : dups)
    if (auto w = d.lock()) w->fail();
}

void World::allreduce(int rank, void* data, size_t n, size_t elem, Combine combine) {
  s_->ptr[size_t(rank)] = data;
  barrier();
  // Every rank combines in rank order, so all get the same bits (as MPI promises).
  std::vector<char> acc(static_cast<const char*>(s_->ptr[0]),
                        static_cast<const char*>(s_->ptr[0]) + n * elem);
  for (int r = 1; r < s_->n; ++r) combine(acc.data(), s_->ptr[size_t(r)], n);
  barrier();
  std::memcpy(data, acc.data(), n * elem);
}

void World::bcast(int rank, void* data, size_t bytes, int root) {
  SIEVE_ASSERT(root >= 0 && root < s_->n, "bcast from rank ", root, " of ", s_->n);
  if (rank == root) s_->ptr[size_t(root)] = data;
  barrier();
  if (rank != root) std::memcpy(data, s_->ptr[size_t(root)], bytes);
  barrier();
}

std::vector<char> World::allgatherv(int rank, const void* mine, size_t bytes) {
  s_->ptr[size_t(rank)] = mine;
  s_->bytes[size_t(rank)] = bytes;
  barrier();
  std::vector<char> out;
  for (int r = 0; r < s_->n; ++r) {
    const char* p = static_cast<const char*>(s_->ptr[size_t(r)]);
    out.insert(out.end(), p, p + s_->bytes[size_t(r)]);
  }
  barrier();
  return out;
}

std::vector<char> World::alltoallv(int rank, const char* send,
                                   const std::vector<size_t>& send_bytes,
                                   std::vector<size_t>* recv_bytes) {
  SIEVE_ASSERT(send_bytes.size() == size_t(s_->n), "alltoallv: ", send_bytes.size(), " counts for ",
               s_->n, " ranks");
  s_->ptr[size_t(rank)] = send;
  s_->parts[size_t(rank)] = &send_bytes;
  barrier();
  std::vector<char> out;
  recv_bytes->assign(size_t(s_->n), 0);
  for (int r = 0; r < s_->n; ++r) {
    const std::vector<size_t>& theirs = *s_->parts[size_t(r)];
    size_t at = 0;
    for (int q = 0; q < rank; ++q) at += theirs[size_t(q)];
    const char* p = static_cast<const char*>(s_->ptr[size_t(r)]) + at;
    out.insert(out.end(), p, p + theirs[size_t(rank)]);
    (*recv_bytes)[size_t(r)] = theirs[size_t(rank)];
  }
  barrier();
  return out;
}

void World::send(int rank, const void* data, size_t bytes, int dest, int tag) {
  SIEVE_ASSERT(dest >= 0 && dest < s_->n, "send to rank ", dest, " of ", s_->n);
  const char* p = static_cast<const char*>(data);
  std::lock_guard<std::mutex> lock(s_->mu);
  s_->mail[{rank, dest, tag}].emplace_back(p, p + bytes);
  s_->cv.notify_all();
}

bool World::recv(int rank, void* data, size_t bytes, int source, int tag, bool block) {
  SIEVE_ASSERT(source >= 0 && source < s_->n, "recv from rank ", source, " of ", s_->n);
  std::unique_lock<std::mutex> lock(s_->mu);
  auto& box = s_->mail[{source, rank, tag}];
  if (!block && box.empty()) return false;
  s_->cv.wait(lock, [&] { return !box.empty() || s_->failed; });
  if (box.empty()) another_rank_failed();
  SIEVE_ASSERT(box.front().size() <= bytes, "recv: a message of ", box.front().size(),
               " bytes for a buffer of ", bytes, " (from rank ", source, ", tag ", tag, ")");
  std::memcpy(data, box.front().data(), box.front().size());
  box.pop_front();
  return true;
}

std::shared_ptr<World> World::dup(int rank) {
  if (rank == 0) {
    s_->dup = std::make_shared<World>(s_->n);
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->dups.push_back(s_->dup);
  }
  barrier();
  std::shared_ptr<World> mine = s_->dup;
  barrier();
  return mine;
}

}  // namespace fake

std::vector<Comm> fake_comms(int ranks) {
  auto world = std::make_shared<fake::World>(ranks);
  std::vector<Comm> out;
  for (int r = 0; r < ranks; ++r) out.push_back(Comm(world, r));
  return out;
}

void run_fake_ranks(int ranks, const std::function<void(const Comm&)>& fn) {
  std::vector<Comm> comms = fake_comms(ranks);
  std::vector<std::exception_ptr> failed(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(comms[size_t(r)]);
      } catch (...) {
        failed[size_t(r)] = std::current_exception();
        comms[size_t(r)].fake_world()->fail();  // release the ranks waiting for this one
      }
    });
  for (auto& t : threads) t.join();
  // The lowest rank whose failure was its own (not "another rank failed") is the cause.
  std::exception_ptr first;
  for (int r = 0; r < ranks && !first; ++r) {
    if (!failed[size_t(r)]) continue;
    try {
      std::rethrow_exception(failed[size_t(r)]);
    } catch (const Error& e) {
      if (std::string(e.what()).find("another rank failed") == std::string::npos)
        first = failed[size_t(r)];
    } catch (...) {
      first = failed[size_t(r)];
    }
  }
  for (int r = 0; r < ranks && !first; ++r) first = failed[size_t(r)];
  if (first) std::rethrow_exception(first);
}

}  // namespace sieve
