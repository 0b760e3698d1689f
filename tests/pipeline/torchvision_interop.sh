#!/usr/bin/env bash
# A model trained in bf16 (the cpu backend's: native, or emulated on CPUs without bf16;
# SIEVE_BF16_BACKEND=ref for the reference loops) is a torchvision state_dict: scripts/check_torchvision.py loads it into torchvision's ResNet-18
# (CIFAR stem) and, in fp32 eval, gets the class probabilities and features extract_features
# wrote. Needs torch + torchvision: the bench environment (scripts/install_deps.sh --bench,
# SIEVE_BENCH_VENV or .venv-bench); exits 77 (skipped) without it, as in CI.
set -uo pipefail
root="${SIEVE_SOURCE_DIR:?}"
. "$root/scripts/env.sh"
py="${SIEVE_BENCH_VENV:-$root/.venv-bench}/bin/python"
if ! "$py" -c "import torch, torchvision, h5py" 2>/dev/null; then
  echo "torchvision_interop: no torch + torchvision in ${py%/bin/python}: skipped"
  exit 77
fi
bin="$SIEVE_BUILD_DIR/tools"
dir="$SIEVE_BUILD_DIR/test-scratch/torchvision_interop"
rm -rf "$dir" && mkdir -p "$dir"
# 8x8 images keep a width-1 ResNet-18 cheap (and cheap enough for the naive ref backend).
"$bin/shard_dataset" --set run.dir="$dir" --set data.source=synthetic --set data.synthetic.height=8 \
  --set data.synthetic.width=8 --set data.synthetic.train_per_class=24 --set data.synthetic.test_per_class=4 \
  --set data.synthetic.classes=4 || exit 1
"$bin/pretrain" --set run.dir="$dir" --set pretrain.model.arch=resnet18 \
  --set pretrain.backend="${SIEVE_BF16_BACKEND:-cpu}" --set pretrain.precision=bf16 \
  --set pretrain.epochs=2 --set pretrain.global_batch=32 --set pretrain.holdout=0 \
  --set pretrain.optimizer.lr=0.01 --set pretrain.schedule.warmup_epochs=0 \
  --set pretrain.augment=false || exit 1
"$bin/extract_features" --set run.dir="$dir" --set features.precision=fp32 || exit 1
"$py" "$root/scripts/check_torchvision.py" "$dir/pretrain/model.h5" "$dir/dataset.h5" \
  "$dir/features.h5" 64 || exit 1
echo "torchvision_interop: OK"
