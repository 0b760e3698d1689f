// The device-resident parameter home on a GPU (train/param_home.hpp): a CIFAR ResNet trained
// on the cuda backend with the step in device memory (backend SGD/LARS kernels, the device
// sum, the backend's reducer) ends where the host-staged home (SgdOptimizer on host master
// copies) ends, to float rounding: the two differ only in where the update's arithmetic runs
// (FMA contraction, the order of the norms' sums). With SIEVE_CUDNN_DETERMINISTIC=1 the forward
// and backward passes are bitwise the same in both runs, so a larger gap is the home's fault.
// On one rank the backend's reducer has nothing to sum; scripts/gpu_check.sh also runs this
// binary on 2 ranks where 2 GPUs are visible (one per rank): then NCCL reduces the buckets.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "gpu/cuda_test_env.hpp"
#include "mpi/train_mpi_util.hpp"
#include "support/test_util.hpp"
#include "train/trainer.hpp"

using namespace sieve;
using namespace sieve::train;

namespace {

// Set before main, so before the first backend("cuda").
const bool deterministic_cudnn = setenv("SIEVE_CUDNN_DETERMINISTIC", "1", 1) == 0;

std::vector<float> trained(const Comm& comm, const std::string& home, bool lars, bool decoupled) {
  const test::ImageData d = test::image_data(48);
  TrainOptions o = test::short_run_options("resnet18", 0);
  o.spec.backend = "cuda";
  o.param_home = home;
  o.opt.lars = lars;
  o.opt.decoupled = decoupled;
  std::vector<int64_t> all;
  for (int64_t i = 0; i < d.train.n; ++i) all.push_back(i);
  const std::string dir = test::scratch_dir(cat("cuda_param_home_", comm.rank()));
  Trainer t(comm, o,
            std::make_unique<MemorySource>(d.train, all, o.global_batch, o.seed, comm.rank(),
                                           comm.size()),
            d.train, EvalSplit{}, d.meta, dir, "", "test: {}\n");
  t.run(false);
  return t.model().params_to_host();
}

}  // namespace

TEST(CudaParamHome, DeviceHomeEndsWhereTheStagedHomeEnds) {
  ASSERT_TRUE(deterministic_cudnn);
  Comm world = Comm::world();
  for (bool lars : {false, true}) {
    for (bool decoupled : {false, true}) {
      const auto staged = trained(world, "staged", lars, decoupled);
      const auto device = trained(world, "device", lars, decoupled);
      ASSERT_EQ(staged.size(), device.size());
      double worst = 0, moved = 0;
      for (size_t i = 0; i < staged.size(); ++i) {
        ASSERT_TRUE(std::isfinite(device[i])) << i;
        worst = std::max(
            worst, std::abs(double(device[i]) - staged[i]) / (1e-3 + std::abs(double(staged[i]))));
        moved += std::abs(double(staged[i]));
      }
      EXPECT_GT(moved, 0.0);
      EXPECT_LT(worst, 1e-3) << "lars " << lars << " decoupled " << decoupled;
      std::printf(
          "device vs staged (lars %d, decoupled %d, %d ranks): worst relative "
          "difference %.3g\n",
          int(lars), int(decoupled), world.size(), worst);
    }
  }
}
