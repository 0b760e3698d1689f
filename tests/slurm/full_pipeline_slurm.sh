#!/usr/bin/env bash
# The real job scripts on a real single-node Slurm (label slurm):
#  1. `slurm/full_pipeline.sh configs/tiny.yaml --wait` runs the whole chain (afterok, the
#     sweep as a job array, the report after it); every stage's outputs are then checked.
#     With pretrain.folds=2: the main model's job, then the fold models as a job array of
#     two tasks, whose models extract_features then scores the training samples with.
#  2. A training job requeued while it runs resumes from its checkpoint.
#  3. A failing stage stops the chain: later jobs are cancelled and its log is named.
set -uo pipefail
SRC="${SIEVE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
[ "$(id -u)" -eq 0 ] || { echo "skip: needs root"; exit 77; }
for b in slurmctld slurmd munged sbatch srun; do
  command -v "$b" >/dev/null || { echo "skip: $b not installed"; exit 77; }
done
. "$SRC/scripts/env.sh"
. "$SRC/tests/slurm/slurm_common.bash"
slurm_test_setup pipeline "${SIEVE_SLURM_PIPELINE_PORT:-6847}"
"$SRC/scripts/slurm_local.sh" start || fail "could not start the local Slurm"
. "$SIEVE_SLURM_DIR/env.sh"
cd "$SRC"

# 1. the whole chain
run="$WORK/ok"
timeout 900 slurm/full_pipeline.sh configs/tiny.yaml --wait --set run.dir="$run" \
  --set pretrain.folds=2 > "$WORK/ok.out" 2>&1 || { cat "$WORK/ok.out"; fail "pipeline did not complete"; }
cat "$WORK/ok.out"
grep -q "all stages completed" "$WORK/ok.out" || fail "no completion line"
/usr/bin/python3 tests/support/check_run.py "$run" --sweep-runs 6 || fail "outputs incomplete"
ls "$run"/logs/tiny-sweep-*_[0-9].out >/dev/null 2>&1 || fail "sweep logs do not follow %x-%A_%a"
ls "$run"/logs/tiny-pretrain-[0-9]*.out >/dev/null 2>&1 || fail "stage logs do not follow %x-%j"
grep -q "folds -> job" "$WORK/ok.out" || fail "no fold job array submitted"
for k in 0 1; do
  ls "$run"/logs/tiny-folds-*_$k.out >/dev/null 2>&1 || fail "no log of fold task $k"
  [ -f "$run/pretrain/model_fold${k}_early.h5" ] || fail "fold model $k missing"
done
grep -q "fold models: pretrain --fold k" "$run"/logs/tiny-pretrain-[0-9]*.out ||
  fail "the pretrain job trained the fold models itself"
[ -f "$run/pretrain/model_folds.json" ] || fail "no fold record after the fold array"
/usr/bin/python3 -c 'import h5py, sys; f = h5py.File(sys.argv[1], "r"); sys.exit(f.attrs["probs_source"] != "out_of_fold")' \
  "$run/features.h5" || fail "extract_features did not score out of fold"

# 2. requeue a running pretrain job: it must resume from its checkpoint
run2="$WORK/requeue"
mkdir -p "$run2/logs"
cp -r "$run/dataset.h5" "$run2/"
jid=$(sbatch --parsable --export=ALL,SIEVE_ROOT="$SRC" --requeue --ntasks=2 -J tiny-pretrain \
      -o "$run2/logs/%x-%j.out" slurm/stage.sh pretrain --config configs/tiny.yaml \
      --set run.dir="$run2" --set pretrain.epochs=30 --set pretrain.checkpoint.every_epochs=1)
t0=$SECONDS
until ls "$run2"/pretrain/checkpoints/*.h5 >/dev/null 2>&1 || ls "$run2"/pretrain/*ckpt*.h5 >/dev/null 2>&1; do
  [ $((SECONDS - t0)) -lt 300 ] || fail "no checkpoint appeared"
  sleep 1
done
scontrol requeue "$jid" || fail "scontrol requeue failed"
t0=$SECONDS
while squeue -h -j "$jid" 2>/dev/null | grep -q .; do
  [ $((SECONDS - t0)) -lt 600 ] || fail "requeued job did not finish"
  sleep 2
done
log2="$(ls "$run2"/logs/tiny-pretrain-"$jid".out)"
grep -q "restart 1" "$log2" || fail "job was not restarted: $(tail -5 "$log2")"
grep -qi "resum" "$log2" || fail "restarted job did not resume from a checkpoint"
[ -f "$run2/pretrain/model.h5" ] || fail "requeued training did not finish"
echo "ok: requeued training resumed from its checkpoint"

# 3. a failing stage stops the chain
run3="$WORK/fail"
out="$(timeout 600 slurm/full_pipeline.sh configs/tiny.yaml --wait --set run.dir="$run3" \
        --set embed.tsne.perplexity=500 --set pretrain.epochs=1 2>&1)"
rc=$?
echo "$out" | tail -3
[ $rc -ne 0 ] || fail "chain with a failing stage reported success"
echo "$out" | grep -q "stage 'embed'.*log: .*tiny-embed-" || fail "failing stage log not named"
[ ! -e "$run3/filter.h5" ] || fail "a stage after the failed one ran"
echo "full_pipeline_slurm: OK"
