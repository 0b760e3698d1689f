# Shared set-up of the slurm-labelled tests (sourced; not a test itself): a private local
# Slurm, so that a cluster someone else started stays untouched, a scratch directory,
# teardown on every exit, and fail() that shows the job logs and the daemons' logs.
#   . "$SRC/tests/slurm/slurm_common.bash"; slurm_test_setup NAME PORT
# sets SIEVE_SLURM_DIR (/tmp/sieve-slurm-NAME-PID), SIEVE_SLURM_PORT and WORK
# ($SIEVE_BUILD_DIR/test-scratch/slurm_NAME, emptied). SRC must be set.

slurm_test_setup() {
  export SIEVE_SLURM_DIR="/tmp/sieve-slurm-$1-$$"
  export SIEVE_SLURM_PORT="$2"
  WORK="$SIEVE_BUILD_DIR/test-scratch/slurm_$1"
  rm -rf "$WORK"
  mkdir -p "$WORK"
  trap slurm_test_cleanup EXIT
}

# stop also removes a two-node cluster's namespace and veth pair (scripts/slurm_local.sh).
slurm_test_cleanup() {
  "$SRC/scripts/slurm_local.sh" stop >/dev/null 2>&1 || true
  rm -rf "$SIEVE_SLURM_DIR"
}

fail() {
  echo "FAIL: $*" >&2
  local f
  for f in "$WORK"/*/logs/*.out "$SIEVE_SLURM_DIR"/log/*.log; do
    [ -f "$f" ] && { echo "--- $f"; tail -n 15 "$f"; }
  done >&2
  exit 1
}
