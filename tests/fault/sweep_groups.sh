#!/usr/bin/env bash
# train_scaled --ranks-per-run: a 2-rank job split into two groups of one rank, each
# training its own runs of the grid at the same time (what pipelines/run_local.sh does by
# default). Pinned here:
#  - every run's result equals the same run trained alone on one rank, bitwise (loss and
#    accuracies): the group changes where a run trains, not what it computes;
#  - both groups speak: each run's lines come once, named by the run ("run 3: ..."), also
#    those of rank 1's group;
#  - a stop signal while both groups train: exit 75 once both have checkpointed; --resume
#    finishes every run with the uninterrupted results;
#  - a --ranks-per-run that does not divide the job: one line naming the flag, exit 2, no
#    output.
. "$SIEVE_SOURCE_DIR/tests/fault/fault_common.bash"
need_tools cluster_filter train_scaled
dir="$(scratch sweep_groups)"
make_dataset "$dir"
run() { run_stage "$dir" "$@"; }  # LOG TOOL ARGS...
make_filter "$dir"
# tiny.yaml's grid: batches 16 and 32 x arms full, filtered, random = 6 runs; 4 epochs so
# that a stop lands mid-run.
SWEEP_SETS=(--set scaled.epochs=4 --set scaled.checkpoint.every_steps=2)
n=6
for ((i = 0; i < n; i++)); do
  run "alone$i" train_scaled "${SWEEP_SETS[@]}" --sweep-index "$i" --sweep-dir "$dir/alone"
done

# The whole grid on 2 ranks in groups of 1 (then --sweep-dir DIR [more args]).
GROUPED=(mpirun -n 2 "$TOOLS/train_scaled" --config "$CONFIG" --set run.dir="$dir"
         "${SWEEP_SETS[@]}" --sweep-index "0-$((n - 1))" --ranks-per-run 1)
same_results() {  # DIR_A DIR_B: every run's result.json equal but for times and rates
  "$PY" - "$1" "$2" "$n" <<'EOF'
import json, sys
a, b, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
timing = {"elapsed_s", "time_to_best_s", "images_per_s", "images_per_s_per_rank"}
for i in range(n):
    ra = json.load(open(f"{a}/run-{i}/result.json"))
    rb = json.load(open(f"{b}/run-{i}/result.json"))
    assert ra["ranks"] == 1 and rb["ranks"] == 1, (i, ra["ranks"], rb["ranks"])
    diff = {k for k in ra.keys() | rb.keys() if k not in timing and ra.get(k) != rb.get(k)}
    assert not diff, f"run {i}: " + ", ".join(f"{k}: {ra.get(k)} vs {rb.get(k)}" for k in sorted(diff))
    assert ra["train_loss"] > 0 and ra["steps"] > 0, (i, ra["train_loss"], ra["steps"])
EOF
}

"${GROUPED[@]}" --sweep-dir "$dir/groups" >"$dir/groups.log" 2>&1 || { cat "$dir/groups.log"; fail "grouped sweep failed"; }
same_results "$dir/alone" "$dir/groups" || fail "a grouped run differs from the same run alone"
grep -q "6 sweep run(s) on 2 groups of 1 rank(s): 2 runs at a time" "$dir/groups.log" ||
  { cat "$dir/groups.log"; fail "no line saying how the job is split"; }
for ((i = 0; i < n; i++)); do
  c="$(grep -c "^train_scaled: run $i: wrote $dir/groups/run-$i/result.json" "$dir/groups.log")"
  [ "$c" = 1 ] || { cat "$dir/groups.log"; fail "run $i: its 'wrote' line $c times, expected once"; }
done

# A stop signal (SIGUSR1 to mpirun, which forwards it to both ranks) once both groups train.
SIEVE_DEBUG_STEP_DELAY_MS=150 "${GROUPED[@]}" --sweep-dir "$dir/stopped" >"$dir/stop.log" 2>&1 &
MPIRUN_PID=$!
for ((t = 0; t < 600; t++)); do  # both groups' first runs (0 and 1) have a checkpoint
  ls "$dir/stopped/run-0/checkpoints/"*.h5 >/dev/null 2>&1 &&
    ls "$dir/stopped/run-1/checkpoints/"*.h5 >/dev/null 2>&1 && break
  sleep 0.1
done
kill -USR1 "$MPIRUN_PID"
wait "$MPIRUN_PID"
rc=$?
[ "$rc" -eq 75 ] || { cat "$dir/stop.log"; fail "stopped grouped sweep: exit $rc, expected 75"; }
for i in 0 1; do
  grep -q "^train_scaled: run $i: stop signal: checkpoint .* written" "$dir/stop.log" ||
    { cat "$dir/stop.log"; fail "run $i: no stop checkpoint line"; }
  [ -e "$dir/stopped/run-$i/result.json" ] && fail "run $i: result.json written by a stopped run"
done
no_tmp_files "$dir/stopped"
"${GROUPED[@]}" --sweep-dir "$dir/stopped" --resume --overwrite >"$dir/resume.log" 2>&1 ||
  { cat "$dir/resume.log"; fail "--resume of the stopped grouped sweep failed"; }
grep -q "^train_scaled: run 1: resuming from" "$dir/resume.log" ||
  { cat "$dir/resume.log"; fail "run 1 did not resume from its checkpoint"; }
same_results "$dir/alone" "$dir/stopped" || fail "a stopped and resumed grouped run differs"

# A group size that does not divide the job: refused before any output.
mpirun -n 2 "$TOOLS/train_scaled" --config "$CONFIG" --set run.dir="$dir" --sweep-index 0-5 \
  --ranks-per-run 3 --sweep-dir "$dir/bad" >"$dir/bad.log" 2>&1
rc=$?
[ "$rc" -eq 2 ] || { cat "$dir/bad.log"; fail "--ranks-per-run 3 on 2 ranks: exit $rc, expected 2"; }
[ "$(grep -c -- "--ranks-per-run 3: expected a divisor of the job's 2 rank(s)" "$dir/bad.log")" = 1 ] ||
  { cat "$dir/bad.log"; fail "--ranks-per-run 3: not one line naming the flag"; }
[ -e "$dir/bad" ] && fail "--ranks-per-run 3: left $dir/bad"
echo "sweep_groups: OK"
