#!/usr/bin/env python3
"""Loads a Sieve model file (sieve.model/1) into torchvision's ResNet and checks that PyTorch,
in fp32 eval mode, gives the class probabilities and penultimate features extract_features
wrote for the same samples.

    python scripts/check_torchvision.py MODEL.h5 DATASET.h5 FEATURES.h5 [rows=64]

Works for models trained in any precision (the file holds fp32 weights). The CIFAR stem
(3x3 conv, stride 1, no max-pool) is torchvision's ResNet with conv1 replaced and the
max-pool removed; Sieve's width multiplier is not expressible in torchvision (exit 2).
Exit 0 and one line "torchvision: ... max |dprob| ..." when they agree (|dprob| <= 1e-4,
relative feature difference <= 1e-3), 1 otherwise. Needs torch, torchvision, h5py, numpy
(scripts/install_deps.sh --bench).
"""
import sys

import h5py
import numpy as np
import torch
import torchvision


def text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def build(model_file):
    attrs = model_file.attrs
    arch, stem = text(attrs["arch"]), text(attrs["stem"])
    if float(attrs["width"]) != 1.0 or not arch.startswith("resnet"):
        sys.exit(f"check_torchvision: {arch} width {float(attrs['width'])}: only torchvision's "
                 "ResNets at width 1 have a torchvision twin")
    net = getattr(torchvision.models, arch)(num_classes=int(attrs["num_classes"]))
    channels = int(np.asarray(attrs["input_shape"])[0])
    if stem == "cifar":
        net.conv1 = torch.nn.Conv2d(channels, 64, 3, 1, 1, bias=False)
        net.maxpool = torch.nn.Identity()
    elif channels != 3:
        net.conv1 = torch.nn.Conv2d(channels, 64, 7, 2, 3, bias=False)
    state = {}
    for name, value in net.state_dict().items():
        stored = np.asarray(model_file["state/" + name])
        state[name] = torch.from_numpy(stored.astype(np.float32)).reshape(value.shape).to(value.dtype)
    net.load_state_dict(state, strict=True)  # every name and shape must match
    return net.eval(), text(attrs.get("precision", "fp32"))


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    rows = int(sys.argv[4]) if len(sys.argv) > 4 else 64
    with h5py.File(sys.argv[1], "r") as mf, h5py.File(sys.argv[2], "r") as df, \
            h5py.File(sys.argv[3], "r") as ff:
        net, precision = build(mf)
        images = np.asarray(df["train/images"][:rows], dtype=np.float32) / 255.0  # NHWC
        mean = np.asarray(df.attrs["mean"], dtype=np.float32)
        std = np.asarray(df.attrs["std"], dtype=np.float32)
        x = torch.from_numpy(((images - mean) / std).transpose(0, 3, 1, 2).copy())
        want_probs = np.asarray(ff["train/probs"][:rows])
        want_feats = np.asarray(ff["train/features"][:rows])
    features = {}
    net.avgpool.register_forward_hook(lambda m, i, o: features.update(f=torch.flatten(o, 1)))
    with torch.no_grad():
        probs = torch.softmax(net(x), dim=1).numpy()
    feats = features["f"].numpy()
    dprob = float(np.abs(probs - want_probs).max())
    dfeat = float(np.abs(feats - want_feats).max() / (1.0 + np.abs(want_feats).max()))
    ok = dprob <= 1e-4 and dfeat <= 1e-3
    print(f"torchvision {torchvision.__version__} (torch {torch.__version__}): {sys.argv[1]} "
          f"(trained in {precision}) on {rows} samples: max |dprob| {dprob:.2e}, "
          f"relative feature difference {dfeat:.2e}: {'match' if ok else 'MISMATCH'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
