#!/usr/bin/env bash
# Run the whole Sieve pipeline on this machine, every stage under mpirun.
#
#   pipelines/run_local.sh CONFIG.yaml [MORE.yaml ...] [--np N] [--ranks-per-run R]
#                          [--from STAGE] [--only STAGE]
#                          [--force] [--set key=value ...]
#
#   CONFIG.yaml   the pipeline config; further files are layered on top (e.g. a sweep grid)
#   --np N        MPI ranks per stage (default 2)
#   --ranks-per-run R
#                 ranks that train each sweep run together (default 1: the runs are
#                 independent, so N/R of them train at once, each without gradient exchange;
#                 N: each run data-parallel over all ranks, as a Slurm array task does);
#                 a run on fewer ranks holds more of its batch per rank: bound it with
#                 scaled.micro_batch, or raise R, where a large batch would not fit
#   --from STAGE  run STAGE and every later stage (the outputs of earlier stages must exist)
#   --only STAGE  run just STAGE
#   --force       run every stage, even those whose outputs are current
#   --set k=v     config override given to every stage (repeatable)
#
# A re-run skips the stages whose outputs are complete and current: the stage finished
# (<run.dir>/logs/<stage>.done), the config sections it reads and the files it reads (the
# outputs of earlier stages; for shard, the source at data.path: size and mtime) are
# unchanged, and its outputs are the files it wrote. A stage that runs rewrites its outputs,
# so the stages that read them run too. A training stage that was interrupted continues
# from its checkpoint (--resume) when its key is unchanged. Stages, the sections they read
# and their inputs come from pipelines/stages.sh (the same graph the Slurm submitter uses).
# Each stage's log is <run.dir>/logs/<stage>.log; a failing stage stops the run and its log
# is named.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/../scripts/env.sh"
. "$here/stages.sh"

