#!/usr/bin/env bash
# A failing stage stops the local run: the runner exits non-zero, names the stage and its
# log, later stages do not run, and the failing stage leaves no output file.
set -uo pipefail
root="${SIEVE_SOURCE_DIR:?}"
. "$root/scripts/env.sh"
dir="$SIEVE_BUILD_DIR/test-scratch/pipeline_fail"
rm -rf "$dir"
cd "$root"
# A perplexity far too large for 240 points makes reduce_dims fail at run time.
out="$(pipelines/run_local.sh configs/tiny.yaml --np 1 --set run.dir="$dir" \
        --set embed.tsne.perplexity=500 --set pretrain.epochs=1 2>&1)"
rc=$?
echo "$out" | tail -5
[ $rc -ne 0 ] || { echo "FAIL: run_local succeeded despite a failing stage" >&2; exit 1; }
echo "$out" | grep -q "stage 'embed' failed" || { echo "FAIL: failing stage not named" >&2; exit 1; }
echo "$out" | grep -q "log: $dir/logs/embed.log" || { echo "FAIL: log not named" >&2; exit 1; }
[ ! -e "$dir/embedding.h5" ] || { echo "FAIL: failed stage left an output" >&2; exit 1; }
[ ! -e "$dir/filter.h5" ] || { echo "FAIL: a later stage ran" >&2; exit 1; }
ls -a "$dir" | grep -q '\.tmp' && { echo "FAIL: temporary file left behind" >&2; exit 1; }
echo "failed_stage_stops: OK"
