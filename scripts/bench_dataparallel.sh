#!/usr/bin/env bash
# Data-parallel training throughput of `pretrain` (full loop: loader + augmentation on the
# prefetch thread, forward/backward, bucketed overlapping all-reduce, SGD) next to PyTorch
# DDP (gloo) on random tensors, CIFAR ResNet-18 (width 1), 32x32 images, same global batch.
# Two layouts of the same cores: 1 rank x T threads and T ranks x 1 thread.
#
#   scripts/bench_dataparallel.sh [build_dir=build] [global_batch=64] [threads=2]
#
# Sieve figure: images/s of pretrain's second epoch (metrics.jsonl; the first includes
# start-up). Peer: median step images/s of scripts/bench_dataparallel_torch.py.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
gb=${2:-64}
threads=${3:-2}
. "$here/env.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
n=$((gb * 4))  # 4 steps per epoch
"$build/tools/shard_dataset" --set run.dir="$dir" --set data.source=synthetic \
  --set data.synthetic.classes=10 --set data.synthetic.train_per_class=$((n / 10 + 1)) \
  --set data.synthetic.test_per_class=1 >/dev/null 2>&1
have_torch=0
/usr/bin/python3 -c "import torch" 2>/dev/null && have_torch=1
printf '%-22s %14s %14s %8s\n' layout sieve_img/s torch_ddp_img/s ratio
for layout in "1 $threads" "$threads 1"; do
  set -- $layout
  ranks=$1 t=$2
  rm -rf "$dir/pretrain"
  OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t mpirun -n "$ranks" "$build/tools/pretrain" \
    --set run.dir="$dir" --set pretrain.epochs=2 --set pretrain.global_batch="$gb" \
    --set pretrain.eval_every=0 --set pretrain.checkpoint.every_epochs=0 >/dev/null 2>&1
  s=$(/usr/bin/python3 -c "import json,sys; print('%.1f' % [json.loads(l) for l in open(sys.argv[1])][1]['images_per_s'])" "$dir/pretrain/metrics.jsonl")
  p=-
  if [ $have_torch = 1 ]; then
    p=$(OMP_NUM_THREADS=$t /usr/bin/python3 "$here/bench_dataparallel_torch.py" "$ranks" "$gb" 4 "$t" 1 \
      2>/dev/null | awk '/^RESULT/ {print $3}')
  fi
  r=$(awk -v a="$s" -v b="$p" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "-"}')
  printf '%-22s %14s %14s %8s\n' "${ranks} rank x ${t} thr" "$s" "$p" "$r"
done
