// The CUDA backend's own gradient reduction (nn::DeviceReducer, made by
// CudaBackend::device_reducer): train/reducer.hpp's bucket protocol with NCCL in place of MPI,
// so that the gradients never leave the GPU.
//
// The pieces are comm/pieces.hpp's, as on the host. When ready() completes a piece, its
// in-place allreduce is queued at once: the NCCL stream first waits for everything queued on
// the backend's stream (the piece's gradient kernels are there), and the reduction then
// overlaps the rest of backward. NCCL needs every rank to issue the same reductions in the same
// order: backward and its hook are deterministic, so the pieces ready() completes, and their
// order, are the same on every rank; finish() then issues the remaining pieces in ascending
// order and makes the backend's stream wait for all of them. Nothing blocks the host. Each piece
// is reduced exactly once per step (`started_`).
//
// With one rank there is nothing to sum: no NCCL communicator is made, and arm/ready/finish
// only keep the books (messages() stays 0).
#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "comm/pieces.hpp"
#include "cuda/backend_cuda.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/nccl_comm.hpp"

namespace sieve::cuda {
namespace {

class NcclReducer final : public nn::DeviceReducer {
 public:
  // Collective over `comm` (the NCCL communicator): every rank constructs it.
  NcclReducer(CudaBackend& be, const Comm& comm, float* grads, const std::vector<size_t>& cuts,
              const std::vector<std::pair<size_t, size_t>>& covered)
      : be_(be), grads_(grads), pieces_(cuts, covered), started_(pieces_.size(), 0) {
    if (comm.size() > 1) {
      SIEVE_CUDA_CHECK(cudaSetDevice(be.device_index()));
      nccl_ = std::make_unique<NcclComm>(comm);
    }
  }

  void arm() override {
    pieces_.reset();
    std::fill(started_.begin(), started_.end(), 0);
    armed_ = true;
  }

  void ready(size_t offset, size_t count) override {
    if (!armed_) return;
    pieces_.report(offset, count, [&](size_t p) {
      if (start(p)) ++started_early_;
    });
  }

  // Without a preceding arm(), as arm() then finish(): every piece is reduced.
  void finish() override {
    if (!armed_) arm();
    for (size_t p = 0; p < pieces_.size(); ++p)
      if (!started_[p]) start(p);
    if (nccl_) nccl_->signal(be_.stream());
    armed_ = false;
  }

  size_t num_buckets() const override { return pieces_.size(); }
  int64_t messages() const override { return messages_; }
  int64_t started_early() const override { return started_early_; }

 private:
  // Marks piece p started and queues its allreduce; false where nothing is sent (one rank, an
  // empty piece).
  bool start(size_t p) {
    started_[p] = 1;
    const size_t begin = pieces_.begin(p), end = pieces_.end(p);
    if (!nccl_ || end == begin) return false;
    nccl_->wait_for(be_.stream());
    nccl_->allreduce_sum(grads_ + begin, end - begin);
    ++messages_;
    return true;
  }

  CudaBackend& be_;
  float* grads_;
  PieceTracker pieces_;
  std::vector<char> started_;
  std::unique_ptr<NcclComm> nccl_;  // null with one rank
  bool armed_ = false;
  int64_t messages_ = 0, started_early_ = 0;
};

}  // namespace

std::unique_ptr<nn::DeviceReducer> CudaBackend::device_reducer(
    const Comm& comm, float* grads, size_t total, const std::vector<size_t>& cuts,
    const std::vector<std::pair<size_t, size_t>>& covered) {
  SIEVE_ASSERT(cuts.size() >= 2 && cuts.front() == 0 && cuts.back() == total &&
                   std::is_sorted(cuts.begin(), cuts.end()),
               "device_reducer: cuts must ascend from 0 to ", total);
  return std::make_unique<NcclReducer>(*this, comm, grads, cuts, covered);
}

}  // namespace sieve::cuda
