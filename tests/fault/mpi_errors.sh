#!/usr/bin/env bash
# Errors under MPI (issue 15): an error that every rank reaches is printed once (one
# "<tool>: error:" line, no "[rank r]", no MPI_ABORT or ORTE banner), every rank exits with
# the tool's code (1 runtime, 2 usage), the job ends at once, and a failed stage leaves no
# directory it created behind. Also: a bare word (a config file without --config) is a
# usage error, and a NaN in a CSV table is bad input naming the file and line at shard time.
. "$SIEVE_SOURCE_DIR/tests/fault/fault_common.bash"
dir="$(scratch mpi_errors)"
mkdir -p "$dir/run"

# case NAME NP TOOL EXPECTED_RC TEXT ARGS...: run TOOL on NP ranks; check one error line
# containing TEXT, exit EXPECTED_RC, no MPI noise, done within 20 s.
case_() {
  local name="$1" np="$2" tool="$3" want="$4" text="$5" rc line t0
  shift 5
  t0=$SECONDS
  (cd "$dir" && timeout 60 mpirun -n "$np" "$TOOLS/$tool" "$@") >"$dir/$name.log" 2>&1
  rc=$?
  line="$(one_error_line "$tool" "$dir/$name.log")" || exit 1
  echo "  $name (np $np): exit $rc in $((SECONDS - t0)) s: $line"
  [ "$rc" -eq "$want" ] || fail "$name: exit $rc, expected $want"
  echo "$line" | grep -qF -- "$text" || fail "$name: error does not say '$text'"
  echo "$line" | grep -q "\[rank" && fail "$name: error line names a rank"
  grep -qi "MPI_ABORT\|Primary job\|mpirun has exited\|mpirun detected" "$dir/$name.log" &&
    { cat "$dir/$name.log"; fail "$name: MPI banner in the output"; }
  [ $((SECONDS - t0)) -lt 20 ] || fail "$name: took $((SECONDS - t0)) s"
}

case_ missing_input 2 reduce_dims 1 "$dir/run/features.h5: no such file" \
  --config "$CONFIG" --set run.dir="$dir/run"
case_ missing_input_np3 3 extract_features 1 "$dir/run/pretrain/model.h5" \
  --config "$CONFIG" --set run.dir="$dir/run"
case_ bad_key 3 pretrain 2 "nope.key" --config "$CONFIG" --set nope.key=1
case_ positional 2 shard_dataset 2 "unexpected argument '$CONFIG' (did you mean --config $CONFIG?)" \
  "$CONFIG" --set run.dir="$dir/run"
[ -e "$dir/run/dataset.h5" ] && fail "positional: a dataset was written"

# A failed training stage leaves no pretrain/, pretrain/checkpoints/ or sweep/run-N/ behind.
case_ pretrain_no_data 2 pretrain 1 "$dir/run/dataset.h5" --config "$CONFIG" --set run.dir="$dir/run"
case_ scaled_no_data 2 train_scaled 1 "$dir/run/dataset.h5" --config "$CONFIG" \
  --set run.dir="$dir/run" --sweep-index 1
left="$(find "$dir/run" -mindepth 1 -type d)"
[ -z "$left" ] || fail "failed stages left directories: $left"
# ... nor a run directory that shard_dataset created for a failed run.
case_ shard_bad_input 2 shard_dataset 1 "no-such-dir" --config "$CONFIG" \
  --set run.dir="$dir/new/run" --set data.source=cifar10 --input "$dir/no-such-dir"
[ -e "$dir/new" ] && fail "shard_dataset left $dir/new"

# NaN in a CSV feature: bad input at shard time, naming file and line.
printf 'a,b,label\n1,2,x\n3,nan,y\n4,5,x\n6,7,y\n' >"$dir/nan.csv"
case_ csv_nan 2 shard_dataset 1 "nan.csv:3: column 'b': 'nan' is not a number" \
  --set data.source=csv --set data.csv.label_column=label --input nan.csv -o "$dir/nan.h5"
[ -e "$dir/nan.h5" ] && fail "csv_nan: output written"
no_tmp_files "$dir"
echo "mpi_errors: OK"