usage() { sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; }
need_value() { [ $# -ge 2 ] || { echo "run_local: $1 needs a value (see --help)" >&2; exit 2; }; }
cfg=() np=2 per_run=1 from="" only="" sets=() force=0
while [ $# -gt 0 ]; do
  case "$1" in
    --np) need_value "$@"; np="$2"; shift 2
          [[ "$np" =~ ^[1-9][0-9]*$ ]] || { echo "run_local: --np '$np': expected a positive whole number of ranks" >&2; exit 2; } ;;
    --ranks-per-run) need_value "$@"; per_run="$2"; shift 2
          [[ "$per_run" =~ ^[1-9][0-9]*$ ]] || { echo "run_local: --ranks-per-run '$per_run': expected a positive whole number of ranks" >&2; exit 2; } ;;
    --from) need_value "$@"; from="$2"; shift 2 ;;
    --only) need_value "$@"; only="$2"; shift 2 ;;
    --force) force=1; shift ;;
    --set) need_value "$@"; sets+=(--set "$2"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "run_local: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) [ -f "$1" ] || { echo "run_local: config $1: no such file" >&2; exit 2; }
       cfg+=(--config "$1"); shift ;;
  esac
done
[ ${#cfg[@]} -gt 0 ] || { usage >&2; exit 2; }
[ $((np % per_run)) -eq 0 ] || { echo "run_local: --ranks-per-run $per_run: expected a divisor of --np $np" >&2; exit 2; }
for s in $from $only; do
  [[ " ${SIEVE_STAGES[*]} " == *" $s "* ]] || { echo "run_local: unknown stage '$s' (stages: ${SIEVE_STAGES[*]})" >&2; exit 2; }
done
for s in "${SIEVE_STAGES[@]}"; do
  command -v "${SIEVE_STAGE_TOOL[$s]}" >/dev/null || { echo "run_local: ${SIEVE_STAGE_TOOL[$s]} not built (run: cmake --build build)" >&2; exit 2; }
done

run_dir="$(sieve_config_value run.dir "${cfg[@]}" "${sets[@]}")"
mkdir -p "$run_dir/logs"
# One pipeline per run directory: a second run_local.sh on the same run.dir is refused
# (flock: released when this shell and its children end, so a killed run leaves no stale
# lock). The file names the holder for the message.
lock="$run_dir/.run_local.lock"
exec 9>>"$lock"
flock -n 9 || { echo "run_local: $lock: another pipeline runs in $run_dir: $(cat "$lock" 2>/dev/null || echo unknown) (wait for it to end)" >&2; exit 1; }
echo "host=$(hostname) pid=$$ start=$(date -u +%Y-%m-%dT%H:%M:%SZ) tool=run_local" >"$lock"
mpirun_cmd=(mpirun -n "$np")
started=0
declare -a summary=()
t_all=$(date +%s)

run_stage_cmd() {  # stage, log, command...
  local stage="$1" log="$2"
  shift 2
  echo "run_local: [$stage] $*" | tee -a "$log"
  local rc=0
  "$@" 2>&1 | tee -a "$log" || rc=$?
  if [ $rc -ne 0 ]; then
    echo "run_local: stage '$stage' failed (exit $rc); log: $log" >&2
    exit $rc
  fi
}

# --- Which stages are current -------------------------------------------------------
# A stage's key (pipelines/stages.sh): its program, exactly the config sections it reads
# (SIEVE_STAGE_CONFIG), and the fingerprints (path, size, mtime) of the files it reads: the
# outputs of its input stages (SIEVE_STAGE_INPUTS) or, for shard, the source file or
# directory named by data.path. A stage that re-ran rewrote its outputs, so every stage
# reading them re-runs; a change to one section re-runs only the stages that read it.
resolved="$(shard_dataset "${cfg[@]}" "${sets[@]}" --get .)"
config_part() {  # SECTION or SECTION.KEY: its lines in the resolved config
  local sec="${1%%.*}" key=""
  [ "$sec" = "$1" ] || key="${1#*.}"
  # A top-level section: its line and the indented ones after it; a key: its line in the
  # section and the more indented ones after it.
  printf '%s\n' "$resolved" | awk -v s="$sec" '/^[^ #]/ { on = ($0 ~ "^" s ":") } on' |
    if [ -z "$key" ]; then cat; else awk -v k="$key" '/^  [^ ]/ { on = ($0 ~ "^  " k ":") } on'; fi
}
outputs_of() {  # the files a finished stage leaves (as the tools name them in run.dir)
  case "$1" in
    shard) echo "$run_dir/dataset.h5" ;;
    pretrain) echo "$run_dir/pretrain/model.h5" ;;
    features) echo "$run_dir/features.h5" ;;
    embed) echo "$run_dir/embedding.h5" ;;
    filter) echo "$run_dir/filter.h5" ;;
    sweep) local i; for ((i = 0; i < sweep_n; i++)); do echo "$run_dir/sweep/run-$i/result.json"; done ;;
    report) echo "$run_dir/report/index.html" ;;
  esac
}
optional_outputs_of() {  # outputs a stage leaves only with some settings (data.shards, holdout)
  case "$1" in
    shard) compgen -G "$run_dir/dataset.shard-*.h5" || true ;;
    pretrain) [ ! -f "$run_dir/pretrain/model_early.h5" ] || echo "$run_dir/pretrain/model_early.h5" ;;
  esac
}
outputs_record() {  # stage: "path size mtime" of each output, or fails if one is missing
  local f
  while read -r f; do
    [ -f "$f" ] || return 1
    stat -c '%n %s %.9Y' "$f"
  done < <(outputs_of "$1")
  while read -r f; do
    [ -z "$f" ] || stat -c '%n %s %.9Y' "$f"
  done < <(optional_outputs_of "$1")
}
source_record() {  # shard's input: data.path (a file, or a directory of files) as read now
  local src path
  src="$(printf '%s\n' "$resolved" | awk '/^data:/ { on = 1; next } /^[^ ]/ { on = 0 } on && /^  source:/ { print $2 }')"
  [ "$src" = synthetic ] && return 0
  path="$(sieve_config_value data.path "${cfg[@]}" "${sets[@]}")"
  if [ -d "$path" ]; then
    printf '[source] %s %s\n' "$path" "$(cd "$path" && find -L . -type f -printf '%P %s %T@\n' | LC_ALL=C sort | sha256sum)"
  elif [ -e "$path" ]; then
    printf '[source] %s\n' "$(stat -L -c '%n %s %.9Y' "$path")"
  else
    printf '[source] %s missing\n' "$path"
  fi
}
stage_key() {  # stage
  local part inp out="[program] ${SIEVE_STAGE_TOOL[$1]}"$'\n'
  for part in ${SIEVE_STAGE_CONFIG[$1]}; do
    out+="[config $part]"$'\n'"$(config_part "$part")"$'\n'
  done
  [ "$1" = shard ] && out+="$(source_record)"$'\n'
  for inp in ${SIEVE_STAGE_INPUTS[$1]}; do
    out+="[input $inp]"$'\n'"$(outputs_record "$inp" || echo missing)"$'\n'
  done
  printf '%s' "$out" | sha256sum | cut -d' ' -f1
}
is_current() {  # stage key
  local done_file="$run_dir/logs/$1.done" rec
  [ -f "$done_file" ] || return 1
  rec="$(outputs_record "$1")" || return 1
  [ "$(cat "$done_file")" = "key $2"$'\n'"$rec" ]
}

