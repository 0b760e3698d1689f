#!/usr/bin/env bash
# shard_dataset write throughput as a fraction of this machine's sequential write bandwidth.
#
#   scripts/bench_shard.sh [--dir DIR] [--size-mb 500] [--ranks "1 2"] [--reps 3] [--shards 1]
#
# For each repetition, in the same directory and with the same number of bytes:
#   dd if=/dev/zero of=DIR/dd.bin bs=1M count=SIZE conv=fdatasync    (the disk's sequential rate)
#   shard_dataset generating a ~SIZE MB synthetic dataset (32x32x3, synced before the rename)
# The tool's write rate is its payload bytes over its own "written ... in T s" time: from
# creating the output files to the final rename, i.e. generation, parallel HDF5 writes,
# statistics, fsync and rename. The rate over the wall time of the whole command (adding
# process and MPI start-up, ~0.5 s here) is shown beside it. Runs alternate so that drift
# in the disk's speed hits both; the medians are reported. Goal: write ratio >= 0.5.
# The CPU seconds of each run (user + system, all processes) are shown too: on a shared
# machine the tool is CPU-bound by other load long before the disk limits it.
# Needs the built tools (SIEVE_BUILD_DIR, default build/) and ~2x SIZE free space in DIR.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/scripts/env.sh"
build="${SIEVE_BUILD_DIR:-$root/build}"
tool="$build/tools/shard_dataset"
dir="$build/bench-shard"
size_mb=500
ranks="1 2"
reps=3
shards=1
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --size-mb) size_mb="$2"; shift 2 ;;
    --ranks) ranks="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --shards) shards="$2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_shard: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$tool" ] || { echo "bench_shard: $tool not built (cmake --build $build)" >&2; exit 1; }
mkdir -p "$dir"
cores=$(nproc)

# 10 classes, 5/6 train and 1/6 test, 3072 bytes per image (+ 14 bytes of labels/ids/noise).
images=$(( size_mb * 1000000 / 3086 ))
train_pc=$(( images * 5 / 6 / 10 ))
test_pc=$(( images / 6 / 10 ))
gen_args="--set data.synthetic.train_per_class=$train_pc --set data.synthetic.test_per_class=$test_pc --set data.shards=$shards"

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

dd_rates=()
declare -A tool_rates wall_rates
for r in $ranks; do tool_rates[$r]=""; wall_rates[$r]=""; done
echo "bench_shard: $size_mb MB in $dir, $cores core(s), ranks: $ranks, $reps repetition(s), shards: $shards, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for rep in $(seq 1 "$reps"); do
  rm -f "$dir/dd.bin"
  t0=$(now)
  dd if=/dev/zero of="$dir/dd.bin" bs=1M count="$size_mb" conv=fdatasync status=none
  t1=$(now)
  rm -f "$dir/dd.bin"
  dd_rate=$(awk -v b="$size_mb" -v a="$t0" -v c="$t1" 'BEGIN {printf "%.1f", b * 1048576 / 1e6 / (c - a)}')
  dd_rates+=("$dd_rate")
  echo "  rep $rep: dd                        $dd_rate MB/s"
  for r in $ranks; do
    threads=$(( cores / r )); [ "$threads" -ge 1 ] || threads=1
    rm -f "$dir"/synth*.h5 "$dir"/synth.config.yaml
    log="$dir/tool-$r.log"
    t0=$(now)
    cpu="$dir/cpu-$r.txt"
    if [ "$r" -eq 1 ]; then
      OMP_NUM_THREADS=$threads /usr/bin/time -o "$cpu" -f "%U %S" "$tool" -o "$dir/synth.h5" $gen_args > "$log" 2>&1
    else
      /usr/bin/time -o "$cpu" -f "%U %S" mpirun -n "$r" -x OMP_NUM_THREADS=$threads "$tool" -o "$dir/synth.h5" $gen_args > "$log" 2>&1
    fi
    cpus=$(awk '{printf "%.2f", $1 + $2}' "$cpu")
    t1=$(now)
    mb=$(sed -n 's/^  written *\([0-9.]*\) MB.*/\1/p' "$log")
    secs=$(sed -n 's/^  written *[0-9.]* MB in \([0-9.]*\) s.*/\1/p' "$log")
    [ -n "$mb" ] && [ -n "$secs" ] || { echo "bench_shard: shard_dataset failed, see $log" >&2; cat "$log" >&2; exit 1; }
    rate=$(awk -v b="$mb" -v s="$secs" 'BEGIN {printf "%.1f", b / s}')
    wrate=$(awk -v b="$mb" -v a="$t0" -v c="$t1" 'BEGIN {printf "%.1f", b / (c - a)}')
    tool_rates[$r]="${tool_rates[$r]} $rate"
    wall_rates[$r]="${wall_rates[$r]} $wrate"
    printf "  rep %d: shard_dataset %d rank(s) x %2d thr  write %s MB/s, wall %s MB/s, %s CPU-s (%s MB; %s)\n" "$rep" "$r" \
      "$threads" "$rate" "$wrate" "$cpus" "$mb" "$(sed -n 's/^  time *//p' "$log")"
  done
done
rm -f "$dir"/synth*.h5 "$dir"/synth.config.yaml

dd_med=$(printf '%s\n' "${dd_rates[@]}" | median)
echo "bench_shard: median dd (fdatasync)  $dd_med MB/s"
best=0
for r in $ranks; do
  med=$(printf '%s\n' ${tool_rates[$r]} | median)
  wmed=$(printf '%s\n' ${wall_rates[$r]} | median)
  ratio=$(awk -v t="$med" -v d="$dd_med" 'BEGIN {printf "%.2f", t / d}')
  wratio=$(awk -v t="$wmed" -v d="$dd_med" 'BEGIN {printf "%.2f", t / d}')
  echo "bench_shard: median shard_dataset $r rank(s): write $med MB/s = $ratio of dd (wall incl. start-up: $wmed MB/s = $wratio)"
  best=$(awk -v a="$best" -v b="$ratio" 'BEGIN {print (b > a) ? b : a}')
done
verdict=$(awk -v b="$best" 'BEGIN {print (b >= 0.5) ? "meets" : "below"}')
echo "bench_shard: best write ratio $best ($verdict the goal >= 0.5); load average now $(cut -d' ' -f1-3 /proc/loadavg)"
