#include "util/threads.hpp"

extern "C" int openblas_get_num_threads(void) __attribute__((weak));
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace sieve {

int blas_threads() {
  return openblas_get_num_threads ? openblas_get_num_threads() : 1;
}

void set_blas_threads(int threads) {
  if (openblas_set_num_threads) openblas_set_num_threads(threads);
}

}  // namespace sieve
