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
// is reduced exactly once per step (comm/pieces.hpp's PieceSchedule, tested on the CPU).
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
#include "cuda/device.hpp"
#include "cuda/nccl_comm.hpp"

namespace sieve::cuda {
namespace {

class NcclReducer final : public nn::DeviceReducer {
 public:
  // Collective over `comm` (the NCCL communicator): every rank constructs it.
  NcclReducer(CudaBackend& be, const Comm& comm, float* grads, const std::vector<size_t>& cuts,
              const std::vector<std::pair<size_t, size_t>>& covered)
      : be_(be),
        grads_(grads),
        schedule_(cuts, covered, [this](size_t begin, size_t end) { return reduce(begin, end); }) {
    if (comm.size() > 1) {
      check_one_gpu_per_rank(be, comm);
      SIEVE_CUDA_CHECK(cudaSetDevice(be.device_index()));
      nccl_ = std::make_unique<NcclComm>(comm);
    }
  }

  void arm() override { schedule_.arm(); }
  void ready(size_t offset, size_t count) override { schedule_.ready(offset, count); }
  // The backend's stream then waits for every reduction (the host does not).
  void finish() override {
    schedule_.finish();
    if (nccl_) nccl_->signal(be_.stream());
  }
  size_t num_buckets() const override { return schedule_.size(); }
  int64_t messages() const override { return schedule_.messages(); }
  int64_t started_early() const override { return schedule_.started_early(); }
  double bytes() const override { return schedule_.elements() * sizeof(float); }

 private:
  // Queues the allreduce of [begin, end) after everything queued so far on the backend's
  // stream (the piece's gradient kernels are there).
  bool reduce(size_t begin, size_t end) {
    if (!nccl_ || end == begin) return false;
    nccl_->wait_for(be_.stream());
    nccl_->allreduce_sum(grads_ + begin, end - begin);
    return true;
  }

  // The backend picked its GPU from the launcher's node-local rank when it was made (before
  // any communicator existed); NCCL refuses two ranks on one GPU with an error that names
  // neither. Here the communicator knows each rank's place on its node: say what is wrong.
  static void check_one_gpu_per_rank(const CudaBackend& be, const Comm& comm) {
    const int expected = device_for_local_rank(comm.local_rank(), device_count());
    if (expected != be.device_index())
      throw Error(
          cat("rank ", comm.rank(), " (node rank ", comm.local_rank(), ") runs on GPU ",
              be.device_index(), ", not GPU ", expected,
              ": the launcher set no node-local rank this backend knows (",
              "OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, MPI_LOCALRANKID, "
              "MV2_COMM_WORLD_LOCAL_RANK, PMI_LOCAL_RANK), so ranks of a node would "
              "share a GPU; give each rank one GPU (CUDA_VISIBLE_DEVICES) or use mpirun/srun"));
  }

  CudaBackend& be_;
  float* grads_;
  PieceSchedule schedule_;
  std::unique_ptr<NcclComm> nccl_;  // null with one rank
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
