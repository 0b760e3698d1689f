#!/usr/bin/env bash
# Issue 26, defect 10: which stages pipelines/run_local.sh takes as current. A stage's key
# holds exactly the config sections it reads, its inputs' fingerprints and, for shard, the
# source file's: (a) the CSV source edited under the same config rebuilds dataset.h5 (it
# used to be kept: "inputs unchanged"); (b) a change to scaled.sweep alone re-runs only the
# sweep and the report (it used to re-run all seven stages); (c) a report-only key re-runs
# only the report. A small generated CSV, one rank, 1 epoch: about 10 s a pipeline.
set -euo pipefail
root="${SIEVE_SOURCE_DIR:?}"
. "$root/scripts/env.sh"
dir="$SIEVE_BUILD_DIR/test-scratch/pipeline_run_local_current"
rm -rf "$dir"
mkdir -p "$dir"
cd "$root"
fail() { echo "FAIL: $*" >&2; exit 1; }
# 3 classes of 50 rows, 4 features, fixed seed.
/usr/bin/python3 - "$dir/source.csv" <<'EOF'
import random, sys
rng = random.Random(26)
with open(sys.argv[1], "w") as f:
    f.write("a,b,c,d,label\n")
    for k, name in enumerate(["x", "y", "z"]):
        for _ in range(50):
            f.write(",".join(f"{rng.gauss(2 * k + j % 2, 0.6) + 10:.2f}" for j in range(4)) + f",{name}\n")
EOF
sets=(--set run.dir="$dir/run" --set data.source=csv --set data.path="$dir/source.csv"
      --set pretrain.model.arch=mlp --set 'pretrain.model.hidden=[16]' --set pretrain.epochs=1
      --set scaled.epochs=1 --set 'scaled.sweep={global_batch: [16], arm: [full, filtered]}')
run() {  # LOG [args]: the pipeline on one rank; fails the test with the log when it fails
  local log="$dir/$1.log"
  shift
  pipelines/run_local.sh configs/tiny.yaml --np 1 "${sets[@]}" "$@" >"$log" 2>&1 ||
    { cat "$log"; fail "run_local.sh failed ($log)"; }
}
# ran LOG: the stages that ran (were not skipped as current), in order, on one line.
ran() {
  local s out=""
  for s in shard pretrain features embed filter sweep report; do
    grep -q "^run_local: \[$s\] current" "$dir/$1.log" || out+="$s "
  done
  echo "${out% }"
}
expect() {  # LOG "stages that must have run"
  [ "$(ran "$1")" = "$2" ] || { cat "$dir/$1.log"; fail "$1: ran '$(ran "$1")', expected '$2'"; }
  echo "  $1: ran ${2:-nothing}"
}
fingerprint() {
  /usr/bin/python3 -c 'import h5py, sys; print(h5py.File(sys.argv[1], "r").attrs["fingerprint"])' \
    "$dir/run/dataset.h5"
}

run first
expect first "shard pretrain features embed filter sweep report"
run same
expect same ""

# (a) The source edited in place, same size, same config: a new dataset, and everything
#     made from it again.
fp_before="$(fingerprint)"
size_before="$(stat -c %s "$dir/source.csv")"
sed -i '3s/,x$/,y/' "$dir/source.csv"  # a label changed, one byte for one byte
[ "$(stat -c %s "$dir/source.csv")" = "$size_before" ] || fail "the edit changed the source's size"
run source_edited
expect source_edited "shard pretrain features embed filter sweep report"
[ "$(fingerprint)" != "$fp_before" ] || fail "dataset.h5 was not rebuilt from the edited source"

# (b) Only the sweep grid changes: the sweep and the report run, nothing before them.
sets+=(--set 'scaled.sweep={global_batch: [16], arm: [full, filtered, random]}')
run grid_changed
expect grid_changed "sweep report"
[ -s "$dir/run/sweep/run-2/result.json" ] || fail "the new grid's run 2 was not trained"

# (c) A key only the report reads: the report alone.
run title_changed --set report.title=Other
expect title_changed "report"
echo "run_local_current: OK"
