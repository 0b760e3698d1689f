#!/usr/bin/env bash
# The whole pipeline, every stage under mpirun -n 2, on configs/tiny.yaml; then every
# stage's outputs are checked with h5py (tests/support/check_run.py).
set -euo pipefail
root="${SIEVE_SOURCE_DIR:?}"
. "$root/scripts/env.sh"
dir="$SIEVE_BUILD_DIR/test-scratch/pipeline_tiny"
rm -rf "$dir"
mkdir -p "$(dirname "$dir")"
cd "$root"
pipelines/run_local.sh configs/tiny.yaml --np 2 --set run.dir="$dir"
/usr/bin/python3 tests/support/check_run.py "$dir" --sweep-runs 6
# Every stage logged to its own file, and a second run refuses nothing (--overwrite).
for s in shard pretrain features embed filter sweep report; do
  [ -s "$dir/logs/$s.log" ] || { echo "no log for stage $s" >&2; exit 1; }
done
