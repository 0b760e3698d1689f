#!/usr/bin/env bash
# One writer per stage output (issue 26, defect 4). Two `pretrain --overwrite` on one run.dir
# used to both exit 0 with metrics.jsonl epochs mixed and each deleting the other's
# checkpoints. Now the second (2 ranks) is refused in one line naming the lock and the
# holder's host and pid, and the first finishes whole. A stale lock (a dead pid of this host)
# is taken over with a log line; one of another host is not. The same for a single-file
# output (extract_features' `.features.h5.lock`) and for run_local.sh (a run-level lock).
. "$SIEVE_SOURCE_DIR/tests/fault/fault_common.bash"
dir="$(scratch stage_lock)"
run="$dir/run"
make_dataset "$run"
lock="$run/pretrain/.pretrain.lock"
host="$(hostname)"

pretrain_bg "$run" "$dir/a.log"
wait_for_checkpoint "$run" 2 120 || { cat "$dir/a.log"; fail "first run: no checkpoint"; }
holder="$(sed -n 's/.*pid=\([0-9]*\).*/\1/p' "$lock")"
[ -n "$holder" ] || fail "no pid in $lock"
pretrain_fg "$run" "$dir/b.log" --overwrite
line="$(expect_error pretrain $? 1 "$dir/b.log" "$lock: .* pid $holder on host $host ")" || exit 1
echo "  second pretrain (2 ranks): exit 1: $line"
! grep -q "MPI_ABORT" "$dir/b.log" || fail "second pretrain aborted the job"
wait "$MPIRUN_PID" || { cat "$dir/a.log"; fail "first pretrain failed"; }
epochs="$("$PY" -c 'import json,sys; print([json.loads(l)["epoch"] for l in open(sys.argv[1])])' "$run/pretrain/metrics.jsonl")"
[ "$epochs" = "[1, 2]" ] || fail "metrics.jsonl epochs $epochs, expected [1, 2]"
[ -e "$lock" ] && fail "lock left after the run"

# Stale: a pid of this host that is not running (a finished child's).
true &
dead=$!
wait "$dead"
echo "host=$host pid=$dead ticks=1 start=2026-01-01T00:00:00Z tool=pretrain" >"$lock"
"$TOOLS/pretrain" --config "$CONFIG" --set run.dir="$run" "${TRAIN_SETS[@]}" --set pretrain.epochs=1 \
  --overwrite >"$dir/stale.log" 2>&1 || { cat "$dir/stale.log"; fail "pretrain over a stale lock failed"; }
grep -q "taking over a stale lock (process $dead is gone)" "$dir/stale.log" || fail "no stale-lock log line"
echo "  stale lock of pid $dead: taken over"
echo "host=elsewhere.invalid pid=$dead start=2026-01-01T00:00:00Z tool=pretrain" >"$lock"
"$TOOLS/pretrain" --config "$CONFIG" --set run.dir="$run" --overwrite >"$dir/other.log" 2>&1
expect_error pretrain $? 1 "$dir/other.log" "pid $dead on host elsewhere.invalid" >/dev/null || exit 1
rm -f "$lock"

# A single output: a live holder (this shell) of features.h5's lock.
echo "host=$host pid=$$ start=2026-01-01T00:00:00Z tool=extract_features" >"$run/.features.h5.lock"
"$TOOLS/extract_features" --config "$CONFIG" --set run.dir="$run" >"$dir/features.log" 2>&1
line="$(expect_error extract_features $? 1 "$dir/features.log" "features.h5.lock: .* pid $$ ")" || exit 1
echo "  extract_features: exit 1: $line"
[ -e "$run/features.h5" ] && fail "features.h5 written under another's lock"
rm -f "$run/.features.h5.lock"

# run_local.sh: a pipeline holding the run's lock (flock, as run_local.sh takes it).
(
  exec 9>>"$run/.run_local.lock"
  flock 9
  echo "host=$host pid=$BASHPID tool=run_local" >"$run/.run_local.lock"
  sleep 30
) &
sub=$!
sleep 0.5
PATH="$TOOLS:$PATH" "$root/pipelines/run_local.sh" "$CONFIG" --set run.dir="$run" --only shard --np 1 \
  >"$dir/local.log" 2>&1
rc=$?
kill "$sub" 2>/dev/null
wait "$sub" 2>/dev/null
echo "  run_local.sh: exit $rc: $(cat "$dir/local.log")"
[ "$rc" -eq 1 ] && grep -qF "pid=$sub" "$dir/local.log" || fail "run_local.sh not refused"
echo "stage_lock: OK"
