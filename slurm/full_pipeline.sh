#!/usr/bin/env bash
# Submit the whole Sieve pipeline to Slurm as a chain of jobs.
#
#   sbatch slurm/full_pipeline.sh [CONFIG.yaml ...] [--set key=value ...]     (as a tiny job)
#   slurm/full_pipeline.sh [CONFIG.yaml ...] [--wait] [--set key=value ...]   (from a login node)
# Several config files are layered in order (e.g. a sweep grid over a base config);
# without one, configs/quickstart.yaml is used.
#
# Stages come from pipelines/stages.sh (the same graph as the local runner). Each stage is
# one job depending on the previous with --dependency=afterok (and --kill-on-invalid-dep, so a
# failed stage cancels the rest of the chain); the train_scaled sweep is one job array
# (%A_%a logs), and the report runs after the whole array. With pretrain.folds = K >= 2 the
# pretrain job trains the main model only and the K fold models are a job array after it
# (pretrain --fold k), which the features job waits for. Training stages get
# --signal=USR1@<slurm.signal_seconds> and --requeue and resume from checkpoints.
# Logs: <run.dir>/logs/%x-%j.out. --wait blocks until the chain ends and names the log of a
# failed stage (exit 1). Resources come from the config's slurm.* section.
#SBATCH --job-name=sieve-submit
#SBATCH --output=sieve-submit-%j.out
#SBATCH --ntasks=1
#SBATCH --time=00:05:00
set -euo pipefail
# The Sieve tree: a checkout or an installed prefix's share/sieve (module load sieve).
# Under sbatch the script runs from a spool copy: then SIEVE_ROOT (set by the module and by
# scripts/env.sh), else the submission directory (sbatch slurm/full_pipeline.sh from a checkout).
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ ! -f "$root/pipelines/stages.sh" ]; then
  root="${SIEVE_ROOT:-${SLURM_SUBMIT_DIR:?not started from a Sieve tree; set SIEVE_ROOT}}"
fi
# Relative paths of the config (run.dir, data.path) are taken from the repository root in a
# checkout, and from the directory the pipeline is started from in an install.
base="$root"
[ -f "$root/CMakeLists.txt" ] || base="$PWD"
. "$root/scripts/env.sh"
. "$root/pipelines/stages.sh"
export SIEVE_ROOT="$root"

cfg=() wait=0 sets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --wait) wait=1; shift ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "full_pipeline: unknown option $1" >&2; exit 2 ;;
    *) [ -f "$1" ] || { echo "full_pipeline: config $1: no such file" >&2; exit 2; }
       cfg+=(--config "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"); shift ;;
  esac
done
[ ${#cfg[@]} -gt 0 ] || cfg=(--config "$root/configs/quickstart.yaml")
get() { sieve_config_value "$1" "${cfg[@]}" "${sets[@]}"; }
run_dir="$(get run.dir)"
case "$run_dir" in /*) ;; *) run_dir="$base/$run_dir" ;; esac
name="$(get run.name)"
log_dir="$(get slurm.output_dir)"
[ -n "$log_dir" ] || log_dir="$run_dir/logs"
max_par="$(get slurm.max_array_parallel)"
signal_s="$(get slurm.signal_seconds)"
requeue="$(get slurm.requeue)"
export SIEVE_SRUN_MPI="$(get slurm.mpi)"
mkdir -p "$log_dir"
# sbatch reads % in --output as a pattern (%j, %x): a % of the path itself is written %%.
log_pat="${log_dir//%/%%}"
cd "$base"  # run.dir may be relative (to the repository root, or in an install to $PWD)

# sbatch options shared by every stage, from the slurm.* config section.
common=(--parsable --chdir="$base" --export=ALL --kill-on-invalid-dep=yes
        --ntasks="$(get slurm.ntasks)" --cpus-per-task="$(get slurm.cpus_per_task)")
opt() {  # opt FLAG KEY: add --FLAG=value when the key is set (non-empty, non-zero)
  local v
  v="$(get "$2")"
  if [ -n "$v" ] && [ "$v" != 0 ]; then common+=("--$1=$v"); fi
}
# slurm.requeue=false must say so: JobRequeue=1 (Slurm's default) requeues a batch job that
# lost a node whether or not it asked for --requeue.
[ "$requeue" = true ] || common+=(--no-requeue)
opt partition slurm.partition
opt account slurm.account
opt qos slurm.qos
opt nodes slurm.nodes
opt ntasks-per-node slurm.ntasks_per_node
opt gpus-per-node slurm.gpus_per_node
opt mem slurm.mem
opt constraint slurm.constraint
extra="$(get slurm.extra_args)"
# shellcheck disable=SC2206  # extra_args is split into words on purpose
[ -n "$extra" ] && common+=($extra)

# The chain, with cross-fitting's fold array after pretrain where pretrain.folds >= 2.
folds="$(pretrain "${cfg[@]}" "${sets[@]}" --fold-count)"
chain=()
for stage in "${SIEVE_STAGES[@]}"; do
  chain+=("$stage")
  if [ "$stage" = pretrain ] && [ "$folds" -ge 2 ]; then chain+=(folds); fi
done
array_size() {  # array stage: its number of tasks
  case "$1" in
    folds) echo "$folds" ;;
    *) "${SIEVE_STAGE_TOOL[$1]}" "${cfg[@]}" "${sets[@]}" --sweep-size ;;
  esac
}

prev="" ids=() names=()
for stage in "${chain[@]}"; do
  args=()
  if [ "$stage" = pretrain ] && [ "$folds" -ge 2 ]; then args=(--skip-folds); fi
  opts=("${common[@]}" --job-name="$name-$stage" --time="$(get "slurm.time.$stage")")
  [ -n "$prev" ] && opts+=(--dependency="afterok:$prev")
  if [ "${SIEVE_STAGE_TRAINS[$stage]}" = 1 ]; then
    # USR1 goes to the job step's tasks: the trainer checkpoints and exits 75, and
    # slurm/stage.sh requeues the job, which then resumes from that checkpoint.
    opts+=(--signal="USR1@$signal_s")
    # Append: a requeued job (time limit, node failure) keeps its first run's log.
    [ "$requeue" = true ] && opts+=(--requeue --open-mode=append)
  fi
  if [ "${SIEVE_STAGE_KIND[$stage]}" = array ]; then
    n="$(array_size "$stage")"
    opts+=(--array="0-$((n - 1))%$max_par" --output="$log_pat/%x-%A_%a.out")
  else
    opts+=(--output="$log_pat/%x-%j.out")
  fi
  id="$(sbatch "${opts[@]}" "$root/slurm/stage.sh" "$stage" "${cfg[@]}" "${sets[@]}" ${args[@]+"${args[@]}"})"
  id="${id%%;*}"
  echo "full_pipeline: $stage -> job $id"
  ids+=("$id")
  names+=("$stage")
  prev="$id"
done
printf '%s\n' "${ids[@]}" > "$log_dir/jobs.txt"
echo "full_pipeline: submitted ${#ids[@]} jobs; logs in $log_dir; report will be in $run_dir/report"
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
    logs=$(ls "$log_dir/$name-$stage-$id"*.out 2>/dev/null | tr '\n' ' ')
    echo "full_pipeline: stage '$stage' (job $id) ended ${states% }; log: ${logs:-none}" >&2
    exit 1
  fi
  echo "full_pipeline: $stage (job $id) completed"
done
echo "full_pipeline: all stages completed; report: $run_dir/report/index.html"
