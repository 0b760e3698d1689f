#!/usr/bin/env bash
# Bad-input corpus against every program (label fault): see bad_inputs.py. A complete tiny
# run is made first (1 rank, 1 epoch), then each case works on its own copy of it.
set -euo pipefail
root="${SIEVE_SOURCE_DIR:?}"
. "$root/scripts/env.sh"
work="$SIEVE_BUILD_DIR/test-scratch/bad_inputs"
rm -rf "$work"
mkdir -p "$work"
cd "$root"
pipelines/run_local.sh configs/tiny.yaml --np 1 --set run.dir="$work/base" --set pretrain.epochs=1 \
  --set scaled.epochs=1 --set 'scaled.sweep.global_batch=[16]' > "$work/base.log" 2>&1 \
  || { tail -20 "$work/base.log"; echo "could not make the base run" >&2; exit 1; }
rm -rf "$work/base/logs"
exec /usr/bin/python3 "$root/tests/fault/bad_inputs.py" "$work/base" "$work/cases"