sweep_n="$(train_scaled "${cfg[@]}" "${sets[@]}" --sweep-size)"
for stage in "${SIEVE_STAGES[@]}"; do
  if [ -n "$only" ] && [ "$stage" != "$only" ]; then continue; fi
  if [ -n "$from" ] && [ $started -eq 0 ] && [ "$stage" != "$from" ]; then continue; fi
  started=1
  tool="${SIEVE_STAGE_TOOL[$stage]}"
  log="$run_dir/logs/$stage.log"
  key="$(stage_key "$stage")"
  if [ $force -eq 0 ] && [ -z "$only" ] && [ -z "$from" ] && is_current "$stage" "$key"; then
    echo "run_local: [$stage] current (outputs, config and inputs unchanged): skipped"
    summary+=("$(printf '%-10s %-18s %8s' "$stage" "$tool" skipped)")
    continue
  fi
  # An interrupted training stage with the same key continues from its checkpoints.
  mode=(--overwrite)
  if [ "${SIEVE_STAGE_TRAINS[$stage]}" = 1 ] && [ $force -eq 0 ] && [ -f "$run_dir/logs/$stage.started" ] &&
     [ "$(cat "$run_dir/logs/$stage.started")" = "key $key" ]; then
    mode=(--resume --overwrite)
    echo "run_local: [$stage] interrupted earlier with the same config: resuming from its checkpoints"
  fi
  rm -f "$run_dir/logs/$stage.done"
  echo "key $key" > "$run_dir/logs/$stage.started"
  : > "$log"
  t0=$(date +%s)
  if [ "${SIEVE_STAGE_KIND[$stage]}" = array ]; then
    echo "run_local: [$stage] $sweep_n sweep runs" | tee -a "$log"
    # One process for the whole grid: no MPI start-up and initialisation per run (about 3 s
    # each on 2 cores, a third of a quickstart run); Slurm runs them as an array instead.
    # Groups of --ranks-per-run ranks train different runs at once (docs/training.md).
    run_stage_cmd "$stage" "$log" "${mpirun_cmd[@]}" "$tool" "${cfg[@]}" "${sets[@]}" \
      --sweep-index "0-$((sweep_n - 1))" --ranks-per-run "$per_run" "${mode[@]}"
  else
    run_stage_cmd "$stage" "$log" "${mpirun_cmd[@]}" "$tool" "${cfg[@]}" "${sets[@]}" "${mode[@]}"
  fi
  rec="$(outputs_record "$stage")" || { echo "run_local: stage '$stage' exited 0 but left no $(outputs_of "$stage" | head -1)" >&2; exit 1; }
  printf 'key %s\n%s\n' "$key" "$rec" > "$run_dir/logs/$stage.done"
  rm -f "$run_dir/logs/$stage.started"
  summary+=("$(printf '%-10s %-18s %6d s' "$stage" "$tool" $(( $(date +%s) - t0 )))")
done

echo "run_local: done in $(( $(date +%s) - t_all )) s; outputs in $run_dir"
printf '  %s\n' "${summary[@]}"
[ -f "$run_dir/report/index.html" ] && echo "run_local: report: $run_dir/report/index.html"
exit 0
