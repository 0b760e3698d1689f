#!/usr/bin/env bash
# Submit the whole Sieve pipeline to Slurm as a chain of jobs.
#
#   sbatch slurm/full_pipeline.sh [CONFIG.yaml] [--set key=value ...]     (as a tiny job)
#   slurm/full_pipeline.sh [CONFIG.yaml] [--wait] [--set key=value ...]   (from a login node)
#
# Stages come from pipelines/stages.sh (the same graph as the local runner). Each stage is
# one job depending on the previous with --dependency=afterok (and --kill-on-invalid-dep, so a
# failed stage cancels the rest of the chain); the train_scaled sweep is one job array
# (%A_%a logs), and the report runs after the whole array. Training stages get
# --signal=USR1@<slurm.signal_seconds> and --requeue and resume from checkpoints.
# Logs: <run.dir>/logs/%x-%j.out. --wait blocks until the chain ends and names the log of a
# failed stage (exit 1). Resources come from the config's slurm.* section.
#SBATCH --job-name=sieve-submit
#SBATCH --output=sieve-submit-%j.out
#SBATCH --ntasks=1
#SBATCH --time=00:05:00
set -euo pipefail
if [ -n "${SLURM_SUBMIT_DIR:-}" ] && [ -z "${SIEVE_ROOT:-}" ]; then
  root="$SLURM_SUBMIT_DIR"  # under sbatch the script runs from a spool copy
else
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fi
. "$root/scripts/env.sh"
. "$root/pipelines/stages.sh"
export SIEVE_ROOT="$root"

config="$root/configs/quickstart.yaml" wait=0 sets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --wait) wait=1; shift ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "full_pipeline: unknown option $1" >&2; exit 2 ;;
    *) config="$1"; shift ;;
  esac
done
[ -f "$config" ] || { echo "full_pipeline: config $config: no such file" >&2; exit 2; }
config="$(cd "$(dirname "$config")" && pwd)/$(basename "$config")"
get() { sieve_config_value "$config" "$1" "${sets[@]}"; }
run_dir="$(get run.dir)"
case "$run_dir" in /*) ;; *) run_dir="$root/$run_dir" ;; esac
name="$(get run.name)"
ntasks="$(get slurm.ntasks)"
cpus="$(get slurm.cpus_per_task)"
signal_s="$(get slurm.signal_seconds)"
partition="$(get slurm.partition)"
account="$(get slurm.account)"
max_par="$(get slurm.max_array_parallel)"
mkdir -p "$run_dir/logs"
cd "$root"  # run.dir may be relative to the repository root

common=(--parsable --chdir="$root" --ntasks="$ntasks" --cpus-per-task="$cpus" --export=ALL
        --kill-on-invalid-dep=yes)
[ -n "$partition" ] && common+=(--partition="$partition")
[ -n "$account" ] && common+=(--account="$account")

prev="" ids=() names=()
for stage in "${SIEVE_STAGES[@]}"; do
  opts=("${common[@]}" --job-name="$name-$stage" --time="$(get "slurm.time.$stage")")
  [ -n "$prev" ] && opts+=(--dependency="afterok:$prev")
  if [ "${SIEVE_STAGE_TRAINS[$stage]}" = 1 ]; then
    opts+=(--signal="USR1@$signal_s" --requeue)
  fi
  if [ "${SIEVE_STAGE_KIND[$stage]}" = array ]; then
    n="$("${SIEVE_STAGE_TOOL[$stage]}" --config "$config" "${sets[@]}" --sweep-size)"
    opts+=(--array="0-$((n - 1))%$max_par" --output="$run_dir/logs/%x-%A_%a.out")
  else
    opts+=(--output="$run_dir/logs/%x-%j.out")
  fi
  id="$(sbatch "${opts[@]}" "$root/slurm/stage.sh" "$stage" "$config" "${sets[@]}")"
  id="${id%%;*}"
  echo "full_pipeline: $stage -> job $id"
  ids+=("$id")
  names+=("$stage")
  prev="$id"
done
printf '%s\n' "${ids[@]}" > "$run_dir/logs/jobs.txt"
echo "full_pipeline: submitted ${#ids[@]} jobs; logs in $run_dir/logs; report will be in $run_dir/report"
[ $wait -eq 1 ] || exit 0

# --wait: poll the controller (no accounting database needed) until every job has ended.
job_states() { scontrol show job -o "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2 | sort -u | tr '\n' ' '; }
for i in "${!ids[@]}"; do
  id="${ids[$i]}" stage="${names[$i]}"
  while true; do
    states="$(job_states "$id")"
    case "$states" in
      *PENDING*|*RUNNING*|*CONFIGURING*|*COMPLETING*|*REQUEUE*|*SUSPENDED*|"") sleep 2 ;;
      *) break ;;
    esac
  done
  if [ "$states" != "COMPLETED " ]; then
    logs=$(ls "$run_dir"/logs/"$name-$stage"-"$id"*.out 2>/dev/null | tr '\n' ' ')
    echo "full_pipeline: stage '$stage' (job $id) ended ${states% }; log: ${logs:-none}" >&2
    exit 1
  fi
  echo "full_pipeline: $stage (job $id) completed"
done
echo "full_pipeline: all stages completed; report: $run_dir/report/index.html"
