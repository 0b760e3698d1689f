#!/usr/bin/env bash
# Stale-synchronous parameter server against synchronous training on the quickstart: final
# test accuracy of pretrain (configs/quickstart.yaml: ResNet-18 w 1/8, 30 epochs, batch 64,
# lr 0.1, Nesterov 0.9) on 2 ranks, over seeds, per (staleness, compensation).
#
#   scripts/bench_stale.sh [--dir DIR] [--seeds "1 2 3"] [--runs "sync none:1 local-gradient:1
#                          local-gradient:2"] [--ranks 2] [--config configs/quickstart.yaml]
#
# A run is `sync` or COMPENSATION:STALENESS (comm.mode async, comm.stale_compensation,
# comm.max_staleness); every run uses comm.strategy parameter-server with one shard per rank.
# Prints one line per run and seed, then per run the mean over seeds with a 95 % Student-t
# interval and the mean difference to sync (paired by seed). Accuracy does not depend on
# the machine's load, so this need not run on an idle machine (2 cores: ~2-4 min a run).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/scripts/env.sh"
build="${SIEVE_BUILD_DIR:-$root/build}"
dir="$build/bench-stale" seeds="1 2 3" runs="sync none:1 local-gradient:1 local-gradient:2"
ranks=2 config="$root/configs/quickstart.yaml"
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --seeds) seeds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --ranks) ranks="$2"; shift 2 ;;
    --config) config="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_stale: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$dir"
"$build/tools/shard_dataset" -c "$config" --set run.dir="$dir" --overwrite >"$dir/shard.log" 2>&1 ||
  { cat "$dir/shard.log"; exit 1; }
results="$dir/results.tsv"
: >"$results"
for run in $runs; do
  if [ "$run" = sync ]; then
    set_mode=(--set pretrain.comm.mode=sync)
  else
    set_mode=(--set pretrain.comm.mode=async --set "pretrain.comm.stale_compensation=${run%%:*}"
              --set "pretrain.comm.max_staleness=${run##*:}")
  fi
  for seed in $seeds; do
    out="$dir/$run-s$seed"
    mkdir -p "$out"
    OMP_NUM_THREADS=1 mpirun --mca mpi_yield_when_idle 1 -n "$ranks" "$build/tools/pretrain" -c "$config" \
      --dataset "$dir/dataset.h5" --output "$out/model.h5" --overwrite \
      --set run.dir="$out" --set pretrain.seed="$seed" \
      --set pretrain.comm.strategy=parameter-server --set pretrain.comm.servers="$ranks" \
      "${set_mode[@]}" >"$out/log" 2>&1 || { tail -5 "$out/log"; exit 1; }
    acc="$(tail -1 "$out/metrics.jsonl" | sed 's/.*"test_acc":\([0-9.eE-]*\).*/\1/')"
    printf "%s\t%s\t%s\n" "$run" "$seed" "$acc" | tee -a "$results"
  done
done
python3 - "$results" <<'PY'
import math, sys
from collections import defaultdict
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
acc = defaultdict(dict)
for line in open(sys.argv[1]):
    run, seed, a = line.split()
    acc[run][seed] = 100 * float(a)
def interval(xs):
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return m, float("nan")
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))
    return m, T95.get(len(xs) - 1, 1.96) * sd / math.sqrt(len(xs))
print(f"\n{'run':<20} {'test accuracy % (mean ± 95 %)':<32} {'minus sync, paired by seed':<30}")
for run, by_seed in acc.items():
    m, h = interval(list(by_seed.values()))
    diff = ""
    if run != "sync" and "sync" in acc:
        d = [by_seed[s] - acc["sync"][s] for s in by_seed if s in acc["sync"]]
        dm, dh = interval(d)
        diff = f"{dm:+.2f} ± {dh:.2f}"
    print(f"{run:<20} {m:6.2f} ± {h:<24.2f} {diff}")
PY
