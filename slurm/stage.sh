#!/usr/bin/env bash
#SBATCH --job-name=sieve-stage
#SBATCH --output=%x-%j.out
# One pipeline stage inside a Slurm allocation. Submitted by slurm/full_pipeline.sh, which
# sets the job name, log file (%x-%j / %A_%a), task count, dependency, and for training
# stages --signal=USR1@<s> and --requeue. Usage: stage.sh STAGE [--config F ...] [--set k=v ...]
#
# Training stages: on USR1 (Slurm's warning before the time limit) the program writes a
# checkpoint and exits with code 75 ("checkpointed, resume me"); this script then requeues
# the job, and the requeued run (SLURM_RESTART_COUNT > 0) resumes from that checkpoint.
set -uo pipefail
stage="$1"
shift
root="${SIEVE_ROOT:?SIEVE_ROOT not set (submit with slurm/full_pipeline.sh)}"
. "$root/scripts/env.sh"
. "$root/pipelines/stages.sh"
tool="${SIEVE_STAGE_TOOL[$stage]:?unknown stage $stage}"

# One OpenMP thread per allocated core of each rank (Slurm's cpus-per-task).
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}"
extra=()
if [ "${SIEVE_STAGE_KIND[$stage]}" = array ]; then
  extra+=("${SIEVE_STAGE_INDEX_FLAG[$stage]}" "${SLURM_ARRAY_TASK_ID:?array stage outside a job array}")
fi
if [ "${SIEVE_STAGE_TRAINS[$stage]}" = 1 ] && [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ]; then
  extra+=(--resume)
fi
echo "stage.sh: $stage on $(hostname), job ${SLURM_JOB_ID:-?}${SLURM_ARRAY_TASK_ID:+ task $SLURM_ARRAY_TASK_ID}, restart ${SLURM_RESTART_COUNT:-0}, $SLURM_NTASKS task(s)"

# A rank lost with its node is seen first by its peers: a write to the dead socket kills the
# surviving rank with SIGPIPE, or MPI reports the lost peer, and srun can return within
# seconds, before slurmctld has declared the silent node DOWN (SlurmdTimeout). Exiting then
# ends the job FAILED, where Slurm would have cancelled it for node failure and requeued it.
# So when a step fails on a multi-node allocation, an empty step probes every node: if all
# answer, the failure is the program's own and the script exits at once; if one does not,
# the script waits for the controller's verdict (it cancels and requeues this job), and exits
# with the step's code only if no verdict comes within 3 x SlurmdTimeout + MessageTimeout.
slurm_config_seconds() {
  scontrol show config 2>/dev/null | sed -n "s/^$1 *= *\([0-9]*\) sec.*/\1/p" | head -n 1
}
wait_if_a_node_was_lost() {
  local rc="$1" nodes="${SLURM_JOB_NUM_NODES:-1}"
  [ "$rc" -ne 0 ] && [ "$nodes" -gt 1 ] || return 0
  local slurmd_timeout message_timeout
  slurmd_timeout="$(slurm_config_seconds SlurmdTimeout)"
  message_timeout="$(slurm_config_seconds MessageTimeout)"
  slurmd_timeout="${slurmd_timeout:-300}" message_timeout="${message_timeout:-10}"
  if timeout "$((message_timeout + 10))" srun --mpi=none --kill-on-bad-exit=0 \
    --nodes="$nodes" --ntasks="$nodes" --ntasks-per-node=1 true >/dev/null 2>&1; then
    echo "stage.sh: $stage failed (exit $rc); all $nodes nodes answer, so it is the step's own failure"
    return 0
  fi
  local wait_s=$((3 * slurmd_timeout + message_timeout))
  echo "stage.sh: $stage failed (exit $rc) and a node of ${SLURM_JOB_NODELIST:-the allocation} does" \
    "not answer; waiting up to ${wait_s} s for Slurm to declare it down and requeue this job"
  sleep "$wait_s"
  echo "stage.sh: no node failure declared within ${wait_s} s; $stage ends with exit $rc"
}

srun --mpi="${SIEVE_SRUN_MPI:-pmix}" --kill-on-bad-exit=1 "$tool" "$@" --overwrite "${extra[@]}"
rc=$?
if [ $rc -eq 75 ] && [ "${SIEVE_STAGE_TRAINS[$stage]}" = 1 ]; then
  echo "stage.sh: $stage checkpointed before the time limit; requeueing job $SLURM_JOB_ID"
  if [ -n "${SLURM_ARRAY_JOB_ID:-}" ]; then
    scontrol requeue "${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"
  else
    scontrol requeue "$SLURM_JOB_ID"
  fi
  exit 0
fi
wait_if_a_node_was_lost "$rc"
exit $rc
