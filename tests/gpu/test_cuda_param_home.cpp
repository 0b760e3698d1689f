// The device-resident parameter home on a GPU (train/param_home.hpp): a CIFAR ResNet trained
// on the cuda backend with the step in device memory (backend SGD/LARS kernels, the device
// sum, the backend's reducer) ends where the host-staged home (SgdOptimizer on host master
// copies) ends: the two differ only in where the update's arithmetic runs. With
// SIEVE_CUDNN_DETERMINISTIC=1 the forward and backward passes are bitwise the same in both
// runs, so any gap is the home's.
// On one rank the backend's reducer has nothing to sum; scripts/gpu_check.sh also runs this
// binary on 2 ranks where 2 GPUs are visible (one per rank): then NCCL reduces the buckets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "gpu/cuda_test_env.hpp"
#include "io/h5.hpp"
#include "mpi/train_mpi_util.hpp"
#include "support/test_util.hpp"
#include "train/checkpoint.hpp"
#include "train/trainer.hpp"

using namespace sieve;
using namespace sieve::train;

namespace {

// Set before main, so before the first backend("cuda").
const bool deterministic_cudnn = setenv("SIEVE_CUDNN_DETERMINISTIC", "1", 1) == 0;

struct Trained {
  std::vector<float> params;
  std::map<std::string, std::vector<float>> momentum;  // of the last checkpoint
};

// 2 epochs of a width-1/8 ResNet on 48 images, batch 12 in micro-batches of 4 (so the
// reducer is armed only in the last of 3 backward passes), a weight decay large enough that a
// missing or doubled decay term shows, and a checkpoint per epoch (the momentum the device
// home hands to the host).
Trained trained(const Comm& comm, const std::string& home, bool lars, bool decoupled) {
  const test::ImageData d = test::image_data(48);
  TrainOptions o = test::short_run_options("resnet18", 4);
  o.spec.backend = "cuda";
  o.param_home = home;
  o.opt.lars = lars;
  o.opt.decoupled = decoupled;
  o.opt.weight_decay = 5e-3;
  o.ckpt_every_epochs = 1;
  std::vector<int64_t> all;
  for (int64_t i = 0; i < d.train.n; ++i) all.push_back(i);
  const std::string dir = test::scratch_dir(cat("cuda_param_home_", home, "_", lars, decoupled));
  Trainer t(comm, o,
            std::make_unique<MemorySource>(d.train, all, o.global_batch, o.seed, comm.rank(),
                                           comm.size()),
            d.train, EvalSplit{}, d.meta, dir, "", "test: {}\n");
  t.run(false);
  Trained out;
  out.params = t.model().params_to_host();
  h5::File f = h5::File::open(latest_checkpoint(dir));
  for (const auto& p : t.model().param_info())
    out.momentum[p.name] = f.read_all<float>("/optimizer/" + p.name);
  return out;
}

double worst_relative(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(double(a[i]) - b[i]) / (1e-3 + std::abs(double(b[i]))));
  return worst;
}

}  // namespace

// Without LARS the two homes run the same operations on the same numbers (host SgdOptimizer
// without FMA contraction; the kernel with explicitly rounded intrinsics), so they agree
// bitwise, weights and checkpointed momentum. With LARS the trust ratios come from norms
// summed in another order (the device's two-pass sums): close, not equal.
TEST(CudaParamHome, DeviceHomeEndsWhereTheStagedHomeEnds) {
  ASSERT_TRUE(deterministic_cudnn);
  Comm world = Comm::world();
  for (bool lars : {false, true}) {
    for (bool decoupled : {false, true}) {
      const Trained staged = trained(world, "staged", lars, decoupled);
      const Trained device = trained(world, "device", lars, decoupled);
      ASSERT_EQ(staged.params.size(), device.params.size());
      for (float v : device.params) ASSERT_TRUE(std::isfinite(v));
      const double worst = worst_relative(device.params, staged.params);
      std::printf(
          "device vs staged (lars %d, decoupled %d, %d ranks): worst relative "
          "difference %.3g\n",
          int(lars), int(decoupled), world.size(), worst);
      if (!lars && world.size() == 1) {
        EXPECT_TRUE(device.params == staged.params) << "decoupled " << decoupled;
        EXPECT_TRUE(device.momentum == staged.momentum) << "decoupled " << decoupled;
      } else {  // LARS norms, or NCCL's summation order against MPI's
        EXPECT_LT(worst, 1e-4) << "lars " << lars << " decoupled " << decoupled;
        for (const auto& [name, v] : staged.momentum)
          EXPECT_LT(worst_relative(device.momentum.at(name), v), 1e-3) << name;
      }
    }
  }
}
