# Helpers sourced by the fault tests (tests/fault/*.sh). Not a test itself: the CTest glob
# takes only *.sh. Every test gets a scratch dir, the tiny config, a synthetic dataset made
# once per test, and h5py comparisons through Debian's python (/usr/bin/python3).
set -uo pipefail
root="${SIEVE_SOURCE_DIR:?}"
. "$root/scripts/env.sh"
export OMP_NUM_THREADS=1
# The tests here compare separately started runs bitwise (same_state). precision: auto times
# each network per run (nn/backend_registry.cpp), and a tiny network's step sits near the
# timing's floor, where two runs under load can decide differently: on an AMX Xeon a CI run's
# uninterrupted and killed parameter-server runs trained in bf16 and fp32 (thirty-first
# session). So auto's answer is pinned unless the environment forces one, as in
# test::pin_precision_auto_unless_forced (tests/support/test_util.hpp).
export SIEVE_PRECISION_AUTO="${SIEVE_PRECISION_AUTO:-fp32}"
CONFIG="$root/configs/tiny.yaml"
PY=/usr/bin/python3
TOOLS="$SIEVE_BUILD_DIR/tools"
# need_tools TOOL...: skip the test (exit 77) unless every tool is built.
need_tools() {
  local t
  for t in "$@"; do
    [ -x "$TOOLS/$t" ] || { echo "SKIP: $TOOLS/$t not built" >&2; exit 77; }
  done
}
need_tools shard_dataset pretrain extract_features reduce_dims

fail() { echo "FAIL: $*" >&2; exit 1; }

# scratch NAME: a fresh scratch directory for this test, echoed.
scratch() {
  local d="$SIEVE_BUILD_DIR/test-scratch/fault_$1"
  rm -rf "$d"
  mkdir -p "$d"
  echo "$d"
}

# make_dataset DIR: the tiny synthetic dataset at DIR/dataset.h5 (one rank, ~1 s).
make_dataset() {
  mkdir -p "$1"
  "$TOOLS/shard_dataset" --config "$CONFIG" --set run.dir="$1" >"$1/shard.log" 2>&1 ||
    { cat "$1/shard.log"; fail "shard_dataset failed"; }
}

# run_stage DIR LOG TOOL ARGS...: one tool on one rank with run.dir=DIR, its output in
# DIR/LOG.log (shown when it fails).
run_stage() {
  local dir="$1" log="$1/$2.log" tool="$3"
  shift 3
  "$TOOLS/$tool" --config "$CONFIG" --set run.dir="$dir" "$@" >"$log" 2>&1 ||
    { cat "$log"; fail "$tool $* failed"; }
}

# make_filter DIR: DIR/filter.h5 for the sweep's filtered and random arms, from the dataset
# in DIR (1 pretraining epoch is enough), and the stages before it.
make_filter() {
  run_stage "$1" pretrain pretrain --set pretrain.epochs=1 --set pretrain.holdout=0
  run_stage "$1" features extract_features
  run_stage "$1" embed reduce_dims
  run_stage "$1" filter cluster_filter
}

# Config overrides shared by every training run of one test, so that runs are comparable.
# 8 steps per epoch (240 samples / 32), 2 epochs, a checkpoint every 2 steps.
# No held-out part (pretrain.holdout=0): all 240 samples train, and no early model is
# written between checkpoints; disk_full.sh tests the early model's write on its own.
TRAIN_SETS=(--set pretrain.epochs=2 --set pretrain.checkpoint.every_steps=2
            --set pretrain.checkpoint.keep=3 --set pretrain.holdout=0)

# pretrain_bg RUN_DIR LOG [extra args]: start a 2-rank pretrain in the background; sets
# MPIRUN_PID. The dataset is RUN_DIR/dataset.h5. Each step is slowed by 150 ms (a test hook
# that changes no numbers) so that the kill or signal lands mid-run on an idle machine too,
# where the 16 steps otherwise finish in a fraction of a second.
pretrain_bg() {
  local dir="$1" log="$2"
  shift 2
  SIEVE_DEBUG_STEP_DELAY_MS="${SIEVE_DEBUG_STEP_DELAY_MS:-150}" mpirun -n 2 "$TOOLS/pretrain" --config "$CONFIG" --set run.dir="$dir" "${TRAIN_SETS[@]}" \
    "$@" >"$log" 2>&1 &
  MPIRUN_PID=$!
}

# pretrain_fg RUN_DIR LOG [extra args]: a 2-rank pretrain in the foreground; returns its code.
# With FSIZE_LIMIT_KB set, each rank (not mpirun, whose own shared-memory files would hit
# it) runs under `ulimit -f` with SIGXFSZ ignored, so oversized writes fail with EFBIG.
pretrain_fg() {
  local dir="$1" log="$2" wrap=()
  shift 2
  [ -n "${FSIZE_LIMIT_KB:-}" ] &&
    wrap=(bash -c 'trap "" XFSZ; ulimit -f "$0" && exec "$@"' "$FSIZE_LIMIT_KB")
  mpirun -n 2 "${wrap[@]}" "$TOOLS/pretrain" --config "$CONFIG" --set run.dir="$dir" \
    "${TRAIN_SETS[@]}" "$@" >"$log" 2>&1
}

