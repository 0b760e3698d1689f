# `cmake --install <build> --prefix P` lays Sieve out as HPC centres install software:
#   P/bin                                 the seven programs (tools/CMakeLists.txt)
#   P/share/sieve                         configs, pipelines, slurm scripts, scripts/env.sh
#                                         (sourced by them), docs, the Python package
#   P/share/modulefiles/sieve/<ver>.lua   the Lmod module: PATH, SIEVE_ROOT, PYTHONPATH
# The scripts find their tree from their own location (or SIEVE_ROOT under sbatch) and the
# programs on PATH, so the same files work from a checkout and from P (docs/slurm.md).
set(SIEVE_SHARE share/sieve)
install(DIRECTORY configs pipelines slurm docs DESTINATION ${SIEVE_SHARE} USE_SOURCE_PERMISSIONS)
install(FILES README.md DESTINATION ${SIEVE_SHARE})
# What the pipeline and Slurm scripts source, and the local test cluster to try them on.
install(PROGRAMS scripts/env.sh scripts/slurm_local.sh DESTINATION ${SIEVE_SHARE}/scripts)
# The Python package's sources: on PYTHONPATH with the module (pip would build inside this
# directory, which users cannot write: to pip-install it, copy it first).
install(DIRECTORY python DESTINATION ${SIEVE_SHARE}
        PATTERN "__pycache__" EXCLUDE PATTERN "*.egg-info" EXCLUDE PATTERN "build" EXCLUDE)
configure_file(${CMAKE_CURRENT_LIST_DIR}/sieve.lua.in ${CMAKE_BINARY_DIR}/sieve.lua @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/sieve.lua DESTINATION share/modulefiles/sieve
        RENAME ${PROJECT_VERSION}.lua)
