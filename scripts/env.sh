# Source this (". scripts/env.sh") before running Sieve programs with mpirun by hand.
# The tests, the pipeline runner and the Slurm job scripts all source it.
#  - OpenMPI refuses to start as root without the two ALLOW variables (containers, CI).
#  - Oversubscription lets a 2-core machine run the 3-rank tests.
#  - vader's CMA single-copy needs ptrace rights that containers often deny.
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_hwloc_base_binding_policy=none
#  - A Sieve program prints its own one-line error and every rank exits with the code; without
#    this, mpirun adds a "Primary job terminated normally, but 1 process returned a non-zero
#    exit code" banner (and an MPI_ABORT banner) to that line. mpirun's exit code is kept
#    (a rank killed by a signal still gives 128+N, only without ORTE's message).
export OMPI_MCA_orte_execute_quiet="${OMPI_MCA_orte_execute_quiet:-1}"
SIEVE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export SIEVE_ROOT
export SIEVE_BUILD_DIR="${SIEVE_BUILD_DIR:-$SIEVE_ROOT/build}"
export PATH="$SIEVE_BUILD_DIR/tools:$PATH"
#  - OpenBLAS picks its kernels by CPU model when it loads, and a model newer than the library
#    (Debian 12's OpenBLAS 0.3.21 on Intel's Emerald Rapids) gets its generic SSE3 "Prescott"
#    kernels: SGEMM 50 instead of 315 GFLOP/s on 2 threads, the knn detector 3.4x slower
#    (docs/engine.md). Where OpenBLAS says it fell back, name the kernels this CPU runs; an
#    OPENBLAS_CORETYPE already set is kept. (The programs warn when they run the fallback;
#    the rule is blas_kernels_to_name's in libcore/util/threads.cpp, kept the same.)
if [ -z "${OPENBLAS_CORETYPE+x}" ] && command -v python3 >/dev/null 2>&1 &&
   [ "$(OPENBLAS_VERBOSE=2 python3 -c 'import ctypes; ctypes.CDLL("libopenblas.so.0")' 2>&1 |
        sed -n 's/^Core: //p')" = Prescott ]; then
  sieve_cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
  if [[ $sieve_cpu_flags == *" avx512f "* && $sieve_cpu_flags == *" avx512bw "* &&
        $sieve_cpu_flags == *" avx512vl "* && $sieve_cpu_flags == *" avx512dq "* ]]; then
    export OPENBLAS_CORETYPE=SkylakeX
  elif [[ $sieve_cpu_flags == *" avx2 "* && $sieve_cpu_flags == *" fma "* ]]; then
    export OPENBLAS_CORETYPE=Haswell
  fi
  unset sieve_cpu_flags
fi
