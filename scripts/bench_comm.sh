#!/usr/bin/env bash
# Communication on this machine: (1) the OSU-style allreduce sweep and its latency/bandwidth
# fit (bench_core_allreduce) at each rank count; (2) pretrain with each comm.strategy at each
# rank count, traced (--trace), with the step time split into compute, exposed communication,
# data wait and optimizer (the trainer's own spans, summarised by scripts/trace_summary.py).
#
#   scripts/bench_comm.sh [build_dir=build] [out_dir=bench-comm] [ranks="2 4"] [width=0.25]
#
# Writes out_dir/calibration-np<R>.json (sieve.comm_calibration/1, what
# report.network.calibration reads), out_dir/trace-<strategy>-np<R>.json and
# out_dir/strategies.csv; report.comm.bench_dir=out_dir puts them in the report.
# One OpenMP thread per rank: more ranks than cores oversubscribe (the script says by how much).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
out=${2:-bench-comm}
ranks=${3:-"2 4"}
width=${4:-0.25}
gb=${SIEVE_BENCH_BATCH:-64}
steps=${SIEVE_BENCH_STEPS:-8}
. "$here/env.sh"
mkdir -p "$out"
out=$(cd "$out" && pwd)
cores=$(nproc)
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo "# $cpu, $cores cores; load average now: $(cut -d' ' -f1-3 /proc/loadavg)"

for r in $ranks; do
  echo "## allreduce sweep, $r ranks on $cores cores ($(awk -v r=$r -v c=$cores 'BEGIN {printf "%.1fx", r / c}') oversubscribed)"
  OMP_NUM_THREADS=1 mpirun -n "$r" "$build/bench/bench_core_allreduce" "$out/calibration-np$r.json" \
    $((16 << 20)) "$cpu; $r ranks on $cores cores"
done

n=$((gb * steps))
"$build/tools/shard_dataset" --set run.dir="$dir" --set data.source=synthetic \
  --set data.synthetic.classes=10 --set data.synthetic.train_per_class=$((n / 10 + 1)) \
  --set data.synthetic.test_per_class=1 >/dev/null 2>&1
for r in $ranks; do
  for s in buckets fusion-queue parameter-server; do
    rm -rf "$dir/pretrain"
    echo "## pretrain resnet18 width $width, global batch $gb, $steps steps, $r ranks, $s"
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 mpirun -n "$r" "$build/tools/pretrain" \
      --set run.dir="$dir" --set pretrain.model.arch=resnet18 --set pretrain.model.width="$width" \
      --set pretrain.epochs=1 --set pretrain.global_batch="$gb" --set pretrain.holdout=0 \
      --set pretrain.eval_every=0 --set pretrain.checkpoint.every_epochs=0 \
      --set pretrain.comm.strategy="$s" --set pretrain.comm.servers=1 \
      --trace "$out/trace-$s-np$r.json" >/dev/null 2>&1
  done
done
python3 "$here/trace_summary.py" "$out"/trace-*-np*.json | tee "$out/strategies.csv"