# wait_for_checkpoint DIR MIN_STEP TIMEOUT_S: wait until DIR/pretrain/checkpoints holds a
# complete checkpoint of step >= MIN_STEP (file renamed into place).
wait_for_checkpoint() {
  local ck="$1/pretrain/checkpoints" min="$2" deadline=$((SECONDS + $3)) f n
  while [ $SECONDS -lt $deadline ]; do
    for f in "$ck"/ckpt-*.h5; do
      [ -e "$f" ] || continue
      n="${f##*/ckpt-}"
      n="${n%.h5}"
      [ $((10#$n)) -ge "$min" ] && return 0
    done
    sleep 0.05
  done
  return 1
}

# rank_pids MPIRUN_PID: the pids of the pretrain ranks started by that mpirun.
rank_pids() {
  local p
  for p in $(pgrep -P "$1"); do
    [ "$(cat /proc/"$p"/comm 2>/dev/null)" = "pretrain" ] && echo "$p"
  done
}

# same_state A.h5 B.h5: every /state dataset bitwise equal (and the same set of names).
same_state() {
  "$PY" - "$1" "$2" <<'EOF'
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r") for p in sys.argv[1:3])
na, nb = set(a["state"].keys()), set(b["state"].keys())
if na != nb:
    sys.exit(f"different /state names: {sorted(na ^ nb)[:5]}")
bad = [k for k in sorted(na) if a["state"][k].shape != b["state"][k].shape or
       a["state"][k][()].tobytes() != b["state"][k][()].tobytes()]
if bad:
    sys.exit(f"{len(bad)} of {len(na)} /state datasets differ, e.g. {bad[:3]}")
print(f"  {len(na)} /state datasets bitwise equal")
EOF
}

# loadable_finite FILE: opens with h5py, done=1 where the schema has it, every /state finite.
loadable_finite() {
  "$PY" - "$1" <<'EOF'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    if "done" in f.attrs and int(f.attrs["done"]) != 1:
        sys.exit(f"{sys.argv[1]}: done != 1")
    names = list(f["state"].keys())
    bad = [k for k in names if not np.all(np.isfinite(f["state"][k][()]))]
    if not names or bad:
        sys.exit(f"{sys.argv[1]}: {len(bad)} non-finite /state datasets of {len(names)}")
print(f"  {sys.argv[1]}: loadable, {len(names)} finite /state datasets")
EOF
}

# kill_job_rank VICTIM_PID RANK_PIDS...: kill -9 one rank of the job started by pretrain_bg
# and wait until the whole job has ended (mpirun returned, no rank process left). Sets
# JOB_RC (mpirun's exit code) and JOB_END_S (seconds from the kill to the end); fails after
# 30 s (a hang: a watchdog then kills what is left, so the test ends).
kill_job_rank() {
  local victim="$1" t0 watchdog p alive
  shift
  t0=$(date +%s.%N)
  kill -9 "$victim"
  ( sleep 30; kill -9 "$MPIRUN_PID" "$@" 2>/dev/null ) &
  watchdog=$!
  wait "$MPIRUN_PID"
  JOB_RC=$?
  while :; do
    alive=()
    for p in "$@"; do
      kill -0 "$p" 2>/dev/null && [ "$(awk '{print $3}' /proc/"$p"/stat 2>/dev/null)" != Z ] && alive+=("$p")
    done
    [ ${#alive[@]} -eq 0 ] && break
    (( $(echo "$(date +%s.%N) - $t0 < 30" | bc) )) || fail "rank pid(s) ${alive[*]} still alive 30 s after the kill"
    sleep 0.1
  done
  JOB_END_S=$(echo "$(date +%s.%N) - $t0" | bc)
  kill "$watchdog" 2>/dev/null
  wait "$watchdog" 2>/dev/null
  return 0
}

# no_tmp_files DIR: nothing named *.tmp* anywhere below DIR.
no_tmp_files() {
  local left
  left="$(find "$1" -name '*.tmp*' | head -5)"
  [ -z "$left" ] || fail "temporary files left: $left"
}

# one_error_line TOOL LOG: exactly one "<tool>: error:" line in LOG; echoes it.
one_error_line() {
  local n
  n="$(grep -c "^$1: error:" "$2")"
  [ "$n" -eq 1 ] || { cat "$2" >&2; fail "$n '$1: error:' lines in $2, expected 1"; }
  grep "^$1: error:" "$2"
}

# expect_error TOOL RC WANT_RC LOG PATTERN: RC is WANT_RC and LOG holds exactly one
# "<tool>: error:" line, which matches the grep pattern PATTERN; echoes the line. Use as
# line="$(expect_error ...)" || exit 1.
expect_error() {
  local tool="$1" rc="$2" want="$3" log="$4" pattern="$5" line
  line="$(one_error_line "$tool" "$log")" || exit 1
  [ "$rc" -eq "$want" ] || { cat "$log" >&2; fail "$tool: exit $rc, expected $want: $line"; }
  echo "$line" | grep -q -- "$pattern" || fail "$tool: the error does not match '$pattern': $line"
  echo "$line"
}
