#!/usr/bin/env bash
# A sweep run that diverges is a result, not a failed job: a NaN injected into a gradient of
# train_scaled (SIEVE_DEBUG_NAN_STEP, rank 0 of 2) ends that run with exit 0 and result.json
# "diverged": true, the step, and no final accuracy; another run of the grid trains
# normally; the report leaves the diverged run out of the means and marks it.
. "$SIEVE_SOURCE_DIR/tests/fault/fault_common.bash"
[ -x "$TOOLS/report" ] && [ -x "$TOOLS/train_scaled" ] || { echo "SKIP: report/train_scaled not built" >&2; exit 77; }
dir="$(scratch diverged_run)"
make_dataset "$dir"
# Run 0 of tiny.yaml's grid (batch 16, arm full) gets the NaN at step 3; run 1 (batch 32)
# none.
sweep=(--config "$CONFIG" --set run.dir="$dir" --set 'scaled.sweep.arm=[full]')
SIEVE_DEBUG_NAN_STEP=3 mpirun -n 2 "$TOOLS/train_scaled" "${sweep[@]}" --sweep-index 0 \
  >"$dir/sweep.log" 2>&1
rc=$?
[ "$rc" -eq 0 ] || { cat "$dir/sweep.log"; fail "train_scaled exit $rc, expected 0"; }
grep -q "recorded as diverged" "$dir/sweep.log" || { cat "$dir/sweep.log"; fail "no divergence warning"; }
mpirun -n 2 "$TOOLS/train_scaled" "${sweep[@]}" --sweep-index 1 >"$dir/sweep1.log" 2>&1 ||
  { cat "$dir/sweep1.log"; fail "run 1 failed"; }
python3 - "$dir/sweep" <<'PY' || fail "result.json contents"
import json, sys
r0 = json.load(open(sys.argv[1] + "/run-0/result.json"))
r1 = json.load(open(sys.argv[1] + "/run-1/result.json"))
assert r0["diverged"] is True, r0
assert r0["diverged_at_step"] == 3, r0["diverged_at_step"]
assert r0["final_test_acc"] is None and r0["best_test_acc"] is None, r0
assert r1["diverged"] is False and r1["final_test_acc"] > 0, r1
print("  run-0 diverged at step 3; run-1 trained: test acc", r1["final_test_acc"])
PY
# The report gets the grid the runs were made with (a result of another grid is stale).
"$TOOLS/report" "${sweep[@]}" --overwrite >"$dir/report.log" 2>&1 ||
  { cat "$dir/report.log"; fail "report failed"; }
md="$dir/report/index.md"
grep -q "non-finite loss/gradient at step 3" "$md" || fail "report does not mark the diverged run"
grep -q "diverged" "$dir/report/data/runs.csv" || fail "runs.csv has no diverged column"
[ "$(grep -c '^[01],' "$dir/report/data/runs.csv")" -eq 2 ] || fail "runs.csv: expected runs 0 and 1"
no_tmp_files "$dir/sweep"
echo "diverged_run: OK"
