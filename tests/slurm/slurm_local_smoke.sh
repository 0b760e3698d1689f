#!/usr/bin/env bash
# Smoke test of scripts/slurm_local.sh (label slurm): start a private single-node Slurm,
# run a batch job, a 2-task MPI step over PMIx, requeue a running job and see it run again,
# then stop. Skips (77) where Slurm cannot run here (not root, packages missing).
set -euo pipefail
SRC="${SIEVE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
[ "$(id -u)" -eq 0 ] || { echo "skip: needs root"; exit 77; }
for b in slurmctld slurmd munged sbatch srun mpicc; do
  command -v "$b" >/dev/null || { echo "skip: $b not installed"; exit 77; }
done

# A private cluster: own state dir and ports, so a cluster someone started stays untouched.
export SIEVE_SLURM_DIR="/tmp/sieve-slurm-test-$$"
export SIEVE_SLURM_PORT="${SIEVE_SLURM_TEST_PORT:-6837}"
WORK="${SIEVE_BUILD_DIR:-/tmp}/test-scratch/slurm_local_smoke"
rm -rf "$WORK"; mkdir -p "$WORK"
cleanup() { "$SRC/scripts/slurm_local.sh" stop >/dev/null 2>&1 || true; rm -rf "$SIEVE_SLURM_DIR"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$SIEVE_SLURM_DIR"/log/*.log; do echo "--- $f"; tail -n 20 "$f"; done >&2; exit 1; }

"$SRC/scripts/slurm_local.sh" start
"$SRC/scripts/slurm_local.sh" start   # idempotent: second start is a no-op
. "$SIEVE_SLURM_DIR/env.sh"
grep -q '^SelectType=select/cons_tres' "$SLURM_CONF" || fail "slurm.conf lacks cons_tres"
cd "$WORK"

# Wait until job $1 has left the queue (or fail after $2 seconds).
wait_gone() {
  local t0=$SECONDS
  while squeue -h -j "$1" 2>/dev/null | grep -q .; do
    [ $((SECONDS - t0)) -lt "$2" ] || fail "job $1 still queued after $2 s: $(squeue -j "$1")"
    sleep 0.5
  done
}

# 1. a batch job
grep -q "CPUs=$(OMP_NUM_THREADS= nproc) " "$SLURM_CONF" || fail "slurm.conf CPUs != nproc"
jid=$(sbatch --parsable -o "$WORK/host-%j.out" --wrap "hostname")
wait_gone "$jid" 30
grep -qx "$(hostname)" "$WORK/host-$jid.out" || fail "batch output: $(cat "$WORK/host-$jid.out" 2>&1)"
echo "ok: sbatch --wrap hostname ($jid)"

# 2. a 2-task MPI hello through the configured MPI plugin (pmix where present)
cat > hello.c <<'C'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char** argv) {
  int r, n;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  int sum = 0;
  MPI_Allreduce(&r, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  printf("hello %d of %d sum %d\n", r, n, sum);
  MPI_Finalize();
  return 0;
}
C
mpicc -o hello hello.c
mpi=$(sed -n 's/^MpiDefault=//p' "$SLURM_CONF")
timeout 60 srun --mpi="$mpi" -n 2 -o "$WORK/mpi.out" ./hello || fail "srun --mpi=$mpi -n 2 failed: $(cat mpi.out)"
for r in 0 1; do
  grep -qx "hello $r of 2 sum 1" mpi.out || fail "MPI output lacks rank $r: $(cat mpi.out)"
done
echo "ok: srun --mpi=$mpi -n 2 hello"

# 3. requeue: first run blocks, requeued run (SLURM_RESTART_COUNT=1) finishes at once
jid=$(sbatch --parsable --requeue --open-mode=append -o "$WORK/requeue.out" --wrap \
  'echo "run ${SLURM_RESTART_COUNT:-0}"; [ "${SLURM_RESTART_COUNT:-0}" -ge 1 ] || sleep 120')
t0=$SECONDS
until grep -q "run 0" requeue.out 2>/dev/null; do
  [ $((SECONDS - t0)) -lt 20 ] || fail "job $jid never started"; sleep 0.3
done
scontrol requeue "$jid" || fail "scontrol requeue $jid failed"
# slurm_local.sh sets cred_expire=10: the requeued job is eligible again after ~11 s.
wait_gone "$jid" 60
grep -q "run 1" requeue.out || fail "requeued job did not rerun: $(cat requeue.out)"
echo "ok: scontrol requeue reran job $jid"

"$SRC/scripts/slurm_local.sh" stop
"$SRC/scripts/slurm_local.sh" stop    # idempotent
! pgrep -f "slurmctld .*$SIEVE_SLURM_DIR" >/dev/null || fail "slurmctld still running after stop"
echo "PASS"
