// Thread counts of the two pools a process has: OpenMP (ours) and OpenBLAS (the BLAS
// calls'). OpenBLAS is reached through weak symbols so that code linked against another
// BLAS still builds and these calls become no-ops there.
#pragma once
#include <string>

namespace sieve {

// OpenBLAS's thread count, or 1 where the BLAS is not OpenBLAS.
int blas_threads();
// Sets OpenBLAS's thread count (no-op for another BLAS).
void set_blas_threads(int threads);

// The kernels OpenBLAS chose for this CPU when it loaded ("Haswell", "SkylakeX", ...), or ""
// where the BLAS is not OpenBLAS.
std::string blas_kernels();
// The OPENBLAS_CORETYPE to name when OpenBLAS fell back to its generic SSE3 kernels
// ("Prescott") on a CPU with wider vectors: it picks kernels by CPU model, and a model newer
// than the library (Debian 12's 0.3.21 on Intel's Emerald Rapids) gets the fallback, ~6x
// slower GEMMs. "" when the choice is fine. `avx2`: AVX2 and FMA; `avx512`: AVX-512 F, BW,
// VL and DQ (what OpenBLAS's SkylakeX kernels use).
std::string blas_kernels_to_name(const std::string& chosen, bool avx2, bool avx512);
// One line for the log when this process runs OpenBLAS's generic kernels where the CPU has
// better ones (scripts/env.sh names them for every program it starts), else "".
std::string blas_kernel_warning();

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
