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
exit $rc
