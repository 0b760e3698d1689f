// OpenBLAS's kernel choice: the fallback to its generic kernels is recognised, and the
// environment the programs run under (scripts/env.sh, as every test) avoids it. In embed's
// tests because embed (the k-NN searches, PCA) is where the GEMMs are, and this binary then
// links OpenBLAS as the programs do.
#include <cblas.h>
#include <gtest/gtest.h>

#include "util/threads.hpp"

namespace sieve {
namespace {

TEST(BlasKernels, GenericFallbackOnAVectorCpuNamesTheKernelsItCanRun) {
  EXPECT_EQ(blas_kernels_to_name("Prescott", true, true), "SkylakeX");
  EXPECT_EQ(blas_kernels_to_name("prescott", true, true), "SkylakeX");  // other versions' case
  EXPECT_EQ(blas_kernels_to_name("Prescott", true, false), "Haswell");
}

TEST(BlasKernels, OpenBlasOwnChoiceOrAnOldCpuIsLeftAlone) {
  EXPECT_EQ(blas_kernels_to_name("Prescott", false, false), "");  // SSE3 is all it has
  EXPECT_EQ(blas_kernels_to_name("Haswell", true, true), "");
  EXPECT_EQ(blas_kernels_to_name("Zen", true, false), "");
  EXPECT_EQ(blas_kernels_to_name("Cooperlake", true, true), "");
  EXPECT_EQ(blas_kernels_to_name("", true, true), "");  // not OpenBLAS
}

TEST(BlasKernels, TheProgramsEnvironmentRunsTheCpusVectorKernels) {
  const float x[2] = {1.f, 2.f}, y[2] = {3.f, 4.f};
  ASSERT_EQ(cblas_sdot(2, x, 1, y, 1), 11.f);  // the BLAS this binary runs, loaded
  const std::string chosen = blas_kernels();
  if (chosen.empty()) GTEST_SKIP() << "the BLAS is not OpenBLAS";
  EXPECT_EQ(blas_kernel_warning(), "")
      << "OpenBLAS chose '" << chosen
      << "': run the tests under scripts/env.sh, which names the kernels where OpenBLAS "
         "does not know the CPU";
}

}  // namespace
}  // namespace sieve
