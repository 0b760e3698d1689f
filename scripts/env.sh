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
#  - A Sieve program prints its own one-line error and every rank exits with the code; without
#    this, mpirun adds a "Primary job terminated normally, but 1 process returned a non-zero
#    exit code" banner (and an MPI_ABORT banner) to that line. mpirun's exit code is kept
#    (a rank killed by a signal still gives 128+N, only without ORTE's message).
export OMPI_MCA_orte_execute_quiet="${OMPI_MCA_orte_execute_quiet:-1}"
SIEVE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export SIEVE_ROOT
export SIEVE_BUILD_DIR="${SIEVE_BUILD_DIR:-$SIEVE_ROOT/build}"
export PATH="$SIEVE_BUILD_DIR/tools:$PATH"
