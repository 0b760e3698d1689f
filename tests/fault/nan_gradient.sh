#!/usr/bin/env bash
# A NaN injected into a gradient at step S of a 2-rank pretrain (SIEVE_DEBUG_NAN_STEP, on
# rank 0 only: the other rank learns of it through the per-step all-reduce): the job stops
# in that very step with exit 1 and one error line naming step S and the last good
# checkpoint; that checkpoint is the newest one, of a step <= S, complete and finite; no
# model.h5 and no checkpoint of a later step is written.
. "$SIEVE_SOURCE_DIR/tests/fault/fault_common.bash"
dir="$(scratch nan_gradient)"
make_dataset "$dir"
S=$((5 + RANDOM % 6))  # 5..10: after checkpoints 2 and 4, inside or across an epoch boundary
SIEVE_DEBUG_NAN_STEP=$S pretrain_fg "$dir" "$dir/nan.log"
rc=$?
echo "  NaN at step $S: exit $rc"
[ "$rc" -eq 1 ] || { cat "$dir/nan.log"; fail "exit $rc, expected 1"; }
# Both ranks detect it through the all-reduce; rank 0 alone reports it (one line).
msg="$(one_error_line pretrain "$dir/nan.log")" || exit 1
echo "  $msg"
echo "$msg" | grep -q "divergence at step $S " || fail "error does not name step $S"
echo "$msg" | grep -q "non-finite gradient" || fail "error does not say non-finite gradient"
newest="$(ls "$dir/pretrain/checkpoints"/ckpt-*.h5 | sort | tail -1)"
[ -n "$newest" ] || fail "no checkpoint left"
echo "$msg" | grep -q "last good checkpoint: $newest" || fail "error does not name $newest"
last_step=$((10#$(basename "$newest" .h5 | sed 's/ckpt-//')))
[ "$last_step" -le "$S" ] || fail "checkpoint of step $last_step > NaN step $S"
[ "$last_step" -ge $((S - 2)) ] || fail "newest checkpoint $last_step older than expected for S=$S"
loadable_finite "$newest" || fail "last good checkpoint not loadable/finite"
[ -e "$dir/pretrain/model.h5" ] && fail "model.h5 written despite divergence"
no_tmp_files "$dir/pretrain"
echo "nan_gradient: OK"
