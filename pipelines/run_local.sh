#!/usr/bin/env bash
# Run the whole Sieve pipeline on this machine, every stage under mpirun.
#
#   pipelines/run_local.sh CONFIG.yaml [MORE.yaml ...] [--np N] [--from STAGE] [--only STAGE]
#                          [--set key=value ...]
#
#   CONFIG.yaml   the pipeline config; further files are layered on top (e.g. a sweep grid)
#   --np N        MPI ranks per stage (default 2)
#   --from STAGE  start at STAGE (the outputs of earlier stages must exist)
#   --only STAGE  run just STAGE
#   --set k=v     config override given to every stage (repeatable)
# Stages and their order come from pipelines/stages.sh (the same graph the Slurm submitter
# uses). Each stage's log is written to <run.dir>/logs/<stage>.log; a failing stage stops
# the run and its log is named.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/../scripts/env.sh"
. "$here/stages.sh"

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }
cfg=() np=2 from="" only="" sets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --np) np="$2"; shift 2 ;;
    --from) from="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "run_local: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) [ -f "$1" ] || { echo "run_local: config $1: no such file" >&2; exit 2; }
       cfg+=(--config "$1"); shift ;;
  esac
done
[ ${#cfg[@]} -gt 0 ] || { usage >&2; exit 2; }
for s in $from $only; do
  [ -n "${SIEVE_STAGE_TOOL[$s]:-}" ] || { echo "run_local: unknown stage '$s' (stages: ${SIEVE_STAGES[*]})" >&2; exit 2; }
done
for s in "${SIEVE_STAGES[@]}"; do
  command -v "${SIEVE_STAGE_TOOL[$s]}" >/dev/null || { echo "run_local: ${SIEVE_STAGE_TOOL[$s]} not built (run: cmake --build build)" >&2; exit 2; }
done

run_dir="$(sieve_config_value run.dir "${cfg[@]}" "${sets[@]}")"
mkdir -p "$run_dir/logs"
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

for stage in "${SIEVE_STAGES[@]}"; do
  if [ -n "$only" ] && [ "$stage" != "$only" ]; then continue; fi
  if [ -n "$from" ] && [ $started -eq 0 ] && [ "$stage" != "$from" ]; then continue; fi
  started=1
  tool="${SIEVE_STAGE_TOOL[$stage]}"
  log="$run_dir/logs/$stage.log"
  : > "$log"
  t0=$(date +%s)
  if [ "${SIEVE_STAGE_KIND[$stage]}" = array ]; then
    n="$("$tool" "${cfg[@]}" "${sets[@]}" --sweep-size)"
    echo "run_local: [$stage] $n sweep runs" | tee -a "$log"
    # One process for the whole grid: no MPI start-up and initialisation per run (about 3 s
    # each on 2 cores, a third of a quickstart run); Slurm runs them as an array instead.
    run_stage_cmd "$stage" "$log" "${mpirun_cmd[@]}" "$tool" "${cfg[@]}" "${sets[@]}" \
      --sweep-index "0-$((n - 1))" --overwrite
  else
    run_stage_cmd "$stage" "$log" "${mpirun_cmd[@]}" "$tool" "${cfg[@]}" "${sets[@]}" --overwrite
  fi
  summary+=("$(printf '%-10s %-18s %6d s' "$stage" "$tool" $(( $(date +%s) - t0 )))")
done

echo "run_local: done in $(( $(date +%s) - t_all )) s; outputs in $run_dir"
printf '  %s\n' "${summary[@]}"
[ -f "$run_dir/report/index.html" ] && echo "run_local: report: $run_dir/report/index.html"
exit 0
