#!/usr/bin/env bash
# A failed stage removes only the empty directories it made itself (issue 26, defect 5).
# While a pretrain runs, another process makes empty directories in the same run directory
# (a sibling sweep task's `sweep/run-4/checkpoints`, a user's `notes/`); the pretrain then
# fails (NaN at step 3). Its own `pretrain/` and `pretrain/checkpoints/` (empty, no
# checkpoint yet) go; the others' directories stay. The tool runner used to remove every
# empty directory that had not been there when it started.
. "$SIEVE_SOURCE_DIR/tests/fault/fault_common.bash"
dir="$(scratch foreign_dirs)"
run="$dir/run"
make_dataset "$run"
SIEVE_DEBUG_NAN_STEP=3 SIEVE_DEBUG_STEP_DELAY_MS=300 "$TOOLS/pretrain" --config "$CONFIG" \
  --set run.dir="$run" "${TRAIN_SETS[@]}" --set pretrain.checkpoint.every_steps=0 \
  >"$dir/pretrain.log" 2>&1 &
pid=$!
for _ in $(seq 1 1000); do
  [ -d "$run/pretrain/checkpoints" ] && break
  sleep 0.01
done
[ -d "$run/pretrain/checkpoints" ] || { cat "$dir/pretrain.log"; fail "pretrain made no checkpoints/"; }
mkdir -p "$run/sweep/run-4/checkpoints" "$run/notes"
wait "$pid"
line="$(expect_error pretrain $? 1 "$dir/pretrain.log" "divergence at step 3")" || exit 1
echo "  pretrain: exit 1: $line"
for d in sweep/run-4/checkpoints notes; do
  [ -d "$run/$d" ] || fail "$d, made by another process, was removed"
done
[ -e "$run/pretrain" ] && fail "pretrain/ (made by the failed run, empty) was left: $(ls -A "$run/pretrain")"
echo "foreign_dirs: OK"
