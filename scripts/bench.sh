#!/usr/bin/env bash
# Run every committed benchmark, each next to its peer in the same run, and print the tables.
#   scripts/bench.sh [AREA ...]     areas: shard folder train dataparallel embed cluster knn detection (default: all)
# Benchmarks are not tests: they take minutes and want an otherwise idle machine. Each
# area's script prints its own table; docs/<area>.md records the figures we measured.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/install_deps.sh --bench
. scripts/env.sh
cmake -S . -B "$SIEVE_BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$SIEVE_BUILD_DIR" -j"$(nproc)"
areas=("$@")
[ ${#areas[@]} -gt 0 ] || areas=(shard folder train dataparallel embed cluster knn detection)
for a in "${areas[@]}"; do
  script="scripts/bench_$a.sh"
  [ -x "$script" ] || { echo "bench.sh: no benchmark for '$a' ($script)" >&2; exit 2; }
  echo "===== $a ====="
  "$script"
done
