#!/usr/bin/env bash
# A model or checkpoint with one NaN weight is refused where it is read, with an error that
# names the file and the tensor, and nothing is written. Before the fix extract_features
# exited 0 and wrote features (the ReLU after the NaN hid it). (issue 26, defect 8)
. "${SIEVE_SOURCE_DIR:?}/tests/fault/fault_common.bash"

dir="$(scratch nan_model)"
make_dataset "$dir"
"$TOOLS/pretrain" --config "$CONFIG" --set run.dir="$dir" "${TRAIN_SETS[@]}" --set pretrain.epochs=1 \
  >"$dir/pretrain.log" 2>&1 || { cat "$dir/pretrain.log"; fail "pretrain failed"; }

# poison FILE: one NaN in the middle of the first conv weight; echoes the tensor's name.
poison() {
  "$PY" - "$1" <<'PYEOF'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    name = next(k for k in sorted(f["state"].keys()) if k.endswith("conv1.weight"))
    w = f["state"][name][()]
    flat = w.reshape(-1)
    flat[17] = np.nan
    f["state"][name][...] = flat.reshape(w.shape)
    print(name)
PYEOF
}

cp "$dir/pretrain/model.h5" "$dir/bad.h5"
tensor="$(poison "$dir/bad.h5")" || fail "could not write the NaN"
"$TOOLS/extract_features" --config "$CONFIG" --set run.dir="$dir" --model "$dir/bad.h5" \
  --output "$dir/f.h5" >"$dir/features.log" 2>&1
rc=$?
[ $rc -ne 0 ] || fail "extract_features accepted a model with a NaN weight (exit 0)"
line="$(one_error_line extract_features "$dir/features.log")"
case "$line" in
  *"$dir/bad.h5"*"$tensor holds NaN/Inf (element 17 "*) echo "  refused (exit $rc): $line" ;;
  *) fail "error does not name the file and tensor $tensor: $line" ;;
esac
[ ! -e "$dir/f.h5" ] && [ ! -e "$dir/f.config.yaml" ] || fail "output written for a NaN model"
no_tmp_files "$dir"

# The newest checkpoint with a NaN: --resume refuses it the same way.
ckpt="$(ls "$dir"/pretrain/checkpoints/ckpt-*.h5 | sort | tail -1)"
[ -n "$ckpt" ] || fail "no checkpoint to poison"
tensor="$(poison "$ckpt")" || fail "could not write the NaN into $ckpt"
"$TOOLS/pretrain" --config "$CONFIG" --set run.dir="$dir" "${TRAIN_SETS[@]}" --set pretrain.epochs=1 \
  --resume --overwrite >"$dir/resume.log" 2>&1 && fail "pretrain --resume accepted a checkpoint with a NaN"
one_error_line pretrain "$dir/resume.log" | grep -qF "$ckpt: /state/$tensor holds NaN/Inf" ||
  { cat "$dir/resume.log" >&2; fail "pretrain --resume: error does not name $ckpt and $tensor"; }
echo "PASS: NaN model refused"
