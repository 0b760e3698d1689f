#!/usr/bin/env bash
# Paths that a shell would parse: a run directory with spaces, single quotes, $( ) and a
# non-ASCII letter. Every tool of the pipeline and pipelines/run_local.sh must work there,
# and nothing may run the text of a path: before the fix, report started gnuplot through
# `sh -c "cd '<dir>' && gnuplot ..."`, so the quote broke it and $(touch PWNED) ran.
# (issue 26, defect 1)
. "${SIEVE_SOURCE_DIR:?}/tests/fault/fault_common.bash"
need_tools cluster_filter train_scaled report
command -v gnuplot >/dev/null || { echo "SKIP: gnuplot not installed" >&2; exit 77; }

base="$(scratch odd_paths)"
# The working directory of every command: a `touch PWNED` run by any shell lands here,
# in the run directory (gnuplot's) or in the parent of either; all are searched below.
cd "$base"
odd="$base/run dir 'q' \$(touch PWNED) é"
sets=(--set run.dir="$odd" --set pretrain.epochs=1 --set filter.max_flagged=1)
step() {  # step LOG TOOL ARGS...: run one tool on one rank, fail naming its log
  local log="$base/$1.log"
  shift
  "$TOOLS/$1" --config "$CONFIG" "${sets[@]}" "${@:2}" >"$log" 2>&1 ||
    { cat "$log" >&2; fail "$1 failed in '$odd' (log above)"; }
}
step shard shard_dataset
step pretrain pretrain
step features extract_features
step embed reduce_dims
step filter cluster_filter
step report report
for f in dataset.h5 pretrain/model.h5 features.h5 embedding.h5 filter.h5 report/index.html; do
  [ -s "$odd/$f" ] || fail "no $f in '$odd'"
done
ls "$odd/report/figures/"* >/dev/null 2>&1 || fail "report drew no figure in '$odd'"
echo "  six tools ran in '$odd'"

# The local runner: every stage under mpirun, one sweep run (the grid's smallest point).
odd2="$base/pipe 'x' \$(touch PWNED) ü"
"$root/pipelines/run_local.sh" "$CONFIG" --np 1 --set run.dir="$odd2" --set pretrain.epochs=1 --set filter.max_flagged=1 \
  --set scaled.epochs=1 --set "scaled.sweep.global_batch=[64]" --set "scaled.sweep.arm=[full]" \
  >"$base/run_local.log" 2>&1 || { tail -30 "$base/run_local.log" >&2; fail "run_local.sh failed in '$odd2'"; }
[ -s "$odd2/report/index.html" ] || fail "run_local.sh left no report in '$odd2'"
echo "  run_local.sh ran in '$odd2'"

pwned="$(find "$base" "$root" -maxdepth 1 -name PWNED; find "$base" -name PWNED)"
[ -z "$pwned" ] || fail "text of a path was run as a command: $pwned"
echo "PASS: odd paths"
