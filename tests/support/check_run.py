#!/usr/bin/python3
"""Check a finished pipeline run directory the way a user's own scripts would: with h5py
and json only, no Sieve code. Usage: check_run.py RUN_DIR [--sweep-runs N]
Exits non-zero with a message naming the first thing that is wrong."""
import glob
import json
import os
import sys

import h5py
import numpy as np


def fail(msg):
    print(f"check_run: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def attr_str(f, name):
    v = f.attrs[name]
    return v.decode() if isinstance(v, bytes) else str(v)


def main():
    run = sys.argv[1]
    want_runs = int(sys.argv[sys.argv.index("--sweep-runs") + 1]) if "--sweep-runs" in sys.argv else None
    files = {
        "dataset.h5": "sieve.dataset/1",
        "pretrain/model.h5": "sieve.model/1",
        "features.h5": "sieve.features/1",
        "embedding.h5": "sieve.embedding/1",
        "filter.h5": "sieve.filter/1",
    }
    opened = {}
    for rel, schema in files.items():
        path = os.path.join(run, rel)
        if not os.path.exists(path):
            fail(f"{path} missing")
        f = h5py.File(path, "r")
        if attr_str(f, "schema") != schema:
            fail(f"{path}: schema {attr_str(f, 'schema')!r}, expected {schema!r}")
        if "config" not in f.attrs or "run:" not in attr_str(f, "config"):
            fail(f"{path}: resolved config attribute missing")
        opened[rel] = f
    ds = opened["dataset.h5"]
    n = ds["/train/labels"].shape[0]
    ids = ds["/train/sample_id"][:]
    feats = opened["features.h5"]["/train/features"]
    if feats.shape[0] != n:
        fail(f"features has {feats.shape[0]} rows, dataset {n}")
    if not np.all(np.isfinite(feats[:])):
        fail("features contain NaN/Inf")
    emb = opened["embedding.h5"]
    if emb["/embedding"].shape != (n, 2):
        fail(f"embedding shape {emb['/embedding'].shape}, expected ({n}, 2)")
    flt = opened["filter.h5"]
    for name in ("features.h5", "embedding.h5", "filter.h5"):
        f = opened[name]
        sid = f["/train/sample_id"][:] if "/train/sample_id" in f else f["/sample_id"][:]
        if not np.array_equal(np.sort(sid), np.sort(ids)):
            fail(f"{name}: sample ids do not match the dataset's")
    keep = flt["/keep"][:]
    rkeep = flt["/random_keep"][:]
    removed = int((keep == 0).sum())
    if removed != int((rkeep == 0).sum()):
        fail(f"random control removes {(rkeep == 0).sum()} samples, the filter {removed}")
    prec = flt.attrs.get("noise_precision")
    print(f"check_run: {n} train samples, filter removed {removed}"
          + (f", noise precision {float(prec):.2f}" if prec is not None else ""))
    results = sorted(glob.glob(os.path.join(run, "sweep", "run-*", "result.json")))
    if want_runs is not None and len(results) != want_runs:
        fail(f"{len(results)} sweep results, expected {want_runs}")
    arms = set()
    for r in results:
        rec = json.load(open(r))
        for key in ("final_test_acc", "global_batch", "arm"):
            if key not in rec:
                fail(f"{r}: no '{key}'")
        if not 0.0 <= float(rec["final_test_acc"]) <= 1.0:
            fail(f"{r}: final_test_acc {rec['final_test_acc']} outside [0,1]")
        arms.add(rec["arm"])
    if results and arms != {"full", "filtered", "random"}:
        fail(f"sweep arms {sorted(arms)}, expected full/filtered/random")
    index = os.path.join(run, "report", "index.html")
    if not os.path.exists(index):
        fail(f"{index} missing")
    html = open(index).read()
    import re
    for src in re.findall(r'(?:src|href)="([^"#:]+)"', html):
        p = os.path.join(run, "report", src)
        if not os.path.exists(p) or os.path.getsize(p) == 0:
            fail(f"report references {src}, which is missing or empty")
    print(f"check_run: OK ({len(results)} sweep runs, report {index})")


main()
