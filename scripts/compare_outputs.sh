#!/usr/bin/env bash
# Does a change alter any output? Builds the programs of git revision REV (a worktree and a
# build directory under DIR, kept for the next comparison), runs the tiny pipeline with REV's
# programs and then with the current build (the same run directory for both, so that paths
# recorded in the files match): shard_dataset, pretrain with 2 fold models, extract_features,
# reduce_dims, cluster_filter, every run of the tiny sweep (2 ranks each but shard_dataset),
# and compares every HDF5 file and result.json of the two runs (scripts/compare_outputs.py:
# datasets bitwise, attributes and results except timings). Exit 0: no output changed.
#
#   scripts/compare_outputs.sh REV [--out DIR] [--set key=value ...]
#
# e.g. `scripts/compare_outputs.sh HEAD~1` after a refactor (issue 28: "outputs bitwise
# unchanged"). DIR defaults to bench-out/compare. Needs the current build (scripts/test.sh or
# cmake --build build) and python3-h5py (scripts/install_deps.sh installs it).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/scripts/env.sh"
case "${1:-}" in
  -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
  ""|-*) sed -n '2,14p' "$0" >&2; exit 2 ;;
esac
rev="$1"; shift
out="$root/bench-out/compare"
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --set) extra+=(--set "$2"); shift 2 ;;
    *) echo "compare_outputs: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
commit="$(git -C "$root" rev-parse --verify --quiet "$rev^{commit}")" ||
  { echo "compare_outputs: $rev: not a git revision of $root" >&2; exit 2; }
new_tools="$SIEVE_BUILD_DIR/tools"
tools=(shard_dataset pretrain extract_features reduce_dims cluster_filter train_scaled)
for t in "${tools[@]}"; do
  [ -x "$new_tools/$t" ] || { echo "compare_outputs: $new_tools/$t not built" >&2; exit 1; }
done
mkdir -p "$out"
out="$(cd "$out" && pwd)"

# REV's programs, built once per commit.
tree="$out/tree-${commit:0:12}" build="$out/build-${commit:0:12}"
if [ ! -d "$tree" ]; then
  git -C "$root" worktree add --detach "$tree" "$commit" >/dev/null
fi
echo "building ${commit:0:12}'s programs in $build (log: $build.log)"
if ! { cmake -S "$tree" -B "$build" -DCMAKE_BUILD_TYPE=Release &&
       cmake --build "$build" -j"$(nproc)" --target "${tools[@]}"; } >"$build.log" 2>&1; then
  echo "compare_outputs: building $commit failed (see $build.log)" >&2
  exit 1
fi

run_chain() {  # run_chain TOOLS: the tiny pipeline into $out/run
  local t="$1" dir="$out/run"
  rm -rf "$dir"
  mkdir -p "$dir"
  local cfg=(--config "$root/configs/tiny.yaml" --set "run.dir=$dir" --set pretrain.folds=2
             "${extra[@]}")
  {
    "$t/shard_dataset" "${cfg[@]}"
    mpiexec -n 2 "$t/pretrain" "${cfg[@]}"
    mpiexec -n 2 "$t/extract_features" "${cfg[@]}"
    mpiexec -n 2 "$t/reduce_dims" "${cfg[@]}"
    mpiexec -n 2 "$t/cluster_filter" "${cfg[@]}"
    mpiexec -n 2 "$t/train_scaled" "${cfg[@]}" --sweep-index all
  } >"$dir.log" 2>&1 || { echo "compare_outputs: the chain failed with $t (see $dir.log)" >&2; exit 1; }
}
for side in old new; do
  if [ "$side" = old ]; then run_chain "$build/tools"; else run_chain "$new_tools"; fi
  rm -rf "${out:?}/$side"
  mv "$out/run" "$out/$side"
  mv "$out/run.log" "$out/$side.log"
done
echo "comparing $out/old (${commit:0:12}) with $out/new (the current build)"
/usr/bin/python3 "$root/scripts/compare_outputs.py" "$out/old" "$out/new"
