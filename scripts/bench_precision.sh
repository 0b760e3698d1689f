#!/usr/bin/env bash
# bf16 against fp32: does mixed precision reach the fp32 run's test accuracy? Pretrains one
# config in both precisions with the same seeds (same data, same initial weights, same batch
# order) and prints each run's final test accuracy and speed, the paired difference per seed
# and its mean with a 95 % t-interval over seeds, next to fp32's own seed-to-seed spread.
#
#   scripts/bench_precision.sh [CONFIG=configs/quickstart.yaml] ["SEEDS"="1 2 3"] [--set k=v ...]
#   scripts/bench_precision.sh configs/fashion_mnist.yaml "1 2 3" \
#       --set pretrain.model.width=0.125 --set pretrain.epochs=12
#
# Runs go under $SIEVE_BENCH_DIR (default runs/bench_precision/<config name>), one directory
# per precision and seed (their logs and metrics stay there); the dataset is sharded once. A
# finished run whose command, threads, config file and binaries were the same is reused
# (marked so): adding seeds later trains only the new ones. Delete the directory to start over.
# One rank, $SIEVE_THREADS (default 2) threads. On a CPU without native bf16 (no AVX512-BF16
# or AMX) the bf16 runs are emulated (fp32 kernels on bf16-rounded data and weights:
# docs/engine.md): the accuracy is bf16's, the speed is not; the table says which it was.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/scripts/env.sh"
case "${1:-}" in -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
config=$root/configs/quickstart.yaml seeds="1 2 3"
if [ $# -gt 0 ] && [[ "$1" != --* ]]; then config=$1; shift; fi
if [ $# -gt 0 ] && [[ "$1" != --* ]]; then seeds=$1; shift; fi
sets=("$@")
[ -f "$config" ] || { echo "bench_precision: config $config: no such file" >&2; exit 2; }
[ -n "${seeds// /}" ] || { echo "bench_precision: seeds '$seeds': expected positive whole numbers" >&2; exit 2; }
for s in $seeds; do
  [[ "$s" =~ ^[1-9][0-9]*$ ]] || { echo "bench_precision: seed '$s': expected positive whole numbers" >&2; exit 2; }
done
threads=${SIEVE_THREADS:-2}
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
name=$(basename "$config" .yaml)
work=${SIEVE_BENCH_DIR:-$root/runs/bench_precision/$name}
mkdir -p "$work"
work=$(cd "$work" && pwd)  # absolute: the runs link the dataset from their own directories
for tool in shard_dataset pretrain; do
  command -v $tool >/dev/null || { echo "bench_precision: $tool not built (in $SIEVE_BUILD_DIR/tools)" >&2; exit 2; }
done
# What a finished run is reused for: the same command, threads, config contents and binaries.
identity="threads $threads; config $(sha256sum <"$config" | cut -c1-16);\
 pretrain $(sha256sum <"$(command -v pretrain)" | cut -c1-16);\
 shard_dataset $(sha256sum <"$(command -v shard_dataset)" | cut -c1-16)"

echo "bench_precision: $config, seeds $seeds, ${sets[*]:-(no overrides)}, 1 rank x $threads threads"
echo "bench_precision: $(lscpu | sed -n 's/^Model name: *//p' | head -1)"
shard_cmd=(shard_dataset --config "$config" "${sets[@]}" --set run.dir="$work/data" --overwrite)
if [ "$(cat "$work/data/command" 2>/dev/null)" != "${shard_cmd[*]}; $identity" ] || [ ! -f "$work/data/dataset.h5" ]; then
  rm -f "$work/data/command"
  "${shard_cmd[@]}" >"$work/shard.log" 2>&1 || { cat "$work/shard.log" >&2; exit 1; }
  echo "${shard_cmd[*]}; $identity" >"$work/data/command"
fi

results=()  # "seed precision test_acc images_per_s"
for s in $seeds; do
  for p in fp32 bf16; do
    dir="$work/$p-seed$s"
    mkdir -p "$dir"
    ln -sf "$work/data/dataset.h5" "$dir/dataset.h5"
    cmd=(pretrain --config "$config" "${sets[@]}" --set run.dir="$dir" --set pretrain.seed="$s"
         --set pretrain.precision="$p" --overwrite)
    t0=$(date +%s) reused=""
    if [ "$(cat "$dir/command" 2>/dev/null)" = "${cmd[*]}; $identity" ] && [ -f "$dir/pretrain/model.h5" ]; then
      reused=" (reused)"
    else
      rm -f "$dir/command"
      "${cmd[@]}" >"$dir/pretrain.log" 2>&1 || { tail -5 "$dir/pretrain.log" >&2; exit 1; }
      echo "${cmd[*]}; $identity" >"$dir/command"
    fi
    last=$(tail -1 "$dir/pretrain/metrics.jsonl")
    acc=$(sed -E 's/.*"test_acc":([0-9.eE+-]+).*/\1/' <<<"$last")
    rate=$(sed -E 's/.*"images_per_s":([0-9.eE+-]+).*/\1/' <<<"$last")
    emulated=$(grep -c "bf16 emulated" "$dir/pretrain.log" || true)
    printf 'seed %s %s: test acc %.4f, %.0f img/s, %d s%s%s\n' "$s" "$p" "$acc" "$rate" \
      $(( $(date +%s) - t0 )) "$([ "$emulated" -gt 0 ] && echo ' (bf16 emulated)')" "$reused"
    results+=("$s $p $acc $rate")
  done
done

printf '%s\n' "${results[@]}" | awk '
  function tq(df,   t, z) {  # 97.5 % quantile of Student t: a table to 30 df, then an expansion
    split("12.706 4.303 3.182 2.776 2.571 2.447 2.365 2.306 2.262 2.228 2.201 2.179 2.160 " \
          "2.145 2.131 2.120 2.110 2.101 2.093 2.086 2.080 2.074 2.069 2.064 2.060 2.056 " \
          "2.052 2.048 2.045 2.042", t, " ")
    if (df <= 30) return t[df]
    z = 1.959964
    return z + (z^3 + z) / (4 * df) + (5 * z^5 + 16 * z^3 + 3 * z) / (96 * df^2)
  }
  { acc[$1, $2] = $3; rate[$2] += $4; if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
  END {
    print ""
    print "| seed | fp32 test acc | bf16 test acc | bf16 - fp32 (points) |"
    print "|---|---|---|---|"
    for (i = 1; i <= n; ++i) {
      s = order[i]; d[i] = 100 * (acc[s, "bf16"] - acc[s, "fp32"]); f[i] = 100 * acc[s, "fp32"]
      md += d[i]; mf += f[i]; mb += 100 * acc[s, "bf16"]
      printf "| %s | %.2f %% | %.2f %% | %+.2f |\n", s, f[i], 100 * acc[s, "bf16"], d[i]
    }
    md /= n; mf /= n; mb /= n
    for (i = 1; i <= n; ++i) { vd += (d[i] - md) ^ 2; vf += (f[i] - mf) ^ 2 }
    if (n > 1) {
      sd = sqrt(vd / (n - 1)); sf = sqrt(vf / (n - 1)); h = tq(n - 1) * sd / sqrt(n)
      printf "| mean | %.2f %% (sd %.2f) | %.2f %% | **%+.2f** (95 %% CI %+.2f .. %+.2f, %d seeds) |\n", \
        mf, sf, mb, md, md - h, md + h, n
    } else {
      printf "| mean | %.2f %% | %.2f %% | %+.2f (one seed: no interval) |\n", mf, mb, md
    }
    printf "\nbf16 / fp32 speed (last epoch, mean over seeds): %.2fx\n", rate["bf16"] / rate["fp32"]
  }'
