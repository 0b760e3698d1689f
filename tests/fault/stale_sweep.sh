#!/usr/bin/env bash
# Issue 26, defect 2: a sweep grid changed between runs leaves results of the old grid in
# sweep/. A sweep with arms [full, filtered] at 1 epoch, then the grid shrunk to [full] at
# 2 epochs and index 0 re-run: the report used to pool the old filtered run-1 with the new
# run-0 ("filtered − full = -15.62 points"). Now run-1 is listed as stale (path, why) and
# used nowhere; and train_scaled --resume re-runs a result of another grid instead of
# skipping it as finished.
. "$SIEVE_SOURCE_DIR/tests/fault/fault_common.bash"
need_tools cluster_filter train_scaled report
dir="$(scratch stale_sweep)"
make_dataset "$dir"
run() { run_stage "$dir" "$@"; }  # LOG TOOL ARGS...
make_filter "$dir"
old=(--set scaled.epochs=1 --set 'scaled.sweep={global_batch: [16], arm: [full, filtered]}')
new=(--set scaled.epochs=2 --set 'scaled.sweep={global_batch: [16], arm: [full]}')
run sweep_old train_scaled "${old[@]}" --sweep-index 0-1
run sweep_new train_scaled "${new[@]}" --sweep-index 0 --overwrite
run report report "${new[@]}"
md="$dir/report/index.md"
grep -q "Stale results: 1 result.json file is not a run of the current sweep grid" "$md" ||
  fail "report: no stale table"
grep -qF "| sweep/run-1/result.json | run 1 is outside the current grid (1 run) |" "$md" ||
  { grep -n "run-1" "$md"; fail "report: run-1 not listed as stale with its reason"; }
grep -q "filtered − full = " "$md" && fail "report compares the old filtered run with the new full run"
[ "$(tail -n +2 "$dir/report/data/runs.csv" | cut -d, -f1,2 | tr '\n' ' ')" = "0,full " ] ||
  fail "runs.csv: expected only run 0 (full): $(cat "$dir/report/data/runs.csv")"
grep -q "not of the current sweep grid" "$dir/report.log" || fail "report: no warning line"

# The other way round: the old grid again, --resume. run-0 holds the 2-epoch result of the
# new grid: not a finished run of this grid, so it is trained again (1 epoch), not skipped.
run resume train_scaled "${old[@]}" --sweep-index 0-1 --resume --overwrite
grep -q "run-0/result.json: from another grid (scaled.epochs 2 (grid: 1)): run 0 starts over" \
  "$dir/resume.log" || { cat "$dir/resume.log"; fail "--resume: no start-over for run 0"; }
grep -q "sweep run 1: finished already" "$dir/resume.log" || fail "--resume: run 1 not skipped"
"$PY" - "$dir/sweep/run-0/result.json" <<'EOF' || fail "run-0 after --resume"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["epochs"] == 1 and r["config"]["scaled.epochs"] == "1", (r["epochs"], r["config"]["scaled.epochs"])
EOF
no_tmp_files "$dir/sweep"
echo "stale_sweep: OK"
