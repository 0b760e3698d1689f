#!/usr/bin/env bash
# The Python package's PyTorch side (docs/python.md): SieveDataset on the filtered arm of a
# tiny run with DistributedSampler and DataLoader workers, a few training steps of a small
# CNN, and KeepMaskSampler through a DataLoader (tests/support/check_python_torch.py).
# Needs torch: the bench environment (scripts/install_deps.sh --bench, SIEVE_BENCH_VENV or
# .venv-bench), into which the package is pip-installed (--target, offline); exits 77
# (skipped) without it, as in CI.
. "${SIEVE_SOURCE_DIR:?}/tests/fault/fault_common.bash"
. "$root/tests/pipeline/python_run.bash"
py="${SIEVE_BENCH_VENV:-$root/.venv-bench}/bin/python"
if ! "$py" -c "import torch, h5py, setuptools" 2>/dev/null; then
  echo "python_torch: no torch + h5py in ${py%/bin/python}: skipped"
  exit 77
fi
[ -x "$TOOLS/cluster_filter" ] || { echo "SKIP: $TOOLS/cluster_filter not built" >&2; exit 77; }
dir="$(scratch python_torch)"
make_python_run "$dir/run"
cp -r "$root/python" "$dir/src"
"$py" -m pip install -q --no-deps --no-build-isolation --no-index --target "$dir/site" \
  "$dir/src" >"$dir/pip.log" 2>&1 || { cat "$dir/pip.log"; fail "pip install of python/ failed"; }
cd "$dir"
PYTHONPATH="$dir/site" "$py" "$root/tests/support/check_python_torch.py" "$dir/run" ||
  fail "torch checks failed"
echo "python_torch: OK"
