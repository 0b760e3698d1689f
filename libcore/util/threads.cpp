#include "util/threads.hpp"

#include <strings.h>

#include "util/error.hpp"

extern "C" int openblas_get_num_threads(void) __attribute__((weak));
extern "C" void openblas_set_num_threads(int) __attribute__((weak));
extern "C" char* openblas_get_corename(void) __attribute__((weak));

namespace sieve {

int blas_threads() {
  return openblas_get_num_threads ? openblas_get_num_threads() : 1;
}

void set_blas_threads(int threads) {
  if (openblas_set_num_threads) openblas_set_num_threads(threads);
}

std::string blas_kernels() {
  const char* name = openblas_get_corename ? openblas_get_corename() : nullptr;
  return name ? std::string(name) : std::string();
}

std::string blas_kernels_to_name(const std::string& chosen, bool avx2, bool avx512) {
  // OpenBLAS names the core in its own capitalisation ("Prescott", "prescott" by version).
  // scripts/env.sh applies the same rule in the shell, before any program is built.
  if (strcasecmp(chosen.c_str(), "prescott") != 0) return "";
  if (avx512) return "SkylakeX";
  if (avx2) return "Haswell";
  return "";
}

std::string blas_kernel_warning() {
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  const std::string chosen = blas_kernels();
  const std::string better = blas_kernels_to_name(chosen, avx2, avx512);
  if (better.empty()) return "";
  return cat("OpenBLAS runs its generic ", chosen, " kernels on this CPU (it does not know the ",
             "model): its GEMMs run several times slower; export OPENBLAS_CORETYPE=", better,
             " before starting the program (scripts/env.sh does)");
}

}  // namespace sieve
