# Source this (". scripts/env.sh") before running Sieve programs with mpirun by hand.
# The tests, the pipeline runner and the Slurm job scripts all source it.
#  - OpenMPI refuses to start as root without the two ALLOW variables (containers, CI).
#  - Oversubscription lets a 2-core machine run the 3-rank tests.
#  - vader's CMA single-copy needs ptrace rights that containers often deny.
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_hwloc_base_binding_policy=none
SIEVE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export SIEVE_ROOT
export SIEVE_BUILD_DIR="${SIEVE_BUILD_DIR:-$SIEVE_ROOT/build}"
export PATH="$SIEVE_BUILD_DIR/tools:$PATH"
