#!/usr/bin/env bash
# Training step time in each parameter home (docs/training.md, "Where the step meets the
# parameters"): pretrain on a synthetic CIFAR-shaped set (32x32x3, 10 classes), CIFAR
# ResNet-18 at full width, the same seed and global batch in every home. Prints, per home,
# the median images/s over the epochs after the first (the first builds algorithms and
# pools) and the final training loss, then each home's speed relative to the first one.
# The homes train the same model from the same seed: on the CPU their losses are identical,
# on a GPU they agree to float rounding (a larger gap is a fault of the device home).
#
#   scripts/bench_param_home.sh [--build DIR] [--backend cuda] [--homes staged,device]
#                               [--batch 512] [--epochs 3] [--per-class 1024] [--ranks 1]
#
# --ranks R > 1 runs each home under `mpiexec -n R` (one GPU per rank on cuda). Output under
# DIR/bench-param-home/. scripts/gpu_check.sh runs it on cuda; on the CPU
# (`--backend cpu --homes host,device --batch 128 --per-class 64 --epochs 2`) it shows what
# the fake device costs.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build" backend=cuda homes=staged,device batch=512 epochs=3 per_class=1024 ranks=1
usage="--build DIR, --backend cpu|cuda, --homes H1,H2, --batch N, --epochs N, --per-class N, --ranks R"
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || { echo "bench_param_home: $1 needs a value ($usage)" >&2; exit 2; }
  case "$1" in
    --build) build="$2" ;;
    --backend) backend="$2" ;;
    --homes) homes="$2" ;;
    --batch) batch="$2" ;;
    --epochs) epochs="$2" ;;
    --per-class) per_class="$2" ;;
    --ranks) ranks="$2" ;;
    *) echo "bench_param_home: unknown argument '$1' ($usage)" >&2; exit 2 ;;
  esac
  shift 2
done
[ "$epochs" -ge 2 ] || { echo "bench_param_home: --epochs $epochs: at least 2 (the first is not timed)" >&2; exit 2; }
for tool in shard_dataset pretrain; do
  [ -x "$build/tools/$tool" ] || { echo "bench_param_home: $build/tools/$tool not built" >&2; exit 2; }
done
out="$build/bench-param-home"
rm -rf "$out"
mkdir -p "$out"
launch=()
[ "$ranks" -gt 1 ] && launch=(mpiexec -n "$ranks")

config="$out/bench.yaml"
cat >"$config" <<EOF
run: {name: bench-param-home, dir: $out/run, seed: 1}
data:
  source: synthetic
  synthetic: {classes: 10, train_per_class: $per_class, test_per_class: 10, height: 32,
              width: 32, channels: 3, label_noise: 0.0, outliers: 0.0}
pretrain:
  model: {arch: resnet18, width: 1.0, stem: cifar}
  backend: $backend
  epochs: $epochs
  global_batch: $batch
  holdout: 0.0
  eval_every: 0
  checkpoint: {every_epochs: 0}
EOF
"$build/tools/shard_dataset" --config "$config" >"$out/shard.log" 2>&1 ||
  { cat "$out/shard.log"; exit 1; }

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "FAIL"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
declare -A ips loss
first=""
for home in ${homes//,/ }; do
  log="$out/pretrain_$home.log"
  echo "== $home: pretrain, $backend, ResNet-18, batch $batch, $epochs epochs, $ranks rank(s)"
  if "${launch[@]}" "$build/tools/pretrain" --config "$config" --overwrite \
      --set pretrain.param_home="$home" >"$log" 2>&1; then
    metrics="$out/run/pretrain/metrics.jsonl"
    ips[$home]=$(tail -n +2 "$metrics" | grep -Eo '"images_per_s":[0-9.e+-]+' | cut -d: -f2 | median)
    loss[$home]=$(tail -n 1 "$metrics" | grep -Eo '"train_loss":[0-9.e+-]+' | cut -d: -f2)
  else
    tail -n 5 "$log"
    ips[$home]=FAIL loss[$home]=FAIL
  fi
  echo "RESULT param_home_${home}_images_per_s ${ips[$home]}"
  [ -n "$first" ] || first=$home
done
printf '\n%-10s %14s %14s %10s\n' home "images/s" "final loss" "vs $first"
for home in ${homes//,/ }; do
  rel=$(awk -v a="${ips[$home]}" -v b="${ips[$first]}" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else printf "-" }')
  printf '%-10s %14s %14s %10s\n' "$home" "${ips[$home]}" "${loss[$home]}" "$rel"
done
for home in ${homes//,/ }; do
  [ "${ips[$home]}" != FAIL ] || exit 1
done
