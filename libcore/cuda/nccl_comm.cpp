#include "cuda/nccl_comm.hpp"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "cuda/cuda_check.hpp"
#include "cuda/device.hpp"

namespace sieve::cuda {

int local_rank_from_env(int fallback) {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID",
                           "MV2_COMM_WORLD_LOCAL_RANK", "PMI_LOCAL_RANK"}) {
    const char* v = std::getenv(name);
    if (!v || !*v) continue;
    errno = 0;
    char* end = nullptr;
    const long r = std::strtol(v, &end, 10);
    if (errno != 0 || *end != '\0' || r < 0 || r > INT_MAX)
      throw Error(cat("environment ", name, "='", v, "': expected a local rank >= 0"));
    return int(r);
  }
  return fallback;
}

int device_for_local_rank(int local_rank, int device_count) {
  if (device_count <= 0) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    throw Error(cat("local rank ", local_rank, ": no CUDA device visible (CUDA_VISIBLE_DEVICES=",
                    visible ? visible : "<unset>", ")"));
  }
  SIEVE_ASSERT(local_rank >= 0, "negative local rank ", local_rank);
  return local_rank % device_count;
}

int select_local_device(const Comm& comm) {
  const int device = device_for_local_rank(local_rank_from_env(comm.local_rank()), device_count());
  SIEVE_CUDA_CHECK(cudaSetDevice(device));
  return device;
}

ncclUniqueId exchange_unique_id(bool is_root, const std::function<ncclUniqueId()>& make_id,
                                const std::function<void(void*, size_t)>& broadcast) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (is_root) id = make_id();
  broadcast(&id, sizeof(id));
  return id;
}

NcclComm::NcclComm(const Comm& comm) : rank_(comm.rank()), size_(comm.size()) {
  const ncclUniqueId id = exchange_unique_id(
      comm.is_root(),
      [] {
        ncclUniqueId made;
        SIEVE_NCCL_CHECK(ncclGetUniqueId(&made));
        return made;
      },
      [&comm](void* bytes, size_t size) { comm.bcast(static_cast<char*>(bytes), size, 0); });
  // The reductions get their own stream so they overlap the backward kernels that follow.
  SIEVE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  SIEVE_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
  SIEVE_NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
}

// Errors ignored: a destructor may run during stack unwinding or at exit.
NcclComm::~NcclComm() {
  if (stream_) cudaStreamSynchronize(stream_);
  if (comm_) ncclCommDestroy(comm_);
  if (event_) cudaEventDestroy(event_);
  if (stream_) cudaStreamDestroy(stream_);
}

void NcclComm::wait_for(cudaStream_t producer) {
  SIEVE_CUDA_CHECK(cudaEventRecord(event_, producer));
  SIEVE_CUDA_CHECK(cudaStreamWaitEvent(stream_, event_, 0));
}

void NcclComm::allreduce_sum(float* data, size_t count) {
  if (count == 0) return;
  SIEVE_NCCL_CHECK(ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm_, stream_));
}

void NcclComm::signal(cudaStream_t consumer) {
  SIEVE_CUDA_CHECK(cudaEventRecord(event_, stream_));
  SIEVE_CUDA_CHECK(cudaStreamWaitEvent(consumer, event_, 0));
}

void NcclComm::synchronize() {
  SIEVE_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

}  // namespace sieve::cuda
