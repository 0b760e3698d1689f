// Host-side pieces of the CUDA build that need no GPU: they run (never skip) on every machine
// with a CUDA build, GPU or not. The registry's answer without a device, the NCCL unique-id
// exchange over a fake communicator, and which GPU a local rank takes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "cuda/device.hpp"
#include "cuda/nccl_comm.hpp"
#include "nn/backend.hpp"
#include "util/error.hpp"

using namespace sieve;

namespace {

// Sets (or unsets, with nullopt) an environment variable for one scope, then restores it:
// under mpirun the launcher's own OMPI_COMM_WORLD_LOCAL_RANK must survive the test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      setenv(name, value->c_str(), 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

// Without a GPU the backend's name is known but unusable, and the error says why; with one
// (the GPU machine) the same call gives the backend. scripts/gpu_check.sh also runs this
// binary with CUDA_VISIBLE_DEVICES= to check the first branch on a GPU machine.
TEST(CudaHost, BackendWithoutDeviceIsAUsageErrorNamingIt) {
  std::string why;
  if (cuda::device_count() == 0) {
    EXPECT_FALSE(nn::backend_supports("cuda", nn::DType::f32, false, &why));
    EXPECT_NE(why.find("no CUDA device"), std::string::npos) << why;
    EXPECT_NE(why.find("CUDA_VISIBLE_DEVICES"), std::string::npos) << why;
    try {
      nn::backend("cuda");
      FAIL() << "backend(\"cuda\") without a device did not throw";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("'cuda'"), std::string::npos) << e.what();
    }
    // precision auto falls back to fp32 with a note instead of failing.
    std::string note;
    EXPECT_EQ(nn::resolve_precision("auto", "cuda", "pretrain.precision", &note), nn::DType::f32);
    EXPECT_NE(note.find("no CUDA device"), std::string::npos) << note;
  } else {
    EXPECT_TRUE(nn::backend_supports("cuda", nn::DType::f32, false, &why)) << why;
    nn::Backend& be = nn::backend("cuda");
    EXPECT_EQ(be.name(), "cuda");
    EXPECT_EQ(be.device(), nn::Device::cuda);
    EXPECT_EQ(be.dtype(), nn::DType::f32);
  }
}

// Three ranks in one process: the fake broadcast is a wire the root writes and the others
// read, called in rank order as MPI_Bcast would complete.
TEST(CudaHost, UniqueIdExchangeGivesEveryRankTheRootsId) {
  std::vector<char> wire;
  int made = 0;
  auto make_id = [&made] {
    ncclUniqueId id;
    for (size_t i = 0; i < sizeof(id.internal); ++i) id.internal[i] = char(i * 7 + 3);
    ++made;
    return id;
  };
  std::vector<ncclUniqueId> got;
  for (int rank = 0; rank < 3; ++rank) {
    auto broadcast = [&, rank](void* bytes, size_t size) {
      if (rank == 0)
        wire.assign(static_cast<char*>(bytes), static_cast<char*>(bytes) + size);
      else
        std::memcpy(bytes, wire.data(), size);
      ASSERT_EQ(size, sizeof(ncclUniqueId));
    };
    got.push_back(cuda::exchange_unique_id(rank == 0, make_id, broadcast));
  }
  EXPECT_EQ(made, 1) << "only the root creates the id";
  for (int rank = 1; rank < 3; ++rank)
    EXPECT_EQ(std::memcmp(&got[rank], &got[0], sizeof(ncclUniqueId)), 0) << "rank " << rank;
  EXPECT_EQ(got[0].internal[5], char(5 * 7 + 3));
}

TEST(CudaHost, LocalRankFromLauncherEnvironment) {
  {
    ScopedEnv ompi("OMPI_COMM_WORLD_LOCAL_RANK", "3"), slurm("SLURM_LOCALID", "1");
    EXPECT_EQ(cuda::local_rank_from_env(0), 3) << "Open MPI's variable comes first";
  }
  {
    ScopedEnv ompi("OMPI_COMM_WORLD_LOCAL_RANK", std::nullopt), slurm("SLURM_LOCALID", "2");
    EXPECT_EQ(cuda::local_rank_from_env(0), 2);
  }
  {
    ScopedEnv ompi("OMPI_COMM_WORLD_LOCAL_RANK", std::nullopt),
        slurm("SLURM_LOCALID", std::nullopt);
    EXPECT_EQ(cuda::local_rank_from_env(5), 5) << "MPI_Comm_split_type's local rank otherwise";
  }
  {
    ScopedEnv ompi("OMPI_COMM_WORLD_LOCAL_RANK", "two");
    try {
      cuda::local_rank_from_env(0);
      FAIL() << "a malformed local rank was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("OMPI_COMM_WORLD_LOCAL_RANK='two'"), std::string::npos)
          << e.what();
    }
  }
}

TEST(CudaHost, DeviceForLocalRankIsRoundRobin) {
  EXPECT_EQ(cuda::device_for_local_rank(0, 8), 0);
  EXPECT_EQ(cuda::device_for_local_rank(7, 8), 7);
  EXPECT_EQ(cuda::device_for_local_rank(5, 4), 1);  // oversubscribed node shares GPUs
  try {
    cuda::device_for_local_rank(0, 0);
    FAIL() << "no device did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
  }
}
