#!/usr/bin/python3
"""Synthetic inputs for cluster_filter at any size (for memory and scaling runs).

Writes, in OUT_DIR:
  features.h5   sieve.features/1: /train/features float32 [N,F], /train/probs float32 [N,C],
                /train/labels int32 [N], /train/sample_id int64 [N]
  embedding.h5  sieve.embedding/1: /embedding float32 [N,2], /labels, /sample_id

Hand-made files carry no lineage fingerprints, which cluster_filter accepts (a file
without one is not checked, docs/formats.md "Lineage"). Classes are directions in feature
space and blobs in the embedding; a fraction of the labels is flipped (the flipped rows sit
in their true class's direction and blob), so the knn and confident detectors have
something to find. Rows are written in blocks, so memory stays small at any N.

  /usr/bin/python3 scripts/make_filter_inputs.py OUT_DIR [--n 1000000] [--features 512]
      [--classes 10] [--flip 0.05] [--spread 0.8] [--no-probs] [--seed 1] [--block 65536]

--spread is the norm of the feature noise around a class's unit direction (two classes'
directions are ~1.41 apart): 0.8 leaves the classes far apart. --no-probs leaves out
/train/probs (the knn detector does not read them; 5 GB at 1.28 M samples of 1000 classes);
the random draws then differ from those of a file with them.
"""
import argparse
import os

import h5py
import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--n", type=int, default=1000000)
    ap.add_argument("--features", type=int, default=512)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--flip", type=float, default=0.05)
    ap.add_argument("--spread", type=float, default=0.8)
    ap.add_argument("--no-probs", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--block", type=int, default=65536)
    a = ap.parse_args()
    n, F, C = a.n, a.features, a.classes
    os.makedirs(a.out_dir, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    centres = rng.normal(size=(C, F)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    blob = rng.uniform(-50, 50, size=(C, 2)).astype(np.float32)
    fpath, epath = os.path.join(a.out_dir, "features.h5"), os.path.join(a.out_dir, "embedding.h5")
    with h5py.File(fpath, "w") as ff, h5py.File(epath, "w") as ef:
        ff.attrs["schema"] = "sieve.features/1"
        ef.attrs["schema"] = "sieve.embedding/1"
        chunk = max(1, min(a.block, (1 << 20) // (4 * F)))  # ~1 MiB chunks of whole rows
        feats = ff.create_dataset("/train/features", (n, F), "f4", chunks=(chunk, F))
        probs = None if a.no_probs else ff.create_dataset("/train/probs", (n, C), "f4")
        flab = ff.create_dataset("/train/labels", (n,), "i4")
        fids = ff.create_dataset("/train/sample_id", (n,), "i8")
        emb = ef.create_dataset("/embedding", (n, 2), "f4")
        elab = ef.create_dataset("/labels", (n,), "i4")
        eids = ef.create_dataset("/sample_id", (n,), "i8")
        for b in range(0, n, a.block):
            e = min(n, b + a.block)
            m = e - b
            true = rng.integers(0, C, size=m)
            flip = rng.random(m) < a.flip
            labels = np.where(flip, (true + rng.integers(1, C, size=m)) % C, true).astype(np.int32)
            ids = (np.arange(b, e, dtype=np.int64) * 7919) % 1000000007 + 17  # scrambled, unique
            x = centres[true] + rng.normal(scale=a.spread / np.sqrt(F), size=(m, F)).astype(np.float32)
            x *= rng.uniform(0.5, 3.0, size=(m, 1)).astype(np.float32)  # cosine ignores scale
            if probs is not None:
                logits = 4.0 * np.eye(C, dtype=np.float32)[true] + rng.normal(size=(m, C)).astype(np.float32)
                p = np.exp(logits - logits.max(axis=1, keepdims=True))
                p /= p.sum(axis=1, keepdims=True)
                probs[b:e] = p.astype(np.float32)
            y = blob[true] + rng.normal(scale=3.0, size=(m, 2)).astype(np.float32)
            feats[b:e] = x
            flab[b:e] = labels
            fids[b:e] = ids
            emb[b:e] = y
            elab[b:e] = labels
            eids[b:e] = ids
    print(f"wrote {fpath} and {epath}: {n} samples, {F} features, {C} classes")


if __name__ == "__main__":
    main()
