#!/usr/bin/env bash
# Stop signals during a running 2-rank pretrain: the ranks agree at the next step boundary,
# write a checkpoint, and exit 75; `--resume` then completes with /state bitwise identical
# to an uninterrupted 2-rank run. Three ways the signal arrives:
#  USR1 to mpirun   mpirun forwards SIGUSR1 (Slurm --signal=USR1@N with mpirun): exit 75.
#  TERM to the ranks  as Slurm's scancel/time limit does (srun signals every task): exit 75.
#  TERM to mpirun   OpenMPI 4's mpirun does not forward SIGTERM: it terminates the job
#                   (SIGCONT to the ranks, SIGTERM odls_base_sigkill_timeout = 1 s later, SIGKILL
#                   another 1 s later) and exits with its own code, not 75. The ranks still
#                   write the checkpoint within that second; resume must work. Use SIGUSR1 for
#                   a graceful stop of an mpirun job (docs/training.md).
. "$SIEVE_SOURCE_DIR/tests/fault/fault_common.bash"
dir="$(scratch stop_signals)"
make_dataset "$dir/ref"
# Long enough (6 epochs, ~48 steps) that mpirun's delayed SIGTERM handling lands mid-run.
TRAIN_SETS+=(--set pretrain.epochs=6)
pretrain_fg "$dir/ref" "$dir/ref.log" || { cat "$dir/ref.log"; fail "uninterrupted run failed"; }

for mode in USR1-mpirun TERM-ranks TERM-mpirun; do
  sig="${mode%%-*}"
  d="$dir/$mode"
  mkdir -p "$d"
  cp "$dir/ref/dataset.h5" "$d/"
  pretrain_bg "$d" "$d/stop.log"
  # The first checkpoint means the ranks are in the training loop (handlers installed).
  wait_for_checkpoint "$d" 2 120 || { cat "$d/stop.log"; fail "$mode: no first checkpoint"; }
  if [ "$mode" = TERM-ranks ]; then
    mapfile -t ranks < <(rank_pids "$MPIRUN_PID")
    [ ${#ranks[@]} -eq 2 ] || fail "$mode: rank pids '${ranks[*]}'"
    kill -TERM "${ranks[@]}"
  else
    kill -"$sig" "$MPIRUN_PID"
  fi
  t0=$SECONDS
  wait "$MPIRUN_PID"
  rc=$?
  echo "  $mode: exit $rc after $((SECONDS - t0)) s"
  if [ "$mode" = TERM-mpirun ]; then
    [ "$rc" -ne 0 ] || { cat "$d/stop.log"; fail "$mode: exit 0"; }
  else
    [ "$rc" -eq 75 ] || { cat "$d/stop.log"; fail "$mode: exit $rc, expected 75"; }
  fi
  [ -e "$d/pretrain/model.h5" ] && { cat "$d/stop.log"; fail "$mode: model.h5 written by a stopped run"; }
  ck="$(grep -o 'stop signal: checkpoint [^ ]*' "$d/stop.log" | head -1 | awk '{print $4}')"
  [ -n "$ck" ] && [ -e "$ck" ] || { cat "$d/stop.log"; fail "$mode: checkpoint not named or missing"; }
  loadable_finite "$ck" || fail "$mode: stop checkpoint not loadable"
  no_tmp_files "$d/pretrain"
  pretrain_fg "$d" "$d/resume.log" --resume || { cat "$d/resume.log"; fail "$mode: --resume failed"; }
  grep -q "resuming from $ck" "$d/resume.log" || { cat "$d/resume.log"; fail "$mode: did not resume from $ck"; }
  same_state "$dir/ref/pretrain/model.h5" "$d/pretrain/model.h5" ||
    fail "$mode: resumed model differs from the uninterrupted run"
done
echo "stop_signals: OK"
