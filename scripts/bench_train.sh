#!/usr/bin/env bash
# CIFAR ResNet-18 training throughput: Sieve's CPU engine next to PyTorch CPU, same model,
# batch, threads and step (fwd + bwd + SGD update), median images/s.
#
#   scripts/bench_train.sh [build_dir=build] [batch=128] [steps=3] [threads=2] [rounds=3]
#
# The two run alternately for `rounds` rounds (steps timed steps after 1 warm-up each), so a
# machine whose load drifts (shared cores) affects both alike; the table gives the median over
# rounds of each figure and of the per-round ratio. The first round also measures SGEMM.
# PyTorch comes from Debian's python3-torch (bench-only dependency, scripts/install_deps.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
batch=${2:-128}
steps=${3:-3}
threads=${4:-2}
rounds=${5:-3}
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads

bin=$build/bench/bench_nn_resnet
[ -x "$bin" ] || { echo "bench_train: $bin not built (make bench_nn_resnet)" >&2; exit 2; }
have_torch=0
/usr/bin/python3 -c "import torch" 2>/dev/null && have_torch=1
[ $have_torch = 1 ] || echo "bench_train: python3-torch not installed: no peer figure" >&2

median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
sieve_all=() torch_all=() ratio_all=()
for r in $(seq 1 "$rounds"); do
  echo "== round $r/$rounds: sieve (oneDNN + OpenBLAS) =="
  out=$("$bin" "$batch" "$steps" 1 resnet18 1.0 $([ "$r" = 1 ] && echo 1 || echo 0))
  echo "$out"
  s=$(echo "$out" | awk '/^RESULT/ {print $3}')
  sieve_all+=("$s")
  if [ $have_torch = 1 ]; then
    echo "== round $r/$rounds: pytorch CPU =="
    out=$(/usr/bin/python3 "$here/bench_resnet_torch.py" "$batch" "$steps" 1)
    echo "$out"
    t=$(echo "$out" | awk '/^RESULT/ {print $3}')
    torch_all+=("$t")
    ratio_all+=("$(awk -v a="$s" -v b="$t" 'BEGIN {printf "%.3f", a / b}')")
  fi
done

echo
printf "%-32s %10s   %s\n" "ResNet-18 CIFAR b$batch t$threads" "median" "per round"
printf "%-32s %10s   %s\n" "sieve images/s" "$(printf '%s\n' "${sieve_all[@]}" | median)" "${sieve_all[*]}"
if [ $have_torch = 1 ]; then
  printf "%-32s %10s   %s\n" "pytorch images/s" "$(printf '%s\n' "${torch_all[@]}" | median)" "${torch_all[*]}"
  printf "%-32s %10s   %s\n" "ratio sieve/pytorch" "$(printf '%s\n' "${ratio_all[@]}" | median)" "${ratio_all[*]}"
fi
