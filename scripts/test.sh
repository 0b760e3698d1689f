#!/usr/bin/env bash
# The whole test suite from a fresh machine: install dependencies, configure, build, run ctest.
#   scripts/test.sh                  # everything (unit, mpi, pipeline, slurm, fault; gpu skips without GPU)
#   scripts/test.sh -L unit          # extra arguments go to ctest
# Environment: SIEVE_BUILD_DIR (default build/), SIEVE_JOBS (default nproc).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/install_deps.sh
. scripts/env.sh
jobs="${SIEVE_JOBS:-$(nproc)}"
start=$(date +%s)
cmake -S . -B "$SIEVE_BUILD_DIR" -DCMAKE_BUILD_TYPE=Release
cmake --build "$SIEVE_BUILD_DIR" -j"$jobs"
echo "test.sh: build took $(( $(date +%s) - start )) s"
ctest --test-dir "$SIEVE_BUILD_DIR" --output-on-failure --timeout 1200 -j"$jobs" "$@"
echo "test.sh: build + tests took $(( $(date +%s) - start )) s"
