#!/usr/bin/env bash
# From a fresh Debian machine to a report: install dependencies, build, run the whole
# pipeline on the built-in synthetic quickstart dataset, and print where the report is.
#   scripts/quickstart.sh [--np N] [--set key=value ...]   (arguments go to pipelines/run_local.sh)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/install_deps.sh
. scripts/env.sh
cmake -S . -B "$SIEVE_BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$SIEVE_BUILD_DIR" -j"$(nproc)" --target shard_dataset pretrain extract_features \
  reduce_dims cluster_filter train_scaled report
exec pipelines/run_local.sh configs/quickstart.yaml "$@"
