// Thread counts of the two pools a process has: OpenMP (ours) and OpenBLAS (the BLAS
// calls'). OpenBLAS is reached through weak symbols so that code linked against another
// BLAS still builds and these calls become no-ops there.
#pragma once

namespace sieve {

// OpenBLAS's thread count, or 1 where the BLAS is not OpenBLAS.
int blas_threads();
// Sets OpenBLAS's thread count (no-op for another BLAS).
void set_blas_threads(int threads);

// Single-threaded BLAS for the lifetime of the guard: for code that calls BLAS from inside
// its own OpenMP parallel region (one small GEMM per thread). Otherwise the two pools take
// turns on the same cores and each spin-waits while the other works (a third of a k-NN
// search went to sched_yield and libgomp's spin loop before this).
class ScopedSerialBlas {
 public:
  ScopedSerialBlas() : saved_(blas_threads()) { set_blas_threads(1); }
  ~ScopedSerialBlas() { set_blas_threads(saved_); }
  ScopedSerialBlas(const ScopedSerialBlas&) = delete;
  ScopedSerialBlas& operator=(const ScopedSerialBlas&) = delete;

 private:
  int saved_;
};

}  // namespace sieve
