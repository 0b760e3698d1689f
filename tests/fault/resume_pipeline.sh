#!/usr/bin/env bash
# pipelines/run_local.sh killed (SIGKILL, the whole process group) during pretrain, then run
# again: the finished shard stage is skipped, pretrain resumes from its checkpoint, the run
# completes. A third run skips every stage; a change to one section re-runs that stage and
# those after it only; a replaced output makes its stage run again. --np is validated.
. "$SIEVE_SOURCE_DIR/tests/fault/fault_common.bash"
dir="$(scratch resume_pipeline)"
cd "$root"
# Sweep batches of at most 32: the fourth run's filter change lets this 2-epoch, near-chance
# extractor's detectors flag a different share of the 240 samples (up to ~75 %, more with
# other BLAS kernels), and a batch larger than the filtered arm is refused, by design.
sets=(--set run.dir="$dir/run" --set pretrain.epochs=2 --set pretrain.checkpoint.every_steps=2
      --set pretrain.holdout=0 --set scaled.epochs=1 --set "scaled.sweep.global_batch=[16,32]")
run() { pipelines/run_local.sh configs/tiny.yaml --np 2 "${sets[@]}" "$@"; }

# 1. Killed during pretrain, after its first checkpoint.
SIEVE_DEBUG_STEP_DELAY_MS=150 setsid bash -c 'run() { pipelines/run_local.sh "$@"; }; run "$@"' _ \
  configs/tiny.yaml --np 2 "${sets[@]}" > "$dir/first.log" 2>&1 &
pid=$!
wait_for_checkpoint "$dir/run" 2 120 || { cat "$dir/first.log"; fail "no pretrain checkpoint"; }
kill -9 -- -"$pid"
wait "$pid" 2>/dev/null
sleep 1
[ -e "$dir/run/pretrain/model.h5" ] && fail "pretrain finished before the kill"
[ -e "$dir/run/logs/shard.done" ] || fail "the finished shard stage has no record"
[ -e "$dir/run/logs/pretrain.done" ] && fail "the killed pretrain stage is recorded as done"

# 2. Re-run: shard skipped, pretrain resumed, the rest run.
run > "$dir/second.log" 2>&1 || { cat "$dir/second.log"; fail "re-run after the kill failed"; }
grep -q "\[shard\] current" "$dir/second.log" || { cat "$dir/second.log"; fail "shard was not skipped"; }
grep -q "\[pretrain\] interrupted earlier" "$dir/second.log" || { cat "$dir/second.log"; fail "pretrain not resumed"; }
grep -q "resuming from .*ckpt-" "$dir/run/logs/pretrain.log" || { cat "$dir/run/logs/pretrain.log"; fail "pretrain did not continue from its checkpoint"; }
[ -e "$dir/run/report/index.html" ] || fail "no report after the re-run"

# 3. Nothing changed: every stage skipped, no output touched.
before="$(stat -c '%n %Y' "$dir/run/dataset.h5" "$dir/run/filter.h5" "$dir/run/report/index.html")"
run > "$dir/third.log" 2>&1 || { cat "$dir/third.log"; fail "third run failed"; }
n="$(grep -c "current (outputs, config and inputs unchanged): skipped" "$dir/third.log")"
[ "$n" -eq 7 ] || { cat "$dir/third.log"; fail "expected 7 skipped stages, got $n"; }
[ "$before" = "$(stat -c '%n %Y' "$dir/run/dataset.h5" "$dir/run/filter.h5" "$dir/run/report/index.html")" ] ||
  fail "a skipped stage rewrote its output"

# 4. A change to the filter section: filter, sweep and report run, the others are skipped.
run --set filter.knn.k=8 > "$dir/fourth.log" 2>&1 || { cat "$dir/fourth.log"; fail "fourth run failed"; }
for s in shard pretrain features embed; do
  grep -q "\[$s\] current" "$dir/fourth.log" || { cat "$dir/fourth.log"; fail "$s re-ran after a filter change"; }
done
for s in filter sweep report; do
  grep -q "\[$s\] current" "$dir/fourth.log" && { cat "$dir/fourth.log"; fail "$s skipped after a filter change"; }
done

# 5. An output replaced behind the runner's back (a tool run by hand) makes its stage and
#    the later ones run again.
sleep 1
touch "$dir/run/embedding.h5"
run --set filter.knn.k=8 > "$dir/fifth.log" 2>&1 || { cat "$dir/fifth.log"; fail "fifth run failed"; }
grep -q "\[features\] current" "$dir/fifth.log" || fail "features re-ran"
grep -q "\[embed\] current" "$dir/fifth.log" && { cat "$dir/fifth.log"; fail "a replaced embedding.h5 was taken as current"; }

# 6. --np is checked.
out="$(run --np 0 2>&1)" && fail "--np 0 accepted"
echo "$out" | grep -q -- "--np '0': expected a positive whole number" || fail "--np 0: wrong message: $out"
out="$(run --np 2x 2>&1)" && fail "--np 2x accepted"
echo "resume_pipeline: OK"
