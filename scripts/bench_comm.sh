#!/usr/bin/env bash
# Communication on this machine: (1) the OSU-style allreduce sweep and its latency/bandwidth
# fit (bench_core_allreduce) at each rank count; (2) pretrain with each comm.strategy at each
# rank count, traced (--trace), with the step time split into compute, exposed communication,
# data wait and optimizer (the trainer's own spans, summarised by scripts/trace_summary.py).
# Weak scaling: SIEVE_BENCH_PER_RANK samples per rank (default 32), so the global batch is
# 32 x ranks. Each (strategy, ranks) runs SIEVE_BENCH_REPEATS times (default 3, interleaved)
# and the trace with the shortest mean step is kept: on a shared machine a run that another
# job preempted says nothing about the strategy.
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
per_rank=${SIEVE_BENCH_PER_RANK:-32}
steps=${SIEVE_BENCH_STEPS:-8}
repeats=${SIEVE_BENCH_REPEATS:-3}
# 1 MiB buckets/pieces (DDP's first bucket): a narrow ResNet-18 is smaller than the 4 MiB
# default, and one bucket cannot overlap anything.
bucket_mb=${SIEVE_BENCH_BUCKET_MB:-1}
. "$here/env.sh"
# Ranks yield the core while they wait. Without it, 2 ranks on 2 cores busy-poll as if the
# cores were theirs, and any other process on this shared machine makes each exchange wait a
# scheduler tick (measured: 4 ms for a 4-byte allreduce at load 4, 1.7 us with yielding).
export OMPI_MCA_mpi_yield_when_idle=1
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

max_r=$(printf '%s\n' $ranks | sort -n | tail -1)
n=$((per_rank * max_r * steps))
"$build/tools/shard_dataset" --set run.dir="$dir" --set data.source=synthetic \
  --set data.synthetic.classes=10 --set data.synthetic.train_per_class=$((n / 10 + 1)) \
  --set data.synthetic.test_per_class=1 >/dev/null 2>&1
mkdir -p "$dir/reps"
for rep in $(seq "$repeats"); do
  for r in $ranks; do
    gb=$((per_rank * r))
    for s in buckets fusion-queue parameter-server; do
      rm -rf "$dir/pretrain"
      echo "## repeat $rep: pretrain resnet18 width $width, $per_rank per rank (global $gb), $steps steps, $r ranks, $s, bucket_mb $bucket_mb; load $(cut -d' ' -f1 /proc/loadavg)"
      OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 mpirun -n "$r" "$build/tools/pretrain" \
        --set run.dir="$dir" --set pretrain.model.arch=resnet18 --set pretrain.model.width="$width" \
        --set pretrain.epochs=1 --set pretrain.global_batch="$gb" --set pretrain.holdout=0 \
        --set pretrain.eval_every=0 --set pretrain.checkpoint.every_epochs=0 \
        --set pretrain.comm.strategy="$s" --set pretrain.comm.servers=1 \
        --set pretrain.comm.bucket_mb="$bucket_mb" \
        --trace "$dir/reps/trace-$s-np$r.rep$rep.json" >/dev/null 2>&1
    done
  done
done
# Keep the fastest repeat of each (strategy, ranks) under the name the report reads.
for f in "$dir"/reps/trace-*.rep1.json; do
  base=$(basename "$f" .rep1.json)
  best=$(for g in "$dir"/reps/"$base".rep*.json; do
    python3 "$here/trace_summary.py" "$g" | awk -F, -v f="$g" 'NR == 2 {print $3, f}'
  done | sort -n | head -1 | cut -d' ' -f2)
  cp "$best" "$out/$base.json"
done
python3 "$here/trace_summary.py" "$out"/trace-*-np*.json | tee "$out/strategies.csv"
