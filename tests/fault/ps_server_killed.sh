#!/usr/bin/env bash
# Parameter server (pretrain.comm.strategy=parameter-server, one shard on rank 0): kill -9 of
# the SERVER rank mid-run ends the whole job within seconds (the worker must not wait for
# pulls that never come), and `--resume` from the last checkpoint finishes with /state
# bitwise identical to an uninterrupted parameter-server run: the checkpoint holds every
# shard's momentum, collected from its owner (ParamServer::collect_optimizer_state).
# Twice: synchronous, and stale-synchronous with its default prediction (comm.mode async, staleness 2),
# whose checkpoints must hold the true weights, not the predicted point the workers compute on.
. "$SIEVE_SOURCE_DIR/tests/fault/fault_common.bash"
top="$(scratch ps_server_killed)"
for mode in sync async; do
  echo "  mode $mode"
  dir="$top/$mode"
  PS=(--set pretrain.comm.strategy=parameter-server --set pretrain.comm.servers=1
      --set pretrain.comm.mode=$mode --set pretrain.comm.max_staleness=2)
  make_dataset "$dir/ref"
  mkdir -p "$dir/kill"
  cp "$dir/ref/dataset.h5" "$dir/kill/"

  pretrain_fg "$dir/ref" "$dir/ref.log" "${PS[@]}" || { cat "$dir/ref.log"; fail "uninterrupted run failed"; }

  step=$((2 * (1 + RANDOM % 4)))
  pretrain_bg "$dir/kill" "$dir/kill.log" "${PS[@]}"
  wait_for_checkpoint "$dir/kill" "$step" 120 || { cat "$dir/kill.log"; fail "no checkpoint >= $step"; }
  sleep "0.$((RANDOM % 5))"
  mapfile -t ranks < <(rank_pids "$MPIRUN_PID")
  [ ${#ranks[@]} -eq 2 ] || fail "expected 2 rank pids under mpirun $MPIRUN_PID, got '${ranks[*]}'"
  # The server owns shard 0: rank 0 (ParamServer::owner). Find it by Open MPI's rank variable.
  # grep reads the NUL-separated environ itself (-z): piped from tr under pipefail, grep -q's
  # early exit could kill tr with SIGPIPE mid-write and fail the pipeline on a match (a CI
  # run once found "no rank-0 process" that way).
  server=""
  for p in "${ranks[@]}"; do
    grep -qzx "OMPI_COMM_WORLD_RANK=0" "/proc/$p/environ" && server=$p
  done
  [ -n "$server" ] || fail "no rank-0 process among ${ranks[*]}"
  echo "  killing server rank 0 (pid $server) after checkpoint step >= $step"
  kill_job_rank "$server" "${ranks[@]}"
  rc=$JOB_RC took=$JOB_END_S
  echo "  job ended ${took}s after the server was killed, exit $rc"
  [ -e "$dir/kill/pretrain/model.h5" ] && fail "run finished before the kill (model.h5 exists)"
  [ "$rc" -ne 0 ] || fail "mpirun exited 0 after the server was killed"
  (( $(echo "$took < 10" | bc) )) || fail "job did not end within 10 s of the kill (${took}s)"

  pretrain_fg "$dir/kill" "$dir/resume.log" "${PS[@]}" --resume ||
    { cat "$dir/resume.log"; fail "--resume after the kill failed"; }
  grep -q "resuming from" "$dir/resume.log" || { cat "$dir/resume.log"; fail "no resume message"; }
  same_state "$dir/ref/pretrain/model.h5" "$dir/kill/pretrain/model.h5" ||
    fail "resumed parameter-server model differs from the uninterrupted run"
done
echo "ps_server_killed: OK"
