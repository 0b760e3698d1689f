#!/usr/bin/env bash
# Sieve installed as HPC software (cmake/install.cmake, docs/slurm.md "Installing"):
#  1. `cmake --install` to a fresh prefix gives bin/ (the seven programs), share/sieve and
#     the Lmod module file; with Debian's Lmod, `module load sieve` puts that bin/ on PATH,
#     sets SIEVE_ROOT and PYTHONPATH; the module still works after the prefix is moved.
#  2. From a working directory outside the checkout, with no build directory on PATH:
#     pipelines/run_local.sh of the install runs a stage, and
#     `sbatch $SIEVE_ROOT/slurm/full_pipeline.sh $SIEVE_ROOT/configs/tiny.yaml` runs the whole
#     chain on a private local Slurm; the report lands under that directory (the config's
#     relative run.dir), nothing under the prefix.
set -uo pipefail
SRC="${SIEVE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
[ "$(id -u)" -eq 0 ] || { echo "skip: needs root"; exit 77; }
for b in slurmctld slurmd munged sbatch srun cmake; do
  command -v "$b" >/dev/null || { echo "skip: $b not installed"; exit 77; }
done
LMOD_INIT=/usr/share/lmod/lmod/init/bash  # Debian's lmod
[ -f "$LMOD_INIT" ] || { echo "skip: no Lmod ($LMOD_INIT; scripts/install_deps.sh installs lmod)"; exit 77; }
. "$SRC/scripts/env.sh"
build="$SIEVE_BUILD_DIR"
tools=(shard_dataset pretrain extract_features reduce_dims cluster_filter train_scaled report)
for t in "${tools[@]}"; do
  [ -x "$build/tools/$t" ] || { echo "skip: $build/tools/$t not built"; exit 77; }
done
. "$SRC/tests/slurm/slurm_common.bash"
slurm_test_setup installed "${SIEVE_SLURM_INSTALLED_PORT:-6877}"
# The working directory: outside the checkout (and its build tree).
wd="$(mktemp -d /tmp/sieve-installed-wd.XXXXXX)"
trap 'slurm_test_cleanup; rm -rf "$wd"' EXIT

# 1. install, load, move
prefix="$WORK/prefix"
cmake --install "$build" --prefix "$prefix" >"$WORK/install.log" 2>&1 ||
  { cat "$WORK/install.log"; fail "cmake --install failed"; }
[ "$(ls "$prefix/bin" | sort | tr '\n' ' ')" = "$(printf '%s\n' "${tools[@]}" | sort | tr '\n' ' ')" ] ||
  fail "bin/ holds $(ls "$prefix/bin" | tr '\n' ' '), expected the seven programs"
for f in configs/tiny.yaml pipelines/stages.sh pipelines/run_local.sh slurm/full_pipeline.sh \
         slurm/stage.sh scripts/env.sh docs/formats.md python/sieve_pipeline/__init__.py; do
  [ -f "$prefix/share/sieve/$f" ] || fail "share/sieve/$f not installed"
done
ls "$prefix"/share/modulefiles/sieve/*.lua >/dev/null 2>&1 || fail "no module file"

# A shell as a user's: no checkout or build directory in the environment.
unset SIEVE_ROOT SIEVE_BUILD_DIR
PATH="$(echo "$PATH" | tr ':' '\n' | grep -v "^$build" | grep -v "^$SRC" | paste -sd:)"
. "$LMOD_INIT"
load() {  # load PREFIX: module load sieve from that prefix, and check what it set
  module purge >/dev/null 2>&1
  module unuse "$prefix/share/modulefiles" >/dev/null 2>&1
  module use "$1/share/modulefiles" && module load sieve || fail "module load sieve failed"
  [ "$(command -v shard_dataset)" = "$1/bin/shard_dataset" ] ||
    fail "shard_dataset on PATH is '$(command -v shard_dataset)', not $1/bin's"
  [ "$SIEVE_ROOT" = "$1/share/sieve" ] || fail "SIEVE_ROOT=$SIEVE_ROOT, expected $1/share/sieve"
  /usr/bin/python3 -c "import sieve_pipeline, sys; assert sieve_pipeline.__file__.startswith('$1/'), sieve_pipeline.__file__" ||
    fail "sieve_pipeline not importable from the module's PYTHONPATH"
}
mv "$prefix" "$WORK/moved" && load "$WORK/moved" && mv "$WORK/moved" "$prefix"
module unuse "$WORK/moved/share/modulefiles" >/dev/null 2>&1
load "$prefix"
echo "ok: module load sieve: PATH $prefix/bin, SIEVE_ROOT $SIEVE_ROOT (also after a move)"

# 2. run from the install, in a directory outside the checkout
cd "$wd"
"$SIEVE_ROOT/pipelines/run_local.sh" "$SIEVE_ROOT/configs/tiny.yaml" --np 1 --only shard \
  --set run.dir=local >"$WORK/local.out" 2>&1 || { cat "$WORK/local.out"; fail "run_local.sh from the install"; }
[ -f "$wd/local/dataset.h5" ] || fail "run_local.sh wrote no $wd/local/dataset.h5"

"$SRC/scripts/slurm_local.sh" start || fail "could not start the local Slurm"
. "$SIEVE_SLURM_DIR/env.sh"
# tiny.yaml's relative run.dir (runs/tiny) is taken from this directory. One epoch per
# training stage and one batch size (3 sweep jobs): a few minutes at most on 2 cores.
t0=$SECONDS
sbatch --wait --output="$wd/submit.out" "$SIEVE_ROOT/slurm/full_pipeline.sh" \
  "$SIEVE_ROOT/configs/tiny.yaml" --set pretrain.epochs=1 --set scaled.epochs=1 \
  --set 'scaled.sweep.global_batch=[32]' >"$WORK/sbatch.out" 2>&1 ||
  { cat "$WORK/sbatch.out" "$wd/submit.out"; fail "the submitting job failed"; }
cat "$wd/submit.out"
run="$wd/runs/tiny"
# fail() shows the job logs under $WORK: copy the run's there first.
fail_run() { mkdir -p "$WORK/run" && cp -r "$run/logs" "$WORK/run/" 2>/dev/null; fail "$@"; }
[ -s "$run/logs/jobs.txt" ] || fail_run "no $run/logs/jobs.txt: run.dir not taken from the working directory"
for id in $(cat "$run/logs/jobs.txt"); do
  while squeue -h -j "$id" 2>/dev/null | grep -q .; do
    [ $((SECONDS - t0)) -lt 400 ] || fail_run "job $id still queued 400 s after the submission"
    sleep 2
  done
done
[ -s "$run/report/index.html" ] || fail_run "no report at $run/report/index.html"
[ ! -e "$prefix/share/sieve/runs" ] || fail_run "the pipeline wrote under the prefix"
echo "installed_module: OK (report at $run/report/index.html, $((SECONDS - t0)) s after submission)"
