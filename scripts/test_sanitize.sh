#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer build of Sieve, running the unit and mpi tests.
#   scripts/test_sanitize.sh [extra ctest args]
# Uses build-asan/ (CUDA off: the sanitizers instrument host code). Third-party
# process-lifetime allocations are suppressed via tests/support/lsan.supp.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/install_deps.sh
export SIEVE_BUILD_DIR="$root/build-asan"
. scripts/env.sh
cmake -S . -B "$SIEVE_BUILD_DIR" -DSIEVE_SANITIZE=ON -DSIEVE_ENABLE_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$SIEVE_BUILD_DIR" -j"$(nproc)"
# Leak reports from MPI/PMIx need whole stacks to match lsan.supp: the slow unwinder (the
# system libraries have no frame pointers, so the fast one stops after one frame), and MCA
# plugins kept loaded (a dlclose'd plugin shows up as "<unknown module>").
export OMPI_MCA_mca_base_component_disable_dlclose=1 PMIX_MCA_mca_base_component_disable_dlclose=1
export ASAN_OPTIONS="abort_on_error=1:detect_odr_violation=0:allocator_may_return_null=1:fast_unwind_on_malloc=0"
export LSAN_OPTIONS="suppressions=$root/tests/support/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
ctest --test-dir "$SIEVE_BUILD_DIR" --output-on-failure -L "unit|mpi" -j"$(nproc)" "$@"
