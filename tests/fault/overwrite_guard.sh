#!/usr/bin/env bash
# --overwrite replaces only a tool's own previous output (issue 15): never the run
# directory (`report --output RUN --overwrite` used to leave only the report), never a file
# that is no Sieve output, never an input of the same invocation (`extract_features
# --output RUN/dataset.h5 --overwrite` used to replace the dataset with features), and a
# previous output of the same kind still is replaced. Each refusal: one error line naming
# the path (also with 2 ranks, without an MPI_ABORT banner), a non-zero exit, and every
# file in the run directory byte-identical.
. "$SIEVE_SOURCE_DIR/tests/fault/fault_common.bash"
dir="$(scratch overwrite_guard)"
run="$dir/run"
make_dataset "$run"
# (2 threads: pretrain with OMP_NUM_THREADS=1 once crashed in oneDNN at dadeb27; 5 runs of this
# command with 1 thread passed at 3014004, so the note is history, and 2 threads stay.)
OMP_NUM_THREADS=2 "$TOOLS/pretrain" --config "$CONFIG" --set run.dir="$run" --set pretrain.epochs=1 \
  >"$dir/pretrain.log" 2>&1 || { cat "$dir/pretrain.log"; fail "pretrain failed"; }
echo "my notes" >"$run/notes.txt"
snapshot() { (cd "$run" && find . -type f | LC_ALL=C sort | xargs md5sum); }
before="$(snapshot)"

# refused NAME TOOL EXPECTED_RC WHAT_TO_NAME CMD...: one error line naming WHAT_TO_NAME,
# exit EXPECTED_RC, no banner, the run directory unchanged.
refused() {
  local name="$1" tool="$2" want="$3" what="$4" rc line
  shift 4
  timeout 120 "$@" >"$dir/$name.log" 2>&1
  rc=$?
  line="$(one_error_line "$tool" "$dir/$name.log")" || exit 1
  echo "  $name: exit $rc: $line"
  [ "$rc" -eq "$want" ] || fail "$name: exit $rc, expected $want"
  echo "$line" | grep -qF "$what" || fail "$name: error does not name $what"
  ! grep -q "MPI_ABORT\|mpirun has exited\|Primary job" "$dir/$name.log" ||
    { cat "$dir/$name.log"; fail "$name: MPI noise in the output"; }
  [ "$(snapshot)" = "$before" ] || fail "$name: the run directory changed"
  no_tmp_files "$dir"
}

refused report_run_dir report 2 "$run" \
  "$TOOLS/report" --config "$CONFIG" --set run.dir="$run" --output "$run" --overwrite
refused report_run_dir_np2 report 2 "$run" \
  mpirun -n 2 "$TOOLS/report" --config "$CONFIG" --set run.dir="$run" --output "$run" --overwrite
refused report_parent report 2 "$dir" \
  "$TOOLS/report" --config "$CONFIG" --set run.dir="$run" --output "$dir" --overwrite
refused shard_foreign shard_dataset 2 "$run/notes.txt" \
  "$TOOLS/shard_dataset" --config "$CONFIG" --output "$run/notes.txt" --overwrite
refused shard_model shard_dataset 2 "$run/pretrain/model.h5" \
  mpirun -n 2 "$TOOLS/shard_dataset" --config "$CONFIG" --output "$run/pretrain/model.h5" --overwrite
refused reduce_input reduce_dims 2 "$run/dataset.h5" \
  "$TOOLS/reduce_dims" --config "$CONFIG" --input "$run/dataset.h5" --output "$run/dataset.h5" --overwrite
refused features_over_dataset extract_features 1 "$run/dataset.h5" \
  mpirun -n 2 "$TOOLS/extract_features" --config "$CONFIG" --set run.dir="$run" \
  --output "$run/dataset.h5" --overwrite
refused pretrain_over_dataset pretrain 2 "$run/dataset.h5" \
  "$TOOLS/pretrain" --config "$CONFIG" --set run.dir="$run" --set pretrain.epochs=1 \
  --output "$run/dataset.h5" --overwrite

# A tool's own previous output is still replaced: features twice, a report twice.
for i in 1 2; do
  "$TOOLS/extract_features" --config "$CONFIG" --set run.dir="$run" --overwrite \
    >"$dir/features$i.log" 2>&1 || { cat "$dir/features$i.log"; fail "extract_features $i failed"; }
  "$TOOLS/report" --config "$CONFIG" --set run.dir="$run" --overwrite \
    >"$dir/report$i.log" 2>&1 || { cat "$dir/report$i.log"; fail "report $i failed"; }
done
[ -f "$run/report/index.html" ] || fail "no report/index.html"
[ "$(cat "$run/notes.txt")" = "my notes" ] || fail "notes.txt changed"
(cd "$run" && md5sum -c --quiet <<<"$before") || fail "an input changed while writing outputs"
no_tmp_files "$dir"
echo "overwrite_guard: OK"
