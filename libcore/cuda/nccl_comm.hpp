// NCCL for data-parallel training on GPUs: one device per rank, a communicator built from the
// MPI communicator, and an in-place SUM allreduce of fp32 device ranges on its own stream.
//
// How it fits the trainer: GradReducer (train/reducer.hpp) cuts the flat gradient buffer into
// buckets of ~4 MiB and reduces each as soon as backward has reported all of it. An NCCL
// reducer keeps that bucket plan and replaces MPI_Iallreduce(grads + begin, end - begin) by
// allreduce_sum(grads + begin, end - begin) here, after wait_for(backend stream) so the
// reduction starts only once backward has written the bucket; the optimizer then runs after
// signal(backend stream). Everything stays asynchronous to the host.
//
// The pieces that need no GPU (which device a local rank takes, the unique-id exchange) are
// free functions so that tests run them on any machine (tests/gpu/test_cuda_host.cpp).
#pragma once
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <functional>

#include "comm/comm.hpp"

namespace sieve::cuda {

// This process's rank on its node: OMPI_COMM_WORLD_LOCAL_RANK (mpirun of Open MPI), else
// SLURM_LOCALID (srun), MPI_LOCALRANKID (MPICH's hydra), MV2_COMM_WORLD_LOCAL_RANK
// (MVAPICH), PMI_LOCAL_RANK (PMI launchers), else `fallback` (Comm::local_rank(), from
// MPI_Comm_split_type SHARED, right under any launcher). Malformed values are an Error naming
// the variable.
int local_rank_from_env(int fallback);

// The GPU of a local rank among `device_count` visible ones: round-robin, so 8 ranks on a node
// of 8 GPUs get one each and an oversubscribed node shares them. Error if there is none.
int device_for_local_rank(int local_rank, int device_count);

// Picks this rank's GPU (the two functions above) and makes it current; returns its index.
// Call it before the first CUDA use of the process (before backend("cuda")).
int select_local_device(const Comm& comm);

// The communicator's unique id: created on the root by `make_id` (ncclGetUniqueId) and sent
// to every rank by `broadcast(bytes, size)`, which must behave as MPI_Bcast from the root
// (same call on every rank). Returns the root's id on every rank.
ncclUniqueId exchange_unique_id(bool is_root, const std::function<ncclUniqueId()>& make_id,
                                const std::function<void(void* bytes, size_t size)>& broadcast);

class NcclComm {
 public:
  // Collective over `comm`: every rank constructs it, each with its device current.
  explicit NcclComm(const Comm& comm);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  cudaStream_t stream() const { return stream_; }

  // The NCCL stream waits for everything queued so far on `producer`.
  void wait_for(cudaStream_t producer);
  // data[0, count) = sum over ranks, in place, fp32 device memory; asynchronous on stream().
  // Every rank must issue the same sequence of calls (sizes and order).
  void allreduce_sum(float* data, size_t count);
  // `consumer` waits for every reduction queued so far (without blocking the host).
  void signal(cudaStream_t consumer);
  // The host waits for every reduction queued so far.
  void synchronize();

 private:
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t event_ = nullptr;
  int rank_ = 0, size_ = 1;
};

}  // namespace sieve::cuda
