#!/usr/bin/env bash
# The Python package (python/, docs/python.md) installed as a user would, into a fresh venv
# over Debian's python3 (h5py, numpy; offline: --no-deps --no-build-isolation), then used
# without torch on a tiny run: keep mask, random_keep, detector scores and flags and the
# suggested labels equal h5py's direct reads joined by sample_id; a filter from another
# dataset is refused naming both files; KeepMaskSampler's indices are exactly the kept ones
# (through a user's id list too), and over 2 ranks cover them with no overlap but padding
# (tests/support/check_python_package.py).
. "${SIEVE_SOURCE_DIR:?}/tests/fault/fault_common.bash"
. "$root/tests/pipeline/python_run.bash"
[ -x "$TOOLS/cluster_filter" ] || { echo "SKIP: $TOOLS/cluster_filter not built" >&2; exit 77; }
"$PY" -c "import venv, ensurepip" 2>/dev/null || { echo "SKIP: no python3-venv" >&2; exit 77; }
dir="$(scratch python_package)"
make_python_run "$dir/run"
# Another seed: another dataset fingerprint for the same sample ids.
"$TOOLS/shard_dataset" --config "$CONFIG" --set run.dir="$dir/other" --set run.seed=8 \
  >"$dir/other.log" 2>&1 || { cat "$dir/other.log"; fail "shard_dataset (other) failed"; }

# pip builds in the source directory (build/, *.egg-info): install from a copy, so that the
# checkout stays clean and the test proves the installed copy is what gets imported.
cp -r "$root/python" "$dir/src"
"$PY" -m venv --system-site-packages "$dir/venv" || fail "venv failed"
"$dir/venv/bin/python" -m pip install -q --no-deps --no-build-isolation --no-index "$dir/src" \
  >"$dir/pip.log" 2>&1 || { cat "$dir/pip.log"; fail "pip install of python/ failed"; }
cd "$dir"  # not the checkout: the import must come from the venv
"$dir/venv/bin/python" "$root/tests/support/check_python_package.py" "$dir/run" "$dir/other" \
  "$root" || fail "package checks failed"
echo "python_package: OK"
