#!/usr/bin/env bash
# CIFAR ResNet-18 training throughput: Sieve's CPU engine next to PyTorch CPU, same model,
# batch, threads and step (fwd + bwd + SGD update), median images/s.
#
#   scripts/bench_train.sh [build_dir=build] [batch=128] [steps=10] [threads=2]
#
# PyTorch comes from Debian's python3-torch (bench-only dependency, scripts/install_deps.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
batch=${2:-128}
steps=${3:-10}
threads=${4:-2}
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads

bin=$build/bench/bench_nn_resnet
[ -x "$bin" ] || { echo "bench_train: $bin not built (make bench_nn_resnet)" >&2; exit 2; }

echo "== sieve (oneDNN + OpenBLAS) =="
sieve_out=$("$bin" "$batch" "$steps" 2)
echo "$sieve_out"
sieve=$(echo "$sieve_out" | awk '/^RESULT/ {print $3}')

echo "== pytorch CPU =="
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  torch_out=$(/usr/bin/python3 "$here/bench_resnet_torch.py" "$batch" "$steps" 2)
  echo "$torch_out"
  torch=$(echo "$torch_out" | awk '/^RESULT/ {print $3}')
else
  echo "python3-torch not installed: no peer figure" >&2
  torch=
fi

echo
printf "%-28s %12s\n" "ResNet-18 CIFAR b$batch t$threads" "images/s"
printf "%-28s %12s\n" "sieve" "$sieve"
if [ -n "$torch" ]; then
  printf "%-28s %12s\n" "pytorch" "$torch"
  printf "%-28s %12s\n" "ratio sieve/pytorch" "$(awk -v a="$sieve" -v b="$torch" 'BEGIN {printf "%.2f", a / b}')"
fi
