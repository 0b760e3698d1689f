#!/usr/bin/env bash
# Training from data larger than memory: pretrain with the streaming loader against the
# in-memory loader on the same synthetic dataset, model and seed, in the same run.
#
#   scripts/bench_stream.sh [--dir DIR] [--samples 50000] [--budget-mb 32] [--epochs 1]
#                           [--width 0.125] [--ranks 1] [--reps 2]
#
# The dataset: SAMPLES synthetic 32x32 RGB images (3 KB each; 50,000 = 147 MB, 4.6x a 32 MB
# budget). Each repetition, alternating: pretrain --set data.loader=memory, then
# data.loader=stream --set data.memory_budget_mb=BUDGET; ResNet-18 at WIDTH, batch 256, no
# holdout, one evaluation at the end. Reported (medians): training images/s (pretrain's own
# figure: steps only), wall time, and the peak RSS per rank (/usr/bin/time %M, the largest of
# the ranks), with what the RSS holds beyond the model and libraries estimated as
# RSS - (memory run's RSS - split bytes).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/scripts/env.sh"
build="${SIEVE_BUILD_DIR:-$root/build}"
dir="$build/bench-stream" samples=50000 budget=32 epochs=1 width=0.125 ranks=1 reps=2
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --samples) samples="$2"; shift 2 ;;
    --budget-mb) budget="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --width) width="$2"; shift 2 ;;
    --ranks) ranks="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_stream: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
bin="$build/tools"
[ -x "$bin/pretrain" ] || { echo "bench_stream: $bin/pretrain not built" >&2; exit 1; }
mkdir -p "$dir"
per_class=$((samples / 10))
if [ ! -f "$dir/dataset.h5" ]; then
  "$bin/shard_dataset" --set run.dir="$dir" --set data.source=synthetic \
    --set data.synthetic.train_per_class="$per_class" --set data.synthetic.test_per_class=100 \
    >/dev/null
fi
split_mb=$(awk -v n="$samples" 'BEGIN {printf "%.1f", n * 3072 / 1048576}')
run() {  # loader extra... -> "images/s wall_s rss_mb"
  local loader="$1"; shift
  local out="$dir/run-$loader"
  rm -rf "$out"
  mkdir -p "$out"
  ln -sf "$dir/dataset.h5" "$out/dataset.h5"
  local t0 t1 log="$out/log.txt"
  t0=$(date +%s.%N)
  mpiexec -n "$ranks" /usr/bin/time -f "RSS_KB %M" "$bin/pretrain" --set run.dir="$out" \
    --set data.loader="$loader" "$@" --set pretrain.model.arch=resnet18 \
    --set pretrain.model.width="$width" --set pretrain.epochs="$epochs" \
    --set pretrain.global_batch=256 --set pretrain.holdout=0 --set pretrain.eval_every=0 \
    --set pretrain.checkpoint.every_epochs=0 >"$log" 2>&1
  t1=$(date +%s.%N)
  local ips rss
  ips=$(grep -o '[0-9]* img/s (' "$log" | tail -1 | awk '{print $1}')
  rss=$(awk '/^RSS_KB/ {if ($2 > m) m = $2} END {printf "%.0f", m / 1024}' "$log")
  echo "$ips $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') $rss"
}
median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
declare -a m_ips m_wall m_rss s_ips s_wall s_rss
for r in $(seq 1 "$reps"); do
  read -r a b c < <(run memory)
  m_ips+=("$a") m_wall+=("$b") m_rss+=("$c")
  echo "round $r memory: $a img/s, $b s, peak RSS $c MB"
  read -r a b c < <(run stream --set data.memory_budget_mb="$budget")
  s_ips+=("$a") s_wall+=("$b") s_rss+=("$c")
  echo "round $r stream: $a img/s, $b s, peak RSS $c MB"
done
grep -m1 "streamed" "$dir/run-stream/log.txt" || true
mi=$(printf '%s\n' "${m_ips[@]}" | median) si=$(printf '%s\n' "${s_ips[@]}" | median)
mr=$(printf '%s\n' "${m_rss[@]}" | median) sr=$(printf '%s\n' "${s_rss[@]}" | median)
echo
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $ranks rank(s); ResNet-18 width $width, batch 256"
echo "training split ${split_mb} MB ($samples samples), data.memory_budget_mb $budget"
printf "%-10s %10s %10s %14s %s\n" loader "img/s" "wall s" "peak RSS MB" "beyond model+libs (est.)"
base=$(awk -v r="$mr" -v s="$split_mb" 'BEGIN {printf "%.0f", r - s}')
printf "%-10s %10s %10s %14s %s\n" memory "$mi" "$(printf '%s\n' "${m_wall[@]}" | median)" "$mr" "$split_mb MB (the split)"
printf "%-10s %10s %10s %14s %s\n" stream "$si" "$(printf '%s\n' "${s_wall[@]}" | median)" "$sr" "$(awk -v r="$sr" -v b="$base" 'BEGIN {printf "%.0f MB", r - b}')"
echo "stream / memory images/s: $(awk -v a="$si" -v b="$mi" 'BEGIN {printf "%.3f", a / b}')"
