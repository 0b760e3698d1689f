#!/usr/bin/env bash
# Disk full mid-write, simulated with a file size limit on the ranks (`ulimit -f`, SIGXFSZ
# ignored so that writes fail with EFBIG instead of killing the process), 2-rank pretrain:
#  A. a later checkpoint cannot be written: exit 1, one error line naming the checkpoint,
#     the previous checkpoint intact and loadable, no file under the new checkpoint's name,
#     no model.h5, no temporary file left;
#  B. the final model cannot be written over an existing one (--overwrite): exit 1, one
#     error line naming model.h5, the old model.h5 byte-identical and loadable;
#  C. the early-learning model (pretrain.holdout > 0) cannot be written at the first
#     held-out peak: exit 1, one error line naming model_early.h5, no model_early.h5, no
#     model.h5, no temporary file left.
. "$SIEVE_SOURCE_DIR/tests/fault/fault_common.bash"
dir="$(scratch disk_full)"
make_dataset "$dir"

# A: stop at step 4 (SIGUSR1 hook) to get a complete checkpoint, then resume with a limit
# below a checkpoint's size: the checkpoint of step 6 fails.
SIEVE_DEBUG_SIGNAL_STEP=3 pretrain_fg "$dir" "$dir/a1.log"
rc=$?
[ "$rc" -eq 75 ] || { cat "$dir/a1.log"; fail "A: stop run exit $rc, expected 75"; }
ck="$dir/pretrain/checkpoints/ckpt-000000004.h5"
[ -e "$ck" ] || { ls "$dir/pretrain/checkpoints"; fail "A: $ck missing"; }
ck_sum="$(sha256sum <"$ck")"
ck_kb=$(($(stat -c %s "$ck") / 1024))
limit=$((ck_kb / 2))
echo "  checkpoint ${ck_kb} KiB; file size limit ${limit} KiB"
FSIZE_LIMIT_KB=$limit pretrain_fg "$dir" "$dir/a2.log" --resume
rc=$?
line="$(one_error_line pretrain "$dir/a2.log")" || exit 1
echo "  A: exit $rc: $line"
[ "$rc" -eq 1 ] || { cat "$dir/a2.log"; fail "A: exit $rc, expected 1"; }
echo "$line" | grep -q "ckpt-000000006.h5" || fail "A: error does not name ckpt-000000006.h5"
[ -e "$dir/pretrain/checkpoints/ckpt-000000006.h5" ] && fail "A: ckpt-000000006.h5 exists"
[ -e "$dir/pretrain/model.h5" ] && fail "A: model.h5 exists"
[ "$(sha256sum <"$ck")" = "$ck_sum" ] || fail "A: previous checkpoint changed"
loadable_finite "$ck" || fail "A: previous checkpoint not loadable"
no_tmp_files "$dir/pretrain"
# ... and it still resumes once there is room again.
pretrain_fg "$dir" "$dir/a3.log" --resume || { cat "$dir/a3.log"; fail "A: resume with room failed"; }
grep -q "resuming from $ck" "$dir/a3.log" || fail "A: did not resume from $ck"

# B: final model over an existing one, no checkpoints, limit below the model's size.
model="$dir/pretrain/model.h5"
model_sum="$(sha256sum <"$model")"
limit=$(($(stat -c %s "$model") / 1024 / 2))
FSIZE_LIMIT_KB=$limit pretrain_fg "$dir" "$dir/b.log" --overwrite --set pretrain.epochs=1 \
  --set pretrain.checkpoint.every_steps=0 --set pretrain.checkpoint.every_epochs=0
rc=$?
line="$(one_error_line pretrain "$dir/b.log")" || exit 1
echo "  B: exit $rc: $line"
[ "$rc" -eq 1 ] || { cat "$dir/b.log"; fail "B: exit $rc, expected 1"; }
echo "$line" | grep -q "model.h5" || fail "B: error does not name model.h5"
[ "$(sha256sum <"$model")" = "$model_sum" ] || fail "B: existing model.h5 changed"
loadable_finite "$model" || fail "B: existing model.h5 not loadable"
no_tmp_files "$dir/pretrain"

# C: a fresh run (it first removes B's outputs' early model, if any) with a held-out part.
rm -f "$dir/pretrain/model.h5"
limit=$(($(stat -c %s "$ck") / 1024 / 4))
FSIZE_LIMIT_KB=$limit pretrain_fg "$dir" "$dir/c.log" --overwrite --set pretrain.holdout=0.2 \
  --set pretrain.checkpoint.every_steps=0 --set pretrain.checkpoint.every_epochs=0
rc=$?
line="$(one_error_line pretrain "$dir/c.log")" || exit 1
echo "  C: exit $rc: $line"
[ "$rc" -eq 1 ] || { cat "$dir/c.log"; fail "C: exit $rc, expected 1"; }
echo "$line" | grep -q "model_early.h5" || fail "C: error does not name model_early.h5"
[ -e "$dir/pretrain/model_early.h5" ] && fail "C: model_early.h5 exists"
[ -e "$dir/pretrain/model.h5" ] && fail "C: model.h5 exists"
no_tmp_files "$dir/pretrain"
echo "disk_full: OK"
