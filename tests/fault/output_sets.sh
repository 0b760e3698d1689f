#!/usr/bin/env bash
# A re-run replaces a stage's outputs as one set (issue 26, defect 3). pretrain's set
# (model.h5, model_early.h5 + .json, metrics.jsonl, the config sidecar) stays byte-identical
# when `pretrain --overwrite` fails (NaN at step 3: before the new early model; at step 8:
# after it) or is stopped by Ctrl-C after its first epoch: these used to delete the early
# model and empty metrics.jsonl, or leave the new run's early model beside the old model.h5.
# --resume then completes the interrupted run as a whole new set (one run_id in both
# models), and extract_features refuses an early and a final model of different runs.
. "$SIEVE_SOURCE_DIR/tests/fault/fault_common.bash"
dir="$(scratch output_sets)"
run="$dir/run"
make_dataset "$run"
# 240 samples, 20 % held out: 6 steps per epoch; an early model at the end of epoch 1.
P=(--set pretrain.epochs=2 --set pretrain.holdout=0.2 --set pretrain.checkpoint.every_steps=2)
pre() { "$TOOLS/pretrain" --config "$CONFIG" --set run.dir="$run" "${P[@]}" "$@"; }
set_sums() {
  (cd "$run/pretrain" && md5sum model.h5 model_early.h5 model_early.json metrics.jsonl model.config.yaml)
}
run_ids() {  # the run_id of model.h5 and of model_early.h5
  "$PY" - "$run/pretrain" <<'EOF'
import sys, h5py
for n in ("model.h5", "model_early.h5"):
    with h5py.File(f"{sys.argv[1]}/{n}", "r") as f:
        v = f.attrs.get("run_id", b"")
        print(v.decode() if isinstance(v, bytes) else v, end=" ")
EOF
}
pre >"$dir/first.log" 2>&1 || { cat "$dir/first.log"; fail "first pretrain failed"; }
before="$(set_sums)" || fail "first run wrote no whole set"
read -r id_model id_early <<<"$(run_ids)"
[ -n "$id_model" ] && [ "$id_model" = "$id_early" ] || fail "run ids '$id_model' '$id_early'"
cp "$run/pretrain/model_early.h5" "$dir/first_early.h5"

for s in 3 8; do
  SIEVE_DEBUG_NAN_STEP=$s pre --overwrite >"$dir/nan$s.log" 2>&1
  rc=$?
  [ "$rc" -eq 1 ] || { cat "$dir/nan$s.log"; fail "NaN at step $s: exit $rc, expected 1"; }
  [ "$(set_sums)" = "$before" ] || fail "NaN at step $s: the previous set changed"
  echo "  NaN at step $s: exit 1, previous set byte-identical"
done

# Ctrl-C once the new run has its early model (end of epoch 1, staged).
set -m  # job control: the background job does not ignore SIGINT, as at a terminal
SIEVE_DEBUG_STEP_DELAY_MS=150 "$TOOLS/pretrain" --config "$CONFIG" --set run.dir="$run" "${P[@]}" \
  --overwrite >"$dir/int.log" 2>&1 &
pid=$!
# (the epoch hook logs "held-out acc" after staging the early model; the NaN run above left
# a staged one of its own, which the new run replaces when it starts)
for _ in $(seq 1 600); do
  grep -q "held-out acc" "$dir/int.log" && break
  sleep 0.02
done
grep -q "held-out acc" "$dir/int.log" || { cat "$dir/int.log"; fail "no early model staged"; }
kill -INT "$pid"
wait "$pid"
rc=$?
set +m
[ "$rc" -eq 130 ] || { cat "$dir/int.log"; fail "SIGINT: exit $rc, expected 130"; }
[ "$(set_sums)" = "$before" ] || fail "SIGINT after epoch 1: the previous set changed"
no_tmp_files "$run"
echo "  SIGINT after epoch 1: exit 130, previous set byte-identical"

pre --resume --overwrite >"$dir/resume.log" 2>&1 || { cat "$dir/resume.log"; fail "--resume failed"; }
grep -q "resuming from" "$dir/resume.log" || fail "did not resume"
read -r id_model id_early <<<"$(run_ids)"
[ "$id_model" = "$id_early" ] || fail "resumed set: run ids '$id_model' '$id_early'"
[ "$(set_sums)" != "$before" ] || fail "the resumed run did not replace the set"
[ -e "$run/pretrain/.pretrain.staging" ] && fail "staging directory left after the commit"
echo "  --resume: one new set (run $id_model)"

# A finished run resumed for one more epoch continues from its own committed set.
pre --resume --overwrite --set pretrain.epochs=3 >"$dir/more.log" 2>&1 ||
  { cat "$dir/more.log"; fail "--resume for a third epoch failed"; }
epochs="$("$PY" -c 'import json,sys; print([json.loads(l)["epoch"] for l in open(sys.argv[1])])' "$run/pretrain/metrics.jsonl")"
[ "$epochs" = "[1, 2, 3]" ] || fail "after a third epoch metrics.jsonl epochs are $epochs"
[ "$(run_ids)" = "$id_model $id_model " ] || fail "a third epoch changed the run ids to $(run_ids)"
echo "  --resume for a third epoch: metrics epochs $epochs, run $id_model"

# A mix made by hand (as a crash during the commit or an older Sieve could leave it).
cp "$dir/first_early.h5" "$run/pretrain/model_early.h5"
"$TOOLS/extract_features" --config "$CONFIG" --set run.dir="$run" >"$dir/mixed.log" 2>&1
line="$(expect_error extract_features $? 1 "$dir/mixed.log" "model_early.h5.*model.h5.*different runs")" || exit 1
echo "  mixed models: exit 1: $line"
[ -e "$run/features.h5" ] && fail "features.h5 written from a mixed set"
echo "output_sets: OK"
