#!/usr/bin/env bash
# Image-folder ingest (shard_dataset, data.source: folder) against a plain Pillow conversion
# of the same folder and against the disk's sequential write rate, in the same run.
#
#   scripts/bench_folder.sh [--dir DIR] [--images 2000] [--size 224] [--resize 256]
#                           [--ranks "1 2"] [--reps 3]
#
# The folder: N JPEGs of 500x375 (quality 90, about an average ImageNet photo), 10 classes,
# made once by Pillow. Each repetition, alternating:
#   shard_dataset  --set data.source=folder ... decode (libjpeg-turbo), resize the shorter
#                  side to RESIZE (antialiased bilinear), centre crop SIZE, write HDF5, fsync
#   Pillow         open + convert("RGB") + resize(BILINEAR) + crop into a .npy, fsync,
#                  with as many worker processes as the machine has cores
#   dd             if=/dev/zero bs=1M conv=fdatasync, as many bytes as the dataset holds
# Reported: medians of images/s (wall time of the whole command), per core (both use every
# core: shard_dataset's ranks share them with their decoding threads), and the output
# MB/s against dd's. Peers come from the bench virtual environment (install_deps.sh --bench).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/scripts/env.sh"
build="${SIEVE_BUILD_DIR:-$root/build}"
venv="${SIEVE_BENCH_VENV:-$root/.venv-bench}"
dir="$build/bench-folder" images=2000 size=224 resize=256 ranks="1 2" reps=3
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --images) images="$2"; shift 2 ;;
    --size) size="$2"; shift 2 ;;
    --resize) resize="$2"; shift 2 ;;
    --ranks) ranks="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_folder: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
py="$venv/bin/python"
[ -x "$py" ] || { echo "bench_folder: no bench environment at $venv (run scripts/install_deps.sh --bench)" >&2; exit 1; }
[ -x "$build/tools/shard_dataset" ] || { echo "bench_folder: shard_dataset not built" >&2; exit 1; }
cores=$(nproc)
mkdir -p "$dir"
pics="$dir/pictures-$images"
if [ ! -d "$pics" ]; then
  echo "bench_folder: writing $images JPEGs to $pics"
  "$py" "$root/scripts/bench_folder_pillow.py" make "$pics" "$images"
fi
folder_mb=$(du -sm "$pics" | cut -f1)
out_mb=$(( images * size * size * 3 / 1000000 ))
echo "bench_folder: $images JPEGs 500x375 ($folder_mb MB), output ${size}x${size}x3 ($out_mb MB); $(lscpu | sed -n 's/^Model name: *//p'), $cores cores, load $(cut -d' ' -f1 /proc/loadavg)"
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
declare -A rate=()
for ((r = 1; r <= reps; r++)); do
  for np in $ranks; do
    t0=$(date +%s.%N)
    mpirun -n "$np" "$build/tools/shard_dataset" --set data.source=folder --set data.path="$pics" \
      --set data.folder.size="$size" --set data.folder.resize="$resize" --set data.folder.test_fraction=0 \
      --set run.dir="$dir" --output "$dir/folder.h5" --overwrite > "$dir/shard.log" 2>&1 ||
      { cat "$dir/shard.log"; exit 1; }
    rate[sieve$np]+="$(echo "$images / ($(date +%s.%N) - $t0)" | bc -l) "
  done
  t0=$(date +%s.%N)
  "$py" "$root/scripts/bench_folder_pillow.py" convert "$pics" "$dir/pillow.npy" "$size" "$resize" "$cores" > "$dir/pillow.json"
  rate[pillow]+="$(echo "$images / ($(date +%s.%N) - $t0)" | bc -l) "
  t0=$(date +%s.%N)
  dd if=/dev/zero of="$dir/dd.bin" bs=1M count="$out_mb" conv=fdatasync status=none
  rate[dd]+="$(echo "$out_mb / ($(date +%s.%N) - $t0)" | bc -l) "
  rm -f "$dir/dd.bin" "$dir/pillow.npy"
done
dd_mbs=$(echo "${rate[dd]}" | tr ' ' '\n' | grep . | median)
pil=$(echo "${rate[pillow]}" | tr ' ' '\n' | grep . | median)
printf '%-28s %10s %14s %12s %12s\n' "" "images/s" "images/s/core" "output MB/s" "vs Pillow"
for np in $ranks; do
  v=$(echo "${rate[sieve$np]}" | tr ' ' '\n' | grep . | median)
  printf '%-28s %10.1f %14.1f %12.1f %11.2fx\n' "shard_dataset ($np rank(s))" "$v" "$(echo "$v / $cores" | bc -l)" \
    "$(echo "$v * $size * $size * 3 / 1000000" | bc -l)" "$(echo "$v / $pil" | bc -l)"
done
printf '%-28s %10.1f %14.1f %12.1f %11s\n' "Pillow ($cores processes)" "$pil" "$(echo "$pil / $cores" | bc -l)" \
  "$(echo "$pil * $size * $size * 3 / 1000000" | bc -l)" "1.00x"
printf '%-28s %10s %14s %12.1f\n' "dd conv=fdatasync" "" "" "$dd_mbs"
